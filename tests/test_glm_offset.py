"""Offsets, exposures and prior weights in federated GLMs (fit_glm, fits analyze).

Oracle: statsmodels' GLM on the pooled rows with ``offset=``, ``exposure=`` and
``var_weights=`` (the semantics fits states for its prior weights).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.analysis.design import DesignError
from fits.analysis.glm import BatchTransport, GLMSite, fit_glm, make_sites
from fits.federation.protocol import Message, ProtocolError
from fits.federation.transport import InProcessTransport

from conftest import fits_in_process as run
from conftest import write_sites

sm = pytest.importorskip("statsmodels.api")


def _tables(seed: int = 1, sizes: tuple[int, ...] = (300, 200)) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    out = {}
    for k, m in enumerate(sizes):
        a = rng.normal(size=m)
        g = rng.choice(["u", "v", "w"], m)
        e = rng.uniform(0.5, 5.0, m)
        eta = 0.3 + 0.5 * a + 0.4 * (g == "v")
        out[f"s{k + 1}"] = pd.DataFrame(
            {
                "a": a,
                "g": g,
                "e": e,
                "w": rng.uniform(0.0, 3.0, m),
                "y": rng.poisson(e * np.exp(eta)).astype(float),
                "b": (rng.uniform(size=m) < 1 / (1 + np.exp(-eta - np.log(e)))).astype(float),
                "z": eta + rng.normal(size=m),
            }
        )
    return out


def _pooled_x(pooled: pd.DataFrame) -> pd.DataFrame:
    dummies = pd.get_dummies(pooled[["a", "g"]], drop_first=True, dtype=float)
    return sm.add_constant(dummies)


TABLES = _tables()
POOLED = pd.concat(TABLES.values(), ignore_index=True)
X = _pooled_x(POOLED)


def _close(res, ref, bse: bool = True) -> None:  # type: ignore[no-untyped-def]
    np.testing.assert_allclose(res.original_params.to_numpy(), ref.params.to_numpy(), rtol=1e-7)
    if bse:
        np.testing.assert_allclose(res.original_bse.to_numpy(), ref.bse.to_numpy(), rtol=1e-6)


def test_poisson_with_exposure_is_statsmodels_on_the_pooled_rows() -> None:
    res = fit_glm(TABLES, "y", ["a", "g"], family="poisson", exposure="e")
    ref = sm.GLM(POOLED.y, X, family=sm.families.Poisson(), exposure=POOLED.e).fit()
    _close(res, ref)
    # without the exposure the fit is another one (the test can fail)
    plain = fit_glm(TABLES, "y", ["a", "g"], family="poisson")
    assert abs(plain.original_params.iloc[0] - ref.params.iloc[0]) > 0.5
    # predictions add each new row's log exposure, as statsmodels' predict(exposure=)
    new = POOLED.iloc[:7]
    np.testing.assert_allclose(
        res.predict(new), ref.predict(_pooled_x(POOLED).iloc[:7], exposure=new.e), rtol=1e-7
    )
    with pytest.raises(ValueError, match="exposure column 'e'"):
        res.predict(new.drop(columns="e"))
    d = res.to_dict()
    assert d["exposure"] == "e" and d["offset"] is None and d["weights"] is None
    assert "exposure: column 'e'" in res.summary()


def test_logistic_with_offset_is_statsmodels() -> None:
    # the offset column may also be a feature (statsmodels allows it: coefficient - 1)
    res = fit_glm(TABLES, "b", ["a", "g"], family="logistic", offset="a")
    ref = sm.GLM(POOLED.b, X, family=sm.families.Binomial(), offset=POOLED.a).fit()
    _close(res, ref)


@pytest.mark.parametrize("cov_type", ["nonrobust", "HC0"])
def test_linear_with_weights_is_statsmodels_var_weights(cov_type: str) -> None:
    res = fit_glm(TABLES, "z", ["a", "g"], family="linear", weights="w", cov_type=cov_type)
    ref = sm.GLM(POOLED.z, X, family=sm.families.Gaussian(), var_weights=POOLED.w).fit(
        cov_type=cov_type
    )
    _close(res, ref)
    assert res.scale == pytest.approx(ref.scale, rel=1e-7) or cov_type == "HC0"


def test_poisson_weights_and_exposure_equal_freq_weights() -> None:
    # for a family of fixed scale, prior and frequency weights give the same fit and
    # model-based standard errors: integer weights are repeated rows
    tables = {k: t.assign(w=np.round(t.w)) for k, t in TABLES.items()}
    pooled = pd.concat(tables.values(), ignore_index=True)
    res = fit_glm(tables, "y", ["a", "g"], family="poisson", exposure="e", weights="w")
    ref = sm.GLM(
        pooled.y, X, family=sm.families.Poisson(), exposure=pooled.e, freq_weights=pooled.w
    ).fit()
    _close(res, ref)
    reps = pooled.loc[pooled.index.repeat(pooled.w.astype(int))]
    rep = fit_glm({"all": reps}, "y", ["a", "g"], family="poisson", exposure="e")
    np.testing.assert_allclose(rep.original_params, res.original_params, rtol=1e-7)
    np.testing.assert_allclose(rep.original_bse, res.original_bse, rtol=1e-6)


def test_paper_methods_without_privacy_reach_the_weighted_offset_mle() -> None:
    ref = fit_glm(TABLES, "y", ["a", "g"], family="poisson", exposure="e", weights="w")
    res = fit_glm(
        TABLES, "y", ["a", "g"], family="poisson", exposure="e", weights="w",
        method="fedsgd", K=1500, eta=0.05, cov_type=None,
    )  # fmt: skip
    np.testing.assert_allclose(res.params, ref.params, atol=1e-6)


@pytest.mark.filterwarnings("ignore::fits.analysis.glm.GLMWarning")
def test_vectorized_sites_answer_as_each_site_alone() -> None:
    # fedsgd at a small step: fednewton from 0 runs off on these counts (the divergence
    # error, test_a_fedsgd_poisson_fit_that_blows_up_is_an_error_not_coefficients)
    opts = dict(family="poisson", exposure="e", weights="w", method="fedsgd", eta=0.01, K=50)
    opts["cov_type"] = None
    alone = fit_glm(TABLES, "y", ["a", "g"], **opts)  # type: ignore[arg-type]
    batch = fit_glm(TABLES, "y", ["a", "g"], vectorized=True, **opts)  # type: ignore[arg-type]
    np.testing.assert_allclose(batch.params, alone.params, rtol=1e-10, atol=1e-12)
    off = fit_glm(TABLES, "y", ["a", "g"], mu=1.0, clip=5.0, family="poisson", offset="a")
    offv = fit_glm(
        TABLES, "y", ["a", "g"], mu=1.0, clip=5.0, family="poisson", offset="a", vectorized=True
    )
    np.testing.assert_allclose(offv.params, off.params, rtol=1e-10, atol=1e-12)


def test_bad_exposure_weights_and_missing_offsets_are_errors_naming_the_site() -> None:
    bad = {k: t.copy() for k, t in TABLES.items()}
    bad["s2"].loc[[3, 5, 8], "e"] = [0.0, -1.0, 0.0]
    with pytest.raises(DesignError, match=r"s2: exposure column 'e' has 3 value\(s\) <= 0"):
        fit_glm(bad, "y", ["a"], family="poisson", exposure="e")
    neg = {k: t.assign(w=-t.w) if k == "s1" else t for k, t in TABLES.items()}
    with pytest.raises(DesignError, match="s1: weights column 'w' has .* negative"):
        fit_glm(neg, "z", ["a"], family="linear", weights="w")
    holes = {k: t.copy() for k, t in TABLES.items()}
    holes["s1"].loc[[0, 1], "a"] = np.nan
    with pytest.raises(DesignError, match=r"s1: offset column 'a' has 2 missing"):
        fit_glm(holes, "b", ["g"], offset="a")
    # missing="drop" drops those rows, as for a feature: statsmodels on the rest
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_glm(holes, "b", ["g"], offset="a", missing="drop")
    rest = pd.concat(holes.values(), ignore_index=True).dropna(subset=["a"])
    xg = sm.add_constant(pd.get_dummies(rest[["g"]], drop_first=True, dtype=float))
    ref = sm.GLM(rest.b, xg, family=sm.families.Binomial(), offset=rest.a).fit()
    _close(res, ref)
    assert res.n_dropped == [2, 0]


def test_option_errors_before_any_round() -> None:
    with pytest.raises(ValueError, match="exposure is for family 'poisson'"):
        fit_glm(TABLES, "b", ["a"], family="logistic", exposure="e")
    with pytest.raises(ValueError, match="offset or exposure, not both"):
        fit_glm(TABLES, "y", ["a"], family="poisson", exposure="e", offset="a")
    with pytest.raises(ValueError, match="need a declared largest weight, max_weight="):
        fit_glm(TABLES, "z", ["a"], family="linear", weights="w", mu=1.0, clip=1.0)
    with pytest.raises(ValueError, match="max_weight bounds the prior weights of a private"):
        fit_glm(TABLES, "z", ["a"], family="linear", weights="w", max_weight=3.0)
    with pytest.raises(ValueError, match="max_weight must be a positive finite number"):
        fit_glm(TABLES, "z", ["a"], family="linear", weights="w", mu=1, max_weight=math.inf)


def test_a_site_refuses_weights_in_a_private_fit_without_a_bound() -> None:
    """Even a coordinator that skips fit_glm's check gets no private release with
    weights and no declared largest weight: the site refuses at glm_configure."""
    from fits.analysis.design import DesignSpec, Standardization, standardization_round

    spec = DesignSpec(target="z", numeric=("a",), weights="w")
    sites = make_sites(TABLES, 0)
    transport = InProcessTransport(sites, n_jobs=1)
    try:
        st: Standardization = standardization_round(transport, spec)
        msg = Message(
            "glm_configure",
            {"means": st.means, "sds": st.sds},
            {"family": "linear", "method": "fedsgd", "settings": json.dumps({"K": 5, "eta": 0.5}),
             "tau1": 0.1, "mu": 1.0},
        )  # fmt: skip
        with pytest.raises(ProtocolError, match="need a declared largest weight"):
            transport.broadcast(msg)
    finally:
        transport.close()


def test_offset_leaves_the_noise_scales_and_clipped_norms_alone() -> None:
    """Clipping bounds each row's gradient by B whatever its offset, so the noise
    scales (Lemmas 3.1-3.8) are those of the fit without it; and as mu grows the
    private fit with an offset goes to the non-private one."""
    kw = dict(family="poisson", method="fedsgd", clip=3.0, K=20, cov_type=None)
    sigmas = []
    for off in (None, "e"):
        sites = make_sites(TABLES, 0)
        fit_glm(None, "y", ["a", "g"], mu=1.0, offset=off, transport=InProcessTransport(sites),
                **kw)  # type: ignore[arg-type]  # fmt: skip
        sigmas.append([s.sigmas["fedsgd"] for s in sites])
        assert all(s.sigmas["fedsgd"] == 2 * 3.0 * math.sqrt(20) / s.n_rows for s in sites)
    assert sigmas[0] == sigmas[1]
    big = {k: t.assign(e=t.e + 40.0) for k, t in TABLES.items()}  # e^40: clipped all the same
    site = GLMSite(big["s1"], "s1")
    sites = [site]
    fit_glm(None, "y", ["a"], mu=1.0, offset="e", transport=InProcessTransport(sites), **kw)  # type: ignore[arg-type]
    from fits.analysis.glm import clipped_gradients

    x, y, _, _ = site._data()
    off, w = site._extra()
    norms = np.linalg.norm(
        clipped_gradients("poisson", x, y, np.zeros(x.shape[1]), 3.0, off, w), axis=1
    )
    assert norms.max() == pytest.approx(3.0) and off is not None and off.min() > 40
    exact = fit_glm(TABLES, "y", ["a", "g"], family="poisson", exposure="e", cov_type=None)
    gaps = []
    for mu in (0.5, 1e6):
        res = fit_glm(
            TABLES, "y", ["a", "g"], family="poisson", exposure="e", mu=mu, clip=50.0,
            method="fedsgd", K=1500, eta=0.05, seed=3,
        )  # fmt: skip
        gaps.append(float(np.max(np.abs(res.params - exact.params))))
    assert gaps[1] < 1e-4 < gaps[0]


def test_batch_transport_keeps_the_weights_round() -> None:
    sites = make_sites(TABLES, 0)
    res = fit_glm(None, "z", ["a"], family="linear", weights="w", transport=BatchTransport(sites))
    ref = fit_glm(TABLES, "z", ["a"], family="linear", weights="w")
    np.testing.assert_allclose(res.params, ref.params, rtol=1e-10)


@pytest.fixture(scope="module")
def site_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return write_sites(TABLES, tmp_path_factory.mktemp("offset"))


def test_cli_exposure_and_weights(site_files: list[str], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["--target", "y", "--features", "a,g", "--family", "poisson", "--out", str(out), "-q"]
    proc = run("analyze", *site_files, *args, "--exposure", "e", "--weights", "w")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text())
    tables = {Path(p).stem: pd.read_csv(p) for p in site_files}
    ref = fit_glm(tables, "y", ["a", "g"], family="poisson", exposure="e", weights="w")
    np.testing.assert_allclose(list(got["params"].values()), ref.params.to_numpy())
    assert got["exposure"] == "e" and got["weights"] == "w"
    assert "exposure: column 'e'" in proc.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--weights", "w", "--mu", "1"], "need --max-weight"),
        (["--weights", "w", "--max-weight", "3"], "--max-weight bounds the --weights"),
        (["--exposure", "e", "--family", "logistic"], "--exposure is for --family poisson"),
        (["--offset", "nope"], "nope"),
    ],
)
def test_cli_usage_errors(
    site_files: list[str], tmp_path: Path, extra: list[str], message: str
) -> None:
    out = tmp_path / "r.json"
    proc = run("analyze", *site_files, "--target", "z", "--out", str(out), "-q", *extra)
    assert proc.returncode == 2, proc.stderr
    assert message in " ".join(proc.stderr.replace("│", " ").split()) and not out.exists()


def test_cli_exposure_of_zero_is_a_data_error(site_files: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    pd.read_csv(site_files[0]).assign(e=0.0).to_csv(bad, index=False)
    out = tmp_path / "r.json"
    proc = run(
        "analyze", str(bad), site_files[1], "--target", "y", "--features", "a",
        "--family", "poisson", "--exposure", "e", "--out", str(out), "-q",
    )  # fmt: skip
    assert proc.returncode == 1 and "bad: exposure column 'e' has 300 value(s) <= 0" in proc.stderr
    assert not out.exists()


def test_private_weights_scale_the_noise_by_the_declared_max_weight() -> None:
    """Each row's gradient is clipped to B, then weighted: norm <= w_max B, so every
    noise sd is w_max times the unweighted fit's; doubling w_max doubles it."""
    kw = dict(family="linear", weights="w", mu=1.0, clip=2.0, cov_type=None)
    sig = {}
    for method, stage in (("fedsgd", "fedsgd"), ("fednewton", "newton")):
        for wmax in (3.0, 6.0, None):
            sites = make_sites(TABLES, 0)
            args = dict(kw, max_weight=wmax) if wmax else dict(kw, weights=None)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = fit_glm(None, "z", ["a"], method=method,
                              transport=InProcessTransport(sites), **args)  # type: ignore[arg-type]  # fmt: skip
            sig[method, wmax] = np.array([s.sigmas[stage] for s in sites])
            if wmax:
                assert res.settings["max_weight"] == wmax
                assert f"max_weight {wmax:g}" in res.summary()
        np.testing.assert_allclose(sig[method, 3.0], 3.0 * sig[method, None], rtol=1e-12)
        np.testing.assert_allclose(sig[method, 6.0], 2.0 * sig[method, 3.0], rtol=1e-12)
    # a weight above the declared bound: the site refuses, naming itself and the column
    with pytest.raises(DesignError, match=r"s\d: weights column 'w' has \d+ value\(s\) above"):
        fit_glm(TABLES, "z", ["a"], max_weight=2.0, **kw)  # type: ignore[arg-type]


