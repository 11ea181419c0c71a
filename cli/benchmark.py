"""``fits benchmark``: the paper-reproduction benchmark on one data set.

Registered on the ``fits`` app in :mod:`fits.cli.main`. Writes ``DIR/<dataset>.md`` (the
tables) and ``DIR/<dataset>.json`` (every per-repeat number), both atomically, and
rewrites them after every repeat so an interrupted run keeps what it finished.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import time
import warnings
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from .errors import fail as _fail
from .options import (
    BoostingOpt,
    ColumnDesignOpt,
    ColumnModelOpt,
    ColumnNameError,
    ColumnPenaltyOpt,
    DesignOpt,
    NominalPenaltyOpt,
    OrdinalPenaltyOpt,
    RelevanceBudgetOpt,
    RelevanceOpt,
    Secure,
    SmoothingOpt,
    TuneRelevanceOpt,
    check_nominal_penalty,
    check_smoothing,
    parse_boosting,
    parse_column_designs,
    parse_column_models,
    parse_column_penalties,
    parse_order,
    parse_relevance,
    pooled_without_secure,
    read_site_policy,
    tune_relevance_value,
)

__all__ = ["DatasetChoice", "GeneratorChoice", "benchmark"]


class GeneratorChoice(StrEnum):
    """Generators ``fits benchmark`` runs."""

    knn = "knn"
    gaussian = "gaussian"


class DatasetChoice(StrEnum):
    """Data sets ``fits benchmark`` runs on."""

    simulation = "simulation"
    adult = "adult"
    bike = "bike"
    german = "german"


def benchmark(
    dataset: Annotated[
        DatasetChoice,
        typer.Option(
            "--dataset",
            "-d",
            case_sensitive=False,
            help="Data set: simulation, adult, bike or german.",
        ),
    ],
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Folder holding the UCI files (default: the FITS_DATA_DIR variable); "
            "not needed for the simulation.",
        ),
    ] = None,
    repeats: Annotated[
        int, typer.Option("--repeats", "-r", min=1, help="Repeats (seeds seed .. seed+R-1).")
    ] = 5,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for <dataset>.md and <dataset>.json.")
    ] = Path("benchmark-results"),
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="Seed of the first repeat (an integer >= 0).")
    ] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress messages.")] = False,
    rows: Annotated[
        int | None,
        typer.Option(
            "--rows",
            min=50,
            help="Rows of the data (simulation size, or a seeded subsample of a real data "
            "set: at least 50, at most the rows it has); for quick checks.",
        ),
    ] = None,
    no_boosting: Annotated[
        bool,
        typer.Option(
            "--no-boosting",
            help="Skip the gradient-boosting model in the modes M1-M4 (the headline "
            "comparison always runs).",
        ),
    ] = False,
    generator: Annotated[
        list[GeneratorChoice] | None,
        typer.Option(
            "--generator",
            "-g",
            help="Generator(s) to run: knn (FITS-K) and/or gaussian (FITS-G); repeat the "
            "option for both. Default: both.",
        ),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="The limits every site enforces (JSON object, e.g. "
            "'{\"min_effective_rows\": 0}' turns the effective-rows floor off; see "
            "docs/privacy.md). Default: the default policy.",
        ),
    ] = None,
    ordinal_penalty: OrdinalPenaltyOpt = None,
    nominal_penalty: NominalPenaltyOpt = None,
    no_modes: Annotated[
        bool,
        typer.Option(
            "--no-modes",
            help="Headline only: skip the per-client modes M1-M4 and the per-column fidelity.",
        ),
    ] = False,
    no_rules: Annotated[
        bool,
        typer.Option(
            "--no-rules",
            help="Draw every column by the chain (no generation by exact rules); the "
            "share of rows keeping each rule is reported either way.",
        ),
    ] = False,
    near_linear: Annotated[
        bool,
        typer.Option(
            "--near-linear/--no-near-linear",
            help="Draw near-linear columns as their residual about the line in an "
            "earlier column (on by default; --no-rules switches it off too).",
        ),
    ] = True,
    design: DesignOpt = None,
    column_design: ColumnDesignOpt = None,
    smoothing: SmoothingOpt = "fixed",
    secure_aggregation: Secure = False,
    column_penalty: ColumnPenaltyOpt = None,
    column_model: ColumnModelOpt = None,
    boosting: BoostingOpt = None,
    relevance: RelevanceOpt = None,
    tune_relevance: TuneRelevanceOpt = None,
    relevance_budget: RelevanceBudgetOpt = None,
    order: Annotated[
        list[str] | None,
        typer.Option(
            "--order",
            help="Chain order: col1,col2,... naming every column of the data set once "
            "(default: the data set's order, see docs/benchmarks.md); a header that holds "
            "a comma in a JSON array. Repeat it to go on with the list.",
        ),
    ] = None,
) -> None:
    """Run the FITS paper's protocol (FITS-G and FITS-K, 10 clients, modes M1-M4).

    Prints, per generator: the exact energy distance to the full data, the real test
    split's (the floor) and their ratio, and gradient boosting (scikit-learn defaults)
    trained on the real training split and on the synthetic table, scored on the test
    split.
    """
    from fits.benchmark import run_benchmark, write_result
    from fits.core.schema import SchemaError
    from fits.datasets import ChecksumError, load_dataset, resolve_data_dir
    from fits.federation.policy import PolicyError

    problem = check_smoothing(smoothing) or check_nominal_penalty(nominal_penalty)
    if problem:
        _fail(problem, 2)
    folder = out  # --out, or its nearest existing parent: a folder (created when written)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.exists() and not folder.is_dir():
        _fail(
            f"--out {str(out)!r}: {str(folder)!r} is a file; fits benchmark writes "
            "<dataset>.md and <dataset>.json into a folder: give a folder (it is created "
            "if missing)",
            2,
        )
    try:
        site_policy = read_site_policy(policy)
    except ValueError as exc:
        _fail(str(exc), 2)
    problem = pooled_without_secure(site_policy, secure_aggregation)
    if problem:
        _fail(problem, 2)

    name = dataset.value
    if name != "simulation":
        # a data folder not given, not found, a file, or without the data set's file: a
        # usage error (exit 2), as a missing input file is to every command; a file that
        # is there but not the data set (its checksum) is a data error (exit 1)
        try:
            folder = resolve_data_dir(data_dir)
        except FileNotFoundError as exc:
            _fail(str(exc), 2)
        if not folder.is_dir():
            where = "--data-dir" if data_dir is not None else "FITS_DATA_DIR"
            if folder.exists():  # the data file itself, say
                _fail(
                    f"{where} {str(folder)!r} is a file, not a folder: give the folder that "
                    "holds the UCI files, not a file in it",
                    2,
                )
            _fail(f"{where} {str(folder)!r}: no such directory", 2)
    try:
        column_designs = parse_column_designs(column_design)
        column_penalties = parse_column_penalties(column_penalty)
        column_models = parse_column_models(column_model)
        boosting_params = parse_boosting(boosting, column_models)
        relevance_weights = parse_relevance(relevance)
    except ValueError as exc:
        _fail(str(exc), 2)
    chain_order: list[str] | None = None
    named = column_designs or column_penalties or column_models or relevance_weights
    if named or order is not None:
        try:
            loaded = load_dataset(name, data_dir)
        except FileNotFoundError as exc:
            _fail(str(exc), 2)
        except ChecksumError as exc:
            _fail(str(exc))
        chain = list(loaded.order or loaded.frame.columns)
        if order is not None:
            try:
                chain_order = chain = parse_order(order, chain)
            except ColumnNameError as exc:
                _fail(str(exc), 2)
        unknown = sorted(set(column_designs) - set(chain[1:]))
        if unknown:
            _fail(
                f"--column-design: {unknown} not in {name}'s chain after its first column "
                f"(chain: {', '.join(chain)})",
                2,
            )
        boosted = [c for c in chain if column_models.get(c, column_models.get("*")) == "boosting"]
        for column in column_models:
            if column != "*" and column not in chain[1:]:
                _fail(
                    f"--column-model {column}: not in {name}'s chain after its first "
                    f"column (chain: {', '.join(chain)})",
                    2,
                )
        if column_penalties or relevance_weights:
            _check_kernel_options(
                loaded, chain, boosted, generator, column_penalties, relevance_weights
            )
    base = out / name
    from fits.io import OutputError, check_output

    for suffix in (".md", ".json") if out.is_dir() else ():  # they are rewritten after
        try:  # each repeat: check them before the first
            check_output(base.with_name(name + suffix))
        except OutputError as exc:
            _fail(str(exc), 2)
    command = "fits " + " ".join(shlex.quote(a) for a in sys.argv[1:])

    def say(message: str) -> None:
        if not quiet:
            typer.echo(f"{time.strftime('%H:%M:%S')} {message}", err=True)

    from .errors import interruptible

    stopped = f"only finished repeats are kept ({str(base)}.md and .json are written after each)"
    with interruptible(stopped), _constant_notes(rows):
        try:
            result = run_benchmark(
                name,
                data_dir=data_dir,
                repeats=repeats,
                seed=seed,
                progress=say,
                n_rows=rows,
                boosting=not no_boosting,
                checkpoint=base,
                command=command,
                generators=[g.value for g in generator] if generator else ("gaussian", "knn"),
                site_policy=site_policy,
                modes=not no_modes,
                synthesizer_params={
                    **({"rules": False} if no_rules else {}),
                    **({} if near_linear else {"near_linear": False}),
                    **({"order": chain_order} if chain_order is not None else {}),
                    **({"design": design.value} if design is not None else {}),
                    **({"column_designs": column_designs} if column_designs else {}),
                    **({"column_models": column_models} if column_models else {}),
                    **({"boosting": boosting_params} if boosting_params else {}),
                    **({"smoothing": smoothing} if smoothing != "fixed" else {}),
                    **({"secure_aggregation": True} if secure_aggregation else {}),
                    **(
                        {
                            "tune_relevance": tune_relevance_value(tune_relevance),
                            "relevance_budget": relevance_budget,
                        }
                        if tune_relevance
                        else {}
                    ),
                }
                or None,
                kernel_params={
                    **({"ordinal_penalty": ordinal_penalty} if ordinal_penalty is not None else {}),
                    **({"nominal_penalty": nominal_penalty} if nominal_penalty is not None else {}),
                    **({"column_penalties": column_penalties} if column_penalties else {}),
                    **({"relevance": relevance_weights} if relevance_weights else {}),
                }
                or None,
            )
        except FileNotFoundError as exc:
            _fail(str(exc), 2)
        except ChecksumError as exc:
            _fail(str(exc))
        except SchemaError as exc:  # what the sites refuse (a tiny --rows subsample)
            hint = f" (--rows {rows} may be too few rows for {name}; ask for more)" if rows else ""
            _fail(f"{exc}{hint}")
        except PolicyError as exc:  # a site's policy refused (e.g. tuning_candidates)
            _fail(str(exc))
        except ValueError as exc:  # weights the fit finds would do nothing
            text = str(exc)
            if text.startswith("n_rows="):  # more rows than the data set has
                _fail(text.replace("n_rows=", "--rows ").replace("n_rows", "--rows"), 2)
            if text.startswith("column_penalties["):
                _fail(f"--column-penalty {text.removeprefix('column_penalties')}", 2)
            if text.startswith("relevance["):
                text = text.replace("(--kernel gaussian)", "(--generator gaussian)")
                _fail(f"--relevance {text.removeprefix('relevance')}", 2)
            if text.startswith("tune_relevance"):  # ': no column', ' names ... twice'
                _fail(f"--tune-relevance{text.removeprefix('tune_relevance')}", 2)
            if text.startswith("learning relevance weights"):  # the budget
                _fail(f"--relevance-budget: {text}", 2)
            raise
        except OSError as exc:  # writing a repeat's results: a full disk, say
            _write_failed(out, exc)
        try:
            md, js = write_result(result, base)
        except OSError as exc:
            _write_failed(out, exc)
    typer.echo(result.headline_text())
    typer.echo(f"wrote {md}")
    typer.echo(f"wrote {js}")


@contextlib.contextmanager
def _constant_notes(rows: int | None) -> Iterator[None]:
    """Say once, as a ``note:`` line, which columns the benchmark's fits wrote as a
    constant (one value, or none, at every site of a split: a small ``--rows``
    subsample), instead of each fit's raw warning with synthesis advice (``--drop``)
    that the benchmark does not take; every other warning is passed on as it was."""
    from fits.core.schema import ConstantNote, DataNote

    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as recorded:
            warnings.simplefilter("always", ConstantNote)
            try:
                yield
            finally:
                caught = list(recorded)
    finally:  # passed on outside the recording: inside, each warning passed on was
        said: set[str] = set()  # recorded again, and the loop over them never ended
        for w in caught:
            if issubclass(w.category, ConstantNote):
                text = str(w.message).split(" To leave them out", 1)[0]
                hint = f" (--rows {rows} subsamples the data set)" if rows else ""
            elif issubclass(w.category, DataNote):  # a note on the data, once, as a line
                text, hint = str(w.message), ""
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                continue
            if text not in said:
                said.add(text)
                typer.echo(f"note: {text}{hint}", err=True)


def _write_failed(out: Path, exc: OSError) -> None:
    """Exit 2 with one line for results that could not be written (a full disk, a
    quota); an OSError without an errno is no writer's and goes on."""
    if exc.errno is None:
        raise exc
    _fail(
        f"--out {str(out)!r}: cannot write the results ({exc.strerror or exc}); the "
        "files already written stay: free some space or write elsewhere",
        2,
    )


