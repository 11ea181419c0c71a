"""Options several ``fits`` commands share."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fits.core.kernel_settings import parse_column_penalties, parse_relevance
from fits.core.names import (
    ColumnNameError,
    format_column_list,
    match_columns,
    match_keys,
    parse_column_list,
    show_columns,
)
from fits.core.names import column_items as _column_items

if TYPE_CHECKING:
    from fits.federation.policy import SitePolicy

__all__ = [
    "site_names",
    "ColumnNameError",
    "ColumnDesignOpt",
    "ColumnPenaltyOpt",
    "OrdinalPenaltyOpt",
    "NominalPenaltyOpt",
    "check_nominal_penalty",
    "penalized_kernel",
    "DesignChoice",
    "DesignOpt",
    "Secure",
    "SmoothingOpt",
    "check_smoothing",
    "parse_column_designs",
    "parse_column_models",
    "parse_boosting",
    "parse_kind",
    "repeated_site_files",
    "column_list",
    "OrderOpt",
    "parse_order",
    "BoostingOpt",
    "ColumnModelOpt",
    "match_columns",
    "match_keys",
    "parse_column_penalties",
    "RelevanceOpt",
    "RelevanceBudgetOpt",
    "TuneRelevanceOpt",
    "tune_relevance_value",
    "parse_relevance",
    "match_relevance",
    "pooled_without_secure",
    "read_site_policy",
    "show_columns",
    "MAX_TRIES",
    "check_max_tries",
    "NaValuesOpt",
    "parse_na_values",
    "output_file",
]

Secure = Annotated[
    bool,
    typer.Option(
        "--secure-aggregation",
        help="Sites mask their uploads so that the coordinator learns only the sums "
        "(needed by a site policy with floor_scope 'pooled').",
    ),
]


NaValuesOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--na-values",
        metavar="TEXT",
        help="A text that means a missing value in the input tables, read as missing in "
        "every column (e.g. NA, -999, or . as SAS writes it; a number also matches the "
        "fields equal to it: -999.0); COLUMN=TEXT for one column only; repeat for "
        "several. The synthetic table writes missing values as empty fields.",
        show_default=False,
    ),
]


def output_file(option: str) -> Any:
    """The ``parser`` of an option that names an output file (``--out``, ``--json``,
    ``--audit``): the path as given, or a usage error (exit 2) for one written as a
    folder, ending with a slash (``--out o.csv/``: :class:`~pathlib.Path` drops the slash,
    which wrote a file named ``o.csv``; :func:`fits.io.output_path`)."""
    from fits.io import OutputError, output_path

    def parse(text: str) -> Path:
        try:
            output_path(text, option)
        except OutputError as exc:
            raise typer.BadParameter(str(exc).removeprefix(f"{option} ")) from None
        return Path(text)

    return parse


def parse_na_values(items: Sequence[str] | None) -> list[str | tuple[str, str]] | None:
    """``--na-values`` items as :func:`fits.io.read_table`'s ``na_values`` (None: none
    given); a usage error (exit 2) for an item of no text."""
    if not items:
        return None
    from fits.io import na_value_items

    try:
        return na_value_items(items)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--na-values") from None


SmoothingOpt = Annotated[
    str,
    typer.Option(
        "--smoothing",
        help="fixed: every column uses the sites' kernels as they are; auto: each "
        "column's penalty sharpness and neighbourhood reach are chosen by a held-out "
        "score the sites compute on their own rows (only per-candidate sums leave a site).",
    ),
]


def check_smoothing(smoothing: str) -> str | None:
    """The usage error of a ``--smoothing`` other than fixed or auto, or None."""
    if smoothing in ("fixed", "auto"):
        return None
    return f"--smoothing {smoothing!r}: use fixed or auto"


def pooled_without_secure(policy: SitePolicy | None, secure: bool) -> str | None:
    """The usage error of a pooled-floor site policy without secure aggregation, or None."""
    if secure or policy is None or not policy.pools_floor:
        return None
    return (
        "--policy: floor_scope 'pooled' holds the effective-rows floor for the sum over "
        "the sites, which the sites answer only under secure aggregation; add "
        "--secure-aggregation, or set floor_scope to 'site'"
    )


#: ``--max-tries``'s default, fits synthesize's (``cli.main.MAX_TRIES``) and ``fits
#: federate``'s: :data:`fits.synthesizer.DEFAULT_MAX_TRIES` (not imported here: the
#: command starts before the engine loads; a test holds the three equal).
MAX_TRIES = 100


def check_max_tries(max_tries: int | None, known: Path | None) -> str | None:
    """The usage error of ``--max-tries`` without ``--known`` (fits synthesize's), or None."""
    if max_tries is not None and known is None:
        return "--max-tries is for --known (the draws that match its values); leave it out"
    return None


#: The fix a ``--policy`` file that cannot be read is given (:func:`read_site_policy`).
POLICY_FIX = (
    "fix the file (its fields and their values: docs/privacy.md), or leave --policy out "
    "for the default policy"
)


def read_site_policy(path: Path | None) -> SitePolicy | None:
    """The site policy of a ``--policy`` file (None: no file, the default policy), as
    ``fits federate site``, ``fits federate local`` and ``fits benchmark`` read it.

    Raises
    ------
    ValueError
        A usage error (exit 2) naming ``--policy``, the file, what is wrong (a missing
        file or a folder, not JSON, an unknown or repeated field, a bad value: the
        message of :meth:`~fits.federation.policy.SitePolicy.from_json`) and the fix.
    """
    if path is None:
        return None
    from fits.federation.policy import SitePolicy

    if path.is_dir():
        raise ValueError(
            f"--policy {str(path)!r} is a directory, not a file; give the site policy "
            "JSON file (docs/privacy.md)"
        )
    if not path.is_file():
        raise ValueError(
            f"--policy {str(path)!r}: no such file; give the path of a site policy JSON "
            "file (docs/privacy.md), or leave --policy out for the default policy"
        )
    try:
        return SitePolicy.from_json(path)
    except ValueError as exc:
        raise ValueError(f"--policy {exc}; {POLICY_FIX}") from None


def repeated_site_files(site_files: Sequence[Path]) -> str | None:
    """The usage error of site tables given twice (the same file, a link to it, or the
    same bytes: its rows would count twice), or None."""
    from fits.io import find_duplicate_files

    twice = find_duplicate_files(list(site_files))
    if twice is None:
        return None
    first, second = twice
    return (
        f"site tables {str(first)!r} and {str(second)!r} are the same file (or hold the "
        "same bytes); give each site's table once"
    )


def parse_kind(item: str) -> tuple[str, str]:
    """One ``--kind`` item, ``COLUMN=KIND`` or ``COLUMN:KIND`` (split at the last ``=``
    or ``:``, so a column name may hold either), as (column, kind).

    The column may be empty: ``=id`` names the column whose header field is empty (a
    row index pandas saved), as the identifier warnings spell it; a table with no such
    column refuses it as it refuses any unknown column.

    Raises
    ------
    ValueError
        No separator, or a kind that is not one of the schema's kinds.
    """
    from fits.core.schema import KINDS

    cut = max(item.rfind("="), item.rfind(":"))
    name, value = item[: max(cut, 0)], item[cut + 1 :].strip()
    if cut < 0 or value not in KINDS:
        raise ValueError(
            f"expected COLUMN=KIND (or COLUMN:KIND) with KIND one of {', '.join(KINDS)}, "
            f"got {item!r}"
        )
    return name, value


def parse_kinds(items: Sequence[str] | None) -> dict[str, str]:
    """``--kind`` items (:func:`parse_kind`) as a mapping column -> kind.

    Raises
    ------
    ValueError
        A malformed item, or a column given two different kinds.
    """
    kinds: dict[str, str] = {}
    for item in items or []:
        name, value = parse_kind(item)
        if name in kinds and kinds[name] != value:
            raise ValueError(f"column {name!r} is given two kinds ({kinds[name]}, {value})")
        kinds[name] = value
    return kinds


OrderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--order",
        help="Chain order: col1,col2,... naming every column once (default: file order); "
        'a header that holds a comma in a JSON array: \'["x", "y, z"]\'. Repeat it to '
        "go on with the list.",
        show_default=False,
    ),
]


