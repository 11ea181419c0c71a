"""Exact rules between columns: detection from per-site answers, and their use.

A *rule* (:class:`~fits.core.schema.Rule`) is an identity that holds in every real row
of every site:

* ``"function"``: a discrete column B takes one value per value of another discrete
  column A (Adult's ``education-num`` of ``education``), or per combination of two
  (Bike's ``workingday`` of ``holiday`` and ``weekday``);
* ``"sum"``: a continuous column T is the sum of two or three numeric columns in every
  row (``cnt = casual + registered``);
* ``"affine"``: a continuous column Y is ``slope * X + intercept`` for an earlier
  numeric column X in every row, up to Y's rounding (Fahrenheit of Celsius rounded to
  two decimals; an exact copy of a column); between two datetime columns, X shifted by
  a fixed duration (slope 1; a copy: 0).

The chain of Algorithm 2 draws every column from a smoothed conditional CDF, so it keeps
such identities only approximately (Adult: 92.5% of synthetic rows, Bike: 91.8%).  fits
finds them at setup and generates the dependent column by the rule instead.

Detection (docs/method.md, "Exact rules"; what a site reveals: docs/privacy.md) asks
every site, never for rows, only for

1. **check**: one bit per candidate rule -- does it hold in every one of my rows?
   (:func:`answer_rules` with ``stage="check"``);
2. **map**: for the function candidates every site answered yes to, the 0/1 indicator
   of which (a, b) value pairs occur in its rows (``stage="map"``), over the levels the
   merged schema already lists.  The union over sites gives the mapping a -> b; a
   value a with two values b at two sites (each site's own mapping a function, but
   different ones) is no rule.

Affine rules take one more stage before the check, since the coefficients are not known
in advance: **moments** (``stage="moments"``): for every candidate pair (X, Y) of
numeric columns that the sites' minima and maxima from the setup round leave possible
(:func:`extremes_agree`), over the site's rows with both present, their count, the
sums and sums of squares of X and Y and the sum of their products (centred at the
midpoints of the merged schema's bounds), and, per column, which number of decimals its
values have (a one-hot vector).  These are *summed*
over the sites (masked by secure aggregation when it is on), so the coordinator learns
only pooled moments; pooled least squares gives slope, intercept and the residual mean
square, and only pairs whose residual could be rounding (:func:`affine_proposals`) go
on to the check.

Candidates (:func:`candidates`) are chosen from the merged schema: every ordered
pair of discrete columns; pairs of discrete determinants (at most
:data:`MAX_DETERMINANT_CELLS` combinations) for a column with no one-column rule; and
sums of two (then three) numeric columns whose bounds allow the sum.  When the bounds
leave more than :data:`TOTALS_FROM_CANDIDATES` sums (a wide table: 2.26 million
two-part sums at 300 lab values), one more stage comes first: **totals**
(``stage="totals"``): per numeric column, the sum of the site's values (scaled by a
power of two), summed over the sites like the moments.  A sum rule that holds in every
row makes the totals obey it too, up to a rounding bound (:func:`sum_totals`), so only
the sums whose totals agree are checked (:class:`SumTotals`).  A function rule
needs at least :data:`MIN_ROWS_PER_CELL` rows in the federation per determinant
combination (so that it is not a coincidence of few rows per combination), a sum rule
at least :data:`MIN_SUM_ROWS` rows.  :func:`select_rules` keeps at most one rule per
column, whose determinants all come before it in the chain (of ``education`` <->
``education-num`` the later column is generated).

**Near-linear columns** (``"linear"`` rules; docs/method.md, "Near-linear columns") are
no exact rules: a continuous column Y whose pooled least-squares line on an earlier
continuous column X has R^2 >= :data:`NEAR_LINEAR_R2` is drawn by the chain as its
residual ``R = Y - (slope X + intercept)`` in Y's place, and Y is the line plus the drawn
residual.  After the exact rules, two more stages find them: **moments** again (the same
summed, maskable answer as the affine stage's) for the pairs of
:func:`near_linear_candidates`, whatever the extremes, then **residuals**
(``stage="residuals"``): for the pairs kept (:func:`select_near_linear`), each site's
minimum and maximum of the residual over its rows holding Y, merged into the residual's
bounds (:func:`detect_near_linear`).

**Interval rules** (``"interval"`` rules; docs/method.md, "Interval rules"): a discrete
column Y that is a step function of an earlier continuous column X of numbers or
datetimes (``senior`` = "yes" where ``age`` >= 65; ``era`` by a date), each value of Y
occupying one interval of X, the intervals disjoint; where Y has missing values, missing
is one of its values, with an interval of its own; where X has missing values, the rule
holds where X is present and says nothing where it is missing (every stage leaves those
rows out, and the chain draws Y there).  After the function rounds (a column
a function rule sets is not asked again), two stages find them for the pairs of
:func:`interval_candidates`: **check** (the same one-bit answer, ``stage="check"``): are
the site's own intervals disjoint (:func:`answer_rules`); then, for the pairs every site
said yes to, **ranges** (``stage="ranges"``): per value of Y, the site's row count and
minimum and maximum of X over its rows of that value.  The coordinator merges them
(:func:`interval_rules`): the rule holds in every row of every site exactly when the
merged intervals are disjoint.

**Datetime shifts** (``"affine"`` rules between two datetime columns; docs/method.md,
"Two datetime columns"): no moments; the shift is ``min Y - min X`` of the setup
round's extremes, which must agree at every site (:func:`shift_candidates`), then the
**check** to the microsecond (:func:`detect_shifts`).

**Order rules** (``"order"`` rules; docs/method.md, "Order rules"): a continuous column
Y at least an earlier continuous X in every row holding Y (two numbers or two
datetimes), drawn as the difference ``Y - X >= 0`` by the near-linear machinery
(:meth:`Schema.order_line <fits.core.schema.Schema.order_line>`).  Last, for the columns
no other rule sets or draws: the pairs the bounds and the sites' extremes leave
plausible (:func:`order_candidates`), one **check** bit each, and per Y the latest
source every site confirmed (:func:`detect_order`; a pair confirmed with the larger
column first in the chain: a note naming the chain order that finds it).  At fit, two
more bits per rule and site (:func:`order_point_masses`) say whether the difference
has a point mass at 0 (Y = X in some rows), drawn by an indicator.

Everything here is a function of a schema and arrays; the federation layer carries the
questions and answers (:mod:`fits.federation.protocol`, message ``rules``).
"""

from __future__ import annotations

import itertools
import math
import shlex
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fits._dates import bound_number, seconds_text
from fits._exact import (
    AFFINE_RTOL,
    affine_match,
    affine_tolerance,
    interval_cells,
    interval_cuts,
    sums_match,
)
from fits._json import plain
from fits.core.schema import (
    MAX_SPAN,
    ColumnSpec,
    DataNote,
    Rule,
    Schema,
    SchemaError,
    datetime_micros,
    order_grid,
    shift_grid,
)

__all__ = [
    "AFFINE_RTOL",
    "MAX_INTERVAL_LEVELS",
    "MAX_INTERVAL_PAIRS",
    "detect_intervals",
    "interval_candidates",
    "interval_codes",
    "interval_rules",
    "ranges_size",
    "sets_every_row",
    "extremes_agree",
    "MAX_AFFINE_PAIRS",
    "MAX_ORDER_PAIRS",
    "ORDER_OVERLAP",
    "detect_order",
    "detect_shifts",
    "order_candidates",
    "order_point_masses",
    "shift_candidates",
    "shifted_datetimes",
    "MAX_DECIMALS",
    "MAX_DETERMINANT_CELLS",
    "MAX_SUM_CANDIDATES",
    "MIN_ROWS_PER_CELL",
    "MIN_SUM_ROWS",
    "MAX_NEAR_LINEAR_PAIRS",
    "NEAR_LINEAR_R2",
    "SumTotals",
    "TOTALS_FROM_CANDIDATES",
    "affine_candidates",
    "affine_proposals",
    "affine_tolerance",
    "affine_values",
    "answer_rules",
    "candidates",
    "detect_rules",
    "dependent_codes",
    "detect_near_linear",
    "duration_step",
    "DURATION_STEPS",
    "map_size",
    "moments_size",
    "near_linear_candidates",
    "near_linear_fits",
    "residuals",
    "select_near_linear",
    "value_decimals",
    "rules_by_column",
    "select_rules",
    "sum_candidate_count",
    "sum_columns",
    "sum_totals",
    "verify_rules",
]

#: Two-column determinants are tried only with at most this many value combinations.
MAX_DETERMINANT_CELLS = 64
#: A function rule needs at least this many rows (over all sites) per combination of its
#: determinants' levels.
MIN_ROWS_PER_CELL = 10
#: A sum rule needs at least this many rows over all sites.
MIN_SUM_ROWS = 50
#: Most three-part sum candidates, and most two-column function candidates, asked in one
#: detection (the ones with the fewest determinant combinations first); one-column
#: functions and two-part sums are all asked.
MAX_SUM_CANDIDATES = 5000

#: Most decimals a site reports for a column (more: "not a decimal column").
MAX_DECIMALS = 12
#: Most (X, Y) pairs whose moments are asked in one detection (the first in chain order):
#: every pair up to about 316 numeric columns.  Each pair costs a site a pass over its
#: rows and 6 numbers in its reply, and pairs grow as the square of the columns, so
#: the cap bounds the round (docs/method.md, "Near-linear columns": why a cap).
MAX_AFFINE_PAIRS = 50_000
#: An affine rule's slope and intercept are rounded to the shortest decimal within this
#: many standard errors of their pooled least-squares values (:func:`shortest_decimal`).
SNAP_SE = 4.0

#: A pair (X, Y) of continuous columns is drawn as Y's residual about the pooled
#: least-squares line (a ``"linear"`` rule) when the line's R^2 is at least this
#: (docs/method.md, "Near-linear columns"; Bike's atemp on temp: 0.975).
NEAR_LINEAR_R2 = 0.95
#: Most (X, Y) pairs whose moments the near-linear stage asks (the first in chain
#: order, as :data:`MAX_AFFINE_PAIRS`).
MAX_NEAR_LINEAR_PAIRS = 50_000

#: An interval rule's column has at most this many values (categories): a step
#: function with more steps than this is rarely a rule, and each value costs a site
#: three numbers in the ``ranges`` answer.
MAX_INTERVAL_LEVELS = 64
#: Most (X, Y) pairs an interval check asks in one detection (the first in chain
#: order, by Y then X, as :data:`MAX_NEAR_LINEAR_PAIRS`).
MAX_INTERVAL_PAIRS = 5000

#: Most (X, Y) pairs an order check asks in one detection (the first in chain order, by
#: Y then X, as :data:`MAX_AFFINE_PAIRS`): each costs a site a pass over its rows and
#: one bit in its reply.
MAX_ORDER_PAIRS = 50_000
#: Rows with Y > X some site must hold for an order rule's difference to be drawn with
#: a point mass at 0 (:func:`order_point_masses`): its continuous part rests on them.
ORDER_APART_ROWS = 20
#: An order pair's two ranges must overlap over at least this share of each (the two
#: columns one quantity on one scale: a start and an end, a minimum and a maximum; not
#: Fahrenheit above Celsius, or a doubled column above its source).
ORDER_OVERLAP = 0.5
#: Two datetime columns' per-site extremes agree with a shift when their differences
#: (min Y - min X and max Y - max X, float64 seconds since 1970) are within this many
#: seconds of one another (float64 noise of microsecond times is below 1e-6 s).
_SHIFT_SLACK = 1e-5

#: One candidate, as sent to the sites: ``{"kind", "column", "of"}`` (and, to verify a
#: user's rule, ``"mapping"``: entries of codes ``[a_1, ..., a_k, b]``; an interval
#: rule's ``"intervals"``: entries ``[low, high, code]``).
Candidate = dict[str, Any]
#: ``ask(stage, candidates)`` -> one answer array per site (see :func:`answer_rules`).
Ask = Callable[[str, list[Candidate]], list[np.ndarray]]


def _numeric(spec: ColumnSpec) -> bool:
    """A column a sum can involve: numbers present in every row (not whole numbers
    past 2**53, which a sum in float64 would round: no rule is looked for on them)."""
    if spec.missing or not spec.is_modelled or spec.dtype == "datetime" or spec.past_float:
        return False
    if spec.kind == "continuous":
        return _summable(spec)
    cats = spec.categories or []
    return spec.kind == "ordinal" and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in cats
    )


def _bounds(spec: ColumnSpec) -> tuple[float, float]:
    if spec.kind == "continuous":
        return float(spec.lower or 0.0), float(spec.upper or 0.0)
    values = [float(v) for v in spec.categories or []]
    return min(values), max(values)


def _summable(spec: ColumnSpec) -> bool:
    """Whether sums of a numeric column's squares and products stay finite in float64:
    its values at most :data:`~fits.core.schema.MAX_SPAN` (1e100) in magnitude.  A
    column past it (1e299) is no continuous column a fit models
    (:func:`~fits.core.schema.check_spans`), and its moments overflowed the affine
    search (an OverflowError from ``fits schema``): no sum, affine or near-linear rule
    is looked for on it."""
    return max(abs(v) for v in _bounds(spec)) <= MAX_SPAN


def _cells(schema: Schema, of: Sequence[str]) -> int:
    return math.prod(schema[c].n_levels for c in of)


def candidates(
    schema: Schema,
    n_total: int,
    *,
    size: int,
    skip: set[str] | frozenset[str] = frozenset(),
    totals: SumTotals | None = None,
) -> list[Candidate]:
    """The candidate rules of one detection round, from the merged schema (and the
    sites' column totals, if asked).

    Parameters
    ----------
    schema : Schema
        The merged (user-facing) schema.
    n_total : int
        Rows over all sites.
    size : {1, 2}
        1: one-column functions and two-part sums; 2: two-column functions and
        three-part sums.
    skip : set of str
        Columns that already have a rule (not asked again with more determinants).
    totals : SumTotals, optional
        The sites' column totals (:func:`sum_totals`): a sum candidate whose totals
        contradict it is left out (:meth:`SumTotals.allows`); the others, and their
        order, are those without totals (so the three-part limit counts only those
        left).

    Returns
    -------
    list of dict
    """
    cols = [c for c in schema.columns if c.is_modelled and c.indicates is None]
    discrete = [c.name for c in cols if c.is_discrete and c.n_levels >= 2]
    out: list[Candidate] = []
    for b in discrete:
        if b in skip:
            continue
        for of in itertools.combinations([a for a in discrete if a != b], size):
            cells = _cells(schema, of)
            if size > 1 and cells > MAX_DETERMINANT_CELLS:
                continue
            if n_total >= MIN_ROWS_PER_CELL * cells:
                out.append({"kind": "function", "column": b, "of": list(of)})
    if size > 1 and len(out) > MAX_SUM_CANDIDATES:
        out = sorted(out, key=lambda c: _cells(schema, c["of"]))[:MAX_SUM_CANDIDATES]
    if n_total < MIN_SUM_ROWS:
        return out
    numeric = [c for c in cols if _numeric(c)]
    limit = MAX_SUM_CANDIDATES if size > 1 else None
    return out + _sum_candidates(numeric, size + 1, skip, limit, totals)


