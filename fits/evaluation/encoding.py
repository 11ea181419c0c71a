"""The shared encoding of mixed-type tables for every evaluator.

Validation of the tables and column kinds, and the numeric encoding the metrics use:
continuous and ordinal columns standardized with the reference (real) table's mean
and standard deviation, nominal columns one-hot encoded with each block divided by
``sqrt(2)`` so that two distinct categories are at unit distance (paper sec. 6.2.3).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

#: The column kinds understood by the metrics: the kinds of ``fits.core.schema.KINDS``
#: that are modelled (all but ``"id"``), kept here so that the evaluators need nothing
#: of the engine; tests/test_evaluation.py checks that the two agree.
KINDS: tuple[str, ...] = ("continuous", "ordinal", "nominal")

#: The largest magnitude of a numeric value (and of a standardized one) the metrics
#: accept: squares summed over many rows and columns stay below float64's largest
#: number, so no distance, moment or standard deviation overflows into inf or NaN.
MAX_ABS = 1e150


def row_keys(points: np.ndarray) -> np.ndarray:
    """One hashable byte string per row of a 2-d float array (bit-exact equality, -0.0 == 0.0).

    Equal rows get equal keys, so ``np.unique`` / ``np.isin`` on the keys find repeated
    and copied rows exactly.
    """
    arr = np.ascontiguousarray(points + 0.0)
    return arr.view(np.dtype((np.void, arr.dtype.itemsize * arr.shape[1]))).ravel()


def resolve_columns(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    kinds: Mapping[str, str],
    columns: Sequence[str] | None,
) -> list[str]:
    """Check the requested columns and their kinds; return the column list."""
    cols = list(kinds) if columns is None else list(columns)
    if not cols:
        raise ValueError("no columns to compare: `kinds` (or `columns`) is empty")
    if len(set(cols)) != len(cols):
        raise ValueError(f"duplicate column names in {cols!r}")
    for col in cols:
        if col not in kinds:
            raise ValueError(f"column {col!r} has no kind in `kinds`")
        if kinds[col] not in KINDS:
            raise ValueError(
                f"unknown kind {kinds[col]!r} for column {col!r}; expected one of {KINDS}"
            )
        for name, frame in (("real", real), ("synthetic", synthetic)):
            if col not in frame.columns:
                raise ValueError(f"column {col!r} is missing from the {name} table")
    for name, frame in (("real", real), ("synthetic", synthetic)):
        if len(frame) == 0:
            raise ValueError(f"the {name} table has no rows")
    for col in cols:
        for name, frame in (("real", real), ("synthetic", synthetic)):
            if frame[col].isna().any():
                raise ValueError(
                    f"column {col!r} has missing values in the {name} table; "
                    "drop or impute them before computing fidelity metrics"
                )
    return cols


def check_tables(
    frames: Sequence[pd.DataFrame],
    names: Sequence[str],
    kinds: Mapping[str, str],
    columns: Sequence[str],
) -> list[str]:
    """:func:`resolve_columns` for any number of named tables."""
    cols = resolve_columns(frames[0], frames[0], kinds, columns)
    for frame, name in zip(frames, names, strict=True):
        for col in cols:
            if col not in frame.columns:
                raise ValueError(f"column {col!r} is missing from the {name} table")
        if len(frame) == 0:
            raise ValueError(f"the {name} table has no rows")
        for col in cols:
            if frame[col].isna().any():
                raise ValueError(
                    f"column {col!r} has missing values in the {name} table; "
                    "drop or impute them before computing fidelity metrics"
                )
    return cols


def as_rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    """Return a numpy Generator from a seed, a Generator or None."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def numeric_values(series: pd.Series, col: str, table: str) -> np.ndarray:
    """Return a column as finite float64 values, or raise a clear error."""
    if not (
        pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype)
    ):
        raise ValueError(
            f"column {col!r} in the {table} table is not numeric (dtype {series.dtype})"
        )
    values = series.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"column {col!r} has non-finite values in the {table} table")
    if values.size and np.abs(values).max() > MAX_ABS:
        raise ValueError(
            f"column {col!r} in the {table} table holds values beyond +-{MAX_ABS:g} (the "
            f"largest: {values[np.argmax(np.abs(values))]:g}); their squares overflow, so "
            "no distance or moment can be computed: rescale the column in every table "
            "(e.g. divide it by a power of ten)"
        )
    return values


