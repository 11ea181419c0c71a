"""``--policy FILE`` on ``fits synthesize`` and ``fits federate local``: every site
enforces that file's limits (the ``fits`` command line, as a user runs it).

Each command is run twice: with a policy that refuses the coordinator's default grid
(exit code 1, the site and the limit named, no output), and with a permissive policy
on sites so small that the default policy stops the run (every site abstains below
k = 5 effective rows): the run then succeeds, which it can only do if every site
applied the file.

The commands that need no Flower run in this process (:func:`conftest.fits_in_process`:
the same exit code, stdout and stderr, without a Python start per command); the runs of
``fits federate local`` that start Flower (a SuperLink and SuperNodes) use the real
executable (subprocess).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import FITS
from conftest import fits_in_process as run


def run_installed(*args: object, timeout: int = 400) -> subprocess.CompletedProcess:
    """The installed `fits` command in a process of its own (the Flower runs)."""
    return subprocess.run(
        [FITS, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        preexec_fn=_die_with_parent(),  # a killed test run takes its federation with it
    )


def _die_with_parent():
    try:
        from fits.deploy.flower_launch import die_with_parent
    except ImportError:
        return None
    return die_with_parent()


@pytest.fixture()
def tiny_sites(tmp_path):
    """Three rows per site: under the default floor of 5 effective rows (no widening helps)."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    pd.DataFrame({"g": ["p", "q", "p"], "x": [1.0, 2.0, 1.5], "k": [1, 2, 3]}).to_csv(
        a, index=False
    )
    pd.DataFrame({"g": ["p", "r", "r"], "x": [3.0, 4.0, 3.5], "k": [5, 9, 7]}).to_csv(
        b, index=False
    )
    return [a, b]


@pytest.fixture()
def sites(tmp_path):
    frame = pd.DataFrame(
        {
            "g": ["p", "q", "r"] * 40,
            "x": [i * 0.37 % 5 for i in range(120)],
            "y": [i * 0.11 % 3 + (i % 3) for i in range(120)],
        }
    )
    paths = [tmp_path / "north.csv", tmp_path / "south.csv"]
    frame.iloc[:70].to_csv(paths[0], index=False)
    frame.iloc[70:].to_csv(paths[1], index=False)
    return paths


def _policy(tmp_path: Path, name: str, values: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(values))
    return path


def _refused(res: subprocess.CompletedProcess, out: Path) -> None:
    assert res.returncode == 1, res.stderr[-2000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and "refused the configuration" in last, res.stderr
    assert "max_grid_size" in last and "exceed its 10 points per column" in last
    assert "north" in last or "south" in last  # the site that refused is named
    assert "Traceback" not in res.stderr
    assert not out.exists()


def test_synthesize_policy_that_refuses(sites, tmp_path):
    out = tmp_path / "out.csv"
    policy = _policy(tmp_path, "strict.json", {"max_grid_size": 10})
    _refused(run("synthesize", *sites, "--rows", 20, "--out", out, "-q", "--policy", policy), out)


def test_synthesize_permissive_policy_applies_to_every_site(tiny_sites, tmp_path):
    out = tmp_path / "out.csv"
    res = run("synthesize", *tiny_sites, "--rows", 20, "--out", out, "-q")
    assert res.returncode == 1 and "every site would abstain" in res.stderr  # the default
    policy = _policy(tmp_path, "open.json", {"min_effective_rows": 0})
    res = run("synthesize", *tiny_sites, "--rows", 20, "--out", out, "-q", "--policy", policy)
    assert res.returncode == 0, res.stderr
    assert len(pd.read_csv(out)) == 20


def test_synthesize_pooled_floor_needs_secure_aggregation(tiny_sites, tmp_path):
    """Three rows per site: each site alone is under k = 5, the six rows together are not,
    so the pooled floor (with secure aggregation) carries what the site floor refuses."""
    out = tmp_path / "out.csv"
    policy = _policy(tmp_path, "pooled.json", {"floor_scope": "pooled"})
    for command in ("synthesize", "federate local"):
        res = run(*command.split(), *tiny_sites, "--rows", 20, "--out", out, "--policy", policy)
        assert res.returncode == 2 and "add --secure-aggregation" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and not out.exists()
    res = run(
        "synthesize",
        *tiny_sites,
        "--rows",
        20,
        "--out",
        out,
        "-q",
        "--policy",
        policy,
        "--secure-aggregation",
    )
    assert res.returncode == 0, res.stderr
    assert len(pd.read_csv(out)) == 20
    one = tiny_sites[:1]
    res = run("synthesize", *one, "--rows", 5, "--out", tmp_path / "o.csv", "--secure-aggregation")
    assert res.returncode == 2 and "at least two sites" in res.stderr, res.stderr
    assert not (tmp_path / "o.csv").exists()


def test_a_bad_policy_file_is_a_usage_error(tiny_sites, tmp_path):
    out = tmp_path / "out.csv"
    bad = _policy(tmp_path, "bad.json", {"max_grids": 5})
    for command in ("synthesize", "federate local"):
        res = run(*command.split(), *tiny_sites, "--rows", 5, "--out", out, "--policy", bad)
        assert res.returncode == 2, (command, res.stderr)
        assert "bad.json: unknown field(s) ['max_grids']" in res.stderr
        assert "Traceback" not in res.stderr
        missing = tmp_path / "nope.json"
        res = run(*command.split(), *tiny_sites, "--rows", 5, "--out", out, "--policy", missing)
        assert res.returncode == 2 and "no such file" in res.stderr, (command, res.stderr)
    assert not out.exists()


@pytest.mark.flower
@pytest.mark.slow
def test_federate_local_policy_that_refuses(sites, tmp_path):
    pytest.importorskip("flwr")
    out = tmp_path / "out.csv"
    policy = _policy(tmp_path, "strict.json", {"max_grid_size": 10})
    res = run_installed("federate", "local", *sites, "--rows", 20, "--out", out, "--policy", policy)
    _refused(res, out)


@pytest.mark.flower
@pytest.mark.slow  # a whole fits federate local run, 2 minutes in the clean-clone CI's serial
# Flower stage (20-minute budget); fits synthesize --policy and the federate refusal run in CI
def test_federate_local_permissive_policy_applies_to_every_site(tiny_sites, tmp_path):
    """The default policy would stop this run (test above, in process); the file's
    k = 0 lets every SuperNode answer."""
    pytest.importorskip("flwr")
    out = tmp_path / "out.csv"
    policy = _policy(tmp_path, "open.json", {"min_effective_rows": 0})
    res = run_installed(
        "federate", "local", *tiny_sites, "--rows", 20, "--out", out, "--policy", policy
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(pd.read_csv(out)) == 20
