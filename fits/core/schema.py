"""Column kinds, the shared schema, and the setup round's merge.

A :class:`Schema` says, for every column, its *kind* (``continuous``, ``ordinal`` or
``nominal``), its category list (discrete columns), its bounds (continuous columns), the
pandas dtype to give back, and the chain order in which columns are drawn.

In a federation nobody sees the pooled table, so the schema is built in a setup round:
each client describes its own table with :func:`describe_table` (counts, category sets,
min / max, dtypes -- never rows), and the coordinator merges the descriptions with
:func:`merge_descriptions`.  Users can override any column's kind, or hand in a complete
schema, in which case only the row counts are asked for.

Inference rule (METHOD.md, *decided*): non-numeric, boolean or categorical dtype ->
nominal (an *ordered* pandas categorical -> ordinal); integer-valued numeric columns with
at most :data:`MAX_ORDINAL_LEVELS` distinct values -> ordinal; every other numeric column
-> continuous.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "KINDS",
    "MAX_ORDINAL_LEVELS",
    "MANY_LEVELS_WARNING",
    "POINT_MASS_SHARE",
    "ColumnSpec",
    "Schema",
    "SchemaError",
    "datetime_seconds",
    "describe_table",
    "merge_descriptions",
    "missing_flag",
    "point_mass_flag",
]

KINDS = ("continuous", "ordinal", "nominal")
#: Integer-valued numeric columns with at most this many distinct values are ordinal.
MAX_ORDINAL_LEVELS = 20
#: A nominal column with more levels than this draws a warning (it is probably an id).
MANY_LEVELS_WARNING = 1000
#: A continuous column whose most frequent value holds at least this share of the
#: (present) values gets a point-mass indicator (zero-inflated columns, e.g. capital-gain).
POINT_MASS_SHARE = 0.1
#: Clients report their most frequent value of a continuous column only from this share.
_POINT_MASS_REPORT = 0.05


class SchemaError(ValueError):
    """Input tables do not fit together, or do not fit the declared schema."""


@dataclass
class ColumnSpec:
    """One column of the shared schema.

    Parameters
    ----------
    name : str
        Column name.
    kind : {"continuous", "ordinal", "nominal"}
        How the column is modelled.
    dtype : str
        The pandas dtype family to restore: ``"float"``, ``"int"``, ``"bool"``,
        ``"category"``, ``"string"`` or ``"object"``.
    categories : list, optional
        Discrete columns: the support.  Ordinal columns keep it in increasing order
        (numeric values, or the order of an ordered categorical); nominal columns keep
        the sorted labels (METHOD.md: coding by sorted labels).
    lower, upper : float, optional
        Continuous columns: the range synthetic values are kept in (datetimes: seconds
        since 1970-01-01 UTC).
    missing : bool
        The column has missing values somewhere.  A discrete column then has ``None``
        among its categories (missing is a category of its own); a continuous column
        gets a missingness indicator drawn just before it in the chain.
    indicates : str, optional
        Set on an internal indicator column: the name of the column it marks.
    indicator : {"missing", "point_mass"}
        With ``indicates``: whether the indicator marks missing values or values at the
        column's point mass.
    point_mass : float, optional
        Continuous columns: a value held by at least :data:`POINT_MASS_SHARE` of the
        rows (e.g. the zeros of a zero-inflated column).  It gets an indicator drawn
        before the column, so synthetic rows hit it exactly as often as real ones.
    tz : str, optional
        Datetime columns: the time zone to restore.
    date_only : bool
        Datetime columns whose values are all at midnight: synthetic values are rounded
        to whole days.
    """

    name: str
    kind: str
    dtype: str = "float"
    categories: list[Any] | None = None
    lower: float | None = None
    upper: float | None = None
    missing: bool = False
    indicates: str | None = None
    tz: str | None = None
    date_only: bool = False
    point_mass: float | None = None
    indicator: str = "missing"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SchemaError(
                f"column {self.name!r}: unknown kind {self.kind!r}; use one of {', '.join(KINDS)}"
            )
        if self.kind != "continuous":
            if not self.categories:
                raise SchemaError(f"column {self.name!r}: a {self.kind} column needs categories")
            if len(set(map(_hashable, self.categories))) != len(self.categories):
                raise SchemaError(f"column {self.name!r}: categories are not unique")

    @property
    def is_discrete(self) -> bool:
        """Whether the column is ordinal or nominal."""
        return self.kind != "continuous"

    @property
    def n_levels(self) -> int:
        """Number of categories (0 for continuous columns)."""
        return len(self.categories) if self.categories else 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "dtype": self.dtype}
        if self.is_discrete:
            out["categories"] = [_hashable(c) for c in self.categories or []]
        else:
            out["lower"] = self.lower
            out["upper"] = self.upper
        if self.missing:
            out["missing"] = True
        if self.indicates is not None:
            out["indicates"] = self.indicates
        if self.tz is not None:
            out["tz"] = self.tz
        if self.date_only:
            out["date_only"] = True
        if self.point_mass is not None:
            out["point_mass"] = self.point_mass
        if self.indicates is not None and self.indicator != "missing":
            out["indicator"] = self.indicator
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ColumnSpec:
        """Inverse of :meth:`to_dict`."""
        cats = d.get("categories")
        return cls(
            name=str(d["name"]),
            kind=str(d["kind"]),
            dtype=str(d.get("dtype", "float")),
            categories=list(cats) if cats is not None else None,
            lower=d.get("lower"),
            upper=d.get("upper"),
            missing=bool(d.get("missing", False)),
            indicates=d.get("indicates"),
            tz=d.get("tz"),
            date_only=bool(d.get("date_only", False)),
            point_mass=d.get("point_mass"),
            indicator=str(d.get("indicator", "missing")),
        )


@dataclass
class Schema:
    """The shared description of every client's table.

    Parameters
    ----------
    columns : list of ColumnSpec
        One spec per column, in the tables' column order.
    order : list of str, optional
        Chain order (the order columns are drawn in); default the column order.
    """

    columns: list[ColumnSpec]
    order: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise SchemaError("schema has duplicate column names")
        if not self.order:
            self.order = list(names)
        if sorted(self.order) != sorted(names):
            missing = sorted(set(names) - set(self.order))
            unknown = sorted(set(self.order) - set(names))
            raise SchemaError(
                "the chain order must name every column exactly once"
                + (f"; missing: {missing}" if missing else "")
                + (f"; unknown: {unknown}" if unknown else "")
            )

    def __getitem__(self, name: str) -> ColumnSpec:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        """Column names in table order."""
        return [c.name for c in self.columns]

    def ordered(self) -> list[ColumnSpec]:
        """Column specs in chain order."""
        return [self[n] for n in self.order]

    def kinds(self) -> dict[str, str]:
        """Mapping column -> kind."""
        return {c.name: c.kind for c in self.columns}

    def expanded(self) -> Schema:
        """The schema the engine draws: each continuous column with missing values is
        preceded in the chain by its missingness indicator (a nominal bool column named
        ``"<column> (missing)"``), and one with a point mass by a point-mass indicator
        (``"<column> (at point mass)"``)."""
        columns, order = list(self.columns), []
        for name in self.order:
            spec = self[name]
            flags = []
            if spec.kind == "continuous" and spec.missing:
                flags.append((missing_flag(name), "missing"))
            if spec.kind == "continuous" and spec.point_mass is not None:
                flags.append((point_mass_flag(name), "point_mass"))
            for flag, what in flags:
                if flag in self.names:
                    raise SchemaError(f"column name {flag!r} is reserved for an indicator")
                columns.append(
                    ColumnSpec(
                        flag, "nominal", "bool", [False, True], indicates=name, indicator=what
                    )
                )
                order.append(flag)
            order.append(name)
        return Schema(columns, order)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (what ``fits schema`` writes)."""
        return {"columns": [c.to_dict() for c in self.columns], "order": list(self.order)}

    def to_json(self, **kwargs: Any) -> str:
        """The schema as a JSON string."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schema:
        """Inverse of :meth:`to_dict`."""
        if "columns" not in d:
            raise SchemaError("a schema needs a 'columns' list")
        return cls([ColumnSpec.from_dict(c) for c in d["columns"]], list(d.get("order") or []))

    @classmethod
    def from_json(cls, text: str) -> Schema:
        """Inverse of :meth:`to_json`."""
        return cls.from_dict(json.loads(text))


# ---------------------------------------------------------------------------------------
# Setup round: what a client reports about its own table, and the coordinator's merge.
# ---------------------------------------------------------------------------------------


def _hashable(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def missing_flag(column: str) -> str:
    """Name of the engine's missingness indicator of a continuous column."""
    return f"{column} (missing)"


