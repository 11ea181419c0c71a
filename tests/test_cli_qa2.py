"""`fits synthesize`, `fits schema` and `fits benchmark` as a data steward meets them
(second command-line QA pass): the mends of what the first passes left, each on small
tables the tests write themselves."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process as run


@pytest.fixture()
def sites(tmp_path: Path) -> list[Path]:
    """Two sites of 80 rows: a number, a label with accents and a yes/no column."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 80, 160),
            "city": rng.choice(["Zürich", "Genève", "Köln"], 160),
            "smoker": rng.choice(["yes", "no"], 160),
        }
    )
    paths = [tmp_path / "site_a.csv", tmp_path / "site_b.csv"]
    frame.iloc[:80].to_csv(paths[0], index=False)
    frame.iloc[80:].to_csv(paths[1], index=False)
    return paths


# ---------------------------------------------------------------------------------------
# A stop signal during the release check, after the table is written
# ---------------------------------------------------------------------------------------

_STOPPED_IN_THE_CHECK = """
import os, signal, sys, time
from fits.evaluation import copies

def result(self):  # as if the check of a large table were under way
    os.kill(os.getpid(), signal.{sig})
    time.sleep(60)
    raise AssertionError("the signal did not stop the command")

copies.ReleaseCheck.result = result
from fits.cli.main import app
sys.argv[0] = "fits"
app()
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_in_the_release_check_says_the_table_is_written(sites, tmp_path, sig):
    """The release check runs after the table is put in place (on large sites it takes
    seconds to minutes). A stop signal there ended the command without a word (SIGTERM:
    killed by the signal; SIGINT: exit 130, silent); it now says that the table is
    written and complete and only the check was not finished, and exits 128 + N."""
    out = tmp_path / "synthetic.csv"
    code = _STOPPED_IN_THE_CHECK.replace("{sig}", sig.name)
    args = ["synthesize", *map(str, sites), "--rows", "50", "--out", str(out), "-q"]
    res = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 128 + sig, (res.returncode, res.stderr)
    assert f"interrupted by {sig.name}" in res.stderr and "Traceback" not in res.stderr
    assert "is written and complete" in res.stderr and "release check" in res.stderr
    assert "no output was written" not in res.stderr
    assert len(pd.read_csv(out)) == 50  # the table stays: it was complete


def test_a_slow_release_check_says_what_it_does(sites, tmp_path, monkeypatch):
    """The check of many real rows takes seconds to minutes after the "wrote" line:
    a line on stderr says what runs (none with --quiet)."""
    import fits.cli.main as cli_main

    monkeypatch.setattr(cli_main, "SLOW_RELEASE_CHECK_ROWS", 100)
    out = tmp_path / "synthetic.csv"
    res = run("synthesize", *sites, "--rows", 20, "--out", out)
    assert res.returncode == 0, res.stderr
    assert "release check: distances of 20 synthetic rows to the sites' 160 rows" in res.stderr
    quiet = run("synthesize", *sites, "--rows", 20, "--out", out, "-q")
    assert quiet.returncode == 0 and "release check" not in quiet.stderr


# ---------------------------------------------------------------------------------------
# fits schema --out
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["schema.csv", "synthetic.parquet", "schema.txt", "schema"])
def test_schema_out_must_be_a_json_file(sites, tmp_path, name):
    """`fits schema --out schema.csv` wrote JSON into a .csv file (a table's name: one
    typed `fits schema` for `fits synthesize`); a path not ending in .json is now a
    usage error, before anything is read, and nothing is written."""
    out = tmp_path / name
    res = run("schema", *sites, "--out", out)
    assert res.returncode == 2, res.stderr
    assert f"--out {str(out)!r}" in res.stderr and "JSON" in res.stderr
    assert "schema.json" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()
    ok = run("schema", *sites, "--out", tmp_path / "Schema.JSON")
    assert ok.returncode == 0, ok.stderr
