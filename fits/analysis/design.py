"""Site-side design matrices for federated model fitting, from the shared schema.

Every federated analysis (the differentially private GLMs of :mod:`fits.analysis.glm`,
FedLSA) fits a model on a design matrix built *at each site* from its own rows.  The
coordinator never sees a row: it learns the shared :class:`~fits.core.schema.Schema`
from the setup round (:func:`schema_round`: row counts and column descriptions, as in
synthesis) and the federation-wide means and standard deviations of the numeric
features from one round of moments (:func:`standardization_round`: each site uploads
its row count and the mean and standard deviation of each of its numeric features,
computed stably, :func:`site_moments`; the coordinator pools them with the
parallel-variance formula, :func:`pool_moments`).

Feature coding (the choices are stated in ``docs/analysis.md``):

* an intercept column of ones first (``intercept=True``);
* numeric features -- continuous columns (datetimes as seconds since 1970-01-01 UTC)
  and ordinal columns (their numeric value when every category is a number, else the
  category's position 0, 1, ... in the schema's order) -- standardized with the
  federation-wide mean and the population standard deviation (``ddof=0``, as
  scikit-learn's ``StandardScaler``), ``(x - mean) / sd``;
* nominal features one-hot coded with the schema's first category as the reference
  level (dropped, so the design has full rank together with the intercept); a missing
  value of a nominal column is a level of its own (the schema lists ``None`` among
  the categories), like every other level.

A missing numeric value, an infinite one or one beyond +-1e150 (:data:`MAX_ABS`: its
square overflows), a category the schema does not list, or a feature constant across
the federation is an error naming the site and the column: nothing is dropped or
invented.  So is a feature whose standard deviation across the federation is below
1e-250 (:data:`MIN_SD`), and a numeric target whose values are all below 1e-100 in
magnitude (:data:`MIN_TARGET_ABS`): each error names the power of ten to multiply the
column by.

Sites answer two message types here (see :mod:`fits.federation.protocol`): ``setup``
(exactly as a synthesis site does) and ``moments``.  :class:`DesignSite` is the base
class of the analysis sites; a subclass adds its own message types through
:meth:`DesignSite.handlers`.
"""

from __future__ import annotations

import json
import numbers
import re
import shlex
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fits._json import jsonable
from fits.core.schema import (
    ColumnSpec,
    ConstantNote,
    DataNote,
    IdentifierColumnError,
    NumericIdentifierWarning,
    Schema,
    SchemaError,
    UnsupportedColumnError,
    datetime_seconds,
    describe_table,
    labels_of_na_only,
    lookalike_names,
    merge_descriptions,
    na_only_cells,
    parse_text_columns,
    unit_advice,
    with_na_labels,
)
from fits.federation.protocol import Message, ProtocolError
from fits.federation.transport import Transport

__all__ = [
    "DesignError",
    "DesignSpec",
    "DesignBuilder",
    "DesignSite",
    "MISSING_POLICIES",
    "Standardization",
    "check_seed",
    "dropped_note",
    "check_new_rows",
    "fit_columns",
    "original_map",
    "scale_note",
    "pool_moments",
    "site_moments",
    "schema_round",
    "site_items",
    "standardization_round",
]

#: :attr:`DesignSpec.missing`: refuse rows missing a value the model needs, or leave
#: them out (complete cases).
MISSING_POLICIES = ("raise", "drop")

#: Name of the intercept column in :attr:`DesignSpec.feature_names`.
INTERCEPT = "(intercept)"

#: The largest magnitude a numeric feature or the target may hold: its square, summed
#: over 1e8 rows, stays below float64's largest number (1.8e308), so the standardization
#: sums and the fits' squared terms stay finite.
MAX_ABS = 1e150

#: The smallest federation-wide standard deviation a numeric feature may have (the
#: pooled sd of the standardization round, :func:`standardization_round`): its
#: coefficient per unit is its coefficient per sd divided by the sd, which overflows
#: float64 (1.8e308) near float64's smallest normal number (2.2e-308), where the values
#: also lose digits.  Down to it the round is exact to float rounding (no squares of
#: the values are formed); below it the feature is refused, with the power of ten to
#: multiply it by.
MIN_SD = 1e-250

#: The smallest largest magnitude a numeric target may have (the setup round's range,
#: :meth:`DesignSpec.from_schema`): the fits sum squares of the target and of its
#: residuals, and the exact-fit check compares the residual sum of squares with
#: 1e-20 of the target's; below 1e-100 those squares leave float64's normal range
#: (2.2e-308) and underflow to 0, and a fit would report an exact fit, scale 0 and
#: infinite z values.
MIN_TARGET_ABS = 1e-100


class DesignError(ValueError):
    """A site's rows do not fit the design (missing numeric value, unknown category...)."""


def _native(v: Any) -> Any:
    """A JSON-ready scalar (numpy scalars to Python ones)."""
    if isinstance(v, np.generic):
        return v.item()
    return v


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, bool | np.bool_)


