"""Text -> pretraining blocks: a trained WordPiece tokenizer, tokenisation, packing, padding.

A block is `[CLS] A [SEP] B [SEP]` of exactly `seq_len` tokens, A and B being consecutive
text (segment ids 0 and 1), split at the line boundary nearest the middle of the block;
a stretch of text with no line boundary inside becomes `[CLS] A [SEP]`. No position is
spent on padding except in the very last block, whose padding has attention_mask 0.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def lines_of(text: str) -> list[str]:
    """The lines of a text, split at line ends only (\n, \r\n or \r): str.splitlines() also
    splits at a form feed, U+2028, U+0085 and other characters that may sit inside one line."""
    return re.split(r"\r\n|\r|\n", text.removesuffix("\n").removesuffix("\r")) if text else []


def not_utf8(e: UnicodeDecodeError) -> str:
    """Why a file's bytes are not read as text, and the fix, for a message: the first byte that is
    no UTF-8 and where; a UTF-32 or UTF-16 file (its byte-order mark first), a Windows-1252 one (a
    byte 0x80-0x9f, which Latin-1 reads as an invisible control) or a Latin-1 one is named."""
    head = bytes(e.object[:4])
    width = "32" if head in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff") else \
        "16" if head[:2] in (b"\xff\xfe", b"\xfe\xff") else None
    byte = e.object[e.start]
    kind = f"; the file starts with a UTF-{width} byte-order mark" if width else \
        "; a byte 0x80-0x9f is a character in Windows-1252 (as Excel saves), a control in Latin-1" \
        if 0x80 <= byte <= 0x9f else ""
    source = f"UTF-{width}" if width else "CP1252" if 0x80 <= byte <= 0x9f else "LATIN1"
    return (f"not UTF-8 text (byte 0x{byte:02x} at offset {e.start:,} is no UTF-8{kind}): save it as UTF-8 "
            f"(e.g. iconv -f {source} -t UTF-8)")


def nul_bytes(text: str) -> str | None:
    """Why a text holding NUL bytes (which no text holds, but which UTF-16 or UTF-32 without a
    byte-order mark decode into as "valid" UTF-8) is not read, and the fix; None without them."""
    if "\x00" not in text:
        return None
    encoding = "UTF-32" if "\x00\x00\x00" in text else "UTF-16"
    encoding += "BE" if text.startswith("\x00") else "LE"
    return (f"it holds NUL bytes, as {encoding[:6]} without a byte-order mark does: save it as UTF-8 "
            f"(e.g. iconv -f {encoding} -t UTF-8)")


# the characters other than \n and \r at which str.splitlines() (and so some editor) breaks a line: not line ends here
OTHER_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def other_break(text: str) -> str | None:
    """The first of OTHER_BREAKS in `text`, named (for a message: "U+2028"), or None."""
    found = next((c for c in text if c in OTHER_BREAKS), None)
    return None if found is None else f"U+{ord(found):04X}"


# characters that show nothing though they are neither white space nor of category Cf or Cc: the
# combining grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian free variation selectors,
# the blank braille pattern, variation selectors (also U+E0100-E01EF, among the tags), and the code points
# Unicode keeps unassigned but default-ignorable (drawn as nothing: U+2065, U+FFF0-FFF8)
_BLANK_RANGES = ((0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x2065, 0x2065),
                 (0x2800, 0x2800), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8),
                 (0xE0000, 0xE0FFF))


def invisible(c: str) -> bool:
    """Whether the character `c` shows nothing and is not white space: a format character (Unicode
    category Cf: zero-width spaces and joiners, soft hyphens, a byte-order mark), a control
    character (Cc), or one of _BLANK_RANGES (a variation selector, a Hangul filler, ...)."""
    point = ord(c)
    return (not c.isspace() and unicodedata.category(c) in ("Cf", "Cc")) or any(
        lo <= point <= hi for lo, hi in _BLANK_RANGES)


def shows_nothing(text: str) -> str | None:
    """Why `text` shows nothing although it is not empty, for a message ("only U+200B"): it holds
    only white space and `invisible` characters, which str.strip() keeps (and BERT's normalizer drops
    or reads as [UNK]); "" when it is empty or white space; None when something shows."""
    if any(not c.isspace() and not invisible(c) for c in text):
        return None
    hidden = sorted({f"U+{ord(c):04X}" for c in text if not c.isspace()})
    return f"only {', '.join(hidden)}" if hidden else ""


# a tab, and every character that str.splitlines() (and so some reader) breaks a line at: written as its escape;
# and the backslash, doubled, so that an escape shown is never a backslash and a letter of the text itself
_BREAKS = {ord(c): c.encode("unicode_escape").decode() for c in "\\\t\n\r" + OTHER_BREAKS}


def one_line(text: str) -> str:
    """`text` (a sentence, a label) shown on one line, or as one cell of a tab-separated line: a
    tab, a line end, a form feed, U+2028 and the other characters a reader may break a line at are
    written as escapes (\\t, \\n, \\x0c, \\u2028), and a backslash is doubled (\\\\), so that each
    escape reads one way: `a\\tb` is a tab, `a\\\\tb` a backslash and a t."""
    return text.translate(_BREAKS)


# Where a sentence ends: at . ! ? (and a closing quote or bracket) before a space and a capital or a
# digit, or at a Chinese 。！？ (and its closing quote). A simple rule: "Dr. Who" is cut too.
_ENGLISH_END = re.compile(r"([.!?][\"')\]]?)\s+(?=[\"'(\[]?[A-Z0-9])")
_CHINESE_END = re.compile(r"([。！？][”」』）]?)(?=.)")


def sentences(paragraph: str) -> list[str]:
    """A paragraph cut into its sentences, each stripped (see _ENGLISH_END and _CHINESE_END)."""
    marked = _CHINESE_END.sub("\\1\0", _ENGLISH_END.sub("\\1\0", paragraph))
    return [s.strip() for s in marked.split("\0") if s.strip()]


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


def plain_tokenizer(tokenizer: Tokenizer) -> Tokenizer:
    """A copy of `tokenizer` that neither pads nor truncates, so that every text is encoded whole
    and alone (a saved tokenizer.json, a pretrained one especially, may be set to do both). The
    caller's tokenizer is never changed: it may be saved with a checkpoint, or used elsewhere."""
    plain = Tokenizer.from_str(tokenizer.to_str())
    plain.no_padding()
    plain.no_truncation()
    return plain


def tokenize_lines(tokenizer: Tokenizer, lines: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """All lines as one stream of ids (no specials) and the offset where each line starts: a
    stream has no padding and no truncation (`plain_tokenizer`)."""
    encodings = plain_tokenizer(tokenizer).encode_batch(lines, add_special_tokens=False)
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


# ---- padding -----------------------------------------------------------------------------------


def pad_batch(seqs: list[list[int]], pad_id: int, length: int | None = None):
    """(input_ids, attention_mask), each (B, T): T is `length`, or the longest row (dynamic padding)."""
    T = length or max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    return ids, mask


