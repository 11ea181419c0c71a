"""SDV-style schema calls: Schema.detect (one call) and Schema.validate (clear errors)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, Schema, SchemaError

from conftest import mixed_table


def test_detect_equals_the_schema_a_fit_uses(mixed_clients):
    kinds = {"o": "nominal"}
    order = ["x", "b", "o", "c", "y"]
    synth = FITSSynthesizer(seed=0, kinds=kinds, order=order, n_jobs=1).fit(mixed_clients)
    assert Schema.detect(mixed_clients, kinds=kinds, order=order) == synth.schema_
    named = dict(zip(["a", "b", "c"], mixed_clients, strict=True))
    assert Schema.detect(named) == FITSSynthesizer(n_jobs=1).fit(named).schema_


def test_detect_one_table_is_the_pooled_schema(mixed_clients):
    pooled = pd.concat(mixed_clients, ignore_index=True)
    one = Schema.detect(pooled)
    assert one.kinds() == {
        "b": "nominal",
        "x": "continuous",
        "o": "ordinal",
        "c": "nominal",
        "y": "continuous",
    }
    assert one["o"].categories == [1, 2, 5]
    assert one["x"].lower == pooled["x"].min() and one["x"].upper == pooled["x"].max()
    # the sites' merged schema is the pooled one (bounds and categories are unions)
    assert Schema.detect(mixed_clients) == one


def test_detect_names_the_site_that_does_not_fit(mixed_clients):
    frames = {"north": mixed_clients[0], "south": mixed_clients[1].drop(columns="c")}
    with pytest.raises(SchemaError, match="south: columns differ.*missing: \\['c'\\]"):
        Schema.detect(frames)
    with pytest.raises(TypeError, match="client 2: expected a pandas DataFrame"):
        Schema.detect([mixed_clients[0], "a.csv"])
    with pytest.raises(SchemaError, match="at least one"):
        Schema.detect([])


def test_lookalike_column_names_are_explained(mixed_clients):
    """'é' as one code point at one site and as 'e' + a combining accent at another: the
    names print the same, so the error says how they differ."""
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    frames = {
        "north": mixed_clients[0].rename(columns={"c": composed}),
        "south": mixed_clients[1].rename(columns={"c": decomposed}),
    }
    with pytest.raises(SchemaError, match="south: columns differ") as err:
        Schema.detect(frames)
    assert "different Unicode code points" in str(err.value)
    assert "(NFC)" in str(err.value)
    frames["south"] = mixed_clients[1].rename(columns={"c": "tea"})  # no hint for others
    with pytest.raises(SchemaError, match="columns differ") as err:
        Schema.detect(frames)
    assert "Unicode" not in str(err.value)


def test_datetime_columns_that_differ_between_sites_name_each_site():
    """Time zones that differ (an offset at one site, UTC or local times at another),
    or datetimes at one site and numbers at another: the error says what each site
    holds, and how to fix it."""
    x = np.arange(10.0)
    t = pd.Series(pd.date_range("2024-03-01", periods=10, freq="D"))
    frames = {
        "paris": pd.DataFrame({"x": x, "t": t.dt.tz_localize("UTC+02:00")}),
        "london": pd.DataFrame({"x": x, "t": t.dt.tz_localize("UTC")}),
        "local": pd.DataFrame({"x": x, "t": t}),
    }
    with pytest.raises(SchemaError) as err:
        Schema.detect(frames)
    assert "(paris: UTC+02:00; london: UTC; local: none (local times))" in str(err.value)
    assert "a time zone at some clients and none at others" in str(err.value)
    assert "with a time zone or UTC offset at every site" in str(err.value)
    frames = {"local": frames["local"], "days": pd.DataFrame({"x": x, "t": np.arange(10)})}
    with pytest.raises(SchemaError, match=r"not at others \(local: datetime; days: int\)"):
        Schema.detect(frames)


def test_validate_accepts_the_tables_it_was_detected_on(mixed_clients):
    schema = Schema.detect(mixed_clients)
    for t in mixed_clients:
        schema.validate(t)
    # The engine's schema validates the engine's tables; with near-linear columns off
    # those are the raw tables, and the indicator columns are not asked for. (With them
    # on, y's engine column is its residual about the line in x, another column.)
    assert Schema.detect(mixed_clients).near_linear  # y is near-linear in x here
    engine = Schema.detect(mixed_clients, near_linear=False).expanded()
    engine.validate(mixed_clients[0])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.drop(columns="y"), r"site a: column\(s\) \['y'\] of the schema are missing"),
        (lambda t: t.assign(z=1.0), r"site a: column\(s\) \['z'\] are not in the schema"),
        (lambda t: t.assign(c="east"), r"site a: column 'c' has value\(s\) \['east'\]"),
        (lambda t: t.assign(o=3), r"column 'o' has value\(s\) \[3\]"),
        (lambda t: t.assign(x="high"), r"column 'x' is continuous in the schema but holds"),
        (lambda t: t.assign(y=np.nan), r"column 'y' has missing values"),
        (lambda t: t.assign(c=None), r"column 'c' has \d+ missing value"),
        (lambda t: t.assign(x=t["x"] + 100.0), r"column 'x' has \d+ value\(s\) outside"),
        (lambda t: t.assign(x=np.inf), r"column 'x' has infinite values"),
    ],
)
def test_validate_names_the_column_and_the_problem(mixed_clients, change, message):
    schema = Schema.detect(mixed_clients)
    bad = change(mixed_clients[0].copy())
    with pytest.raises(SchemaError, match=message):
        schema.validate(bad, name="site a")


def test_validate_missing_values_where_the_schema_expects_them():
    frame = mixed_table(300, seed=3)
    frame.loc[[4, 9], "y"] = np.nan
    frame.loc[[5], "c"] = None
    schema = Schema.detect(frame)
    assert schema["y"].missing and None in schema["c"].categories
    schema.validate(frame)
    with pytest.raises(TypeError, match="expected a pandas DataFrame"):
        schema.validate(frame.to_numpy())


@pytest.mark.filterwarnings("ignore:column 'x' is text read as numbers")
def test_detect_and_validate_read_text_as_a_site_does(mixed_clients):
    """Numbers written as text, with a marker, are read as a site reads them."""
    sites = [t.copy() for t in mixed_clients]
    for t in sites:
        t["x"] = t["x"].map(lambda v: f"{v:.6f}").astype(object)
    sites[1].loc[3, "x"] = "?"
    synth = FITSSynthesizer(seed=0, n_jobs=1).fit(sites)
    detected = Schema.detect(sites)
    assert detected == synth.schema_
    assert detected["x"].kind == "continuous" and detected["x"].missing
    for t in sites:
        detected.validate(t)
