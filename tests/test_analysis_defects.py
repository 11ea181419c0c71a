"""Defects of the analyses found by a tester: FedLSA and FedSGD steps that diverge but
returned numbers (exit 0), text in a weights/offset/exposure column read as a missing
value, a table naming a column twice, and the wording of the privacy scope."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_cli import run

import fits.analysis.lsa as lsa
from fits.analysis.design import DesignError
from fits.analysis.glm import GLMWarning, fit_glm
from fits.analysis.lsa import FedLSAError, default_step_size, fedlsa, fedlsa_arrays, step_bound
from fits.core.schema import SchemaError

from conftest import write_sites

FEATURES = ["x1", "x2", "g"]


def _tables(seed: int = 0, sizes: tuple[int, ...] = (400, 250, 150)) -> dict[str, pd.DataFrame]:
    """Three sites of the tester's kind: x1, x2, a nominal g, a linear target ylin, a
    binary yb, a count cnt, prior weights wt, an offset off, an exposure expo."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, n in enumerate(sizes):
        x1, x2 = rng.normal(0.3 * k, 1.0, n), rng.normal(5.0, 2.0, n)
        g = rng.choice(["a", "b", "c"], n)
        ylin = -0.4 + 2 * x1 - 0.7 * x2 + 0.5 * (g == "b") + (g == "c") + rng.normal(0, 1, n)
        yb = (rng.random(n) < 1 / (1 + np.exp(-(x1 - 0.3 * (x2 - 5))))).astype(int)
        expo = rng.uniform(0.5, 2.0, n)
        out[f"s{k + 1}"] = pd.DataFrame(
            {
                "x1": x1,
                "x2": x2,
                "g": g,
                "ylin": ylin,
                "yb": yb,
                "cnt": rng.poisson(np.exp(0.2 + 0.3 * x1) * expo),
                "wt": rng.uniform(0.2, 2.0, n),
                "off": rng.normal(0.0, 0.2, n),
                "expo": expo,
            }
        )
    return out


def _no_numpy_warning(caught: list[warnings.WarningMessage]) -> None:
    raw = [str(w.message) for w in caught if "encountered in" in str(w.message)]
    assert not raw, raw


# --------------------------------------------------------------------- 1. FedLSA steps
@pytest.mark.parametrize("step", [1.0, 0.5, 1e9])
def test_fedlsa_refuses_a_step_at_or_above_the_stability_bound(step: float) -> None:
    """Was: step 1 gave an intercept of 2e19, step 0.5 gave 380 (pooled OLS about -3),
    both ``converged``."""
    calls: list[int] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(FedLSAError) as err:
            fedlsa(
                _tables(),
                "ylin",
                FEATURES,
                rounds=10,
                step_size=step,
                seed=0,
                on_round=lambda t, total: calls.append(t),
            )
    msg = str(err.value)
    assert "mean-square stability bound" in msg and "the default" in msg and "--step" in msg
    assert calls == []  # before any round of Algorithm 1
    _no_numpy_warning(caught)


def test_the_bound_is_twice_the_default_and_a_step_below_it_runs() -> None:
    rng = np.random.default_rng(3)
    xs = [np.column_stack([np.ones(n), rng.normal(size=(n, 2))]) for n in (3000, 2000)]
    ys = [x @ np.array([1.0, 2.0, -1.0]) + rng.normal(size=len(x)) for x in xs]
    x = np.vstack(xs)
    p = np.linalg.inv(x.T @ x / len(x))  # size weights: the pooled Abar
    s = np.einsum("ij,jk,ik->i", x, p, x)
    bound = step_bound(s.mean(), np.mean(s**2))
    assert bound == pytest.approx(s.mean() / np.mean(s**2))
    assert bound == pytest.approx(2 * default_step_size(s.mean(), np.mean(s**2)))
    kw = dict(rounds=100, local_steps=5, n_bootstrap=20, seed=1)
    with pytest.raises(FedLSAError, match=f"bound {bound:.3g}"):
        fedlsa_arrays(xs, ys, step_size=bound * 1.0001, **kw)
    res = fedlsa_arrays(xs, ys, step_size=0.9 * bound, **kw)
    assert np.all(np.isfinite(res.coef_)) and np.all(np.abs(res.coef_) < 10)


