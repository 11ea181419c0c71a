"""How a :class:`~fits.deploy.flower_launch.LocalFederation` stops when this process is
told to stop: every wait bounded, and a stop signal never cuts the clean-up short.

No Flower here: the federation's processes are stand-ins that ignore SIGTERM, as a
SuperLink does during a run (flwr 1.42), so only SIGKILL after the grace ends them.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from fits.deploy import flower_launch
from fits.deploy.flower_launch import LocalFederation, exit_on_signals

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="process groups and signals (Linux)"
)

#: A process that ignores SIGTERM and says so (its log) once it does.
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(120)"
)


class _Recorded:
    """A SIGTERM handler for the test process that records instead of ending it."""

    def __init__(self) -> None:
        self.signals: list[int] = []

    def __call__(self, signum: int, frame: object) -> None:
        self.signals.append(signum)


@pytest.fixture
def recorded():
    handler = _Recorded()
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stand_in_start(self: LocalFederation, timeout: float = 60.0) -> LocalFederation:
    for role in ("site-a", "superlink"):
        self._spawn(role, [sys.executable, "-c", STUBBORN])
    deadline = time.monotonic() + 60
    while not all("ready" in self.log(role) for role in self.processes):
        assert time.monotonic() < deadline, "the stand-ins did not start"
        time.sleep(0.05)
    return self


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_stop_signal_during_the_stop_does_not_cut_the_clean_up_short(
    tmp_path, monkeypatch, recorded
):
    """SIGTERM while the federation stops (the run just ended, or a second signal):
    its processes are still killed after the grace and its folder removed, and the
    signal then reaches the previous handler.  (It raised SystemExit inside the
    grace's wait, so what ignored SIGTERM survived and the folder stayed.)"""
    monkeypatch.setattr(flower_launch, "STOP_GRACE", 1.0)
    monkeypatch.setattr(LocalFederation, "start", _stand_in_start)
    data = tmp_path / "a.csv"
    data.write_text("x\n1\n")
    fed = LocalFederation({"a": data})
    with fed:
        pids = [p.pid for p in fed.processes.values()]
        workdir = fed.workdir
        # during the stop's grace, as a scheduler's SIGTERM might come
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
    assert not [pid for pid in pids if _alive(pid)]
    assert not workdir.exists()
    assert recorded.signals == [signal.SIGTERM]  # sent again once the clean-up ended


def test_a_stopped_federation_ends_within_its_grace(tmp_path, monkeypatch, recorded):
    """SIGTERM inside the block: the processes that ignore it are killed after
    STOP_GRACE, with nothing waited on longer, and the block ends by the signal."""
    monkeypatch.setattr(flower_launch, "STOP_GRACE", 1.0)
    monkeypatch.setattr(LocalFederation, "start", _stand_in_start)
    data = tmp_path / "a.csv"
    data.write_text("x\n1\n")
    fed = LocalFederation({"a": data})
    with pytest.raises(SystemExit) as stopped, fed:
        pids = [p.pid for p in fed.processes.values()]
        sent = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # a run under way
    took = time.monotonic() - sent
    assert stopped.value.code == 128 + signal.SIGTERM
    assert took < 1.0 + flower_launch.KILL_WAIT + 1.5, took
    assert not [pid for pid in pids if _alive(pid)]
    assert recorded.signals == [signal.SIGTERM]


def test_a_second_signal_stops_the_block_when_the_first_exception_was_lost(recorded):
    """Python drops an exception raised where it cannot propagate (a ``__del__``, a
    callback); a stop signal whose SystemExit was lost so must not leave every later
    one ignored and the process running on (a federation until its run ends)."""
    with pytest.raises(SystemExit), exit_on_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except SystemExit:
            pass  # lost
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        pytest.fail("the second SIGTERM was ignored")
    assert recorded.signals == [signal.SIGTERM]


def test_a_flwr_command_that_does_not_end_is_stopped(tmp_path, monkeypatch):
    """``flwr run``/``ls``/``stop`` were run without a time limit: a SuperLink that took
    the connection and never answered held ``fits federate run``/``local`` forever (and
    its time-limit stop, which asks ``flwr stop``).  Now each is killed after
    FLWR_COMMAND_TIMEOUT with a FederationError that says why; ``flwr stop`` on the way
    out of a late run is best effort."""
    fake = tmp_path / "flwr"
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    fake.chmod(0o755)
    monkeypatch.setattr(flower_launch, "FLWR_COMMAND_TIMEOUT", 1.0)
    start = time.monotonic()
    with pytest.raises(flower_launch.FederationError, match="`flwr ls` did not end within 1 s"):
        flower_launch._run_status(str(fake), 1, dict(os.environ), tmp_path)
    assert time.monotonic() - start < 10
    flower_launch._stop_run(str(fake), 1, dict(os.environ), tmp_path)  # raises nothing
