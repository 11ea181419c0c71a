"""Exact rules between columns (issue #12): detection from per-site answers, the
schema's ``rules``, generation by rule, and the share of rows keeping each rule."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.rules import answer_rules, dependent_codes, detect_rules, select_rules
from fits.core.schema import Rule, Schema, SchemaError
from fits.evaluation import rules_kept
from fits.federation.protocol import Message, ProtocolError, check_reply

from conftest import fits_in_process as run

GRADE = {"low": 1, "mid": 2, "high": 2, "top": 3}  # b = f(a), not one-to-one


def _flag(d1: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """A flag of two discrete columns, like Bike's workingday of weekday and holiday."""
    return np.where((d1 < 3) & (d2 == 0), "yes", "no")


def planted(n: int = 900, seed: int = 0) -> pd.DataFrame:
    """A function of one column (grade of a), of two (flag of d1, d2), a sum (t)."""
    rng = np.random.default_rng(seed)
    a = rng.choice(list(GRADE), n)
    d1 = rng.integers(0, 5, n)
    d2 = rng.integers(0, 2, n)
    p1 = np.round(rng.gamma(2.0, 10.0, n), 2)
    p2 = rng.integers(0, 60, n).astype(float)
    return pd.DataFrame(
        {
            "a": a,
            "d1": d1,
            "d2": d2,
            "x": rng.normal(size=n) + (a == "top"),
            "grade": pd.Series(a).map(GRADE).to_numpy(),
            "flag": _flag(d1, d2),
            "p1": p1,
            "p2": p2,
            "t": p1 + p2,
        }
    )


def sites(frame: pd.DataFrame, k: int = 3) -> list[pd.DataFrame]:
    cuts = np.linspace(0, len(frame), k + 1).astype(int)
    return [
        frame.iloc[lo:hi].reset_index(drop=True) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)
    ]


def kept(table: pd.DataFrame) -> dict[str, float]:
    """Shares keeping the planted rules, computed from their definitions (the oracle)."""
    return {
        "grade": float((table["grade"] == table["a"].map(GRADE)).mean()),
        "flag": float((table["flag"] == _flag(table["d1"], table["d2"])).mean()),
        "t": float((table["t"] == table["p1"] + table["p2"]).mean()),
    }


def _local_ask(frames, schema, log=None):
    def ask(stage, cands):
        if log is not None:
            log.append((stage, [(c["column"], tuple(c["of"])) for c in cands]))
        return [answer_rules(f, schema, cands, stage) for f in frames]

    return ask


def _detect(frames, log=None):
    schema = Schema.detect(frames, rules=False)
    names = [f"site {i}" for i in range(len(frames))]
    total = sum(len(f) for f in frames)
    return detect_rules(schema, _local_ask(frames, schema, log), names, total)


# ------------------------------------------------------------------ detection


def test_planted_rules_are_found_with_their_mappings():
    rules = {r.column: r for r in Schema.detect(sites(planted())).rules}
    assert set(rules) == {"grade", "flag", "t"}
    assert rules["grade"].of == ["a"] and rules["grade"].lookup() == {
        (k,): v for k, v in GRADE.items()
    }
    assert rules["flag"].of == ["d1", "d2"]
    assert rules["flag"].lookup() == {
        (i, j): str(_flag(np.array([i]), np.array([j]))[0]) for i in range(5) for j in range(2)
    }
    assert rules["t"].kind == "sum" and rules["t"].of == ["p1", "p2"]


def test_a_table_with_no_rule_has_none():
    rng = np.random.default_rng(1)
    n = 900
    frame = pd.DataFrame(
        {
            "a": rng.choice(["u", "v", "w"], n),
            "b": rng.integers(0, 4, n),
            "c": rng.choice(["p", "q"], n),
            "x": rng.normal(size=n),
            "y": rng.gamma(2.0, 1.0, n),
            "z": rng.normal(size=n) * 5,
        }
    )
    assert Schema.detect(sites(frame)).rules == []


