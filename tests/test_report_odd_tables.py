"""The fidelity report on tables fits was not designed for: missing values, datetimes,
and the other outputs of ``fits synthesize`` that the evaluators' numeric encoding
does not take as they are."""

from __future__ import annotations

import json
import warnings
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fits import Schema, evaluate

from conftest import fits_in_process


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(50, 10, n)
    frame = pd.DataFrame(
        {
            "count": pd.array(rng.integers(0, 100, n), dtype="Int64"),
            "flag": pd.array(rng.random(n) < 0.4, dtype="boolean"),
            "colour": pd.array(rng.choice(["red", "green", "blue"], n), dtype="string"),
            "when": pd.date_range("2024-03-01", periods=n, freq="7h", tz="Europe/Berlin"),
            "day": pd.to_datetime("2023-01-01") + pd.to_timedelta(rng.integers(0, 400, n), "D"),
            "x": x,
            "y": 2 * x + rng.normal(0, 3, n),
        }
    )
    frame.loc[frame.index[:: 7 if seed else 4], "count"] = pd.NA
    frame.loc[frame.index[:: 5 if seed else 3], "flag"] = pd.NA
    frame.loc[frame.index[:: 9 if seed else 6], "colour"] = pd.NA
    return frame


def _tv(a: pd.Series, b: pd.Series) -> float:
    p, q = a.value_counts(normalize=True), b.value_counts(normalize=True)
    return 0.5 * float(p.sub(q, fill_value=0).abs().sum())


def test_report_compares_missing_values_and_datetimes():
    """Missing values (fits models them, so its output holds them) and datetimes were
    refused ("column 'count' has missing values in the real table; drop or impute them",
    "column 'when' ... is not numeric"): the report of a table fits wrote failed. A
    numeric column is compared on its values, an indicator column on where they are
    missing; a missing nominal value is a level; datetimes are days."""
    real, synthetic = _table(300, 1), _table(250, 2)
    synthetic.loc[synthetic.index[::4], "count"] = pd.NA  # another missing share
    report = evaluate(real, synthetic, target="y", privacy=False, boosting=False)
    scores = report.column_scores.set_index("column")["score"]
    assert list(scores.index) == [
        "count", "count (missing)", "flag", "colour", "when", "day", "x", "y",
    ]  # fmt: skip
    present_ks = stats.ks_2samp(
        real["count"].dropna().astype(float), synthetic["count"].dropna().astype(float)
    ).statistic
    assert scores["count"] == pytest.approx(1 - present_ks)
    missing_share = abs(real["count"].isna().mean() - synthetic["count"].isna().mean())
    assert scores["count (missing)"] == pytest.approx(1 - missing_share)
    as_level = [t["flag"].astype(object).fillna("(missing)") for t in (real, synthetic)]
    assert scores["flag"] == pytest.approx(1 - _tv(*as_level))
    days = [(t["day"] - pd.Timestamp("1970-01-01")).dt.days for t in (real, synthetic)]
    assert scores["day"] == pytest.approx(1 - stats.ks_2samp(*days).statistic)
    assert report.data["kinds"]["count (missing)"] == "nominal"
    assert np.isfinite(report.energy.to_numpy()).all()
    notes = " ".join(report.data["notes"])
    assert "['when', 'day'] are compared as days since 1970-01-01 UTC" in notes
    assert "indicator column '<column> (missing)'" in notes
    assert "count (missing)" in report.to_html()
    # the table's 7 columns, not the indicator added to compare (it said 8)
    assert report.data["meta"]["n_columns"] == 7
    assert "7 columns" in report.summary()


def test_report_target_with_missing_values_names_table_and_fix():
    real, synthetic = _table(200, 1), _table(200, 2)
    with pytest.raises(ValueError, match=r"target 'count' has missing values in the real table"):
        evaluate(real, synthetic, target="count", privacy=False, boosting=False)