def _sum_candidates(
    numeric: Sequence[ColumnSpec],
    parts: int,
    skip: set[str] | frozenset[str],
    limit: int | None,
    totals: SumTotals | None = None,
) -> list[Candidate]:
    """Sums of ``parts`` (2 or 3) numeric columns whose bounds allow a continuous total:
    for each total t (in order) and each group of other columns (in
    :func:`itertools.combinations` order), those with ``sum(lower) <= lower(t)`` and
    ``upper(t) <= sum(upper)`` (necessary for t = the sum in every row); the first
    ``limit`` of them.

    The bounds of every pair are summed once, with numpy (the same additions, in the
    same order, as ``lo_i + lo_j (+ lo_k)``), so the candidates are those of a loop over
    the groups, without its O(P^(parts + 1)) Python steps (300 numeric columns: 1.3e9
    three-part groups, hours; docs/benchmarks.md, "Wide tables").  Three-part groups
    are scanned per first part, skipping a first part whose best possible group misses
    the bounds, and the scan stops at ``limit``.

    With ``totals``, a group is kept only if the totals also allow it; three-part
    groups are then found from the sorted sums of the pairs' totals
    (:func:`_triples_by_totals`), not by a scan of every group.
    """
    names = [c.name for c in numeric]
    bounds = np.array([_bounds(c) for c in numeric], dtype=float).reshape(-1, 2)
    lo, hi = bounds[:, 0], bounds[:, 1]
    n = len(numeric)
    ii, jj = np.triu_indices(n, k=1)  # the pairs i < j, in combinations order
    low, high = lo[ii] + lo[jj], hi[ii] + hi[jj]
    aligned = totals.aligned(names) if totals is not None else None
    search = _PairSearch(aligned, ii, jj) if aligned is not None and parts == 3 else None
    sums: list[Candidate] = []
    for t, spec in enumerate(numeric):
        if spec.kind != "continuous" or spec.point_mass is not None or spec.name in skip:
            continue
        lo_t, hi_t = lo[t], hi[t]
        if parts == 2:
            hit = (low <= lo_t) & (hi_t <= high)
            hit &= (ii != t) & (jj != t)
            pi, pj = ii[hit], jj[hit]
            if aligned is not None:
                ok = aligned.allows(t, pi, pj)
                pi, pj = pi[ok], pj[ok]
            groups: Iterator[tuple[int, ...]] = zip(pi.tolist(), pj.tolist(), strict=True)
        elif search is not None:
            groups = _triples_by_totals(lo, hi, t, ii, jj, search)
        else:
            groups = _triples(lo, hi, t, ii, jj)
        for group in groups:
            sums.append(
                {"kind": "sum", "column": spec.name, "of": [numeric[k].name for k in group]}
            )
            if limit is not None and len(sums) >= limit:
                return sums
    return sums


def _triples(
    lo: np.ndarray, hi: np.ndarray, t: int, ii: np.ndarray, jj: np.ndarray
) -> Iterator[tuple[int, int, int]]:
    """The groups i < j < k (none of them t) with ``lo_i + lo_j + lo_k <= lo_t`` and
    ``hi_t <= hi_i + hi_j + hi_k`` (summed left to right), in combinations order.

    A first part i is skipped when even the two smallest lower bounds (largest upper
    bounds) after it miss, with a slack of 1e-9 of the magnitudes so that the order of
    the additions cannot make the skip drop a group; the others are tested exactly."""
    n = lo.size
    others = np.ones(n, dtype=bool)
    others[t] = False
    lo_t, hi_t = lo[t], hi[t]
    # per i: the two smallest lo and the two largest hi among the columns after i, not
    # t (a NaN bound fails every comparison: left out of these)
    low2 = np.full(n, np.inf)
    high2 = np.full(n, -np.inf)
    small = [np.inf, np.inf]
    large = [-np.inf, -np.inf]
    for k in range(n - 1, -1, -1):
        low2[k] = small[0] + small[1]
        high2[k] = large[0] + large[1]
        if k != t:
            if lo[k] == lo[k]:
                small = sorted([*small, float(lo[k])])[:2]
            if hi[k] == hi[k]:
                large = sorted([*large, float(hi[k])])[-2:]
    start = np.searchsorted(ii, np.arange(n + 1))  # pairs (j, k) with j > i: start[i + 1]:
    keep = others[ii] & others[jj]
    with np.errstate(invalid="ignore", over="ignore"):  # a NaN comparison: not skipped
        skip = lo + low2 > lo_t + 1e-9 * (np.abs(lo) + np.abs(low2) + abs(lo_t))
        skip |= hi + high2 < hi_t - 1e-9 * (np.abs(hi) + np.abs(high2) + abs(hi_t))
    for i in np.flatnonzero(others & ~skip).tolist():
        first = int(start[i + 1])
        pj, pk = ii[first:], jj[first:]
        hit = keep[first:] & (lo[i] + lo[pj] + lo[pk] <= lo_t) & (hi_t <= hi[i] + hi[pj] + hi[pk])
        for j, k in zip(pj[hit].tolist(), pk[hit].tolist(), strict=True):
            yield i, j, k


#: float64's unit roundoff, 2^-53.
_U = 2.0**-53
#: Ask the sites for their column totals (stage ``totals``) only when the bounds leave
#: more sum candidates than this (two-part ones, and three-part ones up to
#: :data:`MAX_SUM_CANDIDATES`): below it the check round is small, and no site sends
#: any total.
TOTALS_FROM_CANDIDATES = 1000


def _magnitude(spec: ColumnSpec) -> float:
    """The power of two above the largest magnitude of the column's bounds: a site
    divides its values by it (exactly) before summing them, so that every value summed
    is at most 1 in magnitude."""
    lo, hi = _bounds(spec)
    _, exponent = math.frexp(max(abs(lo), abs(hi), 1e-300))
    return math.ldexp(1.0, exponent)


def sum_columns(schema: Schema) -> list[str]:
    """The columns a sum rule can involve (whose totals the ``totals`` stage asks)."""
    cols = [c for c in schema.columns if c.is_modelled and c.indicates is None]
    return [c.name for c in cols if _numeric(c)]


class SumTotals:
    """The sites' column totals and how far a true sum rule can move them.

    ``sums[a, c]``: answer ``a``'s total of column ``c`` (one answer per site, or one
    pooled over all of them with secure aggregation); ``tol[a, c]``: the bound on that
    column's share of the rounding (:func:`sum_totals`).  A rule ``T = P_1 + ... +
    P_k`` that every row of every site holds (:func:`fits._exact.sums_match`) leaves
    ``|S_T - S_P1 - ... - S_Pk| <= tol_T + tol_P1 + ... + tol_Pk`` in every answer
    (computed left to right).
    """

    def __init__(self, names: Sequence[str], sums: np.ndarray, tol: np.ndarray) -> None:
        self.names = list(names)
        self.index = {n: k for k, n in enumerate(self.names)}
        self.sums = np.asarray(sums, dtype=float).reshape(-1, len(self.names))
        self.tol = np.asarray(tol, dtype=float).reshape(self.sums.shape)

    def aligned(self, names: Sequence[str]) -> SumTotals:
        """The same totals, their columns in the order of ``names``."""
        pos = [self.index[n] for n in names]
        return SumTotals(names, self.sums[:, pos], self.tol[:, pos])

    def allows(self, t: int, *parts: np.ndarray) -> np.ndarray:
        """Whether the totals allow ``column t = sum of the parts`` (parts: arrays of
        column positions, one array per part, one candidate per entry)."""
        ok = np.ones(np.shape(parts[0]), dtype=bool)
        for s, e in zip(self.sums, self.tol, strict=True):
            d = s[t] - s[parts[0]]
            room = e[t] + e[parts[0]]
            for p in parts[1:]:
                d = d - s[p]
                room = room + e[p]
            ok &= np.abs(d) <= room
        return ok


def sum_totals(
    schema: Schema,
    names: Sequence[str],
    answers: Sequence[np.ndarray],
    site_rows: Sequence[int],
    descriptions: Sequence[Mapping[str, Any]] | None = None,
) -> SumTotals | None:
    """The :class:`SumTotals` of the sites' ``totals`` answers; None if some total is
    not finite (then no candidate is left out).

    Each site sends, per column c, the float64 sum (:func:`numpy.nansum`) of its values
    divided by m_c (:func:`_magnitude`, a power of two: exact).  If a rule with k <= 3
    parts holds in each of the N rows of an answer (n_i rows at its K sites), the
    column sums obey it up to, with u = 2^-53 and M_c >= |value| (m_c, or a site's
    reported extreme beyond it):

    * the rows' own rounding (:func:`~fits._exact.sums_match` allows (k + 1) 2u of
      the magnitude per row, the float64 sum of the parts (k - 1) u more): at most
      10 u N sum_c M_c over the candidate's columns;
    * each site's float64 sum of n_i values: (n_i - 1) u sum |x| <= 1.01 u n_i^2 M_c;
    * the sum over sites: K u N M_c; with secure aggregation its fixed point (2^-97
      m_c per site) and the float64 decoding (4 u N M_c);
    * the k subtractions of the test: k u N sum_c M_c.

    So ``tol_c = u M_c (2 sum_i n_i^2 + (K + 24) N) + K 2^-96 m_c`` bounds column c's
    share, with room to spare; no true rule is left out.  A column with a missing value
    at some site has a total over its present values only, but no rule involves it
    (a check fails where a value is missing), so nothing is lost there either.

    Parameters
    ----------
    schema : Schema
        The merged schema (the bounds give m_c).
    names : sequence of str
        The columns asked (:func:`sum_columns`), in the answers' order.
    answers : sequence of ndarray
        One answer (len(names),) per site, or one (their sum) for all of them.
    site_rows : sequence of int
        Each site's row count.
    descriptions : sequence of dict, optional
        The sites' setup descriptions, whose extremes bound M_c where a site's values
        lie beyond the schema's bounds.
    """
    unit = np.array([_magnitude(schema[n]) for n in names])
    bound = unit.copy()
    for desc in descriptions or []:
        info = desc.get("columns", {})
        for k, n in enumerate(names):
            for key in ("min", "max"):
                v = info.get(n, {}).get(key)
                if isinstance(v, (int, float)) and math.isfinite(v):
                    bound[k] = max(bound[k], abs(float(v)))
    rows = [int(r) for r in site_rows]
    groups = [rows] if len(answers) == 1 else [[r] for r in rows]
    if len(groups) != len(answers):
        raise SchemaError(f"{len(answers)} totals answers for {len(rows)} sites")
    sums, tol = [], []
    for answer, group in zip(answers, groups, strict=True):
        a = np.asarray(answer, dtype=float)
        if a.shape != (len(names),):
            raise SchemaError(f"a totals answer has shape {a.shape}, not ({len(names)},)")
        if not np.all(np.isfinite(a)):
            return None
        n_rows, n_sites = float(sum(group)), float(len(group))
        square = float(sum(r * r for r in group))
        sums.append(a * unit)  # powers of two: exact
        room = 2.0 * square + (n_sites + 24.0) * n_rows
        tol.append(_U * bound * room + n_sites * 2.0**-96 * unit)
    return SumTotals(names, np.array(sums), np.array(tol))


class _PairSearch:
    """The pairs (i < j) sorted by their totals ``S_i + S_j`` in the first answer, to
    find the pairs whose sum is within reach of a target."""

    def __init__(self, totals: SumTotals, ii: np.ndarray, jj: np.ndarray) -> None:
        self.totals = totals
        first = totals.sums[0]
        pair = first[ii] + first[jj]
        self.order = np.argsort(pair, kind="stable")
        self.sorted = pair[self.order]
        # |S_t - S_i - (S_j + S_k)| of a candidate the totals allow, as computed here:
        # at most the test's room (four columns) plus the float64 rounding of the
        # target, the pair sum and the test's own subtractions (5 u of the magnitudes)
        magnitude = float(np.max(np.abs(first))) if first.size else 0.0
        self.reach = 4.0 * float(np.max(totals.tol[0], initial=0.0)) + 32.0 * _U * magnitude

    def pairs_near(self, target: np.ndarray) -> list[np.ndarray]:
        """Per target, the positions (in the pairs' order) of the pairs within reach."""
        left = np.searchsorted(self.sorted, target - self.reach, side="left")
        right = np.searchsorted(self.sorted, target + self.reach, side="right")
        return [self.order[a:b] for a, b in zip(left.tolist(), right.tolist(), strict=True)]


def _triples_by_totals(
    lo: np.ndarray,
    hi: np.ndarray,
    t: int,
    ii: np.ndarray,
    jj: np.ndarray,
    search: _PairSearch,
) -> Iterator[tuple[int, int, int]]:
    """The groups of :func:`_triples` that the totals allow, in the same order: per
    first part i, the pairs (j, k), j > i, whose total is within reach of ``S_t -
    S_i``, then the bounds and :meth:`SumTotals.allows` tested exactly."""
    n = lo.size
    lo_t, hi_t = lo[t], hi[t]
    first = search.totals.sums[0]
    near = search.pairs_near(first[t] - first)
    for i in range(n):
        if i == t or not near[i].size:
            continue
        p = np.sort(near[i])  # combinations order of (j, k)
        pj, pk = ii[p], jj[p]
        keep = (pj > i) & (pj != t) & (pk != t)
        pj, pk = pj[keep], pk[keep]
        if not pj.size:
            continue
        hit = (lo[i] + lo[pj] + lo[pk] <= lo_t) & (hi_t <= hi[i] + hi[pj] + hi[pk])
        hit &= search.totals.allows(t, np.full(pj.shape, i), pj, pk)
        for j, k in zip(pj[hit].tolist(), pk[hit].tolist(), strict=True):
            yield i, j, k


def sum_candidate_count(
    schema: Schema, n_total: int, skip: set[str] | frozenset[str] = frozenset()
) -> int:
    """How many sum candidates the bounds alone leave: every two-part one, and the
    three-part ones up to :data:`MAX_SUM_CANDIDATES` (what the two check rounds would
    ask without totals)."""
    if n_total < MIN_SUM_ROWS:
        return 0
    cols = [c for c in schema.columns if c.is_modelled and c.indicates is None]
    numeric = [c for c in cols if _numeric(c)]
    lo, hi = (np.array([_bounds(c)[k] for c in numeric], dtype=float) for k in (0, 1))
    n = len(numeric)
    ii, jj = np.triu_indices(n, k=1)
    low, high = lo[ii] + lo[jj], hi[ii] + hi[jj]
    count = 0
    targets = []
    for t, spec in enumerate(numeric):
        if spec.kind != "continuous" or spec.point_mass is not None or spec.name in skip:
            continue
        targets.append(t)
        hit = (low <= lo[t]) & (hi[t] <= high) & (ii != t) & (jj != t)
        count += int(np.count_nonzero(hit))
    triples = 0
    for t in targets:
        for _ in _triples(lo, hi, t, ii, jj):
            triples += 1
            if triples >= MAX_SUM_CANDIDATES:
                return count + triples
    return count + triples