@dataclass(frozen=True)
class DesignSpec:
    """Which columns enter the design and how (a small, JSON-ready description).

    Parameters
    ----------
    target : str or None
        The response column (``None`` for a design without response).
    numeric : tuple of str
        Continuous and ordinal features, standardized.
    ordinal_levels : dict of str to list
        For ordinal features whose categories are not all numbers: the categories in
        order (a value is coded by its position).
    datetimes : tuple of str
        Continuous features holding datetimes (coded as seconds since the epoch).
    nominal : dict of str to list
        Nominal features and their levels (the schema's categories, ``None`` for
        missing); the first level is the reference and gets no column.
    intercept : bool
        Whether the design starts with a column of ones.
    target_levels : tuple
        For a target of two text labels (logistic regression): the label coded 0 and
        the label coded 1, in that order (empty: the target is used as a number).
    missing : {"raise", "drop"}
        A site's rows missing a value of the target or of a numeric feature (continuous,
        ordinal, datetime): ``"raise"`` refuses them (the site's error names the column
        and the count); ``"drop"`` leaves them out of the fit (complete cases, as R's
        ``na.omit`` and statsmodels' ``missing="drop"``) and each site reports how many
        it left out.  A nominal feature's missing values are never dropped: they are
        the level ``<missing>`` when the schema lists one.  The offset, exposure and
        weights columns follow the same policy.
    offset : str or None
        A column entering the linear predictor with its coefficient fixed to 1
        (statsmodels' ``offset``): eta = x'theta + offset.
    exposure : str or None
        A column of positive values whose log is the offset (statsmodels'
        ``exposure``, for Poisson rates); not together with ``offset``.
    weights : str or None
        A column of non-negative prior weights (statsmodels' ``var_weights``, R's
        ``glm(weights=)``): each row's loss, score and Hessian are multiplied by its
        weight.
    """

    target: str | None
    numeric: tuple[str, ...] = ()
    ordinal_levels: Mapping[str, list[Any]] = field(default_factory=dict)
    datetimes: tuple[str, ...] = ()
    nominal: Mapping[str, list[Any]] = field(default_factory=dict)
    intercept: bool = True
    target_levels: tuple[Any, ...] = ()
    missing: str = "raise"
    offset: str | None = None
    exposure: str | None = None
    weights: str | None = None

    def __post_init__(self) -> None:
        if self.missing not in MISSING_POLICIES:
            raise ValueError(
                f"missing={self.missing!r}: use one of {', '.join(map(repr, MISSING_POLICIES))}"
            )
        if self.offset is not None and self.exposure is not None:
            raise ValueError("give offset or exposure, not both (exposure E is the offset log(E))")

    @property
    def extra_columns(self) -> list[str]:
        """The offset (or exposure) and weights columns: used by the fit, not features."""
        return [c for c in (self.offset, self.exposure, self.weights) if c is not None]

    def extra_lines(self) -> list[str]:
        """One summary line per offset, exposure or weights column of the fit."""
        lines = []
        if self.offset is not None:
            lines.append(f"offset: column {self.offset!r} (coefficient fixed to 1)")
        if self.exposure is not None:
            lines.append(
                f"exposure: column {self.exposure!r} (offset log({self.exposure}), "
                "coefficient fixed to 1)"
            )
        if self.weights is not None:
            lines.append(f"prior weights: column {self.weights!r}")
        return lines

    @classmethod
    def from_schema(
        cls,
        schema: Schema,
        target: str | None,
        features: Sequence[str] | None = None,
        *,
        intercept: bool = True,
        missing: str = "raise",
        offset: str | None = None,
        exposure: str | None = None,
        weights: str | None = None,
    ) -> DesignSpec:
        """The design of ``features`` (default: every column but the target and the
        ``offset``, ``exposure`` and ``weights`` columns).

        Raises
        ------
        SchemaError
            The target or a feature is not a column of the schema, or the target is
            among the features.
        DesignError
            A numeric target whose every value (the setup round's range) is below
            :data:`MIN_TARGET_ABS` in magnitude, naming the power of ten to multiply it by.
        ValueError
            ``missing`` is not one of :data:`MISSING_POLICIES` (checked when the spec
            is made, :meth:`__post_init__`).
        """
        names = schema.names
        if target is not None and target not in names:
            raise SchemaError(f"target column {target!r} is not in the tables; columns: {names}")
        if isinstance(features, (str, bytes)):  # not the list of its letters
            raise TypeError(
                f"features must be a list of column names, e.g. [{features!r}], got {features!r}"
            )
        extra = {"offset": offset, "exposure": exposure, "weights": weights}
        for what, col in extra.items():
            if col is None:
                continue
            if not isinstance(col, str):
                raise TypeError(f"{what} must be a column name (a str), got {col!r}")
            if col == target:
                raise SchemaError(f"the target {target!r} cannot also be the {what} column")
        used = [c for c in extra.values() if c is not None]
        if len(set(used)) != len(used):
            twice = next(c for c in used if used.count(c) > 1)
            roles = " and ".join(w for w, c in extra.items() if c == twice)
            raise SchemaError(
                f"column {twice!r} is given as both the {roles} column; a column can be "
                "one of offset, exposure and weights only: name another column for one of them"
            )
        if features is None:  # identifiers (kind "id") and constants are never features
            features = [
                n
                for n in names
                if n != target and n not in used and schema[n].kind not in ("id", "constant")
            ]
        features = list(features)
        ids = [f for f in [*features, target] if f in names and schema[f].kind == "id"]
        if ids:
            raise SchemaError(
                f"column(s) {ids} are identifiers or free text (kind 'id'); they cannot "
                "be a feature or the target: leave them out of the model, or declare another "
                "kind (kinds={...}; fits analyze --kind COLUMN=KIND)"
            )
        unknown = [f for f in features if f not in names]
        if unknown:
            raise SchemaError(f"feature(s) {unknown} not in the tables; columns: {names}")
        constants = [f for f in [*features, target] if f in names and schema[f].kind == "constant"]
        if constants:
            raise SchemaError(_constant_problem(schema, constants, target=target))
        if target is not None and target in features:
            raise SchemaError(f"the target {target!r} cannot also be a feature")
        if target is not None:
            _check_target_scale(schema[target])
        if len(set(features)) != len(features):
            raise SchemaError(f"features are listed twice: {features}")
        numeric, nominal, ordinal_levels, datetimes = [], {}, {}, []
        for name in features:
            spec: ColumnSpec = schema[name]
            if spec.kind == "nominal":
                nominal[name] = [_native(c) for c in spec.categories or []]
            else:
                numeric.append(name)
                if spec.kind == "ordinal":
                    cats = [c for c in spec.categories or [] if c is not None]
                    if not all(_is_number(c) for c in cats):
                        ordinal_levels[name] = [_native(c) for c in cats]
                elif spec.tz is not None or spec.dtype == "datetime":
                    datetimes.append(name)
        design = cls(
            target=target,
            numeric=tuple(numeric),
            ordinal_levels=ordinal_levels,
            datetimes=tuple(datetimes),
            nominal=nominal,
            intercept=intercept,
            missing=missing,
            offset=offset,
            exposure=exposure,
            weights=weights,
        )
        names = design.feature_names
        clash = sorted({n for n in names if names.count(n) > 1})
        if clash:  # coefficients are keyed by these names: one would overwrite the other
            raise SchemaError(
                f"design column name(s) {clash} would stand for two coefficients (a column "
                f"named like the intercept {INTERCEPT!r}, or like a level 'column=level' of "
                "a nominal column); rename the column in every site's table"
            )
        return design

    @property
    def n_numeric(self) -> int:
        """Number of standardized columns."""
        return len(self.numeric)

    @property
    def feature_names(self) -> list[str]:
        """Names of the design's columns, in order: intercept, numeric, one-hot
        (``"column=level"``, reference levels left out)."""
        out = [INTERCEPT] if self.intercept else []
        out += list(self.numeric)
        for name, levels in self.nominal.items():
            out += [f"{name}={'<missing>' if v is None else v}" for v in levels[1:]]
        return out

    @property
    def n_columns(self) -> int:
        """Number of design columns."""
        return len(self.feature_names)

    def to_json(self) -> str:
        """The spec as JSON (what travels in the ``moments`` request)."""
        return json.dumps(
            {
                "target": self.target,
                "numeric": list(self.numeric),
                "ordinal_levels": dict(self.ordinal_levels),
                "datetimes": list(self.datetimes),
                "nominal": dict(self.nominal),
                "intercept": self.intercept,
                "target_levels": list(self.target_levels),
                "missing": self.missing,
                "offset": self.offset,
                "exposure": self.exposure,
                "weights": self.weights,
            },
            default=_native,
        )

    @classmethod
    def from_json(cls, text: str) -> DesignSpec:
        """Inverse of :meth:`to_json`."""
        d = json.loads(text)
        return cls(
            target=d["target"],
            numeric=tuple(d["numeric"]),
            ordinal_levels=dict(d["ordinal_levels"]),
            datetimes=tuple(d["datetimes"]),
            nominal=dict(d["nominal"]),
            intercept=bool(d["intercept"]),
            target_levels=tuple(d.get("target_levels", ())),
            missing=str(d.get("missing", "raise")),
            offset=d.get("offset"),
            exposure=d.get("exposure"),
            weights=d.get("weights"),
        )


def _power_of_ten(largest: float) -> str:
    """The power of ten that brings ``largest`` (> 0) to about 1, as ``1e200`` (in two
    steps where that power itself overflows float64)."""
    k = int(round(-np.log10(largest)))
    if k > 308:
        return f"1e{k} (in two steps, e.g. by 1e{k // 2} and then by 1e{k - k // 2})"
    return f"1e{k}"


