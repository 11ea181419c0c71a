"""A stranger's second round on :mod:`fits.analysis` and ``fits analyze``: sites smaller
than the model, a synthetic table without a level, seeds, new rows of text dates, tiny
numbers in the summary, and the messages' names.  Each test failed before its fix."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.analysis import fedlsa, fit_glm, inference_check
from fits.analysis.design import DesignError
from fits.analysis.glm import GLMWarning, null_projector
from fits.analysis.lsa import FedLSAError
from fits.core.schema import SchemaError

from conftest import fits_in_process as run
from conftest import write_sites

FEATURES = ["x1", "x2", "x3", "x1c"]


def _small(copy: bool = True, n: int = 4, m: int = 4, seed: int = 40) -> list[pd.DataFrame]:
    """``m`` sites of ``n`` rows (fewer than the 5 coefficients); ``x1c`` a copy of
    ``x1`` (or a feature of its own)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(m):
        x1, x2, x3 = rng.normal(size=(3, n))
        x1c = x1 if copy else rng.normal(size=n)
        y = x1 + x2 + rng.normal(size=n)
        out.append(pd.DataFrame({"x1": x1, "x2": x2, "x3": x3, "x1c": x1c, "y": y}))
    return out


# ------------------------------------------------------------ 1. sites below p rows
@pytest.mark.parametrize("method", ["newton", "fedsgd", "fedhybrid", "fedavg"])
def test_a_copied_column_at_sites_below_p_rows_is_an_error_without_privacy(method):
    # was: x1 0.221, x1c 0.221 (newton; an arbitrary split), exit 0, no word of x1c
    with pytest.raises(DesignError, match=r"collinear across the federation") as err:
        fit_glm(_small(), "y", FEATURES, family="linear", method=method)
    assert "['x1', 'x1c'] are linearly dependent" in str(err.value)
    assert "e.g. ['x1c']" in str(err.value) and "not counted" not in str(err.value)


def test_sites_below_p_rows_that_identify_the_model_still_fit():
    """The pooled X'X is the sum of the sites': 16 rows in general position identify
    5 coefficients though no site alone does; the fit is the pooled least squares."""
    tables = _small(copy=False)
    res = fit_glm(tables, "y", FEATURES, family="linear")
    pooled = pd.concat(tables)
    x = np.column_stack([np.ones(len(pooled)), pooled[FEATURES].to_numpy()])
    beta = np.linalg.lstsq(x, pooled["y"].to_numpy(), rcond=None)[0]
    np.testing.assert_allclose(res.original_params.to_numpy(), beta, rtol=1e-8, atol=1e-10)


def test_small_sites_that_break_a_big_sites_relation_are_counted_without_privacy():
    # was: the big sites alone were checked, an error though the pooled design has rank p
    rng = np.random.default_rng(1)
    big = []
    for n in (50, 60):
        x1, x2, x3 = rng.normal(size=(3, n))
        big.append(pd.DataFrame({"x1": x1, "x2": x2, "x3": x3, "x1c": x1, "y": x1 + x2}))
    big = [t.assign(y=t.y + rng.normal(size=len(t))) for t in big]
    res = fit_glm(big + _small(copy=False), "y", FEATURES, family="linear")
    assert np.isfinite(res.bse).all()
    # a private fit cannot count them (their null space would disclose their rows' span)
    with pytest.raises(DesignError, match=r"were not counted: in a private fit"):
        fit_glm(big + _small(copy=False), "y", FEATURES, family="linear", method="fedsgd", mu=1)


