"""The share of missing values of a continuous column is kept with many covariates.

A continuous column with missing values is drawn after its missingness indicator
``"<column> (missing)"``, whose category masses come from the local-linear fit
(Corollary 5.4), clipped at 0 and normalized.  With the Gaussian kernel's fixed
bandwidth and many covariates the fit rests on few effective rows, its masses are noisy
and fall below 0 at some queries, and clipping them raised the synthetic missing share
(14.1% became 18.2% with 12 covariates below).  Every site now weighs its rows for an indicator
with the KNN scheme (:data:`~fits.federation.coordinator.MISSING_INDICATOR_SCHEME`);
docs/benchmarks.md, "Missing shares with many covariates".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.federation.coordinator import MISSING_INDICATOR_SCHEME

D = 13  # columns; the last has missing values, so its indicator has 12 covariates
FLAG = f"x{D - 1} (missing)"


def _rows(n: int, rng: np.random.Generator, loadings: np.ndarray) -> np.ndarray:
    """Correlated continuous columns: two factors plus noise."""
    return rng.normal(size=(n, 2)) @ loadings + 0.7 * rng.normal(size=(n, D))


@pytest.fixture(scope="module")
def federation():
    rng = np.random.default_rng(2)
    loadings = rng.normal(size=(2, D))
    table = pd.DataFrame(_rows(1500, rng, loadings), columns=[f"x{j}" for j in range(D)])
    table.loc[rng.random(len(table)) < 0.12, f"x{D - 1}"] = np.nan  # completely at random
    sites = [table.iloc[k::3].reset_index(drop=True) for k in range(3)]
    queries = _rows(1500, rng, loadings)[:, : D - 1]  # fresh rows of the same law
    return table, sites, queries


@pytest.fixture(scope="module")
def gaussian(federation):
    _, sites, _ = federation
    return FITSSynthesizer(kernel="gaussian", seed=0).fit(sites, rows=1500)


def test_missing_share_is_kept_with_many_covariates(federation, gaussian):
    """The mean over fresh query rows of the estimated P(missing | x) is the missing
    share the synthetic table will have; it stays within 3 sampling sds of the real
    share (0.141 against 0.141; before: 0.182, +4.6 sds)."""
    table, _, queries = federation
    share = table[f"x{D - 1}"].isna().mean()
    masses = gaussian.coordinator.conditional_masses(FLAG, queries)
    sd = np.sqrt(share * (1 - share) / len(table))
    assert abs(masses[:, 1].mean() - share) < 3 * sd, (masses[:, 1].mean(), share)


def test_gaussian_sites_answer_an_indicator_as_knn_sites(federation, gaussian):
    """Gaussian sites weigh their rows for the indicator with the KNN scheme, so their
    masses are a KNN federation's, bit for bit; the column itself keeps their kernel."""
    _, sites, queries = federation
    knn = FITSSynthesizer(kernel="knn", seed=0).fit(sites, rows=1500)
    assert MISSING_INDICATOR_SCHEME == "knn"
    assert gaussian.coordinator.scheme(FLAG) == "knn"
    assert gaussian.coordinator.scheme(f"x{D - 1}") == "own"
    np.testing.assert_array_equal(
        gaussian.coordinator.conditional_masses(FLAG, queries[:200]),
        knn.coordinator.conditional_masses(FLAG, queries[:200]),
    )
    x = np.column_stack([queries[:50], np.ones(50)])  # the indicator says: present
    own = gaussian.coordinator.conditional_cdf(f"x{D - 1}", x)
    assert not np.array_equal(own, knn.coordinator.conditional_cdf(f"x{D - 1}", x))


def test_tuning_scores_an_indicator_under_the_knn_scheme():
    """``smoothing="auto"`` scores the indicator's candidates with the kernel it is drawn
    with: a Gaussian federation's scores for it are a KNN federation's, bit for bit,
    while the column itself is scored under each site's own kernel."""
    rng = np.random.default_rng(3)
    table = pd.DataFrame(rng.normal(size=(240, 3)), columns=["a", "b", "c"])
    table["c"] += table["a"]
    table.loc[rng.random(240) < 0.15, "c"] = np.nan
    sites = [table.iloc[k::2].reset_index(drop=True) for k in range(2)]
    tuned = {
        kernel: FITSSynthesizer(kernel=kernel, smoothing="auto", seed=0).fit(sites).tuning_
        for kernel in ("gaussian", "knn")
    }
    assert tuned["gaussian"]["c (missing)"] == tuned["knn"]["c (missing)"]
    assert tuned["gaussian"]["c"]["scores"] != tuned["knn"]["c"]["scores"]
