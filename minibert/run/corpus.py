"""The corpus cache: a prepared corpus is a folder with `pretrain/{train,valid}.txt` (one
paragraph per line, a blank line after each document, as data/prepare.py writes it). The
WordPiece tokenizer of each vocabulary size and each split's token ids are cached inside that
folder, so the second run of the same corpus starts at once. Each cache file carries its key
(what it was made from); one that does not read back whole, or of another key, is made again.
`corpus_documents` gives a split's documents as sentences of token ids, for next-sentence pairs.
"""

from __future__ import annotations

import hashlib
import io
import json
import os

import torch
from tokenizers import Tokenizer

from ..checkpoint import torch_load
from ..files import parse_json, read_bytes, sha256_of, waiting_lock, write_file
from ..text import Blocks, lines_of, pack_blocks, plain_tokenizer, sentences, tokenize_lines, train_wordpiece


def _split_path(folder: str, split: str) -> str:
    return os.path.join(folder, "pretrain", f"{split}.txt")


def _split_lines(folder: str, split: str) -> list[str]:
    return lines_of(read_bytes(_split_path(folder, split)).decode("utf-8"))


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
    (cached in tokenizer-V.json, with its key beside it: the vocabulary size, the sha256 of the
    text it was trained on and its own; a cached file whose key does not match, cut short by a
    crash or put there by hand, is trained again). Trained under a lock: on a small corpus the
    trainer of `tokenizers` breaks ties between equally frequent pieces in an order that varies
    from process to process, so two runs that start together must not each train their own; the
    second waits and reads the first's."""
    path = os.path.join(folder, f"tokenizer-{vocab_size}.json")
    with waiting_lock(os.path.join(folder, f"tokenizer-{vocab_size}.lock")):
        key = {"vocab_size": vocab_size, "train_sha256": sha256_of(_split_path(folder, "train"))}
        cached = _cached_tokenizer(path, key)
        if cached is not None:
            return cached
        data = train_wordpiece(corpus_lines(folder, "train"), vocab_size).to_str(pretty=True).encode("utf-8")
        write_file(path, data)
        key["tokenizer_sha256"] = hashlib.sha256(data).hexdigest()
        write_file(f"{path}.key", json.dumps(key).encode("utf-8"))  # written last: a file without it is trained again
        return Tokenizer.from_file(path)


def _cached_tokenizer(path: str, key: dict) -> Tokenizer | None:
    """The tokenizer at `path` if the key written beside it is `key` and names this very file."""
    try:
        data = read_bytes(path)
        if parse_json(read_bytes(f"{path}.key")) != {**key, "tokenizer_sha256": hashlib.sha256(data).hexdigest()}:
            return None
        return Tokenizer.from_str(data.decode("utf-8"))
    except Exception:  # missing or damaged (the tokenizers library raises a bare Exception)
        return None


def corpus_blocks(folder: str, tokenizer: Tokenizer, split: str, seq_len: int) -> Blocks:
    """A split tokenised once (cached beside the corpus, named by the tokenizer, and holding its
    key: the tokenizer's sha256 and the split text's; a cache file that does not read back whole,
    or of another key, is made again), then packed."""
    tokenizer_sha = hashlib.sha256(tokenizer.to_str().encode()).hexdigest()
    key = f"{tokenizer_sha} {sha256_of(_split_path(folder, split))}"
    path = os.path.join(folder, "tokens", f"{split}-{tokenizer_sha[:12]}.pt")
    cached = _cached_tokens(path, tokenizer.get_vocab_size(), key)
    if cached is None:
        ids, starts = tokenize_lines(tokenizer, corpus_lines(folder, split))
        cached = {"ids": ids, "starts": starts, "key": key}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        buffer = io.BytesIO()
        torch.save(cached, buffer)
        write_file(path, buffer.getvalue())
        digest = hashlib.sha256(buffer.getvalue()).hexdigest()
        write_file(f"{path}.sha256", f"{digest}\n".encode())  # written last: a file without it is made again
    return pack_blocks(cached["ids"], cached["starts"], seq_len, tokenizer.token_to_id("[CLS]"),
                       tokenizer.token_to_id("[SEP]"), tokenizer.token_to_id("[PAD]"))


def _cached_tokens(path: str, vocab_size: int, key: str) -> dict | None:
    """{"ids": (N,), "starts": (S,), "key": key} from a token cache file, or None if it is missing,
    of another key, or damaged: its bytes not those whose sha256 was written beside it (edited,
    cut short), ids outside the vocabulary, or line starts outside the stream."""
    try:
        data = read_bytes(path)
        if read_bytes(f"{path}.sha256").decode().strip() != hashlib.sha256(data).hexdigest():
            return None
        cached = torch_load(data)
        ids, starts = cached["ids"], cached["starts"]
        ok = cached.get("key") == key and ids.dim() == starts.dim() == 1 and not ids.is_floating_point() and not starts.is_floating_point()
        ok = ok and (len(ids) == 0 or 0 <= int(ids.min()) <= int(ids.max()) < vocab_size)
        ok = ok and (len(starts) == 0 or 0 <= int(starts.min()) <= int(starts.max()) < max(1, len(ids)))
        return cached if ok and bool((starts[1:] >= starts[:-1]).all()) else None
    except Exception:  # missing, cut short, or not the dict this function writes: tokenise again
        return None
