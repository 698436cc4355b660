"""The MLM loss: S13, S14, S15, S16/S25."""

import math

import pytest
import torch
import torch.nn.functional as F

from minibert import IGNORE_INDEX, NoMaskedTokensError, mlm_loss

from conftest import assert_close


def test_s13_two_targets_by_hand():
    """S13: p(true) = 0.5 and 0.25 at the two targets: -(log 0.5 + log 0.25) / 2
    = (0.6931472 + 1.3862944) / 2 = 1.0397208. Logits are log-probabilities, so softmax
    gives back exactly those p (to a few float32 roundings: ~4 u x 1.4 = 3.4e-7, plus the hand
    value's 7-decimal rounding < 5e-8: atol 1e-6; a wrong denominator is off by 0.35 or more)."""
    logits = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [0.25, 0.25, 0.5], [0.1, 0.1, 0.8]]]))
    labels = torch.tensor([[0, 1, -100]])  # (B=1, T=3); the third position is not a target
    assert_close(mlm_loss(logits, labels), 1.0397208, atol=1e-6, what="S13 loss")


def test_s14_denominator_is_the_number_of_targets_in_the_batch():
    """S14: row 0 has one target with p = 0.5, row 1 has none. The loss is log 2 / 1 =
    0.6931472, not log 2 / 2 (batch size) = 0.3466 nor log 2 / 6 (stored positions). atol 1e-6: a
    few float32 roundings of values <= 1.4 (~4 u x 1.4 = 3.4e-7), against the 0.35 of a wrong denominator."""
    probs = torch.full((2, 3, 4), 0.25)
    probs[0, 1] = torch.tensor([0.5, 0.25, 0.125, 0.125])
    labels = torch.tensor([[-100, 0, -100], [-100, -100, -100]])
    assert_close(mlm_loss(probs.log(), labels), math.log(2), atol=1e-6, what="S14 loss")


def test_s15_no_target_raises_never_nan_or_zero():
    """S15: the MLM loss is (sum of -log p over the targets) / (number of targets). A batch whose
    labels are all IGNORE_INDEX has no target, so that is 0 / 0: an undefined number, which a
    plain mean turns into NaN and a guarded sum / max(n, 1) into a silent 0, either of which would
    poison or fake a training step. mlm_loss instead raises NoMaskedTokensError (a ValueError)
    whose message names the 0/0, for the dense (B, T, V) form and for the sparse (N, V) form
    with N = 0 that the masked_only head would hand it."""
    logits, labels = torch.zeros(2, 3, 5), torch.full((2, 3), IGNORE_INDEX)
    with pytest.raises(NoMaskedTokensError, match="no target .* 0/0"):
        mlm_loss(logits, labels)
    with pytest.raises(NoMaskedTokensError, match="no target"):
        mlm_loss(torch.zeros(0, 5), torch.zeros(0, dtype=torch.long))
    assert issubclass(NoMaskedTokensError, ValueError)


def test_s16_s25_flattened_by_hand_equals_cross_entropy():
    """S16/S25: gather -log softmax at the selected positions, average by hand: equals
    F.cross_entropy(..., ignore_index=-100) and mlm_loss. The three sum in their own orders: each
    -log p's 50-term normaliser (terms <= 1) moves by <= 50 u = 3.0e-6, and the mean of the 13
    values (<= 6.6, mean 5.3) by <= 13 u x 5.3 = 4.1e-6: atol 1e-5 (1 ulp of 5.3, 4.8e-7, measured);
    a wrong denominator or a counted ignored position moves it by 0.3 or more."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 16, 50, generator=g)
    labels = torch.randint(0, 50, (4, 16), generator=g)
    labels[torch.rand(4, 16, generator=g) > 0.15] = -100
    labels[0, 0] = 7
    sel = labels != -100
    by_hand = -(logits[sel].log_softmax(-1).gather(1, labels[sel][:, None])).mean()
    reference = F.cross_entropy(logits.view(-1, 50), labels.view(-1), ignore_index=-100)
    assert_close(mlm_loss(logits, labels), by_hand, atol=1e-5, what="vs by hand")
    assert_close(reference, by_hand, atol=1e-5, what="cross_entropy vs by hand")
    sparse = mlm_loss(logits[sel], labels[sel])  # (N, V) and (N,), as the sparse head gives
    assert_close(sparse, by_hand, atol=1e-5, what="sparse form")


def test_bad_shapes_and_labels_raise():
    with pytest.raises(ValueError, match="do not match"):
        mlm_loss(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"token ids in \[0, 5\)"):
        mlm_loss(torch.zeros(2, 3, 5), torch.tensor([[5, -100, -100], [0, 1, 2]]))
