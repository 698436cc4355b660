"""Sentence classification on a pretrained encoder: building the classifier from a checkpoint,
choosing what trains (full fine-tuning, a frozen encoder, or LoRA), evaluating, exporting.
"""

from __future__ import annotations

import copy
import os
import shutil

import torch
import torch.nn.functional as F

from ..checkpoint import weight_shapes
from ..files import fresh_folder
from ..lora import DEFAULT_TARGETS, add_lora, merge_lora
from ..model import BertForClassification, BertForSequenceClassification, BertModel
from .labelled import batches, scores

METHODS = ("full", "frozen", "lora")
HEADS = {"pooler": BertForSequenceClassification, "cls": BertForClassification}


def build_classifier(checkpoint: str, head: str, num_labels: int, id2label: dict[int, str],
                     dropout: float = 0.1):
    """The encoder of `checkpoint` (any minibert or HF BERT folder; a task head in it is dropped)
    under a new head: "pooler" is HF's BertForSequenceClassification, "cls" the exercise's
    BertForClassification. The fast paths (SDPA attention, padding removed before the encoder)
    give the reference path's numbers at every real position in eval mode, so they are on (in
    training mode dropout draws other masks on the two paths: same distribution, other numbers)."""
    backbone = BertModel.from_pretrained(checkpoint, hidden_dropout_prob=dropout,
                                         attention_probs_dropout_prob=dropout, use_sdpa=True, unpad=True)
    backbone.config.id2label = id2label
    return classifier_on(backbone, head, num_labels)


def classifier_on(backbone: BertModel, head: str, num_labels: int):
    """A new `head` ("pooler" or "cls", see HEADS) of num_labels outputs over `backbone`,
    initialised from the global seed: finetune.py and the studies build theirs here, so one seed
    gives both the same head."""
    if head == "cls":
        return BertForClassification(backbone, num_labels)
    model = BertForSequenceClassification(backbone.config, num_labels)
    model.bert = backbone
    return model


def set_trainable(model, method: str, lora_rank: int = 0, lora_alpha: float | None = None,
                  lora_targets: tuple[str, ...] = DEFAULT_TARGETS, train_pooler: bool = False) -> list[str]:
    """Set requires_grad for one method; returns the module names LoRA wrapped (else []).

    full: everything trains. frozen: the encoder (`base_model`, pooler included) is frozen and
    only the head trains; `train_pooler` leaves the pooler trainable, for a pooler the checkpoint
    did not bring (an MLM checkpoint has none: a frozen random tanh layer would stand between
    [CLS] and the head). lora: rank-`lora_rank` adapters on the `lora_targets` Linear layers of
    the encoder, plus the head, train; every pretrained weight is frozen."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    encoder = model.base_model
    for p in model.parameters():
        p.requires_grad_(method != "lora")
    if method == "frozen":
        for p in encoder.parameters():
            p.requires_grad_(False)
        if train_pooler and encoder.pooler is not None:
            for p in encoder.pooler.parameters():
                p.requires_grad_(True)
    if method != "lora":
        return []
    wrapped = add_lora(encoder, lora_rank, lora_alpha, targets=lora_targets)  # adapters are trainable
    for p in model.classifier.parameters():
        p.requires_grad_(True)
    return wrapped


def has_pooler(checkpoint: str) -> bool:
    """Whether the checkpoint brings pooler weights (an MLM checkpoint does not)."""
    return any(name.endswith("pooler.dense.weight") for name in weight_shapes(checkpoint))


def logits_of(model, batch: dict) -> torch.Tensor:
    """(B, K) logits of either classifier: HF's (`.logits`) or the exercise's (a tensor)."""
    out = model(batch["input_ids"], attention_mask=batch.get("attention_mask"),
                token_type_ids=batch.get("token_type_ids"))
    return out if torch.is_tensor(out) else out.logits


@torch.no_grad()
def evaluate(model, data: dict, batch_size: int, pad_id: int, device, num_labels: int) -> dict:
    """Mean cross-entropy, accuracy and macro-F1 of `model` on `data` (from labelled.encode)."""
    model.eval()
    losses, preds = [], []
    for batch, labels in batches(data, batch_size, pad_id):
        logits = logits_of(model, {k: v.to(device) for k, v in batch.items()}).float().cpu()  # (B, K)
        losses.append(F.cross_entropy(logits, labels, reduction="sum").item())
        preds.append(logits.argmax(-1))
    gold = data["labels"]
    return {"loss": sum(losses) / len(gold), **scores(torch.cat(preds), gold, num_labels)}


def export(model, path: str, tokenizer) -> None:
    """Save a plain copy (LoRA adapters merged into their weights) in HF's layout, into a
    temporary folder that then replaces `path`: a reader never finds a half-written model.
    A kill between the two renames leaves `path`.old (and the complete `path`.tmp): the next
    `finetune.py predict` puts one back (recover_best, under the run's lock)."""
    plain = merge_lora(copy.deepcopy(model))
    tmp, old = f"{path}.tmp", f"{path}.old"
    if os.path.islink(old):
        os.remove(old)
    shutil.rmtree(old, ignore_errors=True)
    try:
        fresh_folder(tmp)
        plain.save_pretrained(tmp, tokenizer=tokenizer)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if os.path.isdir(path):
        os.rename(path, old)
    os.rename(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


def recover_best(path: str) -> None:
    """If an export was killed between its renames (no `path`, but `path`.old), put back the
    newest complete model: `path`.tmp when it holds a whole one (config.json, model.safetensors
    and tokenizer.json: complete once `path`.old exists, unless something else stands there),
    else `path`.old."""
    tmp, old = f"{path}.tmp", f"{path}.old"
    whole = all(os.path.isfile(os.path.join(tmp, name)) and not os.path.islink(os.path.join(tmp, name))
                for name in ("config.json", "model.safetensors", "tokenizer.json"))
    if not os.path.isdir(path) and os.path.isdir(old):
        os.rename(tmp if whole and not os.path.islink(tmp) else old, path)