def test_fedlsa_one_pass_refuses_a_step_above_its_batch_bound() -> None:
    with pytest.raises(FedLSAError, match=r"stability bound .* for batches of b = \d+ rows"):
        fedlsa(_tables(), "ylin", FEATURES, regime="one_pass", step_size=0.95, seed=0)


def test_fedlsa_default_step_still_runs() -> None:
    tables = _tables()
    pooled = pd.concat(list(tables.values()), ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GLMWarning)
        ols = fit_glm(tables, "ylin", FEATURES, family="linear").params.to_numpy()
    res = fedlsa(tables, "ylin", FEATURES, rounds=10, seed=0)
    assert res.converged and len(pooled) == int(res.n_rows.sum())
    # the last iterate of 100 rows a site: within a few bootstrap sd of the pooled fit
    assert np.all(np.abs(res.coef_ - ols) < 4 * res.bse.to_numpy()), (res.coef_, ols)


@pytest.mark.parametrize("step", [1.0, 1e9])
def test_fedlsa_run_guard_stops_a_growing_iterate(
    monkeypatch: pytest.MonkeyPatch, step: float
) -> None:
    """What the bound lets through (a step unstable in one direction) is still stopped:
    with the bound switched off, a step of 1 grows the iterate geometrically."""
    monkeypatch.setattr(lsa, "step_bound", lambda *a, **k: np.inf)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(FedLSAError, match=r"FedLSA diverged in round \d+.*step is too large"):
            fedlsa(_tables(), "ylin", FEATURES, rounds=10, step_size=step, seed=0)
    _no_numpy_warning(caught)


def test_fedlsa_guard_leaves_a_stable_run_alone() -> None:
    guard = lsa._DivergenceGuard()
    theta = np.array([1.0, -2.0])
    for t in range(1, 50):
        guard.check(t, theta * (1 - 0.9**t), 0.1)
    with pytest.raises(FedLSAError, match="diverged in round 50"):
        guard.check(50, theta * 1e7, 0.1)


