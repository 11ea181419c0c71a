"""The near-linear comparison of the evaluation layer (`fits.evaluation.near_linear_kept`),
the report's "Near-linear columns" section and `fits benchmark`'s figures: for each
``"linear"`` rule, the real and synthetic residual sd about the rule's line, their
ratio, the pair's correlations and the share of synthetic rows within the residual's
bounds (docs/method.md, "Near-linear columns")."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.benchmark import BenchmarkResult, _rules_kept, _Split
from fits.datasets import Dataset
from fits.evaluation import near_linear_kept
from fits.evaluation.rules import NEAR_LINEAR_COLUMNS
from fits.report.render import fmt_number, fmt_percent


def sites(seed: int = 0, n: int = 200, k: int = 3) -> list[pd.DataFrame]:
    """k sites: a discrete g, x ~ N(50, 10) and y = 2 x + N(0, 1)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        x = rng.normal(50, 10, n)
        out.append(
            pd.DataFrame(
                {"g": rng.choice(["a", "b", "c"], n), "x": x, "y": 2 * x + rng.normal(0, 1, n)}
            )
        )
    return out


@pytest.fixture(scope="module")
def frames() -> list[pd.DataFrame]:
    return sites()


@pytest.fixture(scope="module")
def real(frames) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def fitted(frames) -> FITSSynthesizer:
    return FITSSynthesizer(seed=0).fit(frames)  # near_linear: the default


@pytest.fixture(scope="module")
def synthetic(fitted) -> pd.DataFrame:
    return fitted.sample(600)


def by_numpy(real: pd.DataFrame, synthetic: pd.DataFrame, rule) -> dict[str, float]:
    """The figures computed independently: residuals with the schema's line, np.std,
    np.corrcoef, the bounds compared directly; rows with x or y missing dropped."""
    r, s = real.dropna(subset=["x", "y"]), synthetic.dropna(subset=["x", "y"])
    res_r = r["y"].to_numpy() - (rule.slope * r["x"].to_numpy() + rule.intercept)
    res_s = s["y"].to_numpy() - (rule.slope * s["x"].to_numpy() + rule.intercept)
    return {
        "real_sd": float(np.std(res_r, ddof=1)),
        "synthetic_sd": float(np.std(res_s, ddof=1)),
        "sd_ratio": float(np.std(res_s, ddof=1) / np.std(res_r, ddof=1)),
        "real_corr": float(np.corrcoef(r["x"], r["y"])[0, 1]),
        "synthetic_corr": float(np.corrcoef(s["x"], s["y"])[0, 1]),
        "within": float(np.mean((res_s >= rule.lower) & (res_s <= rule.upper))),
        "real_rows": len(r),
        "synthetic_rows": len(s),
        "real_missing": len(real) - len(r),
        "synthetic_missing": len(synthetic) - len(s),
    }


def check(row: pd.Series, want: dict[str, float]) -> None:
    for key, value in want.items():
        assert row[key] == pytest.approx(value, rel=1e-10, abs=1e-12), key


# ------------------------------------------------------------------ the function
def test_the_fit_finds_y_on_x(fitted):
    rule = fitted.schema_.near_linear["y"]
    assert rule.of == ["x"] and rule.slope == pytest.approx(2.0, abs=0.02)


def test_figures_match_an_independent_numpy_computation(fitted, real, synthetic):
    rule = fitted.schema_.near_linear["y"]
    table = near_linear_kept(real, synthetic, fitted.schema_)
    assert list(table.columns) == NEAR_LINEAR_COLUMNS and len(table) == 1
    row = table.iloc[0]
    assert (row["column"], row["of"]) == ("y", "x")
    assert (row["slope"], row["intercept"]) == (rule.slope, rule.intercept)
    assert (row["lower"], row["upper"]) == (rule.lower, rule.upper)
    assert row["rule"].startswith("y = 1.99") and row["rule"].endswith("* x + 0.359252 + residual")
    check(row, by_numpy(real, synthetic, rule))
    # fits kept the spread (without the rule the chain's band is far wider)
    assert 0.8 < row["sd_ratio"] < 1.25
    assert row["synthetic_corr"] == pytest.approx(row["real_corr"], abs=0.002)


