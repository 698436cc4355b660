"""read_split on bad label rows: a .tsv header is not a class, a missing label or text is
refused naming file:line (never read as the class "None")."""

import json

import pytest

from minibert.run.labelled import InputError, read_split


@pytest.mark.parametrize("header", ["text\tlabel", "sentence\tlabel", "Sentence1\tLABEL"])
def test_tsv_header_row_is_skipped(tmp_path, header):
    """A first line `text<TAB>label` (or sentence/sentence1, any case) is a header: 2 rows, 2 classes,
    no class named "label"."""
    f = tmp_path / "train.tsv"
    f.write_text(f"{header}\na fine film\tpos\na dull film\tneg\n")
    rows = read_split(str(f))
    assert rows == [("a fine film", "pos"), ("a dull film", "neg")]
    assert sorted({y for _, y in rows}) == ["neg", "pos"]


def test_tsv_label_named_label_after_the_first_line_is_data(tmp_path):
    """Only the first line can be a header; later rows are read as written."""
    f = tmp_path / "train.tsv"
    f.write_text("a fine film\tpos\ntext\tlabel\n")
    assert read_split(str(f)) == [("a fine film", "pos"), ("text", "label")]


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
], ids=["csv row without its label", "jsonl list", "jsonl text not a string"])
def test_a_row_that_is_not_text_and_label_is_refused_naming_file_and_line(tmp_path, name, content, message):
    """A short .csv row (csv gives None: never the class "None"), a JSON list instead of an
    object, a text that is a list: each one line naming file:line."""
    f = tmp_path / name
    f.write_text(content)
    with pytest.raises(InputError, match=message):
        read_split(str(f))
