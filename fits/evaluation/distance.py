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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from fits.evaluation.encoding import (
    as_rng,
    check_tables,
    encode,
    encode_many,
    n_workers,
    resolve_columns,
    row_keys,
)

__all__ = ["energy_distance", "energy_distances", "mean_pairwise_distance"]

#: Rows per sub-tile of a distance tile; keeps each tile cache friendly.
_TILE_ROWS = 512


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
    seed: int | np.random.Generator | None = None,
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
    seed : int or numpy.random.Generator, optional
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
    cols = resolve_columns(real, synthetic, kinds, columns)
    x, y = encode(real, synthetic, kinds, cols)
    if max_rows is not None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be a positive integer, got {max_rows}")
        rng = as_rng(seed)
        if x.shape[0] > max_rows:
            x = x[np.sort(rng.choice(x.shape[0], size=max_rows, replace=False))]
        if y.shape[0] > max_rows:
            y = y[np.sort(rng.choice(y.shape[0], size=max_rows, replace=False))]
    return _energy_distance_points(x, y, chunk_size, n_jobs)


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
    if points.shape[1] == 0:
        return np.zeros(points.shape[0], dtype=np.int64)
    return np.unique(row_keys(points), return_inverse=True)[1].reshape(-1)


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

    workers = min(n_workers(n_jobs), len(starts))
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
    seed: int | np.random.Generator | None = None,
    chunk_size: int = 2048,
    n_jobs: int | None = None,
    reference_name: str = "reference",
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
    seed : int or numpy.random.Generator, optional
        Seed or generator for the subsamples.
    chunk_size : int, default 2048
        Tile edge (see :func:`energy_distance`).
    n_jobs : int, optional
        Worker threads (default: every CPU this process may use). The result does
        not depend on it.
    reference_name : str, default "reference"
        What error messages call the reference table (e.g. ``"real"``).

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
    names = [reference_name, *map(str, tables)]
    frames = [reference, *tables.values()]
    all_cols = check_tables(frames, names, kinds, columns + responses)
    encoded, spans = encode_many(frames, kinds, all_cols, names)
    base_width = sum(s.stop - s.start for s in spans[: len(columns)])
    sets = [slice(0, base_width)] + spans[len(columns) :]
    if max_rows is not None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be a positive integer, got {max_rows}")
        rng = as_rng(seed)
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
