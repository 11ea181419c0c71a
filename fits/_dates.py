"""ISO 8601 date-time text parsed alike under every supported pandas version.

A column whose values carry several UTC offsets (summer and winter time) is parsed by
``pd.to_datetime(..., format="ISO8601")`` into an error under pandas 3, but into a
column of ``datetime`` objects (dtype object, with a FutureWarning) under pandas 2.x,
the declared floor.  fits reads such a column in UTC either way, so the first attempt
must fail alike: :func:`iso_datetimes` raises where pandas 2.x gives objects.

An ``"interval"`` rule on a datetime column writes its bounds as ISO 8601 text
(:func:`seconds_text`: ``"2019-12-31"``, ``"2020-01-01T06:30:00+01:00"``) and reads
them back to the seconds since 1970 UTC that fits computes with (:func:`text_seconds`),
exactly: both go through whole microseconds, as the sites' values do.

A duration told to people (a near-linear rule between two datetime columns, its
bounds, a known value off them, the report's figures) is worded by
:func:`duration_text` (``"-9 days"``, ``"3 hours 15 minutes"``), never as a
:class:`pandas.Timedelta`'s text (``"-9 days +00:00:00"``).
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import Any

import pandas as pd

__all__ = [
    "bound_number",
    "duration_text",
    "has_offset",
    "iso_datetimes",
    "seconds_text",
    "text_seconds",
    "text_times",
]

#: The units :func:`duration_text` words a duration in, largest first, in microseconds.
_UNITS = (("day", 86_400_000_000), ("hour", 3_600_000_000), ("minute", 60_000_000))


def duration_text(seconds: float, *, parts: int = 4) -> str:
    """A duration in words for people: ``"29 days"``, ``"1 day 2 hours"``,
    ``"3 hours 15 minutes"``, ``"1 minute 30.5 seconds"``, ``"0 days"``.

    Days, hours, minutes and seconds, each named only where it is not 0 (``"1 day"``,
    ``"2 days"``); seconds to the microsecond (the finest a fits datetime holds),
    without trailing zeros.  A negative duration is its size with a minus sign in
    front: ``"-9 days"``, ``"-1 day 2 hours"`` (26 hours before), where
    :class:`pandas.Timedelta` writes ``"-9 days +00:00:00"`` and ``"-2 days
    +22:00:00"``.

    Parameters
    ----------
    seconds : float
        The duration in seconds (negative: backwards).
    parts : int, default 4
        At most this many units, from the largest present, the last (days, hours or
        minutes) rounded half up to a whole one (``parts=2``: 8.6 days is ``"8 days
        14 hours"``); seconds, the smallest unit, are always told to the microsecond.
        4 (every unit) words the duration exactly, to the microsecond.

    Returns
    -------
    str
        The words; ``"0 days"`` for a duration that rounds to 0 microseconds, ``""``
        for NaN or an infinite one.
    """
    if not math.isfinite(seconds):
        return ""
    us = round(abs(seconds) * 1e6)
    if us == 0:
        return "0 days"
    sizes = [size for _, size in _UNITS] + [1_000_000]
    first = next(i for i, size in enumerate(sizes) if us >= size or i == len(sizes) - 1)
    last = first + max(parts, 1) - 1
    if last < len(_UNITS):  # the last unit told is whole: round to it, half up
        us = (us + sizes[last] // 2) // sizes[last] * sizes[last]
    words = []
    for name, size in _UNITS:
        count, us = divmod(us, size)
        if count:
            words.append(f"{count} {name}{'' if count == 1 else 's'}")
    if us:
        whole, micro = divmod(us, 1_000_000)
        told = f"{whole}.{micro:06d}".rstrip("0") if micro else str(whole)
        words.append(f"{told} second{'' if us == 1_000_000 else 's'}")
    return ("-" if seconds < 0 else "") + " ".join(words)


def iso_datetimes(values: Any, *, utc: bool = False) -> Any:
    """``pd.to_datetime(values, format="ISO8601", utc=utc)``, refusing several offsets.

    Raises
    ------
    ValueError
        The text does not parse, or (without ``utc``) it holds several UTC offsets:
        pandas 3 raises for them, and pandas 2.x returns objects, refused here alike.
    TypeError
        As :func:`pandas.to_datetime`.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pandas 2.x on several offsets
        parsed = pd.to_datetime(values, format="ISO8601", utc=utc)
    dtype = getattr(parsed, "dtype", None)
    if dtype is not None and not pd.api.types.is_datetime64_any_dtype(dtype):
        raise ValueError("date-times with several UTC offsets; parse them with utc=True")
    return parsed


def text_times(values: pd.Series, *, aware: bool, format: str | None = None) -> pd.Series:
    """Times given as text (or objects) parsed as written, for a column with a time zone
    (``aware``) or without.

    Text without an offset stays local (naive), so that a zoned column's check refuses
    it rather than reading it as UTC (``pd.to_datetime(..., utc=True)`` read
    ``"2024-01-01 10:00"`` as 11:00 in Berlin). Text with offsets is read in UTC when
    the column has a zone and every value carries one (a zoned column's summer and
    winter times).

    Raises
    ------
    ValueError
        Text that is not dates, or (for a zoned column) some values written with an
        offset and some without, or (for a column without a zone) several offsets.
    TypeError
        As :func:`pandas.to_datetime`.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # pandas 2.x on several offsets
            parsed = pd.to_datetime(values, format=format)
    except ValueError:
        if not aware:
            raise
        parsed = values  # several offsets: in UTC below, where every value has one
    if pd.api.types.is_datetime64_any_dtype(parsed.dtype):
        return parsed
    given = values.dropna().astype(str).str.strip()
    if aware and bool(given.str.contains(r"(?:Z|[+-]\d{2}:?\d{2})$").all()):
        return pd.to_datetime(values, format=format, utc=True)
    raise ValueError(
        "some are written with an offset from UTC and some without"
        if aware
        else "date-times with several UTC offsets"
    )


def seconds_text(seconds: float, *, tz: str | None = None, date_only: bool = False) -> str:
    """Seconds since 1970-01-01 UTC (a datetime column's number in fits) as ISO 8601
    text, to the microsecond: ``"2019-12-31T23:59:59.500000"`` for a column without a
    time zone (its wall time, which fits reads as UTC), with the offset of ``tz`` for
    one with (``"2020-01-01T00:00:00+01:00"``), and the date alone (``"2019-12-31"``)
    for a whole-day column without a time zone at midnight.  :func:`text_seconds`
    gives the same number back, bit for bit.

    Parameters
    ----------
    seconds : float
        Finite seconds since 1970-01-01 UTC (as :func:`fits.core.schema.datetime_seconds`).
    tz : str, optional
        The column's time zone (:attr:`ColumnSpec.tz <fits.core.schema.ColumnSpec.tz>`).
    date_only : bool, default False
        The column's values are whole days.

    Returns
    -------
    str
    """
    us = round(Fraction(seconds) * 1_000_000)  # exact: the nearest whole microsecond
    stamp = pd.Timestamp(us, unit="us")
    if tz is not None:
        return str(stamp.tz_localize("UTC").tz_convert(tz).isoformat())
    if date_only and stamp == stamp.normalize():
        return str(stamp.date().isoformat())
    return str(stamp.isoformat())


def text_seconds(text: str) -> float:
    """ISO 8601 date-time text as seconds since 1970-01-01 UTC: with an offset, the
    instant it names; without, its wall time read as UTC (as fits reads a column with
    no time zone).  Whole microseconds divided by 10^6, the arithmetic of
    :func:`fits.core.schema.datetime_seconds`, so a bound written by
    :func:`seconds_text` compares with the sites' values exactly.

    Raises
    ------
    ValueError
        The text is not an ISO 8601 date-time (``"2020-01-01"``,
        ``"2020-01-01T06:30:00"``, ``"2020-01-01 06:30:00+01:00"``), or it is finer
        than a microsecond.
    """
    try:
        stamp = pd.Timestamp(iso_datetimes(pd.Series([str(text)]), utc=False)[0])
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(f"{text!r} is not an ISO 8601 date-time") from exc
    if stamp is pd.NaT or pd.isna(stamp):
        raise ValueError(f"{text!r} is not an ISO 8601 date-time")
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    ns = int(stamp.value)
    if ns % 1000:
        raise ValueError(f"{text!r} is finer than a microsecond, the finest fits holds")
    return float(ns // 1000) / 1e6


def has_offset(text: str) -> bool:
    """Whether ISO 8601 date-time text names its UTC offset (``Z``, ``+01:00``)."""
    return pd.Timestamp(iso_datetimes(pd.Series([str(text)]), utc=False)[0]).tzinfo is not None


def bound_number(value: Any) -> float:
    """An ``"interval"`` rule's bound as the number fits compares with: a number as
    is (a number column's value), ISO 8601 text as :func:`text_seconds` (a datetime
    column's, in seconds since 1970 UTC)."""
    if isinstance(value, str):
        return text_seconds(value)
    return float(value)
