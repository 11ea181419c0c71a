"""The ``fits`` command line (installed as ``fits.cli``).

Importing it first makes a stop signal that comes before the command itself runs
(while pandas, scikit-learn and fits load, the first second or so of every ``fits``
call) end as a stopped command does, without Python's traceback of the import under
way: Ctrl-C prints ``error: interrupted by SIGINT; nothing was written`` and ends the
process as SIGINT ends it (130 in a shell); SIGTERM (``timeout``, ``docker stop``, a
batch scheduler) and SIGHUP, which ended it without a word, print the same line with
their name and exit with ``128 + signal number`` (143, 129). Once a command runs, it
handles its stop signals itself (:func:`fits.cli.errors.interruptible`, which calls
:func:`end_of_loading`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType

Hook = Callable[[type[BaseException], BaseException, TracebackType | None], object]

#: The signals that end a loading command by :func:`_stopped_while_loading` (SIGINT
#: does by the KeyboardInterrupt Python raises, through the excepthook).
LOADING_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


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


def _the_fits_command() -> bool:
    """Whether this process is the ``fits`` command (its console script is ``__main__``),
    not a program that imported :mod:`fits.cli` (a test runner, a notebook)."""
    main = sys.modules.get("__main__")
    return os.path.basename(getattr(main, "__file__", None) or "") in ("fits", "fits-script.py")


def _stopped_while_loading(signum: int, frame: FrameType | None) -> None:
    """SIGTERM or SIGHUP before the command handles them: say so and end with
    ``128 + signum``.

    The ``fits`` command ends at once (``os._exit``), not by raising SystemExit: an
    exception raised in a signal handler can be lost when the signal lands in C code
    that clears errors. Seen: SIGTERM during the ``compile`` of a pandas module being
    imported; the message was printed, the import went on, and the command wrote its
    output and exited 0. While loading, the command has opened no file to write and
    holds nothing to clean up, so ending at once loses nothing. A program that imported
    fits.cli gets SystemExit (Python's own clean-up runs), as before."""
    end_of_loading()
    name = signal.Signals(signum).name
    try:  # os.write: a signal handler may run in the middle of a write to sys.stderr
        os.write(2, f"\nerror: interrupted by {name}; nothing was written\n".encode())
    except OSError:  # stderr closed: the exit status says it
        pass
    if _the_fits_command():
        os._exit(128 + signum)
    raise SystemExit(128 + signum)


def end_of_loading() -> None:
    """Give SIGTERM and SIGHUP back their default action where
    :func:`_stopped_while_loading` still handles them: the command now handles its stop
    signals itself (:func:`fits.cli.errors.interruptible` calls this on entry, so that
    its handlers give way to the default ones, not to the loading ones)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in LOADING_SIGNALS:
        if signal.getsignal(sig) is _stopped_while_loading:
            signal.signal(sig, signal.SIG_DFL)


if not getattr(sys.excepthook, "fits_quiet_interrupt", False):
    sys.excepthook = _quiet_interrupt_hook(sys.excepthook)

if threading.current_thread() is threading.main_thread():
    for _sig in LOADING_SIGNALS:  # one ignored (nohup) or handled by whoever imports fits stays so
        if signal.getsignal(_sig) is signal.SIG_DFL:
            signal.signal(_sig, _stopped_while_loading)
