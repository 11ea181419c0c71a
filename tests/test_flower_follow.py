"""How ``submit_run`` follows a run: one streaming ``flwr log`` process, not a poll loop.

A stand-in ``flwr`` executable (a small Python script) records every call, so the tests
need no Flower: they check which commands fits runs, what it returns, and that it
stops the run at its time limit.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from fits.deploy import flower_launch
from fits.deploy.flower_launch import FederationError, _follow_run

FAKE = """#!{python}
import json, os, sys, time
from pathlib import Path
calls = Path(os.environ["FAKE_FLWR_CALLS"])
with calls.open("a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
mode = os.environ["FAKE_FLWR_MODE"]
if sys.argv[1] == "log":
    if mode == "hang":
        time.sleep(60)
    print("INFO : starting", flush=True)
    time.sleep(0.3)  # the run goes on; the stream ends when it finishes
    print('{{"output": "x.csv"}}', flush=True)
elif sys.argv[1] == "ls":
    status = "running" if mode == "hang" else "finished:completed"
    print(json.dumps({{"runs": [{{"status": status, "status-details": ""}}]}}))
"""


@pytest.fixture
def fake_flwr(tmp_path, monkeypatch):
    script = tmp_path / "flwr"
    script.write_text(FAKE.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_FLWR_CALLS", str(calls))

    def run(mode: str, timeout: float, **options):
        env = {**os.environ, "FAKE_FLWR_MODE": mode}
        start = time.monotonic()
        try:
            return _follow_run(str(script), 7, env, tmp_path, start, timeout, poll=0.05, **options)
        finally:
            run.calls = [json.loads(line) for line in calls.read_text().splitlines()]

    return run


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX script stands in for flwr")
def test_one_stream_follows_the_run_and_its_log_is_returned(fake_flwr):
    log, status, details = fake_flwr("ok", timeout=30)
    assert status == "finished:completed" and details == ""
    assert '{"output": "x.csv"}' in log  # what fits federate reads back from the log
    commands = [c[0] for c in fake_flwr.calls]
    # one stream for the whole run and one status query, not a `flwr ls` per poll
    assert commands == ["log", "ls"]
    assert fake_flwr.calls[0] == ["log", "7", "fits", "--stream"]


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX script stands in for flwr")
def test_a_run_past_its_time_limit_is_stopped(fake_flwr):
    start = time.monotonic()
    with pytest.raises(FederationError, match="run 7 did not finish within 1 s"):
        fake_flwr("hang", timeout=1.0)
    assert time.monotonic() - start < 20
    assert ["stop", "7", "fits"] in fake_flwr.calls


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX script stands in for flwr")
@pytest.mark.parametrize("stop_on_interrupt", [True, False])
def test_an_interrupted_follow_leaves_no_stream_behind(fake_flwr, monkeypatch, stop_on_interrupt):
    """Ctrl-C (or SIGTERM, turned into SystemExit) while the run is followed stops the
    ``flwr log --stream`` process too: left running, it outlived the temporary Flower
    home it was given, and a flwr process recreates a missing home (a stray
    ``fits-flwr-*/home`` in the temporary folder).  The run is stopped at the SuperLink
    (``flwr stop``) unless the caller ends the SuperLink itself (a local federation:
    the extra ``flwr`` process only delayed its exit; stop 40's CI, 21 s)."""
    started: list[subprocess.Popen] = []
    real = subprocess.Popen

    def popen(*args, **kwargs):
        started.append(real(*args, **kwargs))
        return started[-1]

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    monkeypatch.setattr(flower_launch.subprocess, "Popen", popen)
    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            fake_flwr("hang", timeout=30, stop_on_interrupt=stop_on_interrupt)
        assert started and all(p.poll() is not None for p in started)
        assert (["stop", "7", "fits"] in fake_flwr.calls) == stop_on_interrupt
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        for p in started:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_the_warm_site_process_command():
    cmd = flower_launch.worker_command(9999, parent_pid=123)
    assert cmd[:3] == [sys.executable, "-m", "fits.deploy.flower_worker"]
    assert cmd[3:] == [
        "--runtime-api-address",
        "127.0.0.1:9999",
        "--insecure",
        "--parent-pid",
        "123",
    ]


def test_a_supernode_for_a_warm_site_serves_its_runtime_api(tmp_path, monkeypatch):
    monkeypatch.setattr(flower_launch, "_flower_bin", lambda name: name)
    data = tmp_path / "a.csv"
    data.write_text("x\n1\n")
    warm = flower_launch.supernode_command("h:1", data, port=5, insecure=True, isolation="process")
    assert warm[warm.index("--isolation") + 1] == "process"
    assert warm[warm.index("--port") + 1] == "5"
    cold = flower_launch.supernode_command("h:1", data, port=5, insecure=True)
    assert "--isolation" not in cold
    with pytest.raises(FederationError, match="isolation must be"):
        flower_launch.supernode_command("h:1", data, insecure=True, isolation="thread")