def point_mass_flag(column: str) -> str:
    """Name of the engine's point-mass indicator of a continuous column."""
    return f"{column} (at point mass)"


def _dtype_family(s: pd.Series) -> str:
    dt = s.dtype
    if isinstance(dt, pd.CategoricalDtype):
        return "category"
    if pd.api.types.is_bool_dtype(dt):
        return "bool"
    if pd.api.types.is_integer_dtype(dt):
        return "int"
    if pd.api.types.is_float_dtype(dt):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(dt):
        return "datetime"
    if pd.api.types.is_string_dtype(dt) and not pd.api.types.is_object_dtype(dt):
        return "string"
    return "object"


def _sort_labels(labels: Sequence[Any]) -> list[Any]:
    """Sorted labels (METHOD.md: nominal coding by sorted labels); ``None`` last."""
    labels = [_hashable(v) for v in labels]
    present = [v for v in labels if v is not None]
    try:
        out = sorted(present)
    except TypeError:  # mixed types: order by type name, then by text
        out = sorted(present, key=lambda v: (type(v).__name__, str(v)))
    return out + [None] * (len(present) < len(labels))


def datetime_seconds(s: pd.Series) -> np.ndarray:
    """Seconds since 1970-01-01 UTC of a datetime column (NaN where missing)."""
    if getattr(s.dt, "tz", None) is not None:
        s = s.dt.tz_convert("UTC").dt.tz_localize(None)
    values = s.to_numpy(dtype="datetime64[ns]")
    out = values.astype("datetime64[us]").astype(np.int64).astype(float) / 1e6
    out[np.isnat(values)] = np.nan
    return out