def test_one_violating_row_at_one_site_is_no_rule_and_reveals_only_a_bit():
    frames = sites(planted())
    frames[1].loc[7, "grade"] = 3 if frames[1].loc[7, "grade"] != 3 else 1
    frames[2].loc[3, "flag"] = "no" if frames[2].loc[3, "flag"] == "yes" else "yes"
    frames[0].loc[5, "t"] += 0.5
    log: list = []
    # t = p1 + p2 fails in one row, but t >= p1 (p2 >= 0) holds in every row: an order
    # rule, no exact one (p2's range overlaps t's too little to be asked)
    assert [r.describe() for r in _detect(frames, log)] == ["t >= p1 (order)"]
    # the near-rules were checked (one bit per site), never mapped
    mapped = {col for stage, cands in log if stage == "map" for col, _ in cands}
    assert not ({"grade", "flag"} & mapped)


def test_rule_at_each_site_with_different_mappings_is_no_rule():
    frames = sites(planted())
    other = {"low": 1, "mid": 2, "high": 3, "top": 3}  # 'high' maps to 3 here only
    frames[2]["grade"] = frames[2]["a"].map(other)
    log: list = []
    found = {r.column for r in _detect(frames, log)}
    assert "grade" not in found and {"flag", "t"} <= found
    # every site said yes on its own, so the pairs were asked, and their union decided
    assert any(("grade", ("a",)) in cands for stage, cands in log if stage == "map")


def test_missing_determinant_is_a_level_of_its_own():
    frame = planted()
    frame["a"] = frame["a"].astype(object)
    frame.loc[frame.index % 7 == 0, "a"] = None
    frame.loc[frame["a"].isna(), "grade"] = 0
    rules = {r.column: r for r in Schema.detect(sites(frame)).rules}
    assert rules["grade"].lookup()[(None,)] == 0
    synth = FITSSynthesizer(seed=3).fit(sites(frame))
    out = synth.sample(600)
    missing = out["a"].isna()
    assert missing.any()
    assert (out.loc[missing, "grade"] == 0).all()
    assert (out.loc[~missing, "grade"] == out.loc[~missing, "a"].map(GRADE)).all()


def test_too_few_rows_per_combination_are_not_asked():
    frame = planted(60)  # a has 4 levels: 40 rows needed; d1 x d2: 100 rows needed
    log: list = []
    _detect([frame], log)
    asked = {c for _, cands in log for c in cands}
    assert ("grade", ("a",)) in asked
    assert ("flag", ("d1", "d2")) not in asked


def test_selection_keeps_the_later_of_two_columns_that_determine_each_other():
    frame = planted()
    frame["code"] = frame["a"].map({"low": 10, "mid": 20, "high": 30, "top": 40})
    schema = Schema.detect(sites(frame))
    rules = {r.column: r for r in schema.rules}
    assert rules["code"].of == ["a"] and "a" not in rules  # a is before code
    # against the chain order: the rule is not used
    swapped = Schema.detect(sites(frame), rules=False)
    r = Rule("a", ["grade"], "function", [[1, "low"]])
    assert select_rules(swapped, [r]) == []


def test_unseen_combination_is_left_to_the_chain():
    schema = Schema.detect(sites(planted()))
    rule = next(r for r in schema.rules if r.column == "flag")
    sub = Rule(rule.column, rule.of, rule.kind, rule.mapping[:-1])  # one combination less
    last = rule.mapping[-1]
    d1 = schema["d1"].categories.index(last[0])
    d2 = schema["d2"].categories.index(last[1])
    codes = dependent_codes(schema, sub, [np.array([d1, 0]), np.array([d2, 1])])
    assert codes[0] == -1 and codes[1] >= 0


# ------------------------------------------------------------------ generation


@pytest.fixture(scope="module")
def fitted():
    frames = sites(planted())
    return frames, FITSSynthesizer(seed=0, site_audit=None).fit(frames)


