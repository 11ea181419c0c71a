"""A new user's federated fits (fits analyze, fit_glm, fedlsa): the noise a private
fit's coefficients carry, said from public quantities only; results that print and say
their scale; FedLSA per unit; a constant target; --features given as separate words."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from fits.analysis.glm import GLMWarning, fit_glm, noise_floor


def _tables(sizes=(400, 301, 500), seed: int = 0) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        x = rng.normal(size=n)
        y = (rng.random(n) < 1 / (1 + np.exp(-x))).astype(int)
        out.append(pd.DataFrame({"x": x, "z": rng.normal(size=n), "y": y}))
    return out


def _expected(method: str, n: list[int], b: float, mu: float, tau1: float = 0.1) -> float:
    """The last noisy release's noise in the estimate, from docs/analysis.md's table
    (an independent derivation: noise sd per site, weights n_i / N)."""
    w = np.array(n) / sum(n)
    if method == "fedsgd":  # K = 50 steps of eta = 0.5 on the mean gradient
        sig, f = [2 * b * math.sqrt(50) / (mu * k) for k in n], 0.5
    elif method == "fedhybrid":  # stage II: K2 = 20, eta2 = 0.5
        sig, f = [2 * b * math.sqrt(2 * 20) / (mu * k) for k in n], 0.5
    elif method == "fedavg":  # each local step: eta = 0.5, R = 2, K = 50
        sig, f = [2 * b * 0.5 * math.sqrt(2 * 50) / (mu * k) for k in n], 1.0
    else:  # the Newton step's output, on 2 floor(n / 2) rows
        sig, f = [2 * (4 * math.sqrt(2) * b / tau1) / (mu * 2 * (k // 2)) for k in n], 1.0
    return f * math.sqrt(sum((wi * s) ** 2 for wi, s in zip(w, sig, strict=True)))


@pytest.mark.parametrize("method", ["fedsgd", "fedhybrid", "fedavg", "fednewton"])
def test_the_noise_floor_is_the_last_releases_noise(method: str) -> None:
    tables = _tables()
    res = fit_glm(tables, "y", method=method, mu=2.0, clip=1.0)
    assert res.noise_floor == pytest.approx(_expected(method, res.n_rows, 1.0, 2.0), rel=1e-12)
    assert res.to_dict()["noise_floor"] == res.noise_floor
    assert f"at least {res.noise_floor:.4g} (design scale" in res.summary()
    assert fit_glm(tables, "y").noise_floor is None  # no privacy, no noise
    assert noise_floor(method, res.settings, 1.0, 2.0, res.n_rows, 0.1) == res.noise_floor


def test_the_noise_floor_bounds_the_spread_of_the_estimates_over_seeds() -> None:
    """Refitting with other seeds (other noise, the same rows): each coefficient's spread
    is at least the floor; for FedNewton, whose Newton step undoes most of its first
    round's noise, about equal to it."""
    tables = _tables()
    for method, seeds, high in (("fednewton", 40, 1.5), ("fedsgd", 25, math.inf)):
        fits = [fit_glm(tables, "y", method=method, mu=2.0, clip=1.0, seed=s) for s in range(seeds)]
        spread = np.std([f.params.to_numpy() for f in fits], axis=0, ddof=1) / fits[0].noise_floor
        assert (spread > 0.75).all() and (spread < high).all(), (method, spread)


@pytest.mark.parametrize("method", ["fedsgd", "fednewton"])
def test_noise_beyond_a_large_effect_is_warned(method: str) -> None:
    tables = _tables()
    with pytest.warns(GLMWarning, match="the privacy noise dominates the estimate") as rec:
        res = fit_glm(tables, "y", method=method, mu=1e-6)
    [text] = [str(w.message) for w in rec if "noise dominates" in str(w.message)]
    assert f"at least {res.noise_floor:.3g}" in text and "larger budget" in text
    assert ("a larger tau1, or method fedsgd" in text) == (method == "fednewton")
    assert text in res.warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", GLMWarning)
        calm = fit_glm(tables, "y", method=method, mu=4.0)
    assert calm.noise_floor < 1.0


def test_the_floor_of_a_budget_near_the_end_of_floating_point_is_finite() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # was: overflow in its square
        floor = noise_floor("fednewton", {"K": 50, "eta": 0.5}, 1.0, 1e-300, [200, 300], 0.1)
    assert math.isfinite(floor)
    expected = _expected("fednewton", [200, 300], 1e150, 1.0)  # B / mu scales it
    assert floor == pytest.approx(expected * 1e150, rel=1e-12)


def test_a_linear_fit_measures_the_noise_against_the_targets_range() -> None:
    rng = np.random.default_rng(1)
    tables = [
        pd.DataFrame({"x": (x := rng.normal(size=200)), "y": 100 + 10 * x + rng.normal(size=200)})
        for _ in range(3)
    ]
    span = max(t.y.max() for t in tables) - min(t.y.min() for t in tables)
    with pytest.warns(GLMWarning, match=r"a quarter of the target's range \(") as rec:
        res = fit_glm(tables, "y", family="linear", method="fedsgd", mu=0.01)
    assert f"({span:.4g} / 4 = {span / 4:.4g})" in str(rec[0].message)
    assert res.noise_floor >= span / 4
    with warnings.catch_warnings():
        warnings.simplefilter("error", GLMWarning)
        fit_glm(tables, "y", family="linear", method="fedsgd", mu=100.0)


