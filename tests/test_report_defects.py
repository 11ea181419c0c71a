"""Defects of ``fits report`` a tester found: the direct fit's note named a client
'site3' that no file is called; a target coded otherwise in the synthetic table was
"nominal with 4 levels"; a free-text column the synthetic table lacks got a "did you
mean" of a column both tables hold; a schema's wrong kind was not named; the inference
check's advice named options fits report lacks, and its notes came with a skip; a tiny
``--direct-mu`` printed numpy's overflow warnings."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process


def _table(n: int, seed: int, labels: tuple[object, object] = (0, 1)) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    income = pd.Series(x1 - x2 + rng.normal(size=n) > 0).map({False: labels[0], True: labels[1]})
    return pd.DataFrame({"x1": x1, "x2": x2, "g": rng.choice(["a", "b", "c"], n), "income": income})


def _with_note(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """``frame`` with a free-text column (a different sentence in every row)."""
    rng = np.random.default_rng(seed)
    words = [f"remark {i} about case {rng.integers(10**6)}" for i in range(len(frame))]
    return frame.assign(note=words)


# ------------------------------------------------------------ 1. the direct fit's names


def test_the_direct_fits_note_names_the_clients_by_their_own_names():
    from fits.analysis.glm import direct_fit
    from fits.evaluation.utility import downstream_utility

    clients = {"north": _table(300, 1), "c_two": _table(2, 2)}
    kinds = {"x1": "continuous", "x2": "continuous", "g": "nominal", "income": "nominal"}
    result = downstream_utility(
        clients, _table(300, 3), _table(200, 4), "income", kinds, boosting=False,
        direct={"FedNewton, mu=1": direct_fit("fednewton", 1.0, 0)},
    )  # fmt: skip
    note = result.table.loc[result.table["mode"] == "direct", "note"].iloc[0]
    assert "'c_two' (2 rows) too small for FedNewton" in note, note
    assert "site" + "2" not in note and "'north'" not in note


def test_site_and_feature_names_of_a_fits_message_become_the_reports():
    from fits.evaluation.utility import _in_client_names

    text = _in_client_names(
        "site(s) 'site2' (2 rows) too small; 'site1' holds 'x1' and 'x7'; 'site3': odd",
        ["north", "c_two"],
        ["age", "g=b"],
    )
    # a number beyond the clients or the features is left as it was
    assert text == (
        "site(s) 'c_two' (2 rows) too small; 'north' holds 'g=b' and 'x7'; 'site3': odd"
    )
    # an unquoted word is no name the fit gave (a caller's own fit may say "site1")
    assert _in_client_names("site1 too small", ["north"], []) == "site1 too small"


# ------------------------------------------------------- 2. a target coded otherwise


@pytest.mark.parametrize(
    ("synthetic_labels", "shown", "alike"),
    [((0, 1), "[0, 1]", False), (("<=50k", ">50k"), "['<=50k', '>50k']", True)],
)
def test_a_target_coded_otherwise_in_the_synthetic_table_names_both_codings(
    tmp_path, synthetic_labels, shown, alike
):
    _table(120, 1, ("<=50K", ">50K")).to_csv(tmp_path / "real.csv", index=False)
    _table(120, 2, synthetic_labels).to_csv(tmp_path / "syn.csv", index=False)
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv",
        "--target", "income", "--out", tmp_path / "r.html", "--quiet",
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    err = res.stderr
    assert "Traceback" not in err and "4 levels" not in err
    assert "target 'income' is coded differently in the synthetic table" in err
    assert f"(--synthetic {str(tmp_path / 'syn.csv')!r})" in err
    assert f"(--real {str(tmp_path / 'real.csv')!r})" in err
    assert "the real table holds the labels ['<=50K', '>50K']" in err
    assert f"the synthetic table {shown}" in err
    assert ("letter case" in err) is alike
    assert "code the synthetic table's target as the real one's ('<=50K' and '>50K')" in err
    assert not (tmp_path / "r.html").exists()


def test_a_target_coded_alike_or_a_level_short_is_no_coding_problem():
    from fits.report.build import _check_target_codings

    real = _table(50, 1, ("no", "yes"))
    kinds = {"income": "nominal"}
    only_no = real.assign(income="no")
    _check_target_codings(["income"], {"income": None}, kinds, real, [("synthetic", only_no)])
    # a regression target may take values the real table has not
    other = real.assign(income=np.where(real["x1"] > 0, "maybe", "no"))
    _check_target_codings(["income"], {"income": "regression"}, kinds, real, [("synthetic", other)])
    with pytest.raises(ValueError, match=r"the client 'b' table \['maybe', 'no'\]"):
        _check_target_codings(["income"], {"income": None}, kinds, real, [("client 'b'", other)])


# ---------------------------------------------- 3. a column the synthetic table lacks


def test_a_free_text_column_the_synthetic_table_lacks_is_noted_not_refused(tmp_path):
    _with_note(_table(120, 1), 1).to_csv(tmp_path / "real.csv", index=False)
    _table(120, 2).to_csv(tmp_path / "syn.csv", index=False)
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv",
        "--target", "income", "--out", tmp_path / "r.html", "--json", tmp_path / "r.json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "the synthetic table lacks column(s) ['note'], which look like identifiers" in (
        res.stderr
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert "note" not in report["kinds"]


def test_a_missing_column_gets_no_guess_among_the_matched_ones_but_the_drop_hint(tmp_path):
    real = _table(60, 1).assign(note=lambda f: np.where(f["x1"] > 0, "hi", "lo"))
    real.to_csv(tmp_path / "real.csv", index=False)
    _table(60, 2).to_csv(tmp_path / "syn.csv", index=False)
    args = ("--out", tmp_path / "r.html", "--quiet", "--real", tmp_path / "real.csv")
    res = fits_in_process("report", "--synthetic", tmp_path / "syn.csv", *args)
    assert res.returncode == 1, res.stderr
    assert "lacks column(s) ['note'] of the real table" in res.stderr  # no "did you mean"
    assert "did you mean" not in res.stderr and "Here: --drop note" in res.stderr
    # a header no real column matches is still offered
    _table(60, 2).assign(notes="x").to_csv(tmp_path / "syn2.csv", index=False)
    res = fits_in_process("report", "--synthetic", tmp_path / "syn2.csv", *args)
    assert res.returncode == 1 and "(did you mean 'notes'?)" in res.stderr, res.stderr


# ------------------------------------------------------------- 4. a schema's kinds


def test_a_schema_that_declares_a_text_column_continuous_is_named_with_the_fix(tmp_path):
    from fits.core.schema import Schema

    real = _table(60, 1)
    real.to_csv(tmp_path / "real.csv", index=False)
    _table(60, 2).to_csv(tmp_path / "syn.csv", index=False)
    data = json.loads(Schema.detect({"real": real}).to_json())
    for column in data["columns"]:
        if column["name"] == "g":
            column["kind"] = "continuous"
    (tmp_path / "schema.json").write_text(json.dumps(data))
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv",
        "--schema", tmp_path / "schema.json", "--out", tmp_path / "r.html", "--quiet",
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    err = res.stderr
    assert "Traceback" not in err
    assert f"--schema {str(tmp_path / 'schema.json')!r} declares column 'g' of kind" in err
    assert '"continuous"' in err and "correct the column's kind in the schema" in err
    assert f"--real {str(tmp_path / 'real.csv')!r} holds text in it" in err


@pytest.mark.parametrize("table", ["real", "synthetic"])
def test_kinds_declaring_a_text_column_continuous_in_python_names_kinds_and_the_fix(table):
    """``evaluate(kinds={"g": "continuous"})`` on labels said only "column 'g' in the
    real table is not numeric (dtype str)", not that ``kinds=`` declared it so."""
    from fits.report import evaluate

    real, synthetic = _table(60, 1), _table(60, 2)
    if table == "synthetic":  # labels in the synthetic table only
        real = real.assign(g=np.arange(60.0))
    kinds = {"x1": "continuous", "x2": "continuous", "g": "continuous", "income": "nominal"}
    with pytest.raises(ValueError) as info:
        evaluate(real, synthetic, kinds, utility=False, privacy=False)
    message = str(info.value)
    assert f"kinds= declares column 'g' \"continuous\", but the {table} table" in message
    assert "values like [" in message and 'declare it "nominal"' in message


