"""Zero-inflated continuous columns: the point mass is drawn as such, not smoothed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, Schema
from fits.core.continualization import at_value
from fits.evaluation import column_fidelity


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    # capital-gain-like: 0 for most rows, more often non-zero when x is large
    nonzero = rng.random(n) < 1 / (1 + np.exp(-(x - 1.5) * 2))
    gain = np.where(nonzero, np.round(np.exp(rng.normal(8, 0.7, n))), 0).astype(np.int64)
    return pd.DataFrame({"x": x, "gain": gain, "y": x + rng.normal(size=n)})


@pytest.fixture(scope="module")
def fitted():
    t = _table(4000, 0)
    clients = [t.iloc[:2000], t.iloc[2000:3200], t.iloc[3200:]]
    synth = FITSSynthesizer(seed=0).fit(clients)
    return t, synth, synth.sample(8000)


def test_point_mass_is_detected_and_round_trips(fitted):
    _, synth, _ = fitted
    spec = synth.schema_["gain"]
    assert spec.kind == "continuous" and spec.point_mass == 0.0
    assert synth.schema_["x"].point_mass is None
    order = synth.coordinator.schema.order
    assert order.index("gain (at point mass)") == order.index("gain") - 1
    assert Schema.from_json(synth.schema_.to_json()) == synth.schema_


def test_share_at_the_point_mass_and_its_dependence(fitted):
    real, _, out = fitted
    assert out["gain"].dtype == np.int64
    assert abs((out["gain"] == 0).mean() - (real["gain"] == 0).mean()) < 0.02
    # the non-zero values are not smeared towards zero (only kernel smoothing's tail)
    positive = out.loc[out["gain"] > 0, "gain"]
    assert (positive < real.loc[real["gain"] > 0, "gain"].min()).mean() < 0.03
    hi_real = (real.loc[real["x"] > 1.5, "gain"] > 0).mean()
    hi_syn = (out.loc[out["x"] > 1.5, "gain"] > 0).mean()
    assert abs(hi_real - hi_syn) < 0.08
    score = column_fidelity(real, out, {"x": "continuous", "gain": "continuous", "y": "continuous"})
    assert score.set_index("column").loc["gain", "score"] > 0.95


def test_small_spikes_stay_continuous():
    rng = np.random.default_rng(1)
    v = rng.normal(size=3000)
    v[:150] = 0.0  # 5%: below the point-mass share
    t = pd.DataFrame({"v": v, "w": rng.normal(size=3000)})
    synth = FITSSynthesizer(seed=0).fit([t.iloc[:1500], t.iloc[1500:]])
    assert synth.schema_["v"].point_mass is None


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
def test_a_point_mass_past_2_53_comes_back_exactly(dtype):
    """An integer column past 2**53 with many repeats of 2**60 + 7: the schema keeps
    the exact whole number as its point mass (JSON too), as it keeps its exact bounds,
    and synthetic rows at the point mass hold it exactly. It was kept as a float,
    2**60, so those rows held 2**60, 7 off, and a site counted its values within half
    the float spacing (128) of it as at the point mass too."""
    mass = 2**60 + 7
    sites = []
    for k in range(2):
        rng = np.random.default_rng(k)
        n = 400
        c = (2**60 + rng.integers(-(10**9), 10**9, n)).astype(dtype)
        c[rng.random(n) < 0.4] = mass
        c[:5] = mass + 100  # rounds to the same float as the mass, but is not it
        sites.append(pd.DataFrame({"x": rng.normal(size=n), "c": c}))
    schema = Schema.detect(sites, rules=False)
    assert schema["c"].point_mass == mass and isinstance(schema["c"].point_mass, int)
    assert float(mass + 100) == float(mass)
    assert Schema.from_json(schema.to_json())["c"].point_mass == mass
    synth = FITSSynthesizer(seed=0).fit(sites)
    assert synth.schema_["c"].point_mass == mass
    out = synth.sample(2000)["c"]
    assert str(out.dtype) == dtype
    values = [int(v) for v in out]
    share = sum(v == mass for v in values) / len(values)
    real = sum(int(v) == mass for s in sites for v in s["c"]) / sum(len(s) for s in sites)
    assert abs(share - real) < 0.05, (share, real)
    assert sum(v == 2**60 for v in values) < 10  # were the rows at the mass: 721
    # a site's rows at the point mass: exactly those at it, not mass + 100 (same float)
    raw = sites[0]["c"]
    at = at_value(raw, raw.to_numpy(dtype=float), mass)
    assert at.sum() == sum(int(v) == mass for v in raw) and not at[:5].any()
    # a schema given by hand, with the exact point mass, gives the same rows
    given = FITSSynthesizer(seed=0, schema=Schema.from_json(synth.schema_.to_json()))
    pd.testing.assert_series_equal(given.fit(sites).sample(2000)["c"], out)
