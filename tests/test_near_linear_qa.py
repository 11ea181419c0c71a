"""A stranger's tables through near-linear columns' user paths (fits synthesize,
fits schema and its edits, fits report, fits federate local): regressions of the
defects a QA round found."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process as run


def _sites(tmp_path: Path, n: tuple[int, ...] = (300, 250, 200)) -> list[Path]:
    """Site CSVs of incomes: ``income2`` a near-copy of ``income`` and ``copy`` an
    exact copy of ``income2`` missing in a fifth of the rows; and a stay (dates as
    text, ``discharged = admitted + 0 to 29 days``)."""
    paths = []
    for s, rows in enumerate(n):
        rng = np.random.default_rng(s)
        income = rng.normal(50_000, 15_000, rows)
        income2 = (income + rng.normal(0, 50, rows)).round(2)
        copy = income2.copy()
        copy[rng.random(rows) < 0.2] = np.nan
        admitted = pd.Timestamp("2021-01-01") + pd.to_timedelta(
            rng.integers(0, 3 * 365, rows), unit="D"
        )
        discharged = admitted + pd.to_timedelta(rng.integers(0, 30, rows), unit="D")
        t = pd.DataFrame(
            {
                "admitted": admitted.strftime("%Y-%m-%d"),
                "discharged": discharged.strftime("%Y-%m-%d"),
                "income": income.round(2),
                "income2": income2,
                "copy": copy,
            }
        )
        paths.append(tmp_path / f"site{s}.csv")
        t.to_csv(paths[-1], index=False)
    return paths


def test_an_exact_copy_with_missing_values_does_not_cost_its_columns_their_rules(
    tmp_path: Path,
) -> None:
    """``copy`` equals ``income2`` wherever present: that pair has R^2 = 1 and a
    constant residual, so it is dropped at the residual bounds; before, it had already
    taken ``income2`` and ``copy`` out of the selection, and both were drawn by the
    chain (correlation with ``income`` 0.76 against 0.99999)."""
    sites = _sites(tmp_path)
    schema = tmp_path / "s.json"
    res = run("schema", *sites, "--out", schema)
    assert res.returncode == 0, res.stderr
    rules = {r["column"]: r for r in json.loads(schema.read_text())["rules"]}
    assert rules["income2"]["kind"] == "linear" and rules["income2"]["of"] == ["income"]
    assert rules["copy"]["kind"] == "linear" and rules["copy"]["of"] == ["income"]
    out = tmp_path / "out.csv"
    res = run("synthesize", *sites, "--rows", "300", "--out", out, "--seed", "1", "-q")
    assert res.returncode == 0, res.stderr
    syn = pd.read_csv(out)
    for y in ("income2", "copy"):
        both = syn[["income", y]].dropna()
        assert np.corrcoef(both["income"], both[y])[0, 1] > 0.999


def test_a_known_stay_off_the_real_durations_is_told_as_a_duration(tmp_path: Path) -> None:
    """A known discharge before its admission is refused (exit 1) naming the real
    durations, not the residual's bounds in seconds since 1970 (+-1.3e+06)."""
    sites = _sites(tmp_path)
    known = tmp_path / "known.csv"
    known.write_text("admitted,discharged\n2022-01-10,2022-01-01\n")
    out = tmp_path / "out.csv"
    order = "admitted,discharged,income,income2,copy"
    res = run("synthesize", *sites, "--known", known, "--order", order, "--out", out, "-q")
    assert res.returncode == 1, res.stderr
    assert "a duration from 'admitted' outside [0 days, 29 days]: -9 days in the first" in (
        res.stderr
    )
    assert "e+06" not in res.stderr and "+00:00:00" not in res.stderr
    assert not out.exists()


def test_a_schema_whose_duration_bounds_are_too_narrow_is_told_in_durations(
    tmp_path: Path,
) -> None:
    """A user narrows a datetime pair's residual bounds in the schema file: refused
    (exit 1) naming the file, the rule as a duration and the unit of "lower"/"upper"
    (seconds about the intercept), not as ``1 * admitted + 1.28e+06``."""
    sites = _sites(tmp_path)
    schema = tmp_path / "s.json"
    assert run("schema", *sites, "--out", schema).returncode == 0
    doc = json.loads(schema.read_text())
    for rule in doc["rules"]:
        if rule["column"] == "discharged":
            rule["lower"], rule["upper"] = -1.0, 1.0
    schema.write_text(json.dumps(doc))
    out = tmp_path / "out.csv"
    res = run("synthesize", *sites, "--schema", schema, "--rows", "50", "--out", out, "-q")
    assert res.returncode == 1, res.stderr
    assert f"--schema {str(schema)!r}" in res.stderr
    assert "discharged = admitted + duration in [" in res.stderr
    assert "has durations outside those bounds" in res.stderr
    assert 'seconds about its "intercept"' in res.stderr
    assert "1 * admitted" not in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()


