"""FedLSA with the online multiplier bootstrap (fits.analysis.lsa) and the inference check."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.analysis.inference import ci_overlap, inference_check, ols_hc1
from fits.analysis.lsa import (
    W_MAX,
    W_MIN,
    ArraySite,
    FedLSAError,
    FedLSAResults,
    OnePassSchedule,
    Schedule,
    _intervals,
    batch_step,
    bootstrap_weights,
    fedlsa,
    fedlsa_arrays,
    local_updates,
    run_fedlsa,
)
from fits.federation.protocol import Message, ProtocolError, check_reply
from fits.federation.transport import InProcessTransport

from conftest import fits_in_process, mixed_table, split


def hetero_sites(sizes, seed=0, d_extra=2, beta_shift=0.6):
    """Sites with different sizes, feature distributions and local coefficients."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c, n in enumerate(sizes):
        z = rng.normal(loc=1.5 * c - 1.0, scale=0.5 + 0.7 * c, size=(n, d_extra))
        x = np.column_stack([np.ones(n), z])
        beta = np.array([1.0, 2.0, -1.0][: d_extra + 1]) + beta_shift * c * np.arange(
            1, d_extra + 2
        )
        y = x @ beta + rng.normal(size=n) * (1.0 + 0.3 * np.abs(z[:, 0]))
        xs.append(x)
        ys.append(y)
    return xs, ys


def pooled_ols(xs, ys):
    return np.linalg.lstsq(np.vstack(xs), np.concatenate(ys), rcond=None)[0]


def equal_weight_target(xs, ys):
    """(mean_c Abar^c)^-1 (mean_c bbar^c): the fixed point of the paper's 1/N average."""
    a = np.mean([x.T @ x / len(x) for x in xs], axis=0)
    b = np.mean([x.T @ y / len(x) for x, y in zip(xs, ys, strict=True)], axis=0)
    return np.linalg.solve(a, b)


# --------------------------------------------------------------------------- core
def test_local_updates_equal_a_plain_loop_for_every_sequence_and_batch():
    rng = np.random.default_rng(1)
    batch, s, h, d = 3, 4, 6, 3
    theta = rng.normal(size=(batch, s, d))
    x = rng.normal(size=(batch, h, d))
    y = rng.normal(size=(batch, h))
    w = rng.uniform(0.1, 3.0, size=(batch, h, s))
    out = local_updates(theta, x, y, 0.05, w)
    for r in range(batch):
        for k in range(s):
            th = theta[r, k].copy()
            for j in range(h):  # eq. 6 with the multiplier weight of section 6
                a = np.outer(x[r, j], x[r, j])
                b = x[r, j] * y[r, j]
                th = th - 0.05 * w[r, j, k] * (a @ th - b)
            np.testing.assert_allclose(out[r, k], th, rtol=1e-12, atol=1e-12)
    # unweighted = weights of one; the input is not changed
    np.testing.assert_array_equal(
        local_updates(theta, x, y, 0.05), local_updates(theta, x, y, 0.05, np.ones_like(w))
    )
    assert not np.shares_memory(out, theta)


def test_bootstrap_weights_have_mean_one_variance_one_and_are_bounded():
    w = bootstrap_weights(np.random.default_rng(0), 1_000_000)
    assert abs(w.mean() - 1.0) < 3e-3
    assert abs(w.var() - 1.0) < 1e-2
    assert w.min() > W_MIN and w.max() < W_MAX
    assert 0 < W_MIN < 0.07 and 4.7 < W_MAX < 4.75  # 1 -/+ (0.2 | 0.8) / sd(Beta(.5, 2))


def test_schedule_regimes_follow_the_paper():
    s1 = Schedule(rounds=5, step_size=0.1, local_steps=3)
    assert s1.regime == "constant" and s1.total_local_steps == 15
    np.testing.assert_allclose(s1.etas(), 0.1)
    s2 = Schedule(rounds=4, step_size=0.2, local_steps=5, gamma_eta=0.6, gamma_h=0.2)
    t = np.arange(1, 5)
    np.testing.assert_allclose(s2.etas(), 0.2 * (1.0 + t) ** -0.6)
    np.testing.assert_array_equal(s2.hs(), np.ceil(5 * (1.0 + t) ** 0.2).astype(int))
    with pytest.raises(FedLSAError, match="gamma_eta"):
        Schedule(rounds=4, step_size=0.2, local_steps=5, gamma_eta=0.3)
    with pytest.raises(FedLSAError, match="gamma_h"):
        Schedule(rounds=4, step_size=0.2, local_steps=5, gamma_eta=0.6, gamma_h=0.7)
    with pytest.raises(FedLSAError, match="rounds"):
        Schedule(rounds=0, step_size=0.2, local_steps=5)


# --------------------------------------------------------------------------- the target
def test_estimate_approaches_the_pooled_least_squares_fit_as_t_grows():
    xs, ys = hetero_sites([300, 1200, 4000], seed=2)
    ols = pooled_ols(xs, ys)
    errs = []
    for rounds in (20, 200, 2000):
        res = fedlsa_arrays(
            xs,
            ys,
            rounds=rounds,
            local_steps=5,
            step_size=0.05,
            gamma_eta=0.6,
            n_bootstrap=2,
            seed=7,
            sampling="with_replacement",
        )
        errs.append(np.linalg.norm(res.coef_ - ols))
    assert errs[0] > errs[1] > errs[2]
    # the distance left is the algorithm's noise, a small fraction of the coefficients
    assert errs[2] < 0.02 * np.linalg.norm(ols)


