"""Column kinds, the shared schema, and the setup round's merge.

A :class:`Schema` says, for every column, its *kind* (``continuous``, ``ordinal`` or
``nominal``), its category list (discrete columns), its bounds (continuous columns), the
pandas dtype to give back, and the chain order in which columns are drawn.

In a federation nobody sees the pooled table, so the schema is built in a setup round:
each client describes its own table with :func:`describe_table` (counts, category sets,
min / max, dtypes -- never rows), and the coordinator merges the descriptions with
:func:`merge_descriptions`.  Users can override any column's kind, or hand in a complete
schema, in which case only the row counts are asked for.

Inference rules (METHOD.md, *decided*, extended for tables nobody prepared; the full
list with the messages a user sees is in docs/cli.md, "What fits does with your table"):

* non-numeric, boolean or categorical dtype -> nominal (an *ordered* pandas categorical
  -> ordinal);
* integer-valued numeric columns with at most :data:`MAX_ORDINAL_LEVELS` distinct values
  -> ordinal;
* other numeric columns with at most :data:`MAX_ORDINAL_LEVELS` distinct values, each
  seen on average at least :data:`LATTICE_MIN_COUNT` times (a *lattice*: ages in 5-year
  bands stored as 17.5, 22.5, ...; a log rate with 5 levels) -> ordinal, the values being
  the support; a continuous column sampled at few rows has (nearly) no ties and stays
  continuous;
* every other numeric column -> continuous; the distinct values counted are those of all
  clients together (the union of their value sets), so the kind does not depend on how
  the rows are split;
* a text column of which at least :data:`PARSE_SHARE` of the present values are numbers
  (or dates of one format) is read as numbers (dates); the rest are *markers* ("?",
  "unknown") read as missing, with a :class:`DataNote` naming them
  (:func:`parse_text_columns`);
* a text column with more than :data:`MAX_ORDINAL_LEVELS` distinct values that are
  near-unique (more than :data:`NEAR_UNIQUE_SHARE` of the present values distinct) or
  long (free text: on average more than :data:`FREE_TEXT_LENGTH` characters), or with a
  different value in every one of at least :data:`UNIQUE_TEXT_ROWS` rows, is refused
  (:class:`IdentifierColumnError`) unless declared: kind ``"id"`` (fresh surrogates, not
  modelled) or ``"nominal"`` (copied verbatim, the user's choice);
* so is, however few its values and however often each repeats, a text column of
  personal data or free text: values shaped like e-mail addresses, URLs, IP addresses,
  card, social security, phone or ID numbers (:func:`_value_shape`, judged at each site,
  which says only the shape's name), a long value (:data:`LONG_TEXT`), or few
  values averaging over :data:`FREE_TEXT_FEW_LENGTH` characters and
  :data:`FREE_TEXT_WORDS` words; and a column of more than :data:`MAX_ORDINAL_LEVELS`
  values whose name says personal data (:func:`personal_name`: ``name``,
  ``patient_name``, ``phone``, ``ssn``, ``address``, ...; names repeated over visits).
"""

from __future__ import annotations

import difflib
import hashlib
import ipaddress
import itertools
import json
import math
import os
import re
import shlex
import unicodedata
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from fits._dates import bound_number, duration_text, has_offset, iso_datetimes
from fits._exact import interval_text
from fits._json import plain
from fits.core.names import resolve_columns, resolve_keys

__all__ = [
    "BOOL_TEXTS_ATTR",
    "NA_ONLY_ATTR",
    "agreed_bool_texts",
    "labels_of_na_only",
    "na_labels_across",
    "na_labels_at",
    "na_only_cells",
    "with_na_labels",
    "NA_TEXTS",
    "NumericIdentifierWarning",
    "EMAIL",
    "FREE_TEXT_FEW_LENGTH",
    "FREE_TEXT_WORDS",
    "LONG_TEXT",
    "LONG_VALUE",
    "FREE_TEXT_LENGTH",
    "DTYPES",
    "KINDS",
    "LATTICE_MIN_COUNT",
    "MAX_DECIMALS",
    "MAX_ORDINAL_LEVELS",
    "RESOLUTIONS",
    "NEAR_UNIQUE_SHARE",
    "UNIQUE_TEXT_ROWS",
    "PARSE_SHARE",
    "CURRENCY_CODES",
    "CURRENCY_SYMBOLS",
    "CODE_COLUMNS_ATTR",
    "DECIMAL_MARK_ATTR",
    "DECIMAL_SOURCE_ATTR",
    "SURROGATE_PREFIX",
    "ConstantNote",
    "DeclaredKindError",
    "DataNote",
    "EmptyColumnError",
    "IdentifierColumnError",
    "SparseColumnError",
    "parse_text_columns",
    "surrogate_ids",
    "MANY_LEVELS_WARNING",
    "check_columns",
    "check_names",
    "POINT_MASS_SHARE",
    "ColumnSpec",
    "RULE_KINDS",
    "Rule",
    "Schema",
    "residual_spec",
    "SchemaError",
    "datetime_seconds",
    "decimal_values",
    "describe_table",
    "description_digest",
    "column_digests",
    "files_columns_differ",
    "lookalike_names",
    "check_constants",
    "coarser_than_sites",
    "merge_descriptions",
    "missing_flag",
    "personal_name",
    "output_decimals",
    "point_mass_flag",
    "to_decimals",
    "time_resolution",
    "unit_advice",
]

#: Column kinds.  ``"id"`` columns are not modelled: the output holds fresh surrogates.
#: ``"constant"`` columns (one value, or none, at every site) are not modelled either:
#: the output holds that value (or is missing) in every row.
KINDS = ("continuous", "ordinal", "nominal", "id", "constant")
#: The pandas dtype families a :class:`ColumnSpec` restores (its ``dtype``).
DTYPES = ("float", "int", "bool", "category", "string", "object", "datetime")
#: Numeric columns with at most this many distinct values are ordinal (non-integer ones
#: only when their values repeat, see :data:`LATTICE_MIN_COUNT`).
#: The narrowest and widest span (max - min) of a continuous column fits models, with a
#: margin: a column conditioned on another, spanning 2e104 or 2e-200 (150 rows a site,
#: either kernel), came out as one value in every synthetic row, 2e103 and 2e-100 as
#: they should (the float64 range's cube root is 5.6e102: the estimates overflow or
#: underflow there).
MIN_SPAN = 1e-100
MAX_SPAN = 1e100

MAX_ORDINAL_LEVELS = 20
#: A non-integer numeric column with at most :data:`MAX_ORDINAL_LEVELS` distinct values is
#: ordinal only when the rows are at least this many times the distinct values.
LATTICE_MIN_COUNT = 2
#: A text column is read as numbers (dates) when at least this share of its present
#: values parse; the others are markers read as missing.
PARSE_SHARE = 0.95
#: The key of :attr:`pandas.DataFrame.attrs` that holds the decimal mark of the file a
#: table was read from (``","``: :func:`fits.io.read_table` read it with a decimal
#: comma), which :func:`parse_text_columns` reads numbers in text columns with
#: ("1.234,56 €"); a table without it has a decimal point.
DECIMAL_MARK_ATTR = "fits_decimal_mark"
#: The key of :attr:`pandas.DataFrame.attrs` that says how sure the decimal mark of
#: :data:`DECIMAL_MARK_ATTR` is, for a table :func:`fits.io.read_table` read from a file
#: not separated by commas: ``"settled"`` (a number of the file's first lines is written
#: with it one way only: "12,5", "1.234,56", "3.14") or ``"guess"`` (none is: "1,234"
#: alone reads as 1234 or as 1.234).  A table without it is sure of its mark: a decimal
#: comma (:data:`DECIMAL_MARK_ATTR`) as ``"settled"``; else a decimal point, *fixed* (a
#: comma-separated file, whose numbers cannot hold a decimal comma, or a DataFrame): no
#: text number of it is read with a decimal comma.  :func:`parse_text_columns` decides
#: each column's decimal mark with it (:func:`_column_mark`).
DECIMAL_SOURCE_ATTR = "fits_decimal_mark_source"
#: The key of :attr:`pandas.DataFrame.attrs` that lists a table's columns of codes
#: written with digits alone, read as text because another site's table writes them
#: with leading zeros (:func:`fits.io.align_codes`): :func:`parse_text_columns` leaves
#: them text, as it does the codes with leading zeros themselves.
CODE_COLUMNS_ATTR = "fits_code_columns"
#: The key of :attr:`pandas.DataFrame.attrs` that maps a CSV column of booleans written
#: one way other than Python's (``true``/``false``, ``TRUE``/``FALSE``) to its
#: ``[true text, false text]``, set by :func:`fits.io.read_table`: a site reports it at
#: setup (:func:`describe_table`, ``"bool_texts"``) and a CSV output writes the column
#: so where every site agrees (:func:`agreed_bool_texts`).
BOOL_TEXTS_ATTR = "fits_bool_texts"
#: The key of :attr:`pandas.DataFrame.attrs` that maps a CSV column whose fields are all
#: one of :data:`NA_TEXTS` (or empty), such as ``"NA"`` in every row, read as missing
#: values, to ``{"text": T, "rows": R}``: R is None when every field is T, else the
#: hex of :func:`numpy.packbits` of the rows that hold T.  Alone such a column is
#: missing (pandas' reading); a site reports it at setup (:func:`describe_table`,
#: ``"na_only"``, with the column as it reads with T a label), and where another site
#: holds T as a label of the column, T is a label here too (:func:`labels_of_na_only`).
NA_ONLY_ATTR = "fits_na_only"
#: The texts pandas reads as missing values by default (its ``na_values``), less the
#: empty field. In a CSV column of labels :func:`fits.io.read_table` keeps them as written.
NA_TEXTS = frozenset(
    {
        "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
        "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
    }
)  # fmt: skip
#: A text column with more distinct values than this share of its present values (and
#: more than :data:`MAX_ORDINAL_LEVELS`) is near-unique: an identifier; refused.
NEAR_UNIQUE_SHARE = 0.5
#: A text column whose distinct values average more characters than this (and that has
#: more than :data:`MAX_ORDINAL_LEVELS` of them) is free text; refused.
FREE_TEXT_LENGTH = 30
#: A text column with a different value in every row, over at least this many rows in
#: all, is an identifier however few its values (a small table's emails); refused.  A
#: column of whole numbers that is a row number, at every site of this many rows or
#: more (sites all smaller: the product of their rows' factorials reaches this one's).
UNIQUE_TEXT_ROWS = 10
#: An e-mail address (``name@example.org``).  A text column of which at least
#: :data:`PARSE_SHARE` of the distinct values are e-mail addresses is an identifier
#: however few its values and however often each repeats (a customer's orders, an
#: account manager's clients): personal data a synthetic table would copy verbatim;
#: refused unless declared (``"id"``: surrogates; ``"nominal"``: copied on purpose).
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s.]+$")
#: A URL (``https://...``, ``www.example.org/...``): a column of them is personal data
#: as :data:`EMAIL` is (a profile's address), judged as :func:`_value_shape` says.
URL = re.compile(r"^(?:[a-z][a-z0-9+.\-]*://\S+|www\.[^\s./]+\.\S+)$", re.IGNORECASE)
#: An IPv4 address (an IPv6 one is what :mod:`ipaddress` reads as one).
IPV4 = re.compile(
    r"^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$"
)
#: A US social security number, ``ddd-dd-dddd``.
SSN = re.compile(r"^\d{3}-\d{2}-\d{4}$")
#: Text that may be a phone, card or national ID number: digits, ``+ ( ) - . /`` and
#: spaces alone (:func:`_value_shape`).
DIGIT_CODE = re.compile(r"^\+?[\d\s().\-/]+$")
#: The fewest digits of a phone number, the most; the fewest of an ID-like code.
PHONE_DIGITS = (7, 15)
ID_DIGITS = 6
#: A text column any distinct value of which (two distinct values at least) is longer
#: than this many characters and holds at least :data:`FREE_TEXT_WORDS` words is free
#: text, however few its values and however often each repeats (a note pasted into
#: every visit's row; a 10,000-character document).  A long label of one word (a
#: 300-character code) is no free text.
LONG_TEXT = 200
#: A text column any distinct value of which (two distinct values at least) is longer
#: than this many characters is free text whatever its words: a document or a blob
#: (JSON, an encoded file), no category label.
LONG_VALUE = 1000
#: A text column of at most :data:`MAX_ORDINAL_LEVELS` distinct values (two at least)
#: that average more than this many characters and at least :data:`FREE_TEXT_WORDS`
#: words is free text too (a template note repeated over rows); category labels are
#: shorter and of fewer words (Adult's longest: 26 characters, one word).
FREE_TEXT_FEW_LENGTH = 40
#: The fewest words (runs of text between spaces) the distinct values of a column of
#: few values average for :data:`FREE_TEXT_FEW_LENGTH` to make it free text.
FREE_TEXT_WORDS = 6
#: Surrogate values of an ``"id"`` column: this prefix and a zero-padded row number.
SURROGATE_PREFIX = "synthetic-"
#: An integer column whose values are all distinct at every site, with at least this many
#: rows in all, draws a warning: it looks like a numeric identifier.
NUMERIC_ID_WARNING = 50
#: A nominal column with more levels than this draws a warning (it is probably an id).
MANY_LEVELS_WARNING = 1000
#: A text column of more than :data:`MAX_ORDINAL_LEVELS` values, not declared, whose
#: values hold fewer than this many rows each on average draws a warning: it may be an
#: identifier that repeats over rows (a patient id over visits), copied verbatim.
REPEATED_ID_ROWS = 5
#: A continuous column whose most frequent value holds at least this share of the
#: (present) values gets a point-mass indicator (zero-inflated columns, e.g. capital-gain).
POINT_MASS_SHARE = 0.1
#: Clients report their most frequent value of a continuous column only from this share.
_POINT_MASS_REPORT = 0.05
EXACT_FLOAT_INT = 2**53
"""float64 holds every whole number up to this magnitude exactly; past it an integer
column's description also carries its exact bounds (``int_min`` / ``int_max``)."""
#: A continuous column of whole numbers past 2**53 is refused when float64 holds fewer
#: than this many of its whole numbers across its range (:func:`_check_whole_span`).
MIN_FLOAT_STEPS = 1000
#: Most decimals of a float column kept in the schema (more: full precision, no rounding).
MAX_DECIMALS = 12
#: Most digits after the point of a column of ``Decimal`` objects (its scale), the most a
#: Parquet ``decimal256`` holds; a site whose values have more refuses the column (it was
#: 38, a ``decimal128``'s: a ``decimal256(70, 60)`` column's values of order 1e-44 came
#: back all zero).
MAX_DECIMAL_SCALE = 76
#: Time units a datetime column's values can all be whole multiples of, coarsest first
#: (whole days are :attr:`ColumnSpec.date_only`), with their length in microseconds.
RESOLUTIONS = {"h": 3_600_000_000, "min": 60_000_000, "s": 1_000_000, "ms": 1_000}


#: The step (seconds) of an order rule's differences between two datetime columns without
#: a time zone, by the column's :attr:`ColumnSpec.resolution` (whole days: a day).
_ORDER_STEPS = {"h": 3_600.0, "min": 60.0, "s": 1.0}

#: A datetime column's grid in microseconds: whole days, its resolution, or 1 us.
_GRID_US = {"D": 86_400_000_000, **RESOLUTIONS}


def order_grid(dep: ColumnSpec, src: ColumnSpec) -> bool:
    """Whether an order rule ``dep >= src`` survives ``dep``'s rounding: two number
    columns or two datetime columns (both without a time zone, or both in the same
    one), every value ``src`` is written as lying on ``dep``'s grid (whole numbers on
    whole numbers; at most ``dep``'s decimals; a datetime unit a whole multiple of
    ``dep``'s: days on hours, not hours on days; ``dep`` not rounded: any).  Rounding
    to a grid is monotone and keeps a value on the grid, so ``src + d`` with ``d >= 0``
    rounds to at least ``src``."""
    if (dep.dtype == "datetime") != (src.dtype == "datetime"):
        return False
    if dep.dtype == "datetime":
        if dep.tz != src.tz:
            return False

        def unit(spec: ColumnSpec) -> int:
            return _GRID_US["D"] if spec.date_only else _GRID_US.get(spec.resolution or "", 1)

        return unit(src) % unit(dep) == 0
    if dep.dtype == "int":
        return src.dtype == "int"
    if dep.decimals is None or src.dtype == "int":
        return True
    return src.decimals is not None and src.decimals <= dep.decimals


def shift_grid(dep: ColumnSpec, src: ColumnSpec, seconds: float) -> bool:
    """Whether an affine rule ``dep = src + seconds`` between two datetime columns
    survives ``dep``'s rounding: :func:`order_grid` (``src``'s grid on ``dep``'s), the
    shift a whole multiple of ``dep``'s unit, and, for whole days in a time zone, a
    copy (a shift of whole days in seconds crosses a daylight-saving change off
    midnight)."""
    if dep.dtype != "datetime" or not order_grid(dep, src):
        return False
    micros = round(float(seconds) * 1e6)
    if dep.date_only and dep.tz is not None:
        return micros == 0
    unit = _GRID_US["D"] if dep.date_only else _GRID_US.get(dep.resolution or "", 1)
    return micros % unit == 0


class SchemaError(ValueError):
    """Input tables do not fit together, or do not fit the declared schema."""


class EmptyColumnError(SchemaError):
    """A column carries no information: it holds one value, or no value, at every site.

    No longer raised by fits itself: the setup round's merge keeps such a column as
    kind ``"constant"`` (written as its value, or as missing; not modelled).  Kept so
    that code catching it still imports.

    Attributes
    ----------
    column : str
        The column.
    problem : str
        What is wrong with it, e.g. ``"takes one value at every site"``.
    """

    def __init__(self, message: str, column: str, problem: str) -> None:
        super().__init__(message)
        self.column = column
        self.problem = problem


class IdentifierColumnError(SchemaError):
    """Columns look like identifiers or free text, which fits will not copy or model.

    Attributes
    ----------
    columns : list of str
        The refused columns.
    """

    def __init__(self, message: str, columns: Sequence[str]) -> None:
        super().__init__(message)
        self.columns = list(columns)


class DeclaredKindError(SchemaError):
    """A declared kind the column's values cannot take: ``"constant"`` on a column of
    several values.  A usage error (the declaration is the user's to change), not a
    data error.

    Attributes
    ----------
    column : str
        The column.
    kind : str
        Its declared kind.
    """

    def __init__(self, message: str, column: str, kind: str) -> None:
        super().__init__(message)
        self.column = column
        self.kind = kind


class SparseColumnError(SchemaError):
    """A continuous column that no site holds enough values of to answer for it under
    its policy's effective-rows floor (``min_effective_rows``, k): every site would
    abstain from every request on it, so it could not be drawn.  Judged at configure
    from the counts the sites already sent (rows and missing values per column at
    setup, k with their policies), before any draw.

    Attributes
    ----------
    column : str
        The column.
    present : dict of str to int
        Per site, its rows holding a value of the column that it would answer from.
    floors : dict of str to float
        Per site, its k.
    """

    def __init__(
        self,
        message: str,
        column: str,
        present: Mapping[str, int],
        floors: Mapping[str, float],
    ) -> None:
        super().__init__(message)
        self.column = column
        self.present = dict(present)
        self.floors = dict(floors)


class UnsupportedColumnError(SchemaError):
    """A site's column holds values no kind models (times of day, durations, ...):
    :func:`check_columns` refuses such a table before a fit; an analysis, which needs
    only some columns, learns it from the sites' descriptions.

    Attributes
    ----------
    column, holds, sites, fix : str
        The column, what it holds, the sites where it does, and how to fix it.
    """

    def __init__(self, message: str, column: str, holds: str, sites: str, fix: str) -> None:
        super().__init__(message)
        self.column, self.holds, self.sites, self.fix = column, holds, sites, fix


class DataNote(UserWarning):
    """Something fits inferred about a table that its user should know (markers read as
    missing, a separator or a date format it chose); the command line prints it."""


class ConstantNote(DataNote):
    """The columns written as a constant or as missing and not modelled (kind
    ``"constant"``), said by :func:`merge_descriptions` with how to drop them."""


class NumericIdentifierWarning(UserWarning):
    """A whole-number column with a different value in every row (it looks like a
    numeric identifier) is modelled as continuous.  ``column`` names it, so that a
    command can give the advice that fits it (``fits report``, ``fits analyze``)."""

    def __init__(self, message: str, column: str = "") -> None:
        super().__init__(message)
        self.column = column


