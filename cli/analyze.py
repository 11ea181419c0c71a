"""``fits analyze``: fit a model directly across the sites' tables (no synthetic data).

Registered on the ``fits`` app in :mod:`fits.cli.main`.  Each ``--method`` is one entry
of :data:`METHODS` (name -> runner), so a new analysis adds one function and one line:

* ``fednewton``, ``fedsgd``, ``fedhybrid``, ``fedavg``: a GLM under mu-GDP
  (:func:`fits.analysis.glm.fit_glm`; the paper's Algorithms 1-4).
* ``newton``: a GLM without privacy by Newton-Raphson on the sites' summed losses,
  gradients and Hessians: the pooled maximum-likelihood estimate.  The default without
  ``--mu`` / ``--epsilon`` (with them: ``fednewton``).
* ``fedlsa``: linear regression by FedLSA with multiplier-bootstrap confidence
  intervals at level ``--ci`` (:func:`fits.analysis.fedlsa`; not differentially private).

Exit codes: 0 success, 1 data error (naming the file, site and column), 2 usage error.

On a terminal a progress bar on stderr shows the fitting rounds done, their total and
the time elapsed (:func:`_round_progress`), with ``--flower`` from the rounds the
coordinator writes in its log; none where stderr is not a terminal, or with
``--quiet``.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from fits.core.names import ColumnNameError, format_column_list

from .errors import fail as _fail
from .options import NaValuesOpt, column_list, output_file, parse_na_values, site_names

__all__ = ["AnalyzeOptions", "METHODS", "analyze"]

#: ``--cov-type`` values (GLMs without privacy): fit_glm's cov_type, "none" for None.
COV_TYPES = ("nonrobust", "HC0", "none")

#: The defaults of FedLSA's own options (None in the signature, to tell a given one).
FEDLSA_DEFAULTS: dict[str, Any] = {
    "bootstrap": 200,
    "gamma_eta": 0.0,
    "gamma_h": 0.0,
    "sampling": "without_replacement",
    "regime": "paper",
}

#: ``--round-timeout``'s default (seconds; --flower).
ROUND_TIMEOUT = 600.0

#: Seconds between two updates of the rounds' progress bar (a small fit runs thousands
#: of rounds a second; the bar redraws ten times a second).
PROGRESS_INTERVAL = 0.1

#: fit_glm's iteration settings -> the option that sets them.
GLM_OPTIONS = {
    "K": "-K / --iterations",
    "R": "-R / --rounds",
    "K1": "--k1",
    "K2": "--k2",
    "eta": "--step",
    "eta1": "--step",
    "eta2": "--step",
}

#: FedLSA's parameter names (as its errors name them) -> the option that sets them.
FEDLSA_OPTIONS = {
    "n_bootstrap": "--bootstrap",
    "local_steps": "-H / --local-steps",
    "step_size": "--step",
    "gamma_eta": "--gamma-eta",
    "gamma_h": "--gamma-h",
    "rounds": "-R / --rounds",
}


def _fedlsa_usage(exc: Exception) -> typer.BadParameter:
    """A FedLSA schedule error as a usage error naming the option of the parameter it
    names (``rounds must be ...`` -> ``--rounds``)."""
    text = str(exc)
    named = [(text.find(name), opt) for name, opt in FEDLSA_OPTIONS.items() if name in text]
    return typer.BadParameter(text, param_hint=min(named)[1] if named else None)


@dataclass
class AnalyzeOptions:
    """Everything ``fits analyze`` was given, for the method's runner."""

    target: str
    features: list[str] | None
    #: As given; None when ``--family`` was not (logistic for a GLM, linear for FedLSA).
    family: str | None
    method: str
    mu: float | None
    epsilon: float | None
    delta: float | None
    seed: int
    clip: float | None
    tau1: float | None
    iterations: dict[str, float | None]
    #: Method-specific options (FedLSA: ci, local_steps, bootstrap, gamma_eta, ...).
    extra: dict[str, Any] = field(default_factory=dict)


