"""fits.io.read_columns: a table's column names from its header alone."""

from __future__ import annotations

import pandas as pd
import pytest

from fits.io import DataFileError, read_columns, read_table


@pytest.mark.parametrize(
    "text",
    [
        "a,b , c\n1,2,3\n",  # commas, spaces kept as read_table keeps them
        "a;b;c\n1,5;2,5;3\n",  # semicolons with decimal commas
        "a\tb\tc\n1\t2\t3\n",
        'x,"y, z",w\n1,2,3\n',  # a quoted name holding the separator
        ",a,b\n0,1,2\n1,3,4\n",  # an empty name (a saved row index)
        "a;;b\n1;2;3\n",
    ],
)
def test_csv_columns_are_read_tables(tmp_path, text):
    path = tmp_path / "t.csv"
    path.write_text(text)
    assert read_columns(path) == [str(c) for c in read_table(path).columns]


def test_parquet_columns_and_errors(tmp_path):
    path = tmp_path / "t.parquet"
    pd.DataFrame({" a ": [1, 2], "b": ["x", "y"]}).to_parquet(path)
    assert read_columns(path) == [" a ", "b"]
    (tmp_path / "dup.csv").write_text("a,b,a\n1,2,3\n")
    with pytest.raises(DataFileError, match="dup.csv"):
        read_columns(tmp_path / "dup.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataFileError, match="empty"):
        read_columns(tmp_path / "empty.csv")
    with pytest.raises(DataFileError, match="no such file"):
        read_columns(tmp_path / "missing.csv")
    with pytest.raises(DataFileError):
        read_columns(tmp_path / "t.txt")
    # a header without rows: its names (read_table refuses the table)
    (tmp_path / "head.csv").write_text("p,q\n")
    assert read_columns(tmp_path / "head.csv") == ["p", "q"]


def test_an_empty_header_name_stays_empty(tmp_path):
    """pandas calls a column with an empty header field 'Unnamed: 1'; fits keeps its
    name, so the synthetic table's header is the input's, and a column really named
    'Unnamed: 1' keeps that name."""
    path = tmp_path / "t.csv"
    path.write_text("x,,Unnamed: 2\n1.5,2,3\n2.5,4,5\n")
    assert list(read_table(path).columns) == ["x", "", "Unnamed: 2"]
    assert read_columns(path) == ["x", "", "Unnamed: 2"]
    path.write_text("x,,\n1.5,2,3\n2.5,4,5\n")
    with pytest.raises(DataFileError, match="more than once"):
        read_table(path)