def test_cli_report_on_parquet_with_nullable_dtypes_and_dates(tmp_path):
    real, synthetic = _table(200, 1), _table(200, 2)
    real.to_parquet(tmp_path / "real.parquet")
    synthetic.to_parquet(tmp_path / "synthetic.parquet")
    done = fits_in_process(
        "report", "--real", tmp_path / "real.parquet", "--synthetic",
        tmp_path / "synthetic.parquet", "--out", tmp_path / "r.html", "--json",
        tmp_path / "r.json", "--target", "y", "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert {"count (missing)", "when", "day"} <= set(data["kinds"])


def test_report_names_in_other_scripts_and_long_names_warn_nothing():
    """Column names in a script the figures' font lacks (CJK) flooded the terminal with
    matplotlib's 'Glyph ... missing from font' warnings, and a 300-character name with
    'Tight layout not applied'; the page's tables show the names whole."""
    rng = np.random.default_rng(0)
    long = "x" * 300

    def table(n: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "温度": rng.choice(["高", "低", "中"], n),
                long: rng.normal(0, 1, n),
                "y": rng.normal(size=n),
            }
        )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = evaluate(table(120), table(100), privacy=False, utility=False)
    # (a dependency's own deprecation warnings, e.g. pyparsing's under matplotlib 3.7 in
    # the lowest-versions environment, are hidden from users by Python's default filters)
    shown = [w for w in caught if not issubclass(w.category, DeprecationWarning)]
    assert [str(w.message) for w in shown] == []
    assert long in report.to_html() and "温度" in report.to_html()


def test_report_target_no_model_handles_stops_before_any_step():
    """A nominal target of many levels was refused only after the energy distances,
    fidelity and figures had run (minutes on a large table)."""
    rng = np.random.default_rng(0)
    real = pd.DataFrame({"x": rng.normal(size=80), "level": rng.choice(list("abcde"), 80)})
    steps: list[str] = []
    with pytest.raises(ValueError, match="nominal with 5 levels.*do not name it as a target"):
        evaluate(real, real.copy(), target="level", progress=steps.append)
    assert steps == []


def test_cli_report_data_errors_name_the_file(tmp_path):
    """'the synthetic table lacks column(s) ...' named no file, and a numeric column
    written as text in the synthetic file gave "column 'h' in the synthetic table is not
    numeric (dtype str)", with no file, values or fix."""
    rng = np.random.default_rng(0)
    real = pd.DataFrame({"h": rng.normal(170, 10, 60), "g": rng.choice(["a", "b"], 60)})
    real.to_csv(tmp_path / "real.csv", index=False)
    real[["h"]].to_csv(tmp_path / "fewer.csv", index=False)
    real.assign(h=real["h"].round(1).astype(str) + "cm").to_csv(tmp_path / "text.csv", index=False)
    out = tmp_path / "r.html"
    done = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "fewer.csv",
        "--out", out, "--quiet",
    )  # fmt: skip
    assert done.returncode == 1
    assert f"the synthetic table (--synthetic '{tmp_path / 'fewer.csv'}') lacks" in done.stderr
    assert "leave those columns out of the real table" in done.stderr  # and says the fix
    assert done.stderr.rstrip().endswith(". Here: --drop g")  # in the command's words
    done = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "text.csv",
        "--out", out, "--quiet",
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"not in the synthetic table (--synthetic '{tmp_path / 'text.csv'}')" in done.stderr
    assert "values like ['" in done.stderr and "write it as numbers" in done.stderr
    assert not out.exists()


def test_report_compares_decimal_objects_as_numbers():
    """A column of Decimal objects (a Parquet decimal column reads so) had many distinct
    object values, so it was taken for an identifier and left out, and naming it as the
    target said it 'is not a column of the real table'."""
    rng = np.random.default_rng(0)

    def table(n: int) -> pd.DataFrame:
        x = rng.uniform(1, 100, n)
        return pd.DataFrame(
            {"price": [Decimal(f"{v:.2f}") for v in x], "q": x + rng.normal(size=n)}
        )

    real, synthetic = table(150), table(120)
    report = evaluate(real, synthetic, target="price", privacy=False, boosting=False)
    assert report.data["kinds"] == {"price": "continuous", "q": "continuous"}
    scores = report.column_scores.set_index("column")["score"]
    ks = stats.ks_2samp(real["price"].astype(float), synthetic["price"].astype(float))
    assert scores["price"] == pytest.approx(1 - ks.statistic)
    uid = real.assign(uid=[f"u{i:04d}x" for i in range(len(real))])
    with pytest.raises(ValueError, match="target 'uid' looks like an identifier"):
        evaluate(uid, uid.copy(), target="uid", privacy=False)
    # a Decimal column with no value in the synthetic table (all None: dtype object, of
    # no numbers) is all missing, not 'numeric in the real table but not in the
    # synthetic table (values like [])'
    missing = synthetic.assign(price=[None] * len(synthetic))
    report = evaluate(real, missing, privacy=False, boosting=False)
    assert report.data["kinds"]["price"] == "continuous"