# ------------------------------------------------------------- 5. cosmetic


def _sites(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    return pd.DataFrame({"x1": x1, "x2": x2, "y": x1 - x2 + rng.normal(size=n)})


def test_a_skipped_inference_check_says_what_a_report_user_can_do():
    from fits.cli.report import inference_figures

    # 60 rows: the default rounds fell within the one-pass burn-in and the check was
    # skipped; the check now takes the rounds that outlast it
    sites = {"big": _sites(400, 0), "small": _sites(60, 1)}
    assert "skipped" not in inference_figures(sites, _sites(200, 2), "y", None, 0, notes=[])
    sites = {"big": _sites(400, 0), "small": _sites(10, 1)}  # too few rows for the regime
    done = inference_figures(sites, _sites(200, 2), "y", None, 0, notes=[])
    reason = done["skipped"]
    assert "the client files are too small for the check" in reason, reason
    assert "rounds=" not in reason and "regime='paper'" not in reason
    assert "-R" not in reason and "fits analyze" not in reason


def test_a_skipped_inference_check_leaves_out_the_notes_of_its_model():
    from fits.cli.report import inference_figures

    sites = {k: _with_note(_table(200, i, ("no", "yes")), i) for i, k in enumerate("ab")}
    notes: list[str] = []
    done = inference_figures(sites, sites["a"], "income", None, 0, notes=notes)
    assert "not numeric" in done["skipped"]
    assert notes == []
    # a check that runs still says what it left out
    numeric = {k: f.assign(income=f["x1"] * 2) for k, f in sites.items()}
    done = inference_figures(numeric, numeric["a"], "income", None, 0, notes=notes)
    assert "skipped" not in done
    assert any("['note'] are left out" in line for line in notes), notes


def test_a_direct_mu_whose_noise_is_no_number_is_a_usage_error(tmp_path):
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv",
        "--out", tmp_path / "r.html", "--direct-mu", "1e-320",
    )  # fmt: skip
    assert res.returncode == 2, res.stderr  # before the (missing) files are read
    assert "--direct-mu 1e-320 is below 2.23e-308" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_direct_fits_advice_names_the_reports_options_not_fits_analyzes(tmp_path):
    """FedNewton's "the privacy noise dominates" warning in ``fits report`` advised "a
    larger budget (mu, epsilon) ... a larger tau1, or method fedsgd": knobs only ``fits
    analyze`` has. It now names ``--direct-mu`` and reaches the row's note too."""
    sites = [_sites(n, 10 + k) for k, n in enumerate((120, 90, 60))]
    for k, frame in enumerate(sites):
        frame.to_csv(tmp_path / f"c{k}.csv", index=False)
    pd.concat(sites).to_csv(tmp_path / "real.csv", index=False)
    _sites(270, 20).to_csv(tmp_path / "syn.csv", index=False)
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv",
        "--clients", *(tmp_path / f"c{k}.csv" for k in range(3)), "--target", "y",
        "--direct-mu", "1e-30", "--out", tmp_path / "r.html", "--json", tmp_path / "r.json",
        "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "the privacy noise dominates" in res.stderr
    assert "a larger --direct-mu (now 1e-30) lowers the privacy noise" in res.stderr
    assert "tau1" not in res.stderr and "(mu, epsilon)" not in res.stderr
    assert "fits analyze" not in res.stderr and "--no-direct leaves" in res.stderr
    rows = json.loads((tmp_path / "r.json").read_text())["utility"]["y"]["rows"]
    (direct,) = [r for r in rows if r["mode"] == "direct" and "FedNewton" in r["setting"]]
    assert "the privacy noise dominates" in direct["note"] and "--direct-mu" in direct["note"]


