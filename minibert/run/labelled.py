"""Labelled sentences for classification: reading the splits, turning them into ids, padding
each batch to its own longest row, and the scores (accuracy, macro-F1).

A labelled set is a folder with `train`, `valid` and `test` files, each `.tsv`
(text<TAB>label, after an optional header row), `.csv` or `.jsonl` (fields `text` and `label`),
or one such file that `split_rows` cuts into the three splits.
"""

from __future__ import annotations

import csv
import io
import os
import re
import unicodedata
from decimal import Decimal, InvalidOperation

import torch

from ..files import parse_json, read_bytes, read_problem, repeated_key
from ..text import (OTHER_BREAKS, invisible, lines_of, not_utf8, nul_bytes, one_line, other_break, pad_batch,
                    plain_tokenizer, shows_nothing)


class InputError(ValueError):
    """A labelled file or folder that cannot be used, said in one line."""


def read_split(path: str) -> list[tuple[str, str]]:
    """(text, label) rows of a .tsv (text<TAB>label), .csv or .jsonl file (fields text, label).

    A .tsv may start with a header row: a first line `text<TAB>label` (or `sentence` /
    `sentence1` for `text`, any case, in quotes or not) is skipped, not read as an example of the
    class "label"; such a row further down is refused, and so is a .jsonl record of the same two
    names (JSON Lines has no header). A .tsv is read as written, without quoting: one quoted as
    the csv module quotes (_csv_quoted) is refused. A .tsv's lines end at \n, \r\n or \r, a
    .jsonl's at \n. A row without its text or label (a short .csv row, a .jsonl `null` or missing
    key) is refused, naming file:line, rather than read as the class "None"; so is a .jsonl record
    giving a key twice.
    """
    rows = []
    try:
        decoded = read_bytes(path).decode("utf-8-sig")  # -sig: a byte-order mark is not text
        if nul_bytes(decoded):  # no text holds a NUL: UTF-16 without a byte-order mark decodes as "valid" UTF-8
            raise InputError(f"cannot read {path}: {nul_bytes(decoded)}")
        with io.StringIO(decoded, newline="") as f:
            if path.endswith(".csv"):
                rows = _csv_rows(f, path)
            else:  # line numbers are the file's own. A .tsv's lines end at \n, \r\n or \r, as editors count
                # them; a .jsonl's at \n only (JSON Lines: a \r inside a record is JSON whitespace)
                text = f.read()
                for n, line in enumerate(text.split("\n") if path.endswith(".jsonl") else lines_of(text), 1):
                    if not line.strip():
                        continue
                    if path.endswith(".jsonl"):
                        try:
                            r = parse_json(line)
                        except ValueError as e:
                            raise InputError(f"{path}:{n}: not valid JSON ({getattr(e, 'msg', e)}){_joined_records(line)}") \
                                from None
                        if not isinstance(r, dict):
                            raise InputError(f"{path}:{n}: expected a JSON object with text and label")
                        twice = repeated_key(line)
                        if twice is not None:
                            raise InputError(f"{path}:{n}: the key {twice!r} appears twice in the record; give it once")
                        text, label = _field(r, "text", path, n), _field(r, "label", path, n)
                        if _is_header(text, label):
                            raise InputError(f"{path}:{n}: a header record (text {text!r}, label {label!r}), not an "
                                             "example: JSON Lines has no header; remove it")
                        rows.append((n, text, label))
                        continue
                    text, sep, label = line.rpartition("\t")
                    if not sep:
                        spans = line.startswith('"') and line.count('"') % 2
                        raise InputError(f"{path}:{n}: expected text<TAB>label" + (
                            f"; the line opens a quote it does not close: {_CSV_QUOTED}" if spans else ""))
                    if text.count("\t") and other_break(line):
                        raise _joined_rows(path, n, line.split("\t"), "tab", "text<TAB>label")
                    if _is_header(text, label):
                        if rows:
                            raise InputError(f"{path}:{n}: a header row ({line!r}) after the first line; remove it "
                                             "(were two files joined with their headers?)")
                        continue
                    if _csv_quoted(text, label):
                        raise InputError(f"{path}:{n}: a row in double quotes ({one_line(line)[:60]!r}): {_CSV_QUOTED}")
                    rows.append((n, text, label))
    except OSError as e:
        raise InputError(f"cannot read {path}: {read_problem(e)}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read {path}: {not_utf8(e)}") from None
    for n, text, label in rows:
        if shows_nothing(text) is not None:
            raise InputError(f"{path}:{n}: empty text{_hidden(text)}")
        if shows_nothing(label) is not None:
            ends = " (the row ends with a tab after its last cell: remove that tab)" if "\t" in text else ""
            raise InputError(f"{path}:{n}: empty label{_hidden(label) or ends}")
    if not rows:
        raise InputError(f"{path} holds no examples")
    if not path.endswith((".csv", ".jsonl")):
        _check_columns(path, rows)
    return [(text, label.strip()) for _, text, label in rows]


