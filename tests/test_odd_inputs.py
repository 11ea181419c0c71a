"""Tables fits was not designed for, as a new user hands them to the command line:
a row index pandas saved with an empty header, decimal commas in tab- and
'|'-separated files, a Parquet file whose columns pandas keeps in its index. In
process, on small tables written under ``tmp_path``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fits.cli.main import app
from fits.core.schema import DataNote
from fits.io import DataFileError, _sniff, align_codes, iter_table, read_columns, read_table


def _fits(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def _flat(text: str) -> str:
    return " ".join(text.split())


def _indexed_sites(tmp_path: Path) -> list[Path]:
    """Two sites saved by ``DataFrame.to_csv`` with its default ``index=True``: a first
    column of an empty header holding the row numbers."""
    rng = np.random.default_rng(0)
    paths = []
    for k in range(2):
        frame = pd.DataFrame(
            {"age": rng.integers(18, 90, 60), "sex": rng.choice(["F", "M"], 60)},
            index=np.arange(60) + 60 * k,
        )
        paths.append(tmp_path / f"site{k}.csv")
        frame.to_csv(paths[-1])
    return paths


def test_the_identifier_advice_for_an_empty_header_works(tmp_path) -> None:
    """The warning about a saved row index (a column of an empty name) advised
    ``--kind =id``, which --kind refused as malformed (exit 2): now it declares that
    column an identifier; a table with no such column refuses it as an unknown one."""
    a, b = _indexed_sites(tmp_path)
    out = tmp_path / "s.csv"
    res = _fits("synthesize", a, b, "--rows", 5, "--out", out, "-q")
    assert res.exit_code == 0, res.output
    assert "--kind =id" in _flat(res.output), res.output
    out.unlink()
    res = _fits("synthesize", a, b, "--rows", 5, "--out", out, "-q", "--kind", "=id")
    assert res.exit_code == 0, res.output
    synthetic = pd.read_csv(out, keep_default_na=False)
    assert list(synthetic.columns) == ["Unnamed: 0", "age", "sex"]  # pandas' name for ''
    assert out.read_text().splitlines()[0] == ",age,sex"
    assert synthetic["Unnamed: 0"].str.startswith("synthetic-").all()
    plain = tmp_path / "plain.csv"
    pd.read_csv(a, index_col=0).to_csv(plain, index=False)
    other = tmp_path / "plain2.csv"
    pd.read_csv(b, index_col=0).to_csv(other, index=False)
    res = _fits(
        "synthesize", plain, other, "--rows", 5, "--out", tmp_path / "t.csv", "--kind", "=id"
    )
    assert res.exit_code == 2, res.output
    assert "--kind: no column ['']" in _flat(res.output), res.output
    assert not (tmp_path / "t.csv").exists()


def _comma_sites(tmp_path: Path, sep: str) -> list[Path]:
    """Two sites written as a spreadsheet in a decimal-comma locale writes them."""
    rng = np.random.default_rng(1)
    paths = []
    for k in range(2):
        frame = pd.DataFrame(
            {
                "age": rng.integers(18, 90, 80),
                "income": rng.normal(1500, 300, 80).round(2),
                "score": rng.choice([1.5, 2.5, 3.0], 80),
                "c": rng.choice(["x", "y"], 80),
            }
        )
        paths.append(tmp_path / f"site{k}.csv")
        frame.to_csv(paths[-1], sep=sep, decimal=",", index=False)
    return paths


@pytest.mark.parametrize("sep", ["\t", "|"])
def test_decimal_commas_in_tab_and_pipe_files_are_numbers(tmp_path, sep) -> None:
    """A decimal comma was recognised only in ';'-separated files: in a tab- or
    '|'-separated one (a spreadsheet's tab export in a decimal-comma locale) a column of
    "1500,25" was text, refused as free text, and one of "2,5" and "3,0" became three
    categories. Now they are numbers, said in the separator note, and written back as
    numbers."""
    a, b = _comma_sites(tmp_path, sep)
    with pytest.warns(DataNote, match="as the decimal mark"):
        frame = read_table(a)
    assert frame["income"].dtype == np.float64 and frame["score"].dtype == np.float64
    assert frame["income"].tolist() == pd.read_csv(a, sep=sep, decimal=",")["income"].tolist()
    out = tmp_path / "s.csv"
    res = _fits("synthesize", a, b, "--rows", 20, "--out", out, "-q")
    assert res.exit_code == 0, res.output
    assert "',' as the decimal mark" in res.output, res.output
    synthetic = pd.read_csv(out)
    assert synthetic["income"].dtype == np.float64
    assert set(synthetic["score"]) <= {1.5, 2.5, 3.0}


@pytest.mark.parametrize("sep", ["\t", "|"])
def test_thousands_commas_in_tab_and_pipe_files_stay_thousands(tmp_path, sep) -> None:
    """In a tab- or '|'-separated file a comma may group thousands: "1,500" and
    "12,000" alone do not make the comma the decimal mark (they are 1500 and 12000),
    in the first lines or further on; "1,500" next to "2,5" does (a decimal comma)."""
    path = tmp_path / "t.csv"
    path.write_text(f"a{sep}b\n1,500{sep}x\n12,000{sep}y\n")
    assert _sniff(path)[1] == "."
    path.write_text(f"a{sep}b\n1,500{sep}x\n12,000{sep}y\n2,5{sep}z\n")
    assert _sniff(path)[1] == ","
    head = f"a{sep}b\n" + "".join(f"{i}{sep}x\n" for i in range(60))
    path.write_text(head + f"1,500{sep}y\n2.25{sep}z\n")
    assert _sniff(path)[1] == "."
    path.write_text(head + f"1,500{sep}y\n2,25{sep}z\n")
    assert _sniff(path)[1] == ","
    path.write_text(head + f"1,500{sep}y\n")
    assert _sniff(path)[1] == "."


def test_semicolon_files_keep_their_decimal_comma_rule(tmp_path) -> None:
    """With ';' any "1,500" is a decimal comma, as before (in the first lines or later)."""
    path = tmp_path / "t.csv"
    path.write_text("a;b\n1,500;x\n")
    assert _sniff(path)[1] == ","
    path.write_text("a;b\n" + "".join(f"{i};x\n" for i in range(60)) + "1,500;y\n")
    assert _sniff(path)[1] == ","


def _keyed(n: int = 40, start: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(start)
    return pd.DataFrame(
        {
            "pid": np.arange(n) + start,
            "ward": pd.Categorical(rng.choice(["a", "b", "c"], n)),
            "age": pd.array(rng.integers(18, 90, n), dtype="Int64"),
            "x": rng.normal(size=n).round(3),
        }
    )


#: Frames whose columns pandas' ``to_parquet`` keeps in the index: set_index's keys
#: (stored as fields, or as a range when they count 0, 1, 2, ...), a groupby's keys.
INDEXED = {
    "set_index": lambda d: d.set_index("pid"),
    "range": lambda d: d.assign(pid=np.arange(len(d))).set_index("pid"),
    "stepped range": lambda d: d.drop(columns="pid").set_index(
        pd.RangeIndex(5, 5 + 3 * len(d), 3, name="pid")
    ),
    "two keys": lambda d: d.set_index(["pid", "ward"]),
    "groupby": lambda d: d.groupby(["ward", "pid"], observed=True).agg(
        age=("age", "first"), x=("x", "mean")
    ),
}


@pytest.mark.parametrize("how", list(INDEXED))
def test_parquet_index_levels_are_read_as_columns(tmp_path, how) -> None:
    """pandas keeps set_index's or groupby's keys in a Parquet file's index, and read
    it back there, where fits does not look: the columns vanished from the table (a
    'ward' key, its synthetic column). Now the named levels are its first columns, in
    read_table, read_columns (its header) and iter_table (any chunk size) alike; an
    unnamed index (row labels) is still no column."""
    frame = INDEXED[how](_keyed())
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    expected = frame.reset_index()
    table = read_table(path)
    assert list(table.columns) == list(expected.columns)
    for col in expected.columns:
        assert table[col].tolist() == expected[col].tolist(), col
    assert read_columns(path) == [str(c) for c in expected.columns]
    for size in (1, 7, 40, 100):
        chunks = pd.concat(list(iter_table(path, size)), ignore_index=True)
        pd.testing.assert_frame_equal(chunks, table.reset_index(drop=True))
    unnamed = tmp_path / "u.parquet"
    _keyed().iloc[::2].to_parquet(unnamed)  # an index of 0, 2, 4, ...: row labels
    assert list(read_table(unnamed).columns) == ["pid", "ward", "age", "x"]
    assert read_columns(unnamed) == ["pid", "ward", "age", "x"]


def test_a_key_in_the_parquet_index_is_synthesized(tmp_path) -> None:
    """The synthetic table of sites saved with ``set_index(["pid", "ward"])`` lacked
    'pid' and 'ward'; now it holds them, 'ward' of the sites' categories."""
    paths = []
    for k in range(2):
        paths.append(tmp_path / f"site{k}.parquet")
        _keyed(60, 100 * k).set_index(["pid", "ward"]).to_parquet(paths[-1])
    out = tmp_path / "s.parquet"
    res = _fits("synthesize", *paths, "--rows", 20, "--out", out, "-q", "--kind", "pid=id")
    assert res.exit_code == 0, res.output
    synthetic = pd.read_parquet(out)
    assert list(synthetic.columns) == ["pid", "ward", "age", "x"]
    assert set(synthetic["ward"]) <= {"a", "b", "c"}


def test_the_known_tables_notes_are_note_lines(tmp_path) -> None:
    """A ``--known`` table read with another separator (or a byte-order mark and ';')
    gave its note as a raw Python warning, with fits' source line under it
    (``.../fits/known.py:87: DataNote: ...``); now it is a ``note:`` line, as the site
    tables' notes are."""
    rng = np.random.default_rng(2)
    sites = []
    for k in range(2):
        sites.append(tmp_path / f"site{k}.csv")
        pd.DataFrame(
            {
                "sex": rng.choice(["F", "M"], 60),
                "age": rng.integers(18, 90, 60),
                "x": rng.normal(size=60).round(2),
            }
        ).to_csv(sites[-1], index=False)
    known = tmp_path / "known.csv"
    known.write_bytes("\ufeffsex;age\nM;30\nF;45\n".encode())
    out = tmp_path / "s.csv"
    res = _fits("synthesize", *sites, "--known", known, "--out", out, "-q")
    assert res.exit_code == 0, res.output
    assert f"note: {known}: read with ';' as the separator (2 columns)" in res.output
    assert "DataNote" not in res.output and "known.py" not in res.output
    assert pd.read_csv(out)["sex"].tolist() == ["M", "F"]


def _ordered_site(levels: list[str], seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "x": rng.normal(size=60).round(2),
            "grade": pd.Categorical(rng.choice(levels, 60), categories=levels, ordered=True),
        }
    )


