"""Would my inference come out the same?  Federated intervals against a synthetic table.

:func:`inference_check` fits one linear regression twice: across the real sites by
FedLSA with multiplier-bootstrap intervals (:func:`fits.analysis.lsa.fedlsa`; the
rows never leave the sites), and on the synthetic table by ordinary least squares with
heteroskedasticity-robust HC1 intervals, on the *same* design (the federation's
schema, its standardization of the numeric features and its one-hot coding).  Per
coefficient it reports

* the confidence-interval overlap of Karr, Kohnen, Oganian, Reiter and Sanil (2006,
  "A framework for evaluating the utility of data altered to protect
  confidentiality", The American Statistician 60(3)):
  ``J = (U - L) / (2 (U_f - L_f)) + (U - L) / (2 (U_s - L_s))`` with
  ``L = max(L_f, L_s)``, ``U = min(U_f, U_s)``: the average share of each interval
  covered by the other; 1 for identical intervals, 0 when they just touch, negative
  (by how far they are apart) when they are disjoint, as in Karr et al. and synthpop;
* whether the synthetic estimate lies inside the federated interval.

The one summary number is the mean overlap over the coefficients (the intercept
included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from fits.analysis.design import DesignBuilder, DesignError, DesignSpec
from fits.analysis.lsa import FedLSAError, FedLSAResults, fedlsa
from fits.federation.transport import Transport

__all__ = ["InferenceCheck", "ci_overlap", "inference_check", "ols_hc1"]


def ci_overlap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Karr et al. (2006) interval overlap of rows of ``a`` and ``b`` (shape (d, 2)).

    ``J = (U - L) / (2 (Ua - La)) + (U - L) / (2 (Ub - Lb))``, ``L`` the larger lower
    end and ``U`` the smaller upper end; negative when the intervals are disjoint.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    inter = np.minimum(a[:, 1], b[:, 1]) - np.maximum(a[:, 0], b[:, 0])
    return 0.5 * inter / (a[:, 1] - a[:, 0]) + 0.5 * inter / (b[:, 1] - b[:, 0])


def ols_hc1(x: np.ndarray, y: np.ndarray, alpha: float = 0.05) -> tuple[np.ndarray, ...]:
    """OLS coefficients, HC1 standard errors and normal-quantile intervals.

    HC1 (MacKinnon and White 1985): ``n / (n - d) (X'X)^-1 X' diag(e^2) X (X'X)^-1``;
    the intervals are ``beta +- z_{1-alpha/2} se`` (statsmodels' ``OLS(...).fit(
    cov_type="HC1").conf_int(alpha)``).

    Raises
    ------
    FedLSAError
        The design is rank deficient or has no more rows than columns.
    """
    n, d = x.shape
    if n <= d:
        raise FedLSAError(f"OLS needs more rows than coefficients: {n} rows, {d} coefficients")
    q, r = np.linalg.qr(x)
    diag = np.abs(np.diag(r))
    if diag.min() <= 1e-10 * diag.max():
        raise FedLSAError("the design is rank deficient (collinear features): no OLS intervals")
    beta = np.linalg.solve(r, q.T @ y)
    e = y - x @ beta
    r_inv = np.linalg.inv(r)
    bread = r_inv @ r_inv.T  # (X'X)^-1
    meat = (x * (e**2)[:, None]).T @ x
    cov = n / (n - d) * bread @ meat @ bread
    se = np.sqrt(np.diag(cov))
    z = norm.ppf(1.0 - alpha / 2.0)
    return beta, se, np.column_stack([beta - z * se, beta + z * se])


def _check_synthetic_table(synthetic: pd.DataFrame, spec: DesignSpec) -> None:
    """Refuse a synthetic table the federation's design cannot code, in its own words
    (was: the site-side errors, "missing from the site's table" and "leave those rows
    out with missing='drop' (fits analyze --missing drop)", which name a site and a
    command that do not apply): a column of the model it lacks, a missing value where
    the sites' design has none, a category the sites do not hold."""
    if not isinstance(synthetic, pd.DataFrame):
        raise FedLSAError(
            f"give the synthetic table as a DataFrame, got {type(synthetic).__name__}"
        )
    used = [*spec.numeric, *spec.nominal, *spec.extra_columns]
    used += [spec.target] if spec.target is not None else []
    absent = [c for c in used if c not in synthetic.columns]
    if absent:
        raise FedLSAError(
            f"the synthetic table lacks column(s) {absent} of the federated regression (it "
            f"uses {used}): compare a synthetic table that holds them (synthesized from the "
            "same sites' tables), or leave them out of the check (features=)"
        )
    holes = {}
    for c in used:
        n = int(synthetic[c].isna().sum())
        if n and not (c in spec.nominal and None in spec.nominal[c]):
            holes[c] = n
    if holes and spec.missing != "drop":
        raise FedLSAError(
            f"the synthetic table has missing values (column: count {holes}) where the "
            "sites' design has none, so OLS on it cannot use those rows: leave them out of "
            "the synthetic table before the check (synthetic.dropna(subset=[...])), or "
            "pass missing='drop', which leaves such rows out at the sites and in the "
            "synthetic table alike"
        )
    for c, levels in spec.nominal.items():
        known = [v for v in levels if v is not None]
        s = synthetic[c]
        codes = pd.Categorical(s.astype(object).where(s.notna(), None), categories=known).codes
        new = sorted({str(v) for v in s[(np.asarray(codes) < 0) & s.notna().to_numpy()]})
        if new:
            raise FedLSAError(
                f"the synthetic table's column {c!r} holds categor(ies) {new[:5]} that no "
                f"site holds (the sites': {[str(v) for v in known][:10]}), so the federated "
                "design has no coefficient for them: check the synthesizer's output for "
                "this column, or leave it out of the check (features=)"
            )


def _check_synthetic_design(x: np.ndarray, spec: DesignSpec, names: Sequence[str]) -> None:
    """Name what makes the synthetic table's design rank deficient, where the
    federation's is not (FedLSA checked it): a level of a nominal feature with no rows
    in the synthetic table (its one-hot column is all zeros), a numeric feature constant
    there, or another exact relation among its columns.  Was: "the design is rank
    deficient (collinear features)", which read as a fault of the sites' data."""
    n, d = x.shape
    if n <= d:
        raise FedLSAError(
            f"the synthetic table has {n} row(s), not more than the {d} coefficients of the "
            "federation's design: OLS on it has no intervals; synthesize more rows"
        )
    levels = {
        f"{name}={'<missing>' if v is None else v}": (name, v)
        for name, vals in spec.nominal.items()
        for v in vals
    }
    empty = [j for j in range(d) if names[j] in levels and not np.any(x[:, j])]
    if empty:
        listed = ", ".join(
            f"{levels[names[j]][0]} = {levels[names[j]][1]!r}"
            if levels[names[j]][1] is not None
            else f"{levels[names[j]][0]} missing"
            for j in empty
        )
        feats = sorted({levels[names[j]][0] for j in empty})
        raise FedLSAError(
            f"the synthetic table has no rows of {listed} (a level the sites hold), so OLS "
            "on it cannot estimate that level's coefficient and the intervals cannot be "
            "compared: synthesize more rows (a rare level may need many), check that the "
            f"synthesizer keeps the level, or leave the feature(s) {feats} out of the "
            "check (features=)"
        )
    start = 1 if spec.intercept else 0
    flat = [
        names[j]
        for j in range(start, d)
        if names[j] not in levels and np.ptp(x[:, j]) <= 1e-12 * max(1.0, np.abs(x[:, j]).max())
    ]
    if flat and spec.intercept:
        raise FedLSAError(
            f"numeric feature(s) {flat} take one value in every row of the synthetic "
            "table (not at the sites), so OLS on it cannot estimate their coefficients: "
            "check the synthesizer's output for these columns, or leave them out of the "
            "check (features=)"
        )
    _, sv, vt = np.linalg.svd(x, full_matrices=False)
    null = vt[sv <= 1e-10 * sv[0]]
    if len(null):
        cols = {int(j) for v in null for j in np.flatnonzero(np.abs(v) > 1e-6 * np.abs(v).max())}
        involved = [names[j] for j in sorted(cols) if not (spec.intercept and j == 0)]
        with_intercept = " and the intercept" if spec.intercept and 0 in cols else ""
        raise FedLSAError(
            f"the synthetic table's design is rank deficient where the sites' pooled design "
            f"is not: the columns {involved}{with_intercept} are linearly dependent in its "
            "rows, so OLS on "
            "it has no intervals to compare; check the synthesizer's output for these "
            "columns, or leave one of them out of the check (features=)"
        )


@dataclass
class InferenceCheck:
    """Federated (FedLSA) against synthetic (OLS, HC1) inference, per coefficient.

    Attributes
    ----------
    table : DataFrame
        One row per coefficient: ``federated``, ``federated_lower``,
        ``federated_upper``, ``synthetic``, ``synthetic_lower``, ``synthetic_upper``,
        ``overlap`` (Karr et al.) and ``inside`` (the synthetic estimate lies in the
        federated interval).
    mean_overlap : float
        The summary number: mean overlap over the coefficients.
    share_inside : float
        Share of synthetic estimates inside the federated intervals.
    level : float
        Confidence level of the intervals.
    target : str
    federated : FedLSAResults
    """

    table: pd.DataFrame
    mean_overlap: float
    share_inside: float
    level: float
    target: str
    federated: FedLSAResults

    def to_dict(self) -> dict:
        """JSON-ready figures (for the report)."""
        return {
            "target": self.target,
            "level": self.level,
            "mean_overlap": self.mean_overlap,
            "share_inside": self.share_inside,
            "converged": bool(self.federated.converged),
            "rounds": self.federated.rounds,
            "bytes_up": self.federated.bytes_up,
            "coefficients": [
                {"name": str(name), **{k: _native(v) for k, v in row.items()}}
                for name, row in self.table.iterrows()
            ],
        }


def _native(v: object) -> object:
    return v.item() if isinstance(v, np.generic) else v


def inference_check(
    clients: Mapping[str, pd.DataFrame] | Sequence[pd.DataFrame] | Transport,
    synthetic: pd.DataFrame,
    target: str,
    features: Sequence[str] | None = None,
    *,
    level: float = 0.95,
    **fedlsa_kwargs,
) -> InferenceCheck:
    """Compare the linear regression of ``target`` across the sites and on ``synthetic``.

    Parameters
    ----------
    clients : mapping or sequence of DataFrames, or Transport
        The real sites' tables (an in-process federation is built), or a transport
        reaching :class:`fits.analysis.lsa.FedLSASite` sites.
    synthetic : DataFrame
        The synthetic table (same columns).
    target : str
        Numeric response.
    features : sequence of str, optional
        Feature columns (default: every other column).
    level : float
        Confidence level of both intervals (default 0.95).
    **fedlsa_kwargs
        Passed to :func:`fits.analysis.lsa.fedlsa` (regime, rounds, local_steps,
        seed...).  Default here: ``regime="one_pass"`` (every row once, H = 1, the
        default rounds of :func:`fits.analysis.lsa.run_fedlsa`), whose intervals are
        about as wide as the pooled OLS HC1 intervals (``docs/benchmarks.md``, "Regime
        one_pass"): the overlap then compares intervals of the same kind and width, so a
        faithful synthetic table can reach an overlap near 1.  (The paper's regimes give
        intervals 4.5-22 times wider, set by the last step size; with them a perfect
        table overlaps by about 0.7 at most.)  With ``regime="paper"`` the defaults
        are the decreasing regime S2 with ``gamma_eta = 0.5`` and no growth of the local
        steps, ``local_steps = 20``, and as many rounds as the smallest site allows
        without reusing a row, at most 250 (200 with a transport).

    Returns
    -------
    InferenceCheck
    """
    if not 0.0 < level < 1.0:
        raise FedLSAError(f"level must lie in (0, 1), got {level}")
    kw = dict(fedlsa_kwargs)
    kw.setdefault("regime", "one_pass")
    paper = kw["regime"] == "paper"
    if paper:
        kw.setdefault("gamma_eta", 0.5)
        kw.setdefault("local_steps", 20)
    if isinstance(clients, Transport):
        if paper:
            kw.setdefault("rounds", 200)
        res = fedlsa(None, target, features, transport=clients, **kw)
    else:
        frames = list(clients.values()) if isinstance(clients, Mapping) else list(clients)
        if paper and "rounds" not in kw and frames:
            kw["rounds"] = max(1, min(250, min(len(f) for f in frames) // kw["local_steps"]))
        res = fedlsa(clients, target, features, **kw)
    alpha = 1.0 - level
    _check_synthetic_table(synthetic, res.extra["design"])
    try:
        builder = DesignBuilder(synthetic, res.extra["design"], site="synthetic table")
        x = builder.matrix(res.extra["standardization"])
        y = builder.target()
    except DesignError as exc:
        raise FedLSAError(str(exc)) from None
    _check_synthetic_design(x, res.extra["design"], res.feature_names)
    beta, _, syn_ci = ols_hc1(x, y, alpha)
    fed_ci = res.conf_int(alpha).to_numpy()
    overlap = ci_overlap(fed_ci, syn_ci)
    inside = (fed_ci[:, 0] <= beta) & (beta <= fed_ci[:, 1])
    table = pd.DataFrame(
        {
            "federated": res.coef_,
            "federated_lower": fed_ci[:, 0],
            "federated_upper": fed_ci[:, 1],
            "synthetic": beta,
            "synthetic_lower": syn_ci[:, 0],
            "synthetic_upper": syn_ci[:, 1],
            "overlap": overlap,
            "inside": inside,
        },
        index=pd.Index(res.feature_names, name="coefficient"),
    )
    return InferenceCheck(
        table=table,
        mean_overlap=float(overlap.mean()),
        share_inside=float(inside.mean()),
        level=level,
        target=target,
        federated=res,
    )
