"""``fits ... | head -1``: a reader that closes the pipe before the command has printed
everything. The command exits quietly, as a Unix tool ended by SIGPIPE does: no
traceback, no message, exit status 141 (128 + SIGPIPE); it exited 1 (click's choice).

The installed ``fits`` runs through a real pipe whose reading end is closed before the
command starts, so that its first write to stdout fails (a ``head -1`` that has read
its line closes the pipe the same way, only later).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

FITS = shutil.which("fits", path=str(Path(sys.executable).parent)) or "fits"
CLOSED_STDOUT = 128 + signal.SIGPIPE


def run_into_closed_pipe(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``fits args`` with stdout a pipe nobody reads any more."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    try:
        return subprocess.run(
            [FITS, *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=cwd,
        )
    finally:
        os.close(write_end)


@pytest.fixture()
def sites(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 80, 120),
            "smoker": rng.choice(["yes", "no"], 120),
        }
    )
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:60].to_csv(paths[0], index=False)
    frame.iloc[60:].to_csv(paths[1], index=False)
    return paths


@pytest.mark.parametrize(
    "args", [["--help"], ["synthesize", "--help"], ["federate", "local", "--help"]]
)
def test_help_into_a_closed_pipe_exits_quietly(args):
    res = run_into_closed_pipe(*args)
    assert res.stderr == ""
    assert res.returncode == CLOSED_STDOUT


def test_help_read_to_the_end_still_exits_0():
    res = subprocess.run([FITS, "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "synthesize" in res.stdout and res.stderr == ""


def test_schema_into_a_closed_pipe_writes_its_file_and_exits_quietly(sites, tmp_path):
    out = tmp_path / "schema.json"
    res = run_into_closed_pipe("schema", *map(str, sites), "--out", str(out))
    assert res.stderr == ""
    assert res.returncode == CLOSED_STDOUT
    assert '"order"' in out.read_text()  # written whole before the summary was printed


def test_synthesize_into_a_closed_pipe_keeps_its_table(sites, tmp_path):
    out = tmp_path / "s.csv"
    res = run_into_closed_pipe(
        "synthesize", *map(str, sites), "--rows", "30", "--out", str(out), "--quiet"
    )
    assert "Traceback" not in res.stderr and "error" not in res.stderr, res.stderr
    assert res.returncode == CLOSED_STDOUT
    assert len(pd.read_csv(out)) == 30  # the table is written before the summary
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_demo_into_a_closed_pipe_is_not_a_full_disk(tmp_path):
    """fits demo took the closed stdout for a failed write of its outputs
    (``--out ...: cannot write it (Broken pipe)``, exit 2)."""
    res = run_into_closed_pipe("demo", "--out", str(tmp_path / "d"), "--rows", "200", "--quiet")
    assert res.stderr == ""
    assert res.returncode == CLOSED_STDOUT


def test_a_data_error_with_a_closed_stdout_is_still_reported(sites, tmp_path):
    res = run_into_closed_pipe(
        "synthesize", str(sites[0]), str(tmp_path / "missing.csv"), "--rows", "5",
        "--out", str(tmp_path / "s.csv"),
    )  # fmt: skip
    assert res.returncode == 2 and "missing.csv" in res.stderr
    assert "Traceback" not in res.stderr


_OTHER_PIPE = """
import sys
from fits.cli.errors import closed_stdout_ends_quietly
with closed_stdout_ends_quietly():
    raise BrokenPipeError(32, "Broken pipe")  # not stdout's: a child's pipe, a socket
"""


def test_a_broken_pipe_that_is_not_stdout_keeps_its_traceback():
    res = subprocess.run(
        [sys.executable, "-c", _OTHER_PIPE], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 1 and "BrokenPipeError" in res.stderr