@pytest.mark.filterwarnings("ignore:the privacy noise dominates")
@pytest.mark.parametrize("method", ["fedsgd", "fedhybrid", "fedavg"])
def test_a_private_fit_at_sites_below_p_rows_says_the_rank_went_unchecked(method):
    # was: x1 -5.1, x1c 1.3 (fedsgd at mu = 1) with no warning of the collinearity
    with pytest.warns(GLMWarning, match="collinearity was not checked") as rec:
        res = fit_glm(_small(), "y", FEATURES, family="linear", method=method, mu=1.0)
    [text] = [str(w.message) for w in rec if "not checked" in str(w.message)]
    assert "fewer rows than the p = 5 design columns" in text and text in res.warnings
    # before any noisy release: as an error, no budget is spent
    with warnings.catch_warnings():
        warnings.simplefilter("error", GLMWarning)
        with pytest.raises(GLMWarning, match="not checked"):
            fit_glm(_small(), "y", FEATURES, family="linear", method=method, mu=1.0)


def test_a_small_site_sends_its_null_space_only_without_privacy():
    x = np.column_stack([np.ones(3), np.arange(3.0), np.arange(3.0) ** 2, np.ones(3)])
    assert not null_projector(x).any()  # private: zeros, its rows' span stays
    q = null_projector(x, small=True)
    np.testing.assert_allclose(x @ q, 0, atol=1e-12)
    assert round(np.trace(q)) == 1


def test_more_coefficients_than_rows_in_the_whole_federation_is_an_error():
    # was (fits analyze --kind x1=nominal on floats): 351 coefficients printed for 350
    # rows, exit 0, with a false "the target is an exact linear function" warning
    rng = np.random.default_rng(0)
    tables = {
        k: pd.DataFrame({"x1": rng.normal(size=175), "x2": rng.normal(size=175)}).assign(
            y=lambda d: d.x1 + rng.normal(size=175)
        )
        for k in "ab"
    }
    for method, mu in (("newton", None), ("fedsgd", 1.0)):
        with pytest.raises(DesignError, match="more coefficients than the whole federation") as e:
            fit_glm(tables, "y", family="linear", kinds={"x1": "nominal"}, method=method, mu=mu)
        text = str(e.value)
        assert "p = 351 design columns" in text and "350 row(s) in all ('a' 175, 'b' 175)" in text
        assert "349 one-hot column(s) of nominal 'x1'" in text
        assert "--kind x1=continuous" in text


def test_fits_analyze_exits_1_for_a_copied_column_at_small_sites(tmp_path):
    files = write_sites({f"s{k}": t for k, t in enumerate(_small())}, tmp_path)
    res = run("analyze", *files, "--target", "y", "--family", "linear",
              "--out", tmp_path / "r.json", "-q")  # fmt: skip
    assert res.returncode == 1, res.stdout
    assert "['x1', 'x1c'] are linearly dependent" in res.stderr
    assert not (tmp_path / "r.json").exists()


# ------------------------------------------------------------ 2. the inference check
def test_the_inference_check_names_a_level_the_synthetic_table_lacks():
    # was: FedLSAError "the design is rank deficient (collinear features)"
    rng = np.random.default_rng(1)
    tabs = {
        k: pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice(list("pqr"), n)}).assign(
            y=lambda d: d.x + rng.normal(size=len(d))
        )
        for k, n in (("a", 1500), ("b", 1000))
    }
    syn = pd.concat(tabs.values())
    with pytest.raises(FedLSAError, match=r"the synthetic table has no rows of g = 'r'") as e:
        inference_check(tabs, syn[syn.g != "r"], "y", seed=0)
    assert "synthesize more rows" in str(e.value) and "features=" in str(e.value)
    with pytest.raises(FedLSAError, match=r"numeric feature\(s\) \['x'\] take one value"):
        inference_check(tabs, syn.assign(x=1.0), "y", seed=0)
    assert inference_check(tabs, syn, "y", seed=0).mean_overlap > 0.9


def test_the_inference_check_names_columns_dependent_in_the_synthetic_table_alone():
    rng = np.random.default_rng(3)
    tabs = {
        k: pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n)}).assign(
            y=lambda d: d.x1 + rng.normal(size=len(d))
        )
        for k, n in (("a", 800), ("b", 600))
    }
    syn = pd.concat(tabs.values())
    with pytest.raises(FedLSAError, match=r"columns \['x1', 'x2'\] and the intercept are"):
        inference_check(tabs, syn.assign(x2=2 * syn.x1 + 1), "y", seed=0)


