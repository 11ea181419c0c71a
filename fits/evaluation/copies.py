"""The release check ``fits synthesize`` prints: exact copies and distance to closest record.

A synthetic table is public output; before it leaves, a data steward wants to know
whether it repeats real rows. :class:`ReleaseCheck` answers two questions while the
table is being written, chunk by chunk (so any number of rows works):

* **Exact copies.** Each site counts the synthetic rows that equal one of its own rows
  in every column (missing equals missing; ``5`` equals ``5.0``; texts compare as
  text). A synthetic row is a copy when some site counts it. The share of copies is
  compared with the real baseline: the share of real rows that equal another real row
  (a fresh draw from the population repeats a real row that often, e.g. in a table
  of few discrete columns). Rows are compared by two independent 64-bit hashes of their
  normalized values (:func:`pandas.util.hash_pandas_object`), a 128-bit key: the chance
  of a false match among 10^9 x 10^6 pairs is below 10^-23.
* **Distance to closest record (DCR).** The Euclidean distance from a synthetic row to
  the nearest real row, on the real rows' scale: numeric columns (numbers, booleans,
  dates as seconds) standardized with the real mean and sd, a missing value as 0 plus
  an indicator feature (1 when missing), other columns one-hot with each block divided
  by sqrt(2) (two different labels are at distance 1). The baseline is
  leave-one-out: each real row's distance to the nearest *other* real row
  (:func:`fits.evaluation.privacy.distance_to_closest_record`). The first
  ``max_rows`` synthetic rows are checked (synthetic rows are independent draws, so
  they are a random sample of the table), against a uniform subsample of as many real
  rows for the baseline; every real row is searched.

Warnings (the thresholds of :attr:`ReleaseCheckResult.warnings`, the rules of the
report's privacy flag, :attr:`fits.evaluation.privacy.PrivacyResult.flag`, made safe for
few rows by a one-sided binomial test at level :data:`ALPHA` = 0.001, so that 2 copies
among 10 rows do not warn by chance):

* the exact-copy share exceeds the real duplicate share by more than
  :data:`COPY_MARGIN` (one percentage point), and the copy count is significantly
  above that share;
* more than :data:`CLOSE_SHARE` (10 %) of the synthetic rows are closer to a real row
  than the real rows' 5 % DCR quantile (5 % expected from a fresh real sample), and
  their count is significantly above 5 %.

Where it runs: in ``fits synthesize`` the process that read the site files computes
it, one site at a time (each site's rows are compared with the public synthetic rows;
only per-site counts and distances are combined); ``fits federate local``, whose site
files are on the same machine, computes it on the table its run wrote. No coordinator
message carries it, so ``fits federate run`` (sites on other machines) does not run it.
These checks find copying and near-copying; they are no formal privacy guarantee.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fits.evaluation.privacy import distance_to_closest_record

__all__ = [
    "ALPHA",
    "CLOSE_SHARE",
    "COPY_MARGIN",
    "ReleaseCheck",
    "ReleaseCheckResult",
    "row_keys",
]

#: Warn when the exact-copy share exceeds the real duplicate share by more than this.
COPY_MARGIN = 0.01
#: Warn when more than this share of synthetic rows is closer than the real 5 % DCR.
CLOSE_SHARE = 0.10
#: Level of the one-sided binomial tests that guard both warnings against chance.
ALPHA = 1e-3
_MISSING = "\x00<missing>"
_KEYS = ("fits-copies-key1", "fits-copies-key2")  # two 16-byte hash keys


def _normalized(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Each column in a dtype-independent form: numbers (booleans included) as float64
    with NaN for missing, date-times as int64 microseconds (UTC for zone-aware, missing
    as the minimum), everything else as text with a marker for missing."""
    out = {}
    for col in columns:
        s = frame[col]
        dt = s.dtype
        if isinstance(dt, pd.CategoricalDtype):
            s = s.astype(object)
            dt = s.dtype
        if pd.api.types.is_datetime64_any_dtype(dt):
            if getattr(dt, "tz", None) is not None:
                s = s.dt.tz_convert("UTC").dt.tz_localize(None)
            # microseconds: datetime64[ns] ends in 2262 (9999-12-31 raised)
            out[col] = s.astype("datetime64[us]").to_numpy().view(np.int64)
        elif pd.api.types.is_bool_dtype(dt) or pd.api.types.is_numeric_dtype(dt):
            out[col] = s.astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan) + 0.0
        else:
            values = s.to_numpy(dtype=object)
            missing = pd.isna(values)
            text = np.where(missing, _MISSING, values.astype(str))
            out[col] = text
    return pd.DataFrame(out)


