"""Bad inputs through the real commands, table by table: each is ONE line (a non-zero exit),
said before any work, and nothing outside the run changes; nothing a run did not make is ever
deleted or written; no checkpoint is trusted before it is checked.

Every case runs in its own sandbox folder (tmp_path), snapshotted before and after: "nothing
changed" is byte-for-byte over every file in it. The runs are tiny (1 layer, hidden 32, a
160-word vocabulary, 2 steps)."""

import errno
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import finetune
import plot_metrics
import polysemy
import train_mlm
from minibert import BertConfig, BertForSequenceClassification, CheckpointError
from minibert.checkpoint import read_header, save_file
from minibert.files import append_line, write_file
from minibert.run.folders import LOCK_FILE, checkpoints, metric_records

from conftest import refusal
from test_faults import pretrain_args
from test_finetune import run as finetune_run

REPO = Path(__file__).resolve().parents[1]


def snapshot(root) -> dict:
    """Every path under `root`: a link's target, or a file's bytes (folders: None)."""
    return {str(p.relative_to(root)): (os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def one_line_refusal(capsys, command, pattern: str) -> None:
    """Run `command`: it must refuse in ONE line matching `pattern` and print no traceback:
    a `die` (exit status 1, the only line on standard error, starting "error: ") or argparse's
    (exit status 2, one "error: ... (see PROG --help)" line): conftest.refusal_line."""
    with refusal(pattern):
        command()


@pytest.fixture(scope="module")
def base(tmp_path_factory, corpus, setup):
    """A finished 2-step pretraining run (checkpoints at steps 1 and 2), its data cache, and a
    finished 1-epoch fine-tuning run (`cls`, with best/)."""
    root = tmp_path_factory.mktemp("refusals")
    train_mlm.main(pretrain_args(root / "pre", corpus, root / "cache", "--max-steps", "2", "--save-every", "1",
                                 "--keep", "5"))
    finetune_run(setup, root / "cls", "--epochs", "1")
    return root


def copy(base, name, sandbox):
    shutil.copytree(base / name, sandbox / name, ignore=shutil.ignore_patterns(LOCK_FILE))
    return sandbox / name


def mlm(out, corpus, base, *extra):
    return lambda: train_mlm.main(pretrain_args(out, corpus, base / "cache", *extra))


def ft(setup, out, *extra):
    return lambda: finetune_run(setup, out, *extra)


# ---- A. nothing outside a run is deleted or written ---------------------------------------


@pytest.mark.parametrize("run_json", [None, '{"kind": "sweep"}', '{"kind": "pretrai'],
                         ids=["none", "another-tools", "cut-short"])
def test_a_folder_without_run_json_is_other_files_even_with_a_checkpoints_folder(base, corpus, setup, tmp_path,
                                                                                 capsys, run_json):
    """proj/ holds checkpoints/ and src/thesis.tex, and no run.json, or one that names no kind
    of minibert run (another tool's, or one cut short): it is not a run. Both scripts, with
    --overwrite or --resume, refuse it in one line and nothing changes; a run.json that names no
    kind is named as such."""
    proj = tmp_path / "proj"
    (proj / "checkpoints").mkdir(parents=True)
    (proj / "src").mkdir()
    (proj / "src" / "thesis.tex").write_text("x")
    (proj / "metrics.jsonl").write_text('{"step": 9}\n')
    if run_json is not None:
        (proj / "run.json").write_text(run_json)
    before = snapshot(tmp_path)
    for command in (mlm(proj, corpus, base, "--overwrite"), mlm(proj, corpus, base, "--resume"),
                    ft(setup, proj, "--overwrite"), ft(setup, proj)):
        one_line_refusal(capsys, command, "already holds other files; choose another --out" if run_json is None
                         else "its run.json does not say which run wrote the folder")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("argv,prog", [(["data/prepare.py", "--bogus"], "data/prepare.py"),
                                       (["-m", "experiments.compare", "--bogus"], "python -m experiments.compare")])
def test_a_wrong_flag_names_the_command_as_it_is_run(argv, prog):
    """A wrong flag of data/prepare.py or `python -m experiments.compare`, in a process of its own:
    the line's advice names a command that runs (the old line said "see prepare.py --help" and "see
    compare.py --help", which fail from the repository's folder)."""
    r = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.endswith(f"(see {prog} --help)\n") and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("name,kind", [("pre", "pretraining"), ("cls", "fine-tuning")])
def test_a_run_whose_run_json_was_deleted_is_named_as_such(base, corpus, setup, tmp_path, capsys, name, kind):
    """A pretraining or fine-tuning run with its run.json deleted: still not taken for a run (only
    run.json says so), but the line says what it looks like and how to put the record back (the old
    line said "already holds other files; choose another --out", and the user could not tell how
    to resume it); nothing is changed."""
    out = copy(base, name, tmp_path)
    (out / "run.json").unlink()
    before = snapshot(tmp_path)
    command = mlm(out, corpus, base, "--resume", "--max-steps", "3") if kind == "pretraining" else ft(setup, out)
    one_line_refusal(capsys, command, rf"--out {re.escape(str(out))} has no run.json, though all it holds is what a "
                                      rf'{kind} run writes: if it is one, put {{"kind": "{kind}"}} in \S+run.json')
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("script,extra,pattern", [
    ("finetune", ["--lora-rank", "4", "--lora-modules", "attention.qry"], r"--lora-modules attention.qry: no Linear"),
    ("finetune", ["--checkpoint", "nowhere"], r"--checkpoint nowhere: no such folder.*python data/prepare\.py --minilm"),
    ("mlm", ["--hidden", "100000000", "--heads", "1"], r"training it needs about .* GiB, more than"),
    ("mlm", ["--layers", "100000", "--hidden", "4096"], r"training it needs about .* GiB, more than"),
], ids=["lora-targets", "missing-checkpoint", "huge-hidden", "huge-layers"])
def test_every_check_runs_before_overwrite_removes_the_old_run(base, corpus, setup, tmp_path, capsys, script,
                                                                 extra, pattern):
    """--overwrite with a check that fails later (LoRA targets that match nothing, a missing
    checkpoint, sizes that cannot be allocated): one line, and the old run is whole."""
    out = copy(base, "cls" if script == "finetune" else "pre", tmp_path)
    before = snapshot(tmp_path)
    command = ft(setup, out, "--overwrite", *extra) if script == "finetune" else \
        mlm(out, corpus, base, "--overwrite", "--max-steps", "2", *extra)
    one_line_refusal(capsys, command, pattern)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["fill_mask", "attention", "finetune"])
def test_a_file_given_as_checkpoint_is_named_a_file(setup, tmp_path, capsys, command):
    """--checkpoint naming a file (a labelled .csv, a checkpoint's config.json): one line saying it is a
    file, not a folder (the old line said "no such folder" of a file that is there)."""
    import attention
    import fill_mask
    given = tmp_path / "ok.csv"
    given.write_text("text,label\n")
    run = {"fill_mask": lambda: fill_mask.main(["--checkpoint", str(given), "the [MASK] ."]),
           "attention": lambda: attention.main(["--checkpoint", str(given), "--out", str(tmp_path / "a.png")]),
           "finetune": ft(setup, tmp_path / "out", "--checkpoint", str(given))}[command]
    one_line_refusal(capsys, run, rf"--checkpoint {re.escape(str(given))}: a file, not a folder")


@pytest.mark.parametrize("what,said", [("pipe", "a named pipe, not a file"), ("loop", "a symbolic link that leads to "
                                                                                      r"nothing \(its target is missing, or a loop\)")])
def test_a_data_that_is_no_file_is_named_as_what_it_is(setup, tmp_path, capsys, what, said):
    """--data a named pipe (mine.csv) or a symbolic link in a loop: one line naming what it is (the old
    line said "no such file or folder" of what is there); the pipe is never opened (it would wait)."""
    data = tmp_path / "mine.csv"
    if what == "pipe":
        os.mkfifo(data)
    else:
        (tmp_path / "other").symlink_to(data)
        data.symlink_to(tmp_path / "other")
    one_line_refusal(capsys, ft(setup, tmp_path / "out", "--data", str(data)), rf"--data \S+mine.csv: {said}")
    assert not (tmp_path / "out").exists()


def test_checkpoints_are_step_and_digits_ordered_by_number(base, corpus, tmp_path, capsys):
    """step-1000000 is newer than step-999800; a copied step-best, a step-12a, names not written
    as save_checkpoint writes them (step-7, step-0000005, step-3) and a file are not
    checkpoints: never resumed from, pruned or deleted. A resume takes step 2."""
    out = copy(base, "pre", tmp_path)
    ckpts = out / "checkpoints"
    for name in ("step-999800", "step-1000000"):
        (tmp_path / "fake" / name).mkdir(parents=True)
    assert [os.path.basename(c) for c in checkpoints(str(tmp_path / "fake"))] == []  # no checkpoints/ folder
    (tmp_path / "fake" / "checkpoints").mkdir()
    for name in ("step-999800", "step-1000000", "step-best", "step-12a", "step-7", "step-0000005"):
        (tmp_path / "fake" / "checkpoints" / name).mkdir()
    (tmp_path / "fake" / "checkpoints" / "step-000009").write_text("a file")
    assert [os.path.basename(c) for c in checkpoints(str(tmp_path / "fake"))] == ["step-999800", "step-1000000"]
    shutil.copytree(ckpts / "step-000002", ckpts / "step-best")
    (ckpts / "step-3").write_text("not a folder")
    train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "3", "--keep", "1"))
    assert "resumed at step 2 from " + str(ckpts / "step-000002") in capsys.readouterr().out
    assert sorted(os.listdir(ckpts)) == ["latest", "step-000003", "step-3", "step-best"]


