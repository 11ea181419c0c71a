"""Federated GLMs with differential privacy (fits.analysis.glm, fits.analysis.accounting).

Oracles: statsmodels' pooled maximum-likelihood GLM; the lemmas' noise formulas written
out here, with each site's noise replayed from its seed; Google's dp-accounting PLD
accountant for the (epsilon, delta) conversion.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from fits.analysis.accounting import gdp_delta, gdp_epsilon, gdp_mu, resolve_budget
from fits.analysis.design import DesignError, DesignSpec, schema_round, standardization_round
from fits.analysis.glm import DEFAULTS, GLMSite, clipped_gradients, fit_glm
from fits.federation.protocol import Message, ProtocolError, check_reply
from fits.federation.transport import InProcessTransport

from conftest import glm_tables

sm = pytest.importorskip("statsmodels.api")


def _tables(family: str, sizes=(120, 90, 150), seed: int = 3) -> list[pd.DataFrame]:
    return glm_tables(family, sizes, seed)


_SM = {
    "linear": "Gaussian",
    "logistic": "Binomial",
    "poisson": "Poisson",
}


@pytest.mark.parametrize("family", ["linear", "logistic", "poisson"])
def test_nonprivate_fedsgd_converges_to_pooled_mle(family: str) -> None:
    tables = _tables(family)
    res = fit_glm(tables, "y", family=family, method="fedsgd", K=4000, eta=0.8)
    x = np.vstack([res.design(t) for t in tables])
    y = np.concatenate([t["y"].to_numpy(float) for t in tables])
    ref = sm.GLM(y, x, family=getattr(sm.families, _SM[family])()).fit(tol=1e-13)
    np.testing.assert_allclose(res.params.to_numpy(), ref.params, atol=1e-6, rtol=0)
    assert res.privacy is None and math.isinf(res.clip)
    # 3 setup rounds (setup, moments, configure) + K gradient rounds (+ the separation
    # check of a non-private logistic or Poisson fit) + the standard errors' round
    assert res.rounds == 3 + 4000 + (family != "linear") + 1
    # standard errors: statsmodels' model-based ones on the pooled rows, same design scale
    np.testing.assert_allclose(res.bse.to_numpy(), ref.bse, rtol=1e-6)
    np.testing.assert_allclose(res.conf_int().to_numpy(), ref.conf_int(), rtol=1e-6)
    np.testing.assert_allclose(res.conf_int(0.1).to_numpy(), ref.conf_int(0.1), rtol=1e-6)
    np.testing.assert_allclose(res.tvalues.to_numpy(), ref.tvalues, rtol=1e-6)
    np.testing.assert_allclose(res.pvalues.to_numpy(), ref.pvalues, rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(res.cov_params().to_numpy(), ref.cov_params(), rtol=1e-6)
    assert res.cov_type == "nonrobust"
    assert res.scale == pytest.approx(ref.scale, rel=1e-9)
    assert res.mle_distance < 1e-9  # converged: no warning (res.warnings == [] below)
    assert res.warnings == []
    assert res.uploaded_bytes > 4000 * 3 * 8 * x.shape[1]
    np.testing.assert_allclose(res.predict(tables[0]), ref.predict(res.design(tables[0])))
    # original_params: the same fit on the raw (unstandardized) numeric features
    pooled = pd.concat(tables, ignore_index=True)
    raw = np.column_stack(
        [np.ones(len(pooled)), pooled.x1, pooled.x2, pooled.c == "b", pooled.c == "c"]
    ).astype(float)
    ref_raw = sm.GLM(y, raw, family=getattr(sm.families, _SM[family])()).fit(tol=1e-13)
    np.testing.assert_allclose(res.original_params.to_numpy(), ref_raw.params, atol=1e-5)


@pytest.mark.parametrize("family", ["linear", "logistic", "poisson"])
def test_nonprivate_hc0_standard_errors_are_statsmodels_sandwich(family: str) -> None:
    tables = _tables(family)
    res = fit_glm(tables, "y", family=family, method="fedsgd", K=4000, eta=0.8, cov_type="HC0")
    x = np.vstack([res.design(t) for t in tables])
    y = np.concatenate([t["y"].to_numpy(float) for t in tables])
    model = sm.GLM(y, x, family=getattr(sm.families, _SM[family])())
    ref = model.fit(tol=1e-13, cov_type="HC0")
    np.testing.assert_allclose(res.bse.to_numpy(), ref.bse, rtol=1e-6)
    np.testing.assert_allclose(res.conf_int().to_numpy(), ref.conf_int(), rtol=1e-6)
    assert res.cov_type == "HC0"


@pytest.mark.parametrize("method", ["fednewton", "fedavg"])
def test_standard_errors_are_the_pooled_fisher_information_at_the_estimate(method) -> None:
    """Whatever the estimate (FedNewton and FedAvg stop short of the pooled MLE), bse
    is the pooled inverse Fisher information at it, and the vectorized sites agree; the
    fit warns how far (in standard errors) its estimate lies from the pooled MLE."""
    from fits.analysis.glm import GLMWarning

    for family in ("logistic", "poisson", "linear"):
        tables = _tables(family)
        with pytest.warns(GLMWarning, match=r"standard errors \(Fisher metric\) from the pooled"):
            res = fit_glm(tables, "y", family=family, method=method)
        x = np.vstack([res.design(t) for t in tables])
        y = np.concatenate([t["y"].to_numpy(float) for t in tables])
        eta = x @ res.params.to_numpy()
        mean = {"linear": eta, "logistic": 1 / (1 + np.exp(-eta)), "poisson": np.exp(eta)}
        w = {"linear": np.ones_like(eta), "logistic": mean["logistic"] * (1 - mean["logistic"])}
        w["poisson"] = mean["poisson"]
        n, p = x.shape
        scale = np.sum((y - eta) ** 2) / (n - p) if family == "linear" else 1.0
        cov = scale * np.linalg.inv((x * w[family][:, None]).T @ x)
        np.testing.assert_allclose(res.bse.to_numpy(), np.sqrt(np.diag(cov)), rtol=1e-9)
        g = (mean[family] - y) @ x
        assert res.mle_distance == pytest.approx(np.sqrt(g @ cov @ g) / scale, rel=1e-9)
        assert res.mle_distance > 0.1 and "Fisher metric" in res.warnings[-1]
        assert "more iterations do not remove it" in res.warnings[-1]  # the fix: fedsgd
        with pytest.warns(GLMWarning):
            batch = fit_glm(tables, "y", family=family, method=method, vectorized=True)
        np.testing.assert_allclose(batch.bse.to_numpy(), res.bse.to_numpy(), rtol=1e-9)
        d = res.to_dict()
        assert d["bse"] == {k: float(v) for k, v in res.bse.items()}
        assert d["conf_int"]["level"] == 0.95 and d["bse_note"] is None
        assert d["conf_int"]["lower"]["x1"] == float(res.conf_int().loc["x1", 0])
        assert "std err" in res.summary() and "[0.025" in res.summary()


def test_a_private_fit_has_no_standard_errors_and_says_why() -> None:
    from fits.analysis.glm import GLMInferenceError, GLMWarning

    tables = _tables("logistic")
    res = fit_glm(tables, "y", method="fedsgd", mu=1.0, clip=1.0)
    for get in (lambda: res.bse, res.conf_int, res.cov_params, lambda: res.pvalues):
        with pytest.raises(GLMInferenceError, match="not available for a private fit"):
            get()
    d = res.to_dict()
    assert d["bse"] is None and d["conf_int"] is None
    assert "outside the privacy guarantee" in d["bse_note"]
    assert "std err: none (standard errors are not available" in res.summary()
    # no Fisher round: 3 setup rounds + K gradients
    assert res.rounds == 3 + 50
    none = fit_glm(tables, "y", method="fedsgd", cov_type=None)
    with pytest.raises(GLMInferenceError, match="cov_type=None"):
        _ = none.bse
    with pytest.warns(GLMWarning, match="Fisher metric"):  # K = 50 stops short of the MLE
        with_se = fit_glm(tables, "y", method="fedsgd")
    assert none.rounds == with_se.rounds - 1
    with pytest.raises(ValueError, match="cov_type must be one of"):
        fit_glm(tables, "y", method="fedsgd", cov_type="HC1")
    with pytest.raises(GLMInferenceError, match="alpha must lie in"):
        with_se.conf_int(1.5)


def test_the_site_sends_its_fisher_information_once_and_never_in_a_private_fit() -> None:
    site, tr, x, y, _ = _configured_site("fedsgd", mu=0.0)  # mu 0: no privacy
    p = x.shape[1]
    request = Message("glm_fisher", {"theta": np.zeros(p)}, {"dispersion": 1, "robust": 1})
    reply = tr.broadcast(request)[0]
    check_reply(request, reply)
    assert sorted(reply.arrays) == ["info", "loss", "meat", "rss", "score"]
    np.testing.assert_allclose(reply.arrays["score"], (0.5 - y) @ x)
    iu = np.triu_indices(p)
    np.testing.assert_allclose(reply.arrays["info"], (0.25 * x.T @ x)[iu])  # p = 1/2 at 0
    np.testing.assert_allclose(reply.arrays["rss"], [np.sum((0.5 - y) ** 2)])
    np.testing.assert_allclose(reply.arrays["meat"], ((x * ((0.5 - y) ** 2)[:, None]).T @ x)[iu])
    with pytest.raises(ProtocolError, match="sent already"):
        site.handle(request)
    private = _configured_site("fedsgd", mu=1.0)[0]
    with pytest.raises(ProtocolError, match="no Fisher information in a private fit"):
        private.handle(request)
    bad = Message("glm_fisher", {"info": reply.arrays["info"], "rss": np.zeros(1)})
    with pytest.raises(ProtocolError, match="allows exactly"):
        check_reply(Message("glm_fisher", {"theta": np.zeros(p)}), bad)


# ------------------------------------------------------------------ the mechanism
def _configured_site(method, family="logistic", mu=1.0, settings=None, seed=11, n=61):
    frame = _tables(family, sizes=(n,), seed=5)[0]
    site = GLMSite(frame, "s1", seed=seed)
    site.log_noise = True
    tr = InProcessTransport([site], n_jobs=1)
    schema, _ = schema_round(tr)
    spec = DesignSpec.from_schema(schema, "y")
    st = standardization_round(tr, spec)
    s = dict(DEFAULTS[method], **(settings or {}))
    tr.broadcast(
        Message(
            "glm_configure",
            {"means": st.means, "sds": st.sds},
            {"family": family, "method": method, "settings": json.dumps(s), "tau1": 0.2, "mu": mu},
        )
    )
    x = site.design(st)
    y = frame["y"].to_numpy(float)
    return site, tr, x, y, s


def _clip_mean(x, y, theta, b):
    """Independent per-row loop: logistic gradient (p - y) x, clipped to norm b."""
    out = np.zeros(x.shape[1])
    for xi, yi in zip(x, y, strict=True):
        g = (1 / (1 + np.exp(-xi @ theta)) - yi) * xi
        out += g * min(1.0, b / np.linalg.norm(g))
    return out / len(y)


def test_fedsgd_noise_is_lemma_3_1() -> None:
    k, b, mu, n = 40, 0.7, 1.3, 61
    site, tr, x, y, _ = _configured_site("fedsgd", mu=mu, settings={"K": k}, n=n)
    theta = np.array([0.1, -0.2, 0.3, 0.0, 0.5])
    replies = [
        tr.broadcast(Message("glm_gradient", {"theta": theta}, {"stage": "fedsgd", "clip": b}))[0]
        for _ in range(k)
    ]
    sigma = 2 * b * math.sqrt(k) / (mu * n)  # Lemma 3.1
    assert site.sigmas["fedsgd"] == pytest.approx(sigma, rel=1e-14)
    rng = np.random.default_rng(11)
    g = _clip_mean(x, y, theta, b)
    for r in replies:
        np.testing.assert_allclose(r.arrays["g"], g + sigma * rng.standard_normal(5), atol=1e-12)
    # the plan allows K releases, not one more
    with pytest.raises(ProtocolError, match="no 'fedsgd' release left"):
        tr.broadcast(Message("glm_gradient", {"theta": theta}, {"stage": "fedsgd", "clip": b}))


def _replay_local(x, y, theta, b, eta, k, sigma, rng):
    for _ in range(k):
        theta = theta - eta * _clip_mean(x, y, theta, b) + sigma * rng.standard_normal(theta.size)
    return theta


@pytest.mark.parametrize(
    ("method", "stage", "formula"),
    [
        # Lemma 3.4, stage I: a_i = 2 B eta1 sqrt(2 K1) / (mu n_i)
        (
            "fedhybrid",
            "hybrid1",
            lambda b, mu, n, s: 2 * b * s["eta1"] * math.sqrt(2 * s["K1"]) / (mu * n),
        ),
        # Algorithm 3 / Lemma 3.6: 2 B eta sqrt(R K) / (mu n_i)
        (
            "fedavg",
            "fedavg",
            lambda b, mu, n, s: 2 * b * s["eta"] * math.sqrt(s["R"] * s["K"]) / (mu * n),
        ),
        # Algorithm 4, FedAvg on the first half: 4 B eta sqrt(2 K) / (mu n_i)
        (
            "fednewton",
            "newton_avg",
            lambda b, mu, n, s: 4 * b * s["eta"] * math.sqrt(2 * s["K"]) / (mu * n),
        ),
    ],
)
def test_local_steps_noise_is_the_lemmas(method, stage, formula) -> None:
    b, mu, n = 0.9, 0.8, 60
    site, tr, x, y, s = _configured_site(
        method, mu=mu, n=n, settings={"K1" if stage == "hybrid1" else "K": 7}
    )
    theta0 = np.zeros(5)
    reply = tr.broadcast(Message("glm_local", {"theta": theta0}, {"stage": stage, "clip": b}))[0]
    sigma = formula(b, mu, n, s)
    assert site.sigmas[stage] == pytest.approx(sigma, rel=1e-14)
    rng = np.random.default_rng(11)
    if method == "fednewton":
        perm = rng.permutation(n)
        x, y = x[perm[: n // 2]], y[perm[: n // 2]]
    k = int(s["K1"] if stage == "hybrid1" else s["K"])
    eta = s["eta1"] if stage == "hybrid1" else s["eta"]
    expected = _replay_local(x, y, theta0, b, eta, k, sigma, rng)
    np.testing.assert_allclose(reply.arrays["theta"], expected, atol=1e-12)
    assert len(site.noise_log[stage]) == k


def test_fedhybrid_stage_two_noise_is_lemma_3_4() -> None:
    b, mu, n, k2 = 0.5, 2.0, 61, 9
    site, tr, *_ = _configured_site("fedhybrid", mu=mu, n=n, settings={"K2": k2})
    tr.broadcast(Message("glm_gradient", {"theta": np.zeros(5)}, {"stage": "hybrid2", "clip": b}))
    assert site.sigmas["hybrid2"] == pytest.approx(2 * b * math.sqrt(2 * k2) / (mu * n), rel=1e-14)


def test_newton_step_is_algorithm_4() -> None:
    b, mu, n, tau1 = 0.8, 1.5, 60, 0.2
    site, tr, x, y, s = _configured_site("fednewton", mu=mu, n=n)
    theta = np.array([0.2, 0.5, -0.1, 0.0, 0.3])
    tr.broadcast(Message("glm_local", {"theta": np.zeros(5)}, {"stage": "newton_avg", "clip": b}))
    reply = tr.broadcast(Message("glm_newton", {"theta": theta}, {"clip": b}))[0]
    sigma = 2 * (4 * math.sqrt(2) * b / tau1) / (mu * n)  # 2 B_new / (mu n_i)
    assert site.sigmas["newton"] == pytest.approx(sigma, rel=1e-14)
    rng = np.random.default_rng(11)
    perm = rng.permutation(n)
    first, second = perm[: n // 2], perm[n // 2 :]
    for _ in range(int(s["K"])):  # the FedAvg round's draws come first
        rng.standard_normal(5)
    p1 = 1 / (1 + np.exp(-x[first] @ theta))
    h = (x[first] * (p1 * (1 - p1))[:, None]).T @ x[first] / len(first)
    vals, vecs = np.linalg.eigh(h)
    h_floor = vecs @ np.diag(np.maximum(vals, tau1)) @ vecs.T
    g = _clip_mean(x[second], y[second], theta, b)
    expected = theta - np.linalg.solve(h_floor, g) + sigma * rng.standard_normal(5)
    np.testing.assert_allclose(reply.arrays["theta"], expected, atol=1e-10)


def test_odd_site_uses_the_smaller_half() -> None:
    site, tr, *_ = _configured_site("fednewton", mu=1.0, n=61)
    tr.broadcast(Message("glm_local", {"theta": np.zeros(5)}, {"stage": "newton_avg", "clip": 1.0}))
    assert site.sigmas["newton_avg"] == pytest.approx(4 * 0.5 * math.sqrt(2 * 50) / 60, rel=1e-14)


def test_every_row_gradient_is_clipped() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0, 3, (500, 4))
    y = rng.poisson(2.0, 500).astype(float)
    theta = rng.normal(0, 0.5, 4)
    b = 1.5
    g = clipped_gradients("poisson", x, y, theta, b)
    raw = (np.exp(x @ theta) - y)[:, None] * x
    norms = np.linalg.norm(g, axis=1)
    assert norms.max() <= b * (1 + 1e-12)
    big = np.linalg.norm(raw, axis=1) > b
    assert big.sum() > 50 and (~big).sum() > 50
    np.testing.assert_allclose(norms[big], b)
    np.testing.assert_allclose(g[~big], raw[~big])
    # clipping keeps each gradient's direction
    cos = np.einsum("ij,ij->i", g, raw) / (norms * np.linalg.norm(raw, axis=1))
    np.testing.assert_allclose(cos[norms > 0], 1.0)


def test_private_fit_is_reproducible_and_seeded_per_site() -> None:
    tables = _tables("logistic")
    a = fit_glm(tables, "y", method="fedsgd", mu=1.0, seed=4)
    b = fit_glm(tables, "y", method="fedsgd", mu=1.0, seed=4)
    c = fit_glm(tables, "y", method="fedsgd", mu=1.0, seed=5)
    np.testing.assert_array_equal(a.params, b.params)
    assert not np.allclose(a.params, c.params)
    assert a.clip_data_driven and a.rounds == 4 + 50
    assert a.privacy.mu_site == 1.0
    assert a.privacy.mu_third_party == pytest.approx(1 / math.sqrt(3))


@pytest.mark.parametrize("method", ["fedsgd", "fedhybrid", "fedavg", "fednewton"])
def test_each_method_runs_private_and_not(method: str) -> None:
    tables = _tables("logistic", sizes=(400, 400, 400, 400))
    ref = fit_glm(tables, "y", method="fedsgd", K=3000, eta=1.0).params.to_numpy()
    free = fit_glm(tables, "y", method=method).params.to_numpy()
    priv = fit_glm(tables, "y", method=method, mu=2.0, clip=2.0).params.to_numpy()
    assert np.abs(free - ref).max() < 0.35
    assert np.all(np.isfinite(priv)) and not np.allclose(priv, free)


# ------------------------------------------------------------------ accounting
def test_gdp_conversion_matches_dp_accounting_pld() -> None:
    dp_accounting = pytest.importorskip("dp_accounting")
    for mu in (0.3, 1.0, 2.5):
        acc = dp_accounting.pld.PLDAccountant()
        # mu-GDP is the Gaussian mechanism with sensitivity / sigma = mu
        acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier=1.0 / mu))
        for eps in (0.25, 1.0, 3.0):
            # PLD discretization (interval 1e-4) is pessimistic: delta never below ours
            d_pld = acc.get_delta(eps)
            assert gdp_delta(eps, mu) <= d_pld + 1e-12
            assert d_pld - gdp_delta(eps, mu) < 1e-3 * max(d_pld, 1e-9) + 1e-10
        e_pld = acc.get_epsilon(1e-5)
        assert gdp_epsilon(mu, 1e-5) == pytest.approx(e_pld, abs=1e-3)


def test_gdp_inverses() -> None:
    for mu in (0.1, 0.5, 1.0, 3.0):
        eps = gdp_epsilon(mu, 1e-6)
        assert gdp_delta(eps, mu) == pytest.approx(1e-6, rel=1e-8)
        assert gdp_mu(eps, 1e-6) == pytest.approx(mu, rel=1e-8)
    assert gdp_delta(0.0, 1.0) == pytest.approx(2 * 0.691462461274013 - 1, rel=1e-12)
    budget = resolve_budget(None, 3.0, 1e-5)
    assert gdp_delta(3.0, budget.mu) == pytest.approx(1e-5, rel=1e-8)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mu": 0.0}, "mu must be a positive"),
        ({"mu": -1.0}, "mu must be a positive"),
        ({"epsilon": 1.0, "delta": 1.0}, "delta must lie strictly between 0 and 1"),
        ({"epsilon": 1.0, "delta": 0.0}, "delta must lie strictly between 0 and 1"),
        ({"epsilon": 1.0}, "epsilon needs delta"),
        ({"mu": 1.0, "epsilon": 1.0, "delta": 1e-5}, "not both"),
        ({"method": "fedprox"}, "unknown method 'fedprox'"),
        ({"family": "gamma"}, "unknown family 'gamma'"),
        ({"method": "fedsgd", "K1": 3}, r"option\(s\) \['K1'\] do not apply"),
        ({"K": 0}, "iteration count K must be a positive integer"),
    ],
)
def test_bad_options_fail_before_any_round(kwargs, match) -> None:
    class Exploding(InProcessTransport):
        def _deliver(self, client, message):  # pragma: no cover - must not be reached
            raise AssertionError("a round ran")

    tr = Exploding([GLMSite(t, f"s{k}") for k, t in enumerate(_tables("logistic"))])
    with pytest.raises(ValueError, match=match):
        fit_glm(None, "y", transport=tr, **kwargs)


def test_bad_targets_name_the_site() -> None:
    tables = _tables("logistic")
    tables[1].loc[7, "y"] = 2
    with pytest.raises(DesignError, match=r"site2: target 'y' must be binary 0/1.*\[2\.0\]"):
        fit_glm(tables, "y", family="logistic")
    counts = _tables("poisson")
    counts[2]["y"] = counts[2]["y"].astype(float)
    counts[2].loc[4, "y"] = 2.5
    with pytest.raises(DesignError, match=r"site3: target 'y' must be a count"):
        fit_glm(counts, "y", family="poisson", method="fedsgd")


def test_site_too_small_for_sample_splitting() -> None:
    tables = _tables("logistic", sizes=(100, 9, 100))
    with pytest.raises(DesignError, match=r"'site2' \(9 rows\) too small for FedNewton"):
        fit_glm(tables, "y", method="fednewton", mu=1.0)
    fit_glm(tables, "y", method="fedsgd")  # other methods do not split


def test_glm_replies_are_checked() -> None:
    req = Message("glm_gradient", {"theta": np.zeros(4)}, {"stage": "fedsgd", "clip": 1.0})
    check_reply(req, Message("glm_gradient", {"g": np.zeros(4)}))
    with pytest.raises(ProtocolError):
        check_reply(req, Message("glm_gradient", {"g": np.zeros(400)}))
    with pytest.raises(ProtocolError):
        check_reply(req, Message("glm_gradient", {"g": np.zeros(4), "x": np.zeros((9, 4))}))


@pytest.mark.parametrize("method", ["fedsgd", "fedhybrid", "fedavg", "fednewton"])
@pytest.mark.parametrize("mu", [None, 1.5])
def test_vectorized_rounds_equal_the_sites_own(method: str, mu) -> None:
    tables = _tables("poisson", sizes=(60, 45, 81, 50))
    kw = {"family": "poisson", "method": method, "mu": mu, "seed": 9, "tau1": 0.5}
    alone = fit_glm(tables, "y", **kw)
    batch = fit_glm(tables, "y", vectorized=True, **kw)
    np.testing.assert_allclose(batch.params, alone.params, rtol=1e-10, atol=1e-12)
    assert (batch.rounds, batch.uploaded_bytes) == (alone.rounds, alone.uploaded_bytes)


def _refuse(parts, task):
    raise ValueError("site1 too small")


def test_direct_fit_in_the_utility_table_uses_the_same_yardstick() -> None:
    from fits.analysis.glm import direct_fit
    from fits.evaluation.utility import downstream_utility

    tables = _tables("linear", sizes=(150, 120, 130))
    test = _tables("linear", sizes=(200,), seed=8)[0]
    kinds = {"x1": "continuous", "x2": "continuous", "c": "nominal", "y": "continuous"}
    res = downstream_utility(
        tables, tables[0], test, "y", kinds, boosting=False,
        direct={
            "FedSGD converged": direct_fit("fedsgd", None, 0, K=3000, eta=1.0),
            "Newton, non-private": direct_fit("newton", None, 0),
            "FedNewton, mu=1": direct_fit("fednewton", 1.0, 0, clip=5.0),
            "failing": _refuse,
        },
    )  # fmt: skip
    t = res.table
    pooled = t[t["mode"] == "pooled"].iloc[0]
    direct = t[t["mode"] == "direct"].set_index("setting")
    # converged non-private FedSGD is the pooled least-squares fit: same error, same MSE
    assert direct.loc["FedSGD converged", "param_error"] == pytest.approx(
        pooled["param_error"], abs=1e-6
    )
    assert direct.loc["FedSGD converged", "mse"] == pytest.approx(pooled["mse"], rel=1e-6)
    # newton (fits report's non-private row) is it to rounding, in 2 glm_sums rounds
    assert direct.loc["Newton, non-private", "param_error"] == pytest.approx(
        pooled["param_error"], abs=1e-10
    )
    assert np.isfinite(direct.loc["FedNewton, mu=1", "param_error"])
    assert direct.loc["failing", "note"] == "site1 too small"
    assert np.isnan(direct.loc["failing", "param_error"])


def test_report_shows_the_direct_fits_next_to_the_modes() -> None:
    from fits.analysis.glm import direct_fit
    from fits.datasets import federated_split, simulate
    from fits.report import evaluate

    data = simulate(900, seed=4)
    clients, test = federated_split(data.frame, shares=(0.5, 0.3, 0.2), seed=0)
    synthetic = data.frame.sample(600, random_state=1).reset_index(drop=True)  # a stand-in
    report = evaluate(
        data.frame, synthetic, data.kinds, target="Y_log", test=test, clients=clients,
        boosting=False, privacy=False, max_rows=300,
        direct_fits={
            "FedNewton, non-private": direct_fit("fednewton", None, 0),
            "FedNewton, mu=1": direct_fit("fednewton", 1.0, 0),
        },
    )  # fmt: skip
    table = report.utility["Y_log"].table
    direct = table[table["mode"] == "direct"]
    assert list(direct["setting"]) == ["FedNewton, non-private", "FedNewton, mu=1"]
    assert direct["param_error"].notna().all() and direct["roc_auc"].between(0.5, 1).all()
    html = report.to_html()
    assert "fit directly across sites (FedNewton, mu=1)" in html
