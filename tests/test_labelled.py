"""read_split on bad label rows: a .tsv header is not a class, a missing label or text is
refused naming file:line (never read as the class "None"); split_rows, one file cut into three;
finetune.py naming the real cause of a bad labelled set before it counts rows."""

import csv
import io
import json
import re

import pytest

import finetune
from minibert.run.labelled import InputError, check_label_spellings, read_split, split_rows

from conftest import refusal


@pytest.mark.parametrize("header", ["text\tlabel", "sentence\tlabel", "Sentence1\tLABEL"])
def test_tsv_header_row_is_skipped(tmp_path, header):
    """A first line `text<TAB>label` (or sentence/sentence1, any case) is a header: 2 rows, 2 classes,
    no class named "label"."""
    f = tmp_path / "train.tsv"
    f.write_text(f"{header}\na fine film\tpos\na dull film\tneg\n")
    rows = read_split(str(f))
    assert rows == [("a fine film", "pos"), ("a dull film", "neg")]
    assert sorted({y for _, y in rows}) == ["neg", "pos"]


def test_a_header_row_after_the_first_line_is_refused(tmp_path):
    """Only the first line can be a header; one further down (two files joined with their
    headers) would be read as an example of a class named "label": refused, naming its line."""
    f = tmp_path / "train.tsv"
    f.write_text("text\tlabel\na fine film\tpos\ntext\tlabel\na dull film\tneg\n")
    with pytest.raises(InputError, match=r"train.tsv:3: a header row \('text\\tlabel'\) after the first line"):
        read_split(str(f))


@pytest.mark.parametrize("name,rows,ends", [
    ("valid.tsv", ["a fine film\tpos", "a dull film\tneg", "a good film\tpos"], ["\r", "\r\n", "\n"]),
    ("valid.csv", ["text,label", "a fine film,pos", "a dull film,neg", "a good film,pos"], ["\r", "\r\n", "\n"]),
    ("valid.jsonl", ['{"text": "a fine film", "label": "pos"}', '{"text": "a dull film", "label": "neg"}',
                     '{"text": "a good film", "label": "pos"}'], ["\r\n", "\n"]),
])
def test_line_ends_of_every_kind_give_the_same_rows(tmp_path, name, rows, ends):
    """CR-only (old Mac), CR LF (Windows) and LF files hold the same three rows; a CR-only .tsv
    or .csv is not one long line. (JSON Lines ends lines at LF only: a CR inside a record is
    JSON whitespace, test_refusals.py::test_a_capitalised_csv_header_reads_and_jsonl_lines_are_physical.)"""
    for end in ends:
        f = tmp_path / name
        f.write_bytes(end.join(rows).encode() + end.encode())
        assert read_split(str(f)) == [("a fine film", "pos"), ("a dull film", "neg"), ("a good film", "pos")], end