def test_size_weights_target_the_pooled_ols_and_equal_weights_do_not():
    # very different sizes and feature distributions, different local solutions
    xs, ys = hetero_sites([200, 2000, 20000], seed=3)
    ols, eq = pooled_ols(xs, ys), equal_weight_target(xs, ys)
    gap = np.linalg.norm(ols - eq)
    assert gap > 0.5  # the two targets differ clearly on this federation
    kw = dict(
        rounds=2000,
        local_steps=10,
        gamma_eta=0.6,
        n_bootstrap=2,
        seed=11,
        sampling="with_replacement",
    )
    for precondition in (True, False):
        step = 0.02
        size = fedlsa_arrays(
            xs, ys, site_weights="size", precondition=precondition, step_size=step, **kw
        )
        equal = fedlsa_arrays(
            xs, ys, site_weights="equal", precondition=precondition, step_size=step, **kw
        )
        assert size.extra["transient"] < 0.05
        np.testing.assert_allclose(size.site_weights, np.array([200, 2000, 20000]) / 22200)
        assert np.linalg.norm(size.coef_ - ols) < 0.05 * gap
        assert np.linalg.norm(equal.coef_ - eq) < 0.05 * gap


def test_without_replacement_estimate_is_near_the_pooled_fit_within_its_intervals():
    xs, ys = hetero_sites([2000, 5000, 12000], seed=4, beta_shift=0.0)  # one common beta
    res = fedlsa_arrays(xs, ys, rounds=300, local_steps=5, step_size=0.02, seed=5, n_bootstrap=200)
    ols = pooled_ols(xs, ys)
    ci = res.conf_int(0.01).to_numpy()
    assert np.all((ci[:, 0] <= ols) & (ols <= ci[:, 1]))
    assert res.extra["transient"] < 1e-3


# --------------------------------------------------------------------------- intervals
def test_conf_int_is_the_papers_quantile_interval_and_the_joint_max_statistic():
    rng = np.random.default_rng(0)
    params = np.array([1.0, -2.0])
    boot = params + rng.normal(size=(1000, 2)) * [0.1, 0.3] + [0.02, 0.0]
    res = FedLSAResults(
        params,
        boot,
        ["a", "b"],
        Schedule(3, 0.1, 1),
        np.ones(1),
        np.array([10]),
        4,
        0,
        0,
        "without_replacement",
    )
    dev = boot - params
    q = np.quantile(dev, [0.05, 0.95], axis=0, method="weibull")
    np.testing.assert_allclose(res.conf_int(0.1), np.column_stack([params - q[1], params - q[0]]))
    s = dev.std(axis=0, ddof=1)
    c = np.quantile(np.max(np.abs(dev) / s, axis=1), 0.9, method="weibull")
    np.testing.assert_allclose(
        res.conf_int(0.1, joint=True), np.column_stack([params - c * s, params + c * s])
    )
    assert c > 1.6449  # wider than a single coefficient's normal quantile
    np.testing.assert_allclose(res.bse, s)
    assert "95% lower" in res.summary() and "b" in res.summary()
    with pytest.raises(FedLSAError, match="alpha"):
        res.conf_int(1.5)


def test_the_standardization_does_not_change_a_preconditioned_run():
    """With P = (X'X / n)^-1 Algorithm 1 is equivariant under an invertible linear map of
    the design (theta -> B^-T theta, P -> B^-T P B^-1, s = x'Px and theta_0 = 0 unchanged),
    so the per-unit estimate and intervals of fedlsa on tables (standardized with the
    rows' own means and sds) are those of a run on another standardization: the
    estimated standardization adds no variability the bootstrap misses."""
    rng = np.random.default_rng(2)
    tables, xs, ys = {}, [], []
    for name, n in (("a", 300), ("b", 250), ("c", 220)):
        x1, x2 = rng.normal(1.0, 1.0, n), rng.normal(0.0, 2.0, n)
        y = 1.0 + 2.0 * x1 - 0.5 * x2 + rng.normal(size=n)
        tables[name] = pd.DataFrame({"x1": x1, "x2": x2, "y": y})
        xs.append(np.column_stack([np.ones(n), x1 - 1.0, x2 / 2.0]))  # population values
        ys.append(y)
    kw = dict(rounds=20, local_steps=5, n_bootstrap=40, seed=4)
    res = fedlsa(tables, "y", **kw)
    other = fedlsa_arrays(xs, ys, names=list(tables), **kw)
    assert other.schedule.step_size == pytest.approx(res.schedule.step_size, rel=1e-12)
    a = np.array([[1.0, -1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]])  # -> per unit
    np.testing.assert_allclose(res.original_params, a @ other.coef_, rtol=1e-10)
    np.testing.assert_allclose(res.original_bse, np.std(other.bootstrap @ a.T, 0, ddof=1))
    np.testing.assert_allclose(
        res.original_conf_int(),
        _intervals(a @ other.coef_, other.bootstrap @ a.T, 0.05, False),
        rtol=1e-10,
    )
    # not a tautology: the coefficients on the two designs differ
    assert np.max(np.abs(res.coef_ - other.coef_)) > 0.01


