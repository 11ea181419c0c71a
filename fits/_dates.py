"""ISO 8601 date-time text parsed alike under every supported pandas version.

A column whose values carry several UTC offsets (summer and winter time) is parsed by
``pd.to_datetime(..., format="ISO8601")`` into an error under pandas 3, but into a
column of ``datetime`` objects (dtype object, with a FutureWarning) under pandas 2.x,
the declared floor.  fits reads such a column in UTC either way, so the first attempt
must fail alike: :func:`iso_datetimes` raises where pandas 2.x gives objects.

A duration told to people (a near-linear rule between two datetime columns, its
bounds, a known value off them, the report's figures) is worded by
:func:`duration_text` (``"-9 days"``, ``"3 hours 15 minutes"``), never as a
:class:`pandas.Timedelta`'s text (``"-9 days +00:00:00"``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import pandas as pd

__all__ = ["duration_text", "iso_datetimes"]

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