@pytest.mark.parametrize("first", [0, 1])
def test_ordered_categories_that_differ_but_agree_are_merged(first) -> None:
    """Two sites' ordered categoricals, one built from its own values (['lo', 'hi'])
    and one with a category more (['lo', 'mid', 'hi']), were refused: "site1 orders
    its categories differently from site0", which they do not. Now the order both
    agree with is the column's, and the synthetic column's dtype (not ['lo', 'hi',
    'mid'], the first site's then the new)."""
    from fits import FITSSynthesizer

    sites = {
        "site0": _ordered_site(["lo", "hi"], 0),
        "site1": _ordered_site(["lo", "mid", "hi"], 1),
    }
    if first:
        sites = dict(reversed(sites.items()))
    synth = FITSSynthesizer(seed=0).fit(sites)
    spec = synth.schema_["grade"]
    assert spec.kind == "ordinal" and list(spec.categories) == ["lo", "mid", "hi"]
    synthetic = synth.sample(30)
    dtype = synthetic["grade"].dtype
    assert dtype.ordered and list(dtype.categories) == ["lo", "mid", "hi"]


@pytest.mark.parametrize(
    ("orders", "message"),
    [
        (
            [["lo", "hi"], ["hi", "mid", "lo"]],
            "column 'grade': site1 orders its categories differently from site0 ('hi' < "
            "'mid' < 'lo' at site1, 'lo' < 'hi' at site0); give it the same categories "
            "in the same order at every site, e.g. df['grade'] = df['grade'].cat."
            "set_categories(['lo', 'hi', 'mid'], ordered=True)",
        ),
        (
            [["a", "c"], ["b", "c"]],
            "do not say whether 'a' or 'b' comes first; give every site all the categories",
        ),
        (
            [["a", "b"], ["b", "c"], ["c", "a"]],
            "no one order of its categories agrees with every site's ('a' < 'b' at site0; "
            "'b' < 'c' at site1; 'c' < 'a' at site2)",
        ),
    ],
)
def test_ordered_categories_that_disagree_are_refused_with_the_orders(orders, message) -> None:
    """Orders no one order agrees with, or that leave one open, are refused, the
    message showing each site's order and how to write one."""
    from fits.core.schema import Schema, SchemaError

    sites = {f"site{k}": _ordered_site(levels, k) for k, levels in enumerate(orders)}
    with pytest.raises(SchemaError) as info:
        Schema.detect(sites)
    assert message in str(info.value)