def test_bootstrap_intervals_hold_a_further_draw_of_the_same_law_with_the_nominal_level():
    """The p-quantile of M draws is their p (M + 1)-th smallest (QUANTILE_METHOD): a
    further draw of the same law lies in the interval with probability 1 - alpha.
    numpy's default quantile (position 1 + p (M - 1)) gave (M - 1)(1 - alpha) / (M + 1):
    0.9025 at M = 39, 0.9405 at M = 200."""
    rng = np.random.default_rng(5)
    # M = 39, alpha = 0.05: the 1st and 39th smallest, i.e. the range of the draws
    theta = np.array([0.5, -1.0])
    draws = theta + rng.normal(size=(39, 2))
    dev = draws - theta
    np.testing.assert_array_equal(
        _intervals(theta, draws, 0.05, False),
        np.column_stack([theta - dev.max(axis=0), theta - dev.min(axis=0)]),
    )
    # joint, M = 199: c is the 190th smallest of the 199 max-statistics
    draws = theta + rng.normal(size=(199, 2))
    dev = draws - theta
    s = dev.std(axis=0, ddof=1)
    c = np.sort(np.max(np.abs(dev) / s, axis=1))[189]
    np.testing.assert_allclose(
        _intervals(theta, draws, 0.05, True), np.column_stack([theta - c * s, theta + c * s])
    )
    # coverage, M = 200: each of 20,000 columns is one replication whose error
    # theta - truth is a further draw of the bootstrap deviations' law
    err = rng.normal(size=20_000)
    theta = np.zeros(err.size)
    ci = _intervals(theta, rng.normal(size=(200, err.size)), 0.05, False)
    covered = np.mean((ci[:, 0] <= -err) & (-err <= ci[:, 1]))
    assert abs(covered - 0.95) < 0.006, covered  # 4 standard errors; type 7: 0.9405


def test_results_speak_the_pandas_api_of_glm_results_with_the_same_numbers():
    """params and bse are Series and conf_int a DataFrame (columns 0 and 1), indexed by
    the design's column names as GLMResults (and statsmodels) has them; coef_ and
    bootstrap stay ndarrays; every number is what the arrays gave before (the
    formulas of section 6 on theta_T and the bootstrap iterates, bit for bit)."""
    from fits.analysis.glm import fit_glm

    tables = split(mixed_table(3000, seed=1), [800, 1000, 1200])
    res = fedlsa(tables, "y", regime="one_pass", n_bootstrap=50, seed=3)
    names = ["(intercept)", "x", "o", "b=True", "c=south", "c=west"]
    assert res.feature_names == names
    theta, boot = res.coef_, res.bootstrap
    assert type(theta) is np.ndarray and theta.shape == (6,)
    assert type(boot) is np.ndarray and boot.shape == (50, 6)

    assert isinstance(res.params, pd.Series) and res.params.name == "coef"
    assert list(res.params.index) == names
    np.testing.assert_array_equal(res.params.to_numpy(), theta)
    assert isinstance(res.bse, pd.Series) and res.bse.name == "bse"
    assert list(res.bse.index) == names
    np.testing.assert_array_equal(res.bse.to_numpy(), np.std(boot - theta, axis=0, ddof=1))

    dev = boot - theta
    lo, hi = np.quantile(dev, [0.05, 0.95], axis=0, method="weibull")
    s = np.std(dev, axis=0, ddof=1)
    c = float(np.quantile(np.max(np.abs(dev) / s, axis=1), 0.9, method="weibull"))
    old = {
        False: np.column_stack([theta - hi, theta - lo]),
        True: np.column_stack([theta - c * s, theta + c * s]),
    }
    for joint in (False, True):
        ci = res.conf_int(0.1, joint=joint)
        assert isinstance(ci, pd.DataFrame) and ci.shape == (6, 2)
        assert list(ci.columns) == [0, 1] and list(ci.index) == names
        np.testing.assert_array_equal(ci.to_numpy(), old[joint])
        assert ci.loc["x", 0] == old[joint][1, 0] and ci.loc["x", 1] == old[joint][1, 1]
    d = res.to_dict(0.1)
    assert [row["coef"] for row in d["coefficients"]] == theta.tolist()
    assert [row["joint_upper"] for row in d["coefficients"]] == old[True][:, 1].tolist()

    # the same containers as GLMResults on the same design
    glm = fit_glm(tables, "y", family="linear")
    assert res.params.index.equals(glm.params.index) and res.params.name == glm.params.name
    assert res.bse.index.equals(glm.bse.index) and res.bse.name == glm.bse.name
    assert res.conf_int().columns.equals(glm.conf_int().columns)
    assert res.conf_int().index.equals(glm.conf_int().index)
    # built from a bare array (as run_fedlsa does), params is wrapped, not changed
    again = FedLSAResults(
        theta,
        boot,
        names,
        res.schedule,
        res.site_weights,
        res.n_rows,
        1,
        0,
        0,
        "without_replacement",
    )
    assert list(again.params.index) == names
    np.testing.assert_array_equal(again.params.to_numpy(), theta)


# --------------------------------------------------------------------------- messages
def test_only_parameter_vectors_travel_and_rounds_and_bytes_are_counted():
    xs, ys = hetero_sites([500, 800], seed=5)
    sites = [ArraySite(x, y, f"s{c}") for c, (x, y) in enumerate(zip(xs, ys, strict=True))]
    transport = InProcessTransport(sites, n_jobs=1)
    seen = []
    transport.observers.append(lambda k, m, r: seen.append((m.type, r)))
    m, d, t = 9, 3, 7
    res = run_fedlsa(transport, d, rounds=t, local_steps=4, step_size=0.01, n_bootstrap=m, seed=1)
    assert res.rounds == t + 2  # setup, preconditioning, T rounds
    rounds = [r for kind, r in seen if kind == "lsa_round"]
    assert len(rounds) == 2 * t
    for r in rounds:  # one message per site and round with all M + 1 vectors
        assert set(r.arrays) == {"theta"} and r.arrays["theta"].shape == (m + 1, d)
        assert not r.config
    assert res.bytes_up == sum(transport.uploaded_bytes) > 2 * t * (m + 1) * d * 8
    # the protocol refuses a reply carrying anything else
    req = Message("lsa_round", {"theta": np.zeros((m + 1, d))}, {"eta": 0.1, "local_steps": 1})
    with pytest.raises(ProtocolError):
        check_reply(
            req, Message("lsa_round", {"theta": np.zeros((m + 1, d)), "rows": np.zeros((2, d))})
        )
    with pytest.raises(ProtocolError):
        check_reply(req, Message("lsa_round", {"theta": np.zeros((m, d))}))


