"""Simple fidelity diagnostics (paper appendix D.1).

Per-column fidelity (Kolmogorov-Smirnov or total variation), per-pair fidelity
(correlation or contingency tables), and a column-wise independent resample that
serves as a "no dependence" floor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from fits.evaluation.encoding import (
    as_rng,
    category_codes,
    discretize,
    numeric_values,
    pearson,
    resolve_columns,
    total_variation,
)

__all__ = ["column_fidelity", "independent_resample", "pair_fidelity"]


def independent_resample(
    frame: pd.DataFrame,
    n: int | None = None,
    seed: int | np.random.Generator | None = None,
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
    seed : int or numpy.random.Generator, optional
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
    rng = as_rng(seed)
    out = {}
    for col in frame.columns:
        idx = rng.integers(0, len(frame), size=n_rows) if n_rows else np.zeros(0, dtype=int)
        out[col] = frame[col].iloc[idx].reset_index(drop=True)
    return pd.DataFrame(out, columns=frame.columns)


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
    cols = resolve_columns(real, synthetic, kinds, columns)
    records = []
    for col in cols:
        kind = kinds[col]
        if kind == "continuous":
            xr = numeric_values(real[col], col, "real")
            xs = numeric_values(synthetic[col], col, "synthetic")
            score = 1.0 - float(stats.ks_2samp(xr, xs).statistic)
            metric = "KS"
        else:
            codes_r, codes_s, n_cat = category_codes(real[col], synthetic[col])
            tv = total_variation(
                np.bincount(codes_r, minlength=n_cat), np.bincount(codes_s, minlength=n_cat)
            )
            score = 1.0 - tv
            metric = "TV"
        records.append({"column": col, "kind": kind, "metric": metric, "score": score})
    return pd.DataFrame.from_records(records, columns=["column", "kind", "metric", "score"])


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
    cols = resolve_columns(real, synthetic, kinds, columns)
    coded: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
    records = []
    for col_a, col_b in combinations(cols, 2):
        if kinds[col_a] == "continuous" and kinds[col_b] == "continuous":
            corr_r = pearson(
                numeric_values(real[col_a], col_a, "real"),
                numeric_values(real[col_b], col_b, "real"),
            )
            corr_s = pearson(
                numeric_values(synthetic[col_a], col_a, "synthetic"),
                numeric_values(synthetic[col_b], col_b, "synthetic"),
            )
            score = 1.0 - abs(corr_r - corr_s) / 2.0
            metric = "correlation"
        else:
            for col in (col_a, col_b):
                if col not in coded:
                    coded[col] = discretize(real[col], synthetic[col], kinds[col], col, bins)
            ar, as_, na = coded[col_a]
            br, bs, nb = coded[col_b]
            tv = total_variation(
                np.bincount(ar * nb + br, minlength=na * nb),
                np.bincount(as_ * nb + bs, minlength=na * nb),
            )
            score = 1.0 - tv
            metric = "contingency"
        records.append({"col_a": col_a, "col_b": col_b, "metric": metric, "score": score})
    return pd.DataFrame.from_records(records, columns=["col_a", "col_b", "metric", "score"])
