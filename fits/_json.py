"""JSON values: numpy scalars and containers as plain JSON types.

A leaf helper (it imports nothing of fits), so every layer may use it: the report and
the benchmark write their numbers with :func:`jsonable`, the sites their table
descriptions, and the schema unboxes category labels with :func:`plain`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["jsonable", "plain"]


def plain(value: Any) -> Any:
    """A numpy scalar as the Python scalar it holds (``np.int64(3)`` -> ``3``); else as is."""
    return value.item() if isinstance(value, np.generic) else value


def jsonable(value: Any, *, finite: bool = True) -> Any:
    """``value`` in plain JSON types, for :func:`json.dumps`.

    Mappings become dicts with string keys, sequences and arrays lists, numpy scalars
    Python scalars, anything else that is not a JSON type its ``str``. With
    ``finite=True`` (the default) NaN becomes None and an infinity the string ``"inf"``
    or ``"-inf"`` (strict JSON); with ``finite=False`` they stay floats (Python's
    ``json`` writes them as ``NaN`` / ``Infinity`` and reads them back).
    """
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, finite=finite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, finite=finite) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v, finite=finite) for v in value.tolist()]
    value = plain(value)
    if finite and isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
