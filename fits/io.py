"""Reading and writing tables (CSV and Parquet by extension), atomic writes, JSON values.

Used by the command line; usable from Python too.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import stat
import tempfile
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fits._dates import iso_datetimes
from fits.core.names import ColumnNameError
from fits.core.schema import (
    BOOL_TEXTS_ATTR,
    CODE_COLUMNS_ATTR,
    DECIMAL_MARK_ATTR,
    DECIMAL_SOURCE_ATTR,
    NA_ONLY_ATTR,
    NA_TEXTS,
    DataNote,
)

__all__ = [
    "TABLE_SUFFIXES",
    "DataFileError",
    "align_codes",
    "known_codes",
    "ISO_DATE",
    "OutputError",
    "OutputTooLarge",
    "StreamEstimate",
    "check_output",
    "check_suffix",
    "count_rows",
    "encoded_size",
    "find_duplicate_files",
    "from_arrow_dtypes",
    "human_bytes",
    "iter_table",
    "known_decimal_types",
    "NaValues",
    "OutputForms",
    "na_value_items",
    "na_values_within",
    "output_path",
    "read_columns",
    "read_table",
    "same_file",
    "through_links",
    "write_table",
    "write_stream",
    "write_table_chunks",
    "write_text",
]

TABLE_SUFFIXES = (".csv", ".parquet")

#: ``fits synthesize`` and the Flower ServerApp estimate the time and size of a request
#: of more rows than this (``--rows``, or the rows of a ``--known`` table) from a first
#: piece of :data:`ESTIMATE_ROWS` rows, and refuse one that would not fit on the output's
#: file system (the rows do not depend on where the pieces are cut, see
#: :meth:`fits.FITSSynthesizer.iter_sample` and ``iter_sample_remaining_columns``).
LARGE_REQUEST_ROWS = 100_000
ESTIMATE_ROWS = 8_192
#: ISO 8601 text of a date or a time (``2011-06-01``, ``2011-06-01 10:30:00+01:00``): what
#: :func:`read_table` reads as dates without guessing an order of day and month.
ISO_DATE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$"
)


class DataFileError(ValueError):
    """A data file cannot be used; the message names the file and says what to do."""


#: The texts that mean a missing value in a file (:func:`read_table`'s ``na_values``):
#: texts for every column (``["NA", "-999"]``), with ``(column, text)`` pairs for one
#: column among them (``["NA", ("age", "-999")]``), or a mapping column -> its texts
#: (``{"age": ["-999"]}``, as pandas takes it).
NaValues = Iterable[str | tuple[str, str]] | Mapping[str, str | Iterable[str]]


def na_value_items(
    items: Iterable[str], option: str = "--na-values"
) -> list[str | tuple[str, str]]:
    """The ``na_values`` of ``--na-values`` items: ``TEXT`` means a missing value in
    every column, ``COLUMN=TEXT`` in that column only (split at the last ``=``, so a
    column name may hold one; the column is resolved against each table's header when
    it is read).

    Raises
    ------
    ValueError
        An empty text (an empty field is always a missing value), naming ``option``.
    """
    out: list[str | tuple[str, str]] = []
    for item in items:
        column, sep, text = str(item).rpartition("=")
        if sep and not column.strip():
            column, sep = "", ""
            text = str(item)
        if not text.strip():
            raise ValueError(
                f"{option} {item!r}: give a text (an empty field is always a missing "
                "value): TEXT for every column, or COLUMN=TEXT for one"
            )
        out.append((column.strip(), text.strip()) if sep else text.strip())
    return out


def na_values_within(
    na_values: Sequence[str | tuple[str, str]] | None, columns: Sequence[str]
) -> list[str | tuple[str, str]] | None:
    """``na_values`` (texts and ``(column, text)`` pairs) less the pairs whose column
    none of ``columns`` is (:func:`~fits.core.names.header_for`): for a table that holds
    some of the sites' columns (a ``--known`` table, a synthetic table without the
    dropped ones); None for none."""
    if not na_values:
        return None
    from fits.core.names import header_for

    kept = [
        v
        for v in na_values
        if isinstance(v, str) or header_for(v[0], columns, "--na-values") is not None
    ]
    return kept or None


@dataclass(frozen=True)
class _NaSpec:
    """``na_values`` checked: the texts of every column, and (column as given, text)."""

    every: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]


def _na_spec(na_values: NaValues | None) -> _NaSpec | None:
    """``na_values`` as a :class:`_NaSpec` (None: none given), or ValueError."""
    if na_values is None:
        return None
    if isinstance(na_values, str):
        na_values = [na_values]
    every: list[str] = []
    pairs: list[tuple[str, str]] = []
    if isinstance(na_values, Mapping):
        for col, texts in na_values.items():
            for text in [texts] if isinstance(texts, str) else list(texts):
                pairs.append((col, text))
    else:
        for item in na_values:
            if isinstance(item, tuple) and len(item) == 2:
                pairs.append((item[0], item[1]))
            elif isinstance(item, str):
                every.append(item)
            else:
                raise ValueError(
                    f"na_values: {item!r} is neither a text nor a (column, text) pair; "
                    'give texts, e.g. na_values=["NA", "-999", ("age", "0")]'
                )
    for col, text in pairs:
        if not isinstance(col, str) or not isinstance(text, str):
            raise ValueError(
                f"na_values: ({col!r}, {text!r}): give a column name and a text, e.g. "
                '("age", "-999")'
            )
    if not every and not pairs:
        return None
    return _NaSpec(tuple(dict.fromkeys(every)), tuple(dict.fromkeys(pairs)))


@dataclass(frozen=True)
class _Missing:
    """A table's missing texts per column (:func:`_missing`)."""

    texts: Mapping[Any, tuple[str, ...]]

    def codes(self, col: Any) -> frozenset[float]:
        """The numbers among ``col``'s texts ("-999": -999.0), finite ones only."""
        return _codes(self.texts.get(col, ()))


def _codes(texts: Iterable[str]) -> frozenset[float]:
    out = set()
    for text in texts:
        try:
            value = float(str(text).strip())
        except ValueError:
            continue
        if np.isfinite(value):
            out.add(value)
    return frozenset(out)


def _missing(spec: _NaSpec | None, columns: Sequence[Any], path: Path) -> _Missing | None:
    """The texts of ``spec`` for each of ``columns`` (a table's, as pandas names them),
    a ``(column, text)`` pair's column resolved to its header
    (:func:`~fits.core.names.match_columns`: a :class:`ColumnNameError` names the
    file when none matches)."""
    if spec is None:
        return None
    from fits.core.names import match_columns

    names = [str(c) for c in columns]
    by_name = dict(zip(names, columns, strict=True))
    headers = match_columns(
        [col for col, _ in spec.pairs], names, "--na-values COLUMN=TEXT", str(path)
    )
    texts: dict[Any, tuple[str, ...]] = {c: spec.every for c in columns}
    for header, (_, text) in zip(headers, spec.pairs, strict=True):
        col = by_name[header]
        texts[col] = tuple(dict.fromkeys([*texts[col], text]))
    return _Missing(texts)


def _na_options(
    options: Mapping[str, Any], missing: _Missing | None, names: Sequence[Any]
) -> dict[str, Any]:
    """``pd.read_csv``'s ``options`` (a file's white fields as missing values,
    :class:`_Blanks`) with ``missing``'s texts missing values too, per column."""
    out = dict(options)
    if missing is None:
        return out
    white = list(options.get("na_values", []))
    out["na_values"] = {c: [*white, *missing.texts.get(c, ())] for c in names}
    return out


def _spec_values(spec: _NaSpec | None) -> NaValues | None:
    """:func:`read_table`'s ``na_values`` for a checked ``spec``."""
    return None if spec is None else [*spec.every, *spec.pairs]


def _na_of(options: Mapping[str, Any], col: Any) -> list[str]:
    """The texts ``options`` read as missing in column ``col`` (beyond pandas' own)."""
    na = options.get("na_values", [])
    return list(na.get(col, [])) if isinstance(na, Mapping) else list(na)


def _mask_codes(raw: pd.DataFrame, options: Mapping[str, Any], decimal: str = ".") -> pd.DataFrame:
    """``raw`` (fields as text) with the fields that are a number equal to a missing
    code of their column (``options``' texts: "-999" for "-999.00", " -999" or, with a
    decimal comma, "-999,0", which pandas reads as missing when it parses numbers, not
    as text) missing too."""
    na = options.get("na_values")
    if not isinstance(na, Mapping):
        return raw
    decimal = str(options.get("decimal", decimal))
    for col in raw.columns:
        codes = _codes(na.get(col, ()))
        if not codes:
            continue
        present = raw[col].dropna()
        if present.empty:
            continue
        text = present.str.strip()
        if decimal != ".":
            text = text.str.replace(decimal, ".", regex=False)
        numbers = pd.to_numeric(text, errors="coerce")
        hit = numbers.isin(list(codes))
        if hit.any():
            raw[col] = raw[col].mask(hit.reindex(raw.index, fill_value=False))
    return raw


def _stringified(texts: Iterable[str]) -> set[str]:
    """``texts`` and, for a whole number, its other spellings ("-999", "-999.0"), as
    pandas matches a CSV file's fields against ``na_values``."""
    out = set(texts)
    for value in _codes(texts):
        if value == int(value):
            out.update((str(int(value)), f"{int(value)}.0"))
        out.add(str(value))
    return out


def _code_columns(frame: pd.DataFrame, missing: _Missing) -> set[Any]:
    """The integer columns of ``frame`` that hold a value of their missing codes."""
    out = set()
    for col in frame.columns:
        dtype = frame[col].dtype
        if pd.api.types.is_integer_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
            codes = missing.codes(col)
            if codes and frame[col].isin([int(v) for v in codes if v == int(v)]).any():
                out.add(col)
    return out


def _missing_values(frame: pd.DataFrame, missing: _Missing, integers: set[Any]) -> pd.DataFrame:
    """``frame`` (a Parquet file's rows) with ``missing``'s values missing: in a numeric
    column the values equal to a code (the integer columns ``integers`` become
    ``Int64``, as a CSV file's whole numbers with blanks), in a text column the texts
    (:func:`_stringified`), in a categorical column the categories so written (left
    out of its categories); dates and booleans are left as they are."""
    out = frame
    for col in frame.columns:
        texts = missing.texts.get(col, ())
        if not texts:
            continue
        s = frame[col]
        dtype = s.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            gone = [c for c in dtype.categories if isinstance(c, str) and c in _stringified(texts)]
            if not gone:
                continue
            new = s.cat.remove_categories(gone)
        elif pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_datetime64_any_dtype(dtype):
            continue
        elif pd.api.types.is_numeric_dtype(dtype):
            codes = missing.codes(col)
            if not codes and col not in integers:
                continue
            new = s.astype("Int64") if col in integers else s
            new = new.mask(new.isin(list(codes)))
        elif pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
            words, codes = _stringified(texts), missing.codes(col)
            hit = s.map(  # texts, and numbers among them (a Parquet decimal's Decimal)
                lambda v, w=words, c=codes: (
                    (isinstance(v, str) and v in w)
                    or (
                        isinstance(v, (int, float, np.number, Decimal))
                        and not isinstance(v, (bool, np.bool_))
                        and float(v) in c
                    )
                )
            ).astype(bool)
            if not hit.any():
                continue
            new = s.mask(hit)
        else:
            continue
        if out is frame:
            out = frame.copy()
        out[col] = new
    return out


