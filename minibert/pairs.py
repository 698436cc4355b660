"""Next-sentence pairs, built as BERT's create_pretraining_data.py builds them, with two changes
for a corpus of short snippets.

A document is a list of segments (sentences, each a list of token ids, no specials). Walking
each document of two or more segments in order, segments are gathered into a chunk until it
holds `seq_len - 3` tokens and at least two segments (or the document ends). The chunk is cut at
a random segment boundary: A is the part before it. Half the time B is the rest of the chunk:
the text that really follows A (label 0, IsNext). Otherwise B is text of the same length
starting at a random segment of another document, never A's own (label 1, NotNext), and the
rest of the chunk goes back to the walk. The longer of A and B is cut at its far end from the
A|B boundary (A at its start, B at its end) until the pair fits; the block is
`[CLS] A [SEP] B [SEP]`, segment ids 0 up to the first [SEP] and 1 after it, padded to seq_len
with attention_mask 0.

The two changes from BERT, both so that nothing but "does B continue A?" tells the label:
- BERT gives a chunk of one segment (a one-sentence document, a document's last sentence)
  a NotNext B; here such a segment makes no pair, so every label is a fair coin. Those
  segments (most of a corpus of one-sentence snippets) are packed into ordinary MLM blocks
  whose next-sentence label is IGNORE_INDEX (`pretraining_blocks`).
- BERT's NotNext B fills the block, and its random segment is drawn from a uniformly random
  document; here B is as long as the IsNext B would have been, and its start is a uniformly
  random segment of the documents pairs are made of (a longer document is likelier), so
  neither B's length nor its kind of text tells the label.

Every draw comes from one torch.Generator seeded with `seed` (torch's CPU generator gives the
same numbers on every machine), in the order the documents are walked: the same documents and
seed give the same pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .loss import IGNORE_INDEX
from .text import Blocks, pack_blocks

IS_NEXT, NOT_NEXT = 0, 1  # HF's next_sentence_label: 0 = B follows A


@dataclass
class Pairs:
    blocks: Blocks                     # (S, T) input_ids, token_type_ids, attention_mask
    next_sentence_label: torch.Tensor  # (S,): IS_NEXT, NOT_NEXT, or IGNORE_INDEX on a block that is no pair


def _uniform(generator: torch.Generator, n: int) -> int:
    """A draw from 0 .. n-1."""
    return int(torch.randint(n, (1,), generator=generator))


def _coin(generator: torch.Generator) -> bool:
    """True with probability 1/2."""
    return bool(torch.rand((), generator=generator) < 0.5)


class _Elsewhere:
    """Random text for NotNext: every segment of the documents pairs are made of, in order, and
    where each document's segments start."""

    def __init__(self, documents: list[list[list[int]]]):
        self.segments = [s for d in documents for s in d]
        self.starts = [0]
        for d in documents:
            self.starts.append(self.starts[-1] + len(d))

    def draw(self, own: int, length: int, generator: torch.Generator) -> list[int]:
        """`length` tokens of consecutive segments from a uniformly random segment outside document
        `own`, running on into the next documents (skipping `own`, wrapping around)."""
        lo, hi = self.starts[own], self.starts[own + 1]
        n = len(self.segments)
        i = _uniform(generator, n - (hi - lo))
        i += (hi - lo) if i >= lo else 0  # skip A's own document
        b: list[int] = []
        while len(b) < length:
            b += self.segments[i]
            i = (i + 1) % n
            if i == lo:
                i = hi % n
        return b[:length]


def _fit(a: list[int], b: list[int], room: int) -> tuple[list[int], list[int]]:
    """Cut the longer of a and b until len(a) + len(b) <= room, each at its far end from the
    A|B boundary (A from its start, B from its end), so that an IsNext B still follows A."""
    a, b = list(a), list(b)
    while len(a) + len(b) > room:
        if len(a) > len(b):
            a.pop(0)
        else:
            b.pop()
    return a, b


