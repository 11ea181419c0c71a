"""``fits report``: the fidelity report of a synthetic table, as HTML (and JSON).

Registered on the ``fits`` app in :mod:`fits.cli.main`.
"""

from __future__ import annotations

import json as _json
import math
import sys
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

__all__ = ["read_table", "report"]


#: File extensions ``fits report`` reads.
class DataError(Exception):
    """A data problem (unreadable or empty file, inconsistent tables): exit code 1."""


class UsageError(Exception):
    """A problem with the command line itself: exit code 2."""


def read_table(path: Path, option: str) -> pd.DataFrame:
    """Read a ``.csv`` or ``.parquet`` file, with errors that name the file.

    Parameters
    ----------
    path : pathlib.Path
        The file.
    option : str
        The command-line option it came from (for messages), e.g. ``"--real"``.

    Raises
    ------
    UsageError
        The file does not exist, is a folder, or has an unknown extension.
    DataError
        The file cannot be parsed or holds no rows.
    """
    from fits.io import TABLE_SUFFIXES, DataFileError
    from fits.io import read_table as _read_table

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
        return _read_table(path)
    except DataFileError as err:
        raise DataError(f"{option} {err}") from None


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


def report(
    real: Annotated[
        Path,
        typer.Option(
            "--real",
            help="The real reference table (.csv or .parquet): the full real data.",
            show_default=False,
        ),
    ],
    synthetic: Annotated[
        Path,
        typer.Option(
            "--synthetic", help="The synthetic table (.csv or .parquet).", show_default=False
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Where to write the HTML report.")] = Path(
        "report.html"
    ),
    json: Annotated[
        Path | None,
        typer.Option("--json", help="Also write every number of the report as JSON here."),
    ] = None,
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            metavar="COL",
            help="Response column for downstream utility and the 'covariates + response' "
            "energy distance; repeat for several.",
        ),
    ] = None,
    task: Annotated[
        list[str] | None,
        typer.Option(
            "--task",
            metavar="TASK",
            help="regression or classification (default: inferred); once for all targets "
            "or once per --target.",
        ),
    ] = None,
    train: Annotated[
        Path | None,
        typer.Option("--train", help="The real rows the synthesizer was fitted on."),
    ] = None,
    test: Annotated[
        Path | None,
        typer.Option("--test", help="Real rows held out from fitting (test set and floors)."),
    ] = None,
    clients: Annotated[
        list[Path] | None,
        typer.Option(
            "--clients",
            metavar="SITE_FILE",
            help="One file per client (the sites' real rows), for the per-client modes "
            "M2-M4: --clients a.csv b.csv c.csv (or repeat --clients).",
        ),
    ] = None,
    schema: Annotated[
        Path | None,
        typer.Option(
            "--schema",
            help="Schema JSON (from `fits schema`) whose column kinds to use "
            "(default: inferred from --real).",
        ),
    ] = None,
    settings: Annotated[
        Path | None,
        typer.Option("--settings", help="JSON file of the settings that produced the data."),
    ] = None,
    ratio: Annotated[
        list[str] | None,
        typer.Option(
            "--ratio", metavar="R", help="M3's r (synthetic rows per local row; inf = all). [1]"
        ),
    ] = None,
    lam: Annotated[
        list[str] | None,
        typer.Option(
            "--lambda", metavar="LAMBDA", help="M4's weight of the synthetic rows' loss. [0.1]"
        ),
    ] = None,
    max_rows: Annotated[
        int | None,
        typer.Option(
            "--max-rows",
            min=1,
            help="Subsample each table to this many rows for the energy distances "
            "(default: exact).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every random draw.")] = 0,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="Print only where the outputs are.")
    ] = False,
    more_clients: Annotated[
        list[Path] | None,
        typer.Argument(hidden=True, show_default=False, metavar="SITE_FILE"),
    ] = None,
) -> None:
    """Write the fidelity report of a synthetic table: one self-contained HTML page.

    The page opens with a summary (energy distance against its floors, column and
    pair fidelity, downstream utility, privacy checks), then shows each part in
    detail. It embeds its figures and needs no network access.

    Example:

        fits report --real adult.csv --synthetic synthetic.csv --out report.html
        --json report.json --target income --train train.csv --test test.csv
        --clients site1.csv site2.csv site3.csv

    Exit status: 0 on success, 1 for a data problem (unreadable file, columns that
    do not match), 2 for a usage problem (unknown option value or file type).
    """
    from fits.core.schema import Schema, SchemaError
    from fits.report import evaluate

    def say(text: str) -> None:
        if not quiet:
            typer.echo(text, err=True)

    try:
        if more_clients:
            if not clients:
                raise UsageError(
                    f"unexpected argument(s) {[str(p) for p in more_clients]}; client files "
                    "go after --clients"
                )
            clients = [*clients, *more_clients]
        tasks = list(task or [])
        for t in tasks:
            if t not in ("regression", "classification"):
                raise UsageError(f"--task {t!r}: use 'regression' or 'classification'")
        targets = list(target or [])
        if tasks and not targets:
            raise UsageError("--task needs --target")
        if len(tasks) > 1 and len(tasks) != len(targets):
            raise UsageError(f"{len(tasks)} --task values for {len(targets)} --target columns")
        ratios = _parse_numbers(ratio, "--ratio", (1.0,))
        lambdas = _parse_numbers(lam, "--lambda", (0.1,))
        if any(r < 0 for r in ratios):
            raise UsageError("--ratio values must be >= 0")
        if any(not (x >= 0 and math.isfinite(x)) for x in lambdas):
            raise UsageError("--lambda values must be finite and >= 0")
        for path, option in ((out, "--out"), (json, "--json")):
            if path is not None and not (path.parent if str(path.parent) else Path(".")).is_dir():
                raise UsageError(
                    f"{option} {str(path)!r}: the folder {str(path.parent)!r} does not exist"
                )
        if out.suffix.lower() not in (".html", ".htm"):
            raise UsageError(f"--out {str(out)!r}: the report is HTML; name it *.html")

        real_frame = read_table(real, "--real")
        synthetic_frame = read_table(synthetic, "--synthetic")
        train_frame = read_table(train, "--train") if train is not None else None
        test_frame = read_table(test, "--test") if test is not None else None
        client_frames = {}
        for path in clients or []:
            name = path.stem
            if name in client_frames:
                name = str(path)
            client_frames[name] = read_table(path, "--clients")
        kinds = None
        if schema is not None:
            if not schema.is_file():
                raise UsageError(f"--schema {str(schema)!r}: no such file")
            try:
                kinds = Schema.from_json(schema.read_text(encoding="utf-8")).kinds()
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise DataError(
                    f"--schema {str(schema)!r}: not a usable schema file ({err}); write one "
                    "with `fits schema`"
                ) from None
            unknown = sorted(set(kinds) - set(real_frame.columns))
            if unknown:
                raise DataError(
                    f"--schema {str(schema)!r} names column(s) {unknown} that --real "
                    f"{str(real)!r} lacks"
                )
        settings_data = None
        if settings is not None:
            if not settings.is_file():
                raise UsageError(f"--settings {str(settings)!r}: no such file")
            try:
                settings_data = _json.loads(settings.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as err:
                raise DataError(f"--settings {str(settings)!r}: not valid JSON: {err}") from None
            if not isinstance(settings_data, dict):
                raise DataError(f"--settings {str(settings)!r}: expected a JSON object")
        sources = {"real": str(real), "synthetic": str(synthetic)}
        if train is not None:
            sources["train"] = str(train)
        if test is not None:
            sources["test"] = str(test)
        for name, path in zip(client_frames, clients or [], strict=True):
            sources[f"client {name}"] = str(path)
        if schema is not None:
            sources["schema"] = str(schema)
        if settings is not None:
            sources["settings"] = str(settings)
        say(
            f"evaluating {len(synthetic_frame):,} synthetic rows against {len(real_frame):,} "
            "real rows ..."
        )
        result = evaluate(
            real_frame,
            synthetic_frame,
            kinds,
            target=targets or None,
            task=tasks or None,
            train=train_frame,
            test=test_frame,
            clients=client_frames or None,
            settings=settings_data,
            ratios=ratios,
            lambdas=lambdas,
            max_rows=max_rows,
            seed=seed,
            sources=sources,
            progress=lambda line: say(f"  {line}"),
        )
        result.save(out, json)
    except UsageError as err:
        raise _fail(str(err), 2) from None
    except (DataError, SchemaError, ValueError, TypeError) as err:
        raise _fail(str(err), 1) from None
    except OSError as err:
        raise _fail(f"cannot write the report: {err}", 1) from None
    if not quiet:
        typer.echo(result.summary(), err=True)
    typer.echo(f"report: {out}")
    if json is not None:
        typer.echo(f"json: {json}")
    sys.stdout.flush()