def _na_table(path: Path, n: int = 60, seed: int = 0) -> None:
    """A table whose fields pandas would read as missing: 'NA' (North America) and
    'None' as labels, an empty field, 'NA' in a column of numbers, of dates and of
    labels with digits."""
    rng = np.random.default_rng(seed)
    lines = ["x,region,alley,n,day,unit"]
    for k in range(n):
        region = ["EU", "NA", "AS", ""][k % 4] if k < 8 else rng.choice(["EU", "NA", "AS"])
        n_field = "NA" if k % 5 == 0 else str(rng.integers(0, 9))
        day = "NA" if k % 6 == 0 else f"2024-01-{1 + k % 28:02d}"
        unit = "NA" if k % 7 == 0 else rng.choice(["Type 1", "Type 2"])
        alley = rng.choice(["Grvl", "Pave", "None"])
        lines.append(f"{rng.normal():.2f},{region},{alley},{n_field},{day},{unit}")
    path.write_text("\n".join(lines) + "\n")


def test_na_texts_in_a_column_of_labels_are_values(tmp_path) -> None:
    """pandas reads 'NA', 'None', 'null', ... as missing values: a region 'NA' (North
    America) or an alley 'None' left the table's categories and came back as empty
    fields. In a column of labels (text without digits) they are now values, as
    written, with a note; in columns of numbers, dates or labels with digits they stay
    missing values. read_table and iter_table (any chunk size) agree."""
    path = tmp_path / "t.csv"
    _na_table(path)
    with pytest.warns(DataNote) as notes:
        table = read_table(path)
    said = " ".join(str(w.message) for w in notes)
    assert "column 'region': 'NA' (" in said and "column 'alley': 'None' (" in said
    assert "'n'" not in said and "'day'" not in said and "'unit'" not in said
    assert "NA" in set(table["region"]) and table["region"].isna().sum() == 2  # the empty fields
    assert "None" in set(table["alley"]) and not table["alley"].isna().any()
    assert table["n"].dtype == "Int64" and table["n"].isna().sum() == 12
    assert pd.api.types.is_datetime64_any_dtype(table["day"]) and table["day"].isna().sum() == 10
    assert table["unit"].isna().sum() == 9 and "NA" not in set(table["unit"].dropna())
    for size in (1, 7, 1000):
        with pytest.warns(DataNote):
            chunks = pd.concat(list(iter_table(path, size)), ignore_index=True)
        pd.testing.assert_frame_equal(chunks, table)


