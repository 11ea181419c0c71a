"""Tests for fits.evaluation.utility: the data usage modes M1-M4 and the downstream fits."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fits.datasets import federated_split, simulate
from fits.evaluation import independent_resample
from fits.evaluation.utility import Design, downstream_utility, fit_linear, fit_logistic, infer_task

COVARIATES = ["X_B", "X_G1", "X_G2", "X_O", "X_L", "X_G3"]


@pytest.fixture(scope="module")
def sim():
    data = simulate(2400, seed=3)
    clients, test = federated_split(data.frame, shares=(0.6, 0.3, 0.1), seed=0)
    pooled = pd.concat(clients, ignore_index=True)
    # a stand-in synthetic table: real rows with noise, so it differs from every client
    rng = np.random.default_rng(0)
    synthetic = pooled.sample(1500, replace=True, random_state=1).reset_index(drop=True)
    for col in ("X_G1", "X_G2", "X_L", "X_G3", "Y_lin"):
        synthetic[col] = synthetic[col] + rng.normal(0.0, 0.3, len(synthetic))
    return data, clients, test, synthetic


def _rows(result, mode: str, setting: str = "") -> pd.DataFrame:
    table = result.table
    out = table[(table["mode"] == mode) & (table["setting"] == setting)]
    return out.drop(columns=["mode", "setting", "r", "lam", "label", "n_synthetic"]).reset_index(
        drop=True
    )


@pytest.mark.parametrize(("target", "key"), [("Y_lin", "linear"), ("Y_log", "logistic")])
def test_m4_lambda_zero_is_m2_and_lambda_one_is_m3_all(sim, target: str, key: str) -> None:
    data, clients, test, synthetic = sim
    result = downstream_utility(
        clients, synthetic, test, target, data.kinds,
        covariates=COVARIATES, reference=data.params[key],
        ratios=(math.inf,), lambdas=(0.0, 1.0), boosting=True, boosting_iterations=20,
    )  # fmt: skip
    # exactly the same estimates and metrics, for the parametric model and for boosting
    pd.testing.assert_frame_equal(
        _rows(result, "M4", "lambda=0"), _rows(result, "M2"), check_exact=True
    )
    pd.testing.assert_frame_equal(
        _rows(result, "M4", "lambda=1"), _rows(result, "M3", "r=inf"), check_exact=True
    )
    m3 = result.table[result.table["mode"] == "M3"]
    assert (m3["n_train"] == m3["n_local"] + len(synthetic)).all()
    assert set(result.table["model"]) == {
        "linear regression" if key == "linear" else "logistic regression",
        "gradient boosting",
    }


def test_table_layout_and_m3_sizes(sim) -> None:
    data, clients, test, synthetic = sim
    result = downstream_utility(
        {"a": clients[0], "b": clients[1], "c": clients[2]}, synthetic, test, "Y_lin", data.kinds,
        covariates=COVARIATES, reference=data.params["linear"], ratios=(0.5, 1.0, 100.0),
        lambdas=(0.1,), boosting=False,
    )  # fmt: skip
    table = result.table
    assert result.task == "regression"
    assert result.feature_names == ["X_B=1", "X_G1", "X_G2", "X_O", "X_L", "X_G3"]
    assert list(table["client"].unique()) == ["all clients", "a", "b", "c"]
    assert {"mse", "r2"} <= set(table.columns) and "accuracy" not in table.columns
    m3 = table[table["mode"] == "M3"].set_index(["client", "setting"])
    for name, frame in zip("abc", clients, strict=True):
        m = len(frame)
        assert m3.loc[(name, "r=0.5"), "n_synthetic"] == math.floor(0.5 * m + 0.5)
        assert m3.loc[(name, "r=1"), "n_synthetic"] == m
        assert m3.loc[(name, "r=100"), "n_synthetic"] == len(synthetic)  # capped at all rows
    # pooled real data estimates the true parameters well; every row has its metrics
    pooled = table[table["mode"] == "pooled"].iloc[0]
    assert pooled["param_error"] < 0.2
    assert table["mse"].notna().all() and table["param_error"].notna().all()
    # seeded: the same call gives the same table
    again = downstream_utility(
        {"a": clients[0], "b": clients[1], "c": clients[2]}, synthetic, test, "Y_lin", data.kinds,
        covariates=COVARIATES, reference=data.params["linear"], ratios=(0.5, 1.0, 100.0),
        lambdas=(0.1,), boosting=False,
    )  # fmt: skip
    pd.testing.assert_frame_equal(table, again.table)


def test_weights_act_as_loss_weights() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 3))
    y_lin = x @ [1.0, -2.0, 0.5] + rng.normal(size=300)
    y_log = (rng.random(300) < 1 / (1 + np.exp(-(x @ [1.0, -1.0, 0.5])))).astype(float)
    w = np.where(np.arange(300) < 100, 3.0, 1.0)  # weight 3 = the row three times
    x_dup = np.vstack([x, x[:100], x[:100]])
    np.testing.assert_allclose(
        fit_linear(x, y_lin, w),
        fit_linear(x_dup, np.concatenate([y_lin, y_lin[:100], y_lin[:100]])),
        atol=1e-10,
    )
    weighted, converged = fit_logistic(x, y_log, w)
    duplicated, _ = fit_logistic(x_dup, np.concatenate([y_log, y_log[:100], y_log[:100]]))
    assert converged
    np.testing.assert_allclose(weighted, duplicated, atol=1e-5)
    # zero weights drop rows exactly
    np.testing.assert_array_equal(
        fit_linear(x, y_lin, (np.arange(300) < 200).astype(float)), fit_linear(x[:200], y_lin[:200])
    )
    # a constant column gets coefficient 0; the rest is unchanged
    with_const = np.column_stack([x, np.full(300, 2.0)])
    np.testing.assert_allclose(fit_linear(with_const, y_lin)[:4], fit_linear(x, y_lin), atol=1e-10)
    assert fit_linear(with_const, y_lin)[4] == 0.0


def test_design_reference_level_rare_levels_and_true_parameters() -> None:
    frame = pd.DataFrame(
        {
            "c": ["b"] * 60 + ["a"] * 39 + ["z"],  # "b" most frequent, "z" rare (1 row)
            "n": np.arange(100, dtype=float),
            "flag": [0, 1] * 50,
        }
    )
    kinds = {"c": "nominal", "n": "continuous", "flag": "nominal"}
    design = Design.from_frames(["c", "n", "flag"], kinds, [frame], frame, min_level_share=0.05)
    assert design.reference_levels == {"c": "b", "flag": 0}
    assert design.feature_names == ["c=a", "n", "flag=1"]
    x = design.matrix(frame)
    np.testing.assert_allclose(x[:, 1].mean(), 0.0, atol=1e-12)
    np.testing.assert_allclose(x[:, 1].std(), 1.0)
    assert x[99, 0] == 0.0  # the rare level counts with the reference level
    # a coefficient on the 0/1 value of a numeric nominal column, and on a feature
    params = design.parameters_from({"intercept": 1.0, "coef": {"flag": 2.0, "n": 0.5}})
    center = frame["n"].mean()
    np.testing.assert_allclose(params, [1.0 + 0.5 * center, 0.0, 0.5 * frame["n"].std(ddof=0), 2.0])
    with pytest.raises(ValueError, match="matches no covariate"):
        design.parameters_from({"intercept": 0.0, "coef": {"nope": 1.0}})
    with pytest.raises(ValueError, match="unknown to the design"):
        design.raw(pd.DataFrame({"c": ["q"], "n": [1.0], "flag": [0]}), "test")


def test_infer_task_and_errors(sim) -> None:
    data, clients, test, synthetic = sim
    assert infer_task(data.kinds, "Y_lin", [data.frame]) == "regression"
    assert infer_task(data.kinds, "Y_log", [data.frame]) == "classification"
    three = pd.DataFrame({"t": ["a", "b", "c"]})
    with pytest.raises(ValueError, match="two levels"):
        infer_task({"t": "nominal"}, "t", [three])
    with pytest.raises(ValueError, match="also listed as a covariate"):
        downstream_utility(clients, synthetic, test, "Y_lin", data.kinds, covariates=["Y_lin"])
    with pytest.raises(ValueError, match="lambda"):
        downstream_utility(clients, synthetic, test, "Y_lin", data.kinds, lambdas=(-1.0,))


def test_one_class_client_and_no_clients(sim) -> None:
    data, clients, test, synthetic = sim
    lonely = clients[2][clients[2]["Y_log"] == 0].head(20)
    with pytest.raises(ValueError, match="cannot fit the reference"):
        downstream_utility([lonely], synthetic, test, "Y_log", data.kinds, covariates=COVARIATES)
    result = downstream_utility(
        [lonely], synthetic, test, "Y_log", data.kinds, covariates=COVARIATES,
        reference=data.frame, boosting=True, boosting_iterations=10,
    )  # fmt: skip
    m2 = result.table[result.table["mode"] == "M2"]
    assert m2["param_error"].isna().all() and m2["accuracy"].isna().all()
    assert m2["note"].str.contains("one class").all()
    assert result.table[result.table["mode"] == "M4"]["accuracy"].notna().all()
    only_m1 = downstream_utility(
        None, synthetic, test, "Y_log", data.kinds, covariates=COVARIATES, boosting=False
    )
    assert list(only_m1.table["mode"]) == ["M1"]
    assert "test table" in only_m1.reference_source


def test_synthetic_data_beats_noise(sim) -> None:
    """A faithful table gives a small M1 error; shuffled columns give a large one."""
    data, clients, test, synthetic = sim
    shuffled = independent_resample(synthetic, seed=0)
    errors = {}
    for name, table in (("faithful", synthetic), ("shuffled", shuffled)):
        result = downstream_utility(
            None, table, test, "Y_lin", data.kinds, covariates=COVARIATES,
            reference=data.params["linear"], boosting=False,
        )  # fmt: skip
        errors[name] = float(result.table["param_error"].iloc[0])
    assert errors["faithful"] < 0.5 < errors["shuffled"]


def test_collinear_covariates_get_a_note(sim) -> None:
    data, clients, test, synthetic = sim
    kinds = {**data.kinds, "X_copy": "continuous"}
    tables = [
        t.assign(X_copy=2.0 * t["X_G1"] + 1.0) for t in (*clients, test, synthetic, data.frame)
    ]
    *with_copy, test_c, synthetic_c, frame_c = tables
    result = downstream_utility(
        with_copy, synthetic_c, test_c, "Y_lin", kinds, covariates=[*COVARIATES, "X_copy"],
        reference=frame_c, boosting=False,
    )  # fmt: skip
    assert len(result.notes) == 1
    assert "collinear" in result.notes[0] and "X_copy" in result.notes[0]
    assert result.to_dict()["notes"] == result.notes


def test_boosting_lambdas_equal_separate_calls(sim) -> None:
    """Boosting at a few M4 weights in one call = the records of two separate calls.

    The oracle: one call with the whole lambda grid and no boosting (parametric rows)
    and one call with boosting and only the boosting weights (boosting rows); 0.3 is
    a boosting weight outside the grid (a boosting-only fit).
    """
    data, clients, test, synthetic = sim
    common = dict(
        task="classification",
        covariates=COVARIATES,
        reference=data.params["logistic"],
        boosting_iterations=5,
        seed=2,
    )
    grid, boost = [0.0, 0.1, 0.5], [0.1, 0.3]
    one = downstream_utility(
        clients, synthetic, test, "Y_log", data.kinds, lambdas=grid, boosting_lambdas=boost,
        **common,
    ).table  # fmt: skip
    param = downstream_utility(
        clients, synthetic, test, "Y_log", data.kinds, lambdas=grid, boosting=False, **common
    ).table
    boosted = downstream_utility(
        clients, synthetic, test, "Y_log", data.kinds, lambdas=boost, **common
    ).table
    boosted = boosted[boosted["model"] == "gradient boosting"]
    is_boost = one["model"] == "gradient boosting"
    pd.testing.assert_frame_equal(one[~is_boost].reset_index(drop=True), param)
    pd.testing.assert_frame_equal(
        one[is_boost].reset_index(drop=True), boosted.reset_index(drop=True)
    )
    m4 = one[one["mode"] == "M4"]
    assert set(m4.loc[m4["model"] == "gradient boosting", "lam"]) == {0.1, 0.3}
    assert set(m4.loc[m4["model"] != "gradient boosting", "lam"]) == set(grid)


def _mixed_table(n: int, seed: int) -> pd.DataFrame:
    """Nominal strings, an ordinal, a continuous column; a numeric and a binary response."""
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], size=n)
    level = rng.integers(1, 6, size=n)
    x = rng.normal(size=n)
    y = np.where(colour == "red", 2.0, 0.0) + 0.5 * level * x + rng.normal(0, 0.5, n)
    label = np.where(y + rng.normal(0, 1, n) > 1.0, ">50K", "<=50K")
    return pd.DataFrame({"colour": colour, "level": level, "x": x, "y": y, "label": label})


KINDS_MIXED = {
    "colour": "nominal", "level": "ordinal", "x": "continuous", "y": "continuous",
    "label": "nominal",
}  # fmt: skip


def _sklearn_oracle(train, other, test, target, task, seed):
    """Independent implementation: pandas codes, scikit-learn defaults, sklearn metrics."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.metrics import r2_score, roc_auc_score

    covs = ["colour", "level", "x"] + (["y"] if target == "label" else [])
    levels = sorted(set(train["colour"]) | set(other["colour"]) | set(test["colour"]))

    def features(frame):
        out = frame[covs].copy()
        out["colour"] = pd.Categorical(out["colour"], categories=levels).codes.astype(float)
        return out.to_numpy(dtype=float)

    mask = [c == "colour" for c in covs]
    scores = []
    for frame in (train, other):
        if task == "regression":
            model = HistGradientBoostingRegressor(random_state=seed, categorical_features=mask)
            model.fit(features(frame), frame[target].to_numpy())
            scores.append(r2_score(test[target], model.predict(features(test))))
        else:
            model = HistGradientBoostingClassifier(random_state=seed, categorical_features=mask)
            model.fit(features(frame), (frame[target] == ">50K").to_numpy(dtype=float))
            prob = model.predict_proba(features(test))[:, 1]
            scores.append(roc_auc_score(test[target] == ">50K", prob))
    return scores


