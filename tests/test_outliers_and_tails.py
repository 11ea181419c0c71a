"""Continuous columns with an outlier or a long tail (docs/method.md, "The response
bandwidth's scale, grids that follow the data, and draws within the bounds").

A tester's table: incomes around 20,000 at two sites, one holding a typo of 1e8. With
the sd-scaled response bandwidth, the equally spaced grid and draws clipped to the
bounds, 48.7% of the synthetic incomes were the real minimum exactly, and 38% lay above
60,000 (real: 2.2%).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import iqr

from fits import FITSSynthesizer
from fits.core.cdf import HEAVY_CELL, SPLIT_MAX, refine_grid, reflected, response_scale


def test_response_scale_is_the_smaller_of_the_sd_and_the_normal_iqr():
    rng = np.random.default_rng(0)
    normal = rng.normal(5.0, 2.0, 4000)
    assert response_scale(normal) == pytest.approx(min(normal.std(), iqr(normal) / 1.349), 1e-3)
    assert response_scale(normal) == pytest.approx(2.0, rel=0.05)
    typo = np.append(rng.normal(20_000, 5_000, 299), 1e8)  # the sd is 5.8 million
    assert response_scale(typo) == pytest.approx(iqr(typo) / 1.3489795003921634)
    assert response_scale(typo) < 10_000 < typo.std()
    mostly_zero = np.append(np.zeros(80), rng.normal(size=20))  # IQR 0: the sd
    assert response_scale(mostly_zero) == pytest.approx(mostly_zero.std())
    assert response_scale(np.full(5, 3.0)) == 1.0 and response_scale(np.array([])) == 1.0


def test_refine_grid_splits_the_heavy_cells_only():
    grid = np.linspace(0.0, 300.0, 301)  # G = 300 cells of 1
    cdf = np.clip((grid - 10.0) / 2.0, 0.0, 1.0)  # all the mass in cells 10 and 11
    out = refine_grid(grid, cdf, 300, 600)
    assert out is not None and set(grid) <= set(out)
    added = np.setdiff1d(out, grid)
    assert added.size == 2 * (SPLIT_MAX - 1)  # each cell holds 1/2 > 8/300: 32 pieces
    assert np.all((added > 10.0) & (added < 12.0))
    even = np.linspace(0.0, 1.0, 301)  # every cell 1/300 of the mass: nothing to split
    assert refine_grid(grid, even, 300, 600) is None
    assert refine_grid(grid, cdf, 300, 301) is None  # no room within the limit
    capped = refine_grid(grid, cdf, 300, 321)
    assert capped is not None and capped.size <= 321
    light = np.clip((grid - 10.0) / (300.0 / (HEAVY_CELL - 1)), 0.0, 1.0)  # cells at 7/G
    assert refine_grid(grid, light, 300, 600) is None


def test_reflected_mirrors_draws_beyond_the_bounds():
    v = np.array([-1.0, 0.0, 0.5, 1.0, 1.25, 7.0, -9.0])
    np.testing.assert_allclose(reflected(v, 0.0, 1.0), [1.0, 0.0, 0.5, 1.0, 0.75, 0.0, 0.0])


def _typo_sites() -> list[pd.DataFrame]:
    rng = np.random.default_rng(0)
    out = []
    for n in (300, 200):
        income = np.round(rng.lognormal(10, 0.5, n), 2)
        out.append(pd.DataFrame({"age": rng.integers(18, 90, n), "income": income}))
    out[0].loc[0, "income"] = 1e8
    return out


@pytest.mark.parametrize("kernel", ["knn", "gaussian"])
def test_one_outlier_does_not_wreck_the_column(kernel):
    sites = _typo_sites()
    real = pd.concat(sites)["income"]
    synth = FITSSynthesizer(kernel=kernel, seed=0).fit(sites)
    got = synth.sample(3000)["income"]
    assert (got == real.min()).mean() < 0.01  # was 48.7%
    assert abs((got > 60_000).mean() - (real > 60_000).mean()) < 0.02  # was 38% vs 2.2%
    for q in (0.25, 0.5, 0.75):
        assert got.quantile(q) == pytest.approx(real.quantile(q), rel=0.15)
    # the site holding the typo scales its response bandwidth by the IQR, not the sd
    client = synth.coordinator.transport._clients[0]
    j = client.columns.index("income")
    held = client.z[client.valid[:, j], j]
    assert client.wz[0, j] == pytest.approx(0.05 * iqr(held) / 1.3489795003921634)


def test_a_dense_minimum_keeps_no_atom_and_stays_dense():
    """An exponential column: clipped draws put 2.3% of the rows on the minimum (real:
    one row); reflected ones put none there and keep the first percentile."""
    rng = np.random.default_rng(1)
    table = pd.DataFrame(
        {"k": rng.integers(0, 5, 2500), "v": np.round(rng.exponential(1000, 2500), 2)}
    )
    sites = [table.iloc[:1500], table.iloc[1500:]]
    got = FITSSynthesizer(seed=0).fit(sites).sample(2500)["v"]
    assert (got == table["v"].min()).mean() < 0.002
    assert got.quantile(0.01) == pytest.approx(table["v"].quantile(0.01), rel=0.5)
    assert got.quantile(0.5) == pytest.approx(table["v"].quantile(0.5), rel=0.15)


def test_adapted_grids_stay_within_the_sites_max_grid_size():
    """The split grids hold at most 2G points and no more than any site's policy allows
    (a larger grid would be refused by that site)."""
    from fits.federation.policy import SitePolicy

    sites = _typo_sites()
    policy = {"client 1": SitePolicy(max_grid_size=320)}
    synth = FITSSynthesizer(seed=0, site_policy=policy, grid_points=None).fit(sites)
    grid = synth.coordinator.grids["income"]
    assert 300 < grid.size <= 320
    assert (synth.sample(500)["income"] > 60_000).mean() < 0.1


# ------------------------------------------------------------- outliers in a covariate
def test_covariate_scale_is_the_normal_consistent_trimmed_sd():
    """Checked against scipy's truncated normal: the sd of a standard normal cut at its
    alpha and 1 - alpha quantiles is what the trimmed sd is divided by."""
    from scipy.stats import norm, truncnorm

    from fits.core.kernels import TRIM_MIN_VALUES, TRIM_SHARE, covariate_scale

    rng = np.random.default_rng(2)
    x = rng.normal(3.0, 2.0, 3000)
    k = int(TRIM_SHARE * x.size)  # 15 values cut at each end
    z = norm.ppf(1 - k / x.size)
    expected = np.sort(x)[k:-k].std() / truncnorm(-z, z).std()
    assert covariate_scale(x) == pytest.approx(min(x.std(), expected), rel=1e-12)
    assert covariate_scale(x) == pytest.approx(2.0, rel=0.05)
    typo = x.copy()
    typo[7] = 1e8  # the sd is 1.8 million; the scale stays near 2
    assert covariate_scale(typo) == pytest.approx(covariate_scale(x), rel=0.01)
    small = rng.normal(size=TRIM_MIN_VALUES - 1)  # too few to trim: the plain sd
    assert covariate_scale(small) == small.std()
    assert covariate_scale(np.full(40, 7.0)) == 1.0
    spiky = np.append(np.full(600, 40.0), rng.normal(40, 17, 600))  # hours per week
    assert covariate_scale(spiky) == pytest.approx(spiky.std(), rel=0.05)  # not the IQR's


def _spending_sites(typo: bool) -> list[pd.DataFrame]:
    rng = np.random.default_rng(0)
    out = []
    for n in (300, 200):
        income = rng.lognormal(10, 0.4, n)
        age = rng.uniform(20, 65, n)
        spend = 0.3 * income + 200 * age + rng.normal(0, 2000, n)
        out.append(pd.DataFrame({"income": income, "age": age, "spend": spend}))
    if typo:
        out[0].loc[5, "income"] = 1e8
    return out


def test_an_outlier_in_a_covariate_keeps_its_dependence():
    """The site holding the typo standardized income by an sd of 5.8 million, so income
    took no part in its kernel distances: the synthetic corr(income, spend) fell from
    0.62 (without the typo) to 0.55 (real: 0.68). The trimmed scale keeps it."""
    corrs = []
    for typo in (False, True):
        synth = FITSSynthesizer(seed=0).fit(_spending_sites(typo))
        got = synth.sample(2000)
        got = got[got["income"] < 1e6]  # the typo's neighbourhood: a handful of rows
        corrs.append(got["income"].corr(got["spend"]))
    assert corrs[1] == pytest.approx(corrs[0], abs=0.02)
    client = synth.coordinator.transport._clients[0]
    j = client.columns.index("income")
    assert client.scale[j] < 20_000  # was the sd, 5.8 million
