"""Federated GLMs on ill-posed data: collinear designs and separation (fits.analysis.glm).

Oracle: statsmodels on the pooled rows, which says the same thing (a rank-deficient
design, PerfectSeparationWarning) where fits now says it from the sites' aggregates.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_cli import run

from fits.analysis.design import DesignError
from fits.analysis.glm import (
    GLMSite,
    LocalSingularityWarning,
    SeparationWarning,
    fit_glm,
    make_sites,
)
from fits.federation.protocol import Message, ProtocolError
from fits.federation.transport import InProcessTransport

sm = pytest.importorskip("statsmodels.api")


def _base(n: int, rng: np.random.Generator, shift: float = 0.0) -> pd.DataFrame:
    x1 = rng.normal(0, 1, n)
    x2 = rng.normal(5, 2, n)
    eta = 0.2 + 0.7 * x1 - 0.15 * (x2 - 5) + shift
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"x1": x1, "x2": x2, "y": y})


def _sites(make, sizes=(200, 150, 250), seed: int = 0) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    return [make(n, k, rng) for k, n in enumerate(sizes)]


def _dummies(n: int, k: int, rng: np.random.Generator) -> pd.DataFrame:
    d = _base(n, rng)
    g = rng.integers(0, 3, n)
    return d.assign(ga=(g == 0) * 1.0, gb=(g == 1) * 1.0, gc=(g == 2) * 1.0)


def _nominal_twice(n: int, k: int, rng: np.random.Generator) -> pd.DataFrame:
    d = _base(n, rng)
    g = rng.choice(["a", "b"], n)
    return d.assign(g=g, is_b=(g == "b") * 1.0)


COLLINEAR = {
    "duplicate": (lambda n, k, rng: _base(n, rng).assign(x3=lambda d: d.x1), ["x1", "x3"], "x3"),
    "combination": (
        lambda n, k, rng: _base(n, rng).assign(x3=lambda d: 2 * d.x1 - 3 * d.x2 + 1),
        ["x1", "x2", "x3"],
        "x3",
    ),
    "dummies and intercept": (_dummies, ["ga", "gb", "gc"], "gc"),
    "nominal coded twice": (_nominal_twice, ["is_b", "g=b"], "g"),
}


def _pooled(tables: list[pd.DataFrame], res_design) -> tuple[np.ndarray, np.ndarray]:
    x = np.vstack([res_design(t) for t in tables])
    y = np.concatenate([t["y"].to_numpy(float) for t in tables])
    return x, y


@pytest.mark.parametrize("case", list(COLLINEAR))
@pytest.mark.parametrize("mu", [None, 1.0])
def test_a_collinear_design_is_an_error_naming_the_features_before_any_release(
    case: str, mu: float | None
) -> None:
    make, involved, drop = COLLINEAR[case]
    tables = _sites(make)
    sites = make_sites({f"site{k + 1}": t for k, t in enumerate(tables)}, 0)
    transport = InProcessTransport(sites, n_jobs=1)
    with pytest.raises(DesignError, match="collinear across the federation") as err:
        fit_glm(None, "y", method="fedsgd", mu=mu, transport=transport)
    text = str(err.value)
    for name in involved:
        assert repr(name) in text
    assert f"leave out one column of each group (e.g. [{drop!r}])" in text
    # raised after glm_configure, before any fitting round: no gradient was released
    assert all(s.releases_left["fedsgd"] == 50 for s in sites)
    # statsmodels on the pooled rows: the same design is rank deficient
    pooled = pd.get_dummies(pd.concat(tables), drop_first=True, dtype=float)
    x = sm.add_constant(pooled.drop(columns="y")).to_numpy()
    assert np.linalg.matrix_rank(x) < x.shape[1]


def test_a_feature_constant_within_each_site_is_fine_pooled_but_warned_for_fednewton() -> None:
    tables = _sites(lambda n, k, rng: _base(n, rng, shift=0.5 * k).assign(s=float(k)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # FedSGD: no warning, no error
        sgd = fit_glm(tables, "y", method="fedsgd", K=4000, eta=0.8)
    x, y = _pooled(tables, sgd.design)
    ref = sm.GLM(y, x, family=sm.families.Binomial()).fit(tol=1e-12)
    np.testing.assert_allclose(sgd.params.to_numpy(), ref.params, atol=1e-5)
    for mu in (None, 1.0):
        with pytest.warns(LocalSingularityWarning, match=r"\['s'\] are collinear") as rec:
            res = fit_glm(tables, "y", method="fednewton", mu=mu)
        assert "FedNewton" in str(rec[0].message)
        assert res.warnings and "rank deficient" in res.warnings[0]
    # what the warning is about: the Newton step cannot move s's coefficient
    with pytest.warns(LocalSingularityWarning):
        newton = fit_glm(tables, "y", method="fednewton", check_separation=False)
    assert abs(newton.params["s"] - ref.params[3]) > 0.1


def test_a_relation_at_one_site_only_is_no_error_and_no_warning() -> None:
    def make(n: int, k: int, rng: np.random.Generator) -> pd.DataFrame:
        d = _base(n, rng)
        return d.assign(x3=d.x1 if k == 0 else rng.normal(0, 1, n))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # cov_type=None: no standard errors, no MLE distance
        res = fit_glm(_sites(make), "y", method="fednewton", cov_type=None)
    assert res.warnings == []


def test_a_site_with_fewer_rows_than_columns_sends_its_null_space_only_without_privacy() -> None:
    tables = _sites(lambda n, k, rng: _base(n, rng).assign(x3=lambda d: d.x1), sizes=(3, 150))
    # without privacy every site is counted (the pooled X'X is the sum of the sites')
    with pytest.raises(DesignError, match="collinear across the federation") as err:
        fit_glm(tables, "y", method="fedsgd")
    assert "['x1', 'x3'] are linearly dependent" in str(err.value)
    assert "not counted" not in str(err.value)
    # a private fit leaves the small site out and says so
    with pytest.raises(DesignError, match=r"site\(s\) \['site1'\], with fewer rows") as err:
        fit_glm(tables, "y", method="fedsgd", mu=1.0)
    assert "['x1', 'x3'] are linearly dependent" in str(err.value)
    # its design is rank deficient whatever the data: with privacy it sends zeros (not
    # its rows' span), without it its null space
    site = GLMSite(tables[0], "tiny")
    other = GLMSite(tables[1].assign(x3=np.random.default_rng(0).normal(size=150)), "big")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # three rows: separated, of course
        res = fit_glm(None, "y", method="fedsgd", transport=InProcessTransport([site, other]), K=1)
    for mu, sent in ((1.0, False), (0.0, True)):
        configure = Message(
            "glm_configure",
            {"means": res.standardization.means, "sds": res.standardization.sds},
            {"family": "logistic", "method": "fedsgd", "settings": json.dumps({"K": 1, "eta": 0.5}),
             "tau1": 0.1, "mu": mu, "null_space": 4},
        )  # fmt: skip
        assert site.handle(configure).arrays["null"].any() == sent


def _complete(n: int, k: int, rng: np.random.Generator) -> pd.DataFrame:
    d = _base(n, rng)
    return d.assign(x3=np.where(d.y == 1, 1, -1) * rng.uniform(0.1, 2, n))


def _quasi(n: int, k: int, rng: np.random.Generator) -> pd.DataFrame:
    d = _base(n, rng)
    g = rng.choice(["a", "b"], n).astype(object)
    g[(d.y == 1) & (rng.random(n) < 0.2)] = "r"
    return d.assign(g=g)


def _margin(n: int, k: int, rng: np.random.Generator) -> pd.DataFrame:
    x1, x2 = rng.normal(0, 1, n), rng.normal(0, 1, n)
    keep = np.abs(x1 + x2) > 0.5
    return pd.DataFrame({"x1": x1[keep], "x2": x2[keep], "y": (x1 + x2 > 0)[keep].astype(int)})


SEPARATED = {
    "complete": (_complete, "complete separation by 'x3'", "leave ['x3'] out"),
    "quasi": (_quasi, "quasi-complete separation by 'g=r' (every row with g=r has y = 1)", "['g']"),
    "combination": (_margin, "the fitted linear predictor separates 'y'", "penalized"),
}


@pytest.mark.parametrize("case", list(SEPARATED))
@pytest.mark.parametrize("method", ["fedsgd", "fednewton", "fedavg", "fedhybrid"])
def test_separation_is_warned_without_privacy(case: str, method: str) -> None:
    make, first, advice = SEPARATED[case]
    tables = _sites(make)
    with pytest.warns(SeparationWarning, match="does not exist") as rec:
        res = fit_glm(tables, "y", method=method)
    text = str(rec[0].message)
    assert text.startswith(first) and advice in text
    assert res.warnings == [text]
    assert res.to_dict()["warnings"] == [text]
    assert res.summary().endswith(f"warning: {text}")
    assert res.bse_note is not None and "does not exist (separation" in res.bse_note
    unchecked = fit_glm(tables, "y", method=method, check_separation=False, cov_type=None)
    assert unchecked.rounds == res.rounds - 1 and unchecked.warnings == []
    np.testing.assert_array_equal(unchecked.params, res.params)  # the fit is unchanged


def test_statsmodels_sees_the_same_separation() -> None:
    from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

    for make in (_complete, _margin):
        tables = _sites(make)
        res = fit_glm(tables, "y", method="fedsgd", check_separation=False)
        x, y = _pooled(tables, res.design)
        with pytest.warns(PerfectSeparationWarning):
            sm.GLM(y, x, family=sm.families.Binomial()).fit()


def test_a_private_fit_checks_only_when_asked() -> None:
    tables = _sites(_complete)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = fit_glm(tables, "y", method="fedsgd", mu=1.0, clip=1.0)
    assert quiet.warnings == [] and quiet.rounds == 3 + 50
    with pytest.warns(SeparationWarning, match="complete separation by 'x3'"):
        asked = fit_glm(tables, "y", method="fedsgd", mu=1.0, clip=1.0, check_separation=True)
    assert asked.rounds == quiet.rounds + 1
    np.testing.assert_array_equal(asked.params, quiet.params)


def test_poisson_zero_counts_in_a_category_are_warned() -> None:
    def make(n: int, k: int, rng: np.random.Generator) -> pd.DataFrame:
        x1 = rng.normal(0, 1, n)
        g = rng.choice(["a", "b", "z"], n, p=[0.45, 0.45, 0.1])
        y = rng.poisson(np.exp(0.3 + 0.5 * x1))
        y[g == "z"] = 0
        return pd.DataFrame({"x1": x1, "g": g, "y": y})

    with pytest.warns(SeparationWarning, match=r"every row with g=z has y = 0"):
        fit_glm(_sites(make), "y", family="poisson", method="fedsgd")


def test_the_site_answers_the_check_only_once_and_only_when_configured() -> None:
    tables = _sites(_complete)
    for asked, allowed in ((None, 0), (True, 1)):
        sites = make_sites({f"s{k}": t for k, t in enumerate(tables)}, 0)
        transport = InProcessTransport(sites, n_jobs=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit_glm(
                None, "y", method="fedsgd", mu=1.0, clip=1.0, transport=transport,
                check_separation=asked,
            )  # fmt: skip
        request = Message("glm_check", {"theta": res.params.to_numpy()})
        assert res.rounds == 3 + 50 + allowed
        assert sites[0].releases_left.get("check", 0) == 0
        with pytest.raises(ProtocolError, match="no separation check"):
            sites[0].handle(request)


def test_fits_analyze_prints_the_warning_once_and_writes_it(tmp_path: Path) -> None:
    paths = []
    for k, t in enumerate(_sites(_complete)):
        path = tmp_path / f"site{k + 1}.csv"
        t.to_csv(path, index=False)
        paths.append(str(path))
    out = tmp_path / "r.json"
    proc = run("analyze", *paths, "--target", "y", "--method", "fedsgd", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    both = proc.stdout + proc.stderr
    assert both.count("complete separation by 'x3'") == 1
    assert "warning: complete separation by 'x3'" in proc.stdout
    assert json.loads(out.read_text())["warnings"][0].startswith("complete separation")
    quiet = tmp_path / "q.json"
    proc = run(
        "analyze", *paths, "--target", "y", "--method", "fedsgd", "--out", str(quiet),
        "--no-check-separation", "--cov-type", "none",
    )  # fmt: skip
    assert proc.returncode == 0 and "separation" not in proc.stdout + proc.stderr
    # the check's round (a separated fit then skips the standard errors' round)
    assert json.loads(quiet.read_text())["rounds"] == json.loads(out.read_text())["rounds"] - 1


def test_fits_analyze_names_collinear_features(tmp_path: Path) -> None:
    paths = []
    for k, t in enumerate(_sites(COLLINEAR["duplicate"][0])):
        path = tmp_path / f"site{k + 1}.csv"
        t.to_csv(path, index=False)
        paths.append(str(path))
    out = tmp_path / "r.json"
    proc = run("analyze", *paths, "--target", "y", "--mu", "1", "--out", str(out))
    assert proc.returncode == 1
    assert "['x1', 'x3'] are linearly dependent" in proc.stderr
    assert not out.exists()
    proc = run(
        "analyze", *paths, "--target", "y", "--method", "fedlsa", "--out", str(out),
        "--check-separation",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--check-separation is not used by" in " ".join(proc.stderr.split())
