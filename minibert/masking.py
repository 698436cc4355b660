"""MLM masking: choose 15% of ordinary tokens; of those, 80% [MASK], 10% random, 10% kept.

(S8-S12, S21-S27 in docs/spec.md.) Shapes: B batch, T sequence length.
Why not always [MASK] (S9): the model never sees [MASK] when fine-tuned, and if targets
always looked different from their input it could never trust an input token; keeping ~10%
unchanged, indistinguishable from the rest, makes it predict every position from context.
The 80/10/10 split is BERT's empirical choice, not a guarantee of anything.
Value checks (the replacement pool, a batch without candidates) read tensors on the host, so
they run once per run (check_replacement_pool); the per-step mask_batch(..., check=False) is
tensor operations of fixed shapes only, which a GPU runs without ever waiting for the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch

from .loss import IGNORE_INDEX


class MaskingError(ValueError):
    """Inputs the masker cannot work with (shapes, no candidate, bad replacement ids)."""


NOT_A_CANDIDATE = 2.0  # a draw no probability in (0, 1] can select


def _corrupt(input_ids, u, probability, mask_id, pool, generator):
    """Corrupt the positions whose draw u < probability; returns corrupted (B, T).

    One uniform draw per position does both jobs: given u < p, u / p is again uniform on [0, 1),
    so it picks the action: u < 0.8p -> mask_id (80%), 0.8p <= u < 0.9p -> a random id from
    `pool` (10%), otherwise kept (10%). A random id is drawn for EVERY position and used where
    the action says so: a fixed (B, T) shape instead of the data-dependent number of random
    positions, which a GPU would have to report back to the host before drawing.
    """
    pick = torch.randint(len(pool), u.shape, generator=generator, device=_draw_device(generator))  # (B, T)
    random_ids = pool[pick.to(pool.device)].to(input_ids.device)                       # (B, T)
    to_mask = u < 0.8 * probability                                                    # (B, T)
    to_random = (u >= 0.8 * probability) & (u < 0.9 * probability)                    # (B, T)
    corrupted = input_ids.masked_fill(to_mask, mask_id)                                # (B, T)
    return torch.where(to_random, random_ids, corrupted)                               # (B, T)


def _draw_device(generator: torch.Generator | None) -> torch.device:
    """Where random numbers are drawn: the generator's device; the CPU for torch's global
    generator (generator=None, seeded by torch.manual_seed)."""
    return generator.device if generator is not None else torch.device("cpu")


def _id_tensor(ids, name: str) -> torch.Tensor:
    t = torch.as_tensor(ids) if not isinstance(ids, torch.Tensor) else ids
    if t.dim() != 1 or t.numel() == 0 or t.dtype.is_floating_point or t.dtype == torch.bool:
        raise MaskingError(f"{name} must be a non-empty 1-D list of token ids, "
                           f"got shape {tuple(t.shape)} dtype {t.dtype}")
    return t.long()


def _check_id(value, name: str, limit: int | None = None) -> None:
    """A token id given as a Python value: an int in [0, limit) (no tensor is read)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (limit is not None and value >= limit):
        where = f"[0, {limit})" if limit is not None else "0 or more"
        raise MaskingError(f"{name} must be a token id, an int in {where}; got {value!r}")


def check_replacement_pool(ordinary_token_ids, special_ids, mask_id: int) -> torch.Tensor:
    """The pool of random replacements checked once, on the host: returns it as a (V',) long tensor.

    It must be a non-empty 1-D list of ids holding neither [MASK] nor any of `special_ids`
    (every special id of the tokenizer, MaskingVocab.special_ids), or a random replacement could
    produce a special token (S27); a MaskingError names the offending ids. The check reads the
    whole pool (one isin, ~0.2 ms for 30k ids): do it once per run, then call
    mask_batch(..., check=False) on every step, which reads no value on the host.
    """
    pool = _id_tensor(ordinary_token_ids, "ordinary_token_ids")                     # (V',)
    _check_id(mask_id, "mask_id")
    if int(pool.min()) < 0:
        raise MaskingError(f"ordinary_token_ids must be token ids (0 or more), got {int(pool.min())}")
    forbidden = torch.tensor([*special_ids, mask_id], device=pool.device)            # (S + 1,)
    bad = pool[torch.isin(pool, forbidden)].unique().tolist()
    if bad:
        raise MaskingError(f"ordinary_token_ids contains special ids {bad[:10]}: random replacements "
                           "must never produce a special token; build the pool without them "
                           "(MaskingVocab.from_tokenizer does)")
    return pool


