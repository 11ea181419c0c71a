"""``fits report`` on inputs a new user brings: client files named like the report's own
tables, dates in one table and numbers or other text in another, a target missing in
one client file, a one-row real table, columns coded differently. Found by a QA pass;
each test failed before its fix."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fits import evaluate
from fits.evaluation.encoding import total_variation
from fits.evaluation.fidelity import column_fidelity

from conftest import fits_in_process


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n).round(3)
    return pd.DataFrame(
        {"x": x, "g": rng.choice(["a", "b", "c"], n), "y": (2 * x + rng.normal(size=n)).round(3)}
    )


@pytest.mark.parametrize(  # one name in CI (9-15 s each: CI's 20-minute budget)
    "name",
    [pytest.param(n, marks=pytest.mark.slow) for n in ("synthetic", "real", "test")] + ["train"],
)
def test_a_client_named_like_a_table_of_the_report_stays_a_client(name):
    """A client file synthetic.csv (client "synthetic") replaced the synthetic table:
    the report compared the real table with that client's real rows (100% copies)."""
    real, synthetic = _table(200, 0), _table(150, 1)
    clients = {"s1": _table(120, 2), name: _table(80, 3)}
    report = evaluate(real, synthetic, target="y", clients=clients, seed=0)
    rows = report.data["meta"]["rows"]
    assert rows["synthetic"] == 150 and rows["real"] == 200 and rows["test"] is None
    assert rows["clients"] == {"s1": 120, name: 80}
    assert report.data["privacy"]["synthetic_copies"] == 0


def test_cli_a_client_file_synthetic_csv_is_no_synthetic_table(tmp_path):
    (tmp_path / "sites").mkdir()
    _table(200, 0).to_csv(tmp_path / "real.csv", index=False)
    _table(150, 1).to_csv(tmp_path / "out.csv", index=False)
    _table(120, 2).to_csv(tmp_path / "sites" / "a.csv", index=False)
    _table(80, 3).to_csv(tmp_path / "sites" / "synthetic.csv", index=False)
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "out.csv",
        "--out", tmp_path / "r.html", "--json", tmp_path / "r.json", "--target", "y",
        "--no-inference", "--clients", tmp_path / "sites" / "a.csv",
        tmp_path / "sites" / "synthetic.csv",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    meta = json.loads((tmp_path / "r.json").read_text())["meta"]
    assert meta["rows"]["synthetic"] == 150


@pytest.mark.parametrize(
    "values, shown",
    [
        (np.arange(60), "dtype int64, values like [0, 1]"),  # days as plain numbers
        (["03/01/2024", "03/02/2024"] * 30, "values like ['03/01/2024', '03/02/2024']"),
    ],
)
def test_dates_against_numbers_or_other_text_are_refused_by_name(tmp_path, values, shown):
    """A date column written as numbers in the synthetic table was compared with the
    real dates as days since 1970 (fidelity 0, no word about it); written as text in
    another format it failed with "column 'd' in the synthetic table is not numeric"."""
    real = pd.DataFrame({"d": pd.date_range("2024-01-01", periods=60, freq="D"),
                         "x": np.linspace(0, 1, 60)})  # fmt: skip
    synthetic = real.assign(d=values)
    with pytest.raises(ValueError, match="column 'd' holds dates in the real table but not in"):
        evaluate(real, synthetic, seed=0)
    real.to_csv(tmp_path / "real.csv", index=False)
    synthetic.to_csv(tmp_path / "syn.csv", index=False)
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv",
        "--out", tmp_path / "r.html", "--quiet",
    )  # fmt: skip
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert (
        f"column 'd' holds dates in the real table (--real '{tmp_path / 'real.csv'}') but not "
        f"in the synthetic table (--synthetic '{tmp_path / 'syn.csv'}')"
    ) in res.stderr
    assert shown in res.stderr and "write it as dates in every table" in res.stderr
    assert not (tmp_path / "r.html").exists()


def test_dates_in_every_table_and_an_empty_synthetic_column_are_compared():
    real = pd.DataFrame({"d": pd.date_range("2024-01-01", periods=60, freq="D"),
                         "x": np.linspace(0, 1, 60)})  # fmt: skip
    report = evaluate(real, real.sample(frac=1, random_state=0), seed=0)
    assert report.data["columns"]["mean_score"] == 1.0
    empty = real.assign(d=pd.Series([None] * 60, dtype=object))
    evaluate(real, empty, seed=0)  # a column with no value is no other type


