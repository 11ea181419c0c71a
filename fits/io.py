"""Reading and writing tables: CSV and Parquet by extension, atomic writes.

Used by the command line; usable from Python too.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd

__all__ = [
    "TABLE_SUFFIXES",
    "DataFileError",
    "check_suffix",
    "read_table",
    "write_table",
    "write_text",
]

TABLE_SUFFIXES = (".csv", ".parquet")
_ISO_DATE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$"
)


class DataFileError(ValueError):
    """A data file cannot be used; the message names the file and says what to do."""


def check_suffix(path: Path, what: str = "table") -> str:
    """The file's table format (``".csv"`` or ``".parquet"``), or a clear error."""
    suffix = Path(path).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise DataFileError(
            f"{path}: unknown file type {suffix or '(none)'!r} for a {what}; "
            "use a .csv or .parquet file"
        )
    return suffix


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a CSV or Parquet table (chosen by extension).

    Text columns whose every value is an ISO 8601 date or date-time (as CSV files store
    them) become datetime columns.

    Raises
    ------
    DataFileError
        Unknown extension, missing or unreadable file, or a table with no rows or no
        columns.
    """
    path = Path(path)
    suffix = check_suffix(path)
    if not path.is_file():
        raise DataFileError(f"{path}: no such file")
    try:
        if suffix == ".csv":
            frame = pd.read_csv(path)
        else:
            frame = pd.read_parquet(path)
    except pd.errors.EmptyDataError:
        raise DataFileError(f"{path}: the file is empty") from None
    except Exception as exc:  # noqa: BLE001 - any parser failure is a data error here
        raise DataFileError(f"{path}: cannot read it as {suffix[1:]} ({exc})") from None
    if frame.shape[1] == 0:
        raise DataFileError(f"{path}: the table has no columns")
    if frame.shape[0] == 0:
        raise DataFileError(f"{path}: the table has a header but no rows")
    return _parse_dates(frame)


def _parse_dates(frame: pd.DataFrame) -> pd.DataFrame:
    for col in frame.columns:
        s = frame[col]
        if not (pd.api.types.is_object_dtype(s) or pd.api.types.is_string_dtype(s)):
            continue
        present = s.dropna()
        if present.empty or not present.map(lambda v: isinstance(v, str)).all():
            continue
        if not present.str.match(_ISO_DATE).all():
            continue
        aware = present.str.contains(r"(?:Z|[+-]\d{2}:?\d{2})$").any()
        try:
            frame[col] = pd.to_datetime(s, format="ISO8601", utc=bool(aware))
        except (ValueError, TypeError):
            continue
    return frame


def _atomic(path: Path, write: Callable[[str], None]) -> Path:
    """Run ``write(tmp)`` on a temporary file beside ``path``, then rename it over
    ``path``; on any error the temporary file is removed and ``path`` is untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_table(frame: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a table atomically (CSV or Parquet by extension).

    It goes to a temporary file beside ``path`` and is renamed over ``path`` only when
    complete: on any error nothing is left behind and an existing file is untouched.
    """
    path = Path(path)
    if check_suffix(path, "output") == ".csv":
        return _atomic(path, lambda tmp: frame.to_csv(tmp, index=False))
    return _atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


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
