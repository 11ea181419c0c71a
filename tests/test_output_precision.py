"""Synthetic values come back at the real values' precision: floats with the decimals
they were written with, datetimes in the time unit they were recorded in."""

from __future__ import annotations

import csv
import re

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, Schema, SchemaError
from fits._exact import sums_match
from fits.core.schema import (
    MAX_DECIMALS,
    ColumnSpec,
    describe_table,
    merge_descriptions,
    output_decimals,
    time_resolution,
)

from conftest import fits_in_process


def test_output_decimals_is_the_written_precision() -> None:
    assert output_decimals(np.array([1.0, 2.0, -7.0])) == 0
    assert output_decimals(np.array([1.5, 2.25])) == 2
    assert output_decimals(np.array([59.54, 12.01])) == 2  # 59.54 * 100 is 5954.000000000001
    assert output_decimals(np.array([0.1, 0.7, 0.3])) == 1
    # no tolerance: a value off a decimal grid by 1e-7 has 7 decimals, not 0
    assert output_decimals(np.array([3.0000001])) == 7
    assert output_decimals(np.array([1 / 3])) is None
    assert output_decimals(np.array([0.1 + 0.2])) is None  # 0.30000000000000004
    assert output_decimals(np.array([1e17 + 0.0])) is None  # past float64's decimals
    # every value parsed from text with d decimals has d or fewer, for every d
    rng = np.random.default_rng(0)
    for d in range(MAX_DECIMALS + 1):
        ints = rng.integers(-(10**3), 10**3, 500)
        parsed = np.array([float(f"{i / 10**d:.{d}f}") for i in ints])
        assert output_decimals(parsed) <= d


def test_time_resolution() -> None:
    base = pd.Timestamp("2024-03-01 00:00:00")
    hours = pd.Series(base + pd.to_timedelta([0, 5, 17], unit="h"))
    assert time_resolution(hours) == "h"
    assert time_resolution(pd.Series(base + pd.to_timedelta([0, 61, 3], unit="min"))) == "min"
    assert time_resolution(pd.Series(base + pd.to_timedelta([1, 61, 3], unit="s"))) == "s"
    assert time_resolution(pd.Series(base + pd.to_timedelta([1, 61, 3], unit="ms"))) == "ms"
    assert time_resolution(pd.Series(base + pd.to_timedelta([1, 61, 3], unit="us"))) is None
    # judged on the values' own clock: local whole hours at +05:30 are whole hours
    # (half hours in UTC)
    local = hours.dt.tz_localize("Asia/Kolkata")
    assert time_resolution(local) == "h"


def test_local_whole_dates_and_hours_stay_whole_on_their_own_clock() -> None:
    """A time-zone-aware column of local midnights is whole dates (it was judged in UTC,
    where Berlin's midnights are 22:00 or 23:00); synthetic values are rounded on the
    local wall clock, across the clock changes."""
    from fits.core.continualization import Encoder

    rng = np.random.default_rng(0)
    days = pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 365, 300), unit="D")
    frame = pd.DataFrame({"day": pd.Series(days).dt.tz_localize("Europe/Berlin")})
    frame["v"] = rng.normal(size=300)
    synth = FITSSynthesizer(seed=0).fit([frame.iloc[:150], frame.iloc[150:]])
    assert synth.schema_["day"].date_only
    out = synth.sample(500)["day"]
    assert str(out.dt.tz) == "Europe/Berlin"
    assert (out.dt.hour == 0).all() and (out.dt.minute == 0).all()
    # hours on the local clock, through both of 2021's changes (28 March, 31 October)
    spec = ColumnSpec(
        "t", "continuous", "datetime", lower=0.0, upper=2e9, tz="Europe/Berlin", resolution="h"
    )
    wall = ["2021-03-28 01:40", "2021-03-28 13:20", "2021-10-31 02:20", "2021-08-14 10:50"]
    first_pass = np.array([False, False, True, False, False])  # the first 02:20, CEST
    local = pd.DatetimeIndex([*wall, "2021-10-31 02:10"]).tz_localize(
        "Europe/Berlin", ambiguous=first_pass
    )
    seconds = (
        local.tz_convert("UTC").tz_localize(None) - pd.Timestamp("1970-01-01")
    ).total_seconds()
    got = Encoder(spec).decode(np.asarray(seconds, dtype=float))
    assert [str(v) for v in got] == [
        "2021-03-28 03:00:00+02:00",  # 02:00 does not exist that night: forward to 03:00
        "2021-03-28 13:00:00+02:00",
        "2021-10-31 02:00:00+02:00",  # 02:00 comes twice: the first, as 02:20 was
        "2021-08-14 11:00:00+02:00",
        "2021-10-31 02:00:00+01:00",  # the second 02:10: the second 02:00
    ]


