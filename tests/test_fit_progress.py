"""Progress of the fit: ``FITSSynthesizer.fit(on_phase=)`` and the lines ``fits
synthesize`` prints on stderr per phase of the fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer

from conftest import fits_in_process as run


def _frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.choice(["a", "b", "c"], n)
    x = rng.normal(size=n).round(3)
    y = (2 * x + (g == "b") + rng.normal(size=n)).round(3)
    return pd.DataFrame({"g": g, "x": x, "y": y, "k": rng.integers(0, 4, n)})


@pytest.fixture()
def site_files(tmp_path: Path) -> list[Path]:
    frame = _frame()
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:150].to_csv(paths[0], index=False)
    frame.iloc[150:].to_csv(paths[1], index=False)
    return paths


#: Every slow phase: rule detection, the tune round of --smoothing auto, the relevance
#: search's rounds and a boosted column's rounds (drawn before the first row).
OPTIONS = (
    "--smoothing", "auto", "--tune-relevance", "y", "--relevance-budget", "8",
    "--column-model", "k=boosting", "--boosting", "n_trees=4",
)  # fmt: skip
PHASES = [
    "setup round: 2 site(s) describe their tables",
    "rule detection over 4 columns",
    "rule detection: check round (",
    "configure round: 4 chain columns",
    "smoothing: one tune round (3 column(s), 6 candidates)",
    "relevance weights: 'y' (1 of 1; 2 covariates, up to 8 candidates)",
    "done; drawing the rows",
    "boosted models: 1 of ",
]


def test_fits_synthesize_says_the_phases_of_the_fit_in_order(site_files, tmp_path):
    loud, quiet = tmp_path / "loud.csv", tmp_path / "quiet.csv"
    res = run("synthesize", *site_files, "--rows", 100, "--out", loud, *OPTIONS)
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("[fit ")]
    assert lines, res.stderr
    at = []
    for phase in PHASES:
        hits = [k for k, line in enumerate(lines) if line.split("] ", 1)[1].startswith(phase)]
        assert hits, (phase, res.stderr)
        at.append(hits[0])
    assert at == sorted(at), res.stderr  # in the order the fit runs them
    assert lines[-1].endswith("boosted models: 21 of 21 rounds"), lines  # 1 + 4 trees x depth 5
    seconds = [float(line[5:].split(" s]")[0]) for line in lines]
    assert seconds == sorted(seconds)  # the seconds since the fit began
    assert "exact copies:" in res.stdout  # stdout keeps its lines, and only them
    assert "[fit" not in res.stdout

    res = run("synthesize", *site_files, "--rows", 100, "--out", quiet, *OPTIONS, "--quiet")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    assert loud.read_bytes() == quiet.read_bytes()  # the same table, bit for bit


def test_no_rules_and_fixed_smoothing_have_fewer_phases(site_files, tmp_path):
    res = run("synthesize", *site_files, "--rows", 50, "--out", tmp_path / "o.csv", "--no-rules")
    assert res.returncode == 0, res.stderr
    phases = [line.split("] ", 1)[1] for line in res.stderr.splitlines() if "[fit " in line]
    assert phases == [
        "setup round: 2 site(s) describe their tables",
        "configure round: 4 chain columns",
        "done; drawing the rows",
    ]


def test_on_phase_is_silent_by_default_and_changes_no_draw():
    frame = _frame()
    tables = {"a": frame.iloc[:150], "b": frame.iloc[150:]}
    params = {"seed": 3, "smoothing": "auto", "tune_relevance": "y", "relevance_budget": 8}
    said: list[str] = []
    told = FITSSynthesizer(**params).fit(tables, on_phase=said.append)
    plain = FITSSynthesizer(**params).fit(tables)
    assert said[0].startswith("setup round") and said[-1].startswith("relevance weights: 'y'")
    assert sum(s.startswith("configure round") for s in said) == 1
    n = len(said)
    pd.testing.assert_frame_equal(told.sample(200), plain.sample(200), check_exact=True)
    assert len(said) == n  # sampling says nothing through it
    assert told.coordinator.on_phase is None and plain.coordinator.on_phase is None
