"""Columns of one value, or of none, at every site (kind ``"constant"``).

A column that held the same value in every row of every site, or no value at all,
stopped a fit (``EmptyColumnError``: "drop it ... and add it back"), one column per
run, and the user rebuilt the columns by hand.  They are now kept: not modelled (no
chain position, no site answers about them), written in every synthetic row as the
value / as missing, in the input's dtype, through every output path; a note names
them.  A column of one value and some missing values is not constant: a discrete one
is modelled as two categories (the value, missing), a datetime one is a constant
whose missingness indicator the chain draws.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import (
    ConstantNote,
    DataNote,
    DeclaredKindError,
    Schema,
    SchemaError,
    missing_flag,
)

from conftest import fits_in_process as run

DEGENERATE = ["const", "unit", "flag", "day", "empty"]


def _sites(k: int = 3, seed: int = 0) -> dict[str, pd.DataFrame]:
    """``k`` site tables: three modelled columns and the five degenerate ones (a number,
    a text, a bool, a date of one value; a column missing everywhere)."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in range(k):
        n = 50 + 10 * s
        x = rng.normal(size=n).round(2)
        out[f"site{s}"] = pd.DataFrame(
            {
                "g": rng.choice(["a", "b", "c"], n),
                "x": x,
                "const": np.full(n, 7, dtype=np.int64),
                "unit": pd.Series(["mg"] * n, dtype="str"),
                "age": rng.integers(18, 90, n),
                "flag": np.ones(n, dtype=bool),
                "day": pd.Series(pd.Timestamp("2021-03-04"), index=range(n)),
                "empty": np.full(n, np.nan),
            }
        )
    return out


def _fit(tables: dict[str, pd.DataFrame], **kw) -> FITSSynthesizer:
    return FITSSynthesizer(seed=5, **kw).fit(tables)


def _check_constants(out: pd.DataFrame, real: pd.DataFrame) -> None:
    for c in DEGENERATE:
        assert out[c].dtype == real[c].dtype, c
    assert (out["const"] == 7).all()
    assert (out["unit"] == "mg").all()
    assert out["flag"].all()
    assert (out["day"] == pd.Timestamp("2021-03-04")).all()
    assert out["empty"].isna().all()


def test_the_schema_keeps_them_as_constants_with_a_note() -> None:
    tables = _sites()
    with pytest.warns(ConstantNote) as caught:
        schema = Schema.detect(tables)
    note = str(caught[0].message)
    for part in (
        "'const' holds 7 in every row at every site",
        "'unit' holds 'mg'",
        "'flag' holds True",
        "'day' holds 2021-03-04",
        "'empty' is missing in every row at every site (written as missing)",
        "--drop const --drop unit --drop flag --drop day --drop empty",
    ):
        assert part in note, part
    assert schema.constants == DEGENERATE
    assert [schema[c].constant_value for c in DEGENERATE[:3]] == [7, "mg", True]
    assert schema["empty"].all_missing and schema["empty"].missing
    assert schema.expanded().order == ["g", "x", "age"]  # no chain position
    # the JSON shows kind "constant" and its value; read back, it is the same schema
    text = schema.to_json()
    assert Schema.from_json(text) == schema
    entries = {c["name"]: c for c in json.loads(text)["columns"]}
    assert entries["const"]["kind"] == "constant" and entries["const"]["categories"] == [7]
    assert entries["day"]["lower"] == entries["day"]["upper"]
    assert entries["empty"] == {
        "name": "empty",
        "kind": "constant",
        "dtype": "float",
        "missing": True,
        "pandas_dtype": "float64",
    }


def test_a_hand_written_constant_is_checked() -> None:
    with pytest.raises(SchemaError, match="exactly one value"):
        Schema.from_dict({"columns": [{"name": "c", "kind": "constant", "categories": [1, 2]}]})
    with pytest.raises(SchemaError, match='"lower" must equal "upper"'):
        Schema.from_dict({"columns": [{"name": "c", "kind": "constant", "lower": 1, "upper": 2}]})
    with pytest.raises(SchemaError, match='set "missing": true'):
        Schema.from_dict({"columns": [{"name": "c", "kind": "constant"}]})
    with pytest.raises(DeclaredKindError, match="declared constant but takes 3 distinct values"):
        Schema.detect([pd.DataFrame({"v": [1, 2, 3]})], kinds={"v": "constant"})


