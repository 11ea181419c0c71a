"""Sum candidates cut by the sites' column totals (the ``totals`` stage of rule
detection): no true sum rule is lost, far fewer candidates are checked (docs/method.md,
"Exact rules"; docs/benchmarks.md, "Wide tables")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits._exact import sums_match
from fits.core import rules
from fits.core.rules import (
    TOTALS_FROM_CANDIDATES,
    answer_rules,
    candidates,
    order_candidates,
    sum_candidate_count,
    sum_columns,
    sum_totals,
)
from fits.core.schema import Schema, describe_table


def _wide(columns: int, rows: int, seed: int = 1) -> pd.DataFrame:
    """Lab values around 10 with three decimals (as benchmarks/wide_tables.py), a
    sum of two of them and one of three (written rounded to three decimals, so equal
    to the parts' sum only up to float64 rounding), a lab value with missing values and
    a 'sum' over it, and a nominal column."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(rows, 5))
    data = {
        f"lab{k}": np.round(z @ rng.normal(size=5) + rng.normal(size=rows) * 0.5 + 10, 3)
        for k in range(columns)
    }
    frame = pd.DataFrame(data)
    frame["tot"] = np.round(frame["lab3"] + frame["lab7"], 3)
    frame["tot3"] = np.round(frame["lab1"] + frame["lab2"] + frame["lab9"], 3)
    gappy = frame["lab5"].copy()
    gappy[rng.random(rows) < 0.1] = np.nan
    frame["gappy"] = gappy
    frame["gappy_tot"] = np.round(frame["gappy"] + frame["lab6"], 3)  # missing where gappy is
    frame["cat"] = rng.choice(list("abc"), rows)
    return frame


def _sites(frame: pd.DataFrame, k: int = 3) -> list[pd.DataFrame]:
    return [frame.iloc[p] for p in np.array_split(np.arange(len(frame)), k)]


def _descriptions(frames: list[pd.DataFrame]) -> list[dict]:
    return [describe_table(f) for f in frames]


def _detect(frames: list[pd.DataFrame]) -> tuple[Schema, dict[str, int]]:
    """Schema.detect, counting the candidates each stage asked (per site); interval
    candidates apart, as ``"interval <stage>"``."""
    asked: dict[str, int] = {}
    original = rules.answer_rules

    def counting(frame, schema, cands, stage, *, site="site"):
        for kind in ("interval", "order"):
            steps = sum(c["kind"] == kind for c in cands)
            if steps:
                asked[f"{kind} {stage}"] = asked.get(f"{kind} {stage}", 0) + steps
        others = sum(c["kind"] not in ("interval", "order") for c in cands)
        asked[stage] = asked.get(stage, 0) + others
        return original(frame, schema, cands, stage, site=site)

    rules.answer_rules = counting
    try:
        schema = Schema.detect(frames)
    finally:
        rules.answer_rules = original
    return schema, {k: v // len(frames) for k, v in asked.items()}


def _sums(schema: Schema) -> list[str]:
    return [r.describe() for r in schema.rules or [] if r.kind == "sum"]


def test_planted_sums_on_a_wide_table_are_found_with_far_fewer_checks():
    frames = _sites(_wide(80, 150))
    schema, asked = _detect(frames)
    assert _sums(schema) == ["tot = lab3 + lab7", "tot3 = lab1 + lab2 + lab9"]
    bare = Schema.detect(frames, rules=False)
    by_bounds = sum_candidate_count(bare, 150)
    assert by_bounds > TOTALS_FROM_CANDIDATES
    assert asked["totals"] == len(sum_columns(bare))  # one total per numeric column
    # what is checked: the function candidates of 'cat' (none: one discrete column)
    # and the sums the totals allow
    assert asked["check"] < 10 < by_bounds // 1000
    # and, apart, whether 'cat' steps with each lab column before it and with gappy and
    # gappy_tot, over their rows with a value (one bit each; sums' totals are no
    # sources); none does
    assert asked["interval check"] == 82 and "interval ranges" not in asked
    # and whether a lab column is at least an earlier one, for the pairs whose bounds
    # and sites' extremes allow it (one bit each; no sum's column or part): gappy is
    # lab5 where present (gappy_tot, about 20, is above the labs, about 10, in every row,
    # but their ranges overlap too little for one scale: not asked)
    plausible = len(order_candidates(bare, 150, _descriptions(frames)))
    assert 0 < asked["order check"] <= 3 * plausible < 3 * 80 * 79 // 10
    found = [r.describe() for r in schema.rules or [] if r.kind == "order"]
    assert found == ["gappy >= lab5 (order)"]


def test_a_wide_table_without_a_rule_has_none():
    rng = np.random.default_rng(3)
    frame = _wide(60, 150).drop(columns=["tot", "tot3", "gappy_tot"])
    frame["lab0"] = np.round(frame["lab0"] + rng.normal(0, 0.01, len(frame)), 3)
    schema, asked = _detect(_sites(frame))
    assert asked["totals"] > 0
    assert _sums(schema) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_totals_only_remove_candidates_and_keep_the_order(seed, monkeypatch):
    """With totals, the candidates are exactly those without totals that the totals
    allow, in the same order; for three parts every group is compared (no limit)."""
    monkeypatch.setattr(rules, "MAX_SUM_CANDIDATES", 10**7)
    frame = _wide(28, 120, seed).drop(columns=["gappy", "gappy_tot"])
    frames = _sites(frame)
    schema = Schema.detect(frames, rules=False)
    names = sum_columns(schema)
    answers = [answer_rules(f, schema, [{"column": n} for n in names], "totals") for f in frames]
    totals = sum_totals(schema, names, answers, [len(f) for f in frames])
    assert totals is not None
    for size in (1, 2):
        plain = [c for c in candidates(schema, 120, size=size) if c["kind"] == "sum"]

        def allowed(c: dict) -> bool:
            idx = [np.array([totals.index[n]]) for n in c["of"]]
            return bool(totals.allows(totals.index[c["column"]], *idx)[0])

        cut = [c for c in candidates(schema, 120, size=size, totals=totals) if c["kind"] == "sum"]
        assert cut == [c for c in plain if allowed(c)]
        assert len(plain) > 1000 * max(len(cut), 1)
        expected = {"tot": ["lab3", "lab7"], "tot3": ["lab1", "lab2", "lab9"]}
        assert [c for c in cut if expected.get(c["column"]) == c["of"]]


def _edge_rows(rows: int, seed: int) -> pd.DataFrame:
    """t off the parts' float64 sum by as many units in the last place as sums_match
    allows, in the same direction in every row, at large magnitudes."""
    rng = np.random.default_rng(seed)
    a = np.round(rng.uniform(1e6, 2e6, rows), 3)
    b = np.round(rng.uniform(1e6, 4e6, rows), 3)
    t = a + b
    for _ in range(16):
        up = np.nextafter(t, np.inf)
        ok = sums_match(up, [a, b])
        t = np.where(ok, up, t)
    assert np.all(sums_match(t, [a, b])) and np.all(t > a + b)
    return pd.DataFrame({"a": a, "b": b, "t": t})


@pytest.mark.parametrize("pooled", [False, True])
def test_rounding_at_the_edge_of_the_check_never_fails_the_totals(pooled):
    frame = _edge_rows(3000, 4)
    frames = _sites(frame, 5)
    schema = Schema.detect(frames, rules=False)
    names = sum_columns(schema)
    answers = [answer_rules(f, schema, [{"column": n} for n in names], "totals") for f in frames]
    if pooled:
        answers = [np.sum(answers, axis=0)]
    descriptions = [describe_table(f) for f in frames]
    totals = sum_totals(schema, names, answers, [len(f) for f in frames], descriptions)
    assert totals is not None
    pos = totals.index
    assert totals.allows(pos["t"], np.array([pos["a"]]), np.array([pos["b"]]))[0]
    # one row off by 0.5 (a difference the check would see): ruled out already (the
    # bound allows for the worst case of each site's float64 sum, n^2 u of the values'
    # magnitude: 7e-4 here, so a difference of one unit of the third decimal in one row
    # of these millions is left to the check)
    frames[2] = frames[2].copy()
    frames[2].iloc[0, 2] += 0.5
    answers = [answer_rules(f, schema, [{"column": n} for n in names], "totals") for f in frames]
    totals = sum_totals(schema, names, answers, [len(f) for f in frames], descriptions)
    assert totals is not None
    assert not totals.allows(pos["t"], np.array([pos["a"]]), np.array([pos["b"]]))[0]


def test_a_small_table_asks_no_totals():
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 300, 200), rng.integers(0, 900, 200)
    frame = pd.DataFrame({"casual": a, "registered": b, "cnt": a + b})
    schema, asked = _detect(_sites(frame))
    assert "totals" not in asked
    assert _sums(schema) == ["cnt = casual + registered"]


@pytest.mark.parametrize("secure", [False, True])
def test_the_federation_finds_them_and_keeps_them_in_every_synthetic_row(secure):
    frame = _wide(24, 150)
    synth = FITSSynthesizer(seed=0, secure_aggregation=secure, design="constant")
    synth.fit({f"site {k}": f for k, f in enumerate(_sites(frame))})
    assert _sums(synth.schema_) == ["tot = lab3 + lab7", "tot3 = lab1 + lab2 + lab9"]
    asked = synth.coordinator.rule_candidates
    # the check round also asks whether 'cat' steps with each of the 24 lab columns
    # (docs/method.md, "Interval rules") and whether a lab column is at least an earlier
    # one where the extremes allow it ("Order rules"): one bit each
    frames = _sites(frame)
    ordered = order_candidates(Schema.detect(frames, rules=False), 150, _descriptions(frames))
    assert asked["totals"] == 26 and asked["check"] - 24 - len(ordered) < 10
    assert "ranges" not in asked
    out = synth.sample(200, seed=1)
    a, b, c = (out[n].to_numpy(float) for n in ("lab3", "lab7", "tot"))
    assert np.all(sums_match(c, [a, b]))
    parts = [out[n].to_numpy(float) for n in ("lab1", "lab2", "lab9")]
    assert np.all(sums_match(out["tot3"].to_numpy(float), parts))
