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


# ---------------------------------------------------------------- private fits
def _pair(r: float, sizes=(300, 200, 250), seed: int = 3, scales=(1.0, 1.0, 1.0)):
    """Sites whose x1 and x2 correlate ``r`` (x3 independent); site k's x1 spread
    ``scales[k]``."""
    rng = np.random.default_rng(seed)
    out = []
    for n, s in zip(sizes, scales, strict=True):
        x1 = rng.normal(0, s, n)
        x2 = 2 * (r * x1 + np.sqrt(1 - r * r) * rng.normal(0, s, n)) + 5
        x3 = rng.normal(size=n)
        eta = 0.4 * x1 - 0.3 * x3
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
        out.append(pd.DataFrame({"x1": x1, "x2": x2, "x3": x3, "y": y}))
    return out


def _local_vif(tables: list[pd.DataFrame], cols: list[str]) -> np.ndarray:
    """statsmodels' VIF of each column on each site's own rows (the oracle)."""
    out = []
    for t in tables:
        x = np.column_stack([np.ones(len(t)), t[cols].to_numpy(float)])
        out.append([variance_inflation_factor(x, j + 1) for j in range(len(cols))])
    return np.array(out)


@pytest.mark.parametrize("method", ["fedsgd", "fedhybrid", "fedavg", "fednewton"])
def test_a_private_fit_warns_of_a_pair_correlated_0999_before_any_noisy_round(method):
    from fits.analysis.glm import PRIVATE_VIF_WARN, NearCollinearityWarning, make_sites
    from fits.federation.transport import InProcessTransport

    tables = _pair(0.999)
    assert (_local_vif(tables, ["x1", "x2"]) >= PRIVATE_VIF_WARN).all()  # the oracle
    assert (_local_vif(tables, ["x1", "x2"]) < VIF_WARN).all()  # below the fisher check's
    with pytest.warns(NearCollinearityWarning) as rec:
        res = fit_glm(tables, "y", method=method, mu=1.0, clip=2.0)
    [text] = [str(w.message) for w in rec]
    assert text.startswith("nearly collinear features at every site: ['x1', 'x2'] are")
    assert "leave all but one of each group out (e.g. ['x2'])" in text and "x3" not in text
    assert res.warnings == [text] and res.summary().endswith(f"warning: {text}")
    assert "nearly collinear directions" in str(res.privacy_scope)
    # as an error it stops the fit after glm_configure: no noisy release was made
    sites = make_sites({f"s{k}": t for k, t in enumerate(tables)}, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NearCollinearityWarning)
        with pytest.raises(NearCollinearityWarning):
            fit_glm(None, "y", method=method, mu=1.0, transport=InProcessTransport(sites))
    plan = {"fedsgd": "fedsgd", "fedhybrid": "hybrid2", "fedavg": "fedavg", "fednewton": "newton"}
    for site in sites:
        full = site.releases_left[plan[method]]
        assert full == {"fedsgd": 50, "fedhybrid": 20, "fedavg": 2, "fednewton": 1}[method]


def test_a_private_fit_says_nothing_of_a_pair_correlated_099_or_of_one_site():
    from fits.analysis.glm import PRIVATE_VIF_WARN

    tables = _pair(0.99)
    assert (_local_vif(tables, ["x1", "x2"]) < PRIVATE_VIF_WARN).all()  # VIF about 50
    one_site = _pair(0.0)
    one_site[1]["x2"] = 3 * one_site[1]["x1"] + np.random.default_rng(0).normal(0, 1e-3, 200)
    for t in (tables, one_site):
        with warnings.catch_warnings():
            warnings.simplefilter("error", GLMWarning)
            res = fit_glm(t, "y", method="fedsgd", mu=1.0, clip=2.0)
        assert res.warnings == []


def test_a_three_column_relation_at_sites_of_different_spreads_is_named_whole():
    """x3 = x1 - 2 x2 + small noise; the sites' spreads differ tenfold, so the relation's
    direction is the same on the design columns but not on each site's correlations."""
    from fits.analysis.glm import NearCollinearityWarning

    rng = np.random.default_rng(5)
    tables = []
    for n, s in ((200, 0.3), (300, 1.0), (250, 3.0)):
        x1, x2, x4 = rng.normal(0, s, n), rng.normal(1, s, n), rng.normal(size=n)
        x3 = x1 - 2 * x2 + rng.normal(0, 0.01 * s, n)
        y = (rng.random(n) < 1 / (1 + np.exp(-0.5 * x4))).astype(int)
        tables.append(pd.DataFrame({"x1": x1, "x2": x2, "x3": x3, "x4": x4, "y": y}))
    with pytest.warns(NearCollinearityWarning, match=r"\['x1', 'x2', 'x3'\] are almost"):
        fit_glm(tables, "y", method="fednewton", mu=1.0, clip=2.0)