def text_values(series: pd.Series, limit: int = 3) -> list[object]:
    """Up to ``limit`` distinct values of a column that do not read as numbers.

    Empty for a numeric, boolean, datetime or timedelta column, and for text that reads
    as numbers throughout (``"1.5"``); used to tell a column declared continuous that
    holds labels, before any step stumbles on it.
    """
    dtype = series.dtype
    if (
        pd.api.types.is_numeric_dtype(dtype)
        or pd.api.types.is_bool_dtype(dtype)
        or pd.api.types.is_datetime64_any_dtype(dtype)
        or pd.api.types.is_timedelta64_dtype(dtype)
    ):
        return []
    present = pd.Series(series.dropna().unique())
    return present[pd.to_numeric(present, errors="coerce").isna()].tolist()[:limit]


def category_codes(real: pd.Series, synthetic: pd.Series) -> tuple[np.ndarray, np.ndarray, int]:
    """Code two columns over the union of the categories seen in either of them.

    Returns
    -------
    codes_real, codes_synthetic : numpy.ndarray
        Integer codes in ``[0, n_categories)``.
    n_categories : int
        Size of the union.
    """
    (codes_r, codes_s), n_cat = category_codes_many([real, synthetic])
    return codes_r, codes_s, n_cat


def category_codes_many(series: Sequence[pd.Series]) -> tuple[list[np.ndarray], int]:
    """Code several columns over the union of the categories seen in any of them.

    The union keeps the order of first appearance (first series first).

    Returns
    -------
    codes : list of numpy.ndarray
        Integer codes in ``[0, n_categories)``, one array per series.
    n_categories : int
        Size of the union.
    """
    values = [s.to_numpy(dtype=object) for s in series]
    union = pd.Index(pd.unique(np.concatenate(values)))
    return [union.get_indexer(v) for v in values], len(union)


def ordinal_values_many(
    series: Sequence[pd.Series], col: str, names: Sequence[str]
) -> list[np.ndarray]:
    """Numeric values of an ordinal column in several tables.

    Numeric columns (and categoricals with numeric categories) keep their values;
    other categoricals are replaced by their category codes, in the category order of
    the first series that is categorical (the reference comes first).
    """
    categorical = [s for s in series if isinstance(s.dtype, pd.CategoricalDtype)]
    if not categorical:
        return [numeric_values(s, col, name) for s, name in zip(series, names, strict=True)]
    categories = categorical[0].dtype.categories
    if pd.api.types.is_numeric_dtype(categories.dtype):
        return [
            numeric_values(s.astype(categories.dtype), col, name)
            for s, name in zip(series, names, strict=True)
        ]
    out = []
    for s, name in zip(series, names, strict=True):
        codes = pd.Categorical(s.to_numpy(dtype=object), categories=categories).codes
        if np.any(codes < 0):
            bad = s[codes < 0].iloc[0]
            raise ValueError(
                f"ordinal column {col!r} in the {name} table has value {bad!r}, "
                "which is not one of the ordered categories"
            )
        out.append(codes.astype(np.float64))
    return out


def encode(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    kinds: Mapping[str, str],
    columns: Sequence[str],
) -> tuple[np.ndarray, np.ndarray]:
    """Encode both tables as float64 matrices for the energy distance.

    Continuous and ordinal columns are standardized with the reference (``real``)
    mean and sd (``ddof=0``; an sd of 0 is replaced by 1). Nominal columns are
    one-hot encoded over the union of categories, each block divided by sqrt(2).
    """
    x, y = encode_many([real, synthetic], kinds, columns, ("real", "synthetic"))[0]
    return x, y


