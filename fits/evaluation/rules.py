"""Exact rules kept: the share of a table's rows that keep each rule of the real data.

A rule (:class:`fits.core.schema.Rule`, found at setup by :mod:`fits.core.rules`) holds
in every real row; a synthesizer that generates its column by the rule keeps it in every
synthetic row, one that draws the column keeps it only approximately.  The rules are
taken in their JSON form (``Rule.to_dict()``, the ``rules`` of a schema file), so this
module needs nothing of fits above it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fits._exact import affine_match, sums_match
from fits._json import plain

__all__ = ["rules_kept"]


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


def _describe(rule: Mapping[str, Any]) -> str:
    of = list(rule["of"])
    if rule.get("kind", "function") == "sum":
        return f"{rule['column']} = {' + '.join(of)}"
    if rule.get("kind") == "affine":
        b = float(rule["intercept"])
        text = f"{float(rule['slope']):.15g} * {of[0]} {'-' if b < 0 else '+'} {abs(b):.15g}"
        if rule.get("decimals") is not None:
            text = f"round({text}, {rule['decimals']})"
        if rule.get("tolerance") is not None:
            text = f"{text} (within {float(rule['tolerance']):.3g})"
        return f"{rule['column']} = {text}"
    return f"{rule['column']} = f({', '.join(of)})"


def _affine_kept(table: pd.DataFrame, rule: Mapping[str, Any]) -> int:
    """Rows within the rule's tolerance (:func:`fits._exact.affine_match`), or with both
    values missing (the rule: Y is missing where X is); one missing: not kept."""
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
    return int(np.sum(match | (np.isnan(x) & np.isnan(y))))  # missing together: kept


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
        ``column``, ``kind``, ``rows``; ``kept``, the share of all rows that keep it
        (a function rule: the determinants' values are a combination of the mapping
        and the column has the mapped value; a sum rule: the column equals the
        sum of the parts up to float64 rounding (:func:`fits._exact.sums_match`), none
        missing; an affine rule: the column is within the rule's tolerance of
        ``slope * x + intercept``); and
        ``uncovered``, the share of rows whose determinant combination is not in the
        mapping (no real row has it, so the rule says nothing there; 0 for sums).
        A ``"linear"`` rule (a near-linear column drawn as its residual) is no exact
        rule and is left out: no row "keeps" it.

    Raises
    ------
    KeyError
        A rule names a column the table does not have.
    """
    out = []
    n = len(table)
    for raw in rules:
        rule = _as_dict(raw)
        if rule.get("kind") == "linear":  # a near-linear column: no exact rule to keep
            continue
        column, of = str(rule["column"]), [str(c) for c in rule["of"]]
        missing = [c for c in [column, *of] if c not in table.columns]
        if missing:
            raise KeyError(f"rule {_describe(rule)}: the table has no column(s) {missing}")
        kind = str(rule.get("kind", "function"))
        uncovered = 0
        if kind == "affine":
            kept = _affine_kept(table, rule)
        elif kind == "sum":
            parts = [pd.to_numeric(table[c], errors="coerce").to_numpy(dtype=float) for c in of]
            value = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
            kept = int(np.sum(sums_match(value, parts)))  # NaN anywhere: not kept
        else:
            mapping = {
                tuple(_value(v) for v in e[:-1]): _value(e[-1]) for e in rule.get("mapping") or []
            }
            keys = zip(*(table[c].astype(object).tolist() for c in of), strict=True)
            values = table[column].astype(object).tolist()
            kept = 0
            for key, value in zip(keys, values, strict=True):
                want = mapping.get(tuple(_value(v) for v in key), _NONE)
                if want is _NONE:
                    uncovered += 1
                elif _value(value) == want:
                    kept += 1
        out.append(
            {
                "rule": _describe(rule),
                "column": column,
                "kind": kind,
                "rows": n,
                "kept": kept / n if n else float("nan"),
                "uncovered": uncovered / n if n else float("nan"),
            }
        )
    columns = ["rule", "column", "kind", "rows", "kept", "uncovered"]
    return pd.DataFrame.from_records(out, columns=columns)


_NONE = object()