def from_arrow_dtypes(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its pyarrow-backed columns (:class:`pandas.ArrowDtype`:
    ``pd.read_parquet(..., dtype_backend="pyarrow")``, ``df.convert_dtypes(
    dtype_backend="pyarrow")``) of the Arrow types fits does not model as they are in
    the dtypes pandas' default backend gives the same values; ``frame`` itself when it
    has none.

    Arrow integers, floats, booleans, timestamps and text are left as they are (fits
    models them, and the synthetic table has their Arrow dtype).  Every other Arrow
    column becomes what pyarrow's ``to_pandas`` gives it, each value kept: decimals
    Python ``Decimal`` objects (exact, with their digits after the point, as fits reads a
    Parquet decimal column), dates (``date32``, ``date64``) ``datetime.date`` objects,
    dictionary-encoded values a pandas categorical (its order kept), durations
    ``timedelta64``, times of day and bytes Python objects (the last three refused by the
    fit with what to do, as in pandas' default dtypes).

    Parameters
    ----------
    frame : DataFrame

    Returns
    -------
    DataFrame
        A shallow copy with those columns converted (the others shared), or ``frame``.
    """
    arrow = [i for i, dtype in enumerate(frame.dtypes) if _foreign_arrow(dtype)]
    if not arrow:
        return frame
    import pyarrow as pa

    out = frame.copy(deep=False)
    for i in arrow:
        column = frame.iloc[:, i]
        values = pa.array(column.array).to_pandas()  # an Array or a ChunkedArray's
        out.isetitem(i, pd.Series(values.array, index=column.index, name=column.name))
    return out


def _foreign_arrow(dtype: Any) -> bool:
    """Whether ``dtype`` is an :class:`pandas.ArrowDtype` of a type fits does not model
    as it is (:func:`from_arrow_dtypes`)."""
    if not isinstance(dtype, pd.ArrowDtype):
        return False
    import pyarrow as pa

    kind = dtype.pyarrow_dtype
    types = pa.types
    modelled = (
        types.is_integer(kind)
        or types.is_floating(kind)
        or types.is_boolean(kind)
        or types.is_timestamp(kind)
        or types.is_string(kind)
        or types.is_large_string(kind)
    )
    return not modelled


def check_suffix(path: Path, what: str = "table") -> str:
    """The file's table format (``".csv"`` or ``".parquet"``), or a clear error.

    The format is the name's, as given: a symbolic link is refused when its name
    has no table suffix but the file it leads to has (``out -> t.csv``: give the
    target, or a link name that ends so), or when the two suffixes disagree
    (``p.csv -> t.parquet``: CSV text would land in a Parquet file)."""
    suffix = Path(path).suffix.lower()
    target = through_links(path)
    if target != Path(path) and target.suffix:
        real = target.suffix.lower()
        if suffix not in TABLE_SUFFIXES and real in TABLE_SUFFIXES:
            raise DataFileError(
                f"{path}: is a link to {str(target)!r}, and fits takes the file type "
                f"from the name given, which has {'none' if not suffix else repr(suffix)}; "
                f"give the {what} as {str(target)!r}, or a link name ending in {real}"
            )
        if suffix in TABLE_SUFFIXES and real != suffix:
            raise DataFileError(
                f"{path}: is a link to {str(target)!r}: the link's name says {suffix} but "
                f"the file it leads to ends in {real}; give the {what} as a path whose "
                "name and file agree (the file itself, or a link of the same suffix)"
            )
    if suffix not in TABLE_SUFFIXES and Path(path).is_dir():
        raise DataFileError(
            f"{path}: is a folder; give the {what} a file name ending in .csv or .parquet "
            f"(for example {Path(path) / 'synthetic.csv'})"
        )
    if suffix not in TABLE_SUFFIXES:
        hint = "" if what == "output" else _SUFFIX_HINTS.get(suffix, "")
        raise DataFileError(
            f"{path}: unknown file type {suffix or '(none)'!r} for the {what}; "
            f"use a .csv or .parquet file{hint}"
        )
    return suffix


#: How to turn an input file of another type into one fits reads.
_SUFFIX_HINTS = {
    **dict.fromkeys(
        (".tsv", ".txt", ".tab", ".dat"),
        " (fits finds a tab, ';' or '|' separator itself: rename it to .csv)",
    ),
    **dict.fromkeys((".gz", ".zip", ".bz2", ".xz", ".zst"), " (decompress it first)"),
    **dict.fromkeys(
        (".xlsx", ".xls", ".xlsm", ".ods"),
        " (a spreadsheet: save it as CSV, UTF-8, from the spreadsheet program)",
    ),
}


def read_table(
    path: str | os.PathLike[str], *, empty_ok: bool = False, na_values: NaValues | None = None
) -> pd.DataFrame:
    """Read a CSV or Parquet table (chosen by extension).

    CSV files: the separator is found from the first lines (``,``, ``;``, tab or ``|``:
    the one that splits every line into the same number of fields, more than one; a
    comma when it does), and with ``;`` (or a tab or ``|``, where "1,500" alone may be
    thousands) a decimal comma is recognised (and kept in
    the table's ``attrs``, :data:`~fits.core.schema.DECIMAL_MARK_ATTR`, for the text
    numbers :func:`~fits.core.schema.parse_text_columns` reads: "1.234,56 €"); a
    :class:`~fits.core.schema.DataNote` says when the separator is not a comma.  Whole
    numbers with blanks come back as ``Int64`` (not floats); numbers written with leading
    zeros (ZIP codes "02134") stay text.  Text columns whose every
    value is an ISO 8601 date or date-time become datetime columns; date-times written
    with one UTC offset (``+02:00``) keep it, several offsets (summer time) are read
    as UTC with a note.  Parquet files: the named levels of the pandas index a frame
    was written with (``set_index`` or ``groupby`` keys) are the first columns.

    With ``empty_ok``, a table of no rows (a header alone: a ``--known`` table of no
    rows to complete) is returned, not refused.

    ``na_values`` names the texts that mean a missing value in this file, beyond the
    empty field: a text (``"NA"``, ``"-999"``, ``"."``) for every column, or a pair
    ``(column, text)`` (or a mapping column -> texts) for one column.  Every field
    written so is read as missing, in every column it applies to: ``"NA"`` is then no
    label of a column of labels (without it, such a column keeps pandas' missing texts
    as written, with a note).  A text that is a number also matches the numbers equal
    to it: ``"-999"`` matches fields written ``-999``, ``-999.0`` or ``-999.00`` (and
    the values -999 of a Parquet file's numeric column); a Parquet file's text and
    categorical columns match the text as written.

    Raises
    ------
    DataFileError
        Unknown extension, missing or unreadable file, duplicate column names, or a
        table with no columns, or no rows (unless ``empty_ok``).
    ~fits.core.names.ColumnNameError
        ``na_values`` names a column the table does not have.
    ValueError
        ``na_values`` holds something other than texts.
    """
    path, suffix = _table_file(path)
    spec = _na_spec(na_values)
    with _read_errors(path, suffix):
        if suffix == ".csv":
            frame = _read_csv(path, spec)
        else:
            _check_header(path, _parquet_names(path))
            frame = _index_as_columns(pd.read_parquet(path))
            missing = _missing(spec, list(frame.columns), path)
            if missing is not None:
                frame = _missing_values(frame, missing, _code_columns(frame, missing))
    if frame.shape[1] == 0:
        raise DataFileError(f"{path}: the table has no columns")
    if frame.shape[0] == 0 and not empty_ok:
        raise DataFileError(
            f"{path}: the table has a header but no rows; add its rows, or leave the file out"
        )
    return _parse_dates(frame, path)


def read_columns(path: str | os.PathLike[str]) -> list[str]:
    """The column names :func:`read_table` gives ``path``'s table, read from its header
    alone (a CSV file's first lines, a Parquet file's schema): cheap for a large table.

    Raises
    ------
    DataFileError
        As :func:`read_table`, for the header (a table whose rows cannot be read may
        still have its columns read).
    """
    path, suffix = _table_file(path)
    with _read_errors(path, suffix):
        if suffix == ".csv":
            sep, decimal, header, _ = _sniff(path)
            ended = _header_ends_with_separator(path, sep, header)
            header = header[:-1] if ended else header
            _check_header(path, [h.strip() for h in header] if sep != "," else header)
            names = pd.read_csv(path, sep=sep, decimal=decimal, nrows=0, index_col=False).columns
            names = names[: len(header)] if ended else names
            names = pd.Index(_empty_names(list(names), header), dtype=object)
        else:
            names = pd.Index(_parquet_names(path))
            _check_header(path, list(names))
    if len(names) == 0:
        raise DataFileError(f"{path}: the table has no columns")
    return [str(c) for c in names]


def count_rows(path: str | os.PathLike[str], most: int | None = None) -> int:
    """The rows :func:`read_table` reads from ``path``, counted without parsing them
    (a Parquet file's metadata; a CSV file's records after its header, blank lines
    counted as :func:`read_table` counts them: in a one-column table a blank line
    between values is a row, in a table of more columns none, and none before the
    header or after the last row), up to ``most`` at most (then the count stops: cheap
    for a large table).  A file that :func:`read_table` would refuse may be counted.

    Raises
    ------
    DataFileError
        Unknown extension, missing or unreadable file.
    """
    path, suffix = _table_file(path)
    limit = most if most is not None else -1
    with _read_errors(path, suffix):
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            rows = int(pq.ParquetFile(path).metadata.num_rows)
            return rows if most is None else min(rows, most)
        sep = _sniff(path)[0]
        rows = pending = 0
        one: bool | None = None  # a one-column table, once its header is read
        with closing(_records(path, sep)) as records:
            for _, _, blank, _, record in records:
                if one is None:
                    if not blank:
                        one = len(record) == 1
                elif blank:
                    pending += one  # a row if a value follows
                else:
                    rows += pending + 1
                    pending = 0
                    if rows >= limit >= 0:
                        return limit
        return rows


def _table_file(path: str | os.PathLike[str]) -> tuple[Path, str]:
    """(path, suffix) of a table file that exists, or DataFileError."""
    path = Path(path)
    suffix = check_suffix(path)
    if not path.is_file():
        raise DataFileError(f"{path}: no such file")
    return path, suffix


def _is_empty(path: Path) -> bool:
    """Whether ``path`` is a file of 0 bytes (False where it cannot be told)."""
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


@contextmanager
def _read_errors(path: Path, suffix: str) -> Iterator[None]:
    """Any failure of reading ``path`` as a DataFileError that names the file."""
    try:
        yield
    except (DataFileError, ColumnNameError):  # ColumnNameError: na_values' column
        raise
    except pd.errors.EmptyDataError:
        raise DataFileError(f"{path}: the file is empty") from None
    except UnicodeDecodeError as exc:  # pandas' position is in its buffer: find the line
        raise DataFileError(f"{path}: cannot read it as csv: {_not_utf8(path, exc)}") from None
    except Exception as exc:  # noqa: BLE001 - any parser failure is a data error here
        ragged = _RAGGED.search(str(exc))
        if ragged:
            want, line, got = ragged.groups()
            raise DataFileError(
                f"{path}: line {line} has {got} fields, the header {want}; fix that row "
                "(a value that holds the separator must be in double quotes) or the header"
            ) from None
        if suffix == ".parquet" and _is_empty(path):  # as an empty CSV is told
            raise DataFileError(f"{path}: the file is empty") from None
        if suffix == ".parquet" and not _starts_as_parquet(path):  # a CSV named .parquet
            raise DataFileError(
                f"{path}: cannot read it as parquet: the file is no Parquet file (it does not "
                "start as one); if it is CSV text, rename it to .csv"
            ) from None
        raise DataFileError(
            f"{path}: cannot read it as {suffix[1:]} ({str(exc).strip()})"
        ) from None


def _starts_as_parquet(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return True  # say what the reader said


#: pandas' message for a row of more fields than the header.
_RAGGED = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


#: Files that are no text, by their first bytes: what they are and what to do.
_BINARY_FILES = (
    (b"PAR1", "a Parquet file", "rename it to .parquet"),
    (
        b"PK\x03\x04",
        "a zip archive (an .xlsx spreadsheet?)",
        "save the sheet as CSV UTF-8 from the spreadsheet program, or unzip it",
    ),
    (b"\x1f\x8b", "gzip-compressed", "decompress it first (gunzip)"),
)


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> str:
    """What is wrong with a text file that is not UTF-8: its first such line and byte (or
    what the file is, by its first bytes)."""
    with open(path, "rb") as fh:
        start = fh.read(4)
        for magic, what, fix in _BINARY_FILES:
            if start.startswith(magic):
                return f"the file is {what}, not CSV text; {fix}"
        start = start[:2]
        if start in (b"\xff\xfe", b"\xfe\xff"):  # Excel's "Unicode Text", say
            return (
                "the file is UTF-16 text, not UTF-8; save it as UTF-8 (a "
                f"spreadsheet: CSV UTF-8; or `iconv -f utf-16 -t utf-8 {path.name} > new.csv`)"
            )
        fh.seek(0)
        for number, raw in enumerate(fh, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                byte = raw[bad.start]
                return (
                    f"line {number} is not UTF-8 text (byte {byte:#04x}, which is "
                    f"{bytes([byte]).decode('cp1252', 'replace')!r} in Latin-1/Windows-1252); "
                    "save the file as UTF-8 (a spreadsheet: CSV UTF-8; or `iconv -f latin1 "
                    f"-t utf-8 {path.name} > new.csv`)"
                )
    return f"the file is not UTF-8 text ({exc.reason}); save it as UTF-8"


#: Separators a CSV file may use, in order of preference.
CSV_SEPARATORS = (",", ";", "\t", "|")
_SNIFF_BYTES = 1 << 16
_SNIFF_LINES = 50
#: A number with a decimal comma or point, and thousands separators (the other mark, an
#: apostrophe, a space or a no-break space: one of them throughout), as
#: :func:`~fits.core.schema.parse_text_columns` reads them.
_DECIMAL_COMMA = re.compile(r"^[+-]?(?:\d+|[1-9]\d{0,2}([.'\u2019\s])\d{3}(?:\1\d{3})*),\d+$")
_DECIMAL_POINT = re.compile(r"^[+-]?(?:\d+|[1-9]\d{0,2}([,'\u2019\s])\d{3}(?:\1\d{3})*)\.\d+$")
#: A number that reads as two ("1,234": 1234 with a decimal point, 1.234 with a decimal
#: comma): it says nothing sure of the file's decimal mark.
_TWO_WAYS = re.compile(r"^[+-]?[1-9]\d{0,2}[.,]\d{3}$")
#: A unit around a number, left out when judging a file's decimal mark ("12,5 %",
#: "1.234,56 €", "EUR 12,50"; the units :func:`~fits.core.schema.parse_text_columns`
#: reads).
_UNIT_AROUND = re.compile(r"^[(]?(?:[$€£¥]|[A-Z]{3}\s)?\s*|(?:\s*[%$€£¥]|\s+[A-Z]{3})?\s*[)]?$")


#: The first line Excel writes, or reads, to name a CSV file's separator ("sep=;").
_SEP_HINT = re.compile(r'^"?sep=.?"?[,;\t|]*$', re.IGNORECASE)


def _sniff(path: Path) -> tuple[str, str, list[str], str]:
    """The separator and decimal mark of a CSV file, its header's raw names, and how
    sure the mark is (:data:`~fits.core.schema.DECIMAL_SOURCE_ATTR`): ``"fixed"`` (a
    ','-separated file, or a tab- or '|'-separated one without a decimal comma: a
    decimal point, never a comma), ``"settled"`` (a number of a ';'-separated file is
    written with the mark one way only: "12,5", "3.14", "1.234,56", none with the
    other; a tab- or '|'-separated file with a decimal comma a thousands comma cannot
    write: "1,5", "1500,25") or ``"guess"`` (a ';'-separated file with only numbers
    that read two ways, "1,234", or both marks, or none)."""
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
        sample = fh.read(_SNIFF_BYTES)
        complete = len(sample) < _SNIFF_BYTES
    lines = sample.splitlines()
    if not complete and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    lines = [ln for ln in lines if ln.strip()]
    more = not complete or len(lines) > _SNIFF_LINES  # lines past those looked at here
    lines = lines[:_SNIFF_LINES]
    if not lines:
        return ",", ".", [], "fixed"
    hint = _SEP_HINT.match(lines[0].strip())
    if hint:
        raise DataFileError(
            f"{path}: its first line {lines[0].strip()!r} is a spreadsheet's separator hint, "
            "not the header; delete that line (fits finds the separator itself)"
        )
    parsed = {}
    headers = {}  # as written (the rows' widths are judged without a trailing separator)
    for sep in CSV_SEPARATORS:
        split = list(csv.reader(lines, delimiter=sep))
        rows = _past_trailing(split)
        widths = {len(r) for r in rows}
        if len(widths) == 1 and widths.pop() > 1:
            parsed[sep], headers[sep] = rows, split[0]
    if "," in parsed or not parsed:
        sep = ","
        rows = parsed.get(",") or list(csv.reader(lines[:1]))
        header = headers.get(",") or rows[0]
    else:
        sep = max(parsed, key=lambda d: len(parsed[d][0]))
        rows, header = parsed[sep], headers[sep]
    decimal, source = ".", "fixed"
    if sep != ",":
        fields = [_UNIT_AROUND.sub("", f.strip()) for r in rows[1:] for f in r]
        # with ';' any "1,5" is a decimal comma; with a tab or '|' a comma may group
        # thousands ("1,500" in a file written with decimal points), so only a number a
        # thousands comma cannot write ("1,5", "1500,25", "1.500,25") counts
        commas = [
            f
            for f in fields
            if _DECIMAL_COMMA.match(f) and (sep == ";" or not _THOUSANDS_COMMA.match(f))
        ]
        points = [f for f in fields if _DECIMAL_POINT.match(f)]
        comma, point = bool(commas), bool(points)
        sure_comma = any(not _TWO_WAYS.match(f) for f in commas)
        sure_point = any(not _TWO_WAYS.match(f) for f in points)
        source = "guess"
        if comma and not point:
            decimal = ","
            source = "settled" if sure_comma else "guess"
        elif point:
            source = "settled" if sure_point and not sure_comma else "guess"
        elif more:
            # no number with a decimal mark in the first lines (a column of decimals
            # blank there, or whole there): the first one further on says which
            decimal, sure = _later_decimal_mark(path, sep)
            source = "settled" if sure else "guess"
    if sep != ";":  # a tab or '|': a decimal point unless a sure decimal comma was seen
        source = "settled" if decimal == "," else "fixed"
    return sep, decimal, header, source


def _past_trailing(rows: list[list[str]]) -> list[list[str]]:
    """``rows`` (a header, then data rows) with the empty field past the header's last
    left out of every data row that has one (a separator at the end of each row, as
    database and spreadsheet exports write: :func:`_trailing_separator`), so the rows
    split as evenly as the header; a header that ends with a separator no row fills
    (:func:`_header_ends_with_separator`) without its empty last field, as well."""
    if len(rows) < 2:
        return rows
    width = len(rows[0])
    if width > 1 and rows[0][-1] == "":
        if all(len(r) < width or (len(r) == width and not r[-1]) for r in rows[1:]):
            rows = [rows[0][:-1]] + [r[: width - 1] for r in rows[1:]]
            width -= 1
    return [rows[0]] + [r[:width] if len(r) == width + 1 and not r[-1] else r for r in rows[1:]]


#: A number whose one comma may group thousands: "1,500", "-12,000".
_THOUSANDS_COMMA = re.compile(r"^[+-]?\d{1,3},\d{3}$")


def _marked_number(sep: str) -> re.Pattern[bytes]:
    """A field of a ``sep``-separated file that is a number (group 1) with a decimal
    mark (group 2)."""
    s = re.escape(sep.encode())
    return re.compile(
        rb"(?:^|"
        + s
        + rb'|\r)[ \t]*"?[ \t]*([+-]?\d+([.,])\d+)[ \t]*"?[ \t]*(?='
        + s
        + rb"|\r|\n|\Z)",
        re.M,
    )


def _mark_of(number: str) -> tuple[str, bool]:
    """The decimal mark of a number written with one (``"12,30"``, ``"1.5"``), and
    whether it is sure (not a number that reads two ways: "1,234")."""
    mark = "," if "," in number else "."
    before, after = number.lstrip("+-").split(mark)
    two_ways = len(after) == 3 and 1 <= len(before) <= 3 and not before.startswith("0")
    return mark, not two_ways


def _later_decimal_mark(path: Path, sep: str) -> tuple[str, bool]:
    """The decimal mark of the first number written with one in a ``sep``-separated
    file (``","`` for ``12,30``, else ``"."``, also when there is none; with a tab or
    ``|``, numbers a thousands comma may write, "1,500", are passed over), read as bytes
    in blocks, each looked at with the unfinished line before it; and whether that
    number says so surely (:func:`_mark_of`; none: not sure)."""
    pattern = _marked_number(sep)

    def mark(text: bytes) -> tuple[str, bool] | None:
        for found in pattern.finditer(text):
            number = found.group(1).decode("ascii")
            if found.group(2) == b"," and sep != ";" and _THOUSANDS_COMMA.match(number):
                continue
            return _mark_of(number)
        return None

    carry = b""
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            data = carry + block
            cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
            whole, carry = (data[: cut + 1], data[cut + 1 :]) if cut >= 0 else (b"", data)
            found = mark(whole)
            if found is not None:
                return found
    return mark(carry) or (".", False)


def _check_header(path: Path, names: list[str]) -> None:
    seen: dict[str, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    dup = [n for n, k in seen.items() if k > 1]
    if dup:
        which = ", ".join(f"{n!r} ({seen[n]} times)" for n in dup)
        raise DataFileError(
            f"{path}: the header names column(s) {which} more than once; every column "
            "needs its own name: rename or remove the repeated column(s)"
        )


def _parquet_names(path: Path) -> list[str]:
    """The columns :func:`read_table` gives a Parquet file: its named index levels
    first (:func:`_named_index`), then its other fields (not the unnamed index levels
    pandas stores as ``__index_level_0__``); ``[]`` for a file pyarrow cannot read."""
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception:  # noqa: BLE001 - read_parquet reports an unreadable file
        return []
    named, _ = _named_index(schema)
    meta = schema.pandas_metadata or {}
    stored = {e for e in meta.get("index_columns", []) if isinstance(e, str)}
    return named + [n for n in schema.names if n not in stored]


def _named_index(schema: Any) -> tuple[list[str], dict[str, Any] | None]:
    """The named index levels in a Parquet file's pandas metadata (the keys of
    ``set_index`` or ``groupby`` left in the index of the frame ``to_parquet`` wrote),
    and the one pandas stored as a range (start, stop, step), not as a field (None when
    none).

    pandas reads them back as the index, which fits does not read; they are the table's
    columns (a CSV file written from the same frame holds them), read first, as
    :func:`_index_as_columns` puts them.  Unnamed levels are row labels, not data.
    """
    meta = schema.pandas_metadata or {}
    field_names = {c.get("field_name"): c.get("name") for c in meta.get("columns", [])}
    named: list[str] = []
    stored_range = None
    for entry in meta.get("index_columns", []):
        if isinstance(entry, dict):
            if entry.get("kind") == "range" and entry.get("name") is not None:
                named.append(str(entry["name"]))
                stored_range = entry
        elif field_names.get(entry) is not None:
            named.append(str(field_names[entry]))
    return named, stored_range


def _index_as_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its named index levels (a Parquet file's, :func:`_named_index`)
    as its first columns, in their order; its unnamed levels stay its index."""
    named = [n for n in frame.index.names if n is not None]
    return frame.reset_index(level=named) if named else frame


def _range_column(
    chunk: pd.DataFrame, stored_range: Mapping[str, Any] | None, start: int
) -> pd.DataFrame:
    """``chunk`` (rows ``start`` on of a Parquet file) with the named index pandas
    stored as a range as its first column, where pyarrow left it out (it restores the
    range only for a batch of the whole file's length)."""
    if stored_range is None or str(stored_range["name"]) in map(str, chunk.columns):
        return chunk
    first, step = int(stored_range["start"]), int(stored_range["step"])
    values = first + step * np.arange(start, start + len(chunk), dtype=np.int64)
    chunk = chunk.copy()
    chunk.insert(0, str(stored_range["name"]), values)
    return chunk


#: pandas before 3.0 parses floats with a fast parser that can be an ulp off the float64
#: nearest to the text (so 0.1 + 0.2 read from a file need not equal what 0.3 reads as
#: twice); "round_trip" parses exactly.  pandas 3 parses exactly by default and
#: deprecates the argument.
_ROUND_TRIP: dict[str, str] = (
    {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
)


def _separator_note(
    path: Path, sep: str, decimal: str, n_columns: int, source: str = "settled"
) -> None:
    """The note that a CSV file was read with another separator than ',' (and maybe ','
    as the decimal mark, said to be a guess when its numbers did not settle it:
    :func:`_sniff`), for the caller of the reading function."""
    mark = " and ',' as the decimal mark" if decimal == "," else ""
    guess = ""
    if decimal == "," and source == "guess":
        guess = (
            "; the decimal mark is a guess: every number with a comma in the first lines "
            "reads either way ('1,234' as 1234 or 1.234), so check its numeric columns; "
            "a text column of such numbers ('1,234 €') stays text"
        )
    shown = "a tab" if sep == "\t" else repr(sep)
    warnings.warn(
        f"{path}: read with {shown} as the separator{mark} ({n_columns} columns{guess})",
        DataNote,
        stacklevel=4,
    )


#: A line that is blank or holds only spaces and tabs (a cheap first look, bytes).
_BLANK_LINE = re.compile(rb"(?:\A|\n)[ \t]*\r?\n|\n[ \t]+\r?\Z|\r[ \t]*\r(?!\n)")
_SHOWN_LINES = 10


@dataclass(frozen=True)
class _Blanks:
    """The blank lines and white fields of a CSV file (lines that are empty or hold only
    spaces and tabs, outside quotes; fields of spaces and tabs alone), found by
    :func:`_blank_lines`: how pandas must read the file (``options``), and what to tell
    the user (``missing``: the 1-based lines of a one-column table read as missing
    values; ``skipped``: those of a table of more columns skipped between rows;
    ``white``: per column, as the header names it, the lines of its fields of spaces
    and tabs alone, read as missing values).  Blank lines before the header or after
    the last row are no rows, and are not noted (an editor's trailing newlines)."""

    options: Mapping[str, Any]
    column: str = ""
    missing: tuple[int, ...] = ()
    skipped: tuple[int, ...] = ()
    white: tuple[tuple[str, tuple[int, ...]], ...] = ()


#: The characters of a white field (read as missing): spaces and tabs.
_WHITE = " \t"


def _blank_lines(path: Path, sep: str) -> _Blanks:
    """How to read ``path``'s blank lines and white fields: in a one-column table an
    empty line between values is an empty value, a missing one (pandas'
    ``skip_blank_lines`` would drop it); in a table of more columns a blank line is no
    record of the header's fields and is skipped (pandas' default), with a note.  A
    field of spaces or tabs alone (a line of them, in a one-column table) is read as a
    missing value, with a note: pandas keeps it as text, which made a column of
    numbers text and would make ``'   '`` a category of a column of labels."""
    if not _may_have_blank_lines(path) and not _may_have_white_fields(path, sep):
        return _Blanks({})
    blanks: list[tuple[int, int, bool, list[str]]] = []  # (record, line, empty, fields)
    header: list[str] | None = None
    first = last = -1  # the first and last records that are no blank line
    white: dict[int, list[int]] = {}  # column position -> lines of its white fields
    values: set[str] = set()  # the white fields as written: pandas' na_values
    for k, line, blank, empty, record in _records(path, sep):
        if blank:
            blanks.append((k, line, empty, record))
            continue
        last = k
        if header is None:
            header, first = record, k
            continue
        for i, field in enumerate(record):
            if field and not field.strip(_WHITE):
                white.setdefault(i, []).append(line)
                values.add(field)
    if header is None:
        return _Blanks({})
    inner = [(line, empty, record) for k, line, empty, record in blanks if first < k < last]
    if len(header) == 1:  # a line of spaces between values: a white field
        for line, empty, record in inner:
            if not empty and record and record[0]:
                white.setdefault(0, []).append(line)
                values.add(record[0])
    options: dict[str, Any] = {"na_values": sorted(values)} if values else {}
    noted = tuple(
        (header[i] if i < len(header) else str(i), tuple(sorted(lines)))
        for i, lines in sorted(white.items())
    )
    if len(header) != 1:
        return _Blanks(options, skipped=tuple(line for line, _, _ in inner), white=noted)
    if inner:
        outside = [k for k, _, _, _ in blanks if not first < k < last]
        options.update(skip_blank_lines=False, skiprows=outside)
    return _Blanks(
        options,
        column=header[0],
        missing=tuple(line for line, empty, _ in inner if empty),
        white=noted,
    )


def _may_have_white_fields(path: Path, sep: str) -> bool:
    """Whether ``path`` may hold a field of spaces or tabs alone (quoted or not; False:
    surely none), read as bytes in blocks, each looked at with the unfinished line
    before it."""
    space = rb" " if sep == "\t" else rb"[ \t]"  # with tabs as the separator: spaces
    s = re.escape(sep.encode())
    found = re.compile(rb"(?:^|\r|" + s + rb')"?' + space + rb'+"?(?=' + s + rb"|\r|\n|\Z)", re.M)
    carry = b""
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            data = carry + block
            if found.search(data):
                return True
            cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
            carry = data[cut + 1 :] if cut >= 0 else data
    return False


def _records(path: Path, sep: str) -> Generator[tuple[int, int, bool, bool, list[str]]]:
    """The records of a CSV file as pandas counts them with ``skip_blank_lines=False``
    (one per line, or one per quoted value over several lines): (its 0-based index, its
    first line, 1-based; blank: one line, empty or of spaces and tabs alone, as pandas
    skips it (spaces alone with a tab separator); empty: an empty line; its fields)."""
    lines: list[str] = []

    def source() -> Iterator[str]:
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
            for line in fh:
                lines.append(line)
                yield line

    reader = csv.reader(source(), delimiter=sep)
    start = 1
    white = " \r\n" if sep == "\t" else " \t\r\n"  # a line of tabs: empty fields
    with _large_fields():
        for k, record in enumerate(reader):
            one = len(lines) == 1
            text = lines[0] if one else ""
            blank = one and not text.strip(white)
            yield k, start, blank, one and not text.strip("\r\n"), record
            lines.clear()
            start = reader.line_num + 1


@contextmanager
def _large_fields() -> Iterator[None]:
    """Python's csv module refuses a field over 128 KiB, which pandas reads: no limit
    while a file is looked through here."""
    limit = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)
    try:
        yield
    finally:
        csv.field_size_limit(limit)


def _may_have_blank_lines(path: Path) -> bool:
    """Whether ``path`` may hold a blank line with something after it (False: surely
    none; blank lines at the end, an editor's trailing newlines, are no rows either
    way), read as bytes in blocks.  A block is looked at after the end of the one
    before it from its last character that is no white space."""
    carry = b""
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            data = carry + block
            found = _BLANK_LINE.search(data)
            if found and data[found.end() :].strip():
                return True
            kept = len(data.rstrip())
            carry = data[kept - 1 :] if kept else data
    return False


def _lines(lines: Sequence[int]) -> str:
    shown = ", ".join(map(str, lines[:_SHOWN_LINES]))
    more = f" and {len(lines) - _SHOWN_LINES} more" if len(lines) > _SHOWN_LINES else ""
    return f"{len(lines)} blank line{'s' if len(lines) > 1 else ''} " + (
        f"(line{'s' if len(lines) > 1 else ''} {shown}{more})"
    )


def _blank_note(path: Path, blanks: _Blanks) -> None:
    """The note of :class:`_Blanks`' lines, for the caller of the reading function."""
    if blanks.missing:
        warnings.warn(
            f"{path}: {_lines(blanks.missing)} between values read as missing values of "
            f"its one column {blanks.column!r} (an empty line is an empty value there; "
            "blank lines after the last value are no rows)",
            DataNote,
            stacklevel=4,
        )
    if blanks.skipped:
        warnings.warn(
            f"{path}: {_lines(blanks.skipped)} between rows skipped (a blank line holds "
            "none of the header's fields; write a row of missing values with its "
            "separators, e.g. ',,')",
            DataNote,
            stacklevel=4,
        )
    for column, lines in blanks.white:
        shown = ", ".join(map(str, lines[:_SHOWN_LINES]))
        more = f" and {len(lines) - _SHOWN_LINES} more" if len(lines) > _SHOWN_LINES else ""
        many = "s" if len(lines) > 1 else ""
        warnings.warn(
            f"{path}: column {column!r}: {len(lines)} field{many} of spaces or tabs alone "
            f"(line{many} {shown}{more}) read as missing value{many} (white space holds no "
            "value; leave the field empty for a missing value, or write the value)",
            DataNote,
            stacklevel=4,
        )


@dataclass
class _NaTexts:
    """The fields of one text column that pandas would read as missing values
    (:data:`NA_TEXTS`), learnt chunk by chunk, and whether to keep them as written.

    They are kept in a column of labels: one whose other values are text without a
    digit (``"NA"`` for North America or Namibia, ``"None"`` for "no alley" in a
    housing table), where reading them as missing values would take a category out of
    the table and write its rows back empty; as written, the synthetic table writes
    them as the input does (a reader that takes ``"NA"`` for missing takes both so). In
    a column of numbers, dates or codes (its values hold digits) they stay missing
    values, as pandas reads them.
    """

    counts: dict[str, int] = dataclass_field(default_factory=dict)
    labels: bool = False
    digits: bool = False

    def update(self, raw: pd.Series) -> None:
        """Learn from ``raw``: the column's fields as text, only empty and white fields
        missing."""
        present = raw.dropna().astype(str)
        token = present.isin(NA_TEXTS)
        for text, n in present[token].value_counts().items():
            self.counts[str(text)] = self.counts.get(str(text), 0) + int(n)
        others = present[~token]
        self.labels |= not others.empty
        self.digits = self.digits or bool(others.str.contains(r"\d").any())

    def keep(self) -> bool:
        """Whether the column keeps these fields as written."""
        return bool(self.counts) and self.labels and not self.digits


def _shell_word(text: str) -> str:
    """``text`` as a shell takes it: as it is, or in single quotes."""
    return text if re.fullmatch(r"[\w./-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def _na_text_note(path: Path, col: Any, texts: _NaTexts) -> None:
    shown = ", ".join(f"{t!r} ({n} field{'s' if n > 1 else ''})" for t, n in texts.counts.items())
    # the option that says so, quoted for a shell where the text needs it ('#N/A')
    named = " ".join(f"--na-values {_shell_word(t)}" for t in texts.counts)
    warnings.warn(
        f"{path}: column {col!r}: {shown} read as written, a value of the column (pandas "
        "would read it as a missing value; where it means that, leave the fields empty or "
        f"name it a missing value: {named})",
        DataNote,
        stacklevel=4,
    )


def _keep_na_texts(
    frame: pd.DataFrame, path: Path, sep: str, decimal: str, options: Mapping[str, Any]
) -> pd.DataFrame:
    """Put back, as written, the :data:`NA_TEXTS` fields that pandas read as missing
    values in the columns of labels of ``frame`` (:class:`_NaTexts`), with a note."""
    text = [  # (a column of no missing value holds none of them)
        col
        for col in frame.columns
        if (
            (pd.api.types.is_object_dtype(frame[col]) or pd.api.types.is_string_dtype(frame[col]))
            and frame[col].isna().any()
            and frame[col].dropna().map(lambda v: isinstance(v, str)).all()
        )
        or (len(frame) > 0 and frame[col].isna().all())  # "NA" in every row: read as float
    ]
    if not text:
        return frame
    raw = pd.read_csv(path, usecols=text, **_raw_options(sep, decimal, options))
    raw = _mask_codes(raw, options, decimal)
    na_only: dict[Any, dict[str, Any]] = {}
    for col in text:
        texts = _NaTexts()
        texts.update(raw[col])
        if texts.keep():
            kept = raw[col].where(raw[col].isin(NA_TEXTS))
            frame[col] = frame[col].where(kept.isna(), kept)
            _na_text_note(path, col, texts)
        elif len(texts.counts) == 1 and not texts.labels:  # 'NA' and empty fields alone
            (token,) = texts.counts
            held = (raw[col] == token).to_numpy()
            rows = None if held.all() else np.packbits(held).tobytes().hex()
            na_only[col] = {"text": token, "rows": rows}
    if na_only:
        frame.attrs[NA_ONLY_ATTR] = na_only
    return frame


def _raw_options(sep: str, decimal: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``pd.read_csv``'s options to read a file's fields as text, as written: only
    empty and white fields are missing values (not :data:`NA_TEXTS`)."""
    white = options.get("na_values", [])
    return {
        **options,
        "sep": sep,
        "decimal": decimal,
        "dtype": str,
        "keep_default_na": False,
        "na_values": (
            {c: ["", *v] for c, v in white.items()} if isinstance(white, Mapping) else ["", *white]
        ),
    }


def _read_csv(path: Path, spec: _NaSpec | None = None) -> pd.DataFrame:
    sep, decimal, header, source = _sniff(path)
    ended = _header_ends_with_separator(path, sep, header)
    header = header[:-1] if ended else header
    _check_header(path, [h.strip() for h in header] if sep != "," else header)
    trailing = _trailing_separator(path, sep, len(header))
    blanks = _blank_lines(path, sep)
    options = {**blanks.options, "index_col": False}  # never a column as the row index
    if spec is not None:
        names = list(pd.read_csv(path, sep=sep, decimal=decimal, nrows=0, index_col=False).columns)
        options = _na_options(options, _missing(spec, names, path), names)
    # the header's columns (pandas warns of a row's empty field past them otherwise)
    within = {"usecols": range(len(header))} if trailing or ended else {}
    frame = pd.read_csv(path, sep=sep, decimal=decimal, **options, **within, **_ROUND_TRIP)
    if ended:
        _header_note(path, sep, len(header))
    if trailing:
        _trailing_note(path, sep, len(header))
    if sep != ",":
        _separator_note(path, sep, decimal, frame.shape[1], source)
    elif frame.shape[1] == 1 and any(d in str(frame.columns[0]) for d in CSV_SEPARATORS[1:]):
        raise DataFileError(
            f"{path}: the table has one column named {str(frame.columns[0])!r}, whose name "
            "holds a separator, yet its lines do not split evenly on it; check the file's "
            "separator and quoting (fits reads ',', ';', tab and '|')"
        )
    if frame.shape[1] > 1 and frame.iloc[:, -1].isna().any():  # pandas fills short rows
        _check_short_rows(path, sep, frame.shape[1])
    _blank_note(path, blanks)
    frame = _whole_numbers(frame, path, sep, decimal, options)
    frame = _keep_na_texts(frame, path, sep, decimal, options)
    spelt = _bool_spellings(frame, path, sep, decimal, options)
    read_as = list(frame.columns)
    frame.columns = _empty_names(read_as, header)
    renamed = dict(zip(read_as, frame.columns, strict=True))
    if spelt:  # by the columns' final names
        frame.attrs[BOOL_TEXTS_ATTR] = {renamed[c]: list(t) for c, t in spelt.items()}
    if NA_ONLY_ATTR in frame.attrs:
        frame.attrs[NA_ONLY_ATTR] = {renamed[c]: v for c, v in frame.attrs[NA_ONLY_ATTR].items()}
    if decimal == ",":  # text numbers ("1.234,56 €") are read with it too
        frame.attrs[DECIMAL_MARK_ATTR] = decimal
    if source != "fixed":  # and with how sure it is ("1,234 €" alone: a guess)
        frame.attrs[DECIMAL_SOURCE_ATTR] = source
    return frame


def _spelling(texts: Iterable[str]) -> tuple[str, str] | None:
    """How a CSV column of booleans writes them, from its fields (pandas reads
    ``true``, ``True`` and ``TRUE`` alike): ``("true", "false")`` or ``("TRUE",
    "FALSE")`` when every field is so written; None for Python's ``True``/``False``
    (how pandas writes booleans back) or several spellings."""
    seen = {str(t).strip() for t in texts}
    for pair in (("true", "false"), ("TRUE", "FALSE")):
        if seen and seen <= set(pair):
            return pair
    return None


def _is_boolean(s: pd.Series) -> bool:
    """Whether ``s`` holds booleans alone (a ``bool`` column, or Python booleans with
    missing values: how pandas reads true/false with blanks)."""
    if pd.api.types.is_bool_dtype(s.dtype):
        return True
    if not pd.api.types.is_object_dtype(s.dtype):
        return False
    present = s.dropna()
    return not present.empty and bool(present.map(lambda v: isinstance(v, (bool, np.bool_))).all())


def _bool_spellings(
    frame: pd.DataFrame, path: Path, sep: str, decimal: str, options: Mapping[str, Any]
) -> dict[Any, tuple[str, str]]:
    """The columns of booleans of ``frame`` that the file writes one way other than
    Python's (:func:`_spelling`), with their spelling (:data:`BOOL_TEXTS_ATTR`)."""
    cols = [c for c in frame.columns if _is_boolean(frame[c])]
    if not cols:
        return {}
    raw = pd.read_csv(path, usecols=cols, **_raw_options(sep, decimal, options))
    out = {}
    for col in cols:  # the fields read as booleans (not 'NA', read as missing)
        spelt = _spelling(raw[col][frame[col].notna().to_numpy()].dropna().unique())
        if spelt is not None:
            out[col] = spelt
    return out


def _check_short_rows(path: Path, sep: str, n_columns: int) -> None:
    """Refuse a row of fewer fields than the header, which pandas reads with the missing
    fields as missing values (a row of more fields it refuses itself).  Run only when
    the last column has a missing value: the fields a short row lacks are the last."""
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh, delimiter=sep)
        line = 1
        for k, row in enumerate(reader):
            if k and row and 0 < len(row) < n_columns and "".join(row).strip():
                raise DataFileError(
                    f"{path}: line {line} has {len(row)} fields, the header {n_columns}; fix "
                    "that row (a missing value keeps its empty field: 'a,,c', or 'a,b,' for "
                    "the last column)"
                )
            line = reader.line_num + 1


def _utf8(path: Path) -> bool:
    """Whether ``path`` reads as UTF-8 text, read in blocks."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            while fh.read(1 << 20):
                pass
    except UnicodeDecodeError:
        return False
    return True


def _separator_words(sep: str, width: int) -> tuple[str, str]:
    """The separator and the header's column count in words, for the trailing-separator
    notes: ``("','", "3 columns")``, ``("a tab", "1 column")``."""
    return ("a tab" if sep == "\t" else repr(sep)), (
        "1 column" if width == 1 else f"{width} columns"
    )


def _trailing_note(path: Path, sep: str, width: int) -> None:
    """The note that every row of a CSV file ends with a separator
    (:func:`_trailing_separator`), read as the header's columns."""
    shown, columns = _separator_words(sep, width)
    warnings.warn(
        f"{path}: every row ends with {shown} after its last field (an empty field past "
        f"the header's {columns}, as database and spreadsheet exports write); read as the "
        f"header's {columns}",
        DataNote,
        stacklevel=4,
    )


def _trailing_separator(path: Path, sep: str, width: int) -> bool:
    """Whether every data row of ``path`` ends with a separator after its last field:
    one field more than its header's ``width``, empty, as
    database and spreadsheet exports write (``a,b,c`` then ``1,2,3,``).  pandas takes
    the first field of such a file as the row index (every column shifted one to the
    left, the last one missing); read with ``index_col=False`` it leaves the empty
    field out, as :func:`_read_csv` does then, with a note.

    Raises
    ------
    DataFileError
        The first data row has more fields than the header and not every row ends so:
        a row of other fields than the first (fewer, or more), or a value past the
        header's last column (pandas would drop it, with ``index_col=False``, or shift
        the columns without).  A first data row as long as the header is left to pandas,
        which refuses a longer row after it.
    """
    seen_header = False
    first = 0  # the line of the first data row, once it is longer than the header
    with closing(_records(path, sep)) as records:  # the file closed when left early
        for _, line, blank, _, record in records:
            if blank or not record:
                continue
            if not seen_header:
                seen_header = True
                continue
            if not first:
                if len(record) <= width:
                    return False
                if not _utf8(path):  # no text (a gzip file named .csv): pandas' error says so
                    return False
                first = line
            if len(record) <= width:
                raise DataFileError(
                    f"{path}: line {first} has {width + 1} fields, the header {width}, and line "
                    f"{line} has {len(record)}; give every row the header's fields (or every "
                    "row a separator at its end)"
                )
            if len(record) > width + 1 or record[-1]:
                raise DataFileError(
                    f"{path}: line {line} has {len(record)} fields, the header {width}; fix that "
                    "row (a value that holds the separator must be in double quotes) or the "
                    "header (a name for each column)"
                )
    return bool(first)


def _header_ends_with_separator(path: Path, sep: str, header: list[str]) -> bool:
    """Whether the header of ``path`` ends with a separator that no row fills: its last
    field empty (``a,b,c,``) and every data row without a value there (a row of the
    header's other fields, ``1,2,x``, or one with an empty field past them, ``1,2,x,``).
    Such a field is the header's trailing separator, not a column: :func:`_read_csv`
    and :func:`_iter_csv` read the header's other columns, with a note
    (:func:`_header_note`).  Reads the whole file only when the header's last field is
    empty."""
    if len(header) < 2 or header[-1] != "":
        return False
    width = len(header)
    seen_header = False
    with closing(_records(path, sep)) as records:
        for _, _, blank, _, record in records:
            if blank or not record:
                continue
            if not seen_header:
                seen_header = True
                continue
            if len(record) > width or (len(record) == width and record[-1]):
                return False
    return True


def _header_note(path: Path, sep: str, width: int) -> None:
    """The note that the header of a CSV file ends with a separator no row fills
    (:func:`_header_ends_with_separator`), read as the header's named columns."""
    shown, columns = _separator_words(sep, width)
    warnings.warn(
        f"{path}: the header ends with {shown} after its last name (an empty field past "
        f"its {columns} that no row holds a value under); read as the header's "
        f"{columns}. To silence this, delete that {shown} at the header's end",
        DataNote,
        stacklevel=4,
    )


def _empty_names(columns: list[Any], header: list[str]) -> list[Any]:
    """pandas names a column whose header field is empty ``Unnamed: i``: give it its
    empty name back, so the output's header is the input's (fits never renames)."""
    if len(header) != len(columns):
        return columns
    return [
        "" if raw == "" and str(col) == f"Unnamed: {i}" else col
        for i, (col, raw) in enumerate(zip(columns, header, strict=True))
    ]


def _whole_numbers(
    frame: pd.DataFrame, path: Path, sep: str, decimal: str, options: Mapping[str, Any]
) -> pd.DataFrame:
    """Fix what pandas' number parsing loses: codes written with leading zeros ("02134",
    "00501") stay text, and whole numbers with blanks, written without a decimal point,
    become ``Int64`` (pandas reads them as floats)."""
    numeric = []  # integer columns, and float columns of whole numbers with blanks
    for col in frame.columns:
        s = frame[col]
        if pd.api.types.is_integer_dtype(s.dtype):
            numeric.append(col)
        elif pd.api.types.is_float_dtype(s.dtype) and s.isna().any():
            v = s.dropna().to_numpy(dtype=float)
            if v.size and np.all(v == np.round(v)):
                numeric.append(col)
    if not numeric:
        return frame
    raw = pd.read_csv(path, sep=sep, decimal=decimal, usecols=numeric, dtype=str, **options)
    raw = _mask_codes(raw, options, decimal)
    for col in numeric:
        tokens = raw[col].dropna().str.strip()
        if tokens.str.match(r"^[+-]?0\d").any():
            frame[col] = raw[col]  # a code: leading zeros are part of it
            continue
        s = frame[col]
        if not pd.api.types.is_float_dtype(s.dtype) or not s.isna().any():
            continue
        v = s.dropna().to_numpy(dtype=float)
        if (
            v.size
            and np.all(v == np.round(v))
            and np.all(np.abs(v) < 2**53)
            and not tokens.str.contains(r"[.,eE]").any()
        ):
            frame[col] = s.astype("Int64")
    return frame


def _parse_dates(frame: pd.DataFrame, path: Path | None = None) -> pd.DataFrame:
    for col in frame.columns:
        s = frame[col]
        if not (pd.api.types.is_object_dtype(s) or pd.api.types.is_string_dtype(s)):
            continue
        present = s.dropna()
        if present.empty or not present.map(lambda v: isinstance(v, str)).all():
            continue
        if not present.str.match(ISO_DATE).all():
            continue
        aware = present.str.contains(r"(?:Z|[+-]\d{2}:?\d{2})$")
        if aware.any() and not aware.all():
            continue  # some with an offset, some without: left as text
        try:
            frame[col] = iso_datetimes(s)  # one offset: kept
        except (ValueError, TypeError):
            try:  # several offsets: read as UTC
                frame[col] = pd.to_datetime(s, format="ISO8601", utc=True)
            except (ValueError, TypeError):
                continue
            warnings.warn(
                f"{path or 'table'}: column {col!r} has date-times with several UTC "
                "offsets (summer time?); they are read in UTC (a synthetic table writes "
                "them in UTC)",
                DataNote,
                stacklevel=3,
            )
    return frame


_DIGITS = re.compile(r"^\d+$")


def align_codes(tables: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Site tables read alike where one column holds codes: a column of digits that
    keeps its leading zeros as text at some sites ("02139", "00501": ZIP codes, as
    :func:`read_table` reads them) and is whole numbers at the others (the same codes,
    none of which starts with a 0 there: "10001") becomes text at every site, each
    number as written ("10001"), with a note; the table's ``attrs`` name the column
    (:data:`~fits.core.schema.CODE_COLUMNS_ATTR`), so that
    :func:`~fits.core.schema.parse_text_columns` leaves it text.

    The sites' types would differ otherwise (text at some, numbers at others), which
    the schema refuses, and no file written as CSV can make pandas read "10001" as
    text. A column of whole numbers with a negative value, or text that is not digits
    alone, is left as it is (and refused there, as before).

    Parameters
    ----------
    tables : mapping
        Site name -> table, as read.

    Returns
    -------
    dict
        The tables, the columns so read replaced (copies; the others as given).
    """
    out = dict(tables)
    if len(out) < 2:
        return out
    first = next(iter(out.values()))
    for col in first.columns:
        if not all(col in t.columns for t in out.values()):
            continue
        codes, numbers = [], []
        for site, table in out.items():
            s = table[col]
            present = s.dropna()
            if pd.api.types.is_integer_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
                if present.empty or (present < 0).any():
                    break
                numbers.append(site)
            elif (
                (pd.api.types.is_object_dtype(s.dtype) or pd.api.types.is_string_dtype(s.dtype))
                and not present.empty
                and present.map(lambda v: isinstance(v, str) and bool(_DIGITS.match(v))).all()
                and present.str.match(r"^0\d").any()
            ):
                codes.append((site, present[present.str.match(r"^0\d")].iloc[0]))
            else:
                break
        else:
            if not (codes and numbers):
                continue
            dtype = out[codes[0][0]][col].dtype
            for site in numbers:
                table = out[site].copy()
                table[col] = table[col].map(lambda v: str(int(v)), na_action="ignore").astype(dtype)
                table.attrs[CODE_COLUMNS_ATTR] = [*table.attrs.get(CODE_COLUMNS_ATTR, []), col]
                out[site] = table
            example = out[numbers[0]][col].dropna().iloc[0]
            warnings.warn(
                f"column {col!r} holds codes with leading zeros at "
                f"{', '.join(site for site, _ in codes)} (e.g. {codes[0][1]!r}), so its whole "
                f"numbers at {', '.join(numbers)} are read as codes too, as written (e.g. "
                f"{example!r})",
                DataNote,
                stacklevel=2,
            )
    return out


def known_codes(known: pd.DataFrame, tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """A ``--known`` table whose columns of whole numbers are codes at every site (text
    of digits alone, :func:`align_codes`) read as the codes they are ("10001" for
    10001), as the site tables read them; the table as given otherwise."""
    out = known
    for col in known.columns:
        s = known[col]
        sites = [t[col] for t in tables.values() if col in t.columns]
        if (
            not sites
            or not pd.api.types.is_integer_dtype(s.dtype)
            or pd.api.types.is_bool_dtype(s.dtype)
            or (s.dropna() < 0).any()
        ):
            continue
        if all(
            (pd.api.types.is_object_dtype(t.dtype) or pd.api.types.is_string_dtype(t.dtype))
            and not t.dropna().empty
            and t.dropna().map(lambda v: isinstance(v, str) and bool(_DIGITS.match(v))).all()
            for t in sites
        ):
            if out is known:
                out = known.copy()
            out[col] = s.map(lambda v: str(int(v)), na_action="ignore").astype(sites[0].dtype)
            out.attrs[CODE_COLUMNS_ATTR] = [*out.attrs.get(CODE_COLUMNS_ATTR, []), col]
    return out


def iter_table(
    path: str | os.PathLike[str],
    chunk_rows: int,
    *,
    empty_ok: bool = False,
    na_values: NaValues | None = None,
) -> Iterator[pd.DataFrame]:
    """Read a CSV or Parquet table in chunks of at most ``chunk_rows`` rows, parsed as
    :func:`read_table` parses the whole file: memory holds one chunk at a time.

    The chunks, put together, are :func:`read_table`'s table: the same columns, dtypes
    and values.  A chunk alone would not always be parsed so (a column of whole numbers
    whose blanks or decimal values come in a later chunk; text, dates or codes with
    leading zeros in a later chunk), so a first pass over the file in chunks learns
    what the whole file holds (per column: the dtypes pandas infers, blanks, whole
    numbers, leading zeros, dates and their UTC offsets; Parquet: nulls, date texts,
    categories), and the second pass reads every chunk with those dtypes.  Where
    pandas itself reads a large file in pieces and gives a column of numbers and text
    a mix of numbers and strings, the chunks hold the strings as written.  A table of
    no rows is one chunk of no rows (with ``empty_ok``).

    Parameters
    ----------
    path : str or PathLike
        A ``.csv`` or ``.parquet`` file.
    chunk_rows : int
        Most rows of a chunk (at least 1).
    empty_ok : bool
        As :func:`read_table`.
    na_values : texts, (column, text) pairs, or mapping column -> texts, optional
        As :func:`read_table`.

    Raises
    ------
    DataFileError
        As :func:`read_table` (the file's name and suffix are checked at once; what
        the file holds, when the chunks are read).
    ValueError
        ``chunk_rows`` below 1, or ``na_values`` as :func:`read_table`.
    """
    if int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows must be at least 1, not {chunk_rows}")
    path, suffix = _table_file(path)
    spec = _na_spec(na_values)
    reader = _iter_csv if suffix == ".csv" else _iter_parquet
    return _guarded_chunks(reader(path, int(chunk_rows), empty_ok, spec), path, suffix)


def _guarded_chunks(
    chunks: Iterator[pd.DataFrame], path: Path, suffix: str
) -> Iterator[pd.DataFrame]:
    with _read_errors(path, suffix):
        yield from chunks


_UNITS = ("s", "ms", "us", "ns")


def _unit(dtype: Any) -> str:
    """The resolution of a datetime dtype (naive or zone-aware)."""
    unit = getattr(dtype, "unit", None)
    return str(unit) if unit else str(np.datetime_data(dtype)[0])


@dataclass
class _DateFacts:
    """What :func:`_parse_dates` would decide for a text column, learnt chunk by chunk
    (:func:`iter_table`): every present value an ISO 8601 text, all with a UTC offset
    or none, and how ``pd.to_datetime`` parses each chunk."""

    ok: bool = True
    present: bool = False
    aware: bool = False
    naive: bool = False
    utc: bool = False
    dtypes: dict[str, Any] | None = None
    samples: dict[str, str] | None = None
    units: set[str] | None = None

    def update(self, values: pd.Series) -> None:
        if not self.ok:
            return
        present = values.dropna()
        if present.empty:
            return
        if not present.map(lambda v: isinstance(v, str)).all():
            self.ok = False
            return
        if not ISO_DATE.match(present.iloc[0]) or not present.str.match(ISO_DATE).all():
            self.ok = False
            return
        aware = present.str.contains(r"(?:Z|[+-]\d{2}:?\d{2})$")
        self.aware |= bool(aware.any())
        self.naive |= not bool(aware.all())
        if self.aware and self.naive:
            self.ok = False
            return
        self.present = True
        dtypes, samples, units = self.dtypes or {}, self.samples or {}, self.units or set()
        self.dtypes, self.samples, self.units = dtypes, samples, units
        try:
            parsed = iso_datetimes(present)
        except (ValueError, TypeError):
            self.utc = True
            try:
                parsed = pd.to_datetime(present, format="ISO8601", utc=True)
            except (ValueError, TypeError):
                self.ok = False
                return
        else:
            dtypes.setdefault(str(parsed.dtype), parsed.dtype)
            samples.setdefault(str(parsed.dtype), str(present.iloc[0]))
        if pd.api.types.is_datetime64_any_dtype(parsed.dtype):
            units.add(_unit(parsed.dtype))

    def final(self) -> tuple[bool, Any] | None:
        """(parse with ``utc=True``, the whole column's dtype), or None: left as text."""
        if not (self.ok and self.present):
            return None
        unit = max(self.units or {"ns"}, key=_UNITS.index)
        if self.utc:
            return True, pd.DatetimeTZDtype(unit, "UTC")
        dtypes = list((self.dtypes or {}).values())
        if len(dtypes) == 1:
            dtype = dtypes[0]
        else:  # several zones or units: what one value of each gives together
            try:
                dtype = iso_datetimes(pd.Series(list((self.samples or {}).values()))).dtype
            except (ValueError, TypeError):
                return True, pd.DatetimeTZDtype(unit, "UTC")
        if not pd.api.types.is_datetime64_any_dtype(dtype):
            return False, dtype
        tz = getattr(dtype, "tz", None)
        return False, pd.DatetimeTZDtype(unit, tz) if tz is not None else np.dtype(
            f"datetime64[{unit}]"
        )


def _as_dates(values: pd.Series, utc: bool, dtype: Any) -> pd.Series:
    """A chunk of a date column parsed as :func:`_parse_dates` parses the whole column
    (``utc`` and ``dtype``: :meth:`_DateFacts.final`)."""
    parsed = pd.to_datetime(values, format="ISO8601", utc=utc)
    if parsed.dtype == dtype:
        return parsed
    if not pd.api.types.is_datetime64_any_dtype(dtype):
        return parsed.astype(dtype)
    tz = getattr(dtype, "tz", None)
    if tz is not None and getattr(parsed.dtype, "tz", None) is None:
        parsed = parsed.dt.tz_localize(tz)  # a chunk of missing values alone
    return parsed.dt.as_unit(_unit(dtype))


@dataclass
class _CsvFacts:
    """What :func:`_read_csv` would decide for one column, learnt chunk by chunk."""

    dtypes: dict[str, Any]
    dates: _DateFacts
    nan: bool = False
    present: bool = False
    whole: bool = True
    small: bool = True
    lead0: bool = False
    point: bool = False
    boolish: bool = True

    def update(self, typed: pd.Series, raw: pd.Series) -> None:
        dtype = typed.dtype
        self.dtypes.setdefault(str(dtype), dtype)
        numeric = pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
        if numeric:
            missing = typed.isna()
            self.nan |= bool(missing.any())
            v = typed[~missing].to_numpy(dtype=float)
            if v.size:
                self.present = True
                self.whole &= bool(np.all(v == np.round(v)))
                self.small &= bool(np.all(np.abs(v) < 2**53))
            if self.whole:  # leading zeros and points matter only to whole numbers
                tokens = raw.dropna().str.strip()
                self.lead0 |= bool(tokens.str.match(r"^[+-]?0\d").any())
                self.point |= bool(tokens.str.contains(r"[.,eE]").any())
        if self.boolish and not pd.api.types.is_bool_dtype(dtype):
            present = typed.dropna()
            self.boolish = present.empty or (
                pd.api.types.is_object_dtype(dtype)
                and bool(present.map(lambda v: isinstance(v, (bool, np.bool_))).all())
            )
        self.dates.update(raw)

    def plan(self) -> tuple[Any, Any]:
        """(the dtype to read the column with, or None: as pandas infers it; the
        column's dtype in the whole table, or ``"text"``)."""
        dtypes = list(self.dtypes.values())
        if len(dtypes) == 1:
            merged = dtypes[0]
        elif all(
            pd.api.types.is_numeric_dtype(d) and not pd.api.types.is_bool_dtype(d) for d in dtypes
        ):
            merged = np.dtype("float64")  # pandas' common type of int64 and float64
        else:
            merged = np.dtype(object)
        if pd.api.types.is_integer_dtype(merged):
            return (str, "text") if self.lead0 else (None, merged)
        if pd.api.types.is_float_dtype(merged):
            if self.nan and self.present and self.whole:
                if self.lead0:
                    return str, "text"
                if self.small and not self.point:
                    return "float64", "Int64"
            return "float64", merged
        if pd.api.types.is_bool_dtype(merged):
            return None, merged
        if self.boolish and pd.api.types.is_object_dtype(merged):
            return None, merged  # True/False with blanks: Python booleans
        return str, "text"


def _iter_csv(
    path: Path, chunk_rows: int, empty_ok: bool, spec: _NaSpec | None = None
) -> Iterator[pd.DataFrame]:
    sep, decimal, header, source = _sniff(path)
    ended = _header_ends_with_separator(path, sep, header)
    header = header[:-1] if ended else header
    _check_header(path, [h.strip() for h in header] if sep != "," else header)
    names = list(pd.read_csv(path, sep=sep, decimal=decimal, nrows=0, index_col=False).columns)
    names = names[: len(header)] if ended else names
    if sep == "," and len(names) == 1 and any(d in str(names[0]) for d in CSV_SEPARATORS[1:]):
        yield read_table(path, empty_ok=empty_ok, na_values=_spec_values(spec))  # its error
        return
    missing = _missing(spec, names, path)
    facts = {c: _CsvFacts({}, _DateFacts()) for c in names}
    texts = {c: _NaTexts() for c in names}
    bool_fields: dict[Any, set[str]] = {c: set() for c in names}  # while it may be one
    rows = 0
    trailing = _trailing_separator(path, sep, len(header))
    blanks = _blank_lines(path, sep)
    # never a column as the row index (a separator at the end of each row: left out)
    options: dict[str, Any] = {
        "sep": sep,
        "decimal": decimal,
        "chunksize": chunk_rows,
        "index_col": False,
    }
    if trailing or ended:  # the header's columns (pandas warns of the field past them)
        options["usecols"] = range(len(header))
    options.update(_na_options(blanks.options, missing, names))
    typed_chunks = pd.read_csv(path, **options, **_ROUND_TRIP)
    raw_chunks = pd.read_csv(path, **_raw_options(sep, decimal, options))
    with typed_chunks, raw_chunks:
        for typed, raw in zip(typed_chunks, raw_chunks, strict=True):
            rows += len(typed)
            raw = _mask_codes(raw, options)
            for col in names:
                texts[col].update(raw[col])
                # the fields as pandas reads them by default: NA_TEXTS missing too
                facts[col].update(typed[col], raw[col].mask(raw[col].isin(NA_TEXTS)))
                if facts[col].boolish or pd.api.types.is_bool_dtype(typed[col].dtype):
                    # the fields read as booleans (not 'NA', read as missing)
                    read = raw[col][typed[col].notna().to_numpy()]
                    bool_fields[col].update(read.dropna().unique())
    if rows == 0:
        yield read_table(path, empty_ok=empty_ok, na_values=_spec_values(spec))
        return
    if ended:
        _header_note(path, sep, len(names))
    if trailing:
        _trailing_note(path, sep, len(names))
    if sep != ",":
        _separator_note(path, sep, decimal, len(names), source)
    _blank_note(path, blanks)
    plans = {c: f.plan() for c, f in facts.items()}
    kept = [c for c, (_, kind) in plans.items() if kind == "text" and texts[c].keep()]
    for col in kept:
        _na_text_note(path, col, texts[col])
    dates = {c: facts[c].dates.final() for c, (_, kind) in plans.items() if kind == "text"}
    _note_utc(path, {c: d for c, d in dates.items() if d is not None})
    read_as = {c: how for c, (how, _) in plans.items() if how is not None}
    final = dict(zip(names, _empty_names(names, header), strict=True))
    spelt = {  # as read_table's attrs
        final[c]: list(s)
        for c in names
        if facts[c].boolish and (s := _spelling(bool_fields[c])) is not None
    }
    if kept:  # pandas' missing texts everywhere but in the columns that keep them
        options["keep_default_na"] = False
        options["na_values"] = {
            c: ["", *_na_of(options, c), *([] if c in kept else NA_TEXTS)] for c in names
        }
    with pd.read_csv(path, **options, dtype=read_as, **_ROUND_TRIP) as chunks:
        for chunk in chunks:
            for col, (_, kind) in plans.items():
                if kind == "text":
                    date = dates[col]
                    if date is not None:
                        chunk[col] = _as_dates(chunk[col], *date)
                elif chunk[col].dtype != kind:
                    chunk[col] = chunk[col].astype(kind)
            chunk.columns = _empty_names(list(chunk.columns), header)
            if decimal == ",":  # as read_table's
                chunk.attrs[DECIMAL_MARK_ATTR] = decimal
            if source != "fixed":
                chunk.attrs[DECIMAL_SOURCE_ATTR] = source
            if spelt:
                chunk.attrs[BOOL_TEXTS_ATTR] = spelt
            yield chunk


def _note_utc(path: Path, dates: Mapping[Any, tuple[bool, Any]]) -> None:
    for col, (utc, _) in dates.items():
        if utc:
            warnings.warn(
                f"{path}: column {col!r} has date-times with several UTC "
                "offsets (summer time?); they are read in UTC (a synthetic table writes "
                "them in UTC)",
                DataNote,
                stacklevel=4,
            )


def _iter_parquet(
    path: Path, chunk_rows: int, empty_ok: bool, spec: _NaSpec | None = None
) -> Iterator[pd.DataFrame]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    _check_header(path, _parquet_names(path))
    pf = pq.ParquetFile(path)
    _, stored_range = _named_index(pf.schema_arrow)
    base = _index_as_columns(pf.schema_arrow.empty_table().to_pandas())
    base = _range_column(base, stored_range, 0)
    if pf.metadata.num_rows == 0 or base.shape[1] == 0:
        # its table of no rows, or its error
        yield read_table(path, empty_ok=empty_ok, na_values=_spec_values(spec))
        return
    missing = _missing(spec, list(base.columns), path)
    coded: set[Any] = set()  # integer columns (no nulls in the file) with a missing code
    if missing is not None:
        wanted_codes = [c for c in base.columns if c in pf.schema_arrow.names]
        whole = set(wanted_codes)  # integers in every batch (a batch with nulls: floats)
        for batch in pf.iter_batches(batch_size=chunk_rows, columns=wanted_codes):
            frame = _index_as_columns(pa.Table.from_batches([batch]).to_pandas())
            whole &= {c for c in frame.columns if pd.api.types.is_integer_dtype(frame[c].dtype)}
            coded |= _code_columns(frame, missing)
        coded &= whole
    # what a batch alone would give otherwise: integers and booleans with nulls
    # elsewhere, date texts, a category first met in a later batch
    nulls = {
        c: False
        for c in base.columns
        if isinstance(base[c].dtype, np.dtype)
        and base[c].dtype.kind in "iub"
        and c in pf.schema_arrow.names  # not a range index: no nulls
    }
    texts = {
        c: _DateFacts()
        for c in base.columns
        if pd.api.types.is_string_dtype(base[c].dtype) and c in pf.schema_arrow.names
    }
    categories: dict[Any, list[Any]] = {
        c: [] for c in base.columns if isinstance(base[c].dtype, pd.CategoricalDtype)
    }
    wanted = [c for c in [*nulls, *texts, *categories] if c in pf.schema_arrow.names]
    if wanted:
        for batch in pf.iter_batches(batch_size=chunk_rows, columns=wanted):
            frame = _index_as_columns(pa.Table.from_batches([batch]).to_pandas())
            if missing is not None:
                frame = _missing_values(frame, missing, coded)
            for c in nulls:
                nulls[c] |= bool(frame[c].isna().any())
            for c, facts in texts.items():
                facts.update(frame[c])
            for c, seen in categories.items():
                known = set(seen)
                seen.extend(v for v in frame[c].cat.categories if v not in known)
    dates = {c: d for c, f in texts.items() if (d := f.final()) is not None}
    _note_utc(path, dates)
    start = 0
    for batch in pf.iter_batches(batch_size=chunk_rows):
        chunk = _index_as_columns(pa.Table.from_batches([batch]).to_pandas())
        chunk = _range_column(chunk, stored_range, start)
        if missing is not None:
            chunk = _missing_values(chunk, missing, coded)
        for c, has_nulls in nulls.items():
            # as pyarrow gives the whole column: floats, or objects (codes: Int64)
            if has_nulls and c not in coded:
                chunk[c] = chunk[c].astype(object if base[c].dtype == bool else "float64")
        for c, (utc, dtype) in dates.items():
            chunk[c] = _as_dates(chunk[c], utc, dtype)
        for c, seen in categories.items():
            chunk[c] = chunk[c].cat.set_categories(seen)
        if isinstance(chunk.index, pd.RangeIndex) and chunk.index.start == 0:
            chunk.index = pd.RangeIndex(start, start + len(chunk))
        start += len(chunk)
        yield chunk


def find_duplicate_files(
    paths: Sequence[str | os.PathLike[str]],
) -> tuple[Path, Path] | None:
    """The first two of ``paths`` that are the same file (the same path, a link to it,
    or the same bytes), else None.  A path that is no regular file (missing, a folder)
    is passed over: the reading of it says what is wrong."""
    seen: dict[tuple[int, int], Path] = {}
    sizes: dict[int, list[Path]] = {}
    for p in map(Path, paths):
        try:
            st = p.stat()
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return seen[key], p
        seen[key] = p
        sizes.setdefault(st.st_size, []).append(p)
    found: list[tuple[int, int, Path, Path]] = []  # (position, position, first, second)
    order = {p: k for k, p in enumerate(map(Path, paths))}
    for group in sizes.values():  # only files of the same size can hold the same bytes
        digests: dict[str, Path] = {}
        for p in group:
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            first = digests.setdefault(h.hexdigest(), p)
            if first is not p:
                found.append((order[p], order[first], first, p))
    return min(found)[2:] if found else None


class OutputError(ValueError):
    """An output location cannot be used (it is an input, a folder, not writable, ...).

    A usage error: the message names the option and the path(s) and says what to do.
    """


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """True when ``a`` and ``b`` are the same existing file: the same (device, inode),
    so ``./x/../x/a.csv``, symbolic links and hard links are all caught."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_output(
    path: str | os.PathLike[str],
    inputs: Sequence[tuple[str, str | os.PathLike[str]]] = (),
    *,
    option: str = "--out",
    create_parent: bool = False,
) -> Path:
    """Check, before any work starts, that ``path`` can receive an output file.

    Parameters
    ----------
    path : path-like
        The output file.
    inputs : sequence of (label, path)
        Files the run reads (``("site table", "a.csv")``, ``("--schema", ...)``): the
        output must not be any of them (compared as files, see :func:`same_file`), and
        nothing is written if it is.
    option : str
        The option the path came from, for messages.
    create_parent : bool
        Create a missing parent folder (``fits demo``'s output folder) instead of
        refusing.

    Raises
    ------
    OutputError
        The output is one of the inputs; its folder does not exist, is not a folder or
        is not writable (permissions, read-only file system); the output is a folder,
        or ends with a slash; or it exists and is read-only.  A symbolic link is
        checked as the file it leads to (:func:`through_links`), which is written.
    """
    output_path(path, option)  # not one ending with a slash (a folder)
    path = Path(path)
    shown = str(path)
    for label, source in inputs:
        if same_file(path, source):
            raise OutputError(
                f"{option} {shown!r} is the same file as {label} {str(source)!r}; "
                "fits never writes over an input. Choose another output path"
            )
    if path.is_dir():
        raise OutputError(f"{option} {shown!r} is a folder; give a file name inside it")
    target = through_links(path)  # a symbolic link is written through: its file's folder
    link = f" (a link to {str(target)!r})" if target != path else ""
    parent = target.parent
    if not parent.exists():
        if create_parent:
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise OutputError(
                    f"{option} {shown!r}{link}: cannot create the folder {str(parent)!r} "
                    f"({exc.strerror or exc})"
                ) from None
        else:
            raise OutputError(
                f"{option} {shown!r}{link}: the folder {str(parent)!r} does not exist; create it "
                "first or choose another path"
            )
    if not parent.is_dir():
        raise OutputError(f"{option} {shown!r}{link}: {str(parent)!r} is not a folder")
    if target.exists() and (
        not os.access(target, os.W_OK) or not target.stat().st_mode & 0o222
    ):  # the mode bits too: root may write anywhere, but a read-only file says "keep me"
        raise OutputError(
            f"{option} {shown!r}{link} exists and is read-only; fits does not replace it. "
            "Remove it or choose another path"
        )
    # permissions, read-only file systems, quotas: try what the write will do
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise OutputError(
            f"{option} {shown!r}{link}: cannot write in the folder {str(parent)!r} "
            f"({exc.strerror or exc}); choose a writable location"
        ) from None
    os.close(fd)
    os.unlink(probe)
    return path


def output_path(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """``path`` as an output file's :class:`~pathlib.Path` (a leading ``~`` is the home
    folder), refusing a path written as a folder: one that ends with a slash
    (``"o.csv/"``; :class:`~pathlib.Path` would drop the slash and write a file named
    ``o.csv``) or with ``/.`` or ``/..`` (``"o.csv/."``: the same).

    Raises
    ------
    OutputError
        ``path`` ends with a slash, ``/.`` or ``/..``, naming ``option``.
    """
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    ends = (os.sep, os.altsep) if os.altsep else (os.sep,)
    if text.rstrip("".join(ends)) and text.endswith(ends):
        name = text.rstrip("".join(ends))
        raise OutputError(
            f"{option} {text!r} ends with {text[-1]!r}, so it names a folder, not a file; "
            f"give a file name ({name!r}), or a file inside that folder"
        )
    last = re.split("|".join(re.escape(e) for e in ends), text)[-1]
    if last in (".", ".."):  # "o.csv/.": Path drops the '.' and writes a file o.csv
        name = text[: -len(last)].rstrip("".join(ends))
        shown = f" ({name!r})" if last == "." and name and not Path(name).is_dir() else ""
        raise OutputError(
            f"{option} {text!r} ends with {text[-len(last) - 1 :] if text != last else last!r}"
            f", so it names a folder, not a file; give a file name{shown}, or a file inside "
            "that folder"
        )
    return Path(text).expanduser()


def through_links(path: str | os.PathLike[str]) -> Path:
    """The file a write to ``path`` lands in: ``path`` itself, or, where ``path`` is a
    symbolic link, the file it leads to (through every link; it need not exist yet).
    fits writes an output through a link, as ``open`` does, rather than put a file in
    the link's place (:func:`_atomic` writes beside the file the link leads to)."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _atomic(path: Path, write: Callable[[str], None]) -> Path:
    """Run ``write(tmp)`` on a temporary file beside ``path``, then put it at ``path``
    in one step; on any error or interruption (any exception, ``KeyboardInterrupt`` and
    the exceptions the command line raises on SIGTERM/SIGHUP included) nothing is left
    and ``path`` is untouched.

    On Linux the temporary file has no name while it is written (``O_TMPFILE``,
    :func:`_unnamed_file`), so a process killed outright (SIGKILL, the OOM killer, a
    power cut) leaves nothing behind either: the kernel frees an unnamed file with its
    last descriptor.  Where the folder's file system has no unnamed files, a hidden
    ``.<name>.<random>.tmp`` beside ``path`` takes its place (removed on every error
    and signal fits sees; only an outright kill leaves it).

    A ``path`` that is a symbolic link is written through: the file it leads to is
    replaced, the link stays (:func:`through_links`).  ``path`` is returned as given.

    Raises
    ------
    FileNotFoundError
        The folder of the file is missing (it is not created), naming it.
    """
    target = through_links(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(
            f"cannot write {str(path)!r}: the folder {str(target.parent)!r} does not exist; "
            "create it first or choose another path"
        )
    fd = _unnamed_file(target.parent)
    if fd is not None:
        try:
            write(f"/proc/self/fd/{fd}")
            _link_unnamed(fd, target)
        finally:
            os.close(fd)
        return path
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, target)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _unnamed_file(folder: Path) -> int | None:
    """A descriptor of a new file in ``folder`` that has no name yet (Linux
    ``O_TMPFILE``, reopened and linked through ``/proc/self/fd``), with the usual
    permissions (0666 less the umask); None where the system or the folder's file
    system has none (other systems, some network file systems)."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(folder, flag | os.O_RDWR, 0o666)
    except OSError:
        return None


def _link_unnamed(fd: int, path: Path) -> None:
    """Give the unnamed file ``fd`` the name ``path``: a hard link straight to ``path``
    when nothing is there (one step), else a link to a hidden name beside it renamed
    over ``path`` (os.replace: one step for readers; the hidden name exists for the
    instant between the two calls).

    The links are made relative to a descriptor of the folder, which makes Python call
    ``linkat`` with ``AT_SYMLINK_FOLLOW`` (a plain ``link`` would link the
    ``/proc/self/fd`` entry itself, and fail)."""
    source = f"/proc/self/fd/{fd}"
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            os.link(source, path.name, dst_dir_fd=folder, follow_symlinks=True)
            return
        except FileExistsError:
            pass
        for _ in range(100):
            tmp = f".{path.name}.{os.urandom(6).hex()}.tmp"
            try:
                os.link(source, tmp, dst_dir_fd=folder, follow_symlinks=True)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"cannot find a free temporary name beside {str(path)!r}")
        try:
            os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            os.unlink(tmp, dir_fd=folder)
            raise
    finally:
        os.close(folder)


def write_table(frame: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a table atomically (CSV or Parquet by extension).

    It goes to a temporary file beside ``path`` and is renamed over ``path`` only when
    complete: on any error nothing is left behind and an existing file is untouched.
    """
    path = Path(path)
    if check_suffix(path, "output") == ".csv":
        return _atomic(path, lambda tmp: frame.to_csv(tmp, index=False))
    return _atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


@dataclass(frozen=True)
class OutputForms:
    """The forms the sites' files wrote a table's values in, and a synthetic table's
    file writes them in again (:func:`write_table_chunks`); each mapping is by column
    name, and a column it does not name is written as pandas writes it.

    Attributes
    ----------
    decimal_types : mapping
        Column of ``Decimal`` objects -> ``(precision, scale)`` of its Parquet decimal
        type, fixed for the whole file (:meth:`~fits.core.schema.Schema.decimal_types`:
        the scale is the column's ``decimal_scale``, the precision that plus the digits
        before the point of the largest magnitude its bounds allow). Ignored for CSV,
        which keeps every digit.
    date_formats : mapping
        Column -> ``strftime`` format a CSV writes its dates in
        (:meth:`~fits.core.schema.Schema.date_formats`: the one format the sites' text
        dates were read with; missing dates stay empty fields). Ignored for Parquet,
        which keeps datetimes, and for a column that holds no datetimes.
    bool_texts : mapping
        Column of booleans -> ``(true text, false text)`` a CSV writes them as (the
        sites' agreed spelling, such as ``("true", "false")``:
        :attr:`~fits.federation.coordinator.Coordinator.bool_texts`; a missing value
        stays an empty field). Ignored for Parquet, whose booleans have no spelling.
    """

    decimal_types: Mapping[str, tuple[int, int]] = dataclass_field(default_factory=dict)
    date_formats: Mapping[str, str] = dataclass_field(default_factory=dict)
    bool_texts: Mapping[str, tuple[str, str]] = dataclass_field(default_factory=dict)

    def with_known(self, known: pd.DataFrame) -> OutputForms:
        """These forms with the decimal types widened to hold a known table's values as
        given (:func:`known_decimal_types`)."""
        from dataclasses import replace

        return replace(self, decimal_types=known_decimal_types(self.decimal_types, known))


def write_table_chunks(
    chunks: Iterable[pd.DataFrame],
    path: str | os.PathLike[str],
    *,
    forms: OutputForms | None = None,
) -> tuple[Path, int]:
    """Stream a table to ``path`` chunk by chunk, atomically (CSV or Parquet).

    Each chunk is appended as it comes (CSV: the header once, then rows; Parquet: one
    row group per chunk through :class:`pyarrow.parquet.ParquetWriter`, with the first
    chunk's Arrow schema), so memory holds one chunk at a time. Every chunk must have
    the same columns and dtypes. The file is a hidden temporary beside ``path`` until
    the last chunk is written, then renamed over ``path``; on any error or interruption
    it is removed and an existing ``path`` is untouched. The CSV bytes equal those of
    :func:`write_table` on the concatenated chunks.

    Columns of Python ``Decimal`` objects get one Arrow decimal type for the whole
    file, not the one pyarrow infers from the first chunk (the precision and scale of
    its values: a later chunk with a larger value, or a longer fraction, would not fit
    it): the ``(precision, scale)`` of ``forms.decimal_types``, as ``decimal128``, or
    ``decimal256`` beyond a precision of 38.  A ``Decimal`` column it does not name
    keeps the first chunk's scale at precision 38 (or its scale, if larger).  A CSV
    writes dates and booleans as ``forms`` says (:class:`OutputForms`).

    Parameters
    ----------
    chunks : iterable of DataFrame
    path : str or PathLike
        A ``.csv`` or ``.parquet`` file.
    forms : OutputForms, optional
        The input's forms to write the values in (a fit's
        :meth:`fits.FITSSynthesizer.output_forms`); None: pandas' own.

    Returns
    -------
    path : Path
    rows : int
        Rows written.

    Raises
    ------
    ValueError
        Parquet: a value of a ``Decimal`` column does not fit the file's decimal type
        (more digits after the point than its scale, or too large); a
        :class:`DataFileError` before anything is written when ``forms.decimal_types`` asks
        for a precision above 76, the most a Parquet decimal holds.
    """
    path = Path(path)
    suffix = check_suffix(path, "output")
    forms = forms or OutputForms()
    rows = 0
    for name, (precision, scale) in forms.decimal_types.items() if suffix != ".csv" else ():
        if precision > 76:  # pyarrow: 'Decimal precision out of range [1, 76]'
            raise DataFileError(
                f"{str(path)!r}: column {name!r} needs a decimal of {precision} digits "
                f"({precision - scale} before the point, {scale} after) to hold its values, "
                "more than the 76 a Parquet decimal column holds; write a .csv output "
                "instead (it keeps every digit)"
            )

    def write(tmp: str) -> None:
        nonlocal rows
        if suffix == ".csv":
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                for k, chunk in enumerate(chunks):
                    out = _dates_as_text(_spelt(chunk, forms.bool_texts), forms.date_formats)
                    out.to_csv(fh, index=False, header=k == 0)
                    rows += len(chunk)
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        writer = None
        fixed: dict[str, Any] = {}
        try:
            for chunk in chunks:
                if writer is None:
                    table = pa.Table.from_pandas(chunk, preserve_index=False)
                    schema, fixed = _fixed_decimals(table.schema, forms.decimal_types)
                    texts = _text_fields(schema, chunk)
                    if texts:
                        schema = texts
                    if fixed:
                        table = _decimal_chunk(chunk, schema, fixed, path)
                    elif texts:
                        table = pa.Table.from_pandas(chunk, schema=schema, preserve_index=False)
                    writer = pq.ParquetWriter(tmp, schema)
                elif fixed:
                    table = _decimal_chunk(chunk, writer.schema, fixed, path)
                else:
                    table = pa.Table.from_pandas(chunk, schema=writer.schema, preserve_index=False)
                writer.write_table(table)
                rows += len(chunk)
        finally:
            if writer is not None:
                writer.close()

    _atomic(path, write)
    return path, rows


def _spelt(chunk: pd.DataFrame, bool_texts: Mapping[str, tuple[str, str]]) -> pd.DataFrame:
    """``chunk`` with its columns of booleans named in ``bool_texts`` written as text in
    that spelling (missing values kept)."""
    cols = [c for c in chunk.columns if str(c) in bool_texts and _is_boolean(chunk[c])]
    if not cols:
        return chunk
    out = chunk.copy()
    for c in cols:
        true, false = bool_texts[str(c)]
        out[c] = chunk[c].map(lambda v, t=true, f=false: v if pd.isna(v) else (t if v else f))
    return out


def known_decimal_types(
    types: Mapping[str, tuple[int, int]], known: pd.DataFrame
) -> dict[str, tuple[int, int]]:
    """``types`` (a fit's :meth:`~fits.core.schema.Schema.decimal_types`) widened to hold
    a known table's ``Decimal`` values as given (``--known``: they come back unchanged,
    :meth:`~fits.synthesizer.FITSSynthesizer.sample_remaining_columns`): a value with
    more digits after the point than its column's scale raises the scale, and the
    precision as much (the known values lie within the column's bounds).  A known
    column may name its header without surrounding spaces."""
    from decimal import Decimal

    out = dict(types)
    for column in known.columns:
        name = next((n for n in types if n.strip() == str(column).strip()), None)
        if name is None:
            continue
        precision, scale = types[name]
        digits = [
            -int(exponent)
            for v in known[column]
            if isinstance(v, Decimal)
            and v.is_finite()
            and isinstance(exponent := v.as_tuple().exponent, int)
        ]
        extra = max([d - scale for d in digits] + [0])
        out[name] = (precision + extra, scale + extra)
    return out


def _fixed_decimals(
    schema: Any, types: Mapping[str, tuple[int, int]]
) -> tuple[Any, dict[str, Any]]:
    """The first chunk's Arrow schema with one decimal type per ``Decimal`` column for
    the whole file (:func:`write_table_chunks`), and those columns' types."""
    import pyarrow as pa

    fixed: dict[str, Any] = {}
    for k, fld in enumerate(schema):
        if fld.name in types:
            precision, scale = (int(v) for v in types[fld.name])
            if fld.type != pa.null() and not pa.types.is_decimal(fld.type):
                continue  # not Decimal objects (a known column given as text): as inferred
        elif pa.types.is_decimal(fld.type):
            precision, scale = max(38, int(fld.type.scale)), int(fld.type.scale)
        else:
            continue
        make = pa.decimal128 if precision <= 38 else pa.decimal256
        fixed[fld.name] = make(precision, scale)
        schema = schema.set(k, fld.with_type(fixed[fld.name]))
    return schema, fixed


def _text_fields(schema: Any, chunk: pd.DataFrame) -> Any:
    """``schema`` with Arrow's ``null`` type of a text column (object or string dtype)
    whose first chunk holds no value (none at all, or only missing ones) made
    ``string``, so that the file keeps the column's type and a later chunk's text fits
    it (pyarrow before 14 infers ``null`` for an empty object column); None if no field
    changes."""
    import pyarrow as pa

    changed = False
    for k, fld in enumerate(schema):
        if fld.type != pa.null() or fld.name not in chunk.columns:
            continue
        dtype = chunk[fld.name].dtype
        if pd.api.types.is_string_dtype(dtype):  # object included
            schema = schema.set(k, fld.with_type(pa.string()))
            changed = True
    return schema if changed else None


def _decimal_chunk(chunk: pd.DataFrame, schema: Any, fixed: Mapping[str, Any], path: Path) -> Any:
    """A chunk as an Arrow table of ``schema``, naming the ``Decimal`` column whose value
    does not fit its type (pyarrow says only 'would cause data loss')."""
    import pyarrow as pa

    try:
        return pa.Table.from_pandas(chunk, schema=schema, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        for name, kind in fixed.items():
            try:
                pa.array(chunk[name], type=kind, from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                raise ValueError(
                    f"{path}: column {name!r} holds a value that does not fit its Parquet "
                    f"type {kind} (the synthetic values' digits; a known value given with "
                    f"more digits after the point, or a larger one): {exc}"
                ) from exc
        raise


class OutputTooLarge(OutputError):
    """A streamed table would not fit in the free space of its output's file system
    (:func:`write_stream`); nothing was written.  A usage error: ask for less, or
    write elsewhere."""


@dataclass(frozen=True)
class StreamEstimate:
    """A large request's estimate (:func:`write_stream`): ``size`` bytes for ``rows``
    rows, from the encoded size of a first piece of ``sample_rows`` rows; ``free``
    bytes free on the output's file system."""

    rows: int
    sample_rows: int
    size: float
    free: int


def human_bytes(n: float) -> str:
    """A byte count as people read it: ``512 bytes``, ``12.3 kB``, ``194.4 MB``, ..."""
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def write_stream(
    draw: Callable[[int | None], Iterator[pd.DataFrame]],
    path: str | os.PathLike[str],
    rows: int,
    *,
    request: str,
    advice: str,
    where: str | None = None,
    forms: OutputForms | None = None,
    on_estimate: Callable[[StreamEstimate], None] | None = None,
) -> tuple[Path, int]:
    """Stream a draw of ``rows`` rows into ``path`` atomically, refusing one that would
    not fit on the disk: the core of ``fits synthesize --rows/--known`` and of the
    Flower ServerApp (:mod:`fits.flower_app`).

    ``draw(first_chunk_rows)`` gives the chunks (whose rows must not depend on where
    they are cut, as :meth:`fits.FITSSynthesizer.iter_sample` and
    ``iter_sample_remaining_columns`` guarantee; ``None``: the default chunks).  A
    request of more than :data:`LARGE_REQUEST_ROWS` rows first draws
    :data:`ESTIMATE_ROWS` rows and estimates the file's size from their encoded size;
    when it exceeds the free space of ``path``'s file system, :class:`OutputTooLarge` is
    raised before anything is written (the message starts with ``request``, names the
    output as ``where``, default its quoted path, and ends with ``advice``); else
    ``on_estimate`` gets the estimate.  The chunks are then written by
    :func:`write_table_chunks` (in the input's ``forms``, as there): the bytes are
    those of the whole draw written at once.

    Returns
    -------
    path : Path
    rows : int
        Rows written.
    """
    import itertools
    import shutil

    path = Path(path)
    suffix = check_suffix(path, "output")
    estimate_rows = ESTIMATE_ROWS
    large = rows > LARGE_REQUEST_ROWS
    chunks = draw(estimate_rows if large else None)
    first: list[pd.DataFrame] = []
    if large:
        first.append(next(chunks))
        size = encoded_size(first[0], suffix) * rows / estimate_rows
        free = shutil.disk_usage(through_links(path).parent).free
        if size > free:
            raise OutputTooLarge(
                f"{request}: the output would take about {human_bytes(size)} (estimated "
                f"from the first {estimate_rows} rows) but the file system of "
                f"{where or repr(str(path))} has {human_bytes(free)} free; {advice}"
            )
        if on_estimate is not None:
            on_estimate(StreamEstimate(rows, estimate_rows, size, free))
    return write_table_chunks(itertools.chain(first, chunks), path, forms=forms)


def _dates_as_text(frame: pd.DataFrame, date_formats: Mapping[str, str]) -> pd.DataFrame:
    """``frame`` with the datetime columns ``date_formats`` names as text in their
    format (missing dates stay missing); ``frame`` itself when it names none."""
    named = [
        c
        for c in date_formats
        if c in frame.columns and pd.api.types.is_datetime64_any_dtype(frame[c].dtype)
    ]
    if not named:
        return frame
    out = frame.copy(deep=False)
    for c in named:
        out[c] = frame[c].dt.strftime(date_formats[c])
    return out


def encoded_size(frame: pd.DataFrame, suffix: str) -> int:
    """Bytes ``frame`` takes in a file of this type (``".csv"`` or ``".parquet"``),
    written to memory: the estimate of a large request's file size."""
    if suffix == ".csv":
        return len(frame.to_csv(index=False).encode("utf-8"))
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getbuffer().nbytes


def write_text(text: str, path: str | os.PathLike[str]) -> Path:
    """Write a text file atomically (temporary file, then rename)."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return _atomic(Path(path), write)


def write_bytes(data: bytes, path: str | os.PathLike[str]) -> Path:
    """Write a binary file atomically (temporary file, then rename)."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    return _atomic(Path(path), write)
