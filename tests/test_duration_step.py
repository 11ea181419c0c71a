"""Two datetime columns whose real durations share a unit (whole days, whole minutes):
the near-linear rule's ``step``, found from each site's coarsest unit, and synthetic
durations drawn on it (docs/method.md, "Near-linear columns")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.rules import DURATION_STEPS, duration_step
from fits.core.schema import Rule, Schema, SchemaError

DAY = 86_400.0


def _visits(n: int, seed: int, unit: str, most: int, clock: str = "h") -> pd.DataFrame:
    """Arrivals on the ``clock`` (hours, or seconds) over a year; departures a whole number (0 to
    ``most``) of ``unit`` later; and an unrelated number."""
    rng = np.random.default_rng(seed)
    span = int(pd.Timedelta(days=365) / pd.Timedelta(1, clock))
    start = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, span, n), clock)
    length = pd.to_timedelta(rng.integers(0, most + 1, n), unit)
    return pd.DataFrame(
        {"start": start, "end": start + length, "cost": rng.gamma(2.0, 100.0, n).round(2)}
    )


def _durations(table: pd.DataFrame) -> np.ndarray:
    return (table["end"] - table["start"]).dt.total_seconds().to_numpy()


@pytest.mark.parametrize(
    "values, step",
    [
        ([0, DAY, 14 * DAY], DAY),
        ([0, 7 * DAY, 21 * DAY], 7 * DAY),
        ([3600.0, 7200.0, DAY], 3600.0),
        ([60.0, 3600.0, np.nan], 60.0),
        ([1.0, 61.0], 1.0),
        ([1.5, 3.0], 0.0),  # sub-second: no unit
        ([0.0, 0.0], DURATION_STEPS[0]),  # 0 is a multiple of every unit
    ],
)
def test_the_coarsest_unit_dividing_every_duration(values, step):
    assert duration_step(np.asarray(values)) == step


def test_no_duration_no_unit():
    assert np.isnan(duration_step(np.array([np.nan])))


def test_whole_days_are_kept_whole_and_the_ends_keep_their_share():
    """Arrivals on the hour, stays of 0-14 whole days.  Before, the synthetic stays
    were within 0-14 days but on the hour (93% of them not whole days); the shortest
    and longest stays, drawn truncated at the rule's bounds, would take half their
    share if the draws were only rounded."""
    sites = [_visits(n, seed, "D", 14) for n, seed in ((700, 1), (500, 2), (300, 3))]
    synth = FITSSynthesizer(seed=0).fit(sites)
    rule = synth.schema_.near_linear["end"]
    assert rule.step == DAY
    assert rule.intercept % DAY == 0
    assert (rule.intercept + rule.lower, rule.intercept + rule.upper) == (0.0, 14 * DAY)
    assert rule.describe(clock=True) == (
        "end = start + duration in [0 days, 14 days] in steps of 1 day (near-linear)"
    )
    out = synth.sample(6000, seed=1)
    days = _durations(out) / DAY
    assert np.all(days == np.round(days))
    assert days.min() == 0 and days.max() == 14
    share = pd.Series(days).value_counts(normalize=True)
    # the real stays are uniform on 0..14 (1/15 = 0.067 each); half would be 0.033
    assert share[0.0] > 0.05 and share[14.0] > 0.05
    assert set(share.index) == set(range(15))


def test_the_finest_unit_of_the_sites_is_the_rules():
    """One site's stays are whole days, the other's whole hours: the rule's step is an
    hour, which divides both."""
    sites = [_visits(600, 1, "D", 10), _visits(600, 2, "h", 240)]
    synth = FITSSynthesizer(seed=0).fit(sites)
    rule = synth.schema_.near_linear["end"]
    assert rule.step == 3600.0
    hours = _durations(synth.sample(2000, seed=1)) / 3600.0
    assert np.all(hours == np.round(hours))


def test_minutes_on_a_clock_of_seconds():
    sites = [_visits(800, s, "min", 90, clock="s") for s in (1, 2)]
    rule = FITSSynthesizer(seed=0).fit(sites).schema_.near_linear["end"]
    assert rule.step == 60.0


def test_sub_second_durations_have_no_step():
    rng = np.random.default_rng(0)
    sites = []
    for seed in (1, 2):
        frame = _visits(800, seed, "s", 90, clock="s")
        frame["end"] += pd.to_timedelta(rng.integers(0, 1000, len(frame)), "ms")
        sites.append(frame)
    rule = FITSSynthesizer(seed=0).fit(sites).schema_.near_linear["end"]
    assert rule.step is None
    assert "steps" not in rule.describe(clock=True)


def test_the_step_round_trips_and_a_users_step_is_checked():
    sites = [_visits(700, 1, "D", 14), _visits(500, 2, "D", 14)]
    synth = FITSSynthesizer(seed=0).fit(sites)
    doc = synth.schema_.to_dict()
    [entry] = [r for r in doc["rules"] if r["kind"] == "linear"]
    assert entry["step"] == DAY
    assert Schema.from_dict(doc).near_linear["end"].step == DAY
    # a step the data do not keep (a week) is refused at fit, naming the fix
    entry["step"] = 7 * DAY
    with pytest.raises(SchemaError, match='off its step.*remove its "step"'):
        FITSSynthesizer(seed=0, schema=Schema.from_dict(doc)).fit(sites)
    # no step: durations are drawn as before, continuous and rounded as the column is
    del entry["step"]
    free = FITSSynthesizer(seed=0, schema=Schema.from_dict(doc)).fit(sites)
    days = _durations(free.sample(2000, seed=1)) / DAY
    assert not np.all(days == np.round(days))


def test_a_step_on_two_number_columns_is_refused():
    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    frame = pd.DataFrame({"x": x, "y": 2 * x + rng.normal(scale=0.01, size=300)})
    doc = Schema.detect([frame], near_linear=False).to_dict()
    doc["rules"] = [
        Rule("y", ["x"], "linear", slope=2.0, intercept=0.0, lower=-1.0, upper=1.0,
             step=60.0).to_dict()
    ]  # fmt: skip
    with pytest.raises(SchemaError, match='"step" is the unit of a pair of datetime'):
        Schema.from_dict(doc)
