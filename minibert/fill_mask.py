"""Fill-mask: a masked-LM's top-k guesses, with their probabilities, for every [MASK] in a text.

    from minibert import load_tokenizer
    from minibert.fill_mask import fill_mask, load_masked_lm
    ckpt = "runs/mlm-en/checkpoints/step-006000"
    model, tokenizer = load_masked_lm(ckpt), load_tokenizer(ckpt)
    fill_mask(model, tokenizer, ["the movie was [MASK] .", "the [MASK] sat on the [MASK] ."], k=3)
    # [[[g, g, g]],                text 1: one [MASK], its 3 guesses
    #  [[g, g, g], [g, g, g]]]     text 2: two [MASK]s, left to right; each g a Guess

The result has one list per text, holding one list per [MASK] (left to right), holding the k
most probable tokens, most probable first, as `Guess(token, token_id, probability)`. A token
is the tokenizer's own vocabulary entry, so a word piece comes back as e.g. `##s`. The
probability is the softmax over the whole vocabulary of the logits at that [MASK] position,
the text seen as `[CLS] text [SEP]` (the tokenizer's own template) with every [MASK] in place.

A text without [MASK], or one longer than the model's positions, raises FillMaskError (a
ValueError) before anything runs: a text is never truncated, so no [MASK] is dropped.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
from tokenizers import Tokenizer

from .checkpoint import NOT_FINITE, CheckpointError, check_bert_names, read_config, read_state_dict
from .text import pad_batch, plain_tokenizer
from .model import BertForMaskedLM

MASK = "[MASK]"
MLM_HEAD = "cls.predictions."  # the masked-LM head's tensors in HF's layout


class FillMaskError(ValueError):
    """A text or tokenizer fill_mask cannot use, said in one line: nothing was run."""


class Guess(NamedTuple):
    token: str          # the tokenizer's vocabulary entry, e.g. "good" or "##s"
    token_id: int
    probability: float  # softmax over the vocabulary at the [MASK] position


def load_masked_lm(path, needs: str = "fill-mask needs", **config_overrides) -> BertForMaskedLM:
    """BertForMaskedLM.from_pretrained(path), for any checkpoint in HF's layout (minibert's or
    transformers' BertForMaskedLM). One without the masked-LM head (a BertModel or classifier:
    no `cls.predictions.*` tensors) is a one-line CheckpointError saying so, where strict
    loading would list the missing tensors. A config.json that is not a BERT's (another
    architecture, such as RoBERTa's), or weights named as another architecture's, is said as such
    first. `needs`: what needs the head, and the verb, for that message; `config_overrides`:
    from_pretrained's."""
    with warnings.catch_warnings():  # a first look, for the reason a config is refused: from_pretrained warns
        warnings.simplefilter("ignore")
        read_config(path)
    try:
        return BertForMaskedLM.from_pretrained(path, **config_overrides)
    except CheckpointError:
        try:
            names = read_state_dict(path).keys()
        except (CheckpointError, OSError):
            names = ()
        check_bert_names(dict.fromkeys(names), path)  # another architecture's weights: said as such
        if names and not any(n.startswith(MLM_HEAD) for n in names):
            raise CheckpointError(f"{path} has no masked-LM head (no {MLM_HEAD}* tensors: an encoder or "
                                  f"classifier checkpoint); {needs} a BertForMaskedLM checkpoint, "
                                  "such as train_mlm.py writes") from None
        raise


def _short(text: str, width: int = 60) -> str:
    return repr(text if len(text) <= width else text[:width - 3] + "...")


def _encode(tokenizer: Tokenizer, texts: list[str], max_positions: int, vocab_size: int) -> tuple[list[list[int]], int]:
    """Every text as `[CLS] text [SEP]` token ids, checked: each holds a [MASK], fits in
    `max_positions` and uses ids below `vocab_size`. Returns (ids, the [MASK] id)."""
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings; put a single text in a list")
    mask_id = tokenizer.token_to_id(MASK)
    if mask_id is None:
        raise FillMaskError(f"the tokenizer has no {MASK} token")
    if tokenizer.get_vocab_size() > vocab_size:
        raise FillMaskError(f"the tokenizer ({tokenizer.get_vocab_size()} tokens) does not belong to the "
                            f"model ({vocab_size} tokens)")
    ids = [e.ids for e in plain_tokenizer(tokenizer).encode_batch(texts)]  # never a text cut short
    for i, (text, row) in enumerate(zip(texts, ids, strict=True)):
        if mask_id not in row:
            raise FillMaskError(f"text {i + 1} has no {MASK} to fill: {_short(text)}")
        if len(row) > max_positions:
            raise FillMaskError(f"text {i + 1} is {len(row)} tokens long with its special tokens, more than "
                                f"the model's {max_positions} positions: {_short(text)}")
    return ids, mask_id


def fill_mask(model: BertForMaskedLM, tokenizer: Tokenizer, texts: list[str], k: int = 5,
              batch_size: int = 32) -> list[list[list[Guess]]]:
    """The k most probable tokens at every [MASK] of every text (see the module docstring);
    k is capped at the vocabulary size.

    Texts run `batch_size` at a time, each batch padded to its longest text with an attention
    mask (padding changes no result), on the model's device, in eval mode and without
    gradients; the model's train/eval mode is restored afterwards.
    """
    if k < 1 or batch_size < 1:
        raise ValueError(f"k and batch_size must be at least 1, got k={k}, batch_size={batch_size}")
    config = model.config
    ids, mask_id = _encode(tokenizer, texts, config.max_position_embeddings, config.vocab_size)
    device = next(model.parameters()).device
    word_embeddings = model.bert.embeddings.word_embeddings.weight       # (V, C), the decoder
    was_training = model.training
    model.eval()
    results = []
    try:
        for start in range(0, len(ids), batch_size):
            rows = ids[start:start + batch_size]
            input_ids, attention_mask = (t.to(device) for t in pad_batch(rows, config.pad_token_id))  # (B, T) each
            is_mask = (input_ids == mask_id) & attention_mask.bool()         # (B, T)
            with torch.no_grad():
                h = model.bert(input_ids, attention_mask).last_hidden_state  # (B, T, C)
                logits = model.mlm_head(h[is_mask], word_embeddings)         # (N, V): the batch's [MASK]s, row-major
                probs = logits.float().softmax(dim=-1)                       # (N, V)
            if not bool(torch.isfinite(probs).all()):  # finite weights too large for float32: never a NaN printed
                raise FillMaskError(f"the model {NOT_FINITE}")
            top = probs.topk(min(k, logits.shape[-1]), dim=-1)               # (N, k) twice
            guesses = iter([[Guess(tokenizer.id_to_token(i), i, p) for i, p in zip(row_ids, row_probs)]
                            for row_ids, row_probs in zip(top.indices.tolist(), top.values.tolist())])
            results += [[next(guesses) for _ in range(row.count(mask_id))] for row in rows]
    finally:
        model.train(was_training)
    return results
