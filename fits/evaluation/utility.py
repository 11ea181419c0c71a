"""Downstream utility of a synthetic table: the data usage modes M1-M4 (paper app. D.1).

A federated synthetic table ``B`` is shared with every client ``k``, which also holds
its own rows ``H_k`` (``m_k`` of them). The paper compares four ways for a client to
train a downstream model:

* **M1**, synthetic only: fit on ``B``;
* **M2**, local only: fit on ``H_k``;
* **M3**, mixed: fit on ``H_k`` plus ``r * m_k`` rows drawn from ``B`` without
  replacement, every row at weight 1 (``r = inf``: all of ``B``);
* **M4**, loss-reweighted: fit on ``H_k`` plus all of ``B``, the synthetic rows'
  losses weighted by ``lambda`` (``lambda = 0`` is M2, ``lambda = 1`` is M3 with
  ``r = inf``).

:func:`downstream_utility` runs them for every client with two model families:

* the paper's parametric models, linear regression (regression) or logistic
  regression (binary classification), scored by the **parameter estimation error**
  against a reference parameter (the true one when known, e.g. the simulation
  design's, otherwise the fit on the full real data) and by test metrics;
* a stronger nonlinear model, scikit-learn's histogram gradient boosting, scored by
  test metrics only.

Test metrics: mean squared error and R^2 for regression; accuracy (threshold 0.5)
and ROC AUC for classification. A "pooled real" row (the model fitted on all
clients' rows together, which federation does not allow) gives the yardstick.

Encoding (shared by every fit, so parameter vectors are comparable): continuous and
ordinal covariates enter as numbers, nominal covariates as 0/1 indicators of every
level but the first (the reference level; levels sorted, taken from all the tables
involved). Each fit standardizes its design with the (loss-weighted) mean and sd of
its own training rows for numerical stability; the estimates are then mapped to one
fixed parametrization, described in :func:`downstream_utility`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import scipy.optimize
import scipy.special
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.metrics import roc_auc_score
from threadpoolctl import threadpool_limits

from fits._json import jsonable, plain
from fits._warnstate import kept_warning_state
from fits.evaluation.encoding import n_workers

__all__ = [
    "MODES",
    "BoostingComparison",
    "Design",
    "DirectFit",
    "UtilityResult",
    "boosting_comparison",
    "downstream_utility",
    "fit_linear",
    "fit_logistic",
    "infer_task",
]

#: The data usage modes of the paper's appendix D.1.
MODES: tuple[str, ...] = ("M1", "M2", "M3", "M4")

#: Inverse L2 strength of the logistic regression: large, so the fit is nearly the
#: unpenalized maximum-likelihood estimate and M4's loss weights act exactly as
#: written in eq. (64).
LOGISTIC_C = 1e4
#: Most L-BFGS steps (and objective evaluations) of :func:`fit_logistic`.
LOGISTIC_MAX_ITER = 2000

_LABELS = {
    "M1": "M1 synthetic only",
    "M2": "M2 local only",
    "M3": "M3 local + synthetic",
    "M4": "M4 local + weighted synthetic",
    "pooled": "pooled real data",
    "direct": "fit directly across sites",
}

#: A model fitted directly across the clients: (every client's (x, y), task) -> parameters.
DirectFit = Callable[[list[tuple[np.ndarray, np.ndarray]], str], np.ndarray]


# ---------------------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------------------


def _plain_values(series: pd.Series) -> np.ndarray:
    """A column as an object array of plain Python values (``tolist`` unboxes numpy)."""
    out = np.empty(len(series), dtype=object)
    out[:] = series.tolist()
    return out


def _sorted_levels(values: Sequence[Any]) -> list[Any]:
    """Distinct values, sorted (mixed types: by type name, then text)."""
    levels = list(dict.fromkeys(plain(v) for v in values))
    try:
        return sorted(levels)
    except TypeError:
        return sorted(levels, key=lambda v: (type(v).__name__, str(v)))


def _levels(frames: Sequence[pd.DataFrame], col: str) -> list[Any]:
    """Sorted union of a column's values over several tables."""
    parts = [pd.unique(f[col].to_numpy(dtype=object)) for f in frames if col in f.columns]
    return _sorted_levels(np.concatenate(parts).tolist() if parts else [])


#: Nominal levels holding less than this share of the scale table's rows get no
#: indicator of their own (they count with the reference level).
MIN_LEVEL_SHARE = 0.01


