"""The masked-language-model loss (S13-S16; the S-numbers are defined in docs/spec.md)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100  # label of every position that is not a prediction target


class NoMaskedTokensError(ValueError):
    """A batch without a single MLM target: its loss would be 0/0 (S15)."""


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = IGNORE_INDEX,
             check: bool = True) -> torch.Tensor:
    """Mean of -log p(true token) over the selected positions of the WHOLE batch.

    logits: (B, T, V) or (N, V); labels: (B, T) or (N,), `ignore_index` where not selected.
    The denominator is the number of selected positions in the batch (S14): not the batch
    size, not the number of stored positions; a row without targets adds nothing.
    S13: two targets with p = 0.5 and 0.25 give -(log 0.5 + log 0.25) / 2 = 1.0397208.
    A batch with no target raises NoMaskedTokensError (S15): never NaN, never 0.

    check=False skips the two checks that read values (the target count and the label range),
    so the loss needs no host sync and compiles into a static graph: the caller vouches for at
    least one target (mask_batch guarantees one per row with a candidate).
    """
    V = logits.shape[-1]
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"mlm_loss: logits {tuple(logits.shape)} do not match labels "
                         f"{tuple(labels.shape)}; expected logits = labels.shape + (V,)")
    logits = logits.reshape(-1, V)     # (B*T, V)
    labels = labels.reshape(-1)        # (B*T,)
    is_target = labels != ignore_index  # (B*T,)
    n_targets = is_target.sum()         # a tensor: reading it is a host sync, skipped when check=False
    if check:
        n_targets = int(n_targets)
        if n_targets == 0:
            raise NoMaskedTokensError(
                f"mlm_loss: the batch has no target position (every label is {ignore_index}); "
                "the loss would be 0/0. Mask at least one token per batch (mask_batch does).")
        targets = labels[is_target]
        if targets.min() < 0 or targets.max() >= V:
            raise ValueError(f"mlm_loss: labels must be token ids in [0, {V}) or {ignore_index}; "
                             f"got values from {int(targets.min())} to {int(targets.max())}")
    total = F.cross_entropy(logits, labels, ignore_index=ignore_index, reduction="sum")
    return total / n_targets
