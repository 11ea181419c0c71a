"""Exact rules between datetime columns (a copy, a shift by a fixed duration: affine
rules with slope 1) and order rules (a later column at least an earlier one in every
row: drawn as the difference; docs/method.md, "Affine rules" and "Order rules")."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core import rules as rules_module
from fits.core.rules import answer_rules, order_candidates
from fits.core.schema import DataNote, Rule, Schema, SchemaError, point_mass_flag
from fits.evaluation import rules_kept

from conftest import fits_in_process


def _clock_sites(
    tz: str | None = None, date_only: bool = False, shift: str = "0h", n: int = 100
) -> list[pd.DataFrame]:
    """Two sites: t (seconds over 12 days), its copy shifted by ``shift``, a number."""
    out = []
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        t = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 10**6, n), unit="s")
        t = pd.Series(t.normalize() if date_only else t)
        if tz is not None:
            t = t.dt.tz_localize(tz)
        out.append(pd.DataFrame({"t": t, "u": t + pd.Timedelta(shift), "x": rng.normal(size=n)}))
    return out


@pytest.mark.parametrize(
    ("tz", "date_only", "shift", "told"),
    [
        (None, False, "0h", "u = t (a copy)"),
        (None, False, "1h", "u = t + 1 hour"),
        ("UTC", False, "-90min", "u = t - 1 hour 30 minutes"),
        (None, True, "0h", "u = t (a copy)"),
        (None, True, "2D", "u = t + 2 days"),
    ],
)
def test_a_datetime_copy_or_shift_gets_an_affine_rule(tz, date_only, shift, told):
    sites = _clock_sites(tz, date_only, shift)
    schema = Schema.detect(sites)
    [rule] = schema.rules
    assert (rule.kind, rule.column, rule.of, rule.slope) == ("affine", "u", ["t"], 1.0)
    assert rule.intercept == pd.Timedelta(shift).total_seconds()
    assert rule.describe(clock=True) == told


def test_a_shifted_datetime_is_generated_exactly_with_its_zone_and_unit():
    for tz, date_only in ((None, False), ("UTC", False), (None, True)):
        sites = _clock_sites(tz, date_only, "1D" if date_only else "1h")
        synth = FITSSynthesizer(seed=0).fit(sites)
        out = synth.sample(300)
        step = pd.Timedelta("1D" if date_only else "1h")
        assert ((out["u"] - out["t"]) == step).all()
        assert out["u"].dtype == out["t"].dtype == sites[0]["u"].dtype
        if date_only:
            assert (out["u"] == out["u"].dt.normalize()).all()
        kept = rules_kept(out, synth.schema_.rules)
        assert kept["kept"].tolist() == [1.0]
        # told as the schema tells it (it said "u = 1 * t + 3600")
        assert kept["rule"].tolist() == ["u = t + 1 day" if date_only else "u = t + 1 hour"]


def test_stays_of_zero_days_are_a_copy():
    sites = []
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        adm = pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 1000, 200), "D")
        sites.append(pd.DataFrame({"admitted": adm, "discharged": adm, "x": rng.normal(size=200)}))
    out = FITSSynthesizer(seed=0).fit(sites).sample(300)
    assert (out["admitted"] == out["discharged"]).all()


def test_shifts_with_another_zone_or_off_the_columns_unit_are_no_rule():
    # a shift of whole hours off a date column: the synthetic date rounded to days would
    # not keep it; one column in a zone, the other not: no fixed duration
    sites = _clock_sites(None, True, "1h")
    for s in sites:
        s["u"] = s["u"].dt.normalize()  # u whole days again: u = t, no 1 h left
        s["v"] = s["t"].dt.tz_localize("UTC")
    assert [r.describe(clock=True) for r in Schema.detect(sites).rules] == ["u = t (a copy)"]
    schema = Schema.detect(sites, rules=False).to_dict()
    schema["rules"] = [{"kind": "affine", "column": "u", "of": ["t"], "slope": 1.0,
                        "intercept": 3600.0, "decimals": None}]  # fmt: skip
    with pytest.raises(SchemaError, match="not on 'u'"):
        Schema.from_dict(schema)
    schema["rules"][0].update(column="v", intercept=0.0)
    with pytest.raises(SchemaError, match="one with a time zone and one"):
        Schema.from_dict(schema)


def test_a_shift_off_by_a_microsecond_in_one_row_is_no_rule():
    sites = _clock_sites(shift="1h")
    schema = Schema.detect(sites)
    sites[1].loc[5, "u"] += pd.Timedelta(microseconds=1)
    # the schema's shift is checked at every site: the second refuses it
    with warnings.catch_warnings():  # the note that site 1's u is finer than the hour
        warnings.simplefilter("ignore", DataNote)
        with pytest.raises(SchemaError, match=r"\(u = t \+ 1 hour\) does not hold .* client 2"):
            FITSSynthesizer(seed=0, schema=schema).fit(sites)
    # no shift, no near-linear rule (durations constant on their step of an hour: it
    # raised a SchemaError before), but u >= t in every row
    assert [r.describe() for r in Schema.detect(sites).rules] == ["u >= t (order)"]


# ------------------------------------------------------------------ order rules
def _stays(n: int = 100, k: int = 3) -> list[pd.DataFrame]:
    """The tester's case: admissions over 60 days, stays of 0-14 days, an age."""
    out = []
    for seed in range(k):
        rng = np.random.default_rng(seed)
        adm = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 60, n), unit="D")
        dis = adm + pd.to_timedelta(rng.integers(0, 15, n), unit="D")
        out.append(
            pd.DataFrame({"admitted": adm, "discharged": dis, "age": rng.integers(18, 90, n)})
        )
    return out