def test_na_labels_are_synthesized_as_written(tmp_path) -> None:
    """The synthetic table of sites whose region is 'NA' for North America draws 'NA'
    and writes it so, not as an empty field."""
    sites = []
    for k in range(2):
        sites.append(tmp_path / f"site{k}.csv")
        _na_table(sites[-1], 120, k)
    out = tmp_path / "s.csv"
    res = _fits("synthesize", *sites, "--rows", 200, "--out", out, "-q")
    assert res.exit_code == 0, res.output
    assert "column 'region': 'NA' (" in res.output
    synthetic = pd.read_csv(out, keep_default_na=False, dtype=str)
    assert "NA" in set(synthetic["region"])
    assert set(synthetic["region"]) <= {"EU", "NA", "AS", ""}
    assert set(synthetic["alley"]) <= {"Grvl", "Pave", "None"}


def test_infinite_values_are_refused_with_the_fix(tmp_path) -> None:
    """A column holding inf and -inf (as 'inf' in a CSV file) is refused; the error
    said only "remove them": it now counts them and says what to put instead."""
    rng = np.random.default_rng(3)
    sites = []
    for k in range(2):
        frame = pd.DataFrame({"x": rng.normal(size=40).round(2), "g": rng.choice(["a", "b"], 40)})
        if k:
            frame.loc[[3, 5, 8], "x"] = [np.inf, -np.inf, np.inf]
        sites.append(tmp_path / f"site{k}.csv")
        frame.to_csv(sites[-1], index=False)
    out = tmp_path / "s.csv"
    res = _fits("synthesize", *sites, "--rows", 5, "--out", out, "-q")
    assert res.exit_code == 1, res.output
    assert (
        "error: site1: column 'x' has infinite values (2 inf and 1 -inf) in row(s) 4, 6, 9 "
        "(1: the first after the header), which fits cannot model (a number past float64's "
        "range, such as 1e400, reads as inf too); replace them with finite numbers, or with "
        "missing values" in _flat(res.output)
    )
    assert not out.exists()


