"""The ``fits`` command line.

Commands: ``synthesize`` (site tables in, one synthetic table out), ``schema`` (the
inferred schema as editable JSON), ``demo`` (the main job on the embedded default).
Exit codes: 0 success, 1 data error (the message names the file, the client and the
column, and says what to do), 2 usage error (options, a missing input file, an output
path that is an input or cannot be written), 128 + N when stopped by signal N (the
temporary output file is removed). docs/cli.md lists every refusal.
"""

from __future__ import annotations

import errno
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import pandas as pd
import typer

from .analyze import analyze
from .benchmark import benchmark
from .drop import drop_columns
from .errors import closed_stdout_ends_quietly, echo_warnings, interruptible
from .errors import fail as _fail
from .federate import federate
from .helptext import ReflowedHelpGroup
from .options import (
    BoostingOpt,
    ColumnDesignOpt,
    ColumnModelOpt,
    ColumnNameError,
    ColumnPenaltyOpt,
    DesignOpt,
    NaValuesOpt,
    NominalPenaltyOpt,
    OrderOpt,
    OrdinalPenaltyOpt,
    RelevanceBudgetOpt,
    RelevanceOpt,
    Secure,
    SmoothingOpt,
    TuneRelevanceOpt,
    check_nominal_penalty,
    check_smoothing,
    match_keys,
    match_relevance,
    output_file,
    parse_boosting,
    parse_column_designs,
    parse_column_models,
    parse_column_penalties,
    parse_kinds,
    parse_na_values,
    parse_order,
    parse_relevance,
    penalized_kernel,
    pooled_without_secure,
    repeated_site_files,
    site_names,
    tune_relevance_value,
)
from .release import RELEASE_CHECK_ROWS
from .report import report

if TYPE_CHECKING:
    from fits.io import OutputForms


class _Commands(ReflowedHelpGroup):
    """The ``fits`` group: every command (and every ``--help``) run so that a closed
    stdout ends it quietly (:func:`fits.cli.errors.closed_stdout_ends_quietly`), here
    once rather than in each command, and so that Ctrl-C before a command handles its
    stop signals says so. ``parse_args`` prints ``fits --help``; ``invoke`` runs the
    subcommands, their ``--help`` included."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        with closed_stdout_ends_quietly():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        with closed_stdout_ends_quietly():
            try:
                return super().invoke(ctx)
            except KeyboardInterrupt:
                # Ctrl-C before the command handles its stop signals (its heavy imports,
                # its checks): Typer would exit 130 without a word. Within
                # ``interruptible`` a command says what it left itself.
                typer.echo("\nerror: interrupted by SIGINT; nothing was written", err=True)
                raise typer.Exit(130) from None


app = typer.Typer(
    cls=_Commands,
    help="fits: federated synthetic data for mixed-type tables (FITS).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help texts are Rich markup under every supported typer (its default, taken as
    # given only from typer 0.16 on): brackets meant literally are escaped, \[
    rich_markup_mode="rich",
)


class KernelChoice(StrEnum):
    """Kernel schemes the command line offers."""

    knn = "knn"
    gaussian = "gaussian"


@contextmanager
def _data_errors() -> Iterator[None]:
    """Turn data problems into exit code 1 with the library's message."""
    from fits.core.schema import DeclaredKindError, IdentifierColumnError, SchemaError
    from fits.federation.protocol import ProtocolError
    from fits.io import DataFileError

    try:
        yield
    except (IdentifierColumnError, DeclaredKindError, ColumnNameError) as exc:  # usage: the
        # user must decide (a column to drop or declare; a declaration to change)
        _fail(str(exc), 2)
    except (DataFileError, SchemaError, ProtocolError) as exc:
        _fail(str(exc))
    except (ValueError, KeyError, TypeError) as exc:
        _fail(f"{type(exc).__name__}: {exc}")


#: From this size on, fits synthesize and fits schema say on stderr which site file they
#: read (a gigabyte of CSV takes about a minute, before the fit's first line).
LARGE_SITE_FILE_BYTES = 100_000_000

#: From this many real rows on (all sites), fits synthesize says on stderr that the
#: release check runs, after the table is written: its distances take seconds then.
SLOW_RELEASE_CHECK_ROWS = 100_000

#: From this many chain columns on, fits synthesize says before it starts that a wide
#: table takes minutes (docs/benchmarks.md, "Wide tables").
WIDE_TABLE_COLUMNS = 100


def _wide_table_note(columns: int) -> str:
    return (
        f"note: {columns} columns: each column is drawn given all the columns before it, "
        "so the time grows steeply with the number of columns (300 columns of 300 rows: "
        "about 9 minutes on a 2-core machine, with OPENBLAS_NUM_THREADS=1, which a small "
        "or busy machine needs); on a terminal the progress bar shows one line per "
        'column (docs/benchmarks.md, "Wide tables")'
    )


def _read_policy(path: Path | None) -> Any:
    """The :class:`~fits.federation.policy.SitePolicy` of ``--policy`` (None: the
    default); a bad file is a usage error naming the file and the field."""
    if path is None:
        return None
    from fits.federation.policy import SitePolicy

    try:
        return SitePolicy.from_json(path)
    except ValueError as exc:
        _fail(f"--policy {exc}", 2)


def _check_suffix(path: Path, what: str) -> None:
    from fits.io import DataFileError, check_suffix

    try:
        check_suffix(path, what)
    except DataFileError as exc:
        raise typer.BadParameter(str(exc)) from None


def _echo_warnings(caught: list[warnings.WarningMessage]) -> None:
    """Print caught warnings: notes (what fits inferred) as ``note:``, the rest as
    ``warning:`` (:func:`~fits.cli.errors.echo_warnings`)."""
    echo_warnings(caught)