@dataclass
class Design:
    """Fixed encoding of the covariates as a numeric design matrix.

    Parameters
    ----------
    covariates : list of str
        The covariate columns, in order.
    kinds : dict of str to str
        Their kinds (``"continuous"``, ``"ordinal"``, ``"nominal"``).
    levels : dict of str to list
        Nominal columns: every level seen in any table (sorted). Ordered categorical
        ordinal columns: their categories, whose codes are used as numbers.
    indicators : dict of str to list
        Nominal columns: the levels that get a 0/1 indicator.
    reference_levels : dict of str to object
        Nominal columns: the reference level (no indicator).
    center, scale : numpy.ndarray
        Per feature: the reporting parametrization is ``(x - center) / scale``
        (numeric features: mean and sd of the scale table; indicators: 0 and 1).

    Use :meth:`from_frames` to build one.
    """

    covariates: list[str]
    kinds: dict[str, str]
    levels: dict[str, list[Any]]
    indicators: dict[str, list[Any]] = field(default_factory=dict)
    reference_levels: dict[str, Any] = field(default_factory=dict)
    center: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    scale: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    feature_names: list[str] = field(default_factory=list)
    numeric: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool), repr=False)

    @classmethod
    def from_frames(
        cls,
        covariates: Sequence[str],
        kinds: Mapping[str, str],
        frames: Sequence[pd.DataFrame],
        scale_frame: pd.DataFrame,
        *,
        min_level_share: float = MIN_LEVEL_SHARE,
    ) -> Design:
        """Encoding with the levels of every table and the scale of ``scale_frame``.

        Continuous and ordinal covariates are single numeric features. A nominal
        covariate gets one 0/1 indicator per level, except for its reference level
        (the most frequent one in ``scale_frame``) and for levels rarer than
        ``min_level_share`` of ``scale_frame``'s rows, which count with the
        reference level: a handful of rows cannot pin down a coefficient, and one
        such coefficient would swamp every parameter error.

        Parameters
        ----------
        covariates : sequence of str
            Covariate columns.
        kinds : mapping
            Column -> kind; must cover every covariate.
        frames : sequence of DataFrame
            Every table the design will encode (their levels are pooled).
        scale_frame : DataFrame
            The table whose level shares, means and sds define the reporting
            parametrization (the pooled real training rows).
        min_level_share : float, default 0.01
            See above; 0 gives every level but the reference an indicator.
        """
        covariates = list(covariates)
        if not covariates:
            raise ValueError("no covariates: the downstream model needs at least one")
        if not 0.0 <= min_level_share < 1.0:
            raise ValueError(f"min_level_share must be in [0, 1), got {min_level_share}")
        levels: dict[str, list[Any]] = {}
        indicators: dict[str, list[Any]] = {}
        reference_levels: dict[str, Any] = {}
        for col in covariates:
            if col not in kinds:
                raise ValueError(f"covariate {col!r} has no kind in `kinds`")
            if col not in scale_frame.columns:
                raise ValueError(f"covariate {col!r} is missing from the reference table")
            kind = kinds[col]
            if kind == "nominal":
                levels[col] = _levels(frames, col)
                counts = pd.Series(_plain_values(scale_frame[col])).value_counts()
                shares = np.array([counts.get(level, 0) for level in levels[col]]) / max(
                    1, len(scale_frame)
                )
                ref = int(np.argmax(shares))  # ties: the first in sorted order
                reference_levels[col] = levels[col][ref]
                indicators[col] = [
                    level
                    for i, level in enumerate(levels[col])
                    if i != ref and shares[i] > 0 and shares[i] >= min_level_share
                ]
            elif kind == "ordinal":
                dtype = scale_frame[col].dtype
                if isinstance(dtype, pd.CategoricalDtype) and not pd.api.types.is_numeric_dtype(
                    dtype.categories.dtype
                ):
                    levels[col] = [plain(c) for c in dtype.categories]
            elif kind != "continuous":
                raise ValueError(f"unknown kind {kind!r} for column {col!r}")
        names: list[str] = []
        numeric: list[bool] = []
        for col in covariates:
            if kinds[col] == "nominal":
                names.extend(f"{col}={level}" for level in indicators[col])
                numeric.extend([False] * len(indicators[col]))
            else:
                names.append(col)
                numeric.append(True)
        # a column named like the intercept or like a level 'col=level' of a nominal
        # column: its coefficient gets a name of its own (parameters are keyed by name)
        taken = {"intercept", *(n for n, is_num in zip(names, numeric, strict=True) if not is_num)}
        names = [
            f"{n} (column)" if is_num and n in taken else n
            for n, is_num in zip(names, numeric, strict=True)
        ]
        design = cls(
            covariates=covariates,
            kinds={c: kinds[c] for c in covariates},
            levels=levels,
            indicators=indicators,
            reference_levels=reference_levels,
            center=np.zeros(len(names)),
            scale=np.ones(len(names)),
            feature_names=names,
            numeric=np.array(numeric, dtype=bool),
        )
        raw = design.raw(scale_frame, "reference")
        center = np.where(design.numeric, raw.mean(axis=0), 0.0)
        sd = raw.std(axis=0)
        design.center = center
        design.scale = np.where(design.numeric & (sd > 0), sd, 1.0)
        return design

    def _numeric_values(self, frame: pd.DataFrame, col: str, table: str) -> np.ndarray:
        series = frame[col]
        if col in self.levels:  # ordered categorical ordinal: codes
            codes = pd.Categorical(series.to_numpy(dtype=object), categories=self.levels[col]).codes
            if np.any(codes < 0):
                bad = series[codes < 0].iloc[0]
                raise ValueError(
                    f"ordinal column {col!r} in the {table} table has value {bad!r}, "
                    "which is not one of its ordered categories"
                )
            return codes.astype(np.float64)
        if not (
            pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype)
        ):
            raise ValueError(
                f"column {col!r} in the {table} table is {self.kinds[col]} but not numeric "
                f"(dtype {series.dtype}); declare it nominal or convert it to numbers"
            )
        values = series.to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"column {col!r} has missing or infinite values in the {table} table")
        return values

    def _check(self, frame: pd.DataFrame, table: str) -> None:
        missing = [c for c in self.covariates if c not in frame.columns]
        if missing:
            raise ValueError(f"the {table} table lacks the covariate column(s) {missing}")

    def raw(self, frame: pd.DataFrame, table: str = "input") -> np.ndarray:
        """The design on the raw scale: numbers as they are, 0/1 indicators."""
        self._check(frame, table)
        blocks = []
        for col in self.covariates:
            if self.kinds[col] == "nominal":
                values = pd.Series(_plain_values(frame[col]))
                unknown = ~values.isin(self.levels[col])
                if unknown.any():
                    bad = values[unknown].iloc[0]
                    raise ValueError(
                        f"column {col!r} in the {table} table has level {bad!r}, unknown to "
                        "the design; build the design from every table involved"
                    )
                codes = pd.Index(self.indicators[col]).get_indexer(values)
                onehot = np.zeros((len(frame), len(self.indicators[col]) + 1))
                onehot[np.arange(len(frame)), codes] = 1.0  # code -1: the last column
                blocks.append(onehot[:, :-1])
            else:
                blocks.append(self._numeric_values(frame, col, table)[:, None])
        return np.hstack(blocks) if blocks else np.zeros((len(frame), 0))

    def matrix(self, frame: pd.DataFrame, table: str = "input") -> np.ndarray:
        """The design in the reporting parametrization ``(raw - center) / scale``."""
        return (self.raw(frame, table) - self.center) / self.scale

    def codes(self, frame: pd.DataFrame, table: str = "input") -> tuple[np.ndarray, np.ndarray]:
        """One column per covariate for tree models: level codes or numbers.

        Returns
        -------
        values : numpy.ndarray
            ``(n, n_covariates)`` float64.
        categorical : numpy.ndarray
            Boolean mask of the columns that hold level codes.
        """
        self._check(frame, table)
        cols, mask = [], []
        for col in self.covariates:
            if self.kinds[col] == "nominal":
                index = pd.Index(self.levels[col])
                codes = index.get_indexer(_plain_values(frame[col]))
                cols.append(codes.astype(np.float64))
                mask.append(len(self.levels[col]) <= 255)
            else:
                cols.append(self._numeric_values(frame, col, table))
                mask.append(False)
        return np.column_stack(cols), np.array(mask, dtype=bool)

    def parameters_from(self, params: Mapping[str, Any]) -> np.ndarray:
        """A parameter given on the raw scale, in the reporting parametrization.

        Parameters
        ----------
        params : mapping
            ``{"intercept": float, "coef": {name: float}}``. A name is a feature
            (``"age"``, ``"sex=Male"``) or a nominal column with numeric levels, whose
            coefficient then multiplies the level's value (e.g. a 0/1 column). Covariates
            that are not named get coefficient 0.

        Returns
        -------
        numpy.ndarray
            ``(1 + n_features,)``: intercept, then coefficients.
        """
        if "coef" not in params or "intercept" not in params:
            raise ValueError(
                "reference parameters need 'intercept' and 'coef' "
                "(e.g. fits.datasets.simulate(...).params['linear'])"
            )
        intercept = float(params["intercept"])
        beta = np.zeros(len(self.feature_names))
        position = {name: i for i, name in enumerate(self.feature_names)}
        for name, value in dict(params["coef"]).items():
            if name in position:
                beta[position[name]] = float(value)
            elif self.kinds.get(name) == "nominal":
                ref = self.reference_levels[name]
                try:
                    numbers = {level: float(level) for level in self.levels[name]}
                except (TypeError, ValueError):
                    raise ValueError(
                        f"reference coefficient for nominal column {name!r}: its levels are "
                        "not numbers; give one coefficient per level as "
                        f"'{name}=<level>' instead"
                    ) from None
                folded = [
                    level
                    for level in self.levels[name]
                    if level != ref and level not in self.indicators[name]
                ]
                if folded and float(value) != 0.0:
                    raise ValueError(
                        f"reference coefficient for {name!r}: levels {folded} are too rare "
                        "for an indicator of their own, so a per-value coefficient cannot be "
                        "expressed; build the design with min_level_share=0"
                    )
                intercept += float(value) * numbers[ref]
                for level in self.indicators[name]:
                    beta[position[f"{name}={level}"]] = float(value) * (
                        numbers[level] - numbers[ref]
                    )
            else:
                raise ValueError(
                    f"reference coefficient {name!r} matches no covariate or feature; "
                    f"features: {self.feature_names}"
                )
        # raw -> reporting parametrization: beta_rep = beta * scale, a shifted intercept
        return np.concatenate([[intercept + float(beta @ self.center)], beta * self.scale])