def _affine_source(spec: ColumnSpec) -> bool:
    """A column an affine rule can start from: a numeric column with numbers in every
    row, or a continuous one with missing values; not constant; not whole numbers past
    2**53 (:func:`_numeric`)."""
    numeric = _numeric(spec) or (
        spec.kind == "continuous"
        and spec.is_modelled
        and spec.dtype != "datetime"
        and not spec.past_float
        and _summable(spec)
    )
    return numeric and _bounds(spec)[0] < _bounds(spec)[1]


def _affine_dependent(spec: ColumnSpec) -> bool:
    """A column an affine rule can generate: continuous, no point mass, not constant
    (missing values allowed: where its source is missing, and only there)."""
    return _affine_source(spec) and spec.kind == "continuous" and spec.point_mass is None


def affine_candidates(
    schema: Schema, n_total: int, *, skip: set[str] | frozenset[str] = frozenset()
) -> list[Candidate]:
    """The (X, Y) pairs whose moments are asked: Y continuous (no point mass, not
    constant), X numeric and earlier than Y in the chain order, both with missing
    values or neither (a rule says: Y is missing where X is, and only there).

    At most :data:`MAX_AFFINE_PAIRS`, the first in chain order (by Y, then X): with P
    numeric columns there are P (P - 1) / 2 pairs, so every pair is asked up to about
    316 columns; past that the later pairs are not sought, and
    a :class:`DataNote` says how many pairs there were and through which column the
    search looked.  None with fewer than :data:`MIN_SUM_ROWS` rows.

    Returns
    -------
    list of dict
        ``{"kind": "affine", "column": Y, "of": [X]}``.
    """
    if n_total < MIN_SUM_ROWS:
        return []
    cols = {c.name: c for c in schema.columns if c.is_modelled and c.indicates is None}
    numeric = [n for n in schema.order if n in cols and _affine_source(cols[n])]
    out: list[Candidate] = []
    for k, y in enumerate(numeric):
        if y in skip or not _affine_dependent(cols[y]):
            continue
        for x in numeric[:k]:
            if cols[x].missing != cols[y].missing:
                continue
            out.append({"kind": "affine", "column": y, "of": [x]})
            if len(out) == MAX_AFFINE_PAIRS:
                total = _affine_pair_count(cols, numeric, skip)
                if total > MAX_AFFINE_PAIRS:
                    _cap_note(
                        "exact rules: of {total:,} candidate pairs the affine search",
                        total,
                        MAX_AFFINE_PAIRS,
                        y,
                        "a later column that is an exact affine function of another (a "
                        "copy, a unit conversion) is drawn by the chain, not generated by "
                        "its rule",
                    )
                return out
    return out


def _affine_pair_count(
    cols: Mapping[str, ColumnSpec], numeric: Sequence[str], skip: set[str] | frozenset[str]
) -> int:
    """The number of pairs :func:`affine_candidates` would ask without its cap (one
    pass over the chain's numeric columns, counting the sources before each column,
    apart by whether they have missing values)."""
    sources = {False: 0, True: 0}  # by missing: a pair's two columns agree on it
    total = 0
    for y in numeric:
        if y not in skip and _affine_dependent(cols[y]):
            total += sources[bool(cols[y].missing)]
        sources[bool(cols[y].missing)] += 1
    return total


def _extremes(descriptions: Sequence[Mapping[str, Any]], name: str) -> np.ndarray | None:
    """(K, 2) per-site minimum and maximum of a column from the setup descriptions."""
    out = []
    for desc in descriptions:
        info = desc.get("columns", {}).get(name, {})
        if "min" not in info or "max" not in info:
            return None
        out.append((float(info["min"]), float(info["max"])))
    return np.asarray(out, dtype=float)


#: A column's per-site extremes (:func:`_extremes`) and their decimals
#: (:func:`value_decimals`), by column name: computed once per detection.
ExtremesMemo = dict[str, tuple["np.ndarray | None", "int | None"]]


def _extremes_of(
    descriptions: Sequence[Mapping[str, Any]], name: str, memo: ExtremesMemo | None
) -> tuple[np.ndarray | None, int | None]:
    """:func:`_extremes` of a column and the decimals of those values, from ``memo``
    where it holds them (it is filled)."""
    if memo is not None and name in memo:
        return memo[name]
    ex = _extremes(descriptions, name)
    out = (ex, value_decimals(ex.ravel()) if ex is not None else None)
    if memo is not None:
        memo[name] = out
    return out


def extremes_agree(
    cand: Candidate,
    descriptions: Sequence[Mapping[str, Any]],
    *,
    memo: ExtremesMemo | None = None,
) -> bool:
    """Whether the sites' minima and maxima (already sent in the setup round) allow
    ``Y = a X + b`` within Y's rounding, for some slope of either sign.

    If the rule holds within h / 2 in every row (h: Y's resolution), each site's
    extremes (min X, min Y) and (max X, max Y) (for a negative slope: (min X, max Y)
    and (max X, min Y)) lie within h / 2 of the line, and so do the federation's.  The
    line L through the federation's two extreme points is then within h / 2 of the
    true one over [min X, max X], so every site's extreme points lie within h of L.
    h is not known here; the decimals of the reported Y extremes give an upper bound
    (Y's grid holds them), so the test ``|y - L(x)| <= h_ext + 8e-9 (1 + |a|) max|.|`` is
    necessary: a pair that fails it is no rule, and its moments are not asked.  With
    one site the two points are L's own, so nothing is ruled out.  A column without
    reported extremes at some site: not ruled out.  ``memo`` (a dict, empty at first)
    keeps each column's extremes and their decimals for the next pair: a wide table's
    detection screens tens of thousands of pairs of the same columns.
    """
    ex, _ = _extremes_of(descriptions, cand["of"][0], memo)
    ey, d = _extremes_of(descriptions, cand["column"], memo)
    if ex is None or ey is None:
        return True
    lo_x, hi_x = ex[:, 0].min(), ex[:, 1].max()
    if hi_x <= lo_x:
        return False
    h = 10.0**-d if d is not None else 0.0
    scale = float(max(np.abs(ey).max(), np.abs(ex).max(), 1e-300))
    for ys in (ey, ey[:, ::-1]):  # positive slope: min with min; negative: min with max
        y_lo = ys[np.argmin(ex[:, 0]), 0]
        y_hi = ys[np.argmax(ex[:, 1]), 1]
        slope = (y_hi - y_lo) / (hi_x - lo_x)
        line = y_lo + slope * (ex - lo_x)
        if np.all(np.abs(ys - line) <= h + 8 * AFFINE_RTOL * (1 + abs(slope)) * scale):
            return True
    return False


def _moment_columns(cands: Sequence[Candidate]) -> list[str]:
    """The columns of the moments stage, in order of first appearance."""
    names: dict[str, None] = {}
    for c in cands:
        names.setdefault(c["of"][0])
        names.setdefault(c["column"])
    return list(names)


#: Moments per candidate pair: rows with both present, the two sums, the two sums of
#: squares, the sum of products.
_PAIR_MOMENTS = 6


def moments_size(cands: Sequence[Candidate]) -> int:
    """Length of a site's ``moments`` answer for these affine candidates: 6 per
    candidate (rows with both values present; over them the sums and sums of squares of
    X and Y and the sum of their products) + C x (:data:`MAX_DECIMALS` + 2) (each of the
    C columns' one-hot number of decimals)."""
    c = len(_moment_columns(cands))
    return _PAIR_MOMENTS * len(cands) + c * (MAX_DECIMALS + 2)


def value_decimals(values: np.ndarray) -> int | None:
    """The fewest decimals d (0 to :data:`MAX_DECIMALS`) such that every value is a
    whole multiple of 10^-d, up to float64 representation; None if there is none.

    A value counts as a multiple when ``|v 10^d - round(v 10^d)|`` is at most 1e-6 (or 8
    float64 spacings of ``v 10^d``, if larger) and, unless it is 0, ``round(v 10^d)`` is
    not 0 (else every value under 1e-6 would be a whole number); d stops where
    ``|v| 10^d`` reaches 1e12, beyond which float64 cannot tell decimals apart.
    """
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return 0
    for d in range(MAX_DECIMALS + 1):
        scaled = v * 10.0**d
        big = np.abs(scaled)
        if big.max() >= 1e12:
            return None
        tol = np.maximum(1e-6, 8 * np.spacing(big))
        whole = np.round(scaled)
        # a value that is not 0 is never the multiple 0 (1e-9 has no 0 decimals)
        if np.all((np.abs(scaled - whole) <= tol) & ((whole != 0) | (v == 0))):
            return d
    return None


def _centre(spec: ColumnSpec) -> float:
    lo, hi = _bounds(spec)
    return 0.5 * (lo + hi)


def _unit(spec: ColumnSpec) -> float:
    """The power of two at or above half the column's range: the sites divide the
    centred values by it (exactly, being a power of two), so every moment sent is at
    most the row count in magnitude, whatever the column's units (secure aggregation
    masks values below 2^94 only)."""
    lo, hi = _bounds(spec)
    _, exponent = math.frexp(max(0.5 * (hi - lo), 1e-300))
    return math.ldexp(1.0, exponent)


def affine_values(
    x: np.ndarray, slope: float, intercept: float, decimals: int | None
) -> np.ndarray:
    """An affine rule's column from its source: ``slope * x + intercept``, rounded to
    ``decimals`` (:func:`numpy.round`, half to even) unless None."""
    y = slope * np.asarray(x, dtype=float) + intercept
    return np.round(y, decimals) if decimals is not None else y


def map_size(schema: Schema, cands: Sequence[Candidate]) -> int:
    """Length of a site's ``map`` answer: sum over the candidates of cells x levels."""
    return int(sum(_cells(schema, c["of"]) * schema[c["column"]].n_levels for c in cands))


def _site_codes(frame: pd.DataFrame, spec: ColumnSpec, site: str) -> np.ndarray:
    from fits.core.continualization import Encoder  # continualization imports schema

    return Encoder(spec).to_codes(frame[spec.name], client=site)


def _site_numbers(frame: pd.DataFrame, spec: ColumnSpec, site: str) -> np.ndarray:
    from fits.core.continualization import Encoder

    if spec.is_discrete:
        levels = np.asarray([float(v) for v in spec.categories or []])
        return levels[_site_codes(frame, spec, site)]
    return Encoder(spec).to_numeric(frame[spec.name], client=site)