def _check_glm(opts: AnalyzeOptions) -> None:
    """Usage checks before any file is read or any round runs."""
    from fits.analysis.accounting import resolve_budget
    from fits.analysis.glm import DEFAULTS, FAMILIES, glm_settings

    if opts.family is None:
        opts.family = "logistic"
    if opts.method == "newton":
        if opts.mu is not None or opts.epsilon is not None:
            raise typer.BadParameter(
                "newton sends each site's exact sums every round and has no private form; "
                "with --mu/--epsilon use fednewton, fedsgd, fedhybrid or fedavg",
                param_hint="--method",
            )
        if opts.clip is not None:
            raise typer.BadParameter(
                "newton does not clip (clipping is for the private methods)", param_hint="--clip"
            )
    if opts.family not in FAMILIES:
        raise typer.BadParameter(
            f"unknown family {opts.family!r}; choose one of {', '.join(FAMILIES)}",
            param_hint="--family",
        )
    lsa_only = opts.extra.get("fedlsa_given") or []
    if lsa_only:  # was: taken and ignored
        raise typer.BadParameter(
            f"{lsa_only[0]} is an option of --method fedlsa, which {opts.method} does not "
            "use; drop it, or fit with --method fedlsa",
            param_hint=lsa_only[0],
        )
    private = opts.mu is not None or opts.epsilon is not None
    if private and opts.extra.get("cov_type") not in (None, "none"):
        raise typer.BadParameter(
            "a private fit has no standard errors (docs/analysis.md, 'With privacy there "
            "are none'); drop --cov-type, or fit without --mu/--epsilon",
            param_hint="--cov-type",
        )
    if private and opts.extra.get("ci_given"):
        raise typer.BadParameter(
            "a private fit has no confidence intervals; drop --ci, or fit without --mu/--epsilon",
            param_hint="--ci",
        )
    if opts.extra.get("positive") is not None and opts.family != "logistic":
        raise typer.BadParameter(
            f"--positive names the label coded 1 of a logistic target; --family "
            f"{opts.family} takes the target's numbers as they are: drop --positive",
            param_hint="--positive",
        )
    if opts.extra.get("offset") is not None and opts.extra.get("exposure") is not None:
        raise typer.BadParameter(
            "give --offset or --exposure, not both (an exposure E is the offset log(E))",
            param_hint="--exposure",
        )
    if opts.extra.get("exposure") is not None and opts.family != "poisson":
        raise typer.BadParameter(
            f"--exposure is for --family poisson (its log is a rate's offset); --family "
            f"{opts.family} takes an offset on its own scale: use --offset",
            param_hint="--exposure",
        )
    max_weight = opts.extra.get("max_weight")
    if private and opts.extra.get("weights") is not None and max_weight is None:
        raise typer.BadParameter(
            "prior weights in a private fit need --max-weight, the largest weight (public): "
            "a row's weight scales its clipped gradient, so the noise is calibrated to "
            "max-weight x clip (docs/analysis.md, 'Offsets and weights'); declare it, drop "
            "--weights, or fit without --mu/--epsilon",
            param_hint="--weights",
        )
    if max_weight is not None:
        if opts.extra.get("weights") is None or not private:
            raise typer.BadParameter(
                "--max-weight bounds the --weights of a private fit (--mu/--epsilon); "
                "without both it has no use: drop it",
                param_hint="--max-weight",
            )
        if not (math.isfinite(max_weight) and max_weight > 0):
            raise typer.BadParameter(
                f"must be a positive number, got {max_weight}", param_hint="--max-weight"
            )
    if opts.extra.get("check_collinearity") is not None and not private:
        raise typer.BadParameter(
            "--check-collinearity / --no-check-collinearity choose what a private fit's sites "
            "send (--mu/--epsilon); without privacy the standard errors' round checks it and "
            "nothing more leaves a site: drop the option",
            param_hint="--check-collinearity",
        )
    if opts.family == "linear" and opts.extra.get("check_separation"):
        raise typer.BadParameter(
            "separation is a logistic and Poisson matter: a linear fit has no such check; "
            "drop --check-separation",
            param_hint="--check-separation",
        )
    try:
        resolve_budget(opts.mu, opts.epsilon, opts.delta)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    takes = sorted({GLM_OPTIONS[k] for k in DEFAULTS[opts.method]})
    for key, value in opts.iterations.items():  # each error names the option given
        if value is None:
            continue
        if key not in DEFAULTS[opts.method]:
            raise typer.BadParameter(
                f"{GLM_OPTIONS[key]}: options that do not apply to method {opts.method!r} "
                f"are refused; it takes {', '.join(takes)}",
                param_hint=GLM_OPTIONS[key],
            )
        try:
            glm_settings(opts.method, {key: value})
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=GLM_OPTIONS[key]) from None
    if opts.clip is not None and not (math.isfinite(opts.clip) and opts.clip > 0):
        raise typer.BadParameter(f"must be a positive number, got {opts.clip}", param_hint="--clip")
    if opts.tau1 is not None:
        if opts.method != "fednewton":
            raise typer.BadParameter("only FedNewton takes --tau1", param_hint="--tau1")
        if not (math.isfinite(opts.tau1) and opts.tau1 > 0):
            raise typer.BadParameter(f"must be positive, got {opts.tau1}", param_hint="--tau1")
    ci = opts.extra.get("ci", 0.95)
    if not (math.isfinite(ci) and 0.0 < ci < 1.0):
        raise typer.BadParameter(f"must lie strictly between 0 and 1, got {ci}", param_hint="--ci")
    cov_type = opts.extra.get("cov_type")
    if cov_type is not None and cov_type not in COV_TYPES:
        raise typer.BadParameter(
            f"choose one of {', '.join(COV_TYPES)}, got {cov_type!r}", param_hint="--cov-type"
        )


