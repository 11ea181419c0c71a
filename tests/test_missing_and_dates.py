"""Missing values are modelled, not dropped; datetimes round-trip as continuous columns."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, Schema, SchemaError
from fits.core.schema import DataNote


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    x = rng.normal(size=n) + (group == "b") * 3.0
    # income is missing far more often in group "c" (missing together with a value)
    p_missing = np.where(group == "c", 0.6, 0.05)
    income = np.exp(rng.normal(10, 0.5, n))
    income[rng.random(n) < p_missing] = np.nan
    colour = rng.choice(["red", "blue"], n).astype(object)
    colour[rng.random(n) < 0.15] = None
    count = rng.integers(0, 5, n).astype(float)
    count[rng.random(n) < 0.1] = np.nan
    day = pd.Timestamp("2024-01-01") + pd.to_timedelta(
        np.round(30 * x + 100 + 20 * rng.normal(size=n)).astype(int), unit="D"
    )
    return pd.DataFrame(
        {"group": group, "x": x, "income": income, "colour": colour, "count": count, "day": day}
    )


@pytest.fixture(scope="module")
def clients():
    t = _table(3000, 0)
    return [t.iloc[:1500], t.iloc[1500:2400], t.iloc[2400:]]


@pytest.fixture(scope="module")
def synthetic(clients):
    synth = FITSSynthesizer(seed=0).fit(clients)
    return synth, synth.sample(6000)


def test_schema_records_missing_and_datetimes(synthetic):
    synth, _ = synthetic
    schema = synth.schema_
    assert schema["income"].missing and schema["income"].kind == "continuous"
    assert None in schema["colour"].categories  # missing is a category of its own
    assert None in schema["count"].categories and schema["count"].kind == "ordinal"
    assert schema["day"].dtype == "datetime" and schema["day"].date_only
    # the engine draws a missingness indicator just before the continuous column
    order = synth.coordinator.schema.order
    assert order.index("income (missing)") == order.index("income") - 1
    assert Schema.from_json(schema.to_json()) == schema


def test_missing_rates_and_their_dependence_are_reproduced(clients, synthetic):
    _, out = synthetic
    real = pd.concat(clients, ignore_index=True)
    assert list(out.columns) == list(real.columns)
    for col in ("income", "colour", "count"):
        assert abs(out[col].isna().mean() - real[col].isna().mean()) < 0.03, col
    # missing together with what: income is missing mostly in group "c"
    by_group_real = real["income"].isna().groupby(real["group"]).mean()
    by_group_syn = out["income"].isna().groupby(out["group"]).mean()
    np.testing.assert_allclose(by_group_syn, by_group_real, atol=0.08)
    # the values that are present keep their distribution
    assert abs(np.log(out["income"].dropna()).mean() - np.log(real["income"].dropna()).mean()) < 0.1


def test_types_come_back(synthetic):
    _, out = synthetic
    assert pd.api.types.is_datetime64_any_dtype(out["day"])
    assert (out["day"] == out["day"].dt.normalize()).all()  # dates stay dates
    assert out["count"].dtype == float  # the input was float because of its NaNs
    assert set(out["count"].dropna()) <= {0.0, 1.0, 2.0, 3.0, 4.0}
    assert set(out["colour"].dropna()) <= {"red", "blue"}
    assert out["income"].dtype == float


def test_datetime_dependence_is_kept(clients, synthetic):
    _, out = synthetic
    real = pd.concat(clients, ignore_index=True)
    days = (out["day"] - pd.Timestamp("2024-01-01")).dt.days
    real_days = (real["day"] - pd.Timestamp("2024-01-01")).dt.days
    # drawn last, after five columns, the dependence is smoothed a little (0.93 -> 0.85)
    assert abs(np.corrcoef(days, out["x"])[0, 1] - np.corrcoef(real_days, real["x"])[0, 1]) < 0.1


def test_timezones_are_restored():
    rng = np.random.default_rng(1)
    t = pd.DataFrame(
        {
            "when": pd.Timestamp("2024-03-01", tz="Europe/Berlin")
            + pd.to_timedelta(rng.integers(0, 10**6, 400), unit="s"),
            "v": rng.normal(size=400),
        }
    )
    out = FITSSynthesizer(seed=0).fit([t.iloc[:200], t.iloc[200:]]).sample(100)
    assert str(out["when"].dt.tz) == "Europe/Berlin"
    assert out["when"].between(t["when"].min(), t["when"].max()).all()


def test_sites_in_different_time_zones_are_written_in_utc(tmp_path):
    """Two sites in one time zone, one holding winter times only (+01:00 in its CSV file)
    and the other summer and winter (read in UTC), or sites in two zones: the values
    are instants, so they are modelled as such and written back in UTC with a note
    (they were refused: 'different time zones at different clients'); a site without a
    time zone next to one with is still refused, saying so."""
    from conftest import fits_in_process

    rng = np.random.default_rng(4)
    start = pd.Timestamp("2024-01-01", tz="Europe/Berlin")
    winter = start + pd.to_timedelta(rng.integers(0, 86400 * 60, 80), unit="s")
    year = start + pd.to_timedelta(rng.integers(0, 86400 * 360, 80), unit="s")
    files = [tmp_path / "winter.csv", tmp_path / "year.csv"]
    for path, when in zip(files, (winter, year), strict=True):
        pd.DataFrame({"when": when, "v": rng.normal(size=80)}).to_csv(path, index=False)
    out = tmp_path / "out.csv"
    res = fits_in_process("synthesize", *files, "--rows", "50", "--out", out, "--quiet")
    assert res.returncode == 0, res.stderr
    assert "different time zones at different clients (winter: UTC+01:00; year: UTC)" in (
        res.stderr
    )
    back = pd.read_csv(out)["when"]
    assert back.str.endswith("+00:00").all()
    lo, hi = min(winter.min(), year.min()), max(winter.max(), year.max())
    assert pd.to_datetime(back, utc=True).between(lo, hi).all()
    # named zones at two sites: UTC, and the instants' range (Python API)
    a = pd.DataFrame({"when": winter, "v": rng.normal(size=80)})
    b = pd.DataFrame({"when": year.tz_convert("America/New_York"), "v": rng.normal(size=80)})
    with pytest.warns(DataNote, match="Europe/Berlin; client 2: America/New_York"):
        synth = FITSSynthesizer(seed=0).fit([a, b])
    assert synth.schema_["when"].tz == "UTC"
    got = synth.sample(60)["when"]
    assert str(got.dt.tz) == "UTC" and got.between(lo, hi).all()
    with pytest.raises(SchemaError, match="a time zone at some clients and none at others"):
        FITSSynthesizer(seed=0).fit([a, b.assign(when=b["when"].dt.tz_localize(None))])


def test_integer_column_with_missing_values_stays_integer():
    rng = np.random.default_rng(2)
    v = pd.array(rng.integers(0, 1000, 600), dtype="Int64")
    v[rng.random(600) < 0.2] = pd.NA
    t = pd.DataFrame({"v": v, "w": rng.normal(size=600)})
    out = FITSSynthesizer(seed=0).fit([t.iloc[:300], t.iloc[300:]]).sample(500)
    assert str(out["v"].dtype) == "Int64"
    assert 0.1 < out["v"].isna().mean() < 0.3


def test_a_site_whose_column_is_all_missing_has_no_say_in_its_dtype():
    """int64 at one site and float64 of nothing but NaN at another (as a CSV reads an
    empty column) give Int64, the first site's integers with missing values; a site
    of floats that hold values gives float64, as pd.concat does (docs/cli.md)."""
    rng = np.random.default_rng(3)
    a = pd.DataFrame({"k": rng.integers(0, 50, 200), "x": rng.normal(size=200)})
    empty = pd.DataFrame({"k": np.full(150, np.nan), "x": rng.normal(size=150)})
    synth = FITSSynthesizer(seed=0).fit([a, empty])
    out = synth.sample(400)
    assert str(out["k"].dtype) == "Int64" and out["k"].isna().any()
    floats = empty.assign(k=rng.normal(20, 5, 150))
    assert str(FITSSynthesizer(seed=0).fit([a, floats]).sample(50)["k"].dtype) == "float64"


def test_column_missing_at_one_client_only(clients):
    frames = [c.copy() for c in clients]
    frames[2]["x"] = np.nan  # entirely missing at one client, present elsewhere
    synth = FITSSynthesizer(seed=0).fit(frames)
    out = synth.sample(2000)
    assert synth.schema_["x"].missing
    assert 0.05 < out["x"].isna().mean() < 0.4


def test_many_levels_warn_with_a_fix():
    rng = np.random.default_rng(3)
    codes = rng.permutation([f"u{i}" for i in range(1100)] * 6)  # each 6 times: not unique
    t = pd.DataFrame({"code": codes, "v": rng.normal(size=6600)})
    with pytest.warns(UserWarning, match="'code' has 1100 levels.*Drop it"):
        FITSSynthesizer(seed=0).fit([t.iloc[:3300], t.iloc[3300:]])


def test_text_in_a_column_declared_continuous(clients):
    frames = [c.copy() for c in clients]
    frames[1]["x"] = frames[1]["x"].astype(object)
    # one marker among 900 numbers: read as missing, and said so
    frames[1].loc[frames[1].index[3], "x"] = "n/a"
    with pytest.warns(DataNote, match="'x' is text read as numbers.*1 of its 900.*'n/a' \\(1\\)"):
        synth = FITSSynthesizer(kinds={"x": "continuous"}).fit(frames)
    assert synth.schema_["x"].missing and synth.schema_["x"].markers == {"n/a": 1}
    # text in 10% of the rows is not a marker: the column is text, and cannot be continuous
    frames[1].loc[frames[1].index[:90], "x"] = "n/a"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(SchemaError, match="client 2: column 'x' .*continuous.*'n/a'"):
            FITSSynthesizer(kinds={"x": "continuous"}).fit(frames)


@pytest.mark.parametrize("first", [True, False])
def test_a_users_column_named_like_an_indicator(first):
    """A column of the user's own named 'x (missing)', with x holding no missing value,
    is no indicator of x: sampling stopped with numpy's 'object of too small depth'
    (x's values were decoded as if it marked missing ones)."""
    rng = np.random.default_rng(3)
    x, f = rng.normal(size=600), rng.normal(5, 1, 600)
    t = pd.DataFrame({"x": x, "x (missing)": f, "y": f + x + 0.1 * rng.normal(size=600)})
    if first:
        t = t[["x (missing)", "x", "y"]]
    out = FITSSynthesizer(seed=0).fit([t.iloc[:300], t.iloc[300:]]).sample(400)
    assert out.notna().all().all() and list(out.columns) == list(t.columns)
    assert out["x"].std() > 0.5 and out["x"].min() > t["x"].min() - 1e-9
    assert abs(out["x (missing)"].mean() - 5) < 0.3


def test_a_column_after_a_users_column_named_like_its_indicator_is_not_first():
    """x after the user's own 'x (missing)' has a covariate: boosting it or giving it a
    design was refused as 'the chain's first column' (judged by the names before it)."""
    rng = np.random.default_rng(3)
    f = rng.normal(5, 1, 600)
    t = pd.DataFrame({"x (missing)": f, "x": f + rng.normal(size=600)})
    sites = [t.iloc[:300], t.iloc[300:]]
    FITSSynthesizer(seed=0, column_models={"x": "boosting"}).fit(sites)
    FITSSynthesizer(seed=0, column_designs={"x": "constant"}).fit(sites)


def test_parquet_date32_columns_come_back_as_dates(tmp_path):
    """A Parquet date32 column (datetime.date objects in pandas) was read as text,
    said so ('column 'd' is text read as dates (ISO8601)'), and came back as
    timestamp[us] in a Parquet output; the release check's distances treated its dates
    as labels (every synthetic row 1 from the nearest real one). Now it is modelled as
    dates with no note, and written back as date32 (Parquet) or dates without a time
    part (CSV)."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    from conftest import fits_in_process

    rng = np.random.default_rng(0)
    files = []
    for k in range(2):
        days = rng.integers(0, 900, 120)
        d = [dt.date(2020, 1, 1) + dt.timedelta(days=int(v)) for v in days]
        d[k] = None  # a missing date
        table = pa.table({"d": pa.array(d, pa.date32()), "x": pa.array(rng.normal(size=120))})
        files.append(tmp_path / f"s{k}.parquet")
        pq.write_table(table, files[-1])
    for suffix in (".parquet", ".csv"):
        out = tmp_path / f"out{suffix}"
        res = fits_in_process("synthesize", *files, "--rows", "40", "--out", out, "--quiet")
        assert res.returncode == 0, res.stderr
        assert "read as dates" not in res.stderr, res.stderr
        if suffix == ".parquet":
            assert pq.read_schema(out).field("d").type == pa.date32()
            back = pq.read_table(out).column("d").to_pylist()
        else:
            text = pd.read_csv(out, dtype=str, keep_default_na=False)["d"]
            assert text.str.fullmatch(r"\d{4}-\d{2}-\d{2}|").all(), text.tolist()
            back = [dt.date.fromisoformat(v) if v else None for v in text]
        present = [v for v in back if v is not None]
        assert all(dt.date(2020, 1, 1) <= v <= dt.date(2022, 6, 19) for v in present)
        line = next(ln for ln in res.stdout.splitlines() if ln.startswith("distance"))
        assert "synthetic 1," not in line, line
