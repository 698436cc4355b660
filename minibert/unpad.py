"""The padding-removal fast path behind `BertConfig(unpad=True)`.

A padding position changes nothing at a real one (S5), and every layer of BERT but attention
works token by token. So the N real tokens of a (B, T) batch are taken out once, before the
embeddings, and every Linear, LayerNorm, GELU and dropout runs on (N, C) instead of (B, T, C);
only attention puts them back on a (B, T') grid, T' being the batch's longest row. On sentences
padded to 128 tokens that is often a quarter of the work.

This module holds the bookkeeping, `RealTokens`: where the real tokens sit and how they go
to and from the grid. The path itself is `BertModel.forward_unpadded` in model.py: it reuses the
model's own modules, so the weights and the arithmetic are the reference path's. Real positions
get the reference path's numbers and gradients (tests/test_unpad.py), and padding positions
come back as zeros instead of the reference path's values there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class RealTokens:
    """Where the N real tokens of a (B, T) batch sit: row and column of each, in row-major order."""

    rows: torch.Tensor  # (N,)
    cols: torch.Tensor  # (N,)
    B: int
    T: int              # the grid's length: the longest row's last real column + 1

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "RealTokens":
        rows, cols = attention_mask.bool().nonzero(as_tuple=True)  # (N,), (N,)
        T = int(cols.max()) + 1 if cols.numel() else 1            # columns no row uses are dropped
        return cls(rows, cols, attention_mask.shape[0], T)

    def to_grid(self, x: torch.Tensor, T: int | None = None) -> torch.Tensor:
        """(N, C) -> (B, T, C), zeros at padding positions."""
        grid = x.new_zeros(self.B, T or self.T, x.shape[-1])
        return grid.index_put((self.rows, self.cols), x)

    def from_grid(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) -> (N, C)."""
        return x[self.rows, self.cols]
