"""The corpus cache: a prepared corpus is a folder with `pretrain/{train,valid}.txt` (one
paragraph per line, a blank line after each document, as data/prepare.py writes it). The
WordPiece tokenizer of each vocabulary size and each split's token ids are cached inside that
folder, so the second run of the same corpus starts at once; a cache file that does not read
back whole is made again. `corpus_documents` gives a split's documents as sentences of token
ids, for next-sentence pairs.
"""

from __future__ import annotations

import hashlib
import io
import os

import torch
from tokenizers import Tokenizer

from ..files import waiting_lock, write_file
from ..text import Blocks, lines_of, pack_blocks, plain_tokenizer, sentences, tokenize_lines, train_wordpiece


def _split_lines(folder: str, split: str) -> list[str]:
    with open(os.path.join(folder, "pretrain", f"{split}.txt"), encoding="utf-8", newline="") as f:
        return lines_of(f.read())


def corpus_lines(folder: str, split: str) -> list[str]:
    """The paragraphs of a prepared corpus's pretraining split ("train" or "valid"), in order."""
    return [line for line in _split_lines(folder, split) if line]


def corpus_documents(folder: str, tokenizer: Tokenizer, split: str) -> list[list[list[int]]]:
    """A split's documents, each a list of its sentences' token ids (no specials): what
    next-sentence pairs are drawn from (minibert/pairs.py)."""
    documents: list[list[str]] = [[]]
    for line in _split_lines(folder, split):
        if line:
            documents[-1] += sentences(line)
        elif documents[-1]:
            documents.append([])
    encodings = plain_tokenizer(tokenizer).encode_batch([s for d in documents for s in d], add_special_tokens=False)
    ids, out = iter(e.ids for e in encodings), []
    for doc in documents:
        out.append([segment for segment in (next(ids) for _ in doc) if segment])
    return [doc for doc in out if doc]


def corpus_tokenizer(folder: str, vocab_size: int) -> Tokenizer:
    """The WordPiece tokenizer of `vocab_size` words trained on the corpus's training split
    (cached; a cache file that does not read back, cut short by a crash, is trained again).
    Trained under a lock: on a small corpus the trainer of `tokenizers` breaks ties between
    equally frequent pieces in an order that varies from process to process, so two runs that
    start together must not each train their own; the second waits and reads the first's."""
    path = os.path.join(folder, f"tokenizer-{vocab_size}.json")
    with waiting_lock(os.path.join(folder, f"tokenizer-{vocab_size}.lock")):
        if os.path.isfile(path):
            try:
                return Tokenizer.from_file(path)
            except Exception:  # the tokenizers library raises a bare Exception for a damaged file
                pass
        tok = train_wordpiece(corpus_lines(folder, "train"), vocab_size)
        write_file(path, tok.to_str(pretty=True).encode("utf-8"))
        return Tokenizer.from_file(path)


def corpus_blocks(folder: str, tokenizer: Tokenizer, split: str, seq_len: int) -> Blocks:
    """A split tokenised once (cached beside the corpus, keyed by the tokenizer; a cache file
    that does not read back whole is made again), then packed."""
    key = hashlib.sha256(tokenizer.to_str().encode()).hexdigest()[:12]
    path = os.path.join(folder, "tokens", f"{split}-{key}.pt")
    cached = _cached_tokens(path, tokenizer.get_vocab_size())
    if cached is None:
        ids, starts = tokenize_lines(tokenizer, corpus_lines(folder, split))
        cached = {"ids": ids, "starts": starts}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        buffer = io.BytesIO()
        torch.save(cached, buffer)
        write_file(path, buffer.getvalue())
    return pack_blocks(cached["ids"], cached["starts"], seq_len, tokenizer.token_to_id("[CLS]"),
                       tokenizer.token_to_id("[SEP]"), tokenizer.token_to_id("[PAD]"))


def _cached_tokens(path: str, vocab_size: int) -> dict | None:
    """{"ids": (N,), "starts": (S,)} from a token cache file, or None if it is missing or damaged
    (cut short, or ids outside the vocabulary, or line starts outside the stream)."""
    try:
        cached = torch.load(path, weights_only=True)
        ids, starts = cached["ids"], cached["starts"]
        ok = ids.dim() == starts.dim() == 1 and not ids.is_floating_point() and not starts.is_floating_point()
        ok = ok and (len(ids) == 0 or 0 <= int(ids.min()) <= int(ids.max()) < vocab_size)
        ok = ok and (len(starts) == 0 or 0 <= int(starts.min()) <= int(starts.max()) < max(1, len(ids)))
        return cached if ok and bool((starts[1:] >= starts[:-1]).all()) else None
    except Exception:  # missing, cut short, or not the dict this function writes: tokenise again
        return None