@pytest.mark.parametrize("name", ["metrics.jsonl", LOCK_FILE, "summary.json", "checkpoints/latest",
                                  "checkpoints/step-000002/training_state.pt", "checkpoints/step-000001"])
def test_a_symlink_in_a_run_folder_is_never_written_through(base, corpus, tmp_path, capsys, name):
    """A downloaded run folder whose metrics.jsonl, .lock, summary.json, checkpoints/latest, a
    file of a checkpoint or a whole checkpoint folder is a link to one elsewhere: --resume
    refuses it in one line, and what it points to is unchanged."""
    out = copy(base, "pre", tmp_path)
    victim = tmp_path / "victim"
    link = out / name
    if link.exists():
        shutil.move(link, victim)  # the real file (or folder) now lies outside the run
    else:
        victim.write_text("precious\n")
    link.symlink_to(victim)
    before = snapshot(tmp_path)
    one_line_refusal(capsys, mlm(out, corpus, base, "--resume", "--max-steps", "3"),
                     "holds a symbolic link .*never writes through one")
    assert snapshot(tmp_path) == before


def test_the_writers_refuse_a_link_and_leave_no_temporary_file(tmp_path):
    """append_line never appends through a link; write_file replaces a link (not its target),
    and a link planted at its temporary name is not followed."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "log").symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        append_line(str(tmp_path / "log"), "x")
    (tmp_path / "out.json").symlink_to(victim)
    (tmp_path / f"out.json.tmp{os.getpid()}").symlink_to(victim)
    write_file(str(tmp_path / "out.json"), b"{}")
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "out.json").is_symlink() and (tmp_path / "out.json").read_bytes() == b"{}"
    assert sorted(os.listdir(tmp_path)) == ["log", "out.json", "victim.txt"]


@pytest.mark.parametrize("left", [("best.old",), ("best.old", "best.tmp")])
def test_best_is_recovered_after_a_kill_between_the_renames_of_export(base, setup, tmp_path, capsys, left):
    """export renames best -> best.old, then best.tmp -> best: a kill in between leaves no best/.
    The next predict (or fine-tuning start) puts the newest complete one back."""
    out = copy(base, "cls", tmp_path)
    for name in left:
        shutil.copytree(out / "best", out / name)
    shutil.rmtree(out / "best")
    (tmp_path / "s.txt").write_text("a good film\n")
    finetune.main(["predict", "--model", str(out / "best"), "--file", str(tmp_path / "s.txt")])
    assert capsys.readouterr().out.count("\t") == 2
    assert (out / "best" / "model.safetensors").is_file()


# ---- B. no checkpoint is trusted before it is checked ---------------------------------------


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))


@pytest.mark.parametrize("changes,pattern", [
    ({"num_hidden_layers": 100000}, r"config.json says 100000 layers, the weights hold 2"),
    ({"vocab_size": 10 ** 13}, r"word_embeddings.weight: config.json says \(10000000000000, 32\)"),
    ({"intermediate_size": 10 ** 9}, r"intermediate.dense.weight: config.json says \(1000000000, 32\)"),
], ids=["layers", "vocab", "intermediate"])
def test_config_sizes_are_checked_against_the_header_before_the_model_is_built(base, tmp_path, capsys, changes,
                                                                              pattern):
    """An edited config.json is refused from the safetensors header alone: predict stops in one
    line, at once, instead of allocating until the machine runs out of memory."""
    best = copy(base, "cls", tmp_path) / "best"
    edit_config(best, **changes)
    (tmp_path / "s.txt").write_text("a good film\n")
    one_line_refusal(capsys, lambda: finetune.main(["predict", "--model", str(best), "--file",
                                                     str(tmp_path / "s.txt")]), pattern)


@pytest.mark.parametrize("shard", ["../outside.safetensors", "/etc/passwd", "sub/x.safetensors", ".."])
def test_a_shard_is_a_plain_file_name_inside_the_folder(base, tmp_path, shard):
    best = copy(base, "cls", tmp_path) / "best"
    shutil.copy(best / "model.safetensors", tmp_path / "outside.safetensors")
    (best / "model.safetensors").unlink()
    (best / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": shard}}))
    with pytest.raises(CheckpointError, match="not a file name inside the checkpoint folder"):
        BertForSequenceClassification.from_pretrained(best)


def rewrite_weights(ckpt, change):
    """Rewrite a checkpoint's model.safetensors with `change(tensors)` applied, keeping its metadata."""
    from safetensors.torch import load_file
    tensors = {k: v.clone() for k, v in load_file(ckpt / "model.safetensors").items()}  # not the mapped file
    metadata = read_header(str(ckpt / "model.safetensors"))[1]
    change(tensors)
    save_file(tensors, str(ckpt / "model.safetensors"), metadata=metadata)


@pytest.mark.parametrize("damage,note", [
    ("inf", r"holds weights that are not finite (cls.predictions.bias)"),
    ("swapped", "holds the weights of step 1 beside the training state of step 2"),
])
def test_resume_skips_a_checkpoint_with_bad_or_swapped_weights(base, corpus, tmp_path, capsys, damage, note):
    """The newest checkpoint's weights are not finite, or are step 1's beside step 2's training
    state: --resume says so in one note and resumes from step 1."""
    out = copy(base, "pre", tmp_path)
    newest = out / "checkpoints" / "step-000002"
    if damage == "inf":
        rewrite_weights(newest, lambda t: t["cls.predictions.bias"].fill_(float("inf")))
    else:
        shutil.copy(out / "checkpoints" / "step-000001" / "model.safetensors", newest / "model.safetensors")
    train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "2"))
    captured = capsys.readouterr()
    assert f"note: {newest} {note}; skipped, resuming from an earlier checkpoint" in captured.err
    assert "resumed at step 1" in captured.out


