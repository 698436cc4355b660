"""The simple baselines every result is shown beside: the majority class, and bag-of-words
logistic regression (S29), written in PyTorch.

The vocabulary comes from the training split ONLY (a word first seen in validation or test
maps to [UNK], id 0). A text is the 0/1 vector of the words it contains; the model is softmax
regression W x + b with an L2 penalty, fitted on the whole training pool at once by L-BFGS with
a preset maximum number of iterations; each fit records the number it actually ran.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn.functional as F

L2_GRID = (1e-4, 1e-3, 1e-2)  # the penalty, picked on validation
MAX_ITER = 100                # L-BFGS iterations at most (S29's preset maximum)
MAX_WEIGHTS = 2_000_000       # (V + 1) x K weights at most: L-BFGS keeps ~40 copies of them
WORD = re.compile(r"[a-z0-9']+|[^\sa-z0-9']")  # lower-cased words, and punctuation marks one by one


def majority_class(train_labels: torch.Tensor, num_labels: int) -> int:
    """The label most frequent in the training split (the smaller id on a tie)."""
    return int(torch.bincount(train_labels, minlength=num_labels).argmax())


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def num_weights(train_texts: list[str], num_labels: int) -> int:
    """The size of W, (V + 1) x K with [UNK], counted before anything is allocated."""
    return (1 + len({w for t in train_texts for w in words(t)})) * num_labels


@dataclass
class Fit:
    """One penalty of the grid: the fitted model, its validation accuracy, the L-BFGS iterations run."""

    l2: float
    model: "BagOfWords"
    valid_acc: float
    iterations: int


class BagOfWords:
    def __init__(self, train_texts: list[str], num_labels: int):
        counts = Counter(w for t in train_texts for w in words(t))
        self.vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(sorted(counts))}}
        self.W = torch.zeros(len(self.vocab), num_labels, requires_grad=True)  # (V, K)
        self.b = torch.zeros(num_labels, requires_grad=True)                   # (K,)

    def features(self, texts: list[str]) -> torch.Tensor:
        """(N, V) 0/1, sparse: which vocabulary words each text contains ([UNK] for any other word)."""
        rows, cols = [], []
        for i, t in enumerate(texts):
            ids = sorted({self.vocab.get(w, 0) for w in words(t)})
            rows += [i] * len(ids)
            cols += ids
        return torch.sparse_coo_tensor(torch.tensor([rows, cols], dtype=torch.long).reshape(2, -1),
                                       torch.ones(len(cols)), (len(texts), len(self.vocab)),
                                       check_invariants=True).coalesce()

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(x, self.W) + self.b                              # (N, K)

    def fit(self, x: torch.Tensor, y: torch.Tensor, l2: float, max_iter: int) -> int:
        """L-BFGS on mean cross-entropy + l2/2 |W|^2, from zeros; returns the iterations run
        (<= max_iter: it stops earlier once the gradient or the loss change is tiny)."""
        # max_eval is generous (the line search evaluates several times per iteration), so that
        # the iteration cap is the one that binds
        opt = torch.optim.LBFGS([self.W, self.b], lr=1.0, max_iter=max_iter, max_eval=25 * max_iter,
                                history_size=20, line_search_fn="strong_wolfe", tolerance_grad=1e-6,
                                tolerance_change=1e-9)

        def closure():
            opt.zero_grad()
            loss = F.cross_entropy(self.logits(x), y) + 0.5 * l2 * (self.W ** 2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        return int(opt.state[self.W]["n_iter"])

    @classmethod
    def fits(cls, train: tuple[list[str], torch.Tensor], valid: tuple[list[str], torch.Tensor], num_labels: int,
             l2_grid: tuple[float, ...] = L2_GRID, max_iter: int = MAX_ITER) -> Iterator[Fit]:
        """One fit per penalty of `l2_grid` on the (texts, labels) of `train`, scored on `valid`."""
        for l2 in l2_grid:
            bow = cls(train[0], num_labels)
            iterations = bow.fit(bow.features(train[0]), train[1], l2, max_iter)
            yield Fit(l2, bow, float((bow.predict(valid[0]) == valid[1]).float().mean()), iterations)

    @staticmethod
    def best(fits: list[Fit]) -> Fit:
        """The rule that picks the penalty: the best validation accuracy, the larger penalty on a tie."""
        return max(fits, key=lambda f: (f.valid_acc, f.l2))

    @classmethod
    def tuned(cls, train: tuple[list[str], torch.Tensor], valid: tuple[list[str], torch.Tensor], num_labels: int,
              l2_grid: tuple[float, ...] = L2_GRID, max_iter: int = MAX_ITER) -> Fit:
        """The grid's fits, and the one the validation split picks."""
        return cls.best(list(cls.fits(train, valid, num_labels, l2_grid, max_iter)))

    def num_params(self) -> int:
        return self.W.numel() + self.b.numel()

    @torch.no_grad()
    def predict(self, texts: list[str]) -> torch.Tensor:
        return self.logits(self.features(texts)).argmax(-1)
