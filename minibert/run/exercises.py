"""The exercises' helpers: freezing and the optimizer (S17), prediction (S18), and the
polysemy comparison (S28) with its sentence sets.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..checkpoint import NOT_FINITE, CheckpointError, overflowing
from ..text import plain_tokenizer
from .classification import logits_of, set_trainable
from .training import adamw


def configure_model(model, freeze_encoder: bool, lr: float = 5e-5, weight_decay: float = 0.01,
                    fused: bool = True):
    """S17: set requires_grad on the encoder (`model.base_model`, pooler included) FIRST, then
    build AdamW over the trainable parameters only. Works for any HF-style classifier.
    Returns (optimizer, number of trainable parameters).

    Weight decay applies to matrices only (dim >= 2), never to biases or LayerNorm."""
    set_trainable(model, "frozen" if freeze_encoder else "full")
    optimizer = adamw(model.parameters(), lr, weight_decay, fused)
    return optimizer, sum(p.numel() for p in model.parameters() if p.requires_grad)


def predict_batch(model, batch: dict) -> torch.Tensor:
    """S18: eval mode, no gradients, argmax of the logits: (B,) predicted label ids."""
    model.eval()
    with torch.no_grad():
        return logits_of(model, batch).argmax(dim=-1)


def compare_polysemous_embeddings(sentence_pairs, get_bert_embedding) -> list[float]:
    """S28 (exercise 3): cosine similarity of the target word's contextual vector in each pair."""
    similarities = []
    for sent1, sent2 in sentence_pairs:
        emb1 = get_bert_embedding(sent1)
        emb2 = get_bert_embedding(sent2)
        sim = F.cosine_similarity(emb1.unsqueeze(0), emb2.unsqueeze(0)).item()
        similarities.append(sim)
    return similarities


def word_vector(model, tokenizer, sentence: str, word: str, static: bool = False) -> torch.Tensor:
    """The vector of `word` in `sentence`: the mean over its word pieces, found by the tokenizer's
    character offsets (first occurrence, case-insensitive). `model` is a BertModel.

    static=False: the last hidden state (contextual); static=True: the input word embeddings,
    which are the same in every context (the Word2Vec-like view the exercise contrasts).
    A vector that is not finite (finite weights too large for float32) is a CheckpointError.
    """
    start = sentence.lower().find(word.lower())
    if start < 0:
        raise ValueError(f"{word!r} does not occur in {sentence!r}")
    end = start + len(word)
    enc = plain_tokenizer(tokenizer).encode(sentence)  # whole, unpadded, whatever tokenizer.json sets
    pieces = [i for i, (a, b) in enumerate(enc.offsets)
              if b > a and a < end and b > start and enc.special_tokens_mask[i] == 0]
    ids = torch.tensor([enc.ids])
    model.eval()
    with torch.no_grad():
        if static:
            vectors = model.embeddings.word_embeddings(ids)[0]       # (T, C)
        else:
            vectors = model(ids).last_hidden_state[0]                # (T, C)
    vector = vectors[pieces].mean(dim=0)                            # (C,)
    if overflowing(vector):  # finite weights too large for float32: never a NaN (or 0.000) similarity
        raise CheckpointError(f"the model {NOT_FINITE}")
    return vector


# ---- exercise 3's sentences: (sentence, target word), and the pairs compared --------------------

ENGLISH = {
    "bank/river": ("We sat on the bank of the river and watched the boats.", "bank"),
    "bank/money": ("She went to the bank to deposit her salary.", "bank"),
    "bank/loan": ("The bank approved my loan yesterday.", "bank"),
    "apple/fruit": ("I ate an apple for lunch.", "apple"),
    "apple/fruit2": ("This apple is sweet and juicy.", "apple"),
    "apple/company": ("Apple released a new phone today.", "apple"),
    "banana/fruit": ("I ate a banana for lunch.", "banana"),
}
ENGLISH_PAIRS = [  # (a, b, same sense?)
    ("bank/money", "bank/loan", "same"), ("bank/river", "bank/money", "different"),
    ("bank/river", "bank/loan", "different"), ("apple/fruit", "apple/fruit2", "same"),
    ("apple/fruit", "apple/company", "different"), ("apple/fruit", "banana/fruit", "other word, same kind"),
]
CHINESE = {
    "苹果很好吃": ("苹果很好吃", "苹果"),
    "苹果发布了新手机": ("苹果发布了新手机", "苹果"),
    "红富士苹果很甜": ("红富士苹果很甜", "苹果"),
    "香蕉很好吃": ("香蕉很好吃", "香蕉"),
}
CHINESE_PAIRS = [("苹果很好吃", "红富士苹果很甜", "same"), ("苹果很好吃", "苹果发布了新手机", "different"),
                 ("苹果很好吃", "香蕉很好吃", "other word, same kind")]


def polysemy_table(model_name: str, model, tokenizer, sentences: dict, pairs: list) -> list[dict]:
    """One row per pair: the cosine similarity of the target word's contextual vectors, and of
    its static input embeddings: the same in every context, so 1 when both sentences split the
    word into the same pieces, and below 1 for another word or another casing ("apple" vs
    "Apple")."""
    def get_bert_embedding(key):
        return word_vector(model, tokenizer, *sentences[key])

    def get_static_embedding(key):
        return word_vector(model, tokenizer, *sentences[key], static=True)

    keyed = [(a, b) for a, b, _ in pairs]
    contextual = compare_polysemous_embeddings(keyed, get_bert_embedding)
    static = compare_polysemous_embeddings(keyed, get_static_embedding)
    return [{"model": model_name, "a": a, "b": b, "sense": sense, "contextual": c, "static": s}
            for (a, b, sense), c, s in zip(pairs, contextual, static, strict=True)]