def test_declaring_a_column_of_several_values_constant_is_a_usage_error() -> None:
    """The Python API raises a ValueError (a SchemaError, DeclaredKindError) naming the
    column, how many distinct values it takes, and both fixes."""
    tables = _sites(2)
    with pytest.raises(ValueError) as err:
        _fit(tables, kinds={"g": "constant"})
    assert isinstance(err.value, DeclaredKindError) and err.value.column == "g"
    assert str(err.value) == (
        "column 'g' is declared constant but takes 3 distinct values at the sites; fits "
        "sets kind 'constant' itself for a column of one value: leave out the declaration "
        "(--kind g=constant; Python: kinds={'g': 'constant'}) to model it, or leave the "
        "column out of the synthetic table (--drop g)"
    )
    # a continuous column: its sites send bounds, not values
    with pytest.raises(
        DeclaredKindError,
        match=r"takes more than 20 distinct values at the "
        r"sites \(from -?\d",
    ):
        _fit(tables, kinds={"x": "constant"})
    # a text column of a different value in every row: said, not refused as an identifier
    ids = {n: t.assign(g=[f"patient {k}" for k in range(len(t))]) for n, t in tables.items()}
    with pytest.raises(DeclaredKindError, match=r"takes many values at the sites \(50 distinct"):
        _fit(ids, kinds={"g": "constant"})
    # a column that is constant: the declaration is accepted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        schema = Schema.detect(list(tables.values()), kinds={"const": "constant"})
    assert schema["const"].kind == "constant"


def test_fits_synthesize_refuses_constant_on_several_values_with_exit_2(tmp_path: Path) -> None:
    paths = _write_sites(tmp_path, _sites(2))
    out = tmp_path / "o.csv"
    schema = ["schema", "--out", tmp_path / "s.json"]
    analyze = ["analyze", "--target", "x", "--out", tmp_path / "r.json"]
    for command in (["synthesize", "--rows", "10", "--out", out], schema, analyze):
        res = run(command[0], *paths, "--kind", "age=constant", *command[1:])
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr
        assert not out.exists() and not (tmp_path / "s.json").exists()
        assert not (tmp_path / "r.json").exists()
        text = " ".join(res.stderr.split())
        assert "error: column 'age' is declared constant but takes " in text
        assert "leave out the declaration (--kind age=constant; " in text
        assert "(--drop age)" in text


def test_a_kind_declared_on_a_constant_column_is_named_in_the_note(tmp_path: Path) -> None:
    tables = _sites(2)
    with pytest.warns(ConstantNote) as caught:
        Schema.detect(list(tables.values()), kinds={"const": "ordinal", "unit": "nominal"})
    note = " ".join(str(w.message) for w in caught if isinstance(w.message, ConstantNote))
    assert (
        "'const' holds 7 in every row at every site (written as 7); it is declared ordinal "
        "(--kind const=ordinal), a declaration fits does not use for a column of one value"
    ) in note
    assert "'unit' holds 'mg' in every row at every site (written as 'mg'); it is declared " in note
    assert "'flag' holds True in every row at every site (written as True); 'day'" in note
    paths = _write_sites(tmp_path, tables)
    res = run(
        "synthesize", *paths, "--kind", "const=ordinal", "--rows", "10", "--out", tmp_path / "o.csv"
    )
    assert res.returncode == 0, res.stderr
    assert "it is declared ordinal (--kind const=ordinal), a declaration fits does not use" in (
        " ".join(res.stderr.split())
    )


def test_python_api_writes_the_constants_and_leaves_the_chain_unchanged() -> None:
    tables = _sites()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        synth = _fit(tables)
        plain = _fit({n: t.drop(columns=DEGENERATE) for n, t in tables.items()})
    out = synth.sample(300, seed=1)
    assert list(out.columns) == list(tables["site0"].columns)
    _check_constants(out, tables["site0"])
    # the other columns bit for bit those of a fit without the degenerate columns
    pd.testing.assert_frame_equal(
        out.drop(columns=DEGENERATE), plain.sample(300, seed=1), check_exact=True
    )
    # chunks, the table of no rows, a file
    chunks = list(synth.iter_sample(300, seed=1, chunk_rows=70))
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), out, check_exact=True)
    empty = synth.sample(0)
    assert list(empty.dtypes) == list(out.dtypes)