def test_fallback_notes_of_the_draw_are_one_note_per_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows a near-linear column draws by a fallback are told once per column over
    the whole draw, as ``note: ...``; before, each chunk's DataNote escaped the CLI as
    a raw Python warning (``.../synthesizer.py:1141: DataNote: ...`` and a source line)."""
    from fits.federation.coordinator import Coordinator

    original = Coordinator._note_fallbacks

    def one_more(self: Coordinator, before: dict[str, tuple[int, int]]) -> None:
        counts = self.truncation_fallbacks.setdefault("income2", [0, 0])
        counts[0] += 1  # one row per draw from the residual's marginal
        original(self, before)

    monkeypatch.setattr(Coordinator, "_note_fallbacks", one_more)
    sites = _sites(tmp_path)
    out = tmp_path / "out.csv"
    res = run("synthesize", *sites, "--rows", "3000", "--out", out, "--seed", "1", "-q")
    assert res.returncode == 0, res.stderr
    notes = [x for x in res.stderr.splitlines() if "near-linear residual" in x]
    assert len(notes) == 1, res.stderr
    assert notes[0].startswith("note: column 'income2' (drawn as its near-linear residual): ")
    assert "DataNote" not in res.stderr and "FallbackNote" not in res.stderr


def _stays(tmp_path: Path) -> list[pd.DataFrame]:
    return [pd.read_csv(p, parse_dates=["admitted", "discharged"]) for p in _sites(tmp_path)]


def test_the_report_tells_a_pair_of_dates_as_durations(tmp_path: Path) -> None:
    """fits report's near-linear section on a pair of dates: the fit's slope-1 line
    (intercept + residual is the stay) and its figures as durations, whether the rule
    is the synthesizer's (in seconds: before, shown as ``1 * admitted + 1.2998e+06``
    with its bounds, +-1.3e+06 seconds, read as days, so every synthetic row was
    "within") or found on the report's tables (as numbers in days: before, a fitted
    slope 0.99997 and bare figures in days)."""
    from fits import FITSSynthesizer, evaluate

    frames = _stays(tmp_path)
    real = pd.concat(frames, ignore_index=True)
    synth = FITSSynthesizer(seed=0).fit(frames)
    synthetic = synth.sample(300, seed=1)
    opts = {"utility": False, "privacy": False, "n_jobs": 1}
    for settings in (synth, None):
        rep = evaluate(real, synthetic, clients=frames, settings=settings, **opts)
        row = next(r for r in rep.data["near_linear"] if r["column"] == "discharged")
        assert row["rule"] == "discharged = admitted + duration"
        assert row["slope"] == 1.0
        assert row["duration_text"]["lower"] == "0 days"
        assert row["duration_text"]["upper"] == "29 days"
        assert re.fullmatch(r"\d+ days( \d+ hours?)?", row["duration_text"]["real_sd"])
        assert row["within"] == 1.0  # fits keeps every stay within the real ones
        assert 0.7 < row["sd_ratio"] < 1.3
        page = rep.to_html()
        assert "<td>29 days</td>" in page
        assert any(
            line.startswith("Near-linear discharged on admitted: residual sd about the line, real ")
            and re.search(r" days( \d+ hours?)?, synthetic ", line)
            for line in rep.summary().splitlines()
        )


@pytest.mark.parametrize(
    ("seconds", "parts", "told"),
    [
        (0.0, 4, "0 days"),
        (-0.0, 4, "0 days"),
        (29 * 86400, 4, "29 days"),
        (-9 * 86400, 4, "-9 days"),  # pandas: "-9 days +00:00:00"
        (-(86400 + 2 * 3600), 4, "-1 day 2 hours"),  # pandas: "-2 days +22:00:00"
        (3 * 3600 + 15 * 60, 4, "3 hours 15 minutes"),
        (86400 + 60 + 1, 4, "1 day 1 minute 1 second"),
        (90.5, 4, "1 minute 30.5 seconds"),
        (-0.000125, 4, "-0.000125 seconds"),
        (29 * 86400 - 5e-7, 4, "29 days"),  # float noise in intercept + bound
        (8.6 * 86400, 2, "8 days 14 hours"),  # 14.4 hours, rounded
        (-(86400 - 30), 2, "-1 day"),  # 23 h 59 min 30 s: rounds up to a day
        (float("nan"), 4, ""),
    ],
)
def test_a_duration_is_worded_for_people(seconds: float, parts: int, told: str) -> None:
    """:func:`fits._dates.duration_text`: the units that are not 0, a minus sign in front
    of a negative duration's size, ``"0 days"`` for none."""
    from fits._dates import duration_text

    assert duration_text(seconds, parts=parts) == told


