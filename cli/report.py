"""``fits report``: the fidelity report of a synthetic table, as HTML (and JSON).

Registered on the ``fits`` app in :mod:`fits.cli.main`.
"""

from __future__ import annotations

import dataclasses
import json as _json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from .options import NaValuesOpt, output_file, parse_na_values

__all__ = ["read_table", "report"]


#: File extensions ``fits report`` reads.
class DataError(Exception):
    """A data problem (unreadable or empty file, inconsistent tables): exit code 1."""


class UsageError(Exception):
    """A problem with the command line itself: exit code 2."""


def read_table(
    path: Path,
    option: str,
    na_values: list[str | tuple[str, str]] | None = None,
    *,
    lenient: bool = False,
) -> pd.DataFrame:
    """Read a ``.csv`` or ``.parquet`` file, with errors that name the file.

    Parameters
    ----------
    path : pathlib.Path
        The file.
    option : str
        The command-line option it came from (for messages), e.g. ``"--real"``.
    na_values : list, optional
        The texts read as missing values (``--na-values``, :func:`fits.io.read_table`).
    lenient : bool
        Pass over a ``(column, text)`` pair of ``na_values`` whose column the table
        lacks (the synthetic table, which lacks the dropped columns).

    Raises
    ------
    UsageError
        The file does not exist, is a folder, or has an unknown extension.
    DataError
        The file cannot be parsed or holds no rows.
    """
    from fits.core.names import ColumnNameError
    from fits.io import TABLE_SUFFIXES, DataFileError, na_values_within, read_columns
    from fits.io import read_table as _read_table

    if path.is_dir():
        raise UsageError(f"{option} {str(path)!r} is a directory, not a table file")
    if path.suffix.lower() not in TABLE_SUFFIXES:
        raise UsageError(
            f"{option} {str(path)!r}: unknown file extension {path.suffix or '(none)'!r}; "
            "fits report reads .csv and .parquet files"
        )
    if not path.exists():
        raise UsageError(f"{option} {str(path)!r}: no such file")
    if not path.is_file():
        raise UsageError(f"{option} {str(path)!r}: not a file")
    try:
        if lenient and na_values:
            na_values = na_values_within(na_values, read_columns(path))
        return _read_table(path, na_values=na_values)
    except ColumnNameError as err:  # --na-values COLUMN=TEXT of no column of the table
        raise UsageError(str(err)) from None
    except DataFileError as err:
        raise DataError(f"{option} {err}") from None


@contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """The warnings of reading and evaluating the tables on stderr as ``note: ...``
    (what fits inferred reading a table) or ``warning: ...``, each once, without
    Python's file and source line (``/.../cli/report.py:63: DataNote: ...``)."""
    import warnings

    from fits.core.schema import DataNote, NumericIdentifierWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            seen: set[str] = set()
            for w in caught:
                text = str(w.message)
                if isinstance(w.message, NumericIdentifierWarning):
                    text = _numeric_identifier_advice(w.message.column)
                line = f"{'note' if issubclass(w.category, DataNote) else 'warning'}: {text}"
                if line not in seen:
                    seen.add(line)
                    typer.echo(line, err=True)


def _numeric_identifier_advice(column: str) -> str:
    """fits report's words for :class:`~fits.core.schema.NumericIdentifierWarning`."""
    import shlex

    return (
        f"column {column!r} holds a different whole number in every row: it looks like a "
        "numeric identifier, and fits report compares it as a continuous column. To leave "
        "it out of the evaluation, give a schema that declares it an identifier (fits "
        f"schema ... --kind {shlex.quote(f'{column}=id')} --out schema.json, then --schema "
        "schema.json)"
    )


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"fits report: error: {message}", err=True)
    if code == 2:
        typer.echo("Try 'fits report --help' for help.", err=True)
    return typer.Exit(code=code)


def _parse_numbers(values: list[str] | None, option: str, default: tuple[float, ...]):
    if not values:
        return default
    out = []
    for text in values:
        for part in text.split(","):
            part = part.strip()
            try:
                number = math.inf if part.lower() in ("inf", "infinity") else float(part)
            except ValueError:
                raise UsageError(f"{option}: {part!r} is not a number") from None
            out.append(number)
    return tuple(out)