def test_with_advice_replaces_the_fix_from_its_first_give():
    from fits.analysis.glm import _with_advice

    assert _with_advice("it diverged: give a smaller step (eta=)", "do X") == "it diverged; do X"
    assert _with_advice("noise; give more; give less", "do X") == "noise; do X"
    assert _with_advice("no fix here", "do X") == "no fix here; do X"


@pytest.mark.parametrize("target", ["income", "x1"])
def test_a_direct_fit_of_huge_parameters_is_scored_without_overflow_warnings(target):
    from fits.evaluation.utility import downstream_utility

    def huge(parts, task):  # what FedNewton's noise at mu = 1e-300 gives
        return np.full(parts[0][0].shape[1] + 1, 1e300)

    kinds = {"x1": "continuous", "x2": "continuous", "g": "nominal", "income": "nominal"}
    clients = {"a": _table(100, 1), "b": _table(100, 2)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "overflow encountered in exp" was one
        result = downstream_utility(
            clients, _table(100, 3), _table(100, 4), target, kinds, boosting=False,
            direct={"huge": huge},
        )  # fmt: skip
    row = result.table[result.table["mode"] == "direct"].iloc[0]
    if target == "income":  # finite, however large: scored
        assert row["param_error"] == pytest.approx(1e300 * np.sqrt(5), rel=1e-3)
        assert 0 <= row["accuracy"] <= 1 and row["note"] == ""
    else:  # the squared errors overflow: no score, a note instead of inf
        assert np.isnan(row["param_error"]) and np.isnan(row["mse"])
        assert "beyond what float64 arithmetic can score" in row["note"]


def test_the_real_file_given_as_the_synthetic_one_is_named(tmp_path):
    """The same file as --real and --synthetic ran with exit 0 and only "look closer"
    (100% copies); a warning now says that the report compares the real rows with
    themselves. A copy of the file (the same bytes) counts as the same."""
    real = tmp_path / "real.csv"
    _table(120, 0).to_csv(real, index=False)
    copy = tmp_path / "copy.csv"
    copy.write_bytes(real.read_bytes())
    for synthetic in (real, copy):
        res = fits_in_process(
            "report", "--real", real, "--synthetic", synthetic, "--out", tmp_path / "r.html", "-q"
        )
        assert res.returncode == 0, res.stderr
        assert f"warning: --synthetic {str(synthetic)!r} is the real table's file" in res.stderr
    _table(120, 1).to_csv(copy, index=False)
    res = fits_in_process(
        "report", "--real", real, "--synthetic", copy, "--out", tmp_path / "r.html", "-q"
    )
    assert "is the real table's file" not in res.stderr


def test_a_target_of_three_labels_is_refused_before_the_inference_check(tmp_path):
    """A nominal target of three levels was refused only after the inference check
    had run across the client files (its notes printed after the error)."""
    rng = np.random.default_rng(0)
    paths = {}
    for name, n in (("real", 200), ("syn", 200), ("c1", 100), ("c2", 100)):
        paths[name] = tmp_path / f"{name}.csv"
        frame = pd.DataFrame({"x": rng.normal(size=n), "cat": rng.choice(["a", "b", "c"], n)})
        frame.to_csv(paths[name], index=False)
    res = fits_in_process(
        "report", "--real", paths["real"], "--synthetic", paths["syn"], "--target", "cat",
        "--clients", paths["c1"], paths["c2"], "--out", tmp_path / "r.html",
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert "target 'cat' is nominal with 3 levels" in res.stderr
    assert "inference check for" not in res.stderr