def test_a_rule_with_negative_and_sub_day_durations_is_told_in_words() -> None:
    """``Rule.describe(clock=True)`` words the bounds intercept + lower and intercept +
    upper, where before a negative one read ``-9 days +00:00:00`` and ``-2 days
    +22:00:00`` (26 hours before)."""
    from fits.core.schema import Rule

    def rule(first: float, last: float) -> Rule:
        b = (first + last) / 2  # any intercept: the bounds are told about it
        return Rule(
            "out", ["in"], "linear", slope=1.0, intercept=b, lower=first - b, upper=last - b
        )

    told = {
        (-9 * 86400, 0): "[-9 days, 0 days]",
        (-26 * 3600, 3 * 3600 + 15 * 60): "[-1 day 2 hours, 3 hours 15 minutes]",
        (60, 86400 + 30.25): "[1 minute, 1 day 30.25 seconds]",
    }
    for (first, last), bounds in told.items():
        assert rule(first, last).describe(clock=True) == (
            f"out = in + duration in {bounds} (near-linear)"
        )


def test_fits_schema_tells_negative_durations_in_words(tmp_path: Path) -> None:
    """``fits schema`` on visits whose end is from 26 hours before to 3 hours 15
    minutes after their start (a clock correction): the near-linear rule's durations
    are told as words, not ``-2 days +22:00:00``."""
    paths = []
    for s, rows in enumerate((200, 150)):
        rng = np.random.default_rng(s)
        start = pd.Timestamp("2021-01-01") + pd.to_timedelta(
            rng.integers(0, 3 * 365 * 24, rows), unit="h"
        )
        quarters = rng.integers(-104, 14, rows)  # -26 h to 3 h 15 min, in 15 minutes
        quarters[:2] = [-104, 13] if s == 0 else [0, 1]
        end = start + pd.to_timedelta(quarters * 15, unit="min")
        fmt = "%Y-%m-%d %H:%M:%S"
        t = pd.DataFrame({"start": start.strftime(fmt), "end": end.strftime(fmt)})
        paths.append(tmp_path / f"site{s}.csv")
        t.to_csv(paths[-1], index=False)
    res = run("schema", *paths, "--out", tmp_path / "s.json")
    assert res.returncode == 0, res.stderr
    assert (
        "  end = start + duration in [-1 day 2 hours, 3 hours 15 minutes] in steps of "
        "1 minute (near-linear)" in res.stdout.splitlines()
    ), res.stdout
    assert "+22:00:00" not in res.stdout


def test_a_wide_tables_later_pairs_are_looked_at() -> None:
    """120 numeric columns make 7,140 candidate pairs of each search, more than the
    5,000 both looked at until 2026-12-03 (through column c100): a near-copy
    (c110 = 2 c100 + noise) and an exact conversion (c115 = 1.8 c105 + 32) past them
    went to the chain, each with a note.  Now every pair up to 316 columns is looked
    at: both are found, and nothing is noted."""
    import warnings

    from fits.core.schema import Schema

    rng = np.random.default_rng(0)
    t = pd.DataFrame({f"c{j}": rng.normal(j, 1, 60).round(3) for j in range(120)})
    t["c110"] = (2 * t["c100"] + rng.normal(0, 0.01, 60)).round(3)
    t["c115"] = (1.8 * t["c105"] + 32).round(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        schema = Schema.detect({"a": t.iloc[:30], "b": t.iloc[30:]})
    rules = {r.column: r for r in schema.rules or []}
    assert (rules["c110"].kind, rules["c110"].of) == ("linear", ["c100"])
    assert rules["c110"].slope == pytest.approx(2, abs=0.01)
    assert (rules["c115"].kind, rules["c115"].of) == ("affine", ["c105"])
    assert (rules["c115"].slope, rules["c115"].intercept) == (1.8, 32)
    assert [str(w.message) for w in caught if "candidate pairs" in str(w.message)] == []


@pytest.mark.parametrize(("width", "told"), [(316, False), (317, True)])
def test_the_near_linear_search_says_when_it_stops_at_its_cap(width: int, told: bool) -> None:
    """A wide table has more candidate pairs than :data:`MAX_NEAR_LINEAR_PAIRS`: the
    search says how many it looked at and through which column (a note), where before
    the later columns' near-copies were drawn by the chain without a word (300
    columns: c149 = 2 c100 + noise, R^2 1, was not looked at)."""
    import warnings

    from fits.core.rules import MAX_NEAR_LINEAR_PAIRS, near_linear_candidates
    from fits.core.schema import DataNote, Schema

    rng = np.random.default_rng(0)
    table = pd.DataFrame({f"c{j}": rng.normal(j, 1, 60).round(3) for j in range(width)})
    schema = Schema.detect({"a": table}, rules=False)
    pairs = width * (width - 1) // 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cands = near_linear_candidates(schema, 60)
    assert len(cands) == min(pairs, MAX_NEAR_LINEAR_PAIRS)
    notes = [str(w.message) for w in caught if issubclass(w.category, DataNote)]
    if told:
        assert notes == [
            f"near-linear columns: of {pairs:,} candidate pairs the search looks at the "
            f"first 50,000 in chain order (through column {cands[-1]['column']!r}), so a later "
            "column nearly linear in another is drawn by the chain, not as its residual; to "
            "have a pair looked at, put its two columns earlier in the chain (--order; "
            "Python: order=[...])"
        ]
    else:
        assert notes == []
