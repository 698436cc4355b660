"""MLM masking: choose 15% of ordinary tokens; of those, 80% [MASK], 10% random, 10% kept.

(SPEC S8-S12, S21-S27.) Shapes: B batch, T sequence length.
Why not always [MASK] (S9): the model never sees [MASK] when fine-tuned, and if targets
always looked different from their input it could never trust an input token; keeping ~10%
unchanged, indistinguishable from the rest, makes it predict every position from context.
The 80/10/10 split is BERT's empirical choice, not a guarantee of anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .loss import IGNORE_INDEX


class MaskingError(ValueError):
    """Inputs the masker cannot work with (shapes, no candidate, bad replacement ids)."""


def _corrupt(input_ids, selected, mask_id, ordinary, generator):
    """80% of selected -> mask_id, 10% -> a random ordinary id, 10% kept (one draw each)."""
    B, T = input_ids.shape
    dev = generator.device if generator is not None else torch.device("cpu")
    action = torch.rand((B, T), generator=generator, device=dev).to(input_ids.device)  # (B, T)
    pick = torch.randint(len(ordinary), (B, T), generator=generator, device=dev)       # (B, T)
    random_ids = ordinary.to(dev)[pick].to(input_ids.device)                           # (B, T)
    to_mask = selected & (action < 0.8)
    to_random = selected & (action >= 0.8) & (action < 0.9)
    corrupted = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    return torch.where(to_random, random_ids, corrupted)


def _id_tensor(ids, name: str) -> torch.Tensor:
    t = torch.as_tensor(ids) if not isinstance(ids, torch.Tensor) else ids
    if t.dim() != 1 or t.numel() == 0 or t.dtype.is_floating_point or t.dtype == torch.bool:
        raise MaskingError(f"{name} must be a non-empty 1-D list of token ids, "
                           f"got shape {tuple(t.shape)} dtype {t.dtype}")
    return t.long()


def mask_batch(input_ids: torch.Tensor, attention_mask: torch.Tensor, special_mask: torch.Tensor,
               mask_id: int, ordinary_token_ids, generator: torch.Generator,
               probability: float = 0.15, ignore_index: int = IGNORE_INDEX):
    """Mask a batch for MLM (S10). Returns (corrupted, labels, attention_mask, selected).

    input_ids, attention_mask (1 = real token), special_mask (1 = [CLS]/[SEP]/...): (B, T).
    Candidates = attention_mask & ~special_mask; each is selected with `probability`.
    Every row that has a candidate gets at least one selected position: on very short rows
    this bends the exact 15% upwards (a row of 3 candidates selects >= 1/3 of them).
    Selected positions become mask_id (80%), a random id drawn from `ordinary_token_ids`
    only (10%, never a special token), or stay unchanged (10%). labels hold the ORIGINAL
    id at selected positions and `ignore_index` elsewhere (padding included); `input_ids`
    itself is never modified. All randomness comes from `generator`: same seed, same output.
    """
    if not (input_ids.shape == attention_mask.shape == special_mask.shape) or input_ids.dim() != 2:
        raise MaskingError(f"input_ids {tuple(input_ids.shape)}, attention_mask "
                           f"{tuple(attention_mask.shape)} and special_mask {tuple(special_mask.shape)} "
                           "must be the same (B, T) shape")
    if not 0.0 < probability <= 1.0:
        raise MaskingError(f"probability must be in (0, 1], got {probability}")
    ordinary = _id_tensor(ordinary_token_ids, "ordinary_token_ids").to(input_ids.device)
    special = special_mask.bool()
    candidates = attention_mask.bool() & ~special                             # (B, T)
    if not candidates.any():
        raise MaskingError("the batch has no candidate position to mask: every position is "
                           "padding or a special token")
    forbidden = torch.cat([input_ids[special].unique(), torch.tensor([mask_id], device=input_ids.device)])
    clash = (ordinary[:, None] == forbidden[None, :]).any(dim=1)  # (V',): a handful of ids, so no sort
    if clash.any():
        bad = ordinary[clash].unique().tolist()
        raise MaskingError(f"ordinary_token_ids contains special ids {bad}: random replacements "
                           "must never produce a special token")

    B, T = input_ids.shape
    dev = generator.device
    # 1. select each candidate independently with `probability`
    u = torch.rand((B, T), generator=generator, device=dev).to(input_ids.device)  # (B, T)
    selected = (u < probability) & candidates                                       # (B, T)
    # 2. a row with candidates but nothing selected gets one, uniform among its candidates
    r = torch.rand((B, T), generator=generator, device=dev).to(input_ids.device)
    fallback = r.masked_fill(~candidates, -1.0).argmax(dim=1)                      # (B,)
    empty = candidates.any(dim=1) & ~selected.any(dim=1)                            # (B,)
    selected[empty.nonzero().squeeze(1), fallback[empty]] = True
    # 3. 80 / 10 / 10, and labels from the untouched input
    corrupted = _corrupt(input_ids, selected, mask_id, ordinary, generator)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, ignore_index))
    return corrupted, labels, attention_mask, selected


def random_mask_tokens(input_ids: torch.Tensor, vocab_size: int, mask_token_id: int,
                       special_tokens=None, mask_prob: float = 0.15, *,
                       generator: torch.Generator | None = None):
    """The exercise's API (S11): returns (masked_input_ids, labels), labels -100 where unmasked.

    Each position that is not one of `special_tokens` is selected with `mask_prob`
    (special_tokens=None protects nothing). It is the exercise's per-element loop written
    as tensor operations, with one correction: random replacements are drawn from the
    vocabulary minus `special_tokens` and mask_token_id, never a special token (S27).
    For training use mask_batch, which also knows padding and guarantees a target per row.
    """
    special = torch.tensor(sorted(set(special_tokens or [])), dtype=torch.long)
    protected = torch.isin(input_ids, special.to(input_ids.device))           # (B, T)
    dev = generator.device if generator is not None else torch.device("cpu")
    u = torch.rand(input_ids.shape, generator=generator, device=dev).to(input_ids.device)
    selected = (u < mask_prob) & ~protected                                   # (B, T)
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    allowed[special[special < vocab_size]] = False
    allowed[mask_token_id] = False
    ordinary = allowed.nonzero().squeeze(1)                                   # (V',)
    masked_input_ids = _corrupt(input_ids, selected, mask_token_id, ordinary, generator)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return masked_input_ids, labels


@dataclass(frozen=True)
class MaskingVocab:
    """What the masker needs to know about a tokenizer, read from it (never hard-coded, S12).

    special_ids: the tokenizer's special tokens ([PAD], [UNK], [CLS], [SEP], [MASK], ...);
    ordinary_token_ids: every other id, the pool for random replacements.
    """

    mask_id: int
    special_ids: tuple[int, ...]
    ordinary_token_ids: tuple[int, ...]

    @classmethod
    def from_tokenizer(cls, tokenizer, mask_token: str = "[MASK]") -> "MaskingVocab":
        mask_id = tokenizer.token_to_id(mask_token)
        if mask_id is None:
            raise MaskingError(f"the tokenizer has no {mask_token} token")
        special = sorted({i for i, tok in tokenizer.get_added_tokens_decoder().items() if tok.special}
                         | {mask_id})
        vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        ordinary = tuple(i for i in range(vocab_size) if i not in set(special))
        if not ordinary:
            raise MaskingError("the tokenizer has no ordinary (non-special) token")
        return cls(mask_id, tuple(special), ordinary)

    def special_mask(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T) bool: True where input_ids holds a special token."""
        return torch.isin(input_ids, torch.tensor(self.special_ids, device=input_ids.device))
