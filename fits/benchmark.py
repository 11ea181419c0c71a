"""The paper-reproduction benchmark (issue #5): FITS-G and FITS-K across clients and modes.

:func:`run_benchmark` runs the FITS paper's protocol on one data set, ``repeats`` times
(repeat ``r`` uses seed ``seed + r`` everywhere):

1. load the data (the simulation is drawn afresh with the repeat's seed);
2. split it 80/20 into training and test rows and the training rows over 10 clients
   with the paper's shares (:func:`fits.datasets.federated_split`, the repeat's seed);
3. for each generator (FITS-G: ``"gaussian"``, FITS-K: ``"knn"``) fit FITS on the
   clients and synthesize as many rows as the training split, timing it and reading
   the bytes each client uploaded;
4. per client and data usage mode M1-M4 (:func:`fits.evaluation.utility.downstream_utility`): the
   parametric downstream model's parameter error and test metric on the full
   lambda / r grid, and the gradient-boosting test metric at the headline settings;
5. energy distances (:func:`fits.evaluation.energy_distances`, exact: every row, no
   subsampling unless ``energy_max_rows`` asks for it) of the covariates and of
   covariates plus response(s) against the full data, for the synthetic tables and for
   two floors computed the same way: the real test split, and a column-wise
   independent resample of the training split (:func:`fits.evaluation.independent_resample`);
   and the headline utility question, per task: scikit-learn's histogram gradient
   boosting with default settings trained on the real training split and on the
   synthetic table, both scored on the test split
   (:func:`fits.evaluation.utility.boosting_comparison`: ROC AUC or R^2);
6. per-column and per-pair fidelity (:func:`fits.evaluation.column_fidelity`,
   :func:`fits.evaluation.pair_fidelity`) of each synthetic table against the full data,
   to name what contributes most to the distance.

For the simulation both responses are used: the covariates, ``Y_lin`` and ``Y_log`` are
synthesized once per generator (chain order: the data set's) and both the linear task
(``Y_lin``) and the logistic task (``Y_log``) are evaluated on that one table, against
the true parameters. For real data the reference parameter is the fit on the full real
data.

:meth:`BenchmarkResult.to_markdown` lays the results out like the paper's tables
(clients as columns, modes as rows, ``mean (sd)`` over repeats);
:meth:`BenchmarkResult.to_json` keeps every per-repeat number.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fits._json import jsonable
from fits.core.kernels import GaussianKernel, KNNKernel
from fits.core.schema import Schema
from fits.datasets import Dataset, federated_split, load_dataset, simulate
from fits.evaluation import (
    column_fidelity,
    energy_distance,
    energy_distances,
    independent_resample,
    pair_fidelity,
)
from fits.evaluation.rules import NEAR_LINEAR_COLUMNS, near_linear_kept, rules_kept
from fits.evaluation.utility import UtilityResult, boosting_comparison, downstream_utility
from fits.federation.client import MIN_CLIENT_ROWS
from fits.federation.policy import SitePolicy
from fits.synthesizer import FITSSynthesizer

__all__ = [
    "DEFAULT_LAMBDAS",
    "DEFAULT_RATIOS",
    "ENERGY_MAX_ROWS",
    "GENERATOR_NAMES",
    "BenchmarkResult",
    "column_energy",
    "run_benchmark",
    "write_result",
]

#: Display names of the generators.
GENERATOR_NAMES: dict[str, str] = {"gaussian": "FITS-G", "knn": "FITS-K"}

#: M4's synthetic loss weights evaluated with the parametric model (0 is M2).
DEFAULT_LAMBDAS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.5, 1.0)

#: M3's synthetic-to-local row ratios.
DEFAULT_RATIOS: tuple[float, ...] = (1.0,)

#: The M4 weight at which the boosting model is also evaluated (the paper's headline).
BOOSTING_LAMBDA = 0.1

#: The subsample size :func:`column_energy` uses by default, and the one ``fits
#: benchmark`` used before its energy distances became exact (only Adult, 45,222 rows,
#: was affected).  :func:`run_benchmark` is exact unless ``energy_max_rows`` is given.
ENERGY_MAX_ROWS = 20_000

#: Columns / pairs listed as the largest contributors.
N_WORST = 5

_TEST_METRIC = {"regression": "mse", "classification": "roc_auc"}
#: The near-linear figures the markdown table shows (mean (sd) over repeats).
_NEAR_LINEAR_FIGURES = NEAR_LINEAR_COLUMNS[NEAR_LINEAR_COLUMNS.index("real_sd") :]
_METRIC_LABEL = {
    "param_error": "parameter error (Euclidean, intercept included)",
    "mse": "test MSE",
    "r2": "test R^2",
    "roc_auc": "test ROC AUC",
    "accuracy": "test accuracy",
}
_LOWER_IS_BETTER = {
    "param_error": True,
    "mse": True,
    "r2": False,
    "roc_auc": False,
    "accuracy": False,
}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _peak_rss_mb() -> float:
    """The process's peak resident set size so far, in MB (Linux: ru_maxrss in KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1.0 if sys.platform == "darwin" else 1024.0
    return float(peak) * scale / 1e6


def _fmt(mean: float, sd: float | None = None, digits: int = 3) -> str:
    if mean is None or not math.isfinite(mean):
        return "-"
    text = f"{mean:.{digits}g}" if abs(mean) < 1e3 else f"{mean:,.0f}"
    if sd is not None and math.isfinite(sd):
        text += f" ({sd:.{max(1, digits - 1)}g})" if abs(sd) < 10 else f" ({sd:,.0f})"
    return text


def _fmt_pair(pair: tuple[float, float], digits: int = 4) -> str:
    """``mean (sd)`` of a :func:`_mean_sd` pair."""
    return _fmt(pair[0], pair[1], digits)


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    arr = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if arr.size == 0:
        return math.nan, math.nan
    sd = float(arr.std(ddof=1)) if arr.size > 1 else math.nan
    return float(arr.mean()), sd


def _tasks(data: Dataset) -> list[dict[str, Any]]:
    """The downstream tasks: (target, task, covariates, true parameters or None)."""
    params = data.params or {}
    cols = [str(c) for c in data.frame.columns]
    if data.name == "simulation" and {"Y_lin", "Y_log"} <= set(cols):
        covariates = [c for c in data.order if c not in ("Y_lin", "Y_log")]
        return [
            {
                "target": "Y_lin",
                "task": "regression",
                "covariates": covariates,
                "truth": params.get("linear"),
            },
            {
                "target": "Y_log",
                "task": "classification",
                "covariates": covariates,
                "truth": params.get("logistic"),
            },
        ]
    covariates = [c for c in (data.order or cols) if c != data.target]
    return [{"target": data.target, "task": data.task, "covariates": covariates, "truth": None}]