def test_share_within_bounds(fitted, real, synthetic):
    """1.0 for the real rows themselves (the bounds are their extremes) and for fits'
    output (the residual is drawn within its bounds and y here is not rounded; before
    the draw kept the residual in its bounds, one row of 600 fell outside); a
    hand-perturbed table falls outside in the rows moved."""
    rule = fitted.schema_.near_linear["y"]
    assert near_linear_kept(real, real, [rule]).iloc[0]["within"] == 1.0
    fits_share = near_linear_kept(real, synthetic, [rule]).iloc[0]["within"]
    assert fits_share == pytest.approx(by_numpy(real, synthetic, rule)["within"], abs=0)
    assert fits_share == 1.0
    moved = synthetic.copy()
    moved.loc[:59, "y"] += 10.0  # 60 rows 10 residual sds off the line
    row = near_linear_kept(real, moved, [rule]).iloc[0]
    assert row["within"] < fits_share and row["within"] <= 1 - 60 / 600 + 1e-12
    check(row, by_numpy(real, moved, rule))
    assert row["sd_ratio"] > 2


def test_missing_rows_are_left_out_and_counted(fitted, real, synthetic):
    rule = fitted.schema_.near_linear["y"]
    syn = synthetic.copy()
    syn.loc[[0, 1, 2], "x"] = np.nan
    syn.loc[[2, 3, 4, 5], "y"] = np.nan  # row 2: both
    syn["y"] = syn["y"].astype("Float64")  # a nullable column reads as its numbers
    rea = real.copy()
    rea.loc[[7], "y"] = np.nan
    row = near_linear_kept(rea, syn, [rule]).iloc[0]
    assert (row["synthetic_missing"], row["synthetic_rows"]) == (6, len(syn) - 6)
    assert (row["real_missing"], row["real_rows"]) == (1, len(rea) - 1)
    check(row, by_numpy(rea, syn.astype({"y": float}), rule))


def test_rule_forms_other_kinds_and_no_rule(fitted, real, synthetic):
    rule = fitted.schema_.near_linear["y"]
    as_schema = near_linear_kept(real, synthetic, fitted.schema_)
    as_dicts = near_linear_kept(real, synthetic, [rule.to_dict(), {"column": "g", "of": ["x"]}])
    pd.testing.assert_frame_equal(as_schema, as_dicts)
    none = near_linear_kept(real, synthetic, [])
    assert none.empty and list(none.columns) == NEAR_LINEAR_COLUMNS
    with pytest.raises(KeyError, match="synthetic table has no column"):
        near_linear_kept(real, synthetic.drop(columns="x"), [rule])


def test_too_few_rows_give_nan_not_an_error(fitted, real, synthetic):
    rule = fitted.schema_.near_linear["y"]
    row = near_linear_kept(real, synthetic.iloc[:1], [rule]).iloc[0]
    assert row["synthetic_rows"] == 1 and np.isnan(row["synthetic_sd"])
    assert np.isnan(row["sd_ratio"]) and np.isnan(row["synthetic_corr"])
    empty = synthetic.iloc[:3].assign(y=np.nan)
    row = near_linear_kept(real, empty, [rule]).iloc[0]
    assert (row["synthetic_rows"], row["synthetic_missing"]) == (0, 3) and np.isnan(row["within"])


# ------------------------------------------------------------------ the report
REPORT = {"utility": False, "privacy": False, "n_jobs": 1}


def _page_numbers_are_in_the_json(data: dict, page: str) -> None:
    """Every number of the section's cells is one the JSON holds (test_report's rule)."""
    shown = {"–"}
    for rec in data["near_linear"]:
        for value in rec.values():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                shown.update({fmt_number(value), fmt_percent(value)})
    section = page[
        page.index('id="near-linear"') : page.index("</table>", page.index('id="near-linear"'))
    ]
    cells = re.findall(r'<td class="num[^"]*"[^>]*>(.*?)</td>', section)
    assert len(cells) == 10
    assert set(cells) <= shown