# what a header row's label column is called in the labelled sets one finds (a first row with one of
# these as its label, on no other row, is a header that does not name its columns text and label)
_LABEL_COLUMNS = ("label", "labels", "class", "category", "sentiment", "target", "tag", "polarity", "emotion",
                  "intent", "topic", "y")


def _check_columns(path: str, rows: list[tuple[int, str, str]]) -> None:
    """A .tsv read as text<TAB>label: a first row that is a header with other column names
    (`review<TAB>sentiment`, `id<TAB>text<TAB>label`, `label<TAB>text`: one word a cell, one a label
    column's name, a last cell no other row gives) would be an example of a class of one row, and a
    file whose every row holds more than two tab-separated cells (an id column) would read each text
    with the cells before it (the last tab splits); an InputError naming either."""
    n, text, label = rows[0]
    cells = text.split("\t") + [label]
    if any(_bare(cell) in _LABEL_COLUMNS for cell in cells) and all(len(cell.split()) == 1 for cell in cells) \
            and all(other.strip() != label.strip() for _, _, other in rows[1:]):
        swapped = _bare(cells[0]) in _LABEL_COLUMNS
        raise InputError(f"{path}:{n}: the first row {'<TAB>'.join(cells)!r} is a header"
                         + (" with the label column first, but a .tsv row is text<TAB>label: swap the columns"
                            if swapped else ", but a .tsv header is text<TAB>label: name its columns so, or remove it"))
    if len(rows) > 1 and all("\t" in text for _, text, _ in rows):
        fewest = min(text.count("\t") for _, text, _ in rows) + 2
        raise InputError(f"{path}: every row holds {fewest} or more tab-separated cells, but a .tsv row is "
                         "text<TAB>label (a tab inside a text is read as part of it): give the text and label "
                         "columns only")


def _csv_rows(f, path: str) -> list[tuple[int, str, str]]:
    """(line, text, label) of a .csv file whose header row names the columns text and label (any
    case), each once; the line is where the row starts in the file (a quoted text may span lines).
    Quotes are read strictly: one never closed, or text after a closing quote, is refused naming the
    row; so is a row of more cells than the header (a text's unquoted comma: no cell is dropped)."""
    csv.field_size_limit(max(csv.field_size_limit(), len(f.getvalue())))  # a long quoted text is one field, read whole
    reader, start = csv.reader(f, strict=True), 1
    try:
        header = next(reader, None)
        if header is None:
            raise InputError(f"{path} is empty: give a header row text,label and one row per example")
        columns = [_bare(c) for c in header]
        if "text" not in columns or "label" not in columns:
            if other_break(",".join(header)):
                raise _joined_rows(path, 1, header, "comma", "text,label")
            raise InputError(f"{path}:1: the header row must name the comma-separated columns text and label, "
                             f"found {header}")
        twice = next((name for name in ("text", "label") if columns.count(name) > 1), None)
        if twice is not None:
            raise InputError(f"{path}:1: the header names {twice} twice ({','.join(header)!r}); name each column once")
        t, y = columns.index("text"), columns.index("label")
        rows, start = [], reader.line_num + 1
        for r in reader:
            if any(c.strip() for c in r):
                if [_bare(c) for c in r] == columns:
                    raise InputError(f"{path}:{start}: a header row ({','.join(r)!r}) after the first line; "
                                     "remove it (were two files joined with their headers?)")
                if len(r) > len(header):
                    if not any(c.strip() for c in r[len(header):]):
                        raise InputError(f"{path}:{start}: the row ends with a comma after its last cell (an empty cell "
                                         "the header has not): remove the trailing comma")
                    if other_break(",".join(r)):
                        raise _joined_rows(path, start, r, "comma", "text,label")
                    raise InputError(f"{path}:{start}: {len(r)} cells, the header has {len(header)} (an unquoted "
                                     "comma?): quote a text that holds a comma")
                row = {"text": r[t] if t < len(r) else None, "label": r[y] if y < len(r) else None}
                rows.append((start, _field(row, "text", path, start), _field(row, "label", path, start)))
            start = reader.line_num + 1
    except csv.Error as e:
        why = "a quote opened in this row is never closed" if "end of data" in str(e) else str(e)
        raise InputError(f"{path}:{start}: not readable as CSV ({why})") from None
    return rows