def test_sample_to_file_parquet_and_csv(tmp_path: Path) -> None:
    tables = _sites(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        synth = _fit(tables)
    out = synth.sample(120, seed=2)
    path = synth.sample_to_file(tmp_path / "o.parquet", 120, seed=2, chunk_rows=50)
    pd.testing.assert_frame_equal(pd.read_parquet(path), out, check_exact=True)
    path = synth.sample_to_file(tmp_path / "o.csv", 120, seed=2, chunk_rows=50)
    text = pd.read_csv(path)
    assert (text["const"] == 7).all() and text["empty"].isna().all()
    assert (text["day"] == "2021-03-04").all() and text["flag"].all()


def test_known_values_of_a_constant_are_checked_and_written(tmp_path: Path) -> None:
    tables = _sites(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        synth = _fit(tables)
    known = pd.DataFrame({"g": ["a", "b", "c"]})
    ref = synth.sample_remaining_columns(known, seed=3)
    _check_constants(ref, tables["site0"])
    given = synth.sample_remaining_columns(known.assign(const=7, empty=np.nan), seed=3)
    pd.testing.assert_frame_equal(given, ref, check_exact=True)
    with pytest.raises(ValueError, match=r"'const' is 7 in every row .* gives 8 in its row 2"):
        synth.sample_remaining_columns(known.assign(const=[7, 8, 7]), seed=3)
    with pytest.raises(ValueError, match="only constant columns"):
        synth.sample_remaining_columns(pd.DataFrame({"const": [7]}), seed=3)


def test_save_and_load_keep_them(tmp_path: Path) -> None:
    tables = _sites(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        synth = _fit(tables)
        out = synth.sample(80, seed=4)
        synth.save(tmp_path / "m.fits")
        loaded = FITSSynthesizer.load(tmp_path / "m.fits")
        loaded.connect(tables)
    pd.testing.assert_frame_equal(loaded.sample(80, seed=4), out, check_exact=True)


def test_one_value_and_missing_values_is_not_constant() -> None:
    """Decided: a discrete column of one value and missing values is modelled as two
    categories (the value, missing); a datetime one is a constant with its missingness
    indicator drawn in the chain, where the column stands."""
    tables = _sites(2)
    rng = np.random.default_rng(9)
    for t in tables.values():
        n = len(t)
        absent = rng.random(n) < 0.3
        t["unit"] = t["unit"].mask(absent)
        t["day"] = t["day"].mask(absent)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        synth = _fit(tables)
    schema = synth.schema_
    assert schema["unit"].kind == "nominal" and schema["unit"].categories == ["mg", None]
    assert schema["day"].kind == "constant" and schema["day"].missing
    assert missing_flag("day") in synth.coordinator.schema.order
    out = synth.sample(400, seed=6)
    assert out["day"].dtype == tables["site0"]["day"].dtype
    present = out["day"].dropna()
    assert (present == pd.Timestamp("2021-03-04")).all()
    share = out["day"].isna().mean()
    assert 0.15 < share < 0.45  # the drawn indicator: about the real 30%
    assert set(out["unit"].dropna()) == {"mg"} and out["unit"].isna().any()
    with pytest.raises(ValueError, match="which rows are missing is drawn"):
        synth.sample_remaining_columns(pd.DataFrame({"g": ["a"], "day": [pd.NaT]}))


def _write_sites(tmp_path: Path, tables: dict[str, pd.DataFrame]) -> list[Path]:
    paths = []
    for name, table in tables.items():
        paths.append(tmp_path / f"{name}.csv")
        table.to_csv(paths[-1], index=False)
    return paths


def test_fits_synthesize_writes_them(tmp_path: Path) -> None:
    tables = _sites()
    paths = _write_sites(tmp_path, tables)
    out = tmp_path / "o.parquet"
    res = run("synthesize", *paths, "--out", out, "--rows", "200", "--seed", "3")
    assert res.returncode == 0, res.stderr
    assert "note: fits writes these columns in every synthetic row" in res.stderr
    assert "'empty' is missing in every row at every site" in res.stderr
    table = pd.read_parquet(out)
    read = pd.read_csv(paths[0])  # the dtypes the sites read
    assert list(table.columns) == list(read.columns)
    for c in ("const", "unit", "flag", "empty"):
        assert table[c].dtype == read[c].dtype, c
    assert (table["const"] == 7).all() and (table["unit"] == "mg").all()
    assert table["flag"].all() and table["empty"].isna().all()
    assert (table["day"].astype(str).str[:10] == "2021-03-04").all()
    # with the columns dropped, the other columns are the same, bit for bit
    dropped = tmp_path / "d.parquet"
    args = [a for c in DEGENERATE for a in ("--drop", c)]
    res = run("synthesize", *paths, "--out", dropped, "--rows", "200", "--seed", "3", *args)
    assert res.returncode == 0, res.stderr
    assert "fits writes these columns" not in res.stderr
    pd.testing.assert_frame_equal(
        pd.read_parquet(dropped), table.drop(columns=DEGENERATE), check_exact=True
    )


def test_fits_schema_then_synthesize_with_it_and_an_edited_one(tmp_path: Path) -> None:
    paths = _write_sites(tmp_path, _sites(2))
    schema = tmp_path / "s.json"
    res = run("schema", *paths, "--out", schema)
    assert res.returncode == 0, res.stderr
    assert "5 constant" in res.stdout
    out = tmp_path / "o.csv"
    res = run("synthesize", *paths, "--schema", schema, "--out", out, "--rows", "30")
    assert res.returncode == 0, res.stderr
    assert (pd.read_csv(out)["const"] == 7).all()
    edited = json.loads(schema.read_text())
    for c in edited["columns"]:
        if c["name"] == "const":
            c["categories"] = [8]  # a value no site holds: never written
    schema.write_text(json.dumps(edited))
    res = run("synthesize", *paths, "--schema", schema, "--out", out, "--rows", "30")
    assert res.returncode == 1
    assert "constant column(s) 'const' (site0: holds other values" in res.stderr
    assert "Traceback" not in res.stderr


def test_schema_validate_checks_the_constant() -> None:
    tables = _sites(1)
    table = tables["site0"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        schema = Schema.detect(tables)
    schema.validate(table)
    with pytest.raises(SchemaError, match=r"site a: column 'const' has value\(s\) \[8\]"):
        schema.validate(table.assign(const=8), name="site a")
    with pytest.raises(SchemaError, match="'day' holds another value than the schema's"):
        schema.validate(table.assign(day=pd.Timestamp("2021-03-05")), name="site a")
    with pytest.raises(SchemaError, match=r"'empty' holds \d+ value\(s\), but the schema says"):
        schema.validate(table.assign(empty=1.0), name="site a")
    with pytest.raises(SchemaError, match=r"'unit' has 1 missing value\(s\), but the schema"):
        schema.validate(table.assign(unit=table["unit"].mask(table.index == 0)), name="a")


def test_constants_keep_every_input_dtype(tmp_path: Path) -> None:
    """A categorical (its unused categories too), Decimal objects, a nullable integer,
    a time zone, a whole number past 2**53, a column of None and one of NaT: each
    written as the input's value in the input's dtype, also through a Parquet file."""
    import decimal

    rng = np.random.default_rng(1)

    def site(n: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "x": rng.normal(size=n).round(2),
                "cat": pd.Categorical(["a"] * n, categories=["a", "b"]),
                "dec": [decimal.Decimal("12.30")] * n,
                "none": pd.Series([None] * n, dtype=object),
                "nat": pd.Series(pd.NaT, index=range(n), dtype="datetime64[ns, UTC]"),
                "tz": pd.Series(pd.Timestamp("2021-01-01 10:00", tz="Europe/Paris"), range(n)),
                "i64": pd.array([5] * n, dtype="Int64"),
                "big": np.full(n, 2**60 + 1, dtype=np.int64),
            }
        )

    tables = {"a": site(40), "b": site(50)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        synth = _fit(tables)
    assert synth.schema_.constants == list(tables["a"].columns[1:])
    out = synth.sample(25, seed=1)
    pd.testing.assert_series_equal(out.dtypes, tables["a"].dtypes)
    assert list(out["cat"].cat.categories) == ["a", "b"] and (out["cat"] == "a").all()
    assert all(repr(v) == "Decimal('12.30')" for v in out["dec"])
    assert out["none"].isna().all() and out["nat"].isna().all()
    assert (out["tz"] == tables["a"]["tz"].iloc[0]).all() and (out["i64"] == 5).all()
    assert (out["big"] == 2**60 + 1).all()
    path = synth.sample_to_file(tmp_path / "o.parquet", 25, seed=1, chunk_rows=7)
    back = pd.read_parquet(path)
    for c in ("cat", "nat", "tz", "i64", "big"):
        pd.testing.assert_series_equal(back[c], out[c], check_exact=True)


def test_a_table_of_only_constants_and_identifiers_is_written(tmp_path: Path) -> None:
    """No column left for the chain (every one a constant or declared an identifier):
    the fit stopped with an IndexError (the first chain column of an empty chain) and the
    draw with "run setup() and configure() first"; the table is the constants and fresh
    surrogates, through the Python API and the command line."""
    tables = {n: t[["const", "unit", "empty", "x"]] for n, t in _sites(2).items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        synth = _fit(tables, kinds={"x": "id"})
    out = synth.sample(5, seed=1)
    assert list(out.columns) == ["const", "unit", "empty", "x"]
    assert (out["const"] == 7).all() and (out["unit"] == "mg").all()
    assert out["empty"].isna().all()
    assert out["x"].nunique() == 5  # surrogates, none of the real values
    assert not set(out["x"].astype(str)) & set(tables["site0"]["x"].astype(str))
    paths = []
    for name, table in tables.items():
        paths.append(tmp_path / f"{name}.csv")
        table.to_csv(paths[-1], index=False)
    res = run("synthesize", *paths, "--kind", "x=id", "--rows", "4", "--out", tmp_path / "o.csv")
    assert res.returncode == 0, res.stderr
    written = pd.read_csv(tmp_path / "o.csv")
    assert len(written) == 4 and (written["const"] == 7).all() and written["empty"].isna().all()
