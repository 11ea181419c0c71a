"""Flower's SuperExec, reaping the app processes it starts.

A SuperLink (and a SuperNode with Flower's default ``--isolation subprocess``) starts a
``flower-superexec`` process, found on ``PATH``, which starts one ``flwr-serverapp``
(``flwr-clientapp``) process per run (per message).  Flower 1.42's
``SubprocessExecutor.launch`` (``flwr/supercore/superexec/executor/subprocess_executor.py``)
starts each with ``subprocess.Popen`` and drops the object; nothing in the SuperExec
waits for it.  So an app process that ends (a finished run, or one stopped by ``flwr
stop`` after Ctrl-C of ``fits federate run``) stays a zombie (``[flwr-serverapp]
<defunct>``) under the SuperExec until Python's ``subprocess`` reaps it at the next
launch, or until the SuperLink stops: a long-running ``fits federate superlink`` always
held the last run's, and a site one or two ClientApps'.

This module runs the same SuperExec with :func:`patch` applied: the executor keeps the
processes it starts and polls them in ``reconcile``, which the SuperExec's loop calls
before each request for a task (every ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` seconds,
0.1 under fits), so an ended app process is reaped within a poll.  Nothing else
changes: no signal handler, no ``waitpid`` of other children.

fits makes it the SuperExec of the SuperLinks and SuperNodes it starts: it writes
:data:`SHIM_NAME` (a two-line shell script that runs this module with fits's Python,
:func:`write_shim`) into a folder of the Flower home, put first on the process's
``PATH`` (:func:`fits.deploy.flower_launch.flower_env` with ``superexec=True``).

The replacement touches one class of the Flower version fits pins (``flwr>=1.42,<1.43``).
On any other version, or should that class not look as expected, the SuperExec runs
unchanged: :func:`patch` says so and returns False.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["SHIM_NAME", "main", "patch", "remove_shim", "write_shim"]

#: The program a SuperLink or SuperNode starts as its SuperExec (Flower's name).
SHIM_NAME = "flower-superexec"


class _ReapingSubprocess:
    """The ``subprocess`` module, whose ``Popen`` keeps the processes it starts so that
    :meth:`reap` can wait for those that ended."""

    def __init__(self) -> None:
        self.children: list[subprocess.Popen[Any]] = []

    def Popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[Any]:  # noqa: N802 - subprocess's name
        self.reap()
        proc: subprocess.Popen[Any] = subprocess.Popen(*args, **kwargs)  # noqa: S603 - Flower's command
        self.children.append(proc)
        return proc

    def reap(self) -> None:
        """Wait for (``poll``) every kept process that ended; keep those still running."""
        self.children = [proc for proc in self.children if proc.poll() is None]

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)


def patch(module: ModuleType | None = None) -> bool:
    """Make the SuperExec's subprocess executor in ``module`` (default Flower's
    ``flwr.supercore.superexec.executor.subprocess_executor``) reap the processes it
    starts; whether it was done.

    Done only for flwr 1.42 and a module whose global ``subprocess`` is the subprocess
    module (what ``launch`` calls ``Popen`` on) and whose ``SubprocessExecutor`` has
    ``reconcile`` and ``close``; otherwise nothing changes."""
    if module is None:
        import importlib

        import flwr

        if not str(getattr(flwr, "__version__", "")).startswith("1.42."):
            return False
        module = importlib.import_module("flwr.supercore.superexec.executor.subprocess_executor")
    executor = getattr(module, "SubprocessExecutor", None)
    if (
        getattr(module, "subprocess", None) is not subprocess
        or executor is None
        or not callable(getattr(executor, "reconcile", None))
        or not callable(getattr(executor, "close", None))
    ):
        return False
    reaping = _ReapingSubprocess()
    reconcile, close = executor.reconcile, executor.close

    def reconcile_and_reap(self: Any) -> None:
        reconcile(self)
        reaping.reap()

    def close_and_reap(self: Any) -> None:
        close(self)
        reaping.reap()

    setattr(module, "subprocess", reaping)  # noqa: B010
    executor.reconcile = reconcile_and_reap
    executor.close = close_and_reap
    return True


def write_shim(folder: str | Path) -> Path | None:
    """Write ``folder/flower-superexec``, which runs this module with this Python (and
    Flower's SuperExec arguments); the folder, to put first on ``PATH``.  None where
    processes are not started so (not POSIX): Flower's own SuperExec runs there."""
    if os.name != "posix":
        return None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / SHIM_NAME
    # -P: not the working folder first on sys.path (the SuperLink's, any folder)
    text = (
        "#!/bin/sh\n"
        "# fits: Flower's SuperExec, reaping the app processes it starts "
        "(fits.deploy.flower_superexec)\n"
        f'exec {shlex.quote(sys.executable)} -P -m fits.deploy.flower_superexec "$@"\n'
    )
    staged = folder / f".{SHIM_NAME}.{os.getpid()}"
    staged.write_text(text)
    staged.chmod(0o755)
    os.replace(staged, shim)  # whole or not at all, should a SuperNode start it now
    return folder


def remove_shim(folder: str | Path) -> None:
    """Remove what :func:`write_shim` wrote in ``folder`` (and the folder, if empty)."""
    folder = Path(folder)
    try:
        (folder / SHIM_NAME).unlink()
    except FileNotFoundError:
        pass
    try:
        folder.rmdir()
    except OSError:  # gone already, or holds something else
        pass


def main() -> None:
    """``flower-superexec`` with :func:`patch` applied (arguments from ``sys.argv``)."""
    try:
        import flwr  # noqa: F401
    except ImportError:
        raise SystemExit("Flower is not installed: pip install 'fits[flower]'") from None
    patched = patch()
    from flwr.supercore.cli.flower_superexec import flower_superexec

    if not patched:
        print(  # noqa: T201 - the SuperExec's log
            "fits: Flower's SuperExec runs unchanged: it reaps the app processes it "
            "started only at its next start of one (not flwr 1.42)",
            file=sys.stderr,
        )
    sys.argv[0] = SHIM_NAME
    flower_superexec()


if __name__ == "__main__":
    main()
