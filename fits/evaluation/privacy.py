"""Privacy checks for a synthetic table: distance to closest record and exact copies.

Two questions a data steward asks before releasing a synthetic table:

* **Does it copy training rows?** :func:`privacy_checks` counts the synthetic rows
  that are identical, in every compared column, to some training row, and compares
  the share with that of real held-out rows (in a table of discrete columns real
  rows repeat too, so some matches are expected).
* **Does it sit closer to the training rows than new real data would?** The
  *distance to closest record* (DCR) of a row is the Euclidean distance to its
  nearest training row. If the synthesizer memorized its input, synthetic rows are
  much closer to training rows than real held-out rows are. The check compares the
  two DCR distributions: their quantiles, the ratio of their medians (about 1 or
  more: no sign of memorization; well below 1: look closer), and the share of
  synthetic rows closer than the held-out rows' 5 % quantile (about 5 % expected).

Distances use the energy distance's encoding (:mod:`fits.evaluation`): continuous and
ordinal columns standardized by the training rows' mean and sd, nominal columns one-hot
with each block divided by sqrt(2) (two different categories are at distance 1).
Nearest neighbours come from scikit-learn's :class:`~sklearn.neighbors.NearestNeighbors`
(a KD-tree in few dimensions, chunked brute force in many), so memory stays bounded.

These checks find copying and near-copying; they are not a formal privacy guarantee
(FITS makes none beyond sharing only aggregate statistics during fitting).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.neighbors import NearestNeighbors

from fits.evaluation.encoding import as_rng, check_tables, encode_many, row_keys

__all__ = ["QUANTILES", "PrivacyResult", "distance_to_closest_record", "privacy_checks"]

#: Quantiles of the DCR distributions that :func:`privacy_checks` reports.
QUANTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)


def _copies(train: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Boolean mask of the query rows that equal some training row exactly."""
    return np.isin(row_keys(query), row_keys(train))


def distance_to_closest_record(
    train: np.ndarray,
    query: np.ndarray | None = None,
    *,
    self_index: np.ndarray | None = None,
    batch_size: int = 4096,
) -> np.ndarray:
    """Euclidean distance from each query row to its nearest training row.

    Parameters
    ----------
    train : numpy.ndarray
        ``(n, d)`` encoded training rows.
    query : numpy.ndarray, optional
        ``(m, d)`` encoded rows. Omit it together with ``self_index`` given.
    self_index : numpy.ndarray, optional
        Leave-one-out mode: the query rows are ``train[self_index]``, and each one's
        own entry is skipped (an exact duplicate elsewhere in ``train`` still counts,
        at distance 0).
    batch_size : int, default 4096
        Query rows per batch (bounds memory).

    Returns
    -------
    numpy.ndarray
        ``(m,)`` distances; exact copies of a training row get exactly 0.
    """
    train = np.asarray(train, dtype=np.float64)
    if self_index is not None:
        self_index = np.asarray(self_index, dtype=np.int64)
        query = train[self_index]
    elif query is None:
        raise ValueError("give `query` rows or `self_index`")
    query = np.asarray(query, dtype=np.float64)
    k = 1 if self_index is None else 2
    if train.shape[0] < k:
        raise ValueError("too few training rows for a nearest-neighbour distance")
    index = NearestNeighbors(n_neighbors=k).fit(train)
    out = np.empty(query.shape[0])
    for start in range(0, query.shape[0], batch_size):
        stop = min(start + batch_size, query.shape[0])
        dist, ind = index.kneighbors(query[start:stop])
        if self_index is None:
            out[start:stop] = dist[:, 0]
        else:
            # the nearest entry that is not the row itself
            is_self = ind[:, 0] == self_index[start:stop]
            out[start:stop] = np.where(is_self, dist[:, 1], dist[:, 0])
    if self_index is None:
        out[_copies(train, query)] = 0.0
    else:
        _, inverse, counts = np.unique(row_keys(train), return_inverse=True, return_counts=True)
        out[counts[inverse.reshape(-1)][self_index] > 1] = 0.0
    np.maximum(out, 0.0, out=out)
    return out


