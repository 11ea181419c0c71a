"""Fidelity metrics for synthetic tables (paper sec. 6.2.3, appendix D.1).

The headline metric is the energy distance ``D_E`` of Székely and Rizzo, computed
exactly as the paper's V-statistic

.. math::

    D_E = \\sqrt{\\tfrac{2}{nm}\\sum_{i,j}\\lVert x_i - y_j\\rVert
          - \\tfrac{1}{n^2}\\sum_{i,k}\\lVert x_i - x_k\\rVert
          - \\tfrac{1}{m^2}\\sum_{j,l}\\lVert y_j - y_l\\rVert}

on an encoding of the mixed-type rows: continuous and ordinal columns are
standardized with the reference (real) table's mean and standard deviation, and
nominal columns are one-hot encoded with each block divided by ``sqrt(2)`` so that
two distinct categories are at unit distance.

The pairwise distances are never held as a whole ``n x m`` matrix: they are
evaluated tile by tile from matrix products (``|a|^2 + |b|^2 - 2 a.b``), so tens
of thousands of rows are handled exactly in bounded memory.

:func:`energy_distances` scores several tables against one reference on several
column sets at once (the paper's "covariates" and "covariates + response"
distances, with their floors), sharing the reference's own distances and one tile
pass over all column sets; the tiles are spread over threads.

The module also offers simpler diagnostics: per-column fidelity (Kolmogorov-Smirnov
or total variation), per-pair fidelity (correlation or contingency tables), and a
column-wise independent resample that serves as a "no dependence" floor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats
from threadpoolctl import threadpool_limits

__all__ = [
    "KINDS",
    "column_fidelity",
    "energy_distance",
    "energy_distances",
    "independent_resample",
    "mean_pairwise_distance",
    "pair_fidelity",
]

#: The column kinds understood by the metrics.
KINDS: tuple[str, ...] = ("continuous", "ordinal", "nominal")

#: Rows per sub-tile of a distance tile; keeps each tile cache friendly.
_TILE_ROWS = 512


# --------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------


def _resolve_columns(
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


def _check_tables(
    frames: Sequence[pd.DataFrame],
    names: Sequence[str],
    kinds: Mapping[str, str],
    columns: Sequence[str],
) -> list[str]:
    """:func:`_resolve_columns` for any number of named tables."""
    cols = _resolve_columns(frames[0], frames[0], kinds, columns)
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


def _as_rng(random_state: int | np.random.Generator | None) -> np.random.Generator:
    """Return a numpy Generator from a seed, a Generator or None."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(random_state)


def _numeric(series: pd.Series, col: str, table: str) -> np.ndarray:
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
    return values


def _category_codes(real: pd.Series, synthetic: pd.Series) -> tuple[np.ndarray, np.ndarray, int]:
    """Code two columns over the union of the categories seen in either of them.

    Returns
    -------
    codes_real, codes_synthetic : numpy.ndarray
        Integer codes in ``[0, n_categories)``.
    n_categories : int
        Size of the union.
    """
    (codes_r, codes_s), n_cat = _category_codes_many([real, synthetic])
    return codes_r, codes_s, n_cat


def _category_codes_many(series: Sequence[pd.Series]) -> tuple[list[np.ndarray], int]:
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


def _ordinal_values(real: pd.Series, synthetic: pd.Series, col: str) -> tuple[np.ndarray, ...]:
    """Numeric values of an ordinal column in both tables.

    Numeric columns (and categoricals with numeric categories) keep their values;
    other categoricals are replaced by their category codes in the reference's
    category order (the synthetic table's order if only it is categorical).
    """
    return tuple(_ordinal_values_many([real, synthetic], col, ("real", "synthetic")))