def test_rules_are_kept_in_every_synthetic_row(fitted):
    frames, synth = fitted
    out = synth.sample(1500, seed=1)
    assert kept(out) == {"grade": 1.0, "flag": 1.0, "t": 1.0}
    shares = rules_kept(out, synth.schema_.rules).set_index("column")
    assert shares["kept"].tolist() == [1.0, 1.0, 1.0]
    assert shares["uncovered"].tolist() == [0.0, 0.0, 0.0]


def test_switched_off_the_chain_draws_them_and_breaks_them():
    frames = sites(planted())
    synth = FITSSynthesizer(seed=0, rules=False).fit(frames)
    assert synth.schema_.rules == []
    out = synth.sample(1500, seed=1)
    shares = kept(out)
    assert shares["t"] < 0.05 and min(shares["grade"], shares["flag"]) < 1.0


def test_the_chain_skips_a_ruled_column(fitted):
    frames, _ = fitted
    trails = []
    FITSSynthesizer(seed=0, site_audit=trails.append).fit(frames).sample(300)
    asked = {e.get("column") for e in trails if e["type"] in ("hessian", "cdf")}
    assert {"grade", "flag", "t"}.isdisjoint(asked)
    assert {"x", "p2"} <= asked
    rules = [e for e in trails if e["type"] == "rules"]
    assert rules and all(set(e["arrays"]) == set() for e in rules)  # requests carry no array


def test_sum_rule_with_integer_parts_stays_integer():
    rng = np.random.default_rng(5)
    n = 600
    a, b = rng.integers(0, 300, n), rng.integers(0, 900, n)
    frame = pd.DataFrame({"casual": a, "registered": b, "cnt": a + b})
    synth = FITSSynthesizer(seed=0).fit(sites(frame))
    assert [r.describe() for r in synth.schema_.rules] == ["cnt = casual + registered"]
    out = synth.sample(500)
    assert out["cnt"].dtype == frame["cnt"].dtype
    assert (out["cnt"] == out["casual"] + out["registered"]).all()


# ------------------------------------------------------------------ the schema


def test_rules_round_trip_through_json_and_can_be_edited(fitted):
    frames, synth = fitted
    schema = Schema.from_json(synth.schema_.to_json())
    assert [r.to_dict() for r in schema.rules] == [r.to_dict() for r in synth.schema_.rules]
    # the user deletes the sum rule: t is drawn by the chain again
    doc = schema.to_dict()
    doc["rules"] = [r for r in doc["rules"] if r["column"] != "t"]
    again = FITSSynthesizer(seed=0, schema=Schema.from_dict(doc)).fit(frames)
    out = again.sample(800)
    assert [r.column for r in again.schema_.rules] == ["grade", "flag"]
    assert kept(out)["grade"] == 1.0 and kept(out)["t"] < 0.05


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"column": "nope", "of": ["a"], "mapping": [["low", 1]]}, "unknown column"),
        ({"column": "grade", "of": ["a"], "mapping": [["low", 7]]}, "'grade'"),
        ({"column": "grade", "of": ["a"], "mapping": [["low", 1], ["low", 2]]}, "twice"),
        ({"column": "grade", "of": ["x"], "mapping": [[0.5, 1]]}, "continuous"),
        ({"column": "a", "of": ["grade"], "mapping": [[1, "low"]]}, "after 'a'"),
        ({"column": "t", "kind": "sum", "of": ["p1", "a"]}, "not numbers"),
        ({"column": "grade", "kind": "product", "of": ["a"]}, "unknown kind"),
    ],
)
def test_a_bad_edit_names_the_column(fitted, edit, message):
    _, synth = fitted
    doc = synth.schema_.to_dict()
    doc["rules"] = [edit]
    with pytest.raises(SchemaError, match="rule for column") as err:
        Schema.from_dict(doc)
    assert message in str(err.value)


def test_a_rule_the_data_breaks_is_refused_naming_the_site(fitted):
    frames, synth = fitted
    doc = synth.schema_.to_dict()
    grade = next(r for r in doc["rules"] if r["column"] == "grade")
    grade["mapping"] = [[a, 3 if a == "mid" else b] for a, b in grade["mapping"]]
    with pytest.raises(SchemaError, match=r"'grade'.*does not hold.*client 1"):
        FITSSynthesizer(seed=0, schema=Schema.from_dict(doc)).fit(frames)


