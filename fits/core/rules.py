"""Exact rules between columns: detection from per-site answers, and their use.

A *rule* (:class:`~fits.core.schema.Rule`) is an identity that holds in every real row
of every site:

* ``"function"``: a discrete column B takes one value per value of another discrete
  column A (Adult's ``education-num`` of ``education``), or per combination of two
  (Bike's ``workingday`` of ``holiday`` and ``weekday``);
* ``"sum"``: a continuous column T is the sum of two or three numeric columns in every
  row (``cnt = casual + registered``).

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

Candidates (:func:`candidates`) are chosen from the merged schema alone: every ordered
pair of discrete columns; pairs of discrete determinants (at most
:data:`MAX_DETERMINANT_CELLS` combinations) for a column with no one-column rule; and
sums of two (then three) numeric columns whose bounds allow the sum.  A function rule
needs at least :data:`MIN_ROWS_PER_CELL` rows in the federation per determinant
combination (so that it is not a coincidence of few rows per combination), a sum rule
at least :data:`MIN_SUM_ROWS` rows.  :func:`select_rules` keeps at most one rule per
column, whose determinants all come before it in the chain (of ``education`` <->
``education-num`` the later column is generated).

Everything here is a function of a schema and arrays; the federation layer carries the
questions and answers (:mod:`fits.federation.protocol`, message ``rules``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fits._exact import sums_match
from fits._json import plain
from fits.core.schema import ColumnSpec, Rule, Schema, SchemaError

__all__ = [
    "MAX_DETERMINANT_CELLS",
    "MAX_SUM_CANDIDATES",
    "MIN_ROWS_PER_CELL",
    "MIN_SUM_ROWS",
    "answer_rules",
    "candidates",
    "detect_rules",
    "dependent_codes",
    "map_size",
    "rules_by_column",
    "select_rules",
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

#: One candidate, as sent to the sites: ``{"kind", "column", "of"}`` (and, to verify a
#: user's rule, ``"mapping"``: entries of codes ``[a_1, ..., a_k, b]``).
Candidate = dict[str, Any]
#: ``ask(stage, candidates)`` -> one answer array per site (see :func:`answer_rules`).
Ask = Callable[[str, list[Candidate]], list[np.ndarray]]


def _numeric(spec: ColumnSpec) -> bool:
    """A column a sum can involve: numbers present in every row."""
    if spec.missing or not spec.is_modelled or spec.dtype == "datetime":
        return False
    if spec.kind == "continuous":
        return True
    cats = spec.categories or []
    return spec.kind == "ordinal" and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in cats
    )


def _bounds(spec: ColumnSpec) -> tuple[float, float]:
    if spec.kind == "continuous":
        return float(spec.lower or 0.0), float(spec.upper or 0.0)
    values = [float(v) for v in spec.categories or []]
    return min(values), max(values)


def _cells(schema: Schema, of: Sequence[str]) -> int:
    return math.prod(schema[c].n_levels for c in of)


def candidates(
    schema: Schema,
    n_total: int,
    *,
    size: int,
    skip: set[str] | frozenset[str] = frozenset(),
) -> list[Candidate]:
    """The candidate rules of one detection round, from the merged schema alone.

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
    sums: list[Candidate] = []
    for t in numeric:
        if t.kind != "continuous" or t.point_mass is not None or t.name in skip:
            continue
        lo_t, hi_t = _bounds(t)
        parts = [p for p in numeric if p.name != t.name]
        for group in itertools.combinations(parts, size + 1):
            lo = sum(_bounds(p)[0] for p in group)
            hi = sum(_bounds(p)[1] for p in group)
            if lo <= lo_t and hi_t <= hi:  # necessary for t = sum of the parts in every row
                sums.append({"kind": "sum", "column": t.name, "of": [p.name for p in group]})
    if size > 1:
        sums = sums[:MAX_SUM_CANDIDATES]
    return out + sums


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
    stage : {"check", "map"}
        ``"check"``: an array (n,) of 0/1, 1 where the candidate holds in every row
        (a function: no two rows with the same determinant values and different
        values of the column -- or, with a ``"mapping"``, no row that contradicts it;
        a sum: the column equals the sum of the parts in every row, up to the
        float64 rounding of numbers read from decimal text,
        :func:`fits._exact.sums_match`).  ``"map"``: the concatenation, over the
        candidates, of the 0/1
        indicator of the (determinant combination, value) pairs present in the rows,
        in C order (combination codes of ``of`` as :func:`numpy.ravel_multi_index`,
        then the column's code); length :func:`map_size`.

    Returns
    -------
    ndarray of uint8
    """
    if stage not in ("check", "map"):
        raise ValueError(f"unknown rules stage {stage!r}; use 'check' or 'map'")
    codes: dict[str, np.ndarray] = {}
    numbers: dict[str, np.ndarray] = {}

    def code(name: str) -> np.ndarray:
        if name not in codes:
            codes[name] = _site_codes(frame, schema[name], site)
        return codes[name]

    def number(name: str) -> np.ndarray:
        if name not in numbers:
            numbers[name] = _site_numbers(frame, schema[name], site)
        return numbers[name]

    out: list[np.ndarray] = []
    for cand in cands:
        kind, column, of = cand["kind"], cand["column"], list(cand["of"])
        if kind == "sum":
            holds = bool(np.all(sums_match(number(column), [number(p) for p in of])))
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


def detect_rules(schema: Schema, ask: Ask, sites: Sequence[str], n_total: int) -> list[Rule]:
    """Run detection (check, check, map) through ``ask``; the rules to use.

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

    Returns
    -------
    list of Rule
        :func:`select_rules` of the rules every site confirmed.
    """
    found: list[tuple[Candidate, list[list[Any]] | None]] = []
    holding: list[Candidate] = []
    for size in (1, 2):
        skip = {c["column"] for c, _ in found} | {c["column"] for c in holding}
        cands = candidates(schema, n_total, size=size, skip=skip)
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
    rules = [Rule(c["column"], list(c["of"]), c["kind"], mapping) for c, mapping in found]
    return select_rules(schema, rules)


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
        cands.append(cand)
    answers = ask("check", cands)
    _check_lengths(answers, len(cands), sites, "check")
    for k, rule in enumerate(rules):
        against = [s for s, a in zip(sites, answers, strict=True) if a[k] != 1]
        if against:
            raise SchemaError(
                f"the schema's rule for column {rule.column!r} ({rule.describe()}) does not "
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
