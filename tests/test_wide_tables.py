"""Wide tables (hundreds of columns): the work that grows with the width is done
without changing the result (docs/benchmarks.md, "Wide tables")."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from fits.core import rules
from fits.core.rules import MAX_SUM_CANDIDATES, candidates
from fits.core.schema import Schema


def _old_candidates(schema: Schema, n_total: int, *, size: int, skip=frozenset()) -> list:
    """The candidates as the loop over every group found them (before the vectorized
    scan), kept here as the reference."""
    cols = [c for c in schema.columns if c.is_modelled and c.indicates is None]
    discrete = [c.name for c in cols if c.is_discrete and c.n_levels >= 2]
    out: list = []
    for b in discrete:
        if b in skip:
            continue
        for of in itertools.combinations([a for a in discrete if a != b], size):
            cells = rules._cells(schema, of)
            if size > 1 and cells > rules.MAX_DETERMINANT_CELLS:
                continue
            if n_total >= rules.MIN_ROWS_PER_CELL * cells:
                out.append({"kind": "function", "column": b, "of": list(of)})
    if size > 1 and len(out) > MAX_SUM_CANDIDATES:
        out = sorted(out, key=lambda c: rules._cells(schema, c["of"]))[:MAX_SUM_CANDIDATES]
    if n_total < rules.MIN_SUM_ROWS:
        return out
    numeric = [c for c in cols if rules._numeric(c)]
    sums: list = []
    for t in numeric:
        if t.kind != "continuous" or t.point_mass is not None or t.name in skip:
            continue
        lo_t, hi_t = rules._bounds(t)
        parts = [p for p in numeric if p.name != t.name]
        for group in itertools.combinations(parts, size + 1):
            lo = hi = 0.0
            for p in group:  # left to right, as sum() of floats did before Python 3.12
                lo += rules._bounds(p)[0]
                hi += rules._bounds(p)[1]
            if lo <= lo_t and hi_t <= hi:
                sums.append({"kind": "sum", "column": t.name, "of": [p.name for p in group]})
    if size > 1:
        sums = sums[:MAX_SUM_CANDIDATES]
    return out + sums


def _wide_schema(seed: int, columns: int, rows: int = 120) -> Schema:
    """Numeric columns of many ranges (some totals of others' ranges, some not), a few
    ordinal and nominal ones, one with a point mass."""
    rng = np.random.default_rng(seed)
    data: dict[str, object] = {}
    for k in range(columns):
        kind = rng.integers(5)
        if kind == 0:  # a nonnegative measurement starting at 0
            v = rng.uniform(0, rng.uniform(1, 50), rows)
            v[0] = 0.0
        elif kind == 1:  # around an offset: rarely a sum
            v = rng.normal(rng.uniform(-20, 40), rng.uniform(0.5, 5), rows)
        elif kind == 2:  # a wide total
            v = rng.uniform(-5, 150, rows)
        elif kind == 3:  # ordinal, whole numbers
            v = rng.integers(0, 5, rows).astype(float)
        else:
            v = np.round(rng.uniform(-3, 3, rows), 2)
        data[f"x{k}"] = v
    data["mass"] = np.where(rng.random(rows) < 0.3, 0.0, rng.uniform(0, 9, rows))
    data["nom"] = rng.choice(list("abc"), rows)
    data["nom2"] = rng.choice(list("pq"), rows)
    frame = pd.DataFrame(data)
    return Schema.detect([frame.iloc[: rows // 2], frame.iloc[rows // 2 :]], rules=False)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("size", [1, 2])
def test_sum_candidates_are_those_of_the_loop_over_every_group(seed, size):
    schema = _wide_schema(seed, 24)
    skip = {"x3"} if seed == 1 else set()
    new = candidates(schema, 120, size=size, skip=skip)
    assert new == _old_candidates(schema, 120, size=size, skip=skip)
    assert any(c["kind"] == "sum" for c in new)  # the test sees sums


def test_three_part_sums_stop_at_the_limit_in_the_same_order(monkeypatch):
    schema = _wide_schema(3, 30)
    monkeypatch.setattr(rules, "MAX_SUM_CANDIDATES", 40)
    new = [c for c in candidates(schema, 120, size=2) if c["kind"] == "sum"]
    old = [c for c in _old_candidates_limited(schema, 40) if c["kind"] == "sum"]
    assert len(new) == 40
    assert new == old


def _old_candidates_limited(schema: Schema, limit: int) -> list:
    everything = _old_candidates(schema, 120, size=2)
    funcs = [c for c in everything if c["kind"] != "sum"]
    return funcs + [c for c in everything if c["kind"] == "sum"][:limit]


def test_a_wide_table_of_offset_columns_has_no_sum_candidates():
    # 300 lab values around 10: no total can be the sum of two or three of them; the
    # loop over the 4.4 million three-part groups per total took hours
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({f"lab{k}": rng.normal(10, 1, 60) for k in range(300)})
    schema = Schema.detect([frame.iloc[:30], frame.iloc[30:]], rules=False)
    assert candidates(schema, 60, size=1) == []
    assert candidates(schema, 60, size=2) == []


def test_sum_checks_in_blocks_answer_as_one_check_per_candidate(monkeypatch):
    from fits._exact import sums_match
    from fits.core.rules import answer_rules

    rng = np.random.default_rng(7)
    n = 90
    frame = pd.DataFrame({f"p{k}": np.round(rng.uniform(0, 5, n), 1) for k in range(8)})
    frame["t2"] = frame["p0"] + frame["p1"]  # holds up to float64 rounding
    frame["t3"] = np.round(frame["p2"] + frame["p3"] + frame["p4"], 1)  # decimal total
    frame["near"] = frame["p5"] + frame["p6"]
    frame.loc[3, "near"] += 1e-9  # one row off
    frame["gap"] = frame["p7"] + frame["p0"]
    frame.loc[5, "gap"] = np.nan  # a missing value: no rule
    frame["cat"] = rng.choice(list("ab"), n)
    schema = Schema.detect([frame.iloc[:45], frame.iloc[45:]], rules=False)
    cands = candidates(schema, n, size=1) + candidates(schema, n, size=2)
    sums = [c for c in cands if c["kind"] == "sum"]
    assert len(sums) > 100
    monkeypatch.setattr(rules, "_SUM_BLOCK", 7 * 45)  # several blocks of 7 candidates
    got = answer_rules(frame.iloc[:45], schema, cands, "check")
    values = {c: frame[c].iloc[:45].to_numpy(float) for c in frame.columns if c != "cat"}
    for cand, answer in zip(cands, got, strict=True):
        if cand["kind"] == "sum":
            one = np.all(sums_match(values[cand["column"]], [values[p] for p in cand["of"]]))
            assert answer == int(one), cand
    held = {(c["column"], tuple(c["of"])) for c, a in zip(cands, got, strict=True) if a}
    assert ("t2", ("p0", "p1")) in held and ("t3", ("p2", "p3", "p4")) in held
    assert ("near", ("p5", "p6")) not in held


def test_fits_synthesize_says_a_wide_table_takes_minutes(tmp_path, monkeypatch):
    import fits.cli.main as cli_main

    from conftest import fits_in_process as run

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({f"lab{k}": rng.normal(10, 1, 40) for k in range(3)})
    frame.iloc[:20].to_csv(tmp_path / "a.csv", index=False)
    frame.iloc[20:].to_csv(tmp_path / "b.csv", index=False)
    monkeypatch.setattr(cli_main, "WIDE_TABLE_COLUMNS", 3)  # so that 3 columns are wide
    args = ["synthesize", tmp_path / "a.csv", tmp_path / "b.csv", "--rows", "5"]
    loud = run(*args, "--out", tmp_path / "o.csv")
    assert loud.returncode == 0, loud.stderr
    assert "note: 3 columns: each column is drawn given all the columns before it" in loud.stderr
    quiet = run(*args, "--out", tmp_path / "q.csv", "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert "note: 3 columns" not in quiet.stderr
