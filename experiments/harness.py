"""What every controlled comparison shares (S29-S32, docs/spec.md): the data, held fixed once;
padding and truncation; the training loop; and the meters every row reports (S32).

Held equal across the methods of a study: the labelled splits (one seeded subsample, the same
for every method and seed), the checkpoint and its tokenisation, the seeds, the number of
updates and of samples per update, the learning-rate grid and the rule that picks from it
(best validation accuracy of seed 0, the smaller rate on a tie), and the test procedure: the
test split is scored once per configuration, after the rate is fixed.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import gc
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field, replace

import torch
import torch.nn as nn

from data.prepare import fetch_minilm, labelled_folder
from minibert import BertConfig, BertModel, CheckpointError, load_tokenizer
from minibert.checkpoint import NOT_FINITE, overflowing, read_config
from minibert.model import init_weights
from minibert.run import die
from minibert.run.classification import classifier_on, logits_of, set_trainable
from minibert.run.finetuning import BestEpoch, Recipe, epoch_batches, fine_tune
from minibert.run.folders import resolve_checkpoint, said_for_its_run
from minibert.run.labelled import read_split, scores, split_files, token_ids, truncate
from minibert.run.probes import twin_not_finite
from minibert.text import pad_batch

# ---- data -----------------------------------------------------------------------------------


@dataclass
class Split:
    texts: list[str]
    labels: torch.Tensor  # (S,)


@dataclass
class Task:
    """The English movie-review sentiment splits, subsampled ONCE with seed 0: every method,
    seed and configuration of a study sees the same training pool, validation and test rows."""

    train: Split
    valid: Split
    test: Split
    label_names: list[str]

    @classmethod
    def load(cls, n_train: int, n_valid: int, n_test: int, data: str = "en") -> "Task":
        """`data`: en, zh or a folder, as finetune.py's --data."""
        files = split_files(labelled_folder(data))
        raw = {s: read_split(files[s]) for s in ("train", "valid", "test")}
        names = sorted({label for _, label in raw["train"]})
        ids = {name: i for i, name in enumerate(names)}
        splits = {}
        for s, n in (("train", n_train), ("valid", n_valid), ("test", n_test)):
            rows = raw[s]
            keep = torch.randperm(len(rows), generator=torch.Generator().manual_seed(0))[:n].sort().values.tolist()
            splits[s] = Split([rows[i][0] for i in keep], torch.tensor([ids[rows[i][1]] for i in keep]))
        return cls(splits["train"], splits["valid"], splits["test"], names)