def column_list(
    values: Sequence[str] | None, option: str, columns: Sequence[str] | None = None
) -> list[str] | None:
    """The names of a list option given once or more (``--order``, ``--features``): each
    use a comma-separated list, or a JSON array of names for a header that holds a comma
    (``--order '["x", "y, z"]'``; :func:`fits.core.names.parse_column_list`, the run
    config's form), the uses in order; None when not given.  With ``columns`` (the
    tables' headers), a use that starts with ``[`` but is no JSON array is read as
    comma-separated names when each is a column (``--order '[br],y'``).

    Raises
    ------
    typer.BadParameter
        A use that names no column (``''``, ``','``), or that starts with ``[`` and is
        no JSON array of strings (a usage error, exit 2).
    """
    if values is None:
        return None
    names: list[str] = []
    for text in values:
        try:
            got = parse_column_list(text, option, columns)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=option) from None
        if not got:
            raise typer.BadParameter(
                f"give column names separated by commas, got {text!r}", param_hint=option
            )
        names += got
    return names


def parse_order(
    values: Sequence[str], columns: Sequence[str], option: str = "--order"
) -> list[str]:
    """``--order`` (:func:`column_list`: ``col1,col2,...``, given once or more) as the
    headers it names (:func:`match_columns`).

    Raises
    ------
    typer.BadParameter
        As :func:`column_list`.
    ColumnNameError
        As :func:`match_columns`; when a header holds a comma, the message gives the
        order as a JSON array, which can name it.  Also an order that misses a column or
        names one twice (a usage error, exit 2, rather than the schema's check of the
        same, a data error).
    """
    names = column_list(values, option, columns) or []
    try:
        chain = match_columns(names, columns, option)
    except ColumnNameError as exc:
        commas = [c for c in columns if "," in c]
        if not commas:
            raise
        end = "" if str(exc).endswith("?") else "."  # after "did you mean 'y, z'?"
        raise ColumnNameError(
            f"{exc}{end} A comma separates the names, so name column(s) {show_columns(commas)} "
            f"in a JSON array: {option} {shlex.quote(format_column_list(columns))} (in "
            "the order you want)"
        ) from None
    twice = [c for c in dict.fromkeys(chain) if chain.count(c) > 1]
    missing = [c for c in columns if c not in chain]
    if twice or missing:
        raise ColumnNameError(
            f"{option} must name every column exactly once"
            + (f"; named more than once: {show_columns(twice)}" if twice else "")
            + (f"; missing: {show_columns(missing)}" if missing else "")
            + f" (columns: {show_columns(columns)})"
        )
    return chain


