"""Discrete columns drawn from category masses (Corollary 5.4) or by grid interpolation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.cdf import inverse_masses, mass_grid, masses_from_cdf
from fits.core.continualization import Encoder
from fits.core.schema import ColumnSpec


def test_masses_recovered_from_a_piecewise_linear_lifted_cdf():
    enc = Encoder(ColumnSpec("o", "ordinal", "int", [1, 2, 5]))  # widths 1, 1, 3
    p = np.array([0.2, 0.5, 0.3])
    offset = 0.1
    z = mass_grid(enc, offset)
    b = enc.boundaries
    # the lifted CDF: cumulative mass, linear inside each interval
    cum = np.concatenate([[0], np.cumsum(p)])
    level = np.searchsorted(b, z) - 1
    f = cum[level] + p[level] * (z - b[level]) / enc.widths[level]
    got, bad = masses_from_cdf(f[None, :], offset)
    np.testing.assert_allclose(got[0], p)
    assert not bad[0]
    # negative differences are clipped, empty rows flagged
    got, bad = masses_from_cdf(np.array([[0.5, 0.4, 0.4, 0.9, 0.9, 0.9]]), offset)
    np.testing.assert_allclose(got[0], [0, 1, 0])
    _, bad = masses_from_cdf(np.zeros((1, 6)), offset)
    assert bad[0]


def test_inverse_masses():
    p = np.tile([0.2, 0.5, 0.3], (4, 1))
    b = np.array([0.0, 1.0, 2.0, 3.0])
    y = inverse_masses(p, b, np.array([0.1, 0.2, 0.7, 0.95]))
    np.testing.assert_allclose(y, [0.5, 1.0, 2.0, 2.0 + 0.25 / 0.3])
    # every draw lies in its category's open-closed interval
    rng = np.random.default_rng(0)
    u = rng.random(100_000)
    y = inverse_masses(np.broadcast_to(p[0], (u.size, 3)), b, u)
    codes = np.searchsorted(b, y, side="left") - 1
    np.testing.assert_allclose(np.bincount(codes) / u.size, p[0], atol=0.01)


@pytest.mark.parametrize("bandwidth", [0.05, 0.005])
def test_marginal_masses_match_category_shares(mixed_clients, bandwidth):
    synth = FITSSynthesizer(seed=0, discrete_response_bandwidth=bandwidth).fit(mixed_clients)
    pooled = pd.concat(mixed_clients)
    share = pooled["c"].value_counts(normalize=True).sort_index().to_numpy()
    got = synth.coordinator.marginal_masses("c")
    tol = 0.05 if bandwidth == 0.05 else 0.015
    np.testing.assert_allclose(got, share, atol=tol)


@pytest.mark.parametrize("mode", ["mass", "grid"])
def test_both_modes_keep_category_frequencies(mode):
    rng = np.random.default_rng(3)
    n = 3000
    g = rng.choice(["a", "b", "c", "d"], n, p=[0.55, 0.25, 0.15, 0.05])
    x = rng.normal(size=n) + (g == "b") * 2.0
    frame = pd.DataFrame({"g": g, "x": x})
    clients = [frame.iloc[:1500], frame.iloc[1500:2500], frame.iloc[2500:]]
    out = FITSSynthesizer(seed=0, discrete_sampling=mode).fit(clients).sample(6000)
    got = out["g"].value_counts(normalize=True).sort_index()
    want = frame["g"].value_counts(normalize=True).sort_index()
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), atol=0.03)
    assert set(out["g"]) <= {"a", "b", "c", "d"}


def test_conditional_masses_follow_the_covariate():
    rng = np.random.default_rng(4)
    n = 4000
    x = rng.normal(size=n)
    g = np.where(x + 0.3 * rng.normal(size=n) > 0, "hi", "lo")
    frame = pd.DataFrame({"x": x, "g": g})
    synth = FITSSynthesizer(seed=0).fit([frame.iloc[:2500], frame.iloc[2500:]])
    p = synth.coordinator.conditional_masses("g", np.array([[-2.0], [0.0], [2.0]]))
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert p[0, 1] > 0.95 and p[2, 0] > 0.95 and 0.3 < p[1, 0] < 0.7  # labels sorted
