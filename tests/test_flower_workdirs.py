"""Working directories and --home folders a federation leaves (most tests without Flower)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fits.deploy.flower_launch import (
    OWNER_FILE,
    RUN_WORKDIR_PREFIX,
    WORKDIR_PREFIX,
    remove_stale_workdirs,
)


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


def test_a_killed_run_submitters_folder_is_removed_too(tmp_path):
    """``submit_run``'s folder (``fits-flwr-*``: the app, a Flower home, the run's log)
    names its owner as a federation's does, so the next federation removes it when its
    owner was killed (it stayed in the temporary folder for good)."""
    from fits.deploy.flower_launch import _process_identity

    dead = tmp_path / f"{RUN_WORKDIR_PREFIX}dead"
    (dead / "home").mkdir(parents=True)
    (dead / "run-config.toml").write_text("rows = 5\n")
    (dead / OWNER_FILE).write_text(f"{_dead_pid()} 12345")
    alive = tmp_path / f"{RUN_WORKDIR_PREFIX}alive"
    alive.mkdir()
    (alive / OWNER_FILE).write_text(_process_identity(os.getpid()))
    assert remove_stale_workdirs(tmp_path) == [dead]
    assert not dead.exists() and alive.exists()


def test_submit_run_names_the_owner_of_its_folder(tmp_path, monkeypatch):
    """The folder ``submit_run`` works in holds the owner file while the run is
    followed (so a SIGKILL leaves a folder the next federation can remove)."""
    import tempfile

    import pytest

    pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")
    from fits.deploy import flower_launch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = []

    def fake_run(cmd, **kwargs):
        folder = Path(kwargs["cwd"])
        seen.append((folder.name, (folder / OWNER_FILE).read_text()))
        raise KeyboardInterrupt  # stop here, as Ctrl-C would

    monkeypatch.setattr(flower_launch.subprocess, "run", fake_run)
    monkeypatch.setattr(flower_launch, "_flower_bin", lambda name: name)
    with pytest.raises(KeyboardInterrupt):
        flower_launch.submit_run("127.0.0.1:1", {"rows": 5}, insecure=True)
    from fits.deploy.flower_launch import _process_identity

    assert seen and seen[0][0].startswith(RUN_WORKDIR_PREFIX)
    assert seen[0][1] == _process_identity(os.getpid())
    assert not list(tmp_path.iterdir())  # removed on the way out


def test_an_unreachable_superlink_is_not_said_to_refuse_the_run(monkeypatch):
    """``flwr run`` against an address where nothing listens: the error says the
    SuperLink cannot be reached and what to check (it said 'refused the run')."""
    import json

    import pytest

    pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")
    from fits.deploy import flower_launch

    reply = {
        "success": False,
        "error-message": "Using SuperLink: fits (127.0.0.1:1)\n\nConnection to the SuperLink "
        "is unavailable. Please check your network connection and 'address' in the "
        "SuperLink connection configuration.",
    }

    def fake_run(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, json.dumps(reply), "")

    monkeypatch.setattr(flower_launch.subprocess, "run", fake_run)
    monkeypatch.setattr(flower_launch, "_flower_bin", lambda name: name)
    with pytest.raises(flower_launch.FederationError) as caught:
        flower_launch.submit_run("127.0.0.1:1", {"rows": 5}, insecure=True)
    message = str(caught.value)
    assert message.startswith("cannot reach the SuperLink at 127.0.0.1:1: check that")
    assert "refused" not in message and "\n" not in message


def _has_flower() -> bool:
    import importlib.util

    return importlib.util.find_spec("flwr") is not None


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_the_home_folders_a_flower_command_made_are_removed_when_left_empty(tmp_path):
    """A SuperNode that never reached its SuperLink left an empty .fits-flower/site in the
    working folder: the folders fits made for --home go when Flower left them empty; a
    folder that was there before stays."""
    import typer

    from fits.cli.federate import _exec

    (tmp_path / "kept").mkdir()
    home = tmp_path / "kept" / "made" / "site"
    with pytest.raises(typer.Exit):
        _exec([sys.executable, "-c", "pass"], home)
    assert not (tmp_path / "kept" / "made").exists() and (tmp_path / "kept").is_dir()
    state = tmp_path / "state" / "site"
    with pytest.raises(typer.Exit):  # Flower's state in it: kept, with its folders
        _exec([sys.executable, "-c", f"open({str(state / 'db')!r}, 'w').close()"], state)
    assert (state / "db").is_file()


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_fits_federate_site_says_how_its_table_was_read_as_notes(tmp_path, monkeypatch):
    """The reading's notes (date-times at several UTC offsets) came out as a raw Python
    warning with its source line; they are 'note:' lines, as every command prints them."""
    import typer

    from fits.cli import federate

    from conftest import fits_in_process

    def no_flower(cmd, home):
        raise typer.Exit(0)

    monkeypatch.setattr(federate, "_exec", no_flower)
    table = tmp_path / "s1.csv"
    rows = [f"2024-03-{20 + k} 10:00:00+0{1 + (k > 5)}:00,{k}.5" for k in range(1, 11)]
    table.write_text("when,x\n" + "\n".join(rows) + "\n")
    res = fits_in_process(
        "federate", "site", "--data", table, "--name", "s1", "--superlink", "127.0.0.1:9",
        "--insecure", "--home", tmp_path / "h",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert f"note: {table}: column 'when' has date-times with several UTC offsets" in res.stderr
    assert "DataNote" not in res.stderr and "read_table(" not in res.stderr