# ---------------------------------------------------------------------------------------
# weighted fits
# ---------------------------------------------------------------------------------------


def _weighted_standardize(
    x: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standardize with the weighted mean and sd (constant columns: sd 1, all zeros)."""
    total = w.sum()
    mean = (w @ x) / total
    centred = x - mean
    sd = np.sqrt((w @ (centred * centred)) / total)
    sd = np.where(sd > 1e-12 * np.maximum(1.0, np.abs(mean)), sd, np.inf)
    return centred / sd, mean, np.where(np.isfinite(sd), sd, 1.0)


def _keep(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
    """Drop the rows of zero weight (they do not enter the loss)."""
    w = np.asarray(w, dtype=np.float64)
    if w.shape != y.shape:
        raise ValueError(f"{w.size} weights for {y.size} rows")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("loss weights must be finite and non-negative")
    keep = w > 0
    if not keep.any():
        raise ValueError("every training row has weight 0")
    return x[keep], y[keep], w[keep]


def _unstandardize(coef: np.ndarray, intercept: float, mean: np.ndarray, sd: np.ndarray):
    beta = coef / sd
    return np.concatenate([[intercept - float(beta @ mean)], beta])


def fit_linear(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Weighted least squares with an intercept.

    Minimizes ``sum_i w_i (y_i - b0 - x_i' b)^2``. The columns are standardized with
    the weighted mean and sd first (numerical stability only); a column that is
    constant in the training rows gets coefficient 0 (minimum-norm solution).

    Parameters
    ----------
    x : numpy.ndarray
        ``(n, p)`` design.
    y : numpy.ndarray
        ``(n,)`` response.
    w : numpy.ndarray, optional
        ``(n,)`` non-negative loss weights (default 1); rows of weight 0 are dropped.

    Returns
    -------
    numpy.ndarray
        ``(1 + p,)``: intercept, then the coefficients, on the scale of ``x``.
    """
    y = np.asarray(y, dtype=np.float64)
    x, y, w = _keep(np.asarray(x, dtype=np.float64), y, np.ones_like(y) if w is None else w)
    z, mean, sd = _weighted_standardize(x, w)
    root = np.sqrt(w)
    design = np.column_stack([np.ones(len(y)), z]) * root[:, None]
    solution = np.linalg.lstsq(design, y * root, rcond=None)[0]
    return _unstandardize(solution[1:], float(solution[0]), mean, sd)


def fit_logistic(
    x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, *, C: float = LOGISTIC_C
) -> tuple[np.ndarray, bool]:
    """Weighted logistic regression with an intercept, nearly unpenalized.

    Minimizes ``C * sum_i w_i loss_i + |b|^2 / 2`` (the intercept is not penalized),
    the objective of scikit-learn's ``LogisticRegression(C=C)``, with scipy's L-BFGS-B
    on standardized columns (weighted mean and sd), from zero, to a gradient of at most
    1e-6 (as scikit-learn's ``tol=1e-6``; the objective divided by ``C * sum_i w_i``);
    with the default ``C = 1e4`` this is the maximum-likelihood fit up to a tiny ridge
    that keeps separable data finite.  scipy rather than scikit-learn because the fit
    runs on worker threads: scikit-learn says non-convergence with a warning, and a
    warning can only be caught through the process's warning state, which threads share
    (:mod:`fits._warnstate`); scipy returns it.

    Parameters
    ----------
    x : numpy.ndarray
        ``(n, p)`` design.
    y : numpy.ndarray
        ``(n,)`` 0/1 response; both classes must occur among rows of positive weight.
    w : numpy.ndarray, optional
        ``(n,)`` non-negative loss weights (default 1); rows of weight 0 are dropped.
    C : float, default 1e4
        Inverse regularization strength.

    Returns
    -------
    params : numpy.ndarray
        ``(1 + p,)``: intercept, then the coefficients, on the scale of ``x``.
    converged : bool
        Whether the solver met its tolerance within :data:`LOGISTIC_MAX_ITER` steps.
    """
    y = np.asarray(y, dtype=np.float64)
    x, y, w = _keep(np.asarray(x, dtype=np.float64), y, np.ones_like(y) if w is None else w)
    if np.unique(y).size < 2:
        raise ValueError("the training rows hold only one class")
    z, mean, sd = _weighted_standardize(x, w)
    design = np.column_stack([np.ones(len(y)), z])
    share = w / w.sum()  # the objective over C * sum(w): the same minimum, a scale-free gradient
    ridge = np.r_[0.0, np.ones(z.shape[1])] / (C * w.sum())

    def objective(beta: np.ndarray) -> tuple[float, np.ndarray]:
        eta = design @ beta
        loss = float(share @ (np.logaddexp(0.0, eta) - y * eta) + 0.5 * ridge @ beta**2)
        grad = design.T @ (share * (scipy.special.expit(eta) - y)) + ridge * beta
        return loss, grad

    res = scipy.optimize.minimize(
        objective, np.zeros(design.shape[1]), jac=True, method="L-BFGS-B",
        options={
            "maxiter": LOGISTIC_MAX_ITER, "maxfun": LOGISTIC_MAX_ITER, "gtol": 1e-6,
            "ftol": 64 * np.finfo(np.float64).eps, "maxls": 50,
        },
    )  # fmt: skip
    params = _unstandardize(res.x[1:], float(res.x[0]), mean, sd)
    return params, bool(res.success)


#: Most distinct values a numeric feature keeps for the boosting model.
_TREE_BINS = 254


def _tree_bins(tables: Sequence[np.ndarray], categorical: np.ndarray) -> dict[int, np.ndarray]:
    """Shared quantile bin edges for numeric features with many distinct values.

    The boosting model bins every feature into at most 255 bins anyway; binning once,
    with edges from all the real and synthetic training rows, gives every fit the same
    features and spares scikit-learn's per-fit (weighted) quantile search.
    """
    stacked = np.vstack(tables)
    edges = {}
    for j in np.flatnonzero(~categorical):
        values = stacked[:, j]
        if np.unique(values).size > _TREE_BINS:
            cuts = np.quantile(values, np.linspace(0.0, 1.0, _TREE_BINS + 1)[1:-1])
            edges[int(j)] = np.unique(cuts)
    return edges


def _apply_bins(codes: np.ndarray, edges: Mapping[int, np.ndarray]) -> np.ndarray:
    if not edges:
        return codes
    out = codes.copy()
    for j, cuts in edges.items():
        out[:, j] = np.searchsorted(cuts, codes[:, j], side="right")
    return out


def _boosting(task: str, seed: int, mask: np.ndarray, max_iter: int):
    cls = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    return cls(
        max_iter=max_iter,
        early_stopping=False,
        random_state=seed,
        categorical_features=mask if mask.any() else None,
    )


# ---------------------------------------------------------------------------------------
# modes
# ---------------------------------------------------------------------------------------


def _collinearity_notes(x: np.ndarray, names: Sequence[str]) -> list[str]:
    """A note when the standardized design is (numerically) rank-deficient."""
    if x.shape[1] < 2 or x.shape[0] < 2:
        return []
    sd = x.std(axis=0)
    constant = [names[int(i)] for i in np.flatnonzero(sd == 0)]
    notes = []
    if constant:
        notes.append(
            f"feature(s) {constant} are constant in the reference data: their coefficients "
            "are not identified (fits give them 0)"
        )
    keep = sd > 0
    z = (x[:, keep] - x[:, keep].mean(axis=0)) / sd[keep]
    # eigenvalues of the correlation matrix: the squared singular values of z / sqrt(n)
    eigenvalues, vectors = np.linalg.eigh(z.T @ z / z.shape[0])
    if eigenvalues.size and eigenvalues[0] < 1e-12 * eigenvalues[-1]:
        kept = [n for n, k in zip(names, keep, strict=True) if k]
        loading = np.abs(vectors[:, 0])
        involved = [kept[i] for i in np.argsort(-loading)[:6] if loading[i] > 0.05]
        notes.append(
            f"the covariates are collinear in the reference data (involving {involved}): "
            "parameters along that direction are not identified, which inflates parameter "
            "errors; compare the test metrics instead"
        )
    return notes


def infer_task(kinds: Mapping[str, str], target: str, frames: Sequence[pd.DataFrame]) -> str:
    """``"classification"`` for a discrete target with two levels, else ``"regression"``.

    Raises
    ------
    ValueError
        A nominal target with more than two levels (only binary classification is
        handled), or a target with a single level.
    """
    if target not in kinds:
        raise ValueError(f"target {target!r} has no kind; known columns: {list(kinds)}")
    levels = _levels(frames, target)
    if len(levels) < 2:
        raise ValueError(f"target {target!r} takes a single value; nothing to predict")
    if kinds[target] == "continuous":
        return "regression"
    if len(levels) == 2:
        return "classification"
    if kinds[target] == "ordinal":
        return "regression"
    raise ValueError(
        f"target {target!r} is nominal with {len(levels)} levels; downstream utility handles "
        "regression and binary classification only: recode it to two levels, or do not "
        "name it as a target (the rest of the report needs none)"
    )


def _target_values(
    frame: pd.DataFrame, target: str, task: str, positive: Any, table: str
) -> np.ndarray:
    if target not in frame.columns:
        raise ValueError(f"the {table} table lacks the target column {target!r}")
    series = frame[target]
    if series.isna().any():
        raise ValueError(f"target {target!r} has missing values in the {table} table")
    if task == "classification":
        return (_plain_values(series) == positive).astype(np.float64)
    if isinstance(series.dtype, pd.CategoricalDtype):
        series = series.cat.codes
    values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(
            f"target {target!r} in the {table} table is not numeric; use task='classification' "
            "for a two-level target"
        )
    return values


@dataclass
class UtilityResult:
    """What :func:`downstream_utility` found.

    Attributes
    ----------
    target, task : str
        The response and ``"regression"`` / ``"classification"``.
    table : pandas.DataFrame
        One row per (client, mode, setting, model): ``client``, ``n_local``,
        ``mode`` (``"M1"`` ... ``"M4"``, or ``"pooled"``), ``setting`` (``"r=1"``,
        ``"lambda=0.1"`` or empty), ``r``, ``lam``, ``label``, ``n_train``
        (rows of positive weight), ``n_synthetic``, ``model``, ``param_error``
        (parametric model only), ``mse``, ``r2`` (regression), ``accuracy``,
        ``roc_auc`` (classification), ``note`` (why a fit is missing, or that the
        solver did not converge).
    feature_names : list of str
        The parametric model's features (after the intercept).
    reference : numpy.ndarray
        The reference parameter in the reporting parametrization.
    reference_source : str
        Where it comes from.
    positive : object
        The class coded 1 (classification).
    parametric : str
        ``"linear regression"`` or ``"logistic regression"``.
    """

    target: str
    task: str
    table: pd.DataFrame
    feature_names: list[str]
    reference: np.ndarray
    reference_source: str
    positive: Any = None
    parametric: str = ""
    test_rows: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN becomes None)."""
        records = []
        for rec in self.table.to_dict(orient="records"):
            records.append({k: jsonable(v) for k, v in rec.items()})
        return {
            "target": self.target,
            "task": self.task,
            "parametric_model": self.parametric,
            "positive_class": jsonable(self.positive),
            "test_rows": self.test_rows,
            "notes": list(self.notes),
            "reference_source": self.reference_source,
            "reference": {
                name: float(v)
                for name, v in zip(["intercept", *self.feature_names], self.reference, strict=True)
            },
            "rows": records,
        }


def _setting_text(value: float, name: str) -> str:
    if math.isinf(value):
        return f"{name}=inf"
    return f"{name}={value:g}"


def downstream_utility(
    clients: Sequence[pd.DataFrame] | Mapping[str, pd.DataFrame] | None,
    synthetic: pd.DataFrame,
    test: pd.DataFrame,
    target: str,
    kinds: Mapping[str, str],
    *,
    task: str | None = None,
    covariates: Sequence[str] | None = None,
    reference: pd.DataFrame | Mapping[str, Any] | None = None,
    ratios: Sequence[float] = (1.0,),
    lambdas: Sequence[float] = (0.1,),
    boosting: bool = True,
    boosting_iterations: int = 100,
    min_level_share: float = MIN_LEVEL_SHARE,
    reference_label: str | None = None,
    seed: int = 0,
    n_jobs: int | None = 1,
    boosting_lambdas: Sequence[float] | None = None,
    direct: Mapping[str, DirectFit] | None = None,
) -> UtilityResult:
    """Downstream utility per client under the data usage modes M1-M4.

    Parameters
    ----------
    clients : sequence or mapping of DataFrame, or None
        Each client's real rows (a mapping names them; else ``client 1``, ...). With
        None or no clients only M1 (and no pooled row) is evaluated.
    synthetic : DataFrame
        The shared synthetic table ``B``.
    test : DataFrame
        Held-out real rows for the test metrics.
    target : str
        The response column.
    kinds : mapping
        Column -> kind, covering the target and the covariates.
    task : {"regression", "classification"}, optional
        Default: :func:`infer_task`. Classification is binary; the positive class
        (coded 1) is the larger of the two sorted levels.
    covariates : sequence of str, optional
        Default: every column of ``kinds`` except the target.
    reference : DataFrame or mapping, optional
        The reference parameter of the parametric model: a mapping
        ``{"intercept": ..., "coef": {...}}`` of true parameters on the raw scale
        (see :meth:`Design.parameters_from`), or a real table to fit it on (the full
        real data). Default: the pooled clients (or the test table without clients).
    ratios : sequence of float, default (1.0,)
        M3's ``r`` values (``math.inf``: all synthetic rows).
    lambdas : sequence of float, default (0.1,)
        M4's synthetic loss weights (the paper's headline uses 0.1).
    boosting : bool, default True
        Also fit histogram gradient boosting (test metrics only).
    boosting_iterations : int, default 100
        Boosting rounds (no early stopping, so the modes' weights act exactly).
    min_level_share : float, default 0.01
        Nominal levels rarer than this share of the pooled clients' rows get no
        indicator of their own in the parametric model (see
        :meth:`Design.from_frames`).
    reference_label : str, optional
        How to name a reference table in ``UtilityResult.reference_source``.
    seed : int, default 0
        Seeds M3's subsamples (client ``k`` uses ``default_rng([seed, k])``) and the
        boosting models.
    n_jobs : int or None, default 1
        Fits run at a time, each single-threaded (None: every CPU this process may
        use; on a busy machine one is often fastest). The results do not depend on it.
    boosting_lambdas : sequence of float, optional
        The M4 weights at which the boosting model is fitted too (default: every one
        of ``lambdas``); a weight not in ``lambdas`` gets a boosting fit only. M1, M2,
        M3 and the pooled row always get both models (with ``boosting``).
    direct : mapping of str to callable, optional
        Models fitted directly across the clients (no synthetic data), by label, e.g.
        ``{"FedNewton, mu=1": fit}``: ``fit(parts, task)`` gets every client's
        ``(x, y)`` -- the parametric design in the reporting parametrization and the
        coded response -- and the task, and returns ``(1 + p,)`` parameters in that same
        parametrization (intercept first), or raises ``ValueError``. Each becomes a
        row of mode ``"direct"`` (client ``"all clients"``), scored like the pooled row
        (parameter error against the same reference, the same test rows). The caller
        supplies the fits (e.g. :func:`fits.analysis.glm.direct_fit`), so this module
        needs no federation. A fit's message (the row's note) names the clients and
        features by their own names where the fit called them ``site1``, ``site2``, ...
        and ``x0``, ``x1``, ... (the fits of :func:`~fits.analysis.glm.direct_fit`
        do). Parameters too large for float64 arithmetic (the privacy noise of a tiny
        ``mu``) leave the row unscored, with a note.

    Returns
    -------
    UtilityResult

    Notes
    -----
    The parameter error is the Euclidean norm of the difference between the
    estimated and the reference parameter vectors, **intercept included**, in one
    fixed parametrization shared by every fit: numeric covariates are centred and
    scaled by the mean and sd of a fixed real table (the pooled clients' rows, or the
    test table when there are no clients), so each coefficient is "per standard
    deviation" and the intercept is the linear predictor at the mean; nominal
    covariates are 0/1 indicators of every level but the most frequent one (levels
    rarer than ``min_level_share`` count with it). Because the
    parametric fits are (nearly) unpenalized, how each fit standardizes internally
    does not change its estimate.

    The boosting model sees nominal covariates as categories and numeric ones as
    numbers; a numeric covariate with more than 254 distinct values is first cut at
    254 quantiles of all the clients' and synthetic rows, the same cuts for every fit.

    Loss weights enter every model as sample weights; rows of weight 0 are dropped
    (so M4 with ``lambda = 0`` is M2 exactly, and with ``lambda = 1`` it is M3 with
    ``r = inf`` exactly), and equal weights are passed to the boosting model as no
    weights.
    """
    client_names, client_frames = _named_clients(clients)
    covariates = _covariates(kinds, target, covariates)
    ratios, lambdas = _check_weights(ratios, lambdas)
    boost_lambdas = lambdas if boosting_lambdas is None else [float(v) for v in boosting_lambdas]
    ref_frame = reference if isinstance(reference, pd.DataFrame) else None
    frames = [synthetic, test, *client_frames] + ([ref_frame] if ref_frame is not None else [])
    task, positive = _task_and_positive(task, kinds, target, frames)
    pooled = pd.concat(client_frames, ignore_index=True) if client_frames else None
    scale_frame = pooled if pooled is not None else test
    design = Design.from_frames(
        covariates, kinds, frames, scale_frame, min_level_share=min_level_share
    )
    problem = _Problem(target, task, positive, design, boosting, boosting_iterations, seed)
    base = ref_frame if ref_frame is not None else scale_frame
    what = reference_label or (
        "the given reference table"
        if ref_frame is not None
        else ("the pooled clients' rows" if pooled is not None else "the test table")
    )
    ref_params, source, notes = _reference_parameter(problem, reference, base, what)
    c_syn, mask = design.codes(synthetic, "synthetic")
    client_codes = [design.codes(f, n)[0] for n, f in zip(client_names, client_frames, strict=True)]
    problem.mask = mask
    problem.tree_bins = _tree_bins([c_syn, *client_codes], mask)
    problem.reference = ref_params
    problem.set_test(test)
    jobs = _jobs(
        problem, synthetic, pooled, client_names, client_frames, ratios, lambdas, boost_lambdas
    )
    # Every fit runs single-threaded (BLAS and OpenMP), several fits at a time: on a
    # busy machine threaded BLAS / OpenMP inside small fits mostly waits.
    workers = min(n_workers(n_jobs), len(jobs))
    with threadpool_limits(limits=1):
        if workers == 1:
            results = [_run_job(problem, job) for job in jobs]
        else:  # the threads' catch_warnings blocks (scikit-learn's) may not leave a trace
            with kept_warning_state(), ThreadPoolExecutor(workers) as pool:
                results = list(pool.map(partial(_run_job, problem), jobs))
    records = [rec for result in results for rec in result]
    parts = [problem.xy(f, n) for n, f in zip(client_names, client_frames, strict=True)]
    for label, fit in (direct or {}).items():
        records.append(_run_direct(problem, label, fit, parts, client_names))
    return UtilityResult(
        target=target,
        task=task,
        table=_result_table(records, task),
        feature_names=list(design.feature_names),
        reference=ref_params,
        reference_source=source,
        positive=positive,
        parametric=problem.parametric,
        test_rows=len(test),
        notes=notes,
    )


# ---------------------------------------------------------------------------------------
# gradient boosting with scikit-learn's defaults: trained on real or on synthetic rows
# ---------------------------------------------------------------------------------------

#: The headline metric of :func:`boosting_comparison` per task.
HEADLINE_METRIC = {"regression": "r2", "classification": "roc_auc"}


@dataclass
class BoostingComparison:
    """What :func:`boosting_comparison` found.

    Attributes
    ----------
    target, task : str
        The response and ``"regression"`` / ``"classification"``.
    metric : str
        The headline metric: ``"r2"`` (regression) or ``"roc_auc"`` (classification).
    real, synthetic : dict of str to float
        Test metrics of the model trained on the real training rows and of the model
        trained on the synthetic table: ``mse`` and ``r2`` (regression), ``accuracy``
        and ``roc_auc`` (classification).
    n_train, n_synthetic, n_test : int
        Rows of the three tables.
    positive : object
        The class coded 1 (classification).
    model : str
        The scikit-learn class and its settings.
    notes : list of str
        What could not be done, e.g. a table holding one class of the target (its
        metrics are then NaN: no classifier can be trained on it).
    """

    target: str
    task: str
    metric: str
    real: dict[str, float]
    synthetic: dict[str, float]
    n_train: int
    n_synthetic: int
    n_test: int
    positive: Any = None
    model: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def gap(self) -> float:
        """Headline metric of the real-trained model minus the synthetic-trained one."""
        return self.real[self.metric] - self.synthetic[self.metric]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN becomes None)."""
        return jsonable(
            {
                "target": self.target,
                "task": self.task,
                "metric": self.metric,
                "model": self.model,
                "positive_class": self.positive,
                "real": dict(self.real),
                "synthetic": dict(self.synthetic),
                "gap": self.gap,
                "n_train": self.n_train,
                "n_synthetic": self.n_synthetic,
                "n_test": self.n_test,
                "notes": list(self.notes),
            }
        )


