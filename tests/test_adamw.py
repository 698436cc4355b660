"""minibert/run/training.py:adamw: one weight-decay rule for every run, and its two kernels."""

import pytest
import torch

from minibert import BertForMaskedLM
from minibert.lora import add_lora
from minibert.run.training import adamw

from conftest import assert_close, perturb_, tiny_config


def decay_expected(model) -> dict[str, bool]:
    """By module type, not by shape: Linear and Embedding weights (and LoRA's A and B) decay;
    Linear biases, LayerNorm weights and biases and the MLM decoder's bias never do."""
    expected = {}
    for mname, m in model.named_modules():
        prefix = f"{mname}." if mname else ""
        for pname, _ in m.named_parameters(recurse=False):
            decays = isinstance(m, (torch.nn.Linear, torch.nn.Embedding)) and pname == "weight"
            expected[prefix + pname] = decays or pname in ("lora_A", "lora_B")
    return expected


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "foreach"])
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_weight_decay_hits_matrices_and_embeddings_only(fused, lora):
    """AdamW's decoupled decay, one step at lr 0.1 with weight decay 0.5 and every gradient 0:
    Adam's moments stay 0, so its update is 0 / (0 + eps) = 0, and the step is the decay alone,
    w <- w - lr * wd * w = w (1 - 0.05) = 0.95 w, on exactly the decaying tensors (decay_expected);
    every other tensor stays bit for bit (its step is exactly 0: w - 0 = w). 0.95 w is one float32
    product (relative error <= 2^-24 = 6e-8, a fused kernel may round twice): rtol 1e-6, against the
    5% of a missing or doubled decay. With LoRA the frozen base tensors are not in the optimizer at
    all and stay as they were, though they are matrices."""
    torch.manual_seed(0)
    model = perturb_(BertForMaskedLM(tiny_config()))
    if lora:
        for p in model.parameters():
            p.requires_grad_(False)
        add_lora(model.bert, rank=2)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("lora_B"):
                    p.normal_(0, 0.1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = adamw(model.parameters(), lr=0.1, weight_decay=0.5, fused=fused)
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
    optimizer.step()
    expected = decay_expected(model)
    assert set(expected) == set(before)
    n_decayed = 0
    for name, p in model.named_parameters():
        if p.requires_grad and expected[name]:
            assert_close(p.detach(), 0.95 * before[name], atol=0.0, rtol=1e-6, what=name)
            assert not torch.equal(p.detach(), before[name]), name
            n_decayed += 1
        else:
            assert torch.equal(p.detach(), before[name]), f"{name} changed"
    assert n_decayed == (8 if lora else 2 * 6 + 3 + 1)  # LoRA: 4 A + 4 B; full: 6 matrices a layer, 3 tables, head


def test_fused_and_foreach_kernels_compute_the_same_update():
    """fused=True asks for PyTorch's fused kernel, fused=False for the multi-tensor foreach one,
    and both compute the same AdamW update. Five steps of the same random gradients (lr 1e-2,
    decay 0.01): each step moves a weight by ~lr = 0.01 (Adam's m / sqrt(v) ~ 1). Each kernel rounds
    the new weight once a step (<= u |w|, u = 2^-24 = 6.0e-8, |w| <= 1.3: the LayerNorm weights) and
    the step itself in a few roundings (~10 u x 1e-2), so the two differ by <= 2 x 6.0e-8 x 1.3 +
    6e-9 = 1.6e-7 a step, 8.1e-7 after 5: atol 1e-6 (one unit in the last place of a weight near 1
    is already 1.2e-7), while one step moves each weight by ~1e-2, 10^4 times more."""
    torch.manual_seed(0)
    a = perturb_(BertForMaskedLM(tiny_config()))
    b = BertForMaskedLM(tiny_config())
    b.load_state_dict(a.state_dict())
    start = {n: p.detach().clone() for n, p in a.named_parameters()}
    opt_a = adamw(a.parameters(), lr=1e-2, weight_decay=0.01, fused=True)
    opt_b = adamw(b.parameters(), lr=1e-2, weight_decay=0.01, fused=False)
    assert all(g["fused"] is True for g in opt_a.param_groups)
    assert all(g["foreach"] is True and not g["fused"] for g in opt_b.param_groups)
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        for p, q in zip(a.parameters(), b.parameters(), strict=True):
            p.grad = torch.randn(p.shape, generator=g)
            q.grad = p.grad.clone()
        opt_a.step()
        opt_b.step()
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        assert_close(q.detach(), p.detach(), atol=1e-6, what=name)
        assert (p.detach() - start[name]).abs().max() > 1e-3, f"{name} did not move"