Real = Annotated[
    list[Path] | None,
    typer.Option(
        "--real",
        help="The real reference table (.csv or .parquet): the full real data. Repeat it "
        "for several files (one per site): their rows are pooled, in the order given. "
        "Without it, the --clients files' rows pooled.",
        show_default=False,
    ),
]
Synthetic = Annotated[
    Path,
    typer.Option("--synthetic", help="The synthetic table (.csv or .parquet).", show_default=False),
]
Out = Annotated[
    Path,
    typer.Option("--out", help="Where to write the HTML report.", parser=output_file("--out")),
]
Json = Annotated[
    Path | None,
    typer.Option(
        "--json",
        help="Also write every number of the report as JSON here.",
        parser=output_file("--json"),
    ),
]
Target = Annotated[
    list[str] | None,
    typer.Option(
        "--target",
        metavar="COL",
        help="Response column for downstream utility and the 'covariates + response' "
        "energy distance; repeat for several.",
    ),
]
Task = Annotated[
    list[str] | None,
    typer.Option(
        "--task",
        metavar="TASK",
        help="regression or classification (default: inferred); once for all targets "
        "or once per --target.",
    ),
]
Train = Annotated[
    Path | None, typer.Option("--train", help="The real rows the synthesizer was fitted on.")
]
Test = Annotated[
    Path | None,
    typer.Option("--test", help="Real rows held out from fitting (test set and floors)."),
]
Clients = Annotated[
    list[Path] | None,
    typer.Option(
        "--clients",
        metavar="SITE_FILE",
        help="One file per client (the sites' real rows), for the per-client modes "
        "M2-M4: --clients a.csv b.csv c.csv (or repeat --clients).",
    ),
]
SchemaFile = Annotated[
    Path | None,
    typer.Option(
        "--schema",
        help="Schema JSON (from `fits schema`) whose column kinds to use "
        "(default: inferred from --real).",
    ),
]
Settings = Annotated[
    Path | None,
    typer.Option("--settings", help="JSON file of the settings that produced the data."),
]
Ratio = Annotated[
    list[str] | None,
    typer.Option(
        "--ratio", metavar="R", help="M3's r (synthetic rows per local row; inf = all). [1]"
    ),
]
Lambda = Annotated[
    list[str] | None,
    typer.Option(
        "--lambda", metavar="LAMBDA", help="M4's weight of the synthetic rows' loss. [0.1]"
    ),
]
MaxRows = Annotated[
    int | None,
    typer.Option(
        "--max-rows",
        min=1,
        help="Subsample each table to this many rows for the energy distances (default: exact).",
    ),
]
Seed = Annotated[
    int, typer.Option("--seed", min=0, help="Seed of every random draw (an integer >= 0).")
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only where the outputs are.")]
Inference = Annotated[
    bool,
    typer.Option(
        "--inference/--no-inference",
        help="With --clients and a numeric --target: the Inference section (linear "
        "regression by FedLSA across the client files against OLS on the synthetic table).",
    ),
]
DirectMu = Annotated[
    float | None,
    typer.Option(
        "--direct-mu",
        help="With --clients: the utility section also fits the model directly across the "
        "client files, without privacy (newton: the pooled maximum-likelihood estimate) "
        "and by FedNewton at this mu (each site mu-fed-GDP; default 1).",
    ),
]
Direct = Annotated[
    bool,
    typer.Option("--direct/--no-direct", help="Fit directly across sites (see --direct-mu)."),
]
Drop = Annotated[
    list[str] | None,
    typer.Option(
        "--drop",
        metavar="COL",
        help="Leave a column out of the real tables (--real, --train, --test, --clients), "
        "as fits synthesize --drop left it out of the synthetic table; repeat for several.",
        show_default=False,
    ),
]
MoreClients = Annotated[
    list[Path] | None, typer.Argument(hidden=True, show_default=False, metavar="SITE_FILE")
]


def report(
    synthetic: Synthetic,
    real: Real = None,
    out: Out = Path("report.html"),
    json: Json = None,
    target: Target = None,
    task: Task = None,
    train: Train = None,
    test: Test = None,
    clients: Clients = None,
    schema: SchemaFile = None,
    settings: Settings = None,
    ratio: Ratio = None,
    lam: Lambda = None,
    max_rows: MaxRows = None,
    seed: Seed = 0,
    quiet: Quiet = False,
    inference: Inference = True,
    direct: Direct = True,
    direct_mu: DirectMu = None,
    drop: Drop = None,
    more_clients: MoreClients = None,
    na_values: NaValuesOpt = None,
) -> None:
    """Write the fidelity report of a synthetic table: one self-contained HTML page.

    The page opens with a summary (energy distance against its floors, column and
    pair fidelity, downstream utility, privacy checks), then shows each part in
    detail. It embeds its figures and needs no network access.

    Example:

      fits report --real adult.csv --synthetic synthetic.csv --out report.html \\
          --json report.json --target income --train train.csv --test test.csv \\
          --clients site1.csv site2.csv site3.csv

    Exit status: 0 on success, 1 for a data problem (unreadable file, columns that
    do not match), 2 for a usage problem (unknown option value or file type).
    """
    from fits.cli.errors import interruptible
    from fits.core.names import ColumnNameError
    from fits.core.schema import SchemaError
    from fits.report import evaluate

    def say(text: str) -> None:
        if not quiet:
            typer.echo(text, err=True)

    with (
        _warnings_as_lines(),
        interruptible("no report was written (temporary files were removed)"),
    ):
        tables: dict[str, Any] = {}
        try:
            client_files = _client_files(clients, more_clients)
            files = _Files(_real_files(real, client_files), synthetic, train, test, client_files)
            _warn_synthetic_is_real(synthetic, files.real)
            if not real:
                say(
                    f"the real table: the rows of the {len(client_files)} --clients files, "
                    "pooled (no --real given)"
                )
            options = _check_options(task, target, ratio, lam, out, json)
            if direct and direct_mu is not None:
                _check_direct_mu(direct_mu)
            _check_outputs(out, json, files, schema, settings)
            _check_clients(files.clients)
            tables = _without_dropped(_read_tables(files, parse_na_values(na_values)), drop)
            options = _match_targets(options, tables["real"], files.real_label)
            kinds = (
                _schema_kinds(schema, tables["real"], files.real_label)
                if schema is not None
                else None
            )
            tables = _parsed_tables(tables, kinds)
            if schema is not None and kinds is not None:
                _check_schema_numbers(schema, kinds, tables["real"], files.real_label)
            settings_data = _settings_json(settings) if settings is not None else None
            say(
                f"evaluating {len(tables['synthetic']):,} synthetic rows against "
                f"{len(tables['real']):,} real rows ..."
            )
            inference_data = None
            inference_notes: list[str] = []  # said once the tables passed evaluate's checks
            if inference and tables["clients"] and options.targets:
                _check_target_task(tables["real"], options, kinds)  # before the check runs
                say(
                    f"inference check for {options.targets[0]} (FedLSA across the client files) ..."
                )
                inference_data = inference_figures(
                    tables["clients"],
                    tables["synthetic"],
                    options.targets[0],
                    kinds,
                    seed,
                    notes=inference_notes,
                )
            result = evaluate(
                tables["real"],
                tables["synthetic"],
                kinds,
                target=options.targets or None,
                task=options.tasks or None,
                train=tables["train"],
                test=tables["test"],
                clients=tables["clients"] or None,
                settings=settings_data,
                ratios=options.ratios,
                lambdas=options.lambdas,
                max_rows=max_rows,
                seed=seed,
                sources=_sources(files, tables["clients"], schema, settings),
                progress=lambda line: say(f"  {line}"),
                inference=inference_data,
                direct_fits=direct_fits(direct_mu if direct_mu is not None else 1.0, seed)
                if direct and tables["clients"]
                else None,
            )
            for line in inference_notes:
                typer.echo(line, err=True)
            result.save(out, json)
        except (UsageError, ColumnNameError) as err:
            raise _fail(str(err), 2) from None
        except (DataError, SchemaError, ValueError, TypeError) as err:
            message = _name_files(str(err), files)
            lacks = str(err).startswith("the synthetic table lacks column(s)")
            if lacks and "did you mean" not in message and "(the header has" not in message:
                message += _drop_hint(tables)
            raise _fail(message, 1) from None
        except OSError as err:
            raise _fail(f"cannot write the report: {err}", 1) from None
    if not quiet:
        typer.echo(result.summary(), err=True)
    typer.echo(f"report: {out}")
    if json is not None:
        typer.echo(f"json: {json}")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------
# the steps of `fits report`
# ---------------------------------------------------------------------------------------


def direct_fits(mu: float, seed: int) -> dict[str, Any]:
    """Fits across the client files (the utility section's "fit directly across sites"
    rows): ``newton`` without privacy (the pooled maximum-likelihood estimate, as the
    pooled real data's row but from per-site sums) and FedNewton at ``mu``."""
    from fits.analysis.glm import direct_fit

    _check_direct_mu(mu)
    # the fits' own advice names fits analyze's options; the report has --direct-mu
    leave = "--no-direct leaves the direct fits out of the report"
    return {
        "Newton, non-private": direct_fit(
            "newton", None, seed,
            advice=f"the report fits it with fits' default settings; {leave}",
        ),
        f"FedNewton, mu={mu:g}": direct_fit(
            "fednewton", mu, seed,
            advice=f"a larger --direct-mu (now {mu:g}) lowers the privacy noise; {leave}",
        ),
    }  # fmt: skip


def _check_direct_mu(mu: float) -> None:
    """Refuse a ``--direct-mu`` that is no positive number, or so small that FedNewton's
    noise is no finite number.

    A mu that still gives finite noise (1e-300) is run: the utility section scores its
    fit without numpy's overflow warnings, or notes that its parameters are too large to
    score (:func:`fits.evaluation.utility.downstream_utility`).

    Parameters
    ----------
    mu : float
        The ``--direct-mu`` value.

    Raises
    ------
    UsageError
        ``mu`` is not positive and finite, or below the smallest normal float64 (its
        ``1 / mu`` overflows): checked before any file is read.
    """
    if not (mu > 0 and math.isfinite(mu)):
        raise UsageError(f"--direct-mu must be a positive number, got {mu}")
    if mu < sys.float_info.min:  # the noise's sd, clip / mu, is beyond float64
        raise UsageError(
            f"--direct-mu {mu!r} is below {sys.float_info.min:.3g}: FedNewton's privacy "
            "noise (of sd clip / mu) would not be a finite number: give a larger "
            "--direct-mu, or --no-direct"
        )


def inference_figures(
    clients: dict[str, pd.DataFrame],
    synthetic: pd.DataFrame,
    target: str,
    kinds: dict[str, str] | None,
    seed: int,
    notes: list[str] | None = None,
) -> dict:
    """The Inference section's figures, or ``{"skipped": reason}`` when the target or
    the sites do not allow it (a non-numeric target, collinear features, ...).

    Its warnings are ``note: inference check: ...`` lines on stderr, or, with ``notes``,
    appended to it (fits report says them only once the tables passed the report's own
    checks: before, a client file with text in the target column showed the inference
    check's advice about identifier columns ahead of the error naming the file). A
    check that is skipped says only why: its warnings are about a model that was not
    fitted (was: "column(s) ['note'] are left out" beside "skipped: target 'income' is
    not numeric")."""
    import warnings

    from fits.analysis import inference_check
    from fits.analysis.design import DesignError
    from fits.analysis.lsa import FedLSAError
    from fits.core.schema import SchemaError

    with warnings.catch_warnings(record=True) as caught:  # one line each, not Python's
        warnings.simplefilter("always")
        try:
            return inference_check(clients, synthetic, target, seed=seed, kinds=kinds).to_dict()
        except (FedLSAError, DesignError, SchemaError) as exc:
            caught.clear()
            return {"skipped": in_report_words(str(exc))}
        finally:
            for message in dict.fromkeys(in_report_words(str(w.message)) for w in caught):
                if notes is None:
                    typer.echo(f"note: inference check: {message}", err=True)
                else:
                    notes.append(f"note: inference check: {message}")


#: The analysis layer's advice that names ``fits analyze``'s options, and fits report's
#: own (its inference check models every client column but the target; a column is left
#: out by a --schema that declares it an identifier), as (pattern, replacement).
_REPORT_ADVICE = (
    (  # the one-pass burn-in needs more rounds than fits report runs (its default: the
        # smallest client file's rows in batches of d + 2), which it cannot be asked for
        r"ask for at least \d+ rounds \(rounds=\d+; fits analyze -R \d+\)"
        r"(?= \(the smallest site caps rounds x local steps at its row count\))",
        "the client files are too small for the check, which fits report runs at the "
        "default rounds: more rows in the smallest client file (e.g. the small sites' "
        "files merged) give it more rounds",
    ),
    (  # too few rows at the smallest site for the one-pass regime at all
        r"use regime='paper' \(fits analyze --regime paper\) with at most \d+ rounds "
        r"x local steps \(-R, -H\), or merge small sites",
        r"the client files are too small for the check, which fits report runs in this "
        r"regime only: merge the small sites' files into larger ones",
    ),
    (  # a numeric identifier: declare it one
        r"\(kinds=\{[^}]*\}; fits analyze (--kind [^)]*)\)"
        r"(?: or name the features without it \(features=\[\.\.\.\]; fits analyze "
        r"--features a,b\))?",
        r"(a --schema that declares it one: fits schema ... \1 --out schema.json, then "
        r"--schema schema.json)",
    ),
    (  # a column no model can use, when it is no feature the user named
        r"name the features without it \(features=\[\.\.\.\]; fits analyze --features a,b\)",
        'leave it out of the check with a --schema that declares it an identifier ("kind": "id")',
    ),
    (  # left out already: fits report cannot choose features
        r"; name the features to choose them yourself \(features=\[\.\.\.\]; fits analyze "
        r"--features a,b\)",
        "",
    ),
    (  # the client files must hold the same columns: nothing to name in fits report
        r" A column the model does not use may be at some sites only: name the features, "
        r"which every site must hold \(features=\[\.\.\.\]; fits analyze --features a,b\)",
        "",
    ),
    (  # fits report drops no rows (missing='drop' is an analysis option): the other fix
        r"leave those rows out with missing='drop'(?: \(fits analyze --missing drop\))?, or ",
        "",
    ),
    (
        r", or pass missing='drop', which leaves such rows out at the sites and in the "
        r"synthetic table alike",
        "",
    ),
    (r"; fits analyze [^)]*\)", ")"),  # any other: its Python words alone
    (r" ?\(fits analyze [^)]*\)", ""),
)


def in_report_words(text: str) -> str:
    """``text`` (a message of the analysis layer, which the inference check raises or
    warns) with its advice for ``fits analyze`` (``--features``, ``--kind``, ``-R``, ...)
    in fits report's own words: what fits report's options do instead, or no command's
    options where fits report has none."""
    import re

    for pattern, replacement in _REPORT_ADVICE:
        text = re.sub(pattern, replacement, text)
    return text


@dataclass(frozen=True)
class _Files:
    """The input files of one report."""

    #: The real table's files (several: their rows pooled, in this order).
    real: tuple[Path, ...]
    synthetic: Path
    train: Path | None
    test: Path | None
    clients: list[Path]

    @property
    def real_label(self) -> str:
        """The real table's file, or its files joined by " + ", for messages."""
        return " + ".join(str(p) for p in self.real)


def _check_target_task(real: pd.DataFrame, options: _Options, kinds: dict[str, str] | None) -> None:
    """Refuse, before the inference check runs, a first target that downstream utility
    cannot take (a text target of three levels, :func:`fits.evaluation.utility.
    infer_task`): the refusal came after the check, whose notes followed the error.
    Kinds as the schema declares them, else text nominal and numbers continuous (a
    numeric target is never refused here)."""
    from fits.evaluation.utility import infer_task

    target = options.targets[0]
    if options.tasks or target not in real.columns:
        return  # a task given: evaluate checks it; a missing column: evaluate says so
    numeric = pd.api.types.is_numeric_dtype(real[target]) and not pd.api.types.is_bool_dtype(
        real[target]
    )
    kind = (kinds or {}).get(target) or ("continuous" if numeric else "nominal")
    infer_task({target: kind}, target, [real])


@dataclass(frozen=True)
class _Options:
    """The checked evaluation options of one report."""

    targets: list[str]
    tasks: list[str]
    ratios: tuple[float, ...]
    lambdas: tuple[float, ...]


def _real_files(real: list[Path] | None, clients: list[Path]) -> tuple[Path, ...]:
    """The real table's files: ``--real`` as given (each once: a file given twice, or
    two files of the same bytes, would count its rows twice), else the client files."""
    from fits.io import find_duplicate_files

    if not real:
        if not clients:
            raise UsageError(
                "give the real table: --real FILE (repeat it for several files, e.g. one "
                "per site; their rows are pooled), or the sites' files with --clients, "
                "whose rows are then pooled as the real table"
            )
        return tuple(clients)
    twice = find_duplicate_files(real)
    if twice is not None:
        first, second = twice
        raise UsageError(
            f"--real {str(first)!r} and {str(second)!r} are the same file (or hold the "
            "same bytes); give each real table once"
        )
    return tuple(real)


def _warn_synthetic_is_real(synthetic: Path, real: tuple[Path, ...]) -> None:
    """Warn when ``--synthetic`` is a real table's file (the same file, a link to it, or
    the same bytes): the report then compares the real table with itself, and its
    scores say nothing of a synthesis (it said only "look closer", from 100% copies)."""
    import warnings

    from fits.io import find_duplicate_files

    for path in real:
        if find_duplicate_files([path, synthetic]) is not None:
            warnings.warn(
                f"--synthetic {str(synthetic)!r} is the real table's file {str(path)!r} (or "
                "holds the same bytes): the report compares the real rows with themselves; "
                "give the synthetic table fits wrote",
                UserWarning,
                stacklevel=2,
            )
            return


def _client_files(clients: list[Path] | None, more: list[Path] | None) -> list[Path]:
    """``--clients a b c``: typer gives ``a`` to the option and ``b c`` as arguments."""
    if more:
        if not clients:
            raise UsageError(
                f"unexpected argument(s) {[str(p) for p in more]}; client files go after --clients"
            )
        return [*clients, *more]
    return list(clients or [])


def _check_options(
    task: list[str] | None,
    target: list[str] | None,
    ratio: list[str] | None,
    lam: list[str] | None,
    out: Path,
    json: Path | None,
) -> _Options:
    """Check the option values before any file is read (usage errors: exit code 2)."""
    tasks = list(task or [])
    for t in tasks:
        if t not in ("regression", "classification"):
            raise UsageError(f"--task {t!r}: use 'regression' or 'classification'")
    targets = list(target or [])
    twice = sorted({t for t in targets if targets.count(t) > 1})
    if twice:
        raise UsageError(f"--target {twice} given more than once; name each target once")
    if tasks and not targets:
        raise UsageError("--task needs --target")
    if len(tasks) > 1 and len(tasks) != len(targets):
        raise UsageError(f"{len(tasks)} --task values for {len(targets)} --target columns")
    ratios = _parse_numbers(ratio, "--ratio", (1.0,))
    lambdas = _parse_numbers(lam, "--lambda", (0.1,))
    if any(not r >= 0 for r in ratios):  # nan too
        raise UsageError(
            f"--ratio values must be >= 0 (inf: all rows), got {', '.join(map(str, ratios))}"
        )
    if any(not (x >= 0 and math.isfinite(x)) for x in lambdas):
        raise UsageError("--lambda values must be finite and >= 0")
    for path, option in ((out, "--out"), (json, "--json")):
        if path is not None and not (path.parent if str(path.parent) else Path(".")).is_dir():
            raise UsageError(
                f"{option} {str(path)!r}: the folder {str(path.parent)!r} does not exist"
            )
    if out.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"--out {str(out)!r}: the report is HTML; name it *.html")
    return _Options(targets, tasks, ratios, lambdas)


