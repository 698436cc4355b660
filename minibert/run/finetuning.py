"""The one fine-tuning loop of sentence classification, for finetune.py and for the studies
(experiments/harness.py): AdamW with fine-tuning's schedule, the seeded epoch order cut into
batches, the cross-entropy of each batch, a stop on a non-finite loss, and after each epoch a
callback (finetune.py: validation, metrics.jsonl, best/ and early stopping).

The same recipe, seed and data give the same computation whoever calls it: the pretraining
study's all-labels row is finetune.py's run, seed by seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..checkpoint import NOT_FINITE
from . import die
from .training import epoch_order, finetuning_optimizer, update


@dataclass(frozen=True)
class Recipe:
    """How a classifier fine-tunes. The defaults are finetune.py's and the pretraining study's:
    the [CLS] head at rate 1e-3 for 3 epochs, the best epoch on validation kept: the best
    validation accuracy (seed 0) of ten (head, rate, epochs) runs on `make run`'s checkpoint,
    heads cls and pooler, rates 1e-4 to 3e-3, 3 or 5 epochs (docs/lab/2026-12-02-finetune-recipe.md)."""

    head: str = "cls"           # "cls": [CLS] -> Linear; "pooler": HF's pooler (tanh) -> Linear
    lr: float = 1e-3            # peak rate: 10% linear warm-up, then linear decay to 0
    epochs: int = 3
    patience: int = 3           # epochs without a better validation accuracy before stopping
    batch_size: int = 32
    max_steps: int = 0          # 0: every epoch's batches; else at most this many updates
    weight_decay: float = 0.01
    fused: bool = True          # PyTorch's fused AdamW kernel (else the foreach one)
    seed: int = 0               # the data order (and, set by the caller, the head's init and dropout)

    def steps(self, n: int) -> int:
        """The updates over n training examples: epochs x ceil(n / batch size), capped by max_steps."""
        per_epoch = math.ceil(n / self.batch_size)
        return min(self.max_steps or math.inf, per_epoch * self.epochs)


MIN_STEPS = 100  # updates at least, when the epochs are not given: a small training split needs more than 3 epochs


def default_epochs(n: int, batch_size: int, epochs: int = Recipe.epochs, min_steps: int = MIN_STEPS) -> int:
    """The epochs over n training examples when none are asked for: `epochs`, or more on a small
    set, as many as give at least `min_steps` updates (240 examples, batch 32: 8 updates an epoch,
    13 epochs). Picked on validation: docs/finetuning.md."""
    return max(epochs, math.ceil(min_steps / math.ceil(n / batch_size)))


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int) -> list[torch.Tensor]:
    """Epoch `epoch` (1, 2, ...) of n examples: the seeded order (training.epoch_order) cut into
    (B,) index tensors of batch_size rows, the last one shorter when batch_size does not divide n."""
    order = epoch_order(n, seed, epoch)  # (n,)
    return list(order.split(batch_size))


@dataclass
class Epoch:
    """What the loop reports after an epoch: its number, the updates so far, the mean training
    loss over its examples and the learning rate the schedule has reached."""

    epoch: int
    step: int
    train_loss: float
    lr: float


def fine_tune(model: torch.nn.Module, logits_of, labels: torch.Tensor, recipe: Recipe, on_epoch_end=None,
              batches_of=None, progress: bool = False, on_not_finite=None) -> Epoch:
    """Train `model`'s parameters that require a gradient with `recipe`: logits_of(rows) gives
    the (B, K) logits of the training examples `rows` (a (B,) index tensor), labels (S,) are their
    label ids. Each epoch runs in training mode; after it on_epoch_end(Epoch) runs (it may
    evaluate), and True stops training. batches_of(epoch) replaces the seeded batches
    (epoch_batches), e.g. with length-bucketed ones. A non-finite loss stops the script with one
    line: on_not_finite(rows, step), when given, may first stop it with a cause other than the
    learning rate (the starting weights overflowing on those rows). Returns the last epoch's report."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    n, total = len(labels), recipe.steps(len(labels))
    optimizer, scheduler = finetuning_optimizer(trainable, recipe.lr, total, recipe.weight_decay, recipe.fused)
    batches_of = batches_of or (lambda epoch: epoch_batches(n, recipe.batch_size, recipe.seed, epoch))
    step, report = 0, None
    for epoch in range(1, recipe.epochs + 1):
        model.train()
        loss_sum, seen = 0.0, 0
        bar = tqdm(batches_of(epoch)[:total - step], desc=f"epoch {epoch}", disable=not progress, dynamic_ncols=True)
        for rows in bar:
            logits = logits_of(rows)                                             # (B, K)
            loss = F.cross_entropy(logits, labels[rows].to(logits.device))
            if not torch.isfinite(loss) and step == 0:  # before any update: the weights, not the rate
                die(f"the loss is {loss.item()} at the first step, before any update: the model {NOT_FINITE}")
            if not torch.isfinite(loss):
                if on_not_finite is not None:
                    on_not_finite(rows, step + 1)
                die(f"the loss became {loss.item()} at step {step + 1}; try a lower learning rate than {recipe.lr:g}")
            update(loss, trainable, optimizer, scheduler)
            step += 1
            loss_sum, seen = loss_sum + loss.item() * len(rows), seen + len(rows)
            bar.set_postfix(loss=f"{loss_sum / seen:.4f}")
        bar.close()
        report = Epoch(epoch, step, loss_sum / max(1, seen), scheduler.get_last_lr()[0])
        stop = on_epoch_end is not None and on_epoch_end(report)
        if stop or step >= total:
            break
    return report


class BestEpoch:
    """finetune.py's rule for the epoch kept (S19): the best validation accuracy so far wins (a
    tie keeps the earlier epoch); training stops after `patience` epochs without a better one."""

    def __init__(self, patience: int):
        self.patience = patience
        self.acc, self.epoch, self.stale = -1.0, 0, 0

    def improved(self, epoch: int, acc: float) -> bool:
        """Record epoch `epoch`'s validation accuracy; True when it is the best so far."""
        if acc > self.acc:
            self.acc, self.epoch, self.stale = acc, epoch, 0
            return True
        self.stale += 1
        return False

    @property
    def stop(self) -> bool:
        return self.stale >= self.patience
