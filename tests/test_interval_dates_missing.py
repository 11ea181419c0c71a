"""Interval rules from a datetime source, and for a column with missing values
(docs/method.md, "Interval rules"): ``era`` = "pre-2020" / "post-2020" by a date
column, and ``senior`` missing for every age under 25 (missing is one more value of the
column, with its own interval of ``age``).  Found from the same check bits and ranges
as any interval rule, written in the schema (date-time bounds as ISO 8601 text, the
missing value as null), verified at every site when given, and kept in every synthetic
row; near misses are not found, and a table without such pairs is drawn bit for bit as
without the new candidates."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import fits.core.rules as rules_module
from fits import FITSSynthesizer
from fits._dates import seconds_text, text_seconds
from fits.core.rules import answer_rules, detect_rules, interval_candidates, ranges_size
from fits.core.schema import Rule, Schema, SchemaError, datetime_seconds
from fits.evaluation import rules_kept
from fits.io import read_table

from conftest import fits_in_process as run
from conftest import write_sites

CUT = pd.Timestamp("2020-01-01")


def dated(seed: int = 0, n: int = 150, k: int = 3) -> list[pd.DataFrame]:
    """k sites: ``day`` (whole days over 2015-2023, 2019-12-31 and 2020-01-01 among
    them), ``era`` = "post-2020" iff ``day``
    >= 2020-01-01, ``age`` (18-89), ``senior`` = "yes" iff ``age`` >= 65 and missing
    for every age under 25 (not asked), a later ``score``."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        day = pd.Timestamp("2015-01-01") + pd.to_timedelta(rng.integers(0, 9 * 365, n), unit="D")
        day = day.where(np.arange(n) != 0, CUT - pd.Timedelta(days=1))  # the steps' days
        day = day.where(np.arange(n) != 1, CUT)
        age = rng.integers(18, 90, n)
        senior = np.where(age >= 65, "yes", "no").astype(object)
        senior[age < 25] = None
        out.append(
            pd.DataFrame(
                {
                    "day": day,
                    "era": np.where(day >= CUT, "post-2020", "pre-2020"),
                    "age": age,
                    "senior": senior,
                    "score": rng.normal(0, 1, n).round(2),
                }
            )
        )
    return out


def pooled_intervals(frames, column, source, bound):
    """Per value of ``column`` (missing: None) [bound(min), bound(max), value] of the
    source over the pooled rows, sorted by the minimum."""
    pooled = pd.concat(frames, ignore_index=True)
    key = pooled[column].astype(object).where(pooled[column].notna(), "<missing>")
    g = pooled.groupby(key)[source].agg(["min", "max"]).sort_values("min")
    return [
        [bound(lo), bound(hi), None if v == "<missing>" else v]
        for v, lo, hi in zip(g.index, g["min"], g["max"], strict=True)
    ]


def day_text(t: pd.Timestamp) -> str:
    return t.date().isoformat()


def detect(frames):
    """detect_rules on the merged schema, every site answering from its rows."""
    merged = Schema.detect(frames, rules=False)
    schema = Schema(merged.columns, merged.order)

    def ask(stage, cands):
        return [answer_rules(f, schema, cands, stage) for f in frames]

    n = sum(len(f) for f in frames)
    found = detect_rules(schema, ask, [f"s{i}" for i in range(len(frames))], n)
    return {r.column: r for r in found}


@pytest.fixture(scope="module")
def frames() -> list[pd.DataFrame]:
    return dated()


@pytest.fixture(scope="module")
def fitted(frames):
    return FITSSynthesizer(seed=0).fit(frames)