def test_one_seed_reproduces_the_run_and_another_changes_it():
    xs, ys = hetero_sites([400, 600], seed=6)
    kw = dict(rounds=20, local_steps=3, n_bootstrap=5)
    a = fedlsa_arrays(xs, ys, seed=3, **kw)
    b = fedlsa_arrays(xs, ys, seed=3, **kw)
    c = fedlsa_arrays(xs, ys, seed=4, **kw)
    np.testing.assert_array_equal(a.bootstrap, b.bootstrap)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.array_equal(a.coef_, c.coef_)
    # default step size (paper_step_size): 20 rounds of 3 local steps are too few for
    # 0.04 E[s] / E[s^2] to forget the start (horizon 10), so the step is raised to its
    # cap, the contraction step E[s] / (2 E[s^2]), s = x'Px over the pooled rows
    pooled = np.vstack(xs)
    p = np.linalg.inv(pooled.T @ pooled / len(pooled))
    s = np.einsum("ij,jk,ik->i", pooled, p, pooled)
    assert s.mean() == pytest.approx(3.0)  # E x' Abar^-1 x = tr(I) = d
    assert a.schedule.step_size == pytest.approx(s.mean() / (2 * np.mean(s**2)))


# --------------------------------------------------------------------------- tables
def test_tables_api_matches_pooled_ols_of_the_same_design():
    df = mixed_table(12000, seed=1)
    parts = split(df, [2000, 3000, 7000])
    res = fedlsa(
        {"a": parts[0], "b": parts[1], "c": parts[2]}, "y", rounds=150, local_steps=10, seed=3
    )
    assert res.feature_names[0] == "(intercept)" and "x" in res.feature_names
    spec, st = res.extra["design"], res.extra["standardization"]
    x = np.column_stack(
        [np.ones(len(df))]
        + [(df[c] - m) / s for c, m, s in zip(spec.numeric, st.means, st.sds, strict=True)]
        + [df["b"].astype(float)]
        + [(df["c"] == v).astype(float) for v in ("south", "west")]
    )
    assert res.feature_names == ["(intercept)", "x", "o", "b=True", "c=south", "c=west"]
    ols = np.linalg.lstsq(
        x.to_numpy() if hasattr(x, "to_numpy") else x, df["y"].to_numpy(), rcond=None
    )[0]
    ci = res.conf_int(0.01).to_numpy()
    assert np.all((ci[:, 0] <= ols) & (ols <= ci[:, 1])), (ci, ols)
    assert res.rounds == 150 + 4  # schema, moments, setup, preconditioning


def test_non_numeric_target_is_refused():
    df = mixed_table(600, seed=2)
    with pytest.raises(FedLSAError, match="'c' is not numeric"):
        fedlsa([df.iloc[:300], df.iloc[300:]], "c", rounds=5, local_steps=2)


def test_collinear_features_are_refused_by_name():
    df = mixed_table(600, seed=2)
    df["x2"] = 2.0 * df["x"] + 1.0
    with pytest.raises(FedLSAError, match=r"collinear.*'x'.*'x2'|collinear.*'x2'.*'x'"):
        fedlsa(
            [df.iloc[:300], df.iloc[300:]], "y", features=["x", "x2", "o"], rounds=5, local_steps=2
        )


def test_a_site_with_too_few_rows_for_the_local_steps_is_named():
    df = mixed_table(600, seed=2)
    with pytest.raises(FedLSAError, match=r"site\(s\) 'small' \(100 rows\) hold fewer.*H_t = 200"):
        fedlsa({"big": df.iloc[:500], "small": df.iloc[500:]}, "y", rounds=20, local_steps=10)
    # with replacement the same run is allowed
    res = fedlsa(
        {"big": df.iloc[:500], "small": df.iloc[500:]},
        "y",
        rounds=20,
        local_steps=10,
        sampling="with_replacement",
        n_bootstrap=3,
    )
    assert np.all(np.isfinite(res.coef_))


def test_bad_options_are_named():
    xs, ys = hetero_sites([100, 100], seed=1)
    with pytest.raises(FedLSAError, match="site_weights"):
        fedlsa_arrays(xs, ys, rounds=2, site_weights="rows")
    with pytest.raises(FedLSAError, match="sampling"):
        fedlsa_arrays(xs, ys, rounds=2, sampling="bootstrap")
    with pytest.raises(FedLSAError, match="n_bootstrap"):
        fedlsa_arrays(xs, ys, rounds=2, n_bootstrap=1)


# --------------------------------------------------------------------------- one pass
def mean_model_variance_factor(schedule):
    """``S sum_k c_k^2`` for the last iterate of ``theta <- theta - eta_k (theta - ybar_k)``
    (``A = 1``, one batch mean ``ybar_k`` of ``b`` rows per local step): its variance
    over ``sigma^2 / (S b)``, the variance of the mean of the ``S b`` rows used."""
    etas = np.repeat(schedule.etas(), schedule.hs())
    keep = np.concatenate([np.cumprod((1.0 - etas)[::-1])[::-1][1:], [1.0]])
    return len(etas) * np.sum((etas * keep) ** 2), np.prod(1.0 - etas)


