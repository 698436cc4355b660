"""The simple baselines every result is shown beside: the majority class, and multinomial
logistic regression (softmax regression) with an L2 penalty, fitted by L-BFGS, written in
PyTorch; on it, the bag-of-words classifier (S29).

`SoftmaxRegression` takes any (S, F) feature matrix, dense or sparse: the frozen-feature probes
(minibert/run/probes.py) fit it on an encoder's hidden states. `BagOfWords` is one such
regression on 0/1 word features. Its vocabulary comes from the training split ONLY (a word first
seen in validation or test maps to [UNK], id 0). A text is the 0/1 vector of the words it
contains; the model is W x + b, fitted on the whole training pool at once by L-BFGS with a preset
maximum number of iterations; each fit records the number it actually ran. One rule picks the
penalty everywhere: the best validation accuracy, the larger penalty on a tie (`best`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

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


class SoftmaxRegression:
    """logits = x W + b on (S, F) features x (dense or sparse); K labels."""

    def __init__(self, num_features: int, num_labels: int):
        self.W = torch.zeros(num_features, num_labels, requires_grad=True)  # (F, K)
        self.b = torch.zeros(num_labels, requires_grad=True)                # (K,)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.sparse.mm(x, self.W) if x.is_sparse else x @ self.W) + self.b  # (S, K)

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

    @torch.no_grad()
    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """(S,) the label of highest logit for each row of the features x."""
        return self.logits(x).argmax(-1)

    def num_params(self) -> int:
        return self.W.numel() + self.b.numel()


@dataclass
class Fit:
    """One penalty of the grid: the fitted model, its validation accuracy, the L-BFGS iterations run."""

    l2: float
    model: SoftmaxRegression
    valid_acc: float
    iterations: int


def fits(make: Callable[[], SoftmaxRegression], fit_on: Callable[[SoftmaxRegression], tuple],
         valid_accuracy: Callable[[SoftmaxRegression], float], l2_grid: tuple[float, ...] = L2_GRID,
         max_iter: int = MAX_ITER) -> Iterator[Fit]:
    """One fit per penalty of `l2_grid`: make() a fresh model, fit it on fit_on(model) = (x, y),
    score it with valid_accuracy(model) on the VALIDATION split."""
    for l2 in l2_grid:
        model = make()
        iterations = model.fit(*fit_on(model), l2, max_iter)
        yield Fit(l2, model, float(valid_accuracy(model)), iterations)


def best(grid: list[Fit]) -> Fit:
    """The rule that picks the penalty: the best validation accuracy, the larger penalty on a tie."""
    return max(grid, key=lambda f: (f.valid_acc, f.l2))


class BagOfWords(SoftmaxRegression):
    def __init__(self, train_texts: list[str], num_labels: int):
        counts = Counter(w for t in train_texts for w in words(t))
        self.vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(sorted(counts))}}
        super().__init__(len(self.vocab), num_labels)  # W (V, K), b (K,)

    def features(self, texts: list[str]) -> torch.Tensor:
        """(S, V) 0/1, sparse: which vocabulary words each text contains ([UNK] for any other word)."""
        rows, cols = [], []
        for i, t in enumerate(texts):
            ids = sorted({self.vocab.get(w, 0) for w in words(t)})
            rows += [i] * len(ids)
            cols += ids
        return torch.sparse_coo_tensor(torch.tensor([rows, cols], dtype=torch.long).reshape(2, -1),
                                       torch.ones(len(cols)), (len(texts), len(self.vocab)),
                                       check_invariants=True).coalesce()

    def predict(self, texts: list[str]) -> torch.Tensor:
        return self.classify(self.features(texts))

    @classmethod
    def fits(cls, train: tuple[list[str], torch.Tensor], valid: tuple[list[str], torch.Tensor], num_labels: int,
             l2_grid: tuple[float, ...] = L2_GRID, max_iter: int = MAX_ITER) -> Iterator[Fit]:
        """One fit per penalty on the (texts, labels) of `train` (each builds its own features),
        scored on `valid`."""
        return fits(lambda: cls(train[0], num_labels), lambda bow: (bow.features(train[0]), train[1]),
                    lambda bow: (bow.predict(valid[0]) == valid[1]).float().mean(), l2_grid, max_iter)

    @classmethod
    def tuned(cls, train: tuple[list[str], torch.Tensor], valid: tuple[list[str], torch.Tensor], num_labels: int,
              l2_grid: tuple[float, ...] = L2_GRID, max_iter: int = MAX_ITER) -> Fit:
        """The grid's fits, and the one the validation split picks."""
        return best(list(cls.fits(train, valid, num_labels, l2_grid, max_iter)))