def _match_targets(options: _Options, real_frame: pd.DataFrame, real: str) -> _Options:
    """``options`` with each ``--target`` resolved to its header in ``--real``
    (:func:`~fits.cli.options.match_columns`); a name no header matches is a usage error."""
    from .options import ColumnNameError, match_columns

    try:
        targets = match_columns(
            options.targets, list(real_frame.columns), "--target", f"--real {real!r}"
        )
    except ColumnNameError as err:
        raise UsageError(str(err)) from None
    return dataclasses.replace(options, targets=targets)


def _check_outputs(
    out: Path, json: Path | None, files: _Files, schema: Path | None, settings: Path | None
) -> None:
    """``--out`` and ``--json`` are usable and are no input (the same file, however
    named: see :func:`fits.io.check_output`), nor each other."""
    from fits.io import OutputError, check_output

    inputs = [
        (label, path)
        for label, path in (
            *(("--real", r) for r in files.real),
            ("--synthetic", files.synthetic),
            ("--train", files.train),
            ("--test", files.test),
            ("--schema", schema),
            ("--settings", settings),
            *(("--clients", c) for c in files.clients),
        )
        if path is not None
    ]
    for path, option in ((out, "--out"), (json, "--json")):
        if path is not None:
            try:
                check_output(path, inputs, option=option)
            except OutputError as err:
                raise UsageError(str(err)) from None
    if json is not None and out.resolve() == json.resolve():
        raise UsageError(f"--json {str(json)!r} is the same file as --out {str(out)!r}")


