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

import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fits._json import plain
from fits.core.names import ColumnNameError, header_for, show_columns

if TYPE_CHECKING:
    from fits.core.schema import Schema

__all__ = [
    "KnownTableError",
    "check_known_categories",
    "check_known_columns",
    "check_known_flags",
    "check_known_whole",
    "in_file_terms",
    "known_dates",
    "known_first_order",
    "near_categories",
    "read_known_table",
    "show_value",
    "unmatched_known_row",
]


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


def read_known_table(
    path: str | Path, na_values: Sequence[str | tuple[str, str]] | None = None
) -> pd.DataFrame:
    """The known table at ``path``, read whole (:func:`fits.io.read_table`; a table of
    no rows included: its output is the header alone), each field written as one of
    ``na_values`` (the sites' missing texts, :func:`fits.io.read_table`) a missing
    value; a ``(column, text)`` pair for a column the table does not hold is passed
    over (the known table holds some of the columns).

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
        return read_table(path, empty_ok=True, na_values=_known_na_values(path, na_values))
    except DataFileError as exc:
        raise KnownTableError(f"--known {exc}") from None  # the message names the file


def _known_na_values(
    path: Path, na_values: Sequence[str | tuple[str, str]] | None
) -> list[str | tuple[str, str]] | None:
    """``na_values`` less the pairs whose column the table at ``path`` does not hold."""
    if not na_values:
        return None
    from fits.io import na_values_within, read_columns

    return na_values_within(na_values, read_columns(path))


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


def check_known_flags(known: pd.DataFrame, schema: Schema, index: pd.Index | None = None) -> None:
    """Refuse ``True`` / ``False`` given for a column of numbers (a continuous one, or an
    ordinal or nominal one of numbers): pandas and numpy would read them as 1.0 / 0.0
    without a word, and the output would hold numbers no one gave.  A column whose
    values are true/false itself (dtype ``bool``) takes them, of course.

    Parameters
    ----------
    known : DataFrame
        The known table, its rows in the order of ``index``.
    schema : Schema
    index : Index, optional
        The row labels the user gave the known table (``known_columns.index``): the
        refusal names the row by its label, ``known_columns.loc[LABEL]``, as the other
        checks do (the command line turns that into the file's row).  Default:
        ``known.index``.

    Raises
    ------
    KnownTableError
        Naming the column, the first such value and its row (``known_columns.loc[...]``
        of ``index``), and the fix (a data error).
    """
    labels = known.index if index is None else index
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
            f"value(s) are True / False (e.g. {value} in {known_row(labels, int(first))}); fits "
            "does not read them as the numbers 1.0 / 0.0: give the numbers themselves (1 "
            "for True, 0 for False, if that is what they mean) in those rows of "
            "known_columns"
        )


def known_row(index: pd.Index, position: int) -> str:
    """The row of ``known_columns`` at ``position``, as a pandas user finds it again:
    ``known_columns.loc[LABEL]`` (the command line names the file's row instead,
    :func:`fits.cli.known.known_values_advice`)."""
    return f"known_columns.loc[{plain(index[position])!r}]"


def in_file_terms(message: str) -> str:
    """A refusal of known values in a known *file*'s terms: the library's
    ``known_columns.loc[5]`` (or ``the table.loc[5]``, where ``known_columns`` was read
    as the table) is the file's row 6 (1-based: the file is read with row labels 0, 1,
    ...), and ``rows of known_columns`` are ``rows of the file``."""
    message = re.sub(
        r"(?:known_columns|the table)\.loc\[(\d+)\]",
        lambda m: f"row {int(m.group(1)) + 1} of the file",
        message,
    )
    return re.sub(r"rows of (?:known_columns|the table)\b", "rows of the file", message)


def known_first_order(schema: Schema, known: pd.DataFrame) -> str:
    """The ``--order`` value (shell-quoted) that puts the known table's columns first, by
    the schema's names ('age' may stand for the header ' age '), the chain's order after.

    Parameters
    ----------
    schema : Schema
        The fitted schema.
    known : DataFrame
        The known table.

    Returns
    -------
    str
    """
    import shlex

    from fits.core.names import format_column_list, resolve_columns

    first = resolve_columns([str(c) for c in known.columns], schema.names, "--known", "the fit")
    order = [*first, *(c for c in schema.order if c not in first)]
    # a header that holds a comma: a JSON array (fits.cli.options.column_list reads both)
    return shlex.quote(
        format_column_list(order) if any("," in c for c in order) else ",".join(order)
    )


def unmatched_known_row(message: str, schema: Schema, known: pd.DataFrame, max_tries: int) -> str:
    """A refusal met while drawing for a known file's rows (a row no draw matched) in the
    command line's words, one wording for ``fits synthesize --known`` and the Flower
    ServerApp: the file's row, 1-based (the library's ``the known row at position 4``
    is row 5 of the file), the ``--order`` that puts the known columns first and
    ``--max-tries`` with its value, not the library's ``order=[...]`` and ``max_tries``.

    Parameters
    ----------
    message : str
        The library's message.
    schema : Schema
        The fitted schema (for the ``--order`` value).
    known : DataFrame
        The known table.
    max_tries : int
        The draws per row that were allowed.

    Returns
    -------
    str
        The message, without the file's name (the caller adds it).
    """
    message = re.sub(
        r"the known row at position (\d+)",
        lambda m: f"row {int(m.group(1)) + 1} of the file",
        message,
    )
    if "(order=[...]; fits synthesize --order)" in message:
        message = message.replace(
            "(order=[...]; fits synthesize --order)",
            f"(--order {known_first_order(schema, known)})",
        ).replace("(max_tries)", f"(--max-tries, now {max_tries})")
    return message


def show_value(spec: Any, value: float) -> str:
    """A value of the column ``spec`` on the engine's scale, as the column writes it: a
    datetime column's seconds since 1970 (UTC) as its date (``2011-01-01``, whole days)
    or date-time (``2011-01-01 05:30:00``, in its time zone), else the number (``:g``)."""
    if spec.dtype != "datetime" or not np.isfinite(value):
        return f"{value:g}"
    t = pd.Timestamp(round(value * 1e6), unit="us")
    if spec.tz is not None:
        t = t.tz_localize("UTC").tz_convert(spec.tz)
    if t == t.normalize() and (spec.date_only or spec.tz is None):
        return str(t.date())
    return str(t)


def check_known_whole(known: pd.DataFrame, schema: Schema, index: pd.Index) -> None:
    """Refuse a fraction (38.5) given for a column whose values are whole numbers at
    every site (dtype ``int``: continuous, or ordinal / nominal of whole numbers): the
    output would hold a value no site's column can, and the column would become float.
    A whole number written as a float (``38.0``, as a CSV column with a blank is read)
    is taken, and the output keeps the sites' integer dtype.

    Raises
    ------
    KnownTableError
        Naming the column, the first such value and its row (``known_columns.loc[...]``
        of ``index``), and the fix (a data error).
    """
    for name in known.columns:
        if name not in schema.names or schema[name].dtype != "int":
            continue
        col = known[name]
        if pd.api.types.is_bool_dtype(col.dtype) or pd.api.types.is_integer_dtype(col.dtype):
            continue
        values = pd.to_numeric(col.mask(_flags(col)), errors="coerce")
        v = values.to_numpy(dtype=float, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            frac = np.flatnonzero(np.isfinite(v) & (v != np.round(v)))
        if not frac.size:
            continue
        first = int(frac[0])
        raise KnownTableError(
            f"the known values: column {name!r} holds whole numbers at every site, but "
            f"{frac.size} of its known value(s) are not whole (e.g. {plain(v[first])} "
            f"in {known_row(index, first)}); fits does not round them: give whole numbers "
            "in those rows of known_columns, or leave the rows out"
        )


def check_known_categories(known: pd.DataFrame, schema: Schema, index: pd.Index) -> None:
    """Refuse, in the terms of ``known_columns`` (its rows, not a schema edit), a missing
    known value of a column the sites have none in, and a known value of a discrete
    column that is not among its categories (naming the category a value written with
    another case or spaces stands for, :func:`near_categories`).  Values the encoding
    refuses for another reason are left to it.

    Raises
    ------
    SchemaError
        Naming the column, the first such row (``known_columns.loc[...]`` of ``index``)
        and the fix.
    """
    from fits.core.schema import SchemaError

    for name in known.columns:
        if name not in schema.names:
            continue
        spec = schema[name]
        col = known[name]
        missing = np.flatnonzero(col.isna().to_numpy())
        if missing.size and not spec.missing:
            raise SchemaError(
                f"the known values: column {name!r} has {missing.size} missing value(s) "
                f"(e.g. {known_row(index, int(missing[0]))}), but the sites have none in "
                "it (nothing to draw given a missing value); give a value in those rows "
                "of known_columns, or leave the rows out"
            )
        if not spec.is_discrete:
            continue
        cats = list(spec.categories or [])
        labels = [c for c in cats if c is not None]
        raw = (col.astype(object) if isinstance(col.dtype, pd.CategoricalDtype) else col).to_numpy(
            dtype=object
        )
        present = ~col.isna().to_numpy()
        codes = np.zeros(raw.shape[0], dtype=np.int64)
        codes[present] = pd.Index(labels, dtype=object).get_indexer(raw[present])
        bad = np.flatnonzero(codes < 0)
        if not bad.size:
            continue
        values = list(pd.unique(raw[bad]))[:5]
        texts = {str(c) for c in labels if isinstance(c, str)}
        if all(not isinstance(v, str) and str(v) in texts for v in values):
            continue  # 1 for "1": the encoding's own advice on the schema's text
        raise SchemaError(
            f"the known values: column {name!r} has value(s) {values} that are not among "
            f"its categories {cats[:10]}{'...' if len(cats) > 10 else ''} (e.g. "
            f"{known_row(index, int(bad[0]))}); give one of its categories in those rows of "
            "known_columns, or leave the rows out" + near_categories(known[[name]], schema)
        )


def near_categories(table: pd.DataFrame, schema: Any) -> str:
    """A clause naming the known values that are a category of their column written with
    another case or with spaces around it (``'female' stands for 'Female'``), for the
    refusal of values that are not among the categories; empty if there is none.

    fits compares categories exactly (the sites' tables may well hold ``' Female'`` and
    ``'female'`` as categories of their own), so it names them rather than match them.
    """
    found: list[str] = []
    for column in table.columns:
        name = str(column)
        spec = schema[name] if name in schema.names else None
        if spec is None and name.strip() in schema.names:
            spec = schema[name.strip()]
        if spec is None or not spec.categories:
            continue
        labels = [c for c in spec.categories if isinstance(c, str)]
        by_key: dict[str, list[str]] = {}
        for label in labels:
            by_key.setdefault(label.strip().casefold(), []).append(label)
        for value in pd.unique(table[column].dropna()):
            if not isinstance(value, str) or value in labels:
                continue
            meant = by_key.get(value.strip().casefold(), [])
            if len(meant) == 1:
                found.append(f"{value!r} stands for {meant[0]!r}")
    if not found:
        return ""
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return (
        f" ({', '.join(found[:3])}{more}? fits matches categories exactly, case and spaces "
        "included: write them as the site tables do)"
    )


def known_dates(known: pd.DataFrame, schema: Schema, index: pd.Index) -> pd.DataFrame:
    """The known table with each datetime column as the synthetic rows hold theirs
    (:func:`fits.synthesizer.restore_dtype`: the sites' dtype and time unit, date
    objects for a Parquet date column, the schema's time zone), where that keeps every
    known value; a column of text is read first: with the format the sites' text dates
    were read with where it reads every value (:func:`_in_sites_format`), else as
    :func:`pandas.to_datetime` reads it (ISO 8601, or the one format it infers from the
    first value; a format whose day and month could be swapped in every row,
    ``06/01/2011``, is then read month first, as pandas reads it, with one note
    (:class:`~fits.core.schema.DataNote`) saying how the first value was read).

    Raises
    ------
    SchemaError
        Text that is not dates in one format (naming the column).
    KnownTableError
        A time of day given for a column of whole days (naming the column, the first
        such row, ``known_columns.loc[...]`` of ``index``, and the fix).
    """
    from fits.synthesizer import restore_dtype

    for name in known.columns:
        if name not in schema.names or schema[name].dtype != "datetime":
            continue
        spec = schema[name]
        col = known[name]
        if not pd.api.types.is_datetime64_any_dtype(col.dtype):
            if not col.notna().any():
                continue  # all missing: the encoding's checks say what to do
            sites = _in_sites_format(col, spec)
            if sites is not None:  # as the sites wrote them: no fresh day/month guess
                col = sites
            else:
                col = _as_dates(name, col, spec)
        if spec.tz is not None and getattr(col.dt, "tz", None) is not None:
            col = col.dt.tz_convert(spec.tz)
        elif spec.tz is not None or getattr(col.dt, "tz", None) is not None:
            known[name] = col  # a time zone apart from the schema's: refused by the encoding
            continue
        timed = np.flatnonzero((col.notna() & (col != col.dt.normalize())).to_numpy())
        if spec.date_only and timed.size:
            raise KnownTableError(
                f"the known values: column {name!r} holds whole days (dates) at every "
                f"site, but {timed.size} of its known value(s) have a time of day (e.g. "
                f"{str(col.iloc[timed[0]])!r} in {known_row(index, int(timed[0]))}); fits "
                "does not cut them to the day: give dates in those rows of known_columns, "
                "or leave the rows out"
            )
        try:  # the synthetic rows' form, where it holds every known value exactly
            out = restore_dtype(col, spec)
        except (TypeError, ValueError, OverflowError):
            out = col
        back = pd.to_datetime(pd.Series(out.to_numpy(dtype=object)), utc=spec.tz is not None)
        if spec.tz is not None:
            back = back.dt.tz_convert(spec.tz)
        same = back.isna().to_numpy() == col.isna().to_numpy()
        if not (same.all() and bool((back.dropna().to_numpy() == col.dropna().to_numpy()).all())):
            out = col
        known[name] = out
    return known


def _in_sites_format(col: pd.Series, spec: Any) -> pd.Series | None:
    """A known text date column read with the format the sites read theirs with
    (:attr:`~fits.core.schema.ColumnSpec.text_date_format`, e.g. ``"%d/%m/%Y"``: the
    synthetic rows are written in it) where it reads every present value, else None."""
    fmt = spec.text_date_format
    if fmt is None or spec.tz is not None:
        return None
    parsed = pd.to_datetime(col, format=fmt, errors="coerce")
    return parsed if bool(parsed[col.notna()].notna().all()) else None


def _as_dates(name: str, col: pd.Series, spec: Any) -> pd.Series:
    """A known text date column read as :func:`pandas.to_datetime` reads it (ISO 8601,
    or the one format it infers from the first value), with a note where day and month
    could be swapped in every row (:func:`_note_day_first`)."""
    from fits._dates import text_times
    from fits.core.schema import SchemaError

    try:
        with warnings.catch_warnings():  # pandas' note on the format it inferred
            warnings.simplefilter("ignore", UserWarning)
            # ISO 8601 as fits.io reads the sites' files (a date, or a date and
            # time, in one column), else the one format pandas infers
            iso = "ISO8601" if _all_iso(col) else None
            parsed = text_times(col, aware=spec.tz is not None, format=iso)
    except (ValueError, TypeError) as exc:
        raise SchemaError(
            f"the known values: column {name!r} is a datetime column in the schema "
            f"but holds values that are not dates ({exc})"
        ) from None
    _note_day_first(name, col, parsed)
    return parsed


def _all_iso(values: pd.Series) -> bool:
    """Whether every present value is ISO 8601 text (``2011-06-01``, ``2011-06-01
    10:30``), as :func:`fits.io.read_table` reads a site file's dates."""
    from fits.io import ISO_DATE

    present = values.dropna()
    return bool(present.map(lambda v: isinstance(v, str) and bool(ISO_DATE.match(v))).all())


def _note_day_first(name: str, text: pd.Series, parsed: pd.Series) -> None:
    """One note where a known date column's text format reads as well day first as month
    first in every row (``06/01/2011``): pandas (and fits) read it month first."""
    try:
        from pandas.tseries.api import guess_datetime_format
    except ImportError:  # pandas < 2.2 (the floor is 2.1): the same function, not yet public
        from pandas._libs.tslibs.parsing import guess_datetime_format

    from fits.core.schema import DataNote

    present = text.dropna()
    if not pd.api.types.is_string_dtype(present.dtype) and not all(
        isinstance(v, str) for v in present
    ):
        return
    first = str(present.iloc[0]).strip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        guess = guess_datetime_format(first)
    if guess is None or "%m" not in guess or "%d" not in guess:
        return
    month = guess.index("%m")
    year = min((guess.index(y) for y in ("%Y", "%y") if y in guess), default=len(guess))
    if month > guess.index("%d") or year < month:
        return  # day first, or year first (ISO 8601, 2011-06-01): one reading
    swapped = guess.replace("%m", "\0").replace("%d", "%m").replace("\0", "%d")
    try:
        pd.to_datetime(present, format=swapped)
    except (ValueError, TypeError):
        return  # a day past 12 somewhere: one reading
    day = parsed.dropna().iloc[0]
    warnings.warn(
        f"the known values: column {name!r} has dates whose day and month could be "
        f"swapped in every row ({first!r}); they are read month first, as pandas reads "
        f"them ({first!r} is {day.date()}); write them as YYYY-MM-DD (ISO 8601), as the "
        "site tables do, to say which",
        DataNote,
        stacklevel=4,
    )
