"""Zero-inflated continuous columns: the point mass is drawn as such, not smoothed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, Schema
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