class DesignChoice(StrEnum):
    """Local-linear designs (``FITSSynthesizer(design=...)``)."""

    all = "all"
    ordered = "ordered"
    continuous = "continuous"
    constant = "constant"


DesignOpt = Annotated[
    DesignChoice | None,
    typer.Option(
        "--design",
        help="Covariates of the local-linear fit: all (the paper's), ordered (continuous "
        "and ordinal), continuous, or constant (none: the local-constant fit); the others "
        "only weigh the rows (local-constant in them; far fewer uploaded bytes on tables "
        "with many discrete columns). Default: the synthesizer's (docs/method.md, 'The "
        "local-linear design').",
        show_default=False,
    ),
]


ColumnDesignOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--column-design",
        help="COLUMN=DESIGN: the design of one column's conditional CDF, overriding "
        "--design for it (e.g. --column-design cnt=constant); repeat for more columns.",
        show_default=False,
    ),
]


ColumnModelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--column-model",
        help="COLUMN=MODEL: how one column's conditional is estimated: kernel (the "
        "default, the paper's) or boosting (a federated gradient-boosted tree model of "
        "the column given the columns before it; e.g. --column-model income=boosting); "
        "COLUMN '*' (quoted) stands for every column after the chain's first. Not the "
        "paper's method: see docs/method.md, 'Boosted columns'.",
        show_default=False,
    ),
]


BoostingOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--boosting",
        help="SETTING=VALUE for the boosted columns (--column-model): n_trees, depth, "
        "learning_rate, l2, min_leaf_rows, bins, classes, and early stopping's "
        "validation_fraction (0: off), n_iter_no_change, tol; e.g. --boosting n_trees=50. "
        "COLUMN:SETTING=VALUE sets it for one column only (e.g. --boosting "
        "income:learning_rate=0.1). Each tree costs depth message rounds; boosted "
        "columns share them.",
        show_default=False,
    ),
]