def test_the_planted_rules_are_found(frames, fitted):
    by = {r.column: r for r in fitted.schema_.rules}
    assert {c: (r.kind, r.of) for c, r in by.items()} == {
        "era": ("interval", ["day"]),
        "senior": ("interval", ["age"]),
    }
    era = pooled_intervals(frames, "era", "day", day_text)
    assert by["era"].intervals == era
    assert [e[2] for e in era] == ["pre-2020", "post-2020"]
    assert era[0][1] < "2020-01-01" <= era[1][0]  # whole days: the dates alone
    assert by["senior"].intervals == pooled_intervals(frames, "senior", "age", int)
    assert by["senior"].intervals == [[18, 24, None], [25, 64, "no"], [65, 89, "yes"]]
    assert by["senior"].describe() == (
        "senior = by age: (missing) for [18, 24], no for [25, 64], yes for [65, 89]"
    )
    assert by["era"].describe() == (
        f"era = by day: pre-2020 for [{era[0][0]}, {era[0][1]}], "
        f"post-2020 for [{era[1][0]}, {era[1][1]}]"
    )


def test_a_sites_ranges_answer_for_the_new_pairs(frames):
    """Per value (missing: its own code) the count and the minimum and maximum of the
    source; a datetime source in seconds since 1970 UTC."""
    schema = Schema.detect(frames, rules=False)
    cands = [
        {"kind": "interval", "column": "senior", "of": ["age"]},
        {"kind": "interval", "column": "era", "of": ["day"]},
    ]
    answer = answer_rules(frames[0], schema, cands, "ranges")
    assert answer.shape == (ranges_size(schema, cands),) == (3 * 3 + 3 * 2,)
    senior, era = answer[:9].reshape(3, 3), answer[9:].reshape(2, 3)
    f = frames[0]
    gone = schema["senior"].categories.index(None)
    young = f["age"][f["senior"].isna()]
    assert senior[gone].tolist() == [len(young), young.min(), young.max()]
    post = schema["era"].categories.index("post-2020")
    seconds = datetime_seconds(f["day"][f["era"] == "post-2020"])
    assert era[post].tolist() == [seconds.size, seconds.min(), seconds.max()]
    assert answer_rules(f, schema, cands, "check").tolist() == [1, 1]


def test_the_planted_rules_are_kept_in_every_synthetic_row(fitted):
    rules = fitted.schema_.rules
    out = fitted.sample(600, seed=1)
    kept = rules_kept(out, rules).set_index("column")
    assert kept["kept"].eq(1.0).all()
    assert ((out["day"] >= CUT) == (out["era"] == "post-2020")).all()
    assert (out["senior"].isna() == (out["age"] < 25)).all()
    assert (
        out["senior"].dropna() == np.where(out["age"][out["age"] >= 25] >= 65, "yes", "no")
    ).all()
    assert set(out["era"]) == {"pre-2020", "post-2020"}
    assert out["senior"].isna().any() and set(out["senior"].dropna()) == {"yes", "no"}
    chunks = pd.concat(fitted.iter_sample(300, chunk_rows=100, seed=2), ignore_index=True)
    assert rules_kept(chunks, rules)["kept"].eq(1.0).all()


def test_switched_off_the_chain_breaks_them(frames, fitted):
    off = FITSSynthesizer(seed=0, rules=False).fit(frames)
    drawn = off.sample(600, seed=1)
    assert rules_kept(drawn, fitted.schema_.rules)["kept"].lt(1.0).all()


def test_a_saved_synthesizer_and_the_schema_json_keep_them(frames, fitted, tmp_path):
    loaded = FITSSynthesizer.load(fitted.save(tmp_path / "s.fits"))
    assert loaded.schema_.rules == fitted.schema_.rules
    loaded.connect(frames)
    pd.testing.assert_frame_equal(loaded.sample(200, seed=5), fitted.sample(200, seed=5))
    text = fitted.schema_.to_json()
    entries = {r["column"]: r for r in json.loads(text)["rules"]}
    assert entries["senior"]["intervals"][0] == [18, 24, None]  # null: the missing value
    assert all(isinstance(v, str) for e in entries["era"]["intervals"] for v in e[:2])
    back = Schema.from_json(text)
    assert back.rules == fitted.schema_.rules
    again = FITSSynthesizer(seed=0, schema=back).fit(frames)  # verified at every site
    assert again.schema_.rules == back.rules
    assert rules_kept(again.sample(200), back.rules)["kept"].eq(1.0).all()