@dataclass
class ColumnSpec:
    """One column of the shared schema.

    Parameters
    ----------
    name : str
        Column name.
    kind : {"continuous", "ordinal", "nominal", "id", "constant"}
        How the column is modelled; ``"id"`` columns are not modelled, the output holds
        fresh surrogate values (:func:`surrogate_ids`).  ``"constant"`` columns hold one
        value in every row at every site, or none: they are not modelled (no site is
        asked about them), the output holds that value in every row -- given as
        ``categories`` (a one-value list) or as ``lower`` equal to ``upper`` (numbers,
        datetimes: seconds since 1970-01-01 UTC) -- or is missing in every row (neither
        given, ``missing`` true).  A constant with ``missing`` true *and* a value (a
        datetime column of one value and some missing values) gets its missingness
        indicator drawn in the chain, and the value where the indicator says present
        (:meth:`Schema.expanded`).  Set by the setup round's merge
        (:func:`merge_descriptions`), not declared.
    dtype : str
        The pandas dtype family to restore: ``"float"``, ``"int"``, ``"bool"``,
        ``"category"``, ``"string"`` or ``"object"``.
    categories : list, optional
        Discrete columns: the support.  Ordinal columns keep it in increasing order
        (numeric values, or the order of an ordered categorical); nominal columns keep
        the sorted labels (METHOD.md: coding by sorted labels).
    lower, upper : float, optional
        Continuous columns: the range synthetic values are kept in (datetimes: seconds
        since 1970-01-01 UTC).
    missing : bool
        The column has missing values somewhere.  A discrete column then has ``None``
        among its categories (missing is a category of its own); a continuous column
        gets a missingness indicator drawn just before it in the chain.
    indicates : str, optional
        Set on an internal indicator column: the name of the column it marks.
    indicator : {"missing", "point_mass"}
        With ``indicates``: whether the indicator marks missing values or values at the
        column's point mass.
    point_mass : float, optional
        Continuous columns: a value held by at least :data:`POINT_MASS_SHARE` of the
        rows (e.g. the zeros of a zero-inflated column).  It gets an indicator drawn
        before the column, so synthetic rows hit it exactly as often as real ones.  An
        integer column's value past 2**53 is kept as the exact Python ``int`` (JSON
        too), as its bounds are, and synthetic rows at it get it exactly.
    tz : str, optional
        Datetime columns: the time zone to restore.
    date_only : bool
        Datetime columns whose values are all at midnight: synthetic values are rounded
        to whole days.
    resolution : {"h", "min", "s", "ms"}, optional
        Datetime columns (not whole days): the coarsest time unit every real value is a
        whole multiple of, at every client; synthetic values are rounded to it.  None:
        microseconds (fits' resolution for datetimes).
    decimals : int, optional
        Continuous float columns: the most decimals a real value has at any client (0 to
        :data:`MAX_DECIMALS`; :func:`output_decimals`); synthetic values are rounded to
        that many (half to even), so ``12.25`` does not come back as ``12.2483116``.
        None: full precision (some value has more decimals, or the schema says so: set
        it to null to switch the rounding off).
    pandas_dtype : str, optional
        The input's exact pandas dtype (``"Int64"``, ``"boolean"``, ``"int32"``,
        ``"str"``, ...) when every client has the same, else the clients' common type
        (the one ``pd.concat`` of their columns gives: ``"float64"`` for integers and
        floats, ``"str"`` for a categorical and ``str`` text, ...) where it holds every
        value unchanged; the output is given it back.  Datetimes: the sites' dtype when
        they share one (``"datetime64[s]"``, ``"datetime64[ns, Europe/Paris]"``), whose
        time unit the output takes where it holds every synthetic value (the time zone
        is ``tz``); ``"object"``: ``datetime.date`` objects.
    dtype_categories : list, optional
        Pandas categoricals: every category of the input's dtype, unused ones included,
        in the dtype's order (the output has the same ``CategoricalDtype``).
    dtype_ordered : bool
        Pandas categoricals: whether the input's dtype is ordered.
    markers : dict, optional
        Text columns read as numbers or dates: the values that did not parse ("?",
        "unknown", ...), read as missing, with their counts over all clients.
    parsed : str, optional
        Text columns read as numbers or dates: ``"number"``, or the date format(s)
        the clients read them with (e.g. ``"%m/%d/%Y"``).
    decimal_scale : int, optional
        Columns of Python :class:`~decimal.Decimal` objects (a Parquet decimal column,
        a money column; every site's): the most digits after the point a value has at
        any site (0 to :data:`MAX_DECIMAL_SCALE`; ``Decimal("12.30")`` has 2).  The
        column is modelled as numbers (``dtype`` ``"float"`` or ``"int"``); the output
        holds ``Decimal`` objects with exactly that many digits after the point
        (:func:`to_decimals`), and a Parquet output a decimal column
        (:attr:`decimal_type`).  None: not a ``Decimal`` column.
    """

    name: str
    kind: str
    dtype: str = "float"
    categories: list[Any] | None = None
    lower: float | None = None
    upper: float | None = None
    missing: bool = False
    indicates: str | None = None
    tz: str | None = None
    date_only: bool = False
    resolution: str | None = None
    decimals: int | None = None
    point_mass: float | None = None
    indicator: str = "missing"
    pandas_dtype: str | None = None
    dtype_categories: list[Any] | None = None
    dtype_ordered: bool = False
    markers: dict[str, int] | None = None
    parsed: str | None = None
    decimal_scale: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SchemaError(
                f"column {self.name!r}: unknown kind {self.kind!r}; use one of {', '.join(KINDS)}"
            )
        if self.resolution is not None and self.resolution not in RESOLUTIONS:
            raise SchemaError(
                f"column {self.name!r}: unknown resolution {self.resolution!r}; use one of "
                f"{', '.join(RESOLUTIONS)} or null (microseconds)"
            )
        if self.decimals is not None and (
            isinstance(self.decimals, bool)
            or not isinstance(self.decimals, (int, np.integer))
            or not 0 <= self.decimals <= MAX_DECIMALS
        ):
            raise SchemaError(
                f'column {self.name!r}: "decimals" must be a whole number from 0 to '
                f"{MAX_DECIMALS} or null (full precision), got {self.decimals!r}"
            )
        if self.decimal_scale is not None and (
            isinstance(self.decimal_scale, bool)
            or not isinstance(self.decimal_scale, (int, np.integer))
            or not 0 <= self.decimal_scale <= MAX_DECIMAL_SCALE
            or self.dtype not in ("int", "float")
        ):
            raise SchemaError(
                f'column {self.name!r}: "decimal_scale" must be a whole number from 0 to '
                f'{MAX_DECIMAL_SCALE} on a numeric column ("dtype" "int" or '
                f'"float"), or null (not a column of Decimal objects), got '
                f"{self.decimal_scale!r} (dtype {self.dtype!r})"
            )
        if self.kind == "constant":
            self._check_constant_value()
        if self.kind in ("ordinal", "nominal"):
            if not self.categories:
                an = "an" if self.kind == "ordinal" else "a"
                option = shlex.quote(f"{self.name}={self.kind}")
                raise SchemaError(
                    f"column {self.name!r}: {an} {self.kind} column needs categories (a "
                    '"categories" list of its values); to change a column\'s kind, detect the '
                    "schema again with the new kind, which lists them: fits schema ... --kind "
                    f"{option}, or Schema.detect(tables, kinds={{{self.name!r}: {self.kind!r}}})"
                )
            if len(set(map(plain, self.categories))) != len(self.categories):
                raise SchemaError(f"column {self.name!r}: categories are not unique")
            if None in self.categories and not self.missing:
                raise SchemaError(
                    f"column {self.name!r}: its categories include null (missing values) but "
                    '"missing" is not true; set "missing": true, or remove null from the '
                    "categories if the column has no missing values"
                )
        self._check_bounds_and_types()

    def _check_constant_value(self) -> None:
        """A ``"constant"`` column holds one value (a one-value ``categories`` list, or
        ``lower`` equal to ``upper``), or none (``missing`` true and neither given)."""
        where = f"column {self.name!r}: a constant column"
        if self.categories is not None:
            if (
                len(self.categories) != 1
                or self.categories[0] is None
                or self.lower is not None
                or self.upper is not None
            ):
                raise SchemaError(
                    f'{where} holds one value: a "categories" list of exactly one value '
                    f'(not null), or "lower" equal to "upper", not both; got categories '
                    f"{self.categories!r}"
                )
            return
        if self.lower is None and self.upper is None:
            if not self.missing:
                raise SchemaError(
                    f'{where} with no value ("categories" or "lower"/"upper") is missing in '
                    'every row: set "missing": true, or give its value'
                )
            return
        if self.lower is None or self.upper is None or self.lower != self.upper:
            raise SchemaError(
                f'{where} holds one value: "lower" must equal "upper" (got {self.lower!r} '
                f"and {self.upper!r}); a column of several values needs another kind: detect "
                "the schema again (fits schema ...)"
            )

    @property
    def constant_value(self) -> Any:
        """A ``"constant"`` column's value (a datetime's: seconds since 1970-01-01 UTC);
        None for a column missing in every row, and for other kinds."""
        if self.kind != "constant":
            return None
        if self.categories is not None:
            return self.categories[0]
        return self.lower

    @property
    def all_missing(self) -> bool:
        """Whether the column is missing in every row (a ``"constant"`` with no value)."""
        return self.kind == "constant" and self.categories is None and self.lower is None

    def _check_bounds_and_types(self) -> None:
        """Hand-edited fields a fit would fail on deep inside, or silently ignore: bounds
        that are not numbers in order, a dtype family or time zone nobody knows."""
        if self.dtype not in DTYPES:
            raise SchemaError(
                f'column {self.name!r}: unknown "dtype" {self.dtype!r}; use one of '
                f"{', '.join(DTYPES)}"
            )
        for key in ("lower", "upper"):
            value = getattr(self, key)
            if value is not None and not (
                isinstance(value, (int, float, np.integer, np.floating))
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                raise SchemaError(
                    f'column {self.name!r}: "{key}" must be a finite number, got {value!r}'
                )
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise SchemaError(
                f'column {self.name!r}: "lower" ({self.lower:g}) is above "upper" '
                f"({self.upper:g}); swap them"
            )
        if self.pandas_dtype is not None:
            self._check_pandas_dtype()
        if self.tz is not None:
            try:
                pd.DatetimeTZDtype("ns", self.tz)
            except Exception as exc:  # ZoneInfoNotFoundError, pytz's, TypeError ...
                raise SchemaError(
                    f'column {self.name!r}: unknown time zone "tz" {self.tz!r} ({exc}); use '
                    'a name such as "UTC" or "Europe/Paris", an offset such as "UTC+05:30", '
                    "or null (local times)"
                ) from None

    def _check_pandas_dtype(self) -> None:
        """A ``pandas_dtype`` pandas knows, and one that can hold the column's values: an
        integer or boolean dtype on a ``"float"`` column would truncate its synthetic
        values when the output is given that dtype (2.7 -> 2)."""
        try:
            target = pd.api.types.pandas_dtype(self.pandas_dtype)
        except (TypeError, ValueError):
            raise SchemaError(
                f'column {self.name!r}: unknown "pandas_dtype" {self.pandas_dtype!r}; use a '
                'pandas dtype name such as "float64", "Int64" or "string", or null'
            ) from None
        if self.dtype == "float" and (
            pd.api.types.is_integer_dtype(target) or pd.api.types.is_bool_dtype(target)
        ):
            raise SchemaError(
                f'column {self.name!r}: "dtype" is "float" but "pandas_dtype" '
                f"{self.pandas_dtype!r} holds only whole numbers or booleans, so the "
                'output would cut its values; set "pandas_dtype" to "float64" or null '
                '(or "dtype" back to "int")'
            )

    @property
    def bounds(self) -> tuple[float, float]:
        """(lower, upper), with -inf / inf where a bound is not set."""
        return (
            -math.inf if self.lower is None else float(self.lower),
            math.inf if self.upper is None else float(self.upper),
        )

    @property
    def text_date_format(self) -> str | None:
        """The ``strftime`` format of a column read from text dates of one format at
        every site other than ISO 8601 (:attr:`parsed`, e.g. ``"%d/%m/%Y"``; an
        ambiguous day and month keep the format they were read with), else None.

        A CSV output writes the column's synthetic dates in it
        (:meth:`Schema.date_formats`, :func:`fits.io.write_table_chunks`), so that the
        file reads as the input did; synthetic dates lie within the real ones' bounds,
        so a two-digit year (``%y``) reads back as the year written.
        """
        if self.parsed is None or self.parsed.startswith("number"):
            return None
        # the sites' formats, joined: one format read decisively at some sites and
        # ambiguously at others is still one
        read = self.parsed.replace(AMBIGUOUS_DAY, "")
        for fmt in DATE_FORMATS[1:]:
            if read in (fmt, f"{fmt}, {fmt}"):
                return fmt
        return None

    @property
    def decimal_type(self) -> tuple[int, int] | None:
        """(precision, scale) of the fixed-point type that holds every output value of
        a ``Decimal`` column (:attr:`decimal_scale`), else None.

        The scale is :attr:`decimal_scale`; the precision is that plus the digits
        before the point of the largest magnitude the output can take (the larger of
        ``|lower|`` and ``|upper|``, or of the numeric categories, rounded to the
        scale: output values never leave them), at least 1.  A bound that is not set
        gives the most a ``decimal128`` holds, 38.  The Parquet output writes the
        column with this type, so that every chunk of one file has the same
        (:func:`fits.io.write_table_chunks`).
        """
        if self.decimal_scale is None:
            return None
        scale = int(self.decimal_scale)
        if self.is_discrete or self.categories is not None:
            ends = [float(c) for c in self.categories or [] if _is_number(c)]
        else:
            ends = [b for b in (self.lower, self.upper) if b is not None]
            if len(ends) < 2:
                return max(38, scale), scale
        top = max((abs(float(v)) for v in ends), default=0.0)
        whole = max(Decimal(format(top, f".{scale}f")).adjusted() + 1, 0)
        return max(whole + scale, 1), scale

    @property
    def past_float(self) -> bool:
        """Whether the column holds whole numbers float64 cannot all hold exactly: an
        integer column whose bounds or values pass 2**53 in magnitude (sum and affine
        rules, computed in float64, are neither looked for nor accepted on it)."""
        if self.dtype != "int":
            return False
        ends = (
            [c for c in self.categories or [] if _is_number(c)]
            if self.is_discrete
            else [b for b in (self.lower, self.upper) if b is not None]
        )
        return any(abs(v) > EXACT_FLOAT_INT for v in ends)

    @property
    def is_discrete(self) -> bool:
        """Whether the column is ordinal or nominal."""
        return self.kind in ("ordinal", "nominal")

    @property
    def is_modelled(self) -> bool:
        """Whether the engine draws the column (every kind but ``"id"`` and
        ``"constant"``)."""
        return self.kind not in ("id", "constant")

    @property
    def n_levels(self) -> int:
        """Number of categories (0 for continuous columns)."""
        return len(self.categories) if self.categories else 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "dtype": self.dtype}
        if self.is_discrete or (self.kind == "constant" and self.categories is not None):
            out["categories"] = [plain(c) for c in self.categories or []]
        elif self.kind == "continuous" or (self.kind == "constant" and self.lower is not None):
            out["lower"] = self.lower
            out["upper"] = self.upper
        if self.missing:
            out["missing"] = True
        if self.indicates is not None:
            out["indicates"] = self.indicates
        if self.tz is not None:
            out["tz"] = self.tz
        if self.date_only:
            out["date_only"] = True
        if self.resolution is not None:
            out["resolution"] = self.resolution
        if self.decimals is not None:
            out["decimals"] = int(self.decimals)
        if self.point_mass is not None:
            out["point_mass"] = self.point_mass
        if self.indicates is not None and self.indicator != "missing":
            out["indicator"] = self.indicator
        if self.pandas_dtype is not None:
            out["pandas_dtype"] = self.pandas_dtype
        if self.dtype_categories is not None:
            out["dtype_categories"] = [plain(c) for c in self.dtype_categories]
            out["dtype_ordered"] = self.dtype_ordered
        if self.markers:
            out["markers"] = dict(self.markers)
        if self.parsed is not None:
            out["parsed"] = self.parsed
        if self.decimal_scale is not None:
            out["decimal_scale"] = int(self.decimal_scale)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ColumnSpec:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        SchemaError
            A field is missing or of the wrong type; the message names the column and
            the field.
        """
        if not isinstance(d, Mapping):
            raise SchemaError(f"each entry of 'columns' must be an object, got {d!r}")
        if "name" not in d:
            raise SchemaError(f'a column entry has no "name": {dict(d)!r}')
        name = str(d["name"])
        if "kind" not in d:
            raise SchemaError(f'column {name!r} has no "kind"; give one of {", ".join(KINDS)}')
        _check_keys(d, [f.name for f in fields(cls)], f"column {name!r}")
        numbers = {}
        for key in ("lower", "upper", "point_mass"):
            value = d.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise SchemaError(
                    f'column {name!r}: "{key}" must be a number (or null), got {value!r}'
                )
            # a whole number float64 would round (an integer column's bound or point
            # mass past 2**53) stays exact
            exact = isinstance(value, int) and float(value) != value
            numbers[key] = None if value is None else value if exact else float(value)
        cats = d.get("categories")
        if cats is not None and not isinstance(cats, list):
            raise SchemaError(f'column {name!r}: "categories" must be a list, got {cats!r}')
        for key in ("missing", "date_only", "dtype_ordered"):  # "false" is not false
            value = d.get(key)
            if value is not None and not isinstance(value, bool):
                raise SchemaError(
                    f'column {name!r}: "{key}" must be true or false (JSON, no quotes), '
                    f"got {value!r}"
                )
        for key in ("dtype", "tz", "pandas_dtype", "indicates", "indicator"):
            value = d.get(key)
            if value is not None and not isinstance(value, str):
                raise SchemaError(f'column {name!r}: "{key}" must be text (or null), got {value!r}')
        _check_label_types(name, d.get("dtype"), cats, d.get("parsed") or d.get("markers"))
        return cls(
            name=name,
            kind=str(d["kind"]),
            dtype=str(d.get("dtype", "float")),
            categories=list(cats) if cats is not None else None,
            lower=numbers["lower"],
            upper=numbers["upper"],
            missing=bool(d.get("missing", False)),
            indicates=d.get("indicates"),
            tz=d.get("tz"),
            date_only=bool(d.get("date_only", False)),
            resolution=d.get("resolution"),
            decimals=d.get("decimals"),
            point_mass=numbers["point_mass"],
            indicator=str(d.get("indicator", "missing")),
            pandas_dtype=d.get("pandas_dtype"),
            dtype_categories=(
                list(d["dtype_categories"]) if d.get("dtype_categories") is not None else None
            ),
            dtype_ordered=bool(d.get("dtype_ordered", False)),
            markers=dict(d["markers"]) if d.get("markers") else None,
            parsed=d.get("parsed"),
            decimal_scale=d.get("decimal_scale"),
        )


#: The JSON types of a schema file's categories each dtype reads its labels back as.
_LABEL_TYPES: dict[str, tuple[type, ...]] = {
    "bool": (bool,),
    "int": (int,),
    "float": (int, float),
    "string": (str,),
}


def _check_label_types(name: str, dtype: Any, cats: list[Any] | None, parsed: Any) -> None:
    """Refuse a schema file whose ``dtype`` cannot hold its column's categories: a bool
    column's ``"dtype"`` edited to ``"string"`` gave True in every synthetic row (its
    labels False and True went out as text, and any text is true), a text column's
    edited to ``"bool"`` the same, without a word.  Columns read from text as numbers
    or dates (``parsed``, ``markers``) keep their own labels and are not checked."""
    expected = _LABEL_TYPES.get(str(dtype)) if dtype is not None else None
    if expected is None or not cats or parsed:
        return
    wrong = [  # a JSON true is an int to Python: only a bool column holds one
        c
        for c in cats
        if c is not None
        and (dtype != "bool" if isinstance(c, bool) else not isinstance(c, expected))
    ]
    if wrong and dtype in ("int", "float") and all(isinstance(c, str) for c in wrong):
        try:
            [float(c) for c in wrong]
        except ValueError:
            pass
        else:
            raise SchemaError(
                f'column {name!r} holds numbers ("dtype" {dtype!r}), but the schema\'s '
                f"categories are text ({wrong[:3]!r}): write them as numbers, without "
                'quotes (1, not "1")'
            )
    if wrong:
        kinds = sorted({type(c).__name__ for c in wrong})
        raise SchemaError(
            f'column {name!r}: "dtype" is {dtype!r}, but its "categories" hold '
            f"{wrong[:3]!r} ({', '.join(kinds)}), which a {dtype} column cannot give back "
            'in the output; set "dtype" back to what `fits schema` wrote, or write the '
            "schema again"
        )


def _check_keys(d: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    """Refuse keys a schema entry does not have: a misspelt key ("mising", "Order") was
    ignored, and its default used without a word."""
    unknown = [str(k) for k in d if k not in allowed]
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key.lower(), allowed, n=1, cutoff=0.6)
        hints.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    raise SchemaError(
        f"{where} has key(s) {', '.join(hints)} that fits does not know (its keys: "
        f"{', '.join(allowed)}); fix or remove them"
    )


#: Kinds of rules (:class:`Rule`): the exact ones, and ``"linear"`` (a near-linear
#: column drawn as its residual; docs/method.md, "Near-linear columns").
RULE_KINDS = ("function", "sum", "affine", "linear", "interval", "order")


@dataclass
class Rule:
    """An exact rule between columns that holds in every real row at every site, or a
    near-linear column drawn as its residual (``"linear"``).

    Detected at setup (:mod:`fits.core.rules`, docs/method.md "Exact rules" and
    "Near-linear columns"), reported in :attr:`Schema.rules`, and used to generate
    ``column`` from the columns ``of`` instead of drawing it from the chain (a
    ``"linear"`` rule: the chain draws the residual in ``column``'s place).

    Parameters
    ----------
    column : str
        The dependent column.
    of : list of str
        The columns it is a function of (``"function"``: one or two discrete columns),
        or the parts it is the sum of (``"sum"``), or the one column it is an affine
        function of (``"affine"``), or the one continuous column it is near-linear in
        (``"linear"``), or the one continuous column whose intervals it follows
        (``"interval"``), or the one column it is never below (``"order"``).
    kind : {"function", "sum", "affine", "linear", "interval", "order"}
        ``"function"``: ``column`` (discrete) takes one value per combination of the
        ``of`` columns' values (discrete), given by ``mapping``.  ``"sum"``: ``column``
        (continuous) equals the sum of the ``of`` columns (numeric) in every row.
        ``"affine"``: ``column`` (continuous) equals ``slope * of[0] + intercept``
        (rounded to ``decimals``) in every row.  ``"linear"``: ``column`` (continuous)
        is ``slope * of[0] + intercept + R``, the residual R not 0 but drawn by the
        chain in ``column``'s place, within ``[lower, upper]`` (not an exact rule: the
        pooled least-squares line of a pair with R^2 >=
        :data:`fits.core.rules.NEAR_LINEAR_R2`).  ``"interval"``: ``column`` (discrete)
        is a step function of ``of[0]`` (continuous numbers or datetimes): each of its
        values (its missing value one of them, where it has missing values) occupies
        one interval of ``of[0]``, given by ``intervals``.  ``"order"``: ``column``
        (continuous) is at least ``of[0]`` (continuous, present in every row; two
        number columns or two datetime columns) in every row holding ``column``; the
        chain draws the difference ``column - of[0]``, which is >= 0, in ``column``'s
        place (:meth:`order_line`; docs/method.md, "Order rules").
    mapping : list of list, optional
        ``"function"`` only: one entry ``[a_1, ..., a_k, b]`` per combination of the
        ``of`` columns seen in the real rows, ``b`` the value of ``column`` there.  A
        combination not listed (never seen) leaves ``column`` to the chain.
    slope, intercept : float, optional
        ``"affine"``: ``column`` (continuous) equals ``slope * x + intercept`` for
        the one numeric column ``x`` in ``of``, in every row, up to the rounding that
        ``decimals`` states; between two datetime columns the slope is 1 and the
        intercept a duration in seconds (``column`` is ``x`` shifted by it; 0: a copy),
        exact to the microsecond.  ``"linear"``: the line the residual is taken about.
    decimals : int, optional
        ``"affine"`` only: ``column`` is ``slope * x + intercept`` rounded to this many
        decimals (it holds within half a unit of the last decimal in every real row, and
        generated values are rounded so); None: exactly (up to float64 arithmetic,
        :data:`fits.core.rules.AFFINE_RTOL`), not rounded.
    tolerance : float, optional
        ``"affine"`` only: the largest ``|column - (slope x + intercept)|`` a real row
        has (checked at every site), when it exceeds half a unit of ``decimals``: the
        coefficients of a coarsely rounded column are known only to within a band
        (docs/method.md, "Affine rules").  None: half a unit of ``decimals`` (0 for an
        exact rule).
    lower, upper : float, optional
        ``"linear"`` only: the bounds of the residual ``column - (slope x + intercept)``
        over every real row holding ``column`` (each site's minimum and maximum,
        merged): the range of the residual the chain draws.
    step : float, optional
        ``"linear"`` between two datetime columns only: every real duration
        ``column - of[0]`` is a whole multiple of this many seconds (a week, a day, an
        hour, a minute or a second: :data:`fits.core.rules.DURATION_STEPS`), and so are
        ``intercept``, ``intercept + lower`` and ``intercept + upper``; synthetic
        durations are drawn on it.  None: no such unit (or two number columns).
    intervals : list of list, optional
        ``"interval"`` only: entries ``[low, high, value]``, sorted by ``low``, with
        ``low <= high`` and each ``high`` below the next entry's ``low`` (disjoint), each
        value of ``column`` at most once (None: its missing value; null in JSON); the
        bounds numbers, or for a datetime ``of[0]`` ISO 8601 text (``"2019-12-31"``,
        ``"2021-06-15T12:00:00+02:00"``: with its UTC offset exactly when the column
        has a time zone), read as seconds since 1970 UTC
        (:func:`fits._dates.text_seconds`): every real row whose ``column`` is ``value``
        has ``of[0]`` within ``[low, high]`` (each site's minimum and maximum over its
        rows of that value, merged).  Generated rows take the value whose cell holds
        ``of[0]`` as written, the cells split at the midpoints of the gaps
        (:func:`fits._exact.interval_cuts`): the nearest interval.
    """

    column: str
    of: list[str]
    kind: str = "function"
    mapping: list[list[Any]] | None = None
    slope: float | None = None
    intercept: float | None = None
    decimals: int | None = None
    tolerance: float | None = None
    lower: float | None = None
    upper: float | None = None
    step: float | None = None
    intervals: list[list[Any]] | None = None

    def __post_init__(self) -> None:
        where = f"rule for column {self.column!r}"
        if self.kind not in RULE_KINDS:
            raise SchemaError(f"{where}: unknown kind {self.kind!r}; use one of {RULE_KINDS}")
        if not isinstance(self.of, list) or not self.of or len(set(self.of)) != len(self.of):
            raise SchemaError(f'{where}: "of" must be a non-empty list of distinct columns')
        if self.column in self.of:
            raise SchemaError(f'{where}: the column cannot be among its own "of" columns')
        if self.kind == "interval":
            self._check_interval(where)
            return
        if self.intervals is not None:
            raise SchemaError(f'{where}: "intervals" belong to "interval" rules only')
        if self.kind == "affine":
            self._check_affine(where)
            return
        if self.kind == "linear":
            self._check_linear(where)
            return
        if self.kind == "order":
            extra = [
                name
                for name in ("mapping", "slope", "intercept", "decimals", "tolerance")
                + ("lower", "upper", "step")
                if getattr(self, name) is not None
            ]
            if extra:
                raise SchemaError(f'{where}: an "order" rule has no {", ".join(extra)}')
            if len(self.of) != 1:
                raise SchemaError(f'{where}: an "order" rule has exactly one column in "of"')
            return
        if any(v is not None for v in (self.slope, self.intercept, self.decimals, self.tolerance)):
            raise SchemaError(
                f'{where}: "slope", "intercept", "decimals" and "tolerance" belong to '
                '"affine" rules only'
            )
        if self.lower is not None or self.upper is not None or self.step is not None:
            raise SchemaError(f'{where}: "lower", "upper" and "step" belong to "linear" rules only')
        if self.kind == "sum":
            if self.mapping is not None:
                raise SchemaError(f'{where}: a "sum" rule has no "mapping"')
            if len(self.of) < 2:
                raise SchemaError(f'{where}: a "sum" rule needs at least two parts in "of"')
            return
        if not isinstance(self.mapping, list) or not self.mapping:
            raise SchemaError(
                f'{where}: a "function" rule needs a "mapping": a list of '
                f"[{', '.join(self.of)}, {self.column}] value lists"
            )
        keys = set()
        for entry in self.mapping:
            if not isinstance(entry, list) or len(entry) != len(self.of) + 1:
                raise SchemaError(
                    f"{where}: mapping entry {entry!r} must list {len(self.of) + 1} values "
                    f"({', '.join(self.of)}, then {self.column})"
                )
            key = tuple(plain(v) for v in entry[:-1])
            if key in keys:
                raise SchemaError(f"{where}: the mapping lists {list(key)!r} twice")
            keys.add(key)

    def _check_interval(self, where: str) -> None:
        """An ``"interval"`` rule: one column in ``of``; ``intervals`` a list of at least
        two ``[low, high, value]`` entries, finite numbers (or, for a datetime column,
        ISO 8601 date-time text, all bounds alike) with ``low <= high``, sorted and
        disjoint (``high`` below the next ``low``), each value once (null: the
        missing value); nothing else."""
        extra = [
            name
            for name in (
                "mapping",
                "slope",
                "intercept",
                "decimals",
                "tolerance",
                "lower",
                "upper",
                "step",
            )
            if getattr(self, name) is not None
        ]
        if extra:
            raise SchemaError(f'{where}: an "interval" rule has no {", ".join(extra)}')
        if len(self.of) != 1:
            raise SchemaError(f'{where}: an "interval" rule has exactly one column in "of"')
        entries = self.intervals
        shape = (
            f'write "intervals" as [[low, high, value], ...]: one entry per value of '
            f"{self.column!r} (null: its missing value), with the range of {self.of[0]!r} "
            "it occupies (numbers, or ISO 8601 date-time text for a datetime column)"
        )
        if not isinstance(entries, list) or len(entries) < 2:
            raise SchemaError(f"{where}: needs at least two intervals; {shape}")
        seen: set[Any] = set()
        out: list[list[Any]] = []
        numbers: list[tuple[float, float]] = []
        first = entries[0]
        clock = isinstance(first, (list, tuple)) and bool(first) and isinstance(first[0], str)
        for entry in entries:
            if not isinstance(entry, (list, tuple)) or len(entry) != 3:
                raise SchemaError(
                    f"{where}: interval entry {entry!r} is not [low, high, value]; {shape}"
                )
            low, high, value = entry
            for v in (low, high):
                if isinstance(v, str):
                    try:
                        bound_number(v)
                    except ValueError as exc:
                        raise SchemaError(
                            f"{where}: interval entry {list(entry)!r} has {v!r}, not a finite "
                            f"number nor a date-time ({exc}), for a bound of {self.of[0]!r}; "
                            'write a date-time as "2020-01-01" or "2020-01-01T06:30:00" (with '
                            'its offset, "+01:00", for a column with a time zone)'
                        ) from None
                elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise SchemaError(
                        f"{where}: interval entry {list(entry)!r} has {v!r}, not a finite "
                        f"number or a date-time, for a bound of {self.of[0]!r}"
                    )
            if isinstance(low, str) != clock or isinstance(high, str) != clock:
                raise SchemaError(
                    f"{where}: the intervals mix numbers and date-time text ({list(entry)!r}); "
                    "write every bound as a number (a number column) or every one as "
                    "date-time text (a datetime column)"
                )
            lo, hi = bound_number(low), bound_number(high)
            if not lo <= hi:
                raise SchemaError(
                    f"{where}: interval entry {list(entry)!r} has its low above its high"
                )
            key = plain(value)
            if key in seen:
                raise SchemaError(f"{where}: the intervals list value {value!r} twice; keep one")
            seen.add(key)
            out.append([low, high, value])
            numbers.append((lo, hi))
        for (a, b), (ea, eb) in zip(
            itertools.pairwise(numbers), itertools.pairwise(out), strict=True
        ):
            if not a[1] < b[0]:
                raise SchemaError(
                    f"{where}: the intervals must be sorted by their low end and disjoint, "
                    f"each high below the next low; {ea!r} and {eb!r} are not"
                )
        self.intervals = out

    def _check_linear(self, where: str) -> None:
        if self.mapping is not None or self.decimals is not None or self.tolerance is not None:
            raise SchemaError(
                f'{where}: a "linear" rule has no "mapping", "decimals" or "tolerance"'
            )
        if len(self.of) != 1:
            raise SchemaError(f'{where}: a "linear" rule has exactly one column in "of"')
        for name in ("slope", "intercept", "lower", "upper"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SchemaError(
                    f'{where}: a "linear" rule needs a number "{name}", got {value!r}'
                )
            if not math.isfinite(value):
                raise SchemaError(f'{where}: "{name}" must be finite, got {value!r}')
            setattr(self, name, float(value))
        if not self.lower < self.upper:  # type: ignore[operator]
            raise SchemaError(
                f'{where}: the residual\'s "lower" ({self.lower:g}) must be below its '
                f'"upper" ({self.upper:g})'
            )
        step = self.step
        if step is not None:
            if (
                isinstance(step, bool)
                or not isinstance(step, (int, float))
                or not 0 < step < math.inf
            ):
                raise SchemaError(
                    f'{where}: "step" must be a number of seconds > 0, or null, got {step!r}'
                )
            self.step = float(step)

    def _check_affine(self, where: str) -> None:
        if self.lower is not None or self.upper is not None or self.step is not None:
            raise SchemaError(f'{where}: "lower", "upper" and "step" belong to "linear" rules only')
        if self.mapping is not None:
            raise SchemaError(f'{where}: an "affine" rule has no "mapping"')
        if len(self.of) != 1:
            raise SchemaError(f'{where}: an "affine" rule has exactly one column in "of"')
        for name in ("slope", "intercept"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SchemaError(
                    f'{where}: an "affine" rule needs a number "{name}", got {value!r}'
                )
            if not math.isfinite(value):
                raise SchemaError(f'{where}: "{name}" must be finite, got {value!r}')
            setattr(self, name, float(value))
        if self.slope == 0:
            raise SchemaError(f'{where}: "slope" 0 makes a constant column; remove the rule')
        d = self.decimals
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= 15):
            raise SchemaError(
                f'{where}: "decimals" must be a whole number from 0 to 15, or null, got {d!r}'
            )
        t = self.tolerance
        if t is not None:
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < math.inf:
                raise SchemaError(f'{where}: "tolerance" must be a number >= 0, or null, got {t!r}')
            self.tolerance = float(t)

    def lookup(self) -> dict[tuple[Any, ...], Any]:
        """``"function"`` rules: the mapping as a dict (determinant values) -> value."""
        return {tuple(plain(v) for v in e[:-1]): plain(e[-1]) for e in self.mapping or []}

    def describe(self, clock: bool = False) -> str:
        """One line: ``"b = f(a1, a2)"`` or ``"t = p1 + p2"``; ``clock``: a
        ``"linear"`` or ``"affine"`` rule between two datetime columns, told as the
        duration from its source (``"end = start + duration in [1 minute, 2 hours]"``,
        ``"end = start + 1 hour"``, worded by :func:`fits._dates.duration_text`)."""
        if self.kind == "sum":
            return f"{self.column} = {' + '.join(self.of)}"
        if self.kind == "order":
            return f"{self.column} >= {self.of[0]} (order)"
        if self.kind == "affine" and clock:  # slope 1: the column shifted by a duration
            b = float(self.intercept or 0.0)
            if b == 0:
                return f"{self.column} = {self.of[0]} (a copy)"
            sign = "-" if b < 0 else "+"
            return f"{self.column} = {self.of[0]} {sign} {duration_text(abs(b))}"
        if self.kind == "affine":
            a, b = float(self.slope or 0.0), float(self.intercept or 0.0)
            sign = "-" if b < 0 else "+"
            text = f"{a:.15g} * {self.of[0]} {sign} {abs(b):.15g}"
            if self.decimals is not None:
                text = f"round({text}, {self.decimals})"
            if self.tolerance is not None:
                text = f"{text} (within {self.tolerance:.3g})"
            return f"{self.column} = {text}"
        if self.kind == "linear" and clock:  # slope 1: intercept + R is the duration
            b = float(self.intercept or 0.0)
            lo, hi = (duration_text(b + float(v or 0.0)) for v in (self.lower, self.upper))
            steps = "" if self.step is None else f" in steps of {duration_text(self.step)}"
            return f"{self.column} = {self.of[0]} + duration in [{lo}, {hi}]{steps} (near-linear)"
        if self.kind == "linear":
            a, b = float(self.slope or 0.0), float(self.intercept or 0.0)
            sign = "-" if b < 0 else "+"
            return (
                f"{self.column} = {a:.6g} * {self.of[0]} {sign} {abs(b):.6g} + residual in "
                f"[{float(self.lower or 0.0):.6g}, {float(self.upper or 0.0):.6g}] (near-linear)"
            )
        if self.kind == "interval":
            return f"{self.column} = by {self.of[0]}: {interval_text(self.intervals)}"
        return f"{self.column} = f({', '.join(self.of)}) ({len(self.mapping or [])} values)"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description."""
        out: dict[str, Any] = {"column": self.column, "kind": self.kind, "of": list(self.of)}
        if self.mapping is not None:
            out["mapping"] = [[plain(v) for v in e] for e in self.mapping]
        if self.kind == "affine":
            out.update(slope=self.slope, intercept=self.intercept, decimals=self.decimals)
            if self.tolerance is not None:
                out["tolerance"] = self.tolerance
        if self.kind == "linear":
            out.update(
                slope=self.slope, intercept=self.intercept, lower=self.lower, upper=self.upper
            )
            if self.step is not None:
                out["step"] = self.step
        if self.kind == "interval":
            out["intervals"] = [[plain(v) for v in e] for e in self.intervals or []]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rule:
        """Inverse of :meth:`to_dict`; a :class:`SchemaError` names what is wrong."""
        if not isinstance(d, Mapping) or "column" not in d:
            raise SchemaError(f'each entry of "rules" must be an object with a "column": {d!r}')
        of = d.get("of")
        if not isinstance(of, list):
            raise SchemaError(
                f'rule for column {d["column"]!r}: "of" must be a list of column names, got {of!r}'
            )
        _check_keys(d, [f.name for f in fields(cls)], f"the rule for column {d['column']!r}")
        mapping = d.get("mapping")
        if mapping is not None and not isinstance(mapping, list):
            raise SchemaError(f'rule for column {d["column"]!r}: "mapping" must be a list')
        return cls(
            column=str(d["column"]),
            of=[str(c) for c in of],
            kind=str(d.get("kind", "function")),
            mapping=[list(e) if isinstance(e, list) else e for e in mapping]
            if mapping is not None
            else None,
            slope=d.get("slope"),
            intercept=d.get("intercept"),
            decimals=d.get("decimals"),
            tolerance=d.get("tolerance"),
            lower=d.get("lower"),
            upper=d.get("upper"),
            step=d.get("step"),
            intervals=d.get("intervals"),
        )


def residual_spec(spec: ColumnSpec, rule: Rule, order: bool = False) -> ColumnSpec:
    """The engine's spec of a column a ``"linear"`` rule draws as its residual: a
    continuous float column named as the column, within the rule's residual bounds, not
    rounded (``decimals`` None), missing where the column is missing.  An ``"order"``
    rule's difference (``order``) has its point mass at 0 (rows where the column equals
    its source: stays of 0 days, a near-copy), drawn by its indicator as a continuous
    column's point mass is (docs/method.md, "Order rules")."""
    return ColumnSpec(
        spec.name,
        "continuous",
        "float",
        lower=rule.lower,
        upper=rule.upper,
        missing=spec.missing,
        point_mass=0.0 if order else None,
    )