def describe_table(
    frame: pd.DataFrame,
    declared: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    client: str = "client",
) -> dict[str, Any]:
    """Describe one client's table for the setup round.

    Reports the row count and, per column, its dtype family and either its category set
    (discrete candidates: non-numeric columns, and integer-valued numeric columns with
    at most :data:`MAX_ORDINAL_LEVELS` values) or its min / max.  No rows are reported.

    Parameters
    ----------
    frame : DataFrame
        The client's table.
    declared : mapping, optional
        Column -> ``{"kind": ...}`` declarations from the user; a column declared
        discrete reports its category set whatever its size.
    client : str
        The client's name, used in error messages.

    Returns
    -------
    dict
        ``{"n_rows": int, "columns": {name: {...}}, "order": [names]}``.
    """
    declared = declared or {}
    if frame.shape[0] == 0:
        raise SchemaError(f"{client}: the table is empty; every client needs rows")
    out: dict[str, Any] = {"n_rows": int(frame.shape[0]), "columns": {}, "order": []}
    for name in frame.columns:
        if not isinstance(name, str):
            raise SchemaError(f"{client}: column names must be strings, got {name!r}")
        out["columns"][name] = _describe_column(frame[name], name, declared, client)
        out["order"].append(name)
    return out


def _describe_column(
    s: pd.Series, name: str, declared: Mapping[str, Mapping[str, Any]], client: str
) -> dict[str, Any]:
    fam = _dtype_family(s)
    kind = declared.get(name, {}).get("kind")
    missing = s.isna().to_numpy()
    info: dict[str, Any] = {"dtype": fam, "n_missing": int(missing.sum())}
    present = s[~missing]
    if present.size == 0:
        info["all_missing"] = True
        return info
    if fam == "datetime":
        if kind in ("ordinal", "nominal"):
            raise SchemaError(
                f"{client}: column {name!r} holds datetimes; it can only be continuous"
            )
        sec = datetime_seconds(present)
        info.update(min=float(sec.min()), max=float(sec.max()), integral=False)
        tz = getattr(s.dt, "tz", None)
        info["tz"] = str(tz) if tz is not None else None
        info["date_only"] = bool(np.all(np.mod(sec, 86400.0) == 0))
        return info
    if fam == "category" and s.cat.ordered:
        info["ordered"] = True
        info["categories"] = [_hashable(c) for c in s.cat.categories]
        info["present"] = [_hashable(c) for c in present.unique()]
        return info
    if fam in ("category", "bool", "string", "object"):
        if kind == "continuous":
            numeric = pd.to_numeric(present, errors="coerce")
            bad = present[numeric.isna()]
            if len(bad):
                raise SchemaError(
                    f"{client}: column {name!r} is declared continuous but holds text "
                    f"such as {bad.iloc[0]!r}; fix the values or declare it nominal"
                )
            values = numeric.to_numpy(dtype=float)
            info.update(min=float(values.min()), max=float(values.max()), integral=False)
            return info
        info["values"] = _sort_labels(present.unique().tolist())
        return info
    values = present.to_numpy(dtype=float)
    if not np.all(np.isfinite(values)):
        raise SchemaError(f"{client}: column {name!r} has infinite values; remove them")
    info["min"] = float(values.min())
    info["max"] = float(values.max())
    integral = bool(np.all(values == np.round(values)))
    uniq = np.unique(values)
    if kind in ("ordinal", "nominal") or (
        kind is None and integral and uniq.size <= MAX_ORDINAL_LEVELS
    ):
        info["values"] = [int(v) if integral else float(v) for v in uniq]
    else:  # a continuous candidate: report a heavy point mass, if any (count only)
        uniq, counts = np.unique(values, return_counts=True)
        top = int(np.argmax(counts))
        if counts[top] >= _POINT_MASS_REPORT * values.size:
            info["top_value"] = float(uniq[top])
            info["top_count"] = int(counts[top])
    info["integral"] = integral
    info["n_present"] = int(values.size)
    return info


