"""``fits analyze``: fit a model directly across the sites' tables (no synthetic data).

Registered on the ``fits`` app in :mod:`fits.cli.main`.  Each ``--method`` is one entry
of :data:`METHODS` (name -> runner), so a new analysis adds one function and one line:

* ``fednewton``, ``fedsgd``, ``fedhybrid``, ``fedavg``: a GLM under mu-GDP
  (:func:`fits.analysis.glm.fit_glm`; the paper's Algorithms 1-4).

Exit codes: 0 success, 1 data error (naming the file, site and column), 2 usage error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from fits.cli.errors import fail as _fail

__all__ = ["AnalyzeOptions", "METHODS", "analyze"]


@dataclass
class AnalyzeOptions:
    """Everything ``fits analyze`` was given, for the method's runner."""

    target: str
    features: list[str] | None
    family: str
    method: str
    mu: float | None
    epsilon: float | None
    delta: float | None
    seed: int
    clip: float | None
    tau1: float | None
    iterations: dict[str, float | None]


def _check_glm(opts: AnalyzeOptions) -> None:
    """Usage checks before any file is read or any round runs."""
    from fits.analysis.accounting import resolve_budget
    from fits.analysis.glm import FAMILIES, glm_settings

    if opts.family not in FAMILIES:
        raise typer.BadParameter(
            f"unknown family {opts.family!r}; choose one of {', '.join(FAMILIES)}",
            param_hint="--family",
        )
    try:
        resolve_budget(opts.mu, opts.epsilon, opts.delta)
        glm_settings(opts.method, opts.iterations)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if opts.clip is not None and not (math.isfinite(opts.clip) and opts.clip > 0):
        raise typer.BadParameter(f"must be a positive number, got {opts.clip}", param_hint="--clip")
    if opts.tau1 is not None:
        if opts.method != "fednewton":
            raise typer.BadParameter("only FedNewton takes --tau1", param_hint="--tau1")
        if not (math.isfinite(opts.tau1) and opts.tau1 > 0):
            raise typer.BadParameter(f"must be positive, got {opts.tau1}", param_hint="--tau1")


def _run_glm(tables: dict[str, pd.DataFrame], opts: AnalyzeOptions) -> tuple[dict[str, Any], str]:
    from fits.analysis.glm import DEFAULT_TAU1, fit_glm

    res = fit_glm(
        tables,
        opts.target,
        opts.features,
        family=opts.family,
        method=opts.method,
        mu=opts.mu,
        epsilon=opts.epsilon,
        delta=opts.delta,
        seed=opts.seed,
        clip=opts.clip if opts.clip is not None else "auto",
        tau1=opts.tau1 if opts.tau1 is not None else DEFAULT_TAU1,
        **{k: v for k, v in opts.iterations.items() if v is not None},
    )
    return res.to_dict(), res.summary()


@dataclass(frozen=True)
class MethodEntry:
    """One ``--method``: its usage check (before any round) and its runner."""

    check: Callable[[AnalyzeOptions], None]
    run: Callable[[dict[str, pd.DataFrame], AnalyzeOptions], tuple[dict[str, Any], str]]


#: ``--method`` -> entry.  Other analyses register here.
METHODS: dict[str, MethodEntry] = {
    name: MethodEntry(_check_glm, _run_glm)
    for name in ("fednewton", "fedsgd", "fedhybrid", "fedavg")
}


def analyze(
    site_files: Annotated[
        list[Path],
        typer.Argument(help="One table per site (.csv or .parquet).", show_default=False),
    ],
    target: Annotated[str, typer.Option("--target", help="The response column.")],
    out: Annotated[Path, typer.Option("--out", help="Where to write the result (.json).")],
    family: Annotated[
        str, typer.Option("--family", help="GLM family: linear, logistic or poisson.")
    ] = "logistic",
    method: Annotated[
        str, typer.Option("--method", help="fednewton, fedsgd, fedhybrid or fedavg.")
    ] = "fednewton",
    mu: Annotated[
        float | None, typer.Option("--mu", help="Each site mu-fed-GDP (give this, or --epsilon).")
    ] = None,
    epsilon: Annotated[
        float | None, typer.Option("--epsilon", help="(epsilon, delta)-DP target, with --delta.")
    ] = None,
    delta: Annotated[
        float | None, typer.Option("--delta", help="delta of --epsilon (or where to report it).")
    ] = None,
    features: Annotated[
        str | None, typer.Option("--features", help="Comma-separated feature columns.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every random draw.")] = 0,
    clip: Annotated[
        float | None,
        typer.Option("--clip", help="Clipping bound B (default: the paper's data-driven rule)."),
    ] = None,
    tau1: Annotated[float | None, typer.Option("--tau1", help="FedNewton's tau1 (0.1).")] = None,
    iters: Annotated[
        int | None, typer.Option("--iterations", "-K", help="K (FedSGD, FedAvg, FedNewton).")
    ] = None,
    step: Annotated[
        float | None, typer.Option("--step", help="eta (FedSGD, FedAvg, FedNewton).")
    ] = None,
    rounds: Annotated[int | None, typer.Option("--rounds", "-R", help="R (FedAvg).")] = None,
    k1: Annotated[int | None, typer.Option("--k1", help="K1 (FedHybrid).")] = None,
    k2: Annotated[int | None, typer.Option("--k2", help="K2 (FedHybrid).")] = None,
) -> None:
    """Fit a model directly across the site tables, optionally differentially private.

    Example:

      fits analyze site1.csv site2.csv --target income --family logistic
      --method fednewton --mu 1 --out result.json
    """
    from fits.analysis.design import DesignError
    from fits.core.schema import SchemaError
    from fits.federation.protocol import ProtocolError
    from fits.io import DataFileError, read_table, write_text

    if method not in METHODS:
        raise typer.BadParameter(
            f"unknown method {method!r}; choose one of {', '.join(METHODS)}", param_hint="--method"
        )
    if out.suffix.lower() != ".json":
        raise typer.BadParameter(f"{out}: the result is written as .json", param_hint="--out")
    for path in site_files:
        if path.suffix.lower() not in (".csv", ".parquet"):
            raise typer.BadParameter(f"{path}: use a .csv or .parquet file", param_hint="SITE_FILE")
    opts = AnalyzeOptions(
        target=target,
        features=[f.strip() for f in features.split(",") if f.strip()] if features else None,
        family=family,
        method=method,
        mu=mu,
        epsilon=epsilon,
        delta=delta,
        seed=seed,
        clip=clip,
        tau1=tau1,
        iterations={"K": iters, "eta": step, "R": rounds, "K1": k1, "K2": k2},
    )
    if method == "fedhybrid":  # FedHybrid's steps are eta1 / eta2
        opts.iterations.update({"eta": None, "eta1": step, "eta2": step})
    METHODS[method].check(opts)
    tables: dict[str, pd.DataFrame] = {}
    try:
        for path in site_files:
            name = path.stem if path.stem not in tables else f"{path.stem} ({len(tables) + 1})"
            tables[name] = read_table(path)
        result, summary = METHODS[method].run(tables, opts)
    except (DataFileError, SchemaError, DesignError, ProtocolError) as exc:
        _fail(str(exc))
    except (ValueError, KeyError, TypeError) as exc:
        _fail(f"{type(exc).__name__}: {exc}")
    write_text(json.dumps(result, indent=2), out)
    typer.echo(summary)
    typer.echo(f"result: {out}")
