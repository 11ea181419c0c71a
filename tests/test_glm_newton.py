"""Method ``newton`` (fits.analysis.glm): the pooled maximum-likelihood GLM without
privacy, the default of ``fit_glm`` and ``fits analyze`` without a budget.

Oracle: statsmodels' GLM on the pooled rows, on the same design matrix.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import fits.analysis.glm as glm
from fits.analysis.glm import GLMWarning, SeparationWarning, fit_glm
from fits.cli.main import app
from fits.federation.protocol import Message, ProtocolError, check_reply

from conftest import glm_tables

sm = pytest.importorskip("statsmodels.api")

_SM = {"linear": "Gaussian", "logistic": "Binomial", "poisson": "Poisson"}


def _tables(family: str, sizes=(120, 90, 150, 40), seed: int = 3) -> list[pd.DataFrame]:
    return glm_tables(family, sizes, seed, shift=0.3)  # the sites differ: FedNewton's bias


def _reference(res, tables, family: str, **fit):
    x = np.vstack([res.design(t) for t in tables])
    y = np.concatenate([t["y"].to_numpy(float) for t in tables])
    return sm.GLM(y, x, family=getattr(sm.families, _SM[family])()).fit(tol=1e-14, **fit)


@pytest.mark.parametrize("family", ["linear", "logistic", "poisson"])
def test_the_default_without_privacy_is_the_pooled_mle(family: str) -> None:
    tables = _tables(family)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no far-from-the-MLE warning, no other
        res = fit_glm(tables, "y", family=family)
    assert res.method == "newton" and res.privacy is None
    ref = _reference(res, tables, family)
    np.testing.assert_allclose(res.params.to_numpy(), ref.params, rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.bse.to_numpy(), ref.bse, rtol=1e-9)
    np.testing.assert_allclose(res.conf_int().to_numpy(), ref.conf_int(), rtol=1e-9)
    np.testing.assert_allclose(res.cov_params().to_numpy(), ref.cov_params(), rtol=1e-9)
    assert res.mle_distance < 1e-9 and res.warnings == []
    # linear: one Newton step is exact, so two glm_sums rounds (at 0 and at the step);
    # 3 setup rounds, the separation check (logistic, Poisson) and glm_fisher
    n_sums = res.rounds - 3 - (family != "linear") - 1
    assert n_sums == 2 if family == "linear" else 3 <= n_sums <= 12
    hc0 = fit_glm(tables, "y", family=family, cov_type="HC0")
    ref0 = _reference(hc0, tables, family, cov_type="HC0")
    np.testing.assert_allclose(hc0.bse.to_numpy(), ref0.bse, rtol=1e-9)


def test_newton_removes_the_federation_bias_of_fednewton() -> None:
    """The reason for the default: without privacy FedNewton stops standard errors away
    from the pooled MLE (and warns); newton does not."""
    tables = _tables("logistic", sizes=(300, 200, 500, 120))
    with pytest.warns(GLMWarning, match="standard errors .* from the pooled"):
        fed = fit_glm(tables, "y", method="fednewton")
    new = fit_glm(tables, "y")
    assert fed.mle_distance > 0.1 > 1e-9 > new.mle_distance
    ref = _reference(new, tables, "logistic")
    assert np.abs(fed.params.to_numpy() - ref.params).max() > 1e-3
    np.testing.assert_allclose(new.params.to_numpy(), ref.params, atol=1e-10)


def test_a_step_that_raises_the_loss_is_halved(monkeypatch) -> None:
    """Poisson with large counts: a full Newton step overshoots (its loss is higher);
    halving brings it back, the accepted loss never rises, and the estimate is
    statsmodels'."""
    losses: list[float] = []
    real = glm.site_sums

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        losses.append(float(out["loss"][0]))
        return out

    monkeypatch.setattr(glm, "site_sums", spy)
    rng = np.random.default_rng(1)
    tables = []
    for _ in range(3):
        x = rng.normal(size=400)
        tables.append(pd.DataFrame({"x": x, "y": rng.poisson(np.exp(4 + 1.5 * x))}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning from the trial steps
        res = fit_glm(tables, "y", family="poisson")
    pooled = np.array(losses).reshape(-1, 3).sum(axis=1)
    assert np.any(np.diff(pooled) > 0)  # a trial step raised the loss ...
    accepted = np.minimum.accumulate(pooled)
    assert pooled[-1] == accepted[-1]  # ... and the last query is the best
    ref = _reference(res, tables, "poisson")
    np.testing.assert_allclose(res.params.to_numpy(), ref.params, atol=1e-10)


def test_separation_stops_at_k_with_a_warning() -> None:
    rng = np.random.default_rng(0)
    tables = []
    for _ in range(2):
        x = rng.normal(size=60)
        tables.append(pd.DataFrame({"x": x, "y": (x > 0).astype(int)}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_glm(tables, "y", K=20)
    kinds = {type(w.message) for w in caught}
    assert kinds == {SeparationWarning, GLMWarning}  # scipy's ill-conditioning stays inside
    assert res.bse_note is not None and "separation" in res.bse_note
    assert any("did not converge in K=20" in w for w in res.warnings)


def test_quasi_separation_stops_when_the_loss_is_flat() -> None:
    """A category whose rows all have y = 0 (Adult's rare levels): its coefficient runs
    off to -infinity while the pooled loss stops changing; newton stops there, long
    before K, with one warning of its own and no scipy ill-conditioning warning."""
    rng = np.random.default_rng(0)
    tables = []
    for _ in range(3):
        x = rng.normal(size=300)
        c = rng.choice(["a", "b", "z"], 300, p=[0.45, 0.45, 0.1])
        y = (rng.random(300) < 1 / (1 + np.exp(-x))).astype(int)
        y[c == "z"] = 0
        tables.append(pd.DataFrame({"x": x, "c": c, "y": y}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_glm(tables, "y", K=50)
    assert [type(w.message) for w in caught].count(GLMWarning) == 1
    assert {type(w.message) for w in caught} == {GLMWarning, SeparationWarning}
    assert any("no longer falls" in w for w in res.warnings)
    assert res.rounds < 3 + 50 + 2  # stopped before K
    assert res.params["c=z"] < -10


def test_too_few_iterations_warn() -> None:
    with pytest.warns(GLMWarning, match="newton did not converge in K=1 "):
        fit_glm(_tables("logistic"), "y", K=1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "newton", "mu": 1.0}, "no private form"),
        ({"method": "newton", "epsilon": 1.0, "delta": 1e-5}, "no private form"),
        ({"method": "newton", "clip": 2.0}, "does not clip"),
        ({"method": "newton", "eta": 0.5}, "do not apply to method 'newton'"),
        ({"method": "newton", "K": 0}, "positive integer"),
    ],
)
def test_bad_options_fail_before_any_round(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        fit_glm(_tables("logistic"), "y", **kwargs)


def test_with_a_budget_the_default_is_fednewton() -> None:
    res = fit_glm(_tables("logistic", sizes=(200, 200)), "y", mu=1.0, clip=2.0)
    assert res.method == "fednewton" and res.privacy is not None


def test_the_site_answers_glm_sums_only_for_newton_without_privacy() -> None:
    tables = _tables("logistic", sizes=(200, 200))
    sites = glm.make_sites(dict(zip(["a", "b"], tables, strict=True)), 0)
    transport = glm.InProcessTransport(sites, n_jobs=1)
    fit_glm(None, "y", method="fedsgd", K=2, transport=transport)
    sums = Message("glm_sums", {"theta": np.zeros(5)}, {"clip": float("inf")})
    with pytest.raises(ProtocolError, match="configured for 'fedsgd'"):
        sites[0].handle(sums)
    # a private configuration of newton is refused by the site itself
    configure = Message(
        "glm_configure",
        {"means": np.zeros(2), "sds": np.ones(2)},
        {"family": "logistic", "method": "newton", "settings": json.dumps({"K": 5}),
         "tau1": 0.1, "mu": 1.0, "null_space": 0, "separation_check": 0},
    )  # fmt: skip
    with pytest.raises(ProtocolError, match="no private form"):
        sites[0].handle(configure)
    transport.close()
    # the reply's arrays and shapes are checked
    p = 5
    good = {"loss": np.zeros(1), "score": np.zeros(p), "info": np.zeros(p * (p + 1) // 2)}
    check_reply(sums, Message("glm_sums", good))
    with pytest.raises(ProtocolError):
        check_reply(sums, Message("glm_sums", {**good, "x": np.zeros((3, p))}))
    with pytest.raises(ProtocolError):
        check_reply(sums, Message("glm_sums", {**good, "info": np.zeros((p, p))}))


def test_vectorized_sites_give_the_same_fit() -> None:
    tables = _tables("poisson", sizes=(60, 45, 81, 50))
    alone = fit_glm(tables, "y", family="poisson")
    batch = fit_glm(tables, "y", family="poisson", vectorized=True)
    np.testing.assert_allclose(batch.params, alone.params, rtol=1e-12, atol=1e-14)
    assert (batch.rounds, batch.uploaded_bytes) == (alone.rounds, alone.uploaded_bytes)


def test_cli_analyze_defaults_to_newton(tmp_path) -> None:
    tables = _tables("logistic")
    files = []
    for k, t in enumerate(tables):
        files.append(tmp_path / f"s{k}.csv")
        t.to_csv(files[-1], index=False)
    out = tmp_path / "r.json"
    runner = CliRunner()
    args = ["analyze", *map(str, files), "--target", "y", "--out", str(out)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "warning" not in res.output
    data = json.loads(out.read_text())
    assert data["method"] == "newton" and data["mle_distance"] < 1e-9
    priv = runner.invoke(app, [*args[:-2], "--mu", "1", "--clip", "2", "--out", str(out)])
    assert priv.exit_code == 0, priv.output
    assert json.loads(out.read_text())["method"] == "fednewton"
    for extra, hint in (
        (["--method", "newton", "--mu", "1"], "no private form"),
        (["--method", "newton", "--clip", "2"], "does not clip"),
        (["--method", "newton", "--step", "0.5"], "do not apply"),
    ):
        bad = runner.invoke(app, [*args[:-2], *extra, "--out", str(tmp_path / "x.json")])
        assert bad.exit_code == 2 and hint in bad.output, bad.output
        assert not (tmp_path / "x.json").exists()


def test_a_target_in_the_trillions_converges_to_statsmodels() -> None:
    """The stopping rule is relative: coefficients of size 1e12 are held by float64 to
    about 1e-4, so an absolute 1e-8 could never be met."""
    tables = [t.assign(y=1e12 * t.y) for t in _tables("linear")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = fit_glm(tables, "y", family="linear")
    ref = _reference(res, tables, "linear")
    np.testing.assert_allclose(res.params.to_numpy(), ref.params, rtol=1e-10)
    np.testing.assert_allclose(res.bse.to_numpy(), ref.bse, rtol=1e-8)
    assert res.rounds == 3 + 2 + 1  # setup, two glm_sums, glm_fisher


def test_an_exact_linear_target_is_named_not_a_far_estimate() -> None:
    tables = [t.assign(y=3.0 * t.x1 - 2.0 * t.x2 + 1.0) for t in _tables("linear")]
    with pytest.warns(GLMWarning, match="exact linear function of the features") as caught:
        res = fit_glm(tables, "y", family="linear")
    assert not any("standard errors (Fisher metric)" in str(w.message) for w in caught)
    assert res.params["x1"] == pytest.approx(3.0 * pd.concat(tables).x1.std(ddof=0))


@pytest.mark.parametrize("family", ["linear", "logistic"])
def test_inference_on_the_features_own_scale_is_statsmodels_on_raw_features(family) -> None:
    tables = _tables(family)
    res = fit_glm(tables, "y", family=family)
    pooled = pd.concat(tables, ignore_index=True)
    raw = np.column_stack(
        [np.ones(len(pooled)), pooled.x1, pooled.x2, pooled.c == "b", pooled.c == "c"]
    ).astype(float)
    ref = sm.GLM(pooled.y.to_numpy(float), raw, family=getattr(sm.families, _SM[family])())
    ref = ref.fit(tol=1e-14)
    np.testing.assert_allclose(res.original_params.to_numpy(), ref.params, rtol=1e-9)
    np.testing.assert_allclose(res.original_bse.to_numpy(), ref.bse, rtol=1e-8)
    np.testing.assert_allclose(res.original_cov_params().to_numpy(), ref.cov_params(), rtol=1e-8)
    np.testing.assert_allclose(res.original_conf_int(0.1).to_numpy(), ref.conf_int(0.1), rtol=1e-8)
    out = res.to_dict(0.1)
    assert out["original_params"]["x1"] == pytest.approx(ref.params[1], rel=1e-9)
    assert out["original_bse"]["x2"] == pytest.approx(ref.bse[2], rel=1e-8)
    assert out["original_conf_int"]["lower"]["x1"] == pytest.approx(ref.conf_int(0.1)[1, 0])
    assert json.loads(json.dumps(out)) == out
    private = fit_glm(tables, "y", family=family, mu=1.0, clip=2.0)
    with pytest.raises(glm.GLMInferenceError, match="not available for a private fit"):
        private.original_bse  # noqa: B018
    assert private.to_dict()["original_bse"] is None


def test_target_labels_written_differently_at_a_site_are_named_with_the_fix() -> None:
    """'yes'/'no' at two sites and 'Yes'/'no ' at a third: four labels, refused; the
    message named them but not that they are two labels written two ways."""
    coded = _tables("logistic")
    labelled = [t.assign(y=t.y.map({0: "no", 1: "yes"})) for t in coded]
    labelled[-1] = coded[-1].assign(y=coded[-1].y.map({0: "no ", 1: "Yes"}))
    with pytest.raises(glm.DesignError, match="has 4 labels") as err:
        fit_glm(labelled, "y")
    assert "'Yes' and 'yes', 'no' and 'no ' differ only in case or in spaces" in str(err.value)
    assert "write each label the same way at every site" in str(err.value)
    three = [t.assign(y=t.y.map({0: "no", 1: "yes"})) for t in coded]
    three[-1] = coded[-1].assign(y=coded[-1].y.map({0: "no", 1: "maybe"}))
    with pytest.raises(glm.DesignError, match="has 3 labels") as err:
        fit_glm(three, "y")
    assert "differ only" not in str(err.value)  # three labels indeed: no such hint


def test_a_logistic_target_of_two_text_labels_is_coded_second_label_one(tmp_path) -> None:
    """Adult's income as written (``<=50K`` / ``>50K``): the sorted second label is 1,
    the fit equals the 0/1 target's, and the result says which label is 1."""
    coded = _tables("logistic")
    labelled = [t.assign(y=t.y.map({0: "<=50K", 1: ">50K"})) for t in coded]
    a, b = fit_glm(coded, "y"), fit_glm(labelled, "y")
    np.testing.assert_allclose(b.params.to_numpy(), a.params.to_numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.bse.to_numpy(), a.bse.to_numpy(), rtol=1e-12)
    assert b.spec.target_levels == ("<=50K", ">50K") and a.spec.target_levels == ()
    assert "target 'y' coded 1 = '>50K', 0 = '<=50K'" in b.summary()
    assert b.to_dict()["target_levels"] == ["<=50K", ">50K"]
    assert a.to_dict()["target_levels"] is None
    spec = glm.DesignSpec.from_json(b.spec.to_json())  # what travels to the sites
    assert spec == b.spec
    # pandas categoricals and booleans as well; the same fit
    cat = [t.assign(y=pd.Categorical(t.y.map({0: "no", 1: "yes"}))) for t in coded]
    np.testing.assert_allclose(fit_glm(cat, "y").params, a.params, atol=1e-12)
    # over the CLI, from CSV text
    files = []
    for k, t in enumerate(labelled):
        files.append(str(tmp_path / f"s{k}.csv"))
        t.to_csv(files[-1], index=False)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["analyze", *files, "--target", "y", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["params"] == pytest.approx(b.to_dict()["params"])


def test_three_labels_or_a_text_target_of_another_family_are_refused() -> None:
    three = [t.assign(y=np.where(t.x1 > 0.5, "hi", np.where(t.x1 < -0.5, "lo", "mid")))
             for t in _tables("logistic")]  # fmt: skip
    with pytest.raises(glm.DesignError, match=r"has 3 labels \(\['hi', 'lo', 'mid'\]\)"):
        fit_glm(three, "y")
    two = [t.assign(y=t.y.map({0: "no", 1: "yes"})) for t in _tables("logistic")]
    with pytest.raises(glm.DesignError, match="is not numeric"):
        fit_glm(two, "y", family="linear")


@pytest.mark.parametrize("b0", [4.0, 30.0])
def test_a_poisson_target_in_the_trillions_converges_to_statsmodels(b0: float) -> None:
    """Counts of about e^30 (1e13): from theta = 0 the full Newton step for the
    intercept is about 1e13, whose loss is infinite, and 30 halvings did not bring it
    back: the fit stayed at theta = 0 (every coefficient 0) and warned 'did not
    converge in K=50 iterations'.  newton now starts at the intercept log(ybar), from
    the first round's sums, and converges in a few rounds whatever the counts' size."""
    rng = np.random.default_rng(1)
    tables = []
    for n in (200, 150, 250):
        x = rng.normal(size=n)
        tables.append(pd.DataFrame({"x": x, "y": rng.poisson(np.exp(b0 + 0.5 * x)) * 1.0}))
    tables[0].loc[0, "y"] = 0.0  # a zero count: the separation check has both classes
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = fit_glm(tables, "y", family="poisson")
    ref = _reference(res, tables, "poisson")
    np.testing.assert_allclose(res.params.to_numpy(), ref.params, rtol=1e-12)
    np.testing.assert_allclose(res.bse.to_numpy(), ref.bse, rtol=1e-8)
    assert res.params.iloc[0] == pytest.approx(b0, abs=0.1)
    assert res.rounds <= 3 + 10


def test_a_poisson_target_with_no_zero_count_has_an_mle_and_standard_errors() -> None:
    """Counts that are all positive (no zero anywhere) were reported as separation
    ("target 'y' is > 0 in every row of every site: the maximum-likelihood estimate does
    not exist"), with no standard errors; the Poisson MLE exists whenever some count is
    positive and the design has full rank."""
    tables = [t.assign(y=t.y + 1) for t in _tables("poisson")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = fit_glm(tables, "y", family="poisson")
    assert res.warnings == []
    ref = _reference(res, tables, "poisson")
    np.testing.assert_allclose(res.params.to_numpy(), ref.params, atol=1e-10)
    np.testing.assert_allclose(res.bse.to_numpy(), ref.bse, rtol=1e-8)


def test_the_sites_plan_allows_every_query_newton_can_make(monkeypatch) -> None:
    """The worst case: the query at 0, Poisson's start, then K iterations each halved
    NEWTON_HALVINGS times without lowering the loss.  The sites' release plan must
    allow all of them (it allowed one query fewer, and the last was refused)."""
    real = glm.site_sums
    calls = {"n": 0}

    def rising(*args, **kwargs):
        out = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] > 2 * 3:  # after the two queries of the 3 sites: every trial rises
            out["loss"] = np.array([np.inf])
        return out

    monkeypatch.setattr(glm, "site_sums", rising)
    with pytest.warns(GLMWarning, match="no step towards the maximum-likelihood"):
        res = fit_glm(_tables("poisson", sizes=(60, 50, 70)), "y", family="poisson", K=1)
    assert calls["n"] == 3 * (2 + glm.NEWTON_HALVINGS + 1)
    assert res.method == "newton"
