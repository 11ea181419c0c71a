"""The fidelity report: every evaluator of fits on one synthetic table, as HTML and JSON.

>>> from fits import evaluate
>>> report = evaluate(real, synthetic, target="income", train=train, test=test,
...                   clients=clients)                      # doctest: +SKIP
>>> print(report.summary())                                 # doctest: +SKIP
>>> report.save("report.html", "report.json")               # doctest: +SKIP

:func:`evaluate` runs

* the energy distance (:func:`fits.evaluation.energy_distances`) of the synthetic
  table to the real one, on the covariates and on the covariates plus each response,
  next to two floors: real held-out rows (what new real data scores) and a
  column-wise independent resample (what ignoring all dependence scores);
* per-column and per-pair fidelity (:func:`fits.evaluation.column_fidelity`,
  :func:`fits.evaluation.pair_fidelity`) and association matrices (Pearson
  correlation for two numeric columns, Cramér's V otherwise);
* downstream utility under the data usage modes M1-M4 (:mod:`fits.evaluation.utility`);
* privacy checks (:mod:`fits.evaluation.privacy`);
* the exact rules kept (:func:`fits.evaluation.rules_kept`) and the residual spread of
  near-linear pairs about their line (:func:`fits.evaluation.near_linear_kept`);

and returns a :class:`Report`. ``Report.to_html()`` is one self-contained page (inline
CSS, figures as embedded PNG images, no scripts, nothing fetched from the network);
``Report.to_json()`` holds every number the page shows.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fits._dates import duration_text, seconds_text
from fits._json import jsonable
from fits.core.names import header_hint
from fits.core.schema import ConstantNote, IdentifierColumnError, Schema
from fits.io import write_text
from fits.report.render import TOP_LEVELS, fmt_number, fmt_percent, gap_text, utility_headline

if TYPE_CHECKING:  # the evaluators are imported when used: `import fits` stays light
    from fits.evaluation.privacy import PrivacyResult
    from fits.evaluation.utility import UtilityResult

__all__ = ["EvaluationOptions", "Report", "evaluate"]

#: Bins of the continuous marginal histograms.
HISTOGRAM_BINS = 40

#: The level a missing value of a nominal column is compared as, and the levels of the
#: indicator column that stands for the missing values of a numeric column.
MISSING_LABEL = "(missing)"

Frames = Sequence[pd.DataFrame] | Mapping[str, pd.DataFrame]


# ---------------------------------------------------------------------------------------
# the report object
# ---------------------------------------------------------------------------------------


@dataclass
class Report:
    """Everything :func:`evaluate` computed, with its HTML and JSON renderings.

    Attributes
    ----------
    data : dict
        Every number of the report, JSON-ready (what :meth:`to_json` writes).
    figures : dict of str to str
        Figure name -> PNG image, base64-encoded.
    energy : pandas.DataFrame
        Energy distances: one row per compared table, one column per column set.
    column_scores, pair_scores : pandas.DataFrame
        Per-column and per-pair fidelity of the synthetic table.
    utility : dict of str to UtilityResult
        Downstream utility per response.
    privacy : PrivacyResult or None
        Privacy checks.
    """

    data: dict[str, Any]
    figures: dict[str, str] = field(repr=False)
    energy: pd.DataFrame = field(repr=False)
    column_scores: pd.DataFrame = field(repr=False)
    pair_scores: pd.DataFrame = field(repr=False)
    utility: dict[str, UtilityResult] = field(repr=False)
    privacy: PrivacyResult | None = field(repr=False)

    # -- renderings ---------------------------------------------------------------------

    def to_json(self, indent: int | None = 2) -> str:
        """The report's numbers as JSON (every number the HTML page shows)."""
        return json.dumps(jsonable(self.data), indent=indent, ensure_ascii=False)

    def summary(self) -> str:
        """A few lines of plain text: the headline of each section."""
        return "\n".join(_summary_lines(self.data))

    def to_html(self) -> str:
        """One self-contained HTML page (inline CSS and images, no scripts, no links out)."""
        from fits.report.render import render_html

        return render_html(self.data, self.figures)

    def save(
        self, html_path: str | os.PathLike[str], json_path: str | os.PathLike[str] | None = None
    ):
        """Write the HTML page (and the JSON) atomically.

        Each file is written to a temporary file in its target folder and then
        renamed over the target, so a reader never sees a half-written report.

        Parameters
        ----------
        html_path : path-like
            Where to write the HTML page (its folder must exist; a symbolic link is
            written through, the link kept).
        json_path : path-like, optional
            Where to write the JSON.

        Raises
        ------
        fits.io.OutputError
            A path ends with a slash (a folder), before anything is written.
        FileNotFoundError
            A path's folder does not exist.
        """
        from fits.io import output_path

        html_file = output_path(html_path, "save: html_path")
        json_file = None if json_path is None else output_path(json_path, "save: json_path")
        # both rendered before either is written: a JSON that cannot be made left the
        # new page beside the old JSON, under an error saying no report was written
        html = self.to_html()
        text = self.to_json() + "\n" if json_file is not None else None
        _atomic_write(html_file, html)
        if json_file is not None and text is not None:
            _atomic_write(json_file, text)


def _atomic_write(path: Path, text: str) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(
            f"cannot write {str(path)!r}: the folder {str(folder)!r} does not exist"
        )
    write_text(text, path)


# ---------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------


def _infer_kinds(real: pd.DataFrame, overrides: Mapping[str, str] | None) -> dict[str, str]:
    """Column kinds by fits' schema inference on the real table, with overrides."""
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(map(str, real.columns)))
    if unknown:
        raise ValueError(f"kinds given for column(s) {unknown} that the real table lacks")
    with warnings.catch_warnings():  # the fit's note on constant columns ("--drop"
        # them to leave them out of the synthetic table) does not fit here
        warnings.simplefilter("ignore", ConstantNote)
        try:
            schema = Schema.detect(
                {"real table": real}, kinds=overrides, parse_text=False, rules=False
            )
        except IdentifierColumnError as exc:  # identifiers / free text: kind "id"
            overrides.update({c: "id" for c in exc.columns})
            schema = Schema.detect(
                {"real table": real}, kinds=overrides, parse_text=False, rules=False
            )
    # a column of one value (kind "constant"): compared as a nominal column; one of no
    # value stays "constant", left out of the evaluation (evaluate says so)
    kinds = {
        c: "nominal" if k == "constant" and not schema[c].all_missing else k
        for c, k in schema.kinds().items()
    }
    return {str(c): kinds.get(str(c), "nominal") for c in real.columns}


def _as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _tasks_for(
    targets: list[str], task: str | Sequence[str] | Mapping[str, str] | None
) -> dict[str, str | None]:
    if task is None:
        return {t: None for t in targets}
    if isinstance(task, str):
        return {t: task for t in targets}
    if isinstance(task, Mapping):
        unknown = sorted(set(task) - set(targets))
        if unknown:
            raise ValueError(f"task given for {unknown}, which are not targets {targets}")
        return {t: task.get(t) for t in targets}
    tasks = list(task)
    if len(tasks) == 1:
        return {t: tasks[0] for t in targets}
    if len(tasks) != len(targets):
        raise ValueError(f"{len(tasks)} tasks for {len(targets)} targets; give one or one each")
    return dict(zip(targets, tasks, strict=True))


def _settings_dict(settings: Any) -> dict[str, Any]:
    """The settings that produced the data, as a flat JSON-ready mapping."""
    if settings is None:
        return {}
    if isinstance(settings, Mapping):
        return {str(k): jsonable(v) for k, v in settings.items()}
    out: dict[str, Any] = {"synthesizer": type(settings).__name__}
    for name, value in sorted(vars(settings).items()):
        if name.startswith("_"):
            continue
        if name == "schema_":
            out["kinds"] = jsonable(value.kinds())
            out["order"] = jsonable(list(value.order))
            continue
        if isinstance(value, (str, int, float, bool, type(None), list, tuple, dict)):
            out[name] = jsonable(value)
        else:
            out[name] = str(value)
    for name in ("uploaded_bytes_",):
        try:
            out[name] = jsonable(getattr(settings, name))
        except Exception:  # noqa: BLE001 - a property of an unfitted object may raise
            pass
    return out


# ---------------------------------------------------------------------------------------
# association matrices and marginals
# ---------------------------------------------------------------------------------------


def _cramers_v(a: np.ndarray, b: np.ndarray, na: int, nb: int) -> float:
    counts = np.bincount(a * nb + b, minlength=na * nb).reshape(na, nb).astype(np.float64)
    counts = counts[counts.sum(axis=1) > 0][:, counts.sum(axis=0) > 0]
    r, c = counts.shape
    if min(r, c) < 2:
        return 0.0
    n = counts.sum()
    expected = counts.sum(axis=1, keepdims=True) * counts.sum(axis=0, keepdims=True) / n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    return float(np.sqrt(min(1.0, chi2 / (n * (min(r, c) - 1)))))


