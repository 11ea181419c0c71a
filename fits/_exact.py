"""When a float64 sum of numbers read from text counts as "exactly" their written total.

A table written with decimals (``p1 = 0.1``, ``p2 = 0.2``, ``t = 0.3``) holds the sum
rule ``t = p1 + p2`` exactly in decimal, yet not in float64: each parsed value carries a
relative rounding error of at most 2^-53, and each of the k - 1 additions of k parts
another, so ``|t - sum(p)| <= (k + 1) 2^-53 max(|t|, sum |p|)`` whenever the written
numbers agree.  :func:`sums_match` accepts exactly that (with a factor 2 of room, still
about 1e-15 of the magnitude: no real difference passes it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["sums_match"]

#: Relative room per term: twice the unit roundoff of float64.
_ROOM = 2.0**-52


def sums_match(total: np.ndarray, parts: Sequence[np.ndarray]) -> np.ndarray:
    """Rows where ``total`` equals the sum of ``parts`` up to float64 rounding.

    Parameters
    ----------
    total : ndarray
        The column the rule gives, float64.
    parts : sequence of ndarray
        The parts, each the shape of ``total``, float64 (added in the order given).

    Returns
    -------
    ndarray of bool
        ``|total - sum| <= (k + 1) 2^-52 max(|total|, sum |parts|)`` with k parts;
        False wherever a value is missing (NaN) or infinite.
    """
    total = np.asarray(total, dtype=float)
    summed = np.zeros_like(total)
    scale = np.abs(total)
    mass = np.zeros_like(total)
    for p in parts:
        p = np.asarray(p, dtype=float)
        summed = summed + p
        mass = mass + np.abs(p)
    scale = np.maximum(scale, mass)
    with np.errstate(invalid="ignore"):
        ok = np.abs(total - summed) <= (len(parts) + 1) * _ROOM * scale
    return ok & np.isfinite(total) & np.isfinite(summed)