def boosting_comparison(
    train: pd.DataFrame,
    synthetic: pd.DataFrame,
    test: pd.DataFrame,
    target: str,
    kinds: Mapping[str, str],
    *,
    task: str | None = None,
    covariates: Sequence[str] | None = None,
    seed: int = 0,
) -> BoostingComparison:
    """Gradient boosting trained on real rows and on synthetic rows, scored on held-out rows.

    The question a user of a synthetic table asks first: does a model trained on it
    predict as well as one trained on the real rows? Both models are scikit-learn's
    :class:`~sklearn.ensemble.HistGradientBoostingRegressor` (regression) or
    :class:`~sklearn.ensemble.HistGradientBoostingClassifier` (binary classification)
    with every setting at scikit-learn's default (100 rounds, early stopping on a 10%
    validation split when a training table has more than 10,000 rows) except
    ``random_state=seed`` (which seeds that split) and ``categorical_features``: the
    nominal covariates, given as level codes (levels sorted, pooled over the three
    tables, as :meth:`Design.codes`), enter as categories; continuous and ordinal
    ones as numbers. Unlike :func:`downstream_utility`'s boosting rows (a fixed 100
    rounds, no early stopping, shared bins, so that loss weights act exactly), nothing
    here is tuned.

    Parameters
    ----------
    train : DataFrame
        The real training rows (what the synthesizer was fitted on).
    synthetic : DataFrame
        The synthetic table.
    test : DataFrame
        Held-out real rows: both models are scored on them.
    target : str
        The response column.
    kinds : mapping
        Column -> kind, covering the target and the covariates.
    task : {"regression", "classification"}, optional
        Default: :func:`infer_task`. The positive class is the larger of the two
        sorted levels.
    covariates : sequence of str, optional
        Default: every column of ``kinds`` except the target.
    seed : int, default 0
        ``random_state`` of both models.

    Returns
    -------
    BoostingComparison
        Test metrics of both models: R^2 = 1 - MSE / Var(y_test) and MSE for
        regression, ROC AUC and accuracy (threshold 0.5) for classification.
    """
    covariates = _covariates(kinds, target, covariates)
    frames = [train, synthetic, test]
    task, positive = _task_and_positive(task, kinds, target, frames)
    design = Design.from_frames(covariates, kinds, frames, train, min_level_share=0.0)
    problem = _Problem(target, task, positive, design, True, 100, seed)
    problem.set_test(test)
    cls = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    scores = {}
    notes = []
    for name, frame in (("real", train), ("synthetic", synthetic)):
        codes, mask = design.codes(frame, name)
        y = _target_values(frame, target, task, positive, name)
        if task == "classification" and np.unique(y).size < 2:
            # a finding about the table (as in the modes M1-M4), not an input error
            notes.append(
                f"gradient boosting: the {name} table holds only one class of {target!r}; "
                "no classifier can be trained on it"
            )
            scores[name] = {"accuracy": math.nan, "roc_auc": math.nan}
            continue
        model = cls(random_state=seed, categorical_features=mask if mask.any() else None)
        # single-threaded, as every fit of downstream_utility (on a busy machine
        # OpenMP threads mostly wait); the fitted model does not depend on it
        with threadpool_limits(limits=1):
            model.fit(codes, y)
            if task == "regression":
                pred = model.predict(problem.x_codes_test)
            else:
                pred = model.predict_proba(problem.x_codes_test)[:, 1]
        scores[name] = problem.metrics(pred)
    return BoostingComparison(
        target=target,
        task=task,
        metric=HEADLINE_METRIC[task],
        real=scores["real"],
        synthetic=scores["synthetic"],
        n_train=len(train),
        n_synthetic=len(synthetic),
        n_test=len(test),
        positive=positive,
        model=f"{cls.__name__}(random_state={seed}), scikit-learn defaults otherwise",
        notes=notes,
    )