def test_cli_fedlsa_step_too_large_exits_1(tmp_path: Path) -> None:
    sites = write_sites(_tables(), tmp_path)
    out = tmp_path / "r.json"
    args = ("--target", "ylin", "--features", "x1,x2,g", "--method", "fedlsa", "-R", "10")
    proc = run("analyze", *sites, *args, "--step", "1", "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    assert "stability bound" in proc.stderr and "Traceback" not in proc.stderr
    assert "RuntimeWarning" not in proc.stderr and not out.exists()


# --------------------------------------------------------------------- 2. FedSGD steps
@pytest.mark.parametrize(
    ("family", "target", "eta"), [("linear", "ylin", 4.0), ("logistic", "yb", 40.0)]
)
def test_fedsgd_that_moved_away_from_the_mle_is_an_error(
    family: str, target: str, eta: float
) -> None:
    """Was: linear FedSGD at step 4 gave x1 = -3.4e117, exit 0, "run more iterations"."""
    with pytest.raises(DesignError, match="moved away.*the step is too large"):
        fit_glm(_tables(), target, FEATURES, family=family, method="fedsgd", K=200, eta=eta)


@pytest.mark.parametrize("method", ["fedsgd", "fedhybrid", "fedavg"])
@pytest.mark.parametrize("weighted", [False, True])
def test_a_logistic_fit_saturated_by_a_huge_step_is_an_error(method: str, weighted: bool) -> None:
    """Was: logistic FedSGD at step 1e6 ended at coefficients of 2e5 (every fitted
    probability 0 or 1, the Fisher information singular, so no distance to the MLE
    could be measured): exit 0 with "no standard errors"."""
    options: dict[str, object] = {"weights": "wt", "offset": "off"} if weighted else {}
    options.update({"eta1": 1e6, "eta2": 1e6} if method == "fedhybrid" else {"eta": 1e6})
    with pytest.raises(DesignError, match="negative log-likelihood of .* against .* at its "
                       "start theta = 0.*the step is too large"):  # fmt: skip
        fit_glm(_tables(), "yb", FEATURES, family="logistic", method=method, **options)


def test_the_saturated_check_counts_only_a_loss_above_the_start() -> None:
    from fits.analysis.glm import _saturated_away

    assert _saturated_away(312.0 * 2, 312.0) and _saturated_away(math.inf, 312.0)
    assert not _saturated_away(100.0, 312.0) and not _saturated_away(312.0, 312.0)


def test_fits_that_approach_the_mle_are_not_refused() -> None:
    tables = _tables()
    rng = np.random.default_rng(1)
    for t in tables.values():  # a target the features do not explain: the MLE near 0
        t["noise"] = rng.normal(0, 1, len(t))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GLMWarning)
        for method in ("fedsgd", "fedhybrid", "fedavg", "fednewton", "newton"):
            for target in ("ylin", "noise"):
                res = fit_glm(tables, target, FEATURES, family="linear", method=method)
                assert np.all(np.isfinite(res.params.to_numpy()))


def test_a_private_fit_is_not_compared_with_the_mle() -> None:
    """A private estimate farther from the MLE than theta = 0 (noise, not a step too
    large) is returned: the check needs the exact MLE, which a private fit never uses."""
    tables = _tables()
    rng = np.random.default_rng(1)
    for t in tables.values():
        t["noise"] = rng.normal(0, 1, len(t))
    pooled = pd.concat(list(tables.values()), ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GLMWarning)
        mle = fit_glm(tables, "noise", FEATURES, family="linear")
        res = fit_glm(
            tables, "noise", FEATURES, family="linear", method="fedsgd", mu=0.3, clip=1.0, seed=0
        )
    # the Fisher metric of a linear fit: the distance of the fitted values
    fitted, at_mle = res.predict(pooled), mle.predict(pooled)
    assert np.linalg.norm(fitted - at_mle) > np.linalg.norm(at_mle)  # farther than 0
    assert res.mle_distance is None


def test_cli_fedsgd_step_too_large_exits_1(tmp_path: Path) -> None:
    sites = write_sites(_tables(), tmp_path)
    out = tmp_path / "r.json"
    args = ("--target", "ylin", "--family", "linear", "--features", "x1,x2,g")
    proc = run("analyze", *sites, *args, "--method", "fedsgd", "-K", "200", "--step", "4",
               "--out", str(out))  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "the step is too large" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


# ------------------------------------------------------- 3. text in weights/offset/exposure
def _with_text(column: str, text: str = "heavy") -> dict[str, pd.DataFrame]:
    tables = _tables()
    s2 = tables["s2"]
    s2[column] = s2[column].astype(object)
    s2.loc[3, column] = text
    return tables


@pytest.mark.parametrize("missing", ["raise", "drop"])
@pytest.mark.parametrize(
    ("kind", "column", "family", "target"),
    [
        ("weights", "wt", "linear", "ylin"),
        ("offset", "off", "linear", "ylin"),
        ("exposure", "expo", "poisson", "cnt"),
    ],
)
def test_text_in_an_extra_column_is_an_error_in_both_policies(
    missing: str, kind: str, column: str, family: str, target: str
) -> None:
    """Was: "s2: weights column 'wt' has 1 missing value(s)", and with missing="drop"
    the row was left out as one missing a value."""
    with pytest.raises(DesignError) as err:
        fit_glm(
            _with_text(column), target, FEATURES, family=family, missing=missing,
            **{kind: column},
        )  # fmt: skip
    msg = str(err.value)
    assert msg.startswith(f"s2: {kind} column {column!r} holds text")
    assert "'heavy' (1)" in msg and "missing value" in msg and "--na-values" in msg