@pytest.mark.parametrize(("target", "task"), [("y", "regression"), ("label", "classification")])
def test_boosting_comparison_equals_direct_sklearn(target: str, task: str) -> None:
    """Trained on real and on synthetic rows with sklearn's defaults, scored on the test rows."""
    from fits.evaluation.utility import boosting_comparison

    train, synthetic, test = _mixed_table(600, 0), _mixed_table(500, 1), _mixed_table(300, 2)
    kinds = {k: v for k, v in KINDS_MIXED.items() if k != ("label" if target == "y" else "y")}
    if target == "label":
        kinds["y"] = "continuous"
    res = boosting_comparison(train, synthetic, test, target, kinds, seed=4)
    real, syn = _sklearn_oracle(train, synthetic, test, target, task, seed=4)
    assert res.task == task
    assert res.metric == ("r2" if task == "regression" else "roc_auc")
    assert res.real[res.metric] == pytest.approx(real, abs=1e-12)
    assert res.synthetic[res.metric] == pytest.approx(syn, abs=1e-12)
    assert res.gap == pytest.approx(real - syn, abs=1e-12)
    assert (res.n_train, res.n_synthetic, res.n_test) == (600, 500, 300)
    # a synthetic table that is the training table scores the same: gap exactly 0
    same = boosting_comparison(train, train, test, target, kinds, seed=4)
    assert same.gap == 0.0
    # a clearly worse synthetic table (response shuffled) scores clearly lower
    noise = synthetic.copy()
    noise[target] = noise[target].sample(frac=1.0, random_state=0).to_numpy()
    worse = boosting_comparison(train, noise, test, target, kinds, seed=4)
    assert worse.synthetic[res.metric] < res.synthetic[res.metric] - 0.1
    assert set(res.to_dict()) >= {"real", "synthetic", "gap", "metric", "model"}


def test_boosting_comparison_one_class_is_a_finding_with_a_note() -> None:
    """A synthetic table of one class is what the report is there to show (the modes
    M1-M4 give a note and no metric): it was an error that stopped the whole report;
    now its metrics are NaN and a note says why, the real side is scored as before."""
    from fits.evaluation.utility import boosting_comparison

    train, synthetic, test = _mixed_table(200, 0), _mixed_table(200, 1), _mixed_table(100, 2)
    synthetic["label"] = "<=50K"
    kinds = {k: v for k, v in KINDS_MIXED.items() if k != "y"}
    res = boosting_comparison(train, synthetic, test, "label", kinds)
    assert np.isnan(res.synthetic["roc_auc"]) and np.isnan(res.synthetic["accuracy"])
    assert 0.5 < res.real["roc_auc"] <= 1.0
    assert res.notes == [
        "gradient boosting: the synthetic table holds only one class of 'label'; no "
        "classifier can be trained on it"
    ]
    assert res.to_dict()["synthetic"]["roc_auc"] is None