def _sites(seed: int = 0) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    n = 400
    x = rng.normal(50, 10, n)
    price = np.round(2 * x + rng.gamma(2, 3, n), 2)  # two decimals
    one = np.round(x, 1)  # one decimal at every site
    raw = x + rng.normal(size=n)  # full precision
    stamp = pd.Timestamp("2024-01-01") + pd.to_timedelta(
        (x * 3600 + rng.integers(0, 3600, n)).astype(np.int64), unit="s"
    )
    minute = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 10**5, n), unit="min")
    frame = pd.DataFrame({"one": one, "price": price, "raw": raw, "stamp": stamp, "minute": minute})
    a, b = frame.iloc[:250].copy(), frame.iloc[250:].copy()
    b["price"] = np.round(b["price"], 1)  # the second site writes one decimal only
    return [a, b]


@pytest.fixture(scope="module")
def fitted() -> tuple[FITSSynthesizer, pd.DataFrame]:
    synth = FITSSynthesizer(seed=0).fit(_sites())
    return synth, synth.sample(1000)


def test_schema_records_each_columns_precision(fitted) -> None:
    synth, _ = fitted
    schema = synth.schema_
    assert schema["one"].decimals == 1
    assert schema["price"].decimals == 2  # the most any site has
    assert schema["raw"].decimals is None
    assert (schema["stamp"].resolution, schema["minute"].resolution) == ("s", "min")
    assert Schema.from_json(schema.to_json()) == schema


def test_synthetic_values_have_the_real_precision(fitted) -> None:
    synth, out = fitted
    assert output_decimals(out["one"].to_numpy()) <= 1
    assert output_decimals(out["price"].to_numpy()) <= 2
    assert output_decimals(out["raw"].to_numpy()) is None  # left at full precision
    # the rounding is to the nearest grid value: no value moves more than half a step
    # from where the engine drew it, and none leaves the real range
    for name in ("one", "price"):
        spec = synth.schema_[name]
        assert out[name].between(spec.lower, spec.upper).all()
    stamps = out["stamp"].astype("datetime64[ns]").astype(np.int64)
    assert np.all(stamps % 10**9 == 0)
    minutes = out["minute"].astype("datetime64[ns]").astype(np.int64)
    assert np.all(minutes % (60 * 10**9) == 0)
    # and the draws are spread over the grid, not collapsed onto a few values
    assert out["price"].nunique() > 500


def test_rounding_moves_each_value_at_most_half_a_step(fitted) -> None:
    synth, _ = fitted
    from fits.core.continualization import Encoder

    # price is near-linear in one (2x + gamma noise): the engine draws its residual, and
    # the output goes through price's own encoder (its bounds and decimals)
    assert "price" in synth.schema_.near_linear
    enc = Encoder(synth.schema_["price"])
    y = np.random.default_rng(1).uniform(enc.spec.lower, enc.spec.upper, 5000)
    got = enc.decode(y).to_numpy()
    assert np.max(np.abs(got - y)) <= 0.005 + 1e-12
    assert np.array_equal(got, np.round(y, 2))


def test_a_value_rounded_to_zero_is_not_negative_zero() -> None:
    from fits.core.continualization import Encoder

    spec = ColumnSpec("v", "continuous", "float", lower=-1.0, upper=1.0, decimals=2)
    got = Encoder(spec).decode(np.array([-0.004, -0.0, 0.004, -1e-300, -0.006]))
    assert got.tolist() == [0.0, 0.0, 0.0, 0.0, -0.01]
    assert not np.any(np.signbit(got.to_numpy()[:4]))  # "0.0" in a CSV, never "-0.0"
    assert got.to_csv(index=False).split() == ["v", "0.0", "0.0", "0.0", "0.0", "-0.01"]