@pytest.mark.parametrize("missing", ["raise", "drop"])
def test_fedlsa_text_in_weights_is_an_error(missing: str) -> None:
    with pytest.raises(DesignError, match=r"s2: weights column 'wt' holds text.*'heavy'"):
        fedlsa(_with_text("wt"), "ylin", FEATURES, weights="wt", missing=missing, rounds=5)


def test_a_column_of_text_in_weights_lists_its_words() -> None:
    """20 words in 150 rows: too many for the column to be read as numbers, so it stays
    text; the error lists the words alone, not the numbers among them."""
    tables = _tables()
    s3 = tables["s3"]
    s3["wt"] = s3["wt"].astype(object)
    s3.loc[:19, "wt"] = "heavy"
    with pytest.raises(
        DesignError, match=r"s3: weights column 'wt' holds text [^:]*: 'heavy' \(20\) \("
    ):
        fit_glm(tables, "ylin", FEATURES, family="linear", weights="wt", missing="drop")


def test_a_real_missing_weight_is_still_dropped() -> None:
    tables = _tables()
    tables["s2"].loc[3, "wt"] = np.nan
    with pytest.warns(GLMWarning, match="the weights column 'wt'"):
        res = fit_glm(tables, "ylin", FEATURES, family="linear", weights="wt", missing="drop")
    assert res.n_obs == 799


def test_cli_text_in_weights_exits_1_under_drop(tmp_path: Path) -> None:
    sites = write_sites(_with_text("wt"), tmp_path)
    out = tmp_path / "r.json"
    args = ("--target", "ylin", "--family", "linear", "--features", "x1,x2,g")
    for missing in ("raise", "drop"):
        proc = run("analyze", *sites, *args, "--weights", "wt", "--missing", missing,
                   "--out", str(out))  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        assert "s2: weights column 'wt' holds text" in proc.stderr and not out.exists()
    # read as missing on request, the row is dropped
    proc = run("analyze", *sites, *args, "--weights", "wt", "--missing", "drop",
               "--na-values", "wt=heavy", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- 4. duplicate columns
@pytest.mark.parametrize("repeated", ["x1", "x2", "yb"])
def test_a_table_naming_a_column_twice_is_an_error_before_any_round(repeated: str) -> None:
    """Was: AttributeError: 'DataFrame' object has no attribute 'dtype'."""
    tables = _tables()
    tables["s1"] = pd.concat([tables["s1"], tables["s1"][[repeated]]], axis=1)
    rounds: list[int] = []
    with pytest.raises(
        SchemaError, match=rf"s1: the table names column\(s\) '{repeated}' \(2 times\)"
    ):
        fit_glm(tables, "yb", ["x1"], on_round=lambda t, total: rounds.append(t))
    with pytest.raises(SchemaError, match=rf"s1: .*'{repeated}' \(2 times\)"):
        fedlsa(tables, "ylin", ["x1"], rounds=5, on_round=lambda t, total: rounds.append(t))
    assert rounds == []


# ------------------------------------------------------------------ 5. privacy scope text
def test_privacy_scope_lists_the_count_of_dropped_rows() -> None:
    tables = _tables()
    tables["s2"].loc[3, "x1"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GLMWarning)
        res = fit_glm(
            tables, "yb", FEATURES, method="fedsgd", mu=1.0, clip=2.0, missing="drop", seed=0
        )
    scope = str(res.privacy_scope)
    assert (
        "mean and sd of each numeric feature), each site's count of the rows it left out "
        "for a missing value and each site's design null space" in scope
    )
    assert "the rows each site left out" not in scope