def row_keys(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """A 128-bit key per row (structured array of two uint64) of the normalized values."""
    norm = _normalized(frame, columns)
    keys = np.empty(len(norm), dtype=[("a", np.uint64), ("b", np.uint64)])
    for field_name, key in zip(("a", "b"), _KEYS, strict=True):
        keys[field_name] = pd.util.hash_pandas_object(norm, index=False, hash_key=key).to_numpy()
    return keys


class _Encoder:
    """The DCR encoding, fitted on the pooled real rows (see the module docstring)."""

    def __init__(self, real: pd.DataFrame, columns: list[str], kinds: Mapping[str, str]):
        self.columns = columns
        self.numeric: dict[str, tuple[float, float, bool]] = {}
        self.labels: dict[str, pd.Index] = {}
        for col in columns:
            s = real[col]
            if self._is_numeric(s) and kinds.get(col) != "nominal":
                v = self._numbers(s)
                ok = v[~np.isnan(v)]
                mean = float(ok.mean()) if ok.size else 0.0
                sd = float(ok.std()) if ok.size else 1.0
                self.numeric[col] = (mean, sd if sd > 0 else 1.0, bool(np.isnan(v).any()))
            else:
                self.labels[col] = pd.Index(pd.unique(self._texts(s)))

    @staticmethod
    def _is_numeric(s: pd.Series) -> bool:
        dt = s.dtype
        return not isinstance(dt, pd.CategoricalDtype) and (
            pd.api.types.is_numeric_dtype(dt)
            or pd.api.types.is_bool_dtype(dt)
            or pd.api.types.is_datetime64_any_dtype(dt)
        )

    @staticmethod
    def _numbers(s: pd.Series) -> np.ndarray:
        if pd.api.types.is_datetime64_any_dtype(s.dtype):
            if getattr(s.dtype, "tz", None) is not None:
                s = s.dt.tz_convert("UTC").dt.tz_localize(None)
            us = s.astype("datetime64[us]")  # not ns: 9999-12-31 is past 2262
            out = us.to_numpy().view(np.int64).astype(np.float64) / 1e6
            out[us.isna().to_numpy()] = np.nan
            return out
        return s.astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)

    @staticmethod
    def _texts(s: pd.Series) -> np.ndarray:
        values = s.to_numpy(dtype=object)
        return np.where(pd.isna(values), _MISSING, values.astype(str))

    def __call__(self, frame: pd.DataFrame) -> np.ndarray:
        blocks = []
        for col in self.columns:
            if col in self.numeric:
                mean, sd, has_missing = self.numeric[col]
                v = (self._numbers(frame[col]) - mean) / sd
                absent = np.isnan(v)
                blocks.append(np.where(absent, 0.0, v)[:, None])
                if has_missing or absent.any():
                    blocks.append(absent.astype(np.float64)[:, None])
            else:
                labels = self.labels[col]
                codes = labels.get_indexer(self._texts(frame[col]))
                onehot = np.zeros((len(frame), len(labels) + 1))
                onehot[np.arange(len(frame)), np.where(codes < 0, len(labels), codes)] = 1.0
                blocks.append(onehot / np.sqrt(2.0))
        return np.hstack(blocks)


