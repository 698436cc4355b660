"""Next-sentence pairs, as BERT's create_pretraining_data.py builds them.

A document is a list of segments (sentences or paragraphs, each a list of token ids, no
specials). Walking each document in order, segments are gathered into a chunk until it holds
`seq_len - 3` tokens (or the document ends). The chunk is cut at a random segment boundary:
A is the part before it. Half the time B is the rest of the chunk: the text that really
follows A (label 0, IsNext). Otherwise, and always when the chunk is a single segment, B is a
run of segments from a random point of another document, never A's own (label 1, NotNext),
and the chunk's unused segments go back to the walk. The longer of A and B is cut at its far end
from the A|B boundary (A at its start, B at its end) until the pair fits; the block is `[CLS] A [SEP] B [SEP]`, segment ids 0 up to the first
[SEP] and 1 after it, padded to seq_len with attention_mask 0.

Every draw comes from one torch.Generator seeded with `seed` (torch's CPU generator gives the
same numbers on every machine), in the order the documents are walked: the same documents and
seed give the same pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .text import Blocks

IS_NEXT, NOT_NEXT = 0, 1  # HF's next_sentence_label: 0 = B follows A


@dataclass
class Pairs:
    blocks: Blocks                   # (S, T) input_ids, token_type_ids, attention_mask
    next_sentence_label: torch.Tensor  # (S,): IS_NEXT or NOT_NEXT


def _uniform(generator: torch.Generator, n: int) -> int:
    """A draw from 0 .. n-1."""
    return int(torch.randint(n, (1,), generator=generator))


def _coin(generator: torch.Generator) -> bool:
    """True with probability 1/2."""
    return bool(torch.rand((), generator=generator) < 0.5)


def _random_b(documents: list[list[list[int]]], own: int, length: int, generator: torch.Generator) -> list[int]:
    """About `length` tokens of consecutive segments from a random point of a document other than `own`."""
    other = _uniform(generator, len(documents) - 1)
    other += other >= own  # skip A's own document
    segments = documents[other]
    start = _uniform(generator, len(segments))
    b: list[int] = []
    for segment in segments[start:]:
        b += segment
        if len(b) >= length:
            break
    return b


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


def document_pairs(documents: list[list[list[int]]], seq_len: int, seed: int) -> list[tuple[list[int], list[int], int]]:
    """(A, B, label) for every chunk of every document (see the module docstring)."""
    if seq_len < 5:
        raise ValueError(f"seq_len must be at least 5 ([CLS] a [SEP] b [SEP]), got {seq_len}")
    if sum(1 for d in documents if any(d)) < 2:
        raise ValueError("next-sentence pairs need at least two documents with text: a NotNext B comes from another one")
    documents = [[s for s in d if s] for d in documents if any(d)]  # empty segments and documents carry nothing
    generator, room, pairs = torch.Generator().manual_seed(seed), seq_len - 3, []
    for own, segments in enumerate(documents):
        chunk, length, i = [], 0, 0
        while i < len(segments):
            chunk.append(segments[i])
            length += len(segments[i])
            i += 1
            if length < room and i < len(segments):
                continue
            cut = 1 + _uniform(generator, len(chunk) - 1) if len(chunk) > 1 else 1
            a = [t for s in chunk[:cut] for t in s]
            if len(chunk) == 1 or _coin(generator):
                b, label = _random_b(documents, own, room - len(a), generator), NOT_NEXT
                i -= len(chunk) - cut  # the unused segments go back to the walk
            else:
                b, label = [t for s in chunk[cut:] for t in s], IS_NEXT
            pairs.append((*_fit(a, b, room), label))
            chunk, length = [], 0
    return pairs


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