def parse_boosting(
    items: list[str] | None, column_models: dict[str, str] | None = None
) -> dict[str, Any]:
    """``[COLUMN:]SETTING=VALUE`` items of ``--boosting`` as a mapping, checked by
    :func:`~fits.core.boosting.resolve_settings`: a setting for every boosted column,
    or, after ``COLUMN:``, for that column alone (as a mapping under its name).

    With ``column_models`` (:func:`parse_column_models`), a column's own settings must
    be for a column it boosts (unless it boosts ``'*'``: the chain decides, at setup).

    Raises
    ------
    ValueError
        An item without ``=``, an unknown setting, a value that is not a number or out
        of range, a setting named twice, or settings of a column that is not boosted
        (the message says which).
    """
    import dataclasses

    from fits.core.boosting import (
        INTEGER_SETTINGS,
        TEXT_SETTINGS,
        BoostingParams,
        resolve_settings,
    )

    fields = [f.name for f in dataclasses.fields(BoostingParams)]
    out: dict[str, Any] = {}
    example = "[COLUMN:]SETTING=VALUE, e.g. n_trees=50 or income:learning_rate=0.1"
    for item, key, text in _column_items(items, "--boosting", example):
        column, _, name = key.rpartition(":")
        name = name.strip()
        if name not in fields:
            raise ValueError(f"--boosting {item!r}: the settings are {', '.join(fields)}")
        integer = name in INTEGER_SETTINGS
        value: int | float | str
        if name in TEXT_SETTINGS:
            value = text.strip()
            if value not in TEXT_SETTINGS[name]:
                choices = " or ".join(TEXT_SETTINGS[name])
                raise ValueError(f"--boosting {item!r}: {name} must be {choices}")
        else:
            try:
                value = int(text) if integer else float(text)
            except ValueError:
                kind = "an integer" if integer else "a number"
                raise ValueError(f"--boosting {item!r}: {name} must be {kind}") from None
        column = column.strip()
        slot = column or name
        if slot in out and isinstance(out[slot], dict) != bool(column):
            raise ValueError(
                f"--boosting {item!r}: {slot!r} is both a column and a setting here; "
                "rename the column"
            )
        if column:
            out.setdefault(column, {})[name] = value
        else:
            out[name] = value
    try:
        resolve_settings(out)
    except ValueError as exc:
        raise ValueError(f"--boosting: {exc}") from None
    if column_models is not None and column_models.get("*") != "boosting":
        boosted = {c for c, m in column_models.items() if m == "boosting"}
        stray = [c for c, v in out.items() if isinstance(v, dict) and c not in boosted]
        if stray:
            raise ValueError(
                f"--boosting: settings of their own for {stray}, which are not boosted "
                "columns; add --column-model COL=boosting, or drop their settings"
            )
    return out


def parse_column_models(items: list[str] | None) -> dict[str, str]:
    """``COLUMN=MODEL`` items of ``--column-model`` as a mapping.

    Raises
    ------
    ValueError
        An item without ``=``, with an empty column, a model other than kernel or
        boosting, or a column named twice (the message says which).
    """
    from fits.federation.coordinator import COLUMN_MODELS

    models: dict[str, str] = {}
    for item, column, model in _column_items(
        items, "--column-model", "COLUMN=MODEL, e.g. income=boosting"
    ):
        if model.lower() not in COLUMN_MODELS:
            raise ValueError(
                f"--column-model {item!r}: the model must be one of {', '.join(COLUMN_MODELS)}"
            )
        models[column] = model.lower()
    return models


def parse_column_designs(items: list[str] | None) -> dict[str, str]:
    """``COLUMN=DESIGN`` items of ``--column-design`` as a mapping.

    Raises
    ------
    ValueError
        An item without ``=``, with an empty column, a design not in
        :class:`DesignChoice`, or a column named twice (the message says which).
    """
    designs: dict[str, str] = {}
    choices = ", ".join(c.value for c in DesignChoice)
    for item, column, design in _column_items(
        items, "--column-design", "COLUMN=DESIGN, e.g. cnt=constant"
    ):
        if design.lower() not in {c.value for c in DesignChoice}:
            raise ValueError(f"--column-design {item!r}: the design must be one of {choices}")
        designs[column] = design.lower()
    return designs


ColumnPenaltyOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--column-penalty",
        help="COLUMN=VALUE: one covariate's category penalty of eq. 26, overriding the "
        "global one: lambda_q >= 0 for an ordinal column (e.g. --column-penalty hr=3), "
        "gamma_q in (0, 1] for a nominal one; repeat for more columns.",
        show_default=False,
    ),
]


RelevanceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--relevance",
        help="RESPONSE:COVARIATE=WEIGHT: in the kernel of RESPONSE's conditional, "
        "COVARIATE's distance and category penalty count WEIGHT times (0 leaves it out of "
        "the weights, 1 is the paper's kernel), e.g. --relevance cnt:hr=4 --relevance "
        "cnt:season=0; repeat for more. Not in the paper (docs/method.md).",
        show_default=False,
    ),
]


TuneRelevanceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tune-relevance",
        help="COLUMN: learn relevance weights per covariate for COLUMN's kernel from "
        "held-out scores the sites compute on their own rows (only per-candidate sums "
        "leave a site); repeat for more, '*' for every column the kernels draw. Not in "
        "the paper (docs/method.md).",
        show_default=False,
    ),
]