# ------------------------------------------------------------------ protocol, evaluation


def test_rules_replies_are_bits_of_the_asked_size():
    req = Message("rules", config={"stage": "check", "candidates": json.dumps([{}, {}])})
    check_reply(req, Message("rules", {"holds": np.array([1, 0], dtype=np.uint8)}))
    for bad in (
        {"holds": np.array([1, 2], dtype=np.uint8)},
        {"holds": np.array([1, 0, 1], dtype=np.uint8)},
        {"holds": np.array([1.0, 0.0])},
        {"pairs": np.array([1, 0], dtype=np.uint8)},
    ):
        with pytest.raises(ProtocolError):
            check_reply(req, Message("rules", bad))
    req = Message("rules", config={"stage": "map", "candidates": "[{}]", "size": 6})
    check_reply(req, Message("rules", {"pairs": np.zeros(6, dtype=np.uint8)}))


def test_rules_kept_counts_by_hand():
    table = pd.DataFrame(
        {
            "a": ["x", "y", "z", None, "x"],
            "b": [1, 2, 2, 3, 2],
            "p": [1.0, 2.0, 3.0, 4.0, np.nan],
            "q": [1, 1, 1, 1, 1],
            "s": [2.0, 3.0, 4.0, 6.0, 1.0],
        }
    )
    rules = [
        {"column": "b", "of": ["a"], "mapping": [["x", 1], ["y", 2], [None, 3]]},
        Rule("s", ["p", "q"], "sum"),
    ]
    got = rules_kept(table, rules)
    assert got["kept"].tolist() == [3 / 5, 3 / 5]  # row 5 breaks b; rows 4, 5 break s
    assert got["uncovered"].tolist() == [1 / 5, 0.0]  # "z" is not in the mapping
    assert got["rule"].tolist() == ["b = f(a)", "s = p + q"]


# ------------------------------------------------------------------ command line


def test_cli_schema_shows_rules_and_synthesize_keeps_them(tmp_path):
    paths = []
    for k, part in enumerate(sites(planted())):
        paths.append(tmp_path / f"site_{k}.csv")
        part.to_csv(paths[-1], index=False)
    schema = tmp_path / "schema.json"
    res = run("schema", *map(str, paths), "--out", str(schema))
    assert res.returncode == 0, res.stderr
    assert "grade = f(a)" in res.stdout and "t = p1 + p2" in res.stdout
    doc = json.loads(schema.read_text())
    assert {r["column"] for r in doc["rules"]} == {"grade", "flag", "t"}
    out = tmp_path / "syn.csv"
    res = run("synthesize", *map(str, paths), "--rows", "400", "--out", str(out))
    assert res.returncode == 0, res.stderr
    exact = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
    got = pd.read_csv(out, **exact)  # pandas < 3 may read a float an ulp off otherwise
    assert kept(got) == {"grade": 1.0, "flag": 1.0, "t": 1.0}
    res = run("schema", *map(str, paths), "--out", str(tmp_path / "s2.json"), "--no-rules")
    assert res.returncode == 0 and json.loads((tmp_path / "s2.json").read_text())["rules"] == []
    # an edit that names an unknown column: a usage error naming it, no traceback
    doc["rules"][0]["of"] = ["nope"]
    schema.write_text(json.dumps(doc))
    res = run(
        "synthesize", *map(str, paths), "--rows", "5", "--out", str(tmp_path / "x.csv"),
        "--schema", str(schema),
    )  # fmt: skip
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "rule for column" in res.stderr and "nope" in res.stderr
    assert not (tmp_path / "x.csv").exists()


