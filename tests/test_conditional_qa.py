"""``fits synthesize --known FILE`` as a new user meets it (QA pass of conditional
sampling): the refusals of a known file's values say what to do with the file.

* A missing value in a known column the sites have no missing values in said to
  ``set "missing": true`` (a schema edit, and one that cannot help: the sites hold no
  missing value to draw from); it now says to give a value in those rows of the file
  or leave them out.
* A category written with another case or surrounding spaces (``female``,
  `` Female ``; or ``Female`` against sites that wrote `` Female``) was refused as
  unknown without a word on why; the refusal now names the category it stands for.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process as run


def _sites(tmp_path: Path, pad: str = "") -> list[str]:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "sex": rng.choice([f"{pad}Female", f"{pad}Male"], 160),
            "age": rng.integers(18, 80, 160),
            "smoker": rng.choice(["yes", "no"], 160),
        }
    )
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:80].to_csv(paths[0], index=False)
    frame.iloc[80:].to_csv(paths[1], index=False)
    return [str(p) for p in paths]


def _known(tmp_path: Path, text: str) -> str:
    path = tmp_path / "known.csv"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "column"),
    [("sex,smoker\n,yes\nMale,no\n", "sex"), ("sex,age\nFemale,\nMale,40\n", "age")],
    ids=["discrete", "continuous"],
)
def test_a_missing_known_value_says_to_fill_the_file(tmp_path, text, column):
    out = tmp_path / "s.csv"
    known = _known(tmp_path, text)
    res = run("synthesize", *_sites(tmp_path), "--known", known, "--out", out, "--quiet")
    assert res.returncode == 1, res.stderr
    assert f"column {column!r} has" in res.stderr and "missing value" in res.stderr
    assert '"missing": true' not in res.stderr, res.stderr  # no schema in sight
    assert "give a value in those rows of the file, or leave the rows out" in res.stderr
    assert "Traceback" not in res.stderr and not out.exists()


@pytest.mark.parametrize(
    ("pad", "given", "meant"),
    [("", "female", "Female"), ("", " Female ", "Female"), (" ", "Female", " Female")],
    ids=["case", "spaces", "sites-spaces"],
)
def test_a_category_written_differently_is_named(tmp_path, pad, given, meant):
    out = tmp_path / "s.csv"
    known = tmp_path / "known.csv"
    pd.DataFrame({"sex": [given, f"{pad}Male"]}).to_csv(known, index=False)
    res = run("synthesize", *_sites(tmp_path, pad), "--known", known, "--out", out, "--quiet")
    assert res.returncode == 1, res.stderr
    assert "not among its categories" in res.stderr
    assert f"{given!r} stands for {meant!r}" in res.stderr, res.stderr
    assert "case and spaces" in res.stderr and not out.exists()
    assert len(res.stderr.strip().splitlines()) == 1


def test_an_unknown_category_gets_no_such_hint(tmp_path):
    known = _known(tmp_path, "sex\nMartian\n")
    res = run("synthesize", *_sites(tmp_path), "--known", known, "--out", tmp_path / "s.csv", "-q")
    assert res.returncode == 1 and "'Martian'" in res.stderr and "stands for" not in res.stderr


def test_dates_in_two_formats_are_refused_on_one_line(tmp_path):
    """A known date column with ``2011-06-01`` and ``06/02/2011`` was refused with
    pandas' message of five lines (its advice on ``format=``, for a programmer)."""
    days = pd.date_range("2011-01-01", periods=160, freq="D").strftime("%Y-%m-%d")
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"day": days, "n": rng.integers(0, 50, 160)})
    sites = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:80].to_csv(sites[0], index=False)
    frame.iloc[80:].to_csv(sites[1], index=False)
    known = _known(tmp_path, "day\n2011-03-01\n03/02/2011\n")
    out = tmp_path / "s.csv"
    res = run("synthesize", *sites, "--known", known, "--out", out, "--quiet")
    assert res.returncode == 1, res.stderr
    assert "'day'" in res.stderr and "06/02/2011" not in res.stderr
    assert "03/02/2011" in res.stderr and "not dates" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not out.exists()


def test_unmatched_rows_give_the_options_and_the_files_row(tmp_path):
    """Known rows the draws did not match ended with the library's words for a
    programmer: ``the known row at position 3`` (0-based), ``order=[...]`` and
    ``max_tries``; it now names the file's row (1-based), the ``--order`` that puts the
    known columns first and ``--max-tries`` with its value."""
    known = tmp_path / "known.csv"
    # 20 rows of one value: one try each matches them all only if every draw agrees
    # (10 "yes" and 10 "no" did at about 18% of the draws: with one seed's, once)
    pd.DataFrame({"smoker": ["yes"] * 20}).to_csv(known, index=False)
    out = tmp_path / "s.csv"
    res = run(
        "synthesize", *_sites(tmp_path), "--known", known, "--out", out, "--quiet",
        "--max-tries", "1",
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert "--order smoker,sex,age" in res.stderr, res.stderr
    assert "--max-tries, now 1" in res.stderr
    assert "order=[...]" not in res.stderr and "(max_tries)" not in res.stderr
    assert "position" not in res.stderr and " row " in res.stderr and "of the file" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not out.exists()
