"""Command help that reads well at any terminal width.

Typer (from 0.16 on, in its ``rich`` markup mode) keeps every line break of a
command's docstring, so a docstring wrapped at 88 characters, printed on an
80-column terminal, leaves a word or two alone on every other line. The group
here joins the lines of each prose paragraph before Typer renders it, and leaves
alone the paragraphs that keep their layout: examples (any indented line) and
Click's no-rewrap paragraphs (``\\b``).
"""

from __future__ import annotations

import inspect
from typing import Any

from typer.core import TyperGroup

__all__ = ["ReflowedHelpGroup", "reflow"]


def reflow(text: str) -> str:
    """``text`` with the lines of each prose paragraph joined by single spaces.

    A paragraph (lines between blank lines) is left as written when one of its
    lines is indented (an example) or it starts with ``\\b``. What follows a
    ``\\f`` line (Click's end of the help) is left as written.

    Examples
    --------
    >>> reflow("Synthesize a table.\\n\\nThe output keeps\\nthe input's types.")
    "Synthesize a table.\\n\\nThe output keeps the input's types."
    """
    head, cut, tail = text.partition("\f")
    paragraphs = inspect.cleandoc(head).split("\n\n")
    joined = [
        paragraph
        if paragraph.startswith("\b") or any(line[:1].isspace() for line in paragraph.splitlines())
        else " ".join(line.strip() for line in paragraph.splitlines())
        for paragraph in paragraphs
    ]
    return "\n\n".join(joined) + cut + tail


class ReflowedHelpGroup(TyperGroup):
    """A Typer group whose commands' help is :func:`reflow`-ed as they are looked up
    (for their ``--help`` and for the group's list of commands)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None and command.help:
            command.help = reflow(command.help)
        return command
