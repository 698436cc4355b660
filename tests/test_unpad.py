"""The padding-removal fast path (minibert/unpad.py) against the reference path of model.py."""

import pytest
import torch
import torch.nn.functional as F

from minibert import IGNORE_INDEX, BertForMaskedLM, BertForSequenceClassification, BertModel
from minibert.unpad import RealTokens

from conftest import TINY_REORDER, assert_close, assert_same_loss_and_grads, perturb_, tiny_config


def test_real_tokens_by_hand():
    """Mask rows [1 1 0 0], [1 1 1 0], [1 0 0 0]: N = 2 + 3 + 1 = 6 real tokens at (row, column)
    (0,0) (0,1) (1,0) (1,1) (1,2) (2,0), in row-major order; the grid needs T' = 3 columns (the
    fourth is padding in every row). to_grid puts token i at its place and zeros elsewhere;
    from_grid takes them back out."""
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0]])
    real = RealTokens.from_mask(mask)
    assert real.rows.tolist() == [0, 0, 1, 1, 1, 2] and real.cols.tolist() == [0, 1, 0, 1, 2, 0]
    assert real.T == 3
    x = torch.arange(1.0, 7.0)[:, None]                     # (N, 1): token i carries the value i + 1
    grid = real.to_grid(x)                                  # (3, 3, 1)
    assert grid[..., 0].tolist() == [[1, 2, 0], [3, 4, 5], [6, 0, 0]]
    assert real.to_grid(x, 4).shape == (3, 4, 1)
    assert torch.equal(real.from_grid(grid), x)


@pytest.mark.parametrize("use_sdpa", [False, True], ids=["manual", "sdpa"])
def test_unpad_gives_the_same_numbers_and_gradients(batch, use_sdpa):
    """unpad=True runs the token-wise layers on the real tokens only. The batch is
    padded from 10 to 16 columns and row 1 has 6 real tokens, so N = 10 + 6 + 10 = 26 of 48
    positions are real. Against the padded reference path, in training mode with dropout 0:
    hidden states at real positions, the pooled output, the classification loss, the sparse
    MLM loss and EVERY parameter's gradient agree (only the matmul shapes differ, so the sums may run
    in other orders: atol TINY_REORDER, conftest; measured <= 1e-6); padding positions come back as
    exactly 0 (to_grid writes zeros there)."""
    ids, mask, types = (F.pad(t, (0, 6)) for t in batch)
    tokens = RealTokens.from_mask(mask)
    assert tokens.rows.numel() == 26 and tokens.T == 10
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[0, 3], labels[1, 4], labels[2, 7] = 11, 12, 13
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, use_sdpa=use_sdpa)
    for cls, args in ((BertForSequenceClassification, (3,)), (BertForMaskedLM, ())):
        ref = perturb_(cls(tiny_config(**no_dropout), *args)).train()
        fast = cls(tiny_config(unpad=True, **no_dropout), *args).train()
        fast.load_state_dict(ref.state_dict())
        a, b = ref.bert(ids, mask, types), fast.bert(ids, mask, types)
        real = mask.bool()
        assert_close(b.last_hidden_state[real], a.last_hidden_state[real], atol=TINY_REORDER, what="real positions")
        assert b.last_hidden_state[~real].abs().max() == 0
        if cls is BertForSequenceClassification:
            assert_close(b.pooler_output, a.pooler_output, atol=TINY_REORDER, what="pooled")
            y = torch.tensor([0, 2, 1])
            lr, lf = ref(ids, mask, types, labels=y).loss, fast(ids, mask, types, labels=y).loss
        else:
            lr = ref(ids, mask, types, labels=labels, masked_only=True).loss
            lf = fast(ids, mask, types, labels=labels, masked_only=True).loss
        assert_same_loss_and_grads(lf, lr, fast, ref, atol=TINY_REORDER)


def test_the_fast_path_runs_only_where_it_can_help(batch, monkeypatch):
    """BertModel.forward takes forward_unpadded only when unpad=True, a mask is given, some
    position is padding and no attention probabilities are asked for (the fast path has no
    (B, H, T, T) grid to return). Counted by wrapping the method: the fixture's batch (row 1
    padded from column 6) takes it once; the same batch with an all-ones mask, with no mask,
    with output_attentions=True, or with unpad=False takes the padded path (0 calls). Each
    forward still returns a hidden state of shape (3, 10, 32)."""
    ids, mask, types = batch
    calls = []
    original = BertModel.forward_unpadded
    monkeypatch.setattr(BertModel, "forward_unpadded",
                        lambda self, *args: calls.append(args[1]) or original(self, *args))
    fast, ref = BertModel(tiny_config(unpad=True)).eval(), BertModel(tiny_config()).eval()

    def fast_path_calls(model, *args, **kwargs):
        calls.clear()
        with torch.no_grad():
            assert model(*args, **kwargs).last_hidden_state.shape == (3, 10, 32)
        return len(calls)

    assert fast_path_calls(fast, ids, mask, types) == 1 and torch.equal(calls[0], mask)
    assert fast_path_calls(fast, ids, torch.ones_like(mask), types) == 0
    assert fast_path_calls(fast, ids, None, types) == 0
    assert fast_path_calls(fast, ids, mask, types, output_attentions=True) == 0
    assert fast_path_calls(ref, ids, mask, types) == 0
