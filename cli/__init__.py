"""The ``fits`` command line (installed as ``fits.cli``).

Importing it first makes a Ctrl-C that stops the command before the command itself
runs (while pandas, scikit-learn and fits load, the first second or so of every
``fits`` call) end as a stopped command does, without Python's traceback of the
import under way: ``error: interrupted by SIGINT``, and the exit status of a process
that SIGINT ended (130 in a shell). Once a command runs, it handles its stop signals
itself (:func:`fits.cli.errors.interruptible`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType

Hook = Callable[[type[BaseException], BaseException, TracebackType | None], object]


def _quiet_interrupt_hook(hook: Hook) -> Hook:
    def excepthook(
        kind: type[BaseException], value: BaseException, traceback: TracebackType | None
    ) -> None:
        if issubclass(kind, KeyboardInterrupt):  # Python still exits as SIGINT ends it
            sys.stderr.write("\nerror: interrupted by SIGINT; nothing was written\n")
            return
        hook(kind, value, traceback)

    excepthook.fits_quiet_interrupt = True  # type: ignore[attr-defined]
    return excepthook


if not getattr(sys.excepthook, "fits_quiet_interrupt", False):
    sys.excepthook = _quiet_interrupt_hook(sys.excepthook)