def test_a_tokenizer_that_is_not_the_models_is_refused(base, tmp_path, capsys):
    """config.json records the sha256 of the tokenizer.json saved beside it: another tokenizer
    of the same size (two words swapped) is refused in one line, by predict and by fine-tuning;
    the digest is a key BertConfig reads without a warning."""
    best = copy(base, "cls", tmp_path) / "best"
    assert len(json.loads((best / "config.json").read_text())["tokenizer_sha256"]) == 64
    tok = json.loads((best / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    a, b = sorted(vocab)[10:12]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (best / "tokenizer.json").write_text(json.dumps(tok))
    (tmp_path / "s.txt").write_text("a good film\n")
    one_line_refusal(capsys, lambda: finetune.main(["predict", "--model", str(best), "--file", str(tmp_path / "s.txt")]),
                     "is not the tokenizer its model was saved with")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BertConfig.load(best)


def test_the_bag_of_words_baseline_can_never_lose_the_results(setup, tmp_path, capsys, monkeypatch):
    """Too many weights (here: a bound of 10): bag-of-words is skipped with a note; a baseline
    that crashes (out of memory) is skipped too. Either way summary.json holds the model's scores."""
    monkeypatch.setattr(finetune, "MAX_WEIGHTS", 10)
    finetune_run(setup, tmp_path / "a", "--epochs", "1")
    assert "note: bag-of-words skipped" in capsys.readouterr().err
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["bow_test_acc"] is None and summary["test_acc"] > 0
    monkeypatch.undo()

    def crash(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(finetune.BagOfWords, "tuned", crash)
    finetune_run(setup, tmp_path / "b", "--epochs", "1")
    assert "note: bag-of-words skipped: DefaultCPUAllocator" in capsys.readouterr().err
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["bow_l2"] is None


# ---- C. one line for every user error, said before the work ---------------------------------


def fill_disk(monkeypatch, module, name: str):
    """The files named `name*` that `module` writes fail half-way, as on a full disk."""
    real = module.write_file

    def writer(path, data):
        if not os.path.basename(path).startswith(name):
            return real(path, data)

        def half_then_full(tmp):
            with open(tmp, "wb") as f:
                f.write(b"partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), tmp)
        return real(path, half_then_full)

    monkeypatch.setattr(module, "write_file", writer)


@pytest.mark.parametrize("module,name,script,pattern", [
    ("minibert.run.folders", "training_state.pt", "mlm",
     r"cannot write the checkpoint of step 1 \(No space left on device\); stopping \(no checkpoint was written\)"),
    ("minibert.run.corpus", "tokenizer-", "mlm", r"the data cache .*: No space left on device; free some space"),
    ("minibert.checkpoint", "tokenizer.json", "finetune", r"cannot write .*best \(No space left on device\)"),
], ids=["training-state", "data-cache-tokenizer", "export-tokenizer"])
def test_a_full_disk_is_one_line_at_every_writer(base, corpus, setup, tmp_path, capsys, monkeypatch, module, name,
                                                 script, pattern):
    """The training state of a checkpoint, the data cache's tokenizer, the tokenizer of best/:
    one line each, and no temporary file or folder is left."""
    import importlib
    fill_disk(monkeypatch, importlib.import_module(module), name)
    cache = tmp_path / "cache"
    shutil.copytree(base / "cache", cache)
    for tokenizer in cache.rglob("tokenizer-*.json"):
        tokenizer.unlink()
    command = ft(setup, tmp_path / "run", "--epochs", "1") if script == "finetune" else \
        lambda: train_mlm.main(pretrain_args(tmp_path / "run", corpus, cache, "--max-steps", "1"))
    one_line_refusal(capsys, command, pattern)
    assert [p for p in tmp_path.rglob("*") if ".tmp" in p.name] == []


@pytest.mark.parametrize("script,extra,pattern", [
    ("mlm", ["--seq-len", "3"], r"--seq-len must be at least 5"),
    ("mlm", ["--short-seq-len", "12"], r"--short-seq-len must be at least 5 and a divisor of --seq-len 32 below it"),
    ("mlm", ["--short-seq-len", "32"], r"--short-seq-len must be .* got 32 \(or turn the short phase off"),
    ("mlm", ["--short-fraction", "1"], r"--short-fraction must be in \[0, 1\), got 1.0"),
    ("mlm", ["--seq-len", "16"], r"--short-seq-len must be .* and its default, the largest divisor of --seq-len up "
                                 r"to 16 and a quarter of it, or a quarter \(4\), is not: give one \(or turn"),
    ("mlm", ["--seed", "-1"], r"--seed must be in \[0, 2\^32\)"),
    ("mlm", ["--seed", str(2 ** 64)], r"--seed must be in"),
    ("finetune", ["--seed", str(2 ** 64)], r"--seed must be in"),
    ("finetune", ["--lora-rank", "4", "--lora-alpha", "nan"], r"--lora-alpha must be a positive number, got nan"),
    ("finetune", ["--lora-rank", "4", "--lora-alpha", "inf"], r"--lora-alpha must be a positive number, got inf"),
    ("finetune", ["--lora-rank", "4", "--lora-modules", "nothing.here"], r"--lora-modules nothing.here: no Linear"),
    ("finetune", ["--lora-alpha", "16"], r"--lora-alpha shapes LoRA adapters, and there are none without --lora-rank"),
    ("finetune", ["--lora-modules", "query"], r"--lora-modules shapes LoRA adapters, and there are none without"),
    ("finetune", ["--valid-fraction", "0"], r"--valid-fraction must be in \(0, 1\): at least one row of each label"),
    ("finetune", ["--batch-size", str(2 ** 62)], rf"--batch-size must be in \[1, 2\^31\), got {2 ** 62}"),
    ("finetune", ["--lora-rank", str(10 ** 11)], rf"^error: --lora-rank {10 ** 11} is above the width of the layers it "
                                                r"adapts \((\d+)\), where an adapter is no longer of low rank: give at "
                                                r"most \1$"),
    ("finetune", ["--lora-rank", str(10 ** 23)], rf"--lora-rank {10 ** 23} is above the width"),
    ("mlm", ["--keep", "0"], r"^error: --keep must be at least 1, got 0 \(see \S+ --help\)$"),
    ("mlm", ["--resume", "--seq-len", "16"], r"a quarter \(4\), is not: give one: --resume keeps the run's own "
                                              r"--seq-len, --short-seq-len and --short-fraction, so give those"),
], ids=["seq-len-3", "short-12", "short-32", "short-fraction-1", "short-default-4", "seed-negative", "seed-huge",
        "ft-seed-huge", "alpha-nan", "alpha-inf", "lora-nothing", "alpha-without-rank", "modules-without-rank",
        "valid-fraction-0", "ft-batch-2^62", "lora-rank-1e11", "lora-rank-1e23", "keep-0-one-line", "resume-seq-len-16"])
def test_bad_flags_are_one_line_before_anything_is_written(base, corpus, setup, tmp_path, capsys, script, extra,
                                                           pattern):
    """Nothing is made: not the run folder, not a data cache."""
    command = mlm(tmp_path / "out", corpus, base, *extra) if script == "mlm" else ft(setup, tmp_path / "out", *extra)
    one_line_refusal(capsys, command, pattern)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("damage", ["tokenizer", "tokens", "tokens-out-of-vocabulary"])
def test_a_damaged_data_cache_is_made_again(base, corpus, tmp_path, capsys, damage):
    """A cached tokenizer or token file cut short (or holding ids outside the vocabulary) is
    derived data: it is made again, and the run goes on."""
    shutil.copytree(base / "cache", tmp_path / "cache")
    if damage == "tokenizer":
        files = list((tmp_path / "cache").rglob("tokenizer-*.json"))
        for f in files:
            f.write_bytes(f.read_bytes()[:50])
    else:
        files = list((tmp_path / "cache").rglob("tokens/*.pt"))
        for f in files:
            if damage == "tokens":
                f.write_bytes(f.read_bytes()[:80])
            else:
                torch.save({"ids": torch.tensor([10 ** 6], dtype=torch.int32), "starts": torch.tensor([0])}, f)
    assert files
    train_mlm.main(pretrain_args(tmp_path / "run", corpus, tmp_path / "cache", "--max-steps", "1"))
    assert "validation: loss" in capsys.readouterr().out


@pytest.mark.parametrize("case,pattern", [
    ("root-is-a-file", r"error: the data cache .*: Not a directory; a part of the path is a file, not a folder"),
    ("file-size-limit", r"error: the data cache .*: File too large; a file-size limit \(ulimit -f\) stopped the write"),
])
def test_the_data_caches_errors_name_their_cause(corpus, tmp_path, case, pattern):
    """Through the real command (a process of its own, for the limit): a --data-root that is a
    file, and a file-size limit of 50 blocks while the corpus is prepared. One line naming the
    cause; no temporary file left in the cache, no run folder made."""
    root = tmp_path / "cache"
    if case == "root-is-a-file":
        root.write_text("not a folder")
    limit = "ulimit -f 50; " if case == "file-size-limit" else ""
    cmd = " ".join([limit, sys.executable, "train_mlm.py", *pretrain_args(tmp_path / "run", corpus, root)])
    r = subprocess.run(["bash", "-c", cmd], cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and re.match(pattern, lines[0]), r.stderr
    assert not (tmp_path / "run").exists()
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


def test_a_missing_split_file_of_the_cache_is_made_again(base, corpus, tmp_path):
    """The prepared validation split removed (its manifest still lists it): the corpus is not
    whole, so it is prepared again from its text, and the run trains."""
    shutil.copytree(base / "cache", tmp_path / "cache")
    (folder,) = [p.parent.parent for p in (tmp_path / "cache").rglob("pretrain/valid.txt")]
    whole = (folder / "pretrain" / "valid.txt").read_bytes()
    (folder / "pretrain" / "valid.txt").unlink()
    shutil.rmtree(folder / "tokens")
    train_mlm.main(pretrain_args(tmp_path / "run", corpus, tmp_path / "cache", "--max-steps", "1"))
    assert (folder / "pretrain" / "valid.txt").read_bytes() == whole and (tmp_path / "run" / "summary.json").is_file()


@pytest.mark.parametrize("argv,pattern", [
    (["missing.jsonl"], "missing.jsonl: no such file"),
    (["."], r"\.: a folder"),
    (["m.jsonl", "--out", "nowhere/loss.png"], r"its folder \S*/nowhere does not exist"),
    (["m.jsonl", "--out", "m.jsonl"], "is the metrics file itself"),
    (["m.jsonl", "--out", "."], "a folder; give a picture's path"),
    (["m.jsonl", "--out", "m.jsonl/loss.png"], r"--out m.jsonl/loss.png: \S*m.jsonl is a file, not a folder \(see "),
    (["fifo"], "fifo: not a file; give the metrics.jsonl"),
    (["empty.jsonl"], r"empty.jsonl holds no loss to draw yet \(no record with a train_loss or valid_loss\)"),
    (["no-loss.jsonl"], r"no-loss.jsonl holds no loss to draw yet"),
], ids=["missing", "folder", "out-in-missing-folder", "out-is-the-log", "out-is-a-folder", "out-under-a-file", "fifo",
        "empty", "no-loss"])
def test_plot_metrics_bad_paths_are_one_line(tmp_path, capsys, monkeypatch, argv, pattern):
    """A bad path, or a metrics file with no loss in it (empty, or a record of another kind and a
    cut line): one line, and nothing written (no empty plot). A named pipe is not a file to read
    (reading it would wait for a writer)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.jsonl").write_text('{"step": 1, "train_loss": 3.0}\n')
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "no-loss.jsonl").write_text('{"step": 1, "lr": 0.1}\n{"step": 2, "train_lo')
    before = snapshot(tmp_path)
    one_line_refusal(capsys, lambda: plot_metrics.main(argv), pattern)
    assert snapshot(tmp_path) == before


def drawn_losses(path) -> tuple[list, list]:
    """The (step, loss) pairs plot_metrics draws: training, validation."""
    records = list(metric_records(path))
    return plot_metrics.series(records, "train_loss"), plot_metrics.series(records, "valid_loss")


def test_plot_metrics_skips_a_line_a_crash_cut(tmp_path):
    (tmp_path / "m.jsonl").write_text('{"step": 1, "train_loss": 3.0}\n{"step": 2, "valid_loss": 2.5}\n{"step": 3, "tr')
    assert drawn_losses(str(tmp_path / "m.jsonl")) == ([(1, 3.0)], [(2, 2.5)])


def test_plot_metrics_notes_the_lines_it_leaves_out(tmp_path, capsys):
    """Five lines that are not blank: two records, a step written as a string, a list, and a line a
    crash cut short. The three that are no record are counted in a one-line note (3 of 5), and the
    two records are drawn; without the note, a hand-edited step would vanish unsaid."""
    (tmp_path / "m.jsonl").write_text('{"step": 1, "train_loss": 3.0}\n{"step": "2", "train_loss": 2.0}\n\n[1, 2]\n'
                                      '{"step": 3, "valid_loss": 2.5}\n{"step": 4, "tr')
    plot_metrics.figure(str(tmp_path / "m.jsonl"))
    assert capsys.readouterr().err.startswith(
        f"note: 3 of the 5 lines of {tmp_path / 'm.jsonl'} are no record (a JSON object with an integer step, each key "
        "once: a line a crash cut short, or one written by hand); they are left out of the plot\nnote: no unigram")
    assert drawn_losses(str(tmp_path / "m.jsonl")) == ([(1, 3.0)], [(3, 2.5)])


def test_polysemy_bad_paths_are_one_line(base, tmp_path, capsys):
    """A missing --minilm, a damaged --zh-checkpoint, an --out that is a file."""
    good = base / "cls" / "best"
    damaged = copy(base, "cls", tmp_path) / "best"
    (damaged / "model.safetensors").write_bytes(b"12345678")
    (tmp_path / "file").write_text("x")
    cases = [(["--minilm", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")], "cannot load --minilm"),
             (["--minilm", str(good), "--zh-checkpoint", str(damaged), "--out", str(tmp_path / "o")],
              "cannot load --zh-checkpoint .*not a readable safetensors file"),
             (["--minilm", str(good), "--out", str(tmp_path / "file")], r"--out \S+file: a file, not a folder")]
    for argv, pattern in cases:
        one_line_refusal(capsys, lambda: polysemy.main(argv), pattern)


def test_exercise_and_compare_refuse_a_damaged_encoder_and_a_file_as_out(base, tmp_path, capsys, monkeypatch):
    import exercise
    from experiments import compare, harness

    damaged = copy(base, "cls", tmp_path) / "best"
    edit_config(damaged, num_hidden_layers=7)
    monkeypatch.setattr(exercise, "fetch_minilm", lambda: str(damaged))
    one_line_refusal(capsys, lambda: exercise.main([]), "config.json says 7 layers.*delete data/cache/minilm")
    (tmp_path / "file").write_text("x")
    one_line_refusal(capsys, lambda: compare.main(["methods", "--quick", "--out", str(tmp_path / "file"),
                                                   "--encoders", str(damaged)]), "cannot make --out")
    one_line_refusal(capsys, lambda: compare.main(["methods", "--quick", "--out", str(tmp_path / "new"),
                                                   "--encoders", str(damaged)]), "config.json says 7 layers")
    assert not (tmp_path / "new").exists()  # a refused encoder leaves no --out behind
    task = harness.Task.load(8, 4, 4)
    one_line_refusal(capsys, lambda: harness.Encoder.open(str(damaged), task),
                     f"--encoders {re.escape(str(damaged))}: .*config.json says 7 layers")


def test_resume_names_what_changed(base, corpus, setup, tmp_path, capsys):
    """Each message names the real cause: a corpus file whose text changed under the same path is
    refused for its text ("its text: text-... then, text-... now"), not for a path that did not
    change; --no-fused-adamw on a resume is announced and applied (the optimizer's groups run the
    foreach kernel); a pretraining run with no checkpoint yet, given to fine-tuning, is said to be
    one, not to lack tokenizer.json."""
    out = copy(base, "pre", tmp_path)
    changed = tmp_path / "corpus.txt"
    shutil.copy(corpus, changed)
    train_mlm.main(pretrain_args(out, changed, base / "cache", "--resume", "--max-steps", "3", "--no-fused-adamw"))
    assert "--fused-adamw True -> False" in capsys.readouterr().out
    groups = torch.load(out / "checkpoints" / "step-000003" / "training_state.pt", weights_only=True)
    assert [(g["fused"], g["foreach"]) for g in groups["optimizer"]["param_groups"]] == [(None, True)] * 2
    with open(changed, "a") as f:
        f.write("one more line of text.\n")
    one_line_refusal(capsys, mlm(out, changed, base, "--resume", "--max-steps", "4"),
                     r"--corpus \(its text: text-\w+ then, text-\w+ now\) differ")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "run.json").write_text('{"kind": "pretraining"}')
    one_line_refusal(capsys, lambda: finetune_run(setup, tmp_path / "o", "--checkpoint", str(empty)),
                     "is a pretraining run with no checkpoint yet")


@pytest.mark.parametrize("text,pattern", [
    ("a fine film,pos\nbad,neg\n", r"train.csv:1: the header row must name the comma-separated columns text and label"),
    ("text;label\na fine film;pos\n", r"train.csv:1: the header row must name .*found \['text;label'\]"),
    ('text,label\n"a fine\nfilm",pos\n\n"",neg\n', r"train.csv:5: empty text"),
    ('text,label\n"a fine\nfilm",pos\nbad\n', r"train.csv:4: missing label"),
    ("", r"train.csv is empty: give a header row text,label"),
], ids=["no-header", "semicolons", "line-after-a-quoted-newline", "short-row", "empty"])
def test_csv_problems_are_named_with_the_files_own_line(tmp_path, text, pattern):
    from minibert.run.labelled import InputError, read_split
    (tmp_path / "train.csv").write_text(text)
    with pytest.raises(InputError, match=pattern):
        read_split(str(tmp_path / "train.csv"))


def test_a_capitalised_csv_header_reads_and_jsonl_lines_are_physical(tmp_path):
    from minibert.run.labelled import InputError, read_split
    (tmp_path / "train.csv").write_text("Text,Label\na fine film,pos\n")
    assert read_split(str(tmp_path / "train.csv")) == [("a fine film", "pos")]
    (tmp_path / "train.jsonl").write_bytes('{"text": "a",\r "label": "x"}\r\n{"text": "c\u2028d", "label": "y"}\n'
                                           '{"text": "", "label": "z"}\n'.encode())
    with pytest.raises(InputError, match=r"train.jsonl:3: empty text"):
        read_split(str(tmp_path / "train.jsonl"))


def test_a_header_whose_length_exceeds_the_file_is_damaged(tmp_path):
    (tmp_path / "x.safetensors").write_bytes(struct.pack("<Q", 10 ** 12) + b"{}")
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        read_header(str(tmp_path / "x.safetensors"))


# ---- D. the red team's causes, each through the real command ------------------------------


def hold_lock(folder):
    """Another process's lock on a run folder (flock: a second open file conflicts, even in
    this process). Close the returned file to release it."""
    import fcntl
    holder = open(folder / LOCK_FILE, "a+")
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return holder


@pytest.mark.parametrize("case", ["predict-outside-a-run", "predict-while-locked", "train-while-locked"])
def test_an_interrupted_export_is_put_back_only_in_a_run_and_under_its_lock(base, setup, tmp_path, capsys, case):
    """best.old and best.tmp, no best/ (a kill between export's renames): predict on a folder
    without run.json only reads (best/ is missing: one line); predict or a fine-tuning with
    --overwrite on a run another process holds is refused before anything is renamed."""
    out = copy(base, "cls", tmp_path)
    for name in ("best.old", "best.tmp"):
        shutil.copytree(out / "best", out / name)
    shutil.rmtree(out / "best")
    (tmp_path / "s.txt").write_text("a good film\n")
    predict = lambda: finetune.main(["predict", "--model", str(out / "best"), "--file", str(tmp_path / "s.txt")])
    if case == "predict-outside-a-run":
        (out / "run.json").unlink()
    holder = hold_lock(out) if case.endswith("locked") else None
    before = snapshot(tmp_path)
    command, pattern = {"predict-outside-a-run": (predict, r"best does not exist"),
                        "predict-while-locked": (predict, "in use by another process"),
                        "train-while-locked": (ft(setup, out, "--overwrite"), "in use by another process")}[case]
    one_line_refusal(capsys, command, pattern)
    assert snapshot(tmp_path) == before
    if holder:
        holder.close()


def test_probes_out_is_checked_before_the_probes_and_written_without_following_a_link(tmp_path, capsys):
    """--out a file, or a folder of other files (a report.md of the user's): one line before
    any data is read (the --data-root given does not exist). write() makes a probes run folder,
    rewrites only its own (a plot of earlier numbers goes), and never writes through a link planted
    in it."""
    import probe as probes
    (tmp_path / "file").write_text("x")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "report.md").write_text("my notes\n")
    before = snapshot(tmp_path)
    for out, pattern in ((tmp_path / "file", "is a file, not a folder; give a folder"),
                         (tmp_path / "mine", "already holds other files")):
        one_line_refusal(capsys, lambda: probes.main(["--checkpoint", "minilm", "--out", str(out), "--data-root",
                                                      str(tmp_path / "no-cache")]), pattern)
    assert snapshot(tmp_path) == before
    out = tmp_path / "probes"
    probes.write(str(out), {"a": 1}, "# report\n", b"png")
    probes.write(str(out), {"a": 2}, "# report\n")
    assert json.loads((out / "results.json").read_text()) == {"a": 2} and not (out / probes.PLOT).exists()
    assert json.loads((out / "run.json").read_text()) == {"kind": "probes"}
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "report.md").unlink()
    (out / "report.md").symlink_to(victim)
    one_line_refusal(capsys, lambda: probes.write(str(out), {}, "x"), "holds a symbolic link")
    assert victim.read_text() == "precious\n"


def test_plot_metrics_writes_no_link_and_skips_numbers_it_cannot_draw(tmp_path, capsys, monkeypatch):
    """--out a link to a file elsewhere: the link is replaced, its target unchanged. --out
    out.txt: one line, exit status 2 as for any wrong flag (attention.py's too; the old code
    exited 1). Lines a float cannot hold (a 400-digit step or loss), nested deeper than
    Python's stack, or a 5000-digit integer: skipped like a cut line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.jsonl").write_text("\n".join([
        '{"step": 1, "train_loss": 3.0}', '{"step": %s, "train_loss": 2.0}' % ("9" * 400),
        '{"step": 2, "train_loss": %s}' % ("9" * 400), "[" * 100000, '{"step": %s}' % ("9" * 5000),
        '{"step": 3, "valid_loss": 2.5}']) + "\n")
    assert drawn_losses("m.jsonl") == ([(1, 3.0)], [(3, 2.5)])
    before = snapshot(tmp_path)
    with refusal(r"cannot draw a \.txt file") as e:
        plot_metrics.main(["m.jsonl", "--out", "out.txt"])
    assert e.value.code == 2 and snapshot(tmp_path) == before
    (tmp_path / "victim.txt").write_text("precious\n")
    (tmp_path / "link.png").symlink_to(tmp_path / "victim.txt")
    plot_metrics.main(["m.jsonl", "--out", "link.png"])
    assert (tmp_path / "victim.txt").read_text() == "precious\n"
    assert not (tmp_path / "link.png").is_symlink() and (tmp_path / "link.png").read_bytes()[:4] == b"\x89PNG"


def edit_training_state(ckpt, change):
    state = torch.load(ckpt / "training_state.pt", weights_only=True)
    change(state)
    torch.save(state, ckpt / "training_state.pt")


def weights_as_bin(ckpt):
    from safetensors.torch import load_file
    torch.save({k: v.clone() for k, v in load_file(ckpt / "model.safetensors").items()}, ckpt / "pytorch_model.bin")
    (ckpt / "model.safetensors").unlink()


@pytest.mark.parametrize("damage", [
    lambda c: edit_training_state(c, lambda s: s.update(optimizer={})),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["state"][0].update(exp_avg=torch.zeros(3))),
    lambda c: edit_training_state(c, lambda s: s.update(masker_rng=torch.zeros(3, dtype=torch.uint8))),
    lambda c: edit_training_state(c, lambda s: s.update(step=2.0)),
    lambda c: edit_training_state(c, lambda s: s.update(scheduler=[])),
    lambda c: edit_training_state(c, lambda s: s.update(short_steps="1")),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["state"][0]["exp_avg_sq"].view(-1)[0].fill_(-1.0)),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][0].update(lr=-1e-3)),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][0].update(weight_decay=-5.0)),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][0].update(betas=(1.5, 0.98))),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][0].update(eps=-1.0)),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][0].update(maximize=True)),
    lambda c: edit_training_state(c, lambda s: [v.update(step=torch.tensor(1e9)) for v in s["optimizer"]["state"].values()]),
    lambda c: edit_training_state(c, lambda s: s["scheduler"].update(last_epoch=0)),
    lambda c: edit_training_state(c, lambda s: s["scheduler"].update(base_lrs=[-1.0] * len(s["scheduler"]["base_lrs"]))),
    weights_as_bin,
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][0].update(amsgrad=True)),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][0].update(betas=(0.8, 0.98))),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][1].update(eps=1e-7)),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][1].update(weight_decay=0.01)),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][0].update(lr=5e-4)),
    lambda c: edit_training_state(c, lambda s: s["optimizer"]["param_groups"][0].update(initial_lr=5e-4)),
    lambda c: edit_training_state(c, lambda s: s["scheduler"].update(base_lrs=[5e-4] * len(s["scheduler"]["base_lrs"]))),
], ids=["optimizer-empty", "optimizer-state-shape", "masker-rng-size", "step-float", "scheduler-list", "short-steps-str",
        "negative-second-moment", "negative-lr", "negative-decay", "beta-above-1", "negative-eps", "maximize",
        "adamw-step-count", "schedule-restarted", "negative-base-rate", "weights-bin", "amsgrad", "betas-in-range",
        "eps-in-range", "no-decay-group-decays", "lr-in-range", "initial-lr-in-range", "base-rates-in-range"])