@dataclass
class Schema:
    """The shared description of every client's table.

    Parameters
    ----------
    columns : list of ColumnSpec
        One spec per column, in the tables' column order.
    order : list of str, optional
        Chain order (the order columns are drawn in); default the column order.
    rules : list of Rule, optional
        Exact rules between columns (:class:`Rule`): each rule's column is generated by
        the rule, not drawn (a ``"linear"`` rule's column: drawn as its residual).
        None: not determined (a fit detects them at setup unless
        told not to); an empty list: none (detection switched off, or none found).
    """

    columns: list[ColumnSpec]
    order: list[str] = field(default_factory=list)
    rules: list[Rule] | None = None
    #: Whether this is the engine's schema (:meth:`expanded`), whose ``"linear"``
    #: rules' columns hold their residuals' specs (:func:`residual_spec`: a datetime
    #: pair's column is a float there); set only by :meth:`expanded`, never read from
    #: a file, not compared.
    _engine: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise SchemaError("schema has duplicate column names")
        if not self.order:
            self.order = list(names)
        if sorted(self.order) != sorted(names):
            missing = sorted(set(names) - set(self.order))
            unknown = sorted(set(self.order) - set(names))
            twice = sorted({c for c in self.order if self.order.count(c) > 1})
            raise SchemaError(
                "the chain order must name every column exactly once"
                + (f"; missing: {missing}" if missing else "")
                + (f"; unknown: {unknown}" if unknown else "")
                + (f"; named more than once: {twice}" if twice else "")
            )
        if self.rules is not None:
            self.rules = [r if isinstance(r, Rule) else Rule.from_dict(r) for r in self.rules]
            self._check_rules()

    def _check_rules(self) -> None:
        """Validate :attr:`rules` against the columns and the chain order."""
        names = set(self.names)
        seen: set[str] = set()
        for rule in self.rules or []:
            where = f"rule for column {rule.column!r}"
            unknown = [c for c in [rule.column, *rule.of] if c not in names]
            if unknown:
                raise SchemaError(f"{where}: unknown column(s) {unknown}; remove or fix the rule")
            if rule.column in seen:
                raise SchemaError(f"{where}: the column has two rules; keep one")
            seen.add(rule.column)
            specs = [self[c] for c in [rule.column, *rule.of]]
            if any(not c.is_modelled or c.indicates is not None for c in specs):
                raise SchemaError(
                    f"{where}: identifier and constant columns cannot take part in a rule"
                )
            wide = [c.name for c in specs if c.past_float]
            if rule.kind in ("sum", "affine", "linear", "interval") and wide:
                raise SchemaError(
                    f"{where}: column(s) {wide} hold whole numbers past 2**53, which the "
                    f"float64 arithmetic of a {rule.kind} rule rounds (its values would "
                    "not hold the rule exactly); remove the rule"
                )
            later = [c for c in rule.of if self.order.index(c) > self.order.index(rule.column)]
            if later:
                raise SchemaError(
                    f"{where}: {later} come(s) after {rule.column!r} in the chain order, "
                    f"so it cannot be generated from them; move {rule.column!r} after them "
                    'in "order", or remove the rule'
                )
            if rule.kind == "sum":
                dep = self[rule.column]
                if dep.kind != "continuous" or dep.missing or dep.point_mass is not None:
                    raise SchemaError(
                        f"{where}: a sum's column must be continuous, with no missing "
                        "values and no point mass; remove the rule"
                    )
                bad = [
                    c.name
                    for c in specs[1:]
                    if c.missing
                    or c.dtype == "datetime"
                    or (c.is_discrete and not all(_is_number(v) for v in c.categories or []))
                ]
                if bad:
                    raise SchemaError(
                        f"{where}: part(s) {bad} are not numbers present in every row; "
                        "remove the rule"
                    )
                derived = [c for c in rule.of if c in self.derived]
                if derived:
                    raise SchemaError(
                        f"{where}: part(s) {derived} are set by affine rules, which a sum "
                        "cannot use; remove one of the rules"
                    )
                continue
            if rule.kind == "linear":
                self._check_linear_rule(rule, specs[0], specs[1], where)
                continue
            if rule.kind == "interval":
                self._check_interval_rule(rule, specs[0], specs[1], where)
                continue
            if rule.kind == "order":
                self._check_order_rule(rule, specs[0], specs[1], where)
                continue
            if rule.kind == "affine" and "datetime" in (specs[0].dtype, specs[1].dtype):
                self._check_shift_rule(rule, specs[0], specs[1], where)
                continue
            if rule.kind == "affine":
                dep, src = specs
                if (
                    dep.kind != "continuous"
                    or dep.dtype == "datetime"
                    or dep.point_mass is not None
                ):
                    raise SchemaError(
                        f"{where}: an affine rule's column must be continuous numbers, with "
                        "no point mass; remove the rule"
                    )
                if src.dtype == "datetime" or (
                    src.is_discrete
                    and (src.missing or not all(_is_number(v) for v in src.categories or []))
                ):
                    raise SchemaError(
                        f"{where}: {src.name!r} is not a continuous column or an ordinal one "
                        "with numbers in every row; remove the rule"
                    )
                if src.missing != dep.missing:
                    raise SchemaError(
                        f"{where}: {(src if src.missing else dep).name!r} has missing values "
                        f"and {(dep if src.missing else src).name!r} has none; an affine rule "
                        "needs both missing in the same rows; remove the rule"
                    )
                continue
            if not all(c.is_discrete for c in specs):
                raise SchemaError(
                    f"{where}: a function rule links discrete columns only; "
                    f"{[c.name for c in specs if not c.is_discrete]} are continuous"
                )
            levels = [{plain(v) for v in c.categories or []} for c in specs]
            for entry in rule.mapping or []:
                values = [*entry[:-1], entry[-1]]
                names_ = [*rule.of, rule.column]
                for v, col, lv in zip(values, names_, [*levels[1:], levels[0]], strict=True):
                    if plain(v) not in lv:
                        raise SchemaError(
                            f"{where}: mapping entry {entry!r} has {v!r} for column "
                            f"{col!r}, which is not among its categories"
                        )

    def _check_interval_rule(
        self, rule: Rule, dep: ColumnSpec, src: ColumnSpec, where: str
    ) -> None:
        """An ``"interval"`` rule: its column discrete, every value it lists among the
        column's categories (null: the missing value, for a column with missing
        values); its source continuous numbers or datetimes (a datetime's bounds ISO
        8601 text, with an offset exactly when the column has a time zone; a number
        column's bounds numbers; missing values allowed: the rule says nothing where
        the source is missing), drawn by the chain as itself
        (not set by an affine or a sum rule, whose written values are computed after
        the chain: the rule is taken at the source's value as written)."""
        if not dep.is_discrete:
            raise SchemaError(
                f"{where}: an interval rule's column must be discrete (nominal or ordinal); "
                "remove the rule"
            )
        if src.kind != "continuous":
            raise SchemaError(
                f"{where}: {src.name!r} is not a continuous column (numbers or datetimes); "
                "remove the rule"
            )
        clock = src.dtype == "datetime"
        # the engine's schema holds a near-linear source's residual spec, a float also
        # for a datetime: the bounds' kind was checked against the user's schema
        for entry in [] if self._engine else rule.intervals or []:
            for v in entry[:2]:
                if isinstance(v, str) != clock:
                    raise SchemaError(
                        f"{where}: interval entry {entry!r} has {v!r} for a bound of "
                        f"{src.name!r}, a {'datetime' if clock else 'number'} column; write "
                        + (
                            'its bounds as ISO 8601 date-time text ("2020-01-01")'
                            if clock
                            else "its bounds as numbers"
                        )
                    )
                if clock and has_offset(v) != (src.tz is not None):
                    raise SchemaError(
                        f"{where}: interval entry {entry!r} has {v!r} for a bound of "
                        f"{src.name!r}, "
                        + (
                            f"whose times are in {src.tz}: give the bound its UTC offset "
                            '("2020-01-01T00:00:00+01:00")'
                            if src.tz is not None
                            else "whose times have no time zone: give the bound without "
                            "a UTC offset"
                        )
                    )
        set_by = [
            r.kind for r in self.rules or [] if r.column == src.name and r.kind in ("affine", "sum")
        ]
        if set_by:
            raise SchemaError(
                f"{where}: {src.name!r} is set by its {set_by[0]} rule after the chain is "
                "drawn, so an interval rule cannot be taken at its value; remove one of the "
                "rules"
            )
        levels = {plain(v) for v in dep.categories or []}
        for entry in rule.intervals or []:
            if plain(entry[2]) not in levels:
                raise SchemaError(
                    f"{where}: interval entry {entry!r} has {entry[2]!r} for column "
                    f"{rule.column!r}, which is not among its categories"
                    + ("" if entry[2] is not None else " (it has no missing values)")
                )

    def _check_shift_rule(self, rule: Rule, dep: ColumnSpec, src: ColumnSpec, where: str) -> None:
        """An ``"affine"`` rule with a datetime column: both columns datetimes (both
        with a time zone or both without), the column continuous with no point mass,
        slope 1 (a shift by ``intercept`` seconds), no ``decimals`` or ``tolerance``
        (exact to the microsecond), missing values in both or neither."""
        if dep.dtype != "datetime" or src.dtype != "datetime" or src.kind != "continuous":
            raise SchemaError(
                f"{where}: an affine rule relates two datetime columns or two number "
                f"columns; {rule.column!r} and {src.name!r} are not; remove the rule"
            )
        if dep.kind != "continuous" or dep.point_mass is not None:
            raise SchemaError(
                f"{where}: an affine rule's column must be continuous, with no point mass; "
                "remove the rule"
            )
        if (dep.tz is None) != (src.tz is None):
            raise SchemaError(
                f"{where}: {rule.column!r} and {src.name!r} are one with a time zone and one "
                "without (local times), so no fixed duration relates them; remove the rule"
            )
        if rule.slope != 1.0 or rule.decimals is not None or rule.tolerance is not None:
            raise SchemaError(
                f"{where}: an affine rule between two datetime columns shifts by a fixed "
                f'duration: "slope" 1, "intercept" the duration in seconds, no "decimals" or '
                '"tolerance"; fix or remove the rule'
            )
        if src.missing != dep.missing:
            raise SchemaError(
                f"{where}: {(src if src.missing else dep).name!r} has missing values "
                f"and {(dep if src.missing else src).name!r} has none; an affine rule "
                "needs both missing in the same rows; remove the rule"
            )
        if not shift_grid(dep, src, float(rule.intercept or 0.0)):
            raise SchemaError(
                f"{where}: {src.name!r} shifted by {rule.intercept!r} seconds is not on "
                f"{rule.column!r}'s precision (its days or time unit, and time zone), so "
                "the synthetic values, rounded to it, would not keep the rule; remove it"
            )

    def _check_order_rule(self, rule: Rule, dep: ColumnSpec, src: ColumnSpec, where: str) -> None:
        """An ``"order"`` rule: both columns continuous, two datetimes (both with the
        same time zone or both without) or two number columns; the source present in
        every row, written on the column's grid (:func:`order_grid`), not above its
        upper bound, drawn by the chain as itself; the column with no point mass, no
        part of a sum, no source of another order or near-linear rule."""
        if dep.kind != "continuous" or dep.point_mass is not None:
            raise SchemaError(
                f"{where}: an order rule's column must be continuous (numbers or datetimes) "
                "with no point mass; remove the rule"
            )
        if src.kind != "continuous" or src.missing:
            raise SchemaError(
                f"{where}: {src.name!r} is not a continuous column with a value in every "
                "row; remove the rule"
            )
        if not order_grid(dep, src):
            raise SchemaError(
                f"{where}: {rule.column!r} and {src.name!r} are not two number columns or two "
                f"datetime columns with {src.name!r} written on {rule.column!r}'s precision "
                "(its decimals, whole numbers, days or time unit, and time zone), so a "
                "synthetic value rounded to that precision could fall below its source; "
                "remove the rule"
            )
        lo_y, hi_y = dep.bounds
        lo_x, hi_x = src.bounds
        if not all(math.isfinite(v) for v in (lo_y, hi_y, lo_x, hi_x)):
            raise SchemaError(
                f'{where}: an order rule needs "lower" and "upper" of {rule.column!r} and '
                f"{src.name!r} (the largest difference the chain may draw); give them or "
                "remove the rule"
            )
        if not (hi_x <= hi_y and lo_x < hi_y):
            raise SchemaError(
                f"{where}: {src.name!r} reaches {hi_x:.15g}, above {rule.column!r}'s upper "
                f"bound {hi_y:.15g}, so it cannot stay at most {rule.column!r}; fix the bounds "
                "or remove the rule"
            )
        if src.name in self.derived or any(
            r.column == src.name and r.kind in ("linear", "order", "sum") for r in self.rules or []
        ):
            raise SchemaError(
                f"{where}: {src.name!r} is set by a rule of its own (affine, sum, order or "
                "near-linear), so it cannot be an order rule's source; remove one of the rules"
            )
        uses = ("sum", "linear", "order")
        if any(rule.column in r.of for r in self.rules or [] if r.kind in uses):
            raise SchemaError(
                f"{where}: {rule.column!r} is a part of a sum or the source of an order or "
                "near-linear rule, which needs its value, not the difference the chain "
                "draws in its place; remove one of the rules"
            )

    def order_line(self, rule: Rule) -> Rule:
        """The ``"linear"`` rule the engine draws an ``"order"`` rule's column by:
        slope 1, intercept 0, the residual (the difference ``column - of[0]``) within
        ``[0, upper(column) - lower(of[0])]`` (the largest difference the bounds
        allow: nothing beyond the setup round's bounds is used), on a step of the
        column's time unit for two datetime columns without a time zone (whole days
        for two date columns).  The chain then draws the difference, truncated to
        ``[max(0, lower(column) - x), upper(column) - x]`` at the source's written
        value x (:meth:`Coordinator._truncated
        <fits.federation.coordinator.Coordinator>`), so every synthetic row keeps
        ``column >= of[0]`` (docs/method.md, "Order rules")."""
        dep, src = self[rule.column], self[rule.of[0]]
        step = None
        if dep.dtype == "datetime" and dep.tz is None:
            step = 86_400.0 if dep.date_only else _ORDER_STEPS.get(dep.resolution or "")
        upper = float(dep.bounds[1]) - float(src.bounds[0])
        return Rule(
            rule.column,
            list(rule.of),
            "linear",
            slope=1.0,
            intercept=0.0,
            lower=0.0,
            upper=upper,
            step=step,
        )

    def _check_linear_rule(self, rule: Rule, dep: ColumnSpec, src: ColumnSpec, where: str) -> None:
        """A ``"linear"`` rule: Y continuous numbers with no point mass (the engine's
        difference of an order rule: at 0, :func:`residual_spec`); X continuous
        numbers present in every row; neither in another linear rule's other role (X of
        one and Y of another), nor X set by an affine rule (not in the chain)."""
        engine_mass = self._engine and dep.point_mass == 0.0
        if dep.kind != "continuous" or (dep.point_mass is not None and not engine_mass):
            raise SchemaError(
                f"{where}: a near-linear rule's column must be continuous (numbers or "
                "datetimes) with no point mass; remove the rule"
            )
        if src.kind != "continuous" or src.missing:
            raise SchemaError(
                f"{where}: {src.name!r} is not a continuous column with a value in every "
                "row; remove the rule"
            )
        # the engine's schema holds the residual's spec, a float also for a datetime
        # pair: told by how the schema was made, not by the spec (a user's float
        # column can equal the residual's spec, bounds and all)
        if not self._engine and (dep.dtype == "datetime") != (src.dtype == "datetime"):
            raise SchemaError(
                f"{where}: a near-linear rule relates two datetime columns or two number "
                f"columns; {rule.column!r} and {src.name!r} are one of each; remove the rule"
            )
        if rule.step is not None and src.dtype != "datetime":
            raise SchemaError(
                f'{where}: "step" is the unit of a pair of datetime columns\' durations; '
                f'{src.name!r} holds numbers; remove "step" from the rule'
            )
        linear = [r for r in self.rules or [] if r.kind in ("linear", "order")]
        if src.name in self.derived or any(r.column == src.name for r in linear):
            raise SchemaError(
                f"{where}: {src.name!r} is set by a rule of its own (affine, or drawn as a "
                "near-linear residual), so it cannot be a near-linear rule's source; "
                "remove one of the rules"
            )
        if any(rule.column in r.of for r in self.rules or [] if r.kind == "sum"):
            raise SchemaError(
                f"{where}: {rule.column!r} is a part of a sum rule, whose total needs its "
                "value, not a residual; remove one of the rules"
            )
        if any(r.of[0] == rule.column for r in linear):
            raise SchemaError(
                f"{where}: {rule.column!r} is the source of another near-linear rule, so "
                "it cannot be drawn as a residual itself; remove one of the rules"
            )

    @property
    def near_linear(self) -> dict[str, Rule]:
        """The ``"linear"`` rules by their column: columns the chain draws as the
        residual about a line in an earlier column (docs/method.md, "Near-linear
        columns"); an ``"order"`` rule as its line (:meth:`order_line`: the chain
        draws the difference from its source)."""
        return {
            r.column: self.order_line(r) if r.kind == "order" else r
            for r in self.rules or []
            if r.kind in ("linear", "order")
        }

    def __getitem__(self, name: str) -> ColumnSpec:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        """Column names in table order."""
        return [c.name for c in self.columns]

    def decimal_types(self) -> dict[str, tuple[int, int]]:
        """Column -> (precision, scale) of every column of ``Decimal`` objects
        (:attr:`ColumnSpec.decimal_type`): the Parquet output's decimal type for it,
        fixed for the whole file (:func:`fits.io.write_table_chunks`)."""
        return {c.name: t for c in self.columns if (t := c.decimal_type) is not None}

    def date_formats(self) -> dict[str, str]:
        """Column -> ``strftime`` format of every column read from text dates of one
        format (:attr:`ColumnSpec.text_date_format`): a CSV output writes its dates in
        it (:func:`fits.io.write_table_chunks`); a Parquet output keeps datetimes."""
        return {c.name: f for c in self.columns if (f := c.text_date_format) is not None}

    def ordered(self) -> list[ColumnSpec]:
        """Column specs in chain order."""
        return [self[n] for n in self.order]

    def kinds(self) -> dict[str, str]:
        """Mapping column -> kind."""
        return {c.name: c.kind for c in self.columns}

    @property
    def unmodelled(self) -> list[str]:
        """Columns of kind ``"id"`` and ``"constant"``: in the tables, not drawn by the
        engine (a constant's missingness indicator may be)."""
        return [c.name for c in self.columns if not c.is_modelled]

    @property
    def constants(self) -> list[str]:
        """Columns of kind ``"constant"``: written as their value, or as missing."""
        return [c.name for c in self.columns if c.kind == "constant"]

    @property
    def derived(self) -> list[str]:
        """Columns an ``"affine"`` rule sets: in the tables, not drawn by the engine."""
        return [r.column for r in self.rules or [] if r.kind == "affine"]

    def expanded(self, order_masses: Collection[str] = ()) -> Schema:
        """The schema the engine draws: each continuous column with missing values is
        preceded in the chain by its missingness indicator (a nominal bool column named
        ``"<column> (missing)"``), and one with a point mass by a point-mass indicator
        (``"<column> (at point mass)"``).  An ``"order"`` rule's column in
        ``order_masses`` (:func:`fits.core.rules.order_point_masses`) has its
        difference's point mass at 0, with its indicator (:func:`residual_spec`).

        A ``"constant"`` column is left out of the chain (nothing to draw), but one with
        a value and missing values keeps its missingness indicator there, in its place:
        which rows are missing is drawn like any column's, the value is the constant.

        A column an ``"affine"`` rule sets (:attr:`derived`) is left out of the chain:
        it is computed from its source when the rows are decoded, and later columns are
        not conditioned on it -- it holds no information beyond its source, and as a
        covariate it would only make the local designs collinear and, for the KNN
        kernel, count one direction twice in the distances.

        A column a ``"linear"`` rule draws as its residual keeps its place in the chain,
        but its spec is the residual's: continuous floats within the rule's ``lower``
        and ``upper``, not rounded, missing where the column is
        (:func:`residual_spec`); the linear rules stay in the engine's ``rules``,
        checked as the engine's (a pair of dates: a float column on a datetime one).
        An ``"order"`` rule is drawn so too, as its line (:meth:`order_line`), which
        the engine's ``rules`` hold in its place."""
        derived = set(self.derived)
        linear = self.near_linear
        ordered = {r.column for r in self.rules or [] if r.kind == "order"} & set(order_masses)
        columns = [
            residual_spec(c, linear[c.name], c.name in ordered) if c.name in linear else c
            for c in self.columns
            if c.is_modelled and c.name not in derived
        ]
        order: list[str] = []
        for name in self.order:
            spec = self[name]
            if spec.kind == "constant" and spec.missing and not spec.all_missing:
                # a value and missing values: only whether it is missing is drawn
                flag = missing_flag(name)
                if flag in self.names:
                    raise SchemaError(
                        f"column name {flag!r} is reserved for the indicator fits adds for "
                        f"the missing values of {name!r}: rename the column {flag!r} in the "
                        "site tables (and back in the synthetic table)"
                    )
                columns.append(ColumnSpec(flag, "nominal", "bool", [False, True], indicates=name))
                order.append(flag)
                continue
            if not spec.is_modelled or name in derived:
                continue
            flags = []
            if spec.kind == "continuous" and spec.missing:
                flags.append((missing_flag(name), "missing"))
            if spec.kind == "continuous" and (spec.point_mass is not None or name in ordered):
                flags.append((point_mass_flag(name), "point_mass"))  # an order rule's: D = 0
            for flag, what in flags:
                if flag in self.names:
                    held = "missing values" if what == "missing" else "point mass"
                    raise SchemaError(
                        f"column name {flag!r} is reserved for the indicator fits adds for "
                        f"the {held} of {name!r}: rename the column {flag!r} in the site "
                        "tables (and back in the synthetic table)"
                    )
                columns.append(
                    ColumnSpec(
                        flag, "nominal", "bool", [False, True], indicates=name, indicator=what
                    )
                )
                order.append(flag)
            order.append(name)
        engine = Schema(columns, order)  # its rules are checked as the engine's, below
        engine._engine = True
        if self.rules is not None:
            engine.rules = [
                linear[r.column] if r.kind == "order" else r
                for r in self.rules
                if r.kind != "affine"
            ]
            engine._check_rules()
        return engine

    def without_rules(self) -> Schema:
        """The same schema with :attr:`rules` not set (what the sites are sent)."""
        return Schema(self.columns, self.order)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (what ``fits schema`` writes)."""
        out: dict[str, Any] = {
            "columns": [c.to_dict() for c in self.columns],
            "order": list(self.order),
        }
        if self.rules is not None:
            out["rules"] = [r.to_dict() for r in self.rules]
        return out

    def to_json(self, **kwargs: Any) -> str:
        """The schema as a JSON string."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schema:
        """Inverse of :meth:`to_dict`."""
        if not isinstance(d, Mapping) or not isinstance(d.get("columns"), list):
            raise SchemaError("a schema needs a 'columns' list")
        _check_keys(d, ["columns", "order", "rules"], "the schema")
        order = d.get("order") or []
        if not isinstance(order, list):
            raise SchemaError(f"'order' must be a list of column names, got {order!r}")
        rules = d.get("rules")
        if "rules" in d and rules is None:  # "no rules" or "detect them"? say which
            raise SchemaError(
                '"rules" is null: write "rules": [] for no rules, or delete the "rules" '
                "entry to have them detected"
            )
        if rules is not None and not isinstance(rules, list):
            raise SchemaError(f"'rules' must be a list of rules, got {rules!r}")
        return cls(
            [ColumnSpec.from_dict(c) for c in d["columns"]],
            list(order),
            [Rule.from_dict(r) for r in rules] if rules is not None else None,
        )

    @classmethod
    def from_json(cls, text: str) -> Schema:
        """Inverse of :meth:`to_json`.

        Parameters
        ----------
        text : str
            The JSON text (of a file: ``Path("schema.json").read_text(encoding=
            "utf-8-sig")``, which also takes an editor's byte-order mark).

        Raises
        ------
        SchemaError
            Not valid JSON (or a file name given instead of the text), a key given
            twice in one object, or not a usable schema (see :meth:`from_dict`).
        """
        name = str(text) if isinstance(text, os.PathLike) else text
        if isinstance(text, os.PathLike) or (
            isinstance(text, str)
            and not text.lstrip().startswith(("{", "["))
            and (text.strip().lower().endswith(".json") or os.path.isfile(text.strip()))
        ):
            raise SchemaError(
                f"Schema.from_json takes the JSON text, not a file name ({name!r}): "
                f"Schema.from_json(Path({name!r}).read_text(encoding='utf-8-sig'))"
            )
        try:
            d = json.loads(text, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"the schema is not valid JSON: {exc}") from None
        return cls.from_dict(d)

    @classmethod
    def detect(
        cls,
        tables: pd.DataFrame | Sequence[pd.DataFrame] | Mapping[str, pd.DataFrame],
        *,
        kinds: Mapping[str, str] | None = None,
        order: Sequence[str] | None = None,
        parse_text: bool = True,
        rules: bool = True,
        near_linear: bool = True,
    ) -> Schema:
        """Detect the schema of one table, or of several sites' tables, in one call.

        Runs what a federation's setup round runs -- :func:`describe_table` at each
        table, :func:`merge_descriptions` over them -- so the result is the schema that
        ``FITSSynthesizer(kinds=kinds, order=order).fit(tables)`` would use.

        Parameters
        ----------
        tables : DataFrame, or sequence or mapping of DataFrame
            One table, or one per site (a mapping names the sites; a sequence calls
            them ``client 1``, ``client 2``, ... as :meth:`FITSSynthesizer.fit
            <fits.synthesizer.FITSSynthesizer.fit>` does).
        kinds : mapping, optional
            Column -> kind overrides of the inferred kinds.
        order : sequence of str, optional
            Chain order; default the (first) table's column order.
        parse_text : bool
            Read text that is really numbers or dates as such first, as every site does
            (:func:`parse_text_columns`; default).  False describes the tables' columns
            with the dtypes they have.
        rules : bool
            Detect exact rules between columns (:mod:`fits.core.rules`) as a fit's setup
            round does, each table answering as a site (default).  False leaves
            :attr:`rules` empty.
        near_linear : bool
            With ``rules``, also find the near-linear columns a fit draws as residuals
            (``"linear"`` rules; :func:`fits.core.rules.detect_near_linear`; default
            True, as :class:`~fits.synthesizer.FITSSynthesizer`'s).

        Returns
        -------
        Schema

        Raises
        ------
        SchemaError
            If the tables do not fit together (naming the site and column).
        """
        if isinstance(tables, pd.DataFrame):
            frames, names = [tables], ["table"]
        elif isinstance(tables, Mapping):
            frames, names = list(tables.values()), [str(n) for n in tables]
        elif isinstance(tables, pd.Series):
            raise TypeError(
                "Schema.detect takes a DataFrame or one per site, got a Series; a single "
                "column: Schema.detect(series.to_frame())"
            )
        elif isinstance(tables, (str, bytes)) or not isinstance(tables, Iterable):
            raise TypeError(
                "Schema.detect takes a DataFrame or one per site, as a list or a mapping by "
                f"site name, got {type(tables).__name__}"
            )
        else:
            frames = list(tables)
            names = [f"client {k + 1}" for k in range(len(frames))]
        if not frames:
            raise SchemaError("Schema.detect needs at least one table")
        for frame, name in zip(frames, names, strict=True):
            if not isinstance(frame, pd.DataFrame):
                raise TypeError(f"{name}: expected a pandas DataFrame, got {type(frame).__name__}")
            check_columns(frame, name)  # what a site refuses at fit, refused here too
        from fits.io import from_arrow_dtypes  # (fits.io imports this module)

        frames = [from_arrow_dtypes(f) for f in frames]  # pyarrow-backed, as fit takes them
        # names resolved to the first table's headers (fits.core.names: ' age ' may be
        # named 'age'); an unknown name is kept, for merge_descriptions' message
        headers = [str(c) for c in frames[0].columns]
        kinds = resolve_keys(kinds or {}, headers, "kinds", f"{names[0]}'s table")
        if order is not None:
            order = resolve_columns(order, headers, "order", f"{names[0]}'s table")
        declared = {c: {"kind": k} for c, k in kinds.items()}
        descriptions = []
        for frame, name in zip(frames, names, strict=True):
            parsed, notes = parse_text_columns(frame, declared) if parse_text else (frame, {})
            descriptions.append(describe_table(parsed, declared, client=name, notes=notes))
        # a table's column of 'NA' alone, where another table holds 'NA' as a label
        descriptions, relabelled = labels_of_na_only(descriptions, names)
        for note in relabelled:
            warnings.warn(note, DataNote, stacklevel=2)
        schema = merge_descriptions(descriptions, names, kinds=kinds, order=order)
        if not rules:
            return Schema(schema.columns, schema.order, [])
        from fits.core.rules import answer_rules, detect_rules  # they import this module

        parsed_frames = [
            na_labels_at(parse_text_columns(f, declared)[0] if parse_text else f, schema)
            for f in frames
        ]
        found = detect_rules(
            schema,
            lambda stage, candidates: [
                answer_rules(f, schema, candidates, stage, site=n)
                for f, n in zip(parsed_frames, names, strict=True)
            ],
            names,
            sum(int(f.shape[0]) for f in frames),
            descriptions,
            near_linear=bool(near_linear),
        )
        return Schema(schema.columns, schema.order, found)

    def validate(self, table: pd.DataFrame, *, name: str = "table") -> None:
        """Check that a table fits this schema; raise a :class:`SchemaError` if not.

        Checks that the table holds exactly the schema's columns, that every discrete
        column's values are among its categories, that every continuous column is
        numeric (datetime columns: dates) within the schema's bounds, and that missing
        values occur only in columns marked ``missing``.  Text that is really numbers or
        dates is read first, as a site does (:func:`parse_text_columns`); ``"id"``
        columns are only required to be there; a ``"constant"`` column must hold its
        value in every row (missing values only where ``missing``), or no value.

        Parameters
        ----------
        table : DataFrame
        name : str
            How the table is named in the error (a site or file name).

        Raises
        ------
        SchemaError
            Naming the table, the column and the problem.
        """
        from fits.core.continualization import Encoder  # continualization imports schema

        if not isinstance(table, pd.DataFrame):
            raise TypeError(f"{name}: expected a pandas DataFrame, got {type(table).__name__}")
        check_names(table.columns, name)
        table, _ = parse_text_columns(table, {c.name: {"kind": c.kind} for c in self.columns})
        specs = [c for c in self.columns if c.indicates is None]
        missing = [c.name for c in specs if c.name not in table.columns]
        if missing:
            raise SchemaError(f"{name}: column(s) {missing} of the schema are missing")
        extra = [c for c in table.columns if c not in {s.name for s in specs}]
        if extra:
            raise SchemaError(
                f"{name}: column(s) {extra} are not in the schema; drop them or add them"
            )
        for spec in specs:
            if spec.kind == "constant":
                _validate_constant(spec, table[spec.name], name)
                continue
            if not spec.is_modelled:
                continue
            enc = Encoder(spec)
            if spec.is_discrete:
                enc.to_codes(table[spec.name], client=name)
                continue
            values = enc.to_numeric(table[spec.name], client=name)
            present = values[~np.isnan(values)]
            lo, hi = spec.bounds
            outside = present[(present < lo) | (present > hi)]
            if outside.size:
                raise SchemaError(
                    f"{name}: column {spec.name!r} has {outside.size} value(s) outside the "
                    f'schema\'s bounds [{lo:g}, {hi:g}]; widen "lower" / "upper" in the '
                    "schema or fix the values"
                )


def _validate_constant(spec: ColumnSpec, column: pd.Series, name: str) -> None:
    """:meth:`Schema.validate` of a ``"constant"`` column: missing in every row (a
    column with no value), or its value in every row (missing where ``missing``)."""
    from fits.core.continualization import Encoder  # continualization imports schema

    present = column.notna()
    where = f"{name}: column {spec.name!r}"
    if spec.all_missing:
        if present.any():
            raise SchemaError(
                f"{where} holds {int(present.sum())} value(s), but the schema says it is "
                'missing in every row (kind "constant"); make the schema again for this table'
            )
        return
    if not spec.missing and not present.all():
        raise SchemaError(
            f"{where} has {int((~present).sum())} missing value(s), but the schema's "
            'constant has none; set "missing": true, or make the schema again'
        )
    drawn = ColumnSpec(
        spec.name,
        "nominal" if spec.categories is not None else "continuous",
        spec.dtype,
        categories=None if spec.categories is None else [*spec.categories, None],
        lower=spec.lower,
        upper=spec.upper,
        missing=True,
        tz=spec.tz,
    )
    enc = Encoder(drawn)
    if drawn.is_discrete:
        odd = int(np.sum(enc.to_codes(column, client=name)[present.to_numpy()] != 0))
    else:
        values = enc.to_numeric(column, client=name)
        odd = int(np.sum(values[~np.isnan(values)] != float(spec.lower or 0.0)))
    if odd:
        raise SchemaError(
            f"{where} holds another value than the schema's constant in {odd} row(s); make "
            "the schema again for this table, or fix the values"
        )


# ---------------------------------------------------------------------------------------
# Setup round: what a client reports about its own table, and the coordinator's merge.
# ---------------------------------------------------------------------------------------


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def missing_flag(column: str) -> str:
    """Name of the engine's missingness indicator of a continuous column."""
    return f"{column} (missing)"


