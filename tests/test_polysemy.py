"""polysemy.py: the English sense pairs on a minibert model beside the MiniLM stand-in, and the
per-model means of the same-sense and different-sense pairs."""

import re
import shutil

import pytest
import torch
import torch.nn.functional as F

import polysemy
import train_mlm
from minibert import BertConfig, BertModel, load_tokenizer
from minibert.run.exercises import word_vector

from conftest import refusal


def pretrain(out, corpus, *extra):
    """A 2-step train_mlm.py run on the grammar corpus: a run folder, as `make run` writes."""
    train_mlm.main(["--corpus", str(corpus), "--data-root", str(out.parent / "cache"), "--out", str(out),
                    "--layers", "1", "--hidden", "32", "--heads", "2", "--vocab-size", "160", "--seq-len", "32",
                    "--batch-size", "8", "--lr", "1e-3", "--max-steps", "2", "--no-progress", *extra])
    return out


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, corpus):
    """Checkpoints at steps 1 and 2: the newest is the one used."""
    return pretrain(tmp_path_factory.mktemp("polysemy") / "mlm-en", corpus, "--save-every", "1", "--keep", "2")


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory, corpus):
    """The MiniLM stand-in: the checkpoint of another run (another seed), so its rows differ."""
    run = pretrain(tmp_path_factory.mktemp("polysemy") / "other", corpus, "--seed", "1", "--save-every", "2")
    return run / "checkpoints" / "step-000002"


def summary_line(out: str, model: str, language: str) -> tuple[float, int, float, int, float]:
    """(same, n same, different, n different, gap) from the summary line polysemy.py printed."""
    m = re.search(rf"^{re.escape(model)} +{language} +same (\S+) \((\d+) pairs?\) +different (\S+) \((\d+) pairs?\) "
                  rf"+gap (\S+)$", out, re.M)
    assert m, f"no summary line for {model} {language} in:\n{out}"
    return float(m[1]), int(m[2]), float(m[3]), int(m[4]), float(m[5])


def test_sense_means_are_the_means_of_the_same_and_different_rows():
    """Rows of another word ("other word, same kind") are in neither mean. (float64 means of
    3 numbers: within 1e-15, inside pytest.approx's rel 1e-6; the other word's row would move a
    mean by 0.1 or more.)"""
    rows = [{"sense": s, "contextual": c} for s, c in
            [("same", 0.9), ("different", 0.5), ("same", 0.7), ("different", 0.3), ("other word, same kind", 0.2),
             ("different", 0.1)]]
    m = polysemy.sense_means(rows)
    assert m == pytest.approx({"same": 0.8, "n_same": 2, "different": 0.3, "n_different": 3, "gap": 0.5})