def _zip_sites(tmp_path: Path) -> list[Path]:
    """A site of ZIP codes with leading zeros (read as text) and one whose codes
    happen to have none (read as whole numbers)."""
    rng = np.random.default_rng(4)
    paths = []
    for k, zips in enumerate((["02139", "00501", "10001"], ["10001", "94105"])):
        paths.append(tmp_path / f"site{k}.csv")
        pd.DataFrame({"x": rng.normal(size=60).round(2), "zip": rng.choice(zips, 60)}).to_csv(
            paths[-1], index=False
        )
    return paths


@pytest.mark.parametrize("first", [0, 1])
def test_zip_codes_with_leading_zeros_at_one_site_only(tmp_path, first) -> None:
    """ZIP codes read as text at the site that writes some with a leading zero and as
    numbers at the site whose codes have none were refused ("numeric at some clients
    and text at others ... fix or blank the other values"), which no edit of a CSV
    file fixes. Now they are codes at both sites, with a note, and the synthetic
    table writes them as written ("02139", "10001"); a --known table of such codes
    written without leading zeros is read as codes too."""
    sites = _zip_sites(tmp_path)
    if first:
        sites.reverse()
    out = tmp_path / "s.csv"
    res = _fits("synthesize", *sites, "--rows", 60, "--out", out, "-q")
    assert res.exit_code == 0, res.output
    assert "note: column 'zip' holds codes with leading zeros at site0 (e.g. " in res.output
    assert "so its whole numbers at site1 are read as codes too" in res.output
    synthetic = pd.read_csv(out, dtype=str)
    assert set(synthetic["zip"]) <= {"02139", "00501", "10001", "94105"}
    assert {"10001", "94105"} & set(synthetic["zip"])
    known = tmp_path / "known.csv"
    known.write_text("zip\n10001\n94105\n")
    completed = tmp_path / "c.csv"
    res = _fits("synthesize", *sites, "--known", known, "--out", completed, "-q")
    assert res.exit_code == 0, res.output
    assert pd.read_csv(completed, dtype=str)["zip"].tolist() == ["10001", "94105"]


def test_align_codes_leaves_other_columns_alone() -> None:
    """Only a column of digits with leading zeros at some sites and whole numbers of no
    sign at the others is read as codes; negative numbers or text with other
    characters leave the tables as they are."""
    codes = pd.DataFrame({"z": ["02139", "10001"], "t": ["0a", "b"], "n": ["01", "02"]})
    numbers = pd.DataFrame({"z": [10001, 94105], "t": [1, 2], "n": [-1, 3]})
    with pytest.warns(DataNote, match="column 'z' holds codes"):
        out = align_codes({"a": codes, "b": numbers})
    assert out["b"]["z"].tolist() == ["10001", "94105"]
    assert out["b"]["t"].tolist() == [1, 2] and out["b"]["n"].tolist() == [-1, 3]
    assert out["a"] is codes


@pytest.mark.parametrize("hint", ["sep=;", '"sep=;"', "SEP=;;;"])
def test_a_spreadsheets_separator_hint_line_is_named(tmp_path, hint) -> None:
    """A CSV file that Excel wrote with its first line 'sep=;' was refused as "line 3
    has 2 fields, the header 1; fix that row", pointing at a row that was right. Now
    the error names the hint line and says to delete it."""
    sites = []
    for k in range(2):
        sites.append(tmp_path / f"site{k}.csv")
        sites[-1].write_text(f"{hint}\nage;income\n3{k};1,5\n40;2,5\n50;3,5\n")
    with pytest.raises(DataFileError, match="is a spreadsheet's separator hint"):
        read_table(sites[0])
    res = _fits("synthesize", *sites, "--rows", 5, "--out", tmp_path / "s.csv")
    assert res.exit_code == 1, res.output
    assert (
        f"error: {sites[0]}: its first line {hint!r} is a spreadsheet's separator hint, not "
        "the header; delete that line (fits finds the separator itself)" in _flat(res.output)
    )


