"""Fine-tuning helpers of the seed's answer 6 (S17, S18) and the polysemy exercise (S28)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def configure_model(model, freeze_encoder: bool, lr: float = 5e-5, weight_decay: float = 0.01,
                    fused: bool = True):
    """S17: set requires_grad on the encoder (the `bert` base model, pooler included) FIRST, then
    build AdamW over the trainable parameters only. Returns (optimizer, trainable count).

    Weight decay applies to matrices only (dim >= 2), never to biases or LayerNorm. fused=True
    takes PyTorch's fused AdamW kernel (same update, 3-4x faster than foreach on this CPU).
    """
    for p in model.bert.parameters():
        p.requires_grad_(not freeze_encoder)
    trainable = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in trainable if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=lr, **adamw_kernel(fused))
    return optimizer, sum(p.numel() for p in trainable)


def adamw_kernel(fused: bool) -> dict:
    """AdamW's implementation: the fused kernel, or the multi-tensor (foreach) reference."""
    return {"fused": True} if fused else {"foreach": True}


def logits_of(model, batch: dict) -> torch.Tensor:
    """(B, K) logits of either classifier: HF's (`.logits`) or the exercise's (a tensor)."""
    out = model(batch["input_ids"], attention_mask=batch.get("attention_mask"),
                token_type_ids=batch.get("token_type_ids"))
    return out if torch.is_tensor(out) else out.logits


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
    """
    start = sentence.lower().find(word.lower())
    if start < 0:
        raise ValueError(f"{word!r} does not occur in {sentence!r}")
    end = start + len(word)
    enc = tokenizer.encode(sentence)
    pieces = [i for i, (a, b) in enumerate(enc.offsets)
              if b > a and a < end and b > start and enc.special_tokens_mask[i] == 0]
    ids = torch.tensor([enc.ids])
    model.eval()
    with torch.no_grad():
        if static:
            vectors = model.embeddings.word_embeddings(ids)[0]       # (T, C)
        else:
            vectors = model(ids).last_hidden_state[0]                # (T, C)
    return vectors[pieces].mean(dim=0)                              # (C,)
