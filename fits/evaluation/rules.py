"""Exact rules kept: the share of a table's rows that keep each rule of the real data;
and near-linear columns: whether a synthetic pair kept the real spread about its line.

A rule (:class:`fits.core.schema.Rule`, found at setup by :mod:`fits.core.rules`) holds
in every real row; a synthesizer that generates its column by the rule keeps it in every
synthetic row, one that draws the column keeps it only approximately
(:func:`rules_kept`).  A ``"linear"`` rule (a near-linear column, docs/method.md
"Near-linear columns") is no exact rule: :func:`near_linear_kept` compares the real and
the synthetic residual spread about the rule's line, the pair's correlation, and the
share of synthetic rows within the rule's residual bounds.  The rules are taken in
their JSON form (``Rule.to_dict()``, the ``rules`` of a schema file), so this module
needs nothing of fits above it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fits._dates import duration_text
from fits._exact import (
    AFFINE_RTOL,
    affine_match,
    interval_bounds,
    interval_cells,
    interval_cuts,
    interval_text,
    sums_match,
)
from fits._json import plain

__all__ = ["NEAR_LINEAR_COLUMNS", "near_linear_kept", "rule_breaks", "rules_kept"]


def _as_dict(rule: Any) -> dict[str, Any]:
    if hasattr(rule, "to_dict"):
        return dict(rule.to_dict())
    if isinstance(rule, Mapping):
        return dict(rule)
    raise TypeError(f"a rule must be a fits Rule or its dict, got {type(rule).__name__}")


def _value(v: Any) -> Any:
    """A cell as the plain value a schema's mapping holds (missing -> None)."""
    v = plain(v)
    if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def _describe(rule: Mapping[str, Any], *, clock: bool = False) -> str:
    """The rule in words, as :meth:`fits.core.schema.Rule.describe` tells it; ``clock``:
    an affine rule between two datetime columns, a shift told as a duration."""
    of = list(rule["of"])
    if rule.get("kind", "function") == "sum":
        return f"{rule['column']} = {' + '.join(of)}"
    if rule.get("kind") == "affine" and clock:  # slope 1: the column shifted by a duration
        b = float(rule["intercept"])
        if b == 0:
            return f"{rule['column']} = {of[0]} (a copy)"
        return f"{rule['column']} = {of[0]} {'-' if b < 0 else '+'} {duration_text(abs(b))}"
    if rule.get("kind") == "affine":
        b = float(rule["intercept"])
        text = f"{float(rule['slope']):.15g} * {of[0]} {'-' if b < 0 else '+'} {abs(b):.15g}"
        if rule.get("decimals") is not None:
            text = f"round({text}, {rule['decimals']})"
        if rule.get("tolerance") is not None:
            text = f"{text} (within {float(rule['tolerance']):.3g})"
        return f"{rule['column']} = {text}"
    if rule.get("kind") == "interval":
        return f"{rule['column']} = by {of[0]}: {interval_text(rule.get('intervals'))}"
    if rule.get("kind") == "order":
        return f"{rule['column']} >= {of[0]} (order)"
    return f"{rule['column']} = f({', '.join(of)})"


def _clock(table: pd.DataFrame, rule: Mapping[str, Any]) -> bool:
    """Whether a rule relates two datetime columns: either is a datetime column, or
    holds text that is not numbers (ISO 8601 dates of a table read from a CSV file
    without parsing them)."""
    for c in (rule["column"], rule["of"][0]):
        values = table[c]
        if pd.api.types.is_datetime64_any_dtype(values.dtype):
            return True
        present = values.dropna()
        if values.dtype == object and len(present):
            if pd.to_numeric(present, errors="coerce").isna().all():
                return True
    return False


def _micros(values: pd.Series) -> np.ndarray:
    """A datetime column (or ISO 8601 text) as microseconds since 1970 UTC, exactly
    (float64 holds every whole number of microseconds up to the year 2255); NaN where
    missing or unreadable."""
    if not pd.api.types.is_datetime64_any_dtype(values.dtype):
        values = pd.to_datetime(values.astype(object), errors="coerce", format="ISO8601", utc=True)
    if getattr(values.dt, "tz", None) is not None:
        values = values.dt.tz_convert("UTC").dt.tz_localize(None)
    stamps = values.to_numpy(dtype="datetime64[ns]").astype("datetime64[us]")
    out = stamps.astype(np.int64).astype(float)
    out[np.isnat(stamps)] = np.nan
    return out


