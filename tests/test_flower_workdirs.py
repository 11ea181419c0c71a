"""Working directories left by a federation whose process was killed (no Flower needed)."""

from __future__ import annotations

import os
import subprocess
import sys

from fits.deploy.flower_launch import OWNER_FILE, WORKDIR_PREFIX, remove_stale_workdirs


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_workdirs_of_dead_owners_are_removed_and_nothing_else(tmp_path):
    from fits.deploy.flower_launch import _process_identity

    dead = tmp_path / f"{WORKDIR_PREFIX}dead"
    (dead / "superlink").mkdir(parents=True)
    (dead / "superlink.log").write_text("log")
    (dead / OWNER_FILE).write_text(f"{_dead_pid()} 12345")

    alive = tmp_path / f"{WORKDIR_PREFIX}alive"
    alive.mkdir()
    (alive / OWNER_FILE).write_text(_process_identity(os.getpid()))

    reused = tmp_path / f"{WORKDIR_PREFIX}reused"  # our pid, but another start time
    reused.mkdir()
    (reused / OWNER_FILE).write_text(f"{os.getpid()} 1")

    unowned = tmp_path / f"{WORKDIR_PREFIX}unowned"  # an older version's, or not ours
    unowned.mkdir()
    other = tmp_path / "not-fits"
    other.mkdir()
    (other / OWNER_FILE).write_text(f"{_dead_pid()} 1")

    removed = remove_stale_workdirs(tmp_path)

    assert sorted(p.name for p in removed) == sorted([dead.name, reused.name])
    assert not dead.exists() and not reused.exists()
    assert alive.exists() and unowned.exists() and other.exists()
