"""Operators on CDF estimates: pure functions of arrays (paper Algorithms 1 and 2).

The grid of a column, the first-row solve ``q = (S + ridge)^-1 e1`` of the two-step
aggregation, the post-processing M_cdf (clip, monotone, end at 1), inverse-CDF
sampling by interpolation on the grid, and the category masses of discrete columns.
The coordinator (:mod:`fits.federation.coordinator`) applies them to the sums it
receives.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import isotonic_regression

from fits.core.continualization import Encoder

__all__ = [
    "DISCRETE_SAMPLING",
    "MONOTONE_METHODS",
    "default_grid",
    "inverse_cdf",
    "inverse_masses",
    "mass_grid",
    "masses_from_cdf",
    "postprocess_cdf",
    "solve_first_row",
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
    response bandwidths, since a client's sd is at most half the range).  Discrete
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
    return np.linspace(lo - pad, hi + pad, grid_size)


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


def solve_first_row(s: np.ndarray, ridge: float = 1e-8) -> np.ndarray:
    """q = (S + ridge)^-1 e1 for a batch of symmetric matrices S (eq. 7).

    The ridge is scale-invariant (METHOD.md): ``ridge * diag(S)`` is added to the
    diagonal, not a multiple of the identity.  A zero diagonal entry (a covariate with
    no spread among the weighted rows) gets 1 instead; its row and column of S are zero,
    so this only pins the matching entry of q to 0.
    """
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
