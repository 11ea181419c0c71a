"""Interval rules of a source with missing values (docs/method.md, "Interval rules", "A
missing X"): ``senior`` = "yes" iff ``age`` >= 65 wherever ``age`` is present, ``age``
missing in 8% of the rows.  The rule holds where the source is present and says nothing
where it is missing: the sites' check bit and ranges leave those rows out, the rule is
kept in every synthetic row with an age, and the chain draws ``senior`` in the rows
without one (its kernels are tuned as any drawn column's)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.rules import answer_rules, detect_rules, sets_every_row
from fits.core.schema import Rule, Schema, SchemaError
from fits.evaluation import rules_kept


def people(
    seed: int = 0, n: int = 300, k: int = 3, missing: float = 0.08, flipped: int = 0
) -> list[pd.DataFrame]:
    """k sites: ``age`` (whole numbers 18-89, a share ``missing`` of them missing),
    ``senior`` = "yes" iff ``age`` >= 65 (in ``flipped`` rows per site that hold an age,
    the other value; yes or no at random where the age is missing), a later ``score``
    and ``sex``."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        age = rng.integers(18, 90, n).astype(float)
        senior = np.where(age >= 65, "yes", "no").astype(object)
        senior[:flipped] = np.where(age[:flipped] >= 65, "no", "yes")
        gone = rng.random(n) < missing
        gone[:flipped] = False  # the flipped rows keep their age
        age[gone] = np.nan
        senior[gone] = rng.choice(["yes", "no"], int(gone.sum()))
        out.append(
            pd.DataFrame(
                {
                    "age": age,
                    "senior": senior,
                    "score": rng.normal(0, 1, n),
                    "sex": rng.choice(["f", "m"], n),
                }
            )
        )
    return out


def detect(frames: list[pd.DataFrame]) -> dict[str, Rule]:
    merged = Schema.detect(frames, rules=False)
    schema = Schema(merged.columns, merged.order)

    def ask(stage, cands):
        return [answer_rules(f, schema, cands, stage) for f in frames]

    n = sum(len(f) for f in frames)
    return {r.column: r for r in detect_rules(schema, ask, ["s0", "s1", "s2"], n)}


@pytest.fixture(scope="module")
def frames() -> list[pd.DataFrame]:
    return people()


@pytest.fixture(scope="module")
def fitted(frames):
    return FITSSynthesizer(seed=0).fit(frames)


def test_the_rule_is_found_over_the_rows_with_an_age(frames, fitted):
    rule = next(r for r in fitted.schema_.rules if r.column == "senior")
    pooled = pd.concat(frames, ignore_index=True)
    held = pooled[pooled["age"].notna()]
    assert rule.kind == "interval" and rule.of == ["age"]
    assert rule.intervals == [
        [held["age"].min(), held.loc[held.senior == "no", "age"].max(), "no"],
        [held.loc[held.senior == "yes", "age"].min(), held["age"].max(), "yes"],
    ]
    assert [e[:2] for e in rule.intervals] == [[18, 64], [65, 89]]
    assert pooled["age"].isna().mean() == pytest.approx(0.08, abs=0.02)


def test_kept_where_age_is_present_and_drawn_where_it_is_not(frames, fitted):
    out = fitted.sample(900, seed=0)
    has = out["age"].notna()
    assert ((out.loc[has, "senior"] == "yes") == (out.loc[has, "age"] >= 65)).all()
    row = rules_kept(out, fitted.schema_.rules).iloc[0]
    assert (row["rows"], row["kept"]) == (int(has.sum()), 1.0)  # the missing ages left out
    # the rows without an age get both values, in about the real proportions
    pooled = pd.concat(frames, ignore_index=True)
    real = (pooled.loc[pooled["age"].isna(), "senior"] == "yes").mean()
    drawn = out.loc[~has, "senior"]
    assert 40 <= drawn.size <= 110
    assert set(drawn) == {"yes", "no"}
    assert (drawn == "yes").mean() == pytest.approx(real, abs=0.15)


def test_switched_off_the_chain_breaks_it(frames):
    out = FITSSynthesizer(seed=0, rules=False).fit(frames).sample(900, seed=0)
    has = out["age"].notna()
    assert ((out.loc[has, "senior"] == "yes") != (out.loc[has, "age"] >= 65)).mean() > 0.02


def test_a_step_broken_among_the_present_rows_is_no_rule():
    assert "senior" not in detect(people(n=150, flipped=1))
    assert detect(people(n=150))["senior"].kind == "interval"  # the same, unbroken