def answer_rules(
    frame: pd.DataFrame,
    schema: Schema,
    cands: Sequence[Candidate],
    stage: str,
    *,
    site: str = "site",
) -> np.ndarray:
    """What one site answers about candidate rules, from its own rows.

    Parameters
    ----------
    frame : DataFrame
        The site's table (text read as numbers or dates, as at setup).
    schema : Schema
        The merged schema (categories give the codes).
    cands : sequence of dict
        The candidates (:func:`candidates`).
    stage : {"check", "map", "moments", "totals", "residuals", "ranges"}
        ``"check"``: an array (n,) of 0/1, 1 where the candidate holds in every row
        (a function: no two rows with the same determinant values and different
        values of the column -- or, with a ``"mapping"``, no row that contradicts it;
        a sum: the column equals the sum of the parts in every row, up to the
        float64 rounding of numbers read from decimal text,
        :func:`fits._exact.sums_match`; an affine rule: ``|y - (slope x +
        intercept)|`` is within :func:`affine_tolerance` in every row).  ``"map"``:
        the concatenation, over the candidates, of the 0/1 indicator of the
        (determinant combination, value) pairs present in the rows, in C order
        (combination codes of ``of`` as :func:`numpy.ravel_multi_index`, then the
        column's code); length :func:`map_size`.  ``"moments"`` (affine candidates):
        float64 sums, length :func:`moments_size` -- per candidate, over the rows with
        both values present, each column centred at the midpoint of its bounds in the
        schema and divided by the power of two at or above half its range: the row
        count, the sums of X and Y, their sums of squares and the sum
        of their products; then per column (in order of first appearance) the one-hot
        vector (length :data:`MAX_DECIMALS` + 2, the last entry: no decimal
        resolution) of :func:`value_decimals` of its present values here.  An affine
        check also needs X and Y missing in the same rows.  ``"totals"`` (candidates
        ``{"kind": "total", "column": c}``, the columns of :func:`sum_columns`):
        float64 (n,), per column the sum of its present values here, each divided by
        the power of two above the largest magnitude of the column's bounds (so each
        term is at most 1 in magnitude).  ``"residuals"`` (``"linear"`` candidates with
        ``slope`` and ``intercept``): float64 (3 n,), per candidate the minimum and
        maximum here of the residual :func:`residuals` over the rows holding the column
        (NaN, NaN: none), then, for two datetime columns, :func:`duration_step` of the
        durations Y - X over those rows (NaN for numbers).  A ``"linear"`` check:
        every such residual within the candidate's ``lower`` and ``upper`` (a row
        holding Y but not X fails) and, with a ``step``, every duration a whole
        multiple of it.
        An ``"interval"`` check (Y of X; Y's missing value one of its values, a
        datetime X in seconds since 1970 UTC; the rows without X left out, here and
        in ``"ranges"``): without ``"intervals"``, whether the site's
        own intervals are disjoint -- the values of Y present here, sorted by their
        least X, each have their greatest X below the next one's least; with
        ``"intervals"`` (a user's rule, entries ``[low, high, code]``), whether every
        row's X lies within the interval of its value of Y (a value not listed
        fails).  ``"ranges"`` (``"interval"`` candidates): float64, length
        :func:`ranges_size` -- per candidate, per value of Y (its code), the row count
        here and the minimum and maximum of X over those rows (NaN, NaN: no row).

    Returns
    -------
    ndarray of uint8 (float64 for ``"moments"``, ``"totals"``, ``"residuals"`` and
    ``"ranges"``)
    """
    if stage not in ("check", "map", "moments", "totals", "residuals", "ranges"):
        raise ValueError(
            f"unknown rules stage {stage!r}; use 'check', 'map', 'moments', 'totals', "
            "'residuals' or 'ranges'"
        )
    codes: dict[str, np.ndarray] = {}
    numbers: dict[str, np.ndarray] = {}
    sorted_by: dict[str, np.ndarray] = {}  # an interval source's stable argsort

    def code(name: str) -> np.ndarray:
        if name not in codes:
            codes[name] = _site_codes(frame, schema[name], site)
        return codes[name]

    def number(name: str) -> np.ndarray:
        if name not in numbers:
            numbers[name] = _site_numbers(frame, schema[name], site)
        return numbers[name]

    def micros(name: str) -> tuple[np.ndarray, np.ndarray]:
        values = frame[name]
        if not pd.api.types.is_datetime64_any_dtype(values.dtype):  # as Encoder reads
            values = pd.to_datetime(values, utc=schema[name].tz is not None)
        return datetime_micros(values)

    if stage == "moments":
        return _moments(frame, schema, cands, number)
    if stage == "residuals":
        return _residual_extremes(cands, number, schema)
    if stage == "ranges":
        parts = []
        for c in cands:
            y, x = code(c["column"]), number(c["of"][0])
            held = ~np.isnan(x)  # a row without X: the rule says nothing there
            parts.append(_category_ranges(y[held], x[held], schema[c["column"]].n_levels))
        return np.concatenate([np.zeros(0)] + [p.ravel() for p in parts])
    if stage == "totals":
        return np.array(
            [np.nansum(number(c["column"]) / _magnitude(schema[c["column"]])) for c in cands],
            dtype=float,
        ).reshape(-1)
    sums = _sum_answers(cands, number)
    out: list[np.ndarray] = []
    for i, cand in enumerate(cands):
        kind, column, of = cand["kind"], cand["column"], list(cand["of"])
        if kind == "affine" and schema[column].dtype == "datetime":  # to the microsecond
            number(column), number(of[0])  # read as every stage reads them (or refused)
            (y_us, y_na), (x_us, x_na) = micros(column), micros(of[0])
            shift = round(float(cand["intercept"]) * 1e6)
            holds = bool(np.all((x_na == y_na) & (x_na | (y_us - x_us == shift))))
            out.append(np.array([holds], dtype=np.uint8))
            continue
        if kind == "order":  # Y >= X wherever Y is, X present there
            y, x = number(column), number(of[0])
            held = ~np.isnan(y)
            holds = bool(np.all(y[held] >= x[held]))  # NaN X: False
            if cand.get("ties"):  # some row with Y = X (order_point_masses)
                holds = bool(np.any(y[held] == x[held]))
            elif cand.get("apart") is not None:  # at least this many rows with Y > X
                holds = int(np.sum(y[held] > x[held])) >= int(cand["apart"])
            out.append(np.array([holds], dtype=np.uint8))
            continue
        if kind == "affine":
            a, b, d = float(cand["slope"]), float(cand["intercept"]), cand.get("decimals")
            y, x = number(column), number(of[0])
            match = affine_match(y, x, a, b, d, cand.get("tolerance"))
            holds = bool(np.all(match | (np.isnan(x) & np.isnan(y))))  # missing together
            out.append(np.array([holds], dtype=np.uint8))
            continue
        if kind == "linear":  # every residual within the rule's bounds, X where Y is
            r = residuals(number(column), number(of[0]), cand["slope"], cand["intercept"])
            held = ~np.isnan(number(column))
            inside = (r[held] >= float(cand["lower"])) & (r[held] <= float(cand["upper"]))
            step = cand.get("step")
            if step is not None:  # every duration a whole multiple of the step
                q = (number(column)[held] - number(of[0])[held]) / float(step)
                inside &= np.abs(q - np.round(q)) <= 1e-6
            out.append(np.array([bool(np.all(inside))], dtype=np.uint8))
            continue
        if kind == "sum":
            out.append(np.array([sums[i]], dtype=np.uint8))
            continue
        if kind == "interval":
            y, x = code(column), number(of[0])
            if "intervals" in cand:  # a user's rule: X within its value's interval
                holds = _within_intervals(cand["intervals"], schema[column].n_levels, y, x)
            else:  # this site's own intervals disjoint
                if of[0] not in sorted_by:  # the rows holding X, by X (NaN sorts last)
                    by_x = np.argsort(x, kind="stable")
                    sorted_by[of[0]] = by_x[: int(np.count_nonzero(~np.isnan(x)))]
                holds = _steps(y, x, sorted_by[of[0]])
            out.append(np.array([holds], dtype=np.uint8))
            continue
        dims = tuple(schema[a].n_levels for a in of)
        levels = schema[column].n_levels
        key = np.ravel_multi_index(tuple(code(a) for a in of), dims)
        if "mapping" in cand:  # a user's rule: does any row contradict it?
            table = np.full(math.prod(dims), -1, dtype=np.int64)
            entries = np.asarray(cand["mapping"], dtype=np.int64).reshape(-1, len(of) + 1)
            if entries.size:
                table[np.ravel_multi_index(tuple(entries[:, :-1].T), dims)] = entries[:, -1]
            want = table[key]
            holds = bool(np.all((want < 0) | (want == code(column))))
            out.append(np.array([holds], dtype=np.uint8))
            continue
        present = np.bincount(key * levels + code(column), minlength=math.prod(dims) * levels) > 0
        if stage == "map":
            out.append(present.astype(np.uint8))
        else:
            holds = bool(np.all(present.reshape(-1, levels).sum(axis=1) <= 1))
            out.append(np.array([holds], dtype=np.uint8))
    if not out:
        return np.zeros(0, dtype=np.uint8)
    return np.concatenate(out).astype(np.uint8)


def _category_ranges(codes: np.ndarray, x: np.ndarray, levels: int) -> np.ndarray:
    """(levels, 3): per code of Y its row count and the minimum and maximum of X over
    those rows (NaN, NaN where none)."""
    out = np.full((levels, 3), np.nan)
    out[:, 0] = np.bincount(codes, minlength=levels)[:levels]
    order = np.lexsort((x, codes))  # by code, then X: each code's first and last
    sorted_codes, sorted_x = codes[order], x[order]
    starts = np.searchsorted(sorted_codes, np.arange(levels), side="left")
    stops = np.searchsorted(sorted_codes, np.arange(levels), side="right")
    held = stops > starts
    out[held, 1] = sorted_x[starts[held]]
    out[held, 2] = sorted_x[stops[held] - 1]
    return out


def _steps(codes: np.ndarray, x: np.ndarray, order: np.ndarray) -> bool:
    """Whether the site's intervals are disjoint -- the values of Y held, sorted by
    their least X (:func:`_category_ranges`), each with its greatest X below the next
    one's least -- in O(n) given X's sort ``order`` (shared by every candidate of
    that X): with the rows sorted by X, every value of Y held must form one run (as
    many runs as values), and X must rise strictly where the value changes (a tie
    across two values is no step).  The intervals are then disjoint in order of the
    runs, and conversely disjoint intervals give exactly such runs."""
    c, xs = codes[order], x[order]
    change = c[1:] != c[:-1]
    runs = int(np.count_nonzero(change)) + 1 if c.size else 0
    held = int(np.count_nonzero(np.bincount(c))) if c.size else 0
    return runs == held and bool(np.all(xs[1:][change] > xs[:-1][change]))


def _within_intervals(
    entries: Sequence[Sequence[float]], levels: int, codes: np.ndarray, x: np.ndarray
) -> bool:
    """Whether every row holding X has it in ``[low, high]`` of the entry of its code (a
    user's interval rule, entries ``[low, high, code]``; a code with no entry: no; a row
    without X: yes, the rule says nothing there)."""
    low = np.full(levels, np.inf)  # no entry: no X is within
    high = np.full(levels, -np.inf)
    for lo, hi, c in entries:
        low[int(c)], high[int(c)] = float(lo), float(hi)
    return bool(np.all(np.isnan(x) | ((x >= low[codes]) & (x <= high[codes]))))


#: Values per block of sum candidates checked at once (rows x candidates).
_SUM_BLOCK = 1 << 18


