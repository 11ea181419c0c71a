"""``fits federate local`` puts its table in place as ``--out`` only when everything is
done: the ServerApp writes to a hidden staging file beside it, and the command renames
it after the run, the stop of the Flower processes and the release check. A stop
signal at any point before leaves no output and an existing ``--out`` untouched, as
``fits synthesize`` does (before, a signal after the ServerApp wrote ``--out``, while
the processes stopped or the release check ran, said "no output was written" over a
written, or replaced, table). Flower itself is not run: a stand-in plays the run."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process


@pytest.fixture
def sites(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(0)
    files = []
    for name, n in (("a", 60), ("b", 40)):
        frame = pd.DataFrame({"g": rng.choice(["u", "v"], n), "x": rng.normal(size=n).round(2)})
        files.append(tmp_path / f"{name}.csv")
        frame.to_csv(files[-1], index=False)
    return files


def _stand_in(monkeypatch, then=None, **result):
    """Replace the Flower run: write what the ServerApp writes to the run config's
    ``output``, then call ``then`` (a signal arriving) and return the run's result."""
    from fits.cli import federate

    seen: dict = {}

    def run_local_federation(launch, site_files, config, **options):
        seen.update(config)
        frame = pd.DataFrame({"g": ["u", "v", "u"], "x": [0.5, -1.25, 2.0]})
        frame.to_csv(config["output"], index=False)  # the ServerApp's table, complete
        if then is not None:
            then()
        return SimpleNamespace(**{"ok": True, "log": "", "run_id": 7, "seconds": 1.0, **result})

    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(federate, "run_local_federation", run_local_federation)
    return seen


def _signal(signum: int):
    def send() -> None:
        from fits.cli.errors import Interrupted

        raise Interrupted(signum)  # what the handler of interruptible raises

    return send


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_after_the_table_was_written_leaves_no_output(
    sites, tmp_path, monkeypatch, signum
):
    """The signal arrives after the ServerApp wrote the table, while the SuperLink and
    SuperNodes stop: exit 128 + signal, the message is true, --out is the old file."""
    out = tmp_path / "o.csv"
    out.write_text("old\n")
    seen = _stand_in(monkeypatch, then=_signal(signum))
    res = fits_in_process("federate", "local", *sites, "--rows", 3, "--out", out)
    assert res.returncode == 128 + signum, res.stderr
    assert "no output was written" in res.stderr and "Traceback" not in res.stderr
    assert out.read_text() == "old\n"  # untouched
    assert Path(seen["output"]) != out.resolve() and Path(seen["output"]).parent == tmp_path
    assert _left(tmp_path) == []  # the staging file is gone


def test_a_signal_during_the_release_check_leaves_no_output(sites, tmp_path, monkeypatch):
    """The release check runs on the staged table, before it is put in place: a
    Ctrl-C during it (a large table takes a while) is a clean stop, not a traceback
    with the table already written."""
    from fits.cli import release

    out = tmp_path / "o.csv"
    _stand_in(monkeypatch)

    def check_local_run(site_files, config):
        assert Path(config["output"]).is_file()  # the staged table is what is checked
        _signal(signal.SIGINT)()

    monkeypatch.setattr(release, "check_local_run", check_local_run)
    res = fits_in_process("federate", "local", *sites, "--rows", 3, "--out", out)
    assert res.returncode == 130, res.stderr
    assert "interrupted by SIGINT" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists() and _left(tmp_path) == []


def test_the_table_is_put_in_place_after_the_check(sites, tmp_path, monkeypatch):
    from fits.cli import release

    out = tmp_path / "o.csv"
    out.write_text("old\n")
    _stand_in(monkeypatch)
    checked = []

    def check_local_run(site_files, config):  # the staged table, --out still the old one
        checked.append((pd.read_csv(config["output"])["x"].tolist(), out.read_text()))

    monkeypatch.setattr(release, "check_local_run", check_local_run)
    res = fits_in_process("federate", "local", *sites, "--rows", 3, "--out", out)
    assert res.returncode == 0, res.stderr
    assert checked == [([0.5, -1.25, 2.0], "old\n")]
    assert pd.read_csv(out)["x"].tolist() == [0.5, -1.25, 2.0]
    assert f"synthetic table: {out}" in res.stdout and _left(tmp_path) == []


def test_a_failed_run_names_the_output_not_the_staging_file(sites, tmp_path, monkeypatch):
    """The ServerApp's messages (the disk-space refusal names its output) speak of --out."""
    from fits.cli import federate

    out = tmp_path / "o.csv"
    staged = federate.staging_path(out)
    details = (
        f"rows=3: the output would take about 9 GB but the file system of {str(staged)!r} "
        f"has 1 kB free; ask for fewer rows or write elsewhere; {federate.STOPPED}"
    )
    _stand_in(monkeypatch, ok=False, status="finished:failed", details=details)
    res = fits_in_process("federate", "local", *sites, "--rows", 3, "--out", out)
    assert res.returncode == 1
    assert f"file system of {str(out.resolve())!r} has 1 kB free" in res.stderr
    assert staged.name not in res.stderr
    assert not out.exists() and _left(tmp_path) == []


def test_a_run_that_wrote_nothing_is_an_error(sites, tmp_path, monkeypatch):
    from fits.cli import federate

    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(
        federate,
        "run_local_federation",
        lambda *a, **k: SimpleNamespace(ok=True, log="", run_id=7, seconds=1.0),
    )
    out = tmp_path / "o.csv"
    res = fits_in_process("federate", "local", *sites, "--rows", 3, "--out", out)
    assert res.returncode == 1 and "wrote no table" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not out.exists()


def test_staging_files_of_dead_processes_are_removed(tmp_path):
    """A fits federate local killed outright (SIGKILL) after its ServerApp wrote the
    staged table leaves it; the next run beside the same --out removes it, and leaves
    those of running processes and every other file."""
    from fits.cli import federate

    out = tmp_path / "o.csv"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".o.csv{federate.STAGING_INFIX}{dead.pid}.csv"
    alive = tmp_path / f".o.csv{federate.STAGING_INFIX}1.csv"  # pid 1 always runs
    other = tmp_path / ".o.csv.keep.csv"
    for path in (stale, alive, other):
        path.write_text("x\n1\n")
    staged = federate.staging_path(out)
    assert staged.parent == tmp_path.resolve() and staged.suffix == ".csv"
    assert staged.name.startswith(".o.csv") and not staged.exists()
    assert not stale.exists() and alive.exists() and other.exists()
