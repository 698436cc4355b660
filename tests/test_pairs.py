"""Next-sentence pairs (minibert/pairs.py): the IsNext / NotNext split, where B comes from, the
block layout, and the seed."""

import math

import pytest
import torch

from minibert.pairs import IS_NEXT, NOT_NEXT, document_pairs, pack_pairs

CLS, SEP, PAD = 2, 3, 0


def corpus(n_docs=40, n_segments=30, seed=0):
    """Document d's tokens are 1000 d + 10 s + j (segment s, token j): a token names its document
    and its place in it. Segments are 3 to 6 tokens, so every chunk of a 32-token block holds
    several segments and the coin decides every label."""
    g = torch.Generator().manual_seed(seed)
    return [[[1000 * d + 10 * s + j for j in range(int(torch.randint(3, 7, (1,), generator=g)))]
             for s in range(n_segments)] for d in range(n_docs)]


def test_half_the_pairs_are_not_next_within_four_standard_deviations():
    """Segments are 3-6 tokens and a 32-token block has room for 29, so a chunk holds one
    segment only at a document's end: then A holds the document's last segment (29), and B must
    come from elsewhere. Every other pair's label is a fair coin, so their NotNext count is
    Binomial(n, 1/2): mean n/2, standard deviation sqrt(n)/2. The forced ones are all NotNext."""
    pairs = document_pairs(corpus(n_docs=80), 32, seed=0)
    forced = [label for a, _, label in pairs if a[-1] % 1000 // 10 == 29]
    coin = [label for a, _, label in pairs if a[-1] % 1000 // 10 != 29]
    n, not_next = len(coin), sum(label == NOT_NEXT for label in coin)
    assert n > 400 and forced, (n, len(forced))
    assert abs(not_next - n / 2) < 4 * math.sqrt(n) / 2, (not_next, n)
    assert set(forced) == {NOT_NEXT}


def test_is_next_b_follows_a_in_its_document_and_not_next_b_comes_from_another():
    """IsNext: B starts with the segment right after A's last one, in A's document (the next
    token in the numbering, or the next segment's first). NotNext: every token of B is from one
    document, never A's."""
    for a, b, label in document_pairs(corpus(), 32, seed=1):
        doc_a = {t // 1000 for t in a}
        assert len(doc_a) == 1
        if label == IS_NEXT:
            assert {t // 1000 for t in b} == doc_a
            last, first = a[-1] % 1000, b[0] % 1000
            assert first // 10 == last // 10 + 1 and first % 10 == 0, (a, b)
        else:
            assert len({t // 1000 for t in b}) == 1 and not doc_a & {t // 1000 for t in b}, (a, b)


def test_blocks_hold_cls_a_sep_b_sep_with_segment_ids_and_padding():
    """Each row: [CLS] A [SEP] B [SEP] then padding, exactly seq_len long; segment id 0 from
    [CLS] to the first [SEP], 1 from B's first token to the second [SEP], 0 on padding; the
    attention mask 1 on the tokens, 0 on padding."""
    pairs = document_pairs(corpus(n_docs=5), 32, seed=0)
    packed = pack_pairs(pairs, 32, CLS, SEP, PAD)
    blocks = packed.blocks
    assert blocks.input_ids.shape == (len(pairs), 32)
    assert packed.next_sentence_label.tolist() == [label for _, _, label in pairs]
    for row, (a, b, _) in enumerate(pairs):
        n = len(a) + len(b) + 3
        assert 2 <= len(a) + len(b) <= 29 and a and b
        assert blocks.input_ids[row].tolist() == [CLS, *a, SEP, *b, SEP] + [PAD] * (32 - n)
        assert blocks.token_type_ids[row].tolist() == [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * (32 - n)
        assert blocks.attention_mask[row].tolist() == [1] * n + [0] * (32 - n)


def test_the_same_seed_gives_the_same_pairs_and_another_seed_others():
    assert document_pairs(corpus(), 32, seed=3) == document_pairs(corpus(), 32, seed=3)
    assert document_pairs(corpus(), 32, seed=3) != document_pairs(corpus(), 32, seed=4)


def test_a_single_segment_chunk_is_not_next_and_one_document_is_refused():
    """A document of one long segment gives a one-segment chunk: B must come from elsewhere. One
    document alone has no elsewhere."""
    long = [[list(range(100, 140))], [list(range(200, 240))]]
    pairs = document_pairs(long, 16, seed=0)
    assert [label for _, _, label in pairs] == [NOT_NEXT, NOT_NEXT]
    assert all(len(a) + len(b) == 13 for a, b, _ in pairs)
    with pytest.raises(ValueError, match="at least two documents"):
        document_pairs([[[5, 6, 7]], [[]]], 16, seed=0)