def test_discharge_is_never_before_admission():
    sites = _stays()
    synth = FITSSynthesizer(seed=0).fit(sites)
    assert [r.to_dict() for r in synth.schema_.rules] == [
        {"column": "discharged", "kind": "order", "of": ["admitted"]}
    ]
    out = synth.sample(600)
    days = (out["discharged"] - out["admitted"]).dt.days
    assert days.min() >= 0 and days.max() <= 74  # the bounds allow at most 74
    assert (out["discharged"] == out["discharged"].dt.normalize()).all()  # whole days
    assert rules_kept(out, synth.schema_.rules)["kept"].tolist() == [1.0]
    # the rule removed from the schema: the chain draws discharged, out of order
    plain = FITSSynthesizer(seed=0, schema=Schema(synth.schema_.columns, rules=[])).fit(sites)
    assert plain.schema_.rules == []
    off = plain.sample(600)
    assert (off["discharged"] < off["admitted"]).mean() > 0.05


def test_known_values_against_an_order_rule_are_named_as_such():
    """Known values of an order rule's column without its source spoke of a near-linear
    rule and advised near_linear=False, which leaves the order rule on; values out of
    order are refused by the rules' check."""
    sites = _stays()
    synth = FITSSynthesizer(seed=0).fit(sites)
    first = sites[0].iloc[:3]
    with pytest.raises(ValueError, match=r"drawn as its difference from 'admitted' .*order"):
        synth.sample_remaining_columns(first[["discharged"]].reset_index(drop=True))
    early = first[["admitted", "discharged"]].assign(
        discharged=first["admitted"] - pd.Timedelta(days=2)
    )
    with pytest.raises(ValueError, match=r"break the exact rule discharged >= admitted \(order"):
        synth.sample_remaining_columns(early.reset_index(drop=True))
    kept = synth.sample_remaining_columns(first[["admitted", "discharged"]].reset_index(drop=True))
    assert (kept["discharged"] == first["discharged"].to_numpy()).all()


