"""How every ``fits`` command reports an error: ``error: <message>`` on stderr, then exit.

Also how a command ends when it is told to stop: :func:`interruptible` turns SIGTERM
(what ``timeout``, ``docker stop`` and batch schedulers send), SIGINT (Ctrl-C) and
SIGHUP (a closed terminal) into an exception, so that every ``finally`` and the atomic
writers of :mod:`fits.io` run and remove their temporary files; the command then prints
what happened and exits with ``128 + signal number`` (143, 130, 129), as a shell does.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import typer

__all__ = ["Interrupted", "fail", "interruptible"]

#: The signals :func:`interruptible` handles.
SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)


def fail(message: str, code: int = 1) -> None:
    """Print ``error: message`` to stderr and exit with ``code`` (1: data, 2: usage)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


class Interrupted(BaseException):
    """Raised in the main thread when the process receives a stop signal.

    A ``BaseException`` (like ``KeyboardInterrupt``) so that no ``except Exception``
    on the way swallows it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def name(self) -> str:
        """The signal's name, e.g. ``"SIGTERM"``."""
        return signal.Signals(self.signum).name


def _raise(signum: int, frame: object) -> None:
    # further signals must not interrupt the clean-up that this exception starts
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def interruptible(what: str = "no output was written") -> Iterator[None]:
    """Run the body so that SIGTERM, SIGINT and SIGHUP end it cleanly.

    On a signal the body is interrupted by :class:`Interrupted` (temporary files are
    removed by the writers' own clean-up), ``error: interrupted by SIGTERM; <what>``
    is printed and the command exits with ``128 + signum``. The previous handlers are
    restored afterwards.
    """
    previous = {}
    for sig in SIGNALS:
        try:
            previous[sig] = signal.signal(sig, _raise)
        except (ValueError, OSError):  # not the main thread, or not settable here
            continue
    try:
        yield
    except Interrupted as stop:
        typer.echo(f"\nerror: interrupted by {stop.name}; {what}", err=True)
        raise typer.Exit(128 + stop.signum) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
