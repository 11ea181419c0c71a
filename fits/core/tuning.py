"""Smoothing per chain column, chosen by a federated held-out score (issue 12).

The paper (sec. 3.2, 4.4, 6.1.2) fixes one smoothing for every column: the KNN budget
r0 (or the Gaussian bandwidth ``M^(-1/(d+4))``) and the category penalties lambda_q,
gamma_q of eq. 26 (METHOD.md: lambda_q = 1, gamma_q = 0.1, "to be tuned").  fits can
instead choose, for each chain column j > 1 (the response of one conditional CDF), one
:class:`Smoothing` out of a small candidate set:

* ``sharpness`` s multiplies every category penalty *rate* of the kernel that estimates
  column j's conditional CDF: lambda_q -> s lambda_q (ordinal) and gamma_q -> gamma_q^s
  (nominal, whose rate is -log gamma_q), so s = 3 weighs a row one rank away by
  exp(-3 lambda_q) instead of exp(-lambda_q);
* ``reach`` b multiplies the neighbourhood: a KNN site's budget r0 -> b r0 (so its
  c_k of eq. 12 scales with it), a Gaussian site's bandwidth w_x -> b w_x.

The choice is made by a held-out score that every site computes on its own rows
(:func:`heldout_scores`); only the per-candidate sums over its rows leave the site
(message ``tune``, :mod:`fits.federation.client`) and the coordinator takes, per column,
the candidate with the smallest sum over the sites (ties to the first, the default).

**The site's local estimator.**  A site scores the estimator a federation would use if
it held only this site's m training rows: the same kernel, the same local-linear fit
(eqs. 5, 7-10, with the coordinator's ridge and collinearity guard), the same category
penalties (times the candidate's sharpness) and the same response smoothing, with the
neighbourhood rescaled from the federation's M rows to m at the rate of the paper's
own bandwidth rule ``w_x = M^(-1/(d+4))`` (sec. 6.1.2): a Gaussian site takes
``w_x (M/m)^(1/(d+4))`` (its default bandwidth computed with m for M), a KNN site
``r0 (m/M)^(4/(d+4))`` neighbours (the count whose radius shrinks at the same rate,
since a KNN radius goes as (c/m)^(1/d)) -- between its share c_k = r0 m/M of eq. 12
(the pooled radius, but a score dominated by the variance of a handful of neighbours at
a small site) and r0 (the pooled variance, but a far wider neighbourhood).  Under that
rate the reach that minimizes the local score is the one that minimizes the pooled
one, so each site estimates, on its own rows, how the candidates rank for the pooled
estimator; the sum over sites weighs each site by the rows it scores.  The category
penalties are not rescaled (fits' choice; the smoothing of discrete covariates has
its own rate, which the paper does not use).  A KNN estimator takes at least c0 and
the site policy's k neighbours.

**The score** (lower is better), per held-out row, is a proper scoring rule of the
predicted distribution of column j given the row's earlier columns (midpoint-substituted,
eq. 24, as a federated query is):

* ``"crps"`` (continuous columns, and discrete ones drawn on a grid): the continuous
  ranked probability score ``int (F(z) - 1{z >= y})^2 dz`` of F post-processed as the
  coordinator does (clip, isotonic, end at 1) and interpolated linearly between the
  grid points (:func:`crps_on_grid`, exact for that F);
* ``"rps"`` (ordinal columns drawn by mass, Corollary 5.4): the ranked probability
  score ``sum_l (P(Y <= l) - 1{y <= l})^2`` of the category masses;
* ``"brier"`` (nominal columns drawn by mass): ``sum_l (p_l - 1{y = l})^2``.

Held-out rows: every site splits its rows into K folds with its own generator (seeded
by the coordinator's seed for it) and scores up to its share of ``rows`` of them, each
with an estimator fitted on the other folds.  A Gaussian site, whose weights are dense
(every training row for every held-out row), scores at most ``GAUSSIAN_PAIRS / m`` of
them (about 240 at a site of 8,700 usable rows), so its work per column stays
bounded.  A query whose weights are degenerate falls back to the local-constant fit
with the same weights, then to the training rows' marginal, as the coordinator's
draws do (the coordinator's intermediate KNN fallback is not repeated: the local
estimator is KNN or dense already).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fits.core.cdf import (
    masses_from_cdf,
    postprocess_cdf,
    solve_first_row,
)
from fits.core.kernels import GaussianKernel, Kernel, KNNKernel, epanechnikov_product

__all__ = [
    "DEFAULT_CANDIDATES",
    "DEFAULT_FOLDS",
    "DEFAULT_TUNING_ROWS",
    "GAUSSIAN_PAIRS",
    "SCORES",
    "RELEVANCE_PROBE",
    "RELEVANCE_STEPS",
    "Smoothing",
    "crps_on_grid",
    "heldout_scores",
    "relevance_groups",
    "relevance_probes",
    "relevance_steps",
    "score_for",
    "smoothed_kernel",
    "with_relevance",
]

#: Scores a site can be asked for (see the module docstring).
SCORES = ("crps", "rps", "brier")
#: Folds of the held-out split at each site.
DEFAULT_FOLDS = 5
#: Held-out rows scored per column over the whole federation (each site its share).
DEFAULT_TUNING_ROWS = 4000
#: A Gaussian site's dense local estimate costs (scored rows) x (training rows): it
#: scores at most this many pairs' worth of rows per column (at least k rows).
GAUSSIAN_PAIRS = 1 << 21
#: Total weight at or below which a held-out query is degenerate (as the coordinator).
_DEGENERATE = 1e-250
#: Numbers per block of neighbour work (about 32 MB of float64).
_BLOCK_VALUES = 1 << 22


@dataclass(frozen=True)
class Smoothing:
    """One smoothing of a conditional CDF: the kernel's penalties, reach and relevance.

    Parameters
    ----------
    sharpness : float
        s > 0: every category penalty rate is multiplied by s (lambda_q -> s lambda_q,
        gamma_q -> gamma_q ** s).  Default 1 (the kernel's own).
    reach : float
        b > 0: the KNN budget r0 -> b r0, or the Gaussian bandwidth w_x -> b w_x.
        Default 1.
    relevance : mapping, optional
        Covariate -> a >= 0: a multiplies the relevance weight the site's kernel gives
        that covariate in this column's kernel (:attr:`fits.core.kernels.Kernel.relevance`:
        its standardized coordinate and its penalty rate; 1 where the kernel sets none).
        Stored as sorted (name, weight) pairs with the weights of 1 left out.  Default
        none (the kernel's own weights).
    """

    sharpness: float = 1.0
    reach: float = 1.0
    relevance: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        for name in ("sharpness", "reach"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"smoothing {name} must be a finite number > 0, got {value!r}")
        given = self.relevance
        items = given.items() if isinstance(given, Mapping) else given
        pairs: dict[str, float] = {}
        try:
            for covariate, weight in items:
                pairs[str(covariate)] = weight
        except (TypeError, ValueError):
            raise ValueError(
                f"smoothing relevance must be a mapping covariate -> weight, got {given!r}"
            ) from None
        for covariate, weight in pairs.items():
            if isinstance(weight, bool) or not (
                isinstance(weight, (int, float, np.integer, np.floating))
                and math.isfinite(weight)
                and weight >= 0
            ):
                raise ValueError(
                    f"smoothing relevance[{covariate!r}] must be a finite number >= 0, "
                    f"got {weight!r}"
                )
        kept = tuple(sorted((c, float(a)) for c, a in pairs.items() if float(a) != 1.0))
        object.__setattr__(self, "relevance", kept)

    def __setstate__(self, state: dict[str, object]) -> None:
        # a Smoothing pickled before ``relevance`` existed (a saved synthesizer) has none
        self.__dict__.update({"relevance": (), **state})

    @property
    def is_default(self) -> bool:
        """Whether this is the kernel's own smoothing (s = b = 1, no relevance)."""
        return self.sharpness == 1.0 and self.reach == 1.0 and not self.relevance

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sharpness": float(self.sharpness), "reach": float(self.reach)}
        if self.relevance:
            out["relevance"] = dict(self.relevance)
        return out

    @classmethod
    def from_value(cls, value: Smoothing | Mapping[str, Any] | Sequence[Any]) -> Smoothing:
        """A smoothing from a Smoothing, a mapping with its fields, or (s, b[, relevance])."""
        if isinstance(value, Smoothing):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {"sharpness", "reach", "relevance"}
            if unknown:
                raise ValueError(
                    f"smoothing: unknown field(s) {sorted(unknown)}; use sharpness, reach "
                    "and relevance"
                )
            return cls(
                float(value.get("sharpness", 1.0)),
                float(value.get("reach", 1.0)),
                value.get("relevance", ()),
            )
        if (
            isinstance(value, (str, bytes))
            or not isinstance(value, Sequence)
            or len(value) not in (2, 3)
        ):
            raise TypeError(
                "a smoothing is a Smoothing, a mapping {'sharpness': s, 'reach': b} or a "
                f"pair (s, b), got {value!r}"
            )
        if len(value) == 3:
            s, b, relevance = value
            return cls(float(s), float(b), relevance)
        s, b = value
        return cls(float(s), float(b))


#: The candidates of the default choice: the kernel's own smoothing first (it wins ties),
#: then every pair of sharpness (1, 3) and reach (1, 2, 4).  On Bike (seed 0) the
#: scores of a wider set put no column at sharpness 10 or reach 0.5
#: (docs/benchmarks.md, "Smoothing per column").
DEFAULT_CANDIDATES: tuple[Smoothing, ...] = (
    Smoothing(1.0, 1.0),
    Smoothing(1.0, 2.0),
    Smoothing(1.0, 4.0),
    Smoothing(3.0, 1.0),
    Smoothing(3.0, 2.0),
    Smoothing(3.0, 4.0),
)


def smoothed_kernel(
    kernel: Kernel,
    smoothing: Smoothing,
    discrete: Mapping[str, str],
    *,
    n_total: int,
    d: int,
    response: str | None = None,
) -> Kernel:
    """The kernel with a :class:`Smoothing` applied, for a response with d covariates.

    Parameters
    ----------
    kernel : Kernel
        The site's own kernel.
    smoothing : Smoothing
    discrete : mapping
        Name -> kind (``"ordinal"`` / ``"nominal"``) of the discrete covariates: their
        penalties are set explicitly (``column_penalties``), scaled by the sharpness.
    n_total : int
        M as the site takes it (the Gaussian default bandwidth ``M^(-1/(d+4))``).
    d : int
        Number of covariates.
    response : str, optional
        The response's name (needed when the smoothing has relevance weights: they
        multiply the kernel's own weights for that response, :func:`with_relevance`).
    """
    if smoothing.is_default:
        return kernel
    changes: dict[str, object] = {}
    if smoothing.relevance:
        if response is None:
            raise ValueError("a smoothing with relevance weights needs the response's name")
        kernel = with_relevance(kernel, response, dict(smoothing.relevance))
    s = float(smoothing.sharpness)
    if s != 1.0 and discrete:
        penalties = {}
        for name, kind in discrete.items():
            base = kernel.penalty_for(name, kind)
            penalties[name] = base**s if kind == "nominal" else base * s
        changes["column_penalties"] = {**dict(kernel.column_penalties), **penalties}
    b = float(smoothing.reach)
    if b != 1.0:
        if isinstance(kernel, KNNKernel):
            changes["budget"] = max(1, int(math.floor(kernel.budget_for(d) * b + 0.5)))
        elif isinstance(kernel, GaussianKernel):
            changes["bandwidth"] = kernel.bandwidth_for(n_total, d) * b
    return replace(kernel, **changes) if changes else kernel  # type: ignore[arg-type]


def with_relevance(kernel: Kernel, response: str, weights: Mapping[str, float]) -> Kernel:
    """The kernel with ``weights`` multiplying its own relevance weights for ``response``.

    The kernel's weights for the response (:attr:`~fits.core.kernels.Kernel.relevance`
    under the response's name) are taken as 1 where it sets none; each covariate named
    in ``weights`` gets the product.  Other responses keep theirs.
    """
    if not weights:
        return kernel
    own = dict(kernel.relevance.get(response, {}))
    merged = {**own, **{c: own.get(c, 1.0) * float(a) for c, a in weights.items()}}
    return replace(kernel, relevance={**kernel.relevance, response: merged})


#: The probe of the relevance search: one covariate's weight times 2 (one log2 unit).
RELEVANCE_PROBE = 2.0
#: The step lengths of the relevance search, in log2 units of the covariate whose probe
#: moved the score most (the others move in proportion).
RELEVANCE_STEPS: tuple[float, ...] = (1.0, 2.0, 4.0)


#: The relevance search keeps every weight it proposes within [1/R, R] of 1 (R = 2^10):
#: beyond that a covariate is as good as left out, or the only one that counts.
RELEVANCE_RANGE = 1024.0


def _scaled(base: Smoothing, factors: Mapping[str, float]) -> Smoothing:
    """``base`` with its relevance weights multiplied by ``factors`` (1 where unset),
    each kept within [1 / RELEVANCE_RANGE, RELEVANCE_RANGE]."""
    own = dict(base.relevance)
    weights = {
        **own,
        **{
            c: min(max(own.get(c, 1.0) * float(f), 1.0 / RELEVANCE_RANGE), RELEVANCE_RANGE)
            for c, f in factors.items()
        },
    }
    return Smoothing(base.sharpness, base.reach, tuple(weights.items()))


Groups = Sequence[str | Sequence[str]]


def _members(group: str | Sequence[str]) -> list[str]:
    return [group] if isinstance(group, str) else [str(c) for c in group]


def relevance_groups(covariates: Sequence[str], budget: int) -> list[list[str]]:
    """How one pass of the relevance search probes ``covariates`` within ``budget``
    candidates: one probe per covariate when the start, the probes and a step fit
    (``budget >= d + 2``); else the covariates in ``budget - 1 - 3`` contiguous groups
    of chain order (as equal as can be), each group's weights probed and moved
    together, so that the start, a probe per group and three steps fit.

    Raises
    ------
    ValueError
        A budget below 5 for more covariates than it can probe one by one.
    """
    d = len(covariates)
    if budget >= d + 2:
        return [[c] for c in covariates]
    n = budget - 1 - len(RELEVANCE_STEPS)
    if n < 1:
        raise ValueError(
            f"a relevance search over {d} covariates needs a budget of at least "
            f"{min(d + 2, 2 + len(RELEVANCE_STEPS))} candidates, got {budget}"
        )
    return [[str(c) for c in part] for part in np.array_split(np.asarray(covariates), n)]


def relevance_probes(base: Smoothing, groups: Groups) -> list[Smoothing]:
    """The first round of one pass of the relevance search: ``base`` itself, then, per
    group (a covariate, or a list of covariates moved together,
    :func:`relevance_groups`), ``base`` with its weights times :data:`RELEVANCE_PROBE`."""
    return [base] + [_scaled(base, dict.fromkeys(_members(g), RELEVANCE_PROBE)) for g in groups]


def relevance_steps(
    base: Smoothing,
    groups: Groups,
    base_score: float,
    probe_scores: Sequence[float],
    steps: Sequence[float] = RELEVANCE_STEPS,
) -> list[Smoothing]:
    """The second round of one pass: steps along the probes' finite differences.

    g_i = (score of probe i) - ``base_score`` is the change of the summed held-out
    score per log2 unit of group i's weights (a forward difference: every probe is
    scored on the same held-out rows, so the differences are paired).  With
    u_i = -sign(g_i) sqrt(|g_i| / max_j |g_j|), step eta multiplies the weights of
    group i's covariates by 2^(eta u_i): the group whose emphasis helped most is
    emphasized 2^eta times, the one whose emphasis hurt most is played down as much,
    the others by the square root of their share.  The square root is fits' choice,
    between the normalized gradient (u_i = -g_i / max |g|), where one strong covariate
    leaves the others nearly where they were, and its signs (u_i = -sign(g_i)), which
    move a covariate the probes barely told apart as far as the strongest: on Bike's
    ``cnt`` (seed 0, the 12 covariates' probes scored once) the best of eta = 1..4
    summed 807 with the square root, 890 with the gradient and 818 with the signs,
    from 1135 (docs/benchmarks.md, "Relevance weights learned by the sites' held-out
    scores").  No step where no probe moved the score.
    """
    g = np.asarray(probe_scores, dtype=float) - float(base_score)
    if g.shape != (len(groups),):
        raise ValueError(f"need one probe score per covariate or group, got {g.shape}")
    top = float(np.max(np.abs(g))) if g.size else 0.0
    if not top > 0 or not math.isfinite(top):
        return []
    u = -np.sign(g) * np.sqrt(np.abs(g) / top)
    out = []
    for eta in steps:
        factors = {}
        for group, ui in zip(groups, u, strict=True):
            factors.update(dict.fromkeys(_members(group), 2.0 ** (eta * ui)))
        out.append(_scaled(base, factors))
    return out


def score_for(kind: str, by_mass: bool) -> str:
    """The score of a column: CRPS on its grid, RPS (ordinal) or Brier (nominal) masses."""
    if not by_mass or kind == "continuous":
        return "crps"
    return "rps" if kind == "ordinal" else "brier"


def crps_on_grid(cdf: np.ndarray, grid: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``int (F(z) - 1{z >= y})^2 dz`` for F linear between grid points, one per row.

    ``cdf`` is (B, L) on ``grid`` (L,), ``y`` (B,).  F is the linear interpolation of
    the grid values (the CDF that draws invert, eq. 17), 0 below the grid and 1 above
    it; the integral is exact for that F (a quadratic on every piece, the piece that
    holds y split there).
    """
    cdf = np.asarray(cdf, dtype=float)
    y = np.asarray(y, dtype=float)
    b = np.arange(len(y))
    dz = np.diff(grid)
    g = cdf - (grid[None, :] >= y[:, None])
    pieces = dz[None, :] * (g[:, :-1] ** 2 + g[:, :-1] * g[:, 1:] + g[:, 1:] ** 2) / 3.0
    total = pieces.sum(axis=1)
    k = np.searchsorted(grid, y, side="left")  # grid[k - 1] < y <= grid[k]
    inside = (k > 0) & (k < grid.size)
    below = k == 0  # y at or below the first point: F = 0 on [y, grid[0]]
    total[below] += grid[0] - y[below]
    above = k == grid.size  # beyond the last point: F = 1 on [grid[-1], y]
    total[above] += y[above] - grid[-1]
    if np.any(inside):
        bi, ki = b[inside], k[inside]
        z0, z1 = grid[ki - 1], grid[ki]
        f0, f1 = cdf[bi, ki - 1], cdf[bi, ki]
        yi = y[inside]
        fy = f0 + (f1 - f0) * (yi - z0) / (z1 - z0)
        total[inside] -= pieces[bi, ki - 1]
        total[inside] += (yi - z0) * (f0**2 + f0 * fy + fy**2) / 3.0
        e0, e1 = fy - 1.0, f1 - 1.0
        total[inside] += (z1 - yi) * (e0**2 + e0 * e1 + e1**2) / 3.0
    return total


def _mass_scores(p: np.ndarray, codes: np.ndarray, score: str) -> np.ndarray:
    """RPS or Brier score of category masses ``p`` (B, L) at the observed codes."""
    levels = p.shape[1]
    if score == "brier":
        hit = codes[:, None] == np.arange(levels)[None, :]
        return np.sum((p - hit) ** 2, axis=1)
    cum = np.cumsum(p, axis=1)[:, :-1]
    below = codes[:, None] <= np.arange(levels - 1)[None, :]
    return np.sum((cum - below) ** 2, axis=1)


def heldout_scores(
    z: np.ndarray,
    x: np.ndarray,
    phi: np.ndarray,
    target: np.ndarray,
    *,
    loc: np.ndarray,
    scale: np.ndarray,
    codes: np.ndarray,
    qcodes: np.ndarray,
    kinds: Sequence[str],
    penalties: Sequence[float],
    usable: np.ndarray,
    folds: np.ndarray,
    scored: np.ndarray,
    grid: np.ndarray,
    score: str,
    mass_offset: float,
    kernel: Kernel,
    candidates: Sequence[Smoothing],
    n_total: int,
    min_neighbours: float = 0.0,
    ridge: float = 1e-8,
    collinearity: float = 0.0,
    design: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """Sums over held-out rows of the score of each candidate smoothing (lower is better).

    Parameters
    ----------
    z : ndarray (m, d)
        The covariates of the site's rows on the continualized scale (the local-linear
        design, native units).
    x : ndarray (m, d)
        The same rows as queries: discrete coordinates at their interval midpoints
        (eq. 24).
    phi : ndarray (m, L)
        ``Phi((z_l - y_i) / w_i)`` of every row on the column's grid (eq. 9).
    target : ndarray (m,)
        The observed response: its continualized value (``"crps"``) or its category
        code (``"rps"``, ``"brier"``).
    loc, scale : ndarray (d,)
        The site's standardization of the covariates (the kernel's scale).
    codes, qcodes : ndarray (m, q)
        Category codes of the q discrete covariates, as rows and as queries.
    kinds, penalties : sequence (q,)
        Per discrete covariate: ``"ordinal"`` / ``"nominal"`` and the site's own
        lambda_q / gamma_q.
    usable : ndarray (m,) of bool
        Rows whose response is present (the only training and scored rows).
    folds : ndarray (m,) of int
        Fold of every row; a held-out row's estimator uses the usable rows of the other
        folds.
    scored : ndarray of int
        The rows to score.
    grid : ndarray (L,)
        The column's grid (two interior points per interval for ``"rps"`` / ``"brier"``).
    score : {"crps", "rps", "brier"}
    mass_offset : float
        The offset of the mass grid (:func:`fits.core.cdf.masses_from_cdf`).
    kernel : KNNKernel or GaussianKernel
        The site's own kernel (its eta, c0, r0, bandwidth).
    candidates : sequence of Smoothing
    n_total : int
        M, the federation's rows (as the site takes it): the local estimator's
        neighbourhood is the federation's rescaled from M to the training rows.
    min_neighbours : float
        A KNN estimator uses at least this many neighbours (the site policy's k).
    ridge, collinearity : float
        As the coordinator's (eq. 7 and its collinearity guard).
    design : ndarray of int, optional
        The covariates kept in the local-linear design (the coordinator's ``design``);
        None: all of them (eq. 5).

    Returns
    -------
    (ndarray (C,), int)
        The summed scores, one per candidate, and the number of rows scored.
    """
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    d = z.shape[1]
    kept = np.arange(d) if design is None else np.asarray(design, dtype=np.int64)
    p = kept.size + 1
    ncand = len(candidates)
    total = np.zeros(ncand)
    scored = np.asarray(scored, dtype=np.int64)
    scored = scored[usable[scored]]
    if not scored.size or d == 0:
        return total, 0
    hbar = (z - loc) / scale
    xbar = (x - loc) / scale
    ordinal = np.array([k == "ordinal" for k in kinds], dtype=bool)
    pairs = zip(kinds, penalties, strict=True)
    base_rate = np.array([pen if k == "ordinal" else -math.log(pen) for k, pen in pairs])
    n_done = 0
    n_total = max(int(n_total), 1)
    for fold in np.unique(folds[scored]):
        train = np.flatnonzero(usable & (folds != fold))
        rows = scored[folds[scored] == fold]
        if not train.size:
            continue  # a site with a single fold of usable rows scores nothing
        n_done += rows.size
        m_train = train.size
        # the local estimator's neighbourhood: the federation's, rescaled from M rows to
        # m_train at the rate of the paper's bandwidth rule M^(-1/(d+4)) (module doc)
        shrink = min(1.0, m_train / n_total) ** (1.0 / (d + 4))
        if isinstance(kernel, KNNKernel):
            r0 = kernel.budget_for(d) * shrink**4
            floor = max(kernel.min_neighbors, math.ceil(min_neighbours))
            sizes = [
                min(max(floor, int(math.floor(r0 * c.reach + 0.5))), m_train) for c in candidates
            ]
            cmax = max(sizes)
            from scipy.spatial import cKDTree

            tree = cKDTree(hbar[train], leafsize=64, balanced_tree=False)
            dist, idx = tree.query(xbar[rows], k=cmax)
            dist = dist.reshape(rows.size, cmax)
            idx = train[idx.reshape(rows.size, cmax)]
        elif isinstance(kernel, GaussianKernel):
            sizes = [m_train] * ncand
            cmax = m_train
            idx = np.broadcast_to(train, (rows.size, m_train))
            dist = None
            w_x = kernel.bandwidth_for(n_total, d) / shrink
        else:
            raise TypeError(f"unsupported kernel {kernel!r}")
        marginal = phi[train].mean(axis=0, keepdims=True)
        width = max(cmax * (p + d + phi.shape[1] + codes.shape[1]), 1)
        step = int(max(1, _BLOCK_VALUES // width))
        for lo in range(0, rows.size, step):
            hi = min(rows.size, lo + step)
            r = rows[lo:hi]
            nb_all = idx[lo:hi]
            design_all = np.concatenate(
                [np.ones(nb_all.shape + (1,)), z[nb_all][..., kept] - x[r][:, None, kept]],
                axis=2,
            )
            diff_all = hbar[nb_all] - xbar[r][:, None, :]
            phi_all = phi[nb_all]
            if base_rate.size:
                gap = np.abs(codes[nb_all] - qcodes[r][:, None, :]).astype(float)
                pen_all = gap @ np.where(ordinal, base_rate, 0.0)
                pen_all += (gap != 0) @ np.where(ordinal, 0.0, base_rate)
            for ci, cand in enumerate(candidates):
                c = sizes[ci]
                diff = diff_all[:, :c]
                if isinstance(kernel, KNNKernel):
                    assert dist is not None
                    radius = np.maximum(dist[lo:hi, c - 1], 1e-12) * kernel.eta
                    w = epanechnikov_product(diff / radius[:, None, None], overwrite_input=True)
                else:
                    bw = w_x * cand.reach
                    w = np.exp(-0.5 * np.einsum("bcj,bcj->bc", diff, diff) / (bw * bw))
                if base_rate.size:
                    w *= np.exp(-cand.sharpness * pen_all[:, :c])
                design = design_all[:, :c]
                s = np.matmul((design * w[:, :, None]).transpose(0, 2, 1), design)
                # a sharp candidate (large relevance weights) can leave a query's weights
                # at a few tiny numbers: its solve overflows to non-finite q, which the
                # next line treats as degenerate (the fallbacks), as the coordinator does
                with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                    q = solve_first_row(s, ridge, collinearity)  # as the coordinator
                degenerate = ~(s[:, 0, 0] > _DEGENERATE) | ~np.all(np.isfinite(q), axis=1)
                q[degenerate] = 0.0
                alpha = w * np.matmul(design, q[:, :, None])[:, :, 0]
                f = np.matmul(alpha[:, None, :], phi_all[:, :c])[:, 0]
                total_w = w.sum(axis=1)
                const = w / np.where(total_w > 0, total_w, 1.0)[:, None]
                f_const = np.matmul(const[:, None, :], phi_all[:, :c])[:, 0]
                total[ci] += _score_rows(
                    f, f_const, marginal, degenerate, target[r], grid, score, mass_offset
                ).sum()
    return total, n_done


def _score_rows(
    f: np.ndarray,
    f_const: np.ndarray,
    marginal: np.ndarray,
    degenerate: np.ndarray,
    target: np.ndarray,
    grid: np.ndarray,
    score: str,
    mass_offset: float,
) -> np.ndarray:
    """Scores of raw local-linear F, with the coordinator's fallbacks: rows with no
    usable mass take the local-constant fit, then the marginal."""

    def convert(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if score == "crps":
            return postprocess_cdf(g, "isotonic")
        return masses_from_cdf(g, mass_offset)

    out, bad = convert(f)
    bad |= degenerate
    if np.any(bad):
        out[bad], still = convert(f_const[bad])
        if np.any(still):
            fallback, _ = convert(marginal)
            out[np.flatnonzero(bad)[still]] = fallback[0]
    if score == "crps":
        return crps_on_grid(out, grid, target)
    return _mass_scores(out, target.astype(np.int64), score)
