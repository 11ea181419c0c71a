"""A site's SuperNode: Flower's ``flower-supernode``, polling its SuperLink sooner.

Run as ``fits-flower-supernode ARGS`` (installed with fits; or ``python -m
fits.deploy.flower_supernode ARGS``) with ``flower-supernode``'s own arguments
(:func:`fits.deploy.flower_launch.supernode_command` builds them).  Flower
1.42's SuperNode loop (``flwr.supernode.start_client_internal``) waits a fixed 3 s
whenever it finds no message, and checks every 0.5 s whether its ClientApp's reply is
ready.  A synthesis is a chain of dependent rounds: the SuperNode asks for the next
request right after sending a reply, finds none yet, and waits the 3 s, so every round
paid them (docs/benchmarks.md, "Flower rounds on Adult").  Neither wait is a setting, so
this module starts the same SuperNode with that module's ``time`` replaced by
:class:`_PollingTime`, which shortens those two waits (to :data:`IDLE_POLL` and
:data:`REPLY_POLL` seconds) and leaves every other use of ``time`` as it is.

The replacement touches one name in one module of the Flower version fits pins
(``flwr>=1.42,<1.43``).  On any other version, or should that module not use ``time``
as expected, the SuperNode runs unchanged: :func:`patch` says so and returns False.

With ``--max-wait-time SECONDS`` (``fits federate site --connect-timeout``), it first
waits at most that long for the ``--superlink`` address to take a TCP connection
(:func:`wait_for_superlink`), before Flower starts anything: after that it exits with
:data:`UNREACHABLE_EXIT`, and ``fits federate site`` says what to check.  Flower's
SuperNode, given the same bound, retried a SuperLink that never answered without end
only when the bound was missing; with it, it stops after it (Flower's exit code 305).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["IDLE_POLL", "REPLY_POLL", "UNREACHABLE_EXIT", "main", "patch", "wait_for_superlink"]

#: Exit code of a SuperNode whose SuperLink took no connection within its
#: ``--max-wait-time`` (sysexits' EX_TEMPFAIL), before Flower started.
UNREACHABLE_EXIT = 75

#: Seconds a SuperNode waits before asking again when it found no message (Flower: 3).
#: Each ask is one small gRPC call; ``FITS_SUPERNODE_POLL`` sets another value.
IDLE_POLL = 0.2
#: Seconds between checks for the ClientApp's reply (Flower: 0.5).
REPLY_POLL = 0.05
#: Flower's waits in ``start_client_internal`` that :class:`_PollingTime` shortens.
_FLOWER_IDLE, _FLOWER_REPLY = 3, 0.5


class _PollingTime:
    """The ``time`` module, with Flower's two fixed waits shortened."""

    def __init__(self, idle: float, reply: float) -> None:
        self.idle = idle
        self.reply = reply

    def sleep(self, seconds: float) -> None:
        if seconds == _FLOWER_IDLE:
            seconds = self.idle
        elif seconds == _FLOWER_REPLY:
            seconds = self.reply
        time.sleep(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _idle_poll() -> float:
    text = os.environ.get("FITS_SUPERNODE_POLL", "")
    if not text:
        return IDLE_POLL
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.01 <= value <= 3.0:
        raise SystemExit(
            f"FITS_SUPERNODE_POLL={text!r}: give the SuperNode's idle poll in seconds, "
            "0.01 to 3 (Flower's own is 3)"
        )
    return value


def patch(module: ModuleType | None = None, idle: float | None = None) -> bool:
    """Shorten the SuperNode loop's waits in ``module`` (default Flower's
    ``flwr.supernode.start_client_internal``); whether it was done.

    Done only for flwr 1.42 and a module whose global ``time`` is the time module (what
    its loop calls ``time.sleep`` on); otherwise nothing changes."""
    if module is None:
        import importlib

        import flwr

        if not str(getattr(flwr, "__version__", "")).startswith("1.42."):
            return False
        module = importlib.import_module("flwr.supernode.start_client_internal")
    if getattr(module, "time", None) is not time:
        return False
    setattr(module, "time", _PollingTime(_idle_poll() if idle is None else idle, REPLY_POLL))  # noqa: B010
    return True


def wait_for_superlink(
    address: str,
    timeout: float,
    *,
    interval: float = 1.0,
    waiting: Callable[[str], None] | None = None,
) -> None:
    """Wait until a TCP connection to the SuperLink at ``address`` (``host:port``, as
    :func:`fits.deploy.flower_launch.check_address` takes it) opens, trying every
    ``interval`` seconds for at most ``timeout`` seconds (0: without end).  ``waiting``
    is told why the first try failed (once).  Only the connection is tried: TLS and
    Flower's own handshake are the SuperNode's, which fails at once on those.

    Raises
    ------
    TimeoutError
        No connection within ``timeout`` seconds; the message is why the last try
        failed (e.g. "connection refused", "cannot resolve host ...").
    """
    text = address.strip()
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    deadline = time.monotonic() + timeout if timeout > 0 else float("inf")
    told = False
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, int(port)), timeout=max(min(left, 5.0), 0.1)):
                return
        except socket.gaierror as exc:
            reason = f"cannot resolve host {host!r}: {exc.strerror or exc}"
        except OSError as exc:
            reason = (exc.strerror or str(exc) or type(exc).__name__).lower()
        if waiting is not None and not told:
            waiting(reason)
            told = True
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(reason)
        time.sleep(min(interval, left))


def _option(args: Sequence[str], name: str) -> str | None:
    """The value of ``name`` (``--name VALUE`` or ``--name=VALUE``) in ``args``, or None."""
    for k, arg in enumerate(args):
        if arg == name and k + 1 < len(args):
            return args[k + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _wait_first(args: Sequence[str]) -> None:
    """With ``--max-wait-time`` and ``--superlink`` in ``args``: :func:`wait_for_superlink`
    for that long; exit :data:`UNREACHABLE_EXIT` when it took no connection."""
    address, bound = _option(args, "--superlink"), _option(args, "--max-wait-time")
    if not address or bound is None:
        return
    try:
        timeout = float(bound)
    except ValueError:
        return  # Flower's own parser says what is wrong with it

    def waiting(reason: str) -> None:
        print(  # noqa: T201 - the SuperNode's log
            f"fits: the SuperLink at {address} does not answer yet ({reason}); waiting up "
            f"to {timeout:g} s for it (fits federate site --connect-timeout)",
            file=sys.stderr,
            flush=True,
        )

    try:
        wait_for_superlink(address, timeout, waiting=waiting)
    except TimeoutError as exc:
        print(  # noqa: T201 - the SuperNode's log
            f"fits: the SuperLink at {address} did not answer within {timeout:g} s ({exc})",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(UNREACHABLE_EXIT) from None
    except ValueError:  # no host:port: Flower's own check says so
        return


def main() -> None:
    """``flower-supernode`` with :func:`patch` applied (arguments from ``sys.argv``),
    after waiting for the SuperLink when ``--max-wait-time`` bounds the wait."""
    try:
        import flwr  # noqa: F401
    except ImportError:
        raise SystemExit("Flower is not installed: pip install 'fits[flower]'") from None
    _wait_first(sys.argv[1:])
    patched = patch()
    from flwr.supernode.cli import flower_supernode

    if not patched:
        print(  # noqa: T201 - the SuperNode's log
            "fits: Flower's SuperNode runs with its own 3 s poll (not flwr 1.42)",
            file=sys.stderr,
        )
    sys.argv[0] = "flower-supernode"
    flower_supernode()


if __name__ == "__main__":
    main()