def test_sums_match_is_exact_in_decimal_and_nothing_more():
    from fits._exact import sums_match

    t = np.array([0.3, 0.3, 1e6 + 0.3, 0.0, np.nan, 0.3000001])
    p1 = np.array([0.1, 0.1, 1e6, 0.0, 0.1, 0.1])
    p2 = np.array([0.2, 0.2000000001, 0.3, 0.0, 0.2, 0.2])
    assert 0.1 + 0.2 != 0.3  # the float64 sum misses the decimal total...
    assert sums_match(t, [p1, p2]).tolist() == [True, False, True, True, False, False]


def test_cli_finds_a_sum_written_in_decimals(tmp_path):
    """A total written rounded to its decimals (t = 0.3 for 0.1 + 0.2): the rule holds in
    every row in decimal, though the float64 sum misses it in about a fifth of them."""
    rng = np.random.default_rng(0)
    paths = []
    for k in range(3):
        p1 = np.round(rng.gamma(2.0, 10.0, 300), 2)
        p2 = np.round(rng.gamma(2.0, 5.0, 300), 2)
        frame = pd.DataFrame({"p1": p1, "p2": p2, "t": np.round(p1 + p2, 2)})
        frame["x"] = rng.normal(size=300)
        paths.append(tmp_path / f"d{k}.csv")
        frame.to_csv(paths[-1], index=False)
    back = pd.concat(pd.read_csv(p) for p in paths)
    assert (back["t"] != back["p1"] + back["p2"]).mean() > 0.1  # what made it fail
    res = run("schema", *map(str, paths), "--out", str(tmp_path / "s.json"))
    assert res.returncode == 0, res.stderr
    assert "t = p1 + p2" in res.stdout


def test_cli_help_lists_no_rules():
    for command in ("synthesize", "schema", "benchmark"):
        res = run(command, "--help")
        assert "--no-rules" in res.stdout, command


# ------------------------------------------------------------------ report, benchmark


def test_report_has_a_rules_kept_section():
    from fits.report import evaluate

    frames = sites(planted())
    real = pd.concat(frames, ignore_index=True)
    off = FITSSynthesizer(seed=0, rules=False).fit(frames)
    table = off.sample(600)
    opts = {"target": "x", "utility": False, "privacy": False}
    report = evaluate(real, table, clients=frames, settings=off, **opts)
    got = {r["column"]: r["kept"] for r in report.data["rules"]}
    assert got == pytest.approx(kept(table))  # found from the clients; the oracle's shares
    assert "Rules kept" in report.to_html() and 'id="rules"' in report.to_html()
    none = evaluate(real, table, rules=[], **opts)
    assert none.data["rules"] == [] and 'id="rules"' not in none.to_html()


def test_benchmark_markdown_lists_the_rules_kept():
    from fits.benchmark import BenchmarkResult

    rec = {"rule": "grade = f(a)", "column": "grade", "kind": "function", "rows": 10}
    runs = [
        {"repeat": r, "generators": {"knn": {"rules": [{**rec, "kept": k, "uncovered": 0.0}]}}}
        for r, k in enumerate((1.0, 0.5))
    ]
    result = BenchmarkResult("toy", {"generators": ["knn"], "rules": False}, runs)
    lines = result._md_rules()
    assert "## Exact rules kept" in lines
    assert any(line.startswith("| FITS-K | grade = f(a) | 0.75") for line in lines)


def test_no_row_gets_a_combination_no_real_row_has():
    frame = planted(1200, seed=4)
    rng = np.random.default_rng(99)
    # d2 = 1 only where d1 <= 2: (3, 1) and (4, 1) occur in no real row
    frame["d2"] = np.where(frame["d1"] <= 2, rng.integers(0, 2, len(frame)), 0)
    frame["flag"] = _flag(frame["d1"].to_numpy(), frame["d2"].to_numpy())
    frames = sites(frame)
    unseen = {(3, 1), (4, 1)}

    def n_unseen(table):
        return sum((a, b) in unseen for a, b in zip(table["d1"], table["d2"], strict=True))

    off = FITSSynthesizer(seed=2, rules=False).fit(frames).sample(3000, seed=5)
    assert n_unseen(off) > 0  # smoothing leaks mass onto them when nothing stops it
    synth = FITSSynthesizer(seed=2).fit(frames)
    rule = next(r for r in synth.schema_.rules if r.column == "flag")
    assert len(rule.mapping) == 8
    out = synth.sample(3000, seed=5)
    assert n_unseen(out) == 0
    assert kept(out)["flag"] == 1.0
    assert out.groupby(["d1", "d2"])["flag"].nunique().max() == 1  # a function of them