# ------------------------------------------------------------ 3. seeds
def test_fedlsa_is_reproducible_by_default_as_fit_glm():
    # was: seed=None by default, two identical calls gave different coef_ and bootstrap
    rng = np.random.default_rng(2)
    tabs = [pd.DataFrame({"x": rng.normal(size=n)}).assign(y=lambda d: d.x) for n in (300, 200)]
    tabs = [t.assign(y=t.y + rng.normal(size=len(t))) for t in tabs]
    one, two = (
        fedlsa(tabs, "y", rounds=20, local_steps=5),
        fedlsa(tabs, "y", rounds=20, local_steps=5),
    )
    np.testing.assert_array_equal(one.coef_, two.coef_)
    np.testing.assert_array_equal(one.bootstrap, two.bootstrap)
    seeded = fedlsa(tabs, "y", rounds=20, local_steps=5, seed=0)
    np.testing.assert_array_equal(one.coef_, seeded.coef_)
    fresh = [fedlsa(tabs, "y", rounds=20, local_steps=5, seed=None) for _ in range(2)]
    assert not np.array_equal(fresh[0].bootstrap, fresh[1].bootstrap)  # None: fresh entropy


# ------------------------------------------------------------ 4. predict
def test_predict_reads_text_dates_as_the_sites_read_them():
    # was: AttributeError "Can only use .dt accessor with datetimelike values"
    rng = np.random.default_rng(0)
    dated = [
        pd.DataFrame(
            {
                "d": pd.Timestamp("2020-01-01")
                + pd.to_timedelta(rng.integers(0, 900, n), unit="D"),
                "x": rng.normal(size=n),
                "y": rng.normal(size=n),
            }
        )
        for n in (200, 150)
    ]
    text = [t.assign(d=t.d.dt.strftime("%Y-%m-%d")) for t in dated]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the DataNote: text read as dates
        res = fit_glm(text, "y", ["x", "d"], family="linear")
    np.testing.assert_allclose(res.predict(text[0].head(5)), res.predict(dated[0].head(5)))
    np.testing.assert_allclose(
        res.predict(text[0].head(5)),
        fit_glm(dated, "y", ["x", "d"], family="linear").predict(dated[0].head(5)),
        rtol=1e-9,
    )
    with pytest.raises(DesignError, match=r"predict: column 'd' holds values that do not read"):
        res.predict(text[0].head(3).assign(d=["soon", "later", "never"]))