def test_resume_skips_a_checkpoint_whose_training_state_does_not_restore(base, corpus, tmp_path, capsys, damage):
    """A training state of wrong types, missing keys, a generator state of another size, a
    negative second moment (its square root would be NaN at the next step), AdamW settings out of
    their range or gradient ascent, step counts of AdamW or of the schedule other than the
    checkpoint's (a schedule restarted), or weights without the safetensors header that names
    their step, or AdamW settings in range but not those train_mlm.py sets for the saved flags
    (AMSGrad on: a KeyError traceback; betas, eps, a decay, a rate or the schedule's rates edited:
    resumed from silently, to other numbers): the newest checkpoint is
    skipped with a note, like a damaged file, and the run resumes from step 1."""
    out = copy(base, "pre", tmp_path)
    newest = out / "checkpoints" / "step-000002"
    damage(newest)
    train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "2"))
    captured = capsys.readouterr()
    assert f"note: {newest} is damaged" in captured.err and "skipped, resuming from an earlier" in captured.err
    assert "resumed at step 1" in captured.out


NOT_FINITE = float("nan"), float("inf")


@pytest.mark.parametrize("damage", [
    lambda s: s["optimizer"]["param_groups"][0].update(lr=NOT_FINITE[0]),
    lambda s: s["optimizer"]["param_groups"][0].update(betas=(0.9, NOT_FINITE[1])),
    lambda s: s["optimizer"]["param_groups"][0].update(eps=NOT_FINITE[0]),
    lambda s: s["optimizer"]["param_groups"][0].update(weight_decay=NOT_FINITE[1]),
    lambda s: s["optimizer"]["state"][0]["exp_avg_sq"].view(-1)[0].fill_(NOT_FINITE[1]),
    lambda s: s["scheduler"].update(base_lrs=[NOT_FINITE[0]] * len(s["scheduler"]["base_lrs"])),
    lambda s: s["scheduler"].update(_last_lr=[NOT_FINITE[1]] * len(s["scheduler"]["_last_lr"])),
], ids=["lr", "betas", "eps", "weight-decay", "moment", "base-lrs", "last-lr"])
def test_a_training_state_with_a_number_not_finite_is_skipped_as_damaged(base, corpus, tmp_path, capsys, damage):
    """One number of the newest checkpoint's optimizer or schedule state is NaN or inf (a rate,
    a beta, eps, the decay, a moment, the schedule's rates): resuming from it would make every
    weight NaN at the first step. It is skipped like a damaged file, and the run resumes from
    step 1 with finite weights."""
    out = copy(base, "pre", tmp_path)
    newest = out / "checkpoints" / "step-000002"
    edit_training_state(newest, damage)
    train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "2"))
    captured = capsys.readouterr()
    assert f"note: {newest} is damaged (ValueError: a number in its" in captured.err, captured.err
    assert "resumed at step 1" in captured.out
    for line in (out / "metrics.jsonl").read_text().splitlines():
        assert "NaN" not in line and "Infinity" not in line, line


