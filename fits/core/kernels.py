"""Client-designed kernels (paper sec. 3.2) and the penalty-adaptive kernel (sec. 4.4).

Each client picks its own scheme and parameters:

* :class:`GaussianKernel` -- the fixed-bandwidth scheme (eq. 11): every local row gets
  the weight ``exp(-|x - h|^2 / (2 w_x^2)) * rho`` on locally standardized covariates,
  with ``w_x = M^(-1/(d+4))`` by default (sec. 6.1.2).  No normalizing constant, as in
  the paper.
* :class:`KNNKernel` -- the KNN scheme (eqs. 12-13): the ``c_k`` nearest local rows of
  the standardized query get the product Epanechnikov weight
  ``prod_j (1 - u_j^2)_+ * rho`` with ``u = (h - x) / (eta r)``, ``r`` the distance to
  the ``c_k``-th neighbour.  The factor 3/4 of the Epanechnikov kernel is dropped: the
  local-linear estimate is invariant to a common scale of the weights.

Both multiply by the category penalty rho (eqs. 25-26): ``exp(-lambda |rank gap|)`` per
ordinal covariate and ``gamma`` per nominal covariate whose category differs from the
query's.  Discrete query coordinates are moved to their interval midpoint first (eq. 24;
done by the client, see :mod:`fits.federation.client`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import ndtr, ndtri

if TYPE_CHECKING:
    from fits.core.schema import Schema

__all__ = [
    "Kernel",
    "GaussianKernel",
    "KNNKernel",
    "DEFAULT_KNN_BUDGET",
    "BRUTE_FORCE_MIN_DIM",
    "NEIGHBOUR_SEARCH",
    "check_kernel_settings",
    "check_relevance",
    "covariate_scale",
    "knn_budget",
    "resolve_kernel",
    "response_cdf_kernel",
    "epanechnikov_product",
]

#: Global KNN budget r0 by number of conditioning columns d (sec. 6.1.2); key 0 = "more".
DEFAULT_KNN_BUDGET: dict[int, int] = {1: 350, 2: 250, 0: 200}
#: Ways to find the KNN neighbours (:class:`KNNKernel`'s ``search``).
NEIGHBOUR_SEARCH = ("auto", "kdtree", "brute")
#: From this many covariates on, ``search="auto"`` scans instead of using a KD-tree.
#: Measured on UCI Adult with the tree on both cores (docs/benchmarks.md), search time
#: of a batch at all 10 clients, scan / tree: 1.85x at d = 6, 1.46x at d = 8, 1.22x at
#: d = 9, 0.97x at d = 10, 0.71x at d = 11, 0.82x at d = 12, 0.48x at d = 17
#: (``benchmarks/neighbour_search.py``).
BRUTE_FORCE_MIN_DIM = 11


#: Share of a continuous covariate's values left out at each end by
#: :func:`covariate_scale` (at least one value each end).
TRIM_SHARE = 0.005
#: Fewest values :func:`covariate_scale` trims: below, the plain sd (at 20 normal
#: values the trimmed scale is 0.98 of the sd on average, at 7 0.94, its 5% quantile 0.63).
TRIM_MIN_VALUES = 20


def covariate_scale(values: np.ndarray) -> float:
    """A site's scale of a continuous covariate for the kernel's standardization: the
    standard deviation with the ``k = max(1, floor(TRIM_SHARE n))`` smallest and
    largest values left out, divided by the standard deviation of a normal
    distribution with the same share cut off at each end (so that it is the sd at
    normal data), and never above the plain sd (docs/method.md, "The response
    bandwidth's scale ...").

    One outlier (an income of 1e8 among values around 20,000) inflates the sd by orders
    of magnitude, which shrinks the covariate's standardized coordinates towards 0 and
    takes it out of the kernel's distances; the trimmed sd does not see it.  Unlike
    the IQR (:func:`fits.core.cdf.response_scale`), it keeps a spiky column's spread:
    hours per week, 40 in half of Adult's rows, has an IQR of 5 but an sd of 12.
    Fewer than :data:`TRIM_MIN_VALUES` values, or a trimmed sd of 0: the plain sd (1
    where it is 0: a constant column is not scaled).
    """
    values = np.asarray(values, dtype=float)
    n = values.size
    sd = float(values.std()) if n else 0.0
    if not sd > 0:
        return 1.0
    if n < TRIM_MIN_VALUES:
        return sd
    k = max(1, int(TRIM_SHARE * n))
    kept = np.partition(values, (k, n - k - 1))[k : n - k]
    trimmed = float(kept.std())
    if not trimmed > 0:
        return sd
    alpha = k / n  # a normal cut at its alpha and 1 - alpha quantiles keeps this sd:
    z = float(ndtri(1.0 - alpha))
    normal = math.sqrt(1.0 - 2.0 * z * float(np.exp(-0.5 * z * z)) / math.sqrt(2 * math.pi)
                       / (1.0 - 2.0 * alpha))  # fmt: skip
    return min(sd, trimmed / normal)


@dataclass(frozen=True)
class Kernel:
    """Common part of both schemes: the category penalty of the penalty-adaptive kernel.

    Parameters
    ----------
    ordinal_penalty : float
        lambda_q in eq. 26: the weight of a row whose ordinal category is ``g`` ranks
        away from the query's is multiplied by ``exp(-lambda_q g)``.  Default 1.
    nominal_penalty : float
        gamma_q in eq. 26, in (0, 1]: the factor for a nominal category mismatch.
        Default 0.1.
    column_penalties : mapping, optional
        Per-column overrides: column name -> lambda_q or gamma_q.
    relevance : mapping, optional
        Per-covariate relevance weights for some responses (keyword only; not in the
        paper): ``{response: {covariate: a}}``.  In the kernel of ``response``'s
        conditional CDF, covariate ``q``'s standardized coordinate is multiplied by
        ``a_q`` (so is its part of the KNN distance and of the kernel argument) and
        its category penalty rate too (lambda_q -> a_q lambda_q, gamma_q ->
        gamma_q^a_q); a = 0 leaves the covariate out of the weights (the local-linear
        design keeps it), a = 1 (every covariate not named, and every response not
        named) is the paper's kernel.  An engine's indicator column (``"x (at point
        mass)"``, ``"x (missing)"``) takes its column's weight, and as a response (whether
        x is missing, at its point mass) x's weights.  See :meth:`relevance_for`.
    """

    ordinal_penalty: float = 1.0
    nominal_penalty: float = 0.1
    column_penalties: Mapping[str, float] = field(default_factory=dict)
    relevance: Mapping[str, Mapping[str, float]] = field(default_factory=dict, kw_only=True)

    name = "kernel"

    def __post_init__(self) -> None:
        if not self.ordinal_penalty >= 0:
            raise ValueError("ordinal_penalty (lambda_q) must be >= 0")
        if not 0 < self.nominal_penalty <= 1:
            raise ValueError("nominal_penalty (gamma_q) must lie in (0, 1]")
        if not isinstance(self.relevance, Mapping):
            raise TypeError(
                "relevance must be a mapping {response: {covariate: weight}}, got "
                f"{self.relevance!r}"
            )
        for response, weights in self.relevance.items():
            if not isinstance(weights, Mapping):
                raise TypeError(
                    f"relevance[{response!r}] must be a mapping covariate -> weight, "
                    f"got {weights!r}"
                )
            for covariate, value in weights.items():
                if (
                    isinstance(value, bool)
                    or not isinstance(value, (int, float, np.integer, np.floating))
                    or not 0 <= float(value) < np.inf
                ):
                    raise ValueError(
                        f"relevance[{response!r}][{covariate!r}] must be a number >= 0 "
                        f"(0 leaves the covariate out of the weights, 1 is the paper's "
                        f"kernel), got {value!r}"
                    )

    def __setstate__(self, state: dict[str, object]) -> None:
        # a kernel pickled before ``relevance`` existed (a saved synthesizer) has none
        self.__dict__.update({"relevance": {}, **state})

    def relevance_for(
        self,
        response: str,
        covariates: list[str],
        indicates: Mapping[str, str] | None = None,
    ) -> np.ndarray | None:
        """The relevance weights of ``covariates`` (the engine's columns before
        ``response`` in the chain) in the kernel of ``response``'s conditional CDF, or
        None where every one is 1 (the paper's kernel, computed as before).
        ``indicates``: the engine's indicator columns -> the column each indicates
        (:attr:`~fits.core.schema.ColumnSpec.indicates`; a user's own column named
        ``"x (missing)"`` is none); None: judged by the name."""

        def column_of(name: str) -> str:
            return _column_of(name) if indicates is None else indicates.get(name, name)

        # the response's own indicators ('y (missing)') are part of its conditional
        given = self.relevance.get(response) or self.relevance.get(column_of(response))
        if not given:
            return None
        out = np.array([float(given.get(c, given.get(column_of(c), 1.0))) for c in covariates])
        return None if np.all(out == 1.0) else out

    def penalty_for(self, column: str, kind: str) -> float:
        """lambda_q (ordinal) or gamma_q (nominal) for one covariate."""
        if column in self.column_penalties:
            value = float(self.column_penalties[column])
        else:
            value = self.ordinal_penalty if kind == "ordinal" else self.nominal_penalty
        if kind == "nominal" and not 0 < value <= 1:
            raise ValueError(
                f"column_penalties[{column!r}]: {column!r} is nominal, so its penalty "
                f"(gamma_q) must lie in (0, 1], got {value:g}"
            )
        if kind == "ordinal" and not value >= 0:
            raise ValueError(
                f"column_penalties[{column!r}]: {column!r} is ordinal, so its penalty "
                f"(lambda_q) must be >= 0, got {value:g}"
            )
        return value


def check_kernel_settings(
    kernel: Kernel,
    schema: Schema,
    *,
    engine: Schema | None = None,
    boosted: Collection[str] = (),
    unmodelled: Collection[str] = (),
) -> None:
    """Refuse kernel settings that would do nothing in a run of ``schema``.

    ``column_penalties`` must name ordinal or nominal columns the engine draws, each
    value in its kind's range (:meth:`Kernel.penalty_for`); ``relevance`` must pass
    :func:`check_relevance` (responses the kernels draw, covariates before them, no
    identifier and no column a rule sets); and a :class:`KNNKernel`'s must leave each
    response a covariate of weight > 0 (with every one 0, every row is at distance 0
    from every query, so the c_k nearest rows would be whichever the neighbour search
    returns first: they would depend on the sites' row order).

    ``FITSSynthesizer`` runs it on its kernels with the merged schema before the
    configure round; a site (:class:`~fits.federation.client.FITSClient`) runs it on its
    own kernel at configure, with what it is sent there.

    Parameters
    ----------
    kernel : Kernel
        The kernel to check.
    schema : Schema
        The run's schema: its kinds, chain order and rules (the columns affine rules
        and sum rules set) and its identifiers (kind ``"id"``).  A site passes the
        engine's schema it is sent at configure (no rules, no identifier; its
        indicator columns, those with ``indicates`` set, are not columns of the tables
        and are left out here).
    engine : Schema, optional
        The engine's schema (:meth:`Schema.expanded`: indicator columns in the chain),
        for the KNN check.  Default: ``schema``.
    boosted : collection of str
        Columns drawn from their boosted models (``column_models``), not by a kernel.
    unmodelled : collection of str
        Columns of the tables the engine does not draw, when it is not known whether
        each is an identifier or set by an affine rule (a site is sent them at
        configure as one list).

    Raises
    ------
    ValueError
        Naming the setting, the column and what to do; the message starts
        ``column_penalties[`` or ``relevance[``.
    """
    columns = [c for c in schema.columns if c.indicates is None]
    kinds = {c.name: c.kind for c in columns}
    order = [n for n in schema.order if n in kinds]
    derived = schema.derived
    ids = [c.name for c in columns if c.kind == "id"]
    summed = [r.column for r in schema.rules or [] if r.kind == "sum"]
    for name in kernel.column_penalties:
        if name in unmodelled:
            raise ValueError(
                f"column_penalties[{name!r}]: {name!r} is not drawn (an identifier, or set "
                "by the schema's affine rules from other columns), so its penalty does "
                "nothing; leave it out"
            )
        kind = kinds.get(name)
        if kind not in ("ordinal", "nominal"):
            discrete = [n for n, k in kinds.items() if k in ("ordinal", "nominal")]
            why = "no column" if kind is None else f"{'an' if kind == 'id' else 'a'} {kind} column"
            raise ValueError(
                f"column_penalties[{name!r}]: {name!r} is {why}; a penalty is for an "
                f"ordinal or nominal column (here: {', '.join(discrete) or 'none'})"
            )
        kernel.penalty_for(name, kind)  # the range of its kind
    check_relevance(
        kernel.relevance,
        order,
        boosted=boosted,
        derived=derived,
        ids=ids,
        summed=summed,
        unmodelled=unmodelled,
    )
    if isinstance(kernel, KNNKernel):
        _check_knn_relevance(kernel, schema if engine is None else engine)


def _check_knn_relevance(kernel: Kernel, engine: Schema) -> None:
    """A KNN kernel's ``relevance`` gives some covariate of each response a weight > 0
    (see :func:`check_kernel_settings`).  ``engine``: the engine's schema (indicators in
    the chain)."""
    order = list(engine.order)
    indicates = {c.name: c.indicates for c in engine.columns if c.indicates}
    for response in kernel.relevance:
        if response not in order:  # refused by check_relevance
            continue
        own = {c for c, of in indicates.items() if of == response}  # constant where usable
        covariates = [c for c in order[: order.index(response)] if c not in own]
        weights = kernel.relevance_for(response, covariates, indicates)
        if weights is not None and not weights.any():
            raise ValueError(
                f"relevance[{response!r}]: every covariate of {response!r} has weight 0, so "
                "every row is at distance 0 from every query and a KNN kernel's nearest "
                "rows would be arbitrary (the first its search returns); give one a "
                "weight > 0, or use the Gaussian kernel (--kernel gaussian), whose weights "
                "are then the same for every row"
            )


def check_relevance(
    relevance: Mapping[str, Mapping[str, float]],
    order: Sequence[str],
    *,
    boosted: Collection[str] = (),
    derived: Collection[str] = (),
    ids: Collection[str] = (),
    summed: Collection[str] = (),
    unmodelled: Collection[str] = (),
) -> None:
    """Check a kernel's ``relevance`` against the chain ``order``: it names responses the
    chain's kernels draw (not the first column, which has no covariates, nor one of
    ``boosted``, drawn from its boosted model, nor one of ``summed``, which a sum rule
    sets) and, for each, columns before it in the chain, none of ``derived`` (set by an
    affine rule: out of the engine's chain) or of ``ids`` (identifiers, not modelled)
    or of ``unmodelled`` (one or the other, not known which: a site's view; they need
    not be in ``order``); anything else would do nothing.

    Raises
    ------
    ValueError
        Naming the response and the columns (the message starts ``relevance[``).
    """
    order = list(order)
    for response, weights in relevance.items():
        hidden = [c for c in (response, *weights) if c in unmodelled]
        if hidden:
            raise ValueError(
                f"relevance[{response!r}]: {hidden} are not drawn (identifiers, or set by "
                "the schema's affine rules from other columns), so weights for them do "
                "nothing; leave them out"
            )
        if response not in order[1:]:
            where = "the chain's first column" if order[:1] == [response] else "no column"
            raise ValueError(
                f"relevance[{response!r}]: {response!r} is {where}; relevance weights are "
                "for a column drawn given earlier ones (chain: " + ", ".join(order) + ")"
            )
        if response in boosted:
            raise ValueError(
                f"relevance[{response!r}]: {response!r} is drawn from its boosted model "
                "(column_models, --column-model), not by a kernel, so its relevance "
                "weights do nothing; leave them out, or draw it by the kernel"
            )
        if response in summed:
            raise ValueError(
                f"relevance[{response!r}]: {response!r} is set by the schema's sum rule "
                "from other columns, not drawn by a kernel, so its relevance weights do "
                "nothing; leave them out, or switch the rules off (rules=False, --no-rules)"
            )
        ruled = [c for c in (response, *weights) if c in derived]
        if ruled:
            raise ValueError(
                f"relevance[{response!r}]: {ruled} are set by the schema's affine rules "
                "from other columns, not drawn, so weights for them do nothing; weigh "
                "their source columns, or switch the rules off (rules=False, --no-rules)"
            )
        named = [c for c in (response, *weights) if c in ids]
        if named:
            raise ValueError(
                f"relevance[{response!r}]: {named} are identifiers: they get fresh "
                "surrogate values and are not modelled, so weights for them do nothing; "
                "leave them out"
            )
        before = order[: order.index(response)]
        wrong = [c for c in weights if c not in before]
        if wrong:
            raise ValueError(
                f"relevance[{response!r}]: {wrong} are not columns before {response!r} in "
                f"the chain (its covariates: {', '.join(before)}); change the chain order "
                "or leave them out"
            )


def _column_of(name: str) -> str:
    """The column an engine column stands for: ``"x (at point mass)"`` and
    ``"x (missing)"`` (:func:`fits.core.schema.point_mass_flag`, ``missing_flag``) are
    ``x``'s indicators; any other name is its own column."""
    for suffix in (" (at point mass)", " (missing)"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


@dataclass(frozen=True)
class GaussianKernel(Kernel):
    """Fixed-bandwidth scheme with the Gaussian product kernel (eq. 11).

    Parameters
    ----------
    bandwidth : float, optional
        w_x on the standardized scale; default ``M ** (-1 / (d + 4))`` with M the total
        number of rows in the federation and d the number of conditioning columns.
    """

    bandwidth: float | None = None

    name = "gaussian"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.bandwidth is not None and not self.bandwidth > 0:
            raise ValueError("bandwidth must be > 0")

    def bandwidth_for(self, n_total: int, d: int) -> float:
        """w_x for d conditioning columns in a federation of n_total rows."""
        if self.bandwidth is not None:
            return float(self.bandwidth)
        return float(n_total) ** (-1.0 / (d + 4))


@dataclass(frozen=True)
class KNNKernel(Kernel):
    """KNN scheme with the product Epanechnikov kernel (eqs. 12-13).

    Parameters
    ----------
    budget : int or mapping, optional
        The global budget r0, or a mapping d -> r0 (key 0 for "any other d").  Default
        350 / 250 / 200 for d = 1 / 2 / more (sec. 6.1.2).
    min_neighbors : int
        c0 in eq. 12, at least 2.  Default 2.
    eta : float
        Kernel-scale factor eta in eq. 13; default 1.05.
    search_eps : float
        0 (default) finds the exact c_k nearest neighbours, as the paper does.  A
        positive value lets the KD-tree return neighbours whose distances are within a
        factor ``1 + search_eps`` of the true ones (faster in many dimensions; the
        weights are still a valid bounded kernel, and the federated estimate still
        equals the pooled one with those weights).
    search : {"auto", "kdtree", "brute"}
        How the exact neighbours are found: a KD-tree (scipy's ``cKDTree``), or a
        brute-force scan (scikit-learn's chunked pairwise reduction, which uses matrix
        products and both cores).  ``"auto"`` (default) takes the tree below
        :data:`BRUTE_FORCE_MIN_DIM` conditioning columns and the scan from there on,
        where a KD-tree degrades towards a scan anyway; with ``search_eps > 0`` it
        always takes the tree.  Both give the same neighbours (up to exact ties).
    n_jobs : int
        Threads for the KD-tree search (scipy's ``workers``); -1 (default) uses every
        core.  The scan uses scikit-learn's thread pool (``threadpoolctl`` limits it).
    """

    budget: int | Mapping[int, int] | None = None
    min_neighbors: int = 2
    eta: float = 1.05
    search_eps: float = 0.0
    search: str = "auto"
    n_jobs: int = -1

    name = "knn"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_neighbors < 2:
            raise ValueError("min_neighbors (c0) must be at least 2")
        if not self.eta > 0:
            raise ValueError("eta must be > 0")
        if not self.search_eps >= 0:
            raise ValueError("search_eps must be >= 0")
        if self.search not in NEIGHBOUR_SEARCH:
            raise ValueError(f"search must be one of {NEIGHBOUR_SEARCH}, got {self.search!r}")
        if self.n_jobs == 0 or self.n_jobs < -1:
            raise ValueError("n_jobs must be a positive number of threads or -1 (all cores)")
        if self.search == "brute" and self.search_eps > 0:
            raise ValueError("search_eps (approximate neighbours) needs search='kdtree'")

    def search_method(self, d: int) -> str:
        """``"kdtree"`` or ``"brute"``: how neighbours are found with d covariates."""
        if self.search != "auto":
            return self.search
        if self.search_eps > 0 or d < BRUTE_FORCE_MIN_DIM:
            return "kdtree"
        return "brute"

    def budget_for(self, d: int) -> int:
        """The global budget r0 for d conditioning columns."""
        b = self.budget
        if b is None:
            b = DEFAULT_KNN_BUDGET
        if isinstance(b, Mapping):
            return int(b.get(d, b.get(0, 200)))
        return int(b)

    def neighbors(self, m_k: int, n_total: int, d: int) -> int:
        """c_k of eq. 12 for a client with m_k of n_total rows."""
        return knn_budget(m_k, n_total, self.budget_for(d), self.min_neighbors)


def knn_budget(m_k: int, n_total: int, r0: int, c0: int = 2) -> int:
    """Local KNN budget, eq. 12: ``c_k = max(c0, min(round(m_k r0 / M), m_k))``.

    ``round`` is round-half-up (the paper's nearest-integer bracket).
    """
    share = int(np.floor(m_k * r0 / n_total + 0.5))
    return max(int(c0), min(share, int(m_k)))


def resolve_kernel(kernel: str | Kernel) -> Kernel:
    """Turn ``"knn"`` / ``"gaussian"`` (or a :class:`Kernel`) into a kernel object."""
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, str):
        key = kernel.lower()
        if key in ("knn", "k", "fits-k", "epanechnikov"):
            return KNNKernel()
        if key in ("gaussian", "g", "fits-g", "fixed"):
            return GaussianKernel()
    raise ValueError(
        f"unknown kernel {kernel!r}: use 'knn', 'gaussian', or a KNNKernel / GaussianKernel"
    )


def response_cdf_kernel(t: np.ndarray) -> np.ndarray:
    """The CDF kernel K of eq. 3: the standard normal CDF."""
    return ndtr(t)


def epanechnikov_product(u: np.ndarray, *, overwrite_input: bool = False) -> np.ndarray:
    """Product Epanechnikov kernel without its constant: ``prod_j (1 - u_j^2)_+``.

    ``u`` has the coordinates on its last axis; with ``overwrite_input`` it is used as
    scratch space (saves memory traffic on large neighbour batches).
    """
    t = u if overwrite_input else u.copy()
    np.square(t, out=t)
    np.subtract(1.0, t, out=t)
    np.maximum(t, 0.0, out=t)
    return t.prod(axis=-1)