def test_one_pass_schedule_makes_the_last_iterate_as_precise_as_the_mean_in_1d():
    # closed form: the last iterate is linear in the batch means; Var = sigma^2/b sum c_k^2
    for eta0, rounds, h in [(0.5, 400, 1), (0.3, 120, 1), (0.1, 1000, 1), (0.45, 100, 4)]:
        sch = OnePassSchedule(rounds, eta0, h)
        factor, transient = mean_model_variance_factor(sch)
        steps, burn = rounds * h, sch.burn_in_rounds * h
        # the burn-in iterate counts as m0 = (2 - eta0) / eta0 steps, the rest one each
        assert factor == pytest.approx(steps / (steps - burn + (2 - eta0) / eta0), rel=2e-3)
        assert 1.0 <= factor < 1.11  # never better than the mean, at most 11% worse
        assert transient < np.exp(-sch.burn_in) * 0.05
        # a round contracts as H steps of gain 1/k: (1 - eta_t)^H = m / (m + H)
        m = (2 - eta0) / eta0 + h * 3
        assert (1 - sch.eta(sch.burn_in_rounds + 4)) ** h == pytest.approx(m / (m + h))
    # the paper's schedules of the coverage benchmark: the width is set by eta, not by S
    s1 = Schedule(rounds=1000, step_size=0.02, local_steps=5)
    assert mean_model_variance_factor(s1)[0] == pytest.approx(5000 * 0.02 / (2 - 0.02))
    s2 = Schedule(rounds=400, step_size=0.05, local_steps=5, gamma_eta=0.6, gamma_h=0.2)
    assert mean_model_variance_factor(s2)[0] > 4.0


def test_batch_step_is_the_mean_of_the_row_updates():
    rng = np.random.default_rng(3)
    theta = rng.normal(size=(2, 5, 3))
    x, y, z = rng.normal(size=(2, 7, 3)), rng.normal(size=(2, 7)), rng.normal(size=(2, 7, 3))
    w = rng.uniform(0.5, 2, size=(2, 5))
    out = batch_step(theta, x, y, 0.1, w, z)
    for r in range(2):
        for s_ in range(5):
            grad = np.mean([z[r, i] * (x[r, i] @ theta[r, s_] - y[r, i]) for i in range(7)], 0)
            np.testing.assert_allclose(out[r, s_], theta[r, s_] - 0.1 * w[r, s_] * grad)
    one = local_updates(theta, x[:, :1], y[:, :1], 0.1, w[:, None, :], z[:, :1])
    np.testing.assert_allclose(batch_step(theta, x[:, :1], y[:, :1], 0.1, w, z[:, :1]), one)


def one_d_sites(seed, sizes=(400, 900, 2000), means=(0.0, 1.0, 3.0), sds=(1.0, 2.0, 1.0)):
    rng = np.random.default_rng(seed)
    ys = [m + s * rng.standard_normal(n) for n, m, s in zip(sizes, means, sds, strict=True)]
    n = sum(sizes)
    # population sd of the size-weighted mean with the site sizes fixed
    sd = np.sqrt(sum(n_c / n * s**2 for n_c, s in zip(sizes, sds, strict=True)) / n)
    return [np.ones((k, 1)) for k in sizes], ys, sd


def test_one_pass_bootstrap_sd_matches_the_sampling_sd_of_the_mean_in_1d():
    # intercept-only model on sites with different means: theta_star = sum_c p_c mu_c,
    # Var(pooled mean) = sum_c p_c sigma_c^2 / n.  The bootstrap sd must match it;
    # the paper's per-site multipliers add the between-site term sum_c p_c^2 (mu_c -
    # mu_star)^2 per step, which batches do not shrink.
    ratios, site_ratios, gaps = [], [], []
    for seed in range(8):
        xs, ys, sd = one_d_sites(seed)
        res = fedlsa_arrays(xs, ys, regime="one_pass", n_bootstrap=400, seed=seed)
        assert res.multipliers == "shared" and res.converged
        ratios.append(res.bse.iloc[0] / sd)
        gaps.append((res.coef_[0] - np.concatenate(ys).mean()) / sd)
        if seed < 2:
            site = fedlsa_arrays(
                xs, ys, regime="one_pass", n_bootstrap=400, seed=seed, multipliers="site"
            )
            site_ratios.append(site.bse.iloc[0] / sd)
            np.testing.assert_allclose(site.coef_, res.coef_)  # same rows, same main run
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.07)
    assert min(site_ratios) > 2.0
    # one pass is as efficient as the pooled mean: the two differ by a fraction of an sd
    assert np.sqrt(np.mean(np.square(gaps))) < 0.5


def test_one_pass_widths_are_close_to_the_pooled_hc1_widths():
    xs, ys = hetero_sites([800, 2000, 5000], seed=6, beta_shift=0.1)
    res = fedlsa_arrays(xs, ys, regime="one_pass", seed=2, n_bootstrap=400)
    assert res.schedule.regime == "one_pass" and res.rows_used == [800, 2000, 5000]
    assert res.schedule.rounds == 800 // (3 + 2)  # default: batches of d + 2 rows
    assert res.converged and res.extra["transient"] < 1e-3
    _, _, hc1 = ols_hc1(np.vstack(xs), np.concatenate(ys))
    ratio = np.diff(res.conf_int().to_numpy(), axis=1).ravel() / np.diff(hc1, axis=1).ravel()
    assert np.all((ratio > 0.8) & (ratio < 1.25)), ratio
    # the paper's regime on the same sites: several times wider
    paper = fedlsa_arrays(xs, ys, rounds=150, local_steps=5, gamma_eta=0.6, seed=2)
    paper_ratio = (
        np.diff(paper.conf_int().to_numpy(), axis=1).ravel() / np.diff(hc1, axis=1).ravel()
    )
    assert np.all(paper_ratio > 1.5), paper_ratio
    d = res.to_dict()
    assert d["schedule"]["regime"] == "one_pass" and d["multipliers"] == "shared"
    assert d["schedule"]["burn_in_rounds"] == res.schedule.burn_in_rounds > 0
    json.dumps(d)