def test_report_has_the_section_with_the_functions_figures(fitted, frames, real, synthetic):
    from fits import evaluate

    rep = evaluate(real, synthetic, clients=frames, settings=fitted, **REPORT)
    want = near_linear_kept(real, synthetic, fitted.schema_)
    assert len(rep.data["near_linear"]) == 1
    got = rep.data["near_linear"][0]
    assert list(got) == NEAR_LINEAR_COLUMNS
    assert got == pytest.approx(want.iloc[0].to_dict())
    page = rep.to_html()
    assert '<h2 id="near-linear">Near-linear columns</h2>' in page
    assert 'href="#near-linear"' in page  # the navigation bar
    assert "the spread of the residual about the same line" in page
    _page_numbers_are_in_the_json(json.loads(rep.to_json()), page)
    assert any(
        line.startswith("Near-linear y on x: residual sd") for line in rep.summary().splitlines()
    )
    # found from the clients when the synthesizer used none, as the exact rules are
    found = evaluate(real, synthetic, clients=frames, **REPORT)
    assert found.data["near_linear"][0]["rule"] == got["rule"]


def test_report_without_a_near_linear_pair_has_no_section(frames, real, synthetic):
    from fits import evaluate

    none = evaluate(real, synthetic, clients=frames, rules=[], **REPORT)
    assert none.data["near_linear"] == [] and 'id="near-linear"' not in none.to_html()
    # y no longer near-linear in x: nothing is found, nothing is shown
    rng = np.random.default_rng(5)
    loose = [f.assign(y=rng.normal(100, 20, len(f))) for f in frames]
    off = FITSSynthesizer(seed=0).fit(loose)
    assert not off.schema_.near_linear
    table = off.sample(300)
    rep = evaluate(
        pd.concat(loose, ignore_index=True), table, clients=loose, settings=off, **REPORT
    )
    assert rep.data["near_linear"] == [] and 'id="near-linear"' not in rep.to_html()
    assert "Near-linear" not in rep.summary()


def test_report_of_a_fit_with_the_rule_off_still_compares_the_pair(frames, real):
    """A fit with near_linear=False used no linear rule: the section shows the pair the
    real rows have (as "Rules kept" shows the exact rules of a fit with rules=False),
    so the chain's spread about the line can be seen; the line is the real rows'."""
    from fits import evaluate

    off = FITSSynthesizer(seed=0, near_linear=False).fit(frames)
    assert not off.schema_.near_linear
    table = off.sample(600)
    rep = evaluate(real, table, clients=frames, settings=off, **REPORT)
    assert [r["column"] for r in rep.data["near_linear"]] == ["y"]
    on = FITSSynthesizer(seed=0).fit(frames).schema_.near_linear["y"]
    check(pd.Series(rep.data["near_linear"][0]), by_numpy(real, table, on))


def test_rules_kept_says_near_linear_columns_have_their_own_section(frames, real, synthetic):
    from fits import evaluate

    with_copy = [f.assign(g2=f["g"].map({"a": "A", "b": "B", "c": "C"})) for f in frames]
    syn = synthetic.assign(g2=synthetic["g"].map({"a": "A", "b": "B", "c": "C"}))
    rep = evaluate(pd.concat(with_copy, ignore_index=True), syn, clients=with_copy, **REPORT)
    assert [r["column"] for r in rep.data["rules"]] == ["g2"]
    assert [r["column"] for r in rep.data["near_linear"]] == ["y"]
    rules_part = rep.to_html().split('<h2 id="rules">', 1)[1].split("<h2", 1)[0]
    assert "compared in their own section" in rules_part


def test_report_missing_values_are_left_out_not_filled(fitted, frames, real, synthetic):
    """The report fills a numeric column's missing values for its other measures; the
    near-linear figures see them missing, left out and counted."""
    from fits import evaluate

    syn = synthetic.copy()
    syn.loc[[0, 1, 2, 3], "y"] = np.nan
    rep = evaluate(real, syn, clients=frames, settings=fitted, **REPORT)
    got = rep.data["near_linear"][0]
    assert (got["synthetic_missing"], got["synthetic_rows"]) == (4, len(syn) - 4)
    assert got["synthetic_sd"] == pytest.approx(
        by_numpy(real, syn, fitted.schema_.near_linear["y"])["synthetic_sd"]
    )


