"""Nearly collinear features in a federated GLM: the variance inflation factors from the
pooled Fisher information, against statsmodels as an independent oracle, and the
warning a new user's table (a weight in kilograms and in pounds) gets."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.outliers_influence import variance_inflation_factor

from fits.analysis.design import INTERCEPT
from fits.analysis.glm import VIF_WARN, GLMWarning, fit_glm, variance_inflation


def test_the_factors_are_statsmodels_on_an_unweighted_design():
    rng = np.random.default_rng(0)
    n = 500
    a = rng.normal(size=n)
    b = 0.9 * a + rng.normal(scale=0.3, size=n)
    c = rng.normal(size=n)
    x = np.column_stack([np.ones(n), a, b, c])
    ours = variance_inflation(x.T @ x, [INTERCEPT, "a", "b", "c"])
    oracle = [variance_inflation_factor(x, j) for j in (1, 2, 3)]
    np.testing.assert_allclose(ours.to_numpy(), oracle, rtol=1e-9)
    assert list(ours.index) == ["a", "b", "c"]


def test_weights_enter_as_a_weighted_regression():
    """With Hessian weights W, VIF_j = 1 / (1 - R_j^2) of the W-weighted least squares
    of feature j on the others and the intercept (computed here by lstsq)."""
    rng = np.random.default_rng(1)
    n = 400
    x = np.column_stack([np.ones(n), rng.normal(size=(n, 3))])
    x[:, 3] += x[:, 1]
    w = rng.uniform(0.05, 0.25, n)
    ours = variance_inflation(x.T @ (w[:, None] * x), [INTERCEPT, "p", "q", "r"])
    sw = np.sqrt(w)
    for j, name in ((1, "p"), (2, "q"), (3, "r")):
        others = [k for k in range(4) if k != j]
        coef = np.linalg.lstsq(sw[:, None] * x[:, others], sw * x[:, j], rcond=None)[0]
        resid = x[:, j] - x[:, others] @ coef
        mean = np.sum(w * x[:, j]) / w.sum()
        r2 = 1 - np.sum(w * resid**2) / np.sum(w * (x[:, j] - mean) ** 2)
        assert ours[name] == pytest.approx(1 / (1 - r2), rel=1e-9)


def _sites(with_pounds: bool) -> list[pd.DataFrame]:
    rng = np.random.default_rng(2)
    out = []
    for n in (300, 200):
        kg = np.round(rng.normal(75, 12, n), 1)
        age = rng.integers(20, 80, n)
        frame = pd.DataFrame({"age": age, "weight_kg": kg})
        if with_pounds:
            frame["weight_lb"] = np.round(kg * 2.20462, 1)
        eta = -4 + 0.03 * age + 0.02 * kg
        frame["sick"] = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
        out.append(frame)
    return out


def test_a_weight_in_two_units_is_told_and_one_unit_is_not():
    with pytest.warns(GLMWarning, match="nearly collinear features: 'weight_(kg|lb)'"):
        res = fit_glm(_sites(True), "sick", family="logistic")
    [note] = [w for w in res.warnings if "nearly collinear" in w]
    assert "'weight_kg'" in note and "'weight_lb'" in note and "'age'" not in note
    with warnings.catch_warnings():
        warnings.simplefilter("error", GLMWarning)
        res = fit_glm(_sites(False), "sick", family="logistic")
    assert not any("nearly collinear" in w for w in res.warnings)


def test_the_threshold_is_r2_of_0999():
    assert VIF_WARN == pytest.approx(1 / (1 - 0.999))