def test_one_pass_bad_options_are_named():
    xs, ys = hetero_sites([300, 400], seed=1)
    for kw, msg in [
        ({"precondition": False}, "precondition=True"),
        ({"site_weights": "equal"}, "site_weights='size'"),
        ({"sampling": "with_replacement"}, "without_replacement"),
        ({"gamma_eta": 0.6}, "gamma_eta"),
        ({"multipliers": "both"}, "multipliers"),
        ({"rounds": 20, "step_size": 1.5}, "step_size in"),
        ({"rounds": 5, "step_size": 0.1}, "burn-in takes 50 rounds"),
    ]:
        with pytest.raises(FedLSAError, match=msg):
            fedlsa_arrays(xs, ys, regime="one_pass", n_bootstrap=3, **kw)
    with pytest.raises(FedLSAError, match="regime"):
        fedlsa_arrays(xs, ys, regime="two_pass")
    with pytest.raises(FedLSAError, match=r"site 'site1' holds 300 rows.*301 local steps"):
        fedlsa_arrays(xs, ys, regime="one_pass", rounds=301, n_bootstrap=3)


def test_one_pass_default_rounds_too_few_takes_the_rounds_that_outlast_the_burn_in():
    """Small sites: the default T (smallest site's rows over d + 2) is shorter than the
    burn-in. The error said 'the default gives only 12 rounds: ask for at least N', and
    on other data N failed again (the burn-in depends on the data). Without rounds given
    the run now takes the fewest rounds that outlast it (one more lsa_precondition
    round tells the sites their batches); with rounds given, the error names a count
    that runs."""
    xs, ys = hetero_sites([60, 90], seed=1)
    res = fedlsa_arrays(xs, ys, regime="one_pass", n_bootstrap=3)
    t = res.schedule.rounds
    assert isinstance(res.schedule, OnePassSchedule)
    assert res.schedule.burn_in_rounds < t and t > 12  # the default's 12 ran out
    assert res.rounds == t + 3  # lsa_setup, lsa_precondition twice
    # the same rounds asked for: the same run, bit for bit (the batches follow T)
    again = fedlsa_arrays(xs, ys, regime="one_pass", n_bootstrap=3, rounds=t)
    np.testing.assert_array_equal(res.bootstrap, again.bootstrap)
    assert again.rounds == t + 2
    with pytest.raises(FedLSAError, match=rf"only {t - 1} rounds were asked for") as err:
        fedlsa_arrays(xs, ys, regime="one_pass", n_bootstrap=3, rounds=t - 1)
    assert f"ask for at least {t} rounds" in str(err.value)
    # a site too small for any: named, with no advice to sample with replacement
    with pytest.raises(
        FedLSAError,
        match=r"the smallest site, 'site1' \(8 rows\), has too few rows for this regime; "
        r"use regime='paper'",
    ) as err:
        fedlsa_arrays([xs[0][:8], xs[1]], [ys[0][:8], ys[1]], regime="one_pass", n_bootstrap=3)
    assert "with_replacement" not in str(err.value)


def test_one_pass_on_tables_and_seeds():
    df = mixed_table(3000, seed=4)
    tables = {"a": df.iloc[:1000], "b": df.iloc[1000:]}
    one = fedlsa(tables, "y", regime="one_pass", seed=3, n_bootstrap=20)
    two = fedlsa(tables, "y", regime="one_pass", seed=3, n_bootstrap=20)
    np.testing.assert_array_equal(one.bootstrap, two.bootstrap)
    other = fedlsa(tables, "y", regime="one_pass", seed=4, n_bootstrap=20)
    assert not np.allclose(one.coef_, other.coef_)
    assert one.rows_used == [1000, 2000] and "one_pass" in one.summary()
    assert one.converged


# --------------------------------------------------------------------------- coverage
@pytest.mark.slow
def test_one_pass_coverage_and_widths_on_a_heterogeneous_federation():
    """regime='one_pass': 95% intervals cover theta_star in 93-97% of 500 runs (per
    coefficient and jointly) and are within 25% of the pooled HC1 widths."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import fedlsa_coverage as fc

    res = fc.simulate_one_pass(500, 200, seed=7, scale=0.1, alpha=0.05)
    cover = np.array(res["coverage"])
    assert np.all((cover >= 0.93) & (cover <= 0.97)), cover
    assert 0.93 <= res["joint_coverage"] <= 0.97, res["joint_coverage"]
    ratio = np.array(res["width_ratio_to_pooled_hc1"])
    assert np.all((ratio > 0.75) & (ratio < 1.25)), ratio


@pytest.mark.slow
def test_coverage_on_a_heterogeneous_federation_in_both_regimes():
    """95% intervals cover the size-weighted population target in 93-97% of runs."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import fedlsa_coverage as fc

    star = fc.true_theta(fc.SIZES / fc.SIZES.sum())
    for name, sch in fc.SCHEDULES.items():
        theta, boot = fc.simulate(sch, 500, 200, seed=99, precondition=True)
        ci = fc.intervals(theta, boot, 0.05)
        cover = ((ci["lower"] <= star) & (star <= ci["upper"])).mean(axis=0)
        assert np.all((cover >= 0.93) & (cover <= 0.97)), (name, cover)


# --------------------------------------------------------------------------- inference check
def test_ci_overlap_closed_forms():
    a = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    b = np.array([[0.0, 1.0], [1.0, 2.0], [0.0, 2.0], [2.0, 3.0]])
    np.testing.assert_allclose(ci_overlap(a, b), [1.0, 0.0, 0.75, -1.0])
    np.testing.assert_allclose(ci_overlap(a, b), ci_overlap(b, a))


def test_ols_hc1_matches_statsmodels():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(300), rng.normal(size=(300, 2))])
    y = x @ [1.0, 2.0, -1.0] + rng.normal(size=300) * (1 + np.abs(x[:, 1]))
    beta, se, ci = ols_hc1(x, y, 0.1)
    fit = sm.OLS(y, x).fit(cov_type="HC1")
    np.testing.assert_allclose(beta, fit.params, rtol=1e-10)
    np.testing.assert_allclose(se, fit.bse, rtol=1e-10)
    np.testing.assert_allclose(ci, fit.conf_int(0.1), rtol=1e-10)
    with pytest.raises(FedLSAError, match="rank deficient"):
        ols_hc1(np.column_stack([x, 2 * x[:, 1]]), y)