def _glm_spec(opts: AnalyzeOptions) -> dict[str, Any]:
    """The :func:`fits.analysis.run.run_analysis` spec of a GLM fit."""
    from fits.analysis.glm import DEFAULT_TAU1

    iterations: dict[str, Any] = {k: v for k, v in opts.iterations.items() if v is not None}
    options = {
        "target": opts.target,
        "features": opts.features,
        "family": opts.family,
        "mu": opts.mu,
        "epsilon": opts.epsilon,
        "delta": opts.delta,
        "seed": opts.seed,
        "clip": opts.clip if opts.clip is not None else "auto",
        "tau1": opts.tau1 if opts.tau1 is not None else DEFAULT_TAU1,
        **iterations,
    }
    if opts.extra.get("check_separation") is not None:
        options["check_separation"] = opts.extra["check_separation"]
    if opts.extra.get("check_collinearity") is not None:
        options["check_collinearity"] = opts.extra["check_collinearity"]
    cov_type = opts.extra.get("cov_type")
    if cov_type is not None:
        options["cov_type"] = None if cov_type == "none" else cov_type
    if opts.extra.get("kinds"):
        options["kinds"] = dict(opts.extra["kinds"])
    if opts.extra.get("missing", "raise") != "raise":
        options["missing"] = opts.extra["missing"]
    if opts.extra.get("positive") is not None:
        options["positive"] = opts.extra["positive"]
    for key in ("offset", "exposure", "weights", "max_weight"):
        if opts.extra.get(key) is not None:
            options[key] = opts.extra[key]
    return {"method": opts.method, "options": options, "ci": opts.extra.get("ci", 0.95)}


@dataclass(frozen=True)
class MethodEntry:
    """One ``--method``: its usage check (before any round) and its spec (the plain
    options :func:`fits.analysis.run.run_analysis` runs, in process or on Flower)."""

    check: Callable[[AnalyzeOptions], None]
    spec: Callable[[AnalyzeOptions], dict[str, Any]]


def _check_fedlsa(opts: AnalyzeOptions) -> None:
    """Usage checks of ``--method fedlsa`` before any file is read."""
    from fits.analysis.lsa import (
        MULTIPLIERS,
        REGIMES,
        SAMPLING,
        FedLSAError,
        Schedule,
        bootstrap_level_problem,
    )

    if opts.mu is not None or opts.epsilon is not None or opts.delta is not None:
        raise typer.BadParameter(
            "FedLSA is not differentially private; drop --mu / --epsilon / --delta",
            param_hint="--method",
        )
    if opts.family not in (None, "linear"):
        raise typer.BadParameter(
            f"FedLSA fits a linear regression, not {opts.family!r}", param_hint="--family"
        )
    unused = {
        "--clip": opts.clip,
        "--tau1": opts.tau1,
        "--check-separation": opts.extra.get("check_separation"),
        "--check-collinearity": opts.extra.get("check_collinearity"),
        "--cov-type": opts.extra.get("cov_type"),
        "--positive": opts.extra.get("positive"),
    }
    if opts.extra.get("exposure") is not None:
        raise typer.BadParameter(
            "--exposure is the offset log(E) of a Poisson rate; FedLSA fits a linear "
            "regression, which takes an offset on the target's own scale: use --offset",
            param_hint="--exposure",
        )
    if opts.extra.get("max_weight") is not None:
        raise typer.BadParameter(
            "--max-weight bounds the --weights of a private GLM fit; FedLSA is not "
            "private and needs no bound: drop it",
            param_hint="--max-weight",
        )
    unused.update({f"--{k.lower()}": v for k, v in opts.iterations.items() if k in ("K1", "K2")})
    unused["--iterations"] = opts.iterations.get("K")
    for name, value in unused.items():
        if value is not None:
            raise typer.BadParameter(f"{name} is not used by fedlsa", param_hint=name)
    ci = opts.extra["ci"]
    if not (math.isfinite(ci) and 0.0 < ci < 1.0):
        raise typer.BadParameter(f"must lie strictly between 0 and 1, got {ci}", param_hint="--ci")
    if opts.extra["sampling"] not in SAMPLING:
        raise typer.BadParameter(f"choose one of {', '.join(SAMPLING)}", param_hint="--sampling")
    if opts.extra["bootstrap"] < 2:
        raise typer.BadParameter("needs at least 2 bootstrap sequences", param_hint="--bootstrap")
    problem = bootstrap_level_problem(int(opts.extra["bootstrap"]), 1.0 - ci)
    if problem is not None:  # was: a "99.99%" interval from 20 draws, their range
        raise typer.BadParameter(problem, param_hint="--bootstrap")
    if opts.extra["regime"] not in REGIMES:
        raise typer.BadParameter(f"choose one of {', '.join(REGIMES)}", param_hint="--regime")
    mult = opts.extra["multipliers"]
    if mult is not None and mult not in MULTIPLIERS:
        raise typer.BadParameter(
            f"choose one of {', '.join(MULTIPLIERS)}", param_hint="--multipliers"
        )
    step = opts.iterations.get("eta")
    if opts.extra["regime"] == "one_pass":
        from fits.analysis.lsa import OnePassSchedule

        bad = {
            "--gamma-eta": opts.extra["gamma_eta"] != 0.0,
            "--gamma-h": opts.extra["gamma_h"] != 0.0,
            "--sampling": opts.extra["sampling"] != "without_replacement",
        }
        for name, is_bad in bad.items():
            if is_bad:
                raise typer.BadParameter(
                    "the one_pass regime sets its own steps and uses every row once "
                    f"(sampling without replacement): drop {name}",
                    param_hint=name,
                )
        try:
            OnePassSchedule(
                int(_given(opts.iterations.get("R"), 1000)),
                float(step) if step is not None else 0.5,
                int(_given(opts.extra["local_steps"], 1)),
            )
        except FedLSAError as exc:
            raise _fedlsa_usage(exc) from None
        return
    try:
        Schedule(
            int(_given(opts.iterations.get("R"), 200)),
            float(step) if step is not None else 1.0,
            int(_given(opts.extra["local_steps"], 10)),
            opts.extra["gamma_eta"],
            opts.extra["gamma_h"],
        )
    except FedLSAError as exc:
        raise _fedlsa_usage(exc) from None