def _check_target_scale(column: ColumnSpec) -> None:
    """Refuse a numeric target whose every value is below :data:`MIN_TARGET_ABS` in
    magnitude (from the setup round's range, or an ordinal's numeric categories): the
    fits' squares of it underflow.  A target of one value (0 everywhere) is refused
    elsewhere, as a constant."""
    if column.kind == "continuous" and column.lower is not None and column.upper is not None:
        largest = max(abs(float(column.lower)), abs(float(column.upper)))
    elif column.kind == "ordinal" and column.categories:
        values = [abs(float(c)) for c in column.categories if _is_number(c)]
        if len(values) != len([c for c in column.categories if c is not None]):
            return  # text levels: the target is not used as numbers
        largest = max(values, default=0.0)
    else:
        return
    if 0 < largest < MIN_TARGET_ABS:
        raise DesignError(
            f"target {column.name!r} holds no value beyond {largest:.3g} in magnitude at "
            f"any site, below {MIN_TARGET_ABS:g}: the fit's sums of squares of the target "
            "and of its residuals would underflow to 0 (a false exact fit, standard errors "
            f"of 0): multiply the column by a power of ten at every site, e.g. by "
            f"{_power_of_ten(largest)} (its coefficients scale by the same factor)"
        )


@dataclass(frozen=True)
class Standardization:
    """Federation-wide means and standard deviations of the numeric features.

    Parameters
    ----------
    means, sds : ndarray of shape (q,)
        Mean and population standard deviation of each numeric feature over all rows
        of all sites.
    n_rows : ndarray of shape (K,)
        Rows per site (those the fit uses).
    n_dropped : ndarray of shape (K,) or None
        Per site, the rows it left out for a missing value (``DesignSpec.missing ==
        "drop"``); None where the replies did not say (a design that drops nothing).
    """

    means: np.ndarray
    sds: np.ndarray
    n_rows: np.ndarray
    n_dropped: np.ndarray | None = None


