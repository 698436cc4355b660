"""The MLM masker: S8, S10, S11, S21, S23, S24, S26, S27; the per-run pool check and the
per-step call that reads no value on the host (check=False)."""

import math

import pytest
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.pre_tokenizers import Whitespace

from minibert import IGNORE_INDEX, MaskingError, MaskingVocab, mask_batch, random_mask_tokens
from minibert.masking import check_replacement_pool

PAD, CLS, SEP, MASK = 0, 1, 2, 3
SPECIAL = [PAD, CLS, SEP, MASK]
ORDINARY = list(range(4, 1000))


def make_batch(B, T, seed=0, min_len=3):
    """Rows [CLS] w w ... w [SEP] [PAD] ... of random lengths in [min_len, T]."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 1000, (B, T), generator=g)
    lengths = torch.randint(min_len, T + 1, (B,), generator=g)
    pos = torch.arange(T)
    attention = (pos[None, :] < lengths[:, None]).long()
    ids[:, 0] = CLS
    ids[torch.arange(B), lengths - 1] = SEP
    ids[attention == 0] = PAD
    special = torch.isin(ids, torch.tensor(SPECIAL))
    return ids, attention, special


def run(ids, attention, special, seed=0, **kw):
    return mask_batch(ids, attention, special, MASK, ORDINARY, torch.Generator().manual_seed(seed), **kw)


def test_s21_labels_are_ignore_index_off_target_and_at_padding():
    """S21: labels[~selected] == -100 and labels at padding == -100; S8/S10: at selected
    positions the label is the ORIGINAL id (built from the untouched input, even where the
    corrupted copy now holds [MASK] or a random id), and input_ids is not modified."""
    ids, attention, special = make_batch(64, 32)
    before = ids.clone()
    corrupted, labels, attn_out, selected = run(ids, attention, special)
    assert torch.equal(ids, before) and attn_out is attention
    assert (labels[~selected] == -100).all()
    assert (labels[attention == 0] == -100).all()
    assert torch.equal(labels[selected], ids[selected])
    changed = selected & (corrupted != ids)
    assert changed.sum() > 0.8 * selected.sum()  # most targets were corrupted ...
    assert torch.equal(labels[changed], before[changed])  # ... yet labels hold the originals


def test_unselected_positions_are_never_changed_and_specials_never_selected():
    """Outside `selected` the corrupted ids equal the input; [CLS]/[SEP]/[PAD] are never selected."""
    ids, attention, special = make_batch(64, 32)
    corrupted, _, _, selected = run(ids, attention, special)
    assert torch.equal(corrupted[~selected], ids[~selected])
    assert not (selected & special).any() and not (selected & (attention == 0)).any()


def test_every_row_with_a_candidate_gets_a_target():
    """Rows of 1 or 2 ordinary tokens would often draw none at 15% (0.85^2 = 72% of the time);
    the masker then picks one candidate, so each such row has exactly 1 (or 2) targets."""
    ids, attention, special = make_batch(200, 4, min_len=3)  # 1 or 2 ordinary tokens per row
    _, labels, _, selected = run(ids, attention, special)
    assert (selected.sum(1) >= 1).all()
    assert ((labels != -100).sum(1) >= 1).all()


def test_s23_no_candidate_raises():
    """S23: an all-padding batch, or one of special tokens only, has nothing to mask."""
    ids, attention, special = make_batch(4, 8)
    with pytest.raises(MaskingError, match="no candidate"):
        run(ids, torch.zeros_like(attention), special)
    only_special = torch.tensor([[CLS, SEP, PAD]])
    with pytest.raises(MaskingError, match="no candidate"):
        run(only_special, torch.tensor([[1, 1, 0]]), torch.isin(only_special, torch.tensor(SPECIAL)))


def test_bad_arguments_raise():
    """S10: masks of different shapes, and ordinary_token_ids that is empty, not 1-D, or
    holds a special id, are clear errors. Without special_ids the whole pool is checked against
    [MASK] and the special ids found in the batch before anything is drawn, so a pool of only
    [CLS] or only [MASK] fails on the first call, whether or not a random id would be drawn."""
    ids, attention, special = make_batch(4, 8)
    g = torch.Generator().manual_seed(0)
    with pytest.raises(MaskingError, match="same"):
        mask_batch(ids, attention[:, :7], special, MASK, ORDINARY, g)
    with pytest.raises(MaskingError, match="non-empty 1-D"):
        mask_batch(ids, attention, special, MASK, [], g)
    with pytest.raises(MaskingError, match="non-empty 1-D"):
        mask_batch(ids, attention, special, MASK, [[4, 5], [6, 7]], g)
    with pytest.raises(MaskingError, match=r"special ids \[1\]"):
        mask_batch(ids, attention, special, MASK, [CLS], g)
    with pytest.raises(MaskingError, match=r"special ids \[3\]"):
        mask_batch(ids, attention, special, MASK, [MASK], g)


def test_s24_same_seed_same_masking():
    """S24: two generators with the same seed give identical output; another seed differs."""
    ids, attention, special = make_batch(32, 64)
    a = run(ids, attention, special, seed=7)
    b = run(ids, attention, special, seed=7)
    c = run(ids, attention, special, seed=8)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)
    assert not torch.equal(a[3], c[3])


def test_s26_selection_rate_and_80_10_10_split():
    """S26, over 2048 rows of length 128: about 2048 * 64 = 131k candidates, ~19.7k selected.

    Selected fraction: p = 0.15, sd = sqrt(p(1-p)/n) ~ sqrt(0.1275/131000) = 0.00099.
    The at-least-one rule adds at most P(no pick in a row) = 0.85^(>=1 candidates); rows here
    have >= 1 candidate and mostly dozens, so its bias is far below 1 sd.
    Of the k selected, the [MASK] share has sd sqrt(0.8*0.2/k) = 0.0029 and the random and
    kept shares sqrt(0.1*0.9/k) = 0.0021. Tolerance: 4 sd each (a false alarm about 1 in
    16,000 per check; the seed is fixed anyway). A chained-draw 81/10/9 split would put the
    kept share 4.7 sd off and fail. "Random" is counted as a change to another id; a random
    draw of the same id (1/996 of the 10%) counts as kept, a bias of 1e-4, under 0.05 sd.
    """
    ids, attention, special = make_batch(2048, 128)
    corrupted, labels, _, selected = run(ids, attention, special, seed=3)
    n = int((attention.bool() & ~special).sum())
    k = int(selected.sum())
    assert n > 100_000
    sd = math.sqrt(0.15 * 0.85 / n)
    assert abs(k / n - 0.15) < 4 * sd, (k / n, sd)
    c, o = corrupted[selected], ids[selected]
    masked = (c == MASK).float().mean().item()
    kept = (c == o).float().mean().item()
    rand = ((c != MASK) & (c != o)).float().mean().item()
    sd80, sd10 = math.sqrt(0.8 * 0.2 / k), math.sqrt(0.1 * 0.9 / k)
    assert abs(masked - 0.8) < 4 * sd80, masked
    assert abs(rand - 0.1) < 4 * sd10, rand
    assert abs(kept - 0.1) < 4 * sd10, kept


def test_s27_random_replacements_never_produce_a_special_token():
    """S27: with only two ordinary ids and probability 1, ~10% of 40k selected positions are
    random replacements: every corrupted id at a selected position is [MASK] or ordinary."""
    ids, attention, special = make_batch(512, 128)
    ids = torch.where(special, ids, ids % 2 + 4)  # ordinary ids are 4 and 5 only
    g = torch.Generator().manual_seed(0)
    corrupted, _, _, selected = mask_batch(ids, attention, special, MASK, [4, 5], g, probability=1.0)
    allowed = torch.tensor([MASK, 4, 5])
    assert torch.isin(corrupted[selected], allowed).all()
    assert (corrupted[selected] != ids[selected]).float().mean() > 0.8


def test_masking_vocab_is_read_from_a_tokenizer():
    """S12: special ids come from the tokenizer (here [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3,
    [MASK]=4 in a 9-word vocabulary), never hard-coded as 0/101/102/103."""
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                         "the", "cat", "sat", "mat"])}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    mv = MaskingVocab.from_tokenizer(tok)
    assert mv.mask_id == 4 and mv.special_ids == (0, 1, 2, 3, 4)
    assert mv.ordinary_token_ids == (5, 6, 7, 8)
    ids = torch.tensor([[2, 5, 6, 7, 3, 0]])
    assert mv.special_mask(ids).tolist() == [[True, False, False, False, True, True]]
    corrupted, labels, _, selected = mask_batch(ids, (ids != 0).long(), mv.special_mask(ids), mv.mask_id,
                                                mv.ordinary_token_ids, torch.Generator().manual_seed(0))
    assert selected[0, 1:4].any() and not selected[0, [0, 4, 5]].any()


def test_s11_exercise_example_never_masks_cls_sep_pad():
    """S11: on [101, 123, 456, 789, 102, 0, 0] with special tokens [101, 102, 0], over 2000
    seeds, positions 0, 4, 5, 6 are never selected nor changed, and each of 123/456/789 is
    selected close to 15% of the time (sd sqrt(.15*.85/2000) = 0.008; 4 sd = 0.032).
    Random replacements avoid the special ids and [MASK]=103."""
    ids = torch.tensor([[101, 123, 456, 789, 102, 0, 0]])
    hits = torch.zeros(7)
    for seed in range(2000):
        masked, labels = random_mask_tokens(ids, 30522, 103, [101, 102, 0],
                                            generator=torch.Generator().manual_seed(seed))
        assert masked[0, [0, 4, 5, 6]].tolist() == [101, 102, 0, 0]
        assert (labels[0, [0, 4, 5, 6]] == -100).all()
        sel = labels[0] != -100
        assert torch.equal(labels[0, sel], ids[0, sel])
        assert not torch.isin(masked[0, sel], torch.tensor([0, 101, 102])).any()
        hits += sel.float()
    assert hits[[0, 4, 5, 6]].sum() == 0
    assert ((hits[1:4] / 2000 - 0.15).abs() < 0.032).all(), hits


def test_s11_special_tokens_none_protects_nothing():
    """special_tokens=None protects nothing. 400 copies of [101, 123, 456, 789, 102, 0, 0]
    (2800 positions), mask_prob 0.15, one seeded generator; a position is a target iff its
    label is not IGNORE_INDEX:
    - every label is IGNORE_INDEX or the ORIGINAL id at that position;
    - every position whose id changed is a target, i.e. off-target ids equal the input;
    - at targets the id is [MASK] = 103, the original, or a random replacement from the pool,
      here every id in [0, 30522) except 103 (no special ids to exclude);
    - every column is a target somewhere, [CLS]/[SEP]/[PAD] columns 0, 4, 5, 6 included
      (a column of 400 rows escapes with probability 0.85^400 ~ 4e-29).
    mask_prob=1.0 selects all 2800 positions: labels == ids everywhere, and about 80% become 103
    (sd sqrt(0.8 * 0.2 / 2800) = 0.0076, 4 sd = 0.030), 10% stay and 10% get another id (sd
    sqrt(0.1 * 0.9 / 2800) = 0.0057, 4 sd = 0.023)."""
    ids = torch.tensor([[101, 123, 456, 789, 102, 0, 0]]).repeat(400, 1)  # (400, 7)
    masked, labels = random_mask_tokens(ids, 30522, 103, None, generator=torch.Generator().manual_seed(0))
    assert masked.shape == labels.shape == ids.shape
    target = labels != IGNORE_INDEX
    assert torch.equal(labels[target], ids[target])
    assert torch.equal(masked[~target], ids[~target])
    m, o = masked[target], ids[target]
    replaced = (m != 103) & (m != o)
    assert ((m[replaced] >= 0) & (m[replaced] < 30522)).all()
    assert target.any(dim=0).all(), target.sum(dim=0)
    assert 0 < replaced.sum() < (m == 103).sum()

    masked, labels = random_mask_tokens(ids, 30522, 103, None, mask_prob=1.0,
                                        generator=torch.Generator().manual_seed(0))
    assert torch.equal(labels, ids)
    to_mask = (masked == 103).float().mean().item()
    kept = (masked == ids).float().mean().item()
    other = ((masked != 103) & (masked != ids)).float().mean().item()
    assert abs(to_mask - 0.8) < 0.030, to_mask
    assert abs(kept - 0.1) < 0.023, kept
    assert abs(other - 0.1) < 0.023, other


def test_the_random_stream_is_pinned():
    """`make run` prints the same numbers only if mask_batch draws the same numbers in the same
    order: (6, 5) draws u, one per position; 6 redraws, one per row; (6, 5) random ids. Here
    6 rows of 1 to 3 ordinary tokens at p = 0.15, seed 1: no candidate draws below 0.15, so
    every row takes its candidate with the lowest draw (column 1 in each row) and the row's
    redraw r * 0.15 decides its action, [MASK] below 0.8p = 0.12, random below 0.9p = 0.135:
    rows 0, 3, 4, 5 redraw 0.0960, 0.0067, 0.0037, 0.0388 -> [MASK]; row 1 redraws 0.1461 ->
    kept (387); row 2 redraws 0.1245 -> random id 793, the one drawn for (2, 1).
    The pool check draws nothing: check=False, special_ids, or the pool as MaskingVocab's
    cached tensor change nothing."""
    ids, attention, special = make_batch(6, 5, seed=1)
    assert ids.tolist() == [[1, 447, 904, 924, 2], [1, 387, 657, 135, 2], [1, 817, 2, 0, 0],
                            [1, 94, 2, 0, 0], [1, 109, 606, 2, 0], [1, 206, 2, 0, 0]]
    expected = [[1, 3, 904, 924, 2], [1, 387, 657, 135, 2], [1, 793, 2, 0, 0],  # 387: kept, 793: random
                [1, 3, 2, 0, 0], [1, 3, 606, 2, 0], [1, 3, 2, 0, 0]]
    vocab = MaskingVocab(MASK, tuple(SPECIAL), tuple(ORDINARY))
    assert vocab.ordinary_tensor is vocab.ordinary_tensor  # built once
    for pool, kw in [(ORDINARY, {}), (ORDINARY, {"special_ids": SPECIAL}), (ORDINARY, {"check": False}),
                     (vocab.ordinary_tensor, {"special_ids": vocab.special_ids})]:
        corrupted, _, _, selected = mask_batch(ids, attention, special, MASK, pool,
                                               torch.Generator().manual_seed(1), **kw)
        assert corrupted.tolist() == expected, kw
        assert selected.nonzero().tolist() == [[0, 1], [1, 1], [2, 1], [3, 1], [4, 1], [5, 1]], kw


def test_generator_none_draws_from_torchs_global_generator():
    """generator=None (an AttributeError before) uses torch's global CPU generator: after
    torch.manual_seed(7) the output equals that of torch.Generator().manual_seed(7), the same
    Mersenne Twister seeded alike. The global state is restored afterwards (fork_rng)."""
    ids, attention, special = make_batch(32, 16)
    with torch.random.fork_rng():
        torch.manual_seed(7)
        a = mask_batch(ids, attention, special, MASK, ORDINARY, None)
    b = run(ids, attention, special, seed=7)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)


def test_a_pool_holding_a_special_id_is_refused_on_a_batch_that_lacks_it():
    """A batch with no padding (every row full length) and a pool that holds [PAD]: the check at
    the draws compares the drawn ids with [MASK] and the special ids IN the batch, so [PAD] could
    slip into real positions. special_ids=SPECIAL checks the whole pool first, before any draw,
    and names the offending ids; a clean pool passes."""
    ids, attention, special = make_batch(8, 16, min_len=16)
    assert (attention == 1).all() and not (ids == PAD).any()
    g = torch.Generator().manual_seed(0)
    with pytest.raises(MaskingError, match=r"ordinary_token_ids contains special ids \[0, 3\]"):
        mask_batch(ids, attention, special, MASK, [PAD, MASK] + ORDINARY, g, special_ids=SPECIAL)
    with pytest.raises(MaskingError, match=r"special ids \[0\]"):
        mask_batch(ids, attention, special, MASK, [PAD], g, probability=1.0, special_ids=(PAD, CLS, SEP))
    mask_batch(ids, attention, special, MASK, ORDINARY, g, special_ids=SPECIAL)


def test_the_pool_is_checked_once_per_run():
    """check_replacement_pool, the check a training run makes once before its first step, returns
    the pool as a (V',) long tensor, and refuses a pool holding [MASK] or any special id, naming
    them, whatever batch comes later; an empty or 2-D pool is refused too."""
    pool = check_replacement_pool(ORDINARY, SPECIAL, MASK)
    assert pool.dtype == torch.long and pool.tolist() == ORDINARY
    with pytest.raises(MaskingError, match=r"special ids \[0, 3\]"):
        check_replacement_pool([PAD, MASK] + ORDINARY, SPECIAL, MASK)
    with pytest.raises(MaskingError, match=r"special ids \[3\]"):
        check_replacement_pool(ORDINARY + [MASK], [PAD, CLS, SEP], MASK)
    with pytest.raises(MaskingError, match="non-empty 1-D"):
        check_replacement_pool([], SPECIAL, MASK)
    with pytest.raises(MaskingError, match="non-empty 1-D"):
        check_replacement_pool([[4, 5], [6, 7]], SPECIAL, MASK)


def test_check_false_reads_nothing_and_masks_alike():
    """check=False (the per-step call after check_replacement_pool) draws exactly what check=True
    draws: the same seed gives the same four outputs. It checks no value, so it refuses
    special_ids (which only a check reads), and a batch without any candidate is no error: no
    position is selected, every label is ignore_index, the ids come back unchanged."""
    ids, attention, special = make_batch(32, 16)
    checked = run(ids, attention, special, seed=5)
    unchecked = run(ids, attention, special, seed=5, check=False)
    for x, y in zip(checked, unchecked, strict=True):
        assert torch.equal(x, y)
    with pytest.raises(MaskingError, match="special_ids is read only by check=True"):
        run(ids, attention, special, check=False, special_ids=SPECIAL)
    corrupted, labels, _, selected = run(ids, torch.zeros_like(attention), special, check=False)
    assert not selected.any() and (labels == IGNORE_INDEX).all() and torch.equal(corrupted, ids)


def test_the_target_given_to_an_empty_row_is_uniform_and_80_10_10():
    """Rows [CLS] a b c [SEP] at p = 0.01: a row selects nothing with probability 0.99^3 = 97%,
    and then gets one target, its candidate with the lowest draw. 30,000 rows, so about 29,100
    such targets and 900 natural ones (30,000 * 3 * 0.01).
    By symmetry each of the 3 candidate columns holds 1/3 of all targets: n ~ 30,000 targets,
    sd sqrt((1/3)(2/3)/n) = 0.0027, tolerance 4 sd = 0.011 (always the first candidate would put
    column 1 at ~0.97). Of all targets 80% become [MASK], 10% a random id, 10% stay: sd
    sqrt(0.8 * 0.2 / n) = 0.0023 and sqrt(0.1 * 0.9 / n) = 0.0017, 4 sd each. Keeping the row's
    own draw (>= p, so always 'kept') instead of a fresh one below p would put kept near 0.97.
    A random draw of the same id (1/996 of the 10%) counts as kept: 1e-4, under 0.1 sd."""
    B = 30_000
    ids = torch.randint(4, 1000, (B, 5), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, 4] = CLS, SEP
    special = torch.isin(ids, torch.tensor(SPECIAL))
    corrupted, _, _, selected = run(ids, torch.ones_like(ids), special, seed=0, probability=0.01)
    assert (selected.sum(1) >= 1).all() and not selected[:, [0, 4]].any()
    n = int(selected.sum())
    share = selected[:, 1:4].sum(0) / n                                               # (3,)
    assert ((share - 1 / 3).abs() < 4 * math.sqrt((1 / 3) * (2 / 3) / n)).all(), share
    c, o = corrupted[selected], ids[selected]
    masked, kept = (c == MASK).float().mean().item(), (c == o).float().mean().item()
    rand = ((c != MASK) & (c != o)).float().mean().item()
    sd80, sd10 = math.sqrt(0.8 * 0.2 / n), math.sqrt(0.1 * 0.9 / n)
    assert abs(masked - 0.8) < 4 * sd80, masked
    assert abs(rand - 0.1) < 4 * sd10, rand
    assert abs(kept - 0.1) < 4 * sd10, kept


@pytest.mark.parametrize("call, message", [
    (lambda ids, att, sp: mask_batch(ids, att, sp, -1, [5, 6], None), "mask_id must be a token id"),
    (lambda ids, att, sp: mask_batch(ids, att, sp, 4.0, [5, 6], None), "mask_id must be a token id"),
    (lambda ids, att, sp: mask_batch(ids, att, sp, True, [5, 6], None), "mask_id must be a token id"),
    (lambda ids, att, sp: mask_batch(ids - 9, att, sp, 4, [5, 6], None), "input_ids must be token ids"),
    (lambda ids, att, sp: mask_batch(ids, att, sp, 4, [5, -6], None), "ordinary_token_ids must be token ids"),
    (lambda ids, att, sp: random_mask_tokens(ids, 10, 4, mask_prob=0.0), r"mask_prob must be in \(0, 1\]"),
    (lambda ids, att, sp: random_mask_tokens(ids, 10, 4, mask_prob=1.5), r"mask_prob must be in \(0, 1\]"),
    (lambda ids, att, sp: random_mask_tokens(ids, 10, 4, mask_prob=float("nan")), r"mask_prob must be in"),
    (lambda ids, att, sp: random_mask_tokens(ids, 10, 10), r"mask_token_id must be a token id, an int in \[0, 10\)"),
    (lambda ids, att, sp: random_mask_tokens(ids, 8, 4), r"input_ids must lie in \[0, 8\), got values from 2 to 9"),
])
def test_values_the_masker_must_refuse(call, message):
    """Ids are non-negative ints (a float, a bool or -1 is no token id), the exercise's API knows
    its vocabulary (ids 2..9 do not fit a vocabulary of 8) and a probability lies in (0, 1]: each is
    a MaskingError naming the argument, before anything is drawn."""
    ids = torch.tensor([[2, 7, 8, 9, 3]])
    att, sp = torch.ones_like(ids), (ids == 2) | (ids == 3)
    with pytest.raises(MaskingError, match=message):
        call(ids, att, sp)
