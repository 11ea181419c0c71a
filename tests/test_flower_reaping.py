"""Flower 1.42's SuperExec starts each ServerApp (ClientApp) process with
``subprocess.Popen`` and never waits for it: a run that ended (or was stopped by Ctrl-C
of ``fits federate run``) left a ``[flwr-serverapp] <defunct>`` zombie under the
SuperExec of a long-running ``fits federate superlink`` until the next run or the
SuperLink's end, and ClientApp zombies under each ``fits federate site``.  The SuperLinks
and SuperNodes fits starts now run fits's SuperExec (:mod:`fits.deploy.flower_superexec`),
which reaps them."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.deploy import flower_superexec
from fits.deploy.flower_launch import SUPEREXEC_DIR, flower_env

from conftest import kill_marked, marked_processes, wait_until

pytestmark = pytest.mark.skipif(
    not Path("/proc").is_dir() or os.name != "posix", reason="scans /proc (Linux)"
)

FITS = str(Path(sys.executable).with_name("fits"))


def _stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and parent pid, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


# -- the executor patch, without Flower -------------------------------------------------


def _flower_like_module() -> types.ModuleType:
    """A stand-in for Flower's ``subprocess_executor``: ``launch`` drops its Popen."""
    module = types.ModuleType("subprocess_executor")
    module.subprocess = subprocess  # type: ignore[attr-defined]

    class SubprocessExecutor:
        def launch(self, args: list[str]) -> int:
            return module.subprocess.Popen(args).pid  # type: ignore[attr-defined]

        def reconcile(self) -> None:
            pass

        def close(self) -> None:
            pass

    module.SubprocessExecutor = SubprocessExecutor  # type: ignore[attr-defined]
    return module


def _ended(pid: int) -> bool:
    state = _stat(pid)
    return state is None or state[0] == "Z"


@pytest.mark.parametrize("patched", [False, True])
def test_the_executor_reaps_an_ended_app_process_at_its_next_poll(patched):
    module = _flower_like_module()
    if patched:
        assert flower_superexec.patch(module)
    executor = module.SubprocessExecutor()
    pid = executor.launch([sys.executable, "-c", "pass"])
    try:
        assert wait_until(lambda: _ended(pid), 30)
        executor.reconcile()  # the SuperExec's loop, before it asks for the next task
        if patched:
            assert _stat(pid) is None  # reaped
        else:  # Flower's own: a zombie until the next Popen of this process
            assert _stat(pid) == ("Z", os.getpid())
    finally:
        if not patched:
            os.waitpid(pid, 0)


def test_close_reaps_and_running_processes_are_kept():
    module = _flower_like_module()
    assert flower_superexec.patch(module)
    executor = module.SubprocessExecutor()
    slow = executor.launch([sys.executable, "-c", "import time; time.sleep(60)"])
    quick = executor.launch([sys.executable, "-c", "pass"])
    try:
        assert wait_until(lambda: _ended(quick), 30)
        executor.reconcile()
        assert _stat(quick) is None
        assert _stat(slow) is not None and _stat(slow)[0] != "Z"  # untouched
        os.kill(slow, signal.SIGKILL)
        assert wait_until(lambda: _ended(slow), 30)
        executor.close()  # the SuperExec's end
        assert _stat(slow) is None
    finally:
        if _stat(slow) is not None:
            os.kill(slow, signal.SIGKILL)
            os.waitpid(slow, 0)


def test_patch_leaves_an_unexpected_module_alone():
    module = _flower_like_module()
    module.subprocess = types.SimpleNamespace(Popen=subprocess.Popen)  # type: ignore[attr-defined]
    reconcile = module.SubprocessExecutor.reconcile
    assert not flower_superexec.patch(module)
    assert module.SubprocessExecutor.reconcile is reconcile
    assert not flower_superexec.patch(types.ModuleType("empty"))


def test_flower_env_puts_fits_superexec_first_and_remove_shim_removes_it(tmp_path):
    plain = shutil.which("flower-superexec", path=flower_env(tmp_path)["PATH"])
    assert plain is None or not plain.startswith(str(tmp_path))  # Flower's own, or none
    assert not (tmp_path / SUPEREXEC_DIR).exists()
    env = flower_env(tmp_path, superexec=True)
    found = shutil.which("flower-superexec", path=env["PATH"])
    assert found == str(tmp_path / SUPEREXEC_DIR / "flower-superexec")
    assert "-m fits.deploy.flower_superexec" in Path(found).read_text()
    flower_superexec.remove_shim(tmp_path / SUPEREXEC_DIR)
    assert not (tmp_path / SUPEREXEC_DIR).exists()


