"""Text -> pretraining blocks: a trained WordPiece tokenizer, tokenisation, packing.

A prepared corpus is a folder with `pretrain/{train,valid}.txt` (one document per line, as
data/prepare.py writes it); `corpus_tokenizer` and `corpus_blocks` train, tokenise and cache
inside that folder, so the second run of the same corpus starts at once.

A block is `[CLS] A [SEP] B [SEP]` of exactly `seq_len` tokens, A and B being consecutive
text (segment ids 0 and 1), split at the line boundary nearest the middle of the block;
a stretch of text with no line boundary inside becomes `[CLS] A [SEP]`. No position is
spent on padding except in the very last block, whose padding has attention_mask 0.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import os
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from .files import write_file

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_wordpiece(lines, vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """BERT's WordPiece tokenizer trained on `lines`: lower-cased, accents kept, CJK characters
    one per token, specials [PAD] [UNK] [CLS] [SEP] [MASK] with ids 0..4 in that order."""
    trained = _bert_tokenizer(models.WordPiece(unk_token="[UNK]"))
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    trained.train_from_iterator(lines, trainer)
    # The trainer numbers the alphabet in hash-map order, different on every run: renumber
    # (specials first, then sorted) so the same text always gives the same ids.
    learned = sorted(t for t in trained.get_vocab() if t not in SPECIAL_TOKENS)
    vocab = {t: i for i, t in enumerate([*SPECIAL_TOKENS, *learned])}
    tok = _bert_tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def _bert_tokenizer(model) -> Tokenizer:
    tok = Tokenizer(model)
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=False, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    return tok


def tokenize_lines(tokenizer: Tokenizer, lines: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """All lines as one stream of ids (no specials) and the offset where each line starts.

    A stream has no padding and no truncation: if the tokenizer is set to pad or truncate (a
    pretrained tokenizer.json often is), a copy with both turned off does the encoding."""
    if tokenizer.padding is not None or tokenizer.truncation is not None:
        tokenizer = Tokenizer.from_str(tokenizer.to_str())
        tokenizer.no_padding()
        tokenizer.no_truncation()
    encodings = tokenizer.encode_batch(lines, add_special_tokens=False)
    lengths = torch.tensor([len(e.ids) for e in encodings], dtype=torch.long)
    ids = torch.tensor([i for e in encodings for i in e.ids], dtype=torch.int32)
    starts = torch.cumsum(lengths, 0) - lengths
    return ids, starts[lengths > 0]


@dataclass
class Blocks:
    input_ids: torch.Tensor       # (S, T): S blocks
    token_type_ids: torch.Tensor  # (S, T)
    attention_mask: torch.Tensor  # (S, T)

    def __len__(self) -> int:
        return self.input_ids.shape[0]


def pack_blocks(ids: torch.Tensor, starts: torch.Tensor, seq_len: int,
                cls_id: int, sep_id: int, pad_id: int) -> Blocks:
    """Pack a token stream into (S, seq_len) blocks (see the module docstring)."""
    if seq_len < 5:
        raise ValueError(f"seq_len must be at least 5 ([CLS] a [SEP] b [SEP]), got {seq_len}")
    if len(ids) == 0:
        raise ValueError("no tokens to pack: the text is empty")
    stream, bounds = ids.tolist(), starts.tolist()
    body = seq_len - 3  # room left by [CLS] A [SEP] B [SEP]
    rows, types = [], []
    pos, n = 0, len(stream)
    while pos < n:
        end = min(pos + body, n)
        lo, hi = bisect.bisect_right(bounds, pos), bisect.bisect_left(bounds, end)
        inside = bounds[lo:hi]  # line starts strictly inside (pos, end)
        if inside:
            mid = (pos + end) / 2
            split = min(inside, key=lambda b: abs(b - mid))
            a, b = stream[pos:split], stream[split:end]
            rows.append([cls_id, *a, sep_id, *b, sep_id])
            types.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
        else:
            end = min(pos + body + 1, n)
            rows.append([cls_id, *stream[pos:end], sep_id])
            types.append([0] * (end - pos + 2))
        pos = end
    input_ids = torch.full((len(rows), seq_len), pad_id, dtype=torch.long)
    token_type_ids = torch.zeros((len(rows), seq_len), dtype=torch.long)
    attention_mask = torch.zeros((len(rows), seq_len), dtype=torch.long)
    for i, (row, typ) in enumerate(zip(rows, types, strict=True)):
        input_ids[i, :len(row)] = torch.tensor(row)
        token_type_ids[i, :len(typ)] = torch.tensor(typ)
        attention_mask[i, :len(row)] = 1
    return Blocks(input_ids, token_type_ids, attention_mask)


# ---- a prepared corpus folder -----------------------------------------------------------------


def pad_batch(seqs: list[list[int]], pad_id: int, length: int | None = None):
    """(input_ids, attention_mask), each (B, T): T is `length`, or the longest row (dynamic padding)."""
    T = length or max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    return ids, mask


def corpus_lines(folder: str, split: str) -> list[str]:
    """The lines of a prepared corpus's pretraining split ("train" or "valid")."""
    with open(os.path.join(folder, "pretrain", f"{split}.txt"), encoding="utf-8") as f:
        return f.read().splitlines()


def corpus_tokenizer(folder: str, vocab_size: int) -> Tokenizer:
    """The WordPiece tokenizer of `vocab_size` words trained on the corpus's training split
    (cached; a cache file that does not read back, cut short by a crash, is trained again)."""
    path = os.path.join(folder, f"tokenizer-{vocab_size}.json")
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