def _echo_draw_warnings(
    caught: list[warnings.WarningMessage],
    fallbacks: Mapping[str, Sequence[int]],
    before: Mapping[str, Sequence[int]],
) -> None:
    """Print the warnings of the draw as :func:`_echo_warnings` does, with the
    near-linear fallback notes (one per column and chunk) as one note per column of
    their counts over the whole draw (``fallbacks`` now less ``before``)."""
    from fits.federation.coordinator import FallbackNote, fallback_message

    _echo_warnings([w for w in caught if not issubclass(w.category, FallbackNote)])
    for column, (marginal, uniform) in fallbacks.items():
        m = marginal - before.get(column, (0, 0))[0]
        k = uniform - before.get(column, (0, 0))[1]
        if m or k:
            typer.echo(f"note: {fallback_message(column, m, k)}", err=True)


def _parse_kinds(kind: list[str] | None, schema: Path | None = None) -> dict[str, str]:
    """``--kind COL=KIND`` (or ``COL:KIND``) options as a mapping (usage errors name
    the option; :func:`~fits.cli.options.parse_kinds`; a column given two kinds is
    one)."""
    try:
        out = parse_kinds(kind)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--kind") from None
    if out and schema is not None:
        raise typer.BadParameter(
            '--kind cannot be combined with --schema; set the column\'s "kind" in the '
            "schema file instead",
            param_hint="--kind",
        )
    return out


def _check_inputs(paths: Sequence[tuple[str, Path]]) -> None:
    """Every input file exists and is a file, else a usage error (exit 2)."""
    for label, path in paths:
        if path.is_dir():
            what = "a table file; give the file(s)" if "table" in label else "a file"
            _fail(f"{label} {str(path)!r} is a directory, not {what}", 2)
        if not path.exists():
            _fail(f"{label} {str(path)!r}: no such file", 2)


def _check_output(
    path: Path,
    inputs: Sequence[tuple[str, Path]],
    option: str = "--out",
    create_parent: bool = False,
) -> None:
    """The output location is usable and is no input, else a usage error (exit 2)."""
    from fits.io import OutputError, check_output

    try:
        check_output(path, inputs, option=option, create_parent=create_parent)
    except OutputError as exc:
        _fail(str(exc), 2)


