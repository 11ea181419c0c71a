"""When a float64 sum of numbers read from text counts as "exactly" their written total.

A table written with decimals (``p1 = 0.1``, ``p2 = 0.2``, ``t = 0.3``) holds the sum
rule ``t = p1 + p2`` exactly in decimal, yet not in float64: each parsed value carries a
relative rounding error of at most 2^-53, and each of the k - 1 additions of k parts
another, so ``|t - sum(p)| <= (k + 1) 2^-53 max(|t|, sum |p|)`` whenever the written
numbers agree.  :func:`sums_match` accepts exactly that (with a factor 2 of room, still
about 1e-15 of the magnitude: no real difference passes it).

:func:`affine_match` does the same for an affine rule ``y = slope x + intercept``
(:mod:`fits.core.rules`), where the rule's rounding, not float64, sets the tolerance.

:func:`interval_cuts` and :func:`interval_cells` give an ``"interval"`` rule's cells
(a discrete column that is a step function of a numeric one): the one formula the
coordinator, the synthesizer, the known values and the evaluation use;
:func:`interval_bounds` reads its bounds (numbers, or a datetime column's ISO 8601
text as seconds since 1970 UTC) and :func:`interval_text` words it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fits._dates import bound_number
from fits._json import plain

__all__ = [
    "AFFINE_RTOL",
    "affine_match",
    "affine_tolerance",
    "interval_bounds",
    "interval_cells",
    "interval_cuts",
    "interval_text",
    "sums_match",
]

#: Relative float64 slack of an affine rule: a row keeps ``y = a x + b`` when
#: ``|y - (a x + b)| <= t + AFFINE_RTOL * max(|y|, |a x|, |b|)`` (t: the rule's
#: tolerance, by default half a unit of the last decimal it rounds to; 0 for an exact
#: rule).  float64 arithmetic errs by a few units of 2^-53 ~ 1.1e-16 of these
#: magnitudes; 1e-9 leaves seven orders of margin for that and for the coefficients'
#: own rounding in the schema's JSON (15 significant digits), while a real deviation as
#: small as one part in 10^8 is still caught.
AFFINE_RTOL = 1e-9

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


def affine_tolerance(
    y: np.ndarray,
    ax: np.ndarray,
    intercept: float,
    decimals: int | None,
    tolerance: float | None = None,
) -> np.ndarray:
    """Per-row tolerance of an affine rule: ``t + AFFINE_RTOL * max(|y|, |a x|, |b|)``
    with t the rule's ``tolerance`` or, if None, ``h / 2``, ``h = 10^-decimals`` (0 when
    ``decimals`` is None: an exact rule)."""
    if tolerance is not None:
        half = float(tolerance)
    else:
        half = 0.5 * 10.0 ** (-decimals) if decimals is not None else 0.0
    with np.errstate(invalid="ignore"):
        scale = np.maximum(np.maximum(np.abs(y), np.abs(ax)), abs(intercept))
    return half + AFFINE_RTOL * scale


def affine_match(
    y: np.ndarray,
    x: np.ndarray,
    slope: float,
    intercept: float,
    decimals: int | None,
    tolerance: float | None = None,
) -> np.ndarray:
    """Rows where ``y`` is within :func:`affine_tolerance` of ``slope x + intercept``;
    False wherever a value is missing (NaN) or infinite."""
    y = np.asarray(y, dtype=float)
    ax = slope * np.asarray(x, dtype=float)
    tol = affine_tolerance(y, ax, intercept, decimals, tolerance)
    with np.errstate(invalid="ignore"):
        ok = np.abs(y - (ax + intercept)) <= tol
    return ok & np.isfinite(y) & np.isfinite(ax)


def interval_cuts(
    lows: Sequence[float] | np.ndarray, highs: Sequence[float] | np.ndarray
) -> np.ndarray:
    """An ``"interval"`` rule's cut points: one in each gap between consecutive
    intervals, the midpoint ``(high_k + low_(k+1)) / 2``.

    The intervals ``[low_k, high_k]`` are sorted and disjoint (``high_k < low_(k+1)``).
    Each cut c_k is at least ``high_k`` and below ``low_(k+1)`` (where the float64
    midpoint of two adjacent numbers rounds up to ``low_(k+1)``, c_k is ``high_k``),
    so every value of interval k lies in cell k of :func:`interval_cells`.  For whole
    numbers (18-64 and 65-89) the cut is 64.5: any cut in (64, 65) splits the written
    values alike.

    Returns
    -------
    ndarray of float64, shape (K - 1,)
    """
    lo = np.asarray(lows, dtype=float)
    hi = np.asarray(highs, dtype=float)
    cuts = 0.5 * hi[:-1] + 0.5 * lo[1:]  # halves first: no overflow near the float64 max
    return np.where(cuts >= lo[1:], hi[:-1], cuts)


def interval_cells(cuts: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The cell of each value ``x`` among the K cells of the cut points ``cuts``
    (:func:`interval_cuts`): cell 0 is ``x <= c_0``, cell k is ``c_(k-1) < x <= c_k``,
    cell K - 1 is ``x > c_(K-2)``.  So a value in no interval (in a gap, or beyond the
    first or last) gets the nearest interval's cell (a tie, on a cut: the lower one).
    NaN gets cell K - 1; callers leave missing values out."""
    return np.searchsorted(np.asarray(cuts, dtype=float), np.asarray(x, dtype=float), side="left")


def interval_bounds(entries: Sequence[Sequence[Any]]) -> tuple[np.ndarray, np.ndarray]:
    """An ``"interval"`` rule's lows and highs (its entries ``[low, high, value]``) as
    float64: numbers as they are, a datetime column's ISO 8601 text as seconds since
    1970 UTC (:func:`fits._dates.text_seconds`, exactly the sites' numbers)."""
    lows = np.array([bound_number(e[0]) for e in entries], dtype=float)
    highs = np.array([bound_number(e[1]) for e in entries], dtype=float)
    return lows, highs


def interval_text(entries: Sequence[Sequence[Any]] | None) -> str:
    """An ``"interval"`` rule's entries for people: ``"no for [18, 64], yes for [65,
    89]"``; date-time bounds as written (``"pre for [2015-01-01, 2019-12-31]"``), the
    missing value (null) as ``(missing)``."""

    def bound(v: Any) -> str:
        return v if isinstance(v, str) else f"{float(v):.15g}"

    return ", ".join(
        f"{'(missing)' if plain(v) is None else plain(v)} for [{bound(lo)}, {bound(hi)}]"
        for lo, hi, v in entries or []
    )