def test_a_run_whose_every_checkpoint_is_damaged_is_refused_in_one_line(base, corpus, tmp_path, capsys):
    """Both checkpoints damaged: no note for either (none was resumed from), one `error:` line
    that names the newest and its cause, counts the other, and says how to go on."""
    out = copy(base, "pre", tmp_path)
    for step in ("step-000001", "step-000002"):
        edit_training_state(out / "checkpoints" / step, lambda s: s.update(optimizer={}))
    pattern = (f"^error: no checkpoint in {out / 'checkpoints'} loads whole: {out / 'checkpoints' / 'step-000002'} "
               r"is damaged \(.*\) \(and 1 more\); put back what was changed, or start again with --overwrite, "
               r"which deletes the run$")
    with refusal(pattern):
        train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "2"))


def write_header(file, change):
    """Rewrite a safetensors file's JSON header with `change(header)` applied, keeping the data."""
    raw = file.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    change(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    file.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def deep(file):
    file.write_text("[" * 100000)


def huge_vocab(best):
    vocab = 2 ** 40
    edit_config(best, vocab_size=vocab)
    write_header(best / "model.safetensors",
                 lambda h: h["bert.embeddings.word_embeddings.weight"].update(shape=[vocab, 32]))


def unexpected_tensor(best):
    rewrite_weights(best, lambda t: t.update({"bert.encoder.layer.7.output.dense.bias": torch.zeros(32)}))


def bin_state(best, state):
    (best / "model.safetensors").unlink()
    torch.save(state, best / "pytorch_model.bin")


@pytest.mark.parametrize("damage,pattern", [
    (lambda b: deep(b / "config.json"), r"config.json is not valid JSON: JSON nested too deeply"),
    (lambda b: (b / "config.json").write_text('{"vocab_size": %s}' % ("9" * 5000)), r"a number too long to read"),
    (lambda b: (b / "model.safetensors").write_bytes(struct.pack("<Q", 100000) + b"[" * 100000),
     r"not a readable safetensors file \(JSON nested too deeply\)"),
    (lambda b: ((b / "model.safetensors").rename(b / "m-1.safetensors"), deep(b / "model.safetensors.index.json")),
     r"index.json: not valid JSON \(JSON nested too deeply\)"),
    (lambda b: ((b / "model.safetensors").rename(b / "m-1.safetensors"),
                (b / "model.safetensors.index.json").write_text('{"weight_map": {"a": %s}}' % ("9" * 5000))),
     r"index.json: not valid JSON \(a number too long to read"),
    (huge_vocab, r"word_embeddings.weight: F32 \[1099511627776, 32\] needs 140737488355328 bytes"),
    (lambda b: bin_state(b, {1: torch.zeros(2)}), r"pytorch_model.bin: 1 is not a name of a dense tensor"),
    (lambda b: bin_state(b, {"a": torch.zeros(2, 2).to_sparse()}), r"'a' is not a name of a dense tensor"),
    (unexpected_tensor, r"does not fit BertForSequenceClassification; nothing was loaded. unexpected"),
    (lambda b: edit_config(b, id2label={"0": "a", "1": "b", "2": "c"}, label2id={"a": 0, "b": 1, "c": 2}),
     r"its config.json gives 3 classes \(num_labels, id2label\), but its classifier.weight \(2, \d+\) scores 2"),
], ids=["config-deep", "config-hugeint", "header-deep", "index-deep", "index-hugeint",
        "header-beyond-the-file", "bin-int-keys", "bin-sparse", "strict-load-unexpected", "labels-edited"])
def test_a_damaged_checkpoint_is_one_line_at_predict(base, tmp_path, capsys, damage, pattern):
    """JSON nested too deeply or holding a 5000-digit integer (config.json, the safetensors
    header, the shard index), a header whose shapes need more bytes than the file holds (with
    a config.json that agrees: nothing is allocated), a .bin of non-string keys or sparse
    tensors, a strict load's listing of misfits, an id2label of more classes than the classifier
    scores: each one line."""
    best = copy(base, "cls", tmp_path) / "best"
    damage(best)
    (tmp_path / "s.txt").write_text("a good film\n")
    before = snapshot(tmp_path)
    one_line_refusal(capsys, lambda: finetune.main(["predict", "--model", str(best), "--file", str(tmp_path / "s.txt")]),
                     pattern)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("case,pattern", [
    ("checkpoint-unexpected", r"cannot load --checkpoint .*nothing was loaded. unexpected in the checkpoint"),
    ("jsonl-deep", r"train.jsonl:1: not valid JSON \(JSON nested too deeply\)"),
    ("jsonl-hugeint", r"train.jsonl:1: not valid JSON \(a number too long to read"),
    ("overwrite-a-pretraining-run", r"already holds a pretraining run; choose another --out \(--overwrite only "
                                    r"replaces a fine-tuning run\)"),
], ids=["checkpoint-unexpected", "jsonl-deep", "jsonl-hugeint", "overwrite-a-pretraining-run"])
def test_fine_tuning_refuses_in_one_line_and_changes_nothing(base, setup, tmp_path, capsys, case, pattern):
    """A checkpoint whose weights hold a tensor the model lacks; a train.jsonl line nested too
    deeply or holding a 5000-digit label; --overwrite into a pretraining run (it replaces a
    fine-tuning run only)."""
    pre = copy(base, "pre", tmp_path)
    ckpt, data, out = pre / "checkpoints" / "step-000002", tmp_path / "data", tmp_path / "out"
    shutil.copytree(setup / "data", data)
    if case == "checkpoint-unexpected":
        rewrite_weights(ckpt, lambda t: t.update({"bert.encoder.layer.7.output.dense.bias": torch.zeros(32)}))
    if case.startswith("jsonl"):
        (data / "train.tsv").unlink()
        (data / "train.jsonl").write_text("[" * 100000 if case == "jsonl-deep" else '{"text": "a", "label": %s}'
                                          % ("9" * 5000))
    if case.startswith("overwrite"):
        out = pre
    before = snapshot(tmp_path)
    one_line_refusal(capsys, lambda: finetune.main(["--checkpoint", str(ckpt), "--data", str(data), "--out", str(out),
                                                    "--epochs", "1", "--no-progress", "--overwrite"]), pattern)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("damage", ["run.json", "summary.json", "metrics.jsonl", "metrics.jsonl-step"])
def test_a_run_file_nested_too_deeply_is_damaged_not_a_traceback(base, corpus, tmp_path, capsys, damage):
    """run.json nested too deeply: the folder is not a run (one line). summary.json of a
    finished run: written anew by a resume that trains on. A metrics.jsonl line nested too
    deeply, or a record whose step is not an integer: dropped on --resume, as a cut line is."""
    out = copy(base, "pre", tmp_path)
    if damage.startswith("metrics.jsonl"):
        with open(out / "metrics.jsonl", "a") as f:
            f.write("[" * 100000 + "\n" if damage == "metrics.jsonl" else '{"step": "x"}\n{"step": null}\n')
    else:
        deep(out / damage)
    command = mlm(out, corpus, base, "--resume", "--max-steps", "3")
    if damage == "run.json":
        before = snapshot(tmp_path)
        one_line_refusal(capsys, command, "its run.json does not say which run wrote the folder")
        assert snapshot(tmp_path) == before
        return
    command()
    assert "validation" in capsys.readouterr().out
    assert "[[[" not in (out / "metrics.jsonl").read_text() and '"x"' not in (out / "metrics.jsonl").read_text()


@pytest.fixture
def not_finite(setup, tmp_path):
    """make run's kinds of folder with one weight set to inf: an MLM checkpoint (with its
    tokenizer) and a classifier (HF's head)."""
    from minibert import BertForMaskedLM, load_tokenizer
    tokenizer = load_tokenizer(setup / "ckpt")
    mlm = BertForMaskedLM.from_pretrained(setup / "ckpt")
    cls = BertForSequenceClassification(mlm.config, 2)
    for model, name in ((mlm, "mlm"), (cls, "cls")):
        with torch.no_grad():
            model.bert.layers[0].intermediate.weight[3, 5] = float("inf")
        model.save_pretrained(tmp_path / name, tokenizer=tokenizer)
    (tmp_path / "in.txt").write_text("the [MASK] was good\n")
    return tmp_path


@pytest.mark.parametrize("command", ["fill_mask", "finetune", "predict", "polysemy", "probe"])
def test_weights_that_are_not_finite_are_refused_before_any_folder_is_made(command, not_finite, setup):
    """One inf among the weights: every command that loads weights stops with one line naming
    it, and makes no output folder (the commands' --out below must not exist afterwards)."""
    import fill_mask
    import probe
    t, out = not_finite, not_finite / "out"
    argv = {"fill_mask": ["--checkpoint", str(t / "mlm"), "the [MASK] ."],
            "finetune": ["--checkpoint", str(t / "mlm"), "--data", str(setup / "data"), "--out", str(out)],
            "predict": ["predict", "--model", str(t / "cls"), "--file", str(t / "in.txt")],
            "polysemy": ["--checkpoint", str(t / "mlm"), "--minilm", str(setup / "ckpt"), "--out", str(out)],
            "probe": ["--checkpoint", str(t / "mlm"), "--out", str(out), "--seq-len", "32"]}[command]
    main = {"fill_mask": fill_mask.main, "finetune": finetune.main, "predict": finetune.main,
            "polysemy": polysemy.main, "probe": probe.main}[command]
    with refusal(r"holds weights that are not finite \(inf or nan\) in (bert\.)?encoder.layer.0.intermediate.dense.weight"):
        main(argv)
    assert not out.exists()


@pytest.mark.parametrize("argv,said", [
    (["fill_mask.py"], "nothing was written"),
    (["finetune.py", "predict"], "nothing was written"),
    (["finetune.py"], "nothing is half-written; run again with --overwrite to fine-tune afresh"),
    (["polysemy.py"], "nothing is half-written"),
    (["plot_metrics.py"], "nothing is half-written"),
    (["probe.py"], "nothing is half-written; run the same command again"),
    (["exercise.py"], "nothing was written"),
    (["train_mlm.py"], "nothing is half-written; --resume continues from the last checkpoint, if there is one"),
    (["attention.py"], "nothing was written"),
    (["data/prepare.py"], "nothing is half-written; run the same command again"),
    (["experiments/compare.py"], "nothing is half-written; run the same command again"),
])
def test_ctrl_c_is_one_line_and_exit_status_130(argv, said):
    """Ctrl-C (KeyboardInterrupt, raised here as the command reads its flags) in each script, in a
    process of its own: exit status 130, and one line on standard error saying what is left; no
    traceback."""
    code = ("import argparse, runpy, sys\n"
            "def interrupt(*args, **kwargs):\n    raise KeyboardInterrupt\n"
            "argparse.ArgumentParser.parse_args = interrupt\n"
            f"sys.argv = {argv!r}\nrunpy.run_path({argv[0]!r}, run_name='__main__')\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr, r.stdout) == (130, f"interrupted: {said}\n", ""), r.stderr[-2000:]


@pytest.mark.parametrize("case", ["valid-label", "test-label", "max-length", "lora"])
def test_a_refusal_after_the_model_loads_is_still_the_only_line_on_stderr(case, setup, tmp_path):
    """finetune.py in a process of its own: loading the MLM checkpoint prints an info line (head
    dropped, pooler initialised). A validation or test label the training split lacks, a
    --max-length past the model's positions (config.json's), and --lora-modules that match
    nothing (asked of the encoder's skeleton on the meta device; the old code loaded the model
    first, printing its line) are found before the model is loaded: the refusal is all the
    command says."""
    data = tmp_path / "data"
    shutil.copytree(setup / "data", data)
    extra = []
    if case.endswith("label"):
        (data / f"{case.split('-')[0]}.tsv").write_text("a dull film\tmaybe\n")
    elif case == "max-length":
        extra = ["--max-length", "100000"]
    else:
        extra = ["--lora-rank", "2", "--lora-modules", "nothing_matches"]
    r = subprocess.run([sys.executable, "finetune.py", "--checkpoint", str(setup / "ckpt"), "--data", str(data),
                        "--out", str(tmp_path / "out"), "--no-progress", *extra],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr
    said = {"max-length": "--max-length 100000 exceeds", "lora": "--lora-modules nothing_matches: no Linear module"}
    assert r.stdout == "" and said.get(case, "labels ['maybe'] are not in the training") in r.stderr, r.stdout
    assert not (tmp_path / "out").exists()


# ---- E. a resume says what it finds, and trusts no checkpoint it cannot vouch for ------------


def run_json_in_place(out, what, victim):
    """Put `what` where the run's run.json stands: a link to the user's file `victim`, a folder
    or a named pipe."""
    (out / "run.json").unlink()
    if what == "symlink":
        (out / "run.json").symlink_to(victim)
    elif what == "folder":
        (out / "run.json").mkdir()
    else:
        os.mkfifo(out / "run.json")


@pytest.mark.parametrize("what,said", [
    ("symlink", r"is a symbolic link to \S+victim.txt \(a run never writes through one\)"),
    ("folder", "is a folder, not a file"),
    ("pipe", "is a named pipe, not a file"),
], ids=["symlink", "folder", "named-pipe"])
def test_a_run_json_that_is_no_file_is_named_as_what_it_is(base, corpus, tmp_path, capsys, what, said):
    """A run's run.json that is a symbolic link (to a user's file), a folder or a named pipe:
    --resume names what stands there and says to remove it. The old code called run.json one that
    "does not say which run wrote the folder" and said to put {"kind": ...} back, which writes
    through the link into the user's file. Nothing changes."""
    out = copy(base, "pre", tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run_json_in_place(out, what, victim)
    before = snapshot(tmp_path)
    one_line_refusal(capsys, mlm(out, corpus, base, "--resume", "--max-steps", "3"),
                     rf"^error: --out \S+: its run.json {said}: remove it, then put "
                     r'\{"kind": "pretraining"\} there if the folder is such a run, or choose another --out$')
    assert snapshot(tmp_path) == before


def flip_a_weight_bit(ckpt):
    """Flip the lowest bit of the last float32 in model.safetensors: the weights still load, finite."""
    raw = bytearray((ckpt / "model.safetensors").read_bytes())
    raw[-4] ^= 1
    (ckpt / "model.safetensors").write_bytes(bytes(raw))


def moment_as_float16(s):
    s["optimizer"]["state"][0]["exp_avg"] = s["optimizer"]["state"][0]["exp_avg"].half()


@pytest.mark.parametrize("damage,note", [
    (lambda c: edit_training_state(c, lambda s: s.update(step=1)),
     r"is damaged \(ValueError: its training state says step 1, not the step 2 its folder is named for \(a folder "
     r"renamed\? step 1's is step-000001\)\)"),
    (lambda c: edit_training_state(c, lambda s: s["optimizer"]["state"].pop(0)),
     r"is damaged \(ValueError: AdamW's state of parameter 0 lacks step, exp_avg, exp_avg_sq\)"),
    (lambda c: edit_training_state(c, moment_as_float16),
     r"is damaged \(ValueError: AdamW's exp_avg of parameter 0 is \(\d+, \d+\) torch.float16, not the "
     r"parameter's \(\d+, \d+\) torch.float32\)"),
    (flip_a_weight_bit,
     r"is damaged: its model\.safetensors is not the one it saved \(its sha256 is not the one its "
     r"training_state\.pt recorded\)"),
    (lambda c: edit_config(c, hidden_act="relu"),
     r"is damaged: its config\.json is not the one it saved \(its sha256 is not the one its training_state\.pt "
     r"recorded\)"),
    (lambda c: (c / "training_state.pt").write_bytes((c / "training_state.pt").read_bytes()[:2000]),
     r"is damaged \(its training_state\.pt cannot be read: \w+: [^();]+\)"),  # torch's own first sentence
], ids=["step-edited", "moments-missing", "moment-float16", "weights-byte-flipped", "config-edited",
        "training-state-cut-short"])
def test_a_checkpoint_that_is_not_what_was_saved_is_skipped_for_its_real_cause(base, corpus, tmp_path, capsys,
                                                                               damage, note):
    """The newest checkpoint (step 2) with its training state's step edited to 1, one parameter's
    AdamW state deleted, a moment saved as float16, one bit of its weights flipped (still
    finite), its config.json's hidden_act edited to relu, or its training_state.pt cut short: it
    is skipped with a note naming that cause, and the run resumes from step 1 and ends bit for bit
    as the run first did. The old code blamed AdamW's rate for the step ("not what train_mlm.py
    sets at step 1"), and resumed from the others silently: AdamW started the parameter afresh,
    rounded the moment, trained on the flipped weights, or trained a ReLU model; the cut file's
    note named neither the file nor its cause (torch's message, cut mid-word)."""
    out = copy(base, "pre", tmp_path)
    newest = out / "checkpoints" / "step-000002"
    damage(newest)
    train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "2"))
    captured = capsys.readouterr()
    assert re.search(rf"note: {re.escape(str(newest))} {note}; skipped, resuming from an earlier checkpoint",
                     captured.err), captured.err
    assert "resumed at step 1" in captured.out
    weights = "checkpoints/step-000002/model.safetensors"
    assert (out / weights).read_bytes() == (base / "pre" / weights).read_bytes()


@pytest.mark.parametrize("gone,resumes", [("checkpoints/step-*", False), ("checkpoints", True)],
                         ids=["every-checkpoint-deleted", "killed-before-its-first-checkpoint"])
def test_a_resume_with_no_checkpoint_left_is_refused_but_one_before_the_first_starts_over(
        base, corpus, tmp_path, capsys, gone, resumes):
    """--resume of a run whose step-* folders were all deleted (checkpoints/latest says it saved
    some): refused in one line, and nothing changes (the old code started again from step 0,
    exit 0, no note, replacing metrics.jsonl). A run with no checkpoints/ at all (killed before
    its first checkpoint) still starts over."""
    out = copy(base, "pre", tmp_path)
    for path in out.glob(gone):
        shutil.rmtree(path)
    command = mlm(out, corpus, base, "--resume", "--max-steps", "2")
    if resumes:
        command()
        assert [r["step"] for r in metric_records(str(out / "metrics.jsonl"))][0] == 1
        return
    before = snapshot(tmp_path)
    one_line_refusal(capsys, command, rf"^error: --resume finds no checkpoint left in {re.escape(str(out))}/"
                                      r"checkpoints; --overwrite starts the run again$")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("log", ["deleted", "emptied", "intact"])
def test_a_resume_says_when_the_log_lacks_the_steps_it_resumes_after(base, corpus, tmp_path, capsys, log):
    """The run's metrics.jsonl deleted, or emptied, before a --resume from step 2 (the run logged
    every step): the run goes on, and a note says that its log and plot lack steps 1-2 (the old
    code said nothing: a silent gap). A whole log is said nothing of."""
    out = copy(base, "pre", tmp_path)
    metrics = out / "metrics.jsonl"
    if log == "deleted":
        metrics.unlink()
    elif log == "emptied":
        metrics.write_text("")
    train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "3"))
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: ")]
    said = (f"note: {metrics} holds no record of steps 1-2 (cut short or deleted since the run wrote them); the run "
            "goes on from step 2, and its log and plot lack those steps")
    assert notes == ([] if log == "intact" else [said])
    assert [r["step"] for r in metric_records(str(metrics))][-1] == 3