@dataclass
class BenchmarkResult:
    """Per-repeat results of :func:`run_benchmark` and their summaries.

    Attributes
    ----------
    dataset : str
        The data set's name.
    config : dict
        Settings: repeats, seed, generators, lambdas, ratios, row counts, the
        energy-distance subsample size, the tasks, the machine and the date.
    runs : list of dict
        One record per repeat (every number; see :meth:`to_json`).
    """

    dataset: str
    config: dict[str, Any]
    runs: list[dict[str, Any]] = field(default_factory=list)

    # ----------------------------------------------------------------- raw access
    def utility_frame(self) -> pd.DataFrame:
        """Every downstream fit of every repeat as one long table.

        Columns: ``repeat``, ``generator``, ``target`` and the columns of
        :class:`fits.evaluation.utility.UtilityResult`'s table.
        """
        rows = []
        for run in self.runs:
            for gen, res in run["generators"].items():
                for target, records in res["utility"].items():
                    for rec in records:
                        rows.append(
                            {"repeat": run["repeat"], "generator": gen, "target": target, **rec}
                        )
        frame = pd.DataFrame.from_records(rows)
        for col in ("param_error", "mse", "r2", "accuracy", "roc_auc", "lam", "r"):
            if col in frame.columns:
                frame[col] = pd.to_numeric(frame[col], errors="coerce")
        return frame

    def energy_frame(self) -> pd.DataFrame:
        """Energy distances per repeat: ``repeat``, ``table``, ``covariates``, ``all``."""
        rows = []
        for run in self.runs:
            for name, ed in run["floors"].items():
                rows.append({"repeat": run["repeat"], "table": name, **ed})
            for gen, res in run["generators"].items():
                rows.append({"repeat": run["repeat"], "table": gen, **res["energy"]})
                if "energy_test_size" in res:
                    rows.append(
                        {
                            "repeat": run["repeat"],
                            "table": f"{gen}@test_size",
                            **res["energy_test_size"],
                        }
                    )
        return pd.DataFrame.from_records(rows)

    def mode_table(
        self, generator: str, target: str, metric: str, model: str = "parametric"
    ) -> pd.DataFrame:
        """Mean and sd over repeats: one row per mode / setting, one column per client.

        Parameters
        ----------
        generator : str
            ``"gaussian"`` or ``"knn"``.
        target : str
            The response.
        metric : str
            ``"param_error"``, ``"mse"``, ``"r2"``, ``"accuracy"`` or ``"roc_auc"``.
        model : {"parametric", "boosting"}
            Which downstream model.

        Returns
        -------
        pandas.DataFrame
            Index: row labels (``"M1"``, ``"M2"``, ``"M3 (r=1)"``, ``"M4 (lambda=0.1)"``,
            ...); columns: ``(client, "mean")`` and ``(client, "sd")``. M1 (one fit on
            the synthetic table, the same for every client) is repeated in each column.
            Also ``"M4 (best lambda)"``: per client, the positive lambda whose mean is best.
        """
        frame = self.utility_frame()
        if frame.empty:
            return pd.DataFrame()
        want = "gradient boosting" if model == "boosting" else None
        sel = frame[(frame["generator"] == generator) & (frame["target"] == target)]
        sel = sel[sel["model"] == want] if want else sel[sel["model"] != "gradient boosting"]
        clients = [c for c in dict.fromkeys(sel["client"]) if c != "all clients"]
        labels: list[str] = []
        cells: dict[tuple[str, str], tuple[float, float]] = {}
        m1 = sel[sel["mode"] == "M1"]
        if not m1.empty:
            labels.append("M1")
            mean, sd = _mean_sd(m1[metric].tolist())
            for c in clients:
                cells[("M1", c)] = (mean, sd)
        for mode in ("M2", "M3", "M4"):
            part = sel[sel["mode"] == mode]
            for setting in dict.fromkeys(part["setting"]):
                label = f"{mode} ({setting})" if setting else mode
                labels.append(label)
                for c in clients:
                    vals = part[(part["setting"] == setting) & (part["client"] == c)][metric]
                    cells[(label, c)] = _mean_sd(vals.tolist())
        # lambda = 0 is M2 itself: the best lambda is chosen among the positive ones
        m4 = [lab for lab in labels if lab.startswith("M4 (") and lab != "M4 (lambda=0)"]
        if len(m4) > 1:
            label = "M4 (best lambda)"
            labels.append(label)
            lower = _LOWER_IS_BETTER[metric]
            for c in clients:
                options = [
                    (cells[(lab, c)], lab) for lab in m4 if math.isfinite(cells[(lab, c)][0])
                ]
                if options:
                    (mean, sd), _ = (min if lower else max)(options, key=lambda o: o[0][0])
                    cells[(label, c)] = (mean, sd)
                else:
                    cells[(label, c)] = (math.nan, math.nan)
        pooled = sel[sel["mode"] == "pooled"]
        if not pooled.empty:
            labels.append("pooled real (yardstick)")
            mean, sd = _mean_sd(pooled[metric].tolist())
            for c in clients:
                cells[("pooled real (yardstick)", c)] = (mean, sd)
        columns = pd.MultiIndex.from_product([clients, ["mean", "sd"]])
        data = [[cells[(lab, c)][i] for c in clients for i in (0, 1)] for lab in labels]
        return pd.DataFrame(data, index=labels, columns=columns)

    def best_lambdas(self, generator: str, target: str, metric: str = "param_error") -> dict:
        """Per client, the M4 lambda with the best mean ``metric`` over repeats."""
        table = self.mode_table(generator, target, metric)
        out = {}
        lower = _LOWER_IS_BETTER[metric]
        m4 = [
            lab for lab in table.index if lab.startswith("M4 (lambda=") and lab != "M4 (lambda=0)"
        ]
        for client in dict.fromkeys(table.columns.get_level_values(0)):
            means = {lab: table.loc[lab, (client, "mean")] for lab in m4}
            means = {k: v for k, v in means.items() if math.isfinite(v)}
            if means:
                best = (min if lower else max)(means, key=lambda k: means[k])
                out[client] = float(best.split("=")[1].rstrip(")"))
        return out

    def energy_summary(self) -> pd.DataFrame:
        """Mean and sd over repeats of each table's energy distances, with ratios."""
        frame = self.energy_frame()
        gens = self.config["generators"]
        order = ["real_test", *gens, *(f"{g}@test_size" for g in gens), "independent"]
        rows = []
        floor = {}
        for key in ("covariates", "all"):
            floor[key] = _mean_sd(frame.loc[frame["table"] == "real_test", key].tolist())[0]
        for name in order:
            part = frame[frame["table"] == name]
            if part.empty:
                continue
            rec: dict[str, Any] = {"table": name}
            for key in ("covariates", "all"):
                mean, sd = _mean_sd(part[key].tolist())
                rec[f"{key}_mean"] = mean
                rec[f"{key}_sd"] = sd
                rec[f"{key}_ratio"] = mean / floor[key] if floor[key] > 0 else math.nan
            rows.append(rec)
        return pd.DataFrame.from_records(rows)

    def worst_fidelity(self, generator: str = "knn", n: int = N_WORST) -> dict[str, pd.DataFrame]:
        """The lowest-scoring columns and pairs (mean score over repeats)."""
        cols, pairs = [], []
        for run in self.runs:
            res = run["generators"].get(generator)
            if res is None:
                continue
            cols.extend(res["fidelity"]["columns"])
            pairs.extend(res["fidelity"]["pairs"])
        out: dict[str, pd.DataFrame] = {}
        if cols:
            c = pd.DataFrame.from_records(cols)
            out["columns"] = (
                c.groupby(["column", "kind", "metric"], sort=False)["score"]
                .agg(["mean", "std"])
                .reset_index()
                .sort_values("mean")
                .head(n)
            )
        if pairs:
            p = pd.DataFrame.from_records(pairs)
            out["pairs"] = (
                p.groupby(["col_a", "col_b", "metric"], sort=False)["score"]
                .agg(["mean", "std"])
                .reset_index()
                .sort_values("mean")
                .head(n)
            )
        return out

    # ----------------------------------------------------------------- output
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the configuration and every per-repeat number."""
        return jsonable({"dataset": self.dataset, "config": self.config, "runs": self.runs})

    def to_json(self, indent: int | None = 1) -> str:
        """The raw per-repeat numbers as JSON (NaN becomes null)."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> BenchmarkResult:
        """Read back :meth:`to_json`'s output."""
        obj = json.loads(text)
        return cls(dataset=obj["dataset"], config=obj["config"], runs=obj["runs"])

    def to_markdown(self) -> str:
        """The results as markdown tables laid out like the paper's."""
        lines = self._md_header()
        lines += self._md_headline()
        lines += self._md_energy()
        lines += self._md_rules()
        lines += self._md_near_linear()
        lines += self._md_cost()
        if self.config.get("modes", True):
            lines += self._md_fidelity()
            lines += self._md_utility()
        else:
            lines += ["The per-client modes M1-M4 and the per-column fidelity were not run "
                      "(`--no-modes`).", ""]  # fmt: skip
        return "\n".join(lines).rstrip() + "\n"

    def _md_header(self) -> list[str]:
        cfg = self.config
        n_rep = len(self.runs)
        lines = [
            f"# Benchmark: {self.dataset}",
            "",
            f"Produced by `{cfg.get('command', 'fits.benchmark.run_benchmark')}` on "
            f"{cfg.get('date', '?')}. Machine: {cfg.get('machine', '?')}.",
            "",
            f"{n_rep} repeat(s) (seeds {cfg['seed']}..{cfg['seed'] + max(n_rep, 1) - 1}); "
            f"{cfg['n_rows']:,} rows, {cfg['n_test']:,} test, {cfg['n_train']:,} training rows "
            f"over {len(cfg['client_sizes'])} clients "
            f"({', '.join(str(s) for s in cfg['client_sizes'])} rows, the paper's shares); "
            f"{cfg['n_train']:,} synthetic rows per generator. Every cell: mean (sd) over "
            "repeats.",
            "",
        ]
        if n_rep < cfg["repeats"]:
            lines += [f"**Only {n_rep} of the {cfg['repeats']} requested repeats finished.**", ""]
        return lines

    def headline(self) -> pd.DataFrame:
        """The figures a user judges a generator by, mean and sd over repeats.

        One row per generator: ``energy`` (all columns, to the full data), ``floor``
        (the same for the real test split), ``ratio`` (of the means), and per task
        ``<target>: real`` and ``<target>: synthetic``, the gradient-boosting test
        metric (ROC AUC or R^2, scikit-learn defaults) trained on the real training
        split and on the synthetic table; each as ``(mean, sd)``.
        """
        frame = self.energy_frame()
        if frame.empty:
            return pd.DataFrame()
        floor = _mean_sd(frame.loc[frame["table"] == "real_test", "all"].tolist())
        rows = {}
        for gen in self.config["generators"]:
            runs = [run["generators"][gen] for run in self.runs if gen in run["generators"]]
            if not runs:
                continue
            energy = _mean_sd([r["energy"]["all"] for r in runs])
            rec: dict[str, Any] = {
                "energy": energy,
                "floor": floor,
                "ratio": (energy[0] / floor[0] if floor[0] > 0 else math.nan, math.nan),
            }
            for task in self.config["tasks"]:
                target = task["target"]
                boost = [r["boosting"][target] for r in runs if target in r.get("boosting", {})]
                for side in ("real", "synthetic"):
                    rec[f"{target}: {side}"] = _mean_sd(
                        [b[side][b["metric"]] for b in boost if b[side][b["metric"]] is not None]
                    )
            rows[GENERATOR_NAMES.get(gen, gen)] = rec
        return pd.DataFrame.from_dict(rows, orient="index")

    def headline_text(self) -> str:
        """:meth:`headline` as a few plain lines (what ``fits benchmark`` prints)."""
        table = self.headline()
        metrics = {
            t["target"]: _METRIC_LABEL[{"regression": "r2", "classification": "roc_auc"}[t["task"]]]
            for t in self.config["tasks"]
        }
        lines = [f"{self.dataset}, {len(self.runs)} repeat(s), mean (sd):"]
        for gen, rec in table.iterrows():
            line = (
                f"  {gen}: energy distance {_fmt_pair(rec['energy'])}, real test floor "
                f"{_fmt_pair(rec['floor'])}, ratio {rec['ratio'][0]:.2f}"
            )
            for target, label in metrics.items():
                if f"{target}: real" in rec:
                    line += (
                        f"; gradient boosting for {target} ({label}): trained on real "
                        f"{_fmt_pair(rec[f'{target}: real'])}, on synthetic "
                        f"{_fmt_pair(rec[f'{target}: synthetic'])}"
                    )
            lines.append(line)
        return "\n".join(lines)

    def _md_headline(self) -> list[str]:
        table = self.headline()
        if table.empty or not any(
            "boosting" in r for run in self.runs for r in run["generators"].values()
        ):
            return []
        tasks = self.config["tasks"]
        lines = [
            "## Headline",
            "",
            "Energy distance of all columns to the full data (exact unless stated below), "
            "next to the real test split's (the floor); gradient boosting "
            "(scikit-learn `HistGradientBoosting*`, default settings, `random_state` = the "
            "repeat's seed) trained on the real training split and on the synthetic table, "
            "both scored on the real test split "
            "(`fits.evaluation.utility.boosting_comparison`). Mean (sd) over repeats.",
            "",
        ]
        head = ["generator", "energy distance", "real test floor", "ratio"]
        for t in tasks:
            met = {"regression": "R^2", "classification": "AUC"}[t["task"]]
            head += [f"{t['target']} {met}: trained on real", "trained on synthetic"]
        lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for gen, rec in table.iterrows():
            cells = [str(gen), _fmt_pair(rec["energy"]), _fmt_pair(rec["floor"]),
                     f"{rec['ratio'][0]:.2f}"]  # fmt: skip
            for t in tasks:
                for side in ("real", "synthetic"):
                    key = f"{t['target']}: {side}"
                    cells.append(_fmt_pair(rec[key]) if key in rec else "-")
            lines.append("| " + " | ".join(cells) + " |")
        return [*lines, ""]

    def _md_energy(self) -> list[str]:
        cfg = self.config
        lines = ["## Energy distance to the full data", ""]
        cap = cfg.get("energy_max_rows")
        lines += [
            "Paper sec. 6.2.3, via `fits.evaluation.energy_distances` against the full data "
            f"({cfg['n_rows']:,} rows)"
            + (
                f"; every table with more than {cap:,} rows subsampled to "
                f"{cap:,} rows (seeded per repeat)"
                if cap is not None and cfg["n_rows"] > cap
                else "; exact (every row)"
            )
            + ". Ratio: to the real-test floor's mean.",
            "",
            "| table | covariates | ratio | covariates + response | ratio |",
            "| --- | --- | --- | --- | --- |",
        ]
        names = {
            "real_test": "real test split (floor)",
            "independent": "column-wise independent resample of the training split",
        }
        for rec in self.energy_summary().to_dict(orient="records"):
            table = rec["table"]
            if table.endswith("@test_size"):
                gen = table.split("@")[0]
                name = (
                    f"{GENERATOR_NAMES.get(gen, gen)}, subsampled to the test split's "
                    f"{cfg['n_test']:,} rows"
                )
            else:
                name = names.get(table, GENERATOR_NAMES.get(table, table))
            lines.append(
                f"| {name} | {_fmt(rec['covariates_mean'], rec['covariates_sd'])} | "
                f"{rec['covariates_ratio']:.2f} | {_fmt(rec['all_mean'], rec['all_sd'])} | "
                f"{rec['all_ratio']:.2f} |"
            )
        resp = ", ".join(t["target"] for t in cfg["tasks"])
        lines += [
            "",
            f"Covariates + response: every column ({resp} included). The energy distance is a "
            "V-statistic: its expectation grows as the tables shrink (about "
            "E||X - X'|| (1/n + 1/m) on the radicand), so a table of fewer rows sits higher. "
            f"The real test split has {cfg['n_test']:,} rows and the synthetic tables "
            f"{cfg['n_train']:,}; the rows 'subsampled to the test split's rows' compare "
            "like with like. (The test split is also part of the full data, which lowers its "
            "distance a little.)",
            "",
        ]
        return lines

    def _md_rules(self) -> list[str]:
        """Share of synthetic rows keeping each exact rule of the training rows."""
        found = [
            (gen, rec)
            for run in self.runs
            for gen, res in run["generators"].items()
            for rec in res.get("rules", [])
        ]
        if not found:
            return []
        off = self.config.get("synthesizer_params", {}).get("rules") == "False"
        lines = [
            "## Exact rules kept",
            "",
            "Rules found in every training row of every client (`Schema.detect`, as the "
            "setup round finds them) and the share of synthetic rows keeping each "
            "(`fits.evaluation.rules_kept`; rows whose determinant combination no real row "
            "has count as not kept). Generation by rule: "
            + ("off (`--no-rules`)" if off else "on")
            + "."
            + (
                " Near-linear columns are no exact rules: they are compared in their own "
                "section, below."
                if any(
                    res.get("near_linear")
                    for run in self.runs
                    for res in run["generators"].values()
                )
                else ""
            ),
            "",
            "| generator | rule | rows kept | rows with an unseen combination |",
            "| --- | --- | --- | --- |",
        ]
        rules = list(dict.fromkeys(rec["rule"] for _, rec in found))
        for gen in self.config["generators"]:
            for rule in rules:
                kept = [r["kept"] for g, r in found if g == gen and r["rule"] == rule]
                unseen = [r["uncovered"] for g, r in found if g == gen and r["rule"] == rule]
                if kept:
                    lines.append(
                        f"| {GENERATOR_NAMES.get(gen, gen)} | {rule} | "
                        f"{_fmt(*_mean_sd(kept), 4)} | {_fmt(*_mean_sd(unseen), 4)} |"
                    )
        lines.append("")
        return lines

    def _md_near_linear(self) -> list[str]:
        """Residual spread of each near-linear pair about its line, real and synthetic."""
        found = [
            (gen, rec)
            for run in self.runs
            for gen, res in run["generators"].items()
            for rec in res.get("near_linear", [])
        ]
        if not found:
            return []
        params = self.config.get("synthesizer_params", {})
        off = params.get("rules") == "False" or params.get("near_linear") == "False"
        lines = [
            "## Near-linear columns",
            "",
            "Columns nearly a linear function of an earlier column in the training rows "
            "(`Schema.detect`, pooled R^2 >= 0.95): the residual sd about the rule's line "
            "in the training rows and in the synthetic table, their ratio, the correlation "
            "of the pair in each, and the share of synthetic rows whose residual lies "
            "within the training rows' residual range "
            "(`fits.evaluation.near_linear_kept`; rows with either column missing left "
            "out). Drawing such a column as its residual: " + ("off" if off else "on") + ".",
            "",
            "| generator | column = line + residual | residual sd, real | residual sd, "
            "synthetic | synthetic / real | correlation, real | correlation, synthetic | "
            "synthetic rows within the range |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        # one row per pair over the repeats: each repeat's training split has its own
        # line, so the pair is told by its columns (one repeat's line: as found)
        pairs = list(dict.fromkeys((rec["column"], rec["of"]) for _, rec in found))
        for gen in self.config["generators"]:
            for column, of in pairs:
                recs = [r for g, r in found if g == gen and (r["column"], r["of"]) == (column, of)]
                if recs:
                    told = recs[0]["rule"] if len(recs) == 1 else f"{column} on {of}"
                    lines.append(
                        f"| {GENERATOR_NAMES.get(gen, gen)} | {told} | "
                        + " | ".join(
                            _fmt(*_mean_sd([r[key] for r in recs]), 4)
                            for key in _NEAR_LINEAR_FIGURES
                        )
                        + " |"
                    )
        lines.append("")
        return lines

    def _md_cost(self) -> list[str]:
        lines = [
            "## Time, memory, upload",
            "",
            "Wall time: fit + sample of one generator. Peak memory: the benchmark process's "
            "peak resident set size (`getrusage` ru_maxrss) when the generator finished, so "
            "it includes everything the process did before (loading, earlier generators).",
            "",
            "| generator | wall time (s) | fit (s) | sample (s) | process peak RSS (MB) | "
            "uploaded, all clients (MB) | bytes per synthetic row |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for gen in self.config["generators"]:
            vals = [run["generators"][gen] for run in self.runs if gen in run["generators"]]
            if not vals:
                continue

            def ms(key: str, vals: list[dict[str, Any]] = vals) -> tuple[float, float]:
                return _mean_sd([v[key] for v in vals])

            up = _mean_sd([sum(v["uploaded_bytes"]) / 1e6 for v in vals])
            per_row = _mean_sd([sum(v["uploaded_bytes"]) / v["n_synthetic"] for v in vals])
            lines.append(
                f"| {GENERATOR_NAMES.get(gen, gen)} | {_fmt(*ms('wall_s'))} | "
                f"{_fmt(*ms('fit_s'))} | {_fmt(*ms('sample_s'))} | {_fmt(*ms('peak_rss_mb'))} | "
                f"{_fmt(*up)} | {_fmt(per_row[0], None, 6)} |"
            )
        lines.append("")
        for gen in self.config["generators"]:
            trees = [
                run["generators"][gen].get("boosted_trees") or {}
                for run in self.runs
                if gen in run["generators"]
            ]
            columns = sorted({c for t in trees for c in t})
            if columns:
                kept = ", ".join(
                    f"{c} {'/'.join(str(t[c]) for t in trees if c in t)}" for c in columns
                )
                name = GENERATOR_NAMES.get(gen, gen)
                lines += [f"Trees per boosted column of {name}, by repeat: {kept}.", ""]
        return lines

    def _md_fidelity(self) -> list[str]:
        lines = [
            "## What contributes most to the distance",
            "",
            "Lowest per-column scores (`column_fidelity`: 1 - KS for continuous, 1 - TV for "
            "discrete columns) and per-pair scores (`pair_fidelity`: 1 - |corr difference| / 2 "
            "for two continuous columns, else 1 - TV of the contingency table with 10 quantile "
            "bins) of each synthetic table against the full data, mean (sd) over repeats.",
            "",
        ]
        for gen in self.config["generators"]:
            worst = self.worst_fidelity(gen)
            if not worst:
                continue
            label = GENERATOR_NAMES.get(gen, gen)
            lines += [
                f"**{label}, columns**",
                "",
                "| column | kind | metric | score |",
                "| --- | --- | --- | --- |",
            ]
            for rec in worst["columns"].to_dict(orient="records"):
                lines.append(
                    f"| {rec['column']} | {rec['kind']} | {rec['metric']} | "
                    f"{_fmt(rec['mean'], rec['std'])} |"
                )
            lines += [
                "",
                f"**{label}, pairs**",
                "",
                "| pair | metric | score |",
                "| --- | --- | --- |",
            ]
            for rec in worst["pairs"].to_dict(orient="records"):
                lines.append(
                    f"| {rec['col_a']} x {rec['col_b']} | {rec['metric']} | "
                    f"{_fmt(rec['mean'], rec['std'])} |"
                )
            lines.append("")
        return lines

    def _md_utility(self) -> list[str]:
        cfg = self.config
        lines = [
            "## Downstream utility per client and mode",
            "",
            "Modes (paper app. D.1): M1 synthetic only (one fit, repeated in every column), "
            "M2 local only, M3 local + r x m_k synthetic rows, M4 local + all synthetic rows "
            "with loss weight lambda (lambda = 0 is M2). `M4 (best lambda)`: per client the "
            "positive lambda with the best mean over repeats (an oracle choice). The pooled "
            "row fits all clients' real rows together (not allowed under federation; a yardstick). "
            "Clients are numbered by decreasing size.",
            "",
        ]
        for task in cfg["tasks"]:
            target = task["target"]
            ref = task.get("reference_source", "")
            lines += [f"### {target} ({task['task']}; {task.get('parametric', '')})", ""]
            if ref:
                lines += [f"Reference parameter: {ref}.", ""]
            metric = _TEST_METRIC[task["task"]]
            specs = [("parametric", "param_error"), ("parametric", metric), ("boosting", metric)]
            for gen in cfg["generators"]:
                for model, met in specs:
                    table = self.mode_table(gen, target, met, model)
                    if table.empty:
                        continue
                    what = (
                        "gradient boosting"
                        if model == "boosting"
                        else task.get("parametric", "parametric model")
                    )
                    better = "lower" if _LOWER_IS_BETTER[met] else "higher"
                    lines += [
                        f"**{GENERATOR_NAMES.get(gen, gen)}, {what}: {_METRIC_LABEL[met]}** "
                        f"({better} is better)",
                        "",
                    ]
                    lines += _markdown_table(table, cfg["client_sizes"])
                    lines.append("")
        return lines


def _markdown_table(table: pd.DataFrame, sizes: Sequence[int]) -> list[str]:
    clients = list(dict.fromkeys(table.columns.get_level_values(0)))
    heads = []
    for i, c in enumerate(clients):
        short = c.replace("client ", "C")
        heads.append(f"{short} ({sizes[i]})" if i < len(sizes) else short)
    out = ["| mode | " + " | ".join(heads) + " |", "| --- |" + " --- |" * len(clients)]
    for label in table.index:
        cells = [_fmt(table.loc[label, (c, "mean")], table.loc[label, (c, "sd")]) for c in clients]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return out


def _machine() -> str:
    cpus = os.cpu_count() or 0
    mem = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            kib = int(fh.readline().split()[1])
        mem = f", {kib / 1024**2:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return (
        f"{cpus} CPU cores{mem}, {platform.machine()}, Python {platform.python_version()}, "
        f"numpy {np.__version__}, pandas {pd.__version__}"
    )


def _load(
    dataset: str, data_dir: str | os.PathLike[str] | None, n_rows: int | None, seed: int
) -> Dataset:
    key = dataset.strip().lower()
    if key == "simulation":
        return simulate(n=10_000 if n_rows is None else int(n_rows), seed=seed)
    data = load_dataset(key, data_dir)
    if n_rows is not None and n_rows > len(data.frame):  # a subsample, never more rows
        size = len(data.frame)
        raise ValueError(
            f"n_rows={n_rows}: {key} has {size:,} rows; ask for at most {size} (n_rows="
            f"{size}), or leave n_rows out for all of them"
        )
    if n_rows is not None and n_rows < len(data.frame):
        rng = np.random.default_rng(seed)
        rows = np.sort(rng.choice(len(data.frame), size=int(n_rows), replace=False))
        data.frame = data.frame.iloc[rows].reset_index(drop=True)
    return data


def run_benchmark(
    dataset: str,
    data_dir: str | os.PathLike[str] | None = None,
    repeats: int = 5,
    seed: int = 0,
    generators: Sequence[str] = ("gaussian", "knn"),
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    progress: Callable[[str], None] | None = None,
    *,
    n_rows: int | None = None,
    boosting: bool = True,
    energy_max_rows: int | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    command: str | None = None,
    site_policy: SitePolicy | None = None,
    modes: bool = True,
    synthesizer_params: Mapping[str, Any] | None = None,
    kernel_params: Mapping[str, Any] | None = None,
) -> BenchmarkResult:
    """Run the paper's protocol on one data set.

    Parameters
    ----------
    dataset : {"simulation", "adult", "bike", "german"}
        The data set (case-insensitive).
    data_dir : str or path-like, optional
        Folder with the UCI files (default: ``FITS_DATA_DIR``); not used by the
        simulation.
    repeats : int, default 5
        Repeats; repeat ``r`` uses seed ``seed + r`` for the simulation, the split,
        the synthesizers, the energy-distance subsamples and the downstream fits.
    seed : int, default 0
        The first repeat's seed.
    generators : sequence of {"gaussian", "knn"}, default both
        FITS-G and FITS-K.
    lambdas : sequence of float, default (0, 0.05, 0.1, 0.2, 0.5, 1)
        M4's synthetic loss weights for the parametric model (0 reproduces M2).
    ratios : sequence of float, default (1,)
        M3's synthetic-to-local ratios.
    progress : callable, optional
        Called with a one-line message at each stage.
    n_rows : int, optional
        Rows of the data: the simulation's ``n`` (default 10,000), or a seeded
        subsample of a real data set (default: all rows; more rows than it has is a
        ValueError, ``n_rows=...`` naming its size). For quick checks.
    boosting : bool, default True
        Also evaluate gradient boosting in the modes (at M1, M2, M3 and M4 with
        lambda = 0.1 only, to bound the time). The headline comparison (scikit-learn's
        defaults, trained on the real training split and on the synthetic table) is
        always run.
    energy_max_rows : int, optional
        Subsample tables with more rows to this many for the energy distance (for
        quick checks). Default: exact, every row.
    checkpoint : str or path-like, optional
        Base path (without suffix): after every repeat the partial result is written
        to ``<checkpoint>.md`` and ``<checkpoint>.json``.
    command : str, optional
        The command line to record in the output.
    site_policy : SitePolicy, optional
        The policy every site enforces (default: :class:`~fits.federation.policy.SitePolicy`'s
        defaults, as for :class:`~fits.synthesizer.FITSSynthesizer`); e.g.
        ``SitePolicy(min_effective_rows=0)`` turns the effective-rows floor off.
    modes : bool, default True
        Evaluate the per-client data usage modes M1-M4 and the per-column fidelity;
        False keeps the headline only (energy distances, the gradient-boosting
        comparison, time and upload).
    synthesizer_params : mapping, optional
        Further :class:`~fits.synthesizer.FITSSynthesizer` keyword arguments for every
        generator (e.g. ``{"discrete_response_bandwidth": 0.005}``); recorded in the
        output.
    kernel_params : mapping, optional
        Keyword arguments of every site's kernel (:class:`~fits.core.kernels.KNNKernel`
        for FITS-K, :class:`~fits.core.kernels.GaussianKernel` for FITS-G), e.g.
        ``{"ordinal_penalty": 5.0}`` (lambda_q of eq. 26); recorded in the output.

    Returns
    -------
    BenchmarkResult
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    generators = [str(g) for g in generators]
    for g in generators:
        if g not in GENERATOR_NAMES:
            raise ValueError(f"unknown generator {g!r}; choose from {list(GENERATOR_NAMES)}")
    say = progress or (lambda message: None)
    key = dataset.strip().lower()
    base = _load(key, data_dir, n_rows, seed)
    tasks = _tasks(base)
    settings = _Settings(
        lambdas=[float(v) for v in lambdas],
        ratios=[float(v) for v in ratios],
        boosting=bool(boosting),
        energy_max_rows=None if energy_max_rows is None else int(energy_max_rows),
        site_policy=site_policy,
        modes=bool(modes),
        synthesizer_params=dict(synthesizer_params or {}),
        kernel_params=dict(kernel_params or {}),
    )
    result = BenchmarkResult(
        dataset=key,
        config={
            "dataset": key,
            "description": base.description,
            "repeats": int(repeats),
            "seed": int(seed),
            "generators": generators,
            "lambdas": settings.lambdas,
            "ratios": settings.ratios,
            "boosting": settings.boosting,
            "boosting_settings": {"lambdas": [BOOSTING_LAMBDA], "ratios": settings.ratios},
            "n_rows": len(base.frame),
            "n_train": 0,
            "n_test": 0,
            "client_sizes": [],
            "energy_max_rows": settings.energy_max_rows,
            "site_policy": "default" if site_policy is None else site_policy.to_dict(),
            "modes": settings.modes,
            "synthesizer_params": {k: repr(v) for k, v in settings.synthesizer_params.items()},
            "kernel_params": jsonable(settings.kernel_params),
            # the chain the synthesizers used: the data set's, or synthesizer_params' order
            "order": list(settings.synthesizer_params.get("order") or base.order),
            "kinds": dict(base.kinds),
            "tasks": [{k: v for k, v in t.items() if k != "truth"} for t in tasks],
            "machine": _machine(),
            "date": _now(),
            "command": command or f"run_benchmark({key!r}, repeats={repeats}, seed={seed})",
        },
    )
    for r in range(repeats):
        rseed = seed + r
        t_repeat = time.perf_counter()
        data = base if (key != "simulation" or r == 0) else _load(key, data_dir, n_rows, rseed)
        # every client at least the 2 rows a site needs (tiny --rows; no effect otherwise)
        clients, test = federated_split(data.frame, seed=rseed, min_rows=MIN_CLIENT_ROWS)
        if r == 0:
            result.config.update(
                n_train=sum(len(c) for c in clients),
                n_test=len(test),
                client_sizes=[len(c) for c in clients],
            )
        split = _Split(key, data, clients, test, rseed, settings.energy_max_rows)
        say(
            f"[{key}] repeat {r + 1}/{repeats} (seed {rseed}): {len(data.frame):,} rows, "
            f"{split.n_train:,} training rows over {len(clients)} clients"
        )
        run: dict[str, Any] = {
            "repeat": r,
            "seed": rseed,
            "client_sizes": [len(c) for c in clients],
            "floors": _floors(split, tasks[0]["covariates"], say),
            "generators": {},
        }
        for gen in generators:
            run["generators"][gen] = _run_generator(gen, split, tasks, settings, say)
        run["repeat_s"] = time.perf_counter() - t_repeat
        result.runs.append(run)
        result.config["tasks"] = [{k: v for k, v in t.items() if k != "truth"} for t in tasks]
        result.config["date"] = _now()
        if checkpoint is not None:
            write_result(result, checkpoint)
            say(f"[{key}]   wrote {checkpoint}.md / .json after repeat {r + 1}")
    return result


@dataclass(frozen=True)
class _Settings:
    """The evaluation settings of one benchmark run."""

    lambdas: list[float]
    ratios: list[float]
    boosting: bool
    energy_max_rows: int | None
    site_policy: SitePolicy | None = None
    modes: bool = True
    synthesizer_params: dict[str, Any] = field(default_factory=dict)
    kernel_params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Split:
    """One repeat's data: the full table, its clients and test rows, and the seed."""

    key: str
    data: Dataset
    clients: list[pd.DataFrame]
    test: pd.DataFrame
    seed: int
    energy_max_rows: int | None

    @property
    def full(self) -> pd.DataFrame:
        return self.data.frame

    @property
    def n_train(self) -> int:
        return sum(len(c) for c in self.clients)

    def energies(
        self, tables: Mapping[str, pd.DataFrame], covariates: list[str]
    ) -> dict[str, dict[str, float]]:
        """Per table: the energy distance to the full data on the covariates and on every
        column (:func:`fits.evaluation.energy_distances`: the full data's own distances
        computed once for all tables; exact unless ``energy_max_rows``)."""
        all_cols = [str(c) for c in self.full.columns]
        rest = [c for c in all_cols if c not in covariates]
        kw: dict[str, Any] = {"max_rows": self.energy_max_rows, "seed": self.seed}
        if len(rest) == 1:  # covariates and covariates + the response in one pass
            frame = energy_distances(
                self.full, tables, self.data.kinds, covariates, responses=rest, **kw
            )
            cov, every = frame.iloc[:, 0], frame.iloc[:, 1]
        else:
            cov = energy_distances(self.full, tables, self.data.kinds, covariates, **kw)
            every = energy_distances(self.full, tables, self.data.kinds, all_cols, **kw)
            cov, every = cov.iloc[:, 0], every.iloc[:, 0]
        return {
            name: {"covariates": float(cov[name]), "all": float(every[name])} for name in tables
        }


def _floors(
    split: _Split, covariates: list[str], say: Callable[[str], None]
) -> dict[str, dict[str, float]]:
    """Energy distances of the real test split and of an independent resample."""
    train = pd.concat(split.clients, ignore_index=True)
    indep = independent_resample(train, n=len(train), seed=split.seed)
    floors = split.energies({"real_test": split.test, "independent": indep}, covariates)
    say(
        f"[{split.key}]   floors: real test {floors['real_test']['all']:.4f}, "
        f"independent {floors['independent']['all']:.4f}"
    )
    return floors


def _run_generator(
    gen: str,
    split: _Split,
    tasks: list[dict[str, Any]],
    settings: _Settings,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Fit and sample one generator, then score its table (energy, fidelity, utility)."""
    data, n_syn = split.data, split.n_train
    t0 = time.perf_counter()
    params: dict[str, Any] = {"kinds": data.kinds, "order": data.order}
    params.update(settings.synthesizer_params)
    kernel: Any = gen
    if settings.kernel_params:
        kernel = (KNNKernel if gen == "knn" else GaussianKernel)(**settings.kernel_params)
    synth = FITSSynthesizer(kernel, seed=split.seed, site_policy=settings.site_policy, **params)
    synth.fit(split.clients)
    t1 = time.perf_counter()
    synthetic = synth.sample(n_syn)
    t2 = time.perf_counter()
    res: dict[str, Any] = {
        "wall_s": t2 - t0,
        "fit_s": t1 - t0,
        "sample_s": t2 - t1,
        "peak_rss_mb": _peak_rss_mb(),
        "uploaded_bytes": [int(b) for b in synth.uploaded_bytes_],
        "n_synthetic": n_syn,
        # trees per boosted column (column_models; fewer than n_trees: early stopping)
        "boosted_trees": {c: m.n_trees for c, m in synth.coordinator.models.items()},
        "fallbacks": _fallbacks(synth),
        # (site, query) answers the sites' policies abstained from, and gave with a
        # kernel widened to their effective-rows floor
        "abstained": int(getattr(synth.coordinator, "abstained", 0)),
        "widened": int(getattr(synth.coordinator, "widened", 0)),
        # the smoothing per chain column (FITSSynthesizer(smoothing="auto") and
        # tune_relevance: the choice and the held-out scores summed over the sites)
        "smoothing": {c: v.to_dict() for c, v in synth.smoothing_.items()},
        "tuning": synth.tuning_,
    }
    if synth.smoothing_:
        chosen = ", ".join(
            f"{c} s={v.sharpness:g} b={v.reach:g}"
            + (
                " relevance " + " ".join(f"{k}={a:.3g}" for k, a in v.relevance)
                if v.relevance
                else ""
            )
            for c, v in synth.smoothing_.items()
            if not v.is_default
        )
        say(f"[{split.key}]   {GENERATOR_NAMES[gen]}: smoothing per column: {chosen or 'default'}")
    say(f"[{split.key}]   {GENERATOR_NAMES[gen]}: synthesized {n_syn:,} rows in {t2 - t0:.1f} s")
    res["rules"], near = _rules_kept(split, synthetic, params["order"])
    for rec in res["rules"]:
        say(f"[{split.key}]   {GENERATOR_NAMES[gen]}: rule {rec['rule']} kept in {rec['kept']:.2%}")
    if near:  # the key only where the training rows have a near-linear pair
        res["near_linear"] = near
    for rec in near:
        say(
            f"[{split.key}]   {GENERATOR_NAMES[gen]}: near-linear {rec['column']} on "
            f"{rec['of']}: residual sd real {rec['real_sd']:.4g}, synthetic "
            f"{rec['synthetic_sd']:.4g} (ratio {rec['sd_ratio']:.3f}); {rec['within']:.2%} "
            "of synthetic rows within the real residual range"
        )
    covariates = tasks[0]["covariates"]
    # also at the real test split's size (the V-statistic's bias grows as the tables
    # shrink, so this is the like-for-like comparison with the floor)
    sub = synthetic.sample(n=min(len(split.test), n_syn), random_state=split.seed)
    both = split.energies({"synthetic": synthetic, "test_size": sub}, covariates)
    res["energy"], res["energy_test_size"] = both["synthetic"], both["test_size"]
    train = pd.concat(split.clients, ignore_index=True)
    res["boosting"] = {}
    for task in tasks:
        comparison = boosting_comparison(
            train, synthetic, split.test, task["target"],
            {c: data.kinds[c] for c in [*task["covariates"], task["target"]]},
            task=task["task"], covariates=task["covariates"], seed=split.seed,
        )  # fmt: skip
        res["boosting"][task["target"]] = comparison.to_dict()
        say(
            f"[{split.key}]   {GENERATOR_NAMES[gen]}: gradient boosting for {task['target']}, "
            f"{_METRIC_LABEL[comparison.metric]}: trained on real "
            f"{comparison.real[comparison.metric]:.4f}, on synthetic "
            f"{comparison.synthetic[comparison.metric]:.4f}"
        )
    res["utility"] = {}
    if settings.modes:
        res["fidelity"] = {
            "columns": column_fidelity(split.full, synthetic, data.kinds).to_dict(orient="records"),
            "pairs": pair_fidelity(split.full, synthetic, data.kinds).to_dict(orient="records"),
        }
        for task in tasks:
            ures = _utility(split, synthetic, task, settings)
            target = task["target"]
            res["utility"][target] = _parametric_first(ures.to_dict()["rows"])
            task.setdefault("reference_source", ures.reference_source)
            task.setdefault("parametric", ures.parametric)
            res.setdefault("reference", {})[target] = ures.to_dict()["reference"]
    else:
        res["fidelity"] = {"columns": [], "pairs": []}
    res["eval_s"] = time.perf_counter() - t2
    say(
        f"[{split.key}]   {GENERATOR_NAMES[gen]}: energy distance {res['energy']['all']:.4f} "
        f"(covariates {res['energy']['covariates']:.4f}); evaluation {res['eval_s']:.1f} s"
    )
    return res


def _rules_kept(
    split: _Split, synthetic: pd.DataFrame, order: Sequence[str] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The share of synthetic rows keeping each exact rule of the training clients, and
    the residual spread of each near-linear pair of theirs about its line, synthetic
    against the training rows (:func:`fits.evaluation.near_linear_kept`); the rules
    found along the chain ``order`` (default the data set's), as a fit's setup finds
    them."""
    found = Schema.detect(split.clients, kinds=split.data.kinds, order=order or split.data.order)
    rules = found.rules or []
    kept = rules_kept(synthetic, rules).to_dict(orient="records")
    if not found.near_linear:
        return kept, []
    train = pd.concat(split.clients, ignore_index=True)
    near = near_linear_kept(train, synthetic, rules).to_dict(orient="records")
    return kept, near


def _utility(
    split: _Split, synthetic: pd.DataFrame, task: dict[str, Any], settings: _Settings
) -> UtilityResult:
    """Downstream utility of one task: the parametric model on the whole lambda grid,
    the boosting model at M1-M3 and at M4 with :data:`BOOSTING_LAMBDA` (one call)."""
    target = task["target"]
    return downstream_utility(
        split.clients,
        synthetic,
        split.test,
        target,
        {c: split.data.kinds[c] for c in [*task["covariates"], target]},
        task=task["task"],
        covariates=task["covariates"],
        reference=task["truth"] if task["truth"] is not None else split.full,
        ratios=settings.ratios,
        lambdas=settings.lambdas,
        boosting=settings.boosting,
        boosting_lambdas=[BOOSTING_LAMBDA],
        seed=split.seed,
    )


def _parametric_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The parametric model's records, then the boosting model's (each in fit order)."""
    boost = [r for r in rows if r["model"] == "gradient boosting"]
    return [r for r in rows if r["model"] != "gradient boosting"] + boost


def column_energy(
    full: pd.DataFrame,
    synthetic: pd.DataFrame,
    kinds: Mapping[str, str],
    *,
    max_rows: int | None = ENERGY_MAX_ROWS,
    seed: int | None = 0,
) -> pd.DataFrame:
    """How much each column contributes to the energy distance of a synthetic table.

    Per column: the energy distance of that column alone (its marginal, encoded as in
    :func:`fits.evaluation.energy_distance`) and the drop of the all-column distance
    when the column is left out (``all - without``; large: the column, with its
    dependence on the others, carries much of the distance).

    Parameters
    ----------
    full, synthetic : pandas.DataFrame
        The reference (full real data) and the synthetic table.
    kinds : mapping
        Column -> kind.
    max_rows : int or None, default 20,000
        Subsample size for tables with more rows (the same rows for every column set:
        one seed).
    seed : int or None, default 0
        Seed of the subsample.

    Returns
    -------
    pandas.DataFrame
        ``column``, ``kind``, ``marginal``, ``without``, ``drop`` (sorted by ``drop``,
        largest first); the all-column distance is in ``attrs["all"]``.
    """
    cols = [str(c) for c in kinds]

    def ed(columns: list[str]) -> float:
        return energy_distance(
            full, synthetic, kinds, columns=columns, max_rows=max_rows, seed=seed
        )

    total = ed(cols)
    records = []
    for col in cols:
        without = ed([c for c in cols if c != col])
        records.append(
            {
                "column": col,
                "kind": kinds[col],
                "marginal": ed([col]),
                "without": without,
                "drop": total - without,
            }
        )
    out = pd.DataFrame.from_records(records).sort_values("drop", ascending=False)
    out = out.reset_index(drop=True)
    out.attrs["all"] = total
    return out


def _fallbacks(synth: FITSSynthesizer) -> Any:
    value = getattr(synth.coordinator, "fallbacks", None)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (int, np.integer)):
        return int(value)
    return None


def write_result(result: BenchmarkResult, base: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write ``<base>.md`` and ``<base>.json`` atomically.

    Parameters
    ----------
    result : BenchmarkResult
        What to write.
    base : str or path-like
        The path without suffix, e.g. ``out/adult`` (a missing folder, ``out``, is
        created).

    Returns
    -------
    tuple of pathlib.Path
        The markdown and the JSON file.
    """
    from fits.io import write_text

    base = Path(base)
    base.parent.mkdir(parents=True, exist_ok=True)  # a results folder (write_text makes none)
    md = write_text(result.to_markdown(), base.with_name(base.name + ".md"))
    js = write_text(result.to_json() + "\n", base.with_name(base.name + ".json"))
    return md, js