def _associations(
    real: pd.DataFrame, synthetic: pd.DataFrame, kinds: Mapping[str, str], columns: list[str]
) -> dict[str, Any]:
    """Pearson correlation for numeric pairs, Cramér's V (binned numerics) otherwise."""
    from fits.evaluation.encoding import discretize, numeric_values, ordinal_values_many, pearson

    n = len(columns)
    mat_r = np.eye(n)
    mat_s = np.eye(n)
    measure = [["" for _ in range(n)] for _ in range(n)]
    numeric_r: dict[str, np.ndarray] = {}
    numeric_s: dict[str, np.ndarray] = {}
    coded: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
    for col in columns:
        if kinds[col] == "continuous":
            numeric_r[col] = numeric_values(real[col], col, "real")
            numeric_s[col] = numeric_values(synthetic[col], col, "synthetic")
        elif kinds[col] == "ordinal":
            numeric_r[col], numeric_s[col] = ordinal_values_many(
                [real[col], synthetic[col]], col, ("real", "synthetic")
            )
    for i, j in combinations(range(n), 2):
        a, b = columns[i], columns[j]
        if a in numeric_r and b in numeric_r:
            vr = pearson(numeric_r[a], numeric_r[b])
            vs = pearson(numeric_s[a], numeric_s[b])
            what = "pearson"
        else:
            for col in (a, b):
                if col not in coded:
                    coded[col] = discretize(real[col], synthetic[col], kinds[col], col, 10)
            ar, as_, na = coded[a]
            br, bs, nb = coded[b]
            vr = _cramers_v(ar, br, na, nb)
            vs = _cramers_v(as_, bs, na, nb)
            what = "cramers_v"
        mat_r[i, j] = mat_r[j, i] = vr
        mat_s[i, j] = mat_s[j, i] = vs
        measure[i][j] = measure[j][i] = what
    return {"columns": columns, "real": mat_r, "synthetic": mat_s, "measure": measure}


def _marginal(real: pd.Series, synthetic: pd.Series, kind: str, col: str) -> dict[str, Any]:
    """The numbers behind one marginal overlay."""
    from fits.evaluation.encoding import numeric_values

    if kind != "continuous":
        r = pd.Series(real.to_numpy(dtype=object))
        s = pd.Series(synthetic.to_numpy(dtype=object))
        share_r = r.value_counts(normalize=True)
        share_s = s.value_counts(normalize=True)
        levels = list(dict.fromkeys([*share_r.index, *share_s.index]))
        if kind == "ordinal" and len(levels) <= 30:
            try:
                levels = sorted(levels)
            except TypeError:
                pass
            shown, rest = levels, []
        else:
            levels.sort(key=lambda v: (-share_r.get(v, 0.0), -share_s.get(v, 0.0)))
            shown, rest = levels[:TOP_LEVELS], levels[TOP_LEVELS:]
        out: dict[str, Any] = {
            "kind": kind,
            "levels": [str(v) for v in shown],
            "real": [float(share_r.get(v, 0.0)) for v in shown],
            "synthetic": [float(share_s.get(v, 0.0)) for v in shown],
        }
        if rest:
            out["other"] = {
                "n_levels": len(rest),
                "real": float(sum(share_r.get(v, 0.0) for v in rest)),
                "synthetic": float(sum(share_s.get(v, 0.0) for v in rest)),
            }
        return out
    xr = numeric_values(real, col, "real")
    xs = numeric_values(synthetic, col, "synthetic")
    lo = min(np.quantile(xr, 0.005), np.quantile(xs, 0.005))
    hi = max(np.quantile(xr, 0.995), np.quantile(xs, 0.995))
    if not hi > lo:
        lo, hi = float(min(xr.min(), xs.min())), float(max(xr.max(), xs.max()))
        if not hi > lo:
            lo, hi = lo - 0.5, hi + 0.5
    integral = bool(np.all(xr == np.round(xr)) and np.all(xs == np.round(xs)))
    if integral:
        # integer values: bins of whole units centred on the integers (no aliasing combs)
        width = max(1.0, float(np.ceil((hi - lo + 1) / HISTOGRAM_BINS)))
        edges = np.arange(np.floor(lo) - 0.5, np.ceil(hi) + 0.5 + width, width)
    else:
        edges = np.linspace(lo, hi, HISTOGRAM_BINS + 1)
    hist_r = np.histogram(xr, edges)[0] / xr.size
    hist_s = np.histogram(xs, edges)[0] / xs.size
    clipped_r = float(np.mean((xr < lo) | (xr > hi)))
    clipped_s = float(np.mean((xs < lo) | (xs > hi)))
    return {
        "kind": kind,
        "edges": edges,
        "real": hist_r,
        "synthetic": hist_s,
        "clipped": {"real": clipped_r, "synthetic": clipped_s},
    }


# ---------------------------------------------------------------------------------------
# evaluate
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvaluationOptions:
    """How :func:`evaluate` evaluates: its keyword settings, grouped.

    :func:`evaluate` takes them as keywords (see there for each) and passes this
    object to its steps; it is also what the page's "Evaluation" table shows.
    """

    ratios: tuple[float, ...] = (1.0,)
    lambdas: tuple[float, ...] = (0.1,)
    boosting: bool = True
    boosting_iterations: int = 100
    utility: bool = True
    privacy: bool = True
    max_rows: int | None = None
    privacy_rows: int | None = 20_000
    seed: int = 0
    n_jobs: int | None = None


