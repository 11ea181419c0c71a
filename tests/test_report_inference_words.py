"""fits report's inference check runs the analysis layer, whose advice names ``fits
analyze``'s options (``--features a,b``, ``--kind COL=id``, ``-R``); fits report has
none of them, so its notes and the check's skip reason said what another command does.
They now say what fits report does instead (a --schema that declares a column an
identifier leaves it out of the check), or no command's options."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process


def _table(n: int, k: int, rng: np.random.Generator) -> pd.DataFrame:
    x = rng.normal(size=n)
    return pd.DataFrame(
        {
            "x": x,
            "y": 2 * x + rng.normal(size=n),
            "name": [f"p{k}_{i}" for i in range(n)],
            "pid": np.arange(k * n, (k + 1) * n) * 7 + 3,
        }
    )


@pytest.mark.slow  # 19 s, CI budget
def test_the_inference_checks_notes_give_fits_reports_advice(tmp_path):
    rng = np.random.default_rng(0)
    pd.concat([_table(200, 0, rng), _table(200, 1, rng)]).to_csv(tmp_path / "real.csv", index=False)
    _table(200, 5, rng).to_csv(tmp_path / "syn.csv", index=False)
    _table(100, 2, rng).to_csv(tmp_path / "a.csv", index=False)
    _table(100, 3, rng).to_csv(tmp_path / "b.csv", index=False)
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv",
        "--target", "y", "--out", tmp_path / "r.html", "--quiet",
        "--clients", tmp_path / "a.csv", tmp_path / "b.csv",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    notes = [line for line in res.stderr.splitlines() if "inference check" in line]
    pid = next(line for line in notes if "'pid'" in line)
    assert "fits schema ... --kind pid=id --out schema.json, then --schema schema.json" in pid
    assert any("['name'] are left out of the model" in line for line in notes), notes
    assert "fits analyze" not in res.stderr and "--features" not in res.stderr


def test_the_skip_reason_gives_fits_reports_advice():
    from fits.cli.report import in_report_words, inference_figures

    rng = np.random.default_rng(1)
    sites = {k: _table(100, j, rng)[["x", "y"]].assign(c=1.0) for j, k in enumerate("ab")}
    notes: list[str] = []
    done = inference_figures(sites, sites["a"], "y", None, 0, notes=notes)
    # a column of one value at every site (kind "constant") stopped the check; it is
    # left out of the model, which a note says (with no fits analyze advice)
    assert "skipped" not in done
    said = "".join(notes)
    assert "'c' takes one value at every site" in said and "left out of the model" in said
    assert "fits analyze" not in said and "--features" not in said
    # a column no model can use, named in the analysis's error: fits report's advice
    text = in_report_words(
        "column(s) 'c' takes one value at every site: a model can neither be fitted to "
        "them nor learn from them; choose another target, or name the features without "
        "it (features=[...]; fits analyze --features a,b)"
    )
    assert "fits analyze" not in text and "--schema that declares it an identifier" in text


def test_other_advice_keeps_its_python_words_alone():
    from fits.cli.report import in_report_words

    text = in_report_words(
        "too few rounds: ask for at least 30 rounds (rounds=30; fits analyze -R 30); or "
        "use regime='paper' (fits analyze --regime paper)"
    )
    assert text == "too few rounds: ask for at least 30 rounds (rounds=30); or use regime='paper'"


def test_missing_values_get_fits_reports_fix_not_missing_drop():
    """fits report drops no rows: its skipped-inference note advised missing='drop', an
    option of the analysis in Python that fits report does not have."""
    from fits.cli.report import in_report_words

    text = in_report_words(
        "site1: target 'y' has 3 missing value(s); leave those rows out with "
        "missing='drop' (fits analyze --missing drop), or drop them from the site's table"
    )
    assert text == "site1: target 'y' has 3 missing value(s); drop them from the site's table"
    text = in_report_words(
        "the synthetic table has missing values (column: count {'x': 2}) where the sites' "
        "design has none, so OLS on it cannot use those rows: leave them out of the "
        "synthetic table before the check (synthetic.dropna(subset=[...])), or pass "
        "missing='drop', which leaves such rows out at the sites and in the synthetic "
        "table alike"
    )
    assert "missing='drop'" not in text and text.endswith("(synthetic.dropna(subset=[...]))")