def _joined_rows(path: str, n: int, cells: list[str], sep: str, row: str) -> InputError:
    """The refusal of a line of `cells` that holds a break which is no line end here (a form feed,
    U+2028): rows joined by it, as some exporters write them. Said as such, since the cells it
    splits into would read as one wrong row or a header without its columns."""
    return InputError(f"{path}:{n}: a line of {len(cells)} {sep}-separated cells holding "
                      f"{other_break(''.join(cells))}, which is not a line end here (lines end at \\n, \\r\\n or \\r): "
                      f"one {row} row a line")


def _field(row: dict, name: str, path: str, n: int) -> str:
    """row[name] as text; a missing field or a null is refused, naming file:line, and so is a
    text that is not a string or a label that is not a string or an integer."""
    value = row.get(name)
    if value is None:
        raise InputError(f"{path}:{n}: missing {name}")
    allowed = (str,) if name == "text" else (str, int)
    if not isinstance(value, allowed) or isinstance(value, bool):
        raise InputError(f"{path}:{n}: {name} must be a {'string' if name == 'text' else 'string or an integer'}, "
                         f"got {type(value).__name__}")
    return str(value)


# the csv module (and pandas) quote a .tsv cell that holds a quote, a tab or a line end: "a ""b""<TAB>c"
_CSV_QUOTED = ("the file is quoted as the csv module and pandas write a .tsv, and a .tsv is read as written, quotes "
              "and all: write it as a .csv (comma-separated, header text,label), which is read with its quoting, or "
              "write the .tsv unquoted (quoting=csv.QUOTE_NONE)")


def _csv_quoted(text: str, label: str) -> bool:
    """Whether a .tsv row is quoted as the csv module quotes one: a cell in double quotes with a
    quote doubled or a tab inside (what made it quote the cell), or both cells in quotes (every
    cell quoted, pandas' QUOTE_ALL). A text that is only a quotation ("Great!"<TAB>pos) is read as
    written."""
    def quoted(cell):
        return len(cell) > 1 and cell[0] == cell[-1] == '"'
    return (quoted(text) and quoted(label)) or any(quoted(c) and ('""' in c[1:-1] or "\t" in c) for c in (text, label))


def _bare(cell: str) -> str:
    """A header cell as compared: lower-case, without spaces, quotes around it or a byte-order
    mark (a file joined to another keeps the BOM of its own start in the middle of the whole;
    a .tsv written with every cell quoted has the header "text"<TAB>"label")."""
    return cell.replace("\ufeff", "").strip().strip('"').strip().lower()


def _is_header(text: str, label: str) -> bool:
    """True for a header row (or .jsonl record): text `text`/`sentence`/`sentence1`, label `label`."""
    return _bare(text) in ("text", "sentence", "sentence1") and _bare(label) == "label"


def split_files(folder: str) -> dict[str, str]:
    """{"train": path, "valid": path, "test": path}: exactly one file of each split in `folder`."""
    files = {}
    for split in ("train", "valid", "test"):
        found = [f"{split}{ext}" for ext in (".tsv", ".csv", ".jsonl") if os.path.isfile(os.path.join(folder, split + ext))]
        if len(found) != 1:
            raise InputError(f"{folder} needs exactly one {split}.tsv, {split}.csv or {split}.jsonl (found {found})")
        files[split] = os.path.join(folder, found[0])
    return files


