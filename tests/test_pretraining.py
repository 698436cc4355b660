"""train_mlm.py end to end on a small corpus written here (nothing downloaded)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file

import train_mlm
from minibert.run.pretraining import planned_short_steps, short_global_size
from minibert import BertForMaskedLM, load_tokenizer

from conftest import refusal

REPO = Path(__file__).resolve().parents[1]
TINY = ["--layers", "2", "--hidden", "64", "--heads", "2", "--vocab-size", "160", "--seq-len", "32",
        "--batch-size", "16", "--lr", "1e-3", "--warmup", "0.02", "--log-every", "1", "--no-progress"]


def run(out, corpus, data_root, *extra):
    train_mlm.main(["--corpus", str(corpus), "--data-root", str(data_root), "--out", str(out), *TINY, *extra])
    return [json.loads(line) for line in open(out / "metrics.jsonl")]


def losses(metrics):
    return [(r["step"], r["train_loss"]) for r in metrics if "train_loss" in r]


def test_a_short_run_learns_and_its_checkpoint_loads_in_minibert_and_transformers(tmp_path, corpus):
    """300 steps, dropout 0, from a loss near ln(V) = ln(152) = 5.0: the validation loss falls below
    3.2 (this seeded run: 3.133; the unigram plateau is about 3.35) and masked-token accuracy
    exceeds 1.3x the unigram baseline (this run: 0.238 vs 0.171). The final checkpoint (config.json,
    model.safetensors, tokenizer.json) gives the same logits in minibert and transformers, to float32
    rounding: the two codes sum in other orders, and a logit ends 2 layers of 9 chained sums and the
    head's 3, holding about 1,450 terms in all (C = 64, I = 256, T = 9), at |values| <= 6 (|z| <= 5.2):
    1,450 x 6.0e-8 x 6 = 5.2e-4, atol 1e-3 (1e-6 measured); a wrong tensor or head is off by 0.1 or more."""
    metrics = run(tmp_path / "run", corpus, tmp_path / "cache", "--max-steps", "300", "--eval-every", "100",
                  "--dropout", "0")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert losses(metrics)[0][1] > 4.5
    assert summary["valid_loss"] < 3.2, summary
    assert summary["valid_acc"] > 1.3 * summary["unigram_baseline_acc"], summary
    ckpt = summary["checkpoint"]
    assert sorted(os.listdir(ckpt)) == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                     "training_state.pt"]
    tok = load_tokenizer(ckpt)
    enc = tok.encode("the cat sees an [MASK] today.")
    ids = torch.tensor([enc.ids])
    ours = BertForMaskedLM.from_pretrained(ckpt).eval()
    hf = transformers.BertForMaskedLM.from_pretrained(ckpt).eval()
    with torch.no_grad():
        a, b = ours(ids).logits, hf(input_ids=ids).logits
    assert (a - b).abs().max() < 1e-3


@pytest.mark.parametrize("seq_len,short", [(128, 16), (256, 16), (64, 16), (48, 12), (32, 8), (72, 12), (100, 10),
                                           (120, 15), (20, 5), (68, 17)])
def test_the_short_phase_defaults_to_16_tokens_or_a_quarter_of_the_block(seq_len, short):
    """The default short block is the largest divisor of --seq-len that is at most 16 tokens (each
    neighbour starts with 1/16 of a head's weight) and at most a quarter of --seq-len: 128 -> 16
    (8 x 16 blocks a batch), 256 -> 16, 64 -> 16, 48 -> 12 and 32 -> 8 (a quarter), 72 -> 12
    (16 does not divide 72, 12 does: 6 blocks), 100 -> 10, 120 -> 15, 20 -> 5; where no divisor from 5
    to 16 is a quarter or less, a quarter, as before: 68 -> 17 (68 = 4 x 17). Half of the 6,000
    steps are short, at a peak rate of 3e-3 (the defaults picked in docs/pretraining.md)."""
    args = train_mlm.parse_args(["--seq-len", str(seq_len)])
    assert (args.short_seq_len, args.short_fraction, args.lr, args.max_steps) == (short, 0.5, 3e-3, 6000)
    assert planned_short_steps(args) == 3000
    assert short_global_size(args, 16) == 16 * seq_len // short


@pytest.mark.parametrize("accum", [1, 2])
def test_a_short_phase_trains_on_short_blocks_then_on_long_ones(tmp_path, corpus, monkeypatch, accum):
    """6 steps, --short-fraction 0.5, --short-seq-len 8 under --seq-len 32, 16 blocks a step: steps
    1-3 train on 16 x 32 / 8 = 64 blocks of 8 tokens, steps 4-6 on 16 blocks of 32, so every step
    holds 512 positions. Target slots per block, T p + 5 sqrt(T p (1 - p)) at p = 0.3: for T = 8,
    2.4 + 6.5 = 8.9, capped at the 8 positions; for T = 32, 9.6 + 13.0 = 22.6 -> 23. The model
    sees every block of the step once: one forward of (64, 8) then of (16, 32) per step, or, with
    --batch-size 8 --grad-accum 2, two forwards of (32, 8) then of (8, 32). Validation reads
    blocks of --seq-len: its batches are 32 wide. Each training record of metrics.jsonl names its
    step's block length (plot_metrics.py draws the phase change from it)."""
    seen, forwards, valid_shapes = [], [], []
    step, evaluate, forward = train_mlm.train_step, train_mlm.evaluate, BertForMaskedLM.forward

    def spy_step(run_, model, step_model, optimizer, scaler, batch, phase, done, read_loss):
        seen.append((done, tuple(batch["input_ids"].shape), phase.slots))
        return step(run_, model, step_model, optimizer, scaler, batch, phase, done, read_loss)

    def spy_forward(self, input_ids, *args, **kwargs):
        if self.training:
            forwards.append(tuple(input_ids.shape))
        return forward(self, input_ids, *args, **kwargs)

    def spy_evaluate(run_, model, valid):
        size = run_.args.batch_size
        valid_shapes.extend(tuple(valid["input_ids"][i:i + size].shape) for i in range(0, len(valid["labels"]), size))
        return evaluate(run_, model, valid)

    monkeypatch.setattr(train_mlm, "train_step", spy_step)
    monkeypatch.setattr(train_mlm, "evaluate", spy_evaluate)
    monkeypatch.setattr(BertForMaskedLM, "forward", spy_forward)
    metrics = run(tmp_path / "run", corpus, tmp_path / "cache", "--max-steps", "6", "--eval-every", "6",
                  "--short-seq-len", "8", "--short-fraction", "0.5", "--batch-size", str(16 // accum),
                  "--grad-accum", str(accum))
    assert seen == [(1, (64, 8), 8), (2, (64, 8), 8), (3, (64, 8), 8),
                    (4, (16, 32), 23), (5, (16, 32), 23), (6, (16, 32), 23)]
    assert forwards == [(64 // accum, 8)] * (3 * accum) + [(16 // accum, 32)] * (3 * accum)
    assert valid_shapes and all(shape[1] == 32 for shape in valid_shapes)
    assert [(r["step"], r["seq_len"]) for r in metrics if "train_loss" in r] == [(1, 8), (2, 8), (3, 8),
                                                                                (4, 32), (5, 32), (6, 32)]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def signal_mid_run(out, corpus, data_root, args, at_step: int, sig) -> tuple[subprocess.Popen, str]:
    """Start train_mlm.py in a process of its own, send it `sig` once its newest checkpoint is at
    least `at_step`, and wait for it: (the process, its stderr). A shell starts background jobs
    with SIGINT ignored, and Python then keeps ignoring it: the child gets the default action
    back, as a program started from a terminal has it."""
    cmd = [sys.executable, "train_mlm.py", "--corpus", str(corpus), "--data-root", str(data_root),
           "--out", str(out), *TINY, *args]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    latest = out / "checkpoints" / "latest"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if latest.exists() and int(latest.read_text().split("-")[1]) >= at_step:
            proc.send_signal(sig)
            break
        time.sleep(0.005)
    _, err = proc.communicate()
    return proc, err


@pytest.mark.parametrize("objective", ["mlm", "mlm+nsp"])
def test_kill_and_resume_equals_an_uninterrupted_run(tmp_path, corpus, documents, objective):
    """A run SIGKILLed mid-way (a checkpoint every 2 steps) and resumed with --resume ends with
    bit-identical weights and the same per-step losses as the uninterrupted run (CPU: the same
    kernels on the same batches from the same saved state, step for step, so exact); with NSP
    the next-sentence losses too, and the NSP head's weights (on conftest's `documents`, whose
    sentences make pairs)."""
    args = ["--max-steps", "40", "--save-every", "2", "--eval-every", "20", "--objective", objective]
    corpus = documents if objective == "mlm+nsp" else corpus
    reference = run(tmp_path / "ref", corpus, tmp_path / "cache", *args)

    out = tmp_path / "killed"
    proc, _ = signal_mid_run(out, corpus, tmp_path / "cache", args, 10, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    killed_at = int((out / "checkpoints" / "latest").read_text().split("-")[1])
    assert killed_at < 40

    resumed = run(out, corpus, tmp_path / "cache", *args, "--resume")
    assert losses(resumed) == losses(reference)
    nsp = lambda ms: [(r["step"], r["train_nsp_loss"]) for r in ms if "train_nsp_loss" in r]
    assert nsp(resumed) == nsp(reference) and (objective == "mlm") == (not nsp(reference))
    final = lambda d: load_file(d / "checkpoints" / "step-000040" / "model.safetensors")
    a, b = final(tmp_path / "ref"), final(out)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (objective == "mlm+nsp") == ("cls.seq_relationship.weight" in a)


def test_ctrl_c_is_one_line_and_the_run_resumes(tmp_path, corpus):
    """Ctrl-C (SIGINT) during training: exit status 130 (128 + SIGINT, as a shell reports it),
    one line on stderr naming the last checkpoint and --resume, no traceback; --resume (with a
    shorter --max-steps, which a resume may change) then finishes the run."""
    args = ["--max-steps", "400", "--save-every", "2", "--eval-every", "200"]
    out = tmp_path / "interrupted"
    proc, err = signal_mid_run(out, corpus, tmp_path / "cache", args, 4, signal.SIGINT)
    assert proc.returncode != 0, "the run ended before it could be interrupted"
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.fullmatch(r"interrupted: the last checkpoint is .*step-\d{6}; --resume continues from it", lines[0])
    resumed = run(out, corpus, tmp_path / "cache", "--save-every", "2", "--max-steps", "100", "--eval-every", "100",
                  "--resume")
    assert resumed[-1]["step"] == 100


def test_same_command_twice_gives_the_same_numbers(tmp_path, corpus):
    a = run(tmp_path / "a", corpus, tmp_path / "cache", "--max-steps", "6", "--eval-every", "3")
    b = run(tmp_path / "b", corpus, tmp_path / "cache", "--max-steps", "6", "--eval-every", "3")
    strip = lambda ms: [{k: v for k, v in m.items() if k != "tokens_per_s"} for m in ms]
    assert strip(a) == strip(b)


@pytest.mark.parametrize("objective", ["mlm", "mlm+nsp"])
def test_torchrun_two_processes_match_one_process(tmp_path, corpus, documents, objective):
    """torchrun --nproc_per_node=2 (gloo) with 8 blocks per process equals one process with 16
    blocks, and one process with 2 accumulation steps of 8: the masks are drawn for the global
    batch and the loss is averaged over its targets. Dropout off, so only float summation order
    differs: losses agree to 1e-4, and with NSP the next-sentence losses and held-out accuracy
    (each process scores its share of the pairs; conftest's `documents`). The 1e-4: a logit ends
    about 20 chained sums of at most 256 terms; reordered, each moves it by ~sqrt(256) u relative,
    of random sign (at most 256 u each: that worst case, 2.5e-3 on a loss, would hide the bug
    below): sqrt(20) x 16 x 6.0e-8 = 4.3e-6, 1.3e-5 on |z| <~ 3; a target's loss twice that, its mean
    over ~150 targets sd 2e-6, 4 sd 8e-6; the 8 updates' directions are off by as much relative, on
    a loss that falls < 1 nat: < 5e-6 more. A mean of the halves' means instead of the mean over
    the batch's targets is off by ~(n1 - n2)(L1 - L2) / 2n ~ 6 x 0.2 / 300 = 4e-3. The accuracies
    are counts over the same pairs (one flipped pair moves them by 1/200 or more). 5e-7 measured.
    A refusal is one line, from the main process: the run again
    without --resume (a check of --out, made by the main process only) and --resume with
    another --seed (a check every process makes) each print one `error:` line, no traceback
    through train_mlm.py from either process (torchrun then reports the failed processes), and
    leave the run as it was. Every process leaves the process group before it exits: one left to
    Python's exit aborted in gloo's threads ("terminate called without an active exception", with
    a Python stack through train_mlm.py) in 4 of 10 such refusals."""
    args = ["--max-steps", "8", "--eval-every", "8", "--dropout", "0", "--objective", objective]
    corpus = documents if objective == "mlm+nsp" else corpus
    single = run(tmp_path / "one", corpus, tmp_path / "cache", *args)
    accum = run(tmp_path / "accum", corpus, tmp_path / "cache", *args, "--batch-size", "8", "--grad-accum", "2")

    def torchrun(*extra):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
               f"--master_port={_free_port()}", "train_mlm.py", "--corpus", str(corpus), "--data-root",
               str(tmp_path / "cache"), "--out", str(tmp_path / "ddp"), *TINY, *args, "--batch-size", "8", *extra]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)

    r = torchrun()
    assert r.returncode == 0, r.stderr[:4000] + "\n[...]\n" + r.stderr[-1000:]  # each process's error, then torchrun's
    ddp = [json.loads(line) for line in open(tmp_path / "ddp" / "metrics.jsonl")]
    files = lambda: {p: p.read_bytes() for p in sorted((tmp_path / "ddp").rglob("*")) if p.is_file()}
    before = files()
    for extra, message in (((), "already holds a pretraining run"), (("--resume", "--seed", "1"), r"--seed \(0 then")):
        r = torchrun(*extra)
        errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert r.returncode != 0 and len(errors) == 1 and re.search(message, errors[0]), r.stderr[-3000:]
        assert 'train_mlm.py", line' not in r.stderr and "terminate called" not in r.stderr, r.stderr[-3000:]
    assert files() == before
    for other in (accum, ddp):
        for (s1, l1), (s2, l2) in zip(losses(single), losses(other), strict=True):
            assert s1 == s2 and abs(l1 - l2) < 1e-4, (s1, l1, l2)
        for key in ("valid_loss", "train_nsp_loss", "train_nsp_acc", "valid_nsp_acc"):
            v1 = [m[key] for m in single if key in m]
            v2 = [m[key] for m in other if key in m]
            assert len(v1) == len(v2) and all(abs(a - b) < 1e-4 for a, b in zip(v1, v2)), (key, v1, v2)
        assert (objective == "mlm+nsp") == any("train_nsp_loss" in m for m in single)


def test_fused_adamw_and_bf16_autocast_track_the_reference(tmp_path, corpus):
    """Two speed paths against the reference, dropout off, same seed:
    - the fused AdamW kernel (the default) and the foreach one compute the same update: 40 steps
      (loss 5.00 -> 3.75) give losses equal to 1e-5 (this run: 4.8e-7, 1 unit in the last place of
      the loss). The 1e-5: both get the same first gradients; each step each kernel rounds each
      weight once (<= u |w|), so after 40 steps the weights differ by <= 40 u |w|, and a loss by
      <= 40 u sum |w dL/dw| = 40 x 6.0e-8 x 2.2 = 5.3e-6 (the sum measured at this model's start),
      plus its own last bit (4.8e-7); a missing bias correction or decay is off by far more;
    - bf16 autocast on the CPU (--dtype bf16) follows the fp32 loss curve: every logged loss and
      the final validation loss within 0.02 of fp32's (this run: at most 5e-4). The 0.02, derived:
      bf16 keeps 8 bits of mantissa, so each rounding is off by at most u = 2^-9 = 0.00195 relative.
      A logit passes ~k = 10 roundings (per layer the rounded inputs of the q/k/v, attention-output,
      intermediate and output Linears, then the head's dense and decoder), of random signs: relative
      error ~sqrt(k) u = 0.0062, on logits of a few nats (|z| <~ 3): sd ~0.019 per logit. A target's
      loss moves by dz_y - sum_i p_i dz_i, sd ~sqrt(2) x 0.019 = 0.026; the loss is the mean over
      ~0.3 x 16 x 32 = 150 targets: sd 0.0022, 4 sd = 0.009. Over the 40 steps the weights drift
      apart as well: each update's direction is off by the gradient's ~sqrt(k) u = 0.6%, on a run
      whose loss falls ~1.25 nats, <= ~0.008 more. 0.009 + 0.008 = 0.017 < 0.02. That bf16 is used
      at all: test_train_mlm_paths.py::test_dtype_bf16_runs_the_model_in_bf16."""
    args = ["--max-steps", "40", "--eval-every", "40", "--dropout", "0"]
    fused = run(tmp_path / "fused", corpus, tmp_path / "cache", *args)
    foreach = run(tmp_path / "foreach", corpus, tmp_path / "cache", *args, "--no-fused-adamw")
    bf16 = run(tmp_path / "bf16", corpus, tmp_path / "cache", *args, "--dtype", "bf16")
    assert losses(fused)[-1][1] < losses(fused)[0][1] - 1.0
    for other, tol in ((foreach, 1e-5), (bf16, 0.02)):
        for (s1, l1), (s2, l2) in zip(losses(fused), losses(other), strict=True):
            assert s1 == s2 and abs(l1 - l2) < tol, (s1, l1, l2)
        assert abs(fused[-1]["valid_loss"] - other[-1]["valid_loss"]) < tol


def test_bad_input_gives_a_clear_error_and_writes_nothing(tmp_path, corpus):
    out = tmp_path / "out"
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    cases = [(["--corpus", str(empty)], "no text in"),
             (["--corpus", str(tmp_path / "missing.txt")], "no such file"),
             (["--corpus", str(corpus), "--seq-len", "600"], "exceeds the model's max_position_embeddings"),
             (["--corpus", str(corpus), "--heads", "3"], "divisible")]
    for argv, message in cases:
        with refusal(message):
            train_mlm.main([*argv, "--data-root", str(tmp_path / "cache"), "--out", str(out), "--no-progress"])
        assert not out.exists()


def test_resume_refuses_another_vocabulary_and_a_run_is_never_overwritten(tmp_path, corpus):
    out = tmp_path / "run"
    run(out, corpus, tmp_path / "cache", "--max-steps", "2")
    before = (out / "checkpoints" / "step-000002" / "model.safetensors").read_bytes()
    with refusal(r"--resume: --vocab-size \(160 then, 120 now\) differ from the run in"):
        run(out, corpus, tmp_path / "cache", "--max-steps", "4", "--resume", "--vocab-size", "120")
    with refusal("already holds a pretraining run; pass --resume"):
        run(out, corpus, tmp_path / "cache", "--max-steps", "4")
    assert (out / "checkpoints" / "step-000002" / "model.safetensors").read_bytes() == before


def test_a_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, corpus, monkeypatch):
    """The loss turns NaN at step 5 (forced): the run stops with a message naming the step and
    the last good checkpoint (step 4), and writes no checkpoint after it."""
    forward = BertForMaskedLM.forward
    calls = []

    def poisoned(self, *a, **k):
        out = forward(self, *a, **k)
        if self.training:
            calls.append(1)
            if len(calls) == 5:
                out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(BertForMaskedLM, "forward", poisoned)
    with refusal(r"became nan at step 5; stopping \(the last good checkpoint is .*step-000004\)"):
        run(tmp_path / "run", corpus, tmp_path / "cache", "--max-steps", "10", "--save-every", "2")
    assert sorted(os.listdir(tmp_path / "run" / "checkpoints")) == ["latest", "step-000002", "step-000004"]