def _given(value: Any, default: Any) -> Any:
    """``value``, or ``default`` when the option was not given (0 is a given value, which
    the schedule's check refuses, not a request for the default)."""
    return default if value is None else value


def _fedlsa_spec(opts: AnalyzeOptions) -> dict[str, Any]:
    """The :func:`fits.analysis.run.run_analysis` spec of a FedLSA fit."""
    options = {
        "target": opts.target,
        "features": opts.features,
        "rounds": opts.iterations.get("R"),
        "local_steps": opts.extra["local_steps"],
        "step_size": opts.iterations.get("eta"),
        "gamma_eta": opts.extra["gamma_eta"],
        "gamma_h": opts.extra["gamma_h"],
        "n_bootstrap": int(opts.extra["bootstrap"]),
        "seed": opts.seed,
        "sampling": opts.extra["sampling"],
        "regime": opts.extra["regime"],
        "multipliers": opts.extra["multipliers"],
    }
    if opts.extra.get("kinds"):
        options["kinds"] = dict(opts.extra["kinds"])
    if opts.extra.get("missing", "raise") != "raise":
        options["missing"] = opts.extra["missing"]
    for key in ("offset", "weights"):
        if opts.extra.get(key) is not None:
            options[key] = opts.extra[key]
    return {"method": "fedlsa", "options": options, "ci": opts.extra["ci"]}


#: ``--method`` -> entry.  Other analyses register here.
METHODS: dict[str, MethodEntry] = {
    **{
        name: MethodEntry(_check_glm, _glm_spec)
        for name in ("newton", "fednewton", "fedsgd", "fedhybrid", "fedavg")
    },
    "fedlsa": MethodEntry(_check_fedlsa, _fedlsa_spec),
}