def merge_descriptions(
    descriptions: Sequence[Mapping[str, Any]],
    clients: Sequence[str],
    *,
    kinds: Mapping[str, str] | None = None,
    order: Sequence[str] | None = None,
) -> Schema:
    """Merge the clients' setup-round reports into the shared schema.

    Parameters
    ----------
    descriptions : sequence of dict
        What :func:`describe_table` returned at each client.
    clients : sequence of str
        The clients' names, for error messages.
    kinds : mapping, optional
        User overrides: column -> kind.
    order : sequence of str, optional
        Chain order; default the first client's column order.

    Returns
    -------
    Schema
    """
    kinds = dict(kinds or {})
    first = descriptions[0]["order"]
    for desc, client in zip(descriptions, clients, strict=True):
        cols = desc["order"]
        missing = [c for c in first if c not in cols]
        extra = [c for c in cols if c not in first]
        if missing or extra:
            raise SchemaError(
                f"{client}: columns differ from {clients[0]}'s"
                + (f"; missing: {missing}" if missing else "")
                + (f"; extra: {extra}" if extra else "")
                + ". Every client must hold the same columns: rename, add or drop them."
            )
    unknown = sorted(set(kinds) - set(first))
    if unknown:
        raise SchemaError(f"kinds given for unknown column(s) {unknown}; known: {list(first)}")
    specs = []
    for name in first:
        infos = [d["columns"][name] for d in descriptions]
        if all(i.get("all_missing") for i in infos):
            raise SchemaError(f"column {name!r} is missing in every row at every client; drop it")
        spec = _merge_column(
            name, [i for i in infos if not i.get("all_missing")], clients, kinds.get(name)
        )
        if any(i.get("n_missing") for i in infos):
            spec.missing = True
            if spec.is_discrete and None not in (spec.categories or []):
                spec.categories = [*(spec.categories or []), None]
        specs.append(_check_constant(spec))
    return Schema(specs, list(order) if order else list(first))


