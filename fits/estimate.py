"""The lower-level entry point: federated conditional CDF estimates for given queries.

:func:`estimate_conditional_cdf` runs Algorithm 1 on client tables for one response
column given a list of covariate columns, at query points the caller chooses, on a grid
the caller may choose.  It is what the synthesizer does for each chain column, exposed
so the estimator can be inspected and checked -- for example against a pooled
local-linear fit (Proposition 3.1), with ``scaling`` making every client standardize
the covariates the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fits.core.kernels import Kernel
from fits.deploy.inprocess import PolicySpec, Tables, build_federation
from fits.federation.coordinator import Coordinator
from fits.io import from_arrow_dtypes

__all__ = ["ConditionalCDF", "estimate_conditional_cdf"]


@dataclass
class ConditionalCDF:
    """Result of :func:`estimate_conditional_cdf`.

    Attributes
    ----------
    grid : ndarray of shape (L,)
        The response grid (continualized scale for a discrete response).
    values : ndarray of shape (B, L)
        The estimates F(grid | query), one row per query.
    uploaded_bytes : list of int
        Bytes each client uploaded.
    coordinator : Coordinator
        The coordinator, for further queries on the same federation.
    """

    grid: np.ndarray
    values: np.ndarray
    uploaded_bytes: list[int]
    coordinator: Coordinator


def estimate_conditional_cdf(
    tables: Tables,
    covariates: Sequence[str],
    response: str,
    queries: np.ndarray | pd.DataFrame,
    *,
    grid: np.ndarray | None = None,
    kernel: str | Kernel | Sequence[str | Kernel] | Mapping[str, str | Kernel] = "knn",
    kinds: Mapping[str, str] | None = None,
    postprocess: bool = True,
    scaling: tuple[np.ndarray, np.ndarray] | None = None,
    ridge: float = 1e-8,
    seed: int | None = None,
    site_policy: PolicySpec = None,
    **options: object,
) -> ConditionalCDF:
    """Federated local-linear estimate of F(response | covariates) at query points.

    Parameters
    ----------
    tables : sequence or mapping of DataFrame
        One table per client.
    covariates : sequence of str
        Conditioning columns (at least one).
    response : str
        The column whose conditional CDF is estimated.
    queries : ndarray of shape (B, d) or DataFrame
        Query points.  An array is read on the continualized scale (a discrete
        covariate's value anywhere in its category's interval); a DataFrame holds raw
        values (category labels), which are mapped to their interval midpoints.
    grid : ndarray, optional
        Response grid; default the synthesizer's grid for that column (for a discrete
        response sampled by mass, two interior points per category interval; pass
        ``discrete_sampling="grid"`` for the fine aligned grid).
    kernel : str, Kernel, or one per client
        The clients' kernel schemes.
    kinds : mapping, optional
        Column kind overrides.
    postprocess : bool
        Apply clipping, monotonization and normalization (default) or return the raw
        aggregated sums of eq. 10.
    scaling : (loc, scale), optional
        One common covariate standardization for all clients (arrays of length d, on
        the continualized scale), instead of each client's own.
    ridge : float
        Relative ridge of eq. 7; 0 gives the unregularized estimator.  The collinearity
        guard of eq. 7 (:func:`~fits.core.cdf.solve_first_row`) is a separate option,
        ``collinearity=`` (default 1e-2, 0 off), and changes only queries whose local
        design has a direction of local spread under a tenth of the largest.
    seed : int, optional
        Seed of the clients' continualization.
    site_policy : SitePolicy, or one per client, optional
        The clients' policies (:class:`~fits.federation.policy.SitePolicy`; default
        the default policy, whose effective-rows floor makes a client widen its kernel
        for a query with fewer than 5 effective rows, or abstain if it holds fewer
        rows).
    **options
        Further :class:`~fits.federation.coordinator.Coordinator` options.

    Returns
    -------
    ConditionalCDF
    """
    covariates = list(covariates)
    if not covariates:
        raise ValueError("give at least one covariate (for no covariates, use marginal_cdf)")
    if response in covariates:
        raise ValueError(f"{response!r} is both a covariate and the response")
    columns = [*covariates, response]
    named = (
        [(str(k), f) for k, f in tables.items()]
        if isinstance(tables, Mapping)
        else [(f"client {k + 1}", f) for k, f in enumerate(tables)]
    )
    subset: dict[str, pd.DataFrame] = {}
    for name, frame in named:
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"{name}: column(s) {missing} are missing")
        subset[name] = from_arrow_dtypes(frame[columns])  # Arrow dates, decimals, ...
    _, transport = build_federation(subset, kernel, policy=site_policy)
    coord = Coordinator(transport, ridge=ridge, **options)  # type: ignore[arg-type]
    # no rule detection: rules change how rows are drawn, not a conditional CDF
    kinds_ = {c: k for c, k in (kinds or {}).items() if c in columns}
    coord.setup(kinds=kinds_, order=columns, rules=False)
    if scaling is not None:
        loc = np.append(np.asarray(scaling[0], dtype=float), 0.0)
        scale = np.append(np.asarray(scaling[1], dtype=float), 1.0)
        scaling = (loc, scale)
    coord.configure(seed, scaling=scaling, grids={response: grid} if grid is not None else None)
    if isinstance(queries, pd.DataFrame):
        queries = from_arrow_dtypes(queries)
        x = np.column_stack([_raw_to_scale(coord, c, queries[c]) for c in covariates])
    else:
        x = np.atleast_2d(np.asarray(queries, dtype=float))
    values = coord.conditional_cdf(response, x, postprocess=postprocess)
    return ConditionalCDF(coord.grids[response], values, list(transport.uploaded_bytes), coord)


def _raw_to_scale(coord: Coordinator, column: str, values: pd.Series) -> np.ndarray:
    enc = coord.encoders[column]
    if enc.spec.is_discrete:
        return enc.midpoints[enc.to_codes(values, client="queries")]
    return enc.to_numeric(values, client="queries")
