"""The collinearity guard of eq. 7 (``fits.core.cdf.solve_first_row``, docs/method.md).

Unit tests build S = sum_i w_i U_i U_i' (eq. 6) from rows with a known (near-)null
direction and compare the guarded q with the local-linear q of the reduced design,
computed independently (from the rows, by SVD or a null space, never from S's
eigenvectors).  End-to-end tests synthesize the Celsius / Fahrenheit table of issue 11.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.linalg import null_space

from fits import FITSSynthesizer
from fits.core.cdf import COLLINEARITY_THRESHOLD, collinear_first_row, solve_first_row


def _design(h: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones(len(h)), h - x])


def _s(h: np.ndarray, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """S(x) of eq. 6 for one query."""
    u = _design(h, x)
    return (u * w[:, None]).T @ u


def _reduced_q(h: np.ndarray, w: np.ndarray, x: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """q of the local-linear fit with design (1, basis'(h - x)), mapped back to (1, h - x).

    Eq. 7 on the reduced design: q_r = (T'ST)^-1 e1 with T = blockdiag(1, basis); the
    fit's weights are q_r'T'U_i = (T q_r)'U_i, so T q_r is the q to compare.
    """
    d, r = basis.shape
    t = np.zeros((d + 1, r + 1))
    t[0, 0] = 1.0
    t[1:, 1:] = basis
    s_r = t.T @ _s(h, w, x) @ t
    e1 = np.zeros(r + 1)
    e1[0] = 1.0
    return t @ np.linalg.solve(s_r, e1)


def _local_sd(h: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = w @ h / w.sum()
    return mean, np.sqrt(w @ (h - mean) ** 2)


def _rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.normal(3.0, 2.0, n)
    b = rng.normal(-1.0, 0.5, n)
    w = rng.random(n)
    return a, b, w


def test_exact_null_direction_is_the_reduced_design():
    """h3 = 2 h1 - 4 h2 + 7 exactly: q is the fit on the functionals a with a'Dn = 0."""
    a, b, w = _rows(200, 0)
    h = np.column_stack([a, b, 2 * a - 4 * b + 7])
    x = np.array([3.5, -0.7, 2.0])  # off the plane the rows lie in
    n = np.array([2.0, -4.0, -1.0])  # n'(h_i - hbar) = 0 for every row
    _, sd = _local_sd(h, w)
    basis = null_space((sd**2 * n)[None, :])  # the kept directions: a' D n = 0
    expected = _reduced_q(h, w, x, basis)
    s = _s(h, w, x)[None]
    got = solve_first_row(s)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    rows, q = collinear_first_row(s)
    assert rows.tolist() == [0]
    np.testing.assert_allclose(q[0], expected, rtol=1e-9, atol=1e-12)
    # sum_i w_i alpha_i = 1 (the CDF ends at 1) and the kept slope reproduces h1 - h3 / 2
    alpha = w * (_design(h, x) @ got)
    assert alpha.sum() == pytest.approx(1.0, abs=1e-12)


def test_near_null_direction_is_the_reduced_design():
    """h3 = h1 + 1e-4-sd noise: the guard drops the smallest local principal direction.

    The reference takes the principal directions from an SVD of the weighted,
    standardized, centred rows, not from S.
    """
    a, b, w = _rows(300, 1)
    rng = np.random.default_rng(2)
    h = np.column_stack([a, b, a + 1e-4 * a.std() * rng.normal(size=a.size)])
    x = np.array([2.0, -1.2, 2.3])
    mean, sd = _local_sd(h, w)
    z = np.sqrt(w)[:, None] * (h - mean) / sd
    _, sv, vt = np.linalg.svd(z, full_matrices=False)
    assert sv[-1] ** 2 < COLLINEARITY_THRESHOLD * sv[0] ** 2  # the guard must act
    basis = (vt[:-1] / sd).T  # D^-1/2 V_r
    expected = _reduced_q(h, w, x, basis)
    got = solve_first_row(_s(h, w, x)[None])[0]
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-10)
    # unguarded, the slope along the dropped direction is fitted to the noise: large q
    unguarded = solve_first_row(_s(h, w, x)[None], collinearity=0.0)[0]
    assert np.abs(unguarded[1:]).max() > 100 * np.abs(got[1:]).max()


def test_covariate_without_local_spread_is_dropped():
    """A covariate equal to one value (not the query's) for every weighted row."""
    a, _, w = _rows(100, 3)
    h = np.column_stack([a, np.full(a.size, 4.0)])
    x = np.array([2.5, 3.0])
    expected = _reduced_q(h, w, x, np.array([[1.0], [0.0]]))
    np.testing.assert_allclose(solve_first_row(_s(h, w, x)[None])[0], expected, rtol=1e-9)
    # and with no covariate spread at all: the local-constant fit e1 / S_00
    h0 = np.column_stack([np.full(a.size, 1.0), np.full(a.size, 4.0)])
    got = solve_first_row(_s(h0, w, x)[None])[0]
    np.testing.assert_allclose(got, [1.0 / w.sum(), 0.0, 0.0], rtol=1e-12, atol=1e-15)


def test_well_conditioned_designs_are_untouched():
    """No direction below the threshold: q is the ridged solve, bit for bit."""
    rng = np.random.default_rng(4)
    s = []
    for _ in range(50):
        # correlated covariates (about 0.4 to 0.6) on scales 1e-3 .. 1e4
        z = rng.normal(size=(80, 4))
        h = (z + 0.8 * z[:, :1]) * [1e-3, 1.0, 1e2, 1e4]
        s.append(_s(h, rng.random(80), rng.normal(size=4)))
    s = np.array(s)
    rows, _ = collinear_first_row(s)
    assert rows.size == 0
    np.testing.assert_array_equal(solve_first_row(s), solve_first_row(s, collinearity=0.0))


def test_guard_is_scale_invariant_and_vectorized():
    """Rescaling covariates (U -> A U) maps q to A^-1 q; scaling S leaves the choice.

    A batch mixing guarded and unguarded queries gives each query its own answer.
    """
    a, b, w = _rows(150, 5)
    rng = np.random.default_rng(6)
    h_bad = np.column_stack([a, b, a + 1e-5 * rng.normal(size=a.size)])
    h_good = np.column_stack([a, b, rng.normal(size=a.size)])
    x = np.array([3.1, -0.8, 3.0])
    s = np.array([_s(h_bad, w, x), _s(h_good, w, x), _s(h_bad, w, x + 0.5)])
    q = solve_first_row(s)
    rows, _ = collinear_first_row(s)
    assert rows.tolist() == [0, 2]
    for i in range(3):
        np.testing.assert_array_equal(q[i], solve_first_row(s[i : i + 1])[0])
    scales = np.array([1.0, 1e4, 1e-3, 50.0])
    s_scaled = s * scales[None, :, None] * scales[None, None, :] * 1e-6
    q_scaled = solve_first_row(s_scaled)
    np.testing.assert_allclose(q_scaled * scales * 1e-6, q, rtol=1e-6)


def _temperature_table(n: int, seed: int, fahrenheit: str | None) -> pd.DataFrame:
    """Issue 11: C ~ N(20, 5), F from C (rounded, exact or near copy), y = 0.5 C + N(0, 1)."""
    rng = np.random.default_rng(seed)
    c = rng.normal(20.0, 5.0, n)
    cols = {"C": c}
    if fahrenheit == "rounded":
        cols["F"] = np.round(c * 9 / 5 + 32, 2)
    elif fahrenheit == "duplicate":
        cols["F"] = c.copy()
    elif fahrenheit == "near-duplicate":
        cols["F"] = c + 1e-9 * rng.normal(size=n)
    cols["y"] = 0.5 * c + rng.normal(size=n)
    return pd.DataFrame(cols)


def _residual_sd(table: pd.DataFrame) -> float:
    """sd of the residuals of y ~ 1 + C by least squares."""
    design = np.column_stack([np.ones(len(table)), table["C"].to_numpy(float)])
    y = table["y"].to_numpy(float)
    beta = np.linalg.lstsq(design, y, rcond=None)[0]
    return float(np.std(y - design @ beta))


def _synthesize(table: pd.DataFrame, kernel: str, **options: object):
    n = len(table)
    sites = [table.iloc[: n // 2], table.iloc[n // 2 : 3 * n // 4], table.iloc[3 * n // 4 :]]
    # rules off: these tests are about the estimator's guard; with rules on, F is an
    # affine rule of C and leaves the chain (tests/test_affine.py)
    options = {"rules": False, **options}
    synth = FITSSynthesizer(kernel, seed=1, **options).fit(sites)  # type: ignore[arg-type]
    return synth, synth.sample(n)


@pytest.mark.parametrize("kernel", ["knn", "gaussian"])
@pytest.mark.parametrize("fahrenheit", ["rounded", "duplicate", "near-duplicate"])
def test_fahrenheit_column_does_not_inflate_the_residual(kernel, fahrenheit):
    """Issue 11: the residual sd of y given C stays within 20% of the real one."""
    real = _temperature_table(3000, 0, fahrenheit)
    synth, synthetic = _synthesize(real, kernel)
    ratio = _residual_sd(synthetic) / _residual_sd(real)
    assert 0.8 < ratio < 1.2, ratio
    assert synth.coordinator.guarded > 0  # the guard, not luck, keeps it right
    # and y is not piled at its bounds
    y = synthetic["y"].to_numpy()
    assert np.mean((y == real["y"].min()) | (y == real["y"].max())) < 0.005


def test_without_the_guard_the_rounded_fahrenheit_column_inflates_the_residual():
    """The failure the guard mends (issue 11: 2.2 instead of 1.0): this test can fail."""
    real = _temperature_table(3000, 0, "rounded")
    _, synthetic = _synthesize(real, "knn", collinearity=0.0)
    assert _residual_sd(synthetic) / _residual_sd(real) > 1.5


def test_guard_setting_is_validated():
    with pytest.raises(ValueError, match="collinearity"):
        _synthesize(_temperature_table(200, 0, None), "knn", collinearity=1.0)