def _load_sites(
    site_files: list[Path],
    simulate_clients: int | None,
    shares: str | None,
    seed: int,
    quiet: bool = False,
    na_values: list[str | tuple[str, str]] | None = None,
) -> dict[str, pd.DataFrame]:
    """Read the site tables, or split one pooled table into simulated sites (saying on
    stderr which file is read when it is large, unless ``quiet``), each field written
    as one of ``na_values`` (``--na-values``) a missing value."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tables = _read_sites(site_files, simulate_clients, shares, seed, quiet, na_values)
    _echo_warnings(caught)
    return tables


def _read_sites(
    site_files: list[Path],
    simulate_clients: int | None,
    shares: str | None,
    seed: int,
    quiet: bool = False,
    na_values: list[str | tuple[str, str]] | None = None,
) -> dict[str, pd.DataFrame]:
    from fits.datasets import PAPER_SHARES, federated_split
    from fits.federation.client import MIN_CLIENT_ROWS
    from fits.io import align_codes, human_bytes
    from fits.io import read_table as read_whole

    def read_table(path: Path) -> pd.DataFrame:
        size = path.stat().st_size
        if size >= LARGE_SITE_FILE_BYTES and not quiet:  # a minute a gigabyte, unsaid
            typer.echo(f"reading {path} ({human_bytes(size)}) ...", err=True)
        return read_whole(path, na_values=na_values)

    for path in site_files:
        _check_suffix(path, "site table")
    _check_inputs([("the site table", p) for p in site_files])
    repeated = repeated_site_files(site_files)
    if repeated is not None:
        _fail(repeated, 2)
    if simulate_clients is None:
        if shares is not None:
            raise typer.BadParameter("--shares needs --simulate-clients", param_hint="--shares")
        # files of one name are named by their folders (d1/s, d2/s), as fits analyze's
        names = site_names(site_files)
        tables = {n: read_table(p) for n, p in zip(names, site_files, strict=True)}
        return align_codes(tables)  # ZIP codes with leading zeros at one site only
    if len(site_files) != 1:
        raise typer.BadParameter(
            f"--simulate-clients splits ONE pooled table; got {len(site_files)} files",
            param_hint="--simulate-clients",
        )
    if shares is None:
        weights = list(PAPER_SHARES) if simulate_clients == 10 else [1.0] * simulate_clients
    else:
        try:
            weights = [float(v) for v in shares.split(",")]
        except ValueError:
            raise typer.BadParameter(
                f"--shares must be numbers separated by commas, got {shares!r}",
                param_hint="--shares",
            ) from None
        if len(weights) != simulate_clients or not all(math.isfinite(w) and w > 0 for w in weights):
            raise typer.BadParameter(
                f"--shares needs {simulate_clients} positive finite numbers, got {shares!r}",
                param_hint="--shares",
            )
    pooled = read_table(site_files[0])
    if len(pooled) < MIN_CLIENT_ROWS * simulate_clients:
        _fail(
            f"{site_files[0]}: {len(pooled)} rows cannot make {simulate_clients} sites of "
            f"at least {MIN_CLIENT_ROWS} rows; use fewer --simulate-clients"
        )
    clients, _ = federated_split(
        pooled, shares=weights, test_size=0.0, seed=seed, min_rows=MIN_CLIENT_ROWS
    )
    return {f"site {k + 1}": frame for k, frame in enumerate(clients)}


def _check_same_columns(tables: Mapping[str, pd.DataFrame], site_files: Sequence[Path]) -> None:
    """Exit 1 when the site tables (read from ``site_files``, in order; after ``--drop``)
    do not hold the same columns, naming both files, the columns, and, for headers that
    differ only in case or surrounding spaces ('Age' and 'age '), both spellings and the
    rename that makes them one (:func:`~fits.core.schema.lookalike_names`)."""
    from fits.core.schema import files_columns_differ

    if len(tables) != len(site_files) or len(tables) < 2:
        return
    files = dict(zip(tables, site_files, strict=True))
    first, *others = tables
    head = (repr(str(files[first])), first, list(tables[first].columns))
    for name in others:
        said = files_columns_differ(
            head, (repr(str(files[name])), name, list(tables[name].columns))
        )
        if said is not None:
            _fail(said)


def _progress(quiet: bool) -> tuple[Any, Callable[[str, int, int], None] | None]:
    """A rich progress bar per chain column, on stderr, only for a terminal."""
    if quiet or not sys.stderr.isatty():
        return None, None
    from rich.console import Console

    from fits.synthesizer import progress_bar

    return progress_bar(Console(stderr=True))


def _order(order: list[str] | None, columns: list[str]) -> list[str] | None:
    """``--order col1,col2,...`` as the headers it names (:func:`parse_order`)."""
    return None if order is None else parse_order(order, columns)


SiteFiles = Annotated[
    list[Path],
    typer.Argument(
        help="One table per site (.csv or .parquet); with --simulate-clients, one pooled table.",
        show_default=False,
    ),
]
SimulateClients = Annotated[
    int | None,
    typer.Option(
        "--simulate-clients",
        min=2,
        help="Split the one pooled table into this many simulated sites.",
    ),
]
Shares = Annotated[
    str | None,
    typer.Option(
        "--shares",
        help="Site sizes for --simulate-clients, e.g. 30,20,10 (default: the paper's "
        "30,20,10,9,8,7,6,5,4,1 for 10 sites, else equal).",
    ),
]
#: ``--max-tries``'s default: :data:`fits.synthesizer.DEFAULT_MAX_TRIES` (not imported
#: here: the command starts before the engine loads).
MAX_TRIES = 100

Seed = Annotated[
    int, typer.Option("--seed", min=0, help="Seed of every random draw (an integer >= 0).")
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
Drop = Annotated[
    list[str] | None,
    typer.Option(
        "--drop",
        help="Leave this column out (repeat for several), e.g. an identifier or free text.",
        show_default=False,
    ),
]
NoRules = Annotated[
    bool,
    typer.Option(
        "--no-rules",
        help="Do not detect exact rules between columns (a column that is a function of "
        "others, a total that is a sum): every column is drawn by the chain.",
    ),
]
NearLinear = Annotated[
    bool,
    typer.Option(
        "--near-linear/--no-near-linear",
        help="Look for near-linear columns (a continuous column whose pooled "
        "least-squares line on an earlier one has R^2 >= 0.95) and draw each as its "
        "residual about the line (docs/method.md, 'Near-linear columns'). On by "
        "default; --no-rules switches it off too.",
    ),
]
Kind = Annotated[
    list[str] | None,
    typer.Option(
        "--kind",
        help="Set a column's kind: COLUMN=KIND (or COLUMN:KIND), KIND one of continuous, "
        "ordinal, nominal, "
        "id (fresh surrogate values, not modelled); repeat for several.",
        show_default=False,
    ),
]
PolicyFile = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="Every site's limits: a site policy JSON file (max_grid_size, "
        "min_effective_rows, ...; see docs/privacy.md). Default: the default policy.",
        show_default=False,
    ),
]
Jobs = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        min=1,
        help="Sites computing at the same time, in threads (default: the number of cores). "
        "The output does not depend on it.",
        show_default=False,
    ),
]


def _design_kwargs(design: Any) -> dict[str, Any]:
    """``design=`` for the synthesizer when the option is given (else its default)."""
    return {} if design is None else {"design": design.value}


@app.command()
def synthesize(
    site_files: SiteFiles,
    out: Annotated[
        Path,
        typer.Option("--out", help="Output table (.csv or .parquet).", parser=output_file("--out")),
    ],
    rows: Annotated[
        int | None,
        typer.Option("--rows", min=0, help="Number of synthetic rows (0: the header alone)."),
    ] = None,
    known: Annotated[
        Path | None,
        typer.Option(
            "--known",
            help="Instead of --rows: a table (.csv or .parquet) of values of some columns; "
            "one synthetic row per row, the other columns drawn given them (conditional "
            "sampling). Columns first in the chain are conditioned on directly (their "
            "values are sent to the sites as query points); discrete columns later in "
            "the chain are matched by drawing rows until one agrees (--max-tries); a "
            "continuous column must come first (--order). A table of no rows gives the "
            "header alone. Its header is checked against the site tables' before the "
            "fit; its values (categories, ranges) and its columns' place in the chain "
            "need the fit, and are checked after it, before any row is drawn.",
        ),
    ] = None,
    max_tries: Annotated[
        int | None,
        typer.Option(
            "--max-tries",
            min=1,
            help="With --known: draws per known row that matching its discrete columns "
            "later in the chain may take (pooled over blocks of 8,192 rows) before the "
            f"command stops saying which values are rare (default: {MAX_TRIES}).",
            show_default=False,
        ),
    ] = None,
    seed: Seed = 0,
    kernel: Annotated[
        list[KernelChoice],
        typer.Option(
            "--kernel",
            help="knn (FITS-K, the default) or gaussian (FITS-G): once for every site, or "
            "once per site in the sites' order.",
            show_default=False,
        ),
    ] = [],  # noqa: B006
    schema: Annotated[
        Path | None, typer.Option("--schema", help="Schema JSON (from `fits schema`).")
    ] = None,
    order: OrderOpt = None,
    simulate_clients: SimulateClients = None,
    shares: Shares = None,
    jobs: Jobs = None,
    quiet: Quiet = False,
    drop: Drop = None,
    kind: Kind = None,
    policy: PolicyFile = None,
    no_rules: NoRules = False,
    near_linear: NearLinear = True,
    design: DesignOpt = None,
    column_design: ColumnDesignOpt = None,
    column_model: ColumnModelOpt = None,
    boosting: BoostingOpt = None,
    ordinal_penalty: OrdinalPenaltyOpt = None,
    nominal_penalty: NominalPenaltyOpt = None,
    column_penalty: ColumnPenaltyOpt = None,
    relevance: RelevanceOpt = None,
    smoothing: SmoothingOpt = "fixed",
    tune_relevance: TuneRelevanceOpt = None,
    relevance_budget: RelevanceBudgetOpt = None,
    secure_aggregation: Secure = False,
    na_values: NaValuesOpt = None,
) -> None:
    """Synthesize one table from several sites' tables.

    Each SITE_FILE is one site's table; every site must have the same columns. The
    output keeps the input's columns and types, and is written only on success (never
    over an input; any number of rows, streamed in chunks). Afterwards it prints the
    exact-copy rate and the distance-to-closest-record check, with a warning when the
    table copies real rows.

    Examples:

      fits synthesize site_a.csv site_b.csv site_c.csv --rows 20000 \\
          --out synthetic.csv

      fits synthesize adult.csv --simulate-clients 10 --rows 36000 \\
          --out synthetic.parquet

      fits synthesize site_a.csv site_b.csv --policy policy.json --rows 5000 \\
          --out s.csv

      fits synthesize site_a.csv site_b.csv --order age,sex --known people.csv \\
          --out s.csv
    """
    from fits import FITSSynthesizer
    from fits.core.schema import DeclaredKindError, IdentifierColumnError, Schema, SchemaError

    if (rows is None) == (known is None):
        _fail("give either --rows N (rows to draw) or --known FILE (rows to complete)", 2)
    if max_tries is not None and known is None:
        _fail("--max-tries is for --known (the draws that match its values); leave it out", 2)
    inputs = [("the site table", p) for p in site_files]
    if known is not None:
        inputs.append(("--known", known))
    if schema is not None:
        inputs.append(("--schema", schema))
    if policy is not None:
        inputs.append(("--policy", policy))
    _check_inputs(inputs)
    _check_output(out, inputs)
    _check_suffix(out, "output")
    problem = check_smoothing(smoothing) or check_nominal_penalty(nominal_penalty)
    if problem:
        _fail(problem, 2)
    try:
        column_designs = parse_column_designs(column_design)
        column_models = parse_column_models(column_model)
        boosting_params = parse_boosting(boosting, column_models)
        column_penalties = parse_column_penalties(column_penalty)
        relevance_weights = parse_relevance(relevance)
    except ValueError as exc:
        _fail(str(exc), 2)
    kinds = _parse_kinds(kind, schema)
    missing = parse_na_values(na_values)
    site_policy = _read_policy(policy)
    problem = pooled_without_secure(site_policy, secure_aggregation)
    if problem:
        _fail(problem, 2)
    with interruptible("no output was written (its temporary file was removed)"), _data_errors():
        tables = drop_columns(
            _load_sites(site_files, simulate_clients, shares, seed, quiet, missing), drop
        )
        if simulate_clients is None:  # the files: named in the message
            _check_same_columns(tables, site_files)
        if len(kernel) > 1 and len(kernel) != len(tables):
            _fail(
                f"--kernel given {len(kernel)} times for {len(tables)} sites: give it once "
                "(every site's scheme) or once per site, in the sites' order",
                2,
            )
        if secure_aggregation and len(tables) < 2:
            _fail(
                "--secure-aggregation needs at least two sites (with one, the sum is that "
                "site's own upload): give more site files, or --simulate-clients K",
                2,
            )
        columns = [str(c) for c in next(iter(tables.values())).columns]
        kinds = match_keys(kinds, columns, "--kind")
        chain_order = _order(order, columns)
        column_designs = match_keys(column_designs, columns, "--column-design")
        column_models = match_keys(
            column_models, columns, "--column-model", is_column=lambda c, _: c != "*"
        )
        boosting_params = match_keys(  # COLUMN:SETTING=VALUE: a mapping under the column
            boosting_params, columns, "--boosting", is_column=lambda _, v: isinstance(v, dict)
        )
        column_penalties = match_keys(column_penalties, columns, "--column-penalty")
        # a response whose header holds a ':' ends where that header does
        relevance_weights = match_relevance(parse_relevance(relevance, columns), columns)
        user_schema = None
        if schema is not None:
            try:
                # utf-8-sig: an editor's byte-order mark is no error
                user_schema = Schema.from_json(schema.read_text(encoding="utf-8-sig"))
            except (OSError, ValueError) as exc:
                _fail(f"{schema}: not a usable schema file ({exc}); write one with `fits schema`")
            _check_schema_columns(schema, user_schema, columns, next(iter(tables)), bool(drop))
        chain = chain_order or (list(user_schema.order) if user_schema else columns)
        ids = {c.name for c in user_schema.columns if c.kind == "id"} if user_schema else set()
        ids |= {c for c, k in kinds.items() if k == "id"}
        for name in sorted(ids & set(column_designs)):
            _fail(
                f"--column-design {name}={column_designs[name]}: {name!r} is an identifier "
                "(kind id), not modelled, so it has no design; drop the --column-design",
                2,
            )
        chain = [c for c in chain if c not in ids]  # the identifiers are not drawn
        known_table = None
        if known is not None:  # read and checked against the header before the fit
            from fits.io import known_codes

            from .known import read_known

            known_table = read_known(
                known,
                columns,
                dropped=drop or [],
                kinds=kinds,
                identifiers=list(ids),
                na_values=missing,
            )
            known_table = known_codes(known_table, tables)  # read as the sites read them
        if chain and chain[0] in column_designs:
            _fail(
                f"--column-design {chain[0]}={column_designs[chain[0]]}: {chain[0]!r} is the "
                "first column of the chain, drawn from its marginal with no covariates; name "
                "a later column, or move it later with --order",
                2,
            )
        start = time.perf_counter()
        if not quiet and len(chain) >= WIDE_TABLE_COLUMNS:
            typer.echo(_wide_table_note(len(chain)), err=True)
        phases = _fit_phases(quiet)  # one line per phase of the fit, on stderr
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            schemes = [k.value for k in kernel] or ["knn"]
            kernels = [
                penalized_kernel(
                    k, ordinal_penalty, column_penalties, relevance_weights, nominal=nominal_penalty
                )
                for k in schemes
            ]
            synth = FITSSynthesizer(
                kernels[0] if len(kernels) == 1 else dict(zip(tables, kernels, strict=True)),
                seed=seed,
                kinds=kinds,
                order=chain_order,
                schema=user_schema,
                n_jobs=jobs,
                site_policy=site_policy,
                rules=not no_rules,
                near_linear=near_linear,
                smoothing=smoothing,
                tune_relevance=tune_relevance_value(tune_relevance),
                relevance_budget=relevance_budget,
                column_designs=column_designs or None,
                column_models=column_models or None,
                boosting=boosting_params or None,
                secure_aggregation=secure_aggregation,
                **_design_kwargs(design),
            )
            try:
                declared = len(known_table) if known_table is not None else rows or 0
                # declared at the fit's configure round: a site whose max_rows is lower
                # refuses there, before any statistic (the output does not depend on it)
                synth.fit(tables, rows=declared, on_phase=phases)
            except ValueError as exc:
                if str(exc).startswith("column_models["):  # a usage error: say the option
                    _fail(f"--column-model {str(exc).removeprefix('column_models')}", 2)
                if str(exc).startswith("column_designs"):
                    _fail(f"--column-design {str(exc).removeprefix('column_designs').lstrip()}", 2)
                if str(exc).startswith("boosting: "):  # settings no site or column can take
                    _fail(f"--{exc}", 2)
                if str(exc).startswith("column_penalties["):
                    _fail(f"--column-penalty {str(exc).removeprefix('column_penalties')}", 2)
                if str(exc).startswith("relevance["):  # weights that would do nothing
                    _fail(f"--relevance {str(exc).removeprefix('relevance')}", 2)
                if str(exc).startswith("tune_relevance"):  # ': no column', ' names ... twice'
                    _fail(f"--tune-relevance{str(exc).removeprefix('tune_relevance')}", 2)
                if str(exc).startswith("learning relevance weights"):  # the budget
                    _fail(f"--relevance-budget: {exc}", 2)
                if schema is not None and isinstance(exc, SchemaError):
                    if not isinstance(exc, (IdentifierColumnError, DeclaredKindError)):  # usage
                        # the sites' values against the edited file: name the file
                        _fail(f"--schema {str(schema)!r}: {exc}")
                raise
        _echo_warnings(caught)
        if phases is not None:
            phases("done; drawing the rows")
        bar, callback = _progress(quiet)
        if bar is None and phases is not None:  # no bar: the boost rounds in lines
            callback = _boosting_lines(phases)
        check = _release_check(tables, synth, seed)
        fallbacks = {c: tuple(v) for c, v in synth.coordinator.truncation_fallbacks.items()}
        with (
            bar if bar is not None else _nothing(),
            warnings.catch_warnings(record=True) as drawn,  # printed below the bar
        ):
            warnings.simplefilter("always")
            if known is not None:
                assert known_table is not None  # read before the fit
                written, check = _complete_rows(
                    synth, known, known_table, out, callback, check, quiet, max_tries or MAX_TRIES
                )
            else:
                assert rows is not None  # one of the two, checked above
                written, check = _stream_rows(synth, rows, out, callback, check, quiet)
            if written == 0:  # --rows 0 or a known table of no rows: the header alone,
                check = None  # no synthetic row to check
        _echo_draw_warnings(drawn, synth.coordinator.truncation_fallbacks, fallbacks)
    elapsed = time.perf_counter() - start
    sizes = ", ".join(
        f"{n} ({m} rows)" for n, m in zip(synth.client_names_, synth.n_rows_, strict=True)
    )
    typer.echo(
        f"wrote {written} synthetic rows to {out} in {elapsed:.1f} s\n"
        f"sites: {sizes}\nuploaded: {sum(synth.uploaded_bytes_) / 1e6:.1f} MB in all"
    )
    boosted = _boosting_summary(synth.coordinator)
    if boosted:
        typer.echo(boosted)
    # the table is in place: a stop signal now costs only the check (seconds to minutes
    # on large sites: its distances reach every real row), and must say so
    with interruptible(
        f"the synthetic table {str(out)!r} is written and complete; only the release check "
        "(exact copies, distance to the closest real row) was not finished"
    ):
        if check is not None and check.n_real >= SLOW_RELEASE_CHECK_ROWS and not quiet:
            typer.echo(
                f"release check: distances of {min(written, RELEASE_CHECK_ROWS):,} synthetic "
                f"rows to the sites' {check.n_real:,} rows ...",
                err=True,
            )
        _report_release_check(check)


def _check_schema_columns(
    path: Path, schema: Any, columns: Sequence[str], site: str, dropped: bool
) -> None:
    """The columns of a ``--schema`` file are the site tables' (those of the first site,
    ``site``, after ``--drop``), else a data error (exit 1) naming the file, the columns
    on either side and the fixes, before the fit (a column renamed in the file was
    reported by the sites from one side only, without the file)."""
    named = [c.name for c in schema.columns if c.indicates is None]  # not its indicators
    absent = [c for c in named if c not in columns]
    unnamed = [c for c in columns if c not in named]
    if not absent and not unnamed:
        return
    table = f"{site}'s table" + (" (after --drop)" if dropped else "")
    parts = []
    if absent:
        parts.append(f"it names column(s) {absent} that {table} does not have")
    if unnamed:
        parts.append(f"column(s) {unnamed} of {table} are not in the schema")
    fixes = []
    if absent and unnamed:
        fixes.append(
            'rename the schema\'s columns to the table\'s names (in "columns" and "order")'
        )
    if absent:
        fixes.append('remove the columns the table does not have (from "columns" and "order")')
    if unnamed:
        fixes.append("add the table's columns to the schema, or leave them out with --drop COL")
    fix = "; or ".join(fixes)
    _fail(
        f"--schema {str(path)!r} does not match the site tables: {'; '.join(parts)}. "
        f"{fix[0].upper()}{fix[1:]}; `fits schema` writes a schema that matches"
    )


def _boosting_summary(coordinator: Any) -> str:
    """The boosted columns' tree counts ("" when none was fitted), e.g. ``boosted
    columns: income 37 trees (early stopping; at most 100), age 100 trees``."""
    parts = []
    for column, model in coordinator.models.items():
        params = coordinator.boosting_params(column)
        part = f"{column} {model.n_trees} trees"
        if params.early_stopping:
            part += f" (early stopping; at most {params.n_trees})"
        parts.append(part)
    return f"boosted columns: {', '.join(parts)}" if parts else ""


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _release_check(tables: dict[str, pd.DataFrame], synth: Any, seed: int) -> Any:
    """The exact-copy and DCR check, or None (with a warning) if it cannot be set up
    (:func:`fits.cli.release.start_release_check`, which fits federate local runs too)."""
    from .release import release_kinds, start_release_check

    return start_release_check(tables, release_kinds(synth.schema_), seed)


def _report_release_check(check: Any) -> None:
    from .release import report_release_check

    report_release_check(check)


def _fit_phases(quiet: bool) -> Callable[[str], None] | None:
    """``FITSSynthesizer.fit``'s ``on_phase`` for fits synthesize: one line on stderr per
    phase of the fit, with the seconds since the fit began (None with ``--quiet``)."""
    if quiet:
        return None
    start = time.perf_counter()

    def say(phase: str) -> None:
        typer.echo(f"[fit {time.perf_counter() - start:6.1f} s] {phase}", err=True)

    return say


def _boosting_lines(say: Callable[[str], None]) -> Callable[[str, int, int], None]:
    """A sampling progress callback that, where no progress bar shows them, says the
    boosted columns' rounds (fitted before the first row) in ``say``'s lines: after the
    first round, each quarter and the last."""
    from fits.federation.coordinator import BOOSTING_PROGRESS

    def report(column: str, done: int, total: int) -> None:
        if column != BOOSTING_PROGRESS:
            return
        if done in (1, total) or 4 * done // total != 4 * (done - 1) // total:
            say(f"boosted models: {done} of {total} rounds")

    return report


def _human_seconds(t: float) -> str:
    if t < 120:
        return f"{t:.0f} s"
    if t < 7200:
        return f"{t / 60:.0f} min"
    return f"{t / 3600:.1f} h"


def _complete_rows(
    synth: Any,
    known: Path,
    table: pd.DataFrame,
    out: Path,
    callback: Callable[[str, int, int], None] | None,
    check: Any,
    quiet: bool,
    max_tries: int = MAX_TRIES,
) -> tuple[int, Any]:
    """``--known``: one synthetic row per row of the file, the other columns drawn given
    its values (:meth:`fits.FITSSynthesizer.iter_sample_remaining_columns`), streamed
    into ``out`` atomically in chunks, as ``--rows`` is (:func:`_write_stream`: the
    estimate and the free-space refusal for more than :data:`fits.io.LARGE_REQUEST_ROWS`
    rows, the progress, the release check of every chunk).

    ``table`` is the known file, read whole before the fit (CSV and Parquet readers give
    it at once; :func:`fits.cli.known.read_known` checked its header then) and checked
    whole here, against the fitted schema, before any row is drawn; a table of no rows
    gives the header alone. The synthetic rows are drawn, checked and written a chunk
    at a time, so their memory is bounded. The table is the same whatever the chunks
    (:meth:`~fits.FITSSynthesizer.sample_remaining_columns` with the same seed).
    Returns the rows written and the release check (None if it failed).
    """
    where = f"--known {str(known)!r}"

    def stream(
        first_chunk_rows: int | None, progress: Callable[[str, int, int], None]
    ) -> Iterator[pd.DataFrame]:
        try:
            with warnings.catch_warnings(record=True) as caught:  # notes on the known values
                warnings.simplefilter("always")  # (dates read month first), checked here
                chunks = synth.iter_sample_remaining_columns(
                    table, first_chunk_rows=first_chunk_rows, progress=progress, max_tries=max_tries
                )
        except ValueError as exc:
            _known_error(synth, table, where, str(exc))
            raise  # not reached: _known_error exits
        _echo_warnings(caught)
        return _failing_as(where, chunks, synth, table, max_tries)

    return _write_stream(
        stream,
        len(table),
        f"{where} ({len(table)} rows)",
        "split the --known table or write elsewhere",
        out,
        callback,
        check,
        quiet,
        forms=synth.output_forms().with_known(table),
    )


def _known_first(synth: Any, table: pd.DataFrame) -> str:
    """The ``--order`` value that puts the ``--known`` table's columns first (by the
    schema's names: 'workclass' may stand for ' workclass '), the chain's order after."""
    from fits.known import known_first_order

    return known_first_order(synth.schema_, table)


def _known_error(synth: Any, table: pd.DataFrame, where: str, message: str) -> None:
    """Exit with a ``--known`` table's refusal: a usage error advising the ``--order``
    that puts its columns first, when they are not the chain's first; else a data error."""
    if "not the first columns of the chain" in message:
        message = message.replace("known_columns", "its columns", 1)
        reason = message.split(" Fit with")[0].rstrip(".")
        _fail(f"{where}: {reason}. Put them first with --order {_known_first(synth, table)}", 2)
    # the library's argument is the file here ('known_columns names a column twice')
    message = message.replace("known_columns break", "its rows break")
    from .known import known_values_advice, near_categories

    message = known_values_advice(message.replace("known_columns", "the table"))
    if "not among its categories" in message:  # 'female' for 'Female': say so
        message += near_categories(table, synth.schema_)
    _fail(f"{where}: {message}")