@dataclass
class PrivacyResult:
    """What :func:`privacy_checks` found.

    Attributes
    ----------
    synthetic_dcr, holdout_dcr : numpy.ndarray
        Distances to the closest training record of the (possibly subsampled)
        synthetic rows and real held-out rows.
    synthetic_copies, holdout_copies : int
        Synthetic (held-out) rows that copy a training row exactly, among all of
        them (no subsample: the check is a hash look-up). Leave-one-out baseline:
        training rows with an exact duplicate among the other training rows.
    baseline : str
        ``"holdout"`` (real held-out rows) or ``"leave-one-out"`` (training rows
        against the other training rows, when no held-out rows were given).
    n_train : int
        Training rows searched.
    columns : list of str
        The compared columns.
    notes : list of str
        What was subsampled.
    n_synthetic, n_holdout : int
        Rows checked for exact copies (all synthetic rows; all baseline rows).
    """

    synthetic_dcr: np.ndarray = field(repr=False)
    holdout_dcr: np.ndarray = field(repr=False)
    synthetic_copies: int
    holdout_copies: int
    baseline: str
    n_train: int
    columns: list[str]
    notes: list[str] = field(default_factory=list)
    n_synthetic: int = 0
    n_holdout: int = 0

    @property
    def synthetic_copy_share(self) -> float:
        """Share of synthetic rows that copy a training row exactly."""
        return self.synthetic_copies / max(1, self.n_synthetic or self.synthetic_dcr.size)

    @property
    def holdout_copy_share(self) -> float:
        """Share of held-out rows that equal a training row exactly."""
        return self.holdout_copies / max(1, self.n_holdout or self.holdout_dcr.size)

    @property
    def median_ratio(self) -> float:
        """Median synthetic DCR / median held-out DCR (NaN when the latter is 0)."""
        denominator = float(np.median(self.holdout_dcr))
        if denominator <= 0.0:
            return math.nan
        return float(np.median(self.synthetic_dcr)) / denominator

    @property
    def share_below_holdout_p5(self) -> float:
        """Share of synthetic rows closer than the held-out rows' 5 % DCR quantile."""
        threshold = float(np.quantile(self.holdout_dcr, 0.05))
        return float(np.mean(self.synthetic_dcr < threshold))

    def quantiles(self) -> pd.DataFrame:
        """DCR quantiles: rows ``synthetic`` and ``holdout``, one column per quantile."""
        return pd.DataFrame(
            [
                np.quantile(self.synthetic_dcr, QUANTILES),
                np.quantile(self.holdout_dcr, QUANTILES),
            ],
            index=["synthetic", "holdout"],
            columns=[f"q{round(q * 100):02d}" for q in QUANTILES],
        )

    @property
    def flag(self) -> bool:
        """True when the checks suggest copying or memorization (look closer).

        Raised when the synthetic copy share exceeds the held-out rows' by more than
        one percentage point, or the median ratio is below 0.8, or more than 10 % of
        the synthetic rows are closer than the held-out 5 % quantile.
        """
        ratio = self.median_ratio
        return bool(
            self.synthetic_copy_share > self.holdout_copy_share + 0.01
            or (not math.isnan(ratio) and ratio < 0.8)
            or self.share_below_holdout_p5 > 0.10
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no per-row distances)."""
        q = self.quantiles()
        ratio = self.median_ratio
        return {
            "baseline": self.baseline,
            "n_train": self.n_train,
            "n_synthetic_checked": int(self.synthetic_dcr.size),
            "n_holdout_checked": int(self.holdout_dcr.size),
            "n_synthetic_rows": int(self.n_synthetic or self.synthetic_dcr.size),
            "n_holdout_rows": int(self.n_holdout or self.holdout_dcr.size),
            "columns": list(self.columns),
            "synthetic_copies": self.synthetic_copies,
            "synthetic_copy_share": self.synthetic_copy_share,
            "holdout_copies": self.holdout_copies,
            "holdout_copy_share": self.holdout_copy_share,
            "dcr_quantiles": {
                row: {col: float(q.loc[row, col]) for col in q.columns} for row in q.index
            },
            "median_ratio": None if math.isnan(ratio) else ratio,
            "share_below_holdout_p5": self.share_below_holdout_p5,
            "flag": self.flag,
            "notes": list(self.notes),
        }


def privacy_checks(
    train: pd.DataFrame,
    synthetic: pd.DataFrame,
    kinds: Mapping[str, str],
    *,
    holdout: pd.DataFrame | None = None,
    columns: Sequence[str] | None = None,
    max_rows: int | None = 20_000,
    seed: int | np.random.Generator | None = 0,
) -> PrivacyResult:
    """Distance to closest record and exact copies, against a real baseline.

    Parameters
    ----------
    train : DataFrame
        The real rows the synthesizer was fitted on (all clients' rows together).
    synthetic : DataFrame
        The synthetic table.
    kinds : mapping
        Column -> kind.
    holdout : DataFrame, optional
        Real rows the synthesizer never saw (the test split). Without it the
        baseline is leave-one-out: training rows' distance to the *other*
        training rows (a row's duplicate counts, at distance 0).
    columns : sequence of str, optional
        Columns to compare (default: every column of ``kinds``).
    max_rows : int or None, default 20,000
        At most this many synthetic rows and this many baseline rows are checked
        (uniform subsamples; every training row is always searched). None: all.
    seed : int or numpy.random.Generator, optional
        Seed of the subsamples.

    Returns
    -------
    PrivacyResult
    """
    cols = list(kinds) if columns is None else list(columns)
    names = ["training", "synthetic"] + (["held-out"] if holdout is not None else [])
    frames = [train, synthetic] + ([holdout] if holdout is not None else [])
    cols = check_tables(frames, names, kinds, cols)
    encoded, _ = encode_many(frames, kinds, cols, names)
    x_train, x_syn = encoded[0], encoded[1]
    rng = as_rng(seed)
    notes: list[str] = []

    def subsample(x: np.ndarray, what: str) -> np.ndarray:
        if max_rows is not None and x.shape[0] > max_rows:
            notes.append(
                f"distance to closest record of {max_rows:,} of {x.shape[0]:,} {what} rows "
                "(uniform subsample); exact copies checked on all rows"
            )
            return x[np.sort(rng.choice(x.shape[0], size=max_rows, replace=False))]
        return x

    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be a positive integer or None, got {max_rows}")
    synthetic_copies = int(np.count_nonzero(_copies(x_train, x_syn)))
    n_synthetic = int(x_syn.shape[0])
    synthetic_dcr = distance_to_closest_record(x_train, subsample(x_syn, "synthetic"))
    if holdout is not None:
        holdout_copies = int(np.count_nonzero(_copies(x_train, encoded[2])))
        n_holdout = int(encoded[2].shape[0])
        holdout_dcr = distance_to_closest_record(x_train, subsample(encoded[2], "held-out"))
        baseline = "holdout"
    else:
        if x_train.shape[0] < 2:
            raise ValueError("the leave-one-out baseline needs at least two training rows")
        rows = np.arange(x_train.shape[0])
        if max_rows is not None and rows.size > max_rows:
            notes.append(
                f"leave-one-out distance to closest record of {max_rows:,} of {rows.size:,} "
                "training rows (uniform subsample)"
            )
            rows = np.sort(rng.choice(rows.size, size=max_rows, replace=False))
        holdout_dcr = distance_to_closest_record(x_train, self_index=rows)
        _, counts = np.unique(row_keys(x_train), return_counts=True)
        holdout_copies = int(counts[counts > 1].sum())  # rows with a duplicate elsewhere
        n_holdout = int(x_train.shape[0])
        baseline = "leave-one-out"
    return PrivacyResult(
        synthetic_dcr=synthetic_dcr,
        holdout_dcr=holdout_dcr,
        synthetic_copies=synthetic_copies,
        holdout_copies=holdout_copies,
        baseline=baseline,
        n_train=int(x_train.shape[0]),
        columns=cols,
        notes=notes,
        n_synthetic=n_synthetic,
        n_holdout=n_holdout,
    )