@pytest.mark.parametrize("summary", ["copied", "deleted"])
def test_a_resume_already_at_max_steps_says_there_is_nothing_to_train_and_changes_nothing(
        base, corpus, tmp_path, capsys, summary):
    """--resume of a finished run (copied from another folder; its summary.json there, or
    deleted) with the same --max-steps: one line saying there is nothing to train, naming the
    copy's own newest checkpoint; exit 0, and not a byte of the run changes (no lock, no
    summary). The old code printed the old summary again ("trained 2 steps in 0.0 min" when no
    step was trained, the checkpoint of the folder it was copied from), or evaluated and wrote a
    new one."""
    out = copy(base, "pre", tmp_path)
    if summary == "deleted":
        (out / "summary.json").unlink()
    before = snapshot(tmp_path)
    mlm(out, corpus, base, "--resume", "--max-steps", "2")()
    captured = capsys.readouterr()
    assert captured.out == (f"nothing to train: {out} is at step 2 of --max-steps 2 (its newest checkpoint: "
                            f"{out / 'checkpoints' / 'step-000002'}); give a higher --max-steps to train on\n")
    assert captured.err == ""
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("argv,said", [
    (["--corpus", "en"], "'en' names one of the cache's own folders"),
    (["--corpus", "zh"], "'zh' names one of the cache's own folders"),
    ([], None),
], ids=["en-given", "zh-given", "no-name"])
def test_prepare_refuses_any_cache_name_given_for_text_files(corpus, tmp_path, capsys, argv, said):
    """data/prepare.py --text FILE with --corpus en given: refused as --corpus zh is (the old
    code took the given en for the default and prepared the text under the name `text`); with no
    --corpus, the text is prepared as `text`."""
    from data import prepare as prep
    command = lambda: prep.main([*argv, "--text", str(corpus), "--root", str(tmp_path / "root")])
    if said is None:
        command()
        assert (tmp_path / "root" / "text" / "manifest.json").is_file()
        return
    one_line_refusal(capsys, command, rf"^error: {said}")
    assert not (tmp_path / "root").exists()