def _sum_answers(
    cands: Sequence[Candidate], number: Callable[[str], np.ndarray]
) -> dict[int, bool]:
    """Whether each sum candidate (by its position in ``cands``) holds in every row:
    :func:`sums_match` of many candidates per call, on (rows, candidates) arrays (the
    same additions per row and candidate as one call per candidate: a wide table has
    hundreds of thousands of two-part candidates)."""
    by_parts: dict[int, list[int]] = {}
    for i, cand in enumerate(cands):
        if cand["kind"] == "sum":
            by_parts.setdefault(len(cand["of"]), []).append(i)
    out: dict[int, bool] = {}
    for parts, idx in by_parts.items():
        names = list(dict.fromkeys(n for i in idx for n in (cands[i]["column"], *cands[i]["of"])))
        pos = {n: k for k, n in enumerate(names)}
        values = np.column_stack([np.asarray(number(n), dtype=float) for n in names])
        cols = np.array([[pos[cands[i]["column"]], *(pos[n] for n in cands[i]["of"])] for i in idx])
        step = max(1, _SUM_BLOCK // max(values.shape[0], 1))
        for lo in range(0, len(idx), step):
            block = cols[lo : lo + step]
            ok = sums_match(
                values[:, block[:, 0]], [values[:, block[:, k]] for k in range(1, parts + 1)]
            )
            held = np.asarray(ok.all(axis=0), dtype=bool).tolist()
            for i, holds in zip(idx[lo : lo + step], held, strict=True):
                out[i] = bool(holds)
    return out


def _moments(
    frame: pd.DataFrame,
    schema: Schema,
    cands: Sequence[Candidate],
    number: Callable[[str], np.ndarray],
) -> np.ndarray:
    """A site's ``moments`` answer (see :func:`answer_rules`)."""
    names = _moment_columns(cands)
    index = {n: i for i, n in enumerate(names)}
    centred = [(number(n) - _centre(schema[n])) / _unit(schema[n]) for n in names]
    onehot = np.zeros((len(names), MAX_DECIMALS + 2))
    for i, n in enumerate(names):
        values = number(n)
        d = value_decimals(values[~np.isnan(values)])
        onehot[i, MAX_DECIMALS + 1 if d is None else d] = 1.0
    pairs = np.zeros((len(cands), _PAIR_MOMENTS))
    for k, c in enumerate(cands):
        x, y = centred[index[c["of"][0]]], centred[index[c["column"]]]
        both = ~(np.isnan(x) | np.isnan(y))
        x, y = x[both], y[both]
        pairs[k] = (x.size, x.sum(), y.sum(), x @ x, y @ y, x @ y)
    return np.concatenate([pairs.ravel(), onehot.ravel()])


def shortest_decimal(value: float, lo: float, hi: float) -> tuple[float, int | None]:
    """The number in [lo, hi] with the fewest decimals (0 to 15) nearest ``value``:
    ``round(value, d)`` for the smallest d that falls in the interval; ``(value, None)``
    if none does."""
    for d in range(16):
        c = round(value, d)
        if lo <= c <= hi:
            return float(c), d
    return float(value), None


def _round_up(value: float, digits: int = 3) -> float:
    """``value`` rounded up to ``digits`` significant digits (a tolerance a user reads)."""
    if value <= 0 or not math.isfinite(value):
        return float(value)
    e = math.floor(math.log10(value)) - digits + 1
    up = float(f"{math.ceil(value / 10.0**e)}e{e}")
    return up if up >= value else float(f"{math.ceil(value / 10.0**e) + 1}e{e}")


def affine_proposals(
    schema: Schema, cands: Sequence[Candidate], pooled: np.ndarray
) -> list[list[Candidate]]:
    """From the pooled moments, the affine rules to check, per candidate pair.

    For a pair (X, Y) with pooled centred moments, least squares gives the slope
    ``a = Sxy / Sxx`` and intercept, and the residual mean square ``RSS / n``.  Let
    d_Y be the most decimals any site reports for Y (None: some site's Y has no
    decimal resolution) and h = 10^-d_Y.  If Y = a X + b within h / 2 in every row
    (the rule the check asks), then the least-squares residual mean square, being the
    smallest over all lines, is at most (h / 2)^2; so a pair goes on only when

        RSS / n <= (h / 2)^2 + (float64 slack),

    i.e. R^2 >= 1 - (h / 2)^2 / var(Y): the R^2 threshold is set by Y's resolution
    (0.99999996 for a Fahrenheit column with sd 14 rounded to 0.01; Bike's atemp
    against temp, R^2 0.98, is far below its threshold).  This is a necessary condition,
    so no rule is lost; the check stage decides.

    The coefficients are then rounded to the shortest decimals within
    :data:`SNAP_SE` standard errors (``sigma / sqrt(Sxx)`` for the slope, ``sigma /
    sqrt(n)`` for the intercept given the slope, with sigma^2 the residual mean square
    but at least h^2 / 12, the variance of rounding): real relations have short
    coefficients (1.8 and 32; 1 and 0 for a copy), which rounded data give only
    approximately.  The rule rounds Y to d_Y decimals, unless X's decimals d_X plus the
    slope's fit within d_Y and the intercept's too: then ``a X + b`` falls on Y's grid
    for every real X, the real Y equals it exactly, and the rule is exact (decimals
    None; a copy of a column stays a copy of its synthetic source).

    Each pair gets two proposals: the rounded coefficients (within h / 2), and the
    least-squares ones with a ``tolerance`` of h / 2 plus a band of :data:`SNAP_SE`
    standard errors of the fitted line at the X farthest from X's mean
    (``sigma sqrt(1/n + (x - mean)^2 / Sxx)``): when Y is rounded so coarsely that the
    moments cannot pin the coefficients down to their last decimal (Y = round(20.5 X -
    419.16) in whole numbers), the true line lies within the band, so every real row
    lies within the tolerance of the fitted one.  :func:`detect_rules` keeps the first
    proposal that every site confirms.

    Returns
    -------
    list of list of dict
        Per candidate, its proposals (empty: the pair is no rule), each a candidate
        with ``slope``, ``intercept`` and ``decimals``.
    """
    names = _moment_columns(cands)
    c = len(names)
    index = {n: i for i, n in enumerate(names)}
    pairs = pooled[: _PAIR_MOMENTS * len(cands)].reshape(len(cands), _PAIR_MOMENTS)
    onehot = pooled[_PAIR_MOMENTS * len(cands) :].reshape(c, MAX_DECIMALS + 2)
    decimals: list[int | None] = []
    for counts in onehot:
        seen = np.flatnonzero(counts > 0.5)
        decimals.append(None if not seen.size or seen[-1] == MAX_DECIMALS + 1 else int(seen[-1]))
    out: list[list[Candidate]] = []
    for cand, (n, sum_x, sum_y, sq_x, sq_y, sxy_raw) in zip(cands, pairs, strict=True):
        i, j = index[cand["of"][0]], index[cand["column"]]
        if n < MIN_SUM_ROWS:
            out.append([])
            continue
        # back to centred units (powers of two: exact)
        ux, uy = _unit(schema[cand["of"][0]]), _unit(schema[cand["column"]])
        sum_x, sq_x, sum_y, sq_y = sum_x * ux, sq_x * ux * ux, sum_y * uy, sq_y * uy * uy
        sxy_raw = sxy_raw * ux * uy
        mx, my = sum_x / n, sum_y / n
        sxx = sq_x - n * mx * mx
        syy = sq_y - n * my * my
        sxy = sxy_raw - n * mx * my
        if sxx <= 0 or syy <= 0:
            out.append([])
            continue
        slope = sxy / sxx
        rss = max(syy - slope * sxy, 0.0)
        d_y, d_x = decimals[j], decimals[i]
        half = 0.5 * 10.0**-d_y if d_y is not None else 0.0
        cx, cy = _centre(schema[cand["of"][0]]), _centre(schema[cand["column"]])
        lo_y, hi_y = _bounds(schema[cand["column"]])
        scale = AFFINE_RTOL * max(abs(lo_y), abs(hi_y))
        # float64 slack of the pooled sums: a few 1e-16 of the second moments, widely
        slack = 1e-12 * sq_y / n + scale**2
        if rss / n > half**2 + slack:
            out.append([])
            continue
        lo_x, hi_x = _bounds(schema[cand["of"][0]])
        if abs(slope) * (hi_x - lo_x) <= 2.0 * (half + AFFINE_RTOL * max(abs(lo_y), abs(hi_y))):
            # the line rises over X's range by no more than a rule's band (rounding and
            # AFFINE_RTOL of Y's magnitude): a flat line passes the check as well, Y
            # being constant to that precision (1e12 +- 100), so the rule would say
            # nothing of X and draw Y's spread from X's (or, slope snapped to 0, stop
            # the fit on a rule nobody wrote): no rule, Y is modelled on its own
            out.append([])
            continue
        intercept = (my + cy) - slope * (mx + cx)
        sigma = math.sqrt(max(rss / max(n - 2.0, 1.0), half**2 / 3.0, slack))
        se_a = SNAP_SE * sigma / math.sqrt(sxx)
        a, da = shortest_decimal(slope, slope - se_a, slope + se_a)
        b0 = (my + cy) - a * (mx + cx)
        se_b = SNAP_SE * sigma / math.sqrt(n)
        b, db = shortest_decimal(b0, b0 - se_b, b0 + se_b)
        on_grid = (
            d_y is not None
            and d_x is not None
            and da is not None
            and db is not None
            and d_x + da <= d_y
            and db <= d_y
        )
        snapped = {**cand, "slope": a, "intercept": b, "decimals": None if on_grid else d_y}
        # the least-squares line, and the band around it that holds the true line over
        # X's range (SNAP_SE standard errors of the fitted value at the farthest X)
        far = max(abs(lo_x - cx - mx), abs(hi_x - cx - mx))
        band = SNAP_SE * sigma * math.sqrt(1.0 / n + far * far / sxx)
        raw = {
            **cand,
            "slope": float(slope),
            "intercept": float(intercept),
            "decimals": d_y,
            "tolerance": _round_up(half + band),
        }
        out.append([snapped, raw] if a != 0 else [raw])  # slope 0: a constant, no rule
    return out


def _mapping(schema: Schema, cand: Candidate, union: np.ndarray) -> list[list[Any]] | None:
    """The label mapping from the union of the sites' pair indicators; None if some
    combination has two values (the sites' mappings differ)."""
    levels = schema[cand["column"]].n_levels
    present = union.reshape(-1, levels) > 0
    if np.any(present.sum(axis=1) > 1):
        return None
    dims = tuple(schema[a].n_levels for a in cand["of"])
    cats = [schema[a].categories or [] for a in cand["of"]]
    target = schema[cand["column"]].categories or []
    entries = []
    for cell in np.flatnonzero(present.any(axis=1)):
        idx = np.unravel_index(int(cell), dims)
        b = int(np.flatnonzero(present[cell])[0])
        entries.append([plain(c[i]) for c, i in zip(cats, idx, strict=True)] + [plain(target[b])])
    return entries


def detect_rules(
    schema: Schema,
    ask: Ask,
    sites: Sequence[str],
    n_total: int,
    descriptions: Sequence[Mapping[str, Any]] | None = None,
    *,
    near_linear: bool = False,
    exclude: set[str] | frozenset[str] = frozenset(),
) -> list[Rule]:
    """Run detection (affine moments and check; check, check, map; interval check and
    ranges; with ``near_linear``, moments and residuals) through ``ask``; the rules to
    use.

    Parameters
    ----------
    schema : Schema
        The merged schema (its ``rules`` are ignored).
    ask : callable
        ``ask(stage, candidates)`` -> one answer per site, as :func:`answer_rules`
        gives (in a federation: a ``rules`` message to every site).
    sites : sequence of str
        The sites' names (for messages).
    n_total : int
        Rows over all sites.
    descriptions : sequence of dict, optional
        The sites' setup descriptions (:func:`~fits.core.schema.describe_table`), whose
        per-site minima and maxima rule out affine pairs before their moments are asked
        (:func:`extremes_agree`); None: every pair is asked.
    near_linear : bool
        Then look for near-linear columns (:func:`detect_near_linear`) among the
        columns no exact rule sets or sums (default False).
    exclude : set of str
        Columns that may not be a near-linear rule's column (boosted ones).

    Returns
    -------
    list of Rule
        :func:`select_rules` of the rules every site confirmed, the ``"interval"``
        ones (:func:`detect_intervals`, for discrete columns no other rule sets), and
        the ``"linear"`` ones, in chain order.
    """
    found: list[tuple[Candidate, list[list[Any]] | None]] = []
    holding: list[Candidate] = []
    found += [(c, None) for c in _detect_affine(schema, ask, sites, n_total, descriptions)]
    found += [(c, None) for c in detect_shifts(schema, ask, sites, n_total, descriptions)]
    totals = _ask_totals(schema, ask, sites, n_total, descriptions, {c["column"] for c, _ in found})
    for size in (1, 2):
        skip = {c["column"] for c, _ in found} | {c["column"] for c in holding}
        cands = candidates(schema, n_total, size=size, skip=skip, totals=totals)
        if not cands:
            continue
        answers = ask("check", cands)
        _check_lengths(answers, len(cands), sites, "check")
        ok = np.all(np.stack(answers) == 1, axis=0)
        for cand, good in zip(cands, ok, strict=True):
            if not good:
                continue
            if cand["kind"] == "sum":
                found.append((cand, None))
            else:
                holding.append(cand)
        if holding and size == 1:  # map the one-column functions before trying pairs
            found += _map(schema, holding, ask, sites)
            holding = []
    if holding:
        found += _map(schema, holding, ask, sites)
    rules = [_rule(c, mapping) for c, mapping in found]
    derived = {r.column for r in rules if r.kind == "affine"}  # each one is selected
    rules = [r for r in rules if r.kind != "sum" or derived.isdisjoint(r.of)]
    chosen = select_rules(schema, rules)
    pos = {c: i for i, c in enumerate(schema.order)}
    # interval rules for the discrete columns no function rule sets, from continuous
    # sources the chain draws as themselves (not set after it by an affine or sum rule)
    after_chain = {r.column for r in chosen if r.kind in ("affine", "sum")}
    steps = detect_intervals(
        schema, ask, sites, n_total, skip={r.column for r in chosen}, sources_skip=after_chain
    )
    if steps:
        chosen = sorted([*chosen, *steps], key=lambda r: pos[r.column])
    taken = {r.column for r in chosen} | {p for r in chosen if r.kind == "sum" for p in r.of}
    affine = {r.column for r in chosen if r.kind == "affine"}  # not in the chain
    linear = (
        detect_near_linear(
            schema, ask, sites, n_total, skip=taken | set(exclude), sources_skip=affine
        )
        if near_linear
        else []
    )
    # order rules for the continuous columns no rule sets or draws as a residual (a
    # near-linear pair keeps its real residuals' range, a datetime pair so its order),
    # from sources the chain draws as themselves
    residual = {r.column for r in linear}
    ruled = taken | residual | {r.of[0] for r in linear}
    order = detect_order(
        schema,
        ask,
        sites,
        n_total,
        descriptions,
        skip=ruled | set(exclude),
        sources_skip=after_chain | residual,
        unkept=set(exclude) - ruled,
    )
    return sorted([*chosen, *linear, *order], key=lambda r: pos[r.column])


def _ask_totals(
    schema: Schema,
    ask: Ask,
    sites: Sequence[str],
    n_total: int,
    descriptions: Sequence[Mapping[str, Any]] | None,
    skip: set[str],
) -> SumTotals | None:
    """The ``totals`` stage, when the bounds leave more than
    :data:`TOTALS_FROM_CANDIDATES` sum candidates; None otherwise (every candidate the
    bounds allow is checked).  ``ask("totals", ...)`` may return one answer per site or
    their sum (secure aggregation)."""
    if sum_candidate_count(schema, n_total, skip) <= TOTALS_FROM_CANDIDATES:
        return None
    names = sum_columns(schema)
    answers = ask("totals", [{"kind": "total", "column": n} for n in names])
    if descriptions is not None and len(descriptions) == len(sites):
        rows = [int(d.get("n_rows", n_total)) for d in descriptions]
    else:  # unknown: every site as big as the federation (a looser bound)
        rows = [n_total] * len(sites)
    return sum_totals(schema, names, answers, rows, descriptions)


def _rule(cand: Candidate, mapping: list[list[Any]] | None) -> Rule:
    if cand["kind"] == "affine":
        return Rule(
            cand["column"],
            list(cand["of"]),
            "affine",
            slope=float(cand["slope"]),
            intercept=float(cand["intercept"]),
            decimals=cand["decimals"],
            tolerance=cand.get("tolerance"),
        )
    return Rule(cand["column"], list(cand["of"]), cand["kind"], mapping)


def _pooled_moments(ask: Ask, cands: list[Candidate]) -> np.ndarray:
    """The ``moments`` stage for ``cands``: the sites' answers (one per site, or their
    sum under secure aggregation), checked and summed."""
    answers = ask("moments", cands)
    size = moments_size(cands)
    for answer in answers:
        if np.shape(answer) != (size,) or not np.all(np.isfinite(answer)):
            raise SchemaError(f"a moments answer has shape {np.shape(answer)}, not ({size},)")
    return np.sum(np.stack([np.asarray(a, dtype=float) for a in answers]), axis=0)


def _detect_affine(
    schema: Schema,
    ask: Ask,
    sites: Sequence[str],
    n_total: int,
    descriptions: Sequence[Mapping[str, Any]] | None,
) -> list[Candidate]:
    """The moments stage, then one check of the proposals; the affine rules every site
    confirmed (the first confirmed proposal per pair).  ``ask("moments", ...)`` may
    return one answer per site or their sum (secure aggregation): they are summed."""
    cands = affine_candidates(schema, n_total)
    if descriptions is not None:
        memo: ExtremesMemo = {}
        cands = [c for c in cands if extremes_agree(c, descriptions, memo=memo)]
    if not cands:
        return []
    pooled = _pooled_moments(ask, cands)
    proposals = affine_proposals(schema, cands, pooled)
    flat = [p for ps in proposals for p in ps]
    if not flat:
        return []
    checks = ask("check", flat)
    _check_lengths(checks, len(flat), sites, "check")
    ok = iter(np.all(np.stack(checks) == 1, axis=0))
    out = []
    for ps in proposals:
        good = [p for p, holds in zip(ps, [next(ok) for _ in ps], strict=True) if holds]
        if good:
            out.append(good[0])
    return out


def _check_lengths(answers: Sequence[np.ndarray], n: int, sites: Sequence[str], stage: str) -> None:
    for answer, site in zip(answers, sites, strict=True):
        if np.shape(answer) != (n,):
            raise SchemaError(f"{site}: its {stage} answer has {np.size(answer)} values, not {n}")


def _map(
    schema: Schema, holding: list[Candidate], ask: Ask, sites: Sequence[str]
) -> list[tuple[Candidate, list[list[Any]] | None]]:
    answers = ask("map", holding)
    _check_lengths(answers, map_size(schema, holding), sites, "map")
    union = np.sum(np.stack(answers).astype(np.int64), axis=0)
    out: list[tuple[Candidate, list[list[Any]] | None]] = []
    start = 0
    for cand in holding:
        n = _cells(schema, cand["of"]) * schema[cand["column"]].n_levels
        mapping = _mapping(schema, cand, union[start : start + n])
        start += n
        if mapping is not None:
            out.append((cand, mapping))
    return out


def select_rules(schema: Schema, rules: Sequence[Rule]) -> list[Rule]:
    """At most one rule per column, with its determinants before it in the chain.

    Columns are taken from the last in the chain order to the first; a column gets the
    rule with the fewest ``of`` columns (then the earliest in the chain) whose ``of``
    columns all come before it.  So of two columns that determine each other the later
    one is generated, and no rule's column is generated from a column drawn after it.
    Returned in chain order.
    """
    pos = {c: i for i, c in enumerate(schema.order)}
    chosen: dict[str, Rule] = {}
    for column in reversed(schema.order):
        usable = [
            r for r in rules if r.column == column and all(pos[a] < pos[column] for a in r.of)
        ]
        if usable:
            chosen[column] = min(usable, key=lambda r: (len(r.of), sorted(pos[a] for a in r.of)))
    return [chosen[c] for c in schema.order if c in chosen]


def _code_mapping(schema: Schema, rule: Rule) -> list[list[int]]:
    """A function rule's mapping as codes (for the sites to verify)."""
    index = [
        {plain(v): i for i, v in enumerate(schema[c].categories or [])}
        for c in [*rule.of, rule.column]
    ]
    return [[index[k][plain(v)] for k, v in enumerate(entry)] for entry in rule.mapping or []]


def verify_rules(schema: Schema, ask: Ask, sites: Sequence[str]) -> None:
    """Ask every site whether the schema's (user-given) rules hold in its rows.

    Raises
    ------
    SchemaError
        Naming the first rule a site contradicts, the site, and the fix.
    """
    rules = schema.rules or []
    if not rules:
        return
    cands: list[Candidate] = []
    for rule in rules:
        cand: Candidate = {"kind": rule.kind, "column": rule.column, "of": list(rule.of)}
        if rule.kind == "function":
            cand["mapping"] = _code_mapping(schema, rule)
        if rule.kind == "interval":
            cand["intervals"] = _interval_entries(schema, rule)
        if rule.kind == "linear":
            cand.update(
                slope=rule.slope, intercept=rule.intercept, lower=rule.lower, upper=rule.upper
            )
            if rule.step is not None:
                cand["step"] = rule.step
        if rule.kind == "affine":
            cand.update(slope=rule.slope, intercept=rule.intercept, decimals=rule.decimals)
            if rule.tolerance is not None:
                cand["tolerance"] = rule.tolerance
        cands.append(cand)
    answers = ask("check", cands)
    _check_lengths(answers, len(cands), sites, "check")
    for k, rule in enumerate(rules):
        against = [s for s, a in zip(sites, answers, strict=True) if a[k] != 1]
        if against:
            if rule.kind == "linear":
                clock = schema[rule.column].dtype == "datetime"  # told as durations
                off = (
                    "durations outside those bounds"
                    + (" or off its step" if rule.step is not None else "")
                    if clock
                    else f"residuals outside [{rule.lower}, {rule.upper}]"
                )
                unit = (
                    ' (seconds about its "intercept": a duration is intercept + residual)'
                    if clock
                    else ""
                )
                raise SchemaError(
                    f"the schema's near-linear rule for column {rule.column!r} "
                    f"({rule.describe(clock=clock)}) has {off} "
                    f"(or {rule.of[0]!r} missing where {rule.column!r} is not) at "
                    f'{", ".join(against)}; widen the rule\'s "lower"/"upper"{unit}'
                    + (' or remove its "step"' if rule.step is not None else "")
                    + ', remove it from "rules" in the schema, or switch near-linear '
                    "columns off"
                )
            if rule.kind == "order":
                raise SchemaError(
                    f"the schema's order rule {rule.describe()} does not hold in every row "
                    f"at {', '.join(against)}: some row there has {rule.column!r} below "
                    f"{rule.of[0]!r} (or {rule.of[0]!r} missing where {rule.column!r} is "
                    'not); remove the rule from "rules" in the schema (or switch rules '
                    "off), or fix the data"
                )
            if rule.kind == "interval":
                raise SchemaError(
                    f"the schema's interval rule for column {rule.column!r} "
                    f"({rule.describe()}) does not hold in every row at "
                    f"{', '.join(against)}: some row there has {rule.of[0]!r} outside the "
                    f"interval of its value of {rule.column!r} (or a value the rule does not "
                    'list); fix that value\'s [low, high] in "intervals" (detect the schema '
                    'again to see the real ones), remove the rule from "rules" in the schema, '
                    "or switch rules off"
                )
            clock = schema[rule.column].dtype == "datetime"
            raise SchemaError(
                f"the schema's rule for column {rule.column!r} "
                f"({rule.describe(clock=clock)}) does not "
                f'hold in every row at {", ".join(against)}; remove it from "rules" in the '
                "schema (or switch rules off), or fix the data"
            )


def dependent_codes(
    schema: Schema, rule: Rule, determinant_codes: Sequence[np.ndarray]
) -> np.ndarray:
    """A function rule's column as codes, from its determinants' codes; -1 where the
    combination is not in the mapping (never seen: the chain draws it)."""
    dims = tuple(schema[a].n_levels for a in rule.of)
    table = np.full(math.prod(dims), -1, dtype=np.int64)
    entries = np.asarray(_code_mapping(schema, rule), dtype=np.int64).reshape(-1, len(dims) + 1)
    if entries.size:
        table[np.ravel_multi_index(tuple(entries[:, :-1].T), dims)] = entries[:, -1]
    return table[np.ravel_multi_index(tuple(determinant_codes), dims)]


def rules_by_column(rules: Sequence[Rule] | None) -> Mapping[str, Rule]:
    """The rules keyed by their column."""
    return {r.column: r for r in rules or []}


# ------------------------------------------------------------ near-linear columns
def residuals(y: np.ndarray, x: np.ndarray, slope: float, intercept: float) -> np.ndarray:
    """A ``"linear"`` rule's residual ``y - (slope * x + intercept)`` in float64 (NaN
    where ``y`` or ``x`` is missing).  The one formula the sites (residual bounds,
    check, modelled table) and the known values use, so the same numbers give the same
    residual bit for bit."""
    ax = float(slope) * np.asarray(x, dtype=float)
    return np.asarray(y, dtype=float) - (ax + float(intercept))


#: The units a near-linear pair of datetime columns' durations can be whole multiples of
#: (seconds: a week, a day, an hour, a minute, a second), coarsest first; each divides
#: the ones before it, so the finest unit the sites report divides every duration.
DURATION_STEPS = (604_800.0, 86_400.0, 3_600.0, 60.0, 1.0)


def duration_step(durations: np.ndarray) -> float:
    """The coarsest of :data:`DURATION_STEPS` that every duration (seconds, NaN
    ignored) is a whole multiple of, to 1e-6 of the step; 0.0 if none (sub-second
    durations); NaN if there is no duration."""
    d = np.asarray(durations, dtype=float)
    d = d[~np.isnan(d)]
    if not d.size:
        return float("nan")
    for step in DURATION_STEPS:
        q = d / step
        if np.all(np.abs(q - np.round(q)) <= 1e-6):
            return step
    return 0.0


def _residual_extremes(
    cands: Sequence[Candidate], number: Callable[[str], np.ndarray], schema: Schema
) -> np.ndarray:
    """A site's ``residuals`` answer: per candidate, the min and max of its residual
    and, for two datetime columns, :func:`duration_step` of its durations (NaN for two
    number columns)."""
    out = np.full((len(cands), 3), np.nan)
    for k, c in enumerate(cands):
        y, x = number(c["column"]), number(c["of"][0])
        r = residuals(y, x, c["slope"], c["intercept"])
        held = ~np.isnan(r)
        if held.any():
            out[k, :2] = (r[held].min(), r[held].max())
            if schema[c["column"]].dtype == "datetime":
                out[k, 2] = duration_step(y[held] - x[held])
    return out.ravel()


def _linear_source(spec: ColumnSpec) -> bool:
    """A column a near-linear rule can start from: continuous (numbers or datetimes,
    read as seconds since 1970 UTC) in every row, not constant (its chain value is
    then its value)."""
    return (
        spec.kind == "continuous"
        and spec.is_modelled
        and spec.indicates is None
        and not spec.past_float
        and not spec.missing
        and _summable(spec)
        and _bounds(spec)[0] < _bounds(spec)[1]
    )


def _linear_dependent(spec: ColumnSpec) -> bool:
    """A column a near-linear rule can draw as its residual: continuous (numbers or
    datetimes), no point mass, not constant (missing values allowed: the residual is
    missing there)."""
    return (
        spec.kind == "continuous"
        and spec.is_modelled
        and spec.indicates is None
        and not spec.past_float
        and spec.point_mass is None
        and _summable(spec)
        and _bounds(spec)[0] < _bounds(spec)[1]
    )


def near_linear_candidates(
    schema: Schema,
    n_total: int,
    *,
    skip: set[str] | frozenset[str] = frozenset(),
    sources_skip: set[str] | frozenset[str] = frozenset(),
) -> list[Candidate]:
    """The (X, Y) pairs whose moments the near-linear stage asks: Y continuous (no
    point mass, not constant, not in ``skip``: columns an exact rule sets or uses as a
    sum's part, boosted columns), X continuous with a value in every row, earlier in
    the chain, not in ``sources_skip`` (columns not in the chain), both datetimes or
    neither (two datetimes: :func:`near_linear_fits` takes slope 1).  At most
    :data:`MAX_NEAR_LINEAR_PAIRS`, the first in chain order (by Y, then X); none with
    fewer than :data:`MIN_SUM_ROWS` rows.

    Returns
    -------
    list of dict
        ``{"kind": "linear", "column": Y, "of": [X]}``.
    """
    if n_total < MIN_SUM_ROWS:
        return []
    cols = {c.name: c for c in schema.columns}
    out: list[Candidate] = []
    for k, y in enumerate(schema.order):
        if y in skip or not _linear_dependent(cols[y]):
            continue
        clock = cols[y].dtype == "datetime"
        for x in schema.order[:k]:
            if x in sources_skip or not _linear_source(cols[x]):
                continue
            if (cols[x].dtype == "datetime") != clock:  # a datetime only on a datetime
                continue
            out.append({"kind": "linear", "column": y, "of": [x]})
            if len(out) == MAX_NEAR_LINEAR_PAIRS:
                total = _near_linear_pair_count(schema, skip, sources_skip)
                if total > MAX_NEAR_LINEAR_PAIRS:
                    _cap_note(
                        "near-linear columns: of {total:,} candidate pairs the search",
                        total,
                        MAX_NEAR_LINEAR_PAIRS,
                        y,
                        "a later column nearly linear in another is drawn by the chain, "
                        "not as its residual",
                    )
                return out
    return out


def _near_linear_pair_count(
    schema: Schema,
    skip: set[str] | frozenset[str],
    sources_skip: set[str] | frozenset[str],
) -> int:
    """The number of pairs :func:`near_linear_candidates` would ask without its cap
    (one pass over the chain, counting the sources before each column)."""
    cols = {c.name: c for c in schema.columns}
    sources = {False: 0, True: 0}  # by clock: a datetime pairs only with a datetime
    total = 0
    for name in schema.order:
        spec, clock = cols[name], cols[name].dtype == "datetime"
        if name not in skip and _linear_dependent(spec):
            total += sources[clock]
        if name not in sources_skip and _linear_source(spec):
            sources[clock] += 1
    return total


def near_linear_fits(
    schema: Schema, cands: Sequence[Candidate], pooled: np.ndarray
) -> list[tuple[float, float, float] | None]:
    """Per candidate, the pooled least-squares line ``Y = slope X + intercept`` and its
    R^2, from the summed ``moments`` answers (:func:`moments_size` layout); None with
    fewer than :data:`MIN_SUM_ROWS` rows holding both or a constant column.

    With the centred, scaled sums undone (powers of two: exact), S_xx = sum x^2 -
    n mean_x^2, S_yy and S_xy alike: slope = S_xy / S_xx, intercept = mean_y - slope
    mean_x (in the columns' units), R^2 = S_xy^2 / (S_xx S_yy) (docs/method.md,
    "Near-linear columns")."""
    pairs = pooled[: _PAIR_MOMENTS * len(cands)].reshape(len(cands), _PAIR_MOMENTS)
    cols = {c.name: c for c in schema.columns}  # schema[name] looks through every column
    out: list[tuple[float, float, float] | None] = []
    for cand, (n, sum_x, sum_y, sq_x, sq_y, sxy_raw) in zip(cands, pairs, strict=True):
        sx, sy = cols[cand["of"][0]], cols[cand["column"]]
        if n < MIN_SUM_ROWS:
            out.append(None)
            continue
        ux, uy = _unit(sx), _unit(sy)
        sum_x, sq_x, sum_y, sq_y = sum_x * ux, sq_x * ux * ux, sum_y * uy, sq_y * uy * uy
        sxy_raw = sxy_raw * ux * uy
        mx, my = sum_x / n, sum_y / n
        sxx, syy, sxy = sq_x - n * mx * mx, sq_y - n * my * my, sxy_raw - n * mx * my
        if sxx <= 0 or syy <= 0:
            out.append(None)
            continue
        if sx.dtype == "datetime":  # two clocks: Y = X + intercept + R, R + intercept the
            # duration (slope 1, not fitted: a fitted slope off 1 by its noise would
            # stretch every duration with X); R^2 = 1 - S_rr / S_yy, S_rr = sum of the
            # squared centred differences Y - X
            slope, srr = 1.0, syy - 2.0 * sxy + sxx
            r2 = 1.0 - srr / syy
        else:
            slope = sxy / sxx
            r2 = sxy * sxy / (sxx * syy)
        intercept = (my + _centre(sy)) - slope * (mx + _centre(sx))
        out.append((float(slope), float(intercept), float(min(max(r2, 0.0), 1.0))))
    return out


def select_near_linear(
    cands: Sequence[Candidate], fits: Sequence[tuple[float, float, float] | None]
) -> list[Candidate]:
    """The pairs to draw as residuals: of the pairs with R^2 >= :data:`NEAR_LINEAR_R2`,
    from the highest R^2 down (ties in chain order), a pair is kept unless its Y is
    already a kept pair's X or Y, or its X a kept pair's Y.  So every source is drawn
    as itself, every residual's column is no other rule's source, each Y has one rule,
    and a Y whose best source became another pair's residual takes its best source
    left (of near-copies c0, c1, c2, ..., each later one on c0).

    Returns
    -------
    list of dict
        Candidates with ``slope``, ``intercept`` and ``r2``.
    """
    qualified = [
        {**cand, "slope": fit[0], "intercept": fit[1], "r2": fit[2]}
        for cand, fit in zip(cands, fits, strict=True)
        if fit is not None and fit[2] >= NEAR_LINEAR_R2
    ]
    kept: list[Candidate] = []
    ys: set[str] = set()
    xs: set[str] = set()
    for cand in sorted(qualified, key=lambda c: -c["r2"]):  # stable: chain order
        y, x = cand["column"], cand["of"][0]
        if y in ys or y in xs or x in ys:
            continue
        kept.append(cand)
        ys.add(y)
        xs.add(x)
    return kept


def detect_near_linear(
    schema: Schema,
    ask: Ask,
    sites: Sequence[str],
    n_total: int,
    *,
    skip: set[str] | frozenset[str] = frozenset(),
    sources_skip: set[str] | frozenset[str] = frozenset(),
) -> list[Rule]:
    """The near-linear stages: ``moments`` of :func:`near_linear_candidates` (summed,
    maskable), :func:`select_near_linear`, then ``residuals``: each site's min and max
    of each kept pair's residual, merged (the smallest minimum, the largest maximum)
    into the rule's ``lower`` and ``upper``.  For two datetime columns the sites also
    report the coarsest unit of :data:`DURATION_STEPS` their durations are whole
    multiples of; the finest of these (which divides every real duration) becomes the
    rule's ``step``, the intercept is rounded to a whole multiple of it and the bounds
    moved with it (:func:`_on_step`), so intercept + lower and intercept + upper are
    the shortest and longest real durations, and a fit draws durations on that step
    (whole days where every real stay is).  A pair whose residual is constant or
    held by no row is dropped, and the pairs are selected again without it (one more
    ``residuals`` round for the pairs it let in): so a column copied exactly where it
    is present does not keep its source and itself from their other sources.

    Returns
    -------
    list of Rule
        ``"linear"`` rules, in chain order of their columns.
    """
    cands = near_linear_candidates(schema, n_total, skip=skip, sources_skip=sources_skip)
    if not cands:
        return []
    pooled = _pooled_moments(ask, cands)
    lines = near_linear_fits(schema, cands, pooled)
    bounds: dict[tuple[str, str], tuple[float, float, float | None] | None] = {}
    while True:
        kept = select_near_linear(cands, lines)
        # a dropped pair (a constant residual: Y a copy of X where Y is present, which
        # the exact rules do not take when Y has missing values) must not block the
        # others of its columns: select again without it, asking only the new pairs
        new = [c for c in kept if (c["column"], c["of"][0]) not in bounds]
        if not new:
            break
        for key, b in zip(
            [(c["column"], c["of"][0]) for c in new],
            _residual_bounds(ask, sites, new),
            strict=True,
        ):
            bounds[key] = b
        dropped = {key for key, b in bounds.items() if b is None}
        lines = [
            None if (c["column"], c["of"][0]) in dropped else f
            for c, f in zip(cands, lines, strict=True)
        ]
    rules = []
    for cand in kept:
        b = bounds[(cand["column"], cand["of"][0])]
        assert b is not None  # dropped pairs are not selected
        intercept, lower, upper = _on_step(float(cand["intercept"]), b[0], b[1], b[2])
        rules.append(
            Rule(
                cand["column"],
                list(cand["of"]),
                "linear",
                slope=float(cand["slope"]),
                intercept=intercept,
                lower=lower,
                upper=upper,
                step=b[2],
            )
        )
    pos = {c: i for i, c in enumerate(schema.order)}
    return sorted(rules, key=lambda r: pos[r.column])


def _residual_bounds(
    ask: Ask, sites: Sequence[str], kept: Sequence[Candidate]
) -> list[tuple[float, float, float | None] | None]:
    """The ``residuals`` stage for ``kept``: per pair the smallest minimum and the
    largest maximum of its residual over the sites, and the durations' step (the
    smallest unit a site holding rows reports; None for numbers, or where a site's
    durations are on no unit of :data:`DURATION_STEPS`); None where no row holds it or
    the residual is constant, also where it is so once on the durations' step (one
    hour, and one hour and a microsecond in one row: the pair is then dropped)."""
    asked = [{k: c[k] for k in ("kind", "column", "of", "slope", "intercept")} for c in kept]
    extremes = ask("residuals", asked)
    _check_lengths(extremes, 3 * len(asked), sites, "residuals")
    both = np.stack([np.asarray(e, dtype=float).reshape(-1, 3) for e in extremes])
    out: list[tuple[float, float, float | None] | None] = []
    for k, cand in enumerate(asked):
        lows, highs, steps = both[:, k, 0], both[:, k, 1], both[:, k, 2]
        held = ~np.isnan(lows)
        if not held.any():
            out.append(None)
            continue
        lo, hi = float(lows[held].min()), float(highs[held].max())
        ok = math.isfinite(lo) and math.isfinite(hi) and lo < hi
        told = steps[held & ~np.isnan(steps)]
        step = float(told.min()) if told.size and told.min() > 0 else None
        if ok and step is not None:  # durations within 1e-6 of one step: constant on it
            _, low, high = _on_step(float(cand["intercept"]), lo, hi, step)
            ok = low < high
        out.append((lo, hi, step) if ok else None)
    return out


def _on_step(
    intercept: float, lower: float, upper: float, step: float | None
) -> tuple[float, float, float]:
    """A datetime pair's intercept rounded to a whole multiple of its durations'
    ``step``, and the residual's bounds moved with it: the real durations
    ``intercept + lower`` and ``intercept + upper`` (whole multiples of the step, up to
    float64 rounding, which the rounding here removes) stay what they are.  No step:
    unchanged."""
    if step is None:
        return intercept, lower, upper
    snapped = round(intercept / step) * step
    shortest = round((intercept + lower) / step) * step
    longest = round((intercept + upper) / step) * step
    return float(snapped), float(shortest - snapped), float(longest - snapped)


# ------------------------------------------------------------ interval rules
def _interval_source(spec: ColumnSpec) -> bool:
    """A column an interval rule can start from: continuous numbers or datetimes (read
    as seconds since 1970 UTC, as every stage reads them), not constant, not whole
    numbers past 2**53 (their float64 values would tie distinct numbers).  Missing
    values are allowed: the rule holds in the rows holding X and says nothing where X
    is missing (every stage leaves those rows out; the chain draws Y there).  An
    ordinal column is discrete: a step function of it is a ``"function"`` rule, found
    by the function rounds."""
    return (
        spec.kind == "continuous"
        and spec.is_modelled
        and spec.indicates is None
        and not spec.past_float
        and _bounds(spec)[0] < _bounds(spec)[1]
    )


def sets_every_row(schema: Schema, rule: Rule) -> bool:
    """Whether ``rule`` sets its column in every row, so the column needs no kernel (no
    tuning, no relevance search): a sum rule, or an interval rule whose source has no
    missing values (where the source is missing, the chain draws the column)."""
    if rule.kind == "sum":
        return True
    return rule.kind == "interval" and not schema[rule.of[0]].missing


def _interval_dependent(spec: ColumnSpec) -> bool:
    """A column an interval rule can set: discrete (nominal or ordinal: booleans, text
    flags, numbered groups) with 2 to :data:`MAX_INTERVAL_LEVELS` values.  Missing is
    one of them (``None`` among the categories, its own code): a column with missing
    values qualifies only where its missing rows, too, occupy one interval of X of
    their own, as every other value's rows must."""
    return (
        spec.is_discrete
        and spec.is_modelled
        and spec.indicates is None
        and 2 <= spec.n_levels <= MAX_INTERVAL_LEVELS
    )


def interval_candidates(
    schema: Schema,
    n_total: int,
    *,
    skip: set[str] | frozenset[str] = frozenset(),
    sources_skip: set[str] | frozenset[str] = frozenset(),
) -> list[Candidate]:
    """The (X, Y) pairs an interval check asks: Y discrete (:func:`_interval_dependent`),
    not in ``skip`` (columns another rule sets), X continuous numbers in every row
    (:func:`_interval_source`), earlier in the chain, not in ``sources_skip`` (columns
    an affine or a sum rule sets after the chain is drawn).  None with fewer than
    :data:`MIN_SUM_ROWS` rows, and no Y with fewer than :data:`MIN_ROWS_PER_CELL` rows
    per value in the federation.  At most :data:`MAX_INTERVAL_PAIRS`, the first in
    chain order (by Y, then X), with a :class:`~fits.core.schema.DataNote` when the cap
    leaves pairs out.

    Returns
    -------
    list of dict
        ``{"kind": "interval", "column": Y, "of": [X]}``.
    """
    if n_total < MIN_SUM_ROWS:
        return []
    cols = {c.name: c for c in schema.columns}
    sources = [x for x in schema.order if x not in sources_skip and _interval_source(cols[x])]
    pos = {c: i for i, c in enumerate(schema.order)}
    out: list[Candidate] = []
    total = 0
    for y in schema.order:
        spec = cols[y]
        if y in skip or not _interval_dependent(spec):
            continue
        if n_total < MIN_ROWS_PER_CELL * spec.n_levels:
            continue
        for x in sources:
            if pos[x] >= pos[y]:
                break
            total += 1
            if len(out) < MAX_INTERVAL_PAIRS:
                out.append({"kind": "interval", "column": y, "of": [x]})
    if total > MAX_INTERVAL_PAIRS:
        _cap_note(
            "interval rules: of {total:,} candidate pairs the search",
            total,
            MAX_INTERVAL_PAIRS,
            out[-1]["column"],
            "a later discrete column that is a step function of a number column is "
            "drawn by the chain, not by a rule",
        )
    return out


def _cap_note(search: str, total: int, cap: int, column: str, missed: str) -> None:
    """The :class:`~fits.core.schema.DataNote` of a pair search that stops at its cap
    (``search`` formatted with ``total``; ``missed``: what happens to the pairs left
    out), with the fix: put the pair's columns earlier in the chain."""
    warnings.warn(
        f"{search.format(total=total)} looks at the first {cap:,} in chain order (through "
        f"column {column!r}), so {missed}; to have a pair looked at, put its two columns "
        "earlier in the chain (--order; Python: order=[...])",
        DataNote,
        stacklevel=3,
    )


def ranges_size(schema: Schema, cands: Sequence[Candidate]) -> int:
    """Length of a site's ``ranges`` answer: 3 per value of each candidate's Y (its row
    count, the minimum and the maximum of X)."""
    return int(sum(3 * schema[c["column"]].n_levels for c in cands))


def _bound_value(spec: ColumnSpec, v: float) -> float | int | str:
    """An interval's end as the schema writes it: a whole number for an integer
    column (``18``, not ``18.0``), ISO 8601 text for a datetime column
    (:func:`fits._dates.seconds_text`: ``"2019-12-31"`` for whole days, the offset of
    its time zone where it has one; read back to the same seconds exactly), else the
    float."""
    if spec.dtype == "datetime":
        return seconds_text(v, tz=spec.tz, date_only=spec.date_only)
    if spec.dtype == "int" and float(v).is_integer():
        return int(v)
    return float(v)


def interval_rules(
    schema: Schema, cands: Sequence[Candidate], answers: Sequence[np.ndarray]
) -> list[Rule | None]:
    """Per candidate, the interval rule the sites' ``ranges`` answers give, or None.

    Per value of Y the answers merge into the pooled row count (the sum), the least
    minimum and the greatest maximum of X.  A rule needs at least
    :data:`MIN_ROWS_PER_CELL` rows of every value of Y in the federation (a rare value
    alone in a gap of X is no evidence of a step); then the values, sorted by their
    minima, must have strictly disjoint intervals, each maximum below the next
    minimum.  That is the rule, and it holds in every row of every site with no
    further check: each row's X lies within its own value's merged interval (the
    interval holds every site's minimum and maximum of that value), and the intervals
    are disjoint, so the row lies in no other value's interval, and in the cell
    (:func:`fits._exact.interval_cuts`) of its own value.  Conversely, if Y is a step
    function of X in every row, the merged intervals are disjoint: nothing true is
    lost.  Where X has missing values the answers count the rows holding X only, the
    rule holds in those, and a value of Y held only where X is missing is left out of
    the rule (at least two values must remain).
    """
    blocks = [np.asarray(a, dtype=float) for a in answers]
    out: list[Rule | None] = []
    start = 0
    for cand in cands:
        dep, src = schema[cand["column"]], schema[cand["of"][0]]
        n = dep.n_levels
        parts = np.stack([b[start : start + 3 * n].reshape(n, 3) for b in blocks])
        start += 3 * n
        counts = parts[:, :, 0].sum(axis=0)
        with warnings.catch_warnings():  # an all-NaN slice: a value no site holds
            warnings.simplefilter("ignore", RuntimeWarning)
            lows = np.nanmin(parts[:, :, 1], axis=0)
            highs = np.nanmax(parts[:, :, 2], axis=0)
        if src.missing:  # a value held only where X is missing: not in the rule
            seen = counts > 0
            if np.count_nonzero(seen) < 2:  # one value (or none) where X is held
                out.append(None)
                continue
            counts, lows, highs = counts[seen], lows[seen], highs[seen]
            codes = np.flatnonzero(seen)
        else:
            codes = np.arange(n)
        if np.any(counts < MIN_ROWS_PER_CELL) or not np.all(np.isfinite(lows) & np.isfinite(highs)):
            out.append(None)
            continue
        order = np.argsort(lows, kind="stable")
        lows, highs = lows[order], highs[order]
        if not np.all(highs[:-1] < lows[1:]):
            out.append(None)
            continue
        cats = dep.categories or []
        entries = [
            [_bound_value(src, lo), _bound_value(src, hi), plain(cats[int(c)])]
            for lo, hi, c in zip(lows.tolist(), highs.tolist(), codes[order].tolist(), strict=True)
        ]
        out.append(Rule(dep.name, [src.name], "interval", intervals=entries))
    return out


def detect_intervals(
    schema: Schema,
    ask: Ask,
    sites: Sequence[str],
    n_total: int,
    *,
    skip: set[str] | frozenset[str] = frozenset(),
    sources_skip: set[str] | frozenset[str] = frozenset(),
) -> list[Rule]:
    """The interval stages: ``check`` of :func:`interval_candidates` (one bit per pair
    and site: are the site's own intervals disjoint -- necessary for the merged ones to
    be), then ``ranges`` for the pairs every site said yes to, merged by
    :func:`interval_rules`.  Of several sources X for one Y, the earliest in the chain
    is kept (as :func:`select_rules` keeps the earliest determinants).

    Returns
    -------
    list of Rule
        ``"interval"`` rules, at most one per column, in chain order of their columns.
    """
    cands = interval_candidates(schema, n_total, skip=skip, sources_skip=sources_skip)
    if not cands:
        return []
    checks = ask("check", cands)
    _check_lengths(checks, len(cands), sites, "check")
    ok = np.all(np.stack(checks) == 1, axis=0)
    holding = [c for c, good in zip(cands, ok, strict=True) if good]
    if not holding:
        return []
    answers = ask("ranges", holding)
    _check_lengths(answers, ranges_size(schema, holding), sites, "ranges")
    found: dict[str, Rule] = {}
    for rule in interval_rules(schema, holding, answers):  # chain order: Y, then X
        if rule is not None and rule.column not in found:
            found[rule.column] = rule
    return list(found.values())


def _interval_entries(schema: Schema, rule: Rule) -> list[list[Any]]:
    """An interval rule's entries with its values as codes and its bounds as numbers
    (a datetime's text as seconds since 1970 UTC: :func:`fits._dates.bound_number`),
    for the sites to verify and for generation."""
    index = {plain(v): i for i, v in enumerate(schema[rule.column].categories or [])}
    return [
        [bound_number(lo), bound_number(hi), index[plain(v)]] for lo, hi, v in rule.intervals or []
    ]


def interval_codes(schema: Schema, rule: Rule, x: np.ndarray) -> np.ndarray:
    """An interval rule's column as codes, from its source's values ``x`` (as written):
    the code of the value whose cell holds x (:func:`fits._exact.interval_cells`: the
    nearest interval)."""
    entries = _interval_entries(schema, rule)
    cuts = interval_cuts([e[0] for e in entries], [e[1] for e in entries])
    codes = np.asarray([e[2] for e in entries], dtype=np.int64)
    return codes[interval_cells(cuts, x)]


# ------------------------------------------------------------ datetime shifts
def _clock_column(spec: ColumnSpec) -> bool:
    """A datetime column a shift or order rule can involve: continuous, modelled,
    with finite bounds, not constant."""
    lo, hi = spec.bounds
    return (
        spec.dtype == "datetime"
        and spec.kind == "continuous"
        and spec.is_modelled
        and spec.indicates is None
        and math.isfinite(lo)
        and math.isfinite(hi)
        and lo < hi
    )


def shift_candidates(
    schema: Schema,
    n_total: int,
    descriptions: Sequence[Mapping[str, Any]] | None = None,
) -> list[Candidate]:
    """The affine rules between two datetime columns to check: ``Y = X + c`` (slope 1;
    docs/method.md, "Affine rules"), Y continuous with no point mass, X earlier in the
    chain, both missing in the same rows or neither, Y's precision holding X shifted by
    c (:func:`fits.core.schema.shift_grid`).  No moments are asked: if the rule holds
    in every row, each site's minimum and maximum of Y (sent at setup) are its
    minimum and maximum of X plus c, so c is ``min Y - min X`` at any site, and a pair
    whose sites' differences disagree (:data:`_SHIFT_SLACK`) is no rule.  Without
    descriptions, the merged bounds give c alike.  At most :data:`MAX_AFFINE_PAIRS`
    pairs are screened, the first in chain order; none with fewer than
    :data:`MIN_SUM_ROWS` rows.

    Returns
    -------
    list of dict
        ``{"kind": "affine", "column": Y, "of": [X], "slope": 1.0, "intercept": c,
        "decimals": None}``, c in seconds rounded to the microsecond.
    """
    if n_total < MIN_SUM_ROWS:
        return []
    cols = {c.name: c for c in schema.columns}
    clocks = [n for n in schema.order if _clock_column(cols[n])]
    out: list[Candidate] = []
    screened = 0
    for k, y in enumerate(clocks):
        dep = cols[y]
        if dep.point_mass is not None:
            continue
        for x in clocks[:k]:
            src = cols[x]
            if src.missing != dep.missing or (src.tz is None) != (dep.tz is None):
                continue
            screened += 1
            if screened > MAX_AFFINE_PAIRS:
                return out
            shift = _shift_of(dep, src, descriptions)
            if shift is not None and shift_grid(dep, src, shift):
                out.append(
                    {
                        "kind": "affine",
                        "column": y,
                        "of": [x],
                        "slope": 1.0,
                        "intercept": shift,
                        "decimals": None,
                    }
                )
    return out


def _shift_of(
    dep: ColumnSpec, src: ColumnSpec, descriptions: Sequence[Mapping[str, Any]] | None
) -> float | None:
    """The shift c of ``dep = src + c`` that the extremes allow (seconds, to the
    microsecond), or None if they rule every shift out."""
    diffs = []
    for desc in descriptions or []:
        info = desc.get("columns", {})
        ey, ex = info.get(dep.name, {}), info.get(src.name, {})
        if not all(k in e for e in (ey, ex) for k in ("min", "max")):
            continue  # no value here (all missing): this site says nothing
        diffs += [float(ey["min"]) - float(ex["min"]), float(ey["max"]) - float(ex["max"])]
    if not diffs:
        (lo_y, hi_y), (lo_x, hi_x) = dep.bounds, src.bounds
        diffs = [lo_y - lo_x, hi_y - hi_x]
    d = np.asarray(diffs, dtype=float)
    if not np.all(np.isfinite(d)) or float(d.max() - d.min()) > _SHIFT_SLACK:
        return None
    return round(float(d[0]) * 1e6) / 1e6


def detect_shifts(
    schema: Schema,
    ask: Ask,
    sites: Sequence[str],
    n_total: int,
    descriptions: Sequence[Mapping[str, Any]] | None = None,
) -> list[Candidate]:
    """The ``check`` of :func:`shift_candidates` (one bit per pair and site: does
    ``Y - X`` equal the shift, to the microsecond, in every row, both missing in the
    same rows); the candidates every site confirmed."""
    cands = shift_candidates(schema, n_total, descriptions)
    if not cands:
        return []
    checks = ask("check", cands)
    _check_lengths(checks, len(cands), sites, "check")
    ok = np.all(np.stack(checks) == 1, axis=0)
    return [c for c, good in zip(cands, ok, strict=True) if good]


def shifted_datetimes(source: pd.Series, schema: Schema, rule: Rule) -> pd.Series:
    """An affine rule's datetime column from its source as written: the source's
    seconds since 1970 UTC plus the rule's shift, written as the column is (its time
    zone, whole days or time unit: :meth:`Encoder.decode
    <fits.core.continualization.Encoder.decode>`), missing where the source is."""
    from fits.core.continualization import Encoder

    spec = schema[rule.column]
    x = Encoder(schema[rule.of[0]]).to_numeric(source, client="the synthetic rows")
    absent = np.isnan(x)
    y = np.where(absent, float(spec.bounds[0]), x + float(rule.intercept or 0.0))
    col = Encoder(spec).decode(y).reset_index(drop=True)
    return col.mask(pd.Series(absent)) if absent.any() else col


# ------------------------------------------------------------ order rules
def _order_source(spec: ColumnSpec) -> bool:
    """A column an order rule can start from: continuous numbers or datetimes in every
    row, finite bounds, not constant."""
    lo, hi = spec.bounds
    return (
        spec.kind == "continuous"
        and spec.is_modelled
        and spec.indicates is None
        and not spec.past_float
        and not spec.missing
        and math.isfinite(lo)
        and math.isfinite(hi)
        and lo < hi
    )


def _order_dependent(spec: ColumnSpec) -> bool:
    """A column an order rule can draw as its difference from its source: continuous
    (missing values allowed), no point mass, finite bounds, not constant."""
    lo, hi = spec.bounds
    return (
        spec.kind == "continuous"
        and spec.is_modelled
        and spec.indicates is None
        and not spec.past_float
        and spec.point_mass is None
        and math.isfinite(lo)
        and math.isfinite(hi)
        and lo < hi
    )


def _order_plausible(
    dep: ColumnSpec,
    src: ColumnSpec,
    descriptions: Sequence[Mapping[str, Any]] | None,
) -> bool:
    """Whether ``dep >= src`` can hold in every row and is worth a rule, from what the
    setup round already gave: the two of one kind (:func:`fits.core.schema.order_grid`);
    ``src``'s range not above ``dep``'s (lower and upper bounds), and at every site
    ``dep``'s minimum not below ``src``'s (and, where ``dep`` has no missing values,
    its maximum not below ``src``'s): necessary; and the ranges overlapping (``dep``'s
    lower bound below ``src``'s upper; else the bounds alone keep the order, which the
    chain keeps anyway) over at least :data:`ORDER_OVERLAP` of each range (one quantity
    on one scale)."""
    if not order_grid(dep, src):
        return False
    (lo_y, hi_y), (lo_x, hi_x) = dep.bounds, src.bounds
    if not (lo_x <= lo_y < hi_x <= hi_y):
        return False
    overlap = hi_x - lo_y
    if overlap < ORDER_OVERLAP * (hi_y - lo_y) or overlap < ORDER_OVERLAP * (hi_x - lo_x):
        return False
    for desc in descriptions or []:
        info = desc.get("columns", {})
        ey, ex = info.get(dep.name, {}), info.get(src.name, {})
        if "min" in ey and "min" in ex and float(ey["min"]) < float(ex["min"]):
            return False
        if not dep.missing and "max" in ey and "max" in ex and float(ey["max"]) < float(ex["max"]):
            return False
    return True


def order_candidates(
    schema: Schema,
    n_total: int,
    descriptions: Sequence[Mapping[str, Any]] | None = None,
    *,
    skip: set[str] | frozenset[str] = frozenset(),
    sources_skip: set[str] | frozenset[str] = frozenset(),
) -> list[Candidate]:
    """The (X, Y) pairs an order check asks: Y continuous (:func:`_order_dependent`),
    not in ``skip``, X continuous in every row (:func:`_order_source`), earlier in the
    chain, not in ``sources_skip``, the pair plausible (:func:`_order_plausible`).  At
    most :data:`MAX_ORDER_PAIRS`, the first in chain order (by Y, then X), with a
    :class:`~fits.core.schema.DataNote` when the cap leaves pairs out; none with fewer
    than :data:`MIN_SUM_ROWS` rows.

    Returns
    -------
    list of dict
        ``{"kind": "order", "column": Y, "of": [X]}``.
    """
    if n_total < MIN_SUM_ROWS:
        return []
    cols = {c.name: c for c in schema.columns}
    out: list[Candidate] = []
    total = 0
    for k, y in enumerate(schema.order):
        if y in skip or not _order_dependent(cols[y]):
            continue
        for x in schema.order[:k]:
            if x in sources_skip or not _order_source(cols[x]):
                continue
            if not _order_plausible(cols[y], cols[x], descriptions):
                continue
            total += 1
            if len(out) < MAX_ORDER_PAIRS:
                out.append({"kind": "order", "column": y, "of": [x]})
    if total > MAX_ORDER_PAIRS:
        _cap_note(
            "order rules: of {total:,} candidate pairs the search",
            total,
            MAX_ORDER_PAIRS,
            out[-1]["column"],
            "a later column that is at least an earlier one in every row is drawn by the "
            "chain, which may put it below",
        )
    return out


def order_point_masses(schema: Schema, ask: Ask, sites: Sequence[str]) -> set[str]:
    """The order rules' columns whose difference D = Y - X the engine draws with a point
    mass at 0 (:meth:`Schema.expanded <fits.core.schema.Schema.expanded>`): one
    ``check`` round of two bits per rule and site -- some row with Y = X (``ties``), at
    least :data:`ORDER_APART_ROWS` rows with Y > X (``apart``) -- and a point mass
    where some site has ties and some site that many rows apart (the rows apart are
    the continuous part's; too few, and every site would abstain from its requests).
    Ties without enough rows apart (a near-copy): a :class:`DataNote
    <fits.core.schema.DataNote>`, D drawn as one continuous column (docs/method.md,
    "Order rules")."""
    rules = [r for r in schema.rules or [] if r.kind == "order"]
    if not rules:
        return set()
    cands: list[Candidate] = []
    for rule in rules:
        base = {"kind": "order", "column": rule.column, "of": list(rule.of)}
        cands += [{**base, "ties": True}, {**base, "apart": ORDER_APART_ROWS}]
    answers = ask("check", cands)
    _check_lengths(answers, len(cands), sites, "check")
    bits = np.stack(answers).reshape(len(sites), len(rules), 2) == 1
    ties, apart = bits[:, :, 0].any(axis=0), bits[:, :, 1].any(axis=0)
    for rule, t, a in zip(rules, ties, apart, strict=True):
        if t and not a:
            warnings.warn(
                f"{rule.column!r} equals {rule.of[0]!r} in some rows and no site holds "
                f"{ORDER_APART_ROWS} rows where it is above it, too few to draw the "
                f"differences apart from the equal rows: {rule.column!r} - {rule.of[0]!r} "
                "is drawn as one continuous difference, so few synthetic rows are equal "
                '(docs/method.md, "Order rules")',
                DataNote,
                stacklevel=3,
            )
    return {r.column for r, t, a in zip(rules, ties, apart, strict=True) if t and a}


def detect_order(
    schema: Schema,
    ask: Ask,
    sites: Sequence[str],
    n_total: int,
    descriptions: Sequence[Mapping[str, Any]] | None = None,
    *,
    skip: set[str] | frozenset[str] = frozenset(),
    sources_skip: set[str] | frozenset[str] = frozenset(),
    unkept: set[str] | frozenset[str] = frozenset(),
) -> list[Rule]:
    """The order stage: ``check`` of :func:`order_candidates` (one bit per pair and
    site: is Y >= X in every row holding Y, X present there), then, per Y in chain
    order, the latest X every site said yes to that is no order rule's column itself
    (the chain draws such a column as a difference, so it is no source:
    :meth:`Schema.order_line <fits.core.schema.Schema.order_line>`); a column that is
    some rule's source is no order rule's column.  ``unkept``: columns (in ``skip``)
    that can have no order rule (boosted ones), whose pairs are asked in the same check
    only to say, in a :class:`~fits.core.schema.DataNote`, an order that every real row
    keeps and the synthetic rows need not.

    Returns
    -------
    list of Rule
        ``"order"`` rules, at most one per column, in chain order of their columns.
    """
    cands = order_candidates(schema, n_total, descriptions, skip=skip, sources_skip=sources_skip)
    reverse = _reverse_order_candidates(schema, n_total, descriptions, skip, sources_skip)
    told = [
        c
        for c in order_candidates(
            schema, n_total, descriptions, skip=set(skip) - set(unkept), sources_skip=sources_skip
        )
        if c["column"] in unkept
    ]
    if not cands and not reverse and not told:
        return []
    checks = ask("check", [*cands, *reverse, *told])
    _check_lengths(checks, len(cands) + len(reverse) + len(told), sites, "check")
    every = np.all(np.stack(checks) == 1, axis=0)
    ok, back = every[: len(cands)], every[len(cands) : len(cands) + len(reverse)]
    kept_told = every[len(cands) + len(reverse) :]
    _note_unkept_orders([c for c, good in zip(told, kept_told, strict=True) if good])
    by_column: dict[str, list[str]] = {}
    for cand, good in zip(cands, ok, strict=True):
        if good:
            by_column.setdefault(cand["column"], []).append(cand["of"][0])
    rules: list[Rule] = []
    columns: set[str] = set()
    sources: set[str] = set()
    for y in schema.order:  # by Y in chain order; each X list is in chain order
        if y not in by_column or y in sources:
            continue
        usable = [x for x in by_column[y] if x not in columns]
        if usable:
            rules.append(Rule(y, [usable[-1]], "order"))
            columns.add(y)
            sources.add(usable[-1])
    _note_reverse_orders(schema, [c for c, good in zip(reverse, back, strict=True) if good], rules)
    return rules


def _reverse_order_candidates(
    schema: Schema,
    n_total: int,
    descriptions: Sequence[Mapping[str, Any]] | None,
    skip: set[str] | frozenset[str],
    sources_skip: set[str] | frozenset[str],
) -> list[Candidate]:
    """The pairs an order rule would have with the chain the other way round: an
    earlier column E at least a later one L (``end`` before ``start``), each plausible
    as :func:`order_candidates` asks (E as the column, L as its source), as
    ``{"kind": "order", "column": E, "of": [L]}`` -- a site's check does not depend on
    the chain.  At most :data:`MAX_ORDER_PAIRS`, the first in chain order; none with
    fewer than :data:`MIN_SUM_ROWS` rows.  Their answers only give a note
    (:func:`_note_reverse_orders`): no rule keeps such a pair."""
    if n_total < MIN_SUM_ROWS:
        return []
    cols = {c.name: c for c in schema.columns}
    out: list[Candidate] = []
    for k, late in enumerate(schema.order):
        if late in sources_skip or not _order_source(cols[late]):
            continue
        for early in schema.order[:k]:
            if early in skip or not _order_dependent(cols[early]):
                continue
            if _order_plausible(cols[early], cols[late], descriptions):
                out.append({"kind": "order", "column": early, "of": [late]})
                if len(out) == MAX_ORDER_PAIRS:
                    return out
    return out


def _note_unkept_orders(held: Sequence[Candidate]) -> None:
    """A :class:`~fits.core.schema.DataNote` naming the orders every site confirmed for
    a column that can have no order rule (a boosted column, drawn from its model): the
    synthetic rows can break them (a boosted ``b`` below ``a`` in 2% of rows, silently)."""
    if not held:
        return
    shown = ", ".join(f"{c['column']!r} >= {c['of'][0]!r}" for c in held[:5])
    more = f" (and {len(held) - 5} more)" if len(held) > 5 else ""
    columns = list(dict.fromkeys(c["column"] for c in held))
    warnings.warn(
        f"in every row at every site {shown}{more}, but {columns} "
        f"{'is' if len(columns) == 1 else 'are'} drawn from a boosted model, which does "
        "not keep that order, so synthetic rows can break it; to keep it, have the "
        "kernels draw the column (leave it out of column_models, --column-model)",
        DataNote,
        stacklevel=4,
    )


def _note_reverse_orders(schema: Schema, held: Sequence[Candidate], rules: Sequence[Rule]) -> None:
    """A :class:`~fits.core.schema.DataNote` naming the pairs every site confirmed with
    the larger column first in the chain (:func:`_reverse_order_candidates`) whose later
    column got no order rule: the chain draws it on its own, so synthetic rows can put
    it above the earlier one; the chain order that has the rule found."""
    ruled = {r.column for r in rules}
    pairs = [(c["of"][0], c["column"]) for c in held if c["of"][0] not in ruled]
    if not pairs:
        return
    shown = ", ".join(f"{low!r} <= {high!r}" for low, high in pairs[:5])
    more = f" (and {len(pairs) - 5} more)" if len(pairs) > 5 else ""
    low, high = pairs[0]
    order = [c for c in schema.order if c != low]
    order.insert(order.index(high), low)
    warnings.warn(
        f"in every row at every site {shown}{more}, but the larger column comes first in "
        "the chain, so no order rule keeps it (an order rule's column is the later one) "
        f"and synthetic rows can have {low!r} above {high!r}; put {low!r} before "
        f"{high!r} in the chain to have it drawn so"
        + (
            f" (Python: order={order!r}; fits synthesize --order {shlex.quote(','.join(order))})"
            if len(order) <= 20
            else " (Python: order=[...]; fits synthesize --order)"
        ),
        DataNote,
        stacklevel=4,
    )