def encode_many(
    frames: Sequence[pd.DataFrame],
    kinds: Mapping[str, str],
    columns: Sequence[str],
    names: Sequence[str],
) -> tuple[list[np.ndarray], list[slice]]:
    """Encode several tables on the scale of the first one (the reference).

    The encoding of :func:`energy_distance`: continuous and ordinal columns are
    standardized with the reference's mean and sd (``ddof=0``; an sd of 0 becomes
    1), nominal columns are one-hot over the union of the categories seen in any
    table, each block divided by sqrt(2).

    Returns
    -------
    encoded : list of numpy.ndarray
        One ``(n_rows, n_features)`` float64 matrix per table.
    spans : list of slice
        The feature columns of each input column, in the order of ``columns``.
    """
    blocks: list[list[np.ndarray]] = [[] for _ in frames]
    spans: list[slice] = []
    width = 0
    for col in columns:
        kind = kinds[col]
        if kind == "nominal":
            codes, n_cat = category_codes_many([f[col] for f in frames])
            scale = 1.0 / np.sqrt(2.0)
            for code, out in zip(codes, blocks, strict=True):
                onehot = np.zeros((code.size, n_cat), dtype=np.float64)
                onehot[np.arange(code.size), code] = scale
                out.append(onehot)
            spans.append(slice(width, width + n_cat))
            width += n_cat
            continue
        if kind == "continuous":
            values = [
                numeric_values(f[col], col, name) for f, name in zip(frames, names, strict=True)
            ]
        else:
            values = ordinal_values_many([f[col] for f in frames], col, names)
        mean = values[0].mean()
        sd = values[0].std()
        if not sd > 0:
            sd = 1.0
        for v, out, name in zip(values, blocks, names, strict=True):
            z = (v - mean) / sd
            if z.size and not np.abs(z).max() <= MAX_ABS:
                raise ValueError(
                    f"column {col!r} in the {name} table holds a value "
                    f"{v[np.argmax(np.abs(z))]:g}, {np.abs(z).max():.3g} standard "
                    f"deviations of the {names[0]} table from its mean; distances that "
                    "large overflow: check how this column was made"
                )
            out.append(z[:, None])
        spans.append(slice(width, width + 1))
        width += 1
    return [np.hstack(b) for b in blocks], spans


def n_workers(n_jobs: int | None) -> int:
    """Number of worker threads: ``n_jobs``, or the CPUs this process may use."""
    if n_jobs is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return max(1, os.cpu_count() or 1)
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be a positive integer or None, got {n_jobs}")
    return int(n_jobs)


def total_variation(p_counts: np.ndarray, q_counts: np.ndarray) -> float:
    """Total variation distance between two count vectors (normalized here), in
    ``[0, 1]``: exactly 1 for disjoint supports (half the sum of ``|p - q|`` is ``1 +-
    1e-16`` there, which showed as a fidelity score of ``-2.2e-16`` or ``1.1e-16``)."""
    p = p_counts / p_counts.sum()
    q = q_counts / q_counts.sum()
    if not (np.minimum(p, q) > 0).any():
        return 1.0
    return float(np.clip(0.5 * np.abs(p - q).sum(), 0.0, 1.0))


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation; 0 when either column is constant."""
    a = a - a.mean()
    b = b - b.mean()
    denom = np.sqrt((a @ a) * (b @ b))
    if not denom > 0:
        return 0.0
    return float(np.clip((a @ b) / denom, -1.0, 1.0))


def discretize(
    real: pd.Series, synthetic: pd.Series, kind: str, col: str, bins: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Codes of a column in both tables for contingency tables.

    Continuous columns are cut at the real data's quantiles into at most ``bins``
    bins (tied edges merged); the same edges are applied to the synthetic values,
    with values outside the real range falling into the outer bins. Discrete
    columns are coded over the union of their categories.
    """
    if kind != "continuous":
        return category_codes(real, synthetic)
    xr = numeric_values(real, col, "real")
    xs = numeric_values(synthetic, col, "synthetic")
    edges = np.quantile(xr, np.linspace(0.0, 1.0, bins + 1))
    inner = np.unique(edges[1:-1])
    return (
        np.searchsorted(inner, xr, side="right"),
        np.searchsorted(inner, xs, side="right"),
        inner.size + 1,
    )