def test_a_client_lacking_target_values_is_named_with_its_file(tmp_path):
    """With --clients and no --train, the report pools the clients as its training rows;
    a target missing in one client file was said to be missing "in the train table",
    which the user never gave. Other client messages named no file either."""
    real = _table(200, 0)
    real.to_csv(tmp_path / "real.csv", index=False)
    _table(150, 1).to_csv(tmp_path / "syn.csv", index=False)
    _table(100, 2).to_csv(tmp_path / "a.csv", index=False)
    _table(50, 3).assign(y=np.nan).to_csv(tmp_path / "b.csv", index=False)
    _table(50, 3).drop(columns="g").to_csv(tmp_path / "c.csv", index=False)
    base = ["report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv",
            "--out", tmp_path / "r.html", "--target", "y", "--quiet", "--no-inference"]  # fmt: skip
    res = fits_in_process(*base, "--clients", tmp_path / "a.csv", tmp_path / "b.csv")
    assert res.returncode == 1
    assert (
        f"target 'y' has missing values in the client 'b' table (--clients "
        f"'{tmp_path / 'b.csv'}') (50 of 50 rows)"
    ) in res.stderr
    assert "train table" not in res.stderr
    res = fits_in_process(*base, "--clients", tmp_path / "a.csv", tmp_path / "c.csv")
    assert res.returncode == 1
    assert (
        f"the client 'c' table (--clients '{tmp_path / 'c.csv'}') lacks column(s) ['g']"
    ) in res.stderr


def test_a_real_table_of_one_row_is_refused_early_by_name(tmp_path):
    """It failed after the other evaluators with "the leave-one-out baseline needs at
    least two training rows": no file, no fix."""
    _table(1, 0).to_csv(tmp_path / "real.csv", index=False)
    _table(50, 1).to_csv(tmp_path / "syn.csv", index=False)
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv",
        "--out", tmp_path / "r.html", "--quiet",
    )  # fmt: skip
    assert res.returncode == 1
    assert f"the real table (--real '{tmp_path / 'real.csv'}') holds a single row" in res.stderr
    assert "give the whole real table" in res.stderr
    with pytest.raises(ValueError, match="the train table holds a single row.*--test"):
        evaluate(_table(50, 0), _table(50, 1), train=_table(1, 2), seed=0)
    evaluate(_table(50, 0), _table(50, 1), train=_table(1, 2), test=_table(20, 3), seed=0)


def test_disjoint_codings_score_exactly_zero_never_below():
    """Labels against numbers: the worst column showed as "g -2.22e-16" (or 1.11e-16)."""
    real = pd.DataFrame({"g": list("abc") * 117})
    for synthetic in (pd.DataFrame({"g": [0, 1, 2] * 100}), pd.DataFrame({"g": [1, 2] * 7})):
        scores = column_fidelity(real, synthetic, {"g": "nominal"})
        assert scores["score"].tolist() == [0.0]
    assert total_variation(np.array([1, 0]), np.array([0, 3])) == 1.0
    assert total_variation(np.array([3, 3, 1]), np.array([3, 3, 1])) == 0.0
    rng = np.random.default_rng(0)
    for _ in range(200):
        p, q = rng.integers(0, 9, 7), rng.integers(0, 9, 7)
        if p.sum() and q.sum():
            assert 0.0 <= total_variation(p, q) <= 1.0


def test_an_ordinal_column_written_otherwise_is_named_with_the_fix(tmp_path):
    """An integer (ordinal) column written as text in the synthetic file failed with
    "column 'k' in the synthetic table is not numeric (dtype str)": no values, no fix;
    one whose synthetic values are none of the real ones scored 0 without a note, as a
    nominal column gets."""
    rng = np.random.default_rng(0)
    real = _table(120, 0).assign(k=rng.integers(0, 5, 120))
    real.to_csv(tmp_path / "real.csv", index=False)
    real.assign(k="k" + real["k"].astype(str)).to_csv(tmp_path / "text.csv", index=False)
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "text.csv",
        "--out", tmp_path / "r.html", "--quiet",
    )  # fmt: skip
    assert res.returncode == 1
    assert "column 'k' is numeric in the real table" in res.stderr
    assert "values like ['k" in res.stderr and "write it as numbers" in res.stderr
    report = evaluate(real, real.assign(k=real["k"] + 0.5), kinds={"k": "ordinal"}, seed=0)
    assert any(n.startswith("ordinal column(s) ['k']: the synthetic table holds none")
               for n in report.data["notes"])  # fmt: skip


def test_a_json_that_cannot_be_made_leaves_the_old_page(tmp_path, monkeypatch):
    """save() wrote the HTML page, then failed making the JSON: a new page beside the
    old JSON, while the command said no report was written."""
    from fits.report.build import Report

    report = evaluate(_table(60, 0), _table(60, 1), seed=0)
    html, js = tmp_path / "r.html", tmp_path / "r.json"
    html.write_text("old page")
    js.write_text("{}")

    def broken(self, indent=2):
        raise TypeError("Object of type set is not JSON serializable")

    monkeypatch.setattr(Report, "to_json", broken)
    with pytest.raises(TypeError):
        report.save(html, js)
    assert html.read_text() == "old page" and js.read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.json"]


