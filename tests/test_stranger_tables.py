"""Tables nobody prepared (issue 11): what fits infers, what it refuses, what it keeps.

Lattice columns become ordinal; text that is really numbers or dates is read as such,
with a note naming the markers; duplicate headers, other separators and a site given
twice are errors or read right; identifier and free-text columns are refused until
dropped or declared; the output keeps the input's pandas dtypes.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import (
    ColumnSpec,
    DataNote,
    IdentifierColumnError,
    describe_table,
    merge_descriptions,
    parse_text_columns,
)
from fits.io import read_table

from conftest import fits_in_process as run


def _merge(frames, **kw):
    names = [f"site {k + 1}" for k in range(len(frames))]
    descs = [describe_table(f, client=n) for f, n in zip(frames, names, strict=True)]
    return merge_descriptions(descs, names, **kw)


# ---------------------------------------------------------------------------- lattices


def _lattice_table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    band = rng.choice(12, n, p=np.r_[np.full(6, 0.11), np.full(6, 0.34 / 6)])
    age = 17.5 + 5.0 * band  # 5-year bands stored as floats: 17.5, 22.5, ...
    rate = np.log([0.01, 0.02, 0.05, 0.1, 0.2])[rng.integers(0, 5, n)]  # a log rate, 5 levels
    score = np.clip(np.round(rng.normal(6, 2, n)), 0, 10).astype(float)  # 0-10 as floats
    x = 0.1 * age + rate + rng.normal(size=n)
    return pd.DataFrame({"age": age, "rate": rate, "score": score, "x": x})


def test_lattice_columns_are_ordinal_and_keep_their_support():
    t = _lattice_table(3000, 0)
    sites = [t.iloc[:1500], t.iloc[1500:2400], t.iloc[2400:]]
    synth = FITSSynthesizer(seed=0).fit(sites)
    kinds = synth.schema_.kinds()
    assert kinds == {"age": "ordinal", "rate": "ordinal", "score": "ordinal", "x": "continuous"}
    out = synth.sample(3000)
    for col in ("age", "rate", "score"):
        real = t[col].value_counts(normalize=True)
        syn = out[col].value_counts(normalize=True)
        assert set(syn.index) <= set(real.index), col  # every value is a real value
        tv = 0.5 * (real - syn.reindex(real.index, fill_value=0.0)).abs().sum()
        assert tv < 0.05, (col, tv)
        assert out[col].dtype == np.float64
    # the override stays: declared continuous, the column draws values between the bands
    again = FITSSynthesizer(seed=0, kinds={"age": "continuous"}).fit(sites)
    assert again.schema_["age"].kind == "continuous"
    assert not set(again.sample(500)["age"]) <= set(t["age"])


def test_a_continuous_column_sampled_at_few_rows_stays_continuous():
    rng = np.random.default_rng(1)
    few = pd.DataFrame({"v": rng.normal(size=15), "w": np.repeat([0.5, 1.5, 2.5], 5)})
    schema = _merge([few])
    # 15 distinct values in 15 rows: no ties, not a lattice; 3 values 5 times each: one
    assert schema["v"].kind == "continuous" and schema["w"].kind == "ordinal"
    # the rule counts rows over all sites: 8 + 8 rows of the same 8 values repeat
    v = rng.normal(size=8).round(3)
    assert _merge([pd.DataFrame({"v": v}), pd.DataFrame({"v": v[::-1]})])["v"].kind == "ordinal"
    assert _merge([pd.DataFrame({"v": v})])["v"].kind == "continuous"


# ------------------------------------------------------------- text: numbers and dates


def test_text_numbers_and_dates_are_parsed_with_markers():
    n = 400
    rng = np.random.default_rng(2)
    days = pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D")
    frame = pd.DataFrame(
        {
            "num": rng.normal(50, 10, n).round(2).astype(str).astype(object),
            "us": days.strftime("%m/%d/%Y").astype(object),
            "eu": days.strftime("%d.%m.%Y"),
            "name": days.strftime("%b %d %Y"),
            "zip": rng.choice(["02134", "00501", "10001", "94110"], n),
        }
    )
    frame.loc[:9, "num"] = "?"
    frame.loc[10:12, "num"] = "unknown"
    frame.loc[:4, "us"] = "n/a"
    parsed, notes = parse_text_columns(frame)
    assert parsed["num"].dtype == np.float64 and parsed["num"].isna().sum() == 13
    assert notes["num"]["markers"] == {"?": 10, "unknown": 3}
    assert (parsed["us"].dropna() == pd.Series(days)[5:]).all()
    assert notes["us"]["format"] == "%m/%d/%Y" and notes["us"]["markers"] == {"n/a": 5}
    assert (parsed["eu"] == pd.Series(days)).all() and notes["eu"]["format"] == "%d.%m.%Y"
    assert (parsed["name"] == pd.Series(days)).all()
    assert "zip" not in notes and parsed["zip"].tolist() == frame["zip"].tolist()
    # scores such as "2-1-0" are no dates of the year 0
    assert parse_text_columns(pd.DataFrame({"s": ["1-2-3", "2-1-0", "3-3-1"] * 10}))[1] == {}
    # 10% text: not markers; the column stays text
    frame.loc[:40, "num"] = "?"
    assert "num" not in parse_text_columns(frame)[1]


def test_exactly_the_parse_share_of_numbers_or_dates_is_parsed():
    """'At least 95%' holds at exactly 95%: 76 numbers and 4 '?' in 80 rows are numbers
    (a sum of per-value fractions came to 0.9499999999999998 and left the column text,
    which was then refused as an identifier), and so are 76 dates in 80."""
    values = [f"{v:.1f}" for v in np.linspace(1, 9, 76)] + ["?"] * 4
    parsed, notes = parse_text_columns(pd.DataFrame({"score": values}))
    assert notes["score"]["markers"] == {"?": 4} and parsed["score"].isna().sum() == 4
    days = pd.date_range("2021-01-01", periods=76, freq="D").strftime("%d/%m/%Y").tolist()
    parsed, notes = parse_text_columns(pd.DataFrame({"when": days + ["unknown"] * 4}))
    assert notes["when"]["as"] == "date" and parsed["when"].isna().sum() == 4
    # below the share: text
    assert parse_text_columns(pd.DataFrame({"score": values[:75] + ["?"] * 5}))[1] == {}


def test_day_first_and_month_first():
    # slashes: month-first unless a first field is above 12; dots: day-first
    amb = pd.DataFrame({"d": ["03/04/2021", "05/06/2021", "01/02/2021"] * 10})
    _, notes = parse_text_columns(amb)
    assert notes["d"]["format"].startswith("%m/%d/%Y (ambiguous")
    dayfirst = pd.DataFrame({"d": ["03/04/2021", "25/06/2021", "01/02/2021"] * 10})
    parsed, notes = parse_text_columns(dayfirst)
    assert notes["d"]["format"] == "%d/%m/%Y"
    assert parsed["d"][0] == pd.Timestamp("2021-04-03")


def test_cli_reads_markers_and_dates_and_writes_numbers_and_dates(tmp_path):
    rng = np.random.default_rng(3)
    n = 600
    days = pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D")
    age = rng.integers(18, 80, n).astype(object)
    age[rng.random(n) < 0.03] = "?"
    age[:2] = "unknown"
    t = pd.DataFrame(
        {
            "age": age,
            "visit": days.strftime("%m/%d/%Y"),
            "zip": rng.choice(["02134", "00501", "10001"], n),
            "y": rng.normal(size=n),
        }
    )
    files = [tmp_path / "a.csv", tmp_path / "b.csv"]
    t.iloc[:300].to_csv(files[0], index=False)
    t.iloc[300:].to_csv(files[1], index=False)
    schema = tmp_path / "schema.json"
    res = run("schema", *map(str, files), "--out", str(schema))
    assert res.returncode == 0, res.stderr
    markers = int((t["age"] == "?").sum())
    assert f"note: column 'age' is text read as numbers (at a, b); {markers + 2} of its" in (
        res.stderr
    )
    assert f"'?' ({markers}), 'unknown' (2)" in res.stderr
    assert "note: column 'visit' is text read as dates (%m/%d/%Y)" in res.stderr
    cols = {c["name"]: c for c in json.loads(schema.read_text())["columns"]}
    assert cols["age"]["kind"] == "continuous" and cols["age"]["missing"]
    assert cols["age"]["markers"] == {"?": markers, "unknown": 2}
    assert cols["visit"]["dtype"] == "datetime" and cols["zip"]["kind"] == "nominal"
    out = tmp_path / "out.csv"
    res = run("synthesize", *map(str, files), "--rows", "400", "--out", str(out))
    assert res.returncode == 0, res.stderr
    back = pd.read_csv(out, dtype={"zip": str})
    assert str(back["age"].dtype) in ("int64", "float64")  # numbers, blanks where missing
    assert back["age"].notna().all() or back["age"].isna().mean() < 0.15
    # written as the sites wrote them: month/day/year
    assert back["visit"].str.fullmatch(r"\d\d/\d\d/\d{4}").all()
    dates = pd.to_datetime(back["visit"], format="%m/%d/%Y")
    assert dates.min() >= days.min() and dates.max() <= days.max()
    assert set(back["zip"]) <= {"02134", "00501", "10001"}


def _dated(n: int, fmt: str, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    when = pd.Timestamp("1995-01-01") + pd.to_timedelta(rng.integers(0, 9000, n), unit="D")
    return pd.DataFrame({"d": when.strftime(fmt), "x": rng.normal(size=n)})


def test_text_dates_are_written_back_in_the_sites_format(tmp_path):
    """A CSV output writes a text date column in the one format every site wrote it in
    (here two-digit years, day first); missing dates stay empty; a Parquet output keeps
    datetimes; sites that wrote different formats get ISO 8601, and the note says which."""
    a, b = _dated(200, "%d/%m/%y", 0), _dated(200, "%d/%m/%y", 1)
    a.loc[:9, "d"] = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        synth = FITSSynthesizer(seed=0).fit({"a": a, "b": b})
    notes = " ".join(str(w.message) for w in caught)
    assert "a CSV output writes its synthetic dates in that format" in notes
    assert synth.schema_.date_formats() == {"d": "%d/%m/%y"}
    csv = synth.sample_to_file(tmp_path / "s.csv", 300, seed=1)
    parquet = synth.sample_to_file(tmp_path / "s.parquet", 300, seed=1)
    text = pd.read_csv(csv, dtype={"d": str}, keep_default_na=False)["d"]
    typed = pd.read_parquet(parquet)["d"]
    assert pd.api.types.is_datetime64_any_dtype(typed.dtype)
    # the same draw: the text is the Parquet file's dates in the input's format
    expected = typed.dt.strftime("%d/%m/%y").fillna("")
    assert (text == expected).all() and (text == "").any()
    assert text[text != ""].str.fullmatch(r"\d\d/\d\d/\d\d").all()
    # read back with the input's format, the years are the synthetic ones (no century lost)
    back = pd.to_datetime(text[text != ""], format="%d/%m/%y")
    assert (back.dt.year.to_numpy() == typed.dropna().dt.year.to_numpy()).all()

    c = _dated(200, "%Y-%m-%d", 2)  # ISO at one site: no one format, ISO 8601 written
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mixed = FITSSynthesizer(seed=0).fit({"a": a, "c": c})
    assert "writes its synthetic dates as ISO 8601" in " ".join(str(w.message) for w in caught)
    assert mixed.schema_.date_formats() == {}
    out = pd.read_csv(mixed.sample_to_file(tmp_path / "m.csv", 50), dtype={"d": str})
    assert out["d"].dropna().str.fullmatch(r"\d{4}-\d\d-\d\d").all()


def test_one_format_read_ambiguously_at_one_site_is_still_one_format():
    spec = ColumnSpec("d", "continuous", dtype="datetime")
    spec.parsed = "%m/%d/%Y, %m/%d/%Y (ambiguous: no day above 12)"
    assert spec.text_date_format == "%m/%d/%Y"
    spec.parsed = "%d/%m/%Y, %m/%d/%Y (ambiguous: no day above 12)"
    assert spec.text_date_format is None
    spec.parsed = "%b %d, %Y"  # a format holding ', '
    assert spec.text_date_format == "%b %d, %Y"
    spec.parsed = "number written with '%'"
    assert spec.text_date_format is None


# ---------------------------------------------------------------------- file problems


def test_duplicate_headers_are_refused(tmp_path):
    bad = tmp_path / "dup.csv"
    bad.write_text("age,sex,age\n30,f,31\n40,m,41\n")
    res = run(
        "schema", str(bad), str(bad.with_name("other.csv")), "--out", str(tmp_path / "s.json")
    )
    assert res.returncode in (1, 2)
    good = tmp_path / "good.csv"
    good.write_text("age,sex\n30,f\n40,m\n")
    res = run("schema", str(bad), str(good), "--out", str(tmp_path / "s.json"))
    assert res.returncode == 1, res.stderr
    assert str(bad) in res.stderr and "'age' (2 times)" in res.stderr
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_other_separators_are_read_right(tmp_path, sep):
    rng = np.random.default_rng(4)
    t = pd.DataFrame(
        {"g": rng.choice(["a", "b"], 200), "v": rng.normal(size=200).round(3), "k": range(200)}
    )
    path = tmp_path / "t.csv"
    if sep == ";":  # European: decimal commas too
        t.to_csv(path, sep=sep, decimal=",", index=False)
    else:
        t.to_csv(path, sep=sep, index=False)
    with pytest.warns(DataNote, match="separator"):
        back = read_table(path)
    pd.testing.assert_frame_equal(back, t, check_dtype=False)
    assert back["v"].dtype == np.float64
    res = run("schema", str(path), "--simulate-clients", "2", "--out", str(tmp_path / "s.json"))
    assert res.returncode == 0, res.stderr
    assert "as the separator" in res.stderr
    assert json.loads((tmp_path / "s.json").read_text())["order"] == ["g", "v", "k"]


def test_a_site_file_given_twice_is_refused(tmp_path):
    t = pd.DataFrame({"a": np.arange(50) % 7, "b": np.linspace(0, 1, 50)})
    one = tmp_path / "one.csv"
    t.to_csv(one, index=False)
    copy = tmp_path / "copy.csv"
    copy.write_bytes(one.read_bytes())
    out = tmp_path / "o.csv"
    for second in (one, tmp_path / "x" / ".." / "one.csv", copy):
        (tmp_path / "x").mkdir(exist_ok=True)
        res = run("synthesize", str(one), str(second), "--rows", "5", "--out", str(out))
        assert res.returncode == 2, res.stderr
        assert "are the same file" in res.stderr and str(second) in res.stderr
        assert not out.exists()


# -------------------------------------------------------------- identifiers, free text


def test_identifier_and_free_text_are_refused_by_the_api():
    rng = np.random.default_rng(5)
    n = 400
    words = np.array(["pain", "in", "the", "left", "knee", "after", "a", "fall", "no", "fever"])
    notes = [" ".join(rng.choice(words, 8)) for _ in range(n)]
    t = pd.DataFrame({"pid": [f"P{i:05d}" for i in range(n)], "v": rng.normal(size=n)})
    with pytest.raises(IdentifierColumnError, match="'pid' looks like an identifier") as err:
        FITSSynthesizer().fit([t.iloc[:200], t.iloc[200:]])
    assert err.value.columns == ["pid"]
    t["note"] = notes
    with pytest.raises(IdentifierColumnError, match="'pid'.*'note'"):
        FITSSynthesizer().fit([t.iloc[:200], t.iloc[200:]])
    # a long text repeated enough to escape the near-unique rule is still free text
    t["note"] = rng.choice(notes[:40], n)
    with pytest.raises(IdentifierColumnError, match="'note'.*characters long"):
        FITSSynthesizer(kinds={"pid": "id"}).fit([t.iloc[:200], t.iloc[200:]])
    synth = FITSSynthesizer(seed=0, kinds={"pid": "id", "note": "nominal"})
    out = synth.fit([t.iloc[:200], t.iloc[200:]]).sample(300)
    assert synth.schema_["pid"].kind == "id" and "pid" not in synth.coordinator.schema.order
    assert out["pid"].is_unique and not set(out["pid"]) & set(t["pid"])
    assert list(out.columns) == ["pid", "v", "note"]


def test_a_real_id_that_looks_like_a_surrogate_is_refused():
    t = pd.DataFrame({"pid": [f"synthetic-{i}" for i in range(40)], "v": np.arange(40.0)})
    with pytest.raises(Exception, match="start with 'synthetic-'"):
        FITSSynthesizer(kinds={"pid": "id"}).fit([t.iloc[:20], t.iloc[20:]])


def test_unique_integers_draw_a_warning():
    t = pd.DataFrame({"key": np.arange(1000, 1200), "v": np.random.default_rng(6).normal(size=200)})
    with pytest.warns(UserWarning, match="'key' holds a different whole number in every row"):
        FITSSynthesizer().fit([t.iloc[:100], t.iloc[100:]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FITSSynthesizer(kinds={"key": "continuous"}).fit([t.iloc[:100], t.iloc[100:]])


# ---------------------------------------------------------------------------- types


def test_pandas_types_come_back():
    rng = np.random.default_rng(7)
    n = 600
    size = pd.CategoricalDtype(["XS", "S", "M", "L", "XL"], ordered=True)  # XS, XL unused
    colour = pd.CategoricalDtype(["red", "green", "blue", "violet"])  # violet unused
    flag = pd.array(rng.random(n) < 0.4, dtype="boolean")
    flag[rng.random(n) < 0.1] = pd.NA
    count = pd.array(rng.integers(0, 300, n), dtype="Int64")
    count[rng.random(n) < 0.1] = pd.NA
    t = pd.DataFrame(
        {
            "size": pd.Categorical(rng.choice(["S", "M", "L"], n), dtype=size),
            "colour": pd.Categorical(rng.choice(["red", "green", "blue"], n), dtype=colour),
            "flag": flag,
            "count": count,
            "small": rng.integers(0, 100, n).astype("int32"),
            "when": pd.Timestamp("2024-03-01 08:00", tz="UTC+02:00")
            + pd.to_timedelta(rng.integers(0, 10**6, n), unit="s"),
        }
    )
    out = FITSSynthesizer(seed=0).fit([t.iloc[:300], t.iloc[300:]]).sample(500)
    for col in t.columns:
        assert out[col].dtype == t[col].dtype, (col, out[col].dtype, t[col].dtype)
    assert out["flag"].isna().any() and out["count"].isna().any()
    assert str(out["when"].dt.tz) == "UTC+02:00"


def test_csv_integers_with_blanks_and_offsets_come_back(tmp_path):
    rng = np.random.default_rng(8)
    n = 400
    count = rng.integers(0, 100, n).astype(float)
    count[rng.random(n) < 0.15] = np.nan
    when = pd.Timestamp("2024-03-01 08:00", tz="UTC+02:00") + pd.to_timedelta(
        rng.integers(0, 10**6, n), unit="s"
    )
    t = pd.DataFrame({"count": count, "when": when, "v": rng.normal(size=n)})
    src = tmp_path / "t.csv"
    # whole numbers written without decimals, blanks where missing
    text = pd.DataFrame(
        {
            "count": ["" if np.isnan(c) else str(int(c)) for c in count],
            "when": when.astype(str),
            "v": t["v"],
        }
    )
    text.to_csv(src, index=False)
    assert "+02:00" in src.read_text().splitlines()[1]
    read = read_table(src)
    assert str(read["count"].dtype) == "Int64" and str(read["when"].dt.tz) == "UTC+02:00"
    out = tmp_path / "o.csv"
    res = run("synthesize", str(src), "--simulate-clients", "2", "--rows", "300", "--out", str(out))
    assert res.returncode == 0, res.stderr
    lines = out.read_text().splitlines()
    counts = [ln.split(",")[0] for ln in lines[1:]]
    assert all(c == "" or c.isdigit() for c in counts) and "" in counts  # no 48.249434
    assert all(ln.split(",")[1].endswith("+02:00") for ln in lines[1:])


def test_the_report_leaves_identifiers_out():
    from fits.report import evaluate

    rng = np.random.default_rng(9)
    n = 300
    real = pd.DataFrame(
        {
            "uid": [f"u{i}" for i in range(n)],
            "g": rng.choice(["a", "b"], n),
            "v": rng.normal(size=n),
        }
    )
    synthetic = real.assign(uid=[f"synthetic-{i:06d}" for i in range(1, n + 1)])
    report = evaluate(real, synthetic, seed=0, privacy=False)
    assert any("['uid'] look like identifiers" in note for note in report.data["notes"])
    assert "uid" not in report.column_scores["column"].tolist()


def test_federated_analysis_leaves_identifiers_out_and_reads_markers():
    from fits.analysis.design import DesignSite, DesignSpec, schema_round
    from fits.core.schema import SchemaError
    from fits.federation.transport import InProcessTransport

    rng = np.random.default_rng(10)
    n = 200
    x = rng.normal(size=n).round(3).astype(str).astype(object)
    x[:3] = "?"
    t = pd.DataFrame({"pid": [f"P{i}" for i in range(n)], "x": x, "y": rng.normal(size=n)})
    sites = [DesignSite(t.iloc[:100], "a"), DesignSite(t.iloc[100:], "b")]
    with pytest.warns(DataNote, match="'x' is text read as numbers.*'\\?' \\(3\\)"):
        schema, _ = schema_round(InProcessTransport(sites, n_jobs=1))
    assert schema["pid"].kind == "id" and schema["x"].kind == "continuous"
    spec = DesignSpec.from_schema(schema, "y")
    assert spec.numeric == ("x",) and not spec.nominal
    with pytest.raises(SchemaError, match="'pid'.*cannot be a feature"):
        DesignSpec.from_schema(schema, "y", ["pid", "x"])


def test_restore_dtype_follows_the_schema_not_the_draw():
    from fits.core.schema import ColumnSpec
    from fits.synthesizer import restore_dtype

    # a chunk of draws without a missing value still gets the nullable dtype
    spec = ColumnSpec("c", "ordinal", "int", [1, 2, None], missing=True, pandas_dtype="int32")
    assert str(restore_dtype(pd.Series([1, 2]), spec).dtype) == "Int32"
    flag = ColumnSpec("f", "nominal", "bool", [False, True, None], missing=True)
    assert str(restore_dtype(pd.Series([True, False]), flag).dtype) == "boolean"
    spec = ColumnSpec("c", "ordinal", "int", [1, 2], pandas_dtype="int32")
    assert str(restore_dtype(pd.Series([1, 2]), spec).dtype) == "int32"


def test_report_reads_synthetic_dates_in_the_real_tables_format(tmp_path):
    """`fits report` reads the synthetic table's text dates with the format the real
    tables were read with (day first here), not a fresh guess: a synthetic table whose
    days are all <= 12 would be read month first."""
    from fits.cli.report import _synthetic_dates

    synthetic = pd.DataFrame({"d": ["03/04/2021", "11/12/2020", None], "n": ["1/2", "x", "y"]})
    got = _synthetic_dates(
        synthetic, {"d": ["%d/%m/%Y (ambiguous: no day above 12)"], "n": ["%d/%m/%Y"]}
    )
    assert list(got["d"][:2]) == [pd.Timestamp("2021-04-03"), pd.Timestamp("2020-12-11")]
    assert pd.isna(got["d"][2])
    assert list(got["n"]) == ["1/2", "x", "y"]  # not every value a date: left as text
    assert list(synthetic["d"][:1]) == ["03/04/2021"]  # the caller's frame is not changed

    files = [tmp_path / "a.csv", tmp_path / "b.csv"]
    _dated(150, "%d/%m/%Y", 4).to_csv(files[0], index=False)
    _dated(150, "%d/%m/%Y", 5).to_csv(files[1], index=False)
    out = tmp_path / "s.csv"
    res = run("synthesize", *map(str, files), "--rows", "60", "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert pd.read_csv(out)["d"].str.fullmatch(r"\d\d/\d\d/\d{4}").all()
    real = [a for f in files for a in ("--real", str(f))]
    html = tmp_path / "r.html"
    res = run("report", *real, "--synthetic", str(out), "--out", str(html))
    assert res.returncode == 0, res.stderr
    assert html.is_file()


def test_known_text_dates_are_read_in_the_sites_format():
    """Known dates written as the sites wrote theirs (day first) whose days are all
    <= 12 were read month first by a fresh guess: 12/03/2024 became December 3,
    outside the range, and the request was refused. Now the sites' format reads them."""
    rng = np.random.default_rng(0)
    when = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 160, 300), unit="D")
    table = pd.DataFrame({"d": when.strftime("%d/%m/%Y"), "x": rng.normal(size=300)})
    synth = FITSSynthesizer(seed=0).fit({"a": table.iloc[:150], "b": table.iloc[150:]})
    known = pd.DataFrame({"d": ["01/06/2024", "02/01/2024", "12/03/2024"]})  # 12/03: Dec 3
    out = synth.sample_remaining_columns(known)  # month first, outside the range
    assert list(out["d"]) == [pd.Timestamp(s) for s in ("2024-06-01", "2024-01-02", "2024-03-12")]