@pytest.mark.parametrize("row,what", [
    ({"text": "a dull film", "label": None}, "label"),
    ({"text": "a dull film"}, "label"),
    ({"label": "neg"}, "text"),
    ({"text": None, "label": "neg"}, "text"),
], ids=["null label", "no label key", "no text key", "null text"])
def test_jsonl_row_missing_label_or_text_names_file_and_line(tmp_path, row, what):
    """Line 2 lacks its label (or text), as a null or as a missing key: refused as file:2."""
    f = tmp_path / "train.jsonl"
    f.write_text(json.dumps({"text": "a fine film", "label": "pos"}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(InputError, match=rf"train\.jsonl:2: missing {what}$"):
        read_split(str(f))


def test_byte_order_mark_crlf_and_spaces_around_labels_are_not_part_of_the_data(tmp_path):
    """A file saved with a UTF-8 byte-order mark and Windows line ends, with a header: the header
    is still seen as one (so no class "label"), and the labels are `pos`/`neg`, not `pos\\r`."""
    path = tmp_path / "train.tsv"
    path.write_bytes("\ufefftext\tlabel\r\ngood film\tpos\r\nbad film\t neg \r\n".encode("utf-8"))
    assert read_split(str(path)) == [("good film", "pos"), ("bad film", "neg")]


@pytest.mark.parametrize("name,content,message", [
    ("train.csv", "text,label\na fine film,pos\na dull film\n", r"train\.csv:3: missing label$"),
    ("train.jsonl", '["a fine film", "pos"]\n', r"train\.jsonl:1: expected a JSON object"),
    ("train.jsonl", '{"text": "fine", "label": 1}\n{"text": ["a", "list"], "label": 0}\n',
     r"train\.jsonl:2: text must be a string, got list"),
    ("train.csv", 'text,label\na fine film,pos\n"a dull film,neg\nmore,pos\n',
     r"train\.csv:3: not readable as CSV \(a quote opened in this row is never closed\)$"),
    ("train.csv", 'text,label\n"a fine" film,pos\n', r"train\.csv:2: not readable as CSV \(',' expected after '\"'\)$"),
], ids=["csv row without its label", "jsonl list", "jsonl text not a string", "csv quote never closed",
        "csv text after a closing quote"])
def test_a_row_that_is_not_text_and_label_is_refused_naming_file_and_line(tmp_path, name, content, message):
    """A short .csv row (csv gives None: never the class "None"), a JSON list instead of an
    object, a text that is a list, a quote never closed (the old code read the rest of the file
    as one text and said "missing label"), text after a closing quote (the old code joined it to
    the quoted text): each one line naming file:line."""
    f = tmp_path / name
    f.write_text(content)
    with pytest.raises(InputError, match=message):
        read_split(str(f))


def test_split_rows_is_stratified_seeded_and_the_same_on_every_machine():
    """Labels a and b, 5 texts each, fractions 0.2: round(5 x 0.2) = 1 text of each label to
    validation, 1 to test, 3 to training. The order comes from torch's CPU generator seeded 0, the
    same on every machine: label a (sorted first) draws randperm(5) = [4, 0, 1, 3, 2], so a4 goes
    to validation, a0 to test; label b draws the next, [3, 4, 0, 1, 2]: b3, then b4. Each split
    keeps the file's order. A different seed gives a different split."""
    rows = [(f"a{i}", "a") for i in range(5)] + [(f"b{i}", "b") for i in range(5)]
    split = split_rows(rows, 0.2, 0.2, "f.csv")
    assert split == {"train": [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b0", "b"), ("b1", "b"), ("b2", "b")],
                     "valid": [("a4", "a"), ("b3", "b")], "test": [("a0", "a"), ("b4", "b")]}
    assert split_rows(rows, 0.2, 0.2, "f.csv") == split
    assert split_rows(rows, 0.2, 0.2, "f.csv", seed=1) != split


@pytest.mark.parametrize("copy", [lambda t: t, lambda t: t + " ", lambda t: t.upper(), lambda t: t.replace(" ", "  "),
                                  lambda t: t + "\u200b", lambda t: t.replace(" ", " \x01", 1),
                                  lambda t: t.replace(" ", " \x7f\x9f", 1),
                                  lambda t: t.replace(",", " ,").replace(".", " ."), lambda t: t.replace("e", "\u00e9"),
                                  lambda t: t.replace("\u4e2d", " \u4e2d ")],
                         ids=["the-same", "a-trailing-space", "capitalised", "spaced-twice", "a-zero-width-space",
                              "a-control-character", "del-and-a-c1-control", "spaces-before-punctuation",
                              "an-accent", "cjk-spaced-apart"])
def test_split_rows_keeps_each_label_share_and_no_text_in_two_splits(copy):
    """300 rows, 3 labels of 100 with every text written twice (50 distinct texts a label, such as
    "x text, 7 \u4e2d."), the second time as written or with a trailing space, capitalised, spaced
    twice, with a zero-width space or a control character (U+0001, DEL, U+009F), with a space
    before each punctuation mark, with accents (é for e), or with its CJK character spaced apart:
    what an uncased BERT reads alike, its normalizer dropping invisible and control characters and
    accents, its pre-tokenizer cutting punctuation and CJK characters apart (the old code took the
    first kinds for other texts and put copies of test sentences in training; the code before this
    one still did so for the last three): round(50 x 0.1) = 5 texts a label to validation and 5 to
    test, each with both its rows; so validation and test hold 30 rows each, 10 of every label,
    training 240; every row lands exactly once, and no text (label and number) sits in two splits."""
    rows = [(f"{label} text, {i % 50} \u4e2d." if i < 50 else copy(f"{label} text, {i % 50} \u4e2d."), label)
            for label in ("x", "y", "z") for i in range(100)]
    split = split_rows(rows, 0.1, 0.1, "f.csv")
    for name, size in (("train", 240), ("valid", 30), ("test", 30)):
        assert len(split[name]) == size
        assert all(sum(y == label for _, y in split[name]) == size // 3 for label in "xyz"), name
    assert sorted(split["train"] + split["valid"] + split["test"]) == sorted(rows)
    texts = {name: {(y, re.search(r"\d+", t).group()) for t, y in split[name]} for name in split}
    assert not (texts["train"] & texts["valid"] or texts["train"] & texts["test"] or texts["valid"] & texts["test"])


@pytest.mark.parametrize("rows,message", [
    ([("a", "x"), ("b", "x"), ("c", "x")], r"f.csv has a single label \['x'\]"),
    ([("a", "x"), ("b", "x"), ("c", "x"), ("d", "y"), ("e", "y")],
     "label 'y' has 2 distinct text"),
    ([("a", "x"), ("b", "x"), ("c", "x"), ("d", "y"), ("d", "y"), ("d", "y"), ("e", "y")],
     "label 'y' has 2 distinct text"),
])
def test_split_rows_refuses_one_label_and_a_label_too_small_to_split(rows, message):
    """A label needs a text for each of the three splits (a repeated text counts once)."""
    with pytest.raises(InputError, match=message):
        split_rows(rows, 0.1, 0.1, "f.csv")


@pytest.mark.parametrize("name,content,message", [
    ("train.tsv", "".join(f"sentence {i} is here\t{'pos' if i % 2 else 'neg'}\u2028" for i in range(6)) + "\n",
     r"train\.tsv:1: a line of 7 tab-separated cells holding U\+2028, which is not a line end here"),
    ("train.csv", "text,label\f" + "".join(f"sentence {i} is here,{'pos' if i % 2 else 'neg'}\f" for i in range(6)),
     r"train\.csv:1: a line of 8 comma-separated cells holding U\+000C, which is not a line end here \(lines end "
     r"at \\n, \\r\\n or \\r\): one text,label row a line$"),
    ("train.csv", "text,label\n" + "".join(f"sentence {i} is here,{'pos' if i % 2 else 'neg'}\u2028" for i in range(6))
     + "\n", r"train\.csv:2: a line of 7 comma-separated cells holding U\+2028, which is not a line end here"),
], ids=["tsv U+2028", "csv form feed, header too", "csv U+2028 after the header"])
def test_rows_joined_by_a_break_that_is_no_line_end_are_named(tmp_path, name, content, message):
    """Rows joined by U+2028 or a form feed (no \\n): one physical line of many cells. Refused
    naming the character. (The old code read a .tsv as one row, its label the last cell, and
    fine-tuning then blamed "a single label"; a .csv joined header and all was said to lack the
    columns text and label, the whole file quoted as its header; a .csv joined after its header
    line read one row of the first two cells, the other rows dropped unsaid.)"""
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError, match=message):
        read_split(str(tmp_path / name))


@pytest.mark.parametrize("content,message", [
    ("text,label\na fine film,pos\ngood, great film number 7,pos\n",
     r"train\.csv:3: 3 cells, the header has 2 \(an unquoted comma\?\)"),
    ('text,label\n"a fine film",pos,extra\n', r"train\.csv:2: 3 cells, the header has 2 \(an unquoted comma\?\)"),
    ("id,text,label\n1,a fine film,pos\n2,a dull, long film,neg\n",
     r"train\.csv:3: 4 cells, the header has 3 \(an unquoted comma\?\)"),
], ids=["unquoted comma in the text", "a cell after the label", "unquoted comma under a three-column header"])
def test_a_csv_row_with_more_cells_than_the_header_is_refused_naming_file_and_line(tmp_path, content, message):
    """A row with more cells than its header has no one reading: `good, great film number 7,pos`
    is a text with an unquoted comma. Refused naming file:line and the counts. (The old code read
    the text `good` with the label ` great film number 7`, or dropped the cell `extra`, unsaid.)"""
    (tmp_path / "train.csv").write_text(content)
    with pytest.raises(InputError, match=message):
        read_split(str(tmp_path / "train.csv"))


@pytest.mark.parametrize("name,content,message", [
    ("train.jsonl", '{"text": "fine", "label": "pos"}\n{"text": "good", "label": "pos", "label": "neg"}\n',
     r"train\.jsonl:2: the key 'label' appears twice in the record"),
    ("train.jsonl", '{"text": "fine", "text": "good", "label": "pos"}\n',
     r"train\.jsonl:1: the key 'text' appears twice in the record"),
    ("train.csv", "text,label,text\na fine film,pos,a dull film\n", r"train\.csv:1: the header names text twice"),
    ("train.csv", "text,Label,label\na fine film,pos,neg\n", r"train\.csv:1: the header names label twice"),
], ids=["jsonl label twice", "jsonl text twice", "csv header text twice", "csv header label twice, in two cases"])
def test_a_key_or_column_given_twice_is_refused_naming_file_and_line(tmp_path, name, content, message):
    """A .jsonl record giving a key twice, or a .csv header naming a column twice, holds two
    readings of one field. Refused naming file:line. (The old code took the .jsonl's last value
    and the .csv's first column, unsaid.)"""
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError, match=message):
        read_split(str(tmp_path / name))


@pytest.mark.parametrize("lines,where", [
    (['{"text": "text", "label": "label"}', '{"text": "a fine film", "label": "pos"}'], 1),
    (['{"text": "a fine film", "label": "pos"}', '{"text": "Sentence", "label": "LABEL"}'], 2),
], ids=["first line", "further down"])
def test_a_jsonl_header_record_is_refused(tmp_path, lines, where):
    """JSON Lines has no header: a record whose text and label are the column names is a header
    written by mistake, refused naming its line. (The old code read it as an example of a class
    named "label".)"""
    (tmp_path / "train.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=rf"train\.jsonl:{where}: a header record"):
        read_split(str(tmp_path / "train.jsonl"))


@pytest.mark.parametrize("content", ["great\tpos\nbad film\tneg\nawful film\tneg\n",
                                     "a good film\tsentiment\ndull\tsentiment\nworse\tother\n",
                                     "a film\twith\ta tab\tpos\nno tab here\tneg\n"],
                         ids=["a one-word first text of a label of its own", "a class named sentiment", "one tab"])
def test_rows_that_only_look_like_a_header_or_extra_columns_are_read(tmp_path, content):
    """Controls for the header and column checks: a first row whose label no other row gives but
    is no column's name, a class that is called "sentiment" on several rows, and a tab inside
    some texts (not every row's) are read as rows."""
    (tmp_path / "train.tsv").write_text(content)
    assert len(read_split(str(tmp_path / "train.tsv"))) == 3 - content.startswith("a film")


def test_labels_that_are_numbers_are_compared_exactly():
    """'1' beside '1e0' is one number written two ways (refused; more in the table below); 10^30
    and 10^30 + 1, or 2^53 and 2^53 + 1, are two numbers, and two classes (a float holds each pair
    as one number: the old code refused them as one number spelled two ways)."""
    for labels in ([str(10 ** 30), str(10 ** 30 + 1)], [str(2 ** 53), str(2 ** 53 + 1)]):
        check_label_spellings(labels, "x")
    with pytest.raises(InputError, match="are one number spelled two ways"):
        check_label_spellings(["1", "1e0"], "x")


def labelled_tsv(*counts: tuple[str, int]) -> str:
    """A .tsv of `n` distinct texts for each (label, n)."""
    return "".join(f"film {i} of {label}\t{label}\n" for label, n in counts for i in range(n))


@pytest.mark.parametrize("name,content,flags,message", [
    ("mine.tsv", labelled_tsv(("pos", 40), ("neg", 40), ("Pos", 1), ("POS", 1)), [],
     r"^error: the labels 'POS', 'Pos' and 'pos' of --data \S+ differ only in case"),
    ("mine.tsv", labelled_tsv(("true", 20), ("false", 20), ("True", 1)), [],
     r"^error: the labels 'True' and 'true' of --data \S+ differ only in case"),
    ("mine.tsv", labelled_tsv(("1", 20), ("0", 20), ("1.0", 2)), [],
     r"^error: the labels '1' and '1\.0' of --data \S+ are one number spelled two ways"),
    ("mine.tsv", labelled_tsv(("1", 20), ("0", 20), ("01", 1)), [],
     r"^error: the labels '01' and '1' of --data \S+ are one number spelled two ways"),
    ("mine.tsv", labelled_tsv(("caf\u00e9", 20), ("tea", 20), ("cafe\u0301", 3)), [],
     r"^error: the labels 'cafe\\u0301' and 'caf\\xe9' of --data \S+ differ only in how their characters are encoded"),
    ("mine.tsv", labelled_tsv(("food", 20), ("tea", 20), ("food\u200b", 3)), [],
     r"^error: the labels 'food' and 'food\\u200b' of --data \S+ differ only in how their characters are encoded"),
    ("mine.tsv", labelled_tsv(("food", 20), ("tea", 20), ("food\ufe0f\u180b", 3)), [],
     r"^error: the labels 'food' and 'food\\ufe0f\\u180b' of --data \S+ differ only in how their characters are"),
    ("mine.tsv", labelled_tsv(("food", 20), ("tea", 20), ("food\u2065", 3)), [],
     r"^error: the labels 'food' and 'food\\u2065' of --data \S+ differ only in how their characters are"),
    ("mine.tsv", labelled_tsv(("food", 20), ("tea", 20), ("\uff46\uff4f\uff4f\uff44", 3)), [],
     r"^error: the labels 'food' and '\\uff46\\uff4f\\uff4f\\uff44' of --data \S+ differ only in how"),
    ("mine.tsv", labelled_tsv(("food", 20), ("tea", 20), ('"food"', 3)), [],
     r"""^error: the labels '"food"' and 'food' of --data \S+ differ only in quotes around them or in white space"""),
    ("mine.tsv", labelled_tsv(("food", 20), ("tea", 20), ("\u2018food\u2019", 3)), [],
     r"^error: the labels 'food' and '\u2018food\u2019' of --data \S+ differ only in quotes"),
    ("mine.tsv", labelled_tsv(("very good", 20), ("bad", 20), ("very  good", 3)), [],
     r"^error: the labels 'very  good' and 'very good' of --data \S+ differ only in quotes around them or in white"),
    ("mine.tsv", labelled_tsv(("pos", 20), ("neg", 20), ("p\u043es", 3)), [],
     r"^error: the labels 'pos' and 'p\\u043es' of --data \S+ differ only in letters of other scripts that look like"),
    ("mine.tsv", labelled_tsv(("pos", 20), ("neg", 20), ("\u039d\u0395G", 3)), [],
     r"^error: the labels 'neg' and '\\u039d\\u0395G' of --data \S+ differ only in letters of other scripts"),
    ("mine.tsv", "review\tsentiment\n" + labelled_tsv(("pos", 20), ("neg", 20)), [],
     r"^error: \S+mine\.tsv:1: the first row 'review<TAB>sentiment' is a header, but a \.tsv header is text<TAB>label"),
    ("mine.tsv", "id\ttext\tlabel\n" + "".join(f"{i}\tfilm {i}\t{'pos' if i % 2 else 'neg'}\n" for i in range(40)), [],
     r"^error: \S+mine\.tsv:1: the first row 'id<TAB>text<TAB>label' is a header"),
    ("mine.tsv", "".join(f"{i}\tfilm {i}\t{'pos' if i % 2 else 'neg'}\n" for i in range(40)), [],
     r"^error: \S+mine\.tsv: every row holds 3 or more tab-separated cells, but a \.tsv row is text<TAB>label"),
    ("mine.jsonl", '{"text": "text", "label": "label"}\n' + "".join(
        json.dumps({"text": f"film {i}", "label": "pos" if i % 2 else "neg"}) + "\n" for i in range(40)), [],
     r"^error: \S+mine\.jsonl:1: a header record"),
    (None, None, ["--valid-fraction", "0.2"], r"^error: --data \S+nosuch\.tsv: no such file or folder"),
    ("mine.tsv", labelled_tsv(("pos", 20), ("neg", 20)), ["--valid-fraction", "0.5", "--test-fraction", "0.5"],
     r"^error: --valid-fraction \+ --test-fraction must be below 1.*0\.5 \+ 0\.5"),
    ("mine.tsv", labelled_tsv(("pos", 20), ("neg", 20)), ["--valid-fraction", "0.9"],
     r"^error: --valid-fraction \+ --test-fraction must be below 1.*0\.9 \+ 0\.1"),
], ids=["a few case variants beside a big label", "True beside true", "1.0 beside 1", "01 beside 1",
        "an accent decomposed beside composed", "a zero-width space", "a variation selector", "an unassigned U+2065", "full-width letters",
        "quoted",
        "typographic quotes", "two spaces", "a cyrillic o", "greek capitals", "a header of other names", "a header of three columns", "three columns",
        "jsonl header record",
        "a fraction with no such file", "fractions summing to 1", "a valid fraction summing to 1 with the default test"])
def test_finetune_names_the_real_cause_before_counting_rows(setup, tmp_path, name, content, flags, message):
    """finetune.py on one --data file (or none): the cause of the refusal, not what it leads to.
    A label written two ways (in case, in Unicode's encoding of what prints alike: é composed or as
    e + U+0301, a zero-width space, a variation selector, full-width letters; or as one number: '1', '1.0', '01'),
    named by its code points where it prints alike, and a .jsonl header record are named before
    each label's rows are counted; a missing file is said missing, with a fraction or without;
    held-out fractions that leave nothing to train on are a flag error (exit 2). (The old code said "label 'POS' has 1 distinct text(s), too few to hold out ...;
    add rows of it" for the first five, which adding rows never mends, for the fractions too, and
    for the missing file that a fraction splits one --data file, not a set with its own splits; and
    the three Unicode twins trained a class of each spelling.) A label in quotes beside the same
    without, or spaced otherwise, is a class written two ways too, and so is one with a Cyrillic о
    or Greek capitals that print as Latin letters ('p\u043es', '\u039d\u0395G': the code before
    this one trained a class of each); a .tsv header of other column
    names, or rows of three columns (an id first), are named as such. (The old code trained a class
    of each quoting or spacing, called the header's "sentiment" a class too small to hold out, and
    read each id into its row's text.)"""
    data = tmp_path / (name or "nosuch.tsv")
    if content is not None:
        data.write_text(content)
    with refusal(message):
        finetune.main(["--checkpoint", str(setup / "ckpt"), "--data", str(data), "--out", str(tmp_path / "out"),
                       "--no-progress", *flags])
    assert not (tmp_path / "out").exists()


def tsv_by_csv_module(extra: list[tuple[str, str]], quoting=csv.QUOTE_MINIMAL) -> str:
    """A header and 40 rows (20 a label), then `extra` rows, as csv.writer writes a .tsv
    (delimiter tab): a cell holding a quote, a tab or a line end is quoted, its quotes doubled."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", quoting=quoting, lineterminator="\n")
    writer.writerows([("text", "label")] + [(f"film {i} of {y}", y) for y in ("pos", "neg") for i in range(20)] + extra)
    return out.getvalue()


def jsonl_rows(n: int, last: str = "") -> str:
    return "".join(json.dumps({"text": f"film {i}", "label": "pos" if i % 2 else "neg"}) + "\n" for i in range(n)) + last


@pytest.mark.parametrize("name,content,message", [
    ("mine.tsv", labelled_tsv(("pos", 20), ("neg", 20)).encode("utf-16"),
     r"^error: cannot read \S+mine\.tsv: not UTF-8 text \(byte 0xff at offset 0 is no UTF-8; the file starts with a "
     r"UTF-16 byte-order mark\): save it as UTF-8"),
    ("mine.tsv", ("caf\xe9 film\tpos\n" + labelled_tsv(("pos", 20), ("neg", 20))).encode("latin-1"),
     r"^error: cannot read \S+mine\.tsv: not UTF-8 text \(byte 0xe9 at offset 3 is no UTF-8\): save it as UTF-8"),
    ("mine.jsonl", jsonl_rows(40).replace("\n", "\r").encode(),
     r"^error: \S+mine\.jsonl:1: not valid JSON \(Extra data\); its records end at \\r alone"),
    ("mine.tsv", ("label\ttext\n" + "".join(f"{'pos' if i % 2 else 'neg'}\tfilm {i}\n" for i in range(40))).encode(),
     r"^error: \S+mine\.tsv:1: the first row 'label<TAB>text' is a header with the label column first, but a \.tsv row "
     r"is text<TAB>label: swap the columns"),
    ("mine.tsv", labelled_tsv(("pos", 20), ("neg", 20)).replace("\n", "\t\n").encode(),
     r"^error: \S+mine\.tsv:1: empty label \(the row ends with a tab after its last cell: remove that tab\)"),
    ("mine.csv", ("text,label\n" + "".join(f"film {i},{'pos' if i % 2 else 'neg'},\n" for i in range(40))).encode(),
     r"^error: \S+mine\.csv:2: the row ends with a comma after its last cell .*: remove the trailing comma"),
    ("mine.jsonl", jsonl_rows(40, '{"text": "bad \\ud800 film", "label": "neg"}\n').encode(),
     r"^error: \S+mine\.jsonl:41: not valid JSON \(a string holds half of a UTF-16 surrogate pair"),
    ("mine.jsonl", jsonl_rows(40, '{"text": "a bad film", "label": "neg\\udc00"}\n').encode(),
     r"^error: \S+mine\.jsonl:41: not valid JSON \(a string holds half of a UTF-16 surrogate pair"),
    ("mine.tsv", labelled_tsv(("pos", 20), ("neg", 20)).encode("utf-32"),
     r"^error: cannot read \S+mine\.tsv: not UTF-8 text \(byte 0xff at offset 0 is no UTF-8; the file starts with a "
     r"UTF-32 byte-order mark\): save it as UTF-8 \(e\.g\. iconv -f UTF-32 -t UTF-8\)$"),
    ("mine.tsv", labelled_tsv(("pos", 20), ("neg", 20)).encode("utf-32-le"),
     r"^error: cannot read \S+mine\.tsv: it holds NUL bytes, as UTF-32 without a byte-order mark does: save it as "
     r"UTF-8 \(e\.g\. iconv -f UTF-32LE -t UTF-8\)$"),
    ("mine.tsv", tsv_by_csv_module([('she said "wow" twice', "pos")]).encode(),
     r"^error: \S+mine\.tsv:42: a row in double quotes \('\"she said \"\"wow.*: the file is quoted as the csv module"),
    ("mine.tsv", tsv_by_csv_module([("two\tcolumns", "neg")]).encode(), r"^error: \S+mine\.tsv:42: a row in double quotes"),
    ("mine.tsv", tsv_by_csv_module([("line one\nline two", "neg")]).encode(),
     r"^error: \S+mine\.tsv:42: expected text<TAB>label; the line opens a quote it does not close: the file is quoted"),
    ("mine.tsv", tsv_by_csv_module([], quoting=csv.QUOTE_ALL).encode(),
     r"^error: \S+mine\.tsv:2: a row in double quotes \('\"film 0 of pos\"\\\\t\"pos\"'\): the file is quoted"),
    ("mine.tsv", (labelled_tsv(("pos", 20), ("neg", 20)) + "a film\t\u200b\n").encode(),
     r"^error: \S+mine\.tsv:41: empty label \(it holds only U\+200B, which shows nothing\)$"),
    ("mine.tsv", (labelled_tsv(("pos", 20), ("neg", 20)) + "a film\t\u2060 \n").encode(),
     r"^error: \S+mine\.tsv:41: empty label \(it holds only U\+2060, which shows nothing\)$"),
    ("mine.csv", ("text,label\n" + labelled_tsv(("pos", 20), ("neg", 20)).replace("\t", ",") + "a film,\xad\n").encode(),
     r"^error: \S+mine\.csv:42: empty label \(it holds only U\+00AD, which shows nothing\)$"),
    ("mine.tsv", (labelled_tsv(("pos", 20), ("neg", 20)) + "\ufeff\u200d\tpos\n").encode(),
     r"^error: \S+mine\.tsv:41: empty text \(it holds only U\+200D, U\+FEFF, which shows nothing\)$"),
    ("mine.tsv", (labelled_tsv(("pos", 20), ("neg", 20)) + "a film\t\u3164\n").encode(),
     r"^error: \S+mine\.tsv:41: empty label \(it holds only U\+3164, which shows nothing\)$"),
    ("mine.tsv", (labelled_tsv(("pos", 20), ("neg", 20)) + "a film\t\u2065\n").encode(),
     r"^error: \S+mine\.tsv:41: empty label \(it holds only U\+2065, which shows nothing\)$"),
    ("mine.tsv", (labelled_tsv(("pos", 20), ("neg", 20)) + "\ufff0\ufff8\tpos\n").encode(),
     r"^error: \S+mine\.tsv:41: empty text \(it holds only U\+FFF0, U\+FFF8, which shows nothing\)$"),
    ("mine.tsv", (labelled_tsv(("pos", 20), ("neg", 20)) + "\u2800 \ufe0f\U000e0100\u034f\tpos\n").encode(),
     r"^error: \S+mine\.tsv:41: empty text \(it holds only U\+034F, U\+2800, U\+E0100, U\+FE0F, which shows "
     r"nothing\)$"),
    ("mine.jsonl", jsonl_rows(40).replace("\n", "\u2028").encode(),
     r"^error: \S+mine\.jsonl:1: not valid JSON \(Extra data\); it holds U\+2028, which ends a line for some "
     r"readers, but JSON Lines end each record at \\n: put each record on a line of its own$"),
    ("mine.jsonl", jsonl_rows(40).replace("\n", "\x85").encode(),
     r"^error: \S+mine\.jsonl:1: not valid JSON \(Extra data\); it holds U\+0085"),
    ("mine.jsonl", jsonl_rows(40).replace("\n", "\u2028\n").encode(),
     r"^error: \S+mine\.jsonl:1: not valid JSON \(Extra data\); it holds U\+2028 outside its record, which JSON "
     r"does not read as white space: remove it$"),
], ids=["utf-16", "latin-1", "jsonl with CR line ends", "label<TAB>text header", "a tab after every label",
        "a comma after every label", "a lone surrogate in a text", "a lone surrogate in a label", "utf-32",
        "utf-32 without a byte-order mark", "tsv by the csv module, a quote", "tsv by the csv module, a tab",
        "tsv by the csv module, a line end", "tsv by pandas, every cell quoted", "a zero-width space as a label",
        "a word joiner as a label", "a soft hyphen as a .csv label", "zero-width characters as a text",
        "a Hangul filler as a label", "an unassigned default-ignorable as a label",
        "unassigned default-ignorables as a text", "a braille blank and variation selectors as a text",
        "jsonl records joined by U+2028", "jsonl records joined by NEL", "jsonl records each followed by U+2028"])
def test_a_file_read_otherwise_than_written_is_named_by_its_cause(setup, tmp_path, name, content, message):
    """Files whose bytes or layout are not what the reader takes: UTF-16 or Latin-1 bytes (the old
    line quoted Python's codec error, with no fix), a .jsonl whose lines end at \\r alone ("Extra
    data" alone), a .tsv with its label column first under a header (its header read as an example,
    and a class per text), a tab or a comma after every label ("empty label" on a line that shows one;
    "quote a text that holds a comma", which mends nothing), and a JSON escape of half a surrogate
    pair in a text or a label (a traceback from the tokenizer, or a label no file can hold). Each is
    one line naming the cause, before a run folder is made. The code before this one called UTF-32
    UTF-16 (whose iconv fix leads to the NUL bytes of UTF-32 without a byte-order mark, with a
    UTF-16 fix again), and read a .tsv as the csv module or pandas quote it with its quotes in the
    texts and labels (a text holding a line end: "expected text<TAB>label"). It trained a label (or
    a text) of characters that show nothing (a zero-width space, a word joiner, a soft hyphen:
    str.strip() keeps them) as a class of its own, printed by predict as an empty column, and said
    only "Extra data" of .jsonl records joined by U+2028 or NEL (a helper's attack); of records each
    on its own line but followed by a U+2028 it said to put each on a line of its own, which they were."""
    data = tmp_path / name
    data.write_bytes(content)
    with refusal(message):
        finetune.main(["--checkpoint", str(setup / "ckpt"), "--data", str(data), "--out", str(tmp_path / "out"),
                       "--no-progress"])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["mine.tsv", "mine.csv", "mine.jsonl"])
def test_utf16_without_a_byte_order_mark_is_named(setup, tmp_path, name):
    """A labelled file in UTF-16 without a byte-order mark: its bytes decode as UTF-8 (every other
    byte a NUL), so the old code read a .tsv of NUL-laden labels, or blamed a header or the JSON.
    Now one line names the NUL bytes and the fix, before a run folder is made."""
    rows = [(f"film {i}", "pos" if i % 2 else "neg") for i in range(40)]
    text = {"mine.tsv": "".join(f"{t}\t{y}\n" for t, y in rows),
            "mine.csv": "text,label\n" + "".join(f"{t},{y}\n" for t, y in rows),
            "mine.jsonl": "".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows)}[name]
    (tmp_path / name).write_bytes(text.encode("utf-16-le"))
    with refusal(rf"^error: cannot read \S+{re.escape(name)}: it holds NUL bytes, as UTF-16 without a byte-order mark "
                 r"does: save it as UTF-8"):
        finetune.main(["--checkpoint", str(setup / "ckpt"), "--data", str(tmp_path / name), "--out",
                       str(tmp_path / "out"), "--no-progress"])
    assert not (tmp_path / "out").exists()


def test_a_csv_text_longer_than_the_csv_modules_field_limit_is_read(tmp_path):
    """A quoted .csv text of 150,000 characters (Python's csv module refuses fields over 131,072 by
    default: the old code called the file "not readable as CSV") is read whole."""
    long_text = "a good film " * 12_500
    (tmp_path / "mine.csv").write_text(f'text,label\n"{long_text}",pos\nshort,neg\n')
    assert read_split(str(tmp_path / "mine.csv")) == [(long_text, "pos"), ("short", "neg")]


def test_a_tsv_header_in_quotes_is_a_header(tmp_path):
    """A .tsv whose header row is quoted, as pandas writes one ("text"<TAB>"label"): a header, not
    an example of the class '"label"' (the code before this one trained that third class in a
    folder's splits, and called it too small to hold out in one file); a header of other names in
    quotes is a row quoted as pandas quotes one, and named so."""
    (tmp_path / "a.tsv").write_text('"text"\t"label"\n' + "".join(f"film {i}\t{'pos' if i % 2 else 'neg'}\n"
                                                               for i in range(4)))
    assert read_split(str(tmp_path / "a.tsv")) == [("film 0", "neg"), ("film 1", "pos"), ("film 2", "neg"),
                                                   ("film 3", "pos")]
    (tmp_path / "b.tsv").write_text('"review"\t"sentiment"\nfilm 0\tneg\nfilm 1\tpos\n')
    with pytest.raises(InputError, match=r"b\.tsv:1: a row in double quotes .*: the file is quoted as the csv module"):
        read_split(str(tmp_path / "b.tsv"))