# ---------------------------------------------------------------------------------------
# the steps of downstream_utility
# ---------------------------------------------------------------------------------------


def _named_clients(
    clients: Sequence[pd.DataFrame] | Mapping[str, pd.DataFrame] | None,
) -> tuple[list[str], list[pd.DataFrame]]:
    if isinstance(clients, Mapping):
        return [str(n) for n in clients], list(clients.values())
    frames = list(clients or [])
    return [f"client {k + 1}" for k in range(len(frames))], frames


def _covariates(kinds: Mapping[str, str], target: str, covariates: Sequence[str] | None):
    if covariates is None:
        covariates = [c for c in kinds if c != target]
    covariates = list(covariates)
    if target in covariates:
        raise ValueError(f"target {target!r} is also listed as a covariate")
    return covariates


def _check_weights(
    ratios: Sequence[float], lambdas: Sequence[float]
) -> tuple[list[float], list[float]]:
    ratios = [float(r) for r in ratios]
    lambdas = [float(lam) for lam in lambdas]
    if any(not r >= 0 for r in ratios):
        raise ValueError(f"M3 ratios r must be >= 0 (inf allowed), got {ratios}")
    if any(not (lam >= 0 and math.isfinite(lam)) for lam in lambdas):
        raise ValueError(f"M4 weights lambda must be finite and >= 0, got {lambdas}")
    return ratios, lambdas