def evaluate(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    kinds: Mapping[str, str] | None = None,
    *,
    target: str | Sequence[str] | None = None,
    task: str | Sequence[str] | Mapping[str, str] | None = None,
    train: pd.DataFrame | None = None,
    test: pd.DataFrame | None = None,
    clients: Frames | None = None,
    settings: Any = None,
    reference_params: Mapping[str, Any] | None = None,
    ratios: Sequence[float] = (1.0,),
    lambdas: Sequence[float] = (0.1,),
    boosting: bool = True,
    boosting_iterations: int = 100,
    utility: bool = True,
    privacy: bool = True,
    max_rows: int | None = None,
    privacy_rows: int | None = 20_000,
    seed: int = 0,
    title: str | None = None,
    sources: Mapping[str, str] | None = None,
    n_jobs: int | None = None,
    progress: Callable[[str], None] | None = None,
    inference: Mapping[str, Any] | None = None,
    direct_fits: Mapping[str, Callable[..., Any]] | None = None,
    rules: Sequence[Any] | None = None,
) -> Report:
    """Evaluate a synthetic table against real data and build the fidelity report.

    Parameters
    ----------
    real : DataFrame
        The reference real table: the full real data (training and held-out rows), as
        in the paper's sec. 6.2.3. It sets the scale of the energy distance and is the
        reference of every fidelity measure.
    synthetic : DataFrame
        The synthetic table (it must hold every column of ``real``).
    kinds : mapping, optional
        Column -> ``"continuous"`` / ``"ordinal"`` / ``"nominal"``. Columns left out
        (or all of them, with None) are inferred with fits' schema inference on
        ``real`` (:meth:`fits.core.schema.Schema.detect`).
    target : str or list of str, optional
        The response column(s). Energy distances are reported for the covariates
        (every other column) and for the covariates plus each response; downstream
        utility is evaluated per response. Without a target: energy distance on all
        columns, no utility.
    task : str, list or mapping, optional
        ``"regression"`` or ``"classification"`` (one for all targets, one per
        target, or by name); default inferred (a two-level discrete target is
        classification).
    train : DataFrame, optional
        The real rows the synthesizer was fitted on (default: the clients' rows
        together). Used by the privacy checks and the independent-columns floor.
    test : DataFrame, optional
        Real rows held out from fitting: the "real held-out rows" floor of the
        energy distance, the test set of the utility models, and the privacy
        baseline. Without it, utility is tested on ``real`` (which includes training
        rows) and the privacy baseline is leave-one-out.
    clients : sequence or mapping of DataFrame, optional
        Each client's real rows, for the per-client modes M2-M4. Without clients but
        with ``train``, the training rows act as one client; without either, only
        M1 is evaluated.
    settings : mapping or FITSSynthesizer, optional
        The settings that produced the synthetic table, shown in the report.
    reference_params : mapping, optional
        True parameters of the parametric downstream model, by target, each
        ``{"intercept": ..., "coef": {...}}`` (e.g. ``{"Y_lin":
        data.params["linear"], "Y_log": data.params["logistic"]}`` for
        :func:`fits.datasets.simulate`). Default: the fit on ``real``.
    ratios, lambdas : sequence of float
        M3's ``r`` values and M4's synthetic loss weights.
    boosting, utility, privacy : bool
        Switch the gradient-boosting model, the utility section or the privacy
        section off.
    boosting_iterations : int, default 100
        Boosting rounds of the gradient-boosting model.
    max_rows : int, optional
        Subsample each table to at most this many rows for the energy distances
        (default: exact on all rows).
    privacy_rows : int or None, default 20,000
        At most this many synthetic and baseline rows in the privacy checks.
    seed : int, default 0
        Seed of every random draw (independent resample, subsamples, M3 draws,
        boosting).
    title : str, optional
        Page title.
    sources : mapping, optional
        Where the tables came from (e.g. file names), shown with the settings.
    n_jobs : int, optional
        Threads for the energy distances (default: every CPU this process may use).
    progress : callable, optional
        Called with one line of text after each step.
    inference : mapping, optional
        The "Inference" section: federated against synthetic-data inference for one
        numeric target, as :meth:`fits.analysis.InferenceCheck.to_dict` writes it
        (FedLSA across the real sites against OLS with HC1 intervals on the synthetic
        table; the report layer does not run FedLSA itself, ``fits report`` does).
        ``{"skipped": reason}`` leaves the section out with a note.
    direct_fits : mapping of str to callable, optional
        Models fitted directly across the clients, shown in the utility section next
        to M1-M4 on the same test rows and parameter-error yardstick (see
        ``direct`` of :func:`fits.evaluation.utility.downstream_utility`; ``fits
        report`` passes Newton without privacy and FedNewton at a stated mu, from
        :func:`fits.analysis.glm.direct_fit`). Needs ``clients``.
    rules : sequence of Rule or dict, optional
        The exact rules whose share of synthetic rows kept the "Rules kept" section
        shows (:func:`fits.evaluation.rules_kept`), and the ``"linear"`` rules whose
        real and synthetic residual spread the "Near-linear columns" section compares
        (:func:`fits.evaluation.near_linear_kept`, on ``real`` and ``synthetic``).
        Default: the fitted synthesizer's (``settings.schema_.rules``) if it used any,
        else the rules that hold in every row of every client (or of ``train``, else
        of ``real``) and the near-linear pairs there, found as a fit's setup finds
        them; an empty list leaves both sections out.  A near-linear rule between two
        datetime columns given here or by the synthesizer is in the fit's units
        (seconds); the section tells its bounds and spreads as durations.

    Returns
    -------
    Report

    Notes
    -----
    The steps, each a function of its own: check and align the inputs, energy
    distances, column and pair fidelity, downstream utility, privacy checks, assemble
    the data, draw the figures. The evaluation settings are grouped in
    :class:`EvaluationOptions`.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer >= 0, got {seed!r}")
    if seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    options = EvaluationOptions(
        ratios=tuple(float(r) for r in ratios),
        lambdas=tuple(float(lam) for lam in lambdas),
        boosting=boosting,
        boosting_iterations=boosting_iterations,
        utility=utility,
        privacy=privacy,
        max_rows=max_rows,
        privacy_rows=privacy_rows,
        seed=seed,
        n_jobs=n_jobs,
    )
    timer = _Timer(progress)
    inputs = _check_inputs(real, synthetic, kinds, target, task, train, test, clients)
    if utility:  # a target no downstream model handles stops the report before any step
        from fits.evaluation.utility import infer_task

        for t in inputs.targets:
            if inputs.tasks[t] is None:
                infer_task(inputs.kinds, t, [inputs.real, inputs.synthetic])
    # one stream each: independent resample, energy-distance subsamples, privacy subsamples
    seeds = np.random.SeedSequence(seed).spawn(3)
    with timer("energy distances"):
        energy = _energy_step(inputs, options, seeds[0], seeds[1])
    with timer("column and pair fidelity"):
        fidelity = _fidelity_step(inputs, energy.independent)
    utility_results: dict[str, UtilityResult] = {}
    boosting_results: dict[str, Any] = {}
    if utility and inputs.targets:
        with timer("downstream utility"):
            utility_results = _utility_step(inputs, options, reference_params, direct_fits)
        if boosting:
            with timer("gradient boosting, real vs synthetic"):
                boosting_results = _boosting_step(inputs, options)
    elif utility:
        inputs.notes.append("no target given: downstream utility was not evaluated")
    privacy_result: PrivacyResult | None = None
    if privacy:
        with timer("privacy checks"):
            privacy_result = _privacy_step(inputs, options, seeds[2])
    data = _assemble(
        inputs, options, energy.table, fidelity, utility_results, privacy_result,
        title=title, settings=settings, sources=sources,
    )  # fmt: skip
    data["boosting"] = boosting_results
    with timer("figures"):
        figures = _figures(data, fidelity, utility_results, privacy_result)
    if inference is not None and "skipped" in inference:
        data["notes"].append(f"inference check skipped: {inference['skipped']}")
        data["inference"] = None
    else:
        data["inference"] = dict(inference) if inference is not None else None
    with timer("rules kept"):
        data["rules"], data["near_linear"] = _rules_step(inputs, settings, rules)
    data["meta"]["timings_s"] = timer.total()
    return Report(
        data=jsonable(data),
        figures=figures,
        energy=energy.table,
        column_scores=fidelity.column_scores,
        pair_scores=fidelity.pair_scores,
        utility=utility_results,
        privacy=privacy_result,
    )


# ---------------------------------------------------------------------------------------
# the steps of evaluate
# ---------------------------------------------------------------------------------------


class _Timer:
    """Seconds per step (reported to ``progress`` as each one ends) and in all."""

    def __init__(self, progress: Callable[[str], None] | None) -> None:
        self.progress = progress
        self.started = time.perf_counter()
        self.timings: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        yield
        self.timings[name] = time.perf_counter() - t0
        if self.progress is not None:
            self.progress(f"{name}: {self.timings[name]:.1f} s")

    def total(self) -> dict[str, float]:
        return {**self.timings, "total": time.perf_counter() - self.started}


@dataclass
class _Inputs:
    """The checked tables of one evaluation, aligned on the real table's columns."""

    real: pd.DataFrame
    synthetic: pd.DataFrame
    columns: list[str]
    kinds: dict[str, str]
    targets: list[str]
    tasks: dict[str, str | None]
    covariates: list[str]
    train: pd.DataFrame | None
    test: pd.DataFrame | None
    clients: dict[str, pd.DataFrame]
    notes: list[str] = field(default_factory=list)
    #: numeric column -> (its indicator column, the rows of the real table and of the
    #: synthetic table with a value), for the columns with missing values
    present: dict[str, tuple[str, np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: the datetime columns, held in the tables as days since 1970-01-01 UTC
    dates: list[str] = field(default_factory=list)


def _check_frames(real: Any, synthetic: Any) -> None:
    for name, frame in (("real", real), ("synthetic", synthetic)):
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"`{name}` must be a pandas DataFrame, got {type(frame).__name__}")
        if len(frame) == 0:
            raise ValueError(f"the {name} table has no rows")
    for name, frame in (("real", real), ("synthetic", synthetic)):
        odd = [c for c in frame.columns if not isinstance(c, str)]
        if odd:
            raise ValueError(
                f"column names of the {name} table must be strings, got {odd[:5]}; rename them "
                "(e.g. frame.columns = frame.columns.map(str))"
            )


def _client_frames(clients: Frames | None) -> dict[str, pd.DataFrame]:
    """``clients`` as a dict by name, after refusing what is not one DataFrame per
    site (one DataFrame's column names would be read as the sites)."""
    if clients is None:
        return {}
    if isinstance(clients, Mapping):
        named = [(str(k), v) for k, v in clients.items()]
    elif (
        isinstance(clients, pd.DataFrame)
        or not isinstance(clients, Sequence)
        or isinstance(clients, str)
    ):
        raise TypeError(
            "`clients` takes one DataFrame per site, as a list or a mapping by site name "
            f"(e.g. clients=[site_a, site_b]), got {type(clients).__name__}"
        )
    else:
        named = [(f"client {k + 1}", v) for k, v in enumerate(clients)]
    for name, frame in named:
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(
                f"`clients`: site {name!r} must be a pandas DataFrame, got {type(frame).__name__}"
            )
    return {name: frame.reset_index(drop=True) for name, frame in named}


def client_label(name: str) -> str:
    """How messages name client ``name`` ("the client 'a' table"; a client of a list,
    "client 2", as it is): never "real", "synthetic", "train" or "test"."""
    return name if re.fullmatch(r"client \d+", name) else f"client {name!r}"


def _check_client_types(clients: Mapping[str, pd.DataFrame]) -> None:
    """Refuse a column of numbers in one client's table and of text in another's that
    no site would read as numbers (``31 years``; :func:`fits.core.schema.parse_text_columns`):
    a fit refuses such sites ("numeric at some clients and text at others"), and pooled
    as the real table its numbers and labels were compared as one nominal column of
    both."""
    from fits.core.schema import parse_text_columns

    frames = {client_label(n): f for n, f in clients.items()}
    columns = list(dict.fromkeys(c for f in frames.values() for c in f.columns))
    for c in columns:
        numeric = [
            n for n, f in frames.items() if c in f.columns and _numeric(f[c]) and f[c].notna().any()
        ]
        if not numeric:
            continue
        for name, frame in frames.items():
            if c not in frame.columns or _numeric(frame[c]) or not frame[c].notna().any():
                continue
            if pd.api.types.is_datetime64_any_dtype(frame[c].dtype):
                continue  # dates: compared (or refused) with the other dates
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                parsed, _ = parse_text_columns(frame[[c]], text_only=True)
            if _numeric(parsed[c]):
                continue  # '$1,234': read as numbers, as a site reads it
            values = frame[c].dropna().iloc[:2].tolist()
            raise ValueError(
                f"column {c!r} holds numbers in the {numeric[0]} table but text in the "
                f"{name} table (values like {values}), which a fit refuses (numeric at some "
                "clients and text at others): write it as numbers in every client's table"
            )


def _labels(series: pd.Series) -> list[Any]:
    """The distinct present values of a column as plain Python values, sorted (numbers
    before text)."""
    values = {v.item() if isinstance(v, np.generic) else v for v in series.dropna().unique()}
    return sorted(values, key=lambda v: (isinstance(v, str), str(v)))


def _check_target_codings(
    targets: Sequence[str],
    tasks: Mapping[str, str | None],
    kinds: Mapping[str, str],
    real: pd.DataFrame,
    tables: Sequence[tuple[str, pd.DataFrame | None]],
) -> None:
    """Refuse a two-level target that another table codes with other labels.

    Parameters
    ----------
    targets : sequence of str
        The targets.
    tasks : mapping of str to str or None
        Each target's task, None where it is inferred.
    kinds : mapping of str to str
        The column kinds.
    real : pandas.DataFrame
        The real table, whose labels are the target's coding.
    tables : sequence of (str, pandas.DataFrame or None)
        The other tables by the name messages give them (``"synthetic"``, ``"train"``,
        ``"client 'a'"``); None is passed over, as is a table without the target.

    Raises
    ------
    ValueError
        A table holds labels of a (binary, non-continuous) target that the real table
        does not hold: a different coding, such as 0/1 against ``<=50K``/``>50K`` (was:
        "target 'income' is nominal with 4 levels", the two tables' labels pooled).
    """
    for t in targets:
        if kinds.get(t) == "continuous" or tasks.get(t) == "regression":
            continue
        coding = _labels(real[t])
        if len(coding) != 2 and tasks.get(t) != "classification":
            continue
        known = set(coding)
        for name, frame in tables:
            if frame is None or t not in frame.columns:
                continue
            theirs = _labels(frame[t])
            if set(theirs) <= known:
                continue
            shown = theirs if len(theirs) <= 10 else [*theirs[:10], "..."]
            folded = {str(v).strip().casefold() for v in coding}
            alike = {str(v).strip().casefold() for v in theirs} <= folded
            raise ValueError(
                f"target {t!r} is coded differently in the {name} table and the real "
                f"table: the real table holds the labels {coding}, the {name} table "
                f"{shown}"
                + (" (the same up to letter case or spaces)" if alike else "")
                + f"; the codings must be the same: code the {name} table's target as the "
                f"real one's ({' and '.join(map(repr, coding))})"
            )


def _numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype)