def split_rows(rows: list[tuple[str, str]], valid_fraction: float, test_fraction: float, path: str,
               seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """One labelled file cut into {"train", "valid", "test"} rows, stratified by label: each label's
    rows are shuffled with a generator seeded by `seed` (torch's CPU generator: the same order on
    every machine); of its n rows, round(n x valid_fraction), at least one, go to validation,
    round(n x test_fraction), at least one, to test, the rest to training; each split keeps the
    file's order. Rows with the same text (same_text: case, accents, spacing and Unicode's encoding
    set aside) are one unit, so that no sentence sits in two splits; a unit goes with the label of its
    first row. A label left with no unit of its own (given only to
    texts that first have another), a label too small to give each split a unit, or a file with
    one label, is refused (InputError)."""
    units: dict[str, list[int]] = {}      # text -> the numbers of its rows
    for i, (text, _) in enumerate(rows):
        units.setdefault(same_text(text), []).append(i)
    by_label: dict[str, list[str]] = {}   # label -> the texts of its units, in file order
    for text, members in units.items():
        by_label.setdefault(rows[members[0]][1], []).append(text)
    lost = sorted({label for _, label in rows} - set(by_label))  # only on texts whose first row says another
    if lost:
        text = next(text for text, label in rows if label == lost[0])
        raise InputError(f"{path}: the label {lost[0]!r} is given only to texts that first have another label (such as "
                         f"{text[:60]!r}), so it could not be held out for validation and test; give each text one "
                         "label, or give a folder with train, valid and test files")
    if len(by_label) < 2:
        raise InputError(f"{path} has a single label {sorted(by_label)}; classification needs at least two")
    chosen = {"train": [], "valid": [], "test": []}  # split -> row numbers
    generator = torch.Generator().manual_seed(seed)
    for label in sorted(by_label):
        texts = by_label[label]
        n_valid = max(1, round(len(texts) * valid_fraction))
        n_test = max(1, round(len(texts) * test_fraction))
        if n_valid + n_test >= len(texts):
            raise InputError(f"{path}: label {label!r} has {len(texts)} distinct text(s), too few to hold out {n_valid} "
                             f"for validation and {n_test} for test and keep one for training; add rows of it, or "
                             "give a folder with train, valid and test files")
        order = [texts[i] for i in torch.randperm(len(texts), generator=generator).tolist()]
        cuts = {"valid": order[:n_valid], "test": order[n_valid:n_valid + n_test], "train": order[n_valid + n_test:]}
        for name, texts_of_split in cuts.items():
            chosen[name] += [i for text in texts_of_split for i in units[text]]
    return {name: [rows[i] for i in sorted(numbers)] for name, numbers in chosen.items()}


def check_label_spellings(labels, where: str) -> None:
    """An InputError if two of `labels` are one class written two ways: the same but for case
    ('POS', 'pos'), the same once Unicode's compatibility form is taken and invisible characters are
    dropped (an accent composed or decomposed, full-width letters, a zero-width space: labels that
    print alike), the same but for quotes around them or white space ('"food"', 'food'; 'very
    good', 'very  good'), the same but for Cyrillic or Greek letters that look like Latin ones ('pos'
    with a Cyrillic о), or the same finite number ('1', '1.0', '01'). Each way would train a class of its
    own, most likely from a typo. Checked before any label's rows are counted, so that the typo is
    named rather than a label too small to hold out."""
    for same, why, name in ((str.casefold, "differ only in case", repr),
                            (_visible, "differ only in how their characters are encoded (accents composed or "
                                       "not, full-width letters or invisible characters)", ascii),
                            (_unquoted, "differ only in quotes around them or in white space", repr),
                            (_latin_look_alike, "differ only in letters of other scripts that look like Latin ones "
                                                "(a Cyrillic or Greek o for a Latin o)", ascii),
                            (_number, "are one number spelled two ways", repr)):
        ways: dict[object, list[str]] = {}
        for label in sorted(set(labels)):
            key = same(label)
            if key is not None:
                ways.setdefault(key, []).append(label)
        twins = next((found for found in ways.values() if len(found) > 1), None)
        if twins:  # labels that print alike are named by their code points (ascii)
            named = ", ".join(name(label) for label in twins[:-1]) + f" and {name(twins[-1])}"
            raise InputError(f"the labels {named} of {where} {why}: write one class one way")


def _joined_records(line: str) -> str:
    """For a .jsonl line that is no JSON: why it may hold several records (joined by \\r alone, or
    by another character some readers end a line at), with the fix; "" otherwise."""
    if "\r" in line.strip():
        return ("; its records end at \\r alone (a carriage return), but JSON Lines end each at \\n: convert its "
                "line ends")
    found = other_break(line)
    if found is None:
        return ""
    pieces = [piece for piece in re.split(f"[{OTHER_BREAKS}]", line) if piece.strip()]
    if len(pieces) > 1 and all(_is_json(piece) for piece in pieces):
        return (f"; it holds {found}, which ends a line for some readers, but JSON Lines end each record at \\n: put "
                "each record on a line of its own")
    if len(pieces) == 1 and _is_json(pieces[0]):
        return f"; it holds {found} outside its record, which JSON does not read as white space: remove it"
    return ""


def _is_json(text: str) -> bool:
    """Whether `text` parses as JSON."""
    try:
        parse_json(text)
    except ValueError:
        return False
    return True


def _hidden(cell: str) -> str:
    """For an empty text or label: " (it holds only U+200B, which shows nothing)", or ""."""
    hidden = shows_nothing(cell)
    return f" (it holds {hidden}, which shows nothing)" if hidden else ""


def _visible(label: str) -> str:
    """`label` as it reads: NFKC's compatibility form (é composed, ｆ as f), without `invisible`
    characters (zero-width spaces, control characters other than white space, variation selectors,
    Hangul fillers, ...) and U+FFFD, case folded."""
    return "".join(c for c in unicodedata.normalize("NFKC", label) if not invisible(c) and c != "\ufffd").casefold()


_QUOTES = "\"'`\u2018\u2019\u201c\u201d\u00ab\u00bb"  # straight, typographic and angle quotes


def _unquoted(label: str) -> str:
    """`label` as it reads (_visible) without quotes around it, its runs of white space as one
    space: '"food"', "'food'" and 'food' are one class, and so are 'very good' and 'very  good'."""
    return " ".join(_visible(label).strip(_QUOTES + " ").split())


# Cyrillic and Greek letters (case folded) that print like a Latin letter, and that letter
_LOOK_ALIKES = str.maketrans("\u0430\u0432\u0435\u0456\u0458\u043a\u043c\u043d\u043e\u0440\u0441\u0442\u0443\u0445\u0455\u0501\u04bb\u04cf"
                             "\u03b1\u03b2\u03b5\u03b6\u03b7\u03b9\u03ba\u03bc\u03bd\u03bf\u03c1\u03c4\u03c5\u03c7",
                             "abeijkmhopctyxsdhl" "abezhikmnoptyx")


def _latin_look_alike(label: str) -> str:
    """`label` as it reads (_unquoted) with each Cyrillic or Greek letter that prints like a Latin
    one (о, е, а, р, с; ο, α, ρ; capitals such as Н and Β, once case folded) as that letter."""
    return _unquoted(label).translate(_LOOK_ALIKES)


def _number(label: str) -> Decimal | None:
    """`label` as an exact finite number ('01' and '1.0' are 1; 10^30 and 10^30 + 1 stay two, as
    floats would not keep them), or None for a label that is no number."""
    try:
        value = Decimal(label)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def same_text(text: str) -> str:
    """`text` as a key under which two writings of one sentence meet, as an uncased BERT reads it:
    Unicode's compatibility form without invisible characters, case folded, accents stripped, each
    punctuation mark and CJK character a word of its own (as BERT's pre-tokenizer cuts them), the
    words joined by one space. A copy of a sentence with a trailing space, capitalised, without its
    accents or with a space before its full stop ("good ." for "good.") is still that sentence."""
    bare = "".join(c for c in unicodedata.normalize("NFD", _visible(text)) if unicodedata.category(c) != "Mn")
    return " ".join("".join(f" {c} " if _read_apart(c) else c for c in bare).split())


def _read_apart(c: str) -> bool:
    """Whether BERT's pre-tokenizer makes `c` a word of its own: a punctuation mark (Unicode's P
    categories, and every ASCII character that is neither a letter, a digit nor white space, such
    as $ and +) or a CJK ideograph."""
    point = ord(c)
    return (unicodedata.category(c).startswith("P") or (33 <= point <= 126 and not c.isalnum())
            or any(start <= point <= end for start, end in _CJK))


_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))  # the ideograph blocks BERT spaces apart


