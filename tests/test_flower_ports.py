"""The SuperLink of a :class:`~fits.deploy.flower_launch.LocalFederation` listens on a
port found free by binding port 0 and releasing it; another process could take the
port in between. The SuperLink then exited ("address already in use") while the port
still took connections (the other process's), so the federation went on as if it were
up, its SuperNodes and runs talking to that other process. Now a port is the
SuperLink's only when its own process holds the listening socket; on a port taken, it
is started again on a new one."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.deploy import flower_launch
from fits.deploy.flower_launch import FederationError, LocalFederation

#: Whose a port is, is read from /proc (Linux); elsewhere a taken port is not detected.
linux = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="a port's owner is read from /proc (Linux)"
)


def _site(path: Path, n: int = 40, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    pd.DataFrame({"g": rng.choice(["u", "v"], n), "x": rng.normal(size=n)}).to_csv(
        path, index=False
    )
    return path


@pytest.fixture
def held() -> Iterator[socket.socket]:
    """A port of 127.0.0.1 that another process (this one) listens on."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def _taken_first(monkeypatch, port: int) -> None:
    """The port picker gives ``port`` first, then free ports."""
    real = flower_launch._free_port
    picks = iter([port])
    monkeypatch.setattr(flower_launch, "_free_port", lambda: next(picks, None) or real())


@pytest.mark.flower
@linux
def test_a_taken_port_is_not_the_superlinks(tmp_path, held, monkeypatch):
    """The SuperLink started on a port another process listens on: the federation
    starts it again on a free port (before, it took the other process's port for the
    SuperLink's)."""
    pytest.importorskip("flwr")
    port = held.getsockname()[1]
    _taken_first(monkeypatch, port)
    with LocalFederation({"a": _site(tmp_path / "a.csv")}) as fed:
        assert fed.port != port
        assert flower_launch._listener(fed.port, fed.processes["superlink"]) == "mine"
        assert flower_launch._listener(port, fed.processes["superlink"]) == "other"


@pytest.mark.flower
@pytest.mark.slow
@linux
def test_a_run_after_a_taken_port_completes(tmp_path, held, monkeypatch):
    """About 45 s on two busy cores."""
    pytest.importorskip("flwr")
    _taken_first(monkeypatch, held.getsockname()[1])
    sites = {"a": _site(tmp_path / "a.csv"), "b": _site(tmp_path / "b.csv", seed=1)}
    with LocalFederation(sites) as fed:
        result = fed.run({"output": str(tmp_path / "o.csv"), "rows": 10, "timeout": 300.0})
    assert result.ok, result.details
    assert len(pd.read_csv(tmp_path / "o.csv")) == 10


@pytest.mark.flower
@linux
def test_every_port_taken_fails_at_once_naming_the_ports(tmp_path, held, monkeypatch):
    pytest.importorskip("flwr")
    port = held.getsockname()[1]
    monkeypatch.setattr(flower_launch, "_free_port", lambda: port)
    monkeypatch.setattr(flower_launch, "PORT_TRIES", 2)
    started = time.monotonic()
    with pytest.raises(FederationError) as caught:
        with LocalFederation({"a": _site(tmp_path / "a.csv")}, workdir=tmp_path / "work"):
            pass  # pragma: no cover - it does not start
    assert time.monotonic() - started < 60
    text = str(caught.value)
    assert "the SuperLink could not listen on 127.0.0.1" in text
    assert f"({port}, {port})" in text and "try again" in text
    # nothing of it is left
    assert not any(
        f"FLWR_HOME={tmp_path / 'work'}".encode() in _environ(p) for p in Path("/proc").iterdir()
    )


def _environ(entry: Path) -> bytes:
    try:
        return (entry / "environ").read_bytes() if entry.name.isdigit() else b""
    except OSError:
        return b""


class _Ended:
    pid = 0

    def poll(self) -> int:
        return 1


def test_a_supernode_whose_port_was_taken_is_named_with_the_cause(tmp_path):
    """A SuperNode's local port can be taken the same way; the run then stops at once
    (:meth:`LocalFederation.check_processes`) saying so, not with the end of its log."""
    fed = LocalFederation({"a": _site(tmp_path / "a.csv")}, workdir=tmp_path / "work")
    fed.workdir.mkdir()
    fed.site_ports = {"a": 40123}
    fed.processes = {"site-a": _Ended()}  # type: ignore[dict-item]
    (fed.workdir / "site-a.log").write_text(
        "ERROR [uvicorn.error] [Errno 98] error while attempting to bind on address "
        "('127.0.0.1', 40123): address already in use\n"
    )
    with pytest.raises(FederationError) as caught:
        fed.check_processes()
    assert "the SuperNode of site 'a' stopped at start" in str(caught.value)
    assert "took its local port 127.0.0.1:40123" in str(caught.value)
    fed.processes = {}