def test_an_edited_rule_is_verified_at_every_site(frames, fitted):
    d = fitted.schema_.to_dict()
    era = next(r for r in d["rules"] if r["column"] == "era")
    senior = next(r for r in d["rules"] if r["column"] == "senior")
    # widened to whole years: still holds in every row
    era["intervals"] = [
        ["2015-01-01", "2019-12-31", "pre-2020"],
        ["2020-01-01", "2023-12-31", "post-2020"],
    ]
    widened = FITSSynthesizer(seed=0, schema=Schema.from_dict(d)).fit(frames)
    out = widened.sample(300, seed=0)
    assert ((out["day"] >= CUT) == (out["era"] == "post-2020")).all()
    # moved by a year: some site's rows break it
    era["intervals"] = [
        ["2015-01-01", "2018-12-31", "pre-2020"],
        ["2019-01-01", "2023-12-31", "post-2020"],
    ]
    with pytest.raises(SchemaError, match=r"interval rule for column 'era'.*does not hold"):
        FITSSynthesizer(seed=0, schema=Schema.from_dict(d)).fit(frames)
    # the missing value's entry left out: the missing rows break it
    era["intervals"] = [
        ["2015-01-01", "2019-12-31", "pre-2020"],
        ["2020-01-01", "2023-12-31", "post-2020"],
    ]
    senior["intervals"] = senior["intervals"][1:]
    with pytest.raises(SchemaError, match=r"interval rule for column 'senior'.*does not hold"):
        FITSSynthesizer(seed=0, schema=Schema.from_dict(d)).fit(frames)


@pytest.mark.parametrize(
    ("rule", "match"),
    [
        (
            {
                "column": "era",
                "of": ["day"],
                "intervals": [[0, 9, "pre-2020"], [10, 20, "post-2020"]],
            },
            "a datetime column; write its bounds as ISO 8601 date-time text",
        ),
        (
            {
                "column": "senior",
                "of": ["age"],
                "intervals": [
                    ["2015-01-01", "2016-01-01", "no"],
                    ["2017-01-01", "2018-01-01", "yes"],
                ],
            },
            "a number column; write its bounds as numbers",
        ),
        (
            {
                "column": "era",
                "of": ["day"],
                "intervals": [
                    ["2015-01-01", 9, "pre-2020"],
                    ["2020-01-01", "2021-01-01", "post-2020"],
                ],
            },
            "mix numbers and date-time text",
        ),
        (
            {
                "column": "era",
                "of": ["day"],
                "intervals": [
                    ["2015-01-01", "2019-13-31", "pre-2020"],
                    ["2020-01-01", "2021-01-01", "post-2020"],
                ],
            },
            "not a finite number nor a date-time",
        ),
        (
            {
                "column": "era",
                "of": ["day"],
                "intervals": [
                    ["2015-01-01", "2020-06-01", "pre-2020"],
                    ["2020-01-01", "2021-01-01", "post-2020"],
                ],
            },
            "sorted by their low end and disjoint",
        ),
        (
            {
                "column": "era",
                "of": ["day"],
                "intervals": [
                    ["2015-01-01T00:00:00+01:00", "2019-12-31", "pre-2020"],
                    ["2020-01-01", "2021-01-01", "post-2020"],
                ],
            },
            "no time zone: give the bound without a UTC offset",
        ),
        (
            {
                "column": "era",
                "of": ["day"],
                "intervals": [
                    ["2015-01-01", "2019-12-31", None],
                    ["2020-01-01", "2021-01-01", "post-2020"],
                ],
            },
            r"None for column 'era', which is not among its categories \(it has no missing",
        ),
    ],
)
def test_a_malformed_rule_is_refused_naming_the_fix(fitted, rule, match):
    d = fitted.schema_.to_dict()
    d["rules"] = [{"kind": "interval", **rule}]
    with pytest.raises(SchemaError, match=match):
        Schema.from_dict(d)


