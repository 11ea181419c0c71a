"""Columns of Python ``Decimal`` objects (a Parquet decimal column, a money column) come
back as ``Decimal`` objects with the real values' digits after the point, in every
output: the Python API, CSV and Parquet files (a Parquet decimal column whose type is
fixed for the whole file), conditional sampling and the command line; with missing
values as without them (a ';' file whose decimal-comma column is blank in its first
lines is read as numbers)."""

from __future__ import annotations

import csv
import re
import warnings
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fits import FITSSynthesizer, Schema, SchemaError
from fits.core.schema import ColumnSpec, DataNote, decimal_values, to_decimals
from fits.io import OutputForms, known_decimal_types, write_table_chunks

from conftest import fits_in_process

TWO_PLACES = re.compile(r"^-?\d+\.\d{2}$")


def _sites(seed: int = 0) -> list[pd.DataFrame]:
    """Two sites: ``price`` Decimal objects with two places (some ending in 0, some
    missing: None at one site, Decimal('NaN') at the other), ``units`` whole Decimals,
    ``rate`` a few Decimal levels, ``mixed`` Decimals and floats."""
    rng = np.random.default_rng(seed)
    n = 400
    x = rng.normal(50, 10, n)
    price = np.round(2 * x + rng.gamma(2, 3, n), 1)  # written with 2 places: 12.30
    frame = pd.DataFrame(
        {
            "x": np.round(x, 3),
            "price": [Decimal(f"{v:.2f}") for v in price],
            "units": [Decimal(int(v)) for v in rng.integers(1, 500, n)],
            "rate": [Decimal(("0.50", "1.00", "2.50")[k]) for k in rng.integers(0, 3, n)],
            "mixed": [
                Decimal(f"{v:.2f}") if k % 2 else float(f"{v:.1f}")
                for k, v in enumerate(rng.uniform(0, 10, n))
            ],
        }
    )
    frame.loc[rng.choice(n, 40, replace=False), "price"] = None
    a, b = frame.iloc[:220].copy(), frame.iloc[220:].reset_index(drop=True)
    b["price"] = [Decimal("NaN") if v is None else v for v in b["price"]]
    return [a, b]


def _is_decimal_column(col: pd.Series, places: int) -> bool:
    present = col.dropna()
    return (
        col.dtype == object
        and len(present) > 0
        and all(isinstance(v, Decimal) and v.as_tuple().exponent == -places for v in present)
    )


@pytest.fixture(scope="module")
def fitted() -> FITSSynthesizer:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        synth = FITSSynthesizer(seed=0).fit(_sites())
    notes = [str(w.message) for w in caught if issubclass(w.category, DataNote)]
    assert not [n for n in notes if "text read as" in n], notes
    return synth


def test_decimal_values_reads_decimal_columns_only() -> None:
    numbers, scale = decimal_values(pd.Series([Decimal("1.5"), None, Decimal("2.25")]))
    assert scale == 2 and numbers.dtype == np.float64 and numbers.isna().tolist()[1]
    whole, scale = decimal_values(pd.Series([Decimal("3"), Decimal("1E+2")]))
    assert scale == 0 and str(whole.dtype) == "Int64" and whole.tolist() == [3, 100]
    _, scale = decimal_values(pd.Series([Decimal("1.5"), 2.125, 7, np.nan], dtype=object))
    assert scale == 3  # the floats' own decimals count
    for other in ([1.5, 2.0], ["1.5", "2"], [Decimal("1"), "a"], [Decimal("1"), True]):
        assert decimal_values(pd.Series(other, dtype=object)) is None
    out = to_decimals(pd.Series([12.3, np.nan, -0.0, 7.0]), 2)
    assert out.tolist() == [Decimal("12.30"), None, Decimal("0.00"), Decimal("7.00")]
    assert [str(v) for v in out.dropna()] == ["12.30", "0.00", "7.00"]


