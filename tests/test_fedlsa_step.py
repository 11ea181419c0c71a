"""The default step of regime "paper" (fits.analysis.lsa.paper_step_size, 2026-12-05).

The bootstrap multiplies each update by w with E w^2 = 2, so at a finite step its
conditional variance exceeds the real iterate's by ``1 / (1 - x)``,
``x = eta E[s^2] / E[s]`` (module docstring, "Step sizes").  The old default
``E[s] / (2 E[s^2])`` had x = 1/2 (standard errors 41% too large on one site); the new one
keeps x at STEP_X = 0.04 unless the run would not forget its start.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fits.analysis.lsa import (
    FORGET_HORIZON,
    STEP_X,
    Schedule,
    bootstrap_variance_inflation,
    bootstrap_weights,
    default_step_size,
    fedlsa_arrays,
    local_updates,
    paper_step_size,
)


def _stationary_1d(eta: float, kurtosis: float, ew2: float, sigma2: float = 1.0) -> float:
    """Exact stationary variance about theta_star of ``theta <- theta - eta w z (z theta - y)``
    in one dimension (E z^2 = 1, E z^4 = kurtosis, noise variance sigma2), by iterating its
    second-moment recursion ``v <- (1 - 2 eta + ew2 eta^2 kurtosis) v + ew2 eta^2 sigma2``."""
    v = 0.0
    factor = 1.0 - 2.0 * eta + ew2 * eta**2 * kurtosis
    for _ in range(200_000):
        new = factor * v + ew2 * eta**2 * sigma2
        if abs(new - v) <= 1e-15 * new:
            break
        v = new
    return v


@pytest.mark.parametrize("x", [0.5, 0.25, STEP_X])
def test_bootstrap_inflation_is_one_over_one_minus_x_in_1d(x: float) -> None:
    kurtosis = 3.0  # Gaussian rows: E s^2 / E s = 3
    eta = x / kurtosis
    real = _stationary_1d(eta, kurtosis, 1.0)
    boot = _stationary_1d(eta, kurtosis, 2.0)  # about theta_star; E[theta^b | data] = theta
    assert real == pytest.approx(eta / (2 - x), rel=1e-9)
    assert (boot - real) / real == pytest.approx(bootstrap_variance_inflation(x), rel=1e-9)
    assert bootstrap_variance_inflation(x) == pytest.approx(1 / (1 - x))


def test_the_old_default_doubles_the_bootstrap_variance_and_the_new_one_does_not() -> None:
    rng = np.random.default_rng(0)
    z = np.column_stack([np.ones(50_000), rng.normal(size=(50_000, 2))])
    s = np.sum(z**2, axis=1)
    m1, m2 = s.mean(), np.mean(s**2)
    old = default_step_size(m1, m2)
    new = paper_step_size(m1, m2, Schedule(200, 1.0, 10))
    assert bootstrap_variance_inflation(old * m2 / m1) == pytest.approx(2.0)
    assert new * m2 / m1 == pytest.approx(STEP_X)
    assert bootstrap_variance_inflation(new * m2 / m1) <= 1.0 / (1.0 - STEP_X) + 1e-12
    assert math.sqrt(bootstrap_variance_inflation(STEP_X)) < 1.022  # se within about 2%


def test_simulated_bootstrap_variance_matches_the_closed_form_in_1d() -> None:
    """Batch simulation through the sites' own update: 3,000 replications of 400 single-row
    steps (one site), 20 bootstrap sequences each."""
    rng = np.random.default_rng(5)
    r, m, steps = 3000, 20, 400
    for x, tol in ((0.5, 0.15), (STEP_X, 0.06)):
        eta = x / 3.0
        theta = np.zeros((r, m + 1, 1))
        for _ in range(steps // 20):
            z = rng.normal(size=(r, 20, 1))
            y = z[..., 0] * 1.5 + rng.normal(size=(r, 20))
            w = bootstrap_weights(rng, (r, 20, m + 1))
            w[..., 0] = 1.0
            theta = local_updates(theta, z, y, eta, w)
        real = theta[:, 0, 0].var(ddof=1)
        boot = np.mean(theta[:, 1:, 0].var(axis=1, ddof=1))
        assert boot / real == pytest.approx(1 / (1 - x), rel=tol), (x, boot / real)


def test_paper_step_rule_forgets_the_start_and_stays_below_the_contraction_step() -> None:
    m1, m2 = 3.0, 13.0  # intercept and two Gaussian features, whitened
    contraction = default_step_size(m1, m2)
    # long run: the inflation step, whose horizon is already past FORGET_HORIZON
    eta = paper_step_size(m1, m2, Schedule(200, 1.0, 10))
    assert eta == pytest.approx(STEP_X * m1 / m2) and eta * 2000 >= FORGET_HORIZON
    # too few steps for it: raised until a sum eta_t H_t = FORGET_HORIZON ...
    eta = paper_step_size(m1, m2, Schedule(100, 1.0, 10))
    assert eta * 1000 == pytest.approx(FORGET_HORIZON) and STEP_X * m1 / m2 < eta < contraction
    # ... on the raw design's rate a too, but never above the contraction step
    assert paper_step_size(m1, m2, Schedule(100, 1.0, 10), a=0.5) == pytest.approx(0.02)
    assert paper_step_size(m1, m2, Schedule(20, 1.0, 3)) == pytest.approx(contraction)
    # S2: the rule is on the last step eta_T = eta (1 + T)^-gamma_eta
    s2 = Schedule(20, 1.0, 100, gamma_eta=0.6)
    eta = paper_step_size(m1, m2, s2)
    assert eta * s2.eta(20) * m2 / m1 == pytest.approx(STEP_X)
    assert eta * float(np.sum(s2.etas() * s2.hs())) >= FORGET_HORIZON
    assert paper_step_size(m1, m2, Schedule(400, 1.0, 20, gamma_eta=0.5)) == contraction


def test_fedlsa_default_step_keeps_the_bootstrap_inflation_small_and_forgets() -> None:
    """Fails on the old default E[s] / (2 E[s^2]), whose x is 1/2."""
    rng = np.random.default_rng(2)
    xs = [np.column_stack([np.ones(n), rng.normal(size=(n, 2))]) for n in (2500, 2200, 2100)]
    ys = [x @ np.array([1.0, 2.0, -0.5]) + rng.normal(size=len(x)) for x in xs]
    res = fedlsa_arrays(xs, ys, rounds=200, local_steps=10, n_bootstrap=50, seed=1)
    pooled = np.vstack(xs)
    s = np.einsum("ij,jk,ik->i", pooled, np.linalg.inv(pooled.T @ pooled / len(pooled)), pooled)
    x = res.schedule.step_size * np.mean(s**2) / s.mean()
    assert x == pytest.approx(STEP_X)
    assert res.schedule.step_size * 2000 >= FORGET_HORIZON and res.converged
    assert np.all(np.isfinite(res.coef_))
    ols = np.linalg.lstsq(pooled, np.concatenate(ys), rcond=None)[0]
    assert np.all(np.abs(res.coef_ - ols) < 5 * res.bse.to_numpy())