def test_private_weighted_fit_goes_to_the_weighted_mle_as_mu_grows() -> None:
    exact = fit_glm(TABLES, "y", ["a", "g"], family="poisson", exposure="e", weights="w")
    gaps = []
    for mu in (0.3, 1e7):
        res = fit_glm(
            TABLES, "y", ["a", "g"], family="poisson", exposure="e", weights="w",
            max_weight=3.0, mu=mu, clip=50.0, method="fedsgd", K=1500, eta=0.05, seed=3,
        )  # fmt: skip
        gaps.append(float(np.max(np.abs(res.params - exact.params))))
    assert gaps[1] < 1e-4 < gaps[0]


def test_an_offset_that_separates_the_classes_is_no_separation() -> None:
    """The MLE exists when only the (fixed) offset separates the classes: no warning,
    and the fit is statsmodels'; zero-weight rows are left out of the check."""
    from fits.analysis.glm import SeparationWarning

    rng = np.random.default_rng(5)
    tables = {}
    for k in range(2):
        y = rng.integers(0, 2, 150).astype(float)
        tables[f"s{k}"] = pd.DataFrame(
            {"x": rng.normal(size=150), "o": np.where(y == 1, 3.0, -3.0), "y": y}
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeparationWarning)
        res = fit_glm(tables, "y", ["x"], offset="o")
    pooled = pd.concat(tables.values(), ignore_index=True)
    ref = sm.GLM(
        pooled.y, sm.add_constant(pooled[["x"]]), family=sm.families.Binomial(), offset=pooled.o
    ).fit()
    _close(res, ref)
    # a feature separating the classes in the weighted rows only: the check sees it
    sep = {k: t.assign(w=np.where((t.x > 0) == (t.y == 1), 1.0, 0.0)) for k, t in tables.items()}
    with pytest.warns(SeparationWarning, match="separation by 'x'"):
        fit_glm(sep, "y", ["x"], weights="w")