# ------------------------------------------------------------------ near misses
def test_near_misses_are_not_found():
    """One row of ``era`` a day off the cut at one site, ``senior`` missing in a few
    scattered rows as well, missing rows whose ages overlap another value's, too few
    missing rows: none is a rule (the other planted rule still is)."""
    frames = dated(seed=1)
    off = [f.copy() for f in frames]
    i = int(np.flatnonzero(off[1]["era"] == "pre-2020")[0])
    off[1].loc[i, "day"] = pd.Timestamp("2021-06-01")  # a "pre-2020" row in 2021
    assert set(detect(off)) == {"senior"}
    scattered = [f.copy() for f in frames]
    scattered[2].loc[np.flatnonzero(scattered[2]["age"] >= 25)[:3], "senior"] = None
    assert set(detect(scattered)) == {"era"}
    overlap = [f.copy() for f in frames]  # the missing rows' ages across "no"'s
    for f in overlap:
        f["senior"] = np.where(f["age"] >= 65, "yes", "no").astype(object)
        f.loc[(f["age"] >= 25) & (f["age"] < 35) & (f.index % 2 == 0), "senior"] = None
    assert set(detect(overlap)) == {"era"}
    rare = [f.copy() for f in frames]  # 9 missing rows in the federation, all aged 18
    for k, f in enumerate(rare):
        f["senior"] = np.where(f["age"] >= 65, "yes", "no").astype(object)
        f.loc[f.index[:3], ["age", "senior"]] = [18, None]
        f.loc[(f["age"] < 25) & f["senior"].notna(), "age"] = 25 + k
    assert sum(int(f["senior"].isna().sum()) for f in rare) == 9
    assert set(detect(rare)) == {"era"}


def test_no_such_pair_leaves_the_output_bit_for_bit(monkeypatch):
    """A date and a column with missing values that are no step: the new candidates
    (a datetime source, a column with missing values) are asked and found no rule, and
    the output is the one without them, bit for bit."""
    rng = np.random.default_rng(6)
    frames = []
    for _ in range(2):
        day = pd.Timestamp("2018-01-01") + pd.to_timedelta(rng.integers(0, 900, 100), unit="D")
        flag = rng.choice(["a", "b"], 100).astype(object)
        flag[rng.random(100) < 0.2] = None
        frames.append(pd.DataFrame({"day": day, "x": rng.normal(0, 1, 100).round(2), "flag": flag}))
    schema = Schema.detect(frames, rules=False)
    pairs = {(c["column"], c["of"][0]) for c in interval_candidates(schema, 200)}
    assert pairs == {("flag", "day"), ("flag", "x")}
    on = FITSSynthesizer(seed=3).fit(frames)
    assert on.schema_.rules == []
    monkeypatch.setattr(rules_module, "interval_candidates", lambda *a, **k: [])
    off = FITSSynthesizer(seed=3).fit(frames)
    assert on.coordinator.rule_candidates["check"] > off.coordinator.rule_candidates.get("check", 0)
    pd.testing.assert_frame_equal(on.sample(300, seed=0), off.sample(300, seed=0))


# ------------------------------------------------------------------ a time zone
def test_a_source_with_a_time_zone():
    """Timestamps in Europe/Paris and a flag switched at an instant: the bounds carry
    the zone's offset, read back to the sites' seconds exactly, and the flag follows
    the written timestamp in every synthetic row."""
    rng = np.random.default_rng(2)
    switch = pd.Timestamp("2021-06-15 12:00", tz="Europe/Paris")
    frames = []
    for _ in range(2):
        minutes = rng.integers(0, 2 * 365 * 24 * 60, 150)
        at = pd.Timestamp("2020-06-01", tz="Europe/Paris") + pd.to_timedelta(minutes, unit="min")
        frames.append(
            pd.DataFrame(
                {
                    "at": at,
                    "phase": np.where(at >= switch, "new", "old"),
                    "v": rng.normal(0, 1, 150),
                }
            )
        )
    synth = FITSSynthesizer(seed=0).fit(frames)
    (rule,) = synth.schema_.rules
    assert rule.kind == "interval" and rule.of == ["at"]
    pooled = pd.concat(frames, ignore_index=True)
    seconds = datetime_seconds(pooled["at"])
    old = (pooled["phase"] == "old").to_numpy()
    assert [text_seconds(v) for v in rule.intervals[0][:2]] == [
        seconds[old].min(),
        seconds[old].max(),
    ]
    assert [text_seconds(v) for v in rule.intervals[1][:2]] == [
        seconds[~old].min(),
        seconds[~old].max(),
    ]
    assert all(v.endswith(("+01:00", "+02:00")) for e in rule.intervals for v in e[:2])
    out = synth.sample(500, seed=1)
    assert ((out["at"] >= switch) == (out["phase"] == "new")).all()
    assert rules_kept(out, synth.schema_.rules)["kept"].iloc[0] == 1.0
    back = Schema.from_json(synth.schema_.to_json())
    assert back.rules == synth.schema_.rules
    FITSSynthesizer(seed=0, schema=back).fit(frames)  # verified at both sites
    d = synth.schema_.to_dict()
    d["rules"][0]["intervals"][0][0] = d["rules"][0]["intervals"][0][0][:10]  # no offset
    with pytest.raises(SchemaError, match="in Europe/Paris: give the bound its UTC offset"):
        Schema.from_dict(d)


