"""Blank lines in CSV files (``fits.io``): in a one-column table an empty line between
values is an empty value, read as missing (pandas skips it, which dropped a missing
value); blank lines before the header or after the last value are no rows.  In a table
of more columns a blank line between rows holds no row of the header's fields: it is
skipped, and a note names the file and its lines.  A field of spaces or tabs alone (a
line of them, in a one-column table) is a missing value, with a note naming the file,
the column and the lines.  ``read_table`` and ``iter_table`` (any chunk size) read the
same rows."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from fits.cli.main import app
from fits.core.schema import DataNote
from fits.io import count_rows, iter_table, read_table


def _write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def _read(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """read_table's table and its notes; iter_table's chunks (sizes 1, 2, 3, 100) put
    together are the same table with the same notes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        whole = read_table(path)
    notes = [str(w.message) for w in caught if issubclass(w.category, DataNote)]
    for size in (1, 2, 3, 100):
        with warnings.catch_warnings(record=True) as chunked:
            warnings.simplefilter("always")
            chunks = list(iter_table(path, size))
        pd.testing.assert_frame_equal(
            pd.concat(chunks), whole, check_exact=True, check_index_type=False
        )
        assert [str(w.message) for w in chunked if issubclass(w.category, DataNote)] == notes
    return whole, notes


def test_one_column_blank_line_between_values_is_a_missing_value(tmp_path):
    path = _write(tmp_path, "sex\nFemale\n\nMale\n\n\n")  # trailing newlines: no rows
    frame, notes = _read(path)
    assert frame["sex"].tolist()[0] == "Female" and frame["sex"].tolist()[2] == "Male"
    assert len(frame) == 3 and frame["sex"].isna().tolist() == [False, True, False]
    assert len(notes) == 1
    assert str(path) in notes[0] and "1 blank line (line 3)" in notes[0]
    assert "missing" in notes[0] and "'sex'" in notes[0]


def test_one_column_numbers_codes_and_crlf_keep_their_places(tmp_path):
    numbers, _ = _read(_write(tmp_path, "n\r\n1\r\n\r\n\r\n4\r\n\r\n", "n.csv"))
    assert numbers["n"].dtype == "Int64" and numbers["n"].tolist() == [1, pd.NA, pd.NA, 4]
    codes, notes = _read(_write(tmp_path, "\n\nzip\n02134\n\n02139\n", "zip.csv"))
    assert codes["zip"].isna().tolist() == [False, True, False]
    assert codes["zip"].dropna().tolist() == ["02134", "02139"]  # codes: text, zeros kept
    assert "(line 5)" in notes[0]  # lines counted in the file, leading blanks included


def test_one_column_quoted_value_with_blank_lines_inside_is_one_value(tmp_path):
    frame, notes = _read(_write(tmp_path, 'text\n"a\n\nb"\n\nc\n'))
    assert frame["text"].tolist()[0] == "a\n\nb" and len(frame) == 3
    assert frame["text"].isna().tolist() == [False, True, False]
    assert "(line 5)" in notes[0]


def test_trailing_and_leading_blank_lines_are_no_rows_and_no_note(tmp_path):
    frame, notes = _read(_write(tmp_path, "\nsex\nFemale\nMale\n\n  \n"))
    assert frame["sex"].tolist() == ["Female", "Male"] and notes == []
    frame, notes = _read(_write(tmp_path, "a,b\n1,2\n3,4\n\n\n", "ab.csv"))
    assert frame.shape == (2, 2) and notes == []


def test_blank_line_between_rows_of_more_columns_is_skipped_with_a_note(tmp_path):
    path = _write(tmp_path, "a,b\n1,x\n\n3,y\n  \n5,z\n,\n\n")
    frame, notes = _read(path)
    assert frame["a"].tolist()[:3] == [1, 3, 5] and len(frame) == 4  # ',' is a row
    assert len(notes) == 1
    assert str(path) in notes[0] and "2 blank lines (lines 3, 5)" in notes[0]
    assert "skipped" in notes[0]