def test_english_pairs_run_on_a_run_folders_newest_checkpoint_and_the_summary_is_their_mean(stand_in, run_folder,
                                                                                              tmp_path, capsys,
                                                                                              monkeypatch):
    """--checkpoint RUN: the English pairs run on the run's newest checkpoint (every row checked by
    hand against word_vector on that checkpoint, not on the older one) beside the MiniLM stand-in
    (another tiny model); each model's printed same-sense and different-sense means are the means
    of its own rows of that sense, computed here from the rows: printed with 3 decimals, so within
    5e-4 (the gap, printed from the unrounded means or the rounded ones, within 1e-3). Each row's
    cosine is word_vector's on the same checkpoint, the same calls (the vectors bit for bit), but
    F.cosine_similarity on (1, C) rows there and on (C,) vectors here, which may sum in other
    orders: the 32-term dot product and the two norms move cos <= 1 by <= (32 + 16 + 16) u = 3.8e-6,
    abs 5e-6; step 1's checkpoint differs by more than 1e-4, the other model by more than 1e-2."""
    monkeypatch.chdir(tmp_path)  # no runs/mlm-zh here: the Chinese rows are MiniLM's alone
    rows = polysemy.main(["--minilm", str(stand_in), "--checkpoint", str(run_folder), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    name = "minibert-en (step-000002)"
    assert "no English minibert checkpoint" not in out
    for model in ("MiniLM", name):
        english = [r for r in rows if r["model"] == model and r["a"] in polysemy.ENGLISH_ALL]
        assert [(r["a"], r["b"], r["sense"]) for r in english] == polysemy.ENGLISH_ALL_PAIRS
        same = [r["contextual"] for r in english if r["sense"] == "same"]
        different = [r["contextual"] for r in english if r["sense"] == "different"]
        other = [r["contextual"] for r in english if r["sense"] not in ("same", "different")]
        assert len(same) == 10 and len(different) == 11 and len(other) == 1
        want = (sum(same) / len(same), sum(different) / len(different))
        got = summary_line(out, model, "English")
        assert got[:4] == pytest.approx((want[0], 10, want[1], 11), abs=5e-4)
        assert got[4] == pytest.approx(want[0] - want[1], abs=1e-3)
        # counting the other word's row in a mean would move it by more than twice the tolerance above
        with_other = (sum(same) + other[0]) / (len(same) + 1), (sum(different) + other[0]) / (len(different) + 1)
        assert abs(with_other[0] - want[0]) > 1e-3 and abs(with_other[1] - want[1]) > 1e-3, (model, want, other)
    by_hand = {}  # step: the cosine of every English pair, from word_vector on that checkpoint
    for step in ("step-000001", "step-000002"):
        ckpt = run_folder / "checkpoints" / step
        model, tok = BertModel.from_pretrained(ckpt), load_tokenizer(ckpt)
        vector = {k: word_vector(model, tok, *v) for k, v in polysemy.ENGLISH_ALL.items()}
        by_hand[step] = [F.cosine_similarity(vector[a], vector[b], dim=0).item()
                         for a, b, _ in polysemy.ENGLISH_ALL_PAIRS]
    ours = [r["contextual"] for r in rows if r["model"] == name]
    theirs = [r["contextual"] for r in rows if r["model"] == "MiniLM" and r["a"] in polysemy.ENGLISH_ALL]
    assert ours == pytest.approx(by_hand["step-000002"], abs=5e-6)
    assert max(abs(x - y) for x, y in zip(by_hand["step-000001"], ours)) > 1e-4, "step 1 must differ from step 2"
    assert max(abs(x - y) for x, y in zip(theirs, ours)) > 1e-2, "the two models must differ"


def test_a_missing_default_checkpoint_is_one_note_naming_make_run(setup, tmp_path, capsys, monkeypatch):
    """Without --checkpoint and --zh-checkpoint, their defaults (runs/mlm-en, runs/mlm-zh) are
    looked for and, before `make run`, missing: a note each, and MiniLM's rows alone."""
    monkeypatch.chdir(tmp_path)
    rows = polysemy.main(["--minilm", str(setup / "ckpt"), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    notes = [line for line in out.splitlines() if "no English minibert checkpoint" in line]
    assert len(notes) == 1 and "runs/mlm-en" in notes[0] and "`make run`" in notes[0], out
    assert sum("no Chinese minibert checkpoint at runs/mlm-zh" in line for line in out.splitlines()) == 1, out
    assert {r["model"] for r in rows} == {"MiniLM"}
    assert "minibert-en" not in out
    summary_line(out, "MiniLM", "English")


@pytest.mark.parametrize("flag", ["--checkpoint", "--zh-checkpoint"])
def test_a_checkpoint_given_that_is_not_there_is_one_line_before_minilm_loads(tmp_path, capsys, flag):
    """A mistyped folder is not skipped with a note (the run would seem to have no model to
    compare): one line naming the flag, said before MiniLM is looked for (--minilm here is a
    folder that does not exist either, so reaching it would be another message)."""
    with refusal(f"^error: {flag} \\S*typo: no checkpoint there \\(no config.json\\)"):
        polysemy.main(["--minilm", str(tmp_path / "no-minilm"), flag, str(tmp_path / "typo"),
                       "--out", str(tmp_path / "out")])
    assert capsys.readouterr().out == "" and not (tmp_path / "out").exists()


def test_a_damaged_checkpoint_is_one_line(stand_in, run_folder, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(run_folder / "checkpoints" / "step-000002", damaged)
    (damaged / "model.safetensors").write_bytes(b"12345678")
    with refusal("cannot load --checkpoint .*not a readable safetensors file"):
        polysemy.main(["--minilm", str(stand_in), "--checkpoint", str(damaged), "--out", str(tmp_path / "out")])


@pytest.mark.parametrize("flag,trained", [("--zh-checkpoint", "en"), ("--zh-checkpoint", "en-large"),
                                          ("--checkpoint", "zh")])
def test_a_checkpoint_pretrained_on_the_other_language_is_refused(stand_in, run_folder, tmp_path, capsys, flag,
                                                                  trained):
    """A run's checkpoint whose training_state.pt says it was pretrained on an English corpus, given
    as --zh-checkpoint (or a Chinese one as --checkpoint): the old code compared its vectors of
    [UNK] pieces and labelled the rows minibert-zh. One line naming the corpus, before any table.
    A run on a text of one's own (the tests' runs) has no language to check and is used."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(run_folder / "checkpoints" / "step-000002", ckpt)
    state = torch.load(ckpt / "training_state.pt", weights_only=True)
    state["corpus_name"] = trained
    torch.save(state, ckpt / "training_state.pt")
    with refusal(rf"^error: {flag} \S+ckpt was pretrained on the corpus '{trained}' \(its training_state.pt\), not on "):
        polysemy.main(["--minilm", str(stand_in), flag, str(ckpt), "--out", str(tmp_path / "out")])
    assert capsys.readouterr().out == "" and not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", ["out-is-a-file", "out-under-a-file", "minilm-missing", "zh-damaged",
                                  "checkpoint-too-short", "minilm-too-short"])
def test_what_stops_polysemy_is_its_only_line(stand_in, run_folder, tmp_path, capsys, monkeypatch, case):
    """--out a file or under one: refused before any model loads (the old code printed every
    table first); a --minilm folder that does not exist, or a damaged --zh-checkpoint, with the
    default English checkpoint missing: the refusal is the only line (the old code printed the
    missing default's note first). A model of 16 positions, fewer than the longest sense-pair
    sentence needs, as --checkpoint or --minilm: one line (the old code stopped in a traceback)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("mine\n")
    damaged = tmp_path / "damaged"
    shutil.copytree(run_folder / "checkpoints" / "step-000002", damaged)
    (damaged / "model.safetensors").write_bytes(b"12345678")
    tok = load_tokenizer(str(run_folder / "checkpoints" / "step-000002"))
    BertModel(BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=16)).save_pretrained(tmp_path / "short", tokenizer=tok)
    too_short = r"the model reads at most 16 positions, and a sentence of the English sense pairs is \d+ tokens long"
    argv, pattern = {
        "checkpoint-too-short": (["--checkpoint", "short"], rf"^error: --checkpoint short: {too_short}"),
        "minilm-too-short": (["--minilm", "short"], rf"^error: --minilm short: {too_short}"),
        "out-is-a-file": (["--out", "file"], r"^error: --out file: a file, not a folder; give a folder$"),
        "out-under-a-file": (["--out", "file/pictures"], r"^error: --out file/pictures: \S+/file is a file, not a folder"),
        "minilm-missing": (["--minilm", "no-minilm"], r"^error: cannot load --minilm no-minilm"),
        "zh-damaged": (["--zh-checkpoint", str(damaged)], r"^error: cannot load --zh-checkpoint \S+damaged"),
    }[case]
    minilm = [] if case.startswith("minilm") else ["--minilm", str(stand_in)]
    with refusal(pattern):
        polysemy.main(minilm + argv + ([] if "--out" in argv else ["--out", "out"]))
    assert capsys.readouterr().out == "" and not (tmp_path / "out").exists()