def test_a_datetime_source_drawn_as_a_near_linear_residual():
    """The source is itself a near-linear datetime column (``end`` = ``start`` + a
    duration, drawn as its residual, the engine's spec a float): the rule's date
    bounds are checked against the user's schema, and the flag follows the written
    ``end`` in every row."""
    rng = np.random.default_rng(3)
    frames = []
    for _ in range(2):
        start = pd.Timestamp("2018-01-01") + pd.to_timedelta(rng.integers(0, 1500, 150), unit="D")
        end = start + pd.to_timedelta(rng.integers(1, 30, 150), unit="D")
        late = np.where(end >= CUT, "y", "n")
        frames.append(pd.DataFrame({"start": start, "end": end, "late": late}))
    synth = FITSSynthesizer(seed=0).fit(frames)
    assert {r.column: (r.kind, r.of) for r in synth.schema_.rules} == {
        "end": ("linear", ["start"]),
        "late": ("interval", ["end"]),
    }
    out = synth.sample(400, seed=0)
    (rule,) = (r for r in synth.schema_.rules if r.kind == "interval")
    cut = (text_seconds(rule.intervals[0][1]) + text_seconds(rule.intervals[1][0])) / 2
    assert ((datetime_seconds(out["end"]) > cut) == (out["late"] == "y")).all()
    assert rules_kept(out, [rule])["kept"].iloc[0] == 1.0


def test_bounds_text_round_trips_to_the_sites_seconds():
    stamps = pd.Series(
        pd.to_datetime(
            ["2019-12-31", "2020-01-01 06:30:00.123456", "1969-07-20 20:17:40"], format="ISO8601"
        )
    )
    for v in datetime_seconds(stamps):
        assert text_seconds(seconds_text(v)) == v
    day = datetime_seconds(pd.Series(pd.to_datetime(["2019-12-31"])))[0]
    assert seconds_text(day, date_only=True) == "2019-12-31"
    assert seconds_text(day) == "2019-12-31T00:00:00"
    assert seconds_text(day, tz="America/New_York") == "2019-12-30T19:00:00-05:00"
    assert text_seconds("2019-12-30T19:00:00-05:00") == day
    with pytest.raises(ValueError, match="finer than a microsecond"):
        text_seconds("2020-01-01T00:00:00.0000001")


# ------------------------------------------------------------------ known values
def test_known_values_with_the_date_known(fitted):
    days = pd.to_datetime(["2016-03-01", "2019-12-31", "2020-01-01", "2023-02-02"] * 5)
    out = fitted.sample_remaining_columns(pd.DataFrame({"day": days}), seed=0)
    assert (out["era"] == np.where(days >= CUT, "post-2020", "pre-2020")).all()
    assert rules_kept(out, fitted.schema_.rules)["kept"].eq(1.0).all()
    bad = pd.DataFrame({"day": pd.to_datetime(["2016-03-01"]), "era": ["post-2020"]})
    with pytest.raises(ValueError, match=r"break the exact rule era = by day"):
        fitted.sample_remaining_columns(bad, seed=0)
    young = pd.DataFrame(
        {
            "day": days[:4],
            "era": ["pre-2020", "pre-2020", "post-2020", "post-2020"],
            "age": [20, 24, 25, 70],
        }
    )
    out = fitted.sample_remaining_columns(young, seed=0)
    assert out["senior"].isna().tolist() == [True, True, False, False]
    assert out["senior"].iloc[2:].tolist() == ["no", "yes"]