def test_inference_check_scores_a_faithful_table_above_a_broken_one():
    df = mixed_table(12000, seed=1)
    parts = split(df, [2000, 3000, 7000])
    sites = {"a": parts[0], "b": parts[1], "c": parts[2]}
    faithful = mixed_table(12000, seed=2)  # a fresh sample of the same population
    broken = faithful.copy()
    broken["y"] = np.random.default_rng(0).permutation(broken["y"].to_numpy())
    kw = dict(rounds=150, local_steps=10, seed=3, gamma_eta=0.6, step_size=0.05, regime="paper")
    good = inference_check(sites, faithful, "y", **kw)
    bad = inference_check(sites, broken, "y", **kw)
    # the default, regime one_pass: intervals as wide as the synthetic table's HC1 ones
    one_pass = inference_check(sites, faithful, "y", seed=3)
    assert one_pass.federated.schedule.regime == "one_pass" and one_pass.federated.converged
    assert one_pass.mean_overlap > good.mean_overlap
    fed_w = np.diff(one_pass.federated.conf_int().to_numpy(), axis=1).ravel()
    syn_w = (one_pass.table["synthetic_upper"] - one_pass.table["synthetic_lower"]).to_numpy()
    assert np.all((fed_w / syn_w > 0.7) & (fed_w / syn_w < 1.4)), fed_w / syn_w
    assert good.federated.converged
    assert list(good.table.index) == good.federated.feature_names
    assert good.mean_overlap > 0.3 and good.share_inside >= 0.5
    assert bad.mean_overlap < 0.0 and bad.share_inside < good.share_inside
    np.testing.assert_allclose(good.table["overlap"].mean(), good.mean_overlap)
    d = good.to_dict()
    assert d["coefficients"][0]["name"] == "(intercept)" and 0 < d["level"] < 1


def test_to_dict_is_json_ready_and_matches_conf_int():
    import json

    xs, ys = hetero_sites([600, 900], seed=8)
    res = fedlsa_arrays(xs, ys, rounds=100, local_steps=5, n_bootstrap=50, seed=2)
    d = json.loads(json.dumps(res.to_dict(0.1)))
    ci = res.conf_int(0.1)
    assert d["level"] == pytest.approx(0.9) and d["rounds"] == 102
    assert [c["lower"] for c in d["coefficients"]] == pytest.approx(ci[0].to_numpy())
    assert d["schedule"]["rows_per_site"] == 500


# --------------------------------------------------------------------------- CLI
@pytest.fixture(scope="module")
def lsa_site_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("fedlsa")
    df = mixed_table(3000, seed=4)
    paths = []
    for k, part in enumerate(split(df, [600, 900, 1500])):
        path = folder / f"site{k + 1}.csv"
        part.to_csv(path, index=False)
        paths.append(str(path))
    return paths


def test_cli_analyze_fedlsa_writes_the_intervals(lsa_site_files, tmp_path):
    import json

    import pandas as pd
    from test_cli import run

    out = tmp_path / "lsa.json"
    proc = run(
        "analyze",
        *lsa_site_files,
        "--target",
        "y",
        "--method",
        "fedlsa",
        "--ci",
        "0.9",
        "--rounds",
        "40",
        "--local-steps",
        "5",
        "--bootstrap",
        "50",
        "--seed",
        "3",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    tables = {Path(p).stem: pd.read_csv(p) for p in lsa_site_files}
    ref = fedlsa(tables, "y", rounds=40, local_steps=5, n_bootstrap=50, seed=3)
    ci = ref.conf_int(0.1)
    assert result["level"] == pytest.approx(0.9)
    assert [c["lower"] for c in result["coefficients"]] == pytest.approx(ci[0].to_numpy())
    assert "90% lower" in proc.stdout


def test_cli_analyze_fedlsa_one_pass(lsa_site_files, tmp_path):
    from test_cli import run

    out = tmp_path / "one_pass.json"
    args = ["--target", "y", "--method", "fedlsa", "--regime", "one_pass", "--seed", "3"]
    proc = run("analyze", *lsa_site_files, *args, "--bootstrap", "50", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    tables = {Path(p).stem: pd.read_csv(p) for p in lsa_site_files}
    ref = fedlsa(tables, "y", regime="one_pass", n_bootstrap=50, seed=3)
    assert result["schedule"]["regime"] == "one_pass" and result["multipliers"] == "shared"
    assert result["schedule"]["rows_per_site"] == [600, 900, 1500]
    assert [c["upper"] for c in result["coefficients"]] == pytest.approx(
        ref.conf_int()[1].to_numpy()
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--ci", "1.5"], 2, "between 0 and 1"),
        (["--mu", "1"], 2, "not differentially private"),
        (["--family", "poisson"], 2, "linear regression"),
        (["--gamma-eta", "0.2"], 2, "gamma_eta"),
        (["--clip", "1"], 2, "--clip is not used by fedlsa"),
        (["--target", "c"], 1, "'c' is not numeric"),
        (
            ["--rounds", "200", "--local-steps", "5"],
            1,
            "site(s) 'site1' (600 rows), 'site2' (900 rows) hold fewer",
        ),
        (["--regime", "two_pass"], 2, "--regime"),
        (["--regime", "one_pass", "--gamma-eta", "0.6"], 2, "drop --gamma-eta"),
        (["--regime", "one_pass", "--sampling", "with_replacement"], 2, "drop --sampling"),
        (["--multipliers", "each"], 2, "--multipliers"),
        (["--regime", "one_pass", "--rounds", "601"], 1, "site 'site1' holds 600 rows"),
    ],
)
def test_cli_analyze_fedlsa_bad_input(lsa_site_files, tmp_path, args, code, message):
    from test_cli import run

    base = ["--target", "y"] if "--target" not in args else []
    proc = (
        run(
            "analyze",
            *lsa_site_files,
            "--method",
            "fedlsa",
            *base,
            *args,
            "--rounds",
            "10",
            "--out",
            str(tmp_path / "x.json"),
        )
        if "--rounds" not in args
        else run(
            "analyze",
            *lsa_site_files,
            "--method",
            "fedlsa",
            *base,
            *args,
            "--out",
            str(tmp_path / "x.json"),
        )
    )
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert message in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_default_step_contracts_in_mean_square_on_average_over_directions():
    # eta_c = E[s] / (2 E[s^2]) (default_step_size: one_pass's eta_0, the cap of the paper
    # regime's default): the averaged factor E u'(I - eta w x x')^2 u is 1 - eta
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(20000), rng.standard_t(5, size=(20000, 3))])
    p = np.linalg.inv(x.T @ x / len(x))
    z = x @ np.linalg.cholesky(p)  # whitened rows: z'z = x'Px
    s = np.sum(z**2, axis=1)
    from fits.analysis.lsa import default_step_size

    eta = default_step_size(s.mean(), np.mean(s**2))
    u = rng.normal(size=(400, 4))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    proj = (z @ u.T) ** 2  # (x'u)^2 per row and direction
    w = bootstrap_weights(rng, proj.shape)
    factor = np.mean(1 - 2 * eta * w * proj + eta**2 * w**2 * s[:, None] * proj)
    assert factor == pytest.approx(1 - eta, abs=0.1 * eta)