def test_constant_or_identifier_like_offset_columns_are_not_features() -> None:
    """The offset and weights columns are read as numbers, never modelled: constant
    (a weight of 1 everywhere) or unique (an exposure per row) they are neither refused
    nor warned about as features, and never become one by default."""
    tables = {
        k: t.assign(w=1.0, e=np.arange(1.0, len(t) + 1.0)).drop(columns=["b", "z"])
        for k, t in TABLES.items()
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = fit_glm(tables, "y", family="poisson", exposure="e", weights="w")
    assert list(res.params.index) == ["(intercept)", "a", "g=v", "g=w"]
    pooled = pd.concat(tables.values(), ignore_index=True)
    ref = sm.GLM(pooled.y, X, family=sm.families.Poisson(), exposure=pooled.e).fit()
    _close(res, ref)
    with pytest.raises(DesignError, match=r"s1: column\(s\) \['nope'\] missing"):
        fit_glm(tables, "y", family="poisson", offset="nope")


def test_a_fedsgd_poisson_fit_that_blows_up_is_an_error_not_coefficients() -> None:
    """fedsgd at its default step on large counts oscillated at +-1e303, finite, and
    returned that as coefficients (with exposure or without). A coefficient past
    MAX_EXP_COEFFICIENT of a Poisson fit without privacy is now the divergence error;
    a smaller step (counts of about 300 per row) reaches the Newton estimate."""
    from fits.analysis.glm import MAX_EXP_COEFFICIENT

    rng = np.random.default_rng(0)
    tables = {}
    for k in range(2):
        x, e = rng.normal(size=300), rng.uniform(50, 500, 300)
        tables[f"s{k}"] = pd.DataFrame(
            {"x": x, "e": e, "y": rng.poisson(e * np.exp(0.3 + 0.5 * x))}
        )
    with pytest.raises(DesignError, match=r"fedsgd iterate has a coefficient of .*smaller step"):
        fit_glm(tables, "y", family="poisson", exposure="e", method="fedsgd", K=300)
    slow = fit_glm(tables, "y", family="poisson", exposure="e", method="fedsgd", K=300, eta=0.001)
    exact = fit_glm(tables, "y", family="poisson", exposure="e")
    assert np.allclose(slow.params, exact.params, atol=1e-3)
    assert np.abs(exact.params).max() < MAX_EXP_COEFFICIENT