def analyze(
    site_files: Annotated[
        list[Path],
        typer.Argument(help="One table per site (.csv or .parquet).", show_default=False),
    ],
    target: Annotated[str, typer.Option("--target", help="The response column.")],
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Where to write the result (.json).", parser=output_file("--out")
        ),
    ],
    family: Annotated[
        str | None,
        typer.Option(
            "--family",
            help="GLM family: linear, logistic or poisson (default: logistic; fedlsa: linear).",
        ),
    ] = None,
    method: Annotated[
        str | None,
        typer.Option(
            "--method",
            help="newton, fednewton, fedsgd, fedhybrid, fedavg or fedlsa (default: newton, "
            "the pooled maximum-likelihood estimate; with --mu/--epsilon fednewton).",
            show_default=False,
        ),
    ] = None,
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
        list[str] | None,
        typer.Option(
            "--features",
            help="Feature columns: a,b,... (a header that holds a comma in a JSON array: "
            '\'["x", "y, z"]\'); repeat it to go on with the list.',
            show_default=False,
        ),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            help="A column's kind, COLUMN=KIND (or COLUMN:KIND): nominal (one coefficient "
            "per category, e.g. integer-coded regions), ordinal, continuous or id (left "
            "out); repeat for several.",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="Seed of every random draw (an integer >= 0).")
    ] = 0,
    clip: Annotated[
        float | None,
        typer.Option("--clip", help="Clipping bound B (default: the paper's data-driven rule)."),
    ] = None,
    tau1: Annotated[float | None, typer.Option("--tau1", help="FedNewton's tau1 (0.1).")] = None,
    iters: Annotated[
        int | None, typer.Option("--iterations", "-K", help="K (FedSGD, FedAvg, FedNewton).")
    ] = None,
    step: Annotated[
        float | None, typer.Option("--step", help="eta (FedSGD, FedAvg, FedNewton, FedLSA).")
    ] = None,
    rounds: Annotated[
        int | None,
        typer.Option(
            "--rounds", "-R", help="R (FedAvg); T (FedLSA: 200; one_pass: from the site sizes)."
        ),
    ] = None,
    k1: Annotated[int | None, typer.Option("--k1", help="K1 (FedHybrid).")] = None,
    k2: Annotated[int | None, typer.Option("--k2", help="K2 (FedHybrid).")] = None,
    ci: Annotated[
        float | None,
        typer.Option(
            "--ci",
            help="Confidence level of the intervals (FedLSA; GLMs without privacy) "
            "(default: 0.95).",
            show_default=False,
        ),
    ] = None,
    cov_type: Annotated[
        str | None,
        typer.Option(
            "--cov-type",
            help="GLMs without privacy: standard errors nonrobust (model-based, default), "
            "HC0 (sandwich) or none; each costs one more round in which every site sends "
            "its X'WX at the estimate.",
            show_default=False,
        ),
    ] = None,
    local_steps: Annotated[
        int | None,
        typer.Option("--local-steps", "-H", help="FedLSA: local steps per round (10; one_pass 1)."),
    ] = None,
    bootstrap: Annotated[
        int | None,
        typer.Option(
            "--bootstrap",
            help=f"FedLSA: bootstrap sequences M (default: {FEDLSA_DEFAULTS['bootstrap']}).",
            show_default=False,
        ),
    ] = None,
    gamma_eta: Annotated[
        float | None,
        typer.Option(
            "--gamma-eta",
            help="FedLSA: step decay (0: constant steps) (default: 0).",
            show_default=False,
        ),
    ] = None,
    gamma_h: Annotated[
        float | None,
        typer.Option(
            "--gamma-h",
            help="FedLSA: growth of the local steps (default: 0).",
            show_default=False,
        ),
    ] = None,
    sampling: Annotated[
        str | None,
        typer.Option(
            "--sampling",
            help="FedLSA: without_replacement or with_replacement (default: without_replacement).",
            show_default=False,
        ),
    ] = None,
    regime: Annotated[
        str | None,
        typer.Option(
            "--regime",
            help="FedLSA: paper (Algorithm 1) or one_pass (every row once, intervals as "
            "wide as the pooled OLS sandwich) (default: paper).",
            show_default=False,
        ),
    ] = None,
    multipliers: Annotated[
        str | None,
        typer.Option("--multipliers", help="FedLSA: bootstrap weights per site or shared."),
    ] = None,
    flower: Annotated[
        bool,
        typer.Option(
            "--flower",
            help="Run on a local Flower federation (a SuperLink and one SuperNode per site "
            "file on 127.0.0.1, as `fits federate local`); the same result as in process.",
        ),
    ] = False,
    round_timeout: Annotated[
        float | None,
        typer.Option(
            "--round-timeout",
            help=f"--flower: seconds a round may take (default: {ROUND_TIMEOUT:g}).",
            show_default=False,
        ),
    ] = None,
    check_separation: Annotated[
        bool | None,
        typer.Option(
            "--check-separation/--no-check-separation",
            help="Logistic, Poisson: one more round in which each site sends per class the "
            "extremes of each feature and of the fitted predictor, to warn of separation "
            "(default: on without --mu/--epsilon; with them it is outside the guarantee).",
            show_default=False,
        ),
    ] = None,
    check_collinearity: Annotated[
        bool | None,
        typer.Option(
            "--check-collinearity/--no-check-collinearity",
            help="With --mu/--epsilon: each site sends the directions in which its features "
            "are nearly collinear (R^2 >= 0.99), outside the guarantee, to warn before any "
            "noisy round (default: on; --no-check-collinearity keeps them at the sites).",
            show_default=False,
        ),
    ] = None,
    positive: Annotated[
        str | None,
        typer.Option(
            "--positive",
            help="Logistic: the target's value coded 1 (the event; the other is coded 0), "
            "of two text labels or two numbers such as 1/2 (default: the second label in "
            "sorted order, e.g. yes of no/yes; 0/1 as it is).",
            show_default=False,
        ),
    ] = None,
    missing: Annotated[
        str,
        typer.Option(
            "--missing",
            help="Rows missing a value of the target or a numeric feature: raise (an error "
            "naming the site and the column) or drop (each site leaves them out and "
            "reports how many: complete cases, as R's na.omit).",
        ),
    ] = "raise",
    offset: Annotated[
        str | None,
        typer.Option(
            "--offset",
            help="A column added to the linear predictor with coefficient 1 (not a "
            "feature); private fits too (clipping bounds its rows); fedlsa fits y - offset.",
            show_default=False,
        ),
    ] = None,
    exposure: Annotated[
        str | None,
        typer.Option(
            "--exposure",
            help="Poisson: a column of positive exposures (person-years...); the offset is "
            "its log.",
            show_default=False,
        ),
    ] = None,
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help="A column of non-negative prior weights (statsmodels' var_weights; fedlsa: "
            "weighted least squares); with --mu/--epsilon also --max-weight.",
            show_default=False,
        ),
    ] = None,
    max_weight: Annotated[
        float | None,
        typer.Option(
            "--max-weight",
            help="Private fits with --weights: the largest weight (public); the noise is "
            "calibrated to max-weight x clip.",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    na_values: NaValuesOpt = None,
) -> None:
    """Fit a model directly across the site tables, optionally differentially private.

    Without --mu/--epsilon the default method, newton, gives the pooled
    maximum-likelihood estimate with standard errors and intervals.

    Example:

      fits analyze site1.csv site2.csv --target income --out result.json

      fits analyze site1.csv site2.csv --target income --family logistic \\
          --method fednewton --mu 1 --out result.json

      fits analyze site1.csv site2.csv --target hours --method fedlsa \\
          --ci 0.95 --rounds 300 --out result.json

      fits analyze site1.csv site2.csv --target income --method fednewton \\
          --mu 1 --flower --out result.json
    """
    from fits.analysis.design import DesignError
    from fits.core.schema import DeclaredKindError, SchemaError
    from fits.federation.protocol import ProtocolError
    from fits.io import DataFileError, align_codes, read_table, write_text

    if method is None:
        method = "fednewton" if mu is not None or epsilon is not None else "newton"
    if method not in METHODS:
        raise typer.BadParameter(
            f"unknown method {method!r}; choose one of {', '.join(METHODS)}", param_hint="--method"
        )
    if out.is_dir():  # docs/cli.md, "Refusals and checks": the folder's own words
        raise typer.BadParameter(
            f"{str(out)!r} is a folder; give a file name inside it, e.g. "
            f"{str(out / 'result.json')!r}",
            param_hint="--out",
        )
    if out.suffix.lower() != ".json":
        raise typer.BadParameter(
            f"{str(out)!r}: the result is a JSON file; give a file name ending in .json, "
            f"e.g. {str(out.with_suffix('.json'))!r}",
            param_hint="--out",
        )
    if missing not in ("raise", "drop"):
        raise typer.BadParameter(f"use raise or drop, got {missing!r}", param_hint="--missing")
    na_texts = parse_na_values(na_values)
    for path in site_files:
        if path.suffix.lower() not in (".csv", ".parquet"):
            hint = ""
            strays = [str(q) for q in site_files if not q.suffix and not q.exists()]
            if features is not None and str(path) in strays:
                # `--features a b c`: b and c land among the site files
                hint = (
                    f"; if {', '.join(map(repr, strays))} are features, --features takes one "
                    f"value, the names separated by commas: --features "
                    f"{shlex.quote(','.join([*features, *strays]))}"
                )
            raise typer.BadParameter(
                f"{path}: use a .csv or .parquet file{hint}", param_hint="SITE_FILE"
            )
    fedlsa_given = {
        "bootstrap": bootstrap,
        "gamma_eta": gamma_eta,
        "gamma_h": gamma_h,
        "sampling": sampling,
        "regime": regime,
    }
    opts = AnalyzeOptions(
        target=target,
        features=_parse_features(features),
        family=family,
        method=method,
        mu=mu,
        epsilon=epsilon,
        delta=delta,
        seed=seed,
        clip=clip,
        tau1=tau1,
        iterations={"K": iters, "eta": step, "R": rounds, "K1": k1, "K2": k2},
        extra={
            "ci": 0.95 if ci is None else ci,
            "local_steps": local_steps,
            **{k: v if v is not None else FEDLSA_DEFAULTS[k] for k, v in fedlsa_given.items()},
            "multipliers": multipliers,
            # the FedLSA options given (a GLM refuses them), and whether --ci was
            "fedlsa_given": [
                f"--{k.replace('_', '-')}" for k, v in fedlsa_given.items() if v is not None
            ]
            + (["--multipliers"] if multipliers is not None else [])
            + (["--local-steps"] if local_steps is not None else []),
            "ci_given": ci is not None,
            "check_separation": check_separation,
            "check_collinearity": check_collinearity,
            "cov_type": cov_type,
            "kinds": _parse_kinds(kind),
            "missing": missing,
            "positive": positive,
            "offset": offset,
            "exposure": exposure,
            "weights": weights,
            "max_weight": max_weight,
        },
    )
    if method == "fedhybrid":  # FedHybrid's steps are eta1 / eta2
        opts.iterations.update({"eta": None, "eta1": step, "eta2": step})
    if round_timeout is not None:  # was: taken and ignored without --flower
        if not flower:
            raise typer.BadParameter(
                "only a --flower run has rounds with a timeout; add --flower or leave it out",
                param_hint="--round-timeout",
            )
        if not (math.isfinite(round_timeout) and round_timeout > 0):
            raise typer.BadParameter(
                f"must be a positive number of seconds, got {round_timeout}",
                param_hint="--round-timeout",
            )
    METHODS[method].check(opts)
    if method == "fedlsa":  # the least memory its bootstrap can take (d = 1 coefficient)
        from fits.analysis.lsa import FedLSAError, check_bootstrap_size

        one_pass = opts.extra["regime"] == "one_pass"
        steps = local_steps if local_steps is not None else (1 if one_pass else 10)
        try:
            check_bootstrap_size(opts.extra["bootstrap"], 1, len(site_files), max(int(steps), 1))
        except FedLSAError as exc:
            raise _fedlsa_usage(exc) from None
    _check_files(site_files, out)
    if flower:
        _analyze_on_flower(
            site_files, opts, out, seed, round_timeout or ROUND_TIMEOUT, quiet, na_values
        )
        return
    import warnings

    from fits.analysis.lsa import FedLSAError
    from fits.analysis.run import run_analysis

    from .errors import interruptible

    tables: dict[str, pd.DataFrame] = {}
    with interruptible("no result was written"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for name, path in zip(site_names(site_files), site_files, strict=True):
                tables[name] = read_table(path, empty_ok=True, na_values=na_texts)
                if tables[name].empty:
                    _fail(_no_rows(path, name))
            tables = align_codes(tables)  # ZIP codes with leading zeros at one site only
            spec = _spec(opts, list(next(iter(tables.values())).columns))
            bar, on_round = _round_progress(method, quiet)
            # the bar stops (its last state, one line) before any error, warning or
            # interruption is printed below it
            with bar if bar is not None else nullcontext():
                result, summary = run_analysis(spec, tables, on_round=on_round)
        except (DeclaredKindError, ColumnNameError) as exc:  # usage: --kind COL=constant,
            _echo_warnings(caught)  # --na-values COLUMN=TEXT of no column
            _fail(str(exc), 2)
        except (DataFileError, SchemaError, DesignError, ProtocolError, FedLSAError) as exc:
            _echo_warnings(caught)
            _fail(str(exc))
        except (ValueError, KeyError, TypeError) as exc:
            _echo_warnings(caught)
            _fail(f"{type(exc).__name__}: {exc}")
        write_text(json.dumps(result, indent=2), out)
    _echo_warnings(caught, summarized=True)
    typer.echo(summary)
    typer.echo(f"result: {out}")


def _stderr_is_terminal() -> bool:
    """Whether stderr is a terminal: the condition of the progress bar, as of ``fits
    synthesize``'s (tests force it here)."""
    return sys.stderr.isatty()


def _round_progress(
    method: str, quiet: bool = False
) -> tuple[Any, Callable[[int, int], None] | None]:
    """The progress bar of a fit's rounds on stderr and the ``on_round(done, total)``
    that feeds it (:func:`fits.analysis.run.run_analysis`); ``(None, None)`` where stderr
    is not a terminal, so that redirected output and logs get no bar, or with
    ``quiet`` (``--quiet``).

    One line, as ``fits synthesize``'s bars (:func:`fits.synthesizer.progress_bar`,
    not imported: it loads scikit-learn): ``fedsgd rounds``, the bar, rounds done of
    the total (``?`` in the setup rounds, before the fitting rounds begin) and the time
    since the tables were read.  The engine reports every
    round; the bar takes at most one update per :data:`PROGRESS_INTERVAL` seconds, and
    the last round's always.  Use the bar as a context manager around the fit.
    """
    if quiet or not _stderr_is_terminal():
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True, force_terminal=True),
    )
    task = bar.add_task(f"{method} rounds", total=None)
    last = [-math.inf]

    def on_round(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < PROGRESS_INTERVAL:
            return
        last[0] = now
        bar.update(task, completed=done, total=total)

    return bar, on_round


def _echo_warnings(caught: list[Any], *, summarized: bool = False) -> None:
    """The warnings of a run on stderr as ``note: ...`` (what fits inferred reading a
    table) or ``warning: ...``, each once, without Python's file and source line
    (``summarized``: not a GLM's own warnings, which its summary ends with)."""
    from fits.analysis.glm import GLMWarning
    from fits.core.schema import DataNote

    seen: set[str] = set()
    for w in caught:
        if summarized and issubclass(w.category, GLMWarning):
            continue
        label = "note" if issubclass(w.category, DataNote) else "warning"
        line = f"{label}: {w.message}"
        if line not in seen:
            seen.add(line)
            typer.echo(line, err=True)


def _check_files(site_files: list[Path], out: Path) -> None:
    """Usage checks of the paths before any file is read (exit 2): every site table
    exists and is a file, none is given twice (the same file, a link to it, or the same
    bytes: its rows would count twice), and ``--out`` can be written and is no input."""
    from fits.io import OutputError, check_output

    from .options import repeated_site_files

    for path in site_files:
        if path.is_dir():
            _fail(f"the site table {str(path)!r} is a directory, not a table file", 2)
        if not path.exists():
            _fail(f"the site table {str(path)!r}: no such file", 2)
    repeated = repeated_site_files(site_files)
    if repeated is not None:
        _fail(repeated, 2)
    try:
        check_output(out, [("the site table", p) for p in site_files])
    except OutputError as exc:
        _fail(str(exc), 2)


def _no_rows(path: Path, site: str) -> str:
    """The refusal of a site table of a header alone (exit 1), with its fix."""
    return (
        f"{path}: the table has a header but no rows; every site needs at least one row "
        f"(site {site!r}): leave the file out, or give it its rows"
    )


def _spec(opts: AnalyzeOptions, columns: list[str]) -> dict[str, Any]:
    """The method's spec, with ``--target`` and ``--features`` resolved to the headers of
    the (first) site table (:func:`~fits.cli.options.match_columns`; exit 2 for a name
    no header, or two, match)."""
    from .options import ColumnNameError, match_columns

    kinds = opts.extra.get("kinds") or {}
    try:
        opts.target = match_columns([opts.target], columns, "--target")[0]
        if opts.features is not None:
            opts.features = match_columns(opts.features, columns, "--features")
        names = match_columns(list(kinds), columns, "--kind")
    except ColumnNameError as exc:
        _fail(str(exc), 2)
    opts.extra["kinds"] = dict(zip(names, kinds.values(), strict=True))
    for key in ("offset", "exposure", "weights"):
        if opts.extra.get(key) is not None:
            try:
                opts.extra[key] = match_columns([opts.extra[key]], columns, f"--{key}")[0]
            except ColumnNameError as exc:
                _fail(str(exc), 2)
    _check_extra_columns(opts)
    used = [opts.target, *(opts.features or [])]
    ids = [n for n, k in opts.extra["kinds"].items() if k == "id" and n in used]
    if ids:  # was: exit 1 from the design, without the fix
        _fail(
            f"--kind: {ids} declared id (an identifier, left out of the model) but named as "
            "the target or in --features; declare another kind or leave it out of the model",
            2,
        )
    if opts.features is not None:
        unused = [n for n in opts.extra["kinds"] if n not in [opts.target, *opts.features]]
        if unused:
            _fail(f"--kind: {unused} not among the target and --features; leave it out", 2)
    if opts.features is not None:
        if opts.target in opts.features:
            _fail(f"--features: the target {opts.target!r} cannot also be a feature", 2)
        twice = sorted({f for f in opts.features if opts.features.count(f) > 1})
        if twice:
            _fail(f"--features names {twice} more than once; name each feature once", 2)
    return METHODS[opts.method].spec(opts)


def _check_extra_columns(opts: AnalyzeOptions) -> None:
    """Usage errors (exit 2) of ``--offset``, ``--exposure`` and ``--weights`` resolved
    to the headers: one naming the target, or one column given as two of them (was:
    exit 1, the second with a Python dict of the three options)."""
    given = {
        f"--{key}": opts.extra[key]
        for key in ("offset", "exposure", "weights")
        if opts.extra.get(key) is not None
    }
    for option, column in given.items():
        if column == opts.target:
            _fail(
                f"{option} {column!r} names the target (--target {opts.target!r}); the "
                f"{option[2:]} column must be another column",
                2,
            )
    by_column: dict[str, list[str]] = {}
    for option, column in given.items():
        by_column.setdefault(column, []).append(option)
    for column, options in by_column.items():
        if len(options) > 1:
            _fail(
                f"{' and '.join(options)} both name the column {column!r}; a column can be "
                "one of --offset, --exposure and --weights only: name another column for "
                "one of them",
                2,
            )


def _parse_kinds(items: list[str] | None) -> dict[str, str]:
    """``--kind COL=KIND`` options as a mapping (usage errors name the option)."""
    from .options import parse_kinds

    try:
        return parse_kinds(items)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--kind") from None


def _parse_features(features: list[str] | None) -> list[str] | None:
    """``--features a,b`` as a list (:func:`~fits.cli.options.column_list`; None: every
    column but the target); a value with no name in it (``--features ,`` or ``''``) is a
    usage error, not an intercept-only fit."""
    return column_list(features, "--features")


def _analyze_on_flower(
    site_files: list[Path],
    opts: AnalyzeOptions,
    out: Path,
    seed: int,
    round_timeout: float,
    quiet: bool = False,
    na_values: list[str] | None = None,
) -> None:
    """``--flower``: the same spec on a local Flower federation, one SuperNode per file.

    The progress bar is an in-process fit's (:func:`_round_progress`), fed by the rounds
    the coordinator (the ServerApp) writes in its log
    (:func:`fits.deploy.flower_launch.round_logger`), which this process reads about
    once a second while the run goes on; it appears with the first fitting round (the
    processes start before it).

    Site ``k`` (in the order given) gets node config ``seed = "SEED/k"``: child ``k`` of
    the user's seed, the seed an in-process fit gives its ``k``-th site
    (:func:`fits.analysis.glm.make_sites`), so the noise is the same.  The coordinator
    orders the sites by name (as every Flower run of fits), so the result equals the
    in-process one bit for bit when the files are given in the order of their names
    (FedLSA's per-site seeds follow that order too); otherwise the GLM sums differ in
    the last bits.
    """
    import time

    from .federate import (
        launch_module,
        remove_temporary_outputs,
        report_failure,
        run_local_federation,
        table_has_rows,
    )

    launch = launch_module()
    names = [p.stem for p in site_files]
    if len(set(names)) != len(names):
        _fail("site files need different names with --flower (a site is named by its file)", 2)
    for name, path in zip(names, site_files, strict=True):  # at once, not from its site
        if not table_has_rows(path):
            _fail(_no_rows(path, name))
    import warnings

    from fits.io import DataFileError, read_columns  # the paths were checked (_check_files)

    try:  # the names of the first site's columns, for --target and --features
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # notes on reading it: the site says them
            columns = read_columns(site_files[0])  # its header alone
    except DataFileError as exc:
        _fail(str(exc))
    spec = _spec(opts, columns)
    from fits.cli.errors import interruptible

    config = {
        "task": "analyze",
        "analysis": json.dumps(spec),
        "output": str(out.resolve()),
        "seed": seed,
        "timeout": float(round_timeout),
        "min-sites": len(site_files),
        # each site reads its file with them (fits.deploy.flower.site_na_values)
        "na-values": format_column_list(na_values) if na_values else "",
    }
    seeds = {name: f"{seed}/{k}" for k, name in enumerate(names)}
    bar, on_round = _round_progress(opts.method, quiet)
    shown = [False]  # whether the bar was started (at the first rounds line)

    def progress(line: str) -> None:
        from fits.deploy.flower_launch import read_rounds

        rounds = read_rounds(line)
        if rounds is None or on_round is None:
            return
        on_round(*rounds)
        if not shown[0]:  # started after its first count: no '0/?' first
            bar.start()
            shown[0] = True

    started = time.time()
    try:
        with interruptible("the local federation was stopped; no result was written"):
            try:
                result = run_local_federation(
                    launch,
                    dict(zip(names, site_files, strict=True)),
                    config,
                    progress=progress,
                    seeds=seeds,
                )
            finally:  # the bar's last state, one line, before any message below it
                if shown[0]:
                    bar.stop()
    finally:
        remove_temporary_outputs(out.resolve(), started)
    if not result.ok:
        report_failure(result)
    summary = next(
        (
            json.loads(line)["analysis_summary"]
            for line in result.log.splitlines()
            if line.startswith('{"analysis_summary"')
        ),
        None,
    )
    if summary:
        typer.echo(summary)
    typer.echo(f"run {result.run_id} finished in {result.seconds:.1f} s")
    typer.echo(f"result: {out}")
