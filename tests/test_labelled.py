"""read_split on bad label rows: a .tsv header is not a class, a missing label or text is
refused naming file:line (never read as the class "None")."""

import json

import pytest

from minibert.labelled import InputError, read_split


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


def test_csv_row_missing_its_label_names_file_and_line(tmp_path):
    """Line 3 `a dull film` has no label field (csv gives None): refused as file:3, not class "None"."""
    f = tmp_path / "train.csv"
    f.write_text("text,label\na fine film,pos\na dull film\n")
    with pytest.raises(InputError, match=r"train\.csv:3: missing label$"):
        read_split(str(f))


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


def test_jsonl_line_that_is_not_an_object_is_refused(tmp_path):
    """A JSON list on line 1 is no row: one line naming file:1."""
    f = tmp_path / "train.jsonl"
    f.write_text('["a fine film", "pos"]\n')
    with pytest.raises(InputError, match=r"train\.jsonl:1: expected a JSON object"):
        read_split(str(f))