def test_schema_records_decimal_columns(fitted) -> None:
    schema = fitted.schema_
    assert (schema["price"].decimal_scale, schema["price"].pandas_dtype) == (2, "object")
    assert schema["price"].dtype == "float" and schema["price"].missing
    assert schema["price"].parsed is None and schema["price"].markers is None
    assert (schema["units"].decimal_scale, schema["units"].dtype) == (0, "int")
    assert (schema["rate"].kind, schema["rate"].decimal_scale) == ("ordinal", 2)
    assert schema["mixed"].decimal_scale == 2
    assert schema["x"].decimal_scale is None
    assert Schema.from_json(schema.to_json()) == schema
    assert schema["price"].to_dict()["decimal_scale"] == 2
    precision, scale = schema["price"].decimal_type
    assert scale == 2 and precision == len(str(int(schema["price"].upper))) + 2
    assert schema.decimal_types()["rate"] == (3, 2)  # 2.50
    with pytest.raises(SchemaError, match="decimal_scale"):
        ColumnSpec("t", "nominal", "string", ["a", "b"], decimal_scale=2)
    with pytest.raises(SchemaError, match="decimal_scale"):
        ColumnSpec("t", "continuous", "float", lower=0.0, upper=1.0, decimal_scale=-1)


def test_sample_gives_decimal_objects_with_the_real_places(fitted) -> None:
    out = fitted.sample(600, seed=1)
    assert _is_decimal_column(out["price"], 2)
    assert _is_decimal_column(out["units"], 0)
    assert _is_decimal_column(out["rate"], 2)
    assert _is_decimal_column(out["mixed"], 2)
    assert out["x"].dtype == np.float64
    assert set(map(str, out["rate"])) <= {"0.50", "1.00", "2.50"}
    assert 0.02 < out["price"].isna().mean() < 0.25  # missing stays missing: None
    assert all(v is None for v in out["price"][out["price"].isna()])
    spec = fitted.schema_["price"]
    assert all(spec.lower <= float(v) <= spec.upper for v in out["price"].dropna())
    chunks = list(fitted.iter_sample(600, chunk_rows=250, seed=1))
    assert len(chunks) == 3 and all(_is_decimal_column(c["price"], 2) for c in chunks)
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), out)


def test_known_decimal_column_comes_back_as_given(tmp_path) -> None:
    sites = _sites()
    synth = FITSSynthesizer(seed=0, order=["price", "x", "units", "rate", "mixed"]).fit(sites)
    given = sites[0][["price"]].iloc[:50].reset_index(drop=True)
    given.loc[3, "price"] = Decimal("60.1")  # one place fewer than the column's: as given
    out = synth.sample_remaining_columns(given, seed=2)
    assert [str(v) for v in out["price"]] == [str(v) for v in given["price"]]
    assert _is_decimal_column(out["units"], 0)
    # numbers (a --known CSV file's floats) become Decimal objects at the column's places
    floats = pd.DataFrame({"price": [np.nan if v is None else float(v) for v in given["price"]]})
    out = synth.sample_remaining_columns(floats, seed=2)
    assert _is_decimal_column(out["price"], 2)
    assert [float(v) for v in out["price"].dropna()] == floats["price"].dropna().tolist()


def test_files_hold_decimal_columns(fitted, tmp_path) -> None:
    parquet = tmp_path / "out.parquet"
    # five rows in a chunk: later chunks hold larger values, with more digits, than the
    # first (one row a chunk checked the same at 5 times the time: a chain pass a chunk)
    fitted.sample_to_file(parquet, 300, chunk_rows=5, seed=3)
    assert pq.ParquetFile(parquet).metadata.num_row_groups == 60
    first = pq.ParquetFile(parquet).read_row_group(0).column("price").to_pylist()
    assert max(abs(v) for v in pd.read_parquet(parquet)["price"].dropna()) > max(
        abs(v) for v in first if v is not None
    )
    types = pq.read_schema(parquet)
    precision, scale = fitted.schema_.decimal_types()["price"]
    assert types.field("price").type == pa.decimal128(precision, scale)
    assert types.field("units").type == pa.decimal128(*fitted.schema_.decimal_types()["units"])
    back = pd.read_parquet(parquet)
    assert _is_decimal_column(back["price"], 2) and back["price"].isna().any()
    expected = fitted.sample(300, seed=3)
    assert [str(v) for v in back["price"]] == [str(v) for v in expected["price"]]
    written = tmp_path / "out.csv"
    fitted.sample_to_file(written, 300, seed=3)
    with open(written, newline="") as fh:
        price = [row["price"] for row in csv.DictReader(fh)]
    assert all(TWO_PLACES.match(v) for v in price if v), price[:5]  # "12.30", not "12.3"
    assert "" in price