def _failing_as(
    where: str, chunks: Iterator[pd.DataFrame], synth: Any, table: pd.DataFrame, max_tries: int
) -> Iterator[pd.DataFrame]:
    """``chunks``, a ValueError while drawing them reported as the ``--known`` table's
    data error (exit 1), in the words :func:`fits.known.unmatched_known_row` gives (the
    file's row, 1-based; the ``--order`` that puts the known columns first;
    ``--max-tries``), not the library's (a 0-based position, ``order=``, ``max_tries``)."""
    from fits.known import unmatched_known_row

    try:
        yield from chunks
    except ValueError as exc:
        _fail(f"{where}: {unmatched_known_row(str(exc), synth.schema_, table, max_tries)}")


def _stream_rows(
    synth: Any,
    rows: int,
    out: Path,
    callback: Callable[[str, int, int], None] | None,
    check: Any,
    quiet: bool,
) -> tuple[int, Any]:
    """``--rows``: draw ``rows`` rows in chunks and stream them into ``out`` atomically
    (:func:`_write_stream`). Returns the rows written and the release check (None if
    it failed)."""

    def stream(
        first_chunk_rows: int | None, progress: Callable[[str, int, int], None]
    ) -> Iterator[pd.DataFrame]:
        return synth.iter_sample(rows, first_chunk_rows=first_chunk_rows, progress=progress)

    return _write_stream(
        stream,
        rows,
        f"--rows {rows}",
        "ask for fewer rows or write elsewhere",
        out,
        callback,
        check,
        quiet,
        forms=synth.output_forms(),
    )