def test_an_identifier_repeated_over_rows_draws_a_warning(tmp_path) -> None:
    """A patient id over visits (120 ids, 3 rows each) is no near-unique column, so it
    was modelled as a category and its real values copied into the synthetic table
    without a word. Now it draws a warning with the fix; declared an identifier, its
    values are surrogates; declared nominal, it is kept without a warning."""
    sites = []
    rng = np.random.default_rng(5)
    for k in range(2):
        ids = [f"P{1000 * k + j:05d}" for j in range(60)]
        sites.append(tmp_path / f"site{k}.csv")
        pd.DataFrame({"patient": np.repeat(ids, 3), "x": rng.normal(size=180).round(2)}).to_csv(
            sites[-1], index=False
        )
    out = tmp_path / "s.csv"
    res = _fits("synthesize", *sites, "--rows", 5, "--out", out, "-q")
    assert res.exit_code == 0, res.output
    flat = _flat(res.output)
    assert "warning: column 'patient' has 120 distinct values in 360 rows (each in 3.0 rows" in flat
    assert "--drop patient" in flat and "--kind patient=id" in flat
    out.unlink()
    res = _fits("synthesize", *sites, "--rows", 5, "--out", out, "-q", "--kind", "patient=id")
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    assert pd.read_csv(out)["patient"].str.startswith("synthetic-").all()
    out.unlink()
    res = _fits("synthesize", *sites, "--rows", 5, "--out", out, "-q", "--kind", "patient=nominal")
    assert res.exit_code == 0 and "warning" not in res.output, res.output


@pytest.mark.parametrize("dtype", ["uint64", "int64", "Int64"])
def test_whole_numbers_past_2_53_in_a_narrow_range_are_refused_not_collapsed(dtype) -> None:
    """2**63 + 0 ... 2**63 + 999 (or -2**62 - ...) are one float64: every synthetic value
    came out as the smallest, without a word. Now refused, naming the range, the fix
    and the base; declared an identifier it is synthesized; less the base it is modelled
    with its spread; a range past 2**53 wide (random 64-bit numbers) is modelled."""
    from fits import FITSSynthesizer
    from fits.core.schema import SchemaError

    rng = np.random.default_rng(0)
    base = 2**63 if dtype == "uint64" else -(2**62)
    offsets = rng.integers(0, 1000, 120)
    big = pd.Series([base + int(k) for k in offsets], dtype=dtype)
    table = pd.DataFrame({"n": big, "x": rng.normal(size=120)})
    sites = {"a": table.iloc[:60], "b": table.iloc[60:]}
    with pytest.raises(SchemaError) as err:
        FITSSynthesizer(seed=0).fit(sites)
    lo = base + int(offsets.min())
    said = str(err.value)
    assert f"column 'n' holds whole numbers from {lo} to " in said
    shift = f"- {lo}" if lo >= 0 else f"+ {-lo}"
    spacing = 2048 if dtype == "uint64" else 1024  # float64's, near 2**63 and 2**62
    assert f"df['n'] {shift}," in said and "--kind n=id" in said
    assert f"every {spacing:,}th whole number" in said
    ids = FITSSynthesizer(seed=0, kinds={"n": "id"}).fit(sites).sample(20)
    assert ids["n"].str.startswith("synthetic-").all()
    less = {k: t.assign(n=(t["n"] - lo).astype("int64")) for k, t in sites.items()}
    drawn = FITSSynthesizer(seed=0).fit(less).sample(300)["n"]
    assert drawn.nunique() > 100 and drawn.min() >= 0 and drawn.max() <= 999
    wide = pd.Series(rng.integers(0, 2**63, 120, dtype=np.int64), dtype="int64")
    wide_sites = {
        "a": table.iloc[:60].assign(n=wide[:60]),
        "b": table.iloc[60:].assign(n=wide[60:].to_numpy()),
    }
    assert FITSSynthesizer(seed=0).fit(wide_sites).sample(50)["n"].nunique() > 25