def test_parquet_chunks_with_larger_values_than_the_first(tmp_path) -> None:
    first = pd.DataFrame({"p": [Decimal("1.50"), None]})
    later = pd.DataFrame({"p": [Decimal("12345.75"), Decimal("-99.01")]})
    path = tmp_path / "fixed.parquet"
    write_table_chunks([first, later], path, forms=OutputForms(decimal_types={"p": (7, 2)}))
    assert pq.read_schema(path).field("p").type == pa.decimal128(7, 2)
    back = pd.read_parquet(path)["p"].tolist()
    assert back[0] == Decimal("1.50") and back[1] is None and back[2] == Decimal("12345.75")
    # not named: the first chunk's scale, at the most digits decimal128 holds
    path = tmp_path / "inferred.parquet"
    write_table_chunks([first, later], path)
    assert pq.read_schema(path).field("p").type == pa.decimal128(38, 2)
    # a value that does not fit the file's type names the column; no file is left
    path = tmp_path / "too_fine.parquet"
    with pytest.raises(ValueError, match="column 'p'"):
        write_table_chunks([first, pd.DataFrame({"p": [Decimal("1.125")]})], path)
    assert not path.exists()


def _decimal_site(frame: pd.DataFrame, path) -> None:
    table = pa.Table.from_pandas(frame, preserve_index=False).cast(
        pa.schema(
            [
                pa.field("x", pa.float64()),
                pa.field("price", pa.decimal128(10, 2)),
                pa.field("units", pa.decimal128(8, 0)),
                pa.field("rate", pa.decimal128(4, 2)),
                pa.field("mixed", pa.decimal128(10, 2)),
            ]
        )
    )
    pq.write_table(table, path)


def test_known_decimal_types_hold_the_known_values() -> None:
    """The Parquet type of a ``--known`` completion (fits synthesize, the ServerApp of
    fits federate) widens a column's scale, and its precision as much, to the known
    Decimal values' digits; a header is named with or without its spaces."""
    types = {" price ": (5, 2), "units": (3, 0)}
    known = pd.DataFrame({"price": [Decimal("1.125"), None, Decimal("NaN")], "x": [1.0] * 3})
    assert known_decimal_types(types, known) == {" price ": (6, 3), "units": (3, 0)}
    assert known_decimal_types(types, known.assign(price=[Decimal("1.5")] * 3)) == types