def seen_in_training(train, rows) -> int:
    """How many of `rows` (text, label) have a text that is also in the training split `train`
    (same_text): scored on those, a model is partly scored on what it was trained on."""
    trained = {same_text(text) for text, _ in train}
    return sum(same_text(text) in trained for text, _ in rows)


def check_known_labels(rows, labels, path: str) -> None:
    """An InputError naming `path` if a row's label is not one of `labels` (the training split's)."""
    unknown = sorted({y for _, y in rows if y not in labels})
    if unknown:
        raise InputError(f"{path}: labels {unknown[:5]} are not in the training split's label set {sorted(labels)}")


def encode(tokenizer, rows, label_ids: dict[str, int], max_length: int, path: str) -> dict:
    """{"ids": one list of token ids per row ([CLS] ... [SEP], at most max_length), "labels": (S,)}.
    A text the tokenizer reads nothing of (zero-width spaces, control characters: BERT's normalizer
    drops them) is refused, as an empty text is when the file is read."""
    check_known_labels(rows, label_ids, path)
    ids = token_ids(tokenizer, [t for t, _ in rows], max_length)
    blank = next((text for (text, _), row in zip(rows, ids) if len(row) <= 2), None)  # [CLS] [SEP] alone
    if blank is not None:
        raise InputError(f"{path}: the text {ascii(blank)} holds nothing the tokenizer reads (only invisible or control "
                         "characters): remove it")
    return {"ids": ids, "labels": torch.tensor([label_ids[y] for _, y in rows])}