def _check_clients(clients: list[Path]) -> None:
    """No client file is given twice (the same file, a link to it or the same bytes):
    its rows would count twice in the training rows and as two clients in M2-M4."""
    from fits.io import find_duplicate_files

    twice = find_duplicate_files(clients)
    if twice is not None:
        first, second = twice
        raise UsageError(
            f"--clients {str(first)!r} and {str(second)!r} are the same file (or hold the "
            "same bytes); give each client's table once"
        )


def _read_tables(files: _Files, na: list[str | tuple[str, str]] | None = None) -> dict[str, Any]:
    """Every input table (``na``: the texts read as missing values, ``--na-values``);
    clients by file name (the path where two names collide)."""
    from fits.core.schema import na_labels_across

    tables: dict[str, Any] = {
        "real": _pooled_real(files.real, na),
        "synthetic": read_table(files.synthetic, "--synthetic", na, lenient=True),
        "train": read_table(files.train, "--train", na) if files.train is not None else None,
        "test": read_table(files.test, "--test", na) if files.test is not None else None,
    }
    tables["clients"] = {
        name: read_table(path, "--clients", na)
        for name, path in _client_names(files.clients).items()
    }
    # a file's column of 'NA' alone, where another real file holds the label 'NA': the
    # label, as the sites read it at setup (fits.core.schema.labels_of_na_only)
    real = [k for k in ("real", "train", "test") if tables[k] is not None]
    clients = list(tables["clients"])
    frames = na_labels_across([*(tables[k] for k in real), *tables["clients"].values()])
    tables.update(zip(real, frames[: len(real)], strict=True))
    tables["clients"] = dict(zip(clients, frames[len(real) :], strict=True))
    return tables


