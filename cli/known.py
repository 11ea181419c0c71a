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

import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fits.core.names import header_for

from .errors import echo_warnings, fail

__all__ = ["known_values_advice", "near_categories", "read_known"]


#: The library's refusal of a missing value where the sites have none (with a schema
#: edit for advice), and the fix a ``--known`` file takes: the sites hold no missing
#: value to draw from.
_MISSING_ADVICE = (
    ' but the schema does not expect any; set "missing": true for it in the schema, or '
    "fill the values",
    ' but the schema has no missing category; set "missing": true for it, or fill the values',
)


def known_values_advice(message: str) -> str:
    """The fit's refusal of a known value (``the known values: ...``) with the fix a
    ``--known`` file takes: its rows, not the schema or the real data."""
    message = message.replace(
        "; add them to the schema or fix the data",
        "; give one of its categories in those rows of the file, or leave the rows out",
    )
    for advice in _MISSING_ADVICE:
        message = message.replace(
            advice,
            ", but the site tables have none in it (nothing to draw given a missing "
            "value); give a value in those rows of the file, or leave the rows out",
        )
    if "lie outside its range" in message:
        message += "; keep the file's values within that range, or leave those rows out"
    # pandas' advice on dates in two formats (format=..., five lines, for a programmer)
    message = re.sub(
        r"\. You might want to try:.*\)$",
        "); write every date of the file in one format, as the site tables write theirs",
        message,
        flags=re.DOTALL,
    )
    # the library's rows (known_columns.loc[5], read 'the table' here) as the file's
    from fits.known import in_file_terms

    message = in_file_terms(message)
    # the library's 'female' stands for 'Female': said again by near_categories, once
    message = re.sub(r" \('.*? stands for .*?write them as the site tables do\)", "", message)
    return re.sub(r"\s*\n\s*", " ", message)  # one line, whatever the library said


def near_categories(table: pd.DataFrame, schema: Any) -> str:
    """A clause naming the known values that are a category of their column written with
    another case or with spaces around it (``'female' stands for 'Female'``):
    :func:`fits.known.near_categories`."""
    from fits.known import near_categories as near

    return near(table, schema)


def read_known(
    path: Path,
    columns: Sequence[str],
    *,
    dropped: Sequence[str] = (),
    kinds: Mapping[str, str] | None = None,
    identifiers: Sequence[str] = (),
    na_values: list[str | tuple[str, str]] | None = None,
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
        with warnings.catch_warnings(record=True) as caught:  # its notes, one line each
            warnings.simplefilter("always")
            table = read_known_table(path, na_values)
        echo_warnings(caught)
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
        user = Schema.from_json(schema.read_text(encoding="utf-8-sig"))
        ids = [c.name for c in user.columns if c.kind == "id"]
    read_known(path, columns, dropped=drop, kinds=kind_map, identifiers=ids)
