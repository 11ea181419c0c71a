"""ISO 8601 date-time text parsed alike under every supported pandas version.

A column whose values carry several UTC offsets (summer and winter time) is parsed by
``pd.to_datetime(..., format="ISO8601")`` into an error under pandas 3, but into a
column of ``datetime`` objects (dtype object, with a FutureWarning) under pandas 2.x,
the declared floor.  fits reads such a column in UTC either way, so the first attempt
must fail alike: :func:`iso_datetimes` raises where pandas 2.x gives objects.
"""

from __future__ import annotations

import warnings
from typing import Any

import pandas as pd

__all__ = ["iso_datetimes"]


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
