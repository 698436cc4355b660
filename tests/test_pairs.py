"""Next-sentence pairs (minibert/pairs.py): the IsNext / NotNext split, where B comes from, the
block layout, and the seed."""

import math

import pytest
import torch

from minibert import IGNORE_INDEX
from minibert.pairs import IS_NEXT, NOT_NEXT, document_pairs, pack_pairs, pretraining_blocks

CLS, SEP, PAD = 2, 3, 0
FIRST_PAIRS = [(13, 16, 0), (23, 6, 1), (17, 12, 1), (12, 17, 0), (24, 3, 1), (15, 14, 1)]  # seed 0, 10 documents


def corpus(n_docs=40, n_segments=30, seed=0):
    """Document d's tokens are 1000 d + 10 s + j (segment s, token j): a token names its document
    and its place in it. Segments are 3 to 6 tokens, so every chunk of a 32-token block holds
    several segments and the coin decides every label."""
    g = torch.Generator().manual_seed(seed)
    return [[[1000 * d + 10 * s + j for j in range(int(torch.randint(3, 7, (1,), generator=g)))]
             for s in range(n_segments)] for d in range(n_docs)]


def test_every_label_is_a_fair_coin_within_four_standard_deviations():
    """Every chunk holds two or more segments, so every pair's label is a coin flip: the NotNext
    count of n pairs is Binomial(n, 1/2), mean n/2, standard deviation sqrt(n)/2. (BERT forces
    NotNext on a one-segment chunk; here such a segment makes no pair.)"""
    pairs, _ = document_pairs(corpus(n_docs=80), 32, seed=0)
    n, not_next = len(pairs), sum(label == NOT_NEXT for _, _, label in pairs)
    assert n > 400, n
    assert abs(not_next - n / 2) < 4 * math.sqrt(n) / 2, (not_next, n)


def test_is_next_b_follows_a_in_its_document_and_not_next_b_comes_from_others():
    """IsNext: B starts with the segment right after A's last one, in A's document (the next
    token in the numbering, or the next segment's first). NotNext: no token of B is from A's
    document, and B starts at a segment's first token."""
    pairs, _ = document_pairs(corpus(), 32, seed=1)
    for a, b, label in pairs:
        doc_a = {t // 1000 for t in a}
        assert len(doc_a) == 1
        if label == IS_NEXT:
            assert {t // 1000 for t in b} == doc_a
            last, first = a[-1] % 1000, b[0] % 1000
            assert first // 10 == last // 10 + 1 and first % 10 == 0, (a, b)
        else:
            assert not doc_a & {t // 1000 for t in b} and b[0] % 10 == 0, (a, b)


def test_a_not_next_b_is_as_long_as_the_is_next_b_would_have_been():
    """Neither B's length nor its source tells the label: the mean B length of the two labels
    agrees within 1 token (a token count, 3-6 per segment), and a NotNext B is made of the same
    documents' text as the pairs (here every document has many segments)."""
    pairs, _ = document_pairs(corpus(n_docs=80), 32, seed=2)
    mean = lambda label: sum(len(b) for _, b, y in pairs if y == label) / sum(y == label for _, _, y in pairs)
    assert abs(mean(IS_NEXT) - mean(NOT_NEXT)) < 1, (mean(IS_NEXT), mean(NOT_NEXT))


def test_segments_in_no_pair_come_back_alone_in_order():
    """One-segment documents make no pair: their segments, and a document's last segment left
    alone by the walk, are returned in order, and every token of the corpus is in a pair or there
    (pairs may cut tokens off, so the check is one way: alone + paired covers each segment)."""
    docs = [[[1, 2]], [[10, 11], [12, 13], [14, 15]], [[20, 21]], [[30, 31], [32, 33], [34, 35], [36]]]
    pairs, alone = document_pairs(docs, 16, seed=0)
    assert alone[:1] == [[1, 2]] and [20, 21] in alone
    seen = {t for a, b, _ in pairs for t in a + b} | {t for s in alone for t in s}
    assert {10, 11, 12, 13, 14, 15, 30, 31, 32, 33, 34, 35, 36} & {t for a, _, _ in pairs for t in a}
    assert {1, 2, 20, 21} <= seen


def test_pretraining_blocks_are_the_pairs_then_the_text_with_no_pair():
    """pretraining_blocks: the pairs' blocks with their labels, then the segments in no pair packed
    as text.pack_blocks packs them, labelled IGNORE_INDEX (-100): masked-LM text, no NSP example."""
    docs = corpus(n_docs=6) + [[[5000 + i, 5000 + i]] for i in range(40)]
    packed = pretraining_blocks(docs, 32, seed=0, cls_id=CLS, sep_id=SEP, pad_id=PAD)
    pairs, alone = document_pairs(docs, 32, seed=0)
    n = len(pairs)
    assert packed.next_sentence_label[:n].tolist() == [y for _, _, y in pairs]
    assert set(packed.next_sentence_label[n:].tolist()) == {IGNORE_INDEX} and len(packed.blocks) > n
    text = [t for row in packed.blocks.input_ids[n:].tolist() for t in row if t not in (CLS, SEP, PAD)]
    assert text == [t for s in alone for t in s]


def test_blocks_hold_cls_a_sep_b_sep_with_segment_ids_and_padding():
    """Each row: [CLS] A [SEP] B [SEP] then padding, exactly seq_len long; segment id 0 from
    [CLS] to the first [SEP], 1 from B's first token to the second [SEP], 0 on padding; the
    attention mask 1 on the tokens, 0 on padding."""
    pairs, _ = document_pairs(corpus(n_docs=5), 32, seed=0)
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


def test_the_pairs_of_a_seed_are_fixed_numbers():
    """The same on every machine: torch's CPU generator draws the same numbers everywhere, so the
    first pairs of seed 0 on this corpus are written down here (labels and A, B lengths)."""
    pairs, _ = document_pairs(corpus(n_docs=10), 32, seed=0)
    assert [(len(a), len(b), y) for a, b, y in pairs[:6]] == FIRST_PAIRS


def test_long_segments_still_pair_and_too_few_documents_are_refused():
    """Two segments longer than the block still make a pair, each cut at its far end. With seed 0
    the second pair is NotNext: its own B segment goes back to the walk and, the document's last,
    is left alone. NotNext needs another document of two or more segments to draw B from."""
    long = [[list(range(100, 140)), list(range(140, 180))], [list(range(200, 240)), list(range(240, 280))]]
    pairs, alone = document_pairs(long, 16, seed=0)
    assert [y for _, _, y in pairs] == [IS_NEXT, NOT_NEXT] and alone == [list(range(240, 280))]
    assert all(len(a) + len(b) == 13 and len(a) >= 6 for a, b, _ in pairs)
    with pytest.raises(ValueError, match="at least two documents of two or more"):
        document_pairs([[[5, 6, 7], [8]], [[9]]], 16, seed=0)