def test_known_rows_out_of_order_are_refused_naming_the_first_and_the_fix(tmp_path):
    """The refusal said only the share of rows that break the rule: it names the first
    such row (by the user's label; the command line: the file's row) and the fix."""
    sites = _stays()
    synth = FITSSynthesizer(seed=0).fit(sites)
    known = sites[0].iloc[:9][["admitted", "discharged"]].set_index(pd.Index(range(50, 59)))
    known.loc[[55, 57], "discharged"] = known.loc[[55, 57], "admitted"] - pd.Timedelta(days=1)
    with pytest.raises(ValueError, match=r"in 22\.2% of their rows") as err:
        synth.sample_remaining_columns(known)
    day = known.loc[55, "admitted"]
    said = str(err.value)
    assert f"(the first: known_columns.loc[55], admitted = {day}, discharged = " in said
    assert "give values that keep the rule in those rows, or fit without it" in said
    assert "delete it from the schema's rules, or rules=False; --no-rules" in said
    path = tmp_path / "known.csv"
    known.to_csv(path, index=False)
    site = tmp_path / "s.csv"
    sites[0].to_csv(site, index=False)
    res = fits_in_process("synthesize", site, "--known", path, "--out", tmp_path / "o.csv")
    assert res.returncode == 1, res.stderr
    assert "its rows break the exact rule discharged >= admitted" in res.stderr
    assert "(the first: row 6 of the file, admitted = " in res.stderr


def test_a_numeric_order_rule_with_missing_values_keeps_the_order():
    rng = np.random.default_rng(3)
    n = 600
    low = rng.normal(50, 10, n).round(1)
    high = (low + rng.gamma(1.0, 3.0, n)).round(1)
    high[rng.random(n) < 0.1] = np.nan
    frame = pd.DataFrame({"low": low, "z": rng.normal(size=n), "high": high})
    sites = [frame.iloc[i::3].reset_index(drop=True) for i in range(3)]
    synth = FITSSynthesizer(seed=0).fit(sites)
    assert [r.describe() for r in synth.schema_.rules] == ["high >= low (order)"]
    out = synth.sample(1000)
    held = out["high"].notna()
    assert (out.loc[held, "high"] >= out.loc[held, "low"]).all()
    assert out["high"].isna().mean() == pytest.approx(0.1, abs=0.04)
    assert rules_kept(out, synth.schema_.rules)["kept"].tolist() == [1.0]


def test_no_order_rule_where_a_row_breaks_it_or_the_columns_are_unrelated():
    rng = np.random.default_rng(4)
    n = 300
    frame = pd.DataFrame(
        {
            "a": rng.normal(0, 1, n),
            "b": rng.normal(0, 1, n),  # overlaps a, below it in some rows
            "c": rng.normal(100, 1, n),  # above a and b in every row: the bounds say so
            "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 99, n), "D"),
        }
    )
    frame["later"] = frame["when"] + pd.to_timedelta(rng.integers(0, 9, n), "D")
    sites = [frame.iloc[i::3].reset_index(drop=True) for i in range(3)]
    sites[2].loc[4, "later"] = sites[2].loc[4, "when"] - pd.Timedelta("1D")  # one row
    schema = Schema.detect(sites, near_linear=False)
    assert schema.rules == []
    # c is above a and b by the bounds alone, so no pair with c is even asked
    bare = Schema.detect(sites, rules=False)
    pairs = {(c["column"], c["of"][0]) for c in order_candidates(bare, n)}
    assert ("later", "when") in pairs and pairs <= {("b", "a"), ("later", "when")}


def test_a_user_order_rule_is_checked_validated_and_round_trips():
    sites = _stays()
    schema = Schema.detect(sites)
    text = json.dumps(schema.to_dict())
    assert Schema.from_dict(json.loads(text)) == schema
    [rule] = schema.rules
    assert rule == Rule("discharged", ["admitted"], "order")
    assert rule.describe() == "discharged >= admitted (order)"
    # the engine draws the difference: slope 1, from 0 to the bounds' widest, whole days
    line = schema.near_linear["discharged"]
    assert (line.kind, line.slope, line.intercept, line.lower, line.step) == (
        "linear",
        1.0,
        0.0,
        0.0,
        86400.0,
    )
    assert line.upper == schema["discharged"].upper - schema["admitted"].lower
    # a reversed rule: the bounds refuse it
    reverse = dict(schema.to_dict(), order=["discharged", "admitted", "age"])
    reverse["rules"] = [{"kind": "order", "column": "admitted", "of": ["discharged"]}]
    with pytest.raises(SchemaError, match="above 'admitted''s upper bound"):
        Schema.from_dict(reverse)
    # a row that breaks it at one site: that site refuses it
    row = sites[1].index[sites[1]["admitted"] > pd.Timestamp("2024-01-20")][0]
    sites[1].loc[row, "discharged"] = sites[1].loc[row, "admitted"] - pd.Timedelta("1D")
    with pytest.raises(SchemaError, match="some row there has 'discharged' below 'admitted'"):
        FITSSynthesizer(seed=0, schema=schema).fit(sites)
    bad = schema.to_dict()
    for wrong, match in (
        ({"column": "age"}, "two number columns or two"),
        ({"slope": 1.0}, 'an "order" rule has no slope'),
        ({"of": ["admitted", "age"]}, "exactly one column"),
    ):
        bad["rules"] = [{"kind": "order", "column": "discharged", "of": ["admitted"], **wrong}]
        with pytest.raises(SchemaError, match=match):
            Schema.from_dict(bad)