def test_the_near_directions_leave_a_site_only_in_a_private_fit(monkeypatch):
    import json

    import fits.analysis.glm as glm
    from fits.federation.protocol import Message, ProtocolError

    tables = _pair(0.999)

    def boom(*args, **kwargs):
        raise AssertionError("near directions computed in a fit without privacy")

    with monkeypatch.context() as m, warnings.catch_warnings():
        m.setattr(glm, "near_projector", boom)
        warnings.simplefilter("error", GLMWarning)
        res = fit_glm(tables, "y", cov_type=None, check_separation=False)
    assert res.warnings == []
    st = res.standardization
    site = glm.GLMSite(tables[0], "s0")
    site.handle(Message("moments", config={"design": res.spec.to_json(), "n_numeric": 3}))
    configure = Message(
        "glm_configure", {"means": st.means, "sds": st.sds},
        {"family": "logistic", "method": "fedsgd", "settings": json.dumps({"K": 1, "eta": 0.5}),
         "tau1": 0.1, "mu": 0.0, "null_space": 4, "near_space": 4},
    )  # fmt: skip
    with pytest.raises(ProtocolError, match="near-collinearity directions are a private"):
        site.handle(configure)
    u = site.handle(Message(configure.type, configure.arrays, {**configure.config, "mu": 1.0}))
    q = u.arrays["near"]  # one direction, on x1 and x2 (the intercept and x3 out of it)
    assert np.trace(q) == pytest.approx(1.0)
    assert q[0, 0] == 0.0 and abs(q[3, 3]) < 1e-3
    # no direction at a site of fewer rows than columns, nor from a column constant there
    few = np.column_stack([np.ones(3), np.arange(3.0), 2 * np.arange(3.0), np.ones(3)])
    assert not glm.near_projector(few, True).any()
    rng = np.random.default_rng(0)
    const = np.column_stack([np.ones(50), rng.normal(size=(50, 2)), np.full(50, 0.7)])
    assert not glm.near_projector(const, True).any()


def test_fits_analyze_prints_the_private_near_collinearity_warning(tmp_path):
    import json

    from conftest import fits_in_process as run

    paths = []
    for k, t in enumerate(_pair(0.999)):
        paths.append(str(tmp_path / f"site{k + 1}.csv"))
        t.to_csv(paths[-1], index=False)
    out = tmp_path / "r.json"
    proc = run("analyze", *paths, "--target", "y", "--mu", "1", "--clip", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "warning: nearly collinear features at every site: ['x1', 'x2']" in said
    result = json.loads(out.read_text())
    assert result["warnings"][0].startswith("nearly collinear features at every site")
    assert "nearly collinear directions" in result["privacy_scope"]


def test_check_collinearity_false_keeps_the_near_directions_at_the_sites(tmp_path, monkeypatch):
    """A steward who wants every release of a private fit under the guarantee switches the
    near-collinearity check off: no site computes or sends its near directions, no
    warning, and privacy_scope no longer lists them; the exact null space still goes."""
    import fits.analysis.glm as glm

    from conftest import fits_in_process as run

    tables = _pair(0.999)

    def boom(*args, **kwargs):
        raise AssertionError("near directions computed with check_collinearity=False")

    with monkeypatch.context() as m, warnings.catch_warnings():
        m.setattr(glm, "near_projector", boom)
        warnings.simplefilter("error", GLMWarning)
        res = fit_glm(tables, "y", method="fedsgd", mu=1.0, clip=2.0, check_collinearity=False)
    assert res.warnings == [] and not res.near_checked
    assert "each site's design null space" in res.privacy_scope
    assert "nearly collinear" not in res.privacy_scope
    paths = []
    for k, t in enumerate(tables):
        paths.append(str(tmp_path / f"site{k + 1}.csv"))
        t.to_csv(paths[-1], index=False)
    base = ["analyze", *paths, "--target", "y", "--out", str(tmp_path / "r.json")]
    proc = run(*base, "--mu", "1", "--clip", "2", "--no-check-collinearity")
    assert proc.returncode == 0, proc.stderr
    assert "nearly collinear features" not in proc.stdout + proc.stderr
    proc = run(*base, "--no-check-collinearity")  # no privacy: the option has no use
    said = " ".join(proc.stderr.replace("│", " ").split())
    assert proc.returncode == 2 and "without privacy the standard errors' round" in said
