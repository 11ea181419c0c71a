"""``fits.io.iter_table`` reads a table in chunks parsed as ``read_table`` parses the
whole file: the chunks put together are ``read_table``'s table, whatever a chunk alone
would infer (integers first and a decimal later, blanks, codes with leading zeros,
text or dates in a later chunk)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.io import DataFileError, iter_table, read_table


def _same_as_whole(path: Path, sizes: tuple[int, ...] = (1, 2, 3, 4, 100)) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = read_table(path)
        for size in sizes:
            chunks = list(iter_table(path, size))
            assert all(len(c) <= size for c in chunks)
            pd.testing.assert_frame_equal(pd.concat(chunks), whole, check_exact=True)


# each column: values a first chunk of 2 rows would parse differently from the whole
COLUMNS = {
    "int_then_float": ["1", "2", "3", "4.5", "6"],
    "int_then_blank": ["1", "2", "3", "", "5"],
    "blank_then_int": ["", "", "3", "4", "5"],
    "code_later": ["12", "13", "14", "0125", "16"],
    "text_later": ["1", "2", "x", "4", "5"],
    "float_whole_blank": ["1.0", "2.0", "", "4", "5"],
    "bool_then_blank": ["True", "False", "", "true", "False"],
    "date_then_text": ["2020-01-01", "2020-01-02", "2020-01-03", "soon", "2020-01-05"],
    "date_then_blank": ["2020-01-01", "", "", "", "2020-01-05 10:00"],
    "date_then_ns": ["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04 00:00:00.123456789", ""],
    "offset_then_other": [
        "2020-01-01T00:00+01:00",
        "2020-01-02T00:00+01:00",
        "2020-07-01T00:00+02:00",
        "2020-07-02T00:00+02:00",
        "2020-07-03T00:00+02:00",
    ],
    "one_offset": [
        "2020-01-01T00:00+01:00",
        "",
        "2020-01-03T00:00+01:00",
        "2020-01-04T00:00+01:00",
        "2020-01-05T00:00+01:00",
    ],
    "bad_date_later": ["2020-01-01", "2020-01-02", "2020-02-30", "2020-01-04", "2020-01-05"],
    "": ["a", "b", "c", "d", "e"],  # an empty header field keeps its empty name
    "text": ["a", "", "c", "d", "e"],
    "big": ["9007199254740993", "1", "", "2", "3"],
}


def _write_csv(path: Path, columns: dict[str, list[str]], sep: str = ",") -> Path:
    names = list(columns)
    lines = [sep.join(names)]
    lines += [sep.join(columns[c][k] for c in names) for k in range(len(columns[names[0]]))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_csv_chunks_are_the_whole_files_parse(tmp_path):
    path = _write_csv(tmp_path / "t.csv", COLUMNS)
    whole = read_table(path)
    # the cases are real: a first chunk of two rows alone would infer otherwise
    assert str(whole["int_then_float"].dtype) == "float64"
    assert str(whole["int_then_blank"].dtype) == "Int64"
    assert not pd.api.types.is_numeric_dtype(whole["code_later"].dtype)
    assert pd.api.types.is_object_dtype(whole["bool_then_blank"].dtype)
    assert str(whole["offset_then_other"].dtype).endswith("UTC]")
    assert not pd.api.types.is_datetime64_any_dtype(whole["bad_date_later"].dtype)
    _same_as_whole(path)


def test_csv_with_semicolons_and_decimal_commas(tmp_path):
    columns = {"a": ["1", "2", "3,5", ""], "b": ["x", "y", "z", "w"], "c": ["1", "", "3", "4"]}
    path = _write_csv(tmp_path / "t.csv", columns, sep=";")
    with pytest.warns(Warning, match="as the separator"):
        list(iter_table(path, 2))
    _same_as_whole(path)
    assert read_table(path)["a"].tolist()[2] == 3.5


def test_parquet_chunks_are_the_whole_files_parse(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "i": pa.array([1, 2, 3, None, 5], pa.int64()),
        "b": pa.array([True, False, True, None, False]),
        "d": pa.array(["2020-01-01", "2020-01-02", None, None, "2020-01-05 00:00:00.5"]),
        "o": pa.array(["2020-01-01T00:00+01:00", "2020-01-02T00:00+01:00", None,
                       "2020-07-01T00:00+02:00", "2020-07-02T00:00+02:00"]),
        "t": pa.array(["2020-01-01", "2020-01-02", "later", None, "x"]),
        "f": pa.array([0.5, 1.5, None, 3.0, 4.0]),
    })  # fmt: skip
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=2)
    whole = read_table(path)
    assert str(whole["i"].dtype) == "float64" and whole["b"].dtype == object
    _same_as_whole(path)

    frame = pd.DataFrame({"c": pd.Categorical(["p", "q", "r", "p"]), "n": range(4)})
    path = tmp_path / "c.parquet"
    frame.to_parquet(path, row_group_size=1)
    _same_as_whole(path)


def test_a_table_of_no_rows_and_bad_files(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a,b\n", encoding="utf-8")
    with pytest.raises(DataFileError, match="header but no rows"):
        list(iter_table(path, 10))
    (chunk,) = iter_table(path, 10, empty_ok=True)
    pd.testing.assert_frame_equal(chunk, read_table(path, empty_ok=True))
    with pytest.raises(DataFileError, match="no such file"):
        iter_table(tmp_path / "gone.csv", 10)  # at once, before any chunk is asked for
    with pytest.raises(DataFileError, match="unknown file type"):
        iter_table(tmp_path / "t.txt", 10)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(DataFileError, match="cannot read it as parquet"):
        list(iter_table(bad, 10))
    with pytest.raises(ValueError, match="at least 1"):
        iter_table(path, 0)


def test_a_larger_mixed_table(tmp_path):
    rng = np.random.default_rng(0)
    n = 2_000
    frame = pd.DataFrame({
        "x": rng.normal(size=n).round(3),
        "k": rng.integers(0, 9, n).astype(float),
        "g": rng.choice(["u", "v", "w"], n),
        "day": pd.date_range("2020-01-01", periods=n, freq="h"),
    })  # fmt: skip
    frame.loc[1_500, "k"] = np.nan  # the only blank, in the last chunks
    path = tmp_path / "m.csv"
    frame.to_csv(path, index=False)
    _same_as_whole(path, sizes=(300, 1_999, 5_000))