def _share_a_value(real: pd.Series, synthetic: pd.Series) -> bool:
    """Whether the two columns have a non-missing value in common (or one has none)."""
    a, b = set(real.dropna().unique()), set(synthetic.dropna().unique())
    return not a or not b or bool(a & b)


def _decimals_as_floats(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns of ``decimal.Decimal`` objects (Parquet decimals) as float64, and columns of
    ``datetime.date`` objects (Parquet dates, as fits writes a date column) as datetimes:
    numbers and dates, as a fit reads them, not the identifiers their many distinct
    object values would look like (a date column was left out of the evaluation)."""
    objects = [c for c in frame.columns if frame[c].dtype == object]
    inferred = {c: pd.api.types.infer_dtype(frame[c]) for c in objects}
    decimal = [c for c in objects if inferred[c] == "decimal"]
    dates = [c for c in objects if inferred[c] == "date"]
    if not decimal and not dates:
        return frame
    return frame.assign(
        **{c: frame[c].astype(np.float64) for c in decimal},
        **{c: pd.to_datetime(frame[c]) for c in dates},
    )


def _check_declared_numbers(kinds: Mapping[str, str], tables: Mapping[str, pd.DataFrame]) -> None:
    """Refuse a column ``kinds=`` declares continuous that a table holds as labels.

    Raises
    ------
    ValueError
        Naming the column, the table, values like the labels and the fix (was: "column
        'g' in the real table is not numeric (dtype str)", without a word of ``kinds``).
    """
    from fits.evaluation.encoding import text_values

    for col, kind in kinds.items():
        if kind != "continuous":
            continue
        for name, frame in tables.items():
            text = text_values(frame[col]) if col in frame.columns else []
            if text:
                raise ValueError(
                    f'kinds= declares column {col!r} "continuous", but the {name} table '
                    f'holds text in it (values like {text}): declare it "nominal" (labels), '
                    '"ordinal" (ordered labels) or "id" (left out), or leave it out of '
                    "kinds= to have its kind inferred, or convert the column to numbers "
                    "(dates with pandas.to_datetime)"
                )


def _check_inputs(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    kinds: Mapping[str, str] | None,
    target: str | Sequence[str] | None,
    task: str | Sequence[str] | Mapping[str, str] | None,
    train: pd.DataFrame | None,
    test: pd.DataFrame | None,
    clients: Frames | None,
) -> _Inputs:
    """Check the tables and options of :func:`evaluate`; align every table on ``real``."""
    _check_frames(real, synthetic)
    notes: list[str] = []
    real = _decimals_as_floats(real.reset_index(drop=True))
    synthetic = _decimals_as_floats(synthetic.reset_index(drop=True))
    train = None if train is None else _decimals_as_floats(train)
    test = None if test is None else _decimals_as_floats(test)
    if clients is not None:  # checked, named ("client 1", ... for a list)
        clients = {k: _decimals_as_floats(v) for k, v in _client_frames(clients).items()}
        _check_client_types(clients)
    # before kinds are inferred (a column of aware and naive times pooled reads as text)
    # and before the clients' rows are pooled
    zoned = _same_zone(
        {client_label(n): f for n, f in (clients or {}).items()}
        | {"real": real, "synthetic": synthetic, "train": train, "test": test},
        [str(c) for c in real.columns],
        notes,
    )
    real, synthetic, train, test = (zoned[k] for k in ("real", "synthetic", "train", "test"))
    if clients is not None:
        clients = {n: zoned[client_label(n)] for n in clients}
    columns = list(real.columns)
    extra = [str(c) for c in synthetic.columns if c not in columns]
    kinds = dict(kinds or {})
    _check_declared_numbers(kinds, {"real": real, "synthetic": synthetic})
    kinds = (
        {c: kinds[c] for c in columns} if set(kinds) >= set(columns) else _infer_kinds(real, kinds)
    )
    missing = [c for c in columns if c not in synthetic.columns]
    # a column the evaluation leaves out anyway (an identifier or free text, e.g. one
    # `fits synthesize --drop` left out) lacking from the synthetic table changes no
    # number of the report: a note, not an error (was: the error, whose "did you mean"
    # offered a column of both tables); as a target, the error below says why it cannot
    skipped = [c for c in missing if kinds[c] == "id" and c not in _as_list(target)]
    missing = [c for c in missing if c not in skipped]
    if missing:
        raise ValueError(
            f"the synthetic table lacks column(s) {missing}"
            # only a header no real column matches can be the one meant
            f"{header_hint(missing, extra)} of the real table: "
            "compare a "
            "synthetic table made from these real tables, or leave those columns out of "
            "the real table (e.g. a synthetic table made with --drop lacks them)"
        )
    if skipped:
        notes.append(
            f"the synthetic table lacks column(s) {skipped}, which look like identifiers or "
            "free text (or are declared 'id'): the evaluation leaves them out anyway"
        )
        columns = [c for c in columns if c not in skipped]
        real = real[columns]
        kinds = {c: kinds[c] for c in columns}
    if extra:
        notes.append(f"synthetic column(s) {extra} are not in the real table and were ignored")
    synthetic = synthetic[columns]
    # kind "constant" (a fit's schema's, or a real column of no value): one of one value
    # is compared as a nominal column (its fidelity is exact where the synthetic table
    # holds that value); one missing in every real row is left out, with a note
    empty = [c for c in columns if kinds[c] == "constant" and real[c].isna().all()]
    kinds = {c: "nominal" if k == "constant" and c not in empty else k for c, k in kinds.items()}
    if empty:
        held = [c for c in empty if synthetic[c].notna().any()]
        notes.append(
            f"column(s) {empty} have no value in any row of the real table (fits writes "
            "such a column as missing and does not model it); left out of the evaluation"
            + (f"; the synthetic table holds values in {held}" if held else "")
        )
        if len(empty) == len(columns):
            raise ValueError("every column of the real table is missing in every row")
        for t in _as_list(target):
            if t in empty:
                raise ValueError(
                    f"target {t!r} has no value in any row of the real table; choose another"
                )
        columns = [c for c in columns if c not in empty]
        real, synthetic = real[columns], synthetic[columns]
        kinds = {c: kinds[c] for c in columns}
    single = [c for c in columns if kinds[c] != "id" and real[c].nunique(dropna=False) == 1]
    if single:
        notes.append(
            f"column(s) {single} hold one value in every row of the real table (a fit "
            "writes a column of one value at every site as that value and does not model "
            "it); compared as nominal "
            "columns, their fidelity is exact where the synthetic table holds the value in "
            "every row"
        )
    unmodelled = [c for c in columns if kinds[c] == "id"]
    if unmodelled:  # identifiers and free text have no distribution to compare
        notes.append(
            f"column(s) {unmodelled} look like identifiers or free text (or are declared "
            "'id') and are left out of the evaluation"
        )
        columns = [c for c in columns if c not in unmodelled]
        if not columns:
            raise ValueError("every column of the real table is an identifier or free text")
        real, synthetic = real[columns], synthetic[columns]
        kinds = {c: kinds[c] for c in columns}
    for kind in ("nominal", "ordinal"):
        disjoint = [
            c for c in columns if kinds[c] == kind and not _share_a_value(real[c], synthetic[c])
        ]
        if disjoint:  # e.g. labels in one table and codes in the other: every row differs
            notes.append(
                f"{kind} column(s) {disjoint}: the synthetic table holds none of the real "
                "table's values (a different coding, such as labels against numbers?); "
                "their fidelity is 0"
            )
    targets = _as_list(target)
    for t in targets:
        if t in unmodelled:
            raise ValueError(
                f"target {t!r} looks like an identifier or free text (or is declared 'id'); "
                "it cannot be a target: choose another, or give its kind"
            )
        if t not in columns:
            raise ValueError(f"target {t!r} is not a column of the real table; columns: {columns}")
    if len(set(targets)) != len(targets):
        raise ValueError(f"duplicate targets {targets}")
    tasks = _tasks_for(targets, task)
    client_frames = _client_frames(clients)
    _check_target_codings(
        targets,
        tasks,
        kinds,
        real,
        [
            ("synthetic", synthetic),
            ("train", train),
            ("test", test),
            *((client_label(n), f) for n, f in client_frames.items()),
        ],
    )
    for c in columns:  # a numeric column whose synthetic values are text: say which
        numeric = kinds[c] in ("continuous", "ordinal") and _numeric(real[c])
        if numeric and synthetic[c].isna().all():
            synthetic = synthetic.assign(**{c: synthetic[c].astype(np.float64)})  # no dtype
        if numeric and not _numeric(synthetic[c]):
            raise ValueError(
                f"column {c!r} is numeric in the real table but not in the synthetic table "
                f"(dtype {synthetic[c].dtype}, values like "
                f"{synthetic[c].dropna().iloc[:2].tolist()}); write it as numbers"
            )
    labels = {name: client_label(name) for name in client_frames}
    for name, frame in [
        ("train", train),
        ("test", test),
        *((labels[n], f) for n, f in client_frames.items()),
    ]:
        if frame is None:
            continue
        lacking = [c for c in columns if c not in frame.columns]
        if lacking:
            raise ValueError(
                f"the {name} table lacks column(s) {lacking}"
                f"{header_hint(lacking, [str(c) for c in frame.columns if c not in columns])}"
                " of the real table: "
                "give it "
                "the real table's columns, or leave those columns out of the real table"
            )
        if len(frame) == 0:
            raise ValueError(f"the {name} table has no rows")
        for c in columns:  # else an evaluator names a derived table ('independent columns')
            numeric = kinds[c] in ("continuous", "ordinal") and _numeric(real[c])
            if numeric and not _numeric(frame[c]):
                raise ValueError(
                    f"column {c!r} is numeric in the real table but not in the {name} table "
                    f"(dtype {frame[c].dtype}, values like {frame[c].dropna().iloc[:2].tolist()}); "
                    "write it as numbers"
                )
    pooled = train is None and bool(client_frames)  # the training rows: the clients'
    if pooled:
        train = pd.concat(list(client_frames.values()), ignore_index=True)
    if (train is None or test is None) and len(real if train is None else train) < 2:
        # the privacy checks' leave-one-out baseline, found out after every other step
        which = "real" if train is None else "client" if pooled else "train"
        raise ValueError(
            f"the {which} table{'s hold' if pooled else ' holds'} a single row; the privacy "
            "checks compare each real row with the other real rows (leave-one-out) and need "
            "at least two: give the whole real table"
            + ("" if train is None else ", or held-out rows (--test)")
        )
    if train is not None:
        train = train[columns].reset_index(drop=True)
    if test is not None:
        test = test[columns].reset_index(drop=True)
    tables = {"real": real, "synthetic": synthetic, "train": train, "test": test}
    tables = {k: v for k, v in tables.items() if v is not None}
    # the clients under labels of their own: a client named "synthetic" (its file
    # synthetic.csv) replaced the synthetic table here, and one named "test" the test set
    tables.update({labels[n]: f for n, f in client_frames.items()})
    dates = [  # datetime columns (days since 1970 from here on)
        c
        for c in columns
        if any(pd.api.types.is_datetime64_any_dtype(f[c].dtype) for f in tables.values())
    ]
    present = _comparable(
        tables, columns, kinds, targets, notes, pooled=("train",) if pooled else ()
    )
    kinds = {c: kinds[c] for c in columns}  # an indicator after its column
    real, synthetic = tables["real"], tables["synthetic"]
    train, test = tables.get("train"), tables.get("test")
    if test is not None and len(test) < FEW_TEST_ROWS:
        notes.append(
            f"the held-out rows are only {len(test)}: the energy distance's floor, the "
            "test scores and the privacy checks' baseline rest on them and vary widely "
            f"from one such split to another; hold out at least {FEW_TEST_ROWS} rows"
        )
    client_frames = {n: tables[labels[n]] for n in client_frames}
    covariates = [c for c in columns if c not in targets]
    if not covariates:
        raise ValueError("every column is a target: no covariates are left")
    return _Inputs(
        real, synthetic, columns, kinds, targets, tasks, covariates, train, test, client_frames,
        notes, present, dates,
    )  # fmt: skip


#: Fewer held-out rows (``test``) than this get a note: the floor, the test scores and
#: the privacy baseline rest on them (a 5-row split gave a floor 7 times the synthetic
#: table's distance).
FEW_TEST_ROWS = 100


def _zones(values: pd.Series) -> set[str | None]:
    """The time zones of a column's date-times (None: naive), also of ``Timestamp``
    objects in a text column (aware and naive rows pooled); empty when it holds none."""
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        tz = getattr(values.dtype, "tz", None)
        return {None if tz is None else str(tz)} if values.notna().any() else set()
    if values.dtype != object:
        return set()
    present = values.dropna()
    if present.empty or not isinstance(present.iloc[0], _dt.datetime):
        return set()
    return {
        None if v.tzinfo is None else str(getattr(v, "tz", None) or v.tzinfo)
        for v in present
        if isinstance(v, _dt.datetime)
    }


def _same_zone(
    tables: Mapping[str, pd.DataFrame | None], columns: Sequence[str], notes: list[str]
) -> dict[str, pd.DataFrame | None]:
    """``tables`` with every datetime column in one zone: refused
    (:class:`ValueError`) where its values carry a time zone in one table and none in
    another (or in some rows of one table and not in others), since naive times are no
    instants and comparing them as UTC against the other table's instants shifts every
    value by the zone's offset; in UTC, with a note, where the tables hold it in
    different zones (the same instants).  A table where the column holds no value is
    not looked at."""
    out = dict(tables)
    for column in columns:
        zones: dict[str, set[str | None]] = {}
        for name, frame in tables.items():
            if frame is not None and column in frame.columns:
                held = _zones(frame[column])
                if held:
                    zones[name] = held
        if _check_zones(column, zones, notes):
            for name in zones:  # every one aware: the same instants in UTC
                frame = out[name]
                assert frame is not None
                out[name] = frame.assign(**{column: pd.to_datetime(frame[column], utc=True)})
    return out


def _check_zones(column: str, zones: Mapping[str, set[str | None]], notes: list[str]) -> bool:
    """Refuse ``column`` when ``zones`` (table -> the column's time zones, None: naive)
    holds a zone and None; True (with a note) when it holds different zones."""
    aware = {n: sorted(map(str, z)) for n, z in zones.items() if None not in z}
    naive = [n for n, z in zones.items() if z == {None}]
    if aware and naive:  # first between tables of one kind of rows: the clients' files
        first, (zone, *_) = next(iter(aware.items()))
        other = naive[0]
        code = other if other in ("real", "synthetic", "train", "test") else "table"
        raise ValueError(
            f"column {column!r} holds date-times with a time zone ({zone}) in the {first} "
            f"table but without one in the {other} table, so their instants cannot be "
            f"compared (fits would not guess the {other} table's zone): give both tables "
            f"the same zone (in pandas, e.g. {code}[{column!r}] = "
            f"{code}[{column!r}].dt.tz_localize({zone!r}) if those are {zone} times; in a "
            "CSV file, write each time with its UTC offset, such as "
            "2021-03-15 08:30:00+01:00), or leave the zone out of both"
        )
    mixed = [n for n, z in zones.items() if None in z and len(z) > 1]
    if mixed:
        raise ValueError(
            f"column {column!r} holds date-times with a time zone in some rows of the "
            f"{mixed[0]} table and without one in others (files pooled into it that "
            "differ?), so their instants cannot be compared: give every row the same "
            "zone (in a CSV file, write each time with its UTC offset, such as "
            "2021-03-15 08:30:00+01:00), or leave the zone out of all"
        )
    if len({z for held in aware.values() for z in held}) > 1:
        held = ", ".join(f"{', '.join(z)} in the {n} table" for n, z in aware.items())
        notes.append(
            f"datetime column {column!r} holds times in different zones ({held}): compared "
            "as the same instants in UTC"
        )
        return True
    return False


def _comparable(
    tables: dict[str, pd.DataFrame],
    columns: list[str],
    kinds: dict[str, str],
    targets: Sequence[str],
    notes: list[str],
    pooled: Sequence[str] = (),
) -> dict[str, tuple[str, np.ndarray, np.ndarray]]:
    """Make datetimes and missing values comparable, in place, the same way in every table.

    Datetime columns become days since 1970-01-01 UTC; a table whose column holds
    values that are no dates where another table's holds dates is refused (numbers
    would be compared as days, text fail later without the word "date"). ``pooled``:
    the tables made of others (the training rows pooled from the clients), which a
    message names only where no other table has the problem. A missing value of a nominal
    column becomes the level :data:`MISSING_LABEL`; a numeric column with missing values
    gets an indicator column ``"<column> (missing)"`` (levels ``"missing"`` /
    ``"present"``, a nominal covariate inserted after it in ``columns`` and ``kinds``),
    and its missing values take the real table's lowest value, as a site fills them
    (docs/method.md). A target must have a value in every row. Returns, per such numeric
    column, its indicator and the rows with a value in the real and the synthetic table
    (its column score and chart compare those).
    """
    from fits.core.schema import datetime_seconds

    dates = [
        c
        for c in columns
        if any(pd.api.types.is_datetime64_any_dtype(f[c].dtype) for f in tables.values())
    ]
    for c in dates:
        dated = next(n for n, f in tables.items() if pd.api.types.is_datetime64_any_dtype(f[c]))
        for name, frame in tables.items():
            values = frame[c].dropna()
            if not pd.api.types.is_datetime64_any_dtype(frame[c].dtype) and len(values):
                raise ValueError(
                    f"column {c!r} holds dates in the {dated} table but not in the {name} "
                    f"table (dtype {frame[c].dtype}, values like {values.iloc[:2].tolist()}); "
                    "write it as dates in every table (in a CSV file as ISO 8601 text, such "
                    "as 2021-03-15 or 2021-03-15 08:30:00)"
                )
    for name, frame in tables.items():
        frame = tables[name] = frame.copy()
        for c in dates:
            if pd.api.types.is_datetime64_any_dtype(frame[c].dtype):
                frame[c] = datetime_seconds(frame[c]) / 86400.0
    if dates:
        notes.append(f"datetime column(s) {dates} are compared as days since 1970-01-01 UTC")
    present: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}
    for c in list(columns):
        lacking = {name: int(f[c].isna().sum()) for name, f in tables.items()}
        lacking = {name: n for name, n in lacking.items() if n}
        if not lacking:
            continue
        if c in targets:  # named in a table the user gave, where one lacks values
            name, n = next(
                ((k, v) for k, v in lacking.items() if k not in pooled),
                next(iter(lacking.items())),
            )
            raise ValueError(
                f"target {c!r} has missing values in the {name} table ({n} of "
                f"{len(tables[name])} rows); the downstream models need a target value in "
                "every row: drop those rows from every table, or choose another target"
            )
        if kinds[c] == "nominal" or not _numeric(tables["real"][c]):
            for frame in tables.values():
                if isinstance(frame[c].dtype, pd.CategoricalDtype):  # the lowest level
                    cats = [MISSING_LABEL, *frame[c].cat.categories]
                    frame[c] = frame[c].cat.set_categories(cats).fillna(MISSING_LABEL)
                else:
                    frame[c] = frame[c].astype(object).where(frame[c].notna(), MISSING_LABEL)
            continue
        if tables["real"][c].isna().all():
            raise ValueError(
                f"column {c!r} has no value in any row of the real table; there is nothing "
                "to compare: drop it from the real and synthetic tables"
            )
        flag = f"{c} (missing)"
        while flag in columns:
            flag += " "
        fill = float(np.nanmin(tables["real"][c].to_numpy(dtype=np.float64, na_value=np.nan)))
        present[c] = (flag, *(tables[t][c].notna().to_numpy() for t in ("real", "synthetic")))
        for frame in tables.values():
            at = list(frame.columns).index(c) + 1
            frame.insert(at, flag, np.where(frame[c].isna(), "missing", "present").astype(object))
            frame[c] = frame[c].astype(np.float64).fillna(fill)
        columns.insert(columns.index(c) + 1, flag)
        kinds[flag] = "nominal"
    if present:
        notes.append(
            f"numeric column(s) {list(present)} have missing values: each is compared on its "
            "values, and an indicator column '<column> (missing)' compares where they are "
            "missing"
        )
    return present


@dataclass
class _Energy:
    table: pd.DataFrame  # one row per compared table, one column per column set
    independent: pd.DataFrame  # the column-wise independent resample


def _energy_step(
    inputs: _Inputs,
    options: EvaluationOptions,
    resample_seed: np.random.SeedSequence,
    energy_seed: np.random.SeedSequence,
) -> _Energy:
    """Energy distances of the synthetic table and of its two floors to the real table."""
    from fits.evaluation import energy_distances, independent_resample

    source = inputs.train if inputs.train is not None else inputs.real
    independent = independent_resample(
        source, len(inputs.synthetic), seed=np.random.default_rng(resample_seed)
    )
    tables = {"synthetic": inputs.synthetic}
    if inputs.test is not None:
        tables["real held-out rows"] = inputs.test
    tables["independent columns"] = independent
    energy = energy_distances(
        inputs.real,
        tables,
        inputs.kinds,
        inputs.covariates,
        responses=inputs.targets,
        max_rows=options.max_rows,
        seed=np.random.default_rng(energy_seed),
        n_jobs=options.n_jobs,
        reference_name="real",
    )
    if not inputs.targets:
        energy = energy.rename(columns={"covariates": "all columns"})
    max_rows = options.max_rows
    largest = max(len(inputs.real), *(len(t) for t in tables.values()))
    if max_rows is not None and largest > max_rows:
        inputs.notes.append(
            f"energy distances use uniform subsamples of at most {max_rows:,} rows per table"
        )
    return _Energy(energy, independent)


@dataclass
class _Fidelity:
    column_scores: pd.DataFrame
    pair_scores: pd.DataFrame
    pair_floor: pd.DataFrame | None  # the independent resample's pair scores
    associations: dict[str, Any]
    marginals: dict[str, dict[str, Any]]


def _fidelity_step(inputs: _Inputs, independent: pd.DataFrame) -> _Fidelity:
    """Column and pair scores, association matrices and the marginals behind the charts."""
    from fits.evaluation import column_fidelity, pair_fidelity

    real, synthetic, kinds, columns = inputs.real, inputs.synthetic, inputs.kinds, inputs.columns
    column_scores = column_fidelity(real, synthetic, kinds, columns)
    marginals = {c: _marginal(real[c], synthetic[c], kinds[c], c) for c in columns}
    empty = []
    for c, (_, in_real, in_synthetic) in inputs.present.items():  # their values alone
        if in_synthetic.any():
            r, s = real.loc[in_real, [c]], synthetic.loc[in_synthetic, [c]]
            score = column_fidelity(r, s, kinds, [c])["score"].iloc[0]
            column_scores.loc[column_scores["column"] == c, "score"] = score
            marginals[c] = _marginal(r[c], s[c], kinds[c], c)
        else:  # no value to compare: not the score of the filled-in values (1/n for KS)
            column_scores.loc[column_scores["column"] == c, "score"] = 0.0
            empty.append(c)
    if empty:
        inputs.notes.append(
            f"the synthetic table holds no value of numeric column(s) {empty} (missing in "
            "every row): their score is 0, and their charts show the missing values at the "
            "real table's lowest value, where they are filled in for the other measures"
        )
    return _Fidelity(
        column_scores=column_scores,
        pair_scores=pair_fidelity(real, synthetic, kinds, columns=columns),
        pair_floor=(
            pair_fidelity(real, independent, kinds, columns=columns) if len(columns) > 1 else None
        ),
        associations=_associations(real, synthetic, kinds, columns),
        marginals=marginals,
    )


def _reference_for(reference_params: Mapping[str, Any] | None, target: str, n_targets: int):
    """The true parameters given for one target (by name, or alone for a single target)."""
    if reference_params is None:
        return None
    params = reference_params.get(target) if target in reference_params else None
    if params is None and set(reference_params) >= {"intercept", "coef"}:
        params = reference_params if n_targets == 1 else None
    return params


def _utility_step(
    inputs: _Inputs,
    options: EvaluationOptions,
    reference_params: Mapping[str, Any] | None,
    direct_fits: Mapping[str, Callable[..., Any]] | None = None,
) -> dict[str, UtilityResult]:
    """Downstream utility (modes M1-M4) per target."""
    from fits.evaluation.utility import downstream_utility

    if inputs.clients:
        util_clients: dict[str, pd.DataFrame] | None = inputs.clients
    elif inputs.train is not None:
        util_clients = {"all training rows": inputs.train}
        inputs.notes.append("no clients given: the training rows act as one client in M2-M4")
    else:
        util_clients = None
        inputs.notes.append("no clients or training rows given: only M1 (synthetic only) is run")
    test_table = inputs.test if inputs.test is not None else inputs.real
    if inputs.test is None:
        inputs.notes.append(
            "no held-out rows given: utility test metrics are computed on the real table, "
            "which includes the training rows"
        )
    results = {}
    for t in inputs.targets:
        params = _reference_for(reference_params, t, len(inputs.targets))
        results[t] = downstream_utility(
            util_clients,
            inputs.synthetic,
            test_table,
            t,
            inputs.kinds,
            task=inputs.tasks[t],
            covariates=inputs.covariates,
            reference=params if params is not None else inputs.real,
            reference_label="the full real table",
            ratios=options.ratios,
            lambdas=options.lambdas,
            boosting=options.boosting,
            boosting_iterations=options.boosting_iterations,
            seed=options.seed,
            direct=direct_fits if inputs.clients else None,
        )
    return results


def _boosting_step(inputs: _Inputs, options: EvaluationOptions) -> dict[str, Any]:
    """Per target: gradient boosting with scikit-learn's defaults trained on the real
    training rows and on the synthetic table, scored on the held-out rows
    (:func:`fits.evaluation.utility.boosting_comparison`)."""
    from fits.evaluation.utility import boosting_comparison

    if inputs.train is None:
        inputs.notes.append(
            "no training rows or clients given: the gradient-boosting comparison (trained on "
            "real vs on synthetic rows) was not run"
        )
        return {}
    test_table = inputs.test if inputs.test is not None else inputs.real
    out = {}
    for t in inputs.targets:
        result = boosting_comparison(
            inputs.train, inputs.synthetic, test_table, t, inputs.kinds,
            task=inputs.tasks[t], covariates=inputs.covariates, seed=options.seed,
        )  # fmt: skip
        out[t] = result.to_dict()
        inputs.notes.extend(result.notes)
    return out


def _privacy_step(
    inputs: _Inputs, options: EvaluationOptions, privacy_seed: np.random.SeedSequence
) -> PrivacyResult:
    """Distances to the closest record and copies of training rows."""
    from fits.evaluation.privacy import privacy_checks

    if inputs.train is None:
        inputs.notes.append(
            "no training rows given: the privacy checks search the whole real table "
            "(leave-one-out baseline)"
        )
    result = privacy_checks(
        inputs.train if inputs.train is not None else inputs.real,
        inputs.synthetic,
        inputs.kinds,
        holdout=inputs.test if inputs.train is not None else None,
        columns=inputs.columns,
        max_rows=options.privacy_rows,
        seed=np.random.default_rng(privacy_seed),
    )
    inputs.notes.extend(f"privacy: {n}" for n in result.notes)
    return result


def _rules_step(
    inputs: _Inputs, settings: Any, rules: Sequence[Any] | None
) -> tuple[list[dict], list[dict]]:
    """The share of synthetic rows keeping each exact rule ("Rules kept"), and the
    residual spread of each near-linear pair about its line ("Near-linear columns")."""
    from fits.evaluation.rules import near_linear_kept, rules_kept

    detected: list[Any] = []
    if rules is None:
        # the synthesizer's rules of each kind (exact, near-linear); of a kind it used
        # none of (rules=False, near_linear=False, or none found), those of the real rows
        used = list(getattr(getattr(settings, "schema_", None), "rules", None) or [])
        exact = [r for r in used if _rule_kind(r) != "linear"]
        linear = [r for r in used if _rule_kind(r) == "linear"]
        if not exact or not linear:
            found = _detect_rules(inputs) or []  # None: not detected (a note says why)
            exact = exact or [r for r in found if _rule_kind(r) != "linear"]
            if not linear:
                linear = detected = [r for r in found if _rule_kind(r) == "linear"]
        rules = [*exact, *linear]
    usable = [r for r in rules if all(c in inputs.synthetic.columns for c in _rule_columns(r))]
    table = rules_kept(inputs.synthetic, usable)
    table["rule"] = table["rule"].replace(_interval_dates(usable, inputs.dates))
    linear = [
        _in_days(r, inputs, fitted=not any(r is d for d in detected))
        for r in usable
        if _rule_kind(r) == "linear"
    ]
    if not linear:
        return jsonable(table.to_dict(orient="records")), []
    columns = sorted({c for r in linear for c in _rule_columns(r)})
    near = near_linear_kept(
        _with_missing(inputs.real, columns, inputs.present, 1),
        _with_missing(inputs.synthetic, columns, inputs.present, 2),
        linear,
    )
    records = near.to_dict(orient="records")
    for row in records:  # a pair of dates: its figures as durations, told apart
        if row["column"] in inputs.dates and row["of"] in inputs.dates:
            b = float(row["intercept"])
            row["rule"] = f"{row['column']} = {row['of']} + duration"
            row["duration_text"] = {  # days here; the spreads to their two largest units
                "lower": duration_text((b + float(row["lower"])) * 86400.0),
                "upper": duration_text((b + float(row["upper"])) * 86400.0),
                "real_sd": duration_text(float(row["real_sd"]) * 86400.0, parts=2),
                "synthetic_sd": duration_text(float(row["synthetic_sd"]) * 86400.0, parts=2),
            }
    return jsonable(table.to_dict(orient="records")), jsonable(records)


def _interval_dates(rules: Sequence[Any], dates: Sequence[str]) -> dict[str, str]:
    """An interval rule's words with a datetime source, whose bounds the report holds
    as days since 1970: its words with the bounds as dates (date-times where a bound
    is not a whole day), as ``fits schema`` writes them."""
    from fits._exact import interval_text

    out = {}
    for raw in rules:
        d = dict(raw.to_dict() if hasattr(raw, "to_dict") else raw)
        source = str(d["of"][0]) if d.get("of") else ""
        if d.get("kind") != "interval" or source not in dates:
            continue
        entries = d.get("intervals") or []
        if any(isinstance(b, str) for lo, hi, _ in entries for b in (lo, hi)):
            continue  # a fitted synthesizer's rule: its bounds are written as dates
        whole = all(float(b) == int(float(b)) for lo, hi, _ in entries for b in (lo, hi))

        def text(days: Any, whole: bool = whole) -> str:
            return seconds_text(float(days) * 86400.0, date_only=whole)

        head = f"{d['column']} = by {source}: "
        words = [[text(lo), text(hi), v] for lo, hi, v in entries]
        out[head + interval_text(entries)] = head + interval_text(words)
    return out


def _in_days(rule: Any, inputs: _Inputs, *, fitted: bool) -> dict[str, Any]:
    """A ``"linear"`` rule as a dict on the report's scale.  Between two datetime
    columns (days since 1970 here) it is the fit's: slope 1, so intercept + residual
    is the duration.  A fitted synthesizer's rule holds seconds (divided by 86,400);
    one detected on the report's tables (as numbers: a fitted slope) is replaced by
    the slope-1 line of the same rows, with the residual's bounds over them."""
    d = dict(rule.to_dict() if hasattr(rule, "to_dict") else rule)
    y, x = str(d["column"]), str(d["of"][0])
    if y not in inputs.dates or x not in inputs.dates:
        return d
    if fitted:
        for key in ("intercept", "lower", "upper"):
            d[key] = float(d[key]) / 86400.0
        return d
    frames = list(inputs.clients.values()) or [
        inputs.train if inputs.train is not None else inputs.real
    ]
    diff = np.concatenate(
        [
            pd.to_numeric(f[y], errors="coerce").to_numpy(dtype=float)
            - pd.to_numeric(f[x], errors="coerce").to_numpy(dtype=float)
            for f in frames
        ]
    )
    diff = diff[np.isfinite(diff)]
    if not diff.size:
        return d
    b = float(diff.mean())
    d.update(slope=1.0, intercept=b, lower=float(diff.min()) - b, upper=float(diff.max()) - b)
    return d


def _detect_rules(inputs: _Inputs) -> list[Any] | None:
    """The exact rules and near-linear pairs of the clients' rows (or of ``train``,
    else of ``real``), found as a fit's setup finds them; None (and a note) where the
    tables do not fit one schema."""
    frames = inputs.clients or {
        "real rows": inputs.train if inputs.train is not None else inputs.real
    }
    flags = {flag for flag, _, _ in inputs.present.values()}  # added here, not data
    # a column of one value is no rule's column or part (and stops Schema.detect with
    # the fit's advice to drop it): left out, so the other columns' rules are found
    constant = {c for c in inputs.kinds if _one_value(frames.values(), c)}
    kinds = {
        c: k for c, k in inputs.kinds.items() if k != "id" and c not in flags and c not in constant
    }
    try:
        found = Schema.detect(
            {n: f[list(kinds)] for n, f in frames.items()},
            kinds=kinds,
            parse_text=False,
        )
    except ValueError as exc:  # the tables do not fit one schema: say so, go on
        inputs.notes.append(f"rules kept: no rule detection ({exc})")
        return None
    return list(found.rules or [])


def _with_missing(
    frame: pd.DataFrame,
    columns: Sequence[str],
    present: Mapping[str, tuple[str, np.ndarray, np.ndarray]],
    which: int,
) -> pd.DataFrame:
    """``columns`` of an aligned table with their missing values back (the evaluation
    filled them and added an indicator column, :attr:`_Inputs.present`; ``which``: 1
    for the real table, 2 for the synthetic one)."""
    out = frame[list(columns)].copy()
    for c in columns:
        if c in present:
            out[c] = out[c].where(present[c][which])
    return out


def _one_value(frames: Iterable[pd.DataFrame], column: str) -> bool:
    """Whether ``column`` holds at most one value (missing ones aside) in all ``frames``."""
    seen: list[Any] = []
    for frame in frames:
        if column not in frame.columns:
            continue
        values = frame[column].dropna().unique()
        if len(values) > 1 or (len(values) == 1 and seen and values[0] != seen[0]):
            return False
        seen.extend(values[:1])
    return True


def _rule_columns(rule: Any) -> list[str]:
    d = rule.to_dict() if hasattr(rule, "to_dict") else dict(rule)
    return [str(d["column"]), *map(str, d["of"])]


def _rule_kind(rule: Any) -> str:
    d = rule.to_dict() if hasattr(rule, "to_dict") else dict(rule)
    return str(d.get("kind", "function"))


def _energy_data(energy: pd.DataFrame, inputs: _Inputs, exact: bool) -> dict[str, Any]:
    headline_set = energy.columns[1] if inputs.targets else energy.columns[0]
    ed = energy[headline_set]
    gap_closed = None
    if "real held-out rows" in energy.index:
        lo, hi = float(ed["real held-out rows"]), float(ed["independent columns"])
        if hi > lo:
            gap_closed = (hi - float(ed["synthetic"])) / (hi - lo)
    return {
        "headline_columns": headline_set,
        "headline": {k: float(v) for k, v in ed.items()},
        "gap_closed": gap_closed,
        "table": {
            row: {col: float(energy.loc[row, col]) for col in energy.columns}
            for row in energy.index
        },
        "exact": exact,
        "independent_source": "training rows" if inputs.train is not None else "real table",
    }


def _fidelity_data(fidelity: _Fidelity) -> dict[str, Any]:
    """The ``columns`` and ``pairs`` entries of the report's data."""
    col_table = fidelity.column_scores.set_index("column")
    worst_col = col_table["score"].idxmin()
    pair_scores, pair_floor = fidelity.pair_scores, fidelity.pair_floor
    pair_table = pair_scores.sort_values("score", kind="stable")

    def pairs(frame: pd.DataFrame) -> list[dict[str, Any]]:
        return [
            {"col_a": r.col_a, "col_b": r.col_b, "metric": r.metric, "score": float(r.score)}
            for r in frame.itertuples()
        ]

    return {
        "columns": {
            "mean_score": float(col_table["score"].mean()),
            "worst": {"column": worst_col, "score": float(col_table.loc[worst_col, "score"])},
            "scores": [
                {"column": c, "kind": r["kind"], "metric": r["metric"], "score": float(r["score"])}
                for c, r in col_table.iterrows()
            ],
        },
        "pairs": {
            "mean_score": float(pair_scores["score"].mean()) if len(pair_scores) else None,
            "independent_mean_score": (
                float(pair_floor["score"].mean()) if pair_floor is not None else None
            ),
            "worst": pairs(pair_table.head(10)),
            "scores": pairs(pair_scores),
        },
    }


def _assemble(
    inputs: _Inputs,
    options: EvaluationOptions,
    energy: pd.DataFrame,
    fidelity: _Fidelity,
    utility_results: Mapping[str, UtilityResult],
    privacy_result: PrivacyResult | None,
    *,
    title: str | None,
    settings: Any,
    sources: Mapping[str, str] | None,
) -> dict[str, Any]:
    """Every number of the report in one JSON-ready mapping (``Report.data``)."""
    train, test = inputs.train, inputs.test
    return {
        "title": title or "fits fidelity report",
        "meta": {
            "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "fits_version": _fits_version(),
            "seed": options.seed,
            "rows": {
                "real": len(inputs.real),
                "synthetic": len(inputs.synthetic),
                "train": None if train is None else len(train),
                "test": None if test is None else len(test),
                "clients": {k: len(v) for k, v in inputs.clients.items()},
            },
            # the table's columns, not the indicators of missing values added to compare
            "n_columns": len(inputs.columns) - len(inputs.present),
            "timings_s": {},
        },
        "kinds": inputs.kinds,
        "targets": inputs.targets,
        "covariates": inputs.covariates,
        "energy": _energy_data(energy, inputs, exact=options.max_rows is None),
        **_fidelity_data(fidelity),
        "associations": fidelity.associations,
        "marginals": fidelity.marginals,
        "utility": {t: _with_headline(u.to_dict()) for t, u in utility_results.items()},
        "privacy": privacy_result.to_dict() if privacy_result is not None else None,
        "settings": _settings_dict(settings),
        "evaluation_settings": {
            "seed": options.seed,
            "M3 ratios r": list(options.ratios),
            "M4 weights lambda": list(options.lambdas),
            "energy distance rows per table (None: all, exact)": options.max_rows,
            "privacy check rows": options.privacy_rows,
            "gradient boosting": options.boosting,
            "gradient boosting rounds": options.boosting_iterations,
        },
        "sources": dict(sources or {}),
        "notes": inputs.notes,
    }


def _figures(
    data: Mapping[str, Any],
    fidelity: _Fidelity,
    utility_results: Mapping[str, UtilityResult],
    privacy_result: PrivacyResult | None,
) -> dict[str, str]:
    """Every figure of the page, by name, as base64 PNG."""
    from fits.report.figures import (
        heatmap_figure,
        marginal_figures,
        privacy_figure,
        utility_figure,
    )

    figures: dict[str, str] = {}
    scores = fidelity.column_scores.set_index("column")["score"].to_dict()
    with warnings.catch_warnings():  # names in scripts the font lacks (CJK) show as boxes
        warnings.filterwarnings("ignore", "Glyph .* missing from", UserWarning)  # (current) font
        warnings.filterwarnings("ignore", "Tight layout not applied", UserWarning)
        for i, image in enumerate(marginal_figures(fidelity.marginals, scores)):
            figures[f"marginals_{i}"] = image
        if len(fidelity.associations["columns"]) > 1:
            figures["associations"] = heatmap_figure(fidelity.associations)
        for t in utility_results:
            figures[f"utility_{t}"] = utility_figure(data["utility"][t])
        if privacy_result is not None:
            figures["privacy"] = privacy_figure(privacy_result)
    return figures


def _fits_version() -> str:
    try:
        from fits import __version__

        return str(__version__)
    except ImportError:  # pragma: no cover
        return "unknown"


# ---------------------------------------------------------------------------------------
# summary text
# ---------------------------------------------------------------------------------------


def _with_headline(u: dict[str, Any]) -> dict[str, Any]:
    u["headline"] = utility_headline(u)
    return u


def _summary_lines(data: Mapping[str, Any]) -> list[str]:
    meta = data["meta"]
    rows = meta["rows"]
    lines = [
        f"{data['title']}: {rows['synthetic']:,} synthetic rows vs {rows['real']:,} real rows, "
        f"{meta['n_columns']} columns"
    ]
    energy = data["energy"]
    head = energy["headline"]
    parts = [f"synthetic {fmt_number(head['synthetic'])}"]
    if "real held-out rows" in head:
        parts.append(f"real held-out rows {fmt_number(head['real held-out rows'])}")
    parts.append(f"independent columns {fmt_number(head['independent columns'])}")
    line = f"Energy distance ({energy['headline_columns']}; lower is better): " + " | ".join(parts)
    if energy.get("gap_closed") is not None:
        before, after = gap_text(energy)
        share = fmt_percent(energy["gap_closed"]) + after if after else ""
        line += f"; the synthetic table {before}{share}"
    lines.append(line)
    cols = data["columns"]
    pairs = data["pairs"]
    line = (
        f"Column fidelity: mean {fmt_number(cols['mean_score'])} "
        f"(worst: {cols['worst']['column']} {fmt_number(cols['worst']['score'])})"
    )
    if pairs["mean_score"] is not None:
        line += f"; pair fidelity: mean {fmt_number(pairs['mean_score'])}"
        if pairs["independent_mean_score"] is not None:
            line += f" (independent columns: {fmt_number(pairs['independent_mean_score'])})"
    lines.append(line)
    for target, b in data.get("boosting", {}).items():
        label = "R^2" if b["metric"] == "r2" else "ROC AUC"
        lines.append(
            f"Gradient boosting ({target}, scikit-learn defaults, test {label}): trained on real "
            f"{fmt_number(b['real'][b['metric']])}, trained on synthetic "
            f"{fmt_number(b['synthetic'][b['metric']])}"
        )
    for target, u in data["utility"].items():
        h = utility_headline(u)
        line = f"Utility ({target}, {h['model']}): M1 synthetic-only {h['metric_label']} "
        line += fmt_number(h["M1"])
        if h.get("pooled") is not None:
            line += f" (pooled real data: {fmt_number(h['pooled'])})"
        if h.get("n_clients"):
            line += (
                f"; M4 ({h['m4_setting']}) beats local-only on parameter error for "
                f"{h['m4_better_param']} of {h['n_clients']} clients"
            )
        lines.append(line)
    for r in data.get("near_linear") or []:
        told = r.get("duration_text")  # a pair of dates: durations
        real_sd = told["real_sd"] if told else fmt_number(r["real_sd"])
        syn_sd = told["synthetic_sd"] if told else fmt_number(r["synthetic_sd"])
        lines.append(
            f"Near-linear {r['column']} on {r['of']}: residual sd about the line, real "
            f"{real_sd}, synthetic {syn_sd} (ratio "
            f"{fmt_number(r['sd_ratio'])}); correlation real {fmt_number(r['real_corr'])}, "
            f"synthetic {fmt_number(r['synthetic_corr'])}; {fmt_percent(r['within'])} of "
            "synthetic rows within the real residual range"
        )
    p = data["privacy"]
    if p is not None:
        line = (
            f"Privacy: {fmt_percent(p['synthetic_copy_share'])} of synthetic rows copy a training "
            f"row (real baseline: {fmt_percent(p['holdout_copy_share'])}); median distance to "
            f"closest record ratio {fmt_number(p['median_ratio'])} -> "
        )
        line += "look closer" if p["flag"] else "no sign of copying"
        lines.append(line)
    inf = data.get("inference")
    if inf:
        inside = sum(bool(c["inside"]) for c in inf["coefficients"])
        lines.append(
            f"Inference ({inf['target']}, linear regression; FedLSA across the sites vs OLS on "
            f"the synthetic table): mean {fmt_percent(inf['level'])} interval overlap "
            f"{fmt_number(inf['mean_overlap'])}; {inside} of {len(inf['coefficients'])} "
            "synthetic estimates inside the federated intervals"
        )
    for note in data["notes"]:
        lines.append(f"note: {note}")
    return lines