def _without_dropped(tables: dict[str, Any], drop: list[str] | None) -> dict[str, Any]:
    """The real tables without the ``--drop`` columns, where they hold them (the
    synthetic table is left as it is); a name no real table holds is refused as a
    misspelt one (:func:`fits.cli.drop.drop_columns`)."""
    if not drop:
        return tables
    from .drop import drop_columns

    real = {k: tables[k] for k in ("real", "train", "test") if tables[k] is not None}
    clients = {f"client {n}": t for n, t in tables["clients"].items()}
    kept = drop_columns({**real, **clients}, drop)
    out = {**tables, **{k: kept[k] for k in real}}
    out["clients"] = {n: kept[f"client {n}"] for n in tables["clients"]}
    return out


def _pooled_real(
    paths: tuple[Path, ...], na: list[str | tuple[str, str]] | None = None
) -> pd.DataFrame:
    """The real table: one file, or several files' rows one after the other (each must
    hold the same columns; the first file's order is kept)."""
    from fits.core.schema import na_labels_across

    frames = na_labels_across([read_table(p, "--real", na) for p in paths])
    if len(frames) == 1:
        return frames[0]
    first = list(frames[0].columns)
    for path, frame in zip(paths[1:], frames[1:], strict=True):
        if set(frame.columns) != set(first) or frame.columns.duplicated().any():
            lacks = [c for c in first if c not in frame.columns]
            extra = [c for c in frame.columns if c not in first]
            raise DataError(
                f"--real {str(path)!r} does not hold the columns of --real "
                f"{str(paths[0])!r} (it lacks {lacks}, and has {extra} besides): the real "
                "files are pooled into one table, so each must hold the same columns"
            )
    return pd.concat([f[first] for f in frames], ignore_index=True)