# ------------------------------------------------------------------ evaluation
def test_rules_kept_with_dates_and_missing_values():
    era = Rule(
        "era",
        ["day"],
        "interval",
        intervals=[["2015-01-01", "2019-12-31", "pre"], ["2020-01-01", "2023-12-31", "post"]],
    )
    text = ["2016-05-05", "2020-01-01", "2019-12-31 23:00:00", "2020-01-01", None, "2030-01-01"]
    values = ["pre", "post", "post", "pre", "pre", "post"]
    for day in (pd.Series(text), pd.Series(pd.to_datetime(text, format="ISO8601"))):
        row = rules_kept(pd.DataFrame({"day": day, "era": values}), [era]).iloc[0]
        # kept: 2016 pre, 2020 post, 2030 post (beyond: the last cell), and 23:00 on
        # the last pre day post (in no interval, nearer post's); not kept: pre on
        # 2020-01-01; a missing day: left out (the rule says nothing there)
        assert row["rows"] == 5
        assert row["kept"] == pytest.approx(4 / 5)
        assert row["uncovered"] == pytest.approx(2 / 5)
    senior = Rule(
        "senior", ["age"], "interval", intervals=[[18, 24, None], [25, 64, "no"], [65, 89, "yes"]]
    )
    table = pd.DataFrame({"age": [20, 20, 30, 70, 24.6], "senior": [None, "no", None, "yes", "no"]})
    row = rules_kept(table, [senior]).iloc[0]
    assert row["kept"] == pytest.approx(3 / 5)  # 20 missing, 70 yes, 24.6 no (nearer 25)
    assert (
        row["rule"] == "senior = by age: (missing) for [18, 24], no for [25, 64], yes for [65, 89]"
    )


# ------------------------------------------------------------------ CLI
def test_fits_schema_and_synthesize_on_csv_files(frames, tmp_path):
    paths = write_sites({f"site{i}": f for i, f in enumerate(frames)}, tmp_path)
    shown = run("schema", *paths, "--out", tmp_path / "schema.json")
    assert shown.returncode == 0, shown.stderr
    era = pooled_intervals(frames, "era", "day", day_text)
    assert f"era = by day: pre-2020 for [{era[0][0]}, {era[0][1]}]" in shown.stdout
    assert (
        "senior = by age: (missing) for [18, 24], no for [25, 64], yes for [65, 89]" in shown.stdout
    )
    rules = json.loads((tmp_path / "schema.json").read_text())["rules"]
    assert {r["column"]: r["intervals"] for r in rules} == {
        "era": era,
        "senior": [[18, 24, None], [25, 64, "no"], [65, 89, "yes"]],
    }
    args = ("--rows", 400, "--out", tmp_path / "s.csv", "--seed", 0)
    done = run("synthesize", *paths, "--schema", tmp_path / "schema.json", *args)
    assert done.returncode == 0, done.stderr
    out = read_table(tmp_path / "s.csv")
    assert ((out["day"] >= CUT) == (out["era"] == "post-2020")).all()
    assert (out["senior"].isna() == (out["age"] < 25)).all()
    assert rules_kept(out, rules)["kept"].eq(1.0).all()
    assert rules_kept(pd.read_csv(tmp_path / "s.csv"), rules)["kept"].eq(1.0).all()  # dates as text
    # detected in the run itself (no --schema): the same rules, the same table
    args = ("--rows", 400, "--out", tmp_path / "d.csv", "--seed", 0)
    detected = run("synthesize", *paths, *args)
    assert detected.returncode == 0, detected.stderr
    pd.testing.assert_frame_equal(read_table(tmp_path / "d.csv"), out)
