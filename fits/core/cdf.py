"""Operators on CDF estimates: pure functions of arrays (paper Algorithms 1 and 2).

The grid of a column, the first-row solve ``q = (S + ridge)^-1 e1`` of the two-step
aggregation, the post-processing M_cdf (clip, monotone, end at 1), inverse-CDF
sampling by interpolation on the grid, and the category masses of discrete columns.
The coordinator (:mod:`fits.federation.coordinator`) applies them to the sums it
receives.
"""

from __future__ import annotations

import contextlib
import heapq
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
from scipy.optimize import isotonic_regression

from fits.core.continualization import Encoder

__all__ = [
    "COLLINEARITY_THRESHOLD",
    "DISCRETE_SAMPLING",
    "MONOTONE_METHODS",
    "collinear_first_row",
    "default_grid",
    "cdf_at",
    "inverse_cdf",
    "inverse_masses",
    "mass_grid",
    "one_blas_thread",
    "masses_from_cdf",
    "postprocess_cdf",
    "reflected",
    "refine_grid",
    "response_scale",
    "solve_first_row",
    "solve_guarded",
    "thin_grid",
    "truncated_inverse_cdf",
]

MONOTONE_METHODS = ("isotonic", "rearrange")


DISCRETE_SAMPLING = ("mass", "grid")


def default_grid(
    encoder: Encoder,
    grid_size: int = 300,
    response_bandwidth: float = 0.05,
    discrete_response_bandwidth: float = 0.05,
) -> np.ndarray:
    """The evaluation grid of one column (METHOD.md, "Generation").

    Continuous columns: ``grid_size`` equally spaced points over the column's range,
    padded on both sides by ``1.5 * response_bandwidth * range`` (at least three
    response bandwidths, since a client's sd is at most half the range); fewer where
    float64 cannot tell them apart (whole numbers past 2**53 in a range of a few float64
    steps), but always two at least.  Discrete
    columns: aligned with the continualization intervals, every boundary v_0..v_L a grid
    point and about ``grid_size / L`` points per interval, plus one point four response
    bandwidths beyond each end so that smoothed mass is not lost there.
    """
    spec = encoder.spec
    if spec.is_discrete:
        b = encoder.boundaries
        widths = encoder.widths
        n_levels = len(widths)
        per = max(2, int(np.ceil((grid_size - 1) / n_levels)))
        inner = b[:-1, None] + widths[:, None] * (np.arange(per) / per)[None, :]
        lo = b[0] - 4 * discrete_response_bandwidth * widths[0]
        hi = b[-1] + 4 * discrete_response_bandwidth * widths[-1]
        return np.concatenate([[lo], inner.ravel(), [b[-1], hi]])
    lo, hi = float(spec.lower), float(spec.upper)  # type: ignore[arg-type]
    pad = 1.5 * response_bandwidth * (hi - lo)
    grid = np.unique(np.linspace(lo - pad, hi + pad, grid_size))
    # whole numbers past 2**53 whose range spans few float64 steps (2**54 + 0..40; 2**63
    # + 0..1000, one float64 value): the points that float64 tells apart, at least two
    return grid if grid.size >= 2 else np.array([lo, np.nextafter(lo, np.inf)])


#: IQR / IQR_PER_SD is the standard deviation of a normal distribution with that IQR.
IQR_PER_SD = 1.3489795003921634


def response_scale(values: np.ndarray) -> float:
    """A site's scale of a continuous response, ``min(sd, IQR / 1.349)`` (Silverman's
    robust spread, "Density Estimation", 1986, eq. 3.30): the response bandwidth is
    ``w_z`` times it (docs/method.md, "Response bandwidth").  For normal data both
    agree; one outlier or a long tail inflates the sd, not the IQR.  The sd where the
    IQR is 0 (over half the values equal); 1 where the sd is 0 too, or with no value.
    """
    values = np.asarray(values, dtype=float)
    if not values.size:
        return 1.0
    sd = float(values.std())
    q1, q3 = np.percentile(values, [25.0, 75.0])
    iqr = float(q3 - q1) / IQR_PER_SD
    scale = min(sd, iqr) if iqr > 0 else sd
    return scale if scale > 0 else 1.0