def _merge_column(
    name: str, infos: Sequence[Mapping[str, Any]], clients: Sequence[str], kind: str | None
) -> ColumnSpec:
    fams = [i["dtype"] for i in infos]
    if "datetime" in fams:
        if set(fams) != {"datetime"}:
            raise SchemaError(
                f"column {name!r} holds datetimes at some clients and not at others; "
                "make its type the same everywhere"
            )
        tzs = {i.get("tz") for i in infos}
        if len(tzs) > 1:
            raise SchemaError(f"column {name!r} has different time zones at different clients")
        spec = ColumnSpec(
            name,
            "continuous",
            "datetime",
            lower=min(float(i["min"]) for i in infos),
            upper=max(float(i["max"]) for i in infos),
            tz=tzs.pop(),
            date_only=all(i.get("date_only") for i in infos),
        )
        return spec
    numeric = {"int", "float"}
    textual = {"string", "object", "category", "bool"}
    if any(f in numeric for f in fams) and any(f in textual for f in fams):
        who = ", ".join(f"{c}: {f}" for c, f in zip(clients, fams, strict=True))
        raise SchemaError(
            f"column {name!r} is numeric at some clients and text at others ({who}); "
            "make its type the same everywhere"
        )
    if kind is not None and kind not in KINDS:
        raise SchemaError(f"column {name!r}: unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    fam = fams[0] if len(set(fams)) == 1 else ("float" if set(fams) <= numeric else "object")

    if any(i.get("ordered") for i in infos):
        cats = list(infos[0]["categories"])
        for i, c in zip(infos, clients, strict=True):
            if list(i.get("categories", [])) != cats:
                raise SchemaError(
                    f"column {name!r}: {c} orders its categories differently from {clients[0]}"
                )
        used = {v for i in infos for v in i["present"]}
        cats = [c for c in cats if c in used] or cats
        spec = ColumnSpec(name, kind or "ordinal", "category", cats)
        return spec

    if fam in textual or all("values" in i for i in infos) and kind != "continuous":
        if kind == "continuous":
            raise SchemaError(f"column {name!r} holds text; it cannot be continuous")
        values = _sort_labels(list({_hashable(v) for i in infos for v in i["values"]}))
        if fam in numeric:
            inferred = "ordinal"
        else:
            inferred = "nominal"
        spec = ColumnSpec(name, kind or inferred, fam, values)
        if spec.n_levels > MANY_LEVELS_WARNING:
            warnings.warn(
                f"column {name!r} has {spec.n_levels} levels; it looks like an identifier. "
                "Drop it (an identifier has no distribution to learn), group rare levels, "
                + (
                    f"or declare it continuous with kinds={{'{name}': 'continuous'}}"
                    if fam in numeric
                    else "or map it to fewer labels before fitting"
                ),
                stacklevel=3,
            )
        return spec

    # continuous (or declared discrete but too many values were not reported)
    if kind in ("ordinal", "nominal"):
        raise SchemaError(f"column {name!r}: declared {kind} but a client did not list its values")
    lo = min(float(i["min"]) for i in infos)
    hi = max(float(i["max"]) for i in infos)
    if fam == "float" and all(i.get("integral") for i in infos) and "int" in fams:
        fam = "int"
    spec = ColumnSpec(name, "continuous", fam, None, lo, hi)
    present = sum(int(i.get("n_present", 0)) for i in infos)
    tops: dict[float, int] = {}
    for i in infos:
        if "top_value" in i:
            tops[float(i["top_value"])] = tops.get(float(i["top_value"]), 0) + int(i["top_count"])
    if tops and present:
        value, count = max(tops.items(), key=lambda kv: kv[1])
        if count >= POINT_MASS_SHARE * present and lo < hi:
            spec.point_mass = value
    return spec


def _check_constant(spec: ColumnSpec) -> ColumnSpec:
    constant = (
        spec.n_levels == 1
        if spec.is_discrete
        else spec.lower is not None and spec.upper is not None and spec.lower == spec.upper
    )
    if constant:
        raise SchemaError(
            f"column {spec.name!r} is constant across all clients; it carries no information: "
            "drop it before fitting and add it back to the synthetic table"
        )
    if spec.kind == "continuous" and not (
        math.isfinite(spec.lower or 0.0) and math.isfinite(spec.upper or 0.0)
    ):
        raise SchemaError(f"column {spec.name!r} has non-finite bounds")
    return spec