def test_print_of_a_result_is_its_summary() -> None:
    res = fit_glm(_tables(), "y", mu=1.0)
    assert str(res) == res.summary()
    assert str(fit_glm(_tables(), "y")) == fit_glm(_tables(), "y").summary()


def test_features_given_as_separate_words_get_the_comma_form(tmp_path) -> None:
    from conftest import fits_in_process as run

    paths = []
    for k, t in enumerate(_tables(sizes=(60, 60))):
        paths.append(str(tmp_path / f"site{k}.csv"))
        t.rename(columns={"z": "blood pressure"}).to_csv(paths[-1], index=False)
    out = tmp_path / "r.json"
    proc = run("analyze", *paths, "--target", "y", "--features", "x", "blood pressure",
               "--out", str(out))  # fmt: skip
    assert proc.returncode == 2 and not out.exists()
    said = " ".join(proc.stderr.replace("│", " ").split())
    assert "--features 'x,blood pressure'" in said, said
    proc = run("analyze", *paths, "--target", "y", "--features", "x,blood pressure",
               "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def _raw_tables(seed: int = 3) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    out = []
    for n in (300, 200, 250):
        age, w = rng.uniform(20, 80, n), rng.normal(70, 10, n)
        y = 5 + 0.3 * age - 0.1 * w + rng.normal(0, 2, n)
        out.append(pd.DataFrame({"age": age, "w": w, "g": rng.choice(["a", "b"], n), "y": y}))
    return out


def test_the_summaries_say_the_coefficients_are_per_standard_deviation() -> None:
    from fits.analysis import fedlsa

    tables = _raw_tables()
    glm = fit_glm(tables, "y", family="linear")
    lsa = fedlsa(tables, "y", regime="one_pass", n_bootstrap=40, seed=1)
    for text in (glm.summary(), lsa.summary()):
        assert "so their coefficients are per standard deviation" in text
        assert "res.original_params" in text
    only_nominal = [t[["g", "y"]] for t in tables]
    assert "per standard deviation" not in fit_glm(only_nominal, "y", family="linear").summary()


def test_fedlsa_gives_its_coefficients_and_intervals_per_unit() -> None:
    """Oracle: the fitted values of the raw features times original_params are those of
    the design times params, row by row; statsmodels' OLS on the pooled raw rows lies
    within a few bootstrap standard errors of them."""
    import statsmodels.api as sm

    from fits.analysis import fedlsa

    tables = _raw_tables()
    res = fedlsa(tables, "y", regime="one_pass", n_bootstrap=40, seed=1)
    pooled = pd.concat(tables)
    raw = np.column_stack([np.ones(len(pooled)), pooled.age, pooled.w, pooled.g == "b"])
    st = res.extra["standardization"]
    design = raw.copy()
    design[:, 1:3] = (raw[:, 1:3] - st.means) / st.sds
    np.testing.assert_allclose(raw @ res.original_params, design @ res.params, rtol=1e-10)
    ci, raw_ci = res.conf_int(0.1), res.original_conf_int(0.1)
    np.testing.assert_allclose(raw_ci.loc["age"], ci.loc["age"] / st.sds[0], rtol=1e-10)
    assert raw_ci.loc["g=b"].tolist() == pytest.approx(ci.loc["g=b"].tolist(), rel=1e-12)
    assert (raw_ci[0] <= res.original_params).all() and (res.original_params <= raw_ci[1]).all()
    ols = sm.OLS(pooled.y.to_numpy(), raw.astype(float)).fit()
    assert (np.abs(ols.params - res.original_params) < 4 * res.original_bse).all()
    coef = res.to_dict(0.1)["coefficients"][1]
    assert coef["original_coef"] == res.original_params["age"]
    assert coef["original_lower"] == raw_ci.loc["age", 0]


def test_a_constant_target_is_an_error_and_not_said_left_out() -> None:
    from fits.core.schema import SchemaError

    tables = [t.assign(c=5.0) for t in _tables(sizes=(50, 50))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "'c' ... left out of the model" first
        with pytest.raises(SchemaError, match="a model of the target 'c' needs at least two"):
            fit_glm(tables, "c", family="linear")
    with pytest.warns(UserWarning, match="'c' takes one value .* left out of the model"):
        fit_glm(tables, "y")  # a constant feature: left out, with a word


@pytest.mark.parametrize(
    ("rows", "said"),
    [
        ({"x": [0.1]}, "the new rows lack column(s) ['g'] of the model"),
        ({"x": [0.1], "g": ["c"]}, "holds categor(ies) ['c'] the fit never saw"),
        ({"x": [np.nan], "g": ["a"]}, "column 'x' has 1 missing value(s) (row(s) [0])"),
        ({"x": ["high"], "g": ["a"]}, "column 'x' is not numeric (values like ['high'])"),
        ({"x": [0.1], "g": [None]}, "the fit saw none, so the model has no coefficient"),
    ],
)
def test_predict_refuses_rows_in_a_predictions_words(rows, said) -> None:
    """Not the site's wording ('the site's table', 'rebuild the schema', 'missing=drop',
    'declare it nominal'), which names fixes of a fit."""
    from fits.analysis.design import DesignError

    rng = np.random.default_rng(0)
    tables = [
        pd.DataFrame({"x": rng.normal(size=60), "g": rng.choice(["a", "b"], 60),
                      "y": rng.integers(0, 2, 60)})
        for _ in range(2)
    ]  # fmt: skip
    res = fit_glm(tables, "y")
    with pytest.raises(DesignError) as err:
        res.predict(pd.DataFrame(rows))
    text = str(err.value)
    assert text.startswith("predict: ") and said in text
    for site_words in ("site's table", "rebuild the schema", "missing='drop'", "nominal"):
        assert site_words not in text
    ok = res.predict(pd.DataFrame({"x": [0.1, -1.0], "g": ["b", "a"]}))
    z = (np.array([0.1, -1.0]) - res.standardization.means[0]) / res.standardization.sds[0]
    x = np.column_stack([np.ones(2), z, [1.0, 0.0]])
    np.testing.assert_allclose(ok, 1 / (1 + np.exp(-x @ res.params.to_numpy())), rtol=1e-12)


def _labelled(seed: int = 4) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    out = []
    for n in (120, 90):
        x = rng.normal(size=n)
        buy = np.where(rng.random(n) < 1 / (1 + np.exp(-x)), "yes", "no")
        out.append(pd.DataFrame({"x": x, "g": rng.choice(["a", "b"], n), "buy": buy}))
    return out


def test_positive_names_the_label_coded_one() -> None:
    """Oracle: statsmodels' GLM on the pooled rows with y = (buy == "no")."""
    import statsmodels.api as sm

    tables = _labelled()
    default = fit_glm(tables, "buy")
    flipped = fit_glm(tables, "buy", positive="no")
    assert "target 'buy' coded 1 = 'yes', 0 = 'no'" in default.summary()
    assert "target 'buy' coded 1 = 'no', 0 = 'yes'" in flipped.summary()
    pooled = pd.concat(tables)
    x = np.column_stack([np.ones(len(pooled)), pooled.x, pooled.g == "b"]).astype(float)
    ref = sm.GLM((pooled.buy == "no").to_numpy(float), x, family=sm.families.Binomial()).fit()
    np.testing.assert_allclose(flipped.original_params.to_numpy(), ref.params, rtol=1e-8)
    np.testing.assert_allclose(flipped.params, -default.params, rtol=1e-8)
    assert flipped.to_dict()["target_levels"] == ["yes", "no"]


def test_positive_that_does_not_apply_is_refused() -> None:
    from fits.analysis.design import DesignError

    tables = _labelled()
    with pytest.raises(DesignError, match=r"'maybe' is not a label .* \['no', 'yes'\]"):
        fit_glm(tables, "buy", positive="maybe")
    with pytest.raises(ValueError, match="family 'linear' takes the target's numbers"):
        fit_glm(tables, "x", family="linear", positive="no")
    numeric = [t.assign(buy=(t.buy == "yes").astype(int)) for t in tables]
    # a 0/1 target: positive="0" makes 0 the event (was: refused, "1 is the event as it
    # stands"); "1" leaves it as it is; another value is named as not one of its values
    flipped = fit_glm(numeric, "buy", positive="0")
    np.testing.assert_allclose(flipped.params, -fit_glm(numeric, "buy").params, rtol=1e-8)
    assert flipped.to_dict()["target_levels"] == ["1", "0"]
    assert fit_glm(numeric, "buy", positive="1").params.equals(fit_glm(numeric, "buy").params)
    with pytest.raises(DesignError, match=r"'5' is not a value of target 'buy' .*\['0', '1'\]"):
        fit_glm(numeric, "buy", positive="5")


def test_fits_analyze_takes_positive(tmp_path) -> None:
    import json

    from conftest import fits_in_process as run

    paths = []
    for k, t in enumerate(_labelled()):
        paths.append(str(tmp_path / f"site{k}.csv"))
        t.to_csv(paths[-1], index=False)
    out = tmp_path / "r.json"
    proc = run("analyze", *paths, "--target", "buy", "--positive", "no", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["target_levels"] == ["yes", "no"]
    bad = run("analyze", *paths, "--target", "buy", "--positive", "maybe", "--out", str(out))
    assert bad.returncode == 1 and "'maybe' is not a label" in bad.stderr
    usage = run("analyze", *paths, "--target", "x", "--method", "fedlsa", "--positive", "no",
                "--out", str(out))  # fmt: skip
    assert usage.returncode == 2 and "--positive is not used by fedlsa" in usage.stderr
