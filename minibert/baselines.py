"""The simple baselines results are shown beside: multinomial logistic regression (softmax
regression) with an L2 penalty, fitted by L-BFGS, written in PyTorch; and on it the bag-of-words
classifier every fine-tuning result is shown beside (S29).

`SoftmaxRegression` takes any (N, F) feature matrix, dense or sparse: the frozen-feature probes
of minibert/probes.py fit it on an encoder's hidden states. `BagOfWords` is one such regression on
0/1 word features. Its vocabulary comes from the training split ONLY (a word first seen in
validation or test maps to [UNK], id 0). A text is the 0/1 vector of the words it contains; the
model is W x + b, fitted on the whole training pool at once by L-BFGS with a preset maximum
number of iterations; the number it actually ran is reported.
"""

from __future__ import annotations

import re
from collections import Counter

import torch
import torch.nn.functional as F

L2_GRID = (1e-4, 1e-3, 1e-2)  # the penalty, picked on validation
MAX_ITER = 100                # L-BFGS iterations at most (S29's preset maximum)
WORD = re.compile(r"[a-z0-9']+|[^\sa-z0-9']")  # lower-cased words, and punctuation marks one by one


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


class SoftmaxRegression:
    """logits = x W + b on (N, F) features x (dense or sparse); K labels."""

    def __init__(self, num_features: int, num_labels: int):
        self.W = torch.zeros(num_features, num_labels, requires_grad=True)  # (F, K)
        self.b = torch.zeros(num_labels, requires_grad=True)                # (K,)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.sparse.mm(x, self.W) if x.is_sparse else x @ self.W) + self.b  # (N, K)

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
        """(N,) the label of highest logit for each row of the features x."""
        return self.logits(x).argmax(-1)

    def num_params(self) -> int:
        return self.W.numel() + self.b.numel()


def pick_l2(fit, accuracy, l2_grid: tuple[float, ...]):
    """fit(l2) -> a fitted model, one per penalty of `l2_grid`; accuracy(model) -> its VALIDATION
    accuracy, which picks the penalty (the larger on a tie). Returns (model, penalty, its
    validation accuracy, {penalty: validation accuracy})."""
    fits = []
    for l2 in l2_grid:
        model = fit(l2)
        fits.append((accuracy(model), l2, model))
    acc, l2, model = max(fits, key=lambda f: (f[0], f[1]))
    return model, l2, acc, {f[1]: f[0] for f in fits}


class BagOfWords(SoftmaxRegression):
    def __init__(self, train_texts: list[str], num_labels: int):
        counts = Counter(w for t in train_texts for w in words(t))
        self.vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(sorted(counts))}}
        super().__init__(len(self.vocab), num_labels)  # W (V, K), b (K,)

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

    @classmethod
    def tuned(cls, train: tuple[list[str], torch.Tensor], valid: tuple[list[str], torch.Tensor], num_labels: int,
              l2_grid: tuple[float, ...] = L2_GRID, max_iter: int = MAX_ITER) -> tuple["BagOfWords", float, float]:
        """One fit per penalty of `l2_grid` on the (texts, labels) of `train`; the best validation
        accuracy picks it (the larger penalty on a tie). Returns (model, penalty, its validation accuracy)."""
        x = cls(train[0], num_labels).features(train[0])  # one vocabulary, so one feature matrix for all

        def fit(l2):
            bow = cls(train[0], num_labels)
            bow.fit(x, train[1], l2, max_iter)
            return bow

        bow, l2, acc, _ = pick_l2(fit, lambda bow: float((bow.predict(valid[0]) == valid[1]).float().mean()), l2_grid)
        return bow, l2, acc

    def predict(self, texts: list[str]) -> torch.Tensor:
        return self.classify(self.features(texts))