def _write_stream(
    stream: Callable[[int | None, Callable[[str, int, int], None]], Iterator[pd.DataFrame]],
    rows: int,
    request: str,
    advice: str,
    out: Path,
    callback: Callable[[str, int, int], None] | None,
    check: Any,
    quiet: bool,
    *,
    forms: OutputForms | None = None,
) -> tuple[int, Any]:
    """Stream the chunks of a draw of ``rows`` rows into ``out`` atomically
    (:func:`fits.io.write_stream`, which the Flower ServerApp uses too), with this
    command's extras.

    ``stream(first_chunk_rows, progress)`` gives the chunks (whose rows must not
    depend on where they are cut). Large requests (more than
    :data:`fits.io.LARGE_REQUEST_ROWS` rows) first draw :data:`fits.io.ESTIMATE_ROWS`
    rows; here they are also timed, and the estimated time and file size printed
    (unless ``quiet``); a file that would not fit in the free space of the output's
    file system is refused (exit 2; the message starts with ``request`` and ends with
    ``advice``). Every chunk goes through the release check ``check`` before it is
    written, in the sites' ``forms`` of the values (:class:`fits.io.OutputForms`).
    Returns the rows written and the release check (None if it failed).
    """
    from fits import io as fits_io
    from fits.federation.coordinator import BOOSTING_PROGRESS

    one_off = [0.0]  # when the boosted columns' models (fitted once, before row 1) were done
    clock = [0.0, 0.0]  # when the first chunk was asked for, and when it came

    def timed(column: str, done: int, total: int) -> None:
        if column == BOOSTING_PROGRESS:
            one_off[0] = time.perf_counter()
        if callback is not None:
            callback(column, done, total)

    checks = [check]

    def draw(first_chunk_rows: int | None) -> Iterator[pd.DataFrame]:
        chunks = stream(first_chunk_rows, timed)

        def checked() -> Iterator[pd.DataFrame]:
            clock[0] = time.perf_counter()
            for k, chunk in enumerate(chunks):
                if k == 0:
                    clock[1] = time.perf_counter()
                if checks[0] is not None:
                    try:
                        checks[0].update(chunk)
                    except Exception as exc:  # noqa: BLE001 - never lose the output to it
                        typer.echo(f"warning: the exact-copy check failed ({exc})", err=True)
                        checks[0] = None
                yield chunk

        return checked()

    def estimated(estimate: Any) -> None:
        if quiet:
            return
        fitted = max(one_off[0], clock[0])  # the boost rounds are not paid again per chunk
        seconds = (fitted - clock[0]) + (clock[1] - fitted) * estimate.rows / estimate.sample_rows
        typer.echo(
            f"{estimate.rows:,} rows: estimated {_human_seconds(seconds)} and "
            f"{fits_io.human_bytes(estimate.size)} (from the first "
            f"{estimate.sample_rows:,} rows; {fits_io.human_bytes(estimate.free)} free)",
            err=True,
        )

    try:
        _, written = fits_io.write_stream(
            draw,
            out,
            rows,
            request=request,
            advice=advice,
            where=f"--out {str(out)!r}",
            forms=forms,
            on_estimate=estimated,
        )
    except fits_io.OutputTooLarge as exc:
        _fail(str(exc), 2)
    except OSError as exc:  # the writer's: a full disk under the estimate's 100,000 rows
        if exc.errno in (None, errno.EPIPE):  # EPIPE: a closed stdout (or stderr) pipe
            raise
        _fail(_write_failed(out, exc, "no output was written (its temporary file was removed)"), 2)
    return written, checks[0]