def _significant(count: int, n: int, share: float) -> bool:
    """One-sided binomial test: is ``count`` of ``n`` significantly above ``share``?"""
    from scipy.stats import binom

    if share >= 1.0:
        return False
    return bool(binom.sf(count - 1, n, share) < ALPHA)


@dataclass
class ReleaseCheckResult:
    """What :class:`ReleaseCheck` found.

    Attributes
    ----------
    n_synthetic : int
        Synthetic rows checked for exact copies (all of them).
    copies : int
        Synthetic rows equal to a real row of some site.
    copies_by_site : dict of str to int
        Synthetic rows equal to one of that site's rows (a row may count at several).
    n_real : int
        Real rows, all sites together.
    real_duplicates : int
        Real rows equal to another real row (any site).
    synthetic_dcr, real_dcr : numpy.ndarray
        DCR of the checked synthetic rows; leave-one-out DCR of the real subsample.
    """

    n_synthetic: int
    copies: int
    copies_by_site: dict[str, int]
    n_real: int
    real_duplicates: int
    synthetic_dcr: np.ndarray = field(repr=False)
    real_dcr: np.ndarray = field(repr=False)

    @property
    def copy_share(self) -> float:
        """Share of synthetic rows that equal a real row."""
        return self.copies / max(self.n_synthetic, 1)

    @property
    def real_duplicate_share(self) -> float:
        """Share of real rows that equal another real row (the baseline)."""
        return self.real_duplicates / max(self.n_real, 1)

    @property
    def real_dcr_q05(self) -> float:
        """The real rows' 5 % leave-one-out DCR quantile (NaN without a baseline)."""
        return float(np.quantile(self.real_dcr, 0.05)) if self.real_dcr.size else float("nan")

    @property
    def synthetic_dcr_q05(self) -> float:
        """The synthetic rows' 5 % DCR quantile."""
        return float(np.quantile(self.synthetic_dcr, 0.05))

    @property
    def close_share(self) -> float:
        """Share of checked synthetic rows closer than :attr:`real_dcr_q05`."""
        if not self.real_dcr.size:
            return 0.0
        return float(np.mean(self.synthetic_dcr < self.real_dcr_q05))

    @property
    def warnings(self) -> list[str]:
        """One line per threshold exceeded (see the module docstring)."""
        out = []
        copy_bar = min(self.real_duplicate_share + COPY_MARGIN, 1.0)
        if self.copy_share > copy_bar and _significant(self.copies, self.n_synthetic, copy_bar):
            worst = max(self.copies_by_site, key=lambda s: self.copies_by_site[s])
            out.append(
                f"{self.copy_share:.1%} of the synthetic rows are exact copies of real rows "
                f"(real rows repeat another real row in {self.real_duplicate_share:.1%}; "
                f"threshold: {COPY_MARGIN:.0%} more); most copy site {worst!r} "
                f"({self.copies_by_site[worst]} rows). Small sites are copied most: "
                "merge small sites or leave them out before releasing this table"
            )
        n_close = int(round(self.close_share * self.synthetic_dcr.size))
        if self.close_share > CLOSE_SHARE and _significant(n_close, self.synthetic_dcr.size, 0.05):
            out.append(
                f"{self.close_share:.1%} of the synthetic rows lie closer to a real row than "
                f"the closest 5% of real rows lie to each other (threshold: {CLOSE_SHARE:.0%}); "
                "the table may reproduce real rows nearly verbatim. Inspect it before "
                "releasing it (`fits report` shows the distances). On a small table a "
                "wider neighbourhood usually lowers this share: the continuous columns "
                "first in the chain (--order; order=[...]), or smoothing='auto' "
                "(--smoothing auto) (docs/benchmarks.md, 'Near copies on a small table')"
            )
        return out

    def summary(self) -> str:
        """Two lines for the command line."""
        lines = [
            f"exact copies: {self.copies} of {self.n_synthetic} synthetic rows "
            f"({self.copy_share:.2%}) equal a real row; real rows repeating another real "
            f"row: {self.real_duplicate_share:.2%}"
        ]
        if self.real_dcr.size:
            lines.append(
                f"distance to closest real row (5% quantile): synthetic "
                f"{self.synthetic_dcr_q05:.3g}, real to other real {self.real_dcr_q05:.3g}; "
                f"{self.close_share:.1%} of synthetic rows closer than that (5% expected)"
            )
        return "\n".join(lines)