def test_fits_schema_reads_the_blank_value_as_missing(tmp_path):
    site = _write(tmp_path, "sex\n" + "Female\nMale\n" * 10 + "\nFemale\n", "site.csv")
    out = tmp_path / "schema.json"
    result = CliRunner().invoke(app, ["schema", str(site), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "note:" in result.output and "1 blank line (line 22)" in result.output
    column = json.loads(out.read_text())["columns"]
    entry = column["sex"] if isinstance(column, dict) else column[0]
    assert entry.get("missing") not in (None, False, 0), entry


@pytest.mark.parametrize("text", ["sex\nF\n\nM\n", "a;b\n1;2\n\n3;4\n"])
def test_rows_agree_between_whole_and_chunked_reading(tmp_path, text):
    path = _write(tmp_path, text)
    frame, _ = _read(path)
    assert len(frame) == (3 if text.startswith("sex") else 2)


@pytest.mark.parametrize("width", [100, 1 << 20])
def test_a_blank_line_across_the_first_look_s_block_boundary_is_found(tmp_path, width):
    """The bytes are looked at in blocks of 1 MiB: a blank line cut by a block's end is
    still found (the first newline the last byte of the first block); a value longer
    than Python's csv field limit (128 KiB) is read as pandas reads it."""
    size = (1 << 20) - len("v\n")  # the first block ends on the body's last newline
    lines = ["x" * (width - 1)] * (size // width)
    if size % width:
        lines.insert(0, "x" * (size % width - 1))
    body = "".join(f"{v}\n" for v in lines)
    assert len(body) == size
    path = _write(tmp_path, "v\n" + body + "\ny\n")
    with pytest.warns(DataNote, match=f"1 blank line \\(line {len(lines) + 2}\\)"):
        frame = read_table(path)
    assert len(frame) == len(lines) + 2
    assert frame["v"].isna().tolist()[-3:] == [False, True, False]


COUNTED = [
    "sex\nFemale\n\nMale\n\n\n",
    "\n\nsex\nF\n  \n\n\nM\n  \n",
    'text\n"a\n\nb"\n\n" "\nc\n',
    "a,b\n1,x\n\n3,y\n  \n5,z\n,\n\n",
    'x,g\n"1\n5",u\n2,v\n\n3,w\n',
    "a;b\n1;2\n\n3;4\n",
    "n\r\n1\r\n\r\n\r\n4\r\n\r\n",
    "sex\nF",
    "a\tb\n1\t2\n\t\n\n  \n3\t4\n",
]


@pytest.mark.parametrize("text", COUNTED)
def test_count_rows_counts_the_rows_read_table_reads(tmp_path, text):
    """fits.io.count_rows (a cheap count, up to a most) agrees with read_table,
    blank lines included; a Parquet file's count is its metadata's."""
    path = _write(tmp_path, text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        frame = read_table(path)
    assert count_rows(path) == len(frame)
    for most in range(1, len(frame) + 2):
        assert count_rows(path, most) == min(most, len(frame))
    frame.to_parquet(tmp_path / "t.parquet")
    assert count_rows(tmp_path / "t.parquet") == len(frame)
    assert count_rows(tmp_path / "t.parquet", 1) == 1


def test_only_blank_lines_between_rows_cost_a_second_look(tmp_path):
    """The cheap first look over the bytes (blocks of 1 MiB) sends a file to the csv
    pass only for a blank line with something after it: an editor's trailing newlines
    (the same rows either way) cost nothing; one cut by a block's end is still seen."""
    from fits.io import _may_have_blank_lines

    def looks(text: str) -> bool:
        path = _write(tmp_path, text)
        return _may_have_blank_lines(path)

    assert not looks("a,b\n1,2\n\n\n  \n") and not looks("a\r\n1\r\n\r\n")
    assert not looks("a\n" + "x" * ((1 << 20) - 2) + "\n\n  \n")
    assert looks("a\n1\n\n2\n") and looks("a\r\n1\r\n  \r\n2\r\n") and looks("a\r1\r\r2\r")
    block = 1 << 20
    assert looks("a\n" + "x" * (block - 3) + "\n" + "\ny\n")  # block 1 ends on "\n"
    assert looks("a\n" + "x" * (block - 4) + "\n\n" + "y\n")  # ... on the blank line
    assert looks("a\n" + "x" * (block - 4) + "\n " + " \ny\n")  # ... within its spaces


def test_a_line_of_tabs_in_a_tab_separated_table_is_a_row_of_missing_values(tmp_path):
    """With a tab as the separator a line of tabs holds the header's fields, empty: a
    row (pandas reads it so), not a blank line; the empty line after it is skipped."""
    path = _write(tmp_path, "a\tb\n1\t2\n\t\n\n3\t4\n")
    frame, notes = _read(path)
    assert len(frame) == 3 and frame["a"].isna().tolist() == [False, True, False]
    assert count_rows(path) == 3
    assert any("1 blank line (line 4) between rows skipped" in n for n in notes), notes


# -- fields of spaces or tabs alone ---------------------------------------------------------


def test_one_column_line_of_spaces_is_a_missing_value_with_a_note(tmp_path):
    """A line of spaces (or a tab) between values of a one-column table was the value
    '   ': a column of numbers became text, and a column of labels got a category of
    spaces.  It is a missing value, and a note names the file, the column and the lines."""
    path = _write(tmp_path, "n\n1\n   \n2\n\t\n3\n\n")
    frame, notes = _read(path)
    assert frame["n"].dtype == "Int64" and frame["n"].tolist() == [1, pd.NA, 2, pd.NA, 3]
    assert len(notes) == 1 and str(path) in notes[0], notes
    assert "column 'n': 2 fields of spaces or tabs alone (lines 3, 5)" in notes[0]
    assert "read as missing values" in notes[0]
    labels, notes = _read(_write(tmp_path, "sex\nF\n  \nM\n\nF\n", "sex.csv"))
    assert labels["sex"].isna().tolist() == [False, True, False, True, False]
    assert set(labels["sex"].dropna()) == {"F", "M"}
    assert any("(line 3)" in n and "'sex'" in n for n in notes), notes
    assert any("1 blank line (line 5)" in n for n in notes), notes  # the empty one, as before


def test_fields_of_spaces_in_a_wider_table_are_missing_values(tmp_path):
    path = _write(tmp_path, 'x,sex,n\n1.5,F,7\n   ,M,8\n3, ,9\n4,"\t",10\n5,M ,\n')
    frame, notes = _read(path)
    assert frame["x"].dtype == "float64" and frame["x"].isna().tolist()[1]  # not text
    assert frame["sex"].tolist()[:2] == ["F", "M"] and frame["sex"].isna().sum() == 2
    assert frame["sex"].tolist()[-1] == "M "  # a value with a space stays as written
    assert len(notes) == 2, notes
    assert "column 'x': 1 field of spaces or tabs alone (line 3)" in notes[0]
    assert "column 'sex': 2 fields of spaces or tabs alone (lines 4, 5)" in notes[1]
    assert all(str(path) in n and "missing" in n for n in notes)


def test_fits_schema_keeps_a_column_of_numbers_with_a_field_of_spaces(tmp_path):
    rows = "".join(f"{k * 1.25},{'F' if k % 2 else 'M'}\n" for k in range(30))
    site = _write(tmp_path, "x,sex\n" + rows + "  ,  \n" + rows, "site.csv")
    out = tmp_path / "schema.json"
    result = CliRunner().invoke(app, ["schema", str(site), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "column 'x': 1 field of spaces or tabs alone (line 32)" in result.output
    columns = json.loads(out.read_text())["columns"]
    entries = {c["name"]: c for c in columns} if isinstance(columns, list) else columns
    assert entries["x"]["kind"] == "continuous" and entries["x"]["missing"], entries["x"]
    assert entries["sex"]["categories"] == ["F", "M", None], entries["sex"]
