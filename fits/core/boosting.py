"""Federated histogram gradient boosting for one chain column (issue 12).

Not the paper's method.  FITS estimates every conditional of the chain with a kernel
(Algorithm 1).  For a column whose conditional depends on many covariates in ways a
kernel smooths away (Adult's ``income`` given 14 columns: benchmarks.md, "Where Adult's
boosting gap is"; Bike's ``cnt``, whose rush-hour peaks flip with the working day),
fits can instead fit a gradient-boosted tree model of the column given the chain
columns before it, and draw the column from the model's class probabilities
(``Coordinator(column_models={column: "boosting"})``).  A continuous column is cut
into ``classes`` quantile classes of its federated marginal; the model gives
P(class <= c) for each, and a value is drawn within its class by the marginal's own
shape there (:func:`values_from_classes`).

The model is the second-order histogram boosting of XGBoost and LightGBM (Chen and
Guestrin 2016, eqs. 5-7; scikit-learn's ``HistGradientBoostingClassifier``), grown
level by level so that one round of messages serves every node of a level:

* **Bins.**  Every covariate is cut into bins that every party computes alike
  (:func:`bin_codes`): a discrete covariate has one bin per category (its
  continualization intervals, so a lifted value falls into its own category's bin); a
  continuous one has at most ``bins`` bins between quantiles of its federated marginal
  CDF (the coordinator's, eq. 16: no extra round).
* **Loss.**  A discrete column with L classes: the multinomial deviance with raw scores
  F (L,) and p = softmax(F); two classes: the binomial deviance with one raw score,
  p = sigmoid(F).  Per row and class, g = p_k - 1{y = k} and h = max(p_k (1 - p_k),
  1e-16) (the diagonal of the Hessian, as scikit-learn and XGBoost use).  A continuous
  column's L ordered classes (a choice: softmax over many ordered classes learns a
  shift of the response slowly, measured on Bike): L - 1 cumulative logits F_c with
  the sum of the binomial deviances of 1{y <= c}, g_c = sigmoid(F_c) - 1{y <= c}; the
  CDF values sigmoid(F_c) are made monotone by sorting (rearrangement) before they are
  differenced into class probabilities.
* **Histograms.**  For the nodes of one level of the tree being grown, a site sums g, h
  and 1 over its rows per (node, bin) (:func:`histograms`); only the sum over the sites
  is used (with secure aggregation, only it is seen).
* **Splits.**  Per node and covariate the coordinator scans the bins in order (ordered
  covariates) or sorted by G / (H + lambda) (nominal ones; Fisher 1958: for one score
  this finds the best two-group partition) and takes the split of largest gain
  ``sum_k G_Lk^2 / (H_Lk + l2) + G_Rk^2 / (H_Rk + l2) - G_k^2 / (H_k + l2)`` with at
  least ``min_leaf_rows`` rows on each side (:func:`best_splits`); with L > 2 classes one
  tree per round holds a value per class (a multi-output tree: the gain sums over the
  classes, and nominal bins are sorted by the class with the largest |G|).  A node with
  no positive gain does not split (all its rows go left).
* **Leaves.**  ``-learning_rate G_k / (H_k + l2)`` per class (the Newton step).
* **Start.**  F_0 = the log of the pooled class shares (log-odds for two classes; the
  logits of the pooled shares at or below each class for a continuous column), from the
  gradient sums of a first round at F = 0.
* **Early stopping** (optional, ``validation_fraction > 0``; :class:`TreeGrower`).  Each
  site holds out a share of its rows; the pooled log loss on them after every tree
  decides when to stop, and the model keeps the trees of the lowest loss.

**What a site reveals** (docs/privacy.md, "Boosted columns"): per round, for each node of
the level and each bin of each covariate, the sums of g and h per class and the row
count over its rows in that node and bin.  With the model known to every party, the
sum of g is (sum of p) minus the count of each class: a per-node contingency table of
each covariate's bins against the column.  Under a site policy with k > 0 a site first
coarsens each (node, covariate) histogram so that every bin it reports holds 0 or at
least k of its rows (:func:`coarsen`), and reports nothing for a node holding fewer
than k of its rows; the model is then fitted to these slightly coarser sums.  With
early stopping, per tree, the sum of the model's log loss over its held-out rows and
their count (zeros when it holds fewer than k of them).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

__all__ = [
    "BoostingParams",
    "BoostedModel",
    "MAX_DEPTH",
    "MAX_OUTPUTS",
    "MAX_REPLY_VALUES",
    "MAX_TREES",
    "MAX_VALIDATION_FRACTION",
    "INTEGER_SETTINGS",
    "TEXT_SETTINGS",
    "location_scale_cdf",
    "thresholds_of",
    "ScoreCache",
    "TreeGrower",
    "best_splits",
    "bin_codes",
    "cdf_from_classes",
    "class_levels",
    "class_probabilities",
    "coarsen",
    "discrete_outputs",
    "gradients",
    "held_out",
    "held_out_count",
    "histograms",
    "leaf_values",
    "log_loss",
    "node_of",
    "quantile_edges",
    "raw_scores",
    "reply_values",
    "resolve_settings",
    "should_stop",
    "start_scores",
    "values_from_classes",
]

#: The deepest tree and the most trees a site grows histograms for.
MAX_DEPTH = 8
MAX_TREES = 2000
#: Most classes of a boosted column (a nominal column with more is refused).
MAX_OUTPUTS = 256
#: Most values of one site's reply to one boost round (about 128 MB at float64).
MAX_REPLY_VALUES = 2**24
#: A class probability's Hessian is kept at least this (a pure node's p(1-p) is 0).
_H_MIN = 1e-16


#: The settings that count things (integers; the others are real numbers).
INTEGER_SETTINGS = frozenset(
    {"n_trees", "depth", "min_leaf_rows", "bins", "classes", "n_iter_no_change"}
)
#: The settings that name a choice, and their values (the first is the default).
TEXT_SETTINGS: dict[str, tuple[str, ...]] = {"continuous": ("cumulative", "location-scale")}
#: A location-scale model's log-scale s is used within +-MAX_LOG_SCALE, and its
#: standardized thresholds (theta - f) e^-s within +-MAX_Z (sigmoid(35) = 1 - 6e-16), so
#: that no probability or gradient overflows; neither bound is reached on real data.
MAX_LOG_SCALE = 8.0
MAX_Z = 35.0
#: The largest share of a site's rows that early stopping may hold out.
MAX_VALIDATION_FRACTION = 0.5


@dataclass(frozen=True)
class BoostingParams:
    """Settings of the boosted column model.

    Parameters
    ----------
    n_trees : int
        Boosting rounds (trees); each costs ``depth`` message rounds.
    depth : int
        Levels per tree (2^depth leaves at most).
    learning_rate : float
        Shrinkage of every leaf value.
    l2 : float
        L2 penalty lambda on the leaf values (XGBoost's lambda).
    min_leaf_rows : int
        Fewest pooled rows on each side of a split.
    bins : int
        Most bins per continuous covariate.
    classes : int
        Most classes of a boosted continuous column (its quantile classes).
    validation_fraction : float
        Early stopping (0, the default: off; :meth:`TreeGrower.absorb`).  The share of
        each site's rows held out of the histograms, on which the site sums the model's
        deviance after every tree; ``n_trees`` is then the most trees.
    n_iter_no_change : int
        Early stopping: the fit stops once the pooled held-out deviance per row of the
        last ``n_iter_no_change`` trees is nowhere below that of the tree before them
        by more than ``tol``, and keeps the trees of the lowest deviance.
    tol : float
        Early stopping: the least decrease of the held-out deviance per row that counts.
    continuous : {"cumulative", "location-scale"}
        The model of a boosted continuous column's ``classes`` quantile classes:
        ``"cumulative"`` (the default), one cumulative logit per class boundary (L - 1
        raw scores, each bin of a site's reply carrying 2 (L - 1) + 1 sums); or
        ``"location-scale"``, two raw scores, a location f and a log-scale s, with
        P(class <= c) = sigmoid((theta_c - f) e^-s) and theta_c the logits of the
        column's federated marginal at the class edges (5 sums per bin: about 25x
        fewer bytes at 64 classes; :func:`location_scale_cdf`).  A discrete column
        ignores it.
    """

    n_trees: int = 100
    depth: int = 5
    learning_rate: float = 0.3
    l2: float = 1.0
    min_leaf_rows: int = 20
    bins: int = 128
    classes: int = 64
    validation_fraction: float = 0.0
    n_iter_no_change: int = 10
    tol: float = 1e-7
    continuous: str = "cumulative"

    @property
    def early_stopping(self) -> bool:
        """Whether a held-out share scores the trees (``validation_fraction > 0``)."""
        return self.validation_fraction > 0

    def __post_init__(self) -> None:
        for name, allowed_text in TEXT_SETTINGS.items():
            value = getattr(self, name)
            if not isinstance(value, str) or value not in allowed_text:
                raise ValueError(
                    f"boosting {name} must be one of {', '.join(map(repr, allowed_text))}, "
                    f"got {value!r}"
                )
        for field in dataclasses.fields(self):
            if field.name in TEXT_SETTINGS:
                continue
            value = getattr(self, field.name)
            integral = field.name in INTEGER_SETTINGS
            allowed = (int, np.integer) if integral else (int, np.integer, float, np.floating)
            number = isinstance(value, allowed)
            if isinstance(value, bool | np.bool_) or not number:
                kind = "an integer" if integral else "a real number"
                raise ValueError(
                    f"boosting {field.name} must be {kind}, got {value!r} ({type(value).__name__})"
                )
            if not integral and not np.isfinite(value):
                raise ValueError(f"boosting {field.name} must be finite, got {value!r}")
            # plain Python numbers, so the settings serialize and compare as given
            object.__setattr__(self, field.name, int(value) if integral else float(value))
        checks = (
            ("n_trees", 1 <= self.n_trees <= MAX_TREES, f"in 1..{MAX_TREES}"),
            ("depth", 1 <= self.depth <= MAX_DEPTH, f"in 1..{MAX_DEPTH}"),
            ("learning_rate", 0 < self.learning_rate <= 1, "in (0, 1]"),
            ("l2", self.l2 >= 0, ">= 0"),
            ("min_leaf_rows", self.min_leaf_rows >= 1, ">= 1"),
            ("bins", 2 <= self.bins <= 1024, "in 2..1024"),
            ("classes", 2 <= self.classes <= 256, "in 2..256"),
            (
                "validation_fraction",
                0 <= self.validation_fraction <= MAX_VALIDATION_FRACTION,
                f"in [0, {MAX_VALIDATION_FRACTION}] (0: no early stopping)",
            ),
            ("n_iter_no_change", 1 <= self.n_iter_no_change <= MAX_TREES, f"in 1..{MAX_TREES}"),
            ("tol", self.tol >= 0, ">= 0"),
        )
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"boosting {name} must be {rule}, got {getattr(self, name)!r}")


def resolve_settings(
    settings: Mapping[str, Any] | BoostingParams | None,
) -> tuple[BoostingParams, dict[str, BoostingParams]]:
    """The boosted columns' settings: (every column's, per column overrides).

    ``settings`` is None (the defaults), a :class:`BoostingParams`, or a mapping whose
    keys are :class:`BoostingParams` fields with numbers as values (every boosted
    column's settings) and column names with a mapping of fields as value (that
    column's own settings; the fields it leaves out are every column's).  A value's
    type tells the two apart, so a column may be named like a field.

    Raises
    ------
    TypeError
        ``settings`` or a column's value is not a mapping (or a BoostingParams).
    ValueError
        An unknown field, or a value out of range (the message names the column).
    """
    if settings is None:
        return BoostingParams(), {}
    if isinstance(settings, BoostingParams):
        return settings, {}
    if not isinstance(settings, Mapping):
        raise TypeError(
            "boosting must be a mapping of BoostingParams fields or a BoostingParams, "
            f"got {type(settings).__name__}"
        )
    known = {f.name for f in dataclasses.fields(BoostingParams)}
    common = {k: v for k, v in settings.items() if not isinstance(v, Mapping | BoostingParams)}
    columns = {k: v for k, v in settings.items() if k not in common}
    unknown = sorted(set(common) - known)
    if unknown:
        raise ValueError(
            f"boosting: unknown setting(s) {unknown}; the settings are {sorted(known)} "
            "(a column's own settings: a mapping of them under its name)"
        )
    base = BoostingParams(**common)
    own: dict[str, BoostingParams] = {}
    for column, value in columns.items():
        if isinstance(value, BoostingParams):
            own[str(column)] = value
            continue
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(
                f"boosting[{column!r}]: unknown setting(s) {unknown}; the settings are "
                f"{sorted(known)}"
            )
        try:
            own[str(column)] = dataclasses.replace(base, **value)
        except ValueError as exc:
            raise ValueError(f"boosting[{column!r}]: {exc}") from None
    return base, own


def discrete_outputs(levels: int) -> int:
    """Outputs of a discrete column's model: one logit for two classes, else one score
    per class (softmax)."""
    return 1 if levels == 2 else levels


def reply_values(level: int, bins: int, outputs: int) -> int:
    """Values in one site's reply to a boost round of ``level``: per node (2^level) and
    covariate bin (``bins`` in all), the gradient and Hessian sums of every output and
    the row count."""
    return 2**level * bins * (2 * outputs + 1)


def quantile_edges(grid: np.ndarray, cdf: np.ndarray, bins: int) -> np.ndarray:
    """Interior bin edges at the quantiles 1/bins, ..., (bins-1)/bins of a CDF on a grid.

    The CDF is interpolated linearly between grid points; repeated edges (flat CDF,
    point masses) are dropped, so there may be fewer than ``bins`` bins.
    """
    grid = np.asarray(grid, dtype=float)
    cdf = np.maximum.accumulate(np.clip(np.asarray(cdf, dtype=float), 0.0, 1.0))
    levels = np.arange(1, bins) / bins
    keep = np.concatenate([[True], np.diff(cdf) > 0])  # strictly increasing for interp
    edges = np.interp(levels, cdf[keep], grid[keep])
    return np.unique(edges)


def bin_codes(x: np.ndarray, edges: list[np.ndarray]) -> np.ndarray:
    """Bin of every value: for covariate j, the number of ``edges[j]`` strictly below it.

    A discrete covariate's edges are its interior interval boundaries v_1..v_{L-1}
    (sec. 4.1), so the bin of a lifted value in (v_{l-1}, v_l] is its category l.
    """
    x = np.asarray(x, dtype=float)
    out = np.empty(x.shape, dtype=np.int64)
    for j, e in enumerate(edges):
        out[:, j] = np.searchsorted(e, x[:, j], side="left")
    return out


@dataclass
class BoostedModel:
    """A boosted tree model of one discrete column (complete trees in heap order).

    Attributes
    ----------
    init : ndarray (K,)
        The start scores F_0 (K = 1 for two classes, else the number of classes).
    feature : ndarray (T, 2^depth - 1) of int
        The covariate each internal node splits on (-1: no split, every row goes left).
    left : ndarray (T, 2^depth - 1, max_bins) of uint8
        1 where a bin of that covariate goes to the left child.
    value : ndarray (T, 2^depth, K)
        The leaf values (learning rate included).
    edges : list of ndarray
        Each covariate's interior bin edges (:func:`bin_codes`).
    response_edges : ndarray, optional
        A continuous column's class edges (:func:`quantile_edges` of its marginal):
        class c holds the values in (e_{c-1}, e_c], and the model's K = L - 1 scores
        are the cumulative logits of P(class <= c); None for a discrete column.
    thresholds : ndarray (L - 1,), optional
        A location-scale model of a continuous column (``continuous="location-scale"``):
        theta_c, and the K = 2 scores are (f, s) of :func:`location_scale_cdf`.
    """

    init: np.ndarray
    feature: np.ndarray
    left: np.ndarray
    value: np.ndarray
    edges: list[np.ndarray]
    response_edges: np.ndarray | None = None
    thresholds: np.ndarray | None = None

    @property
    def depth(self) -> int:
        return int(np.log2(self.value.shape[1]))

    @property
    def n_trees(self) -> int:
        return int(self.value.shape[0])

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities (n, L) at covariate rows ``x`` (n, d), on the
        continualized scale."""
        f = raw_scores(self, bin_codes(x, self.edges))
        if self.thresholds is not None:
            return np.diff(_padded(location_scale_cdf(f, self.thresholds)), axis=1)
        return class_probabilities(f, cumulative=self.response_edges is not None)