@pytest.mark.parametrize("case", ["named-by-prepare", "dangling-corpus-folder"])
def test_what_a_data_root_holds_is_named_as_what_it_is(corpus, tmp_path, capsys, case):
    """A name data/prepare.py --text gave a text, given to train_mlm.py --corpus: "no such file",
    though prepare.py had just said it prepared it (train_mlm.py reads text files themselves, under
    a name of their digest). A corpus folder in --data-root that is a link to nothing: "File exists;
    a file stands where a folder must go". Each now one line saying what stands there."""
    from data import prepare as prep
    root = tmp_path / "root"
    if case == "named-by-prepare":
        prep.main(["--text", str(corpus), "--corpus", "mine", "--root", str(root)])
        capsys.readouterr()
        argv, pattern = ["--corpus", "mine"], (rf"^error: --corpus mine: no such file; {re.escape(str(root / 'mine'))} "
                                               r"is text data/prepare.py --text prepared, which train_mlm.py does not")
    else:
        root.mkdir()
        (root / "en").symlink_to(tmp_path / "nowhere")
        argv, pattern = ["--corpus", "en"], rf"^error: {re.escape(str(root / 'en'))} is a symbolic link to \S+nowhere, which"
    before = snapshot(tmp_path)
    one_line_refusal(capsys, lambda: train_mlm.main([*argv, "--data-root", str(root), "--out", str(tmp_path / "run"),
                                                     "--max-steps", "1", "--no-progress"]), pattern)
    assert snapshot(tmp_path) == before


def test_a_lock_that_is_no_file_is_named_before_a_resume_says_anything(base, corpus, tmp_path, capsys):
    """A run whose .lock is a named pipe, resumed with a flag that changes (--max-steps): the old
    code printed "resume: --max-steps 2 -> 3 (applied from step 2 on)", then refused the lock.
    Now the lock is named first, and nothing is printed."""
    out = copy(base, "pre", tmp_path)
    os.mkfifo(out / LOCK_FILE)
    one_line_refusal(capsys, mlm(out, corpus, base, "--resume", "--max-steps", "3"),
                     rf"^error: --out \S+pre: its {re.escape(LOCK_FILE)} is a named pipe, not a file, where the run keeps")
    assert capsys.readouterr().out == ""