@dataclass
class Encoder:
    """A pretrained checkpoint and its tokenizer; `tokens` holds each split's ids, untruncated."""

    name: str
    path: str
    tokens: dict[str, list[list[int]]] = field(default_factory=dict)
    pad_id: int = 0
    pretrained: bool = True  # False: the checkpoint's config and tokenizer, its weights never loaded

    @classmethod
    def open(cls, spec: str, task: Task) -> "Encoder":
        """spec: `minilm` (the real pretrained MiniLM-L6), a checkpoint / train_mlm.py run folder,
        or `random:FOLDER`: that checkpoint's config and tokenizer with freshly initialised weights."""
        pretrained = not spec.startswith("random:")
        folder = spec if pretrained else spec[len("random:"):]
        if folder == "minilm":
            name, path = "MiniLM-L6", fetch_minilm()
        else:
            path = resolve_checkpoint(folder)
            if not os.path.isfile(os.path.join(path, "config.json")):
                die(f"--encoders: {folder} is neither `minilm` nor a checkpoint folder; "
                    "pretrain one first with `make run` (it writes runs/mlm-en)")
            name = f"minibert {os.path.normpath(folder)}"
        if not pretrained:
            name = f"random init ({name}'s config and tokenizer)"
        try:  # a damaged encoder is one line now, not a traceback in the middle of a study
            tok = load_tokenizer(path)
            if pretrained:
                model = BertModel.from_pretrained(path)
            else:  # a draw like the studies' own (each from its seed), to look at its numbers only
                config = read_config(path)[0]
                with torch.random.fork_rng(devices=[]):
                    model = BertModel(config)
        except (CheckpointError, FileNotFoundError) as e:
            die(f"--encoders {spec}: {said_for_its_run(path, e)}")
        enc = cls(name, path, pad_id=tok.token_to_id("[PAD]") or 0, pretrained=pretrained)
        for s in ("train", "valid", "test"):
            enc.tokens[s] = token_ids(tok, getattr(task, s).texts)  # untruncated: each study cuts its own
        # finite weights too large for float32 (or a random init drawn that large): said now, before any study prints
        first = truncate(enc.tokens["train"][0], model.config.max_position_embeddings)
        with torch.no_grad():
            out = model.eval()(torch.tensor([first]))                       # (1, T, C) and (1, C)
        if overflowing(out.last_hidden_state) or (out.pooler_output is not None and overflowing(out.pooler_output)):
            die(f"--encoders {spec}: {'the model ' + NOT_FINITE if pretrained else twin_not_finite(model.config)}")
        return enc

    def backbone(self, unpad: bool = True, dropout: float = 0.1) -> BertModel:
        """The encoder, loaded (or, for a random init, initialised from the global seed)."""
        overrides = dict(use_sdpa=True, unpad=unpad, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
        if self.pretrained:
            return BertModel.from_pretrained(self.path, **overrides)
        return BertModel(replace(BertConfig.load(self.path), **overrides))


def pad(seqs: list[list[int]], pad_id: int, max_length: int, padding: str):
    """(ids, attention_mask), each (B, T): rows truncated to max_length, T the longest of them
    ("dynamic") or max_length ("global")."""
    return pad_batch([truncate(s, max_length) for s in seqs], pad_id, max_length if padding == "global" else None)


def token_counts(seqs: list[list[int]], batch_size: int, max_length: int, padding: str) -> dict:
    """S31 bookkeeping for `seqs` batched in order: real (effective) and stored tokens, padding
    ratio, and the share of samples and of tokens lost to truncation."""
    effective = stored = cut_samples = cut_tokens = raw_tokens = 0
    for i in range(0, len(seqs), batch_size):
        rows = seqs[i:i + batch_size]
        kept = [min(len(r), max_length) for r in rows]
        effective += sum(kept)
        stored += len(rows) * (max(kept) if padding == "dynamic" else max_length)
        cut_samples += sum(len(r) > max_length for r in rows)
        cut_tokens += sum(max(0, len(r) - max_length) for r in rows)
        raw_tokens += sum(len(r) for r in rows)
    return {"effective_tokens": effective, "stored_tokens": stored, "padding_ratio": 1 - effective / stored,
            "truncated_samples": cut_samples / len(seqs), "truncated_tokens": cut_tokens / raw_tokens}


def length_bucketed(batches: list[list[int]], lengths: list[int], window: int = 50) -> list[list[int]]:
    """The same samples, re-batched so that a batch holds similar lengths: each window of
    `window` batches is sorted by length and cut again; the batch order is kept."""
    out = []
    for w in range(0, len(batches), window):
        chunk = sorted((i for b in batches[w:w + window] for i in b), key=lambda i: lengths[i])
        size = len(batches[w])
        out += [chunk[k:k + size] for k in range(0, len(chunk), size)]
    return out


# ---- meters (S32) ---------------------------------------------------------------------------


class PassCounter:
    """Counts the encoder's forward passes, and the backward passes that reach its output."""

    def __init__(self, encoder: nn.Module):
        self.forward = self.backward = 0
        self._handle = encoder.register_forward_hook(self._on_forward)

    def _on_forward(self, module, args, output):
        self.forward += 1
        if output.last_hidden_state.requires_grad:
            output.last_hidden_state.register_hook(self._on_backward)

    def _on_backward(self, grad):
        self.backward += 1

    @contextlib.contextmanager
    def paused(self):
        """Passes inside the block (validation between epochs) are not counted."""
        counts = self.forward, self.backward
        yield
        self.forward, self.backward = counts

    def close(self) -> None:
        self._handle.remove()


class PeakMemory:
    """Peak resident memory (MB) of this process inside a `with` block.

    Linux: freed heap is first handed back to the OS (malloc_trim), then the kernel's high-water
    mark VmHWM is reset (/proc/self/clear_refs) and read at the end, so each configuration gets
    its own peak: everything resident, Python, torch and the data included. Elsewhere the
    process's lifetime peak (ru_maxrss), which is never reset: `kind` says which."""

    def __enter__(self):
        gc.collect()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.kind = "peak RSS of the configuration (Linux VmHWM, reset before it)"
        except OSError:
            self.kind = "peak RSS of the process so far (ru_maxrss, not reset)"
        return self

    def __exit__(self, *exc):
        self.mb = self._read()

    def _read(self) -> float:
        try:
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
        except (OSError, StopIteration):
            import resource
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return peak / 2 ** 20 if sys.platform == "darwin" else peak / 1024


def median_time(fn, repeats: int = 3) -> float:
    """Median seconds of `repeats` calls of fn, after one untimed warm-up call when repeats > 1."""
    if repeats > 1:
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# ---- the neural methods ---------------------------------------------------------------------


@dataclass
class Budget:
    """The same for every method of a study: updates x samples per update, and the lr grid."""

    updates: int
    batch_size: int
    lr_grid: tuple[float, ...]
    max_length: int = 128
    padding: str = "dynamic"
    bucketed: bool = False
    timing_repeats: int = 3  # prediction timing: median of this many calls after one warm-up
    head: str = "cls"        # FineTuned's head: "cls" ([CLS] -> Linear) or "pooler" (HF's)
    patience: int = 0        # 0: the last update's model; else finetune.py's rule (FineTuned.train)

    def recipe(self, n: int, lr: float, seed: int) -> Recipe:
        """`updates` updates over n training examples, as the shared loop (finetune.py's) counts
        them: whole seeded epochs of batch_size (the last batch of each shorter), cut at `updates`."""
        epochs = math.ceil(self.updates / math.ceil(n / self.batch_size))
        return Recipe(self.head, lr, epochs, self.patience or epochs, self.batch_size, self.updates, seed=seed)


class FineTuned:
    """Full fine-tuning or LoRA: a new head (`head`, classification.classifier_on, as finetune.py
    builds it) on the encoder; with `lora_rank`, only the adapters (minibert.lora's default
    targets and alpha) and the head train."""

    def __init__(self, encoder: Encoder, seed: int, lora_rank: int = 0, unpad: bool = True, device: str = "cpu",
                 head: str = "cls"):
        torch.manual_seed(seed)
        self.encoder = encoder
        self.device = torch.device(device)
        self.model = classifier_on(encoder.backbone(unpad=unpad), head, 2)
        self.lora_modules = set_trainable(self.model, "lora" if lora_rank else "full", lora_rank)
        self.model.to(self.device)

    def params(self) -> tuple[int, int]:
        ps = list(self.model.parameters())
        return sum(p.numel() for p in ps), sum(p.numel() for p in ps if p.requires_grad)

    def train(self, task: Task, budget: Budget, lr: float, seed: int) -> dict:
        """The shared loop (minibert.run.finetuning) for budget.updates updates; with
        budget.patience, finetune.py's epoch rule on the validation split (the best epoch's
        weights are kept: valid_acc and best_epoch are theirs), whose time counts in train_s but
        whose encoder passes do not."""
        toks, labels = self.encoder.tokens["train"], task.train.labels
        recipe, lengths = budget.recipe(len(toks), lr, seed), [len(t) for t in toks]

        def batches_of(epoch: int) -> list[torch.Tensor]:
            batches = epoch_batches(len(toks), budget.batch_size, seed, epoch)
            if not budget.bucketed:
                return batches
            return [torch.tensor(b) for b in length_bucketed([b.tolist() for b in batches], lengths)]

        def train_logits(rows: torch.Tensor) -> torch.Tensor:
            ids, mask = pad([toks[i] for i in rows.tolist()], self.encoder.pad_id, budget.max_length, budget.padding)
            return self.logits_on_device(ids, mask)                              # (B, 2)

        counter, best, kept = PassCounter(self.model.bert), BestEpoch(budget.patience), {}

        def keep_best(e) -> bool:
            with counter.paused():
                acc = scores(self.predict(self.encoder.tokens["valid"], budget.max_length, budget.padding),
                             task.valid.labels, 2)["acc"]
            if best.improved(e.epoch, acc):
                kept["state"] = copy.deepcopy(self.model.state_dict())
            return best.stop

        with PeakMemory() as mem:
            t0 = time.perf_counter()
            last = fine_tune(self.model, train_logits, labels, recipe, keep_best if budget.patience else None,
                             batches_of)
            seconds = time.perf_counter() - t0
        counter.close()
        used = [b for e in range(1, recipe.epochs + 1) for b in batches_of(e)][:recipe.steps(len(toks))]
        stats = token_counts([toks[i] for b in used for i in b.tolist()], budget.batch_size, budget.max_length,
                             budget.padding)
        rec = {"train_s": seconds, "final_loss": last.train_loss, "peak_memory_mb": mem.mb, "memory_kind": mem.kind,
               "encoder_forward": counter.forward, "encoder_backward": counter.backward, "train_tokens": stats}
        if budget.patience:
            self.model.load_state_dict(kept["state"])
            rec.update(valid_acc=best.acc, best_epoch=best.epoch, epochs_run=last.epoch)
        return rec

    @torch.no_grad()
    def predict(self, seqs: list[list[int]], max_length: int, padding: str, batch_size: int = 64) -> torch.Tensor:
        self.model.eval()
        out = []
        for i in range(0, len(seqs), batch_size):
            ids, mask = pad(seqs[i:i + batch_size], self.encoder.pad_id, max_length, padding)
            out.append(self.logits_on_device(ids, mask).argmax(-1).cpu())
        return torch.cat(out)

    @torch.no_grad()
    def logits(self, seqs: list[list[int]], max_length: int, padding: str) -> torch.Tensor:
        self.model.eval()
        ids, mask = pad(seqs, self.encoder.pad_id, max_length, padding)
        return self.logits_on_device(ids, mask).cpu()

    def logits_on_device(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, 2) logits of the (B, T) ids and mask, on the model's device."""
        return logits_of(self.model, {"input_ids": ids.to(self.device), "attention_mask": mask.to(self.device)})


class FrozenFeatures:
    """Frozen encoder: its [CLS] vectors are computed ONCE (encoder in eval mode, no grad) and
    cached; only a Linear head, initialised as BertForClassification's, trains on them."""

    def __init__(self, encoder: Encoder, max_length: int = 128):
        self.encoder = encoder
        self.max_length = max_length
        self.bert = encoder.backbone().eval()
        self.bert.pooler = None  # the [CLS] vector, not the pooler, goes to the head (as in BertForClassification)
        self.features: dict[str, torch.Tensor] = {}
        counter = PassCounter(self.bert)
        t0 = time.perf_counter()
        with torch.no_grad():
            for split, seqs in encoder.tokens.items():
                self.features[split] = torch.cat([self.cls_vectors(seqs[i:i + 64]) for i in range(0, len(seqs), 64)])
        counter.close()
        self.cache = {"cache_s": time.perf_counter() - t0, "encoder_forward": counter.forward,
                      "encoder_backward": counter.backward,
                      "cache_mb": sum(f.numel() * f.element_size() for f in self.features.values()) / 2 ** 20}

    def cls_vectors(self, seqs: list[list[int]]) -> torch.Tensor:
        ids, mask = pad(seqs, self.encoder.pad_id, self.max_length, "dynamic")
        return self.bert(ids, mask).last_hidden_state[:, 0]                          # (B, C)

    def new_head(self, seed: int) -> nn.Linear:
        """Linear(C, 2) initialised as BertForClassification's classifier, from `seed`."""
        torch.manual_seed(seed)
        head = nn.Linear(self.bert.config.hidden_size, 2)
        init_weights(head, self.bert.config.initializer_range)
        return head

    def train(self, head: nn.Linear, task: Task, budget: Budget, lr: float, seed: int) -> dict:
        """The shared loop (minibert.run.finetuning) over the cached features, budget.updates updates."""
        x, y = self.features["train"], task.train.labels  # (S, C), (S,)
        counter = PassCounter(self.bert)
        with PeakMemory() as mem:
            t0 = time.perf_counter()
            last = fine_tune(head, lambda rows: head(x[rows]), y, budget.recipe(len(y), lr, seed))
            seconds = time.perf_counter() - t0
        counter.close()
        return {"train_s": seconds, "final_loss": last.train_loss, "peak_memory_mb": mem.mb, "memory_kind": mem.kind,
                "encoder_forward": counter.forward, "encoder_backward": counter.backward}

    @torch.no_grad()
    def predict_from_text_ids(self, head: nn.Linear, seqs: list[list[int]]) -> torch.Tensor:
        """New inputs are not cached: the encoder runs, then the head (what prediction costs)."""
        return head(self.cls_vectors(seqs)).argmax(-1)


def std(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def mean(values: list[float]) -> float:
    return sum(values) / len(values)