def test_the_sites_answers_leave_the_missing_rows_out():
    # ages 20-59 "no", 65-84 "yes", then 20 "yes" and 20 "no" without an age
    frame = pd.DataFrame(
        {
            "age": np.r_[np.arange(20.0, 60.0), np.arange(65.0, 85.0), np.full(40, np.nan)],
            "senior": ["no"] * 40 + ["yes"] * 40 + ["no"] * 20,
        }
    )
    schema = Schema.detect([frame], kinds={"age": "continuous"}, rules=False)
    assert schema["age"].kind == "continuous" and schema["age"].missing
    cand = {"kind": "interval", "column": "senior", "of": ["age"]}
    assert answer_rules(frame, schema, [cand], "check").tolist() == [1]
    codes = {v: i for i, v in enumerate(schema["senior"].categories)}
    ranges = answer_rules(frame, schema, [cand], "ranges").reshape(-1, 3)
    assert ranges[codes["no"]].tolist() == [40, 20, 59]  # not the 20 "no" without an age
    assert ranges[codes["yes"]].tolist() == [20, 65, 84]
    entries = [[18, 64, codes["no"]], [65, 89, codes["yes"]]]
    assert answer_rules(frame, schema, [{**cand, "intervals": entries}], "check").tolist() == [1]
    narrowed = [[18, 25, codes["no"]], [65, 89, codes["yes"]]]
    assert answer_rules(frame, schema, [{**cand, "intervals": narrowed}], "check").tolist() == [0]
    # a "yes" among the present "no" rows: no step here
    broken = frame.assign(senior=frame["senior"].where(frame.index != 1, "yes"))
    assert answer_rules(broken, schema, [cand], "check").tolist() == [0]


def test_a_value_held_only_where_the_source_is_missing_is_not_in_the_rule():
    """``senior`` missing exactly where ``age`` is: the rule lists no and yes (the
    missing rows hold no age), and the chain draws the missing value there."""
    frames = people(n=150)
    for f in frames:
        f["senior"] = f["senior"].where(f["age"].notna(), None)
    rule = detect(frames)["senior"]
    assert [e[2] for e in rule.intervals] == ["no", "yes"]
    out = FITSSynthesizer(seed=0).fit(frames).sample(600, seed=0)
    has = out["age"].notna()
    assert ((out.loc[has, "senior"] == "yes") == (out.loc[has, "age"] >= 65)).all()
    assert out.loc[~has, "senior"].isna().mean() > 0.8


def test_its_column_is_tuned_where_the_rule_does_not_set_it():
    """Drawn by the chain where age is missing: tuned as a function rule's column."""
    frames = people(n=100, k=2)
    synth = FITSSynthesizer(seed=0, smoothing="auto").fit(frames)
    rule = next(r for r in synth.schema_.rules if r.column == "senior")
    assert not sets_every_row(synth.schema_, rule)
    assert "senior" in synth.coordinator.tuning
    # and its relevance weights can be learned (its kernel draws the rows without age)
    searched = FITSSynthesizer(seed=0, tune_relevance=["senior"]).fit(frames)
    assert searched.coordinator.smoothing["senior"].relevance
    full = Schema.detect([f.dropna() for f in frames])
    assert sets_every_row(full, next(r for r in full.rules if r.column == "senior"))


def test_a_users_rule_of_a_source_with_missing_values(frames, fitted):
    d = fitted.schema_.to_dict()
    rule = next(r for r in d["rules"] if r["column"] == "senior")
    rule["intervals"] = [[0, 64, "no"], [65, 120, "yes"]]  # widened: holds
    widened = FITSSynthesizer(seed=0, schema=Schema.from_dict(d)).fit(frames)
    out = widened.sample(300, seed=0)
    has = out["age"].notna()
    assert ((out.loc[has, "senior"] == "yes") == (out.loc[has, "age"] >= 65)).all()
    rule["intervals"] = [[0, 59, "no"], [60, 120, "yes"]]  # moved: some rows break it
    with pytest.raises(SchemaError, match=r"interval rule for column 'senior'.*does not hold"):
        FITSSynthesizer(seed=0, schema=Schema.from_dict(d)).fit(frames)


def test_rules_kept_leaves_out_the_rows_without_a_source():
    rule = Rule("senior", ["age"], "interval", intervals=[[18, 64, "no"], [65, 89, "yes"]])
    table = pd.DataFrame(
        {"age": [20, 70, 30, np.nan, np.nan], "senior": ["no", "yes", "yes", "no", "yes"]}
    )
    row = rules_kept(table, [rule]).iloc[0]
    assert (row["rows"], row["kept"]) == (3, pytest.approx(2 / 3))
    assert rules_kept(table.iloc[3:], [rule]).iloc[0]["rows"] == 0


def test_known_values_with_missing_ages(fitted):
    known = pd.DataFrame({"age": [20.0, np.nan, 70.0, np.nan] * 10})
    out = fitted.sample_remaining_columns(known, seed=0)
    has = known["age"].notna()
    assert out["age"].isna().tolist() == (~has).tolist()
    assert (out.loc[has, "senior"] == np.where(known.loc[has, "age"] >= 65, "yes", "no")).all()
    assert out.loc[~has, "senior"].isin(["yes", "no"]).all()
    # senior between age and a known score: the rule cannot give it where age is missing
    with pytest.raises(ValueError, match=r"2 known row\(s\) have no 'age'.*give the column"):
        fitted.sample_remaining_columns(
            pd.DataFrame({"age": [20.0, np.nan, 70.0, np.nan], "score": 0.0}), seed=0
        )
    given = pd.DataFrame(
        {"age": [20.0, np.nan, 70.0], "senior": ["no", "yes", "yes"], "score": 0.0}
    )
    out = fitted.sample_remaining_columns(given, seed=0)
    assert out["senior"].tolist() == ["no", "yes", "yes"]