def _write_failed(out: Path, exc: OSError, what: str) -> str:
    """The one line for an output that could not be written (``exc``, from the writer:
    a full disk, a quota, a file system turned read-only); ``what`` says what is left."""
    import errno

    full = exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG)
    fix = "free some space or write elsewhere" if full else "write elsewhere"
    return f"--out {str(out)!r}: cannot write it ({exc.strerror or exc}); {what}: {fix}"


@app.command(name="schema")
def schema_command(
    site_files: SiteFiles,
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Where to write the schema (a .json file).", parser=output_file("--out")
        ),
    ],
    order: OrderOpt = None,
    simulate_clients: SimulateClients = None,
    shares: Shares = None,
    seed: Seed = 0,
    drop: Drop = None,
    kind: Kind = None,
    no_rules: NoRules = False,
    near_linear: NearLinear = True,
    na_values: NaValuesOpt = None,
) -> None:
    """Write the inferred schema (kinds, categories, bounds, chain order) as JSON.

    Edit it (change a column's "kind", reorder "order", edit or delete an entry of
    "rules": the exact rules found between columns) and pass it back with
    `fits synthesize ... --schema schema.json`.

    Example:

      fits schema site_a.csv site_b.csv --out schema.json
    """
    from fits.core.schema import KINDS, Schema
    from fits.io import write_text

    inputs = [("the site table", p) for p in site_files]
    _check_inputs(inputs)
    _check_output(out, inputs)
    if out.suffix.lower() != ".json":  # schema.csv: JSON in a table's name
        _fail(
            f"--out {str(out)!r}: fits schema writes JSON; give a file name ending in .json "
            f"(for example {str(out.with_name('schema.json'))!r})",
            2,
        )
    kinds = _parse_kinds(kind)
    missing = parse_na_values(na_values)
    with interruptible("no schema was written"), _data_errors():
        tables = drop_columns(
            _load_sites(site_files, simulate_clients, shares, seed, na_values=missing), drop
        )
        if simulate_clients is None:  # the files: named in the message
            _check_same_columns(tables, site_files)
        columns = [str(c) for c in next(iter(tables.values())).columns]
        kinds = match_keys(kinds, columns, "--kind")
        chain_order = _order(order, columns)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            merged = Schema.detect(
                tables,
                kinds=kinds,
                order=chain_order,
                rules=not no_rules,
                near_linear=near_linear,
            )
        _echo_warnings(caught)
        try:
            write_text(merged.to_json(indent=2) + "\n", out)
        except OSError as exc:
            if exc.errno in (None, errno.EPIPE):  # EPIPE: a closed stdout (or stderr) pipe
                raise
            _fail(_write_failed(out, exc, "no schema was written"), 2)
    kinds = merged.kinds()
    counts = {k: list(kinds.values()).count(k) for k in KINDS}
    typer.echo(
        f"wrote the schema of {len(kinds)} columns ({counts['continuous']} continuous, "
        f"{counts['ordinal']} ordinal, {counts['nominal']} nominal"
        + (f", {counts['id']} id" if counts["id"] else "")
        + (f", {counts['constant']} constant" if counts["constant"] else "")
        + f") to {out}"
    )
    exact = [r for r in merged.rules or [] if r.kind != "linear"]
    linear = [r for r in merged.rules or [] if r.kind == "linear"]
    if exact:
        typer.echo(f"exact rules found ({len(exact)}), each generated by its rule:")
        for rule in exact:
            typer.echo(f"  {rule.describe(clock=merged[rule.column].dtype == 'datetime')}")
    elif not no_rules:
        typer.echo("exact rules found: none")
    if linear:
        typer.echo(f"near-linear columns ({len(linear)}), each drawn as its residual:")
        for rule in linear:
            typer.echo(f"  {rule.describe(clock=merged[rule.column].dtype == 'datetime')}")


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", help="Folder for the outputs.")] = Path("fits-demo"),
    rows: Annotated[int, typer.Option("--rows", min=100, help="Rows of simulated data.")] = 10_000,
    kernel: Annotated[
        KernelChoice, typer.Option("--kernel", help="knn (FITS-K) or gaussian (FITS-G).")
    ] = KernelChoice.knn,
    seed: Seed = 0,
    quiet: Quiet = False,
) -> None:
    """Synthesize the paper's simulation design over 10 sites and score the result.

    The embedded default: the simulation design of the FITS paper (appendix D.2),
    split 80/20 and over 10 sites with the paper's shares (30%, 20%, ..., 1%).

    Example:

      fits demo --out fits-demo
    """
    for name in ("synthetic.csv", "report.html", "report.json"):
        _check_output(out / name, [], create_parent=True)
    with interruptible("the outputs not yet written were not written"):
        try:
            _demo(out, rows, kernel, seed, quiet)
        except OSError as exc:  # a writer's: a full disk, a quota, a read-only folder
            if exc.errno in (None, errno.EPIPE):  # EPIPE: stdout's reader went away
                raise
            _fail(_write_failed(out, exc, "the outputs not yet written were not written"), 2)