def test_cli_report_notes_are_lines_not_python_warnings(tmp_path):
    """What fits inferred reading a table (a CSV column with several UTC offsets) and
    the evaluator's warnings come out as 'note: ...' / 'warning: ...' lines, as in fits
    synthesize, not as Python's '/.../cli/report.py:63: DataNote: ...' with a source
    path."""
    rng = np.random.default_rng(0)
    when = pd.Timestamp("2024-01-01", tz="Europe/Berlin") + pd.to_timedelta(
        rng.integers(0, 86400 * 360, 80), unit="s"
    )
    frame = pd.DataFrame({"when": when, "v": rng.normal(size=80)})
    frame.to_csv(tmp_path / "real.csv", index=False)
    frame.sample(frac=1, random_state=1).to_csv(tmp_path / "synthetic.csv", index=False)
    done = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "synthetic.csv",
        "--out", tmp_path / "r.html", "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    note = "column 'when' has date-times with several UTC offsets (summer time?)"
    lines = [line for line in done.stderr.splitlines() if note in line]
    assert len(lines) == 2 and all(line.startswith("note: ") for line in lines), done.stderr
    assert "DataNote" not in done.stderr and "report.py" not in done.stderr


def test_numeric_identifier_warning_speaks_of_each_command(tmp_path):
    """The numeric-identifier warning said what fits synthesize does ('its synthetic
    values are fresh draws ...', 'fits synthesize and fits federate: --drop') in fits
    report and fits analyze too; each now gives its own command's advice."""
    rng = np.random.default_rng(0)
    paths = []
    for k in range(2):
        x = rng.normal(size=200)
        frame = pd.DataFrame({"pid": np.arange(k * 200, (k + 1) * 200) * 7 + 3, "x": x})
        frame["y"] = 2 * x + rng.normal(size=200)
        paths.append(tmp_path / f"s{k}.csv")
        frame.to_csv(paths[-1], index=False)
    done = fits_in_process(
        "report", "--real", paths[0], "--synthetic", paths[1], "--out", tmp_path / "r.html",
        "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "'pid' holds a different whole number in every row" in done.stderr
    assert "fits report compares it as a continuous column" in done.stderr
    assert "--kind pid=id" in done.stderr and "synthetic values" not in done.stderr
    linear = ("--target", "y", "--family", "linear")
    done = fits_in_process("analyze", *paths, *linear, "--out", tmp_path / "a.json")
    assert done.returncode == 0, done.stderr
    assert "'pid' holds a different whole number in every row" in done.stderr
    assert "--kind pid=id" in done.stderr and "--features a,b" in done.stderr
    assert "synthetic values" not in done.stderr
    done = fits_in_process(
        "analyze", *paths, *linear, "--features", "x", "--out", tmp_path / "b.json"
    )
    assert done.returncode == 0 and "pid" not in done.stderr, done.stderr


def test_cli_report_refuses_a_schema_that_lacks_a_column(tmp_path):
    """A --schema without one of the tables' columns had that column's kind inferred
    silently; refused as fits synthesize --schema refuses it (exit 1), naming the column
    and the file, before any evaluation."""
    rng = np.random.default_rng(0)
    real = pd.DataFrame({"h": rng.normal(170, 10, 60), "g": rng.choice(["a", "b"], 60)})
    real.to_csv(tmp_path / "real.csv", index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(Schema.detect(real[["h"]], rules=False).to_json())
    out = tmp_path / "r.html"
    done = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "real.csv",
        "--schema", schema, "--out", out, "--quiet",
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"--schema '{schema}' does not match --real" in done.stderr
    assert "column(s) ['g'] of --real are not in the schema" in done.stderr
    assert not out.exists()


def test_a_header_with_spaces_is_named_where_a_table_lacks_the_column(tmp_path):
    """A synthetic file whose header is ' income ' was said to lack 'income', with no
    hint; the message now shows the header it has (the command line's as well)."""
    rng = np.random.default_rng(0)
    real = pd.DataFrame({"income": rng.normal(size=40), "g": rng.choice(["a", "b"], 40)})
    spaced = real.rename(columns={"income": " income "})
    with pytest.raises(
        ValueError, match=r"\['income'\] \(the header has ' income ', with spaces\) of the real"
    ):
        evaluate(real, spaced)
    with pytest.raises(ValueError, match=r"test table lacks .*\(did you mean 'G_'\?\)"):
        evaluate(real, real, test=real.rename(columns={"g": "G_"}), target="income")
    real.to_csv(tmp_path / "real.csv", index=False)
    spaced.to_csv(tmp_path / "spaced.csv", index=False)
    done = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "spaced.csv",
        "--out", tmp_path / "r.html", "--quiet",
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "lacks column(s) ['income'] (the header has ' income ', with spaces) of the" in (
        done.stderr
    )
    assert "Here: --drop" not in done.stderr  # the header is the fix here


def _zoned(n: int, seed: int, tz: str | None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    when = pd.Timestamp("2024-03-01") + pd.to_timedelta(rng.integers(0, 30 * 86400, n), "s")
    return pd.DataFrame({"when": when.tz_localize(tz) if tz else when, "x": rng.normal(size=n)})


@pytest.mark.parametrize("naive", ["synthetic", "real", "client 'b'"])
def test_report_refuses_a_time_zone_in_one_table_and_none_in_another(naive):
    """A zone-aware column against a naive one was compared silently, the naive times
    read as UTC: every value shifted by the zone's offset (a KS of 0.97 for a table
    against itself with the zone dropped).  Refused, naming the column, both tables,
    the zone and the fix."""
    real = _zoned(40, 1, "Europe/Zurich")
    synthetic, clients = real.copy(), {"a": real.iloc[:20], "b": real.iloc[20:].copy()}
    if naive == "synthetic":
        synthetic["when"] = synthetic["when"].dt.tz_localize(None)
    elif naive == "real":
        real = real.assign(when=real["when"].dt.tz_localize(None))
    else:
        clients["b"]["when"] = clients["b"]["when"].dt.tz_localize(None)
    name = naive.split(" ")[0] if naive != "client 'b'" else naive
    with pytest.raises(ValueError, match="column 'when' holds date-times with a time zone") as e:
        evaluate(real, synthetic, clients=clients, utility=False, privacy=False)
    assert f"without one in the {name} table" in str(e.value)
    assert "tz_localize('Europe/Zurich')" in str(e.value) and "UTC offset" in str(e.value)


def test_report_compares_two_zones_as_the_same_instants():
    """Times in two zones are instants: compared in UTC (a table against itself in
    another zone scores 1), with a note saying so; clients in two zones pool as
    instants too (they were pooled as text and refused)."""
    real = _zoned(40, 1, "Europe/Zurich")
    other = real.assign(when=real["when"].dt.tz_convert("America/New_York"))
    clients = {"a": real.iloc[:20], "b": other.iloc[20:]}
    pooled = pd.concat(clients.values(), ignore_index=True)  # Timestamp objects, two zones
    assert pooled["when"].dtype == object
    report = evaluate(pooled, other, clients=clients, utility=False, privacy=False)
    assert report.column_scores.set_index("column")["score"]["when"] == 1.0
    note = next(n for n in report.data["notes"] if "different zones" in n)
    assert "America/New_York in the synthetic table" in note
    assert "Europe/Zurich in the client" in note and "same instants in UTC" in note


def test_cli_report_names_the_files_of_a_zone_and_a_naive_column(tmp_path):
    real = _zoned(30, 1, "Europe/Zurich")
    real.to_csv(tmp_path / "real.csv", index=False)  # times with their UTC offsets
    real.assign(when=real["when"].dt.tz_localize(None)).to_csv(tmp_path / "s.csv", index=False)
    out = tmp_path / "r.html"
    done = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "s.csv",
        "--out", out, "-q",  # -q as fits synthesize's
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"in the real table (--real '{tmp_path / 'real.csv'}')" in done.stderr
    assert f"without one in the synthetic table (--synthetic '{tmp_path / 's.csv'}')" in done.stderr
    assert not out.exists()


def test_report_refuses_clients_with_numbers_at_one_and_text_at_another(tmp_path):
    """Client tables pooled as the real table, 'age' numbers at one and '31 years' at
    another, gave a report (exit 0) comparing 'age' as one nominal column of numbers and
    labels; a fit refuses such sites.  A client where the column is empty, and money
    written as text ('$4,260.0', read as numbers as a site reads it), still pass."""
    from fits.report.build import _check_client_types

    rng = np.random.default_rng(0)
    a = pd.DataFrame({"age": rng.integers(20, 70, 12), "g": rng.choice(["u", "v"], 12)})
    b = a.assign(age=[f"{v} years" for v in a["age"]])
    with pytest.raises(ValueError, match=r"'age' holds numbers in the client 'a' table but text"):
        evaluate(a, a, clients={"a": a, "b": b}, utility=False, privacy=False)
    _check_client_types({"a": a, "b": a.assign(age=np.nan), "c": a.assign(g=np.nan)})
    _check_client_types({"a": a, "b": a.assign(age=[f"${v:,.1f}" for v in a["age"] * 100])})
    a.to_csv(tmp_path / "a.csv", index=False)
    b.to_csv(tmp_path / "b.csv", index=False)
    done = fits_in_process(
        "report", "--clients", tmp_path / "a.csv", tmp_path / "b.csv", "--synthetic",
        tmp_path / "a.csv", "--out", tmp_path / "r.html", "-q",
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"text in the client 'b' table (--clients '{tmp_path / 'b.csv'}')" in done.stderr
    assert not (tmp_path / "r.html").exists()


def test_a_synthetic_column_with_no_value_scores_0_with_a_note():
    """A numeric column missing in every synthetic row scored 1/n (KS of the real values
    against the filled-in lowest value: 0.083 for 12 rows), as if partly faithful."""
    rng = np.random.default_rng(0)
    real = pd.DataFrame({"x": rng.normal(size=12), "y": rng.normal(size=12)})
    report = evaluate(real, real.assign(x=np.nan), utility=False, privacy=False)
    scores = report.column_scores.set_index("column")["score"]
    assert scores["x"] == 0.0 and scores["x (missing)"] == 0.0 and scores["y"] == 1.0
    assert any("holds no value of numeric column(s) ['x']" in n for n in report.data["notes"])


def test_cli_report_refuses_files_pooled_with_and_without_a_zone(tmp_path):
    """Two --real files, one with UTC offsets and one without (or two such --clients
    files, pooled as the real table), pooled as Timestamp objects: the column was taken
    for free text and left out with a note saying so."""
    real = _zoned(30, 1, "Europe/Zurich")
    real.iloc[:15].to_csv(tmp_path / "r1.csv", index=False)
    naive = real.iloc[15:].assign(when=real["when"].iloc[15:].dt.tz_localize(None))
    naive.to_csv(tmp_path / "r2.csv", index=False)
    real.to_csv(tmp_path / "s.csv", index=False)
    files = [tmp_path / "r1.csv", tmp_path / "r2.csv"]
    out = ["--synthetic", tmp_path / "s.csv", "--out", tmp_path / "r.html", "-q"]
    done = fits_in_process("report", "--real", files[0], "--real", files[1], *out)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "a time zone in some rows of the real table" in done.stderr
    done = fits_in_process("report", "--clients", *files, *out)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"in the client 'r1' table (--clients '{files[0]}') but without one" in done.stderr
    assert not (tmp_path / "r.html").exists()


def test_a_small_held_out_split_is_noted():
    """A 5-row test split gave a floor and a privacy baseline resting on 5 rows, without
    a word; a note now says so (and none for a split of 100 rows or more)."""
    real, synthetic = _table(300, 1), _table(250, 2)
    small = evaluate(real, synthetic, test=_table(5, 3), privacy=False, boosting=False)
    assert any("the held-out rows are only 5" in n for n in small.data["notes"])
    enough = evaluate(real, synthetic, test=_table(100, 3), privacy=False, boosting=False)
    assert not any("held-out rows are only" in n for n in enough.data["notes"])


def test_a_column_of_date_objects_is_compared_as_dates():
    """A column of datetime.date objects (a Parquet date column, as fits writes one) was
    left out of the evaluation as an identifier, while a fit models it as dates."""
    import datetime

    rng = np.random.default_rng(0)

    def table(n):
        days = rng.integers(0, 300, n)
        return pd.DataFrame(
            {
                "x": rng.normal(size=n),
                "d": [datetime.date(2020, 1, 1) + datetime.timedelta(int(k)) for k in days],
            }
        )

    report = evaluate(table(300), table(250), privacy=False, boosting=False)
    assert report.data["kinds"]["d"] == "continuous"
    scores = report.column_scores.set_index("column")["score"]
    assert 0.8 < scores["d"] <= 1.0
    assert not any("identifiers" in n for n in report.data["notes"])