def _order_kept(table: pd.DataFrame, rule: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per row: holding the column with it at least its source (a missing source: not
    kept), and counted: holding the column (the rule says nothing where it is
    missing)."""
    if _clock(table, rule):
        y, x = (_source_numbers(table[c], True) for c in (rule["column"], rule["of"][0]))
    else:
        y, x = (
            pd.to_numeric(table[c], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
            for c in (rule["column"], rule["of"][0])
        )
    held = ~np.isnan(y)
    with np.errstate(invalid="ignore"):
        return held & (y >= x), held


def _affine_kept(table: pd.DataFrame, rule: Mapping[str, Any]) -> np.ndarray:
    """Per row: within the rule's tolerance (:func:`fits._exact.affine_match`), or with both
    values missing (the rule: Y is missing where X is); one missing: not kept.  Between
    two datetime columns (slope 1, the intercept a shift in seconds): the column is
    its source shifted by the intercept to the microsecond."""
    if _clock(table, rule):
        xs, ys = _micros(table[rule["of"][0]]), _micros(table[rule["column"]])
        shift = round(float(rule["intercept"]) * 1e6)
        with np.errstate(invalid="ignore"):
            same = (ys - xs == shift) & (float(rule["slope"]) == 1.0)
        return np.asarray(same | (np.isnan(xs) & np.isnan(ys)))
    x = pd.to_numeric(table[rule["of"][0]], errors="coerce").to_numpy(dtype=float)
    y = pd.to_numeric(table[rule["column"]], errors="coerce").to_numpy(dtype=float)
    d, t = rule.get("decimals"), rule.get("tolerance")
    match = affine_match(
        y,
        x,
        float(rule["slope"]),
        float(rule["intercept"]),
        None if d is None else int(d),
        None if t is None else float(t),
    )
    return np.asarray(match | (np.isnan(x) & np.isnan(y)))  # missing together: kept


def _source_numbers(values: pd.Series, clock: bool) -> np.ndarray:
    """An interval rule's source column as float64, NaN where missing or unreadable: a
    number column's numbers; a datetime column's (``clock``: the rule's bounds are
    date-time text) seconds since 1970 UTC, the numbers the rule's bounds stand for --
    from datetimes (with a time zone: the instant; without: the wall time read as UTC)
    or from ISO 8601 text (a table read from a CSV file without parsing its dates)."""
    if not clock:
        numbers = pd.to_numeric(values, errors="coerce")
        return np.asarray(numbers.to_numpy(dtype=float, na_value=np.nan), dtype=float)
    if not pd.api.types.is_datetime64_any_dtype(values.dtype):
        # utc=True: text with an offset as its instant, text without as UTC wall time
        values = pd.to_datetime(values.astype(object), errors="coerce", format="ISO8601", utc=True)
    if getattr(values.dt, "tz", None) is not None:
        values = values.dt.tz_convert("UTC").dt.tz_localize(None)
    stamps = values.to_numpy(dtype="datetime64[ns]")
    out = stamps.astype("datetime64[us]").astype(np.int64).astype(float) / 1e6
    out[np.isnat(stamps)] = np.nan
    return np.asarray(out, dtype=float)


def _interval_kept(
    table: pd.DataFrame, rule: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: whether its column has the value of the cell holding its source (the
    value the rule generates: :func:`fits._exact.interval_cells`, the nearest interval;
    a missing value, where the rule gives missing its interval, too), whether its
    source lies in no interval (in a gap or beyond the ends: no real row is there, so
    the cell's value is the rule's extension; kept when it matches), and whether it is
    counted: it has a source (a missing source is left out: the rule says nothing
    there).  An unreadable source, or a column missing where the rule gives it no
    interval: not kept."""
    entries = list(rule.get("intervals") or [])
    clock = any(isinstance(v, str) for e in entries for v in e[:2])
    given = table[rule["of"][0]].notna().to_numpy()
    x = np.full(len(table), np.nan)
    x[given] = _source_numbers(table.loc[given, rule["of"][0]], clock)
    lows, highs = interval_bounds(entries)
    cells = interval_cells(interval_cuts(lows, highs), x)
    wanted = [_value(e[2]) for e in entries]
    values = [_value(v) for v in table[rule["column"]].astype(object).tolist()]
    present = ~np.isnan(x)
    kept = np.array(
        [bool(ok) and v == wanted[int(c)] for ok, c, v in zip(present, cells, values, strict=True)],
        dtype=bool,
    )
    inside = (x[:, None] >= lows) & (x[:, None] <= highs)
    return kept, present & ~inside.any(axis=1), given


def rules_kept(table: pd.DataFrame, rules: Sequence[Any]) -> pd.DataFrame:
    """The share of the rows of ``table`` that keep each rule.

    Parameters
    ----------
    table : DataFrame
        A synthetic (or real) table with the rules' columns.
    rules : sequence of Rule or dict
        The rules, as :class:`fits.core.schema.Rule` or their ``to_dict()`` form.

    Returns
    -------
    DataFrame
        One row per rule: ``rule`` (e.g. ``"workingday = f(holiday, weekday)"``),
        ``column``, ``kind``, ``rows`` (the rows counted: all of them, but for an
        interval rule those with a source, the rule saying nothing where it is
        missing); ``kept``, the share of those rows that keep it
        (a function rule: the determinants' values are a combination of the mapping
        and the column has the mapped value; a sum rule: the column equals the
        sum of the parts up to float64 rounding (:func:`fits._exact.sums_match`), none
        missing; an affine rule: the column is within the rule's tolerance of
        ``slope * x + intercept``; an interval rule: the column has the value of the
        cell holding its source, the nearest interval; an order rule: the column is at
        least its source, counted over the rows holding the column); and
        ``uncovered``, the share of rows whose determinant combination is not in the
        mapping (no real row has it, so the rule says nothing there; 0 for sums), or,
        for an interval rule, whose source lies in no interval (a gap between two, or
        beyond the first or last; such a row counts as kept when it has its cell's
        value, the one the rule generates).
        A ``"linear"`` rule (a near-linear column drawn as its residual) is no exact
        rule and is left out: no row "keeps" it (:func:`near_linear_kept` compares it).

    Raises
    ------
    KeyError
        A rule names a column the table does not have.
    """
    out = []
    for raw in rules:
        rule = _as_dict(raw)
        if rule.get("kind") == "linear":  # a near-linear column: no exact rule to keep
            continue
        column, of = str(rule["column"]), [str(c) for c in rule["of"]]
        missing = [c for c in [column, *of] if c not in table.columns]
        if missing:
            raise KeyError(f"rule {_describe(rule)}: the table has no column(s) {missing}")
        kind = str(rule.get("kind", "function"))
        kept_rows, uncovered_rows, counted = _rows(table, rule)
        rows = int(counted.sum())
        kept, uncovered = int(np.sum(kept_rows & counted)), int(np.sum(uncovered_rows & counted))
        out.append(
            {
                "rule": _describe(rule, clock=kind == "affine" and _clock(table, rule)),
                "column": column,
                "kind": kind,
                "rows": rows,
                "kept": kept / rows if rows else float("nan"),
                "uncovered": uncovered / rows if rows else float("nan"),
            }
        )
    columns = ["rule", "column", "kind", "rows", "kept", "uncovered"]
    return pd.DataFrame.from_records(out, columns=columns)


_NONE = object()


def _rows(
    table: pd.DataFrame, rule: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``table``: whether it keeps ``rule`` (a dict), whether the rule says
    nothing of it beyond its extension (a function rule: a combination no real row
    has; an interval rule: a source in no interval), and whether it is counted (an
    interval rule: a source given; an order rule: the column present; else every row)."""
    column, of = str(rule["column"]), [str(c) for c in rule["of"]]
    kind = str(rule.get("kind", "function"))
    every = np.ones(len(table), dtype=bool)
    if kind == "affine":
        return _affine_kept(table, rule), ~every, every
    if kind == "interval":
        return _interval_kept(table, rule)
    if kind == "order":
        kept, counted = _order_kept(table, rule)
        return kept, ~every, counted
    if kind == "sum":
        parts = [pd.to_numeric(table[c], errors="coerce").to_numpy(dtype=float) for c in of]
        value = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
        return np.asarray(sums_match(value, parts)), ~every, every  # NaN anywhere: not kept
    mapping = {tuple(_value(v) for v in e[:-1]): _value(e[-1]) for e in rule.get("mapping") or []}
    keys = zip(*(table[c].astype(object).tolist() for c in of), strict=True)
    wants = [mapping.get(tuple(_value(v) for v in key), _NONE) for key in keys]
    values = table[column].astype(object).tolist()
    uncovered = np.array([w is _NONE for w in wants], dtype=bool)
    kept = np.array(
        [w is not _NONE and _value(v) == w for w, v in zip(wants, values, strict=True)],
        dtype=bool,
    )
    return kept, uncovered, every


def rule_breaks(table: pd.DataFrame, rule: Any) -> np.ndarray:
    """Per row of ``table``, whether it breaks ``rule`` (a
    :class:`~fits.core.schema.Rule` or its ``to_dict()`` form): a row :func:`rules_kept`
    counts that does not keep it. A ``"linear"`` rule (near-linear) breaks no row.

    Parameters
    ----------
    table : DataFrame
        A table with the rule's columns.
    rule : Rule or dict

    Returns
    -------
    ndarray of bool, one per row
    """
    rule = _as_dict(rule)
    if rule.get("kind") == "linear":
        return np.zeros(len(table), dtype=bool)
    kept, _, counted = _rows(table, rule)
    return np.asarray(counted & ~kept)


#: The columns of :func:`near_linear_kept`'s table, in order.
NEAR_LINEAR_COLUMNS = [
    "rule",
    "column",
    "of",
    "slope",
    "intercept",
    "lower",
    "upper",
    "real_rows",
    "real_missing",
    "synthetic_rows",
    "synthetic_missing",
    "real_sd",
    "synthetic_sd",
    "sd_ratio",
    "real_corr",
    "synthetic_corr",
    "within",
]


def _linear_rules(schema: Any) -> list[dict[str, Any]]:
    """The ``"linear"`` rules of a schema (anything with ``rules``) or of a sequence of
    rules, as dicts."""
    rules = getattr(schema, "rules", schema)
    return [r for r in map(_as_dict, rules or []) if r.get("kind") == "linear"]


def _numbers(table: pd.DataFrame, column: str) -> np.ndarray:
    """A column as float64, NaN where it is missing or not a number."""
    values = pd.to_numeric(table[column], errors="coerce")
    return np.asarray(values.to_numpy(dtype=float, na_value=np.nan), dtype=float)


def _pair(table: pd.DataFrame, rule: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    """(x, y) over the rows holding both as finite numbers, and the count of the others."""
    x, y = _numbers(table, str(rule["of"][0])), _numbers(table, str(rule["column"]))
    both = np.isfinite(x) & np.isfinite(y)
    return x[both], y[both], int(both.size - both.sum())


def _residual(x: np.ndarray, y: np.ndarray, slope: float, intercept: float) -> np.ndarray:
    """``y - (slope x + intercept)``, the formula :func:`fits.core.rules.residuals` uses."""
    return y - (slope * x + intercept)


def _sd(values: np.ndarray) -> float:
    """Sample standard deviation (ddof 1); NaN below two values."""
    return float(np.std(values, ddof=1)) if values.size >= 2 else float("nan")


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation of x and y (as :func:`numpy.corrcoef`); NaN below two rows or
    where either is constant."""
    if x.size < 2:
        return float("nan")
    dx, dy = x - x.mean(), y - y.mean()
    scale = math.sqrt(float(np.dot(dx, dx)) * float(np.dot(dy, dy)))
    return float(np.clip(np.dot(dx, dy) / scale, -1.0, 1.0)) if scale > 0 else float("nan")


def near_linear_kept(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Any) -> pd.DataFrame:
    """Whether each near-linear pair of the synthetic table kept the real spread about
    its line.

    A ``"linear"`` rule (docs/method.md, "Near-linear columns") says that a continuous
    column Y is ``slope * X + intercept + R`` with the residual R within ``[lower,
    upper]`` in every real row.  Both tables are measured about the rule's line (the
    same line for both): the residual's standard deviation, the Pearson correlation of
    (X, Y), and, for the synthetic table, the share of rows whose residual lies within
    the rule's bounds.  Rows where X or Y is missing (or not a number) are left out and
    counted.

    Parameters
    ----------
    real : DataFrame
        The real table the synthetic one is compared with.
    synthetic : DataFrame
        The synthetic table.
    schema : Schema, or sequence of Rule or dict
        A :class:`fits.core.schema.Schema` (its ``rules``), or the rules themselves as
        :class:`fits.core.schema.Rule` or their ``to_dict()`` form.  Rules of other
        kinds are ignored (:func:`rules_kept` counts the exact ones).

    Returns
    -------
    DataFrame
        One row per ``"linear"`` rule, columns :data:`NEAR_LINEAR_COLUMNS`: ``rule``
        (e.g. ``"atemp = 0.87 * temp + 0.02 + residual"``), ``column`` (Y), ``of`` (X);
        the rule's ``slope``, ``intercept``, ``lower`` and ``upper``; per table the
        rows compared (``real_rows``, ``synthetic_rows``: both X and Y present) and the
        rows left out (``real_missing``, ``synthetic_missing``); the residual standard
        deviations about the line (``real_sd``, ``synthetic_sd``, ddof 1) and
        ``sd_ratio`` = synthetic / real; the correlations ``real_corr`` and
        ``synthetic_corr``; and ``within``, the share of the synthetic rows compared
        whose residual lies in ``[lower, upper]`` (up to float64 rounding: a relative
        ``AFFINE_RTOL`` of the terms' magnitude).  A figure that cannot be computed
        (fewer than two rows, a constant column, no rows) is NaN.  No linear rule: an
        empty table with these columns.

    Raises
    ------
    KeyError
        A rule names a column one of the tables does not have.

    Notes
    -----
    The values are compared as the tables hold them: a synthetic Y rounded to its
    decimals can put a residual drawn at the very edge of its bounds half a unit of the
    last decimal outside them.
    """
    out = []
    for rule in _linear_rules(schema):
        column, source = str(rule["column"]), str(rule["of"][0])
        for name, table in (("real", real), ("synthetic", synthetic)):
            missing = [c for c in (column, source) if c not in table.columns]
            if missing:
                raise KeyError(
                    f"near-linear rule {column} on {source}: the {name} table has no "
                    f"column(s) {missing}"
                )
        a, b = float(rule["slope"]), float(rule["intercept"])
        lower, upper = float(rule["lower"]), float(rule["upper"])
        rx, ry, real_missing = _pair(real, rule)
        sx, sy, syn_missing = _pair(synthetic, rule)
        real_sd = _sd(_residual(rx, ry, a, b))
        resid = _residual(sx, sy, a, b)
        syn_sd = _sd(resid)
        slack = AFFINE_RTOL * np.maximum(np.maximum(np.abs(sy), np.abs(a * sx)), abs(b))
        inside = (resid >= lower - slack) & (resid <= upper + slack)
        out.append(
            {
                "rule": f"{column} = {a:.6g} * {source} {'-' if b < 0 else '+'} {abs(b):.6g}"
                " + residual",
                "column": column,
                "of": source,
                "slope": a,
                "intercept": b,
                "lower": lower,
                "upper": upper,
                "real_rows": int(rx.size),
                "real_missing": real_missing,
                "synthetic_rows": int(sx.size),
                "synthetic_missing": syn_missing,
                "real_sd": real_sd,
                "synthetic_sd": syn_sd,
                "sd_ratio": syn_sd / real_sd if real_sd > 0 else float("nan"),
                "real_corr": _pearson(rx, ry),
                "synthetic_corr": _pearson(sx, sy),
                "within": float(inside.mean()) if inside.size else float("nan"),
            }
        )
    return pd.DataFrame.from_records(out, columns=NEAR_LINEAR_COLUMNS)