# ------------------------------------------------------------------ fits benchmark
def test_benchmark_rules_kept_gives_the_near_linear_figures(frames, synthetic):
    data = Dataset(
        "toy",
        pd.concat(frames, ignore_index=True),
        {"g": "nominal", "x": "continuous", "y": "continuous"},
        "y",
        "regression",
    )
    split = _Split("toy", data, frames, frames[0], 0, None)
    kept, near = _rules_kept(split, synthetic)
    assert kept == []
    assert [r["column"] for r in near] == ["y"]
    train = pd.concat(frames, ignore_index=True)
    rule = FITSSynthesizer(seed=0).fit(frames).schema_.near_linear["y"]
    check(pd.Series(near[0]), by_numpy(train, synthetic, rule))
    loose = [f.assign(y=np.random.default_rng(1).normal(0, 1, len(f))) for f in frames]
    split = _Split("toy", data, loose, loose[0], 0, None)
    assert _rules_kept(split, synthetic) == ([], [])


def test_benchmark_markdown_and_json_list_the_near_linear_figures():
    rec = {
        "rule": "atemp = 0.87 * temp + 0.02 + residual", "column": "atemp", "of": "temp",
        "slope": 0.87, "intercept": 0.02, "lower": -0.33, "upper": 0.19,
        "real_rows": 584, "real_missing": 0, "synthetic_rows": 584, "synthetic_missing": 0,
        "real_sd": 0.02, "synthetic_corr": 0.99, "real_corr": 0.99, "within": 1.0,
    }  # fmt: skip
    runs = [
        {
            "repeat": r,
            "generators": {
                "knn": {
                    "rules": [],
                    # each repeat's split has its own line: one row per pair all the same
                    "near_linear": [
                        {
                            **rec,
                            "rule": f"atemp = {0.87 + r / 100:g} * temp + 0.02 + residual",
                            "synthetic_sd": sd,
                            "sd_ratio": sd / 0.02,
                        }
                    ],
                },
                "gaussian": {"rules": []},
            },
        }
        for r, sd in enumerate((0.02, 0.03))
    ]
    result = BenchmarkResult(
        "toy", {"generators": ["gaussian", "knn"], "synthesizer_params": {}}, runs
    )
    lines = result._md_near_linear()
    assert lines[0] == "## Near-linear columns"
    assert any("Drawing such a column as its residual: on." in line for line in lines)
    header = next(line for line in lines if line.startswith("| generator"))
    row = next(line for line in lines if line.startswith("| FITS-K"))
    assert header.count("|") == row.count("|") == 9
    assert row == (
        "| FITS-K | atemp on temp | 0.02 (0) | 0.025 (0.00707) "
        "| 1.25 (0.354) | 0.99 (0) | 0.99 (0) | 1 (0) |"
    )
    assert not any(line.startswith("| FITS-G") for line in lines)  # no pair: no row
    back = BenchmarkResult.from_json(result.to_json())
    assert back.runs[1]["generators"]["knn"]["near_linear"][0]["synthetic_sd"] == 0.03
    assert (
        BenchmarkResult(
            "toy", result.config, [{"repeat": 0, "generators": {"knn": {"rules": []}}}]
        )._md_near_linear()
        == []
    )
    off = BenchmarkResult(
        "toy", {"generators": ["knn"], "synthesizer_params": {"near_linear": "False"}}, runs
    )
    assert any(
        "Drawing such a column as its residual: off." in line for line in off._md_near_linear()
    )
    exact = {
        "rule": "g2 = f(g)",
        "column": "g2",
        "kind": "function",
        "rows": 9,
        "kept": 1.0,
        "uncovered": 0.0,
    }
    runs[0]["generators"]["knn"]["rules"] = [exact]
    assert any("compared in their own section" in line for line in result._md_rules())
    plain = BenchmarkResult(
        "toy", result.config, [{"repeat": 0, "generators": {"knn": {"rules": [exact]}}}]
    )
    assert not any("own section" in line for line in plain._md_rules())