def test_predict_reads_day_first_text_dates_in_the_sites_format():
    """'01/02/2021' is 1 February where the sites read day first (they saw '13/...')."""
    rng = np.random.default_rng(0)
    start = pd.Timestamp("2020-01-01")
    tables = []
    for n in (200, 150):
        d = start + pd.to_timedelta(rng.integers(0, 900, n), unit="D")
        y = (d - start).days / 100 + rng.normal(size=n)
        tables.append(pd.DataFrame({"d": d.strftime("%d/%m/%Y"), "y": y}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_glm(tables, "y", ["d"], family="linear")
    assert res.date_formats == {"d": "%d/%m/%Y"}
    text = pd.DataFrame({"d": ["01/02/2021", "02/01/2021"]})
    dates = pd.DataFrame({"d": pd.to_datetime(["2021-02-01", "2021-01-02"])})
    np.testing.assert_allclose(res.predict(text), res.predict(dates))
    with pytest.raises(DesignError, match=r"in the sites' format '%d/%m/%Y'"):
        res.predict(pd.DataFrame({"d": ["2021-02-01"]}))


# ------------------------------------------------------------ 5. the summary's numbers
def test_the_summary_shows_tiny_coefficients_in_significant_digits():
    # was: a target in units of 1e-12 printed every coef, std err and interval as 0.000000
    rng = np.random.default_rng(0)
    tabs = [pd.DataFrame({"x": rng.normal(size=n)}) for n in (200, 150)]
    tabs = [t.assign(y=(t.x + rng.normal(size=len(t))) * 1e-12) for t in tabs]
    res = fit_glm(tabs, "y", family="linear")
    summary = res.summary()
    assert "0.000000" not in summary
    row = next(line for line in summary.splitlines() if line.startswith("  x "))
    coef, se = (float(v) for v in row.split()[1:3])
    assert coef == pytest.approx(res.params["x"], rel=1e-5)
    assert se == pytest.approx(res.bse["x"], rel=1e-5)
    # a large coefficient with a small std err keeps its interval's two ends apart
    big = [t.assign(y=3e5 * t.x + rng.normal(size=len(t))) for t in tabs]
    lines = fit_glm(big, "y", family="linear").summary().splitlines()
    lo, hi = next(line for line in lines if line.startswith("  x ")).split()[-2:]
    assert lo != hi


# ------------------------------------------------------------ 6. messages
def test_a_constant_target_of_a_linear_fit_does_not_speak_of_classes():
    # was: "... over the sites (a logistic model: both classes)" for a linear fit
    rng = np.random.default_rng(0)
    tabs = [pd.DataFrame({"x": rng.normal(size=n), "y": 3.0}) for n in (20, 15)]
    for call in (
        lambda: fit_glm(tabs, "y", ["x"], family="linear"),
        lambda: fit_glm(tabs, "y", ["x"], family="poisson"),
        lambda: fedlsa(tabs, "y", ["x"]),
    ):
        with pytest.raises(SchemaError, match="two distinct values") as e:
            call()
        assert "logistic" not in str(e.value) and "classes" not in str(e.value)
    with pytest.raises(SchemaError, match="two distinct values"):
        fit_glm(tabs, "y", ["x"], family="logistic")


def test_sites_of_one_file_name_are_named_by_their_folders(tmp_path):
    # was: d1/s.csv and d2/s.csv were 's' and 's (2)': an error of 's' named no file
    from fits.cli.options import site_names

    assert site_names([Path("d1/s.csv"), Path("d2/s.csv"), Path("t.csv")]) == ["d1/s", "d2/s", "t"]
    assert site_names([Path("a/x/s.csv"), Path("b/x/s.csv")]) == ["a/x/s", "b/x/s"]
    assert site_names([Path("s.csv"), Path("s.parquet")]) == ["s.csv", "s.parquet"]
    rng = np.random.default_rng(0)
    files = []
    for k in ("d1", "d2"):
        (tmp_path / k).mkdir()
        x = rng.normal(size=30)
        t = pd.DataFrame({"x": x, "y": x + rng.normal(size=30)})
        t.loc[3, "x"] = np.nan
        t.to_csv(tmp_path / k / "s.csv", index=False)
        files.append(tmp_path / k / "s.csv")
    res = run("analyze", *files, "--target", "y", "--out", tmp_path / "r.json", "-q")
    assert res.returncode == 1 and "d1/s: column 'x' has 1 missing value" in res.stderr


def test_an_out_folder_is_told_as_a_folder(tmp_path):
    # was: "--out: of: the result is written as .json" for an existing folder
    files = write_sites({f"s{k}": t for k, t in enumerate(_small(copy=False, n=30, m=2))}, tmp_path)
    (tmp_path / "results").mkdir()
    res = run("analyze", *files, "--target", "y", "--out", tmp_path / "results", "-q")
    assert res.returncode == 2 and "is a folder; give a file name inside it" in _flat(res.stderr)
    res = run("analyze", *files, "--target", "y", "--out", tmp_path / "r.txt", "-q")
    assert res.returncode == 2 and "give a file name ending in .json" in _flat(res.stderr)


def _flat(text: str) -> str:
    """A usage error's text without the box and the line breaks it is drawn with."""
    return " ".join(text.replace("│", " ").split())
