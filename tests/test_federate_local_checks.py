"""``fits federate local`` checks what ``fits synthesize`` checks before anything starts,
and leaves nothing behind when killed.  Found by QA (three small sites a, b, c):

1. ``--secure-aggregation`` with one site started the SuperLink and the whole
   federation, and failed after about 55 s (exit 1); ``fits synthesize`` refuses it at
   once (exit 2).
2. ``--rows 99999999999999999999999`` started Flower, which then failed with its raw
   "Value out of range" (a run config carries signed 64-bit integers).
3. A huge ``--rows`` (1e9) printed no estimate of its time and size, as ``fits
   synthesize`` does, and was silently capped by the run's time limit, whose message
   advised ``fits federate run --run-timeout``, an option ``local`` did not have.
4. A ``fits federate local`` killed outright (SIGKILL) late in the run left its staging
   file (``.OUT.fits-local-PID.csv``: the complete table, which never passed the release
   check) beside ``--out``, removed only by a later run to the same ``--out``.

No Flower process runs here: stand-ins fail a test that gets as far as starting one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process


def _site(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "income": rng.normal(5e4, 1e4, n).round(2),
            "sex": rng.choice(["M", "F"], n),
            "grade": rng.choice(["a", "b", "c"], n),
        }
    ).to_csv(path, index=False)
    return path


@pytest.fixture
def sites(tmp_path: Path) -> list[Path]:
    """The tester's sites: a (60 rows), b (40), c (3), in the order of their names."""
    return [
        _site(tmp_path / "a.csv", 60, 1),
        _site(tmp_path / "b.csv", 40, 2),
        _site(tmp_path / "c.csv", 3, 3),
    ]


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch) -> Path:
    """The temporary folder (``tempfile.gettempdir()``: the federations' working
    directories) is one of this test's own."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def no_flower(monkeypatch, own_tmp):
    """Fail the command where it would start Flower: ``started`` records the options it
    would have started it with (the run is then a failure, exit 1)."""
    from fits.cli import federate

    started: list[dict] = []

    def never(launch, sites, config, **options):
        started.append(options)
        raise AssertionError("Flower was started")

    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(federate, "run_local_federation", never)
    return started


def _local(*args, env=None):
    return fits_in_process("federate", "local", *args, env=env)


# ------------------------------------------------- 1. secure aggregation with one site
def test_secure_aggregation_with_one_site_is_refused_at_once(sites, tmp_path, no_flower):
    a = sites[0]
    res = _local(a, "--rows", 5, "--out", tmp_path / "o.csv", "--secure-aggregation")
    assert res.returncode == 2, res.stderr
    assert no_flower == [] and "Traceback" not in res.stderr
    said = res.stderr.strip().removeprefix("error: ")
    # fits synthesize's words (it also offers --simulate-clients, which local has not)
    ref = fits_in_process(
        "synthesize", a, "--rows", 5, "--out", tmp_path / "s.csv", "--secure-aggregation"
    )
    assert ref.returncode == 2
    assert said.removesuffix(": give more site files") in ref.stderr
    assert "needs at least two sites" in said and "give more site files" in said
    assert not (tmp_path / "o.csv").exists()


def test_secure_aggregation_with_two_sites_is_not_refused(sites, tmp_path, no_flower):
    res = _local(*sites[:2], "--rows", 5, "--out", tmp_path / "o.csv", "--secure-aggregation")
    assert "Flower was started" in res.stderr and len(no_flower) == 1


def test_secure_aggregation_with_one_site_able_to_answer_is_refused_before_flower(
    sites, tmp_path, no_flower
):
    """a (60 rows) and c (3 rows, under its floor k = 5): every masked sum would be a's
    upload. fits synthesize refuses it at configure (exit 1); local did only in the run."""
    a, c = sites[0], sites[2]
    res = _local(a, c, "--rows", 5, "--out", tmp_path / "o.csv", "--secure-aggregation")
    assert res.returncode == 1, res.stderr
    assert no_flower == [] and "Traceback" not in res.stderr
    assert "secure aggregation needs at least two sites that answer" in res.stderr
    ref = fits_in_process(
        "synthesize", a, c, "--rows", 5, "--out", tmp_path / "s.csv", "--secure-aggregation"
    )
    assert ref.returncode == 1 and res.stderr.strip() in ref.stderr
    assert not (tmp_path / "o.csv").exists()


# ------------------------------------------------------ 2. numbers Flower cannot carry
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--rows", "99999999999999999999999"),
        ("--rows", str(2**63)),
        ("--seed", str(2**63)),
        ("--seed", str(-(2**63) - 1)),
        ("--batch-size", str(2**64)),
    ],
)
def test_a_number_beyond_a_run_config_is_refused_at_once(sites, tmp_path, no_flower, option, value):
    args = ["--rows", 5] if option != "--rows" else []
    res = _local(*sites[:2], *args, option, value, "--out", tmp_path / "o.csv")
    assert res.returncode == 2, res.stderr
    assert f"{option} {value}: " in res.stderr and "Traceback" not in res.stderr
    assert "Value out of range" not in res.stderr and no_flower == []
    if option == "--rows":
        assert "ask for fewer rows" in res.stderr


def test_federate_run_refuses_it_before_submitting(tmp_path, monkeypatch):
    from fits.cli import federate
    from fits.deploy import flower_launch

    def never(*args, **kwargs):
        raise AssertionError("the run was submitted")

    monkeypatch.setattr(federate, "_launch", lambda: flower_launch)
    monkeypatch.setattr(flower_launch, "submit_run", never)
    res = fits_in_process(
        "federate", "run", "--superlink", "coord:9093", "--insecure",
        "--rows", "99999999999999999999999", "--out", tmp_path / "o.csv",
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "--rows 99999999999999999999999: " in res.stderr and "submitted" not in res.stderr


def test_the_largest_numbers_a_run_config_carries_pass():
    from fits.cli.federate import MAX_CONFIG_INT, _check_config_ints

    _check_config_ints({"rows": MAX_CONFIG_INT, "seed": -MAX_CONFIG_INT - 1, "secure": True})


# ------------------------------------------------ 3. the estimate and the time limit
@pytest.fixture
def with_flower():
    """The estimate fits the run in process with the ServerApp's run config reader
    (fits.deploy.flower, which imports Flower)."""
    pytest.importorskip("flwr")


def test_a_large_request_prints_synthesize_s_estimate_first(
    sites, tmp_path, no_flower, with_flower
):
    res = _local(*sites, "--rows", 200_000, "--out", tmp_path / "o.csv")
    assert "Flower was started" in res.stderr and len(no_flower) == 1, res.stderr
    before = res.stderr.split("Flower was started")[0]
    assert "200,000 rows: estimated " in before
    assert "(from the first 8,192 rows, drawn in this process" in before
    assert "warning: drawing" not in before  # seconds, well within the hour
    assert "DataNote" not in before and "synthesizer.py" not in before  # no raw warnings


def test_quiet_prints_no_estimate(sites, tmp_path, no_flower, with_flower):
    res = _local(*sites, "--rows", 200_000, "--out", tmp_path / "o.csv", "--quiet")
    assert "Flower was started" in res.stderr and len(no_flower) == 1
    assert "estimate" not in res.stderr


def test_a_small_request_is_not_estimated(sites, tmp_path, no_flower, with_flower):
    res = _local(*sites, "--rows", 100, "--out", tmp_path / "o.csv")
    assert "Flower was started" in res.stderr and "estimate" not in res.stderr


def test_a_draw_longer_than_the_time_limit_is_warned_of(sites, tmp_path, no_flower, with_flower):
    res = _local(*sites, "--rows", 5_000_000, "--out", tmp_path / "o.csv", "--run-timeout", 1, "-q")
    assert "Flower was started" in res.stderr and len(no_flower) == 1, res.stderr
    text = " ".join(res.stderr.split())
    assert "warning: drawing 5,000,000 rows may take longer than the run's time limit, " in text
    assert "--run-timeout 1 s" in text and "allow more with --run-timeout SECONDS" in text
    assert no_flower[0]["run_timeout"] == 1.0


def test_a_table_the_disk_cannot_hold_is_refused_as_synthesize_refuses_it(
    sites, tmp_path, no_flower, with_flower, monkeypatch
):
    """The same message as ``fits synthesize``'s (the same fit and first rows: the
    files in name order), exit 2, before any process starts."""
    import shutil

    real = shutil.disk_usage

    def small(path):
        return real(path)._replace(free=1000)

    monkeypatch.setattr(shutil, "disk_usage", small)
    out = tmp_path / "o.csv"
    res = _local(*sites, "--rows", 200_000, "--out", out)
    assert res.returncode == 2, res.stderr
    assert no_flower == [] and not out.exists()
    ref = fits_in_process("synthesize", *sites, "--rows", 200_000, "--out", out)
    assert ref.returncode == 2
    refusal = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert refusal == [line for line in ref.stderr.splitlines() if line.startswith("error: ")]
    assert "--rows 200000: the output would take about" in refusal[0]
    assert "has 1.0 kB free; ask for fewer rows or write elsewhere" in refusal[0]


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [((), None, 3600.0), (("--run-timeout", "7200"), None, 7200.0), ((), "5000", 5000.0)],
)
def test_local_has_federate_run_s_run_timeout(sites, tmp_path, no_flower, args, env, expected):
    res = _local(
        *sites[:2], "--rows", 5, "--out", tmp_path / "o.csv", *args,
        env={"FITS_RUN_TIMEOUT": env},
    )  # fmt: skip
    assert "Flower was started" in res.stderr, res.stderr
    assert no_flower[0]["run_timeout"] == expected


def _late_launch(limits: list[float], text: str, run_id: int) -> SimpleNamespace:
    """A stand-in for :mod:`fits.deploy.flower_launch` whose ``LocalFederation`` run
    reaches its time limit (``RunTimeoutError(text, run_id, timeout)``), recording the
    limits it was given in ``limits``."""
    from fits.deploy import flower_launch

    class Federation:
        superlink = "127.0.0.1:1"

        def __init__(self, sites, **options):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def run(self, config, *, timeout, progress=None):
            limits.append(timeout)
            raise flower_launch.RunTimeoutError(text, run_id, timeout)

    return SimpleNamespace(
        LocalFederation=Federation,
        FederationError=flower_launch.FederationError,
        RunTimeoutError=flower_launch.RunTimeoutError,
    )


def test_a_run_stopped_at_its_time_limit_names_local_s_option(
    sites, tmp_path, own_tmp, monkeypatch
):
    """The message said ``fits federate run --run-timeout``; ``local`` names its own."""
    from fits.cli import federate

    limits: list[float] = []
    launch = _late_launch(limits, "run 7 did not finish (flower_launch's)", 7)
    monkeypatch.setattr(federate, "_launch", lambda: launch)
    res = _local(
        *sites[:2], "--rows", 5, "--out", tmp_path / "o.csv", env={"FITS_RUN_TIMEOUT": "45"}
    )
    assert res.returncode == 1 and limits == [45.0], res.stderr
    text = " ".join(res.stderr.split())
    assert (
        "error: run 7 did not finish within 45 s, its time limit, and was stopped "
        "(--run-timeout SECONDS, or FITS_RUN_TIMEOUT=SECONDS, allows more)"
    ) in text
    assert "fits federate run" not in text and "flower_launch's" not in text


def test_other_local_federations_name_the_variable_alone(monkeypatch, capsys):
    """``fits analyze --flower`` (run_local_federation's other caller) has no
    ``--run-timeout``: its message names FITS_RUN_TIMEOUT alone."""
    import typer

    from fits.cli.federate import run_local_federation

    launch = _late_launch([], "late", 3)
    monkeypatch.setenv("FITS_RUN_TIMEOUT", "12")
    with pytest.raises(typer.Exit):
        run_local_federation(launch, {}, {})
    err = " ".join(capsys.readouterr().err.split())
    assert (
        "within 12 s, its time limit, and was stopped (FITS_RUN_TIMEOUT=SECONDS allows more)" in err
    )


# ------------------------------------------------------ 4. a killed run's staging file
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_sweep_removes_a_dead_owner_s_staging_file(tmp_path):
    """A working directory whose owner is dead names the staging file it left beside
    ``--out`` (and its writer's hidden temporary files): the next sweep removes them,
    and nothing else; a file a running owner stages stays."""
    from fits.deploy.flower_launch import (
        OWNER_FILE,
        STAGED_FILE,
        WORKDIR_PREFIX,
        _process_identity,
        remove_stale_workdirs,
    )

    root, outdir = tmp_path / "tmp", tmp_path / "out"
    root.mkdir()
    outdir.mkdir()
    pid = _dead_pid()
    staged = outdir / f".int.csv.fits-local-{pid}.csv"
    leftover = outdir / f".{staged.name}.x1y2.tmp"  # the writer's, where no O_TMPFILE
    output, other = outdir / "int.csv", outdir / ".int.csv.keep.csv"
    for path in (staged, leftover, output, other):
        path.write_text("age,sex\n41,F\n")
    dead = root / f"{WORKDIR_PREFIX}dead"
    dead.mkdir()
    (dead / STAGED_FILE).write_text(f"{staged}\n")
    (dead / OWNER_FILE).write_text(f"{pid} 12345")

    live_file = outdir / ".live.csv.fits-local-1.csv"  # a running owner's, named by both
    live_file.write_text("x\n")
    live = root / f"{WORKDIR_PREFIX}live"
    live.mkdir()
    (live / STAGED_FILE).write_text(f"{live_file}\n")
    (live / OWNER_FILE).write_text(_process_identity(os.getpid()))
    dead2 = root / f"{WORKDIR_PREFIX}dead2"
    dead2.mkdir()
    (dead2 / STAGED_FILE).write_text(f"{live_file}\n")
    (dead2 / OWNER_FILE).write_text(f"{pid} 12345")

    removed = remove_stale_workdirs(root)

    assert sorted(p.name for p in removed) == sorted([dead.name, dead2.name])
    assert not staged.exists() and not leftover.exists()
    assert output.exists() and other.exists() and live_file.exists() and live.exists()


def test_the_sweep_follows_no_link(tmp_path):
    from fits.deploy.flower_launch import (
        OWNER_FILE,
        STAGED_FILE,
        WORKDIR_PREFIX,
        remove_stale_workdirs,
    )

    target = tmp_path / "precious.csv"
    target.write_text("x\n")
    link = tmp_path / ".o.csv.fits-local-99.csv"
    link.symlink_to(target)
    dead = tmp_path / f"{WORKDIR_PREFIX}dead"
    dead.mkdir()
    (dead / STAGED_FILE).write_text(f"{link}\n")
    (dead / OWNER_FILE).write_text(f"{_dead_pid()} 12345")
    assert remove_stale_workdirs(tmp_path) == [dead]
    assert target.read_text() == "x\n" and link.is_symlink()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_process_killed_while_staging_leaves_nothing_after_the_next_sweep(tmp_path):
    """The whole story: a process stages a table (as fits federate local's ServerApp
    does) under :func:`staged_file` and is killed outright; the next federation's sweep
    removes the table it left beside --out."""
    from fits.deploy.flower_launch import remove_stale_workdirs

    root, out = tmp_path / "tmp", tmp_path / "out"
    root.mkdir()
    out.mkdir()
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from fits.deploy.flower_launch import staged_file\n"
        f"path = Path({str(out)!r}) / f'.int.csv.fits-local-{{os.getpid()}}.csv'\n"
        "with staged_file(path):\n"
        "    path.write_text('age,sex\\n41,F\\n')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(root)}, check=False
    )
    assert proc.returncode == -signal.SIGKILL
    (left,) = out.iterdir()  # what the kill left
    assert left.name.startswith(".int.csv.fits-local-")
    assert len(remove_stale_workdirs(root)) == 1
    assert list(out.iterdir()) == [] and list(root.iterdir()) == []


def test_local_records_its_staging_file_while_it_may_exist(sites, tmp_path, own_tmp, monkeypatch):
    """While the run goes on (and until the table is in place) a working directory of
    this process names the staging file; afterwards nothing is left, and --out appears
    at once, complete."""
    from fits.cli import federate
    from fits.deploy.flower_launch import OWNER_FILE, STAGED_FILE, _process_identity

    seen: list[tuple[str, list[str], str]] = []

    def run_local_federation(launch, site_files, config, **options):
        (record,) = own_tmp.iterdir()
        seen.append(
            (
                config["output"],
                (record / STAGED_FILE).read_text().splitlines(),
                (record / OWNER_FILE).read_text(),
            )
        )
        pd.DataFrame({"age": [41], "income": [1.5], "sex": ["F"], "grade": ["a"]}).to_csv(
            config["output"], index=False
        )
        return SimpleNamespace(ok=True, log="", run_id=7, seconds=1.0)

    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(federate, "run_local_federation", run_local_federation)
    out = tmp_path / "int.csv"
    res = _local(*sites[:2], "--rows", 1, "--out", out)
    assert res.returncode == 0, res.stderr
    ((staging, named, owner),) = seen
    assert named == [staging] and Path(staging).parent == tmp_path
    assert Path(staging).name == f".int.csv{federate.STAGING_INFIX}{os.getpid()}.csv"
    assert owner == _process_identity(os.getpid())
    assert list(own_tmp.iterdir()) == []  # the record went with the staging file
    assert pd.read_csv(out)["age"].tolist() == [41]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
