"""Complete cases on request: ``missing="drop"`` in ``fit_glm``, ``fedlsa`` and ``fits
analyze --missing drop`` (docs/analysis.md, "Design matrices")."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from cli.main import app
from fits.analysis.design import DesignError
from fits.analysis.glm import GLMWarning, fit_glm
from fits.analysis.lsa import fedlsa


def _site(n: int, seed: int, holes: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 90, n).astype(float)
    bmi = rng.normal(27.0, 5.0, n).round(1)
    region = rng.choice(["north", "south", "east"], n).astype(object)
    p = 1.0 / (1.0 + np.exp(-(-3.0 + 0.04 * age + 0.05 * (bmi - 27.0))))
    died = (rng.random(n) < p).astype(float)
    y = 2.0 + 0.1 * age - 0.3 * bmi + rng.normal(0.0, 1.0, n)
    if holes:
        bmi[rng.random(n) < 0.08] = np.nan
        age[rng.random(n) < 0.03] = np.nan
        died[rng.random(n) < 0.02] = np.nan
        y[rng.random(n) < 0.02] = np.nan
        region[rng.random(n) < 0.05] = None  # a nominal's missing value: its own level
    return pd.DataFrame({"age": age, "bmi": bmi, "region": region, "died": died, "y": y})


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return {"a": _site(400, 1), "b": _site(300, 2), "c": _site(120, 3)}


def _complete(t: pd.DataFrame, used: list[str]) -> pd.DataFrame:
    return t.loc[t[used].notna().all(axis=1)].reset_index(drop=True)


def test_default_refuses_and_names_the_fix(tables: dict[str, pd.DataFrame]) -> None:
    with pytest.raises(DesignError, match=r"missing value.*--missing drop"):
        fit_glm(tables, "died", ["age", "bmi", "region"])


def test_bad_policy_is_refused_before_any_round(tables: dict[str, pd.DataFrame]) -> None:
    with pytest.raises(ValueError, match="missing must be one of"):
        fit_glm(tables, "died", ["age"], missing="omit")
    with pytest.raises(ValueError, match="missing must be one of"):
        fedlsa(tables, "y", ["age"], missing="omit")


def test_drop_is_the_fit_of_the_complete_rows(tables: dict[str, pd.DataFrame]) -> None:
    used = ["died", "age", "bmi"]  # region's missing values are a level, not dropped
    with pytest.warns(GLMWarning, match=r"missing='drop': \d+ row\(s\)"):
        res = fit_glm(tables, "died", ["age", "bmi", "region"], missing="drop")
    pre = {k: _complete(t, used) for k, t in tables.items()}
    ref = fit_glm(pre, "died", ["age", "bmi", "region"])
    assert res.n_rows == ref.n_rows == [len(t) for t in pre.values()]
    expected = [len(tables[k]) - len(pre[k]) for k in tables]
    assert res.n_dropped == expected and min(expected) > 0
    assert ref.n_dropped is None
    np.testing.assert_allclose(res.params, ref.params, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.bse, ref.bse, rtol=1e-12)
    assert "region=<missing>" in res.params.index  # the nominal's missing rows stayed
    out = res.to_dict()
    assert out["missing"] == "drop" and out["n_dropped"] == expected
    assert any("left out" in w for w in out["warnings"])


def test_drop_matches_statsmodels_on_the_pooled_complete_rows(
    tables: dict[str, pd.DataFrame],
) -> None:
    sm = pytest.importorskip("statsmodels.api")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GLMWarning)
        res = fit_glm(tables, "died", ["age", "bmi"], missing="drop")
    pooled = pd.concat(tables.values(), ignore_index=True)
    x = sm.add_constant(pooled[["age", "bmi"]])
    ref = sm.GLM(pooled["died"], x, family=sm.families.Binomial(), missing="drop").fit()
    np.testing.assert_allclose(
        res.original_params.to_numpy(), ref.params.to_numpy(), rtol=1e-8, atol=1e-10
    )
    assert res.n_obs == int(ref.nobs)


def test_private_fit_with_drop_is_bit_for_bit_the_predropped_one(
    tables: dict[str, pd.DataFrame],
) -> None:
    used = ["died", "age", "bmi"]
    pre = {k: _complete(t, used) for k, t in tables.items()}
    kw = {"method": "fednewton", "mu": 1.0, "clip": 2.0, "seed": 5}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GLMWarning)
        res = fit_glm(tables, "died", ["age", "bmi"], missing="drop", **kw)
        ref = fit_glm(pre, "died", ["age", "bmi"], **kw)
    np.testing.assert_array_equal(res.params.to_numpy(), ref.params.to_numpy())
    scope = str(res.privacy_scope)
    assert "each site's count of the rows it left out for a missing value" in scope
    assert (
        "mean and sd of each numeric feature), each site's count" in scope
    )  # a list, not "and ... and"
    assert "left out" not in str(ref.privacy_scope)


def test_fedlsa_with_drop_is_the_predropped_one(tables: dict[str, pd.DataFrame]) -> None:
    used = ["y", "age", "bmi"]
    pre = {k: _complete(t, used) for k, t in tables.items()}
    kw = {"rounds": 20, "local_steps": 2, "n_bootstrap": 40, "seed": 3}
    with pytest.warns(UserWarning, match="left out"):
        res = fedlsa(tables, "y", ["age", "bmi"], missing="drop", **kw)
    ref = fedlsa(pre, "y", ["age", "bmi"], **kw)
    np.testing.assert_array_equal(res.coef_, ref.coef_)
    np.testing.assert_array_equal(res.bootstrap, ref.bootstrap)
    expected = [len(tables[k]) - len(pre[k]) for k in tables]
    assert list(res.n_dropped) == expected
    assert res.to_dict()["n_dropped"] == expected
    assert "rows left out for a missing value" in res.summary()
    assert ref.n_dropped is None


def test_predict_never_drops_rows(tables: dict[str, pd.DataFrame]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GLMWarning)
        res = fit_glm(tables, "died", ["age", "bmi"], missing="drop")
    rows = pd.DataFrame({"age": [30.0, np.nan], "bmi": [25.0, 22.0]})
    with pytest.raises(DesignError, match="missing value"):
        res.predict(rows)
    assert res.predict(rows.iloc[:1]).shape == (1,)


def test_a_site_with_no_complete_row_is_named() -> None:
    a, b = _site(200, 1, holes=False), _site(50, 2, holes=False)
    b["bmi"] = np.nan
    b.loc[0, "bmi"] = 25.0  # the column is not all-missing (else it is not a feature)
    b.loc[0, "age"] = np.nan
    with pytest.raises(DesignError, match=r"b: every one of its 50 rows misses a value"):
        fit_glm({"a": a, "b": b}, "died", ["age", "bmi"], missing="drop")


def test_no_missing_value_gives_the_same_fit_and_no_warning() -> None:
    t = {"a": _site(200, 1, holes=False), "b": _site(150, 2, holes=False)}
    with warnings.catch_warnings():
        warnings.simplefilter("error", GLMWarning)
        res = fit_glm(t, "died", ["age", "bmi"], missing="drop")
    ref = fit_glm(t, "died", ["age", "bmi"])
    np.testing.assert_array_equal(res.params.to_numpy(), ref.params.to_numpy())
    assert res.n_dropped == [0, 0] and not res.warnings


def test_cli_missing_drop(tables: dict[str, pd.DataFrame], tmp_path) -> None:
    files = []
    for name, t in tables.items():
        path = tmp_path / f"{name}.csv"
        t.to_csv(path, index=False)
        files.append(str(path))
    runner = CliRunner()
    base = [
        "analyze",
        *files,
        "--target",
        "died",
        "--features",
        "age,bmi",
        "--quiet",
        "--out",
    ]
    refused = runner.invoke(app, [*base, str(tmp_path / "r0.json")])
    assert refused.exit_code == 1
    assert "--missing drop" in refused.output and "Traceback" not in refused.output
    assert not (tmp_path / "r0.json").exists()
    bad = runner.invoke(app, [*base, str(tmp_path / "r1.json"), "--missing", "omit"])
    assert bad.exit_code == 2 and "--missing" in bad.output
    ok = runner.invoke(app, [*base, str(tmp_path / "r2.json"), "--missing", "drop"])
    assert ok.exit_code == 0, ok.output
    assert "were left out" in ok.output
    out = json.loads((tmp_path / "r2.json").read_text())
    used = ["died", "age", "bmi"]
    assert out["n_dropped"] == [len(t) - len(_complete(t, used)) for t in tables.values()]
    assert out["n_obs"] == sum(len(_complete(t, used)) for t in tables.values())
    lsa = runner.invoke(
        app,
        [
            "analyze",
            *files,
            "--target",
            "y",
            "--features",
            "age,bmi",
            "--method",
            "fedlsa",
            "-R",
            "10",
            "-H",
            "2",
            "--bootstrap",
            "40",
            "--missing",
            "drop",
            "--quiet",
            "--out",
            str(tmp_path / "r3.json"),
        ],
    )
    assert lsa.exit_code == 0, lsa.output
    assert json.loads((tmp_path / "r3.json").read_text())["n_dropped"] == [
        len(t) - len(_complete(t, ["y", "age", "bmi"])) for t in tables.values()
    ]


def test_na_written_in_a_label_target_names_the_way_to_leave_it_out(tmp_path) -> None:
    """A CSV column of labels keeps 'NA' as written (fits.io.read_table); as a logistic
    target it makes a third label, and the error says how to treat it as missing."""
    rng = np.random.default_rng(0)
    for name, n in (("a", 120), ("b", 90)):
        lines = ["age,died"] + [
            f"{rng.integers(20, 90)},{rng.choice(['yes', 'no', 'NA'], p=[0.3, 0.6, 0.1])}"
            for _ in range(n)
        ]
        (tmp_path / f"{name}.csv").write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(
        app,
        [
            "analyze",
            str(tmp_path / "a.csv"),
            str(tmp_path / "b.csv"),
            "--target",
            "died",
            "--quiet",
            "--out",
            str(tmp_path / "r.json"),
        ],
    )
    assert res.exit_code == 1
    assert "'NA' is read as a label, as written" in res.output
    assert "--missing drop" in res.output