def point_mass_flag(column: str) -> str:
    """Name of the engine's point-mass indicator of a continuous column."""
    return f"{column} (at point mass)"


def _dtype_family(s: pd.Series) -> str:
    dt = s.dtype
    if isinstance(dt, pd.CategoricalDtype):
        return "category"
    if pd.api.types.is_bool_dtype(dt):
        return "bool"
    if pd.api.types.is_integer_dtype(dt):
        return "int"
    if pd.api.types.is_float_dtype(dt):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(dt):
        return "datetime"
    if pd.api.types.is_string_dtype(dt) and not pd.api.types.is_object_dtype(dt):
        return "string"
    return "object"


def _sort_labels(labels: Sequence[Any]) -> list[Any]:
    """Sorted labels (METHOD.md: nominal coding by sorted labels); ``None`` last."""
    labels = [plain(v) for v in labels]
    present = [v for v in labels if v is not None]
    try:
        out = sorted(present)
    except TypeError:  # mixed types: order by type name, then by text
        out = sorted(present, key=lambda v: (type(v).__name__, str(v)))
    return out + [None] * (len(present) < len(labels))


def surrogate_ids(n: int, start: int = 0, total: int | None = None) -> list[str]:
    """Fresh values of an ``"id"`` column: ``synthetic-000001``, ``synthetic-000002``, ...

    The values are numbered ``start + 1`` to ``start + n`` (at least six digits, and as
    many as ``total`` needs when the rows are one chunk of a table of ``total``), never
    drawn from the real values; the setup round refuses an id column whose real values
    already start with :data:`SURROGATE_PREFIX`, so none can coincide with a real one.
    """
    width = max(6, len(str(max(start + n, total or 0))))
    return [f"{SURROGATE_PREFIX}{i:0{width}d}" for i in range(start + 1, start + n + 1)]


# ---------------------------------------------------------------------------------------
# Text that is really numbers or dates.
# ---------------------------------------------------------------------------------------

#: Date formats tried on text columns, in order of preference: when several read the same
#: share of values (no day above 12), the first wins -- slashes month-first (US),
#: dots and dashes day-first.  ISO 8601 (with or without a time and an offset) comes first.
DATE_FORMATS: tuple[str, ...] = (
    "ISO8601",
    "%m/%d/%Y",
    "%d/%m/%Y",
    "%m/%d/%Y %H:%M",
    "%d/%m/%Y %H:%M",
    "%m/%d/%Y %H:%M:%S",
    "%d/%m/%Y %H:%M:%S",
    "%m/%d/%y",
    "%d/%m/%y",
    "%d.%m.%Y",
    "%d.%m.%Y %H:%M",
    "%d.%m.%Y %H:%M:%S",
    "%d.%m.%y",
    "%d-%m-%Y",
    "%m-%d-%Y",
    "%Y/%m/%d",
    "%b %d %Y",
    "%b %d, %Y",
    "%B %d %Y",
    "%B %d, %Y",
    "%d %b %Y",
    "%d %B %Y",
    "%d-%b-%Y",
    "%d-%b-%y",
)
#: Appended to a date format read where no value tells the day from the month.
AMBIGUOUS_DAY = " (ambiguous: no day above 12)"
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")
_OFFSET = re.compile(r"(?:Z|[+-]\d{2}:?\d{2})$")
_LEADING_ZERO = re.compile(r"^[+-]?0\d")
#: Markers named per column in a note (the most frequent, ties by their text; the rest
#: are counted).
_MAX_MARKERS = 10


def _swap_day_month(fmt: str) -> str:
    return fmt.replace("%d", "\0").replace("%m", "%d").replace("\0", "%m")


def _parse_dates(text: pd.Series) -> tuple[pd.Series, str] | None:
    """Parse unique text values as dates with the best of :data:`DATE_FORMATS`."""
    best: tuple[float, str, pd.Series] | None = None
    for fmt in DATE_FORMATS:
        if fmt == "ISO8601":
            iso = text.str.match(_ISO)
            if not iso.any():
                continue
            aware = text[iso].str.contains(_OFFSET)
            if aware.any() and not aware.all():
                continue  # some with an offset, some without: not one format
            try:
                got = iso_datetimes(text.where(iso))
            except (ValueError, TypeError):  # several offsets: kept as UTC
                got = pd.to_datetime(text.where(iso), format="ISO8601", utc=True)
                fmt = "ISO8601 (mixed offsets, read as UTC)"
        else:
            got = pd.to_datetime(text, format=fmt, errors="coerce")
            # "%Y" also takes 1-3 digits: "1-2-3" is no date of the year 3
            got = got.where(got.dt.year >= 1000)
        share = float(got.notna().mean())
        if share > 0 and (best is None or share > best[0]):
            best = (share, fmt, got)
    if best is None:
        return None
    share, fmt, got = best
    if "%d" in fmt and "%m" in fmt:
        other = pd.to_datetime(text, format=_swap_day_month(fmt), errors="coerce")
        if float(other.notna().mean()) == share:
            fmt += AMBIGUOUS_DAY
    return got, fmt


#: Currency symbols read as the unit of a text column of numbers, before or after the
#: number ("$1,234.56", "12 €"); with "%" after it ("45.3%") and the codes of
#: :data:`CURRENCY_CODES` the units fits reads.
CURRENCY_SYMBOLS = "$€£¥"
#: ISO 4217 currency codes (those in use) read as the unit of a text column of numbers:
#: upper case, before or after the number with a space between ("USD 5", "5 EUR",
#: "CHF 1'234.50", "EUR 1.234,56").  A code is told from text by standing alone beside
#: the number (three letters of this list, nothing else in the value) and by being on
#: every number of its column (:func:`_read_units`): in a column of plain numbers, one
#: "TOP 10" is a marker, not 10 Tongan pa'anga; "5 USD" and "USD 5" are one unit.
CURRENCY_CODES = (
    "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL "
    "BSD BTN BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUC CUP CVE CZK DJF "
    "DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF "
    "IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR "
    "LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO "
    "NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK "
    "SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH "
    "UGX USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG "
    "ZWL"
).split()
#: Thousands separators of numbers written with a decimal point, and with a decimal
#: comma: the other mark, an apostrophe (Swiss "1'234.50"; also the typographic "’"),
#: a space, a no-break space or a narrow no-break space (French "1 234,56", as
#: spreadsheets write it); one of them throughout a number.
_GROUPS = {".": ",'\u2019 \u00a0\u202f", ",": ".'\u2019 \u00a0\u202f"}
_MINUS = "-\u2212"  # the hyphen-minus and the minus sign


def _unit_number_pattern(decimal: str) -> re.Pattern[str]:
    """A number written with an optional unit (``%`` after it, one of
    :data:`CURRENCY_SYMBOLS` before or after it, a three-letter code before or after it
    with a space between), thousands separators (one of :data:`_GROUPS` throughout,
    every group of three digits, the first of one to three not 0: "0,125" is no
    thousands-grouped 125), a sign, or parentheses (an accounting negative, with a
    currency only), with ``decimal`` as its decimal mark."""
    group = "[" + re.escape(_GROUPS[decimal]) + "]"
    mark = re.escape(decimal)
    number = (
        rf"(?P<num>[1-9]\d{{0,2}}(?P<g>{group})\d{{3}}(?:(?P=g)\d{{3}})*(?:{mark}\d+)?"
        rf"|\d+(?:{mark}\d+)?|{mark}\d+)"
    )
    cur = f"[{re.escape(CURRENCY_SYMBOLS)}]"
    sign = f"[+{re.escape(_MINUS)}]"
    return re.compile(
        rf"^(?P<open>\(\s*)?(?P<sign>{sign})?\s*(?:(?P<pre>{cur})|(?P<precode>[A-Z]{{3}})\s)?"
        rf"\s*(?P<sign2>{sign})?{number}"
        rf"(?:\s*(?P<post>%|{cur})|\s+(?P<postcode>[A-Z]{{3}}))?(?P<close>\s*\))?$"
    )


_UNIT_PATTERNS = {d: _unit_number_pattern(d) for d in ".,"}


def _unit_numbers(text: pd.Series, decimal: str) -> pd.DataFrame:
    """Read (stripped, unique) text values as numbers written with a unit or separators.

    Parameters
    ----------
    text : Series of str
    decimal : {".", ","}
        The decimal mark to read them with.

    Returns
    -------
    DataFrame
        Indexed as ``text``: ``value`` (float, NaN where the text is no such number),
        ``unit`` (the ``%``, currency symbol or currency code, None without),
        ``thousands`` (the thousands separator used, None without), ``negative_parens``
        (an accounting negative), ``leading_zero`` (a code such as "$05": not read as a
        number).
    """
    found = text.str.extract(_UNIT_PATTERNS["," if decimal == "," else "."])
    num = found["num"]
    paren = found["open"].notna() & found["close"].notna()
    sign = found["sign"].fillna(found["sign2"])
    code = found["precode"].fillna(found["postcode"])
    unit = found["pre"].fillna(found["post"]).fillna(code)
    currency = unit.isin(list(CURRENCY_SYMBOLS)) | code.notna()
    ok = (
        num.notna()
        & (found[["pre", "post", "precode", "postcode"]].notna().sum(axis=1) <= 1)  # "$5$"
        & (code.isna() | code.isin(CURRENCY_CODES))  # "ABC 5": no currency
        & ~(found["sign"].notna() & found["sign2"].notna())  # "-$-5"
        & (found["open"].isna() == found["close"].isna())  # "(5" or "5)"
        & ~(paren & (sign.notna() | ~currency))  # "(-$5)", "(5)", "(5%)"
    )
    digits = num.fillna("")
    for c in _GROUPS["," if decimal == "," else "."]:
        digits = digits.str.replace(c, "", regex=False)
    if decimal == ",":
        digits = digits.str.replace(",", ".", regex=False)
    value = pd.to_numeric(digits.where(ok), errors="coerce").astype(float)
    negative = (sign.isin(list(_MINUS)) | paren).to_numpy()
    value = value.where(~negative, -value)
    return pd.DataFrame(
        {
            "value": value.where(ok),
            "unit": unit.where(ok),
            "thousands": found["g"].where(ok),
            "negative_parens": paren & ok,
            "leading_zero": num.fillna("").str.match(r"^0\d") & ok,
        },
        index=text.index,
    )


class _ColumnMark(NamedTuple):
    """A text column's decimal mark (:func:`_column_mark`)."""

    #: "." or ",".
    mark: str
    #: :func:`_unit_numbers` of the values with it.
    found: pd.DataFrame
    #: The values as numbers with it (plain numbers too), NaN where none.
    value: pd.Series
    #: Why the column stays text, None when it need not: ``{"why": "mixed" |
    #: "unsettled", "ambiguous": "," | ".", "n_ambiguous": int, "other": "," | "." |
    #: None, "n_other": int}`` (the shapes of its values and how many, never a value).
    conflict: dict[str, Any] | None


def _table_mark(frame: pd.DataFrame) -> tuple[str, str]:
    """A table's decimal mark and how sure it is: ``"fixed"`` (a decimal point, a table
    without :data:`DECIMAL_MARK_ATTR`: a comma-separated file or a DataFrame), or
    :data:`DECIMAL_SOURCE_ATTR`'s ``"settled"`` or ``"guess"`` (a file read with a
    decimal comma without it: ``"settled"``)."""
    mark = "," if frame.attrs.get(DECIMAL_MARK_ATTR) == "," else "."
    source = frame.attrs.get(DECIMAL_SOURCE_ATTR)
    if source not in ("settled", "guess"):
        source = "settled" if mark == "," else "fixed"
    return mark, str(source)


def _column_mark(text: pd.Series, numbers: pd.Series, decimal: str, source: str) -> _ColumnMark:
    """The decimal mark a text column's numbers are read with, decided per column.

    Each (stripped, unique) value is read with either mark: "12.5" and "1,234.56" read
    with a decimal point only, "12,5" and "1.234,56" with a decimal comma only, "1234"
    and "1 234" the same with both, and "1,234" or "1.234" as two numbers (1234, or
    1.234): *ambiguous*.  The column's mark is the table's (:func:`_table_mark`), but
    in a table whose mark is not ``"fixed"`` (a file not separated by commas) the
    column's own values overrule it where they read with one mark only, all the same
    one (a column written with decimal points in a file of decimal commas).  A table of
    ``"fixed"`` decimal point never reads a decimal comma ("1,5" is no number there:
    it may be a list).  Ambiguous values are read with the column's mark when its other
    values do not contradict it; the column stays text (``conflict``) when some of its
    values read with the other mark only (its numbers are written both ways), or when
    none settles the mark and neither does the file (``"guess"``).

    Parameters
    ----------
    text : Series of str
        The column's stripped unique values.
    numbers : Series of float
        ``text`` as plain numbers (:func:`pandas.to_numeric`; NaN where none).
    decimal, source : str
        The table's mark and how sure it is (:func:`_table_mark`).

    Returns
    -------
    _ColumnMark
        The column's mark, its values read with it, and the conflict (None when the
        column may be read as numbers with that mark).
    """
    point, comma = _unit_numbers(text, "."), _unit_numbers(text, ",")
    as_point = point["value"].where(point["value"].notna(), numbers)
    with_point = text.str.contains(".", regex=False)
    as_comma = comma["value"].where(comma["value"].notna(), numbers.where(~with_point))
    p_ok, c_ok = as_point.notna().to_numpy(), as_comma.notna().to_numpy()
    p_val, c_val = as_point.to_numpy(dtype=float), as_comma.to_numpy(dtype=float)
    ambiguous = p_ok & c_ok & (p_val != c_val)
    only_point, only_comma = p_ok & ~c_ok, c_ok & ~p_ok
    mark = decimal if source == "fixed" else "."
    if source != "fixed":
        if only_point.any() != only_comma.any():  # the column's values say which
            mark = "." if only_point.any() else ","
        else:
            mark = decimal
    against, settles = (only_comma, only_point) if mark == "." else (only_point, only_comma)
    conflict = None
    if ambiguous.any() and (against.any() or (not settles.any() and source == "guess")):
        shapes = text[ambiguous]
        conflict = {
            "why": "mixed" if against.any() else "unsettled",
            "ambiguous": "," if shapes.str.contains(",", regex=False).any() else ".",
            "n_ambiguous": int(ambiguous.sum()),
            "other": ("," if mark == "." else ".") if against.any() else None,
            "n_other": int(against.sum()),
        }
    if mark == ".":
        return _ColumnMark(".", point, as_point, conflict)
    return _ColumnMark(",", comma, as_comma, conflict)


def _ambiguous_thousands(text: pd.Series, decimal: str, thousands: Sequence[str]) -> int:
    """How many of a column's (stripped, unique, read) values there are when every one
    is written with one group of a thousands separator that is the other decimal mark
    and nothing after it ("7,460" read with a decimal point: 7460, or 7.46 with a decimal
    comma); 0 when any value is written otherwise ("7", "12,345.5", "1,234,567"),
    which the column's own values then settle."""
    seps = [t for t in thousands if t in ".,"]
    if text.empty or len(seps) != 1 or seps[0] == decimal:
        return 0
    num = text.str.extract(_UNIT_PATTERNS[decimal])["num"]
    shape = rf"[1-9]\d{{0,2}}{re.escape(seps[0])}\d{{3}}"
    if num.isna().any() or not num.str.fullmatch(shape).all():
        return 0
    return int(text.size)


def _read_units(
    text: pd.Series, n_values: np.ndarray, column: _ColumnMark
) -> tuple[pd.Series, dict[str, Any]] | None:
    """A text column's (stripped, unique) values as numbers, with the column's decimal
    mark (:func:`_column_mark`), when some are written with one unit or with separators
    (:func:`_unit_numbers`) and, with the plain numbers among them, at least
    :data:`PARSE_SHARE` of its values (``n_values``: each text's count) are numbers,
    none with a leading zero; else None (also when its numbers are written with several
    units: "5%" and "$5"; or with a currency code on some only: "USD 5" and "7").

    Returns
    -------
    (numbers, written) or None
        The numbers (NaN where a value is a marker), and how they were written, for the
        column's note: ``{"unit": "%" | a currency symbol or code | None, "thousands":
        [separators], "decimal_comma": bool, "negative_parentheses": bool}``.
    """
    found, combined = column.found, column.value
    ok = combined.notna().to_numpy()
    if int(n_values[ok].sum()) / int(n_values.sum()) < PARSE_SHARE:
        return None
    if found["leading_zero"].any() or text[ok].str.match(_LEADING_ZERO).any():
        return None  # codes ("02134", "$05"), as plain text numbers
    used = found[found["value"].notna().to_numpy()]
    units = sorted(used["unit"].dropna().unique())
    if len(units) > 1:
        return None  # "5%" and "$5": not one quantity
    if units and units[0] in CURRENCY_CODES and not (found["unit"][ok] == units[0]).all():
        return None  # a code on some numbers only: text ("TOP 10" among numbers)
    written = {
        "unit": units[0] if units else None,
        "thousands": sorted(used["thousands"].dropna().unique()),
        "decimal_comma": bool(column.mark == "," and text[ok].str.contains(",").any()),
        "negative_parentheses": bool(used["negative_parens"].any()),
    }
    if not (written["unit"] or written["thousands"] or written["decimal_comma"]):
        return None  # nothing but plain numbers: read as such (or not) without units
    return combined, written


#: Long columns are first tried on this many evenly spaced values.
_PARSE_SAMPLE = 2000


def _may_parse(present: pd.Series, decimal: str = ".") -> bool:
    """Whether an evenly spaced sample of the values could reach :data:`PARSE_SHARE`
    (a quick test that spares long text columns the full parse), as numbers (also
    written with a unit or separators, the file's ``decimal`` mark's) or dates."""
    idx = np.linspace(0, present.size - 1, _PARSE_SAMPLE).astype(np.int64)
    text = pd.Series(present.iloc[idx].astype(str).str.strip().to_numpy())
    numbers = pd.to_numeric(text, errors="coerce")
    good = np.isfinite(numbers.to_numpy(dtype=float))
    if float(good.mean()) < 0.9 * PARSE_SHARE:  # with either mark (:func:`_column_mark`)
        for mark in ".,":
            good |= _unit_numbers(text, mark)["value"].notna().to_numpy()
    if float(good.mean()) >= 0.9 * PARSE_SHARE:
        return True
    unique = pd.Series(pd.unique(text.to_numpy()))
    dates = _parse_dates(unique)
    if dates is None:
        return False
    parsed = set(unique[dates[0].notna().to_numpy()])
    return float(text.isin(parsed).mean()) >= 0.9 * PARSE_SHARE


def decimal_values(s: pd.Series) -> tuple[pd.Series, int] | None:
    """A column of Python :class:`~decimal.Decimal` objects as numbers, and its scale.

    A column is one when its dtype is ``object`` and its present values are all
    ``Decimal`` objects or numbers (``int``, ``float``; not booleans), at least one a
    ``Decimal``: how pandas reads a Parquet decimal column, or how a user builds a
    money column.  Missing values (``None``, NaN, ``Decimal("NaN")``) stay missing.

    Parameters
    ----------
    s : Series

    Returns
    -------
    (numbers, scale) or None
        The values as ``float64`` (``Int64`` when all are whole, as text read as
        numbers), and the most digits after the point a value has (``Decimal("12.30")``:
        2; a float value: its :func:`output_decimals`, :data:`MAX_DECIMALS` at full
        precision), which may exceed :data:`MAX_DECIMAL_SCALE` (:func:`describe_table`
        refuses such a column); None when ``s`` is not such a column.
    """
    if not pd.api.types.is_object_dtype(s.dtype):
        return None
    present = s.dropna()
    kinds = ("decimal", "mixed", "mixed-integer")  # numbers of mixed types among them
    if present.empty or pd.api.types.infer_dtype(present, skipna=True) not in kinds:
        return None
    scale, floats, any_decimal = 0, [], False
    for v in present.to_numpy(dtype=object):
        if isinstance(v, Decimal):
            any_decimal = True
            exponent = v.as_tuple().exponent
            if isinstance(exponent, int):  # not Infinity (refused later, as infinite)
                scale = max(scale, -exponent)
        elif isinstance(v, (float, np.floating)):
            floats.append(float(v))
        elif not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)):
            return None
    if not any_decimal:
        return None
    finite = np.asarray(floats, dtype=float)
    finite = finite[np.isfinite(finite)]
    if finite.size:
        d = output_decimals(finite)
        scale = max(scale, MAX_DECIMALS if d is None else d)
    values = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    fin = values[np.isfinite(values)]
    if np.all(fin == np.round(fin)) and np.all(np.abs(fin) < 2**53):
        numbers = pd.Series(pd.array(values, dtype="Float64")).astype("Int64")
    else:
        numbers = pd.Series(values)
    numbers.index = s.index
    return numbers.rename(s.name), scale


def to_decimals(col: pd.Series, scale: int) -> pd.Series:
    """Numbers as Python :class:`~decimal.Decimal` objects with ``scale`` digits after
    the point (``12.3`` -> ``Decimal("12.30")`` for 2), ``None`` where missing: the
    output of a column of ``Decimal`` objects (:attr:`ColumnSpec.decimal_scale`).

    Each value is the decimal the float64 prints as with ``scale`` digits (the value
    itself for a float rounded to at most that many decimals, as a decoded column is).

    Parameters
    ----------
    col : Series
        Numbers (any numeric dtype, or objects that are numbers).
    scale : int

    Returns
    -------
    Series
        dtype ``object``.
    """
    values = pd.to_numeric(col).to_numpy(dtype=float, na_value=np.nan) + 0.0  # no -0.00
    fmt = f".{int(scale)}f"
    out = np.empty(values.shape[0], dtype=object)
    out[:] = [None if math.isnan(v) else Decimal(format(v, fmt)) for v in values.tolist()]
    return pd.Series(out, index=col.index, name=col.name, dtype=object)


def parse_text_columns(
    frame: pd.DataFrame,
    declared: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    text_only: bool = False,
) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """Read text columns that are really numbers or dates as numbers or dates.

    A text (object or string) column is read as numbers when at least
    :data:`PARSE_SHARE` of its present values are finite numbers and none is written
    with a leading zero ("02134", "00501": codes, which stay text); else as dates when
    at least that share are dates of one format (:data:`DATE_FORMATS`: ISO 8601 first,
    then slashes month-first, dots and dashes day-first, month names).  Numbers written
    with one unit count as numbers (:func:`_read_units`): a percent sign ("45.3%" is
    45.3, the number the user sees), a currency symbol of :data:`CURRENCY_SYMBOLS`
    before or after ("$1,234.56", "12 €", "-$5", "($5.00)"), a currency code of
    :data:`CURRENCY_CODES` before or after with a space ("USD 5", "5 EUR": only when
    every number of the column has it), thousands separators (:data:`_GROUPS`: ",",
    an apostrophe or a space, "1'234.50", "1 234.50"; with a decimal comma ".", an
    apostrophe or a space, "1.234,56 €", "1 234,56"); a column mixing units ("5%",
    "$5") is not.  The decimal mark is decided per column (:func:`_column_mark`): the
    table's (``frame.attrs``' :data:`DECIMAL_MARK_ATTR` and
    :data:`DECIMAL_SOURCE_ATTR`, set by :func:`fits.io.read_table`; a point without
    them), or in a ';'-separated file the one its values are written with; a column
    whose numbers read two ways ("1,234" beside "12,5") stays text, and
    :func:`describe_table` says why.  The values that
    do not parse are *markers* ("?", "unknown", "n/a"): they become missing values.
    Numbers that are all whole become ``Int64``.  A column of Python ``Decimal``
    objects (:func:`decimal_values`) is read as numbers too, with a note
    ``{"as": "decimal", "scale": ...}`` (no markers; it is not text, and no
    :class:`DataNote` says so).  Columns declared ``"nominal"`` or ``"id"`` are left as
    they are.

    Parameters
    ----------
    frame : DataFrame
        One client's table (not changed).
    declared : mapping, optional
        Column -> ``{"kind": ...}`` declarations.
    text_only : bool
        Read text alone: columns of ``Decimal`` or ``datetime.date`` objects are left as
        they are (a table compared with a synthetic one read back from its file, which
        holds them so too).

    Returns
    -------
    frame : DataFrame
        The table with those columns parsed (the same object when none is).
    notes : dict
        Column -> ``{"as": "number" | "date", "format": str, "markers": {value: count},
        "n_markers": int, "n_present": int}`` for every parsed column; numbers written
        with a unit or separators also say how (``"unit"``, ``"thousands"``,
        ``"decimal_comma"``, ``"negative_parentheses"``: :func:`_read_units`).
    """
    declared = declared or {}
    mark, source = _table_mark(frame)  # the file's decimal mark, and how sure
    codes = set(frame.attrs.get(CODE_COLUMNS_ATTR, ()))  # codes, as another site's
    out: pd.DataFrame | None = None
    notes: dict[str, dict[str, Any]] = {}
    for name in frame.columns:
        s = frame[name]
        if declared.get(name, {}).get("kind") in ("nominal", "id") or name in codes:
            continue
        if isinstance(s.dtype, pd.CategoricalDtype) or not (
            pd.api.types.is_object_dtype(s.dtype) or pd.api.types.is_string_dtype(s.dtype)
        ):
            continue
        present = s.dropna()
        if present.empty:
            continue
        decimal = decimal_values(s)
        if decimal is not None and text_only:
            continue
        if decimal is not None:  # Decimal objects: numbers already, restored on output
            notes[name] = {
                "as": "decimal",
                "format": "decimal",
                "scale": decimal[1],
                "markers": {},
                "n_markers": 0,
                "n_present": int(present.size),
            }
            if out is None:
                out = frame.copy()
            out[name] = decimal[0]
            continue
        if present.map(lambda v: isinstance(v, date) and not isinstance(v, datetime)).all():
            if text_only:
                continue
            # datetime.date objects (a Parquet date32 column): dates already, not text;
            # restored as dates on output (ColumnSpec.pandas_dtype "object")
            notes[name] = {
                "as": "date objects",
                "format": "date",
                "markers": {},
                "n_markers": 0,
                "n_present": int(present.size),
            }
            if out is None:
                out = frame.copy()
            out[name] = pd.to_datetime(s)
            continue
        if present.size > _PARSE_SAMPLE and not _may_parse(present, mark):
            continue
        counts = present.astype(str).value_counts(sort=False)
        text = pd.Series(counts.index.str.strip(), index=counts.index)
        # shares as one division of counts, so exactly 95% (76 of 80) reads as 0.95: a
        # sum of per-value fractions came to 0.9499999999999998
        n_values = counts.to_numpy()
        total = int(n_values.sum())
        parsed: pd.Series | None = None
        written: dict[str, Any] = {}
        numbers = pd.to_numeric(text, errors="coerce")
        numbers = numbers.where(np.isfinite(numbers.to_numpy(dtype=float)))
        ok = numbers.notna().to_numpy()
        plain = (
            int(n_values[ok].sum()) / total >= PARSE_SHARE
            and not text[ok].str.match(_LEADING_ZERO).any()
        )
        if not ok.all() or (source != "fixed" and text[ok].str.contains(r"[.,]").any()):
            # numbers written with a unit or separators ("$1,234.56"), or with the
            # file's decimal comma ("1.234" is 1234 there)?
            how = _column_mark(text, numbers, mark, source)
            if how.conflict is not None:  # "1,234" and "12,5": numbers that read two
                plain = False  # ways are no numbers (describe_table says why); dates?
            units = _read_units(text, n_values, how) if how.conflict is None else None
            more = units is not None and (
                not plain
                or int(n_values[units[0].notna().to_numpy()].sum()) > n_values[ok].sum()
                or bool((units[0][ok] != numbers[ok]).any())  # "1.234": 1234, not 1.234
            )
            if units is not None and more:
                numbers, written = units
                ok, plain = numbers.notna().to_numpy(), True
                shapes = _ambiguous_thousands(text[ok], how.mark, written["thousands"])
                if shapes:  # all "7,460": 7460 or 7.46, the merge compares the sites
                    written = {**written, "ambiguous_thousands": shapes}
        if plain:
            parsed, what, fmt = numbers, "number", "number"
        else:
            dates = _parse_dates(text)
            if dates is not None:
                ok = dates[0].notna().to_numpy()
                if int(n_values[ok].sum()) / total >= PARSE_SHARE:
                    parsed, what, fmt = dates[0], "date", dates[1]
        if parsed is None:
            continue
        mapped = parsed.reindex(s.astype(str).to_numpy())
        mapped.index = s.index
        mapped[s.isna()] = pd.NA if what == "number" else pd.NaT
        if what == "number":
            values = mapped.to_numpy(dtype=float, na_value=np.nan)
            fin = values[~np.isnan(values)]
            if np.all(fin == np.round(fin)) and np.all(np.abs(fin) < 2**53):
                column: pd.Series = pd.Series(pd.array(values, dtype="Float64")).astype("Int64")
            else:
                column = pd.Series(values)
            column.index = s.index
        else:
            column = mapped
        # the most frequent first, ties by their text: the markers named (at most
        # _MAX_MARKERS) do not depend on the row order
        bad = counts[~ok].sort_index().sort_values(ascending=False, kind="stable")
        notes[name] = {
            "as": what,
            "format": fmt,
            "markers": {str(k): int(v) for k, v in bad.iloc[:_MAX_MARKERS].items()},
            "n_markers": int(bad.sum()),
            "n_present": int(counts.sum()),
            **written,
        }
        if out is None:
            out = frame.copy()
        out[name] = column.rename(name)
    return (out if out is not None else frame), notes