# --------------------------------------------------------------------------- report
def test_report_inference_section_card_and_summary():
    from fits.report import evaluate

    df = mixed_table(6000, seed=1)
    parts = split(df, [2000, 4000])
    sites = {"a": parts[0], "b": parts[1]}
    synthetic = mixed_table(6000, seed=2)
    check = inference_check(sites, synthetic, "y", seed=1)
    kw = dict(target="y", utility=False, privacy=False)
    rep = evaluate(df, synthetic, inference=check.to_dict(), **kw)
    page = rep.to_html()
    assert 'id="inference"' in page and "<h3>Inference</h3>" in page
    assert 'href="#inference"' in page
    for name in check.federated.feature_names:
        assert name in page
    data = json.loads(rep.to_json())
    assert data["inference"]["mean_overlap"] == pytest.approx(check.mean_overlap)
    assert "Inference (y, linear regression" in rep.summary()
    skipped = evaluate(df, synthetic, inference={"skipped": "target 'c' is not numeric"}, **kw)
    assert skipped.data["inference"] is None
    assert 'id="inference"' not in skipped.to_html()
    assert any("inference check skipped" in n for n in skipped.data["notes"])
    plain = evaluate(df, synthetic, **kw)
    assert plain.data["inference"] is None and "<h3>Inference</h3>" not in plain.to_html()


def test_fits_report_inference_figures_or_the_reason_they_are_skipped():
    from fits.cli.report import inference_figures

    df = mixed_table(1500, seed=3)
    parts = dict(zip("ab", split(df, [600, 900]), strict=True))
    synthetic = mixed_table(1500, seed=4)
    figures = inference_figures(parts, synthetic, "y", None, 0)
    ref = inference_check(parts, synthetic, "y", seed=0)
    assert figures["mean_overlap"] == pytest.approx(ref.mean_overlap)
    assert "is not numeric" in inference_figures(parts, synthetic, "c", None, 0)["skipped"]


@pytest.mark.slow
def test_fits_report_runs_the_inference_check_on_client_files(tmp_path):
    df = mixed_table(1500, seed=3)
    parts = split(df, [600, 900])
    paths = {}
    for name, table in {"real": df, "a": parts[0], "b": parts[1],
                        "synthetic": mixed_table(1500, seed=4)}.items():  # fmt: skip
        paths[name] = tmp_path / f"{name}.csv"
        table.to_csv(paths[name], index=False)
    out, out_json = tmp_path / "r.html", tmp_path / "r.json"
    done = fits_in_process(
        "report", "--real", paths["real"], "--synthetic", paths["synthetic"],
        "--out", out, "--json", out_json, "--target", "y",
        "--clients", paths["a"], paths["b"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    payload = json.loads(out_json.read_text())
    ref = inference_check({"a": parts[0], "b": parts[1]}, pd.read_csv(paths["synthetic"]), "y",
                          seed=0)  # fmt: skip
    assert payload["inference"]["mean_overlap"] == pytest.approx(ref.mean_overlap, rel=1e-6)
    assert "Inference (y" in done.stderr and 'id="inference"' in out.read_text()


def test_unconverged_run_warns_with_the_exported_warning() -> None:
    """A run too short to forget its start says so: ``converged`` is False and a
    ``fits.analysis.FedLSAConvergenceWarning`` (importable where ``fedlsa`` is, as
    docs/analysis.md names it) is raised, so a user can catch or filter it."""
    import fits.analysis as fa

    rng = np.random.default_rng(0)

    def table(n: int) -> pd.DataFrame:
        x = rng.normal(size=(n, 2))
        return pd.DataFrame(
            {"a": x[:, 0] * 50 + 300, "b": x[:, 1], "y": 100 + x @ [0.5, -1] + rng.normal(size=n)}
        )

    with pytest.warns(fa.FedLSAConvergenceWarning):
        res = fa.fedlsa([table(500), table(500)], "y", rounds=5, local_steps=1, step_size=0.01)
    assert not res.converged
