"""Continualization of discrete columns (paper sec. 4.1-4.2) and its exact inverse.

A discrete column with support v_1 < ... < v_L gets the intervals
I_l = (v_{l-1}, v_l] with v_0 = v_1 - 1 (ordinal, eq. 18) or I_l = (l-1, l] for the
sorted labels of a nominal column (eq. 20).  A value in category l is lifted to
``Y = v_l - U |I_l|`` with ``U ~ Unif(0, 1)``, so the mass of category l is spread
uniformly over I_l; the ceiling map (eq. 19) -- "the interval that contains Y" --
recovers the category exactly.

Everything here works on integer *codes* 0..L-1 (the position in the column's category
list); :class:`Encoder` converts a client's raw column to codes and back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from fits.schema import ColumnSpec, SchemaError

__all__ = ["Encoder", "interval_boundaries"]


def interval_boundaries(spec: ColumnSpec) -> np.ndarray:
    """Boundaries v_0 < v_1 < ... < v_L of a discrete column's intervals.

    Ordinal columns with numeric categories use their values (v_0 = v_1 - 1, eq. 18);
    nominal columns and ordinal columns with non-numeric categories use the codes
    0, 1, ..., L (eq. 20), so category with code c lives in (c, c + 1].
    """
    if not spec.is_discrete:
        raise ValueError(f"column {spec.name!r} is continuous; it has no intervals")
    cats = spec.categories or []
    if spec.kind == "ordinal" and all(_is_number(c) for c in cats):
        v = np.asarray(cats, dtype=float)
        if np.any(np.diff(v) <= 0):
            raise SchemaError(f"column {spec.name!r}: ordinal values must be increasing")
        return np.concatenate([[v[0] - 1.0], v])
    return np.arange(len(cats) + 1, dtype=float)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


class Encoder:
    """Numeric representation of one column, with continualization for discrete columns.

    Parameters
    ----------
    spec : ColumnSpec
        The column's schema entry.
    """

    def __init__(self, spec: ColumnSpec) -> None:
        self.spec = spec
        if spec.is_discrete:
            self.boundaries = interval_boundaries(spec)
            self.widths = np.diff(self.boundaries)
            self.midpoints = self.boundaries[:-1] + self.widths / 2.0
        else:
            self.boundaries = self.widths = self.midpoints = None

    # -- raw values <-> codes ------------------------------------------------------------
    def to_codes(self, values: pd.Series, *, client: str = "client") -> np.ndarray:
        """Codes 0..L-1 of a discrete column's raw values.

        Raises
        ------
        SchemaError
            If a value is not among the schema's categories (names column, client and
            the first unknown values).
        """
        spec = self.spec
        cats = spec.categories or []
        if isinstance(values.dtype, pd.CategoricalDtype):
            values = values.astype(object)
        index = pd.Index(cats)
        codes = index.get_indexer(pd.Index(values.to_numpy()))
        if np.any(codes < 0):
            bad = pd.unique(values.to_numpy()[codes < 0])[:5]
            raise SchemaError(
                f"{client}: column {spec.name!r} has value(s) {list(bad)} that are not among "
                f"its categories {cats[:10]}{'...' if len(cats) > 10 else ''}; add them to "
                "the schema or fix the data"
            )
        return codes.astype(np.int64)

    def to_numeric(self, values: pd.Series, *, client: str = "client") -> np.ndarray:
        """A continuous column's values as float64 (with a clear error for text)."""
        try:
            out = pd.to_numeric(values, errors="raise").to_numpy(dtype=float)
        except (ValueError, TypeError) as exc:
            raise SchemaError(
                f"{client}: column {self.spec.name!r} is continuous in the schema but holds "
                f"non-numeric values ({exc}); fix the values or declare the column nominal"
            ) from None
        if not np.all(np.isfinite(out)):
            raise SchemaError(f"{client}: column {self.spec.name!r} has missing or infinite values")
        return out

    # -- continualization ----------------------------------------------------------------
    def lift(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Lift codes to the continuous scale: Y = v_l - U |I_l|, U ~ Unif(0, 1).

        The result lies in the open-closed interval (v_{l-1}, v_l] of each code, so
        :meth:`ceil` inverts it exactly.
        """
        b = self.boundaries
        upper = b[codes + 1]
        lower = b[codes]
        y = upper - rng.random(codes.shape[0]) * (upper - lower)
        # U < 1, but rounding can still land on the open end; nudge it inside.
        low = y <= lower
        if np.any(low):
            y[low] = np.nextafter(lower[low], np.inf)
        return y

    def ceil(self, y: np.ndarray) -> np.ndarray:
        """The ceiling map (eq. 19): code of the interval (v_{l-1}, v_l] containing y.

        Values below v_0 or above v_L are mapped to the first / last category.
        """
        b = self.boundaries
        codes = np.searchsorted(b, y, side="left") - 1
        return np.clip(codes, 0, len(b) - 2)

    def midpoint(self, y: np.ndarray) -> np.ndarray:
        """Replace lifted values by the midpoint of their interval (eq. 24)."""
        return self.midpoints[self.ceil(y)]

    # -- back to the user's values -------------------------------------------------------
    def decode(self, y: np.ndarray) -> pd.Series:
        """Turn synthetic values on the numeric scale back into the column's values.

        Discrete columns map through the ceiling map to their labels; continuous columns
        are clipped to the schema bounds and rounded when the column holds integers.
        """
        spec = self.spec
        if spec.is_discrete:
            cats = np.empty(len(spec.categories or []), dtype=object)
            cats[:] = spec.categories
            labels = cats[self.ceil(y)]
            if spec.dtype == "category":
                return pd.Series(
                    pd.Categorical(
                        labels, categories=spec.categories, ordered=spec.kind == "ordinal"
                    ),
                    name=spec.name,
                )
            if spec.dtype == "bool":
                return pd.Series(labels.astype(bool), name=spec.name)
            if spec.dtype == "int":
                return pd.Series(labels.astype(np.int64), name=spec.name)
            if spec.dtype == "float":
                return pd.Series(labels.astype(float), name=spec.name)
            if spec.dtype == "string":
                return pd.Series(labels, name=spec.name, dtype="string")
            return pd.Series(labels, name=spec.name, dtype=object)
        lo = -np.inf if spec.lower is None else spec.lower
        hi = np.inf if spec.upper is None else spec.upper
        x = np.clip(y, lo, hi)
        if spec.dtype == "int":
            return pd.Series(np.round(x).astype(np.int64), name=spec.name)
        return pd.Series(x, name=spec.name)