def datetime_micros(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds since 1970-01-01 UTC of a datetime column, exactly (int64; the
    instant for times with a time zone, the wall time read as UTC for others), and
    where it is missing (those entries of the first array mean nothing)."""
    if getattr(s.dt, "tz", None) is not None:
        s = s.dt.tz_convert("UTC").dt.tz_localize(None)
    values = _as_us(s)
    return values.astype(np.int64), np.isnat(values)


def datetime_seconds(s: pd.Series) -> np.ndarray:
    """Seconds since 1970-01-01 UTC of a datetime column (NaN where missing)."""
    if getattr(s.dt, "tz", None) is not None:
        s = s.dt.tz_convert("UTC").dt.tz_localize(None)
    # in microseconds, never nanoseconds: datetime64[ns] holds only 1677-09-21 to
    # 2262-04-11, and a second- or microsecond-unit column past them (9999-12-31, an
    # "open end") wrapped around silently into that range
    values = _as_us(s)
    out = values.astype(np.int64).astype(float) / 1e6
    out[np.isnat(values)] = np.nan
    return out


def _as_us(s: pd.Series) -> np.ndarray:
    """A tz-naive datetime column as ``datetime64[us]`` (a coarser unit converted
    exactly; nanoseconds truncated to their microsecond, as fits keeps them)."""
    values = s.to_numpy()
    if values.dtype.kind != "M":  # object of Timestamps: pandas picks the unit
        values = pd.to_datetime(s).to_numpy()
    return values.astype("datetime64[us]")


def _holds_bytes(present: pd.Series) -> bool:
    """Whether an object column's present values include ``bytes``: a category label
    fits cannot send in a site's description (it would come back as the text
    ``"b'...'"``, not the bytes, and the site's own values would not match it)."""
    kind = pd.api.types.infer_dtype(present, skipna=True)
    if kind == "bytes":
        return True
    return kind.startswith("mixed") and any(
        isinstance(v, (bytes, bytearray)) for v in present.to_numpy(dtype=object)
    )


def _unsupported(series: pd.Series) -> tuple[str, str] | None:
    """(what the column holds, how to fix it) for column types fits cannot model."""
    dt = series.dtype
    sample = None
    if isinstance(dt, pd.CategoricalDtype):
        return _unsupported_categories(dt)
    if pd.api.types.is_object_dtype(dt):
        present = series.dropna()
        sample = present.iloc[0] if len(present) else None
        if sample is not None and _holds_bytes(present):
            return (
                "bytes",
                "decode it to text, e.g. df[c].str.decode('utf-8'), or drop the column "
                "(fits synthesize and fits federate: --drop)",
            )
        alike = _flag_and_number(present) if sample is not None else None
        if alike is not None:
            return (
                f"{alike[0]!r} and {alike[1]!r}, one value to Python (fits would merge them: "
                "one would come back where the other was)",
                "make it one type, e.g. df[c].astype(str) to keep them apart, or map its "
                "true/false values to numbers",
            )
    if pd.api.types.is_timedelta64_dtype(dt) or isinstance(sample, (pd.Timedelta, timedelta)):
        return "durations (timedelta)", "convert it to a number, e.g. df[c].dt.total_seconds()"
    if isinstance(sample, time):  # a Parquet time32/time64 column: datetime.time objects
        return (
            "times of day",
            "convert it to a number, e.g. seconds since midnight with df[c].map(lambda t: "
            "t.hour * 3600 + t.minute * 60 + t.second), or drop the column (fits synthesize "
            "and fits federate: --drop)",
        )
    if isinstance(dt, pd.PeriodDtype) or isinstance(sample, pd.Period):
        return (
            "periods",
            "convert it to dates with df[c].dt.to_timestamp() or to text with df[c].astype(str)",
        )
    if pd.api.types.is_complex_dtype(dt) or isinstance(sample, complex):
        return (
            "complex numbers",
            "split it into two real columns, e.g. df[c].to_numpy().real and .imag",
        )
    if isinstance(dt, pd.IntervalDtype) or isinstance(sample, pd.Interval):
        return "intervals", "store its bounds as two numeric columns, or as text"
    if isinstance(sample, list | tuple | set | dict | np.ndarray):  # Parquet lists, structs
        return (
            "nested values (lists, arrays or records)",
            "give each element or field a column of its own, store it as text with "
            "df[c].astype(str), or drop the column (fits synthesize and fits federate: "
            "--drop)",
        )
    return None


def _label(value: Any) -> bool:
    """Whether ``value`` can be a category label: text, a number or a bool (Python or
    numpy), the values a site's description carries as they are."""
    return isinstance(value, (str, bool, int, float, np.bool_, np.integer, np.floating))


def _unsupported_categories(dt: pd.CategoricalDtype) -> tuple[str, str] | None:
    """(what, fix) for a pandas categorical whose categories are no labels fits can
    send (intervals from ``pd.cut``, datetimes, durations, periods, bytes, ``Decimal``,
    dates, tuples): the description would carry their text, which the site's own values
    never equal, so the fit stopped on a wrong diagnosis (or a TypeError); else None."""
    cats = dt.categories
    if pd.api.types.is_string_dtype(cats.dtype) and not pd.api.types.is_object_dtype(cats.dtype):
        return None  # a text dtype: labels
    if cats.dtype.kind in "biuf":  # numbers and bools
        return None
    odd = next((c for c in cats if not _label(c)), None)
    if odd is None:
        return None
    as_text = "keep its labels as text with df[c] = df[c].cat.rename_categories(str)"
    if pd.api.types.is_datetime64_any_dtype(cats.dtype) or isinstance(odd, datetime):
        return (
            "pandas categories that are datetimes",
            "make it a datetime column with df[c] = df[c].astype(df[c].cat.categories.dtype), "
            f"or {as_text}",
        )
    what = {
        pd.Interval: "intervals (as pd.cut makes)",
        pd.Timedelta: "durations",
        timedelta: "durations",
        pd.Period: "periods",
        bytes: "bytes",
        Decimal: "Decimal numbers",
        date: "dates",
        tuple: "tuples",
    }
    name = next((w for t, w in what.items() if isinstance(odd, t)), type(odd).__name__)
    if isinstance(odd, bytes):
        as_text = "decode its labels with df[c] = df[c].cat.rename_categories(bytes.decode)"
    elif isinstance(odd, Decimal):
        as_text = f"make it a number column with df[c] = df[c].astype(float), or {as_text}"
    order = " (its order and the ordered flag stay)" if dt.ordered else ""
    return f"pandas categories that are {name}", as_text + order


def check_names(columns: Iterable[Any], client: str) -> None:
    """Refuse column names that are not text (``0``, ``1.5``, NaN, a MultiIndex
    header's tuples), naming the first and saying how to rename them.

    Raises
    ------
    SchemaError
    """
    for name in columns:
        if isinstance(name, str):
            continue
        if isinstance(name, tuple):
            fix = (
                "(a MultiIndex header); flatten it, e.g. df.columns = "
                "['_'.join(map(str, c)) for c in df.columns]"
            )
        else:
            fix = (
                f"({type(name).__name__}); name them with text, e.g. df.columns = "
                "df.columns.astype(str)"
            )
        raise SchemaError(f"{client}: column names must be strings, got {name!r} {fix}")


def check_columns(data: pd.DataFrame, name: str) -> None:
    """Refuse tables fits cannot model faithfully, naming the column and the fix.

    Duplicate column names (a second ``age`` would be read as the first), and columns
    of durations, periods, complex numbers or intervals (no kind models them): every
    such column of the table in one message, with one fix for them all.

    Raises
    ------
    SchemaError
    """
    columns = pd.Index(data.columns)
    duplicated = sorted({str(c) for c in columns[columns.duplicated()]})
    if duplicated:
        raise SchemaError(
            f"{name}: column name(s) {duplicated} appear more than once; give every column "
            "a unique name (rename or drop the copies) before fitting"
        )
    found = []
    for column in data.columns:
        problem = _unsupported(data[column])
        if problem is not None:
            found.append((column, *problem))
    if not found:
        return
    if len(found) == 1:
        column, what, fix = found[0]
        text = f"{name}: column {column!r} holds {what}, which fits cannot model; " + fix.replace(
            "df[c]", f"df[{column!r}]"
        )
    else:  # every one in one message, with one fix for them all
        each = "; ".join(
            f"{column!r} holds {what}: "
            + re.sub(r",? or drop the column.*$", "", fix).replace("df[c]", f"df[{column!r}]")
            for column, what, fix in found
        )
        drop = " ".join(f"--drop {shlex.quote(str(c))}" for c, _, _ in found)
        text = (
            f"{name}: {len(found)} columns hold values fits cannot model ({each}); fix "
            f"them so, or drop them: from the tables before fitting (Python: "
            f"df.drop(columns={[c for c, _, _ in found]!r})), or by the command line's option "
            f"(fits synthesize and fits federate: {drop})"
        )
    raise SchemaError(text + _identifier_hint(data, name, [c for c, _, _ in found]))


def _identifier_hint(data: pd.DataFrame, name: str, refused: Sequence[Any]) -> str:
    """With a table refused for columns no kind models: the text columns of it that
    look like identifiers or free text at this site, which the setup round would refuse
    next unless declared (``--kind COL=id`` or ``nominal``; not known at this check),
    so that one run names every column to drop; empty when there are none.

    The other columns are read as the setup round reads them (:func:`parse_text_columns`,
    then :func:`_describe_column`): text that is numbers ("$5,123.45"), dates
    ("2021-03-04"), ``Decimal`` or ``datetime.date`` objects is numbers or dates there,
    never an identifier, and so is not named here either (nor its ``--drop``: dropping
    it would discard data a fit models)."""
    keep = [k for k, c in enumerate(data.columns) if c not in refused]
    with warnings.catch_warnings():  # its notes belong to a fit, not to this refusal
        warnings.simplefilter("ignore")
        rest, _ = parse_text_columns(data.iloc[:, keep])  # as the setup round reads it
    mark = _table_mark(rest)
    hits = []
    for k in range(rest.shape[1]):
        column, values = rest.columns[k], rest.iloc[:, k]
        if _dtype_family(values) not in ("string", "object", "category"):
            continue  # numbers, dates, booleans: no identifier by their text
        info = _describe_column(values, column, {}, name, mark)
        if "identifier" in info:  # what merge_descriptions refuses, whatever the others
            hits.append((column, info["identifier"]))
    if not hits:
        return ""
    named = ", ".join(
        f"{c!r} ({f['n_distinct']} distinct values in {f['n_present']} rows)" for c, f in hits
    )
    every = [*refused, *(c for c, _ in hits)]
    drop = " ".join(f"--drop {shlex.quote(str(c))}" for c in every)
    declare = " ".join(f"--kind {shlex.quote(f'{c}=id')}" for c, _ in hits)
    api = ", ".join(f"{c!r}: 'id'" for c, _ in hits)
    return (
        f". Also, {named} look(s) like identifiers or free text here, which fits refuses "
        f"unless declared (Python: kinds={{{api}}}; or drop every column named here before "
        f"fitting: df.drop(columns={every!r})). On the command line, to drop every column "
        f"named here: {drop}; or declare those identifiers ({declare})"
    )


def output_decimals(values: np.ndarray) -> int | None:
    """The fewest decimals d (0 to :data:`MAX_DECIMALS`) with ``round(v, d) == v`` for
    every value, or None if there is none.

    A number read from text written with d decimals is the float64 nearest that
    decimal, and :func:`numpy.round` to d decimals gives exactly that float back (it
    scales by 10^d, rounds to an integer and divides: one correctly rounded division),
    so this is "the most decimals the values were written with".  Unlike the rules'
    :func:`fits.core.rules.value_decimals` there is no tolerance: ``3.0000001`` has 7
    decimals here, and the output is never rounded coarser than its input.  d stops
    where ``|v| 10^d`` reaches 2^53, beyond which float64 holds no further decimals.

    A ``float32`` array is judged in float32, the precision it holds: ``21.3`` stored
    as float32 (21.299999237...) has one decimal, as the synthetic float32 values
    rounded to one decimal and cast back are the same float32 numbers.

    Parameters
    ----------
    values : ndarray
        Finite float values (no NaN).

    Returns
    -------
    int or None
    """
    single = np.asarray(values).dtype == np.float32
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return 0
    top = float(np.max(np.abs(v)))
    for d in range(MAX_DECIMALS + 1):
        if top * 10.0**d >= 2.0 ** (24 if single else 53):
            return None
        rounded = np.round(v, d)
        if single:  # the float32 nearest the d-decimal value is the value itself
            rounded = rounded.astype(np.float32).astype(float)
        if np.array_equal(rounded, v):
            return d
    return None


def _wall_clock_us(s: pd.Series) -> np.ndarray:
    """Microseconds since 1970 of the datetimes as their clock shows them (a time-zone
    aware column: its local wall-clock time, not UTC)."""
    if getattr(s.dt, "tz", None) is not None:
        s = s.dt.tz_localize(None)  # the local wall clock
    return _as_us(s).astype(np.int64)


def time_resolution(s: pd.Series) -> str | None:
    """The coarsest unit of :data:`RESOLUTIONS` that every present datetime of ``s`` is a
    whole multiple of, on the clock the values were written in (a time zone's own wall
    clock: local whole hours at +05:30 are whole hours), or None (finer: microseconds).

    Parameters
    ----------
    s : Series
        A datetime column without missing values.

    Returns
    -------
    str or None
    """
    us = _wall_clock_us(s)
    for unit, length in RESOLUTIONS.items():
        if np.all(us % length == 0):
            return unit
    return None


def describe_table(
    frame: pd.DataFrame,
    declared: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    client: str = "client",
    notes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Describe one client's table for the setup round.

    Reports the row count and, per column, its dtype and either its category set
    (discrete candidates: non-numeric columns, and numeric columns with at most
    :data:`MAX_ORDINAL_LEVELS` values) or its min / max.  No rows are reported.  A text
    column that looks like an identifier or free text (more than
    :data:`MAX_ORDINAL_LEVELS` distinct values, near-unique or long; personal data or
    free text however few its values, :func:`_looks_like_identifier`) reports only its
    counts and why (a shape's name, whether a value is long, its words: no value),
    never its values, unless declared ``"nominal"``; a column declared ``"id"``
    reports only whether a value starts with :data:`SURROGATE_PREFIX`.

    Parameters
    ----------
    frame : DataFrame
        The client's table (after :func:`parse_text_columns`, at a client).
    declared : mapping, optional
        Column -> ``{"kind": ...}`` declarations from the user; a column declared
        discrete reports its category set whatever its size.
    client : str
        The client's name, used in error messages.
    notes : mapping, optional
        What :func:`parse_text_columns` returned: reported with each parsed column
        (``"parsed"``) so that the coordinator can name the markers; a column of
        ``Decimal`` objects reports its scale (``"decimal_scale"``, with
        ``"pandas_dtype"`` ``"object"``) instead.

    Returns
    -------
    dict
        ``{"n_rows": int, "columns": {name: {...}}, "order": [names]}``.
    """
    declared = declared or {}
    notes = notes or {}
    if frame.shape[0] == 0:
        raise SchemaError(f"{client}: the table is empty; every client needs rows")
    out: dict[str, Any] = {"n_rows": int(frame.shape[0]), "columns": {}, "order": []}
    check_names(frame.columns, client)
    mark = _table_mark(frame)  # its text numbers' decimal mark (:func:`_two_readings`)
    for name in frame.columns:
        problem = _unsupported(frame[name])
        if problem is not None:  # fit refuses it (check_columns); an analysis leaves it
            # out, saying what it holds: no description of its values
            out["columns"][name] = {
                "dtype": "object",
                "n_missing": int(frame[name].isna().sum()),
                "unsupported": problem[0],
                "fix": problem[1].replace("df[c]", f"df[{name!r}]"),
            }
            out["order"].append(name)
            continue
        info = _describe_column(frame[name], name, declared, client, mark)
        if notes.get(name, {}).get("as") == "decimal":  # Decimal objects, not text
            if info.get("dtype") in ("int", "float"):
                scale = int(notes[name]["scale"])
                if scale > MAX_DECIMAL_SCALE:  # rounded to fewer, small values become 0
                    raise SchemaError(
                        f"{client}: column {name!r} holds Decimal values with {scale} "
                        f"digits after the point; fits writes at most {MAX_DECIMAL_SCALE} "
                        "(the most a Parquet decimal256 holds), and rounding would change "
                        "its values (those under 1e-76 to 0). Round the column to at most "
                        f"{MAX_DECIMAL_SCALE} places, convert it to float "
                        f"(df[{name!r}].astype(float)), or drop it"
                    )
                info["pandas_dtype"] = "object"
                info["decimal_scale"] = scale
        elif notes.get(name, {}).get("as") == "date objects":  # not text either
            info["date_objects"] = True
        elif name in notes:
            info["parsed"] = dict(notes[name])
        out["columns"][name] = info
        out["order"].append(name)
    spelt = _bool_texts(frame)
    if spelt:
        out["bool_texts"] = spelt
    cells = na_only_cells(frame)
    if cells:  # the column as it reads with its 'NA' a label, for the coordinator
        labelled = with_na_labels(frame[list(cells)], {c: t for c, (t, _) in cells.items()})
        labelled.attrs = {}
        kinds = {c: d for c, d in (declared or {}).items() if c in cells}
        alt = describe_table(labelled, kinds, client=client)["columns"]
        out["na_only"] = {c: {"text": t, "column": alt[c]} for c, (t, _) in cells.items()}
    return out


def na_only_cells(frame: pd.DataFrame) -> dict[str, tuple[str, np.ndarray]]:
    """The columns of ``frame`` whose file wrote one of :data:`NA_TEXTS` in every field
    that is not empty (:data:`NA_ONLY_ATTR`), still all missing there: column -> (that
    text, the rows that hold it)."""
    attr = frame.attrs.get(NA_ONLY_ATTR)
    if not isinstance(attr, Mapping):
        return {}
    n = len(frame)
    out: dict[str, tuple[str, np.ndarray]] = {}
    for col, entry in attr.items():
        if col not in frame.columns or not isinstance(entry, Mapping):
            continue
        rows = entry.get("rows")
        if rows is None:
            held = np.ones(n, dtype=bool)
        else:
            packed = np.frombuffer(bytes.fromhex(str(rows)), dtype=np.uint8)
            if len(packed) != (n + 7) // 8:  # rows added or taken since it was read
                continue
            held = np.unpackbits(packed, count=n).astype(bool)
        if held.any() and frame[col].isna().to_numpy()[held].all():
            out[str(col)] = (str(entry.get("text")), held)
    return out


def with_na_labels(frame: pd.DataFrame, labels: Mapping[str, str]) -> pd.DataFrame:
    """``frame`` with the rows of each column of ``labels`` that its file wrote as that
    text (:func:`na_only_cells`) holding the text, a label, as written; ``frame`` itself
    when there is none to put back."""
    cells = {c: v for c, v in na_only_cells(frame).items() if labels.get(c) == v[0]}
    if not cells:
        return frame
    out = frame.copy()
    for col, (text, held) in cells.items():
        values = np.full(len(out), None, dtype=object)
        values[held] = text
        out[col] = pd.Series(values, index=out.index)  # text as pandas reads it (str)
    return out


def na_labels_at(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """``frame`` (a site's table) with the 'NA' fields of its columns of that text alone
    (:func:`na_only_cells`) put back as the label where the federation's ``schema``
    holds that text among the column's categories (:func:`labels_of_na_only`)."""
    labels = {
        c: t
        for c, (t, _) in na_only_cells(frame).items()
        if c in schema.names and t in (schema[c].categories or [])
    }
    return with_na_labels(frame, labels) if labels else frame


#: The setup description's dtypes of a column of text labels.
_TEXT_DTYPES = ("string", "object", "category")


def _one_label(info: Mapping[str, Any] | None) -> bool:
    """Whether a site's column description is one text label in every row (no missing
    value): a column that names the site, as a table split by region has."""
    return bool(
        info
        and not info.get("n_missing")
        and info.get("dtype") in _TEXT_DTYPES
        and len(info.get("values") or []) == 1
        and isinstance((info.get("values") or [None])[0], str)
    )


def _reads_as_label(text: str, others: Sequence[Mapping[str, Any] | None]) -> str | None:
    """Whether a site's column of ``text`` alone reads as that label, from the other
    sites' descriptions of the column: ``"held"`` where one of them holds the text
    among its values, ``"one each"`` where each holds one text label of its own and no
    missing value (a column that names the site), else None (missing values)."""
    if any(text in ((i or {}).get("values") or []) for i in others):
        return "held"
    if others and all(_one_label(i) for i in others):
        return "one each"
    return None


def _label_info(column: pd.Series) -> dict[str, Any]:
    """What :func:`_reads_as_label` reads of a site's description, from the column
    itself: its missing count and, for a column of text, its values."""
    present = column.dropna()
    text = bool(present.map(lambda v: isinstance(v, str)).all())
    return {
        "n_missing": int(column.isna().sum()),
        "dtype": "string" if text and len(present) else "other",
        "values": sorted(present.unique()) if text else [],
    }


def na_labels_across(frames: Sequence[pd.DataFrame]) -> list[pd.DataFrame]:
    """Tables read by one process (``fits report``'s real files and clients, the
    release check's sites) with each column of 'NA' alone (:func:`na_only_cells`) read
    as the label by the rule of the sites' setup (:func:`labels_of_na_only`), so that
    the real table compared holds what the synthetic table was drawn from."""
    out = list(frames)
    for k, frame in enumerate(frames):
        labels = {}
        for c, (t, _) in na_only_cells(frame).items():
            others = [_label_info(f[c]) for j, f in enumerate(frames) if j != k and c in f]
            if _reads_as_label(t, others) is not None:
                labels[c] = t
        if labels:
            out[k] = with_na_labels(frame, labels)
    return out


def labels_of_na_only(
    descriptions: Sequence[Mapping[str, Any]], clients: Sequence[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The setup descriptions with a site's column of 'NA' alone read as the label
    'NA' where another site holds 'NA' as a label of that column, and a note for each.

    A site whose file writes one of :data:`NA_TEXTS` (say ``"NA"``) in every field of
    a column that is not empty reads the column as missing values, as pandas does: on
    its own it cannot tell North America from a missing value.  It reports the column
    as it would read with the text a label (``"na_only"``: the text, and the column's
    description so read; the same counts as its missing values, already reported).
    Where another site's column holds that text among its values (a label there, kept
    as written by :func:`fits.io.read_table`), or where every other site holds one
    label of its own in the column and no missing value (a column that names the site:
    a table split by region, whose North American branch writes ``NA``), the site's
    column is taken so read: its description is replaced by that one, and the site
    puts the label back when the schema names it (:func:`na_labels_at`).  Elsewhere it
    stays missing, with a note.
    """
    out = [dict(d) for d in descriptions]
    notes: list[str] = []
    for k, desc in enumerate(descriptions):
        for col, entry in (desc.get("na_only") or {}).items():
            text = str(entry.get("text"))
            if col not in desc.get("columns", {}):
                continue
            others = [d.get("columns", {}).get(col) for j, d in enumerate(descriptions) if j != k]
            reading = _reads_as_label(text, others)
            holders = [
                clients[j]
                for j, other in enumerate(descriptions)
                if j != k and text in (other.get("columns", {}).get(col, {}).get("values") or [])
            ]
            where = "as at " + ", ".join(map(repr, holders))
            if reading == "one each":
                where = (
                    "as every other site holds one label of its own in it (a column that "
                    "names the site, as in a table split by region)"
                )
            if reading is None:
                labelled = [  # text labels: a column of numbers is no sign of a label
                    clients[j]
                    for j, other in enumerate(descriptions)
                    if j != k
                    and other.get("columns", {}).get(col, {}).get("dtype") in _TEXT_DTYPES
                    and other.get("columns", {}).get(col, {}).get("values")
                ]
                if labelled:  # labels elsewhere, none of them the text: said, not guessed
                    notes.append(
                        f"column {col!r}: site {clients[k]!r} writes {text!r} in every field "
                        f"that is not empty and no other value: read as missing values, as "
                        f"pandas reads them, since no other site holds {text!r} as a label "
                        f"of the column ({', '.join(map(repr, labelled[:3]))} hold other "
                        f"labels); if {text!r} is a label there (North America for 'NA'), "
                        "write it otherwise in that file (e.g. 'N. America')"
                    )
                continue
            out[k]["columns"] = {**out[k]["columns"], col: entry["column"]}
            held = int(entry["column"].get("n_present", 0))
            notes.append(
                f"column {col!r}: site {clients[k]!r} writes {text!r} in {held} of its "
                f"fields and no other value: read as the label {text!r}, {where} "
                f"(alone, a column of {text!r} reads as "
                f"missing values; where they are missing values, name them so at that site: "
                f"--na-values {shlex.quote(f'{col}={text}')})"
            )
    return out, notes


def _bool_texts(frame: pd.DataFrame) -> dict[str, list[str]]:
    """The spelling of ``frame``'s columns of booleans (:data:`BOOL_TEXTS_ATTR`), for
    the columns that still hold booleans alone."""
    attr = frame.attrs.get(BOOL_TEXTS_ATTR)
    if not isinstance(attr, Mapping):
        return {}
    out: dict[str, list[str]] = {}
    for col, texts in attr.items():
        if col not in frame.columns or not isinstance(texts, (list, tuple)) or len(texts) != 2:
            continue
        present = frame[col].dropna()
        if pd.api.types.is_bool_dtype(frame[col].dtype) or (
            not present.empty and present.map(lambda v: isinstance(v, (bool, np.bool_))).all()
        ):
            out[str(col)] = [str(texts[0]), str(texts[1])]
    return out


def agreed_bool_texts(descriptions: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """The columns of booleans every site's setup description spells one way
    (``"bool_texts"``, :data:`BOOL_TEXTS_ATTR`: ``true``/``false`` at every site), with
    that spelling: how a CSV output writes them.  A column one site spells otherwise,
    or holds in a Parquet file (which has no spelling), is written as pandas writes
    booleans (``True``/``False``)."""
    if not descriptions:
        return {}
    first = descriptions[0].get("bool_texts") or {}
    out: dict[str, tuple[str, str]] = {}
    for col, texts in first.items():
        if all((d.get("bool_texts") or {}).get(col) == texts for d in descriptions[1:]):
            out[str(col)] = (str(texts[0]), str(texts[1]))
    return out


def description_digest(description: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of one site's :func:`describe_table` answer, as the coordinator
    received it in the setup round.

    The answer is written canonically first: JSON with sorted keys, no spaces, floats
    by their exact shortest ``repr`` (``NaN`` and ``Infinity`` as the setup message
    writes them), so the same answer gives the same digest in every process and on
    every platform.  The columns' order (``"order"``) is left out: a site may reorder
    its table's columns without changing its data; so is how its file spells booleans
    (``"bool_texts"``).  A hash of what the site already
    sent in the clear: it tells nothing beyond that answer.

    Parameters
    ----------
    description : mapping
        A site's setup description (``{"n_rows": ..., "columns": {...}, "order": [...]}``).

    Returns
    -------
    str
        64 hexadecimal digits.

    Examples
    --------
    >>> a = description_digest({"n_rows": 3, "columns": {"x": {"min": 0.1, "max": 2.0}}})
    >>> b = description_digest({"columns": {"x": {"max": 2.0, "min": 0.1}}, "n_rows": 3})
    >>> a == b, len(a)
    (True, 64)
    """
    # the order and the spelling of booleans ("true" or "True") are no data
    kept = {k: v for k, v in description.items() if k not in ("order", "bool_texts")}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


#: What a site's setup description says of a column that tells how pandas stores it,
#: not its values: left out of :func:`column_digests` (``double[pyarrow]`` or
#: ``float64``; whole numbers in a float column or an integer one; booleans as objects)
_STORAGE_KEYS = ("pandas_dtype", "dtype", "all_distinct")


def column_digests(description: Mapping[str, Any]) -> dict[str, str]:
    """Per column, the SHA-256 (hex) of what one site's setup description says of it,
    less how pandas stores the column (:data:`_STORAGE_KEYS`).

    Written canonically as :func:`description_digest` writes the
    whole description (JSON, sorted keys, no spaces), so the same values give the
    same digests in any dtype, process or platform; a hash of what the site sent in
    the clear anyway.

    Parameters
    ----------
    description : mapping
        A site's setup description (``{"n_rows": ..., "columns": {...}, ...}``).

    Returns
    -------
    dict of str to str
        Column name -> 64 hexadecimal digits.

    Examples
    --------
    >>> a = column_digests({"columns": {"x": {"pandas_dtype": "float64", "max": 2.0}}})
    >>> b = column_digests({"columns": {"x": {"pandas_dtype": "double[pyarrow]", "max": 2.0}}})
    >>> a == b, len(a["x"])
    (True, 64)
    """
    out = {}
    for name, info in dict(description.get("columns", {})).items():
        kept = {k: v for k, v in dict(info).items() if k not in _STORAGE_KEYS}
        text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        out[str(name)] = hashlib.sha256(text.encode("ascii")).hexdigest()
    return out


def _flag_and_number(values: Any) -> tuple[Any, Any] | None:
    """A true/false value and a number Python counts as the same value (``True`` and
    ``1``, ``False`` and ``0.0``: equal, with one hash) among an object column's present
    values, else None."""
    values = pd.Series(values, dtype=object)
    if pd.api.types.infer_dtype(values, skipna=True) not in (
        "mixed",
        "mixed-integer",
        "mixed-integer-float",
    ):
        return None
    flags: dict[bool, Any] = {}
    numbers: dict[bool, Any] = {}
    for v in values.to_numpy(dtype=object):
        if isinstance(v, (bool, np.bool_)):
            flags.setdefault(bool(v), v)
        elif isinstance(v, (int, float, np.integer, np.floating)) and v in (0, 1):
            numbers.setdefault(bool(v == 1), v)
    for truth, flag in flags.items():
        if truth in numbers:
            return flag, numbers[truth]
    return None


#: Column names that say personal data (:func:`personal_name`): the last words of the
#: name, as words (``phone``, ``home_phone``, ``PhoneNumber``, ``e-mail``, ``ip_address``,
#: ``street_address``, ``address_line_1``), not inside another word (``hotel``,
#: ``filename``) nor before another (``address_type``, ``phone_type``, ``cell_line``: a
#: kind of address, not one).
PERSONAL_NAMES = frozenset(
    {
        "firstname", "lastname", "fullname", "surname", "surnames", "forename",
        "forenames", "givenname", "familyname", "middlename", "maidenname", "username",
        "nickname", "patientname", "customername", "clientname", "ssn", "passport",
        "phone", "phones", "telephone", "tel", "mobile", "cellphone", "cell", "fax",
        "email", "emails", "e mail", "address", "addresses", "addr", "address line",
        "street", "street name", "ip", "ipaddress", "social security",
        "social security no", "national id", "national identity", "national insurance",
        "driver license", "drivers license", "driver licence", "drivers licence",
        "driving licence", "tax id", "phone no", "mobile no", "cell phone",
    }
)  # fmt: skip
#: Words before ``name`` that make it a person's (``patient_name``; not ``product_name``,
#: ``file_name``); ``name`` alone is one too.
PERSON_QUALIFIERS = frozenset(
    {
        "first", "last", "full", "given", "family", "middle", "maiden", "sur", "birth",
        "legal", "display", "patient", "customer", "client", "person", "contact",
        "employee", "user", "member", "applicant", "owner", "holder", "student",
        "borrower", "guardian", "parent", "mother", "father", "spouse", "doctor",
        "physician", "account", "street",
    }
)  # fmt: skip
#: Words after a personal noun that leave it personal (``phone_number``, ``ssn_no``,
#: ``address_2``, ``name_id``).
_NAME_SUFFIXES = frozenset({"number", "numbers", "num", "no", "nr", "nbr", "id"})


def _name_words(name: Any) -> list[str]:
    """A column name's words, lower case: camelCase, digits, ``_ - .`` and spaces split
    it (``PatientName`` -> ``patient name``; ``address1`` -> ``address 1``)."""
    text = unicodedata.normalize("NFKC", str(name))
    text = re.sub(r"(?<=[^\W_\d])(?=\d)|(?<=\d)(?=[^\W_\d])", " ", text)
    text = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", text)
    return re.findall(r"[^\W_]+", text.lower())


def personal_name(name: Any) -> str | None:
    """The words of a column name that say it holds personal data (:data:`PERSONAL_NAMES`;
    ``name`` alone or after a :data:`PERSON_QUALIFIERS` word), else None.  Judged on the
    name's last words, less trailing numbers and :data:`_NAME_SUFFIXES`
    (``phone_number``, ``address_line_1``): ``address_type``, ``phone_type``,
    ``name_length``, ``product_name``, ``filename``, ``hostname`` are not personal."""
    words = _name_words(name)
    while words:
        for k in (3, 2, 1):
            tail = words[-k:]
            if len(tail) == k and " ".join(tail) in PERSONAL_NAMES:
                return " ".join(tail)
        if words[-1] in ("name", "names") and (len(words) == 1 or words[-2] in PERSON_QUALIFIERS):
            return " ".join(words[-2:])
        if words[-1] in _NAME_SUFFIXES or words[-1].isdigit():
            words = words[:-1]  # phone number, address 2: the noun before
            continue
        return None
    return None


def _date_like(text: str) -> bool:
    """Whether digits in three groups read as a date (``2021-03-04``, ``04.03.2021``,
    ``3/4/21``): a year of four digits first, then a month and a day; or a day and a
    month (either order) of one or two digits, then a year of two or four."""
    parts = re.split(r"[\s\-./]+", text.strip())
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return False
    a, b, c = parts
    if len(a) == 4:
        return 1 <= int(b) <= 12 and 1 <= int(c) <= 31
    if len(a) > 2 or len(b) > 2 or len(c) not in (2, 4):
        return False
    x, y = int(a), int(b)
    return (1 <= x <= 31 and 1 <= y <= 12) or (1 <= x <= 12 and 1 <= y <= 31)


def _luhn(digits: str) -> bool:
    """Whether a string of digits ends in its Luhn check digit (card numbers do)."""
    total = 0
    for k, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if k % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


#: Digits grouped by threes with a point, a comma or an apostrophe (``1.234.567``): a
#: number written with thousands separators, no phone or ID number.
_THOUSANDS = re.compile(r"^\d{1,3}(?:([.,'\u2019])\d{3})(?:\1\d{3})*$")
#: A version number (``10.0.19041.1``, ``4.4.2``): dotted groups of digits, the first of
#: one or two digits without a leading zero; no phone number (``555.010.0031``,
#: ``01.23.45.67.89``) or ID number.
_VERSION = re.compile(r"^[1-9]\d?(?:\.\d+){2,}$")


def _value_shape(text: str) -> str | None:
    """The kind of personal data one text value is shaped like, or None.

    ``"e-mail addresses"`` (:data:`EMAIL`), ``"URLs"`` (:data:`URL`), ``"IP addresses"``
    (:data:`IPV4`, or an IPv6 address), and, for text of digits and separators alone
    (:data:`DIGIT_CODE`) that is not a date (:func:`_date_like`), a number with
    thousands separators (``1.234.567``) nor a version (``10.0.19041.1``):
    ``"card numbers"`` (13 to 19 digits, alone or in groups of at least three, with a
    right Luhn check digit), ``"social security numbers"`` (:data:`SSN`), ``"phone
    numbers"`` (:data:`PHONE_DIGITS` digits) and ``"ID numbers"`` (:data:`ID_DIGITS`
    digits or more).  A phone or ID number is written in at least
    three groups of digits, or with a leading ``+`` or an area code in parentheses
    (``(030) 1234567``; not an accounting negative, ``(1234.56)``), or (a
    phone number) as a trunk prefix and a number (``030 1234567``, ``0171/1234567``):
    one run of digits is a code (``02139``, a census tract, a barcode), and two groups
    joined by a hyphen or a slash are a range (``50000-74999``), a ZIP+4 code, an
    academic year (``2019/20``) or an occupation code (``15-1252``)."""
    if EMAIL.match(text):
        return "e-mail addresses"
    if URL.match(text):
        return "URLs"
    if IPV4.match(text):
        return "IP addresses"
    if text.count(":") >= 2 and re.fullmatch(r"[0-9A-Fa-f:.]+", text):
        try:
            ipaddress.IPv6Address(text)
        except ValueError:
            return None
        return "IP addresses"
    if not DIGIT_CODE.match(text) or _THOUSANDS.match(text) or _VERSION.match(text):
        return None  # letters, thousands, a version: no phone, card or ID number
    if _date_like(text):
        return None
    groups = re.findall(r"\d+", text)
    digits = sum(len(g) for g in groups)
    if digits < ID_DIGITS:
        return None
    plain = re.sub(r"[\s\-]", "", text)
    if (
        plain.isdigit()
        and 13 <= len(plain) <= 19
        and (len(groups) == 1 or min(len(g) for g in groups) >= 3)
        and _luhn(plain)
    ):
        return "card numbers"
    if SSN.match(text):
        return "social security numbers"
    trunk = len(groups) == 2 and re.fullmatch(r"0\d{1,4}[\s/]\d{4,}", text) is not None
    area = re.search(r"\(\d{1,5}\)\s?\d", text) is not None  # (030) 1234567, not (1234.56)
    if len(groups) < 3 and not text.startswith("+") and not area and not trunk:
        return None
    if PHONE_DIGITS[0] <= digits <= PHONE_DIGITS[1]:
        return "phone numbers"
    return "ID numbers"


def _shape_of(texts: pd.Series) -> str | None:
    """The kind of personal data at least :data:`PARSE_SHARE` of a column's distinct
    values (stripped text; an evenly spaced sample of at most 2,000 of them) are shaped
    like (:func:`_value_shape`): its name, or the two most frequent names joined by
    "and" where values of two kinds are (a contact column of phones and e-mails);
    else None.  Values that are numbers are of no shape."""
    if texts.size > _PARSE_SAMPLE:
        texts = texts.iloc[np.linspace(0, texts.size - 1, _PARSE_SAMPLE).astype(np.int64)]
    if texts.empty or not texts.str.contains(r"\d|@|://|^www\.", case=False).any():
        return None  # a quick no: labels without a digit (most category columns)
    numbers = pd.to_numeric(texts, errors="coerce").notna().to_numpy()
    shapes = [None if num else _value_shape(t) for t, num in zip(texts, numbers, strict=True)]
    counts: dict[str, int] = {}
    for shape in shapes:
        if shape is not None:
            counts[shape] = counts.get(shape, 0) + 1
    if sum(counts.values()) < PARSE_SHARE * texts.size:
        return None
    ranked = sorted(counts, key=lambda k: -counts[k])
    held = [k for k in ranked if counts[k] >= (1 - PARSE_SHARE) * texts.size] or ranked
    return " and ".join(held[:2])


def _personal_text(uniq: Sequence[Any]) -> dict[str, Any] | None:
    """Why a text column's distinct values are personal data or free text whatever
    their number (no value, no name): ``{"shape": name}`` (:func:`_shape_of`),
    ``{"long_values": True}`` (two distinct values at least, one over
    :data:`LONG_TEXT` characters and of :data:`FREE_TEXT_WORDS` words, or over
    :data:`LONG_VALUE` characters), ``{"mean_words": w}`` (two to
    :data:`MAX_ORDINAL_LEVELS` values averaging over :data:`FREE_TEXT_FEW_LENGTH`
    characters and at least :data:`FREE_TEXT_WORDS` words); else None."""
    values = pd.Series(np.asarray(uniq, dtype=object), dtype=object)
    if values.empty:
        return None
    sample = values
    if values.size > _PARSE_SAMPLE:
        sample = values.iloc[np.linspace(0, values.size - 1, _PARSE_SAMPLE).astype(np.int64)]
    texts = pd.Series(pd.unique(sample.astype(str).str.strip().to_numpy()), dtype=object)
    shape = _shape_of(texts)
    if shape is not None:
        return {"shape": shape}
    if values.size < 2:
        return None
    lengths = values.astype(str).str.len().to_numpy()
    if lengths.max() > LONG_VALUE or any(
        len(str(v).split()) >= FREE_TEXT_WORDS for v in values[lengths > LONG_TEXT]
    ):
        return {"long_values": True}
    if values.size <= MAX_ORDINAL_LEVELS and lengths.mean() > FREE_TEXT_FEW_LENGTH:
        words = float(np.mean([len(str(v).split()) for v in values]))
        if words >= FREE_TEXT_WORDS:
            return {"mean_words": round(words, 1)}
    return None


def _looks_like_identifier(present: pd.Series, name: Any = None) -> dict[str, Any] | None:
    """Counts of a text column that is near-unique or free text, or holds e-mail
    addresses (:data:`EMAIL`, ``"emails"``: how many distinct ones), or values of
    another shape of personal data, long values or words (:func:`_personal_text`:
    ``"shape"``, ``"long_values"``, ``"mean_words"``), or, more than
    :data:`MAX_ORDINAL_LEVELS` distinct values, is named like personal data
    (:func:`personal_name`), else None."""
    uniq = pd.unique(present.to_numpy(dtype=object))
    n_distinct, n_present = len(uniq), int(present.size)
    emails = sum(1 for v in uniq if isinstance(v, str) and EMAIL.match(v.strip()))
    if n_distinct and emails >= PARSE_SHARE * n_distinct:
        length = float(np.mean([len(str(v)) for v in uniq]))
        return {
            "n_distinct": n_distinct,
            "n_present": n_present,
            "mean_length": length,
            "emails": emails,
        }
    personal = _personal_text(uniq)
    if personal is not None:
        length = float(np.mean([len(str(v)) for v in uniq]))
        return {
            "n_distinct": n_distinct,
            "n_present": n_present,
            "mean_length": length,
            **personal,
        }
    if n_distinct <= MAX_ORDINAL_LEVELS:
        return None
    length = float(np.mean([len(str(v)) for v in uniq]))
    out = {"n_distinct": n_distinct, "n_present": n_present, "mean_length": length}
    if n_distinct > NEAR_UNIQUE_SHARE * n_present or length > FREE_TEXT_LENGTH:
        # how many are numbers (a count): a column of numbers with more markers ("-",
        # "?", ".") than parse_text_columns reads as missing is refused as near-unique
        numbers = int(pd.to_numeric(present.astype(str).str.strip(), errors="coerce").notna().sum())
        return {**out, "numbers": numbers} if numbers else out
    if name is not None and personal_name(name) is not None:
        return out  # a personal name of many values (names repeated over visits)
    return None


#: A number with something before it that may be a unit (a symbol: "₹5"; not a letter,
#: as codes are written: "u123", but a currency code of :data:`CURRENCY_CODES` and a
#: space: "USD 5"), or after it ("12 kg").
_UNIT_LIKE = re.compile(
    r"^(?P<pre>[^\w\s+\-\u2212.,(][^\w\s]{0,2}|(?:" + "|".join(CURRENCY_CODES) + r")(?=\s))?"
    r"\s*[+\-\u2212]?\s*\d(?:[\d.,'\u2019\s]*\d)?\s*(?P<post>[^\d\s][^\d]{0,11})?$"
)
#: A unit is named (:func:`_unit_like`) when at least this many distinct values hold it.
_UNIT_NAMED = 2


def _unit_like(present: pd.Series) -> dict[str, Any] | None:
    """Whether a text column that is not read as numbers looks like numbers written with
    a unit: at least :data:`PARSE_SHARE` of its distinct values (or of an evenly spaced
    sample of them) a number with text before or after it, one at least, and one unit
    held by at least that share of them; or, the units all ones fits reads (``%``, a
    currency symbol: too few such values, or several units), half of them.  Then the units
    held by at least :data:`_UNIT_NAMED` of those values (a unit fits reads, ``%`` or a
    currency symbol, by one), most frequent first, at most 3 (so that no row's own
    value is named), and how many other units there are; else None."""
    uniq = pd.Series(pd.unique(present.to_numpy(dtype=object)), dtype=object)
    if uniq.size > _PARSE_SAMPLE:
        uniq = uniq.iloc[np.linspace(0, uniq.size - 1, _PARSE_SAMPLE).astype(np.int64)]
    uniq = pd.Series(pd.unique(uniq.astype(str).str.strip().to_numpy()), dtype=object)
    share = float(uniq.str.match(_UNIT_LIKE).mean())
    if share < 0.5:
        return None
    found = uniq.str.extract(_UNIT_LIKE)
    unit = found["pre"].fillna(found["post"]).str.strip()
    unit = unit[(unit != "") & unit.notna()]
    if unit.empty:
        return None
    counts = unit.value_counts()
    known = ("%", *CURRENCY_SYMBOLS, *CURRENCY_CODES)  # fits's: named however few hold them
    if not all(u in known for u in counts.index) and (
        share < PARSE_SHARE or counts.iloc[0] < PARSE_SHARE * unit.size
    ):
        return None  # several units, not all fits's: labels ("12a", "12b"), not numbers
    named = [str(u) for u, n in counts.items() if n >= _UNIT_NAMED or u in known][:3]
    return {"units": named, "n_other": int(counts.size - len(named))}


def _two_readings(present: pd.Series, mark: str, source: str) -> dict[str, Any] | None:
    """Whether a text column that is not read as numbers is numbers that read two ways
    (:func:`_column_mark`'s ``conflict``: "1,234" beside "12,5"), judged on its distinct
    values (or an evenly spaced sample of them), at least half of them numbers with
    either decimal mark: the conflict (shapes and counts, no value), else None."""
    uniq = pd.Series(pd.unique(present.to_numpy(dtype=object)), dtype=object)
    if uniq.size > _PARSE_SAMPLE:
        uniq = uniq.iloc[np.linspace(0, uniq.size - 1, _PARSE_SAMPLE).astype(np.int64)]
    text = pd.Series(pd.unique(uniq.astype(str).str.strip().to_numpy()), dtype=object)
    if not text.str.contains(r"\d[.,]\d{3}").any():
        return None  # no value reads two ways ("1,234"): a quick no, most text columns'
    numbers = pd.to_numeric(text, errors="coerce")
    numbers = numbers.where(np.isfinite(numbers.to_numpy(dtype=float)))
    read = numbers.notna().to_numpy().copy()
    for d in ".,":
        read |= _unit_numbers(text, d)["value"].notna().to_numpy()
    if float(read.mean()) < 0.5:
        return None
    return _column_mark(text, numbers, mark, source).conflict


def _comma_numbers(present: pd.Series, mark: str, source: str) -> dict[str, Any] | None:
    """Whether a text column that is not read as numbers is numbers written with a
    decimal comma in a table that reads decimal points only (``source == "fixed"``: a
    comma-separated file or a DataFrame, where "1,5" may be a list): at least
    :data:`PARSE_SHARE` of its distinct values (or of an evenly spaced sample of them)
    numbers with a decimal comma ("1.062,85", "12,5 €"), some of them with a decimal
    comma only.  Then how many distinct values read so (a count, never a value), else
    None."""
    if source != "fixed" or mark != ".":
        return None
    uniq = pd.Series(pd.unique(present.to_numpy(dtype=object)), dtype=object)
    if uniq.size > _PARSE_SAMPLE:
        uniq = uniq.iloc[np.linspace(0, uniq.size - 1, _PARSE_SAMPLE).astype(np.int64)]
    text = pd.Series(pd.unique(uniq.astype(str).str.strip().to_numpy()), dtype=object)
    if not text.str.contains(r"\d,\d").any():
        return None  # no decimal comma: a quick no, most text columns'
    plain = pd.to_numeric(text, errors="coerce").notna().to_numpy()
    comma = _unit_numbers(text, ",")["value"].notna().to_numpy() | plain
    point = _unit_numbers(text, ".")["value"].notna().to_numpy() | plain
    if float(comma.mean()) < PARSE_SHARE or not (comma & ~point).any():
        return None
    return {"n_distinct": int(comma.sum())}


def _describe_column(
    s: pd.Series,
    name: str,
    declared: Mapping[str, Mapping[str, Any]],
    client: str,
    decimal: tuple[str, str] = (".", "fixed"),
) -> dict[str, Any]:
    fam = _dtype_family(s)
    kind = declared.get(name, {}).get("kind")
    if kind == "constant":  # described as undeclared: the merge checks it holds one value
        kind = None
    missing = s.isna().to_numpy()
    info: dict[str, Any] = {
        "dtype": fam,
        "n_missing": int(missing.sum()),
        "pandas_dtype": str(s.dtype),
    }
    present = s[~missing]
    if kind == "id":  # not modelled: only whether a real value could look like a surrogate
        text = present.astype(str)
        info["id"] = True
        info["surrogate_clash"] = bool(text.str.startswith(SURROGATE_PREFIX).any())
        return info
    if fam == "category":
        info["dtype_categories"] = [plain(c) for c in s.cat.categories]
        info["dtype_ordered"] = bool(s.cat.ordered)
    if present.size == 0:
        info["all_missing"] = True
        return info
    if fam == "datetime":
        if kind in ("ordinal", "nominal"):
            raise SchemaError(
                f"{client}: column {name!r} holds datetimes; it can only be continuous"
            )
        sec = datetime_seconds(present)
        info.update(min=float(sec.min()), max=float(sec.max()), integral=False)
        tz = getattr(s.dt, "tz", None)
        info["tz"] = str(tz) if tz is not None else None
        # whole days on the values' own clock (local midnights of a time zone)
        info["date_only"] = bool(np.all(_wall_clock_us(present) % 86_400_000_000 == 0))
        info["resolution"] = time_resolution(present)
        return info
    if fam == "category" and s.cat.ordered:
        info["ordered"] = True
        info["categories"] = [plain(c) for c in s.cat.categories]
        info["present"] = [plain(c) for c in present.unique()]
        return info
    if fam in ("category", "bool", "string", "object"):
        if kind == "continuous":
            numeric = pd.to_numeric(present, errors="coerce")
            bad = present[numeric.isna()]
            if len(bad):
                raise SchemaError(
                    f"{client}: column {name!r} is declared continuous but holds text "
                    f"such as {bad.iloc[0]!r}; fix the values or declare it nominal"
                )
            values = numeric.to_numpy(dtype=float)
            info.update(min=float(values.min()), max=float(values.max()), integral=False)
            info["decimals"] = output_decimals(values)
            return info
        if kind != "nominal" and fam != "bool":
            looks = _looks_like_identifier(present, name)
            units = _unit_like(present) if fam != "category" else None
            if units is not None:  # numbers with a unit fits does not read ("12 kg")
                info["unit_like"] = units
            two = _two_readings(present, *decimal) if fam != "category" else None
            if two is not None:  # "1,234" and "12,5": numbers fits does not read
                info["two_readings"] = two
            comma = _comma_numbers(present, *decimal) if fam != "category" else None
            if comma is not None:  # "1.062,85" in a comma-separated file
                info["comma_numbers"] = comma
            if looks is not None:  # its values are never reported
                info["identifier"] = looks
                return info
        info["values"] = _sort_labels(present.unique().tolist())
        info["n_present"] = int(present.size)
        return info
    values = present.to_numpy(dtype=float)
    if not np.all(np.isfinite(values)):
        infinite = values[~np.isfinite(values)]
        signs = ((int((infinite > 0).sum()), "inf"), (int((infinite < 0).sum()), "-inf"))
        shown = " and ".join(f"{n} {t}" for n, t in signs if n)
        where = ""
        if isinstance(present.index, pd.RangeIndex) or pd.api.types.is_integer_dtype(
            present.index
        ):  # a table read from a file: its rows, counted from 1 after the header
            rows = [int(i) + 1 for i in present.index[~np.isfinite(values)][:5]]
            where = f" in row(s) {', '.join(map(str, rows))} (1: the first after the header)"
        raise SchemaError(
            f"{client}: column {name!r} has infinite values ({shown}){where}, which fits "
            "cannot model (a number past float64's range, such as 1e400, reads as inf "
            "too); replace them with finite numbers, or with missing values (an empty "
            "field in a CSV file)"
        )
    info["min"] = float(values.min())
    info["max"] = float(values.max())
    exact = fam == "int" and max(abs(info["min"]), abs(info["max"])) > EXACT_FLOAT_INT
    if exact:  # float64 rounds such whole numbers (to a multiple of 2,048 near 2**63),
        # so the float bounds may lie past the real ones: the exact ones as well
        info["int_min"], info["int_max"] = int(present.min()), int(present.max())
    integral = bool(np.all(values == np.round(values)))
    uniq, counts = np.unique(values, return_counts=True)
    if exact:  # the values themselves, not their float64 roundings
        uniq, counts = np.unique(present.to_numpy(), return_counts=True)
    if kind in ("ordinal", "nominal") or (kind is None and uniq.size <= MAX_ORDINAL_LEVELS):
        info["values"] = [int(v) if integral else float(v) for v in uniq]
    if "values" not in info or not integral:  # a continuous candidate: its point mass
        top = int(np.argmax(counts))
        if counts[top] >= _POINT_MASS_REPORT * values.size:
            # past 2**53 the exact whole number, as the bounds (float64 would round it)
            info["top_value"] = int(uniq[top]) if exact else float(uniq[top])
            info["top_count"] = int(counts[top])
    if integral and fam == "int" and uniq.size == values.size:
        info["all_distinct"] = True
    if integral and uniq.size == values.size:  # a row number? one yes / no, no value
        # (at any size: the merge weighs a small site's yes by its rows, _row_number)
        info["sequence"] = int(uniq[-1]) - int(uniq[0]) + 1 == values.size or bool(
            np.all(np.diff(values) > 0)
        )
    info["integral"] = integral
    if str(present.dtype).lower() == "float32":  # its decimals judged in float32
        values = values.astype(np.float32)
    info["decimals"] = 0 if integral else output_decimals(values)
    info["n_present"] = int(values.size)
    return info


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object of a schema file as a dict, refusing a key given twice: JSON keeps
    the last silently, so a ``"kind"`` added above the old one (an edit) would be lost."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            keys = dict(pairs)
            owner = (
                f"column {keys['name']!r}"
                if "name" in keys
                else f"the rule for column {keys['column']!r}"
                if "column" in keys
                else "the schema"
            )
            raise SchemaError(
                f"{owner} has key {key!r} twice ({out[key]!r}, then {value!r}); a JSON "
                "reader would keep the last silently: keep the one you mean, delete the other"
            )
        out[key] = value
    return out


def files_columns_differ(
    first: tuple[str, str, Sequence[Any]], other: tuple[str, str, Sequence[Any]]
) -> str | None:
    """The message for two site files whose columns differ, each given as ``(file,
    site, columns)`` (``file`` as the message shows it, e.g. quoted), with
    :func:`lookalike_names`' hint; None when they hold the same columns. What
    ``fits synthesize`` and ``fits federate`` say before any site is asked."""
    (file, site, head), (other_file, other_site, cols) = first, other
    missing = [c for c in head if c not in cols]
    extra = [c for c in cols if c not in head]
    if not (missing or extra):
        return None
    return (
        f"{other_file} (site {other_site!r}): columns differ from those of {file} "
        f"(site {site!r})"
        + (f"; missing: {missing}" if missing else "")
        + (f"; extra: {extra}" if extra else "")
        + ". Every site must hold the same columns: rename, add or drop them."
        + lookalike_names(missing, extra, (file, other_file))
    )


def lookalike_names(
    missing: Sequence[Any], extra: Sequence[Any], where: tuple[str, str] | None = None
) -> str:
    """A hint for columns that two clients name alike: with different Unicode code
    points ('é' as one character, or as 'e' and a combining accent), whose names print
    the same, or in another case or with other surrounding spaces (``'Age'`` at one,
    ``'age '`` at the other), which fits does not take for one column; "" when none.

    Parameters
    ----------
    missing : sequence
        The first table's names the other lacks.
    extra : sequence
        The other table's names the first lacks.
    where : (str, str), optional
        How to name the first table and the other in the hint (``"'a.csv' (site
        'a')"``); default "the first table" and "the other".
    """

    def nfc(name: Any) -> Any:
        return unicodedata.normalize("NFC", name) if isinstance(name, str) else name

    def loose(name: Any) -> Any:
        return nfc(name).strip().casefold() if isinstance(name, str) else name

    others = {nfc(e) for e in extra}
    alike = [m for m in missing if nfc(m) in others]
    hints = []
    if alike:
        hints.append(
            f" The names {alike} look the same in both tables but are written with "
            "different Unicode code points (e.g. 'é' as one character, or as 'e' and a "
            "combining accent): save the tables with the same Unicode normalization "
            "(NFC), or rename the columns"
        )
    first, other = where or ("the first table", "the other")
    pairs = []
    for m in missing:
        if m in alike:
            continue
        match = [e for e in extra if loose(e) == loose(m) and nfc(e) != nfc(m)]
        if len(match) == 1:
            pairs.append((m, match[0]))
    if pairs:
        said = "; ".join(
            f"{m!r} in {first} and {e!r} in {other} differ only in " + _how_differ(str(m), str(e))
            for m, e in pairs
        )
        m, e = pairs[0]
        hints.append(
            f" {said}. fits matches headers exactly: rename the column at one site so both "
            f"headers read the same (e.g. {e!r} to {m!r} in {other})"
        )
    return ".".join(hints)


def _how_differ(a: str, b: str) -> str:
    """How two names equal up to case and surrounding spaces differ."""
    case = a.strip() != b.strip()
    space = a.strip() != a or b.strip() != b
    return (
        "case and surrounding spaces"
        if case and space
        else ("case" if case else "surrounding spaces")
    )


def check_constants(
    schema: Schema, descriptions: Sequence[Mapping[str, Any]], clients: Sequence[str]
) -> None:
    """Refuse a user's schema whose ``"constant"`` column a site's table does not hold
    as stated: another value, a missing value where the schema has none, or a value
    where the schema has none (the output would invent or drop values).  Judged from
    the sites' setup descriptions (their value lists, or their min / max; nothing
    beyond what they already sent).

    Raises
    ------
    SchemaError
        Naming every such column, with its sites, and the fix.
    """
    problems = []
    for spec in schema.columns:
        if spec.kind != "constant":
            continue
        bad = []
        for desc, client in zip(descriptions, clients, strict=True):
            info = desc["columns"].get(spec.name)
            if info is None:
                continue  # the sites' columns are checked against the schema at configure
            if info.get("all_missing"):
                if not spec.missing:
                    bad.append(f"{client}: missing in every row")
                continue
            if spec.all_missing:
                bad.append(f"{client}: holds values")
                continue
            if info.get("n_missing") and not spec.missing:
                bad.append(f"{client}: {info['n_missing']} missing value(s)")
            value = spec.constant_value
            if "values" in info:
                seen = [plain(v) for v in info["values"]]
                if spec.dtype in ("int", "float") and all(_is_number(v) for v in seen):
                    same = all(float(v) == float(value) for v in seen)
                else:
                    same = seen == [plain(value)]
            elif "min" in info and _is_number(value):
                same = float(info["min"]) == float(info["max"]) == float(value)
            else:
                same = False
            if not same:
                bad.append(f"{client}: holds other values")
        if bad:
            problems.append(f"{spec.name!r} ({'; '.join(bad)})")
    if problems:
        raise SchemaError(
            f"the schema's constant column(s) {', '.join(problems)} do not hold at the "
            "sites what the schema says (fits writes a constant column's value, or a "
            "missing value, in every synthetic row); make the schema again for these "
            "tables (fits schema ...) or drop the column(s) (--drop)"
        )


def coarser_than_sites(
    schema: Schema, descriptions: Sequence[Mapping[str, Any]], clients: Sequence[str]
) -> list[str]:
    """Where a user's schema rounds synthetic values coarser than a site writes its own.

    A schema file keeps ``decimals`` and ``resolution`` from the table it was made on;
    handed to another table, it would round that table's synthetic values to fewer
    decimals (or a coarser time unit) than the real ones have.  That is allowed (the
    schema is the user's to edit) but should not pass unnoticed: one line per such
    column, naming the sites and the fix, from the sites' setup descriptions (nothing
    beyond what they already sent).

    Parameters
    ----------
    schema : Schema
        The user's schema.
    descriptions : sequence of dict
        The sites' :func:`describe_table` answers.
    clients : sequence of str
        The sites' names, in the order of ``descriptions``.

    Returns
    -------
    list of str
    """
    notes = []
    units = list(RESOLUTIONS)
    for spec in schema.columns:
        if spec.kind != "continuous" or spec.dtype == "int":
            continue
        infos = [
            (c, d["columns"].get(spec.name)) for c, d in zip(clients, descriptions, strict=True)
        ]
        infos = [(c, i) for c, i in infos if i and not i.get("all_missing")]
        if spec.dtype == "datetime" and spec.resolution is not None and not spec.date_only:
            finer = [
                c
                for c, i in infos
                if not i.get("date_only")
                and (
                    i.get("resolution") not in units
                    or units.index(i["resolution"]) > units.index(spec.resolution)
                )
            ]
            if finer:
                notes.append(
                    f"column {spec.name!r}: the schema rounds synthetic values to whole "
                    f"{spec.resolution!r} but {', '.join(finer)} record finer times; set "
                    '"resolution" to a finer unit (h, min, s, ms) or null in the schema file '
                    "to keep them"
                )
        if spec.dtype != "datetime" and spec.decimals is not None:
            more = {
                c: i.get("decimals")
                for c, i in infos
                if "decimals" in i and (i["decimals"] is None or i["decimals"] > spec.decimals)
            }
            if more:
                each = ", ".join(
                    f"{c} ({'more than ' + str(MAX_DECIMALS) if d is None else d})"
                    for c, d in more.items()
                )
                notes.append(
                    f"column {spec.name!r}: the schema rounds synthetic values to "
                    f"{spec.decimals} decimal{'' if spec.decimals == 1 else 's'} but the "
                    f"values have more at {each}; set "
                    '"decimals" to the most (or null: full precision) in the schema file to '
                    "keep them"
                )
    return notes


def merge_descriptions(
    descriptions: Sequence[Mapping[str, Any]],
    clients: Sequence[str],
    *,
    kinds: Mapping[str, str] | None = None,
    order: Sequence[str] | None = None,
) -> Schema:
    """Merge the clients' setup-round reports into the shared schema.

    Parameters
    ----------
    descriptions : sequence of dict
        What :func:`describe_table` returned at each client.
    clients : sequence of str
        The clients' names, for error messages.
    kinds : mapping, optional
        User overrides: column -> kind.
    order : sequence of str, optional
        Chain order; default the first client's column order.

    Returns
    -------
    Schema
    """
    kinds = dict(kinds or {})
    first = descriptions[0]["order"]
    for desc, client in zip(descriptions, clients, strict=True):
        cols = desc["order"]
        missing = [c for c in first if c not in cols]
        extra = [c for c in cols if c not in first]
        if missing or extra:
            raise SchemaError(
                f"{client}: columns differ from {clients[0]}'s"
                + (f"; missing: {missing}" if missing else "")
                + (f"; extra: {extra}" if extra else "")
                + ". Every client must hold the same columns: rename, add or drop them."
                + lookalike_names(missing, extra, (clients[0], client))
            )
    unknown = sorted(set(kinds) - set(first))
    if unknown:
        raise SchemaError(f"kinds given for unknown column(s) {unknown}; known: {list(first)}")
    specs = []
    refused: dict[str, str] = {}
    numbers: list[str] = []  # refused columns of whole numbers (row numbers)
    units: dict[str, str] = {}  # refused columns of numbers with a unit: the fix
    for name in first:
        infos = [d["columns"][name] for d in descriptions]
        kind = kinds.get(name)
        if kind == "id" or any(i.get("id") for i in infos):
            specs.append(_merge_id(name, infos, clients))
            continue
        odd = [(i, c) for i, c in zip(infos, clients, strict=True) if "unsupported" in i]
        if odd:  # a site's table a fit refuses at once (check_columns); an analysis's
            info, _ = odd[0]
            at = ", ".join(c for _, c in odd)
            raise UnsupportedColumnError(
                f"column {name!r} holds {info['unsupported']} (at {at}), which fits cannot "
                f"model; {info['fix']}",
                name,
                str(info["unsupported"]),
                at,
                str(info["fix"]),
            )
        if all(i.get("all_missing") for i in infos):
            specs.append(_merge_all_missing(name, infos, kind))
            continue
        why = _identifier_counts(infos, clients, name) if kind != "nominal" else None
        if why is not None and kind == "constant":  # its declaration first: many values
            raise DeclaredKindError(
                f"column {name!r} is declared constant but takes many values at the sites "
                f"({why}): it looks like an identifier or free text. Leave out the "
                f"declaration (--kind {shlex.quote(f'{name}=constant')}; Python: "
                f"kinds={{{name!r}: 'constant'}}) and declare it an identifier (--kind "
                f"{shlex.quote(f'{name}=id')}), or leave the column out of the synthetic "
                f"table (--drop {shlex.quote(name)})",
                name,
                "constant",
            )
        if why is not None:
            refused[name] = why
            advice = unit_advice(name, infos, clients)
            if advice is not None:
                units[name] = advice
            continue
        present = [(i, c) for i, c in zip(infos, clients, strict=True) if not i.get("all_missing")]
        _check_ambiguous_thousands(name, [i for i, _ in present], [c for _, c in present])
        merge_kind = None if kind == "constant" else kind  # fits' to set: checked below
        spec = _merge_column(name, [i for i, _ in present], [c for _, c in present], merge_kind)
        if any(i.get("n_missing") for i in infos):
            spec.missing = True
            if spec.is_discrete and None not in (spec.categories or []):
                spec.categories = [*(spec.categories or []), None]
        _merge_dtype(spec, infos, clients)
        _merge_markers(spec, infos, clients)
        advice = unit_advice(name, infos, clients) if kind is None else None
        if advice is not None and spec.dtype in ("string", "object", "category"):
            warnings.warn(
                f"{advice}. Until then it is text: a {spec.kind} column of "
                f"{len([c for c in spec.categories or [] if c is not None])} categories",
                DataNote,
                stacklevel=3,
            )
        if kind is None and spec.is_discrete and spec.dtype in ("int", "float"):
            why = _row_number([i for i, _ in present], [c for _, c in present])
            if why is not None:
                refused[name] = why
                numbers.append(name)
                continue
        specs.append(_check_constant(spec, kind, [i for i, _ in present]))
    if refused:
        raise _identifier_error(refused, numbers, units)
    _constant_note(specs, kinds)
    return Schema(specs, list(order) if order else list(first))


def _check_ambiguous_thousands(
    name: str, infos: Sequence[Mapping[str, Any]], clients: Sequence[str]
) -> None:
    """Refuse a column that a site wrote only as "7,460" (one group after a separator
    that is the other decimal mark: read as 7460, a thousands separator, though it may
    be 7.46 with a decimal comma) where another site holds it with decimals ("7.46"):
    the data do not decide the reading, and the wrong one is 1000 times off.  Was: read
    as 7460, with a note on thousands separators only.  Kept as thousands where the
    sites' ranges (sent at setup) decide: read so, the site's values fall within the
    range of the sites with decimals, and read as decimals they would not ("45,000"
    beside 45000.5).

    Raises
    ------
    SchemaError
        Naming the column, the sites of each kind and the fix.
    """
    ambiguous = [
        (c, i["parsed"])
        for i, c in zip(infos, clients, strict=True)
        if (i.get("parsed") or {}).get("ambiguous_thousands")
    ]
    decimals = [
        c
        for i, c in zip(infos, clients, strict=True)
        if i.get("dtype") in ("int", "float")
        and i.get("integral") is False
        and not (i.get("parsed") or {}).get("ambiguous_thousands")
    ]
    if not ambiguous or not decimals:
        return
    held = [
        (float(i["min"]), float(i["max"]))
        for i, c in zip(infos, clients, strict=True)
        if c in decimals and "min" in i and "max" in i
    ]
    spans = [
        (float(i["min"]), float(i["max"]))
        for i, c in zip(infos, clients, strict=True)
        if c in dict(ambiguous) and "min" in i and "max" in i
    ]
    if held and len(spans) == len(ambiguous):
        low, high = min(v for v, _ in held), max(v for _, v in held)

        def meets(a: float, b: float) -> bool:
            return a <= high and b >= low

        if all(meets(a, b) and not meets(a / 1000, b / 1000) for a, b in spans):
            return  # read as thousands, the values fall among the others'; as decimals not
    site, parsed = ambiguous[0]
    sep = str((parsed.get("thousands") or [","])[0])
    at = ", ".join(repr(c) for c, _ in ambiguous)
    fix = (
        f"write the numbers at {at} with a decimal point (7.460, no thousands separator), "
        "or, where that file writes all its numbers with a decimal comma, save it with ';' "
        "as the separator (fits then reads its commas as decimal marks)"
        if sep == ","
        else f"write the numbers at {at} with a decimal comma and no thousands separator "
        "(7,460), or without separators at all if they are thousands (7460)"
    )
    raise SchemaError(
        f"column {name!r} at {at}: every value is written like '7{sep}460' "
        f"({int(parsed['ambiguous_thousands'])} distinct at {site!r}), which reads as 7460 "
        f"with {sep!r} as a thousands separator or as 7.46 with {sep!r} as the decimal "
        f"mark, and nothing at that site says which; {', '.join(map(repr, decimals))} "
        f"hold{'s' if len(decimals) == 1 else ''} the column with decimals, so "
        f"{sep!r} may well be a decimal mark there, and read as thousands its values "
        f"would be 1000 times too large. Fix: {fix}"
    )


def _identifier_counts(
    infos: Sequence[Mapping[str, Any]], clients: Sequence[str], name: Any = None
) -> str | None:
    """Why a column looks like an identifier or free text (a client flagged it, or the
    union of the clients' values does), else None.  ``name``: the column's, which may
    say personal data (:func:`personal_name`)."""
    hint = personal_name(name) if name is not None else None
    flagged = [
        (i["identifier"], c) for i, c in zip(infos, clients, strict=True) if "identifier" in i
    ]
    if flagged:
        said = "; ".join(
            f"{f['n_distinct']} distinct values in {f['n_present']} rows at {c}" + _flag_reasons(f)
            for f, c in flagged
        )
        if any(f.get("numbers", 0) >= NEAR_UNIQUE_SHARE * f["n_present"] for f, _ in flagged):
            said += (
                "; mostly numbers: if its other values are codes for a missing value "
                "('-', '?', '.'), name them so (--na-values TEXT, repeatable; Python: "
                "fits.io.read_table(path, na_values=[...])) or leave those fields empty"
            )
        if hint is not None and any(not _flag_reasons(f, counts=True) for f, _ in flagged):
            said += _named_reason(hint)  # flagged for its name: no other reason
        return said
    used = [i for i in infos if not i.get("all_missing")]
    if not used or not all(
        "values" in i and i["dtype"] in ("string", "object", "category") for i in used
    ):
        return None
    n_present = sum(int(i.get("n_present", 0)) for i in used)
    union = {v for i in used for v in i["values"] if v is not None}
    length = float(np.mean([len(str(v)) for v in union])) if union else 0.0
    if (
        len(union) > MAX_ORDINAL_LEVELS
        and (len(union) > NEAR_UNIQUE_SHARE * n_present or length > FREE_TEXT_LENGTH)
    ) or len(union) == n_present >= UNIQUE_TEXT_ROWS:  # a small table's: every value once
        return f"{len(union)} distinct values in {n_present} rows" + (
            f", {length:.0f} characters long on average" if length > FREE_TEXT_LENGTH else ""
        )
    # the sites' values together, as one site judges its own (each said no alone)
    personal = _personal_text(sorted(union, key=str))
    if personal is not None:
        return f"{len(union)} distinct values in {n_present} rows" + _flag_reasons(
            {"mean_length": length, **personal}
        )
    if hint is not None and len(union) > MAX_ORDINAL_LEVELS:
        return f"{len(union)} distinct values in {n_present} rows" + _named_reason(hint)
    return None


def _flag_reasons(flag: Mapping[str, Any], counts: bool = False) -> str:
    """What made a site flag a column (its ``"identifier"`` report), to follow its
    counts in a message: the shape of its values, their length and words; with
    ``counts``, also being near-unique (empty: its name alone did, :func:`personal_name`)."""
    n_present = flag.get("n_present", 0)
    length = float(flag.get("mean_length", 0))
    said = ", e-mail addresses" if flag.get("emails") else ""
    if flag.get("shape"):
        said += f", {flag['shape']}"
    if flag.get("numbers", 0) >= NEAR_UNIQUE_SHARE * n_present > 0:
        said += f", {flag['numbers']} of them numbers"
    if "mean_words" in flag:
        said += (
            f", {length:.0f} characters and {flag['mean_words']:.0f} words long on average "
            "(free text)"
        )
    elif length > FREE_TEXT_LENGTH:
        said += f", {length:.0f} characters long on average"
    if flag.get("long_values"):
        said += f", a value over {LONG_TEXT} characters (free text or a document)"
    if counts and not said and flag.get("n_distinct", 0) > NEAR_UNIQUE_SHARE * n_present:
        said = "near-unique"
    return said


def _named_reason(hint: str) -> str:
    """The message's words for a column refused for its name (:func:`personal_name`)."""
    return (
        f"; its name ({hint!r}) says personal data, and it has more than "
        f"{MAX_ORDINAL_LEVELS} distinct values: names, phone numbers or addresses repeated "
        "over rows"
    )


def _row_number(infos: Sequence[Mapping[str, Any]], clients: Sequence[str]) -> str | None:
    """Why a column of whole numbers looks like a row number (an integer identifier),
    else None: at every site a different whole number in every row, consecutive or
    ascending in row order -- each site's one yes / no (``sequence``), never its values'
    order -- where that is strong evidence:

    * every site of at least :data:`UNIQUE_TEXT_ROWS` rows (one at least) says yes (the
      smaller sites' answers are not weighed then), or
    * every site is smaller, every site says yes, and together they are no likelier to
      say so by chance than one site of :data:`UNIQUE_TEXT_ROWS` rows: rows in random
      order are ascending with chance 1/n! at a site of n rows, so the product of the
      sites' n! reaches :data:`UNIQUE_TEXT_ROWS`! (three sites of 8 rows, two of 7; not
      three of 3 rows, 1..3 at each: a count may well be that).
    """
    if not infos or any("sequence" not in i for i in infos):
        return None  # a site repeats a value, or holds other than whole numbers
    told = [
        (int(i.get("n_present", 0)), bool(i["sequence"]), c)
        for i, c in zip(infos, clients, strict=True)
    ]
    large = [t for t in told if t[0] >= UNIQUE_TEXT_ROWS]  # the sites large enough alone
    if large:
        told = large
    elif math.prod(math.factorial(n) for n, _, _ in told) < math.factorial(UNIQUE_TEXT_ROWS):
        return None  # too few rows in all to tell a row number from a count
    if not all(sequence for _, sequence, _ in told):
        return None
    at = ", ".join(f"{c} ({n} rows)" for n, _, c in told)
    return (
        f"a different whole number in every row, consecutive or ascending in row order at "
        f"{at}: a row number"
    )


def _identifier_error(
    refused: Mapping[str, str],
    numbers: Sequence[str] = (),
    units: Mapping[str, str] | None = None,
) -> IdentifierColumnError:
    """``numbers``: the refused columns of whole numbers (kept by declaring their kind);
    ``units``: the refused columns that look like numbers with a unit, and their fix
    (:func:`unit_advice`), said first."""
    lines = [
        f"column {name!r} looks like an identifier or free text ({why})"
        for name, why in refused.items()
    ]
    if units:
        lines[-1] += ". " + "; ".join(units.values())
    names = list(refused)
    drop = " ".join(f"--drop {shlex.quote(n)}" for n in names)
    declare = " ".join(f"--kind {shlex.quote(f'{n}=id')}" for n in names)
    api = ", ".join(f"{n!r}: 'id'" for n in names)
    return IdentifierColumnError(
        "; ".join(lines) + ". fits will not model such a column: every synthetic value would be a "
        "real one, copied verbatim. Drop it (fits synthesize, fits schema and fits "
        f"federate: {drop}; Python: drop the column before fitting) or declare it an "
        "identifier "
        f"(command line: {declare}; Python: kinds={{{api}}}; in a schema file: "
        '"kind": "id"): the output then holds fresh surrogate values '
        f"{SURROGATE_PREFIX}000001, {SURROGATE_PREFIX}000002, ... and the column is not "
        "modelled. To copy its values on purpose, declare it nominal"
        + (
            " (or, a column of whole numbers, ordinal or continuous: "
            + " ".join(f"--kind {shlex.quote(f'{n}=ordinal')}" for n in numbers)
            + ")"
            if numbers
            else ""
        )
        + ".",
        names,
    )


def _merge_id(name: str, infos: Sequence[Mapping[str, Any]], clients: Sequence[str]) -> ColumnSpec:
    clash = [c for i, c in zip(infos, clients, strict=True) if i.get("surrogate_clash")]
    if clash:
        raise SchemaError(
            f"column {name!r} is declared an identifier, but at {', '.join(clash)} real "
            f"values start with {SURROGATE_PREFIX!r}, the prefix of fits' surrogate values; "
            "drop the column instead, or rename those values"
        )
    fams = {i["dtype"] for i in infos}
    return ColumnSpec(name, "id", fams.pop() if len(fams) == 1 else "object")


def _merge_dtype(
    spec: ColumnSpec, infos: Sequence[Mapping[str, Any]], clients: Sequence[str]
) -> None:
    """The pandas dtype and categories to give back: the clients' own when every client
    agrees, else their common type (:func:`_common_output`, which says where it cannot
    take it)."""
    present = [(i, c) for i, c in zip(infos, clients, strict=True) if not i.get("all_missing")]
    dtypes = {i.get("pandas_dtype") for i, _ in present}
    if len(dtypes) == 1 and None not in dtypes:
        spec.pandas_dtype = next(iter(dtypes))
    elif len(dtypes) > 1 and None not in dtypes:
        _common_output(spec, [i for i, _ in present], [c for _, c in present])
    listed = [
        (list(i["dtype_categories"]), c)
        for i, c in zip(infos, clients, strict=True)
        if i.get("dtype_categories") is not None
    ]
    if listed and spec.dtype == "category":
        spec.dtype_ordered = any(i.get("dtype_ordered") for i in infos)
        levels: list[Any] = []
        if spec.dtype_ordered:  # the one order they all agree with (checked at the merge)
            levels = _merged_order(
                spec.name, [cats for cats, _ in listed], [site for _, site in listed]
            )
        for c, _ in listed:  # the first client's order, then new categories as they come
            levels += [v for v in c if v not in levels]
        spec.dtype_categories = levels
    if spec.dtype == "datetime":  # restored from tz and date_only; as date objects
        # where every site's are (a Parquet date32 column: one again, CSV: dates); in
        # the sites' time unit where they share one (their dtype, kept: its unit)
        dates = spec.date_only and all(
            i.get("date_objects") for i in infos if not i.get("all_missing")
        )
        shared = dtypes.pop() if len(dtypes) == 1 and None not in dtypes else None
        spec.pandas_dtype = "object" if dates else shared
    scales = [i.get("decimal_scale") for i in infos if not i.get("all_missing")]
    if scales and None not in scales and spec.dtype in ("int", "float"):  # at every site
        spec.decimal_scale = max(int(s) for s in scales if s is not None)


def _common_dtype(infos: Sequence[Mapping[str, Any]]) -> str | None:
    """The dtype pandas gives a column concatenated (``pd.concat``) from the clients'
    columns, each of its ``pandas_dtype`` (``int64`` and ``float64``: ``float64``;
    ``int64`` and ``Int64``: ``Int64``; ``bool`` and ``boolean``: ``boolean``; a
    categorical of text and ``str``: ``str``), or None where pandas has no such dtype."""
    samples = []
    for i in infos:
        fam, dtype = i["dtype"], str(i["pandas_dtype"])
        try:
            if fam == "category":  # a categorical concatenates as its categories' dtype
                sample = pd.Series(pd.Categorical(["a"]))
            elif fam in ("int", "float"):
                sample = pd.Series([0]).astype(dtype)
            elif fam == "bool":
                sample = pd.Series([False]).astype(dtype)
            elif fam in ("string", "object"):
                sample = pd.Series(["a"], dtype=dtype)
            else:
                return None
        except (TypeError, ValueError):
            return None
        samples.append(sample)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return str(pd.concat(samples, ignore_index=True).dtype)


def _common_output(
    spec: ColumnSpec, infos: Sequence[Mapping[str, Any]], clients: Sequence[str]
) -> None:
    """The output dtype of a column whose clients' pandas dtypes differ: their common
    type (:func:`_common_dtype`) where it holds every value unchanged, else None (the
    decoded dtype).  Text and a pandas categorical give text of the text's dtype (the
    categorical's categories become plain labels); integers and floats give floats;
    integers of several widths the widest; a nullable dtype at one client its nullable
    counterpart.  Not: ``Decimal`` columns (their own output), datetimes (time zones),
    an integer column past 2**53 whose common type is a float (it would round values:
    integers, with a :class:`DataNote`), labels that are not all text (a text dtype
    would make ``1`` and ``"1"`` one: object, with a :class:`DataNote`)."""
    if spec.dtype == "datetime" or any(i.get("decimal_scale") is not None for i in infos):
        return
    common = _common_dtype(infos)
    if common is None or common == "category":  # categoricals alike: their union (below)
        return
    target = pd.api.types.pandas_dtype(common)
    fams = {i["dtype"] for i in infos}
    if spec.dtype in ("string", "object"):
        labels = [c for c in spec.categories or [] if c is not None]
        text = all(isinstance(c, str) for c in labels)
        if (
            pd.api.types.is_string_dtype(target)
            and not pd.api.types.is_object_dtype(target)
            and text
        ):
            spec.dtype, spec.pandas_dtype = "string", common
        elif pd.api.types.is_object_dtype(target):
            spec.dtype, spec.pandas_dtype = "object", common
        mixed = not text and any(isinstance(c, str) for c in labels)
        if not text and (mixed or not pd.api.types.is_object_dtype(target)):
            odd = next(c for c in labels if not isinstance(c, str))
            _dtype_note(
                spec,
                infos,
                clients,
                f"its labels are not all text ({odd!r}, of type {type(odd).__name__}), and a "
                f"text dtype would make {odd!r} and {str(odd)!r} one label, so the output "
                "is object",
            )
    elif spec.dtype == "bool" and pd.api.types.is_bool_dtype(target):
        spec.pandas_dtype = common
    elif spec.dtype in ("int", "float") and fams <= {"int", "float"}:
        if pd.api.types.is_float_dtype(target):
            if "float" in fams and not spec.past_float:  # not int64 + uint64's float64
                spec.pandas_dtype = common
            elif spec.dtype == "int":
                lo, hi = spec.lower, spec.upper
                if lo is not None and hi is not None and lo < 0 and hi > 2**63 - 1:
                    where = ", ".join(
                        f"{c}: {i.get('pandas_dtype')}" for i, c in zip(infos, clients, strict=True)
                    )
                    raise SchemaError(  # was: a note promising int64, and floats written
                        f"column {spec.name!r} holds whole numbers from {int(lo)} to "
                        f"{int(hi)} ({where}): no integer type holds both a negative "
                        "number and one past 2**63 - 1 (int64 stops there, uint64 at 0), and "
                        "floats would round them; give "
                        "the column one integer type at every site, declare it an identifier "
                        "(kind 'id': --kind COLUMN=id), or drop it (--drop COLUMN)"
                    )
                why = (
                    f"{common}, their common type, would round its whole numbers past 2**53"
                    if spec.past_float
                    else f"{common}, their common type, would make its whole numbers floats"
                )
                output = "Int64" if spec.missing else "int64"
                _dtype_note(spec, infos, clients, f"{why}, so the output is {output}")
        elif pd.api.types.is_integer_dtype(target) and spec.dtype == "int":
            spec.pandas_dtype = common


def _dtype_note(
    spec: ColumnSpec, infos: Sequence[Mapping[str, Any]], clients: Sequence[str], what: str
) -> None:
    """Say (a :class:`DataNote`) that a column whose clients' dtypes differ does not get
    their common type, naming the clients and their dtypes."""
    who = ", ".join(f"{c}: {i.get('pandas_dtype')}" for i, c in zip(infos, clients, strict=True))
    warnings.warn(
        f"column {spec.name!r} has different dtypes at the sites ({who}); {what}. Give it "
        "the same dtype at every site to choose the output's",
        DataNote,
        stacklevel=6,  # merge_descriptions's caller's caller, as the markers' note
    )


def _merge_markers(
    spec: ColumnSpec, infos: Sequence[Mapping[str, Any]], clients: Sequence[str]
) -> None:
    """Record the text values read as missing and say so (a :class:`DataNote`)."""
    parsed = [(i["parsed"], c) for i, c in zip(infos, clients, strict=True) if "parsed" in i]
    if not parsed:
        return
    markers: dict[str, int] = {}
    n_markers = n_present = 0
    for p, _ in parsed:
        for k, v in p.get("markers", {}).items():
            markers[k] = markers.get(k, 0) + int(v)
        n_markers += int(p.get("n_markers", 0))
        n_present += int(p.get("n_present", 0))
    formats = sorted({str(p["format"]) for p, _ in parsed})
    if parsed[0][0]["as"] != "number" and any(  # a site whose reader gave datetimes itself
        "parsed" not in i and i.get("dtype") == "datetime" for i in infos
    ):  # (ISO 8601 text, or a Parquet datetime): the sites wrote several formats
        formats = sorted({*formats, "ISO8601"})
    what = "numbers" if parsed[0][0]["as"] == "number" else "dates (" + ", ".join(formats) + ")"
    written = _written_with(spec.name, parsed) if what == "numbers" else ""
    spec.parsed = f"number{written}" if what == "numbers" else ", ".join(formats)
    spec.markers = dict(sorted(markers.items(), key=lambda kv: -kv[1])) or None
    sites = ", ".join(c for _, c in parsed)
    msg = f"column {spec.name!r} is text read as {what}{written} (at {sites})"
    if n_markers:
        named = ", ".join(f"{k!r} ({v})" for k, v in (spec.markers or {}).items())
        rest = n_markers - sum(markers.values())
        msg += (
            f"; {n_markers} of its {n_present} values are not {what.split(' ')[0]} and are "
            f"read as missing: {named}" + (f" and {rest} others" if rest else "")
        )
    if written:
        msg += "; its synthetic values are written as plain numbers"
    elif what != "numbers":
        msg += (
            "; a CSV output writes its synthetic dates in that format"
            if spec.text_date_format is not None
            else "; a CSV output writes its synthetic dates as ISO 8601 (2021-03-15)"
        )
    warnings.warn(msg, DataNote, stacklevel=4)


def unit_advice(
    name: str, infos: Sequence[Mapping[str, Any]], clients: Sequence[str]
) -> str | None:
    """What a text column that looks like numbers fits does not read is, and the fix.

    Shared by the synthesis's refusals and notes and an analysis's (the same words).

    Parameters
    ----------
    name
        The column.
    infos
        Its description at each site (``describe_table(...)["columns"][name]``).
    clients
        The sites' names, in the order of ``infos``.

    Returns
    -------
    str or None
        The advice for numbers that read two ways ("1,234" beside "12,5"), numbers
        written with a decimal comma in a table that reads decimal points only
        ("1.062,85" in a comma-separated file) or with a unit fits does not read
        ("12 kg", :func:`_unit_like`); shapes and counts, never a value.  None when it
        looks like none of them.
    """
    two = [
        (i["two_readings"], c) for i, c in zip(infos, clients, strict=True) if "two_readings" in i
    ]
    if two:
        return _two_readings_advice(name, two)
    comma = [c for i, c in zip(infos, clients, strict=True) if "comma_numbers" in i]
    if comma:
        return (
            f"column {name!r} holds numbers written with a decimal comma (like '1.234,56' "
            f"or '12,5', at {', '.join(comma)}), in a comma-separated file or a DataFrame, "
            "where fits reads decimal points only (a comma there may separate a list): "
            "save the file with ';' as the separator, where fits reads decimal commas, or "
            f"convert the column to numbers first (pandas: df[{name!r}] = pd.to_numeric("
            f"df[{name!r}].str.replace('.', '').str.replace(',', '.')), after removing any "
            "unit)"
        )
    like = [(i["unit_like"], c) for i, c in zip(infos, clients, strict=True) if "unit_like" in i]
    if not like:
        return None
    units = list(dict.fromkeys(str(u) for w, _ in like for u in w["units"]))
    other = max(int(w.get("n_other", 0)) for w, _ in like)
    at = ", ".join(c for _, c in like)
    known = ("%", *CURRENCY_SYMBOLS, *CURRENCY_CODES)
    reads = (
        f"fits reads '%', the currency symbols {' '.join(CURRENCY_SYMBOLS)} and ISO 4217 "
        "currency codes ('USD 5', '5 EUR') as units, one unit per column"
    )
    if len(units) + (other > 0) > 1:
        named = [repr(u) for u in units] + ([f"{other} other(s)"] if other else [])
        shown = ", ".join(named[:-1]) + " and " + named[-1]
        return (
            f"column {name!r} looks like numbers written with several units ({shown} at "
            f"{at}); {reads}: convert it to numbers in one unit before fitting (pandas: "
            f"df[{name!r}] = pd.to_numeric(...) on the values of each unit, converted)"
        )
    if units and units[0] in CURRENCY_CODES:  # read only when every number has it
        return (
            f"column {name!r} looks like numbers written with {units[0]!r} (at {at}), but "
            "fits reads a currency code only on a column whose every number has it and "
            f"where at least {PARSE_SHARE:.0%} of the values are such numbers, so it stays "
            f"text: write {units[0]!r} on every number, and fix or blank the other values "
            "(they are read as missing when the rest reach that share)"
        )
    if units and units[0] in known:  # its unit is read, but too many values are not numbers
        return (
            f"column {name!r} looks like numbers written with {units[0]!r} (at {at}), but "
            f"fewer than {PARSE_SHARE:.0%} of its values are such numbers, so it stays "
            "text: fix or blank the other values (they are read as missing when the rest "
            "reach that share)"
        )
    unit = units[0] if units else "UNIT"
    what = f"{unit!r} at {at}" if units else f"at {at}"
    return (
        f"column {name!r} looks like numbers written with a unit ({what}), which fits "
        f"does not read ({reads}): convert it to numbers before fitting, e.g. with "
        f"pandas df[{name!r}] = pd.to_numeric(df[{name!r}].str.replace({unit!r}, '')"
        ".str.strip()), and save the table again"
    )


def _two_readings_advice(name: str, two: Sequence[tuple[Mapping[str, Any], str]]) -> str:
    """What a text column whose numbers read two ways is (its sites' ``two_readings``,
    :func:`_column_mark`'s ``conflict``: shapes and counts, never a value), and the fix."""
    what, _ = two[0]
    sep = str(what.get("ambiguous", ","))
    counts = ", ".join(f"{int(w.get('n_ambiguous', 0))} distinct at {c}" for w, c in two)
    mixed = [w for w, _ in two if w.get("why") == "mixed"]
    if mixed:
        comma = mixed[0].get("other") == ","
        other = "a decimal comma (like '12,5')" if comma else "a decimal point (like '12.5')"
        why = f"others are written with {other}, so the column does not say which"
    else:
        why = "neither its other values nor the file's other numbers say which"
    return (
        f"column {name!r} holds numbers that read two ways: values written like "
        f"'1{sep}234' ({counts}) are 1234 with {sep!r} as a thousands separator or 1.234 "
        f"with {sep!r} as the decimal mark, and {why}; it stays text: convert it to plain "
        "numbers (a decimal point, no thousands separators) before fitting, or write every "
        "number so that it reads one way ('1,234.00', or '1.234,00' in a file with a "
        "decimal comma)"
    )


def _written_with(name: str, parsed: Sequence[tuple[Mapping[str, Any], str]]) -> str:
    """How the sites wrote a text column read as numbers, for its note and the schema's
    ``parsed`` (" written with '$' and ',' thousands separators"; "" for plain
    numbers), from their :func:`parse_text_columns` notes.

    Raises
    ------
    SchemaError
        The sites write it with different units ("%" at one, "$" at another).
    """
    units = {str(p["unit"]): c for p, c in parsed if p.get("unit")}
    if len(units) > 1:
        at = "; ".join(
            f"{u!r} at " + ", ".join(c for p, c in parsed if p.get("unit") == u) for u in units
        )
        raise SchemaError(
            f"column {name!r} is text written with different units at the sites ({at}), so "
            "its numbers are not one quantity; write it with one unit at every site "
            "(convert the others' values), or declare it nominal to keep it as text"
        )
    parts = [repr(u) for u in units]
    thousands = sorted({t for p, _ in parsed for t in p.get("thousands") or ()})
    if thousands:
        names = {" ": "space", "\u00a0": "no-break space", "\u202f": "narrow no-break space"}
        shown = " or ".join(names.get(t, repr(t)) for t in thousands)
        parts.append(f"{shown} thousands separators")
    comma = [c for p, c in parsed if p.get("decimal_comma")]
    if comma:  # each site reads its own file's mark: say where, when not at every site
        where = f" at {', '.join(comma)}" if len(comma) < len(parsed) else ""
        parts.append(f"a decimal comma{where}")
    if any(p.get("negative_parentheses") for p, _ in parsed):
        parts.append("parentheses for negatives")
    if not parts:
        return ""
    shown = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f" written with {shown}"


def _merge_column(
    name: str, infos: Sequence[Mapping[str, Any]], clients: Sequence[str], kind: str | None
) -> ColumnSpec:
    """One column's spec from every client's description of it (and a declared kind)."""
    fams = [i["dtype"] for i in infos]
    if "datetime" in fams:
        return _merge_datetime(name, infos, fams, clients)
    numeric = {"int", "float"}
    textual = {"string", "object", "category", "bool"}
    _check_booleans(name, infos, clients)
    _check_flags_and_numbers(name, infos, clients)
    if any(f in numeric for f in fams) and any(f in textual for f in fams):
        who = ", ".join(f"{c}: {f}" for c, f in zip(clients, fams, strict=True))
        advice = unit_advice(name, infos, clients)
        raise SchemaError(
            f"column {name!r} is numeric at some clients and text at others ({who}); "
            "make its type the same everywhere (text is read as numbers where at least "
            f"{PARSE_SHARE:.0%} of its values are numbers: fix or blank the other values "
            "where it stays text, or name the codes for a missing value among them: "
            "--na-values TEXT)" + (f". The text: {advice}" if advice else "")
        )
    if kind is not None and kind not in KINDS:
        raise SchemaError(f"column {name!r}: unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    fam = fams[0] if len(set(fams)) == 1 else ("float" if set(fams) <= numeric else "object")
    if any(i.get("ordered") for i in infos):
        return _merge_ordered(name, infos, clients, kind)
    discrete = all("values" in i for i in infos) and kind != "continuous"
    pooled = False  # every site listed its values, but together they hold too many
    if discrete and fam in numeric and kind is None:
        n_values = len({_value_key(v) for i in infos for v in i["values"]})
        if n_values > MAX_ORDINAL_LEVELS:  # the kind follows the pooled distinct count:
            # continuous, as for one site holding all rows (30 sites of 20 ages each)
            discrete, pooled = False, True
        elif not all(i.get("integral") for i in infos):  # a lattice only if values repeat
            rows = sum(int(i.get("n_present", 0)) for i in infos)
            discrete = rows >= LATTICE_MIN_COUNT * n_values
    if fam in textual or discrete:
        if kind == "continuous":
            what = {"bool": "true/false values", "category": "pandas categories"}.get(fam, "text")
            raise SchemaError(
                f"column {name!r} holds {what}; it cannot be continuous: declare it "
                "nominal or ordinal, or leave its kind to fits"
            )
        return _merge_discrete(name, infos, kind, fam, numeric=fam in numeric)
    # continuous (or declared discrete but too many values were not reported)
    if kind in ("ordinal", "nominal"):
        raise SchemaError(f"column {name!r}: declared {kind} but a client did not list its values")
    return _merge_continuous(name, infos, kind, fams, fam, listed=pooled)


def _value_key(v: Any) -> float | int:
    """A numeric value as the merge compares it: a float, or a whole number past 2**53
    as the exact ``int`` (as :func:`_exact_bound` keeps it)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return _exact_bound(int(v))
    return float(v)


def _listed_point_mass(
    name: str, infos: Sequence[Mapping[str, Any]], present: int
) -> float | int | None:
    """The point mass of a column that every site described by its value set (at most
    :data:`MAX_ORDINAL_LEVELS` values each, more in all), as one site holding all rows
    would find it: the most frequent value if it holds :data:`POINT_MASS_SHARE` of the
    rows, else None.

    A site that lists whole numbers sends no counts, only which values it holds (a site
    listing other numbers also sends its most frequent value's count, ``top_count``), so
    each value's pooled count is known only within bounds: at least 1 at each site that
    holds it, at most the site's rows less one for each of its other values.  Where the
    bounds decide (no value can reach the share, or one surely does and no other can
    pass it) the answer is exact; where they do not, there is no point mass and a
    :class:`DataNote` says how to get the counts (declare the column continuous: each
    site then reports its most frequent value and count, as for any continuous column).
    """
    low: dict[float | int, int] = {}
    high: dict[float | int, int] = {}
    for info in infos:
        values = {_value_key(v) for v in info["values"]}
        rows = int(info.get("n_present", 0))
        top = _value_key(info["top_value"]) if "top_value" in info else None
        top_count = int(info.get("top_count", 0))
        for v in values:
            if v == top:
                lo = hi = top_count
            else:
                lo = 1
                hi = rows - len(values) + 1
                if top is not None:  # no more than the most frequent, nor the rest's share
                    hi = min(top_count, rows - top_count - (len(values) - 2))
            low[v] = low.get(v, 0) + lo
            high[v] = high.get(v, 0) + hi
    share = POINT_MASS_SHARE * present
    if not high or max(high.values()) < share:
        return None  # no value can hold the share
    best = max(low, key=lambda v: low[v])
    if low[best] >= share and all(high[v] < low[best] for v in high if v != best):
        return best
    could = sorted((v for v in high if high[v] >= share), key=lambda v: -high[v])
    shown = ", ".join(
        f"{int(v) if float(v).is_integer() else v!r} (up to {high[v]} rows)" for v in could[:3]
    )
    warnings.warn(
        f"column {name!r} holds more than {MAX_ORDINAL_LEVELS} distinct values over all "
        f"sites ({len(high)}), so it is modelled as continuous, as one site holding all "
        f"rows would have it; whether one value holds {POINT_MASS_SHARE:.0%} of its "
        f"{present} rows (a point mass, drawn exactly) cannot be told from the value sets "
        f"the sites sent (no counts): {shown}. It is modelled without one. To have it "
        f"checked, declare the column continuous (--kind {shlex.quote(f'{name}=continuous')}"
        f"; Python: kinds={{{name!r}: 'continuous'}}): each site then reports its most "
        "frequent value and its count, as for any continuous column",
        DataNote,
        stacklevel=5,
    )
    return None


def _check_booleans(name: str, infos: Sequence[Mapping[str, Any]], clients: Sequence[str]) -> None:
    """Refuse a column of true/false values at some clients and of other values (0 and
    1, text) at others: no dtype holds both without changing values (``pd.concat``
    gives ``object``; fits would model ``True`` and ``"True"``, or ``True`` and ``1``,
    as different values).  A client's ``object`` column of ``True`` / ``False`` values
    only is true/false values too."""

    def boolean(i: Mapping[str, Any]) -> bool:
        if i["dtype"] == "bool":
            return True
        values = [v for v in i.get("values", [None]) if v is not None]
        return i["dtype"] == "object" and bool(values) and all(isinstance(v, bool) for v in values)

    kinds = [boolean(i) for i in infos]
    if not any(i["dtype"] == "bool" for i in infos) or all(kinds):
        return
    at = ", ".join(c for c, b in zip(clients, kinds, strict=True) if b)
    others = [(i, c) for i, c, b in zip(infos, clients, kinds, strict=True) if not b]
    numbers = all(i["dtype"] in ("int", "float") for i, _ in others)
    what = "numbers" if numbers else "other values"
    each = ", ".join(f"{c}: {i.get('pandas_dtype', i['dtype'])}" for i, c in others)
    raise SchemaError(
        f"column {name!r} holds true/false values at {at} and {what} at "
        f"{', '.join(c for _, c in others)} ({each}); no type holds both without changing "
        "values: make its type the same everywhere, for example "
        + (
            f"df[{name!r}].astype(bool) where it holds 0 and 1"
            if numbers
            else f"df[{name!r}].map({_truth_map([i for i, _ in others])}) where it holds text"
        )
        + " (fits synthesize and fits federate read true/false text in a CSV as booleans)"
    )


#: Words for true and for false, as :func:`_truth_map` recognizes them (lower case).
_TRUTH_WORDS = {
    **dict.fromkeys(("true", "t", "yes", "y", "1"), True),
    **dict.fromkeys(("false", "f", "no", "n", "0"), False),
}


def _truth_map(infos: Sequence[Mapping[str, Any]]) -> str:
    """The ``map`` argument that turns the text labels of ``infos`` (the sites that hold
    text where others hold true/false values) into booleans, as Python source: their own
    labels where every one is a word for true or false ("True", "no"), else the example
    ``{'yes': True, 'no': False}``."""
    labels = sorted(
        {str(v) for i in infos for v in i.get("values", []) if v is not None},
        key=lambda v: (not _TRUTH_WORDS.get(v.strip().lower(), False), v),
    )
    if not labels or any(v.strip().lower() not in _TRUTH_WORDS for v in labels):
        return "{'yes': True, 'no': False}"
    pairs = ", ".join(f"{v!r}: {_TRUTH_WORDS[v.strip().lower()]}" for v in labels)
    return "{" + pairs + "}"


def _check_flags_and_numbers(
    name: str, infos: Sequence[Mapping[str, Any]], clients: Sequence[str]
) -> None:
    """Refuse a column whose labels hold a true/false value at one client and a number
    Python counts as the same (``True`` and ``1``) at another: the merged categories
    would hold one of them, and the other would come back as it (a client's own
    column of both is refused in :func:`describe_table`)."""
    flags: dict[bool, tuple[Any, str]] = {}
    numbers: dict[bool, tuple[Any, str]] = {}
    for info, client in zip(infos, clients, strict=True):
        if info["dtype"] != "object":
            continue
        for v in info.get("values", []):
            if isinstance(v, bool):
                flags.setdefault(v, (v, client))
            elif isinstance(v, (int, float)) and v in (0, 1):
                numbers.setdefault(v == 1, (v, client))
    for truth, (flag, at) in flags.items():
        if truth in numbers:
            number, where = numbers[truth]
            raise SchemaError(
                f"column {name!r} holds {flag!r} at {at} and {number!r} at {where}, which "
                "Python counts as one value, so fits would merge them (one coming back "
                "where the other was); make the column one type at every site, e.g. "
                f"df[{name!r}].astype(str) to keep them apart"
            )


def _merge_datetime(
    name: str, infos: Sequence[Mapping[str, Any]], fams: Sequence[str], clients: Sequence[str]
) -> ColumnSpec:
    if set(fams) != {"datetime"}:
        each = "; ".join(f"{c}: {f}" for c, f in zip(clients, fams, strict=True))
        raise SchemaError(
            f"column {name!r} holds datetimes at some clients and not at others ({each}); "
            "make its type the same everywhere"
        )
    tzs = {i.get("tz") for i in infos}
    each = "; ".join(
        f"{c}: {i.get('tz') or 'none (local times)'}" for c, i in zip(clients, infos, strict=True)
    )
    if len(tzs) > 1 and None in tzs:
        raise SchemaError(
            f"column {name!r} has a time zone at some clients and none at others ({each}); "
            "write its values with a time zone or UTC offset at every site (e.g. all in "
            "UTC: a trailing Z or +00:00), or with none at any"
        )
    date_only = all(i.get("date_only") for i in infos)
    resolution = _finest_resolution(infos)
    if len(tzs) > 1:  # instants all (seconds since 1970 UTC): one clock for the output, UTC
        # each site judged its precision on its own clock; UTC offsets are whole minutes,
        # so a local date or whole hour need not be one in UTC (+05:30)
        if date_only or resolution == "h":
            date_only, resolution = False, "min"
        warnings.warn(
            f"column {name!r} has different time zones at different clients ({each}); its "
            "values are taken as the instants they are, on one clock, UTC (a synthetic "
            "table writes them in UTC)",
            DataNote,
            stacklevel=4,
        )
    return ColumnSpec(
        name,
        "continuous",
        "datetime",
        lower=min(float(i["min"]) for i in infos),
        upper=max(float(i["max"]) for i in infos),
        tz="UTC" if len(tzs) > 1 else tzs.pop(),
        date_only=date_only,
        resolution=resolution,
    )


def _finest_resolution(infos: Sequence[Mapping[str, Any]]) -> str | None:
    """The finest of the clients' time resolutions (None if one client's is finer than
    :data:`RESOLUTIONS`, or not reported); None as well where every value is a whole day
    (:attr:`ColumnSpec.date_only` rounds those)."""
    units = [str(i.get("resolution")) for i in infos]
    if all(i.get("date_only") for i in infos) or any(u not in RESOLUTIONS for u in units):
        return None
    return max(units, key=list(RESOLUTIONS).index)


def _most_decimals(infos: Sequence[Mapping[str, Any]]) -> int | None:
    """The most decimals any client's values have (None if one client's values have
    more than :data:`MAX_DECIMALS`, or a client did not say)."""
    ds: list[Any] = [i.get("decimals") for i in infos]
    if any(d is None for d in ds):
        return None
    return int(max(ds))


def _merge_ordered(
    name: str, infos: Sequence[Mapping[str, Any]], clients: Sequence[str], kind: str | None
) -> ColumnSpec:
    """An ordered categorical: every client must hold it as one and order the
    categories alike (a column ordered at some clients, a Parquet file's, and text at
    others, a CSV file's, has no order at the latter: an error naming both)."""
    ordered = [c for c, i in zip(clients, infos, strict=True) if i.get("ordered")]
    if len(ordered) < len(clients):
        first = next(i for i in infos if i.get("ordered"))
        other = [c for c, i in zip(clients, infos, strict=True) if not i.get("ordered")]
        order = " < ".join(repr(c) for c in first.get("categories", []))
        raise SchemaError(
            f"column {name!r} is an ordered categorical ({order}) at {ordered} but not at "
            f"{other}, where its order is not known; write it alike at every site: as an "
            "ordered categorical in a Parquet file, or as numbers (e.g. 0, 1, 2 in that "
            "order)"
        )
    lists = [list(i.get("categories", [])) for i in infos]
    cats = _merged_order(name, lists, clients)
    used = {v for i in infos for v in i["present"]}
    cats = [c for c in cats if c in used] or cats
    return ColumnSpec(name, kind or "ordinal", "category", cats)


def _merged_order(name: str, lists: Sequence[list[Any]], clients: Sequence[str]) -> list[Any]:
    """The one order of the categories every site's ordered categorical agrees with (a
    site whose dtype lacks some categories, ``['low', 'high']`` next to ``['low',
    'medium', 'high']``, fits in the longer order).

    Raises
    ------
    SchemaError
        Two sites order two categories oppositely, or the sites' orders leave where a
        category goes open (``['a', 'c']`` and ``['b', 'c']``); the message shows the
        orders and how to write one.
    """

    def shown(order: Sequence[Any]) -> str:
        return " < ".join(repr(c) for c in order)

    for (first, one), (client, order) in itertools.combinations(
        zip(clients, lists, strict=True), 2
    ):
        rank = {c: k for k, c in enumerate(one)}
        common = [c for c in order if c in rank]
        if common != sorted(common, key=rank.__getitem__):
            every = list(dict.fromkeys(v for lst in lists for v in lst))
            raise SchemaError(
                f"column {name!r}: {client} orders its categories differently from "
                f"{first} ({shown(order)} at {client}, {shown(one)} at {first}); give it "
                "the same categories in the same order at every site, e.g. "
                f"df[{name!r}] = df[{name!r}].cat.set_categories({every!r}, ordered=True) "
                "in the order you mean (a category a site does not hold may stay in its list)"
            )
    after: dict[Any, dict[Any, None]] = {c: {} for order in lists for c in order}
    for order in lists:
        for a, b in itertools.pairwise(order):
            after[a][b] = None
    before = {c: sum(c in later for later in after.values()) for c in after}
    merged: list[Any] = []
    ready = [c for c in after if before[c] == 0]
    while ready:
        if len(ready) > 1:
            raise SchemaError(
                f"column {name!r}: the sites' ordered categories ("
                + "; ".join(f"{shown(o)} at {c}" for o, c in zip(lists, clients, strict=True))
                + f") do not say whether {ready[0]!r} or {ready[1]!r} comes first; give every "
                f"site all the categories in order (e.g. df[{name!r}].cat.set_categories"
                "([...], ordered=True))"
            )
        c = ready.pop()
        merged.append(c)
        for b in after[c]:
            before[b] -= 1
            if before[b] == 0:
                ready.append(b)
    if len(merged) < len(after):  # a cycle through three sites or more
        raise SchemaError(
            f"column {name!r}: no one order of its categories agrees with every site's ("
            + "; ".join(f"{shown(o)} at {c}" for o, c in zip(lists, clients, strict=True))
            + f"); write them in one order at every site (e.g. df[{name!r}].cat."
            "reorder_categories([...], ordered=True))"
        )
    return merged


def _merge_discrete(
    name: str, infos: Sequence[Mapping[str, Any]], kind: str | None, fam: str, numeric: bool
) -> ColumnSpec:
    """A discrete column: the union of the clients' values (numbers: ordinal by default)."""
    values = _sort_labels(list({plain(v) for i in infos for v in i["values"]}))
    spec = ColumnSpec(name, kind or ("ordinal" if numeric else "nominal"), fam, values)
    if spec.n_levels > MANY_LEVELS_WARNING:
        warnings.warn(
            f"column {name!r} has {spec.n_levels} levels; it looks like an identifier. "
            "Drop it (an identifier has no distribution to learn), group rare levels, "
            + (
                f"or declare it continuous with kinds={{'{name}': 'continuous'}}"
                if numeric
                else "or map it to fewer labels before fitting"
            ),
            stacklevel=4,
        )
    elif kind is None and not numeric and spec.n_levels > MAX_ORDINAL_LEVELS:
        rows = sum(int(i.get("n_present", 0)) for i in infos)
        if rows < REPEATED_ID_ROWS * spec.n_levels:
            warnings.warn(
                f"column {name!r} has {spec.n_levels} distinct values in {rows} rows (each in "
                f"{rows / spec.n_levels:.1f} rows on average): it may be an identifier that "
                "repeats over rows (one person's visits, say), whose values a synthetic "
                "table copies verbatim. Drop it (fits synthesize and fits federate: --drop "
                f"{shlex.quote(name)}) or declare it an identifier (--kind "
                f"{shlex.quote(name + '=id')}; Python: kinds={{{name!r}: 'id'}}) to get "
                f"surrogate values instead; declare it nominal (--kind "
                f"{shlex.quote(name + '=nominal')}) to keep its values and silence this.",
                stacklevel=4,
            )
    if not numeric:
        _note_lookalike_labels(name, values)
        blank = [v for v in values if isinstance(v, str) and not v.strip()]
        if blank:  # from a Parquet file or a DataFrame: a CSV reads them as missing
            warnings.warn(
                f"column {name!r} has label(s) empty or only spaces "
                f"({', '.join(map(repr, blank))}): fits draws them as values, but a CSV "
                "output writes them as fields that read back as missing values (fits and "
                "pandas read an "
                "empty or white field so); write a Parquet output to keep them, or "
                "replace them with a visible label at every site",
                DataNote,
                stacklevel=4,
            )
    return spec


def _note_lookalike_labels(name: str, values: Sequence[Any]) -> None:
    """A :class:`DataNote` for a column's text labels that differ only in case, surrounding
    spaces or Unicode normalization (``'Yes'``, ``'yes'``, ``' yes'``): fits keeps them
    apart, as written (they are different values, and a synthetic table has each in its
    own share), and says so once, naming at most three such groups. The labels are the
    ones the sites' descriptions list already."""
    groups: dict[str, list[str]] = {}
    for v in values:
        if isinstance(v, str):
            key = unicodedata.normalize("NFC", v).strip().casefold()
            groups.setdefault(key, []).append(v)
    alike = [g for g in groups.values() if len(g) > 1]
    if not alike:
        return
    shown = "; ".join(
        ", ".join(repr(v) for v in g[:4]) + (", ..." if len(g) > 4 else "") for g in alike[:3]
    )
    more = f"; and {len(alike) - 3} more such group(s)" if len(alike) > 3 else ""
    warnings.warn(
        f"column {name!r} has labels that differ only in case, surrounding spaces or "
        "Unicode normalization (an accent as one character or as two) "
        f"({shown}{more}): fits keeps them apart, as written; if they are one value, make "
        f"them one at every site, e.g. df[{name!r}].str.strip().str.lower()",
        DataNote,
        stacklevel=5,
    )


def check_spans(schema: Schema) -> None:
    """Refuse a continuous column spanning (max - min) less than :data:`MIN_SPAN` or
    more than :data:`MAX_SPAN`, which synthesis would draw as one value in every row,
    naming the column and the power of ten that rescales it. (The fit's check, not
    :meth:`Schema.detect`'s: an evaluation models no such column.)

    Raises
    ------
    SchemaError
    """
    for spec in schema.columns:
        if spec.kind != "continuous" or spec.dtype == "datetime" or spec.lower is None:
            continue
        upper = spec.upper if spec.upper is not None else spec.lower
        name, lo, hi = spec.name, float(spec.lower), float(upper)
        if 0 < hi - lo and not (MIN_SPAN <= hi - lo <= MAX_SPAN):  # inf past 1.8e308
            span = f"{hi - lo:.3g}" if math.isfinite(hi - lo) else "more than float64 holds"
            raise SchemaError(
                f"column {name!r} spans {span} (from {lo:.6g} to {hi:.6g}): fits "
                f"models a continuous column spanning {MIN_SPAN:g} to {MAX_SPAN:g} (its "
                "estimates lose every digit beyond: the synthetic values would all be one); "
                f"rescale it by a power of ten at every site, e.g. df[{name!r}] * "
                f"1e{min(max(-round(math.log10(max(abs(lo), abs(hi)))), -300), 300):+d}, "
                "and the synthetic values back"
            )


def _merge_continuous(
    name: str,
    infos: Sequence[Mapping[str, Any]],
    kind: str | None,
    fams: Sequence[str],
    fam: str,
    *,
    listed: bool = False,
) -> ColumnSpec:
    """A continuous column: the clients' bounds, and a point mass if one value dominates.
    ``listed``: every client listed its values (more than :data:`MAX_ORDINAL_LEVELS` of
    them in all), so the point mass comes from those (:func:`_listed_point_mass`)."""
    lo: float = min(float(i["min"]) for i in infos)
    hi: float = max(float(i["max"]) for i in infos)
    if fam == "float" and all(i.get("integral") for i in infos) and "int" in fams:
        fam = "int"
    if fam == "int" and any("int_min" in i for i in infos):  # whole numbers past 2**53:
        # the exact observed bounds (a float site's whole numbers are exact as they are)
        lo = _exact_bound(min(int(i.get("int_min", i["min"])) for i in infos))
        hi = _exact_bound(max(int(i.get("int_max", i["max"])) for i in infos))
        _check_whole_span(name, int(lo), int(hi))
    spec = ColumnSpec(name, "continuous", fam, None, lo, hi)
    if fam != "int":
        spec.decimals = _most_decimals(infos)
    present = sum(int(i.get("n_present", 0)) for i in infos)
    whole = fam == "int" or all(i.get("integral") for i in infos)  # float64 1.0, 2.0, ...
    if (
        kind is None
        and whole
        and (
            (present >= NUMERIC_ID_WARNING and all(i.get("all_distinct") for i in infos))
            or _row_number(infos, [""] * len(infos)) is not None  # a row number, any size
        )
    ):
        warnings.warn(
            NumericIdentifierWarning(
                f"column {name!r} holds a different whole number in every row: it looks like "
                f"{_saved_index(name, infos)}a numeric identifier. It is modelled as "
                "continuous, so its synthetic values "
                "are fresh draws between the real ones, rounded to whole numbers, and can "
                "coincide with real identifiers. Drop it (fits synthesize and fits federate: "
                f"--drop {shlex.quote(name)}) or declare it an identifier (--kind "
                f"{shlex.quote(f'{name}=id')}; Python: "
                f"kinds={{{name!r}: 'id'}}) to get surrogate values instead; declare it "
                f"continuous (kinds={{{name!r}: 'continuous'}}) to keep it and silence this.",
                name,
            ),
            stacklevel=5,
        )
    if listed:
        if present and lo < hi:
            spec.point_mass = _listed_point_mass(name, infos, present)
        return spec
    tops: dict[float | int, int] = {}
    for i in infos:
        if "top_value" in i:  # an integer column's past 2**53: the exact whole number
            top = i["top_value"]
            key = _exact_bound(int(top)) if isinstance(top, int) else float(top)
            tops[key] = tops.get(key, 0) + int(i["top_count"])
    if tops and present:
        value, count = max(tops.items(), key=lambda kv: kv[1])
        if count >= POINT_MASS_SHARE * present and lo < hi:
            spec.point_mass = value
    return spec


def _saved_index(name: str, infos: Sequence[Mapping[str, Any]]) -> str:
    """``"a table's index written by pandas ... , or "``: for a column without a name
    (``''``, or pandas' ``'Unnamed: 0'``) whose values are the row numbers at every
    site (``df.to_csv(path)`` writes the index unless ``index=False``); else ``""``."""
    unnamed = not name.strip() or re.fullmatch(r"Unnamed: \d+(_level_\d+)?", name)
    if unnamed and infos and all(i.get("sequence") for i in infos):
        return (
            "the row numbers of a table's index, which pandas writes as a first column "
            "without a name (df.to_csv(path) does unless index=False): if so, leave it "
            "out; or "
        )
    return ""


def _merge_all_missing(
    name: str, infos: Sequence[Mapping[str, Any]], kind: str | None
) -> ColumnSpec:
    """A column missing in every row at every site: kind ``"constant"`` with no value,
    written as missing in the sites' dtype (their pandas dtype where they share one)."""
    if kind not in (None, "constant"):
        warnings.warn(
            f"column {name!r} is declared {kind} but is missing in every row at every "
            "site: it is written as missing, not modelled",
            DataNote,
            stacklevel=4,
        )
    fams = {str(i["dtype"]) for i in infos}
    fam = fams.pop() if len(fams) == 1 else ("float" if fams <= {"int", "float"} else "object")
    dtypes = {i.get("pandas_dtype") for i in infos}
    spec = ColumnSpec(name, "constant", fam, missing=True)
    spec.pandas_dtype = dtypes.pop() if len(dtypes) == 1 and None not in dtypes else None
    cats = [i["dtype_categories"] for i in infos if i.get("dtype_categories") is not None]
    if cats and fam == "category":
        levels: list[Any] = []
        for c in cats:
            levels += [v for v in c if v not in levels]
        spec.dtype_categories = levels
        spec.dtype_ordered = any(i.get("dtype_ordered") for i in infos)
    return spec


def _constant_text(spec: ColumnSpec) -> str:
    """A constant column's value as a note names it (a datetime: ISO 8601)."""
    value = spec.constant_value
    if spec.dtype == "datetime" and value is not None:
        stamp = pd.Timestamp(float(value), unit="s", tz="UTC")
        if spec.tz is not None:
            stamp = stamp.tz_convert(spec.tz)
        else:
            stamp = stamp.tz_localize(None)
        return stamp.date().isoformat() if spec.date_only else stamp.isoformat()
    if isinstance(value, float) and value.is_integer() and spec.dtype == "int":
        return str(int(value))
    if spec.dtype == "float" and _is_number(value) and float(value) == value:
        return repr(float(value))  # a float column's whole number, as its values read
    return repr(plain(value))


def _constant_note(specs: Sequence[ColumnSpec], kinds: Mapping[str, str] | None = None) -> None:
    """Say (a :class:`DataNote`) which columns are written as a constant or as missing
    and not modelled, with how to leave them out instead; a column among them declared
    another kind (``kinds``: ``--kind COL=ordinal``) is said to be, and that the
    declaration is not used."""
    constants = [c for c in specs if c.kind == "constant"]
    if not constants:
        return
    parts = []
    for c in constants:
        if c.all_missing:
            part = f"{c.name!r} is missing in every row at every site (written as missing)"
        elif c.missing:
            value = _constant_text(c)
            part = (
                f"{c.name!r} holds only {value} where it is not missing (written as {value}, "
                "or as missing where its drawn missingness indicator says so)"
            )
        else:
            value = _constant_text(c)
            part = f"{c.name!r} holds {value} in every row at every site (written as {value})"
        declared = (kinds or {}).get(c.name)
        if declared not in (None, "constant"):
            part += (
                f"; it is declared {declared} (--kind {shlex.quote(f'{c.name}={declared}')}), "
                "a declaration fits does not use for a column of one value"
            )
        parts.append(part)
    drop = " ".join(f"--drop {shlex.quote(c.name)}" for c in constants)
    warnings.warn(
        "fits writes these columns in every synthetic row as their one value, in the "
        f"input's dtype, and does not model them (no site is asked about them): "
        f"{'; '.join(parts)}. To leave them out of the synthetic table instead: {drop}",
        ConstantNote,
        stacklevel=3,
    )


def _check_whole_span(name: str, lo: int, hi: int) -> None:
    """Say what float64 does to a continuous column of whole numbers past 2**53 whose
    range is narrower than 2**53 (so that the numbers less a base value would be exact):
    float64, in which fits models numbers, holds only every ``spacing``-th whole number
    there (2,048 near 2**63), so the synthetic values fall on those steps. Fewer than
    :data:`MIN_FLOAT_STEPS` steps across the range (2**63 + 0 ... 2**63 + 999 is one
    float, and every synthetic value was the smallest) are refused; more get a
    :class:`DataNote`. Both name the base value that keeps every digit."""
    top = max(abs(lo), abs(hi))
    if top <= EXACT_FLOAT_INT or hi - lo >= EXACT_FLOAT_INT:
        return
    spacing = int(np.spacing(float(top)))
    steps = (hi - lo) // spacing + 1
    shift = f"- {lo}" if lo >= 0 else f"+ {-lo}"
    fix = (
        f"if it is a quantity, subtract one base value at every site, e.g. "
        f"df[{name!r}] {shift}, and add it back to the synthetic values"
    )
    said = (
        f"column {name!r} holds whole numbers from {lo} to {hi}: past 2**53 float64, in "
        f"which fits models numbers, holds only every {spacing:,}th whole number"
    )
    if steps >= MIN_FLOAT_STEPS:
        warnings.warn(
            f"{said}, so its synthetic values fall on those steps ({steps:,} across its "
            f"range); to keep every digit, {fix}",
            DataNote,
            stacklevel=5,
        )
        return
    raise SchemaError(
        f"{said}, so its synthetic values would take about {steps:,} value(s). If it is "
        f"an identifier, declare it one (--kind {shlex.quote(name + '=id')}; Python: "
        f"kinds={{{name!r}: 'id'}}) or drop it (--drop {shlex.quote(name)}); {fix}"
    )


def _exact_bound(value: int) -> float:
    """A whole-number bound as a float where float64 holds it exactly, else as the
    Python ``int`` itself (the schema's ``lower`` / ``upper`` of an integer column past
    2**53: :func:`fits.core.continualization.whole_numbers` keeps draws within it)."""
    return float(value) if float(value) == value else value


def _how_many_values(spec: ColumnSpec, infos: Sequence[Mapping[str, Any]]) -> str:
    """How many distinct values a merged column of several takes at the sites, for a
    message, from their descriptions: "5 distinct values at the sites" where every site
    listed its values (missing not counted), else "more than 20 distinct values at the
    sites" (a site holds more than :data:`MAX_ORDINAL_LEVELS` and sends its bounds, not
    its values), with the bounds where the spec has them ("(from 0.5 to 9.25)")."""
    if infos and all("values" in i for i in infos):
        keys = {
            _value_key(v) if _is_number(v) else ("text", str(v))
            for i in infos
            for v in i["values"]
            if v is not None
        }
        return f"{len(keys)} distinct values at the sites"
    lower, upper = spec.lower, spec.upper
    if lower is None or upper is None:
        return "several values at the sites"
    if spec.dtype == "datetime":
        first, last = (pd.Timestamp(float(v), unit="s").isoformat() for v in (lower, upper))
        return f"several values at the sites (from {first} to {last})"
    shown = [f"{int(v)}" if spec.dtype == "int" else f"{float(v):.6g}" for v in (lower, upper)]
    return (
        f"more than {MAX_ORDINAL_LEVELS} distinct values at the sites "
        f"(from {shown[0]} to {shown[1]})"
    )


def _check_constant(
    spec: ColumnSpec, declared: str | None = None, infos: Sequence[Mapping[str, Any]] = ()
) -> ColumnSpec:
    """A merged column of one value at every site (one category, or ``lower`` equal to
    ``upper``) becomes kind ``"constant"``: not modelled, written as that value.  One of
    one value and missing values is not constant: a discrete one has two categories
    (the value and missing) and is modelled as such; a continuous one (a datetime of
    one value) stays ``"constant"`` with ``missing`` set, and the chain draws its
    missingness indicator (:meth:`Schema.expanded`).  ``declared``: the user's kind;
    ``"constant"`` is refused on a column of several values (:class:`DeclaredKindError`,
    saying how many from the sites' ``infos``)."""
    constant = (
        spec.n_levels == 1
        if spec.is_discrete
        else spec.lower is not None and spec.upper is not None and spec.lower == spec.upper
    )
    if constant:
        return ColumnSpec(
            spec.name,
            "constant",
            spec.dtype,
            categories=list(spec.categories or []) if spec.is_discrete else None,
            lower=None if spec.is_discrete else spec.lower,
            upper=None if spec.is_discrete else spec.upper,
            missing=spec.missing,
            tz=spec.tz,
            date_only=spec.date_only,
            resolution=spec.resolution,
            decimals=spec.decimals,
            pandas_dtype=spec.pandas_dtype,
            dtype_categories=spec.dtype_categories,
            dtype_ordered=spec.dtype_ordered,
            markers=spec.markers,
            parsed=spec.parsed,
            decimal_scale=spec.decimal_scale,
        )
    if declared == "constant":
        raise DeclaredKindError(
            f"column {spec.name!r} is declared constant but takes "
            f"{_how_many_values(spec, infos)}; fits sets kind 'constant' itself for a column "
            "of one value: leave out the declaration (--kind "
            f"{shlex.quote(f'{spec.name}=constant')}; Python: "
            f"kinds={{{spec.name!r}: 'constant'}}) to model it, or leave the column out of the "
            f"synthetic table (--drop {shlex.quote(spec.name)})",
            spec.name,
            "constant",
        )
    if spec.kind == "continuous" and not (
        math.isfinite(spec.lower or 0.0) and math.isfinite(spec.upper or 0.0)
    ):
        raise SchemaError(f"column {spec.name!r} has non-finite bounds")
    return spec