def node_of(codes: np.ndarray, feature: np.ndarray, left: np.ndarray, levels: int) -> np.ndarray:
    """Heap index (within its level) of every row after ``levels`` levels of one tree."""
    n = codes.shape[0]
    node = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    for level in range(levels):
        heap = node + (1 << level) - 1
        f = feature[heap]
        go_left = np.ones(n, dtype=bool)
        split = f >= 0
        if split.any():
            fs = f[split]
            go_left[split] = left[heap[split], codes[rows[split], fs]] > 0
        node = 2 * node + (~go_left).astype(np.int64)
    return node


def raw_scores(model: BoostedModel, codes: np.ndarray) -> np.ndarray:
    """F (n, K): the start scores plus every tree's leaf value."""
    f = np.tile(model.init, (codes.shape[0], 1))
    for t in range(model.n_trees):
        leaf = node_of(codes, model.feature[t], model.left[t], model.depth)
        f += model.value[t, leaf]
    return f


class ScoreCache:
    """A site's memo of the bin codes and raw scores of the model it last scored, per
    column: a boost request carries the whole model, and the next request's model is
    the last one plus at most one tree, so a site scores only the new trees.

    A memo, not state: :meth:`scores` returns exactly what :func:`bin_codes` and
    :func:`raw_scores` return (the same additions in the same order, so the same bits),
    whatever the cache holds.  An entry is reused only when the request has the same
    bins, the same start scores and the cached trees as its first trees; entries beyond
    ``max_bytes`` are dropped, least recently used first (a site then scores the whole
    model again).
    """

    def __init__(self, max_bytes: int = 256 * 2**20) -> None:
        self.max_bytes = int(max_bytes)
        self._entries: OrderedDict[Hashable, tuple] = OrderedDict()
        self._lock = threading.Lock()

    def scores(
        self, key: Hashable, model: BoostedModel, rows: Callable[[], np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(codes, F): the bin codes of the rows ``rows()`` (n, d) and the model's raw
        scores (n, K) there; ``key`` names the rows (the same key, the same rows)."""
        bins = _signature([*model.edges, model.init])
        with self._lock:
            entry = self._entries.pop(key, None)
        start, hit = 0, False
        if entry is not None and entry[0] == bins and entry[1].shape[0] <= model.n_trees:
            _, feature, left, value, codes, f = entry
            t = feature.shape[0]
            hit = (
                np.array_equal(feature, model.feature[:t])
                and np.array_equal(left, model.left[:t])
                and np.array_equal(value, model.value[:t])
            )
            if hit:
                start, f = t, f.copy()
        if not hit:
            codes = bin_codes(rows(), model.edges)
            f = np.tile(model.init, (codes.shape[0], 1))
        for t in range(start, model.n_trees):  # as raw_scores, from tree `start` on
            f += model.value[t, node_of(codes, model.feature[t], model.left[t], model.depth)]
        kept = (bins, model.feature.copy(), model.left.copy(), model.value.copy(), codes, f)
        size = sum(a.nbytes for a in kept[1:])
        if size <= self.max_bytes:
            with self._lock:
                self._entries[key] = kept
                while sum(sum(a.nbytes for a in e[1:]) for e in self._entries.values()) > (
                    self.max_bytes
                ):
                    self._entries.popitem(last=False)
        return codes, f.copy()


def _signature(arrays: list[np.ndarray]) -> bytes:
    """The exact contents of some float arrays (sizes and bytes), for comparison."""
    parts = [np.array([a.size for a in arrays], dtype=np.int64).tobytes()]
    parts += [np.ascontiguousarray(a, dtype=float).tobytes() for a in arrays]
    return b"".join(parts)


def class_probabilities(f: np.ndarray, cumulative: bool = False) -> np.ndarray:
    """Class probabilities (n, L) from raw scores (n, K): sigmoid for K = 1, else softmax;
    ``cumulative``: F_c = sigmoid(f_c) = P(class <= c), c = 0..L-2, made monotone by
    sorting (the rearrangement of Chernozhukov, Fernandez-Val and Galichon 2010), and
    the class probabilities are their differences."""
    if cumulative:
        cdf = np.sort(1.0 / (1.0 + np.exp(-f)), axis=1)
        ends = np.ones((f.shape[0], 1))
        return np.diff(np.concatenate([0.0 * ends, cdf, ends], axis=1), axis=1)
    if f.shape[1] == 1:
        p1 = 1.0 / (1.0 + np.exp(-f[:, 0]))
        return np.column_stack([1.0 - p1, p1])
    z = f - f.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def thresholds_of(levels: np.ndarray) -> np.ndarray:
    """A location-scale model's thresholds theta_c = logit(F(e_c)) from the marginal
    CDF's levels 0 = F_0 <= F(e_1) <= ... <= F_L = 1 at the class edges (the interior
    ones are used, kept within [1e-9, 1 - 1e-9] so that every theta is finite)."""
    inner = np.clip(np.asarray(levels, dtype=float)[1:-1], 1e-9, 1.0 - 1e-9)
    return np.log(inner) - np.log1p(-inner)


def _standardized(f: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """z (n, L - 1) = (theta_c - f) e^-s and e^-s (n, 1), within the module's bounds."""
    scale = np.exp(-np.clip(f[:, 1:2], -MAX_LOG_SCALE, MAX_LOG_SCALE))
    z = np.clip((thresholds[None, :] - f[:, :1]) * scale, -MAX_Z, MAX_Z)
    return z, scale


def _padded(inner: np.ndarray, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """``inner`` (n, L - 1) with a column of ``low`` before and of ``high`` after."""
    n = inner.shape[0]
    return np.concatenate([np.full((n, 1), low), inner, np.full((n, 1), high)], axis=1)


def location_scale_cdf(f: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """P(class <= c) (n, L - 1) of a location-scale model at raw scores f (n, 2).

    With f = (location, log-scale s) per row: sigmoid((theta_c - location) e^-s), the
    cumulative logit model of McCullagh (1980, sec. 5: location and scale) on the
    column's quantile classes, increasing in c by construction (theta increases).  At
    f = (0, 0) it is the marginal's own class CDF.  Not in the paper; a stated choice
    that replaces the L - 1 free cumulative logits by two scores (docs/benchmarks.md)."""
    z, _ = _standardized(f, thresholds)
    return 1.0 / (1.0 + np.exp(-z))


def _location_scale_parts(
    f: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row and class (n, L): P_c and its derivatives in the location and the
    log-scale, dP_c/df = -e^-s (phi(z_c) - phi(z_{c-1})) and dP_c/ds = -(z_c phi(z_c) -
    z_{c-1} phi(z_{c-1})), with phi = sigmoid (1 - sigmoid) and phi, z phi = 0 at
    z = -+inf.  P_c is the difference of the upper tails where both z are positive, so
    that no probability is lost to cancellation."""
    z, scale = _standardized(f, thresholds)
    sig = 1.0 / (1.0 + np.exp(-z))
    tail = 1.0 / (1.0 + np.exp(z))  # 1 - sigmoid, exactly where sigmoid is near 1
    phi = sig * tail
    lower, upper = _padded(sig), _padded(tail, 1.0, 0.0)
    prob = np.where(
        _padded(z, -np.inf, np.inf)[:, :-1] > 0, upper[:, :-1] - upper[:, 1:], np.diff(lower)
    )
    d_f = -scale * np.diff(_padded(phi, 0.0, 0.0), axis=1)
    d_s = -np.diff(_padded(z * phi, 0.0, 0.0), axis=1)
    return np.maximum(prob, 0.0), d_f, d_s


def gradients(
    f: np.ndarray,
    y: np.ndarray,
    cumulative: bool = False,
    thresholds: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """g, h (n, K) of the deviance at raw scores f for class codes y (module docstring);
    ``cumulative``: the sum over c of the binomial deviances of 1{y <= c}.

    ``thresholds`` (a location-scale model, K = 2): g = -d log P_y / d(f, s), and h
    the Fisher information's diagonal, sum_c (dP_c)^2 / P_c (Fisher scoring: the
    expected Hessian, positive where the observed one need not be in s; a stated
    choice), at least 1e-16."""
    if thresholds is not None:
        prob, d_f, d_s = _location_scale_parts(f, thresholds)
        rows = np.arange(y.size)
        p_y = np.maximum(prob[rows, y], 1e-300)
        g = -np.column_stack([d_f[rows, y], d_s[rows, y]]) / p_y[:, None]
        safe = np.maximum(prob, 1e-300)
        h = np.column_stack([(d_f**2 / safe).sum(axis=1), (d_s**2 / safe).sum(axis=1)])
        return g, np.maximum(h, _H_MIN)
    if cumulative:
        p = 1.0 / (1.0 + np.exp(-f))
        below = (y[:, None] <= np.arange(f.shape[1])[None, :]).astype(float)
        return p - below, np.maximum(p * (1.0 - p), _H_MIN)
    p = class_probabilities(f)
    if f.shape[1] == 1:
        p = p[:, 1:]
        onehot = (y == 1).astype(float)[:, None]
    else:
        onehot = np.zeros_like(p)
        onehot[np.arange(y.size), y] = 1.0
    return p - onehot, np.maximum(p * (1.0 - p), _H_MIN)


def log_loss(
    f: np.ndarray,
    y: np.ndarray,
    cumulative: bool = False,
    thresholds: np.ndarray | None = None,
) -> np.ndarray:
    """Per row, the loss whose gradients :func:`gradients` gives (half the deviance):
    log(sum_k e^{f_k}) - f_y (softmax), the binomial log loss (one score), or the sum
    over c of the binomial log losses of 1{y <= c} (``cumulative``); computed as
    log(1 + e^{-s f}) with s = +-1, which neither overflows nor loses small values.
    ``thresholds`` (location-scale): -log P_y (P_y at least 1e-300)."""
    if thresholds is not None:
        prob, _, _ = _location_scale_parts(f, thresholds)
        return -np.log(np.maximum(prob[np.arange(y.size), y], 1e-300))
    if cumulative or f.shape[1] == 1:
        positive = y[:, None] <= np.arange(f.shape[1])[None, :] if cumulative else (y == 1)[:, None]
        return np.logaddexp(0.0, np.where(positive, -f, f)).sum(axis=1)
    top = f.max(axis=1)
    lse = top + np.log(np.exp(f - top[:, None]).sum(axis=1))
    return lse - f[np.arange(y.size), y]


def held_out_count(n_rows: int, fraction: float) -> int:
    """How many of a site's ``n_rows`` rows early stopping holds out:
    ``round(fraction * n_rows)``, half up."""
    return int(np.floor(fraction * n_rows + 0.5))


def held_out(n_rows: int, fraction: float, seed: Any) -> np.ndarray:
    """Which of a site's ``n_rows`` rows early stopping holds out (bool, n_rows):
    :func:`held_out_count` rows of a permutation drawn from
    ``numpy.random.default_rng(seed)``; the site's seed makes the rows its own and the
    same in every round of a fit."""
    m = held_out_count(n_rows, fraction)
    mask = np.zeros(n_rows, dtype=bool)
    mask[np.random.default_rng(seed).permutation(n_rows)[:m]] = True
    return mask


def should_stop(losses: list[float], n_iter_no_change: int, tol: float) -> bool:
    """Whether none of the last ``n_iter_no_change`` held-out losses is below the one
    before them by more than ``tol`` (scikit-learn's rule for its
    ``HistGradientBoosting`` estimators, on a loss instead of a score)."""
    if len(losses) <= n_iter_no_change:
        return False
    reference = losses[-n_iter_no_change - 1]
    return min(losses[-n_iter_no_change:]) >= reference - tol


def start_scores(
    root: np.ndarray, cumulative: bool = False, location_scale: bool = False
) -> np.ndarray:
    """F_0 (K,) from the root's histogram over one covariate's bins at F = 0.

    ``location_scale``: one Newton step from (0, 0), -G / H per score (its thresholds
    already put the marginal's class shares at (0, 0); the step corrects them for the
    rows the histograms hold).

    At F = 0 every p is 1/2 (one score or cumulative logits) or 1/K (softmax), so the
    summed gradients give the class counts: n_1 = n/2 - G (two classes), n_k = n/K -
    G_k (softmax), the rows at or below class c = n/2 - G_c (cumulative).  F_0 is the
    log-odds, the log shares or the logits of those shares; a class with no row counts
    as half a row, so every score is finite.
    """
    k = (root.shape[-1] - 1) // 2
    n = float(root[:, -1].sum())
    g = root[:, :k].sum(axis=0)
    if location_scale:
        h = root[:, k : 2 * k].sum(axis=0)
        return np.where(h > 0, -g / np.where(h > 0, h, 1.0), 0.0)
    if cumulative:
        below = np.clip(0.5 * n - g, 0.5, max(n - 0.5, 0.5))
        return np.log(below / np.maximum(n - below, 0.5))
    counts = np.array([0.5 * n + g[0], 0.5 * n - g[0]]) if k == 1 else n / k - g
    share = np.maximum(counts, 0.5) / max(n, 1.0)
    return np.log(share[1:] / share[:1]) if k == 1 else np.log(share)


def histograms(
    codes: np.ndarray,
    node: np.ndarray,
    n_nodes: int,
    n_bins: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
) -> np.ndarray:
    """Per (node, bin): the sums of g and h per class and the row count.

    Returns
    -------
    ndarray (n_nodes, sum(n_bins), 2K + 1)
        Covariate j's bins are the columns ``offsets[j] : offsets[j] + n_bins[j]``;
        the last axis holds G_1..G_K, H_1..H_K, count.
    """
    n, d = codes.shape
    k = g.shape[1]
    width = int(np.sum(n_bins))
    offsets = np.concatenate([[0], np.cumsum(n_bins)[:-1]]).astype(np.int64)
    flat = (node[:, None] * width + offsets[None, :] + codes).ravel()
    size = n_nodes * width
    stats = np.concatenate([g, h, np.ones((n, 1))], axis=1)  # (n, 2K + 1)
    # one sparse (cell x row) incidence matrix: every row counts once per covariate
    cells = sparse.csr_matrix(
        (np.ones(flat.size), (flat, np.repeat(np.arange(n), d))), shape=(size, n)
    )
    return np.asarray(cells @ stats).reshape(n_nodes, width, 2 * k + 1)


def coarsen(hist: np.ndarray, n_bins: np.ndarray, k: float) -> tuple[np.ndarray, np.ndarray]:
    """A site's histograms with every reported bin holding 0 or at least k rows.

    Per (node, covariate), the bins are grouped in order: a group closes once it holds
    at least k rows, and a last group short of k joins the one before.  A group's sums
    are reported in its bin with the most rows (the first such), the other bins of the
    group as 0.  A node holding fewer than k rows is reported as all zeros.

    Returns
    -------
    (ndarray, ndarray of int)
        The coarsened histograms and the nodes holding rows that were reported as zeros.
    """
    if k <= 0:
        return hist, np.zeros(0, dtype=np.int64)
    v_nodes, width, n_stats = hist.shape
    d, top = len(n_bins), int(np.max(n_bins))
    offsets = np.concatenate([[0], np.cumsum(n_bins)[:-1]]).astype(np.int64)
    # the counts, padded to (V * d rows of `top` bins); position of each real bin
    cols = np.concatenate([np.arange(int(n)) for n in n_bins])
    owner = np.repeat(np.arange(d), n_bins)
    padded = np.zeros((v_nodes, d, top))
    padded[:, owner, cols] = hist[..., -1]
    c = padded.reshape(v_nodes * d, top)
    by_bin = np.ascontiguousarray(c.T)  # (top, rows): one contiguous row per bin position
    group = np.empty(by_bin.shape, dtype=np.int64)
    gid = np.zeros(c.shape[0], dtype=np.int64)
    held = np.zeros(c.shape[0])
    closed = np.empty(c.shape[0], dtype=bool)
    for col in range(top):  # a group closes once it holds k rows
        group[col] = gid
        held += by_bin[col]
        np.greater_equal(held, k, out=closed)
        gid += closed
        held[closed] = 0.0
    group = group.T
    short = (held > 0)[:, None] & (gid[:, None] > 0) & (group == gid[:, None])
    group = np.where(short, group - 1, group)  # a last group short of k joins the one before
    # each group's sums go to its bin with the most rows (the first such); group ids do
    # not decrease along a row, so each (row, group) is one run of the flattened array
    counts = c.ravel()
    key = (np.arange(c.shape[0])[:, None] * (top + 1) + group).ravel()
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    runs = np.diff(np.append(starts, key.size))
    most = np.repeat(np.maximum.reduceat(counts, starts), runs)
    pos = np.tile(np.arange(top), c.shape[0])
    first = np.minimum.reduceat(np.where(counts == most, pos, top), starts)
    target = np.repeat(first, runs)
    # back to real bins: (node v, covariate j, bin b) -> node v, column offsets[j] + target
    dest = target.reshape(v_nodes, d, top)[:, owner, cols] + offsets[owner][None, :]
    dest = (dest + width * np.arange(v_nodes)[:, None]).ravel()
    move = sparse.csr_matrix(
        (np.ones(dest.size), (dest, np.arange(dest.size))), shape=(dest.size, dest.size)
    )
    out = np.asarray(move @ hist.reshape(-1, n_stats)).reshape(hist.shape)
    totals = hist[:, offsets[0] : offsets[0] + int(n_bins[0]), -1].sum(axis=1)
    low = totals < k
    out[low] = 0.0
    return out, np.flatnonzero(low & (totals > 0)).astype(np.int64)


def _split_gain(gl: np.ndarray, hl: np.ndarray, g: np.ndarray, h: np.ndarray, l2: float):
    """sum_k G_L^2/(H_L+l2) + G_R^2/(H_R+l2) - G^2/(H+l2); the class axis is the last."""
    gr, hr = g - gl, h - hl
    return (gl**2 / (hl + l2) + gr**2 / (hr + l2) - g**2 / (h + l2)).sum(axis=-1)


def best_splits(
    hist: np.ndarray,
    n_bins: np.ndarray,
    nominal: np.ndarray,
    params: BoostingParams,
    max_bins: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The best split of every node of a level from the pooled histograms.

    Parameters
    ----------
    hist : ndarray (V, sum(n_bins), 2K + 1)
        Pooled histograms (:func:`histograms`).
    n_bins : ndarray (d,)
        Bins per covariate.
    nominal : ndarray (d,) of bool
        Covariates whose bins have no order (scanned sorted by G / (H + l2)).
    params : BoostingParams
    max_bins : int
        The width of the returned masks.

    Returns
    -------
    (feature (V,), left (V, max_bins) uint8)
        Per node, the covariate to split on (-1: none) and the bins going left.  Bins of
        a nominal covariate that hold no row in the node go with the larger child.
    """
    v_nodes = hist.shape[0]
    k = (hist.shape[2] - 1) // 2
    offsets = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    best_gain = np.zeros(v_nodes)
    feature = np.full(v_nodes, -1, dtype=np.int64)
    left = np.zeros((v_nodes, max_bins), dtype=np.uint8)
    l2, m = params.l2, params.min_leaf_rows
    for j in range(len(n_bins)):
        nb = int(n_bins[j])
        if nb < 2:
            continue
        block = hist[:, offsets[j] : offsets[j + 1]]  # (V, nb, 2K + 1)
        g, h, c = block[..., :k], block[..., k : 2 * k], block[..., -1]
        if nominal[j]:
            ratio_class = np.argmax(np.abs(g.sum(axis=1)), axis=1)  # (V,)
            gk = np.take_along_axis(g, ratio_class[:, None, None], axis=2)[..., 0]
            hk = np.take_along_axis(h, ratio_class[:, None, None], axis=2)[..., 0]
            key = np.where(c > 0, gk / (hk + l2 + 1e-300), np.inf)  # empty bins last
            order = np.argsort(key, axis=1, kind="stable")
        else:
            order = np.broadcast_to(np.arange(nb), (v_nodes, nb))
        go, ho = (np.take_along_axis(a, order[..., None], axis=1) for a in (g, h))
        co = np.take_along_axis(c, order, axis=1)
        gl, hl, cl = go.cumsum(axis=1)[:, :-1], ho.cumsum(axis=1)[:, :-1], co.cumsum(axis=1)[:, :-1]
        gt, ht, ct = g.sum(axis=1), h.sum(axis=1), c.sum(axis=1)
        gain = _split_gain(gl, hl, gt[:, None, :], ht[:, None, :], l2)  # (V, nb - 1)
        ok = (cl >= m) & (ct[:, None] - cl >= m)
        if nominal[j]:  # a cut among the empty bins at the end splits nothing new
            ok &= np.take_along_axis(c > 0, order, axis=1)[:, :-1]
        gain = np.where(ok, gain, -np.inf)
        at = np.argmax(gain, axis=1)
        top = gain[np.arange(v_nodes), at]
        better = top > best_gain + 1e-12 * np.abs(best_gain)
        for v in np.flatnonzero(better):
            best_gain[v] = top[v]
            feature[v] = j
            mask = np.zeros(max_bins, dtype=np.uint8)
            mask[order[v, : at[v] + 1]] = 1
            if nominal[j]:
                empty = np.flatnonzero(c[v] == 0)
                if empty.size and cl[v, at[v]] >= ct[v] - cl[v, at[v]]:
                    mask[empty] = 1  # the larger child takes the unseen categories
                else:
                    mask[empty] = 0
            left[v] = mask
    return feature, left


def leaf_values(
    hist: np.ndarray,
    n_bins: np.ndarray,
    feature: np.ndarray,
    left: np.ndarray,
    params: BoostingParams,
) -> np.ndarray:
    """Values (2V, K) of the children of the last level's V nodes (Newton steps).

    A child's G and H are summed from its parent's histogram over the bins of the
    parent's split covariate that go its way (covariate 0's bins for a node that does
    not split: every row goes left).  An empty child gets 0.
    """
    v_nodes = hist.shape[0]
    k = (hist.shape[2] - 1) // 2
    offsets = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    out = np.zeros((2 * v_nodes, k))
    for v in range(v_nodes):
        j = max(int(feature[v]), 0)
        block = hist[v, offsets[j] : offsets[j + 1]]
        mask = (left[v, : block.shape[0]] > 0) if feature[v] >= 0 else np.ones(block.shape[0], bool)
        for child, sel in ((2 * v, mask), (2 * v + 1, ~mask)):
            g = block[sel, :k].sum(axis=0)
            h = block[sel, k : 2 * k].sum(axis=0)
            if block[sel, -1].sum() > 0:
                out[child] = -params.learning_rate * g / (h + params.l2)
    return out


class TreeGrower:
    """The coordinator's side of fitting one boosted column, one ``boost`` round at a time.

    Rounds: one at F = 0 (the root's pooled histogram gives the start scores,
    :func:`start_scores`), then one per level of every tree (:func:`best_splits` at each
    level; :func:`leaf_values` after the last), ``1 + n_trees * depth`` in all.  The
    state is the model so far and the current tree's splits; :meth:`request` gives what
    the next round's message carries and :meth:`absorb` takes its pooled histograms.
    Columns do not depend on each other's models, so a coordinator may grow several in
    the same rounds.

    Early stopping (``params.validation_fraction > 0``; not in Chen and Guestrin, who
    fix the number of trees): the sites hold out a share of their rows
    (:func:`held_out`) and, with the histograms of each tree's first level, report the
    sum of :func:`log_loss` of the model so far over those rows and their count.  The
    pooled loss per row after t trees is ``losses[t]``; once :func:`should_stop` says
    so, the fit stops, the tree just begun is dropped, and the model keeps its first
    ``argmin(losses)`` trees (the lowest held-out loss, as XGBoost and LightGBM keep
    their best iteration; scikit-learn keeps them all).  The model with every tree
    is never scored: a fit that does not stop keeps ``n_trees`` trees.

    Parameters
    ----------
    edges : list of ndarray
        The covariates' interior bin edges (:func:`bin_codes`).
    nominal : ndarray of bool
        Which covariates are nominal (their bins are scanned sorted, :func:`best_splits`).
    outputs : int
        K, the raw scores per row (module docstring).
    params : BoostingParams
    response_edges : ndarray, optional
        A continuous column's class edges (cumulative logits); None for a discrete one.
    thresholds : ndarray, optional
        A location-scale model's theta (:func:`location_scale_cdf`; ``outputs`` is 2).
    """

    def __init__(
        self,
        edges: list[np.ndarray],
        nominal: np.ndarray,
        outputs: int,
        params: BoostingParams,
        response_edges: np.ndarray | None = None,
        thresholds: np.ndarray | None = None,
    ) -> None:
        self.params = params
        self.nominal = np.asarray(nominal, dtype=bool)
        self.n_bins = np.array([e.size + 1 for e in edges], dtype=np.int64)
        self.top = int(self.n_bins.max())
        self.inner = 2**params.depth - 1
        self.model = BoostedModel(
            np.zeros(outputs),
            np.zeros((0, self.inner), dtype=np.int64),
            np.zeros((0, self.inner, self.top), dtype=np.uint8),
            np.zeros((0, 2**params.depth, outputs)),
            edges,
            response_edges,
            thresholds,
        )
        self.started = False
        self.level = 0
        #: Early stopping: the pooled held-out loss per row after 0, 1, ... trees.
        self.losses: list[float] = []
        #: Whether early stopping ended the fit before ``n_trees`` trees.
        self.stopped = False
        self._new_tree()

    @property
    def rounds(self) -> int:
        """The rounds of a whole fit (the most, with early stopping): ``1 + n_trees * depth``."""
        return 1 + self.params.n_trees * self.params.depth

    @property
    def done(self) -> bool:
        return self.started and (self.stopped or self.model.n_trees == self.params.n_trees)

    def _new_tree(self) -> None:
        self.feature = np.full(self.inner, -1, dtype=np.int64)
        self.left = np.zeros((self.inner, self.top), dtype=np.uint8)

    def request(self) -> tuple[BoostedModel, np.ndarray, np.ndarray, int]:
        """(model so far, the current tree's feature and left masks, level) of the next
        round (the first round: the empty model at F = 0, level 0)."""
        if self.done:
            raise RuntimeError("the model is complete")
        return self.model, self.feature, self.left, self.level

    def absorb(self, hist: np.ndarray, held: np.ndarray | None = None) -> None:
        """Take the pooled histograms (2^level, sum(n_bins), 2K + 1) of the round
        :meth:`request` described, and with early stopping the pooled held-out
        ``(sum of log_loss, rows)`` of the model the request carried.

        Raises
        ------
        ValueError
            Early stopping, and a first level's round without held-out rows.
        """
        if not self.started:
            self.model.init = start_scores(
                hist[0, : self.n_bins[0]],
                cumulative=self.model.response_edges is not None,
                location_scale=self.model.thresholds is not None,
            )
            self.started = True
            return
        if self.level == 0 and self.params.early_stopping:
            if held is None or held[1] <= 0:
                raise ValueError(
                    "early stopping: no site reported a held-out loss (each holds too few "
                    "held-out rows for its policy's floor); raise validation_fraction, or "
                    "set it to 0"
                )
            self.losses.append(float(held[0] / held[1]))
            if should_stop(self.losses, self.params.n_iter_no_change, self.params.tol):
                best = int(np.argmin(self.losses))
                m = self.model
                m.feature, m.left, m.value = m.feature[:best], m.left[:best], m.value[:best]
                self.stopped = True
                return
        lo, hi = 2**self.level - 1, 2 ** (self.level + 1) - 1
        f, lm = best_splits(hist, self.n_bins, self.nominal, self.params, self.top)
        self.feature[lo:hi] = f
        self.left[lo:hi] = lm
        if self.level + 1 < self.params.depth:
            self.level += 1
            return
        values = leaf_values(hist, self.n_bins, f, lm, self.params)
        m = self.model
        m.feature = np.concatenate([m.feature, self.feature[None]])
        m.left = np.concatenate([m.left, self.left[None]])
        m.value = np.concatenate([m.value, values[None]])
        self.level = 0
        self._new_tree()


def class_levels(edges: np.ndarray, grid: np.ndarray, cdf: np.ndarray) -> np.ndarray:
    """The marginal CDF's levels 0 = F_0 <= F(e_1) <= ... <= F_K = 1 at the class edges."""
    inner = np.interp(edges, grid, np.maximum.accumulate(np.clip(cdf, 0.0, 1.0)))
    return np.concatenate([[0.0], inner, [1.0]])


def _inverse_marginal(levels: np.ndarray, grid: np.ndarray, cdf: np.ndarray) -> np.ndarray:
    cdf = np.maximum.accumulate(np.clip(np.asarray(cdf, dtype=float), 0.0, 1.0))
    keep = np.concatenate([[True], np.diff(cdf) > 0])
    return np.interp(levels, cdf[keep], grid[keep])


def values_from_classes(
    p: np.ndarray,
    u: np.ndarray,
    edges: np.ndarray,
    grid: np.ndarray,
    cdf: np.ndarray,
) -> np.ndarray:
    """Draws of a boosted continuous column from its class probabilities.

    With P_c the cumulative class probabilities, u in [0, 1) picks the class c with
    P_{c-1} <= u < P_c; v = (u - P_{c-1}) / p_c places the value within the class by
    the marginal's own shape there: the value is F^{-1}(F(e_{c-1}) + v (F(e_c) -
    F(e_{c-1}))), F the column's federated marginal CDF on ``grid`` (linear between
    grid points).  So a class's mass is spread as the marginal spreads it.
    """
    cum = np.cumsum(p, axis=1)
    cum[:, -1] = 1.0
    c = np.minimum((u[:, None] >= cum).sum(axis=1), p.shape[1] - 1)
    rows = np.arange(p.shape[0])
    before = np.where(c > 0, cum[rows, c - 1], 0.0)
    mass = p[rows, c]
    v = np.clip(np.divide(u - before, mass, out=np.full(u.shape, 0.5), where=mass > 0), 0, 1)
    levels = class_levels(edges, grid, cdf)
    level = levels[c] + v * (levels[c + 1] - levels[c])
    return _inverse_marginal(level, grid, cdf)


def cdf_from_classes(
    p: np.ndarray, edges: np.ndarray, grid: np.ndarray, cdf: np.ndarray
) -> np.ndarray:
    """The conditional CDF (B, G) on ``grid`` that :func:`values_from_classes` draws from."""
    marginal = np.maximum.accumulate(np.clip(np.asarray(cdf, dtype=float), 0.0, 1.0))
    levels = class_levels(edges, grid, marginal)
    c = np.minimum(np.searchsorted(edges, grid, side="left"), p.shape[1] - 1)
    width = levels[c + 1] - levels[c]
    frac = np.clip(
        np.divide(marginal - levels[c], width, out=np.ones_like(width), where=width > 0), 0, 1
    )
    before = np.concatenate([np.zeros((p.shape[0], 1)), np.cumsum(p, axis=1)[:, :-1]], axis=1)
    return np.clip(before[:, c] + p[:, c] * frac[None, :], 0.0, 1.0)