def _demo(out: Path, rows: int, kernel: KernelChoice, seed: int, quiet: bool) -> None:
    from fits import FITSSynthesizer, evaluate
    from fits.datasets import federated_split, simulate
    from fits.federation.client import MIN_CLIENT_ROWS
    from fits.io import write_table

    data = simulate(rows, seed=seed)
    # every site gets at least the rows a FITS client needs (the paper's 1% site of
    # 80 training rows would get 1 row otherwise)
    clients, test = federated_split(data.frame, seed=seed, min_rows=MIN_CLIENT_ROWS)
    train = pd.concat(clients, ignore_index=True)
    typer.echo(
        f"simulation design: {rows} rows, {len(clients)} sites of sizes "
        f"{[len(c) for c in clients]}, {len(test)} test rows"
    )
    start = time.perf_counter()
    synth = FITSSynthesizer(kernel.value, seed=seed, kinds=data.kinds, order=data.order)
    with warnings.catch_warnings(record=True) as caught:  # notes, as one line each
        warnings.simplefilter("always")
        synth.fit(clients)
    _echo_warnings(caught)
    bar, callback = _progress(quiet)
    if bar is not None:
        with bar:
            synthetic = synth.sample(len(train), progress=callback)
    else:
        synthetic = synth.sample(len(train))
    elapsed = time.perf_counter() - start
    path = write_table(synthetic, out / "synthetic.csv")
    typer.echo(f"synthesized {len(synthetic)} rows in {elapsed:.1f} s; writing the report ...")
    report = evaluate(
        data.frame,
        synthetic,
        data.kinds,
        target=["Y_lin", "Y_log"],
        task={"Y_lin": "regression", "Y_log": "classification"},
        train=train,
        test=test,
        clients={f"site {k + 1}": c for k, c in enumerate(clients)},
        reference_params={"Y_lin": data.params["linear"], "Y_log": data.params["logistic"]},
        settings={
            "command": f"fits demo --rows {rows} --kernel {kernel.value} --seed {seed}",
            "data": f"simulation design (appendix D.2), {rows} rows, seed {seed}",
            "sites": [len(c) for c in clients],
            "kernel": kernel.value,
            "synthesis seconds": round(elapsed, 1),
            "uploaded bytes": sum(synth.uploaded_bytes_),
        },
        seed=seed,
        title="fits demo: the paper's simulation design over 10 sites",
    )
    html_path, json_path = out / "report.html", out / "report.json"
    report.save(html_path, json_path)
    typer.echo(report.summary())
    typer.echo(f"synthetic table: {path}\nreport: {html_path}\nreport data: {json_path}")


app.command(name="report")(report)

app.command(name="benchmark")(benchmark)

app.command(name="analyze")(analyze)

app.add_typer(federate, name="federate")

if __name__ == "__main__":  # pragma: no cover
    app()
