"""A table of known values (conditional sampling): ``fits synthesize --known``,
``fits federate local --known`` and the Flower ServerApp's run config ``known``.

The file is read, and its header checked against the site tables' header, before the
fit (which takes minutes on a real table) rather than after it: :func:`read_known_table`
reads it, :func:`check_known_columns` checks its columns.  The command line reads the
site tables' header itself; the ServerApp learns it from the sites' first (setup)
replies and checks there, before any further round.  Both say the same words.

What needs the fitted schema stays with the fit: the values (a category the sites do
not have, a number outside the real range), and, unless rules are off, whether the
known columns are the chain's first (an exact rule found at setup may set a column
between them, or take one out of the chain).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fits.core.names import ColumnNameError, header_for, show_columns

if TYPE_CHECKING:
    from fits.core.schema import Schema

__all__ = ["KnownTableError", "check_known_columns", "check_known_flags", "read_known_table"]


class KnownTableError(ValueError):
    """A known table fits refuses; the message names the file (``--known 'PATH'``), the
    column and the fix.  ``usage``: a usage error (exit 2: the file's type, a column
    ``--drop`` leaves out, columns that are not the chain's first), else a data error
    (exit 1)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage

    @property
    def exit_code(self) -> int:
        """The command line's exit code for it: 2 (usage) or 1 (data)."""
        return 2 if self.usage else 1


def read_known_table(path: str | Path) -> pd.DataFrame:
    """The known table at ``path``, read whole (:func:`fits.io.read_table`; a table of
    no rows included: its output is the header alone).

    Raises
    ------
    KnownTableError
        No such file, a folder, an unknown file type (usage), or a file fits cannot
        read (data); the message names the file.
    """
    from fits.io import DataFileError, check_suffix, read_table

    path = Path(path)
    if path.is_dir():
        raise KnownTableError(f"--known {str(path)!r} is a directory, not a file", usage=True)
    if not path.exists():
        raise KnownTableError(f"--known {str(path)!r}: no such file", usage=True)
    try:
        check_suffix(path, "--known table")
    except DataFileError as exc:
        raise KnownTableError(str(exc), usage=True) from None
    try:
        return read_table(path, empty_ok=True)
    except DataFileError as exc:
        raise KnownTableError(f"--known {exc}") from None  # the message names the file


def check_known_columns(
    path: str | Path,
    names: Sequence[str],
    columns: Sequence[str],
    *,
    dropped: Sequence[str] = (),
    kinds: Mapping[str, str] | None = None,
    identifiers: Sequence[str] = (),
) -> list[str]:
    """Check the header ``names`` of the known table at ``path`` against ``columns``
    (the site tables' columns, less those ``--drop`` left out, named in ``dropped``).

    Refused: a column the site tables do not have, or that ``--drop`` leaves out
    (usage), a column named twice, an identifier (kind ``id`` in ``kinds`` or
    ``identifiers``), every column of the table (nothing left to draw).  Where the
    known columns lie in the chain is checked by the fit (a continuous one must come
    first; :meth:`fits.FITSSynthesizer.sample_remaining_columns`): their kinds are not
    known before it.

    Returns
    -------
    list of str
        The site tables' headers the names stand for (a name may stand for its header
        with surrounding spaces), in the table's order.

    Raises
    ------
    KnownTableError
        As above, the message naming the file, the column(s) and the fix.
    """
    where = f"--known {str(path)!r}"
    names = [str(n) for n in names]
    try:
        headers = [header_for(n, columns, where, "the site tables") for n in names]
    except ColumnNameError as exc:
        raise KnownTableError(str(exc)) from None
    missing = [n for n, h in zip(names, headers, strict=True) if h is None]
    left_out = [n for n in missing if any(n.strip() == str(d).strip() for d in dropped)]
    if left_out:
        raise KnownTableError(
            f"{where}: column(s) {left_out} are left out by --drop, so they cannot be "
            "given; leave them out of the file, or do not --drop them",
            usage=True,
        )
    if missing:
        raise KnownTableError(
            f"{where}: the table has column(s) {missing} that the site tables do not have "
            f"(their columns: {show_columns(map(str, columns))}); leave them out of the "
            "file, or name them as the site tables do"
        )
    given = [h for h in headers if h is not None]
    twice = sorted({h for h in given if given.count(h) > 1})
    if twice:
        raise KnownTableError(
            f"{where}: the table names column(s) {twice} more than once (its header: "
            f"{show_columns(names)}); keep one of each"
        )
    ids = {header_for(c, columns, "--kind") or c for c, k in (kinds or {}).items() if k == "id"}
    ids |= set(identifiers)
    for name in given:
        if name in ids:
            raise KnownTableError(
                f"{where}: column {name!r} is an identifier (kind id): the output holds "
                "fresh surrogate values for it, not modelled ones, so it cannot be given; "
                "leave it out of the file"
            )
    modelled = [c for c in columns if c not in ids]
    if set(modelled) <= set(given):
        raise KnownTableError(
            f"{where}: the table gives every column ({show_columns(modelled)}), so nothing "
            "is left to draw (the output would be the file itself); leave out the columns "
            "to draw"
        )
    return given


def _flags(values: pd.Series) -> np.ndarray:
    """Where ``values`` hold ``True`` / ``False`` (a bool column, or bools among an
    object column's values)."""
    if pd.api.types.is_bool_dtype(values.dtype):
        return values.notna().to_numpy(dtype=bool)
    if pd.api.types.is_object_dtype(values.dtype):
        return np.array([isinstance(v, (bool, np.bool_)) for v in values], dtype=bool)
    return np.zeros(len(values), dtype=bool)


def check_known_flags(known: pd.DataFrame, schema: Schema) -> None:
    """Refuse ``True`` / ``False`` given for a column of numbers (a continuous one, or an
    ordinal or nominal one of numbers): pandas and numpy would read them as 1.0 / 0.0
    without a word, and the output would hold numbers no one gave.  A column whose
    values are true/false itself (dtype ``bool``) takes them, of course.

    Raises
    ------
    KnownTableError
        Naming the column, the first such value and its row, and the fix (a data error).
    """
    for name in known.columns:
        if name not in schema.names:
            continue  # refused, with the reason, elsewhere
        spec = schema[name]
        if spec.dtype == "bool" or not (
            spec.kind == "continuous" or spec.dtype in ("int", "float")
        ):
            continue
        flags = np.flatnonzero(_flags(known[name]))
        if not flags.size:
            continue
        first = flags[0]
        value = bool(known[name].iloc[first])
        what = "continuous" if spec.kind == "continuous" else f"{spec.kind}, of numbers"
        raise KnownTableError(
            f"the known values: column {name!r} is {what}, but {flags.size} of its known "
            f"value(s) are True / False (e.g. {value} in row {first + 1}); fits does not "
            "read them as the numbers 1.0 / 0.0: give the numbers themselves (1 for True, "
            "0 for False, if that is what they mean)"
        )
