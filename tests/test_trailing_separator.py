"""A CSV file whose every row ends with a separator (``a,b,c`` then ``71,69.4,-0.44,``:
database and spreadsheet exports). pandas took the first field of such a file as the row
index: column a vanished, a held b's values and c was missing in every row, exit 0. Now
every reader reads the header's columns, with a note, and refuses a value past them."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.core.schema import DataNote
from fits.io import DataFileError, iter_table, read_columns, read_table

from conftest import fits_in_process

_ROWS = ["71,69.4,-0.44,", "58,70.1,0.3,", "60,65.0,1.2,", "44,,2.5,"]


def _write(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def _notes(caught: list[warnings.WarningMessage]) -> str:
    return " ".join(str(w.message) for w in caught if issubclass(w.category, DataNote))


def test_every_reader_keeps_the_columns_in_place(tmp_path) -> None:
    path = _write(
        tmp_path / "t.csv",
        "a,b,c,d,e",
        [
            f"{r[:-1]},{t},"
            for r, t in zip(_ROWS, ["true,NA", "false,x", ",y", "true,"], strict=True)
        ],
    )
    expected = {
        "a": [71, 58, 60, 44],
        "b": [69.4, 70.1, 65.0, None],
        "c": [-0.44, 0.3, 1.2, 2.5],
        "d": [True, False, None, True],
        "e": ["NA", "x", "y", None],
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = read_table(path)
        chunks = pd.concat(list(iter_table(path, chunk_rows=2)), ignore_index=True)
    for read in (frame, chunks):
        assert list(read.columns) == ["a", "b", "c", "d", "e"]
        assert read.astype(object).where(read.notna(), None).to_dict("list") == expected
    assert "every row ends with ',' after its last field" in _notes(caught)
    assert not [w for w in caught if issubclass(w.category, pd.errors.ParserWarning)]
    assert read_columns(path) == ["a", "b", "c", "d", "e"]


def test_a_semicolon_file_with_decimal_commas(tmp_path) -> None:
    """The separator is found as in a file without the trailing one (every line split
    the same number of ways but for the empty field at each row's end)."""
    rows = [r.replace(",", ";").replace(".", ",") for r in _ROWS]
    path = _write(tmp_path / "t.csv", "a;b;c", rows)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = read_table(path)
    assert "every row ends with ';'" in _notes(caught)
    assert list(frame.columns) == ["a", "b", "c"]
    assert frame["c"].tolist() == [-0.44, 0.3, 1.2, 2.5]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["1,2,3,9", "4,5,6,"], "line 2 has 4 fields, the header 3"),
        (["1,2,3,", "4,5,6,7"], "line 3 has 4 fields, the header 3"),
        (["1,2,3,,", "4,5,6,,"], "line 2 has 5 fields, the header 3"),
        (["1,2,3,", "4,5,6"], "line 2 has 4 fields, the header 3, and line 3 has 3"),
    ],
)
def test_a_value_past_the_header_is_refused(tmp_path, rows, message) -> None:
    """A value past the header's last column (pandas dropped it with ``index_col=False``
    and shifted the columns without), or rows of different lengths, are refused, naming
    the file and the line."""
    path = _write(tmp_path / "t.csv", "a,b,c", rows)
    for read in (read_table, lambda p: list(iter_table(p, chunk_rows=2))):
        with pytest.raises(DataFileError, match=message) as err:
            read(path)
        assert str(path) in str(err.value)


def test_the_command_line_synthesizes_the_right_columns(tmp_path) -> None:
    rng = np.random.default_rng(0)
    sites = [
        _write(
            tmp_path / f"s{k}.csv",
            "a,b,c",
            [
                f"{a},{b:.1f},{c:.2f},"
                for a, b, c in zip(
                    rng.integers(70, 79, 30),
                    rng.normal(65, 3, 30),
                    rng.uniform(-0.7, -0.1, 30),
                    strict=True,
                )
            ],
        )
        for k in range(2)
    ]
    out = tmp_path / "o.csv"
    res = fits_in_process("synthesize", *sites, "--rows", 20, "--out", out, "--seed", 0)
    assert res.returncode == 0, res.stderr
    assert "every row ends with ','" in res.stderr
    synthetic = pd.read_csv(out)
    assert list(synthetic.columns) == ["a", "b", "c"]
    assert synthetic["a"].between(70, 78).all() and synthetic["c"].between(-0.7, -0.1).all()
    bad = _write(tmp_path / "bad.csv", "a,b,c", ["71,60.5,-0.4,1", "72,61.5,-0.3,"])
    res = fits_in_process("synthesize", bad, sites[0], "--rows", 5, "--out", tmp_path / "p.csv")
    assert res.returncode == 1, res.stderr
    assert "bad.csv: line 2 has 4 fields, the header 3" in res.stderr
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize("sep", [",", ";"])
@pytest.mark.parametrize("every_row", [False, True])
def test_a_header_that_ends_with_a_separator_no_row_fills(tmp_path, sep, every_row) -> None:
    """``a,b,c,`` then ``1,2,x`` (only the header ends with one: line 2 was refused as a
    short row) or ``1,2,x,`` (every line ends with one: a column named '' was modelled
    and written): the header's three columns, with a note naming the header."""
    end = sep if every_row else ""
    rows = [f"1{sep}2.5{sep}x{end}", f"3{sep}{sep}y{end}", f"5{sep}4.5{sep}x{end}"]
    path = _write(tmp_path / "t.csv", sep.join(["a", "b", "c", ""]), rows)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = read_table(path)
        chunks = pd.concat(list(iter_table(path, chunk_rows=2)), ignore_index=True)
    for read in (frame, chunks):
        assert list(read.columns) == ["a", "b", "c"]
        assert read["a"].tolist() == [1, 3, 5] and read["c"].tolist() == ["x", "y", "x"]
        assert read["b"].iloc[[0, 2]].tolist() == [2.5, 4.5] and pd.isna(read["b"].iloc[1])
    assert f"the header ends with {sep!r} after its last name" in _notes(caught)
    assert read_columns(path) == ["a", "b", "c"]


def test_an_empty_last_header_field_with_values_under_it_stays_a_column(tmp_path) -> None:
    path = _write(tmp_path / "t.csv", "a,b,", ["1,2,", "3,4,z"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = read_table(path)
    assert list(frame.columns) == ["a", "b", ""] and frame[""].tolist()[1] == "z"
    assert "the header ends with" not in _notes(caught)


def test_the_command_line_reads_a_header_that_ends_with_a_separator(tmp_path) -> None:
    rng = np.random.default_rng(1)
    rows = [f"{a},{b:.2f},{'xy'[a % 2]}" for a, b in enumerate(rng.normal(size=40))]
    site = _write(tmp_path / "s.csv", "a,b,c,", rows)
    out = tmp_path / "o.csv"
    res = fits_in_process("synthesize", site, "--rows", 5, "--out", out, "--seed", 0)
    assert res.returncode == 0, res.stderr
    assert "the header ends with ','" in res.stderr
    assert list(pd.read_csv(out).columns) == ["a", "b", "c"]