def test_a_site_answers_one_bit_per_order_pair():
    sites = _stays()
    schema = Schema.detect(sites, rules=False)
    cands = [
        {"kind": "order", "column": "discharged", "of": ["admitted"]},
        {"kind": "order", "column": "age", "of": ["admitted"]},
    ]
    answer = answer_rules(sites[0], schema, cands[:1], "check")
    assert answer.dtype == np.uint8 and answer.tolist() == [1]
    sites[0].loc[0, "discharged"] = sites[0].loc[0, "admitted"] - pd.Timedelta("1D")
    assert answer_rules(sites[0], schema, cands[:1], "check").tolist() == [0]


def test_the_order_search_stops_at_its_cap_with_a_note(monkeypatch):
    rng = np.random.default_rng(5)
    n = 120
    frame = pd.DataFrame({f"v{k}": rng.uniform(0, 1, n) for k in range(5)})
    for k in range(5):  # each range a little above the one before: every pair plausible
        frame.loc[0, f"v{k}"], frame.loc[1, f"v{k}"] = 0.001 * k - 1, 1 + 0.001 * k
    schema = Schema.detect([frame], rules=False)
    every = order_candidates(schema, n)
    monkeypatch.setattr(rules_module, "MAX_ORDER_PAIRS", 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        capped = order_candidates(schema, n)
    assert capped == every[:2] and len(every) > 2
    [note] = [w for w in caught if issubclass(w.category, DataNote)]
    assert f"of {len(every):,} candidate pairs" in str(note.message)


# ------------------------------------------------ differences of 0 (point mass)
def _ties(design: str, n: int = 400) -> list[pd.DataFrame]:
    """The tester's designs: 3 sites, b = a + k (k = 0 in about 30% of rows)."""
    out = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        zero = rng.random(n) < 0.3
        z = rng.normal(size=n)
        if design == "numbers":  # two decimals, y = x + d
            x = rng.normal(50, 10, n).round(2)
            d = np.where(zero, 0.0, rng.gamma(2.0, 2.0, n).round(2))
            out.append(pd.DataFrame({"a": x, "b": (x + d).round(2), "z": z}))
            continue
        a = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 100, n), unit="D")
        b = a + pd.to_timedelta(np.where(zero, 0, rng.integers(1, 40, n)), unit="D")
        if design == "berlin":
            a, b = a.tz_localize("Europe/Berlin"), b.tz_localize("Europe/Berlin")
        out.append(pd.DataFrame({"a": a, "b": b, "z": z}))
    return out


@pytest.mark.parametrize("design", ["numbers", "naive", "berlin"])
def test_differences_of_zero_keep_their_share(design):
    """Stays of 0 days (and numbers equal to their source) lost their share: the
    difference's kernel-smoothed mass at 0 was cut by the truncation at 0 (naive dates
    27% -> 18%, Berlin dates -> 9%, numbers 30% -> 0.4%); now D = 0 is a point mass."""
    sites = _ties(design)
    synth = FITSSynthesizer(seed=0).fit(sites)
    assert [r.describe() for r in synth.schema_.rules] == ["b >= a (order)"]
    out = synth.sample(1200)
    real = pd.concat(sites, ignore_index=True)
    share = (real["b"] == real["a"]).mean()
    assert (out["b"] == out["a"]).mean() == pytest.approx(share, abs=0.05)
    assert (out["b"] >= out["a"]).all()
    if design != "numbers":  # whole days, and none of the others at 0 by rounding
        assert (out["b"] == out["b"].dt.normalize()).all()