def _task_and_positive(
    task: str | None, kinds: Mapping[str, str], target: str, frames: Sequence[pd.DataFrame]
) -> tuple[str, Any]:
    """The task (inferred if not given) and, for classification, the class coded 1."""
    if task is None:
        task = infer_task(kinds, target, frames)
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', not {task!r}")
    if task == "regression":
        return task, None
    levels = _levels(frames, target)
    if len(levels) != 2:
        raise ValueError(
            f"classification target {target!r} has {len(levels)} levels {levels[:10]}; "
            "it must have exactly two"
        )
    return task, levels[-1]


@dataclass
class _Problem:
    """What every fit of one :func:`downstream_utility` call shares."""

    target: str
    task: str
    positive: Any
    design: Design
    boosting: bool
    boosting_iterations: int
    seed: int
    mask: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    tree_bins: dict[int, np.ndarray] = field(default_factory=dict)
    reference: np.ndarray = field(default_factory=lambda: np.zeros(0))
    x_test: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    y_test: np.ndarray = field(default_factory=lambda: np.zeros(0))
    c_test: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    x_codes_test: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    @property
    def parametric(self) -> str:
        return "linear regression" if self.task == "regression" else "logistic regression"

    def xy(self, frame: pd.DataFrame, table: str) -> tuple[np.ndarray, np.ndarray]:
        """The parametric design matrix and the coded response of a table."""
        x = self.design.matrix(frame, table)
        return x, _target_values(frame, self.target, self.task, self.positive, table)

    def part(self, frame: pd.DataFrame, table: str, weight: float = 1.0) -> _Part:
        """A table's rows as they enter a fit: every model's inputs and the loss weights."""
        x, y = self.xy(frame, table)
        codes = _apply_bins(self.design.codes(frame, table)[0], self.tree_bins)
        return _Part(x, codes, y, np.full(len(y), weight))

    def set_test(self, test: pd.DataFrame) -> None:
        self.x_test, self.y_test = self.xy(test, "test")
        self.x_codes_test = self.design.codes(test, "test")[0]
        self.c_test = _apply_bins(self.x_codes_test, self.tree_bins)

    def fit_parametric(self, x: np.ndarray, y: np.ndarray, w: np.ndarray):
        """The parametric model's parameters and whether the solver converged."""
        if self.task == "regression":
            return fit_linear(x, y, w), True
        return fit_logistic(x, y, w)

    def metrics(self, pred: np.ndarray) -> dict[str, float]:
        """Test metrics of predictions (means, or probabilities of the positive class)."""
        y_test = self.y_test
        if self.task == "regression":
            test_var = float(np.var(y_test))
            mse = float(np.mean((y_test - pred) ** 2))
            return {"mse": mse, "r2": 1.0 - mse / test_var if test_var > 0 else math.nan}
        accuracy = float(np.mean((pred >= 0.5) == (y_test == 1.0)))
        auc = float(roc_auc_score(y_test, pred)) if np.unique(y_test).size == 2 else math.nan
        return {"accuracy": accuracy, "roc_auc": auc}