def test_command_line_round_trip(tmp_path) -> None:
    sites = _sites()
    files = []
    for k, site in enumerate(sites):
        site = site.assign(
            price=[None if v is None or v.is_nan() else v for v in site["price"]],
            mixed=[Decimal(f"{v:.2f}") for v in site["mixed"]],
        )
        files.append(tmp_path / f"site{k}.parquet")
        _decimal_site(site, files[-1])
    assert pd.read_parquet(files[0])["price"].dtype == object  # Decimal objects, as read
    out = tmp_path / "synthetic.parquet"
    res = fits_in_process(
        "synthesize", *files, "--rows", "300", "--order", "price,x,units,rate,mixed",
        "--out", out, "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "text read as" not in res.stderr + res.stdout
    types = pq.read_schema(out)
    assert pa.types.is_decimal(types.field("price").type) and types.field("price").type.scale == 2
    back = pd.read_parquet(out)
    assert _is_decimal_column(back["price"], 2) and _is_decimal_column(back["units"], 0)
    csv_out = tmp_path / "synthetic.csv"
    res = fits_in_process(
        "synthesize", *files, "--rows", "300", "--out", csv_out, "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    with open(csv_out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert all(TWO_PLACES.match(r["price"]) for r in rows if r["price"])
    assert all(TWO_PLACES.match(r["rate"]) for r in rows)
    # --known: a Parquet file's Decimal objects come back as given
    known = tmp_path / "known.parquet"
    pq.write_table(pq.read_table(files[0]).select(["price"]).slice(0, 40), known)
    completed = tmp_path / "completed.parquet"
    res = fits_in_process(
        "synthesize", *files, "--known", known, "--order", "price,x,units,rate,mixed",
        "--out", completed, "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    given = pd.read_parquet(known)["price"]
    got = pd.read_parquet(completed)
    assert [str(v) for v in got["price"]] == [str(v) for v in given]
    assert _is_decimal_column(got["rate"], 2)
    # known values with more digits after the point than the sites' come back as given
    # in a wider type (the file's type had the sites' scale: 'does not fit decimal(5, 2)')
    three = [Decimal("101.125"), Decimal("99.5"), None]
    pq.write_table(pa.table({"price": pa.array(three, pa.decimal128(6, 3))}), known)
    res = fits_in_process(
        "synthesize", *files, "--known", known, "--order", "price,x,units,rate,mixed",
        "--out", completed, "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert pq.read_schema(completed).field("price").type.scale == 3
    assert [str(v) for v in pd.read_parquet(completed)["price"]] == ["101.125", "99.500", "None"]


def test_decimal_columns_beyond_decimal128_scale(tmp_path) -> None:
    """A Parquet decimal256 column with more than 38 digits after the point keeps its
    values (the scale was capped at 38: values of order 1e-44 came back all 0); more
    than 76 (Python Decimal objects) is refused naming the site and the column, and a
    Parquet output whose precision would exceed 76 stops before writing, saying to
    write a .csv (pyarrow's 'Decimal precision out of range' came through as is)."""
    rng = np.random.default_rng(0)
    files = []
    for k in range(2):
        tiny = [Decimal(int(v)).scaleb(-60) for v in rng.integers(10**15, 10**17, 60)]
        files.append(tmp_path / f"tiny{k}.parquet")
        pq.write_table(
            pa.table({"x": rng.normal(size=60), "t": pa.array(tiny, pa.decimal256(70, 60))}),
            files[-1],
        )
    _, scale = decimal_values(pd.Series(pd.read_parquet(files[0])["t"]))
    assert scale == 60
    out = tmp_path / "o.parquet"
    res = fits_in_process("synthesize", *files, "--rows", "40", "--out", out, "--quiet")
    assert res.returncode == 0, res.stderr
    assert pq.read_schema(out).field("t").type == pa.decimal256(60, 60)
    back = pd.read_parquet(out)["t"]
    assert _is_decimal_column(back, 60) and all(1e-46 < v < 1e-42 for v in back)
    # more than 76 places: refused at the site, naming it and the column
    finer = pd.DataFrame(
        {"x": rng.normal(size=30), "t": [Decimal(int(v)).scaleb(-80) for v in range(1, 31)]}
    )
    with pytest.raises(SchemaError, match=r"client 1: column 't' holds Decimal values with 80"):
        FITSSynthesizer(seed=0).fit([finer, finer.assign(x=rng.normal(size=30))])
    # 70 places at one site, values of 1e20 at another: 91 digits, no Parquet type
    wide = [tmp_path / "small.parquet", tmp_path / "large.parquet"]
    small = [Decimal(int(v)).scaleb(-70) for v in rng.integers(1, 1000, 60)]
    large = [Decimal(int(v)).scaleb(18) for v in rng.integers(1, 1000, 60)]
    for path, values, typ in ((wide[0], small, (76, 70)), (wide[1], large, (76, 0))):
        pq.write_table(
            pa.table({"x": rng.normal(size=60), "d": pa.array(values, pa.decimal256(*typ))}), path
        )
    out = tmp_path / "w.parquet"
    res = fits_in_process("synthesize", *wide, "--rows", "20", "--out", out, "--quiet")
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "column 'd' needs a decimal of 91 digits" in res.stderr
    assert "write a .csv output" in res.stderr and not out.exists()
    res = fits_in_process("synthesize", *wide, "--rows", "20", "--out", out.with_suffix(".csv"))
    assert res.returncode == 0, res.stderr


# -- missing values ------------------------------------------------------------------------


def test_decimal_columns_with_missing_values_keep_their_places() -> None:
    """Missing values of a Decimal column (pd.NA and NaN at one site, every value at
    another) are modelled as missing; the scale and the decimals are the present
    values', as without them."""
    rng = np.random.default_rng(4)

    def site(n: int) -> pd.DataFrame:
        x = rng.normal(50, 10, n).round(2)
        return pd.DataFrame({"x": x, "price": [Decimal(f"{2 * v:.2f}") for v in x]})

    a, b, c = site(60), site(60), site(40)
    a["price"] = a["price"].astype(object)
    a.loc[:5, "price"] = pd.NA
    a.loc[6:9, "price"] = np.nan
    c["price"] = None  # a site without one value of it
    synth = FITSSynthesizer(seed=0).fit([a, b, c])
    spec = synth.schema_["price"]
    assert (spec.decimal_scale, spec.decimals, spec.missing) == (2, 2, True), spec
    out = synth.sample(200, seed=1)
    assert _is_decimal_column(out["price"], 2) and out["price"].isna().any()


def _comma_sites(tmp_path, blank_first: int = 60) -> list:
    """Two ';' files with a decimal comma (12,30); at the second the column ``price`` is
    blank in its first ``blank_first`` rows, past the lines a file's form is judged by."""
    rng = np.random.default_rng(5)
    files = []
    for k in range(2):
        lines = ["x;price"]
        for i in range(120):
            price = f"{rng.normal(100, 10):.2f}".replace(".", ",")
            lines.append(f"{rng.integers(0, 50)};{'' if k and i < blank_first else price}")
        files.append(tmp_path / f"site{k}.csv")
        files[-1].write_text("\n".join(lines) + "\n")
    return files


def test_a_decimal_comma_column_blank_in_the_first_lines_is_read_as_numbers(tmp_path) -> None:
    """The decimal mark of a ';' file was judged by its first 50 lines alone: a site
    whose decimal column was blank there read '101,25' as text, and the column was
    refused as an identifier (60 distinct values in 60 rows). The first number with a
    decimal mark further on decides."""
    from fits.io import read_table

    files = _comma_sites(tmp_path)
    with pytest.warns(DataNote, match="',' as the decimal mark"):
        table = read_table(files[1])
    assert table["price"].dtype == np.float64 and table["price"].isna().sum() == 60
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        spec = FITSSynthesizer(seed=0).fit([read_table(f) for f in files]).schema_["price"]
    assert (spec.kind, spec.decimals, spec.missing) == ("continuous", 2, True), spec
    # a ';' file of whole numbers alone still reads '.' (no decimal mark anywhere)
    whole = tmp_path / "whole.csv"
    whole.write_text("a;b\n" + "".join(f"{k};{k % 7}\n" for k in range(80)))
    with pytest.warns(DataNote, match=r"read with ';' as the separator \(2 columns\)"):
        assert read_table(whole)["a"].dtype == np.int64


def test_command_line_reads_a_decimal_comma_column_blank_at_first(tmp_path) -> None:
    files = _comma_sites(tmp_path)
    out = tmp_path / "synthetic.csv"
    res = fits_in_process("synthesize", *files, "--rows", "50", "--out", out)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("',' as the decimal mark") == 2, res.stderr
    with open(out, newline="") as fh:
        price = [row["price"] for row in csv.DictReader(fh)]
    assert all(re.match(r"^\d+(\.\d{1,2})?$", v) for v in price if v), price[:5]