def test_negative_zeros_at_the_sites_do_not_spread() -> None:
    """-0.0 equals 0.0, so a site's category or bound could be either: where some of
    the sites' zeros were -0.0, every synthetic zero came back -0.0 ("-0.0" in a CSV).
    A category, a bound, a point mass and an affine rule's zero are 0.0 now."""
    from fits.core.continualization import Encoder

    ordinal = ColumnSpec("z", "ordinal", "float", categories=[-0.0, 1.5])
    enc = Encoder(ordinal)
    labels = enc.decode(enc.midpoints[[0, 1, 0]])
    assert labels.tolist() == [0.0, 1.5, 0.0] and not np.signbit(labels.to_numpy()).any()
    gaps = ColumnSpec("z", "ordinal", "float", categories=[-0.0, 1.5, None], missing=True)
    enc = Encoder(gaps)
    labels = enc.decode(enc.midpoints[[0, 2, 1]])
    assert labels.iloc[0] == 0.0 and np.isnan(labels.iloc[1]) and labels.iloc[2] == 1.5
    assert not np.signbit(labels.to_numpy()[[0, 2]]).any()
    at_bound = ColumnSpec("z", "continuous", "float", lower=-0.0, upper=1.0)  # decimals None
    values = Encoder(at_bound).decode(np.array([-0.5, -0.0, 0.25]))
    assert values.tolist() == [0.0, 0.0, 0.25] and not np.signbit(values.to_numpy()).any()

    def site(k: int) -> pd.DataFrame:
        rng = np.random.default_rng(k)
        z = np.where(rng.random(60) < 0.6, 0.0, 1.5)
        z[np.flatnonzero(z == 0)[::2]] = -0.0  # half the zeros, the first among them
        x = rng.random(60) / 3
        x[rng.random(60) < 0.4] = -0.0
        return pd.DataFrame({"a": rng.normal(size=60), "z": z, "x": x})

    out = FITSSynthesizer(seed=0).fit([site(0), site(1)]).sample(200)
    for col in ("z", "x"):
        zeros = out[col].to_numpy()[out[col].to_numpy() == 0]
        assert zeros.size > 20 and not np.signbit(zeros).any(), col
    assert not re.search(r"(^|,)-0\.0(,|$)", out.to_csv(index=False), re.M)


def test_decimals_null_keeps_full_precision(fitted) -> None:
    synth, _ = fitted
    data = synth.schema_.to_dict()
    for col in data["columns"]:
        col.pop("decimals", None)
        col.pop("resolution", None)
    schema = Schema.from_dict(data)
    assert schema["price"].decimals is None and schema["stamp"].resolution is None
    out = FITSSynthesizer(schema=schema, seed=0).fit(_sites()).sample(300)
    assert output_decimals(out["price"].to_numpy()) is None
    assert not np.all(out["stamp"].astype("datetime64[ns]").astype(np.int64) % 10**9 == 0)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("decimals", -1, "decimals"),
        ("decimals", 2.5, "decimals"),
        ("decimals", True, "decimals"),
        ("decimals", MAX_DECIMALS + 1, "decimals"),
        ("resolution", "fortnight", "resolution"),
    ],
)
def test_bad_precision_in_a_schema_is_refused(field: str, value: object, message: str) -> None:
    entry = {"name": "x", "kind": "continuous", "dtype": "float", "lower": 0.0, "upper": 1.0}
    with pytest.raises(SchemaError, match=message):
        ColumnSpec.from_dict({**entry, field: value})


def test_a_site_with_more_decimals_than_kept_turns_the_rounding_off() -> None:
    a = pd.DataFrame({"v": np.round(np.linspace(0, 10, 50), 2)})
    b = pd.DataFrame({"v": np.linspace(0, 10, 50) / 3})  # no decimal grid
    schema = merge_descriptions([describe_table(a), describe_table(b)], ["a", "b"])
    assert schema["v"].decimals is None
    c = pd.DataFrame({"v": np.arange(50) * 1.0})  # whole numbers in a float column
    schema = merge_descriptions([describe_table(a), describe_table(c)], ["a", "c"])
    assert schema["v"].decimals == 2


