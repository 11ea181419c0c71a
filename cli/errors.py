"""How every ``fits`` command reports an error: ``error: <message>`` on stderr, then exit.

Also how a command ends when it is told to stop: :func:`interruptible` turns SIGTERM
(what ``timeout``, ``docker stop`` and batch schedulers send), SIGINT (Ctrl-C) and
SIGHUP (a closed terminal) into an exception, so that every ``finally`` and the atomic
writers of :mod:`fits.io` run and remove their temporary files; the command then prints
what happened and exits with ``128 + signal number`` (143, 130, 129), as a shell does.

And how it ends when the reader of its stdout goes away (``fits ... | head -1``):
:func:`closed_stdout_ends_quietly`, around every command (:mod:`fits.cli.main`).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import typer

from . import end_of_loading

__all__ = [
    "CLOSED_STDOUT_EXIT",
    "Interrupted",
    "closed_stdout_ends_quietly",
    "fail",
    "interruptible",
]

#: The signals :func:`interruptible` handles.
SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)


def fail(message: str, code: int = 1) -> None:
    """Print ``error: message`` to stderr and exit with ``code`` (1: data, 2: usage)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def echo_warnings(caught: Sequence[warnings.WarningMessage]) -> None:
    """Print caught warnings, one line each on stderr: notes (what fits inferred, a
    :class:`~fits.core.schema.DataNote`) as ``note:``, the rest as ``warning:``."""
    from fits.core.schema import DataNote

    for w in caught:
        label = "note" if issubclass(w.category, DataNote) else "warning"
        typer.echo(f"{label}: {w.message}", err=True)


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
    is printed and the command exits with ``128 + signum``. A signal ignored when the
    block starts (``nohup``'s SIGHUP, the SIGINT of a shell's background job) stays
    ignored, as it was while the command loaded. The previous handlers are
    restored afterwards (the default ones where they were the loading command's:
    :func:`fits.cli.end_of_loading`).
    """
    end_of_loading()
    previous = {}
    for sig in SIGNALS:
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                continue  # ignored by whoever started fits (nohup; SIGINT of a background job)
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


#: The exit status of a command whose stdout reader went away: 128 + SIGPIPE, what a
#: shell reports for ``yes`` or ``cat`` in ``... | head -1`` (SIGPIPE ends them).
CLOSED_STDOUT_EXIT = 128 + getattr(signal, "SIGPIPE", 13)


def _reader_gone(stream: object) -> bool:
    """Whether ``stream`` is a pipe whose reading end is closed (poll says POLLERR);
    True where poll cannot tell (no ``select.poll``: Windows)."""
    try:
        import select

        fd = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError, ImportError):  # no file: not a pipe
        return False
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(event & select.POLLERR for _, event in poller.poll(0))


@contextmanager
def closed_stdout_ends_quietly() -> Iterator[None]:
    """Run a command so that a closed stdout ends it quietly, once, for every command.

    When the reader of stdout goes away (``fits --help | head -1``, ``fits schema ...
    | head``), the next write (or the flush at the end, done here, inside) fails with
    EPIPE. The command then stops there, without a traceback or a message (the
    reader chose to read no more; what was written to files is complete, the atomic
    writers' clean-up having run), and exits with :data:`CLOSED_STDOUT_EXIT` (141), as a
    Unix tool killed by SIGPIPE does: a script with ``set -o pipefail`` sees it, a plain
    pipeline takes the reader's status. stdout (and stderr, if its reader is gone too)
    is pointed at ``os.devnull`` so that Python's final flush does not fail again (the
    pattern of the "Note on SIGPIPE" in Python's ``signal`` documentation).

    An EPIPE from anything else (a child process's pipe, a socket) is not stdout's and
    propagates as it did. rich's own handling (exit 1, stdout at os.devnull) becomes
    the same quiet 141.
    """
    try:
        try:
            yield
        except typer.Exit as stop:
            if stop.exit_code == 0:  # --help ends by Exit(0): flush its text here
                sys.stdout.flush()
            raise
        sys.stdout.flush()
    except OSError as exc:
        if exc.errno != errno.EPIPE or not _reader_gone(sys.stdout):
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            if stream is sys.stdout or _reader_gone(stream):
                try:
                    os.dup2(devnull, stream.fileno())
                except (AttributeError, OSError, ValueError):
                    pass
        os.close(devnull)
        raise SystemExit(CLOSED_STDOUT_EXIT) from None
    except SystemExit as stop:
        # rich (the help texts, typer's error boxes) handles a broken pipe itself: it
        # points stdout at os.devnull and exits 1 (Console.on_broken_pipe)
        cause = stop.__context__
        if stop.code == 1 and isinstance(cause, OSError) and cause.errno == errno.EPIPE:
            raise SystemExit(CLOSED_STDOUT_EXIT) from None
        raise