def test_values_below_the_tolerance_are_not_whole_numbers() -> None:
    """Values of order 1e-9 have no 0 decimals (each was within the 1e-6 tolerance of
    0): detection proposed the rule 'tiny = 0 x + 0' and Schema.detect (fits schema,
    fits synthesize) stopped with '"slope" 0 makes a constant column'."""
    from fits.core.rules import value_decimals

    assert value_decimals(np.array([3e-10, -2e-9])) == 10
    assert value_decimals(np.array([3.3513459115300875e-10])) is None
    assert value_decimals(np.array([0.0, 2e-6, -3e-6])) == 6
    assert value_decimals(np.array([0.0, 1.0])) == 0
    rng = np.random.default_rng(0)
    sites = [
        pd.DataFrame({"x": rng.normal(5, 1, 300), "tiny": rng.normal(0, 1, 300) * 1e-9})
        for _ in range(2)
    ]
    assert Schema.detect(sites).rules == []


def test_a_column_past_1e100_is_left_out_of_the_moment_searches() -> None:
    """A column of values near 1e299 (which a fit refuses, check_spans) overflowed the
    affine search's float arithmetic: fits schema ended in an OverflowError traceback.
    Such a column is no sum, affine or near-linear candidate; the others' rules stand."""
    rng = np.random.default_rng(0)
    sites = []
    for n in (120, 150):
        x = rng.normal(50, 5, n).round(2)
        sites.append(
            pd.DataFrame({"x": x, "copy": x, "huge": rng.normal(size=n) * 1e299, "y": x * 2})
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        schema = Schema.detect(sites)
    told = {r.column: r.of for r in schema.rules}
    assert told["copy"] == ["x"] and told["y"] in (["x"], ["copy"])
    assert "huge" not in told and all("huge" not in of for of in told.values())


def test_rule_breaks_marks_the_rows_rules_kept_counts_as_broken() -> None:
    """rule_breaks (the rows a known table's refusal names first) agrees with
    rules_kept, rule by rule, and marks exactly the planted rows."""
    from fits.evaluation.rules import rule_breaks

    table = pd.DataFrame(
        {
            "a": [1.0, 2.0, 3.0, 4.0, np.nan],
            "b": [1.0, 2.0, 2.5, 4.0, 1.0],  # b >= a broken in rows 2 and 4 (a missing)
            "t": [2.0, 4.0, 5.5, 9.0, np.nan],  # t = a + b broken in rows 3 and 4
            "g": ["x", "x", "y", "y", "y"],
            "h": ["u", "u", "v", "u", "v"],  # h = f(g) broken in row 3
        }
    )
    rules = [
        {"column": "b", "kind": "order", "of": ["a"]},
        {"column": "t", "kind": "sum", "of": ["a", "b"]},
        {"column": "h", "kind": "function", "of": ["g"], "mapping": [["x", "u"], ["y", "v"]]},
        {"column": "b", "kind": "affine", "of": ["a"], "slope": 1.0, "intercept": 0.0,
         "decimals": None},
    ]  # fmt: skip
    expected = [[2, 4], [3, 4], [3], [2, 4]]
    kept = rules_kept(table, rules)
    for rule, rows, (_, row) in zip(rules, expected, kept.iterrows(), strict=True):
        broken = rule_breaks(table, rule)
        assert np.flatnonzero(broken).tolist() == rows, rule
        assert broken.sum() == round((1 - row["kept"]) * row["rows"]), rule
    assert not rule_breaks(table, {"column": "b", "kind": "linear", "of": ["a"]}).any()