def _reference_parameter(
    problem: _Problem,
    reference: pd.DataFrame | Mapping[str, Any] | None,
    base: pd.DataFrame,
    what: str,
) -> tuple[np.ndarray, str, list[str]]:
    """The reference parameter, where it comes from, and collinearity notes on ``base``."""
    x_ref, y_ref = problem.xy(base, "reference")
    notes = _collinearity_notes(x_ref, problem.design.feature_names)
    if isinstance(reference, Mapping):
        return problem.design.parameters_from(reference), "true parameters", notes
    try:
        params, _ = problem.fit_parametric(x_ref, y_ref, np.ones(len(y_ref)))
    except ValueError as err:
        raise ValueError(
            f"cannot fit the reference {problem.parametric} on {what}: {err}; pass the full "
            "real data (or the true parameters) as `reference`"
        ) from None
    return params, f"{problem.parametric} fitted on {what} ({len(base):,} rows)", notes


@dataclass
class _Part:
    """Rows entering a fit: parametric design ``x``, boosting inputs, response, weights."""

    x: np.ndarray
    codes: np.ndarray
    y: np.ndarray
    w: np.ndarray

    def rows(self, index: np.ndarray, weight: float = 1.0) -> _Part:
        return _Part(self.x[index], self.codes[index], self.y[index], np.full(index.size, weight))

    def weighted(self, weight: float) -> _Part:
        return _Part(self.x, self.codes, self.y, np.full(self.y.size, weight))


@dataclass
class _Job:
    """One fit (of the parametric model, the boosting model or both) and its record."""

    record: dict[str, Any]
    parts: list[_Part]
    parametric: bool = True
    boosting: bool = True


def _job(
    client: str,
    n_local: int,
    mode: str,
    parts: list[_Part],
    n_synthetic: int,
    *,
    setting: str = "",
    r: float = math.nan,
    lam: float = math.nan,
    parametric: bool = True,
    boosting: bool = True,
) -> _Job:
    record = {
        "client": client,
        "n_local": n_local,
        "mode": mode,
        "setting": setting,
        "r": r,
        "lam": lam,
        "label": _LABELS[mode] + (f" ({setting})" if setting else ""),
        "n_train": sum(int(np.count_nonzero(p.w > 0)) for p in parts),
        "n_synthetic": n_synthetic,
    }
    return _Job(record, parts, parametric, boosting)


def _jobs(
    problem: _Problem,
    synthetic: pd.DataFrame,
    pooled: pd.DataFrame | None,
    client_names: Sequence[str],
    client_frames: Sequence[pd.DataFrame],
    ratios: Sequence[float],
    lambdas: Sequence[float],
    boost_lambdas: Sequence[float],
) -> list[_Job]:
    """Every fit: M1, pooled real data, and per client M2, M3 per ``r``, M4 per lambda.

    M4 fits the boosting model only at ``boost_lambdas``; a weight there but not in
    ``lambdas`` gets a boosting-only fit (after the client's other M4 fits).
    """
    syn = problem.part(synthetic, "synthetic")
    n_syn = len(synthetic)
    jobs = [_job("all clients", 0, "M1", [syn], n_syn)]
    if pooled is not None:
        jobs.append(
            _job("all clients", len(pooled), "pooled", [problem.part(pooled, "pooled clients")], 0)
        )
    extra = [lam for lam in boost_lambdas if lam not in lambdas]
    for k, (name, frame) in enumerate(zip(client_names, client_frames, strict=True)):
        local = problem.part(frame, name)
        m_k = len(frame)
        jobs.append(_job(name, m_k, "M2", [local], 0))
        rng = np.random.default_rng([problem.seed, k])
        for r in ratios:
            size = n_syn if math.isinf(r) else min(n_syn, int(math.floor(r * m_k + 0.5)))
            if size >= n_syn:
                rows = np.arange(n_syn)
            else:
                rows = np.sort(rng.choice(n_syn, size=size, replace=False))
            setting = _setting_text(r, "r")
            jobs.append(
                _job(name, m_k, "M3", [local, syn.rows(rows)], int(rows.size), setting=setting, r=r)
            )
        for lam in [*lambdas, *extra]:
            jobs.append(
                _job(
                    name, m_k, "M4", [local, syn.weighted(lam)], n_syn if lam > 0 else 0,
                    setting=_setting_text(lam, "lambda"), lam=lam,
                    parametric=lam in lambdas, boosting=lam in boost_lambdas,
                )
            )  # fmt: skip
    return jobs


