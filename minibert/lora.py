"""LoRA (Hu et al. 2021): a frozen Linear W plus a trainable low-rank update (alpha / r) B A.

    y = x W^T + b + (alpha / r) * dropout(x) A^T B^T,   A: (r, in), B: (out, r)

B starts at zero, so training starts from the pretrained function exactly. `merge_lora` folds
(alpha / r) B A into W and puts the plain Linear back: the merged model has the original
state-dict layout (and loads in `transformers`) and gives the same outputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        if rank < 1:
            raise ValueError(f"LoRA rank must be at least 1, got {rank}")
        self.base = base
        self.base.weight.requires_grad_(False)
        if self.base.bias is not None:
            self.base.bias.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))   # (r, in)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))  # (out, r)
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / rank
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        update = self.dropout(x) @ self.lora_A.T @ self.lora_B.T  # (..., out)
        return self.base(x) + self.scaling * update

    def merged(self) -> nn.Linear:
        """The plain Linear with W + (alpha / r) B A."""
        with torch.no_grad():
            self.base.weight += self.scaling * (self.lora_B @ self.lora_A)
        self.base.weight.requires_grad_(True)
        if self.base.bias is not None:
            self.base.bias.requires_grad_(True)
        return self.base


# the one default of every LoRA in the project: the attention query and value projections of every
# layer (the LoRA paper's choice), and alpha = rank (a scaling alpha / r of 1)
DEFAULT_TARGETS = ("attention.query", "attention.value")


def add_lora(model: nn.Module, rank: int, alpha: float | None = None, dropout: float = 0.0,
             targets: tuple[str, ...] = DEFAULT_TARGETS) -> list[str]:
    """Wrap every Linear whose name ends with one of `targets`; alpha defaults to the rank.
    Returns the wrapped module names."""
    alpha = float(rank if alpha is None else alpha)
    names = lora_targets(model, targets)
    for name in names:
        parent, leaf = _parent(model, name)
        setattr(parent, leaf, LoRALinear(getattr(parent, leaf), rank, alpha, dropout))
    return names


def lora_targets(model: nn.Module, targets: tuple[str, ...]) -> list[str]:
    """The names of `model`'s Linear modules that end with one of `targets`: a ValueError when none
    does (a model on the meta device, sizes without weights, is enough to ask before loading one)."""
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and n.endswith(targets)]
    if not names:
        raise ValueError(f"no Linear module ends with {targets}; module names look like "
                         f"{[n for n, m in model.named_modules() if isinstance(m, nn.Linear)][:4]}")
    return names


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every adapter into its Linear, in place; returns the model."""
    for name, module in list(model.named_modules()):
        if isinstance(module, LoRALinear):
            parent, leaf = _parent(model, name)
            setattr(parent, leaf, module.merged())
    return model


def _parent(model: nn.Module, name: str):
    *path, leaf = name.split(".")
    parent = model
    for part in path:
        parent = getattr(parent, part)
    return parent, leaf