class ReleaseCheck:
    """Exact-copy rate and distance to closest record of a synthetic table, streamed.

    Parameters
    ----------
    sites : mapping of str to DataFrame
        Each site's real rows.
    kinds : mapping of str to str
        Column -> kind (nominal columns are one-hot for the DCR).
    max_rows : int
        Synthetic rows (the first ones) and real baseline rows (a uniform subsample)
        whose DCR is computed.
    seed : int or numpy.random.SeedSequence
        Seed of the real subsample.

    Feed every synthetic chunk to :meth:`update`, then call :meth:`result`.
    """

    def __init__(
        self,
        sites: Mapping[str, pd.DataFrame],
        kinds: Mapping[str, str],
        *,
        max_rows: int = 10_000,
        seed: int | np.random.SeedSequence | None = 0,
    ) -> None:
        self.columns = [c for c in kinds]
        self.kinds = dict(kinds)
        self.max_rows = int(max_rows)
        self._site_keys = {
            name: np.unique(row_keys(frame, self.columns)) for name, frame in sites.items()
        }
        pooled = pd.concat([f[self.columns] for f in sites.values()], ignore_index=True)
        all_keys = np.concatenate([row_keys(f, self.columns) for f in sites.values()])
        _, inverse, counts = np.unique(all_keys, return_inverse=True, return_counts=True)
        self.n_real = int(all_keys.size)
        self.real_duplicates = int(np.count_nonzero(counts[inverse.reshape(-1)] > 1))
        self._encode = _Encoder(pooled, self.columns, self.kinds)
        self._real = self._encode(pooled)
        rng = np.random.default_rng(seed)
        n = self._real.shape[0]
        self._real_sample = (
            np.sort(rng.choice(n, size=self.max_rows, replace=False))
            if n > self.max_rows
            else np.arange(n)
        )
        self.n_synthetic = 0
        self.copies = 0
        self.copies_by_site = dict.fromkeys(self._site_keys, 0)
        self._dcr_rows: list[pd.DataFrame] = []
        self._dcr_count = 0

    def update(self, chunk: pd.DataFrame) -> None:
        """Count the chunk's exact copies; keep rows for the DCR until ``max_rows``."""
        keys = row_keys(chunk, self.columns)
        any_site = np.zeros(keys.size, dtype=bool)
        for name, site_keys in self._site_keys.items():
            hit = np.isin(keys, site_keys)
            self.copies_by_site[name] += int(np.count_nonzero(hit))
            any_site |= hit
        self.copies += int(np.count_nonzero(any_site))
        self.n_synthetic += len(chunk)
        if self._dcr_count < self.max_rows:
            take = chunk.iloc[: self.max_rows - self._dcr_count][self.columns]
            self._dcr_rows.append(take)
            self._dcr_count += len(take)

    def result(self) -> ReleaseCheckResult:
        """The counts and distances (call after the last :meth:`update`)."""
        if not self._dcr_rows:
            raise RuntimeError("no synthetic rows were given to update()")
        synthetic = self._encode(pd.concat(self._dcr_rows, ignore_index=True))
        synthetic_dcr = distance_to_closest_record(self._real, synthetic)
        if self._real.shape[0] >= 2:
            real_dcr = distance_to_closest_record(self._real, self_index=self._real_sample)
        else:
            real_dcr = np.empty(0)
        return ReleaseCheckResult(
            n_synthetic=self.n_synthetic,
            copies=self.copies,
            copies_by_site=dict(self.copies_by_site),
            n_real=self.n_real,
            real_duplicates=self.real_duplicates,
            synthetic_dcr=synthetic_dcr,
            real_dcr=real_dcr,
        )