def mask_batch(input_ids: torch.Tensor, attention_mask: torch.Tensor, special_mask: torch.Tensor,
               mask_id: int, ordinary_token_ids, generator: torch.Generator | None,
               probability: float = 0.15, ignore_index: int = IGNORE_INDEX, *, special_ids=None,
               check: bool = True):
    """Mask a batch for MLM (S10). Returns (corrupted, labels, attention_mask, selected).

    input_ids, attention_mask (1 = real token), special_mask (1 = [CLS]/[SEP]/...): (B, T).
    Candidates = attention_mask & ~special_mask; each is selected with `probability`.
    Every row that has a candidate gets at least one selected position: on very short rows
    this bends the exact 15% upwards (a row of 3 candidates selects >= 1/3 of them).
    Selected positions become mask_id (80%), a random id drawn from `ordinary_token_ids`
    only (10%, never a special token), or stay unchanged (10%). labels hold the ORIGINAL
    id at selected positions and `ignore_index` elsewhere (padding included); `input_ids`
    itself is never modified. All randomness comes from `generator`: same seed, same output;
    generator=None draws from torch's global CPU generator (seed it with torch.manual_seed).

    check=True (the default) reads values on the host before anything is drawn: the batch must
    have a candidate (S23), and the pool goes through check_replacement_pool against [MASK] and
    `special_ids` if given (every special id of the tokenizer, MaskingVocab.special_ids), else
    the special ids in this batch, so give `special_ids` to refuse e.g. [PAD] on a batch without
    padding. On a GPU each of these reads makes the host wait for the device.
    check=False reads no value: run check_replacement_pool once per run, then mask every step
    with check=False (and no special_ids). Every operation then has a shape fixed by (B, T)
    and the pool's length, so the call never waits for the device (give a generator on the
    device of input_ids) and torch.compile(fullgraph=True) captures it (generator=None there:
    Dynamo does not trace a torch.Generator object). A batch without any candidate is then not
    an error: it comes back with no target at all.
    """
    if not (input_ids.shape == attention_mask.shape == special_mask.shape) or input_ids.dim() != 2:
        raise MaskingError(f"input_ids {tuple(input_ids.shape)}, attention_mask "
                           f"{tuple(attention_mask.shape)} and special_mask {tuple(special_mask.shape)} "
                           "must be the same (B, T) shape")
    if not 0.0 < probability <= 1.0:
        raise MaskingError(f"probability must be in (0, 1], got {probability}")
    _check_id(mask_id, "mask_id")
    if not check and special_ids is not None:
        raise MaskingError("special_ids is read only by check=True; with check=False check the pool "
                           "once with check_replacement_pool")
    pool = _id_tensor(ordinary_token_ids, "ordinary_token_ids").to(input_ids.device)  # (V',)
    special = special_mask.bool()                                                      # (B, T)
    candidates = attention_mask.bool() & ~special                                      # (B, T)
    if check:
        if input_ids.numel() and int(input_ids.min()) < 0:
            raise MaskingError(f"input_ids must be token ids (0 or more), got {int(input_ids.min())}")
        if not candidates.any():
            raise MaskingError("the batch has no candidate position to mask: every position is "
                               "padding or a special token")
        forbidden = input_ids[special].unique().tolist() if special_ids is None else special_ids
        check_replacement_pool(pool, forbidden, mask_id)

    B, T = input_ids.shape
    dev = _draw_device(generator)
    # 1. one draw per position; a candidate is selected when its draw is < probability, and a
    #    non-candidate's draw is replaced by one that no probability selects
    u = torch.rand((B, T), generator=generator, device=dev).to(input_ids.device)      # (B, T)
    u = u.masked_fill(~candidates, NOT_A_CANDIDATE)                                    # (B, T)
    selected = u < probability                                                         # (B, T)
    # 2. a row with candidates but nothing selected gets one target: its candidate with the
    #    lowest draw (a masked argmin, non-candidates holding NOT_A_CANDIDATE), uniform among its
    #    candidates since their draws are then independent and uniform on [p, 1). That draw is
    #    replaced by a fresh one below `probability`, so the target's action stays 80/10/10.
    #    Every row draws one; where() keeps it in the rows that need it only, instead of a
    #    branch on whether such a row exists (a value read on the host).
    needs_one = candidates.any(dim=1) & ~selected.any(dim=1)                           # (B,)
    lowest_col = u.argmin(dim=1)                                                       # (B,)
    redraw = probability * torch.rand(B, generator=generator, device=dev).to(input_ids.device)  # (B,)
    cols = torch.arange(T, device=input_ids.device)                                    # (T,)
    fix = needs_one[:, None] & (cols[None, :] == lowest_col[:, None])                  # (B, T) <= 1 per row
    u = torch.where(fix, redraw[:, None], u)                                           # (B, T)
    selected = selected | fix                                                          # (B, T)
    # 3. 80 / 10 / 10, and labels from the untouched input
    corrupted = _corrupt(input_ids, u, probability, mask_id, pool, generator)          # (B, T)
    labels = input_ids.masked_fill(~selected, ignore_index)                            # (B, T)
    return corrupted, labels, attention_mask, selected