def token_ids(tokenizer, texts: list[str], max_length: int | None = None) -> list[list[int]]:
    """The ids of each text, [CLS] w1 ... wn [SEP], cut to `max_length` by `truncate` (None: whole)."""
    ids = [e.ids for e in plain_tokenizer(tokenizer).encode_batch(texts)]
    return ids if max_length is None else [truncate(i, max_length) for i in ids]


def truncate(ids: list[int], max_length: int) -> list[int]:
    """[CLS] w1 ... wn [SEP] cut to max_length tokens, keeping the final [SEP] (HF's truncation)."""
    return ids if len(ids) <= max_length else ids[:max_length - 1] + ids[-1:]


def batches(data: dict, batch_size: int, pad_id: int, order=None):
    """({"input_ids", "attention_mask"}, labels) batches of `data` (from `encode`), in `order`,
    each padded to its own longest row."""
    order = order if order is not None else torch.arange(len(data["ids"]))
    for rows in order.split(batch_size):
        yield batch_of(data, rows, pad_id), data["labels"][rows]


def batch_of(data: dict, rows: torch.Tensor, pad_id: int) -> dict:
    """{"input_ids", "attention_mask"}, each (B, T), of the rows `rows` (B,) of `data`, padded to
    the longest of them."""
    ids, mask = pad_batch([data["ids"][r] for r in rows.tolist()], pad_id)
    return {"input_ids": ids, "attention_mask": mask}


def label_subsets(n_train: int, budgets) -> list[list[int]]:
    """Nested seeded subsets of a training split of n_train rows (seed 0), one per budget (None =
    every row): each budget's rows hold every smaller budget's, so a curve over the budgets adds
    labels and changes nothing else."""
    order = torch.randperm(n_train, generator=torch.Generator().manual_seed(0)).tolist()
    return [sorted(order[:n if n is not None else n_train]) for n in budgets]


def macro_f1(pred: torch.Tensor, gold: torch.Tensor, num_labels: int) -> float:
    """The mean over the labels of F1 = 2 TP / (2 TP + FP + FN); a label never predicted nor present scores 0."""
    scores = []
    for k in range(num_labels):
        tp = ((pred == k) & (gold == k)).sum().item()
        fp = ((pred == k) & (gold != k)).sum().item()
        fn = ((pred != k) & (gold == k)).sum().item()
        scores.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return sum(scores) / num_labels


def scores(pred: torch.Tensor, gold: torch.Tensor, num_labels: int) -> dict:
    """{"acc", "macro_f1"} of predicted against gold label ids, both (S,)."""
    return {"acc": (pred == gold).float().mean().item(), "macro_f1": macro_f1(pred, gold, num_labels)}
