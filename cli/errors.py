"""How every ``fits`` command reports an error: ``error: <message>`` on stderr, then exit."""

from __future__ import annotations

import typer


def fail(message: str, code: int = 1) -> None:
    """Print ``error: message`` to stderr and exit with ``code`` (1: data, 2: usage)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