def _check_kernel_options(
    loaded: Any,
    chain: list[str],
    boosted: list[str],
    generator: Any,
    column_penalties: dict[str, float],
    relevance: dict[str, dict[str, float]],
) -> None:
    """Refuse ``--column-penalty`` and ``--relevance`` settings that would do nothing on
    the data set, before anything runs: the kernels' own check
    (:func:`fits.core.kernels.check_kernel_settings`, which every site and
    ``FITSSynthesizer`` run) on the data set's schema, for each generator asked for."""
    from fits.core.kernels import GaussianKernel, KNNKernel, check_kernel_settings
    from fits.core.schema import Schema

    schema = Schema.detect(loaded.frame, kinds=loaded.kinds, order=chain, rules=False)
    names = [g.value for g in generator] if generator else ["gaussian", "knn"]
    for name in names:
        kind = KNNKernel if name == "knn" else GaussianKernel
        kernel = kind(column_penalties=column_penalties, relevance=relevance)
        try:
            check_kernel_settings(kernel, schema, boosted=boosted)
        except ValueError as exc:
            text = str(exc)
            if text.startswith("column_penalties["):
                _fail(f"--column-penalty {text.removeprefix('column_penalties')}", 2)
            text = text.replace("(--kernel gaussian)", "(--generator gaussian)")
            _fail(f"--relevance {text.removeprefix('relevance')}", 2)
