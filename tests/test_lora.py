"""minibert/lora.py: the low-rank update y = W x + b + (alpha / r) B A x, worked out by hand, and
its merge into W (S30's parameter-efficient method)."""

import pytest
import torch

from minibert.lora import LoRALinear, add_lora, merge_lora

from conftest import TINY_REORDER, assert_close, tiny_config


def hand_lora():
    base = torch.nn.Linear(2, 2)
    with torch.no_grad():
        base.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
        base.bias.copy_(torch.tensor([0.5, -0.5]))
    lora = LoRALinear(base, rank=2, alpha=1.0)
    with torch.no_grad():
        lora.lora_A.copy_(torch.tensor([[1.0, -1.0], [0.0, 1.0]]))
        lora.lora_B.copy_(torch.tensor([[2.0, 0.0], [0.5, 1.0]]))
    return lora


def test_lora_output_and_merge_by_hand():
    """y = W x + b + (alpha / r) B A x by hand, and the merged Linear gives the same y.
    In 2, out 2, rank r = 2, alpha = 1: scaling alpha / r = 0.5 (r / alpha would be 2, alpha alone 1).
      W = [[1, 2], [3, 4]], b = [0.5, -0.5], A = [[1, -1], [0, 1]] (r x in), B = [[2, 0], [0.5, 1]] (out x r),
      x = [3, 1].
      W x + b = [3 + 2, 9 + 4] + b = [5.5, 12.5]
      A x = [3 - 1, 1] = [2, 1];  B (A x) = [2*2 + 0*1, 0.5*2 + 1*1] = [4, 2];  x 0.5 = [2, 1]
      y = [5.5 + 2, 12.5 + 1] = [7.5, 13.5]
      merged: B A = [[2, -2], [0.5, 0.5]];  W + 0.5 B A = [[2, 1], [3.25, 4.25]];
      W' x + b = [6 + 1, 9.75 + 4.25] + b = [7.5, 13.5], the same."""
    lora = hand_lora()
    x = torch.tensor([[3.0, 1.0]])
    with torch.no_grad():
        y = lora(x)
    # every number here is a small multiple of 1/4: exact in float32, in any order of the sums
    assert torch.equal(y, torch.tensor([[7.5, 13.5]])), y
    assert lora.scaling == 0.5
    merged = lora.merged()
    assert isinstance(merged, torch.nn.Linear) and not isinstance(merged, LoRALinear)
    assert torch.equal(merged.weight.detach(), torch.tensor([[2.0, 1.0], [3.25, 4.25]]))
    with torch.no_grad():
        assert torch.equal(merged(x), torch.tensor([[7.5, 13.5]]))
    assert merged.weight.requires_grad and merged.bias.requires_grad



def test_lora_starts_at_the_base_function_and_trains_only_a_and_b():
    """B starts at 0, so the wrapped Linear first computes the base Linear exactly (train mode,
    adapter dropout 0.5 included: dropout acts on the update's input only); the base weight and
    bias are frozen, A and B train; A is not zero (else no gradient could reach B). The output is
    the base's bit for bit: the same base call, plus s x (0 @ A x) = 0 exactly."""
    torch.manual_seed(0)
    base = torch.nn.Linear(5, 3)
    lora = LoRALinear(base, rank=2, alpha=4.0, dropout=0.5).train()
    x = torch.randn(4, 5)
    assert torch.equal(lora(x), base(x))
    assert lora.lora_B.abs().max() == 0 and lora.lora_A.abs().min() > 0
    assert [n for n, p in lora.named_parameters() if p.requires_grad] == ["lora_A", "lora_B"]
    lora(x).sum().backward()
    assert lora.lora_B.grad.abs().max() > 0 and base.weight.grad is None


@pytest.mark.parametrize("alpha, scaling", [(None, 1.0), (8.0, 2.0)], ids=["alpha-defaults-to-rank", "alpha-8"])
def test_add_lora_wraps_query_and_value_and_merge_lora_restores_plain_linears(alpha, scaling):
    """add_lora(rank 4) wraps the query and value projections of both layers (4 modules), with
    scaling alpha / r: 4 / 4 = 1 by default, 8 / 4 = 2 with alpha 8. Random B: the model's output
    changes, and merge_lora gives a model of plain Linears whose output is the unmerged one: W + s B A
    rounds each weight once and W x + s B (A x) sums in another order, so the query and value sums
    differ by float32 rounding, carried through the rest of the model: TINY_REORDER (conftest; these
    weights are no larger than its perturbed ones), while a merge that dropped B A is off by the
    0.04 (alpha 4) or 0.09 (alpha 8) that the adapters move the output here."""
    from minibert import BertModel

    torch.manual_seed(0)
    model = BertModel(tiny_config()).eval()
    ids = torch.randint(5, 99, (2, 7))
    with torch.no_grad():
        before = model(ids).last_hidden_state
    names = add_lora(model, rank=4, alpha=alpha)
    assert names == [f"layers.{i}.attention.{m}" for i in range(2) for m in ("query", "value")]
    wrapped = [m for m in model.modules() if isinstance(m, LoRALinear)]
    assert len(wrapped) == 4 and all(m.scaling == scaling for m in wrapped)
    with torch.no_grad():
        for m in wrapped:
            m.lora_B.normal_(0, 0.1)
        unmerged = model(ids).last_hidden_state
    assert (unmerged - before).abs().max() > 1e-3
    merge_lora(model)
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    with torch.no_grad():
        assert_close(model(ids).last_hidden_state, unmerged, atol=TINY_REORDER, what="merged")