def _run_job(problem: _Problem, job: _Job) -> list[dict[str, Any]]:
    """The records of one job's fits: the parametric model's, then the boosting model's."""
    x = np.vstack([p.x for p in job.parts])
    codes = np.vstack([p.codes for p in job.parts])
    y = np.concatenate([p.y for p in job.parts])
    w = np.concatenate([p.w for p in job.parts])
    out = []
    if job.parametric:
        rec = {**job.record, "model": problem.parametric, "param_error": math.nan, "note": ""}
        try:
            params, converged = problem.fit_parametric(x, y, w)
        except ValueError as err:
            rec["note"] = str(err)
        else:
            rec["param_error"] = float(np.linalg.norm(params - problem.reference))
            eta = params[0] + problem.x_test @ params[1:]
            pred = eta if problem.task == "regression" else scipy.special.expit(eta)  # no overflow
            rec.update(problem.metrics(pred))
            if not converged:
                rec["note"] = "solver did not fully converge (near-separable data)"
        out.append(rec)
    if not (problem.boosting and job.boosting):
        return out
    rec = {**job.record, "model": "gradient boosting", "param_error": math.nan, "note": ""}
    keep = w > 0
    if problem.task == "classification" and np.unique(y[keep]).size < 2:
        rec["note"] = "the training rows hold only one class"
    else:
        model = _boosting(problem.task, problem.seed, problem.mask, problem.boosting_iterations)
        weights = w[keep]
        # equal weights are no weights (and skip sklearn's slow weighted binning)
        uniform = bool(np.all(weights == weights[0]))
        model.fit(codes[keep], y[keep], sample_weight=None if uniform else weights)
        if problem.task == "regression":
            pred = model.predict(problem.c_test)
        else:
            pred = model.predict_proba(problem.c_test)[:, 1]
        rec.update(problem.metrics(pred))
    out.append(rec)
    return out


def _run_direct(
    problem: _Problem,
    label: str,
    fit: DirectFit,
    parts: list[tuple[np.ndarray, np.ndarray]],
    client_names: Sequence[str] = (),
) -> dict[str, Any]:
    """The record of one model fitted directly across the clients (``direct=``).

    Parameters
    ----------
    problem : _Problem
        The utility problem (design, reference parameters, test rows).
    label : str
        The fit's label (its row's ``setting``).
    fit : DirectFit
        The fit: every client's ``(x, y)`` and the task -> parameters.
    parts : list of (numpy.ndarray, numpy.ndarray)
        Every client's design matrix and coded response, in the order of
        ``client_names``.
    client_names : sequence of str
        The clients' names, for the fit's messages (:func:`_in_client_names`).

    Returns
    -------
    dict
        The row: ``param_error`` and the test metrics, or a ``note`` saying why the
        fit gave none (its error, or parameters too large to score).
    """
    rec = {
        "client": "all clients", "n_local": sum(len(y) for _, y in parts), "mode": "direct",
        "setting": label, "r": math.nan, "lam": math.nan,
        "label": f"{_LABELS['direct']} ({label})", "n_train": sum(len(y) for _, y in parts),
        "n_synthetic": 0, "model": problem.parametric, "param_error": math.nan, "note": "",
    }  # fmt: skip
    names = problem.design.feature_names
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            params = np.asarray(fit(parts, problem.task), dtype=np.float64)
    except (ValueError, RuntimeError) as err:  # e.g. a site too small: a note, no row lost
        rec["note"] = _in_client_names(str(err), client_names, names)
        return rec
    finally:  # the fit's warnings (e.g. "the privacy noise dominates") reach the caller
        # and, in the report's names, the row's note (was: on stderr only)
        for w in caught:
            if issubclass(w.category, UserWarning):
                text = _in_client_names(str(w.message), client_names, names)
                rec["note"] = f"{rec['note']} {text}".strip()
                warnings.warn(text, w.category, stacklevel=2)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    # The privacy noise of a tiny mu (1e-300) makes parameters of 1e300 and more, whose
    # squares and exponentials overflow: scored without numpy's overflow warnings, and
    # a row whose numbers would not be finite gets a note instead (was: "overflow
    # encountered in exp" on stderr and a parameter error of inf)
    with np.errstate(over="ignore", invalid="ignore"):
        diff = params - problem.reference
        scale = float(np.max(np.abs(diff))) if diff.size else 0.0
        error = scale * float(np.linalg.norm(diff / scale)) if 0 < scale < math.inf else scale
        eta = params[0] + problem.x_test @ params[1:]
        finite = math.isfinite(error) and bool(np.all(np.isfinite(eta)))
        scores = (
            problem.metrics(eta if problem.task == "regression" else 1 / (1 + np.exp(-eta)))
            if finite
            else {}
        )
    if not finite or any(math.isinf(v) for v in scores.values()):  # nan: no score (r2 of
        # a constant test target, the AUC of one class), as for every other row
        largest = float(np.max(np.abs(params))) if params.size else math.nan
        rec["note"] = (
            f"not scored: its parameters reach {largest:.3g}, beyond what float64 "
            "arithmetic can score (the privacy noise of a tiny mu?); a larger mu gives a "
            f"usable fit {rec['note']}"
        ).strip()
        return rec
    rec["param_error"] = error
    rec.update(scores)
    return rec


def _in_client_names(text: str, client_names: Sequence[str], features: Sequence[str]) -> str:
    """A direct fit's message with the names the fit gave the clients and features
    (``'site1'``, ``'site2'``, ... in the clients' order, and ``'x0'``, ``'x1'``, ... in
    the design's, quoted as fits' messages quote names:
    :func:`fits.analysis.glm.direct_fit` builds its tables so) replaced by their own
    names (was: "site(s) 'site3' (2 rows) too small" for the client ``c_two``).

    Parameters
    ----------
    text : str
        The message.
    client_names : sequence of str
        The clients' names, in the order of the fit's ``parts``.
    features : sequence of str
        The design's feature names, in the order of its columns.

    Returns
    -------
    str
        The message in the report's names; a number beyond the clients (or the
        features) is left as it is.
    """
    import re

    def site(match: re.Match[str]) -> str:
        k = int(match.group(1)) - 1
        return repr(str(client_names[k])) if k < len(client_names) else match.group(0)

    def feature(match: re.Match[str]) -> str:
        j = int(match.group(1))
        return repr(str(features[j])) if j < len(features) else match.group(0)

    text = re.sub(r"'site([1-9]\d*)'", site, text)
    return re.sub(r"'x(\d+)'", feature, text)


def _result_table(records: list[dict[str, Any]], task: str) -> pd.DataFrame:
    """The records as :attr:`UtilityResult.table` (the task's metric columns only)."""
    columns = [
        "client", "n_local", "mode", "setting", "r", "lam", "label", "n_train", "n_synthetic",
        "model", "param_error", "mse", "r2", "accuracy", "roc_auc", "note",
    ]  # fmt: skip
    table = pd.DataFrame.from_records(records)
    for col in columns:
        if col not in table.columns:
            table[col] = math.nan
    table = table[columns]
    if task == "regression":
        return table.drop(columns=["accuracy", "roc_auc"])
    return table.drop(columns=["mse", "r2"])