def test_a_bad_client_file_is_named_without_the_inference_checks_advice(tmp_path):
    """A client file with text in the (numeric) target showed the inference check's
    note first ("column(s) ['y'] look like identifiers or free text at some site ...
    fits analyze --features a,b"), then the error naming the file."""
    _table(200, 0).to_csv(tmp_path / "real.csv", index=False)
    _table(150, 1).to_csv(tmp_path / "syn.csv", index=False)
    _table(100, 2).to_csv(tmp_path / "a.csv", index=False)
    text = _table(60, 3)
    text.assign(y=text["y"].astype(str) + "kg").to_csv(tmp_path / "b.csv", index=False)
    res = fits_in_process(
        "report", "--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv",
        "--out", tmp_path / "r.html", "--target", "y", "--quiet",
        "--clients", tmp_path / "a.csv", tmp_path / "b.csv",
    )  # fmt: skip
    assert res.returncode == 1
    assert f"the client 'b' table (--clients '{tmp_path / 'b.csv'}')" in res.stderr
    assert "write it as numbers" in res.stderr
    assert "inference check" not in res.stderr and "fits analyze" not in res.stderr


def _sites_on_disk(tmp_path):
    paths = []
    for k, n in enumerate((120, 80, 60)):
        t = _table(n, 10 + k).assign(pid=np.arange(n) + 1000 * k)
        paths.append(tmp_path / f"site{k}.csv")
        t.to_csv(paths[-1], index=False)
    _table(150, 1).to_csv(tmp_path / "syn.csv", index=False)  # made with --drop pid
    return paths


def _energy(path):
    return json.loads(path.read_text())["energy"]


def test_cli_several_real_files_are_pooled_and_clients_alone_are_the_real_table(tmp_path):
    """Three sites' files as --real were read as the last one alone (typer keeps the
    last of a repeated option); the report now pools them, in the order given, as it
    pools the --clients files when no --real is given. --drop leaves the column a
    synthesis dropped out of the real tables."""
    paths = _sites_on_disk(tmp_path)
    pd.concat([pd.read_csv(p) for p in paths], ignore_index=True).to_csv(
        tmp_path / "all.csv", index=False
    )
    common = ["--synthetic", tmp_path / "syn.csv", "--drop", "pid", "--no-inference", "--quiet"]
    one = fits_in_process(
        "report", "--real", tmp_path / "all.csv", *common,
        "--out", tmp_path / "1.html", "--json", tmp_path / "1.json",
    )  # fmt: skip
    assert one.returncode == 0, one.stderr
    many = fits_in_process(
        "report", "--real", paths[0], "--real", paths[1], "--real", paths[2], *common,
        "--out", tmp_path / "2.html", "--json", tmp_path / "2.json",
    )  # fmt: skip
    assert many.returncode == 0, many.stderr
    assert _energy(tmp_path / "2.json") == _energy(tmp_path / "1.json")
    meta = json.loads((tmp_path / "2.json").read_text())["meta"]
    assert meta["rows"]["real"] == 260
    clients = fits_in_process(
        "report", "--clients", *paths, *common,
        "--out", tmp_path / "3.html", "--json", tmp_path / "3.json",
    )  # fmt: skip
    assert clients.returncode == 0, clients.stderr
    pooled, given = _energy(tmp_path / "3.json"), _energy(tmp_path / "1.json")
    # the independent-columns baseline is drawn from the client files: the same rows
    assert pooled.pop("independent_source") == "training rows"
    assert given.pop("independent_source") == "real table"
    assert pooled == given


def test_cli_real_table_usage_errors(tmp_path):
    paths = _sites_on_disk(tmp_path)
    out = ["--synthetic", tmp_path / "syn.csv", "--out", tmp_path / "r.html", "--quiet"]
    none = fits_in_process("report", *out)
    assert none.returncode == 2 and "give the real table: --real FILE" in none.stderr
    twice = fits_in_process("report", "--real", paths[0], "--real", paths[0], *out)
    assert twice.returncode == 2 and "give each real table once" in twice.stderr
    typo = fits_in_process("report", "--real", paths[0], "--drop", "pidd", *out)
    assert typo.returncode == 2 and "did you mean 'pid'" in typo.stderr
    pd.read_csv(paths[1]).drop(columns="g").to_csv(tmp_path / "nog.csv", index=False)
    apart = fits_in_process(
        "report", "--real", paths[0], "--real", tmp_path / "nog.csv", "--drop", "pid", *out
    )
    assert apart.returncode == 1 and "lacks ['g']" in apart.stderr
    assert "Traceback" not in none.stderr + twice.stderr + typo.stderr + apart.stderr
    assert not (tmp_path / "r.html").exists()


def test_an_interval_rule_on_dates_is_told_in_dates():
    """The report compares dates as days since 1970; the rule it found on them was
    told in those days ('pre for [18050, 18261]')."""
    rng = np.random.default_rng(3)
    day = pd.Timestamp("2019-06-01") + pd.to_timedelta(rng.integers(0, 900, 400), unit="D")
    era = np.where(day < pd.Timestamp("2020-01-01"), "pre", "post")
    real = pd.DataFrame({"day": day, "era": era, "x": rng.normal(size=400)})
    report = evaluate(real, real.sample(200, random_state=0), seed=0)
    (rule,) = [r["rule"] for r in report.data["rules"] if r["column"] == "era"]
    first = day[era == "pre"].min().strftime("%Y-%m-%d")
    assert rule.startswith(f"era = by day: pre for [{first}, 2019-12-31], post for [2020-01-0")