def document_pairs(documents: list[list[list[int]]], seq_len: int,
                   seed: int) -> tuple[list[tuple[list[int], list[int], int]], list[list[int]]]:
    """(pairs, alone): the (A, B, label) of every chunk of every document of two or more
    segments (see the module docstring), and the segments in no pair, in order: those of
    one-segment documents, and a document's last segment when the walk leaves it alone."""
    if seq_len < 5:
        raise ValueError(f"seq_len must be at least 5 ([CLS] a [SEP] b [SEP]), got {seq_len}")
    documents = [[s for s in d if s] for d in documents]  # empty segments carry nothing
    paired = [d for d in documents if len(d) >= 2]
    if len(paired) < 2:
        raise ValueError("next-sentence pairs need at least two documents of two or more sentences: a NotNext B "
                         "comes from another one")
    elsewhere = _Elsewhere(paired)
    generator, room = torch.Generator().manual_seed(seed), seq_len - 3
    pairs, alone, own = [], [], 0
    for segments in documents:
        if len(segments) < 2:
            alone += segments
            continue
        i = 0
        while i < len(segments):
            chunk, length = [], 0
            while i < len(segments) and (length < room or len(chunk) < 2):
                chunk.append(segments[i])
                length += len(segments[i])
                i += 1
            if len(chunk) < 2:  # the document's last segment, left alone
                alone += chunk
                break
            cut = 1 + _uniform(generator, len(chunk) - 1)
            a = [t for s in chunk[:cut] for t in s]
            rest = [t for s in chunk[cut:] for t in s]
            if _coin(generator):
                b, label = elsewhere.draw(own, len(rest), generator), NOT_NEXT
                i -= len(chunk) - cut  # the unused segments go back to the walk
            else:
                b, label = rest, IS_NEXT
            pairs.append((*_fit(a, b, room), label))
        own += 1
    return pairs, alone


def pack_pairs(pairs: list[tuple[list[int], list[int], int]], seq_len: int, cls_id: int, sep_id: int,
               pad_id: int) -> Pairs:
    """The (A, B, label) pairs as `[CLS] A [SEP] B [SEP]` blocks of seq_len tokens, padded."""
    S = len(pairs)
    input_ids = torch.full((S, seq_len), pad_id, dtype=torch.long)      # (S, T)
    token_type_ids = torch.zeros((S, seq_len), dtype=torch.long)        # (S, T)
    attention_mask = torch.zeros((S, seq_len), dtype=torch.long)        # (S, T)
    for row, (a, b, _) in enumerate(pairs):
        ids = [cls_id, *a, sep_id, *b, sep_id]
        input_ids[row, :len(ids)] = torch.tensor(ids)
        token_type_ids[row, len(a) + 2:len(ids)] = 1
        attention_mask[row, :len(ids)] = 1
    labels = torch.tensor([label for _, _, label in pairs], dtype=torch.long)  # (S,)
    return Pairs(Blocks(input_ids, token_type_ids, attention_mask), labels)


def pretraining_blocks(documents: list[list[list[int]]], seq_len: int, seed: int, cls_id: int, sep_id: int,
                       pad_id: int) -> Pairs:
    """What MLM + NSP trains on: every pair of `document_pairs` as a block, then the segments in no
    pair packed as ordinary MLM blocks (text.pack_blocks), whose next-sentence label is
    IGNORE_INDEX: every text is masked-LM text, and only real pairs are next-sentence examples."""
    pairs, alone = document_pairs(documents, seq_len, seed)
    packed = pack_pairs(pairs, seq_len, cls_id, sep_id, pad_id)
    if not alone:
        return packed
    lengths = torch.tensor([len(s) for s in alone])
    text = pack_blocks(torch.tensor([t for s in alone for t in s]), torch.cumsum(lengths, 0) - lengths, seq_len,
                       cls_id, sep_id, pad_id)
    blocks = Blocks(*(torch.cat([getattr(packed.blocks, k), getattr(text, k)])
                      for k in ("input_ids", "token_type_ids", "attention_mask")))
    labels = torch.cat([packed.next_sentence_label, torch.full((len(text),), IGNORE_INDEX, dtype=torch.long)])
    return Pairs(blocks, labels)
