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
"""

from __future__ import annotations

import os
import sys
import time
from types import ModuleType
from typing import Any

__all__ = ["IDLE_POLL", "REPLY_POLL", "main", "patch"]

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


def main() -> None:
    """``flower-supernode`` with :func:`patch` applied (arguments from ``sys.argv``)."""
    try:
        import flwr  # noqa: F401
    except ImportError:
        raise SystemExit("Flower is not installed: pip install 'fits[flower]'") from None
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