def _parsed_tables(tables: dict[str, Any], kinds: dict[str, str] | None) -> dict[str, Any]:
    """The real tables (``real``, ``train``, ``test``, ``clients``) with the text the
    sites read as numbers or dates read so (:func:`~fits.core.schema.parse_text_columns`:
    "$1,234.56", "12.5" beside a "?" marker, "03/15/2021"; columns ``kinds`` says are
    nominal left as text), as a synthetic table holds them: else a real "$1,234.56"
    and a synthetic 1234.56 would be two labels, never equal. The ``synthetic`` table
    (which fits writes with plain numbers, and dates in the sites' format) has the
    columns the real tables read as dates of a format read with that format
    (:func:`_synthetic_dates`): never guessed anew, since a small synthetic table may
    hold no day above 12 to tell day from month."""
    from fits.core.schema import parse_text_columns

    declared = {c: {"kind": k} for c, k in (kinds or {}).items()}
    formats: dict[str, list[str]] = {}

    def parse(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        if frame is None:
            return None
        parsed, notes = parse_text_columns(frame, declared, text_only=True)
        for col, note in notes.items():
            if note.get("as") == "date" and note["format"] not in formats.setdefault(col, []):
                formats[col].append(note["format"])
        return parsed

    out = {k: parse(v) for k, v in tables.items() if k not in ("clients", "synthetic")}
    out["clients"] = {name: parse(frame) for name, frame in tables["clients"].items()}
    out["synthetic"] = _synthetic_dates(tables["synthetic"], formats)
    return out


def _synthetic_dates(frame: pd.DataFrame, formats: dict[str, list[str]]) -> pd.DataFrame:
    """``frame`` with each text column ``formats`` names read as dates with the first of
    its formats (``strftime`` formats, an ambiguous day noted or not) that reads every
    present value; a column none reads wholly is left as text (the report then says it
    holds no dates)."""
    from fits.core.schema import AMBIGUOUS_DAY, DATE_FORMATS

    out = frame
    for col, fmts in formats.items():
        if col not in frame.columns or pd.api.types.is_datetime64_any_dtype(frame[col].dtype):
            continue
        present = frame[col].dropna()
        for fmt in (f.removesuffix(AMBIGUOUS_DAY) for f in fmts):
            if fmt not in DATE_FORMATS[1:]:
                continue  # ISO 8601: fits.io.read_table has read it already
            dates = pd.to_datetime(frame[col], format=fmt, errors="coerce")
            if dates[present.index].notna().all():
                out = out.copy(deep=False) if out is frame else out
                out[col] = dates
                break
    return out


def _schema_kinds(schema: Path, real_frame: pd.DataFrame, real: str) -> dict[str, str]:
    """The column kinds of a ``fits schema`` file, checked against the real table."""
    from fits.core.schema import Schema

    if not schema.is_file():
        raise UsageError(f"--schema {str(schema)!r}: no such file")
    try:
        parsed = Schema.from_json(schema.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DataError(
            f"--schema {str(schema)!r}: not a usable schema file ({err}); write one "
            "with `fits schema`"
        ) from None
    kinds = parsed.kinds()
    unknown = sorted(set(kinds) - set(real_frame.columns))
    if unknown:
        raise DataError(
            f"--schema {str(schema)!r} names column(s) {unknown} that --real {real!r} lacks"
        )
    named = {c.name for c in parsed.columns if c.indicates is None}  # not its indicators
    unnamed = [str(c) for c in real_frame.columns if c not in named]
    if unnamed:  # their kinds would be inferred silently, not the file's: refused, as
        # fits synthesize --schema refuses a table column the schema lacks (exit 1)
        raise DataError(
            f"--schema {str(schema)!r} does not match --real {real!r}: column(s) "
            f"{unnamed} of --real are not in the schema, so their kinds are not the file's. "
            "Add them to the schema (`fits schema` writes one that matches), or leave them "
            "out of the tables"
        )
    return kinds


def _check_schema_numbers(
    schema: Path, kinds: dict[str, str], real_frame: pd.DataFrame, real: str
) -> None:
    """Refuse a column the schema declares continuous that the real table holds as text.

    Parameters
    ----------
    schema : pathlib.Path
        The ``--schema`` file (for the message).
    kinds : dict of str to str
        Its column kinds.
    real_frame : pandas.DataFrame
        The real table, its text read as numbers or dates where the sites read it so
        (:func:`_parsed_tables`).
    real : str
        The real table's file(s), for the message.

    Raises
    ------
    DataError
        A ``"continuous"`` column of text (e.g. a schema edited by hand): the message
        names the schema, the kind it declares and the fix (was: "column 'g' in the real
        table is not numeric (dtype str)", without a word of the schema).
    """
    from fits.evaluation.encoding import text_values

    for col, kind in kinds.items():
        if kind != "continuous" or col not in real_frame.columns:
            continue
        text = text_values(real_frame[col])
        if not text:
            continue
        raise DataError(
            f'--schema {str(schema)!r} declares column {col!r} of kind "continuous", but '
            f"--real {real!r} holds text in it (values like {text[:3]}): correct the "
            'column\'s kind in the schema ("nominal" for labels, "ordinal" for ordered '
            'ones, "id" to leave it out; `fits schema` writes the kinds it infers), or '
            "write the column as numbers"
        )


def _settings_json(settings: Path) -> dict[str, Any]:
    """The ``--settings`` file: one JSON object."""
    if not settings.is_file():
        raise UsageError(f"--settings {str(settings)!r}: no such file")
    try:
        data = _json.loads(settings.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise DataError(f"--settings {str(settings)!r}: not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise DataError(f"--settings {str(settings)!r}: expected a JSON object")
    return data


def _drop_hint(tables: dict[str, Any]) -> str:
    """The ``--drop`` options that leave out of the real tables the columns the
    synthetic table lacks (``fits synthesize --drop`` left them out), as a sentence."""
    import shlex

    if tables.get("real") is None or tables.get("synthetic") is None:
        return ""
    lacking = [c for c in tables["real"].columns if c not in tables["synthetic"].columns]
    if not lacking:
        return ""
    drops = " ".join(f"--drop {shlex.quote(str(c))}" for c in lacking)
    return f". Here: {drops}"


def _name_files(message: str, files: _Files) -> str:
    """An evaluator's message with the file behind "the real table" (and the others,
    the clients' too: "the client 'a' table (--clients 'x/a.csv')")."""
    from fits.report.build import client_label

    for role in ("real", "synthetic", "train", "test"):
        path = files.real_label if role == "real" else getattr(files, role)
        phrase = f"the {role} table"
        if path is not None and phrase in message:
            message = message.replace(phrase, f"{phrase} (--{role} {str(path)!r})", 1)
    for name, path in _client_names(files.clients).items():
        phrase = f"the {client_label(name)} table"
        if phrase in message:
            message = message.replace(phrase, f"{phrase} (--clients {str(path)!r})", 1)
    return message


def _client_names(clients: list[Path]) -> dict[str, Path]:
    """Each client file by the name the report gives it: its file name without the
    extension, or its path where two files share that name."""
    names: dict[str, Path] = {}
    for path in clients:
        names[path.stem if path.stem not in names else str(path)] = path
    return names


def _sources(
    files: _Files, clients: dict[str, pd.DataFrame], schema: Path | None, settings: Path | None
) -> dict[str, str]:
    """Where each table came from, as the page's "Inputs" table shows it."""
    sources = {"real": files.real_label, "synthetic": str(files.synthetic)}
    if files.train is not None:
        sources["train"] = str(files.train)
    if files.test is not None:
        sources["test"] = str(files.test)
    for name, path in zip(clients, files.clients, strict=True):
        sources[f"client {name}"] = str(path)
    if schema is not None:
        sources["schema"] = str(schema)
    if settings is not None:
        sources["settings"] = str(settings)
    return sources