def max_predictions(seq_len: int, probability: float = 0.15) -> int:
    """Slots per row for the static-shape MLM step: the mean number of targets in a row of
    seq_len positions plus 5 binomial standard deviations, T p + 5 sqrt(T p (1 - p)).
    T = 128, p = 0.15: 19.2 + 5 * 4.04 = 39.4 -> 40 slots; BERT's own recipe used 20."""
    mean = seq_len * probability
    return min(seq_len, math.ceil(mean + 5 * math.sqrt(mean * (1 - probability))))


def target_slots(labels: torch.Tensor, slots: int, ignore_index: int = IGNORE_INDEX):
    """The target positions of each row gathered into a fixed number of slots, BERT's
    max_predictions_per_seq: labels (B, T) -> positions (B, P), slot_labels (B, P).

    Row b's targets fill its first slots in column order; unused slots point at column 0 with
    label `ignore_index`, so the loss skips them. A row with more than P targets keeps its first
    P (max_predictions makes that a 5-sigma event). Sort and gather only: no host sync, and the
    shapes depend on B, T and P alone, so a compiled step sees the same graph every time."""
    is_target = labels != ignore_index                                               # (B, T)
    order = torch.sort((~is_target).to(torch.uint8), dim=1, stable=True).indices[:, :slots]  # (B, P)
    slot_labels = labels.gather(1, order)                                            # (B, P)
    positions = order.masked_fill(slot_labels == ignore_index, 0)                    # (B, P)
    return positions, slot_labels


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
    if not 0.0 < mask_prob <= 1.0:
        raise MaskingError(f"mask_prob must be in (0, 1], got {mask_prob}")
    _check_id(vocab_size, "vocab_size")
    _check_id(mask_token_id, "mask_token_id", vocab_size)
    if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab_size):
        raise MaskingError(f"input_ids must lie in [0, {vocab_size}), got values from {int(input_ids.min())} "
                           f"to {int(input_ids.max())}")
    special = torch.tensor(sorted(set(special_tokens or [])), dtype=torch.long)
    protected = torch.isin(input_ids, special.to(input_ids.device))           # (B, T)
    dev = _draw_device(generator)
    u = torch.rand(input_ids.shape, generator=generator, device=dev).to(input_ids.device)
    u.masked_fill_(protected, NOT_A_CANDIDATE)                               # (B, T)
    selected = u < mask_prob                                                  # (B, T)
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    allowed[special[special < vocab_size]] = False
    allowed[mask_token_id] = False
    ordinary = allowed.nonzero().squeeze(1)                                   # (V',)
    masked_input_ids = _corrupt(input_ids, u, mask_prob, mask_token_id, ordinary, generator)
    labels = input_ids.masked_fill(~selected, IGNORE_INDEX)
    return masked_input_ids, labels


@dataclass(frozen=True)
class MaskingVocab:
    """What the masker needs to know about a tokenizer, read from it (never hard-coded, S12).

    special_ids: the tokenizer's special tokens ([PAD], [UNK], [CLS], [SEP], [MASK], ...);
    ordinary_token_ids: every other id, the pool for random replacements.
    The masker's calls: once, pool = check_replacement_pool(vocab.ordinary_tensor,
    vocab.special_ids, vocab.mask_id); then every step mask_batch(ids, attention,
    vocab.special_mask(ids), vocab.mask_id, pool, generator, p, check=False).
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

    @cached_property
    def ordinary_tensor(self) -> torch.Tensor:
        """ordinary_token_ids as a (V',) long tensor, built once rather than on every mask_batch call."""
        return torch.tensor(self.ordinary_token_ids, dtype=torch.long)

    def special_mask(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T) bool: True where input_ids holds a special token. Compared with each id as a
        Python number: no tensor of ids is copied to the device, a copy the host waits for."""
        mask = torch.zeros_like(input_ids, dtype=torch.bool)                        # (B, T)
        for i in self.special_ids:
            mask |= input_ids == i
        return mask


VALID_MASK_SEED = 1234  # the validation split is masked once, identically in every run


def fixed_masking(blocks, vocab: MaskingVocab, mask_prob: float) -> dict[str, torch.Tensor]:
    """The validation masking: the whole split masked by ONE mask_batch call from a generator
    seeded with VALID_MASK_SEED, so the targets are the same whatever the batch size, the seed
    or the number of processes, and runs can be compared. `blocks` holds input_ids,
    attention_mask and token_type_ids, (N, T) each (minibert.text.Blocks); so does the result,
    with labels."""
    ids, attn = blocks.input_ids, blocks.attention_mask
    x, y, attn, _ = mask_batch(ids, attn, vocab.special_mask(ids), vocab.mask_id, vocab.ordinary_tensor,
                               torch.Generator().manual_seed(VALID_MASK_SEED), mask_prob, special_ids=vocab.special_ids)
    return {"input_ids": x, "labels": y, "attention_mask": attn, "token_type_ids": blocks.token_type_ids}
