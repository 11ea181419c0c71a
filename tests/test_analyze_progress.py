"""``fits analyze`` shows progress: the engines report their fitting rounds
(``on_round`` of :func:`fits.analysis.glm.fit_glm`, :func:`fits.analysis.lsa.fedlsa` and
:func:`fits.analysis.run.run_analysis`), and the command draws a progress bar from them
on stderr, only for a terminal, leaving stdout and the result file as they were."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fits.analysis import fedlsa, fit_glm
from fits.analysis.glm import planned_rounds

from conftest import FITS, write_sites
from conftest import fits_in_process as run


def _logistic(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(0.5 + x1 - 0.5 * x2)))).astype(int)
    return pd.DataFrame({"x1": x1, "x2": x2, "y": y})


def _linear(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    return pd.DataFrame({"x1": x1, "x2": x2, "y": 1.0 + x1 - 0.5 * x2 + rng.normal(size=n)})


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return {f"s{k}": _logistic(150, k) for k in range(2)}


@pytest.fixture(scope="module")
def linear_tables() -> dict[str, pd.DataFrame]:
    return {f"s{k}": _linear(120, 10 + k) for k in range(2)}


@pytest.fixture(scope="module")
def files(tables: dict[str, pd.DataFrame], tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return write_sites(tables, tmp_path_factory.mktemp("progress"))


def _recorder() -> tuple[list[tuple[int, int]], Callable[[int, int], None]]:
    seen: list[tuple[int, int]] = []
    return seen, lambda done, total: seen.append((done, total))


def _check_counts(seen: list[tuple[int, int]], total: int) -> None:
    """0 first, one more round each call, the planned total throughout, ending at it."""
    assert seen == [(k, total) for k in range(total + 1)]


# ------------------------------------------------------------------ the engines
@pytest.mark.parametrize(
    ("method", "options", "total"),
    [
        ("fedsgd", {"K": 7}, 7),
        ("fedhybrid", {"K1": 5, "K2": 4}, 5),  # the K1 local steps are one round
        ("fedavg", {"K": 3, "R": 4}, 4),
        ("fednewton", {}, 2),
    ],
)
def test_each_private_glm_reports_its_rounds_up_to_the_total(
    tables: dict[str, pd.DataFrame], method: str, options: dict[str, Any], total: int
) -> None:
    seen, on_round = _recorder()
    res = fit_glm(tables, "y", method=method, mu=1.0, seed=3, on_round=on_round, **options)
    _check_counts(seen, total)
    assert planned_rounds(method, res.settings) == total
    plain = fit_glm(tables, "y", method=method, mu=1.0, seed=3, **options)
    # the same noise and the same arithmetic: bit for bit
    assert np.array_equal(res.params.to_numpy(), plain.params.to_numpy())
    assert res.rounds == plain.rounds


def test_newton_reports_k_as_its_cap_and_ends_at_the_rounds_it_ran(
    tables: dict[str, pd.DataFrame],
) -> None:
    seen, on_round = _recorder()
    res = fit_glm(tables, "y", method="newton", K=20, on_round=on_round)
    done = [d for d, _ in seen]
    assert done[0] == 0 and done == sorted(done)
    assert {t for _, t in seen[:-1]} == {21}  # 1 + K: the first sums, one round a step
    assert seen[-1][0] == seen[-1][1] < 21  # converged early: the total it took
    # not counted: setup, standardization, configuration, separation check, errors
    assert res.rounds - seen[-1][0] == 5
    plain = fit_glm(tables, "y", method="newton", K=20)
    assert np.array_equal(res.params.to_numpy(), plain.params.to_numpy())
    assert np.array_equal(res.bse.to_numpy(), plain.bse.to_numpy())


def test_newton_that_does_not_converge_ends_at_its_cap(tables: dict[str, pd.DataFrame]) -> None:
    seen, on_round = _recorder()
    with pytest.warns(UserWarning, match="did not converge"):
        fit_glm(tables, "y", method="newton", K=2, cov_type=None, on_round=on_round)
    _check_counts(seen, 3)


def test_a_poisson_newton_counts_its_start_round() -> None:
    rng = np.random.default_rng(5)
    frames = {}
    for k in range(2):
        x = rng.normal(size=200)
        frames[f"s{k}"] = pd.DataFrame({"x": x, "y": rng.poisson(np.exp(1.0 + 0.3 * x))})
    seen, on_round = _recorder()
    with pytest.warns(UserWarning, match="did not converge"):
        fit_glm(frames, "y", family="poisson", method="newton", K=3, on_round=on_round)
    assert seen[0] == (0, 5)  # 1 + K + the start at log(ybar)
    assert seen[-1][0] == seen[-1][1]


def test_fedlsa_reports_its_rounds_and_keeps_its_result(
    linear_tables: dict[str, pd.DataFrame],
) -> None:
    options: dict[str, Any] = {"rounds": 8, "local_steps": 5, "n_bootstrap": 40, "seed": 1}
    seen, on_round = _recorder()
    res = fedlsa(linear_tables, "y", on_round=on_round, **options)
    _check_counts(seen, 8)  # the bootstrap sequences travel in the same rounds
    plain = fedlsa(linear_tables, "y", **options)
    assert np.array_equal(res.coef_, plain.coef_)
    assert np.array_equal(res.bootstrap, plain.bootstrap)


def test_run_analysis_passes_on_round_to_both_engines(
    tables: dict[str, pd.DataFrame], linear_tables: dict[str, pd.DataFrame]
) -> None:
    from fits.analysis.run import run_analysis

    seen, on_round = _recorder()
    spec = {"method": "fedsgd", "options": {"target": "y", "mu": 1.0, "K": 3}}
    with_bar, _ = run_analysis(spec, tables, on_round=on_round)
    _check_counts(seen, 3)
    assert with_bar == run_analysis(spec, tables)[0]
    seen.clear()
    lsa = {"method": "fedlsa", "options": {"target": "y", "rounds": 8, "n_bootstrap": 40}}
    run_analysis(lsa, linear_tables, on_round=on_round)
    _check_counts(seen, 8)


def test_an_exception_in_on_round_ends_the_fit(tables: dict[str, pd.DataFrame]) -> None:
    def stop(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit_glm(tables, "y", method="fedsgd", mu=1.0, K=10**8, on_round=stop)


# ------------------------------------------------------------------ the command
def _plain(text: str) -> str:
    """``text`` without terminal control sequences (rich hides the cursor while it
    draws and shows it again after its last line: invisible on a terminal)."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def _terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """stderr taken for a terminal (under typer's CliRunner it is a buffer)."""
    from fits.cli import analyze

    monkeypatch.setattr(analyze, "_stderr_is_terminal", lambda: True)


def test_on_a_terminal_the_rounds_show_on_stderr_only(
    files: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _terminal(monkeypatch)
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "y", "--method", "fedsgd", "--mu", "1",
              "-K", "40", "--out", out)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "fedsgd rounds" in res.stderr and "40/40" in res.stderr
    assert "fedsgd rounds" not in res.stdout and "40/40" not in res.stdout
    assert "\x1b" not in res.stdout and "━" not in res.stdout
    assert res.stdout.rstrip().endswith(f"result: {out}")
    result = json.loads(out.read_text())
    assert result["method"] == "fedsgd" and result["settings"]["K"] == 40


def test_quiet_turns_the_bar_off_on_a_terminal(
    files: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--quiet`` (``-q``), as ``fits synthesize`` has it: no bar, the same result."""
    _terminal(monkeypatch)
    for flag in ("--quiet", "-q"):
        out = tmp_path / f"r{flag}.json"
        res = run("analyze", *files, "--target", "y", "--method", "fedsgd", "--mu", "1",
                  "-K", "40", "--out", out, flag)  # fmt: skip
        assert res.returncode == 0, res.stderr
        assert res.stderr == ""
        assert res.stdout.rstrip().endswith(f"result: {out}")
        assert json.loads(out.read_text())["settings"]["K"] == 40


def test_without_a_terminal_nothing_more_is_printed(files: list[str], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "y", "--method", "fedsgd", "--mu", "1",
              "-K", "40", "--out", out)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    assert "\x1b" not in res.stdout and "━" not in res.stdout
    json.loads(out.read_text())


def test_fedlsa_shows_its_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _terminal(monkeypatch)
    paths = []
    for k in range(2):
        _linear(120, k).to_csv(tmp_path / f"l{k}.csv", index=False)
        paths.append(tmp_path / f"l{k}.csv")
    out = tmp_path / "lsa.json"
    res = run("analyze", *paths, "--target", "y", "--method", "fedlsa", "-R", "12",
              "-H", "2", "--bootstrap", "40", "--out", out)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "fedlsa rounds" in res.stderr and "12/12" in res.stderr
    assert "━" not in res.stdout
    json.loads(out.read_text())


def test_an_error_is_printed_below_the_bar_on_its_own_line(
    files: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _terminal(monkeypatch)
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "y", "--family", "linear", "--method", "fedsgd",
              "--step", "1e6", "-K", "500", "--out", out)  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert "fedsgd rounds" in res.stderr
    lines = _plain(res.stderr).splitlines()
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("error: the fedsgd iterate is no longer")
    assert not out.exists()


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGINT"),
    reason="stop signals reach the main thread only",
)
def test_ctrl_c_during_the_rounds_ends_the_bar_and_exits_130(
    files: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fits.analysis import run as run_module

    _terminal(monkeypatch)
    real = run_module.run_analysis

    def interrupted(spec: Any, tables: Any, **kw: Any) -> Any:
        shown = kw["on_round"]
        assert shown is not None  # the bar's

        def on_round(done: int, total: int) -> None:
            if done == 3:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, in the third round
            shown(done, total)

        return real(spec, tables, on_round=on_round)

    monkeypatch.setattr(run_module, "run_analysis", interrupted)
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "y", "--method", "fedsgd", "--mu", "1",
              "-K", "100000000", "--out", out)  # fmt: skip
    assert res.returncode == 130, res.stderr
    lines = _plain(res.stderr).splitlines()
    assert "error: interrupted by SIGINT; no result was written" in lines
    assert "fedsgd rounds" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pseudo-terminal")
def test_the_command_on_a_real_terminal(files: list[str], tmp_path: Path) -> None:
    """The installed command with stderr on a pseudo-terminal, stdout on a pipe: the
    bar goes to the terminal, stdout has the summary alone."""
    import pty

    master, slave = pty.openpty()
    out = tmp_path / "r.json"
    chunks: list[bytes] = []

    def drain() -> None:  # a full terminal buffer would block the command
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the command closed its end
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run(
            [FITS, "analyze", *files, *"--target y --method fedavg --mu 1 -R 30".split()]
            + ["--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=slave,
            stdin=subprocess.DEVNULL,
            timeout=300,
            env={**os.environ, "COLUMNS": "100"},
        )
    finally:
        os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    terminal = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, terminal
    assert "fedavg rounds" in terminal and "30/30" in terminal
    stdout = proc.stdout.decode()
    assert "\x1b" not in stdout and "fedavg rounds" not in stdout
    assert stdout.rstrip().endswith(f"result: {out}")
    assert json.loads(out.read_text())["method"] == "fedavg"


def test_constant_steps_are_listed_without_a_loop_over_the_rounds() -> None:
    """FedLSA's horizon (sum_t eta_t H_t) lists the T steps before round 1: for constant
    steps as one array of eta (was: a Python loop, 30 s and 400 MB at T = 10^7, with the
    bar at 0), the same values bit for bit; a one-pass or decreasing schedule as before."""
    from fits.analysis.lsa import OnePassSchedule, Schedule

    for schedule in (
        Schedule(300, 0.37, 4),
        Schedule(300, 0.37, 4, gamma_eta=0.6, gamma_h=0.2),
        OnePassSchedule(300, 0.5, 1),
    ):
        looped = np.array([schedule.eta(t) for t in range(1, schedule.rounds + 1)])
        assert np.array_equal(schedule.etas(), looped)
    assert Schedule(10**7, 0.37, 1).etas().shape == (10**7,)


# ------------------------------------------------------------------ on Flower (--flower)
def test_the_coordinator_logs_its_rounds_as_the_launcher_reads_them(
    tables: dict[str, pd.DataFrame],
) -> None:
    """The ServerApp's ``on_round`` (:func:`~fits.deploy.flower_launch.round_logger`):
    a ``[fits] rounds DONE/TOTAL`` line for the first round, the last and at most one a
    second between; :func:`~fits.deploy.flower_launch.read_rounds` reads them back."""
    from fits.analysis.run import run_analysis
    from fits.deploy.flower_launch import PROGRESS, read_rounds, round_logger

    lines: list[str] = []
    spec = {"method": "fedsgd", "options": {"target": "y", "mu": 1.0, "K": 40}}
    logged, _ = run_analysis(spec, tables, on_round=round_logger(lines.append))
    assert logged == run_analysis(spec, tables)[0]
    assert lines[0] == f"{PROGRESS}rounds 0/40" and lines[-1] == f"{PROGRESS}rounds 40/40"
    assert len(lines) <= 4  # a fit of well under a second: not one line a round
    assert [read_rounds(x[len(PROGRESS) :]) for x in lines[:: len(lines) - 1]] == [
        (0, 40),
        (40, 40),
    ]
    every: list[str] = []
    run_analysis(spec, tables, on_round=round_logger(every.append, interval=0.0))
    assert [read_rounds(x[len(PROGRESS) :]) for x in every] == [(k, 40) for k in range(41)]
    for other in ("running", "waiting for sites: 1 of 2 connected", "rounds ?/3", "rounds"):
        assert read_rounds(other) is None


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for flwr")
def test_the_rounds_logged_before_the_run_ends_reach_the_launcher(tmp_path: Path) -> None:
    """The log's last lines (an analysis's last round) were never passed on when the
    stream ended between two looks at the log (once a second)."""
    import time

    from fits.deploy import flower_launch

    flwr = tmp_path / "flwr"
    flwr.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = log ]; then\n'
        "  echo '[fits] rounds 0/40'\n"
        "  echo '[fits] rounds 40/40'\n"
        "  exit 0\n"
        "fi\n"
        'if [ "$1" = ls ]; then echo \'{"runs": [{"status": "finished:completed"}]}\'; fi\n'
    )
    flwr.chmod(0o755)
    shown: list[str] = []
    _, status, _ = flower_launch._follow_run(
        str(flwr), 7, {"PATH": "/usr/bin:/bin"}, tmp_path, time.monotonic(), 60.0,
        poll=0.1, progress=shown.append,
    )  # fmt: skip
    assert status == "finished:completed"
    assert [s for s in shown if s.startswith("rounds")] == ["rounds 0/40", "rounds 40/40"]


def _fake_flower(
    monkeypatch: pytest.MonkeyPatch, tables: dict[str, pd.DataFrame], seen: list[Any]
) -> None:
    """``fits analyze --flower`` without Flower: the run is the in-process analysis,
    whose coordinator logs its rounds as the ServerApp does, passed on line by line as
    :func:`~fits.deploy.flower_launch.submit_run` passes them."""
    from types import SimpleNamespace

    from fits.analysis.run import run_analysis
    from fits.cli import federate
    from fits.deploy.flower_launch import PROGRESS, round_logger

    def run_local_federation(
        launch: Any,
        sites: Any,
        config: dict[str, Any],
        progress: Callable[[str], None] | None = None,
        **options: Any,
    ) -> Any:
        seen.append(progress)

        def relay(line: str) -> None:
            if progress is not None:
                progress(line[len(PROGRESS) :])

        if progress is not None:
            progress("running")
        spec = json.loads(config["analysis"])
        result, summary = run_analysis(spec, tables, on_round=round_logger(relay))
        Path(config["output"]).write_text(json.dumps(result))
        log = json.dumps({"analysis_summary": summary, "output": config["output"]}) + "\n"
        return SimpleNamespace(ok=True, log=log, run_id=1, seconds=0.0)

    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(federate, "run_local_federation", run_local_federation)


def test_flower_runs_show_the_coordinators_rounds_on_a_terminal(
    tables: dict[str, pd.DataFrame],
    files: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``fits analyze --flower`` run showed no bar: the rounds are the coordinator's
    (the ServerApp's log), drawn here as an in-process fit's; ``--quiet`` turns it off,
    and stdout carries the summary alone."""
    seen: list[Any] = []
    _fake_flower(monkeypatch, tables, seen)
    _terminal(monkeypatch)
    args = ["--target", "y", "--method", "fedsgd", "--mu", "1", "-K", "40", "--flower"]
    out = tmp_path / "r.json"
    res = run("analyze", *files, *args, "--out", out)
    assert res.returncode == 0, res.stderr
    assert "fedsgd rounds" in res.stderr and "40/40" in res.stderr
    assert "fedsgd rounds" not in res.stdout and "\x1b" not in res.stdout
    assert res.stdout.rstrip().endswith(f"result: {out}")
    assert json.loads(out.read_text())["settings"]["K"] == 40
    quiet = run("analyze", *files, *args, "--out", tmp_path / "q.json", "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "" and quiet.stdout.rstrip().endswith("q.json")


def test_flower_runs_draw_no_bar_without_a_terminal(
    tables: dict[str, pd.DataFrame],
    files: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []
    _fake_flower(monkeypatch, tables, seen)
    res = run("analyze", *files, "--target", "y", "--method", "fedsgd", "--mu", "1",
              "-K", "40", "--flower", "--out", tmp_path / "r.json")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stderr == "" and seen