def test_no_point_mass_without_equal_rows_and_a_note_for_a_near_copy():
    sites = _ties("numbers")
    for s in sites:
        d = np.random.default_rng(len(s)).gamma(2.0, 2.0, len(s)).round(2)
        s["b"] = (s["a"] + 0.01 + d).round(2)  # never equal
    synth = FITSSynthesizer(seed=0).fit(sites)
    assert [r.describe() for r in synth.schema_.rules] == ["b >= a (order)"]
    assert point_mass_flag("b") not in synth._coordinator.schema.names
    out = synth.sample(500)
    assert (out["b"] >= out["a"]).all() and (out["b"] == out["a"]).mean() < 0.05
    # equal in all but 3 rows: too few rows apart to draw them, said so
    near = _clock_sites(n=400)  # u = t but 3 rows a microsecond later
    near[0].loc[:2, "u"] += pd.Timedelta(microseconds=1)
    near = [s.rename(columns={"t": "a", "u": "b"}) for s in near]
    with pytest.warns(DataNote, match=r"'b' equals 'a' in some rows and no site holds 20"):
        synth = FITSSynthesizer(seed=0).fit(near)
    assert [r.describe() for r in synth.schema_.rules] == ["b >= a (order)"]


def test_a_site_answers_ties_and_rows_apart_of_an_order_pair():
    rng = np.random.default_rng(0)
    a = rng.normal(50, 10, 60)
    b = a + np.r_[1.5, 2.5, np.zeros(58)]  # 2 rows apart, the others equal
    b[-1] = np.nan
    frame = pd.DataFrame({"a": a, "b": b})
    schema = Schema.detect([frame], rules=False)
    base = {"kind": "order", "column": "b", "of": ["a"]}
    cands = [base, {**base, "ties": True}, {**base, "apart": 2}, {**base, "apart": 3}]
    assert answer_rules(frame, schema, cands, "check").tolist() == [1, 1, 1, 0]
    frame["b"] = frame["a"] + 1
    assert answer_rules(frame, schema, cands[:2], "check").tolist() == [1, 0]


def test_an_order_with_the_larger_column_first_is_told_with_the_chain_that_finds_it():
    """``end,start``: only a later column can be an order rule's, so none was found and
    synthetic rows had end < start, silently; now a note names the chain order."""
    sites = [s.rename(columns={"admitted": "start", "discharged": "end"}) for s in _stays()]
    sites = [s[["end", "start", "age"]] for s in sites]
    with pytest.warns(DataNote, match=r"'start' <= 'end'.*order=\['start', 'end', 'age'\]"):
        schema = Schema.detect(sites)
    assert schema.rules == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataNote)  # no note once the order finds the rule
        found = Schema.detect(sites, order=["start", "end", "age"])
    assert [r.describe() for r in found.rules] == ["end >= start (order)"]


def test_an_order_a_boosted_column_cannot_keep_is_told():
    """A boosted column had its order rule left out silently (2% of synthetic rows below
    their source): the check asks its pairs too, and a note says the boosted model does
    not keep the order."""
    rng = np.random.default_rng(0)
    sites = []
    for n in (200, 200, 200):
        a = rng.normal(50, 10, n).round(1)
        sites.append(pd.DataFrame({"a": a, "z": rng.normal(size=n), "b": (a + 5).round(1)}))
        sites[-1]["b"] += rng.gamma(2, 3, n).round(1)
    with pytest.warns(DataNote, match=r"'b' >= 'a', but \['b'\] is drawn from a boosted model"):
        boosted = FITSSynthesizer(
            seed=0, column_models={"b": "boosting"}, boosting={"n_trees": 2, "depth": 2}
        ).fit(sites)
    assert boosted.schema_.rules == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernels = FITSSynthesizer(seed=0).fit(sites)
    assert [r.describe() for r in kernels.schema_.rules] == ["b >= a (order)"]
    assert not [w for w in caught if "boosted model" in str(w.message)]