def test_a_sum_rule_keeps_holding_after_the_rounding() -> None:
    rng = np.random.default_rng(3)
    n = 600
    a = np.round(rng.gamma(3, 2, n), 1)
    b = np.round(rng.gamma(2, 5, n), 2)
    frame = pd.DataFrame({"a": a, "b": b, "t": np.round(a + b, 2)})  # written as decimals
    synth = FITSSynthesizer(seed=0).fit([frame.iloc[:300], frame.iloc[300:]])
    assert [r.kind for r in synth.schema_.rules or []] == ["sum"]
    out = synth.sample(2000)
    assert output_decimals(out["t"].to_numpy()) <= 2
    assert sums_match(out["t"].to_numpy(), [out["a"].to_numpy(), out["b"].to_numpy()]).all()
    # as written: the total's text is the parts' decimal sum
    for x, y, t in out[["a", "b", "t"]].head(200).itertuples(index=False):
        assert round(x + y, 2) == t


def test_csv_round_trip_writes_no_more_decimals_than_it_read(tmp_path) -> None:
    paths = []
    for i, frame in enumerate(_sites(1)):
        path = tmp_path / f"site{i}.csv"
        frame.to_csv(path, index=False)
        paths.append(path)
    out = tmp_path / "synthetic.csv"
    res = fits_in_process("synthesize", *paths, "--rows", "300", "--out", out, "-q")
    assert res.returncode == 0, res.stderr
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    decimals = {
        name: max(len(r[name].split(".")[1]) if "." in r[name] else 0 for r in rows)
        for name in ("one", "price")
    }
    assert decimals == {"one": 1, "price": 2}
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", r["stamp"]) for r in rows)
    assert all(r["minute"].endswith(":00") for r in rows)


def test_a_schema_coarser_than_the_sites_is_noted(fitted) -> None:
    from fits.core.schema import DataNote

    synth, _ = fitted
    data = synth.schema_.to_dict()
    for col in data["columns"]:
        if col["name"] == "price":
            col["decimals"] = 1  # a schema made on a table written with one decimal
        if col["name"] == "stamp":
            col["resolution"] = "min"
    schema = Schema.from_dict(data)
    with pytest.warns(DataNote) as caught:
        out = FITSSynthesizer(schema=schema, seed=0).fit(_sites()).sample(300)
    notes = [str(w.message) for w in caught if issubclass(w.category, DataNote)]
    assert any("'price'" in n and "to 1 decimal but" in n and "client 1 (2)" in n for n in notes), (
        notes
    )
    assert any("'stamp'" in n and "'min'" in n for n in notes), notes
    assert not any("'one'" in n for n in notes)
    assert output_decimals(out["price"].to_numpy()) <= 1  # the schema is the user's to set


def test_the_schema_of_the_same_table_is_not_noted(fitted) -> None:
    import warnings

    from fits.core.schema import DataNote

    synth, _ = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataNote)
        FITSSynthesizer(schema=synth.schema_, seed=0).fit(_sites())


def test_float32_columns_keep_their_decimals() -> None:
    """A float32 column written with one decimal (21.3 is 21.299999237 in float64) has
    one decimal, judged in float32: it was kept at full precision (21.347822)."""
    rng = np.random.default_rng(0)
    temp = np.round(rng.normal(20, 5, 400), 1).astype(np.float32)
    assert output_decimals(temp) == 1
    assert output_decimals(rng.normal(20, 5, 50).astype(np.float32)) is None
    sites = [
        pd.DataFrame({"temp": temp[:200], "g": ["a", "b"] * 100}),
        pd.DataFrame({"temp": temp[200:], "g": ["b", "a"] * 100}),
    ]
    assert Schema.detect(sites)["temp"].decimals == 1
    out = FITSSynthesizer(seed=0).fit(sites).sample(200)["temp"]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.round(out.astype(float), 1).astype(np.float32))
