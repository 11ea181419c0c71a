"""``--known FILE`` (conditional sampling) of ``fits synthesize`` and ``fits federate
local``: the file read, and its header checked against the site tables' header, before
the fit (which takes minutes on a real table) rather than after it, by the checks the
Flower ServerApp runs too (:mod:`fits.known`), a refusal being an exit here.

What needs the fitted schema stays with the fit: the values (a category the sites do
not have, a number outside the real range), and, unless ``--no-rules``, whether the
known columns are the chain's first (an exact rule found at setup may set a column
between them, or take one out of the chain).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from fits.core.names import header_for

from .errors import fail

__all__ = ["known_values_advice", "read_known"]


def known_values_advice(message: str) -> str:
    """The fit's refusal of a known value (``the known values: ...``) with the fix a
    ``--known`` file takes: its rows, not the schema or the real data."""
    message = message.replace(
        "; add them to the schema or fix the data",
        "; give one of its categories in those rows of the file, or leave the rows out",
    )
    if "lie outside its range" in message:
        message += "; keep the file's values within that range, or leave those rows out"
    return message


def read_known(
    path: Path,
    columns: Sequence[str],
    *,
    dropped: Sequence[str] = (),
    kinds: Mapping[str, str] | None = None,
    identifiers: Sequence[str] = (),
) -> pd.DataFrame:
    """The ``--known`` table at ``path``, read whole (a table of no rows included: its
    output is the header alone), after checking its header against ``columns`` (the
    site tables' columns, less those ``--drop`` left out, named in ``dropped``).

    Refused, each with a message naming the file, the column and the fix: a file fits
    cannot read (exit 1; an unknown file type: exit 2), a column the site tables do not
    have (exit 1) or that ``--drop`` leaves out (exit 2), a column named twice, an
    identifier (kind ``id`` in ``kinds`` or ``identifiers``), every column of the table
    (nothing left to draw). A continuous column after one not given in the chain is
    refused by the fit (exit 2, with the ``--order`` that puts it first), where the
    kinds are known.
    """
    from fits.known import KnownTableError, check_known_columns, read_known_table

    try:
        table = read_known_table(path)
        check_known_columns(
            path,
            [str(c) for c in table.columns],
            columns,
            dropped=dropped,
            kinds=kinds,
            identifiers=identifiers,
        )
    except KnownTableError as exc:
        fail(str(exc), exc.exit_code)
    return table


def check_known_for_sites(
    path: Path,
    header: Sequence[str],
    *,
    drop: Sequence[str],
    kinds: Sequence[str],
    schema: Path | None,
) -> None:
    """:func:`read_known` for ``fits federate local``, before any process starts:
    ``header`` is the first site table's (the checks of ``--drop`` and ``--kind``
    passed), ``drop`` and ``kinds`` (``COL=KIND`` items) as given."""
    from fits.core.schema import Schema

    from .options import parse_kind

    left_out = {header_for(name, header, "--drop") for name in drop}
    columns = [c for c in header if c not in left_out]
    kind_map = dict(parse_kind(item) for item in kinds)
    ids: list[str] = []
    if schema is not None:  # read before (a usable schema file)
        ids = list(Schema.from_json(schema.read_text(encoding="utf-8-sig")).unmodelled)
    read_known(path, columns, dropped=drop, kinds=kind_map, identifiers=ids)