#: A cell of a continuous column's grid that holds more than HEAVY_CELL / G of the
#: marginal's mass is split (:func:`refine_grid`); a normal column's fullest cell of an
#: equally spaced grid over its range holds about 3 / G, an exponential's about 9 / G.
HEAVY_CELL = 8.0
#: Most pieces one refinement splits a cell into: the next round sees where its mass is.
SPLIT_MAX = 32


def refine_grid(grid: np.ndarray, cdf: np.ndarray, grid_size: int, limit: int) -> np.ndarray | None:
    """``grid`` with its heavy cells split, or None where none is (docs/method.md,
    "Grids that follow the data").

    A cell whose marginal mass ``F(g_{k+1}) - F(g_k)`` exceeds ``HEAVY_CELL /
    grid_size`` is split into ``min(ceil(mass * grid_size), SPLIT_MAX)`` equal pieces,
    so that after a few rounds no cell holds much more than ``1 / grid_size`` of the
    mass: one outlier (a typo of 1e8 among incomes of 20,000) or a long tail otherwise
    leaves the whole bulk of the data in one cell of an equally spaced grid, and the
    draws spread uniformly over it.  The points added stay within ``limit`` points in
    all, each cell's share scaled down alike; points float64 cannot tell apart merge.
    """
    grid = np.asarray(grid, dtype=float)
    mass = np.diff(np.asarray(cdf, dtype=float))
    extra = np.where(
        mass > HEAVY_CELL / grid_size,
        np.minimum(np.ceil(mass * grid_size), SPLIT_MAX) - 1,
        0,
    ).astype(np.int64)
    room = int(limit) - grid.size
    if room <= 0 or not extra.any():
        return None
    if extra.sum() > room:
        extra = np.floor(extra * (room / extra.sum())).astype(np.int64)
    cells = np.flatnonzero(extra)
    pieces = [
        grid[k] + (grid[k + 1] - grid[k]) * np.arange(1, extra[k] + 1) / (extra[k] + 1)
        for k in cells
    ]
    out = np.unique(np.concatenate([grid, *pieces]))
    return out if out.size > grid.size else None


def thin_grid(
    grid: np.ndarray, cdf: np.ndarray, n_points: int, keep: tuple[int, ...] = ()
) -> np.ndarray:
    """Indices of at most ``n_points`` points of ``grid`` at which the piecewise-linear
    interpolation of ``cdf`` stays closest to it (fits' communication-efficient grid).

    Greedy refinement: start from the two ends (and ``keep``); repeatedly add the grid
    point where the linear interpolation between the kept points errs most, until
    ``n_points`` are kept or the largest error is below 1e-12 (so where the CDF is flat,
    or linear, no point is spent).  The largest error never increases, and ties go to
    the leftmost point, so the choice is deterministic.
    """
    grid = np.asarray(grid, dtype=float)
    cdf = np.asarray(cdf, dtype=float)
    size = grid.size
    if n_points >= size:
        return np.arange(size)

    def worst(a: int, b: int) -> tuple[float, int, int, int] | None:
        if b - a < 2:
            return None
        inner = np.arange(a + 1, b)
        line = cdf[a] + (cdf[b] - cdf[a]) * (grid[inner] - grid[a]) / (grid[b] - grid[a])
        err = np.abs(cdf[inner] - line)
        k = int(np.argmax(err))
        return (-float(err[k]), int(inner[k]), a, b)

    chosen = sorted({0, size - 1, *(int(i) for i in keep if 0 <= i < size)})
    heap = [w for a, b in zip(chosen[:-1], chosen[1:], strict=True) if (w := worst(a, b))]
    heapq.heapify(heap)
    kept = set(chosen)
    while len(kept) < n_points and heap:
        neg_err, m, a, b = heapq.heappop(heap)
        if -neg_err < 1e-12:
            break
        kept.add(m)
        for w in (worst(a, m), worst(m, b)):
            if w is not None:
                heapq.heappush(heap, w)
    return np.array(sorted(kept))