RelevanceBudgetOpt = Annotated[
    int | None,
    typer.Option(
        "--relevance-budget",
        min=1,
        help="Candidates scored per column by --tune-relevance (at least 5, fewer for a "
        "column of 1-2 covariates; more covariates than the budget less 2 are probed in "
        "groups; the sites' tuning_candidates must allow it, with --smoothing auto's). "
        "Default: what the default site policy leaves, 16, or 10 after --smoothing auto.",
        show_default=False,
    ),
]


def tune_relevance_value(columns: list[str] | None) -> str | list[str] | None:
    """``--tune-relevance`` as ``FITSSynthesizer(tune_relevance=)`` takes it."""
    if not columns:
        return None
    return "*" if "*" in columns else list(columns)


OrdinalPenaltyOpt = Annotated[
    float | None,
    typer.Option(
        "--ordinal-penalty",
        min=0.0,
        help="lambda_q of every site's kernel (eq. 26): a row whose ordinal category is "
        "g ranks from the query's weighs exp(-lambda_q g). Default: the kernel's (1).",
    ),
]


NominalPenaltyOpt = Annotated[
    float | None,
    typer.Option(
        "--nominal-penalty",
        min=0.0,
        max=1.0,
        help="gamma_q of every site's kernel (eq. 26), in (0, 1]: a row whose nominal "
        "category differs from the query's weighs gamma_q (1: the category does not "
        "count). Default: the kernel's (0.1).",
    ),
]


def check_nominal_penalty(value: float | None) -> str | None:
    """The usage error of a ``--nominal-penalty`` outside (0, 1], or None (the option's
    range, 0 to 1, is checked by typer; 0 is not gamma_q)."""
    if value is None or 0 < value <= 1:
        return None
    return (
        f"--nominal-penalty {value:g}: gamma_q must lie in (0, 1] (0 would leave rows of "
        "another category out of the weights; a small value such as 0.01 nearly does)"
    )


def penalized_kernel(
    kernel: str,
    ordinal: float | None,
    columns: Mapping[str, float],
    relevance: Mapping[str, Mapping[str, float]] | None = None,
    nominal: float | None = None,
) -> Any:
    """The kernel ``kernel`` ("knn" or "gaussian") names, with ``--ordinal-penalty``,
    ``--nominal-penalty``, ``--column-penalty`` and ``--relevance`` applied (a
    :class:`~fits.core.kernels.Kernel`), or the name itself when none is given."""
    if ordinal is None and nominal is None and not columns and not relevance:
        return kernel
    from fits.core.kernels import GaussianKernel, KNNKernel

    lam = 1.0 if ordinal is None else float(ordinal)  # the kernels' default lambda_q
    gamma = 0.1 if nominal is None else float(nominal)  # and gamma_q
    scheme = KNNKernel if kernel == "knn" else GaussianKernel
    return scheme(
        ordinal_penalty=lam,
        nominal_penalty=gamma,
        column_penalties=dict(columns),
        relevance={r: dict(w) for r, w in (relevance or {}).items()},
    )


def match_relevance(
    relevance: Mapping[str, Mapping[str, float]], columns: Sequence[str]
) -> dict[str, dict[str, float]]:
    """``--relevance``'s names resolved to the tables' headers (:func:`match_keys`: a
    header with surrounding spaces may be named without them), responses and covariates.

    Raises
    ------
    ColumnNameError
        A name no header matches, or two names that stand for one header.
    """
    out = match_keys(dict(relevance), columns, "--relevance")
    return {r: match_keys(dict(w), columns, "--relevance") for r, w in out.items()}


def site_names(paths: list[Path]) -> list[str]:
    """Each site table's name in messages and the result: its file name without the
    extension, or, where two files share it, as many of its last folders as tell them
    apart (``d1/s.csv`` and ``d2/s.csv`` are ``d1/s`` and ``d2/s``; was: ``s`` and
    ``s (2)``, so an error of ``s`` did not say which file), else its path as given
    (``s.csv`` and ``s.parquet``)."""
    names = [p.stem for p in paths]
    parts = [p.with_suffix("").parts for p in paths]
    for k in range(2, max((len(q) for q in parts), default=1) + 1):
        twice = {n for n in names if names.count(n) > 1}
        if not twice:
            break
        names = ["/".join(q[-k:]) if n in twice else n for n, q in zip(names, parts, strict=True)]
    twice = {n for n in names if names.count(n) > 1}  # s.csv beside s.parquet
    names = [str(p) if n in twice else n for n, p in zip(names, paths, strict=True)]
    twice = {n for n in names if names.count(n) > 1}
    return [
        f"{n} ({k + 1})" if n in twice and names.index(n) != k else n for k, n in enumerate(names)
    ]
