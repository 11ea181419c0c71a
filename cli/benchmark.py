"""``fits benchmark``: the paper-reproduction benchmark on one data set.

Registered on the ``fits`` app in :mod:`fits.cli.main`. Writes ``DIR/<dataset>.md`` (the
tables) and ``DIR/<dataset>.json`` (every per-repeat number), both atomically, and
rewrites them after every repeat so an interrupted run keeps what it finished.
"""

from __future__ import annotations

import shlex
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from .errors import fail as _fail

__all__ = ["DatasetChoice", "benchmark"]


class DatasetChoice(StrEnum):
    """Data sets ``fits benchmark`` runs on."""

    simulation = "simulation"
    adult = "adult"
    bike = "bike"
    german = "german"


def benchmark(
    dataset: Annotated[
        DatasetChoice,
        typer.Option("--dataset", "-d", help="Data set: simulation, adult, bike or german."),
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
    seed: Annotated[int, typer.Option("--seed", help="Seed of the first repeat.")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress messages.")] = False,
    rows: Annotated[
        int | None,
        typer.Option(
            "--rows",
            min=50,
            hidden=True,
            help="Rows of the data (simulation size, or a subsample of a real data set); "
            "for quick checks.",
        ),
    ] = None,
    no_boosting: Annotated[
        bool,
        typer.Option("--no-boosting", hidden=True, help="Skip the gradient-boosting model."),
    ] = False,
) -> None:
    """Run the FITS paper's protocol (FITS-G and FITS-K, 10 clients, modes M1-M4)."""
    from fits.benchmark import run_benchmark, write_result
    from fits.datasets import ChecksumError, resolve_data_dir

    name = dataset.value
    if name != "simulation":
        try:
            folder = resolve_data_dir(data_dir)
        except FileNotFoundError as exc:
            _fail(str(exc))
        if not folder.is_dir():
            where = "--data-dir" if data_dir is not None else "FITS_DATA_DIR"
            _fail(f"{where} {str(folder)!r}: no such directory")
    base = out / name
    command = "fits " + " ".join(shlex.quote(a) for a in sys.argv[1:])

    def say(message: str) -> None:
        if not quiet:
            typer.echo(f"{time.strftime('%H:%M:%S')} {message}", err=True)

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
        )
    except (FileNotFoundError, ChecksumError) as exc:
        _fail(str(exc))
    md, js = write_result(result, base)
    typer.echo(f"wrote {md}")
    typer.echo(f"wrote {js}")