class DesignBuilder:
    """One site's design matrix (site side: holds the rows).

    Parameters
    ----------
    frame : DataFrame
        The site's table.
    spec : DesignSpec
        Which columns enter the design.
    site : str
        The site's name, for error messages.
    markers : mapping, optional
        Column -> ``{text: count}``: the text values that reading the site's table as
        numbers turned into missing values (the ``"markers"`` of
        :func:`fits.core.schema.parse_text_columns`).  In the offset, exposure or weights
        column they are an error whatever the missing policy (:meth:`_check_text`).
    """

    def __init__(
        self,
        frame: pd.DataFrame,
        spec: DesignSpec,
        *,
        site: str = "site",
        markers: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        self.spec = spec
        self.site = site
        wanted = list(spec.numeric) + list(spec.nominal) + spec.extra_columns
        if spec.target is not None:
            wanted.append(spec.target)
        missing = [c for c in wanted if c not in frame.columns]
        if missing:
            raise DesignError(f"{site}: column(s) {missing} missing from the site's table")
        self._check_text(frame, markers or {})
        frame = _na_labels_of_design(frame, spec)
        #: Rows left out for a missing value (``spec.missing == "drop"``).
        self.n_dropped = 0
        if spec.missing == "drop":
            frame = self._complete_rows(frame)
        self.n_rows = int(frame.shape[0])
        self._numeric = np.empty((self.n_rows, spec.n_numeric), dtype=np.float64)
        for j, name in enumerate(spec.numeric):
            self._numeric[:, j] = self._numeric_column(frame[name], name)
        self._codes = {
            name: self._nominal_codes(frame[name], name, levels)
            for name, levels in spec.nominal.items()
        }
        self._target = frame[spec.target] if spec.target is not None else None
        self._extra = {c: frame[c] for c in spec.extra_columns}

    def _extra_kind(self, name: str) -> str:
        """``"offset"``, ``"exposure"`` or ``"weights"``: what the column ``name`` is."""
        return next(
            what
            for what, col in (
                ("offset", self.spec.offset),
                ("exposure", self.spec.exposure),
                ("weights", self.spec.weights),
            )
            if col == name
        )

    def _check_text(self, frame: pd.DataFrame, markers: Mapping[str, Mapping[str, int]]) -> None:
        """Refuse text in the offset, exposure or weights column, before any row is
        dropped: a word there ("heavy") is a value that is wrong, not a missing one, so
        neither policy may leave its row out silently (was: reported as a missing value,
        and dropped with missing="drop").  ``markers`` are the words that reading the
        table as numbers made missing; a column still of text holds them itself."""
        for name in self.spec.extra_columns:
            found = dict(markers.get(name, {}))
            s = frame[name]
            if not found and (
                pd.api.types.is_object_dtype(s.dtype) or pd.api.types.is_string_dtype(s.dtype)
            ):
                present = s.dropna()
                numbers = pd.to_numeric(present.astype(str).str.strip(), errors="coerce")
                found = present[numbers.isna().to_numpy()].astype(str).value_counts().to_dict()
            if not found:
                continue
            what, shown = self._extra_kind(name), list(found)[:5]
            listed = ", ".join(f"{v!r} ({int(found[v])})" for v in shown)
            more = f" and {len(found) - len(shown)} other(s)" if len(found) > len(shown) else ""
            raise DesignError(
                f"{self.site}: {what} column {name!r} holds text where numbers belong: "
                f"{listed}{more} (text is not a missing value, so missing='drop' does not "
                "leave those rows out): correct the values in the site's table; if the text "
                f"marks a missing value, read it as missing (fits analyze --na-values "
                f"{name}={shown[0]}; in Python, replace it by NaN) and leave those rows out "
                "with missing='drop' (fits analyze --missing drop)"
            )

    def _complete_rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The rows holding a value of the target and of every numeric feature
        (``missing="drop"``); an error naming the site if none does."""
        used = [*self.spec.numeric, *([self.spec.target] if self.spec.target else [])]
        used += self.spec.extra_columns
        incomplete = frame[used].isna().any(axis=1).to_numpy() if used else None
        if incomplete is None or not incomplete.any():
            return frame
        self.n_dropped = int(incomplete.sum())
        if incomplete.all():
            counts = {c: int(frame[c].isna().sum()) for c in used if frame[c].isna().any()}
            raise DesignError(
                f"{self.site}: every one of its {len(frame)} rows misses a value the model "
                f"needs (missing values per column: {counts}), so missing='drop' leaves "
                "it no row: leave those columns out of the features, or leave the site out"
            )
        return frame.loc[~incomplete]

    # -------------------------------------------------------------- column coding
    def _numeric_column(self, s: pd.Series, name: str) -> np.ndarray:
        if s.isna().any():
            raise DesignError(
                f"{self.site}: column {name!r} has {int(s.isna().sum())} missing value(s); "
                "a numeric feature must be complete: leave those rows out with "
                "missing='drop' (fits analyze --missing drop), impute them, leave the "
                "column out of the features, or declare it nominal"
            )
        if name in self.spec.ordinal_levels:
            levels = self.spec.ordinal_levels[name]
            codes = pd.Categorical(s, categories=levels).codes
            if (codes < 0).any():
                bad = sorted({str(v) for v in s[codes < 0]})[:5]
                raise DesignError(
                    f"{self.site}: column {name!r} holds value(s) {bad} the schema does not list"
                )
            return codes.astype(np.float64)
        if name in self.spec.datetimes:
            return datetime_seconds(s)
        try:
            values = s.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise DesignError(
                f"{self.site}: column {name!r} is not numeric; declare it nominal"
            ) from None
        self._check_magnitude(values, f"column {name!r}")
        return values

    def _check_magnitude(self, values: np.ndarray, what: str) -> None:
        """Refuse infinite values and values beyond :data:`MAX_ABS` (naming the site and
        the column): their squares overflow, and the fit would be NaN or meaningless."""
        bad = ~(np.abs(values) <= MAX_ABS)
        if not bad.any():
            return
        worst = values[bad][np.argmax(np.abs(values[bad]))]
        raise DesignError(
            f"{self.site}: {what} holds {int(bad.sum())} value(s) beyond +-{MAX_ABS:g} "
            f"(the largest: {worst:g}); their squares overflow, so no model can be fitted "
            "on them: rescale the column (e.g. divide it by a power of ten) or drop "
            "those rows"
        )

    def _nominal_codes(self, s: pd.Series, name: str, levels: list[Any]) -> np.ndarray:
        present = [v for v in levels if v is not None]
        codes = pd.Categorical(s.astype(object).where(s.notna(), None), categories=present).codes
        codes = np.asarray(codes, dtype=np.int64)
        na = s.isna().to_numpy()
        if na.any():
            if None not in levels:
                raise DesignError(
                    f"{self.site}: column {name!r} has missing values the schema does not allow"
                )
        unknown = (codes < 0) & ~na
        if unknown.any():
            bad = sorted({str(v) for v in s[unknown]})[:5]
            raise DesignError(
                f"{self.site}: column {name!r} holds categor(ies) {bad} the schema does not "
                "list; rebuild the schema from every site's table"
            )
        # position in ``levels`` (None's position for missing values)
        index = np.array([levels.index(v) for v in present], dtype=np.int64)
        out = np.empty(self.n_rows, dtype=np.int64)
        out[~na] = index[codes[~na]]
        if na.any():
            out[na] = levels.index(None)
        return out

    # -------------------------------------------------------------- uploads and design
    def moments(self) -> dict[str, np.ndarray]:
        """The ``moments`` reply: row count, means (each as two float64s) and
        standard deviations of the numeric features (the only thing the
        standardization round uploads).

        Each mean and sd is the site's own, computed stably (:func:`site_moments`): no
        sum of squares, which loses every digit of a feature whose spread is small next
        to its values (timestamps within a minute, about 1.7e9 seconds since 1970) and
        underflows for values below about 1e-154.  With the row count they tell what
        the sums and sums of squares would: no more, no less."""
        mean, sd = site_moments(self._numeric)
        return {
            "n": np.array([self.n_rows], dtype=np.int64),
            "mean": mean,
            "sd": sd,
            "dropped": np.array([self.n_dropped], dtype=np.int64),
        }

    def matrix(self, standardization: Standardization) -> np.ndarray:
        """The design matrix ``(n_rows, spec.n_columns)`` (intercept, standardized
        numeric features, one-hot nominal features without their reference level)."""
        means = np.asarray(standardization.means, dtype=np.float64)
        sds = np.asarray(standardization.sds, dtype=np.float64)
        if means.shape != (self.spec.n_numeric,) or sds.shape != means.shape:
            raise ProtocolError(
                f"{self.site}: standardization for {means.shape} numeric features, the "
                f"design has {self.spec.n_numeric}"
            )
        blocks = []
        if self.spec.intercept:
            blocks.append(np.ones((self.n_rows, 1)))
        blocks.append((self._numeric - means) / sds)
        for name, levels in self.spec.nominal.items():
            onehot = np.zeros((self.n_rows, len(levels)))
            onehot[np.arange(self.n_rows), self._codes[name]] = 1.0
            blocks.append(onehot[:, 1:])
        return np.concatenate(blocks, axis=1) if blocks else np.empty((self.n_rows, 0))

    def target(self) -> np.ndarray:
        """The response as float64 (an error naming the site if values are missing or
        not numbers)."""
        if self._target is None:
            raise DesignError(f"{self.site}: the design has no target")
        s, name = self._target, self.spec.target
        if s.isna().any():
            raise DesignError(
                f"{self.site}: target {name!r} has {int(s.isna().sum())} missing value(s); "
                "leave those rows out with missing='drop' (fits analyze --missing drop), "
                "or drop them from the site's table"
            )
        if self.spec.target_levels:  # two labels: the second is 1
            codes = self._nominal_codes(s, str(name), list(self.spec.target_levels))
            return codes.astype(np.float64)
        try:
            values = s.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise DesignError(
                f"{self.site}: target {name!r} is not numeric (values like "
                f"{sorted({str(v) for v in s.iloc[:50]})[:3]}); code it as numbers "
                "(logistic regression also takes two text labels)"
            ) from None
        self._check_magnitude(values, f"target {name!r}")
        return values

    def _extra_values(self, name: str, what: str) -> np.ndarray:
        """The float64 values of the offset, exposure or weights column ``name``: an
        error naming the site and the column for a missing, non-numeric or non-finite
        value."""
        s = self._extra[name]
        if s.isna().any():
            raise DesignError(
                f"{self.site}: {what} column {name!r} has {int(s.isna().sum())} missing "
                "value(s); leave those rows out with missing='drop' (fits analyze --missing "
                "drop), or fill them in the site's table"
            )
        try:
            values = s.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise DesignError(
                f"{self.site}: {what} column {name!r} is not numeric (values like "
                f"{sorted({str(v) for v in s.iloc[:50]})[:3]})"
            ) from None
        self._check_magnitude(values, f"{what} column {name!r}")
        return values

    def offset(self) -> np.ndarray | None:
        """The offset of each row (the offset column, or the log of the exposure
        column), None without either.

        Raises
        ------
        DesignError
            A missing or non-numeric value, or an exposure of 0 or less (naming the
            site, the column and how many rows).
        """
        if self.spec.offset is not None:
            return self._extra_values(self.spec.offset, "offset")
        if self.spec.exposure is None:
            return None
        name = self.spec.exposure
        values = self._extra_values(name, "exposure")
        bad = ~(values > 0)
        if bad.any():
            raise DesignError(
                f"{self.site}: exposure column {name!r} has {int(bad.sum())} value(s) <= 0 "
                f"(the least: {float(values.min()):g}); an exposure must be positive (the "
                "offset is its log): drop those rows, or correct them"
            )
        return np.log(values)

    def weights(self) -> np.ndarray | None:
        """Each row's prior weight (the weights column), None without one.

        Raises
        ------
        DesignError
            A missing, non-numeric or negative weight, or a site whose weights are all
            0 (naming the site, the column and how many rows).
        """
        name = self.spec.weights
        if name is None:
            return None
        values = self._extra_values(name, "weights")
        bad = values < 0
        if bad.any():
            raise DesignError(
                f"{self.site}: weights column {name!r} has {int(bad.sum())} negative "
                f"value(s) (the least: {float(values.min()):g}); weights must be >= 0: "
                "drop those rows, or correct them"
            )
        if not values.sum() > 0:
            raise DesignError(
                f"{self.site}: weights column {name!r} is 0 in all of its {len(values)} "
                "rows, so the site adds nothing to the fit: leave the site out"
            )
        return values


def _na_labels_of_design(frame: pd.DataFrame, spec: DesignSpec) -> pd.DataFrame:
    """``frame`` with a column whose file wrote one text pandas reads as missing in
    every field (``NA`` for North America) holding that text as a label where the
    design names it a level of the column (the sites' setup settled it so:
    :func:`~fits.core.schema.labels_of_na_only`)."""
    labels = {}
    for col, (text, _) in na_only_cells(frame).items():
        levels = [*spec.nominal.get(col, []), *spec.ordinal_levels.get(col, [])]
        if col == spec.target:
            levels += list(spec.target_levels)
        if text in levels:
            labels[col] = text
    return with_na_labels(frame, labels) if labels else frame


def labels_as_fitted(frame: pd.DataFrame, spec: DesignSpec) -> pd.DataFrame:
    """New rows whose nominal or ordinal values are the text of a label the fit knows as
    a number, or the other way round (``"2"`` for the category ``2`` of an integer-coded
    region, read from a file of text), with those values replaced by the fit's label
    (``frame`` itself when there are none).  A text form two labels share (``2`` and
    ``"2"`` both categories) is left as it is; :func:`check_new_rows` then names it."""
    if not isinstance(frame, pd.DataFrame):
        return frame
    out = frame
    for name, levels in [*spec.nominal.items(), *spec.ordinal_levels.items()]:
        if name not in frame.columns:
            continue
        known = [v for v in levels if v is not None]
        by_text: dict[str, Any] = {}
        for v in known:
            by_text[str(v)] = v if str(v) not in by_text else None  # None: shared
        s = frame[name]
        present = s.notna().to_numpy()
        if not present.any():
            continue
        values = s.astype(object)
        codes = np.asarray(
            pd.Categorical(values.where(present, None), categories=known).codes, dtype=np.int64
        )
        unseen = (codes < 0) & present
        if not unseen.any():
            continue
        arr = values.to_numpy(dtype=object).copy()
        where = np.flatnonzero(unseen)
        mapped = [by_text.get(str(v).strip()) for v in arr[where]]
        hit = np.array([m is not None for m in mapped])
        if not hit.any():
            continue
        if out is frame:
            out = frame.copy()
        arr[where[hit]] = [m for m in mapped if m is not None]
        out[name] = pd.Series(arr, index=frame.index, name=name)
    return out


def check_new_rows(frame: pd.DataFrame, spec: DesignSpec) -> None:
    """Refuse new rows a fitted model cannot score (``predict``), in a prediction's
    words: the site-side :class:`DesignBuilder`'s errors name a site and a fit's fixes
    (``missing='drop'``, rebuilding the schema, declaring a kind), which do not apply.

    Raises
    ------
    DesignError
        A column the model uses is absent; a numeric one holds text or a missing value;
        a nominal one holds a category the fit never saw, or a missing value where the
        fit saw none.
    """
    if not isinstance(frame, pd.DataFrame):
        raise DesignError(f"predict: give the new rows as a DataFrame, got {type(frame).__name__}")
    used = [*spec.numeric, *spec.nominal]
    absent = [c for c in used if c not in frame.columns]
    if absent:
        raise DesignError(
            f"predict: the new rows lack column(s) {absent} of the model (it uses {used}); add them"
        )
    for name in spec.numeric:
        s = frame[name]
        if s.isna().any():
            raise DesignError(
                f"predict: column {name!r} has {int(s.isna().sum())} missing value(s) (row(s) "
                f"{list(s.index[s.isna()][:5])}); the model needs a value in every row: fill "
                "them in, or leave those rows out"
            )
        levels = spec.ordinal_levels.get(name)
        if levels is not None:
            bad = sorted({str(v) for v in s if v not in levels})
            if bad:
                raise DesignError(
                    f"predict: column {name!r} holds value(s) {bad[:5]} the fit never saw "
                    f"(its values: {list(levels)[:10]}); map them to one of those, or leave "
                    "those rows out"
                )
        elif name not in spec.datetimes and not (
            pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        ):
            try:
                s.to_numpy(dtype=np.float64)
            except (TypeError, ValueError):
                raise DesignError(
                    f"predict: column {name!r} is not numeric (values like "
                    f"{sorted({str(v) for v in s.iloc[:50]})[:3]}), as it was in the fit: "
                    "convert it to numbers"
                ) from None
    for name, levels in spec.nominal.items():
        s = frame[name]
        known = [v for v in levels if v is not None]
        na = s.isna().to_numpy()
        if na.any() and None not in levels:
            raise DesignError(
                f"predict: column {name!r} has {int(na.sum())} missing value(s); the fit saw "
                "none, so the model has no coefficient for them: fill them in, or leave "
                "those rows out"
            )
        codes = pd.Categorical(s.astype(object).where(~na, None), categories=known).codes
        unseen = (np.asarray(codes) < 0) & ~na
        if unseen.any():
            bad = sorted({str(v) for v in s[unseen]})[:5]
            raise DesignError(
                f"predict: column {name!r} holds categor(ies) {bad} the fit never saw (its "
                f"categories: {[str(v) for v in known][:10]}), so the model has no "
                "coefficient for them: map them to a category it knows, or leave those rows out"
            )


def original_map(spec: DesignSpec, standardization: Standardization) -> np.ndarray:
    """The matrix A (p x p) with A theta = the coefficients with the numeric features
    on their own scale: the identity but 1 / sd_j for numeric feature j and
    -mean_j / sd_j in the intercept's row, so that ``raw @ (A theta)`` equals
    ``design @ theta`` row by row (the same fitted values)."""
    names = spec.feature_names
    a = np.eye(len(names))
    st = standardization
    for j, name in enumerate(spec.numeric):
        k = names.index(name)
        a[k, k] = 1.0 / st.sds[j]
        if spec.intercept:
            a[0, k] = -st.means[j] / st.sds[j]
    return a


def scale_note(spec: DesignSpec, json_key: str = "original_params") -> str | None:
    """The summaries' line saying that the numeric features' coefficients are per
    standard deviation, and where they are per unit (``json_key`` in the result JSON);
    None for a design without numeric features."""
    if not spec.numeric:
        return None
    return (
        "numeric features enter standardized, (value - mean) / sd over all sites, so their "
        "coefficients are per standard deviation; per unit of each feature: "
        f"res.original_params (the result JSON's {json_key})"
    )


def site_moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``x`` (rows x columns), its mean and population sd (``ddof=0``),
    computed stably (site side, the ``moments`` reply).

    Returns ``mean`` of shape (2, q) -- the mean rounded to float64, and what that
    rounding left over (the mean is their sum, to about twice float64's precision: a
    mean of 1.7e9, a timestamp, is then exact to far below float64's 2.4e-7 there, so
    that the pooling's differences of means keep their digits) -- and ``sd`` (q,).

    The mean is the first pass's sum / n corrected by a second pass (the mean of the
    deviations from it); the sd is the corrected two-pass formula on the deviations
    from the mean divided by their largest magnitude, so that neither a large common
    value (1e9 + N(0, 1), timestamps) cancels the digits of the spread nor tiny
    deviations (1e-200) underflow when squared.  A column of one value (one row, or
    every row alike) gets that value as its mean, exactly, and sd 0.  No rows: zeros
    (the row count says there are none)."""
    x = np.asarray(x, dtype=np.float64)
    n, q = x.shape
    if n == 0:
        return np.zeros((2, q)), np.zeros(q)
    first = x.sum(axis=0) / n
    rest = (x - first).sum(axis=0) / n
    hi = first + rest  # TwoSum: hi + lo == first + rest exactly
    back = hi - first
    lo = (first - (hi - back)) + (rest - back)
    d = (x - hi) - lo
    top = np.max(np.abs(d), axis=0)
    e = d / np.where(top > 0, top, 1.0)
    var = np.maximum(np.einsum("ij,ij->j", e, e) / n - (e.sum(axis=0) / n) ** 2, 0.0)
    sd = top * np.sqrt(var)
    one = x.min(axis=0) == x.max(axis=0)
    mean = np.stack([np.where(one, x[0], hi), np.where(one, 0.0, lo)])
    return mean, np.where(one, 0.0, sd)


def pool_moments(replies: Sequence[Message]) -> Standardization:
    """Federation-wide means and sds from the sites' ``moments`` replies (coordinator).

    Each site sends its row count n_k and, per numeric feature, its mean m_k (two
    float64s: :func:`site_moments`) and its population sd s_k about m_k.  With
    a_k = m_k - m_r, m_r the largest site's mean, the pooled mean is
    m = m_r + sum_k (n_k / n) a_k (every site's mean alike gives exactly it), and the
    pooled sd is the parallel-variance formula (Chan, Golub and LeVeque)
    sd^2 = sum_k (n_k / n) s_k^2 + sum_k (n_k / n)(m_k - m)^2, evaluated divided by the
    largest S of the s_k and |m_k - m|: sd = S sqrt(sum_k (n_k / n)((s_k / S)^2 +
    ((m_k - m) / S)^2)), so that no term underflows or overflows.  A site with no rows
    adds nothing.  A feature constant across the federation (every s_k 0, every m_k
    alike) gets sd 0 exactly, which :func:`standardization_round` refuses.

    Raises
    ------
    DesignError
        No site has a row.
    """
    n_rows = np.array([int(r.arrays["n"][0]) for r in replies], dtype=np.int64)
    dropped = (
        np.array([int(r.arrays["dropped"][0]) for r in replies], dtype=np.int64)
        if all("dropped" in r.arrays for r in replies)
        else None
    )
    live = n_rows > 0
    if not live.any():
        raise DesignError("no site holds a row the model can use")
    mean = np.array([r.arrays["mean"] for r in replies], dtype=np.float64)[live]  # (K, 2, q)
    site_sds = np.array([r.arrays["sd"] for r in replies], dtype=np.float64)[live]
    w = n_rows[live] / float(n_rows.sum())
    ref = mean[int(np.argmax(n_rows[live]))]
    a = (mean[:, 0] - ref[0]) + (mean[:, 1] - ref[1])  # (K, q): m_k - m_r
    shift = w @ a
    dev = a - shift
    top = np.maximum(site_sds.max(axis=0), np.abs(dev).max(axis=0))
    safe = np.where(top > 0, top, 1.0)
    sds = top * np.sqrt(w @ ((site_sds / safe) ** 2 + (dev / safe) ** 2))
    means = ref[0] + (ref[1] + shift)
    return Standardization(means=means, sds=sds, n_rows=n_rows, n_dropped=dropped)


def fit_columns(
    target: str, features: Sequence[str] | None, extra: Sequence[str | None]
) -> tuple[list[str] | None, list[str]]:
    """The ``columns`` and ``exclude`` of :func:`schema_round` for a fit of ``target``
    on ``features`` (None: every other column) with the offset, exposure or weights
    columns ``extra`` (None where not given): read as numbers, never modelled."""
    used = None if features is None else [target, *features]
    more = [c for c in extra if c is not None and c not in (used or [])]
    return used, more


def schema_round(
    transport: Transport,
    *,
    kinds: Mapping[str, str] | None = None,
    columns: Sequence[str] | None = None,
    target: str | None = None,
    exclude: Sequence[str] = (),
) -> tuple[Schema, np.ndarray]:
    """The setup round: each site describes its table; the coordinator merges.

    Parameters
    ----------
    transport : Transport
    kinds : mapping, optional
        Column kind overrides.
    columns : sequence of str, optional
        The columns the analysis uses (its target and features). When every site holds
        all of these, the schema is merged from these alone: a column the model does
        not use (constant, missing everywhere, free text, or at some sites only) does
        not stop it; a site that lacks one of them, where another holds them all, is an
        error naming the site and the columns. Default: every column.
    target : str, optional
        The target, when ``columns`` is not given: a column of values no kind models
        (times of day, durations) is then refused if it is the target, and otherwise
        left out of the model with a warning.
    exclude : sequence of str
        Columns the fit reads at each site as numbers but never models (an offset,
        exposure or weights column): left out of the schema, so that a constant or
        identifier-like one is neither refused nor warned about as a feature.

    Returns
    -------
    schema : Schema
    n_rows : ndarray of shape (K,)
        Rows per site.
    """
    declared = {k: {"kind": v} for k, v in (kinds or {}).items()}
    replies = transport.broadcast(Message("setup", config={"declared": json.dumps(declared)}))
    descriptions = [json.loads(str(r.config["description"])) for r in replies]
    # a site's column of 'NA' alone, where another site holds 'NA' as a label
    descriptions, relabelled = labels_of_na_only(descriptions, transport.client_names)
    for note in relabelled:
        warnings.warn(note, DataNote, stacklevel=2)
    for column in exclude:
        descriptions = _without(descriptions, column)
    if columns is not None:
        descriptions, kinds = _restrict(descriptions, kinds, columns, transport.client_names)
    elif any(set(d["order"]) != set(descriptions[0]["order"]) for d in descriptions):
        try:  # every column is a feature: the sites must hold the same columns
            merge_descriptions(descriptions, transport.client_names, kinds=kinds)
        except SchemaError as exc:
            raise SchemaError(
                f"{exc} A column the model does not use may be at some sites only: name "
                "the features, which every site must hold (features=[...]; fits analyze "
                "--features a,b)"
            ) from None
    while True:
        try:
            schema = _merge_worded(descriptions, transport.client_names, kinds, columns, target)
            break
        except UnsupportedColumnError as exc:  # times of day, durations, ...: say so
            fix = re.sub(r",? or drop the column.*$", "", exc.fix)  # synthesis's --drop
            said = f"column {exc.column!r} holds {exc.holds} (at {exc.sites}), which fits "
            if columns is not None or exc.column == target:
                raise SchemaError(
                    f"{said}cannot model: it cannot be the target or a feature; {fix}, or "
                    "choose another target, or name the features without it "
                    "(features=[...]; fits analyze --features a,b)"
                ) from None
            warnings.warn(  # never left out without a word
                f"{said}cannot model, and is left out of the model; to use it, {fix}",
                UserWarning,
                stacklevel=2,
            )
            descriptions = _without(descriptions, exc.column)
    _warn_text_ordinals(schema, descriptions, kinds)
    n_rows = np.array([int(r.arrays["n_rows"][0]) for r in replies], dtype=np.int64)
    return schema, n_rows


def _warn_text_ordinals(
    schema: Schema, descriptions: list[dict[str, Any]], kinds: Mapping[str, str] | None
) -> None:
    """A column declared ordinal whose categories are text with no order of their own
    (not a Parquet ordered categorical) is coded by its sorted labels: say so, with
    the order, as 'high' < 'low' < 'medium' is rarely what the user meant."""
    for name, kind in (kinds or {}).items():
        if kind != "ordinal" or name not in schema.names:
            continue
        cats = [c for c in schema[name].categories or [] if c is not None]
        ordered = any(d["columns"].get(name, {}).get("ordered") for d in descriptions)
        if cats and not ordered and not all(_is_number(c) for c in cats):
            warnings.warn(
                f"column {name!r} is declared ordinal, but its categories are text with no "
                f"order of their own: they are coded 0, 1, ... in sorted order "
                f"({' < '.join(repr(c) for c in cats)}), which may not be their order; to "
                "give the order, write the column as numbers (e.g. low=0, medium=1, "
                "high=2) or as an ordered categorical in a Parquet file, or declare it "
                "nominal",
                UserWarning,
                stacklevel=3,
            )


def _without(descriptions: list[dict[str, Any]], column: str) -> list[dict[str, Any]]:
    """The sites' descriptions without ``column``."""
    return [
        {
            **d,
            "order": [c for c in d["order"] if c != column],
            "columns": {c: v for c, v in d["columns"].items() if c != column},
        }
        for d in descriptions
    ]


def _merge_worded(
    descriptions: list[dict[str, Any]],
    clients: Sequence[str],
    kinds: Mapping[str, str] | None,
    columns: Sequence[str] | None,
    target: str | None,
) -> Schema:
    """:func:`_merge`, its warnings in an analysis's words: a column of a different
    whole number in every row (:class:`NumericIdentifierWarning`, worded for synthesis)
    is a feature entering the model as a number, and no warning at all when it is the
    target (a count or an amount: every value its own is no sign of an identifier)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        schema = _merge(descriptions, clients, kinds, columns, target)
    for w in caught:
        message = w.message
        if isinstance(message, NumericIdentifierWarning):
            if message.column == target:
                continue
            index = (  # fits.core.schema._saved_index said so
                "the row numbers of a table's index, which pandas writes as a first column "
                "without a name (df.to_csv(path) does unless index=False), or "
                if "unless index=False" in str(message)
                else ""
            )
            message = NumericIdentifierWarning(
                f"column {message.column!r} holds a different whole number in every row: it "
                f"looks like {index}a numeric identifier; as a feature it enters the model as a "
                "number. If it is one, leave it out: declare it an identifier (kinds="
                f"{{{message.column!r}: 'id'}}; fits analyze --kind "
                f"{shlex.quote(message.column + '=id')}) or name the features without it "
                "(features=[...]; fits analyze --features a,b)",
                message.column,
            )
        warnings.warn(message, stacklevel=3)
    return schema


def _merge(
    descriptions: list[dict[str, Any]],
    clients: Sequence[str],
    kinds: Mapping[str, str] | None,
    columns: Sequence[str] | None,
    target: str | None = None,
) -> Schema:
    """:func:`merge_descriptions` for an analysis: identifiers and free text become kind
    ``"id"`` (no feature); a column empty or constant everywhere (kind ``"constant"``)
    is an analysis error where named, else left out of the features with a warning."""
    with warnings.catch_warnings():  # the synthesis's note on constant columns does
        # not fit an analysis: said below, in an analysis's words
        warnings.simplefilter("ignore", ConstantNote)
        try:
            schema = merge_descriptions(descriptions, clients, kinds=kinds)
        except IdentifierColumnError as exc:  # identifiers, free text: kind "id", no feature
            why = "; ".join(_why_identifier(c, descriptions, clients) for c in exc.columns)
            if columns is not None:  # named as the target or a feature: say why it cannot be
                raise SchemaError(
                    f"column(s) {exc.columns} cannot be the target or a feature: {why}; "
                    "choose another target, or name the features without it (features=[...]; "
                    "fits analyze --features a,b)"
                ) from None
            kinds = {**(kinds or {}), **{c: "id" for c in exc.columns}}
            schema = merge_descriptions(descriptions, clients, kinds=kinds)
            warnings.warn(  # never left out without a word
                f"column(s) {exc.columns} are left out of the model: {why}; name the "
                "features to choose them yourself (features=[...]; fits analyze --features "
                "a,b)",
                UserWarning,
                stacklevel=2,
            )
    constants = schema.constants  # one value, or none, at every site (kind "constant")
    if constants and columns is not None:
        raise SchemaError(_constant_problem(schema, constants, target=target))
    if target in constants:  # the target is never "left out of the model" (was: said so,
        # then the error): one value has nothing to fit, whatever the features
        raise SchemaError(_constant_problem(schema, [target], target=target))
    if constants:
        warnings.warn(  # never left out without a word
            f"{_constant_problem(schema, constants, fix=False)}; left out of the model",
            UserWarning,
            stacklevel=2,
        )
    return schema


def _constant_problem(
    schema: Schema, names: Sequence[str], fix: bool = True, target: str | None = None
) -> str:
    """What is wrong with ``names``, columns of kind ``"constant"``, for an analysis
    (the synthesis's note, "written as that value", does not fit here), and the fix:
    another target where ``target`` is one of them (naming the features cannot help
    it: a response of one value, a single class, has nothing to fit), naming the
    features without the others."""
    parts = [
        f"{n!r} is missing in every row at every site"
        if schema[n].all_missing
        else f"{n!r} takes one value at every site"
        + (" (and is missing elsewhere)" if schema[n].missing else "")
        for n in names
    ]
    text = (
        f"column(s) {', '.join(parts)}: a model can neither be fitted to them nor learn from them"
    )
    if not fix:
        return text
    if target is None:  # not known here: either fix
        return text + (
            "; choose another target, or name the features without it (features=[...]; "
            "fits analyze --features a,b)"
        )
    features = [n for n in names if n != target]
    if target in names:
        text += (
            f"; a model of the target {target!r} needs at least two distinct values of it "
            "over the sites: choose another target"
        )
    if features:
        joint = "; and " if target in names else "; "
        text += joint + "name the features without it (features=[...]; fits analyze --features a,b)"
    return text


def _why_identifier(name: str, descriptions: list[dict[str, Any]], clients: Sequence[str]) -> str:
    """Why the merge took ``name`` for an identifier or free text, with the fix: text at
    some sites where others hold numbers (a decimal comma, a stray word), numbers fits
    does not read (:func:`fits.core.schema.unit_advice`, the synthesis's words), or a
    value of its own in nearly every row."""
    held = [
        (d["columns"][name], c)
        for d, c in zip(descriptions, clients, strict=True)
        if name in d["columns"]
    ]
    advice = unit_advice(name, [i for i, _ in held], [c for _, c in held])
    fams = [str(d["columns"].get(name, {}).get("dtype")) for d in descriptions]
    numbers = [c for c, f in zip(clients, fams, strict=True) if f in ("int", "float")]
    text = [c for c, f in zip(clients, fams, strict=True) if f not in ("int", "float")]
    if numbers and text:
        return f"{name!r} is text at {text} where {numbers} hold numbers" + (
            f": {advice}"
            if advice is not None
            else " (a decimal comma, as in 0,5, or a word among the numbers makes a column "
            "text): write its values as numbers at every site"
        )
    if advice is not None:  # "1.062,85" in a comma-separated file: not an identifier
        return advice
    return (
        f"{name!r} holds a value of its own in nearly every row at some site (free text or "
        "an identifier), from which no coefficient can learn"
    )


def _restrict(
    descriptions: list[dict[str, Any]],
    kinds: Mapping[str, str] | None,
    columns: Sequence[str],
    clients: Sequence[str],
) -> tuple[list[dict[str, Any]], Mapping[str, str] | None]:
    """The sites' descriptions (and kinds) of ``columns`` alone, in the sites' column
    order, when every site holds them all (a column the model does not use may be at
    one site only); unchanged when a name is at no site (the design then reports it,
    listing every column).

    Raises
    ------
    SchemaError
        Some site holds every column of the model and another lacks one: naming it."""
    orders = [list(d["order"]) for d in descriptions]
    wanted = set(columns)
    lacking = [(k, [c for c in columns if c not in o]) for k, o in enumerate(orders)]
    lacking = [(k, missing) for k, missing in lacking if missing]
    if lacking:
        if len(lacking) == len(orders):
            return descriptions, kinds
        full = next(k for k in range(len(orders)) if k not in {j for j, _ in lacking})
        raise SchemaError(
            "; ".join(f"{clients[k]} has no column(s) {missing}" for k, missing in lacking)
            + f", which {clients[full]} holds and the model uses (its target and features); "
            "every site must hold the model's columns: rename or add them, or name "
            "features that every site holds (features=[...]; fits analyze --features a,b)."
            + "".join(
                lookalike_names(
                    missing,
                    [c for c in orders[k] if c not in orders[full]],
                    (clients[full], clients[k]),
                )
                for k, missing in lacking
            )
        )
    out = [
        {
            **d,
            "order": [c for c in d["order"] if c in wanted],
            "columns": {c: v for c, v in d["columns"].items() if c in wanted},
        }
        for d in descriptions
    ]
    return out, {c: k for c, k in (kinds or {}).items() if c in wanted}


def dropped_note(
    st: Standardization, sites: Sequence[str], spec: DesignSpec | None = None
) -> str | None:
    """The warning that names the rows each site left out for a missing value
    (``missing="drop"``); None when no site left out any.  With ``spec``, its offset,
    exposure and weights columns are named among the columns whose missing values
    count."""
    if st.n_dropped is None or not st.n_dropped.any():
        return None
    columns = "the target or a numeric feature"
    if spec is not None and spec.extra_columns:
        extra = " or ".join(
            f"the {what} column {col!r}"
            for what, col in (
                ("offset", spec.offset),
                ("exposure", spec.exposure),
                ("weights", spec.weights),
            )
            if col is not None
        )
        columns = f"the target, a numeric feature or {extra}"
    total = int(st.n_dropped.sum())
    per = ", ".join(
        f"{name!r} {int(k)} of {int(k + n)}"
        for name, k, n in zip(sites, st.n_dropped, st.n_rows, strict=True)
        if k
    )
    return (
        f"missing='drop': {total} row(s) missing a value of {columns} were left out "
        f"({per}); the fit uses the other {int(st.n_rows.sum())}"
    )


def standardization_round(transport: Transport, spec: DesignSpec) -> Standardization:
    """One round of moments: federation-wide means and sds of the numeric features.

    Raises
    ------
    DesignError
        A numeric feature is constant across the federation, or its sd across the
        federation is below :data:`MIN_SD` (naming it and the power of ten to multiply
        it by at every site).
    """
    request = Message("moments", config={"design": spec.to_json(), "n_numeric": spec.n_numeric})
    st = pool_moments(transport.broadcast(request))
    constant = [name for name, sd in zip(spec.numeric, st.sds, strict=True) if not sd > 0]
    if constant:
        raise DesignError(
            f"feature(s) {constant} take one value across the federation; leave them out"
        )
    tiny = [(name, float(sd)) for name, sd in zip(spec.numeric, st.sds, strict=True) if sd < MIN_SD]
    if tiny:
        raise DesignError(
            "feature(s) "
            + ", ".join(f"{name!r} (sd {sd:.3g})" for name, sd in tiny)
            + f" vary by less than {MIN_SD:g} across the federation (the standard "
            "deviation over every site's rows): near float64's smallest number their "
            "values lose digits and their coefficients per unit (per sd / sd) overflow; "
            "multiply the column by a power of ten at every site, e.g. "
            + ", ".join(f"{name!r} by {_power_of_ten(sd)}" for name, sd in tiny)
            + " (its coefficient per unit scales by the inverse)"
        )
    return st


def site_items(tables: Any, what: str, *, start: int = 1) -> list[tuple[str, Any]]:
    """The sites' tables as (name, table) pairs: a mapping names them, a list's are
    ``site<start>``, ``site<start + 1>``, ... (``what``: the function, for the error).
    Numbered from 1 by default, as fits numbers unnamed clients everywhere
    (``client 1``, ``client 2``, ... of :class:`~fits.FITSSynthesizer`).

    Raises
    ------
    TypeError
        One DataFrame (its columns would be read as sites), a string, or anything
        that is not a list or mapping of tables: the error says how to give the sites.
    """
    if isinstance(tables, Mapping):
        return [(str(n), t) for n, t in tables.items()]
    if isinstance(tables, pd.DataFrame):
        raise TypeError(
            f"{what} takes one DataFrame per site, e.g. {what}([df_a, df_b], ...); to try "
            "federation on one table, split it first (fits.datasets.federated_split)"
        )
    if isinstance(tables, (str, bytes)) or not isinstance(tables, Sequence):
        raise TypeError(
            f"{what} takes one DataFrame per site, as a list or a mapping by site name, "
            f"got {type(tables).__name__}"
        )
    return [(f"site{k + start}", t) for k, t in enumerate(tables)]


def check_seed(seed: Any, name: str = "seed") -> None:
    """``seed`` is None, an integer >= 0 or a :class:`numpy.random.SeedSequence`, else
    an error naming the parameter (not numpy's "expected non-negative integer")."""
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= 0 or None, got {seed!r}")
    if seed < 0:
        raise ValueError(f"{name} must be an integer >= 0 or None, got {seed!r}")


class DesignSite:
    """Base of the analysis sites: holds one table, answers ``setup`` and ``moments``.

    Subclasses add message types by extending :meth:`handlers`.

    Parameters
    ----------
    data : DataFrame
        The site's table.
    name : str
        The site's name in messages and errors.
    """

    def __init__(self, data: pd.DataFrame, name: str = "site") -> None:
        if not isinstance(data, pd.DataFrame):
            raise TypeError(f"{name}: expected a pandas DataFrame, got {type(data).__name__}")
        if data.shape[0] == 0:
            raise SchemaError(f"{name}: the table is empty; every site needs rows")
        counts = pd.Series(data.columns).value_counts(sort=False)
        if (counts > 1).any():  # was: AttributeError, data[name] a DataFrame
            which = ", ".join(f"{c!r} ({int(k)} times)" for c, k in counts[counts > 1].items())
            raise SchemaError(
                f"{name}: the table names column(s) {which} more than once; every column "
                "needs its own name: rename or remove the repeated column(s) (e.g. "
                "df.loc[:, ~df.columns.duplicated()] keeps the first of each)"
            )
        self.name = name
        self.data = data
        self.builder: DesignBuilder | None = None

    @property
    def n_rows(self) -> int:
        """Rows the site's fit uses: after the ``moments`` round, those its design
        keeps (``missing="drop"`` leaves out incomplete rows); before it, every row."""
        if self.builder is not None:
            return self.builder.n_rows
        return int(self.data.shape[0])

    def handlers(self) -> dict[str, Callable[[Message], Message]]:
        """Message type -> method answering it."""
        return {"setup": self._setup, "moments": self._moments}

    def handle(self, message: Message) -> Message:
        """Answer one protocol message."""
        handler = self.handlers().get(message.type)
        if handler is None:
            raise ProtocolError(f"{self.name}: unknown message type {message.type!r}")
        return handler(message)

    def _setup(self, msg: Message) -> Message:
        declared = json.loads(str(msg.config.get("declared", "{}")))
        # text that is really numbers or dates is read as such, as a synthesis site does
        self.data, notes = parse_text_columns(self.data, declared)
        #: Per column the text values reading it as numbers made missing.
        self.text_markers = {
            name: dict(note.get("markers") or {})
            for name, note in notes.items()
            if note.get("as") == "number" and note.get("markers")
        }
        desc = describe_table(self.data, declared, client=self.name, notes=notes)
        return Message(
            "setup",
            {"n_rows": np.array([self.n_rows], dtype=np.int64)},
            {"description": json.dumps(jsonable(desc, finite=False)), "name": self.name},
        )

    def _moments(self, msg: Message) -> Message:
        spec = DesignSpec.from_json(str(msg.config["design"]))
        self.builder = DesignBuilder(
            self.data, spec, site=self.name, markers=getattr(self, "text_markers", None)
        )
        return Message("moments", self.builder.moments())

    def design(self, standardization: Standardization) -> np.ndarray:
        """The site's design matrix (after a ``moments`` request fixed the spec)."""
        if self.builder is None:
            raise ProtocolError(f"{self.name}: the design is used before the moments round")
        return self.builder.matrix(standardization)