def test_labels_that_differ_only_in_case_or_spaces_are_kept_apart_with_a_note():
    """'Yes', 'yes', 'YES' and 'No', 'no ', ' no' are different values as written: fits
    keeps each with its own share, and says once that they look alike, with the fix."""
    rng = np.random.default_rng(2)
    labels = ["Yes", "yes", "YES", "No", "no ", " no", "maybe"]
    t = pd.DataFrame({"ans": rng.choice(labels, 400), "v": rng.normal(size=400)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        synth = FITSSynthesizer(seed=0).fit({"a": t.iloc[:200], "b": t.iloc[200:]})
    [note] = [str(w.message) for w in caught if "differ only in case" in str(w.message)]
    assert "(' no', 'No', 'no '; 'YES', 'Yes', 'yes')" in note
    assert "df['ans'].str.strip().str.lower()" in note and "'maybe'" not in note
    assert set(synth.sample(500)["ans"]) == set(labels)
    plain = pd.DataFrame({"ans": rng.choice(["yes", "no"], 200), "v": rng.normal(size=200)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FITSSynthesizer(seed=0).fit({"a": plain.iloc[:100], "b": plain.iloc[100:]})
    assert not [w for w in caught if "differ only in case" in str(w.message)]


def test_blank_labels_of_a_dataframe_get_a_note_on_csv_outputs(tmp_path):
    """'' and '  ' labels (a Parquet file's, a DataFrame's) are drawn as values, but a
    CSV output's empty or white fields read back as missing: the fit says so once; a
    Parquet output keeps them."""
    rng = np.random.default_rng(0)
    t = pd.DataFrame({"lab": rng.choice(["a", "b", "", "  "], 200), "v": rng.normal(size=200)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        synth = FITSSynthesizer(seed=0).fit({"a": t.iloc[:100], "b": t.iloc[100:]})
    [note] = [str(w.message) for w in caught if "empty or only spaces" in str(w.message)]
    assert "column 'lab' has label(s) empty or only spaces ('', '  ')" in note
    assert "write a Parquet output to keep them" in note
    out = pd.read_parquet(synth.sample_to_file(tmp_path / "s.parquet", 300))
    assert {"", "  "} <= set(out["lab"])


def test_a_saved_pandas_index_is_named_as_such(tmp_path):
    """``df.to_csv(path)`` writes the index as a first column without a name: the
    warning says so, and how to leave it out (it said 'a numeric identifier' only)."""
    rng = np.random.default_rng(0)
    tables = {}
    for k in range(2):
        frame = pd.DataFrame({"age": rng.integers(18, 90, 80), "c": rng.choice(["a", "b"], 80)})
        frame.to_csv(tmp_path / f"s{k}.csv")  # index=True, pandas' default
        tables[f"s{k}"] = read_table(tmp_path / f"s{k}.csv")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FITSSynthesizer(seed=0).fit(tables)
    said = " ".join(str(w.message) for w in caught)
    assert "column '' holds a different whole number in every row" in said
    assert "unless index=False" in said
    named = {k: t.rename(columns={"": "patient"}) for k, t in tables.items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FITSSynthesizer(seed=0).fit(named)  # a named column: an identifier, not an index
    said = " ".join(str(w.message) for w in caught)
    assert "'patient' holds a different whole number" in said and "index=False" not in said


def test_fits_analyze_names_a_saved_index_too(tmp_path):
    from fits.analysis import fit_glm

    rng = np.random.default_rng(1)
    tables = {}
    for k in range(2):
        x = rng.normal(size=120)
        y = 1 + x + rng.normal(size=120)
        pd.DataFrame({"x": x.round(3), "y": y.round(3)}).to_csv(tmp_path / f"s{k}.csv")
        tables[f"s{k}"] = read_table(tmp_path / f"s{k}.csv")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_glm(tables, "y", family="linear")
    said = " ".join(str(w.message) for w in caught)
    assert "column '' holds a different whole number" in said and "index=False" in said