def mass_grid(encoder: Encoder, offset: float) -> np.ndarray:
    """Two interior points per interval of a discrete column (Corollary 5.4).

    For interval (v_{l-1}, v_l] of width |I_l|: v_{l-1} + offset |I_l| and
    v_l - offset |I_l|, so the pair is (1 - 2 offset) |I_l| apart.
    """
    b, w = encoder.boundaries, encoder.widths
    return np.column_stack([b[:-1] + offset * w, b[1:] - offset * w]).ravel()


def masses_from_cdf(f: np.ndarray, offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Conditional category masses from F at two interior points per interval.

    ``p_l = |I_l| / (z+ - z-) * (F(z+) - F(z-))`` (Corollary 5.4), then clipped at 0 and
    normalized to sum to 1.  Returns the masses (B, L) and a mask of rows with no
    positive mass.
    """
    p = (f[:, 1::2] - f[:, 0::2]) / (1.0 - 2.0 * offset)
    np.clip(p, 0.0, None, out=p)
    total = p.sum(axis=1)
    bad = ~(total > 0)
    p[~bad] /= total[~bad, None]
    return p, bad


def inverse_masses(p: np.ndarray, boundaries: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling of a continualized discrete column from category masses.

    The masses define the lifted CDF, piecewise linear within each interval; the draw
    is its inverse at ``u``: category l with probability p_l, placed uniformly in
    (v_{l-1}, v_l].
    """
    b, n = p.shape
    rows = np.arange(b)
    cum = np.cumsum(p, axis=1)
    level = np.minimum((cum < u[:, None]).sum(axis=1), n - 1)
    prev = np.where(level > 0, cum[rows, np.maximum(level - 1, 0)], 0.0)
    mass = p[rows, level]
    frac = np.divide(u - prev, mass, out=np.full(b, 0.5), where=mass > 0)
    frac = np.clip(frac, 1e-12, 1.0)
    widths = np.diff(boundaries)
    return boundaries[level] + frac * widths[level]


#: Default threshold of the collinearity guard (see :func:`solve_first_row`).
COLLINEARITY_THRESHOLD = 1e-2
#: A covariate whose local scatter is at most this fraction of its uncentred second
#: moment sum_i w_i (h_ij - x_j)^2 has no local spread that S can resolve in float64.
_NO_SPREAD = 1e-12
#: From this many covariates on, the guard computes only the kept eigenpairs of a
#: flagged query (LAPACK's dsyevr by value, query by query) instead of all of them in
#: one batched call: 0.26 s against 0.30 s for 300 queries at d = 100, 0.83 s against
#: 1.31 s at d = 200, slower below (0.13 s against 0.09 s at d = 50); docs/benchmarks.md,
#: "Wide tables".  The q's differ by rounding (1e-13 of their size there).
_SUBSET_EIGH_MIN_DIM = 80


def solve_first_row(
    s: np.ndarray, ridge: float = 1e-8, collinearity: float = COLLINEARITY_THRESHOLD
) -> np.ndarray:
    """q = (S + ridge)^-1 e1 for a batch of symmetric matrices S (eq. 7), with a guard.

    The ridge is scale-invariant (METHOD.md): ``ridge * diag(S)`` is added to the
    diagonal, not a multiple of the identity.  A zero diagonal entry (a covariate with
    no spread among the weighted rows) gets 1 instead; its row and column of S are zero,
    so this only pins the matching entry of q to 0.

    **Collinearity guard** (fits' decision; docs/method.md).  Write S (eq. 6) in blocks,
    ``S_00 = sum w_i``, ``S_10 = sum w_i (h_i - x)``, ``S_11 = sum w_i (h_i - x)(h_i -
    x)'``.  Its Schur complement ``C = S_11 - S_10 S_10' / S_00`` is the local weighted
    scatter of the covariates about their weighted mean, and ``delta = S_10 / S_00`` is
    that mean minus the query.  Let ``R = D^-1/2 C D^-1/2`` (``D = diag(C)``) be the
    local correlation matrix, with eigenvalues ``lambda_1 >= ... >= lambda_d`` and
    eigenvectors ``v_j``.  Rule: a direction with ``lambda_j <= collinearity *
    lambda_1`` (the local spread along it, in local standard deviations, is at most
    ``sqrt(collinearity)`` -- a tenth by default -- of the largest) is one the data do not
    vary in; a covariate with ``D_jj <= 1e-12 * (S_11)_jj`` has no local spread at all
    and is dropped as well.  When a query has such a direction, its q is the exact
    local-linear fit of the reduced design ``u_i = (1, V_r' D^-1/2 (h_i - x))``, V_r the
    kept eigenvectors:

        q_1 = -C^+ delta,   q_0 = 1 / S_00 + delta' C^+ delta,
        C^+ = D^-1/2 V_r Lambda_r^-1 V_r' D^-1/2,

    so ``q'U_i = 1/S_00 - delta' C^+ (h_i - hbar)``: the slopes along the dropped
    directions are 0 instead of being extrapolated from rounding noise.  With every
    direction dropped this is the local-constant fit (``q = e1 / S_00``).  A query with
    no such direction keeps the ridged solve above unchanged (bit for bit), so the guard
    costs nothing on well-conditioned designs.  It is invariant to rescaling any
    covariate and to multiplying S by a constant.

    Parameters
    ----------
    s : ndarray of shape (B, d + 1, d + 1)
        The summed S(x) of a batch of queries.
    ridge : float
        Relative ridge (default 1e-8).
    collinearity : float
        Threshold of the guard on the eigenvalue ratio of the local correlation matrix
        (default 1e-2); 0 turns the guard off.

    Returns
    -------
    ndarray of shape (B, d + 1)
    """
    return solve_guarded(s, ridge, collinearity)[0]


def solve_guarded(
    s: np.ndarray, ridge: float = 1e-8, collinearity: float = COLLINEARITY_THRESHOLD
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`solve_first_row`, and the indices of the queries the guard acted on.

    The guard is decided first, so the ridged solve runs only on the other queries: a
    guarded query's solve would be thrown away (on a wide table with fewer neighbours
    than covariates, every query's; docs/benchmarks.md, "Wide tables").  Each matrix of
    a batch is solved on its own (LAPACK per matrix), so a query's q is the same bits
    whatever else is in its batch; only a batch member that is exactly singular makes
    the solve fall back to the pseudo-inverse for the batch, now the unguarded queries
    (before, the whole batch: for a nonsingular matrix the same q up to rounding).
    """
    b, p = s.shape[0], s.shape[-1]
    rows = np.zeros(0, dtype=np.intp)
    q = np.empty((b, p))
    if collinearity > 0 and p > 1:
        rows, reduced = collinear_first_row(s, collinearity)
        q[rows] = reduced
    if rows.size == 0:
        q[:] = _ridged_first_row(s, ridge)
    elif rows.size < b:
        rest = np.ones(b, dtype=bool)
        rest[rows] = False
        q[rest] = _ridged_first_row(s[rest], ridge)
    return q, rows


def _ridged_first_row(s: np.ndarray, ridge: float) -> np.ndarray:
    """q = (S + ridge diag(S))^-1 e1 for a batch (eq. 7, no guard)."""
    p = s.shape[-1]
    diag = np.diagonal(s, axis1=-2, axis2=-1)
    reg = np.where(diag > 0, ridge * diag, 1.0)
    a = s.copy()
    idx = np.arange(p)
    a[:, idx, idx] += reg
    e1 = np.zeros((s.shape[0], p, 1))
    e1[:, 0, 0] = 1.0
    try:
        return np.linalg.solve(a, e1)[:, :, 0]
    except np.linalg.LinAlgError:  # a singular batch member: pseudo-inverse for all
        return (np.linalg.pinv(a) @ e1)[:, :, 0]


def collinear_first_row(
    s: np.ndarray, collinearity: float = COLLINEARITY_THRESHOLD
) -> tuple[np.ndarray, np.ndarray]:
    """The collinearity guard of :func:`solve_first_row`: which queries, and their q.

    Returns the indices of the queries in the batch whose local design has a direction
    to drop (``lambda_j <= collinearity * lambda_1`` or a covariate without local
    spread), and their q: the local-linear fit of the reduced design (eq. 7 on
    ``T' S T``, ``T = blockdiag(1, D^-1/2 V_r)``), in closed form.  Queries with
    ``S_00 <= 0`` or non-finite S are left to the caller.
    """
    s00 = s[:, 0, 0]
    ok = (s00 > 0) & np.all(np.isfinite(s), axis=(1, 2))
    idx = np.flatnonzero(ok)
    if idx.size < s.shape[0]:
        s, s00 = s[idx], s00[idx]
    s10 = s[:, 1:, 0]
    delta = s10 / s00[:, None]
    s11 = s[:, 1:, 1:]
    # the same arithmetic as c = s11 - delta s10', c = (c + c') / 2, r = c / (sd sd'),
    # in place: a wide table's batch is B x d x d
    c = delta[:, :, None] * s10[:, None, :]
    np.subtract(s11, c, out=c)
    c = np.add(c, np.swapaxes(c, 1, 2))
    c *= 0.5
    dc = np.diagonal(c, axis1=1, axis2=2)
    spread = dc > _NO_SPREAD * np.diagonal(s11, axis1=1, axis2=2)
    sd = np.sqrt(np.where(spread, dc, 1.0))
    r = np.divide(c, sd[:, :, None] * sd[:, None, :], out=c)
    r *= spread[:, :, None] & spread[:, None, :]  # a covariate without spread: 0 row
    lam = np.linalg.eigvalsh(r)  # ascending; eigenvectors only where needed (3x cost)
    flagged = np.flatnonzero(lam[:, 0] <= collinearity * lam[:, -1])
    if r.shape[1] < _SUBSET_EIGH_MIN_DIM:  # all eigenvectors, one batched call
        lam, v = np.linalg.eigh(r[flagged])
        keep = lam > collinearity * lam[:, -1:]
        sd, delta, s00 = sd[flagged], delta[flagged], s00[flagged]
        inv = np.divide(1.0, lam, out=np.zeros_like(lam), where=keep)
        t = delta / sd  # D^-1/2 delta
        coef = np.einsum("bij,bi->bj", v, t) * inv  # Lambda_r^-1 V_r' D^-1/2 delta
        q1 = -np.einsum("bij,bj->bi", v, coef) / sd  # -C^+ delta
        q0 = 1.0 / s00 - np.einsum("bi,bi->b", q1, delta)
        return idx[flagged], np.column_stack([q0, q1])
    q = np.empty((flagged.size, r.shape[-1] + 1))
    for k, b in enumerate(flagged.tolist()):
        # the kept eigenpairs only (lambda_j > collinearity lambda_1; the lower end of
        # the range a hair below, so that rounding cannot leave one out): a query whose
        # local design has few directions among many covariates costs far less than
        # the whole decomposition (docs/benchmarks.md, "Wide tables")
        top = collinearity * lam[b, -1]
        vals, v = _linalg().eigh(
            r[b],
            subset_by_value=(top - 1e-9 * abs(top), np.inf),
            driver="evr",
            check_finite=False,
        )
        keep = vals > collinearity * vals[-1] if vals.size else vals > 0
        vals, v = vals[keep], v[:, keep]
        t = delta[b] / sd[b]  # D^-1/2 delta
        coef = (v.T @ t) / vals  # Lambda_r^-1 V_r' D^-1/2 delta
        q1 = -(v @ coef) / sd[b]  # -C^+ delta
        q[k, 0] = 1.0 / s00[b] - q1 @ delta[b]
        q[k, 1:] = q1
    return idx[flagged], q


def _linalg() -> Any:  # scipy.linalg, imported where first used
    import scipy.linalg

    return scipy.linalg


_BLAS_LOCK = threading.Lock()
_BLAS_CONTROLLER: list[Any] = []


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """A context in which numpy's and scipy's BLAS run on one thread.

    The coordinator's solve and guard of eq. 7 (:func:`solve_guarded`) are a batch of
    many small LAPACK calls, one per query, which a multi-threaded OpenBLAS splits into
    pieces too small to pay for the threads' synchronization: on a 2-core machine
    under load, the guard of 300 queries at d = 200 took 27-42 s on two threads and
    1.3 s on one (docs/benchmarks.md, "Wide tables").  For code that runs while no
    other thread computes (the coordinator between rounds): depending on the BLAS
    build the limit holds for the calling thread or for the whole process.
    """
    with _BLAS_LOCK:
        if not _BLAS_CONTROLLER:
            _linalg()  # scipy's own BLAS, loaded before the controller looks
            from threadpoolctl import ThreadpoolController

            _BLAS_CONTROLLER.append(ThreadpoolController())
    with _BLAS_CONTROLLER[0].limit(limits=1, user_api="blas"):
        yield


def postprocess_cdf(f: np.ndarray, method: str = "isotonic") -> tuple[np.ndarray, np.ndarray]:
    """The post-processing operator M_cdf: clip to [0, 1], make monotone, end at 1.

    Parameters
    ----------
    f : ndarray of shape (B, L)
        Raw CDF vectors on the grid.
    method : {"isotonic", "rearrange"}
        ``"isotonic"``: L2 projection onto monotone vectors (pool-adjacent-violators),
        run only on rows that are not monotone already.  ``"rearrange"``: sort along
        the grid (monotone rearrangement).  Never a running maximum (METHOD.md).

    Returns
    -------
    cdf : ndarray of shape (B, L)
        Post-processed CDFs.
    bad : ndarray of bool, shape (B,)
        Rows with no positive mass (their cdf is left at 0 and needs a fallback).
    """
    if method not in MONOTONE_METHODS:
        raise ValueError(f"unknown monotone method {method!r}; use one of {MONOTONE_METHODS}")
    out = np.clip(f, 0.0, 1.0)
    if method == "rearrange":
        out.sort(axis=1)
    else:
        viol = np.flatnonzero(np.any(np.diff(out, axis=1) < 0, axis=1))
        for i in viol:  # only rows that need it; PAVA is linear in L
            out[i] = isotonic_regression(out[i]).x
    last = out[:, -1]
    bad = ~(last > 0)
    out[~bad] /= last[~bad, None]
    return out, bad


def inverse_cdf(cdf: np.ndarray, grid: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling by linear interpolation between grid points (eq. 17).

    Parameters
    ----------
    cdf : ndarray of shape (B, L)
        Monotone CDFs on ``grid`` ending at 1.
    grid : ndarray of shape (L,)
        Increasing grid.
    u : ndarray of shape (B,)
        Uniform draws.
    """
    b, n = cdf.shape
    rows = np.arange(b)
    pos = np.clip((cdf < u[:, None]).sum(axis=1), 1, n - 1)
    f0 = cdf[rows, pos - 1]
    f1 = cdf[rows, pos]
    gap = f1 - f0
    t = np.divide(u - f0, gap, out=np.zeros(b), where=gap > 0)
    t = np.clip(t, 0.0, 1.0)
    return grid[pos - 1] + t * (grid[pos] - grid[pos - 1])


def cdf_at(cdf: np.ndarray, grid: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Each row's CDF at its own point ``v``, as :func:`inverse_cdf` inverts it: linear
    between grid points, 0 below the first (whose value is an atom there: every
    ``u`` below it draws the first point) and 1 from the last on (every ``u`` above
    its value draws the last point).

    Parameters
    ----------
    cdf : ndarray of shape (B, L)
        Monotone CDFs on ``grid``.
    grid : ndarray of shape (L,)
        Increasing grid.
    v : ndarray of shape (B,)
        One point per row.

    Returns
    -------
    ndarray of shape (B,)
    """
    b, n = cdf.shape
    rows = np.arange(b)
    v = np.asarray(v, dtype=float)
    k = np.clip(np.searchsorted(grid, v, side="right"), 1, n - 1)
    g0, g1 = grid[k - 1], grid[k]
    t = np.clip((v - g0) / (g1 - g0), 0.0, 1.0)
    f = cdf[rows, k - 1] + t * (cdf[rows, k] - cdf[rows, k - 1])
    f = np.where(v < grid[0], 0.0, f)
    return np.where(v >= grid[-1], 1.0, f)


def reflected(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Draws ``v`` with those beyond ``[lo, hi]`` reflected back in: ``2 lo - v`` below
    ``lo`` and ``2 hi - v`` above ``hi`` (the reflection method of boundary correction,
    Silverman 1986, sec. 2.10), then clipped to ``[lo, hi]`` where one reflection is
    not enough (a draw farther beyond a bound than the range is wide).

    Kernel smoothing of the response spreads the mass of rows near a bound beyond it;
    reflected, that mass lands as far inside the bound as it had left it, which keeps a
    column dense at its minimum dense there.  Clipping instead put all of it on the
    bound itself, an atom the data need not have (half of one column's synthetic
    values at its minimum, with one outlier; docs/method.md)."""
    v = np.asarray(v, dtype=float)
    out = np.where(v < lo, 2.0 * lo - v, v)
    out = np.where(out > hi, 2.0 * hi - out, out)
    return np.clip(out, lo, hi)


def truncated_inverse_cdf(
    cdf: np.ndarray, grid: np.ndarray, u: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Inverse-CDF draws (eq. 17) restricted to ``[lo, hi]`` per row (docs/method.md,
    "Near-linear columns"): with F the row's CDF (:func:`cdf_at`), ``u`` is moved to
    ``F(lo) + u (F(hi) - F(lo))``, uniform on [F(lo), F(hi)], and inverted by
    :func:`inverse_cdf`, so the draw has the row's conditional distribution given that
    it lies in [lo, hi].  The result is clipped to [lo, hi], which moves only a draw at
    the edge of a flat stretch of F (``u`` exactly F(lo): probability 0) or by float64
    rounding.

    Parameters
    ----------
    cdf : ndarray of shape (B, L)
        Monotone CDFs on ``grid``.
    grid : ndarray of shape (L,)
    u : ndarray of shape (B,)
        Uniform draws in [0, 1).
    lo, hi : ndarray of shape (B,)
        The interval per row (lo <= hi).

    Returns
    -------
    values : ndarray of shape (B,)
    empty : ndarray of bool, shape (B,)
        Rows where F(hi) - F(lo) is 0: no mass in the interval (their values are
        ``lo``'s side of it, to be drawn otherwise by the caller).
    """
    f_lo, f_hi = cdf_at(cdf, grid, lo), cdf_at(cdf, grid, hi)
    mass = f_hi - f_lo
    v = inverse_cdf(cdf, grid, f_lo + np.asarray(u, dtype=float) * mass)
    return np.clip(v, lo, hi), ~(mass > 0)
