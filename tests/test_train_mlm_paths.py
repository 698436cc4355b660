"""train_mlm.py's switches, shown to act (driven through train_mlm.main only): --seed decides the
initial weights, the data order, the masks and the dropout; --dtype bf16 runs the model in bf16;
--compile compiles the step (the loss curves it must follow: test_static_step.py and
test_pretraining.py)."""

import json

import pytest
import torch

import train_mlm
from minibert import BertForMaskedLM
from minibert.loss import IGNORE_INDEX


def pretrain(tmp_path, corpus, name, *extra):
    out = tmp_path / name
    train_mlm.main(["--corpus", str(corpus), "--data-root", str(tmp_path / "cache"), "--out", str(out),
                    "--layers", "1", "--hidden", "32", "--heads", "2", "--vocab-size", "160", "--seq-len", "32",
                    "--batch-size", "8", "--lr", "1e-3", "--log-every", "1", "--no-progress", "--short-fraction", "0",
                    *extra])
    return [json.loads(line) for line in open(out / "metrics.jsonl")]


def train_losses(metrics):
    return [r["train_loss"] for r in metrics if "train_loss" in r]


@pytest.fixture
def first_step(monkeypatch):
    """Records, at the first training-mode forward of each run: the word embeddings (the initial
    weights: no update has happened yet), the block of tokens before masking, and the 0/1 map of
    the positions selected as targets."""
    seen = []
    forward = BertForMaskedLM.forward

    def recording(self, input_ids, attention_mask=None, token_type_ids=None, labels=None, masked_only=False,
                  target_positions=None):
        if self.training and len(seen) < recording.runs:
            original = input_ids.clone()
            selected = torch.zeros_like(input_ids, dtype=torch.bool)
            if target_positions is not None:
                real = labels != IGNORE_INDEX
                rows = torch.arange(input_ids.shape[0])[:, None].expand_as(target_positions)
                original[rows[real], target_positions[real]] = labels[real]
                selected[rows[real], target_positions[real]] = True
            else:
                real = labels != IGNORE_INDEX
                original[real], selected = labels[real], real
            seen.append({"weights": self.bert.embeddings.word_embeddings.weight.detach().clone(),
                         "blocks": original, "selected": selected})
        return forward(self, input_ids, attention_mask, token_type_ids, labels=labels, masked_only=masked_only,
                       target_positions=target_positions)

    recording.runs = 0

    def next_run():
        recording.runs += 1
        return seen

    monkeypatch.setattr(BertForMaskedLM, "forward", recording)
    return next_run


def test_the_seed_decides_init_data_order_masks_and_dropout(tmp_path, corpus, first_step):
    """Three runs of 3 steps with dropout 0.1: --seed 0, --seed 0 again, --seed 1 (in one process,
    so nothing may come from the state a previous run left in the global RNG).
    Seed 0 twice: bit-identical initial weights, first batch, masks, and logged losses (dropout
    included). Seed 1: other initial weights, another first batch of blocks (the data order), and
    another mask. Masks are compared by position: with 30% of the 8 x 32 = 256 positions selected
    at random, two independent masks agree at a position with probability 0.3^2 + 0.7^2 = 0.58,
    binomial sd sqrt(0.58 * 0.42 / 256) = 0.031 (fewer candidates, as [CLS] and [SEP] are never
    selected, only move this); a masking generator that ignored the seed would agree at ~1.0
    (the blocks are full, so only the special tokens' places differ). Agreement below 0.8 is
    7 sd above chance and far below 1."""
    runs = {}
    for name, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        seen = first_step()
        metrics = pretrain(tmp_path, corpus, name, "--seed", seed, "--max-steps", "3", "--dropout", "0.1")
        runs[name] = {**seen[-1], "losses": train_losses(metrics)}
    a, b, c = runs["a"], runs["b"], runs["c"]
    for key in ("weights", "blocks", "selected"):
        assert torch.equal(a[key], b[key]), f"seed 0 twice: other {key}"
    assert a["losses"] == b["losses"] and len(a["losses"]) == 3
    assert not torch.equal(a["weights"], c["weights"]), "seed 1: the same initial weights"
    assert a["blocks"].shape == c["blocks"].shape
    same_rows = sum(any(torch.equal(r, s) for s in c["blocks"]) for r in a["blocks"])
    assert same_rows < len(a["blocks"]) // 2, "seed 1: the same first batch of blocks"
    agreement = (a["selected"] == c["selected"]).float().mean().item()
    assert agreement < 0.8, f"seed 1: the masks agree at {agreement:.2f} of the positions"
    assert a["losses"] != c["losses"]


def test_dtype_bf16_runs_the_model_in_bf16(tmp_path, corpus, monkeypatch):
    """--dtype bf16 (autocast on this CPU): every Linear of the model computes in bf16 during
    training (their outputs are torch.bfloat16); --dtype fp32 keeps them all in float32. Recorded
    by wrapping nn.Linear.forward. And the numbers do change: bf16's losses are not fp32's (a
    bf16 product keeps 8 bits of mantissa, so the first loss, ~5 nats, moves by far more than
    float32's last place); how close they stay is test_pretraining.py's
    test_fused_adamw_and_bf16_autocast_track_the_reference."""
    dtypes = []
    forward = torch.nn.Linear.forward

    def recording(self, x):
        y = forward(self, x)
        if self.training:
            dtypes.append(y.dtype)
        return y

    monkeypatch.setattr(torch.nn.Linear, "forward", recording)
    fp32 = train_losses(pretrain(tmp_path, corpus, "fp32", "--max-steps", "3", "--dtype", "fp32"))
    assert dtypes and set(dtypes) == {torch.float32}
    dtypes.clear()
    bf16 = train_losses(pretrain(tmp_path, corpus, "bf16", "--max-steps", "3", "--dtype", "bf16"))
    assert dtypes and set(dtypes) == {torch.bfloat16}
    assert len(fp32) == len(bf16) == 3 and fp32 != bf16