def test_the_shim_runs_flowers_superexec(tmp_path):
    pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")
    env = flower_env(tmp_path, superexec=True)
    shim = shutil.which("flower-superexec", path=env["PATH"])
    assert shim is not None
    res = subprocess.run(
        [shim, "--version"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert res.returncode == 0, res.stderr
    assert "Flower version: 1.42" in res.stdout + res.stderr
    assert "runs unchanged" not in res.stderr  # patched


# -- a long-running SuperLink and two sites, a run stopped by Ctrl-C -------------------


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _listens(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _zombies_under(parents: set[int]) -> list[str]:
    """``PID (comm) under PPID`` for each zombie whose parent is in ``parents``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            state = _stat(int(entry.name))
            if state is not None and state[0] == "Z" and state[1] in parents:
                try:
                    comm = (entry / "comm").read_text().strip()
                except OSError:
                    comm = "?"
                found.append(f"{entry.name} ({comm}) under {state[1]}")
    return found


def _apps(pids: set[int]) -> list[int]:
    """The live ServerApp and ClientApp processes among ``pids``."""
    out = []
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"flwr-serverapp" in cmd or b"flwr-clientapp" in cmd:
            out.append(pid)
    return out


def _default_sigint() -> None:  # Ctrl-C as in a terminal, whatever this process ignores
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.flower
@pytest.mark.slow
def test_a_run_stopped_by_ctrl_c_leaves_no_zombie_under_superlink_or_sites(tmp_path):
    """About 50 s on 2 busy cores.  Before: the ServerApp stayed ``<defunct>`` under
    the SuperLink's SuperExec (and ClientApps under the sites') until the commands
    stopped."""
    pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")
    rng = np.random.default_rng(0)
    sites = []
    for k in range(2):
        x = rng.normal(size=150)
        sites.append(tmp_path / f"site-{k}.csv")
        pd.DataFrame(
            {"x": x, "y": 2 * x + rng.normal(size=150), "g": rng.choice(["u", "v", "w"], 150)}
        ).to_csv(sites[-1], index=False)
    link, *site_ports = _free_ports(3)
    token = uuid.uuid4().hex
    env = {**os.environ, "FITS_REAPING_TEST": token}
    marker = f"FITS_REAPING_TEST={token}".encode()
    address = f"127.0.0.1:{link}"
    logs = []
    started: list[subprocess.Popen] = []

    def start(name: str, *args: object) -> subprocess.Popen:
        logs.append(tmp_path / f"{name}.log")
        with open(logs[-1], "wb") as log:
            started.append(
                subprocess.Popen(
                    [FITS, "federate", *map(str, args)],
                    env=env,
                    cwd=tmp_path,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_default_sigint,
                )
            )
        return started[-1]

    def tails() -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text()[-1500:] for p in logs if p.exists())

    homes = [tmp_path / "superlink", tmp_path / "site-0", tmp_path / "site-1"]
    commands = []
    try:
        commands.append(
            start("superlink", "superlink", "--host", "127.0.0.1", "--port", link,
                  "--insecure", "--home", homes[0])
        )  # fmt: skip
        assert wait_until(lambda: _listens(link) or commands[0].poll() is not None, 120)
        assert commands[0].poll() is None, tails()
        for k, (path, port) in enumerate(zip(sites, site_ports, strict=True)):
            commands.append(
                start(f"site-{k}", "site", "--data", path, "--superlink", address,
                      "--insecure", "--port", port, "--home", homes[k + 1])
            )  # fmt: skip
        run = start(
            "run", "run", "--superlink", address, "--insecure", "--sites", 2,
            "--rows", 150, "--out", tmp_path / "out.csv", "--seed", 1,
        )  # fmt: skip
        serverapp = wait_until(
            lambda: (
                run.poll() is not None
                or any(b"flwr-serverapp" in _cmd(p) for p in marked_processes(marker))
            ),
            180,
        )
        serverapp = serverapp and run.poll() is None
        assert serverapp, f"the run did not start\n{tails()}"
        time.sleep(2)  # under way
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=120) == 130, tails()
        # every app process ends, and none stays a zombie of a process the test started
        settled = wait_until(
            lambda: (
                not _apps(marked_processes(marker)) and not _zombies_under(marked_processes(marker))
            ),
            60,
        )
        assert settled, (
            f"zombies: {_zombies_under(marked_processes(marker))}, "
            f"apps running: {_apps(marked_processes(marker))}\n{tails()}"
        )
        time.sleep(1.5)  # and none comes later
        assert not _zombies_under(marked_processes(marker))
        assert all(c.poll() is None for c in commands), tails()  # the commands still run
        for home in homes:
            assert (home / SUPEREXEC_DIR / "flower-superexec").exists()
        # Ctrl-C of the commands ends every process they started, and their shims
        for command in commands:
            command.send_signal(signal.SIGINT)
        for command in commands:
            assert command.wait(timeout=60) == 130, tails()
        assert wait_until(lambda: not marked_processes(marker), 40), (
            f"survivors: {[_cmd(p) for p in marked_processes(marker)]}"
        )
        for home in homes:
            assert not (home / SUPEREXEC_DIR).exists()
    finally:
        kill_marked(marker)  # never leave a process behind, even on failure
        for proc in started:  # and the test leaves no zombie of its own
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


def _cmd(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""