def _ordinal_values_many(
    series: Sequence[pd.Series], col: str, names: Sequence[str]
) -> list[np.ndarray]:
    """Numeric values of an ordinal column in several tables (see :func:`_ordinal_values`).

    The category order of an ordered categorical is taken from the first series
    that is categorical (the reference comes first).
    """
    categorical = [s for s in series if isinstance(s.dtype, pd.CategoricalDtype)]
    if not categorical:
        return [_numeric(s, col, name) for s, name in zip(series, names, strict=True)]
    categories = categorical[0].dtype.categories
    if pd.api.types.is_numeric_dtype(categories.dtype):
        return [
            _numeric(s.astype(categories.dtype), col, name)
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


def _encode(
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
    x, y = _encode_many([real, synthetic], kinds, columns, ("real", "synthetic"))[0]
    return x, y


def _encode_many(
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
            codes, n_cat = _category_codes_many([f[col] for f in frames])
            scale = 1.0 / np.sqrt(2.0)
            for code, out in zip(codes, blocks, strict=True):
                onehot = np.zeros((code.size, n_cat), dtype=np.float64)
                onehot[np.arange(code.size), code] = scale
                out.append(onehot)
            spans.append(slice(width, width + n_cat))
            width += n_cat
            continue
        if kind == "continuous":
            values = [_numeric(f[col], col, name) for f, name in zip(frames, names, strict=True)]
        else:
            values = _ordinal_values_many([f[col] for f in frames], col, names)
        mean = values[0].mean()
        sd = values[0].std()
        if not sd > 0:
            sd = 1.0
        for v, out in zip(values, blocks, strict=True):
            out.append(((v - mean) / sd)[:, None])
        spans.append(slice(width, width + 1))
        width += 1
    return [np.hstack(b) for b in blocks], spans


# --------------------------------------------------------------------------------------
# exact chunked pairwise distances
# --------------------------------------------------------------------------------------


def _as_points(a: np.ndarray, name: str) -> np.ndarray:
    """Return ``a`` as a finite, non-empty 2-D float64 array (1-D becomes one column)."""
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"`{name}` must be 1-D or 2-D, got {arr.ndim} dimensions")
    if arr.shape[0] == 0:
        raise ValueError(f"`{name}` has no rows")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` has non-finite values")
    return arr


def _distance_form(points: np.ndarray, weights: np.ndarray, chunk_size: int) -> np.ndarray:
    """Return ``W^T D W`` with ``D[i, j] = ||points[i] - points[j]||`` (Euclidean).

    ``points`` must hold distinct rows (the diagonal of ``D`` is set to exactly 0).
    The symmetric matrix ``D`` is evaluated over its upper triangle in tiles of at
    most ``min(chunk_size, 512) x chunk_size`` entries, each tile from one matrix
    product of augmented matrices whose entries are ``|a|^2 + |b|^2 - 2 a.b``.

    Parameters
    ----------
    points : numpy.ndarray
        ``(N, d)`` float64 array of distinct rows.
    weights : numpy.ndarray
        ``(N, k)`` float64 weights.
    chunk_size : int
        Tile edge.

    Returns
    -------
    numpy.ndarray
        ``(k, k)`` array.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}")
    n_points = points.shape[0]
    # Centring does not change distances and shrinks |a|^2, so less cancellation.
    centred = points - points.mean(axis=0)
    sq = np.einsum("ij,ij->i", centred, centred)[:, None]
    ones = np.ones((n_points, 1))
    left = np.hstack([-2.0 * centred, sq, ones])
    right = np.ascontiguousarray(np.hstack([centred, ones, sq]).T)
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    k = weights.shape[1]
    total = np.zeros((k, k))
    rows = min(chunk_size, _TILE_ROWS)
    for start in range(0, n_points, chunk_size):
        stop = min(start + chunk_size, n_points)
        for col in range(start, n_points, chunk_size):
            col_stop = min(col + chunk_size, n_points)
            w_col = weights[col:col_stop]
            for row in range(start, stop, rows):
                row_stop = min(row + rows, stop)
                tile = left[row:row_stop] @ right[:, col:col_stop]
                np.maximum(tile, 0.0, out=tile)
                np.sqrt(tile, out=tile)
                if col == start:
                    # diagonal block, computed in full: set D[i, i] = 0 exactly
                    idx = np.arange(row_stop - row)
                    tile[idx, idx + (row - col)] = 0.0
                part = weights[row:row_stop].T @ (tile @ w_col)
                if col == start:
                    total += part
                else:
                    total += part + part.T
    return total


def _unique_union(*arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of the stacked arrays, and per-array row counts.

    Returns
    -------
    unique : numpy.ndarray
        ``(U, d)`` distinct rows.
    counts : numpy.ndarray
        ``(U, len(arrays))`` float64 multiplicities of each distinct row per array.
    """
    stacked = np.vstack(arrays) + 0.0  # + 0.0 maps -0.0 to 0.0
    unique, inverse = np.unique(stacked, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    counts = np.zeros((unique.shape[0], len(arrays)))
    offset = 0
    for i, arr in enumerate(arrays):
        counts[:, i] = np.bincount(inverse[offset : offset + arr.shape[0]], minlength=len(unique))
        offset += arr.shape[0]
    return unique, counts


def mean_pairwise_distance(
    a: np.ndarray, b: np.ndarray | None = None, chunk_size: int = 2048
) -> float:
    """Mean Euclidean distance over all pairs of rows, computed exactly in chunks.

    Parameters
    ----------
    a : numpy.ndarray
        ``(n, d)`` array (a 1-D array is one column).
    b : numpy.ndarray, optional
        ``(m, d)`` array. If None, the mean is over all ``n^2`` ordered pairs of
        rows of ``a`` (the V-statistic: the ``n`` zero self-distances included).
    chunk_size : int, default 2048
        Tile edge: at most ``min(chunk_size, 512) x chunk_size`` distances are
        held in memory at once.

    Returns
    -------
    float
        ``1/(n m) sum_ij ||a_i - b_j||`` or ``1/n^2 sum_ik ||a_i - a_k||``.

    Notes
    -----
    Repeated rows are merged (with multiplicities as weights) before the tiles
    are evaluated, so exact duplicates contribute an exact zero instead of a
    rounding residue of ``|a|^2 + |b|^2 - 2 a.b``; heavily discrete tables also
    get much faster.
    """
    a = _as_points(a, "a")
    if b is None:
        unique, counts = _unique_union(a)
        return float(_distance_form(unique, counts, chunk_size)[0, 0]) / a.shape[0] ** 2
    b = _as_points(b, "b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"`a` has {a.shape[1]} columns but `b` has {b.shape[1]}")
    unique, counts = _unique_union(a, b)
    return float(_distance_form(unique, counts, chunk_size)[0, 1]) / (a.shape[0] * b.shape[0])


def _energy_distance_points(
    x: np.ndarray, y: np.ndarray, chunk_size: int, n_jobs: int | None = 1
) -> float:
    """Energy distance (V-statistic, square root) between two encoded point sets.

    Repeated rows are merged and the radicand is accumulated as ``-v^T D v`` with
    ``v = p_x - p_y`` (signed weights), which is exactly 0 for identical empirical
    distributions.
    """
    radicand = float(_energy_radicands([x, y], [slice(0, x.shape[1])], chunk_size, n_jobs)[0, 0])
    return float(np.sqrt(radicand)) if radicand > 0.0 else 0.0


def energy_distance(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    kinds: Mapping[str, str],
    columns: Sequence[str] | None = None,
    *,
    max_rows: int | None = None,
    random_state: int | np.random.Generator | None = None,
    chunk_size: int = 2048,
    n_jobs: int | None = None,
) -> float:
    """Energy distance between a reference table and a synthetic table.

    The paper's ``D_E`` (sec. 6.2.3): the square root of the V-statistic
    ``2/(nm) sum ||x_i - y_j|| - 1/n^2 sum ||x_i - x_k|| - 1/m^2 sum ||y_j - y_l||``
    with Euclidean norms, on this encoding of the rows:

    * continuous and ordinal columns are standardized by the reference
      (``real``) mean and standard deviation (``ddof=0``; an sd of 0 becomes 1).
      Ordinal values are used as numbers; a non-numeric ordinal column (an
      ordered categorical) is replaced by its category codes, in the reference's
      category order;
    * nominal columns are one-hot encoded over the union of the categories seen
      in either table, each block divided by ``sqrt(2)`` so that two distinct
      categories are at distance 1.

    Parameters
    ----------
    real : pandas.DataFrame
        Reference table (its means and sds set the scale).
    synthetic : pandas.DataFrame
        Table to compare with the reference.
    kinds : Mapping[str, str]
        Column name -> ``"continuous"``, ``"ordinal"`` or ``"nominal"``.
    columns : Sequence[str], optional
        Columns to use (default: the keys of ``kinds``, in order).
    max_rows : int, optional
        If given, each table with more rows is replaced by a uniform subsample
        (without replacement) of ``max_rows`` rows. The encoding (means, sds,
        categories) is still computed from the full tables.
    random_state : int or numpy.random.Generator, optional
        Seed or generator for the subsample.
    chunk_size : int, default 2048
        Tile edge for the distance computation; memory use is about
        ``8 * min(chunk_size, 512) * chunk_size`` bytes per worker beyond the
        encoded tables.
    n_jobs : int, optional
        Worker threads (default: every CPU this process may use). The result does
        not depend on it.

    Returns
    -------
    float
        ``D_E >= 0`` (0 for identical tables). A tiny negative radicand from
        rounding is clipped to 0.

    Raises
    ------
    ValueError
        If a column is missing from either table, has no or an unknown kind, has
        missing values, a continuous column is not numeric, or a table is empty.

    Notes
    -----
    The computation is exact (no subsampling unless ``max_rows`` is set): all
    pairwise distances are evaluated, tile by tile, from matrix products. Repeated
    encoded rows are merged first and the result is accumulated as ``-v^T D v``
    with ``v = p_real - p_synthetic`` (the signed empirical weights of the
    distinct rows), which equals the radicand above.
    """
    cols = _resolve_columns(real, synthetic, kinds, columns)
    x, y = _encode(real, synthetic, kinds, cols)
    if max_rows is not None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be a positive integer, got {max_rows}")
        rng = _as_rng(random_state)
        if x.shape[0] > max_rows:
            x = x[np.sort(rng.choice(x.shape[0], size=max_rows, replace=False))]
        if y.shape[0] > max_rows:
            y = y[np.sort(rng.choice(y.shape[0], size=max_rows, replace=False))]
    return _energy_distance_points(x, y, chunk_size, n_jobs)


# --------------------------------------------------------------------------------------
# several tables and column sets at once
# --------------------------------------------------------------------------------------

#: Most "twin" pairs (distinct rows equal on a column set) handled inside one shared
#: pass; beyond this, each column set gets a pass of its own (same result, slower).
_MAX_TWIN_PAIRS = 5_000_000


def _augment(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left and right factors whose product holds the squared distances of ``points``."""
    centred = points - points.mean(axis=0)
    sq = np.einsum("ij,ij->i", centred, centred)[:, None]
    ones = np.ones((points.shape[0], 1))
    left = np.hstack([-2.0 * centred, sq, ones])
    right = np.ascontiguousarray(np.hstack([centred, ones, sq]).T)
    return left, right


def _row_ids(points: np.ndarray) -> np.ndarray:
    """Integer id per row; equal rows (bit for bit, -0.0 == 0.0) share an id."""
    arr = np.ascontiguousarray(points + 0.0)
    if arr.shape[1] == 0:
        return np.zeros(arr.shape[0], dtype=np.int64)
    view = arr.view(np.dtype((np.void, arr.dtype.itemsize * arr.shape[1]))).ravel()
    return np.unique(view, return_inverse=True)[1].reshape(-1)


def _twin_pairs(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """All ordered pairs ``(i, j)``, ``i != j``, of rows with the same id.

    Returns None when there are more than :data:`_MAX_TWIN_PAIRS` of them. The
    pairs come sorted by ``i``.
    """
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    sizes = np.diff(np.r_[starts, ids.size])
    if int((sizes * (sizes - 1)).sum()) > _MAX_TWIN_PAIRS:
        return None
    first: list[np.ndarray] = []
    second: list[np.ndarray] = []
    for start, size in zip(starts[sizes > 1], sizes[sizes > 1], strict=True):
        members = order[start : start + size]
        a, b = np.meshgrid(members, members, indexing="ij")
        keep = a != b
        first.append(a[keep])
        second.append(b[keep])
    if not first:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    i = np.concatenate(first)
    j = np.concatenate(second)
    sort = np.argsort(i, kind="stable")
    return i[sort], j[sort]


def _zero_twins(
    tile: np.ndarray,
    twins: tuple[np.ndarray, np.ndarray] | None,
    rows: tuple[int, int],
    cols: tuple[int, int],
) -> None:
    """Set the entries of ``tile`` that belong to twin pairs to exactly 0."""
    if twins is None or twins[0].size == 0:
        return
    first, second = twins
    lo, hi = np.searchsorted(first, rows)
    if lo == hi:
        return
    j = second[lo:hi]
    inside = (j >= cols[0]) & (j < cols[1])
    if inside.any():
        tile[first[lo:hi][inside] - rows[0], j[inside] - cols[0]] = 0.0


def _n_workers(n_jobs: int | None) -> int:
    """Number of worker threads: ``n_jobs``, or the CPUs this process may use."""
    if n_jobs is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return max(1, os.cpu_count() or 1)
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be a positive integer or None, got {n_jobs}")
    return int(n_jobs)


def _distance_diagonals(
    base: np.ndarray,
    extras: Sequence[np.ndarray],
    weights: np.ndarray,
    chunk_size: int,
    twins: Sequence[tuple[np.ndarray, np.ndarray] | None],
    n_jobs: int | None = None,
) -> np.ndarray:
    """``diag(W^T D_s W)`` for the column sets ``s = base, base + extras[0], ...``.

    ``D_s[i, j]`` is the Euclidean distance of rows ``i`` and ``j`` on column set
    ``s``: the squared base distance plus, for set ``1 + e``, the squared distance
    on ``extras[e]``. One tile pass serves every set, so the base product (the
    expensive part) is computed once. The rows must be distinct on the union of
    all columns; ``twins[s]`` lists the pairs of rows that coincide on set ``s``
    (their distance is set to exactly 0 instead of a rounding residue).

    Tiles in which no column of ``weights`` is non-zero on both sides are skipped,
    so tables that are never compared with each other cost nothing: order the
    rows so that each table's own rows are contiguous.

    The bands of ``chunk_size`` rows are shared among ``n_jobs`` threads (numpy
    releases the GIL; BLAS runs single-threaded inside them). Each band's sums
    are kept apart and added in band order, so the result does not depend on
    ``n_jobs``.

    Returns
    -------
    numpy.ndarray
        ``(1 + len(extras), k)`` array.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}")
    n_points = base.shape[0]
    left, right = _augment(base)
    aug = [_augment(e) for e in extras]
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    weights_t = np.ascontiguousarray(weights.T)
    nonzero = weights != 0.0
    n_sets = 1 + len(extras)
    rows = min(chunk_size, _TILE_ROWS)
    starts = list(range(0, n_points, chunk_size))
    bands = np.zeros((len(starts), n_sets, weights.shape[1]))

    def band(index: int) -> None:
        start = starts[index]
        stop = min(start + chunk_size, n_points)
        total = bands[index]
        # buffers reused by every tile of the band: no fresh 8 MB arrays (page faults)
        buf_sq = np.empty(rows * chunk_size)
        buf_tile = np.empty(rows * chunk_size) if extras else buf_sq
        for col in range(start, n_points, chunk_size):
            col_stop = min(col + chunk_size, n_points)
            w_col = weights[col:col_stop]
            present_col = nonzero[col:col_stop].any(axis=0)
            for row in range(start, stop, rows):
                row_stop = min(row + rows, stop)
                if not (nonzero[row:row_stop].any(axis=0) & present_col).any():
                    continue
                shape = (row_stop - row, col_stop - col)
                size = shape[0] * shape[1]
                w_row_t = weights_t[:, row:row_stop]
                sq = buf_sq[:size].reshape(shape)
                np.matmul(left[row:row_stop], right[:, col:col_stop], out=sq)
                np.maximum(sq, 0.0, out=sq)
                tile = buf_tile[:size].reshape(shape)
                diagonal = col == start
                idx = np.arange(shape[0])
                for s in range(n_sets):
                    if s == 0:
                        _zero_twins(sq, twins[0], (row, row_stop), (col, col_stop))
                        np.sqrt(sq, out=tile)
                    else:
                        e_left, e_right = aug[s - 1]
                        np.matmul(e_left[row:row_stop], e_right[:, col:col_stop], out=tile)
                        tile += sq
                        np.maximum(tile, 0.0, out=tile)
                        _zero_twins(tile, twins[s], (row, row_stop), (col, col_stop))
                        np.sqrt(tile, out=tile)
                    if diagonal:
                        # diagonal block, computed in full: D[i, i] = 0 exactly
                        tile[idx, idx + (row - col)] = 0.0
                    part = np.einsum("kj,jk->k", w_row_t @ tile, w_col)
                    total[s] += part if diagonal else 2.0 * part

    workers = min(_n_workers(n_jobs), len(starts))
    if workers == 1:
        for index in range(len(starts)):
            band(index)
    else:
        with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
            # the longest bands (first rows: most tiles) go first
            list(pool.map(band, range(len(starts))))
    return bands.sum(axis=0)


def _energy_radicands(
    encoded: Sequence[np.ndarray],
    spans: Sequence[slice],
    chunk_size: int,
    n_jobs: int | None = None,
) -> np.ndarray:
    """Radicands of ``D_E(encoded[0], encoded[t])``, ``t >= 1``, per column set.

    Column set 0 is ``spans[0]``; set ``e >= 1`` is ``spans[0]`` plus ``spans[e]``.
    Returns a ``(len(spans), len(encoded) - 1)`` array.
    """
    unique, counts = _unique_union(*encoded)
    sizes = np.array([e.shape[0] for e in encoded], dtype=np.float64)
    probs = counts / sizes
    signed = probs[:, :1] - probs[:, 1:]  # p_reference - p_table, one column per table
    # reference rows first, then each table's own rows: untouched tiles are skipped
    owner = np.where(counts[:, 0] > 0, 0, 1 + np.argmax(counts[:, 1:] > 0, axis=1))
    perm = np.argsort(owner, kind="stable")
    unique = unique[perm]
    signed = signed[perm]
    base = unique[:, spans[0]]
    extras = [unique[:, span] for span in spans[1:]]

    twins: list[tuple[np.ndarray, np.ndarray] | None] = []
    if extras:
        twins.append(_twin_pairs(_row_ids(base)))
        for extra in extras:
            twins.append(_twin_pairs(_row_ids(np.hstack([base, extra]))))
    if any(t is None for t in twins):
        # too many rows coincide on a column set: one pass per set, rows merged per set
        out = np.zeros((len(spans), len(encoded) - 1))
        for s in range(len(spans)):
            cols = [spans[0]] if s == 0 else [spans[0], spans[s]]
            parts = [np.hstack([e[:, c] for c in cols]) for e in encoded]
            width = slice(0, parts[0].shape[1])
            out[s] = _energy_radicands(parts, [width], chunk_size, n_jobs)[0]
        return out
    if not extras:
        twins = [None]
    return -_distance_diagonals(base, extras, signed, chunk_size, twins, n_jobs)


def energy_distances(
    reference: pd.DataFrame,
    tables: Mapping[str, pd.DataFrame],
    kinds: Mapping[str, str],
    columns: Sequence[str] | None = None,
    *,
    responses: Sequence[str] = (),
    max_rows: int | None = None,
    random_state: int | np.random.Generator | None = None,
    chunk_size: int = 2048,
    n_jobs: int | None = None,
) -> pd.DataFrame:
    """Energy distances of several tables to one reference, on several column sets.

    Gives, for every table ``t`` in ``tables``, the same number as
    ``energy_distance(reference, t, kinds, cols)`` (up to rounding) for
    ``cols = columns`` and for ``cols = columns + [r]`` for each ``r`` in
    ``responses``: the paper's "covariates" and "covariates + response" distances
    and their floors, all in one go. The encoding (means, sds, categories) is
    shared, the reference's own pairwise distances are computed once, and one tile
    pass serves every column set (the responses' few columns are added to the
    covariates' squared distances tile by tile). The result is exact, like
    :func:`energy_distance`.

    Parameters
    ----------
    reference : pandas.DataFrame
        The reference (real) table; its means and sds set the scale.
    tables : Mapping[str, pandas.DataFrame]
        Tables to compare with the reference, by name (e.g. ``{"synthetic": syn,
        "real test split": test}``).
    kinds : Mapping[str, str]
        Column name -> ``"continuous"``, ``"ordinal"`` or ``"nominal"``.
    columns : Sequence[str], optional
        The base column set (default: every column of ``kinds`` that is not in
        ``responses``).
    responses : Sequence[str], default ()
        Columns added, one at a time, to the base set.
    max_rows : int, optional
        Replace each table (the reference included) with more rows by a uniform
        subsample of ``max_rows`` rows; the encoding still uses the full tables.
    random_state : int or numpy.random.Generator, optional
        Seed or generator for the subsamples.
    chunk_size : int, default 2048
        Tile edge (see :func:`energy_distance`).
    n_jobs : int, optional
        Worker threads (default: every CPU this process may use). The result does
        not depend on it.

    Returns
    -------
    pandas.DataFrame
        One row per table (index: the names of ``tables``), one column per column
        set: ``"covariates"`` (the base set) and ``"covariates + <response>"``.
    """
    responses = list(responses)
    if columns is None:
        columns = [c for c in kinds if c not in responses]
    columns = list(columns)
    overlap = sorted(set(columns) & set(responses))
    if overlap:
        raise ValueError(f"columns {overlap} are both in `columns` and in `responses`")
    if not tables:
        raise ValueError("`tables` is empty: give at least one table to compare")
    names = ["reference", *map(str, tables)]
    frames = [reference, *tables.values()]
    all_cols = _check_tables(frames, names, kinds, columns + responses)
    encoded, spans = _encode_many(frames, kinds, all_cols, names)
    base_width = sum(s.stop - s.start for s in spans[: len(columns)])
    sets = [slice(0, base_width)] + spans[len(columns) :]
    if max_rows is not None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be a positive integer, got {max_rows}")
        rng = _as_rng(random_state)
        encoded = [
            e[np.sort(rng.choice(e.shape[0], size=max_rows, replace=False))]
            if e.shape[0] > max_rows
            else e
            for e in encoded
        ]
    radicands = _energy_radicands(encoded, sets, chunk_size, n_jobs)
    values = np.sqrt(np.clip(radicands, 0.0, None))
    labels = ["covariates"] + [f"covariates + {r}" for r in responses]
    return pd.DataFrame(values.T, index=pd.Index(names[1:], name="table"), columns=labels)


# --------------------------------------------------------------------------------------
# floors and simple diagnostics
# --------------------------------------------------------------------------------------


def independent_resample(
    frame: pd.DataFrame,
    n: int | None = None,
    random_state: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """Resample every column independently, with replacement, from its own values.

    The result keeps each column's marginal distribution (and dtype) but breaks
    all dependence between columns: the "column-wise independent resample"
    floor that a synthesizer should beat on joint fidelity.

    Parameters
    ----------
    frame : pandas.DataFrame
        Table to resample.
    n : int, optional
        Number of rows (default ``len(frame)``).
    random_state : int or numpy.random.Generator, optional
        Seed or generator.

    Returns
    -------
    pandas.DataFrame
        ``n`` rows, the same columns and dtypes, a fresh ``RangeIndex``.
    """
    n_rows = len(frame) if n is None else int(n)
    if n_rows < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if n_rows > 0 and len(frame) == 0:
        raise ValueError("cannot resample rows from an empty table")
    rng = _as_rng(random_state)
    out = {}
    for col in frame.columns:
        idx = rng.integers(0, len(frame), size=n_rows) if n_rows else np.zeros(0, dtype=int)
        out[col] = frame[col].iloc[idx].reset_index(drop=True)
    return pd.DataFrame(out, columns=frame.columns)


def _total_variation(p_counts: np.ndarray, q_counts: np.ndarray) -> float:
    """Total variation distance between two count vectors (normalized here)."""
    p = p_counts / p_counts.sum()
    q = q_counts / q_counts.sum()
    return 0.5 * float(np.abs(p - q).sum())


def column_fidelity(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    kinds: Mapping[str, str],
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Per-column fidelity scores in ``[0, 1]`` (1 = identical marginals).

    Continuous columns score ``1 - KS`` with the two-sample Kolmogorov-Smirnov
    statistic (:func:`scipy.stats.ks_2samp`); ordinal and nominal columns score
    ``1 - TV``, the total variation distance between the category frequencies
    (over the union of categories).

    Parameters
    ----------
    real, synthetic : pandas.DataFrame
        Reference and synthetic tables.
    kinds : Mapping[str, str]
        Column name -> ``"continuous"``, ``"ordinal"`` or ``"nominal"``.
    columns : Sequence[str], optional
        Columns to score (default: the keys of ``kinds``).

    Returns
    -------
    pandas.DataFrame
        Columns ``column``, ``kind``, ``metric`` (``"KS"`` or ``"TV"``), ``score``.
    """
    cols = _resolve_columns(real, synthetic, kinds, columns)
    records = []
    for col in cols:
        kind = kinds[col]
        if kind == "continuous":
            xr = _numeric(real[col], col, "real")
            xs = _numeric(synthetic[col], col, "synthetic")
            score = 1.0 - float(stats.ks_2samp(xr, xs).statistic)
            metric = "KS"
        else:
            codes_r, codes_s, n_cat = _category_codes(real[col], synthetic[col])
            tv = _total_variation(
                np.bincount(codes_r, minlength=n_cat), np.bincount(codes_s, minlength=n_cat)
            )
            score = 1.0 - tv
            metric = "TV"
        records.append({"column": col, "kind": kind, "metric": metric, "score": score})
    return pd.DataFrame.from_records(records, columns=["column", "kind", "metric", "score"])


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation; 0 when either column is constant."""
    a = a - a.mean()
    b = b - b.mean()
    denom = np.sqrt((a @ a) * (b @ b))
    if not denom > 0:
        return 0.0
    return float(np.clip((a @ b) / denom, -1.0, 1.0))


def _discretize(
    real: pd.Series, synthetic: pd.Series, kind: str, col: str, bins: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Codes of a column in both tables for contingency tables.

    Continuous columns are cut at the real data's quantiles into at most ``bins``
    bins (tied edges merged); the same edges are applied to the synthetic values,
    with values outside the real range falling into the outer bins. Discrete
    columns are coded over the union of their categories.
    """
    if kind != "continuous":
        return _category_codes(real, synthetic)
    xr = _numeric(real, col, "real")
    xs = _numeric(synthetic, col, "synthetic")
    edges = np.quantile(xr, np.linspace(0.0, 1.0, bins + 1))
    inner = np.unique(edges[1:-1])
    return (
        np.searchsorted(inner, xr, side="right"),
        np.searchsorted(inner, xs, side="right"),
        inner.size + 1,
    )


def pair_fidelity(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    kinds: Mapping[str, str],
    bins: int = 10,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Per-pair fidelity scores in ``[0, 1]`` (1 = identical pairwise structure).

    * Two continuous columns: ``1 - |corr_real - corr_synthetic| / 2`` with
      Pearson correlations (a constant column has correlation 0).
    * Otherwise (discrete or mixed pairs): continuous columns are cut into
      ``bins`` quantile bins of the real data (the same edges are applied to the
      synthetic data) and the score is ``1 - TV`` between the two normalized
      contingency tables.

    Parameters
    ----------
    real, synthetic : pandas.DataFrame
        Reference and synthetic tables.
    kinds : Mapping[str, str]
        Column name -> ``"continuous"``, ``"ordinal"`` or ``"nominal"``.
    bins : int, default 10
        Number of quantile bins for continuous columns in mixed pairs.
    columns : Sequence[str], optional
        Columns to pair (default: the keys of ``kinds``).

    Returns
    -------
    pandas.DataFrame
        One row per unordered column pair: ``col_a``, ``col_b``, ``metric``
        (``"correlation"`` or ``"contingency"``), ``score``.
    """
    if bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins}")
    cols = _resolve_columns(real, synthetic, kinds, columns)
    coded: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
    records = []
    for col_a, col_b in combinations(cols, 2):
        if kinds[col_a] == "continuous" and kinds[col_b] == "continuous":
            corr_r = _pearson(
                _numeric(real[col_a], col_a, "real"), _numeric(real[col_b], col_b, "real")
            )
            corr_s = _pearson(
                _numeric(synthetic[col_a], col_a, "synthetic"),
                _numeric(synthetic[col_b], col_b, "synthetic"),
            )
            score = 1.0 - abs(corr_r - corr_s) / 2.0
            metric = "correlation"
        else:
            for col in (col_a, col_b):
                if col not in coded:
                    coded[col] = _discretize(real[col], synthetic[col], kinds[col], col, bins)
            ar, as_, na = coded[col_a]
            br, bs, nb = coded[col_b]
            tv = _total_variation(
                np.bincount(ar * nb + br, minlength=na * nb),
                np.bincount(as_ * nb + bs, minlength=na * nb),
            )
            score = 1.0 - tv
            metric = "contingency"
        records.append({"col_a": col_a, "col_b": col_b, "metric": metric, "score": score})
    return pd.DataFrame.from_records(records, columns=["col_a", "col_b", "metric", "score"])
