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

and returns a :class:`Report`. ``Report.to_html()`` is one self-contained page (inline
CSS, figures as embedded PNG images, no scripts, nothing fetched from the network);
``Report.to_json()`` holds every number the page shows.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fits.core.schema import IdentifierColumnError, describe_table, merge_descriptions
from fits.io import write_text

if TYPE_CHECKING:  # the evaluators are imported when used: `import fits` stays light
    from fits.evaluation.privacy import PrivacyResult
    from fits.evaluation.utility import UtilityResult

__all__ = ["Report", "evaluate"]

#: Colours of the real and the synthetic data in every figure.
REAL_COLOUR = "#3b6ea8"
SYNTHETIC_COLOUR = "#e07b39"
#: Most levels shown in a bar chart of a nominal column (the rest are pooled).
TOP_LEVELS = 20
#: Bins of the continuous marginal histograms.
HISTOGRAM_BINS = 40

Frames = Sequence[pd.DataFrame] | Mapping[str, pd.DataFrame]


# ---------------------------------------------------------------------------------------
# number formatting: the page shows numbers only through these
# ---------------------------------------------------------------------------------------


def fmt_number(x: Any) -> str:
    """A number as the report shows it: 4 significant digits, thousands separators."""
    if x is None:
        return "–"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    x = float(x)
    if math.isnan(x):
        return "–"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x != 0 and abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def fmt_percent(x: Any) -> str:
    """A share as a percentage with two decimals."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{100.0 * float(x):.2f}%"


def _span(x: Any, percent: bool = False) -> str:
    return f'<span class="num">{fmt_percent(x) if percent else fmt_number(x)}</span>'


def _cell(x: Any, percent: bool = False, bold: bool = False) -> str:
    text = fmt_percent(x) if percent else fmt_number(x)
    if bold:
        text = f"<b>{text}</b>"
    return f'<td class="num">{text}</td>'


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _jsonable(value: Any) -> Any:
    """Plain JSON types; NaN -> None, inf -> "inf"."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


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
        return json.dumps(_jsonable(self.data), indent=indent, ensure_ascii=False)

    def summary(self) -> str:
        """A few lines of plain text: the headline of each section."""
        return "\n".join(_summary_lines(self.data))

    def to_html(self) -> str:
        """One self-contained HTML page (inline CSS and images, no scripts, no links out)."""
        return _render_html(self.data, self.figures)

    def save(
        self, html_path: str | os.PathLike[str], json_path: str | os.PathLike[str] | None = None
    ):
        """Write the HTML page (and the JSON) atomically.

        Each file is written to a temporary file in its target folder and then
        renamed over the target, so a reader never sees a half-written report.

        Parameters
        ----------
        html_path : path-like
            Where to write the HTML page (its folder must exist).
        json_path : path-like, optional
            Where to write the JSON.
        """
        _atomic_write(Path(html_path), self.to_html())
        if json_path is not None:
            _atomic_write(Path(json_path), self.to_json() + "\n")


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
    declared = {c: {"kind": k} for c, k in overrides.items()}
    description = describe_table(real, declared, client="real table")
    try:
        schema = merge_descriptions([description], ["real table"], kinds=overrides)
    except IdentifierColumnError as exc:  # identifiers / free text: kind "id", left out
        overrides.update({c: "id" for c in exc.columns})
        declared = {c: {"kind": k} for c, k in overrides.items()}
        description = describe_table(real, declared, client="real table")
        schema = merge_descriptions([description], ["real table"], kinds=overrides)
    return schema.kinds()


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
        return {str(k): _jsonable(v) for k, v in settings.items()}
    out: dict[str, Any] = {"synthesizer": type(settings).__name__}
    for name, value in sorted(vars(settings).items()):
        if name.startswith("_"):
            continue
        if name == "schema_":
            out["kinds"] = _jsonable(value.kinds())
            out["order"] = _jsonable(list(value.order))
            continue
        if isinstance(value, (str, int, float, bool, type(None), list, tuple, dict)):
            out[name] = _jsonable(value)
        else:
            out[name] = str(value)
    for name in ("uploaded_bytes_",):
        try:
            out[name] = _jsonable(getattr(settings, name))
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
# figures (matplotlib, Agg canvas, never pyplot)
# ---------------------------------------------------------------------------------------


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig, dpi: int = 96) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _style(ax) -> None:
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.tick_params(labelsize=7)


def _marginal_figures(marginals: Mapping[str, dict], scores: Mapping[str, float]) -> list[str]:
    """Small multiples, 4 per row, up to 16 per image."""
    names = list(marginals)
    images = []
    per_image = 16
    for start in range(0, len(names), per_image):
        chunk = names[start : start + per_image]
        ncols = 4
        nrows = math.ceil(len(chunk) / ncols)
        fig = _figure(13.0, 2.75 * nrows)
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for ax in axes.ravel()[len(chunk) :]:
            ax.set_visible(False)
        for ax, col in zip(axes.ravel(), chunk, strict=False):
            m = marginals[col]
            _style(ax)
            if m["kind"] == "continuous":
                edges = np.asarray(m["edges"])
                ax.stairs(m["real"], edges, fill=True, color=REAL_COLOUR, alpha=0.35, label="real")
                ax.stairs(m["real"], edges, color=REAL_COLOUR, linewidth=1.0)
                ax.stairs(
                    m["synthetic"], edges, color=SYNTHETIC_COLOUR, linewidth=1.6, label="synthetic"
                )
                if max(np.max(m["real"]), np.max(m["synthetic"])) > 0.5:
                    ax.set_yscale("log")
                    ax.set_ylabel("share (log)", fontsize=7)
                else:
                    ax.set_ylabel("share", fontsize=7)
            else:
                labels = list(m["levels"])
                real_vals = list(m["real"])
                syn_vals = list(m["synthetic"])
                if "other" in m:
                    labels.append(f"other ({m['other']['n_levels']})")
                    real_vals.append(m["other"]["real"])
                    syn_vals.append(m["other"]["synthetic"])
                pos = np.arange(len(labels))
                ax.bar(pos - 0.2, real_vals, 0.4, color=REAL_COLOUR, alpha=0.8, label="real")
                ax.bar(
                    pos + 0.2, syn_vals, 0.4, color=SYNTHETIC_COLOUR, alpha=0.9, label="synthetic"
                )
                short = [lab if len(lab) <= 14 else lab[:13] + "…" for lab in labels]
                rotate = len(labels) > 4 or max((len(s) for s in short), default=0) > 6
                ax.set_xticks(
                    pos,
                    short,
                    rotation=60 if rotate else 0,
                    ha="right" if rotate else "center",
                    fontsize=6.5,
                )
                ax.set_ylabel("share", fontsize=7)
            score = scores.get(col)
            title = col if score is None else f"{col}  ({fmt_number(score)})"
            ax.set_title(title, fontsize=8.5, loc="left")
        fig.tight_layout()
        images.append(_png(fig))
    return images


def _heatmap_figure(assoc: Mapping[str, Any]) -> str:
    from matplotlib.colors import TwoSlopeNorm

    cols = assoc["columns"]
    n = len(cols)
    real = np.asarray(assoc["real"])
    syn = np.asarray(assoc["synthetic"])
    diff = np.abs(real - syn)
    side = min(6.0, max(2.6, 0.3 * n + 1.2))
    fig = _figure(3 * side + 1.6, side + 1.1)
    grid = fig.subplots(
        1, 6, gridspec_kw={"width_ratios": [1, 1, 0.045, 0.22, 1, 0.045], "wspace": 0.1}
    )
    grid[3].set_visible(False)  # room for the first colour bar's labels
    grid = [grid[0], grid[1], grid[2], grid[4], grid[5]]
    axes = [grid[0], grid[1], grid[3]]
    norm = TwoSlopeNorm(vmin=-1.0, vcenter=0.0, vmax=1.0)
    labels = [c if len(c) <= 16 else c[:15] + "…" for c in cols]
    fontsize = 7 if n <= 20 else 5
    images = []
    for ax, mat, title in (
        (axes[0], real, "real"),
        (axes[1], syn, "synthetic"),
        (axes[2], diff, "|real − synthetic|"),
    ):
        if title.startswith("|"):
            im = ax.imshow(mat, cmap="Reds", vmin=0.0, vmax=max(0.25, float(diff.max())))
        else:
            im = ax.imshow(mat, cmap="RdBu_r", norm=norm)
        images.append(im)
        ax.set_title(title, fontsize=9)
        if n <= 40:
            ax.set_xticks(range(n), labels, rotation=90, fontsize=fontsize)
            ax.set_yticks(range(n), labels if ax is axes[0] else [""] * n, fontsize=fontsize)
        else:
            ax.set_xticks([])
            ax.set_yticks([])
        if title.startswith("|") and n <= 20:
            for i in range(n):
                for j in range(n):
                    if i != j and diff[i, j] >= 0.05:
                        dark = diff[i, j] > 0.5 * max(0.25, diff.max())
                        ax.text(
                            j,
                            i,
                            f"{diff[i, j]:.2f}",
                            ha="center",
                            va="center",
                            fontsize=6 if n <= 15 else 5,
                            color="white" if dark else "black",
                        )
    fig.colorbar(images[1], cax=grid[2]).ax.tick_params(labelsize=7)
    fig.colorbar(images[2], cax=grid[4]).ax.tick_params(labelsize=7)
    # the colour bars as tall as the (square) heatmaps
    for cax, ax in ((grid[2], axes[1]), (grid[4], axes[2])):
        ax.apply_aspect()
        box, cbox = ax.get_position(), cax.get_position()
        cax.set_position([cbox.x0 - 0.5 * cbox.width, box.y0, cbox.width * 0.6, box.height])
    return _png(fig)


_MODE_STYLE = {
    "M2": ("#4d4d4d", "o"),
    "M3": ("#2a9d8f", "s"),
    "M4": (SYNTHETIC_COLOUR, "D"),
}


def _utility_figure(result: Mapping[str, Any]) -> str:
    rows = pd.DataFrame(result["rows"])
    task = result["task"]
    parametric = result["parametric_model"]
    metric = "mse" if task == "regression" else "accuracy"
    metric_label = "test MSE (lower is better)" if task == "regression" else "test accuracy"
    clients = [c for c in dict.fromkeys(rows["client"]) if c != "all clients"]
    panels = [
        (parametric, "param_error", f"{parametric}: parameter error"),
        (parametric, metric, f"{parametric}: {metric_label}"),
        ("gradient boosting", metric, f"gradient boosting: {metric_label}"),
    ]
    panels = [p for p in panels if (rows["model"] == p[0]).any()]
    fig = _figure(4.3 * len(panels), 3.3)
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    for ax, (model, col, title) in zip(axes, panels, strict=True):
        _style(ax)
        sub = rows[rows["model"] == model]
        x = np.arange(len(clients))
        for (mode, setting), group in sub[sub["client"] != "all clients"].groupby(
            ["mode", "setting"], sort=False
        ):
            colour, marker = _MODE_STYLE.get(mode, ("#888888", "^"))
            values = group.set_index("client").reindex(clients)[col].to_numpy(dtype=float)
            label = mode + (f" {setting}" if setting else "").replace("lambda", "λ")
            ax.plot(
                x,
                values,
                marker=marker,
                color=colour,
                linewidth=1.2,
                markersize=3.5,
                label=label,
                alpha=0.95 if mode != "M3" or setting.endswith("=1") else 0.6,
            )
        for mode, style, colour in (("M1", "--", "#c0392b"), ("pooled", ":", REAL_COLOUR)):
            value = sub.loc[sub["mode"] == mode, col]
            if len(value) and value.notna().any():
                label = "M1 synthetic only" if mode == "M1" else "pooled real"
                ax.axhline(
                    float(value.iloc[0]), linestyle=style, color=colour, linewidth=1.2, label=label
                )
        ax.set_xticks(x, [f"{c}" for c in clients], rotation=45, ha="right", fontsize=6.5)
        if col == "param_error" and np.nanmin(sub[col].to_numpy(dtype=float)) > 0:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=8.5, loc="left")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncols=min(6, len(labels)),
        fontsize=7.5,
        frameon=False,
        bbox_to_anchor=(0.5, -0.02),
    )
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return _png(fig)


def _privacy_figure(privacy: PrivacyResult) -> str:
    fig = _figure(6.4, 2.9)
    ax = fig.subplots()
    _style(ax)
    syn = privacy.synthetic_dcr
    hold = privacy.holdout_dcr
    hi = float(np.quantile(np.concatenate([syn, hold]), 0.995))
    if not hi > 0:
        hi = 1.0
    edges = np.linspace(0.0, hi, 41)
    baseline = (
        "real held-out rows" if privacy.baseline == "holdout" else "real rows (leave-one-out)"
    )
    for values, colour, label, fill in (
        (hold, REAL_COLOUR, baseline, True),
        (syn, SYNTHETIC_COLOUR, "synthetic rows", False),
    ):
        counts = np.histogram(values, edges)[0] / max(1, values.size)
        if fill:
            ax.stairs(counts, edges, fill=True, color=colour, alpha=0.35)
        ax.stairs(counts, edges, color=colour, linewidth=1.5, label=label)
        ax.axvline(float(np.median(values)), color=colour, linestyle="--", linewidth=1.0)
    ax.set_xlabel(
        "distance to the closest training row (dashed: medians; the largest 0.5% not drawn)",
        fontsize=8,
    )
    ax.set_ylabel("share of rows", fontsize=8)
    ax.legend(fontsize=7.5, frameon=False)
    fig.tight_layout()
    return _png(fig)


# ---------------------------------------------------------------------------------------
# evaluate
# ---------------------------------------------------------------------------------------


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
        ``real`` (:func:`fits.core.schema.describe_table`,
        :func:`~fits.core.schema.merge_descriptions`).
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

    Returns
    -------
    Report
    """
    from fits.evaluation import (
        column_fidelity,
        energy_distances,
        independent_resample,
        pair_fidelity,
    )
    from fits.evaluation.privacy import privacy_checks
    from fits.evaluation.utility import downstream_utility

    started = time.perf_counter()
    timings: dict[str, float] = {}
    notes: list[str] = []

    def step(name: str, t0: float) -> None:
        timings[name] = time.perf_counter() - t0
        if progress is not None:
            progress(f"{name}: {timings[name]:.1f} s")

    # -- inputs -------------------------------------------------------------------------
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
    real = real.reset_index(drop=True)
    synthetic = synthetic.reset_index(drop=True)
    columns = list(real.columns)
    missing = [c for c in columns if c not in synthetic.columns]
    if missing:
        raise ValueError(f"the synthetic table lacks column(s) {missing} of the real table")
    extra = [str(c) for c in synthetic.columns if c not in columns]
    if extra:
        notes.append(f"synthetic column(s) {extra} are not in the real table and were ignored")
    synthetic = synthetic[columns]
    kinds = dict(kinds or {})
    if set(kinds) >= set(columns):
        kinds = {c: kinds[c] for c in columns}
    else:
        kinds = _infer_kinds(real, kinds)
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
    targets = _as_list(target)
    for t in targets:
        if t not in columns:
            raise ValueError(f"target {t!r} is not a column of the real table; columns: {columns}")
    if len(set(targets)) != len(targets):
        raise ValueError(f"duplicate targets {targets}")
    tasks = _tasks_for(targets, task)
    if isinstance(clients, Mapping):
        client_frames = {str(k): v.reset_index(drop=True) for k, v in clients.items()}
    elif clients is not None:
        client_frames = {f"client {k + 1}": v.reset_index(drop=True) for k, v in enumerate(clients)}
    else:
        client_frames = {}
    for name, frame in [("train", train), ("test", test), *client_frames.items()]:
        if frame is None:
            continue
        lacking = [c for c in columns if c not in frame.columns]
        if lacking:
            raise ValueError(f"the {name} table lacks column(s) {lacking} of the real table")
        if len(frame) == 0:
            raise ValueError(f"the {name} table has no rows")
    if train is None and client_frames:
        train = pd.concat(list(client_frames.values()), ignore_index=True)
    if train is not None:
        train = train[columns].reset_index(drop=True)
    if test is not None:
        test = test[columns].reset_index(drop=True)
    covariates = [c for c in columns if c not in targets]
    if not covariates:
        raise ValueError("every column is a target: no covariates are left")

    # -- energy distances -----------------------------------------------------------------
    t0 = time.perf_counter()
    independent_source = train if train is not None else real
    seeds = np.random.SeedSequence(seed).spawn(3)  # independent resample, energy, privacy
    independent = independent_resample(
        independent_source, len(synthetic), seed=np.random.default_rng(seeds[0])
    )
    tables = {"synthetic": synthetic}
    if test is not None:
        tables["real held-out rows"] = test
    tables["independent columns"] = independent
    energy = energy_distances(
        real,
        tables,
        kinds,
        covariates,
        responses=targets,
        max_rows=max_rows,
        seed=np.random.default_rng(seeds[1]),
        n_jobs=n_jobs,
    )
    if not targets:
        energy = energy.rename(columns={"covariates": "all columns"})
    if max_rows is not None and max(len(real), *(len(t) for t in tables.values())) > max_rows:
        notes.append(
            f"energy distances use uniform subsamples of at most {max_rows:,} rows per table"
        )
    step("energy distances", t0)

    # -- fidelity -----------------------------------------------------------------------
    t0 = time.perf_counter()
    col_scores = column_fidelity(real, synthetic, kinds, columns)
    pair_scores = pair_fidelity(real, synthetic, kinds, columns=columns)
    pair_floor = (
        pair_fidelity(real, independent, kinds, columns=columns) if len(columns) > 1 else None
    )
    assoc = _associations(real, synthetic, kinds, columns)
    marginals = {c: _marginal(real[c], synthetic[c], kinds[c], c) for c in columns}
    step("column and pair fidelity", t0)

    # -- utility ------------------------------------------------------------------------
    utility_results: dict[str, UtilityResult] = {}
    if utility and targets:
        t0 = time.perf_counter()
        if client_frames:
            util_clients: dict[str, pd.DataFrame] | None = client_frames
        elif train is not None:
            util_clients = {"all training rows": train}
            notes.append("no clients given: the training rows act as one client in M2-M4")
        else:
            util_clients = None
            notes.append("no clients or training rows given: only M1 (synthetic only) is run")
        test_table = test if test is not None else real
        if test is None:
            notes.append(
                "no held-out rows given: utility test metrics are computed on the real table, "
                "which includes the training rows"
            )
        for t in targets:
            params = None
            if reference_params is not None:
                params = reference_params.get(t) if t in reference_params else None
                if params is None and set(reference_params) >= {"intercept", "coef"}:
                    params = reference_params if len(targets) == 1 else None
            utility_results[t] = downstream_utility(
                util_clients,
                synthetic,
                test_table,
                t,
                kinds,
                task=tasks[t],
                covariates=covariates,
                reference=params if params is not None else real,
                reference_label="the full real table",
                ratios=ratios,
                lambdas=lambdas,
                boosting=boosting,
                boosting_iterations=boosting_iterations,
                seed=seed,
            )
        step("downstream utility", t0)
    elif utility:
        notes.append("no target given: downstream utility was not evaluated")

    # -- privacy ------------------------------------------------------------------------
    privacy_result: PrivacyResult | None = None
    if privacy:
        t0 = time.perf_counter()
        if train is None:
            notes.append(
                "no training rows given: the privacy checks search the whole real table "
                "(leave-one-out baseline)"
            )
        privacy_result = privacy_checks(
            train if train is not None else real,
            synthetic,
            kinds,
            holdout=test if train is not None else None,
            columns=columns,
            max_rows=privacy_rows,
            seed=np.random.default_rng(seeds[2]),
        )
        notes.extend(f"privacy: {n}" for n in privacy_result.notes)
        step("privacy checks", t0)

    # -- assemble -----------------------------------------------------------------------
    headline_set = energy.columns[1] if targets else energy.columns[0]
    ed = energy[headline_set]
    gap_closed = None
    if "real held-out rows" in energy.index:
        lo, hi = float(ed["real held-out rows"]), float(ed["independent columns"])
        if hi > lo:
            gap_closed = (hi - float(ed["synthetic"])) / (hi - lo)
    col_table = col_scores.set_index("column")
    worst_col = col_table["score"].idxmin()
    pair_table = pair_scores.sort_values("score", kind="stable")
    data: dict[str, Any] = {
        "title": title or "fits fidelity report",
        "meta": {
            "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "fits_version": _fits_version(),
            "seed": seed,
            "rows": {
                "real": len(real),
                "synthetic": len(synthetic),
                "train": None if train is None else len(train),
                "test": None if test is None else len(test),
                "clients": {k: len(v) for k, v in client_frames.items()},
            },
            "n_columns": len(columns),
            "timings_s": {},
        },
        "kinds": kinds,
        "targets": targets,
        "covariates": covariates,
        "energy": {
            "headline_columns": headline_set,
            "headline": {k: float(v) for k, v in ed.items()},
            "gap_closed": gap_closed,
            "table": {
                row: {col: float(energy.loc[row, col]) for col in energy.columns}
                for row in energy.index
            },
            "exact": max_rows is None,
            "independent_source": "training rows" if train is not None else "real table",
        },
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
            "worst": [
                {"col_a": r.col_a, "col_b": r.col_b, "metric": r.metric, "score": float(r.score)}
                for r in pair_table.head(10).itertuples()
            ],
            "scores": [
                {"col_a": r.col_a, "col_b": r.col_b, "metric": r.metric, "score": float(r.score)}
                for r in pair_scores.itertuples()
            ],
        },
        "associations": assoc,
        "marginals": marginals,
        "utility": {t: _with_headline(u.to_dict()) for t, u in utility_results.items()},
        "privacy": privacy_result.to_dict() if privacy_result is not None else None,
        "settings": _settings_dict(settings),
        "evaluation_settings": {
            "seed": seed,
            "M3 ratios r": [float(r) for r in ratios],
            "M4 weights lambda": [float(lam) for lam in lambdas],
            "energy distance rows per table (None: all, exact)": max_rows,
            "privacy check rows": privacy_rows,
            "gradient boosting": boosting,
            "gradient boosting rounds": boosting_iterations,
        },
        "sources": dict(sources or {}),
        "notes": notes,
    }

    # -- figures ------------------------------------------------------------------------
    t0 = time.perf_counter()
    figures: dict[str, str] = {}
    scores = col_table["score"].to_dict()
    for i, image in enumerate(_marginal_figures(marginals, scores)):
        figures[f"marginals_{i}"] = image
    if len(columns) > 1:
        figures["associations"] = _heatmap_figure(assoc)
    for t in utility_results:
        figures[f"utility_{t}"] = _utility_figure(data["utility"][t])
    if privacy_result is not None:
        figures["privacy"] = _privacy_figure(privacy_result)
    step("figures", t0)
    timings["total"] = time.perf_counter() - started
    data["meta"]["timings_s"] = dict(timings)
    return Report(
        data=_jsonable(data),
        figures=figures,
        energy=energy,
        column_scores=col_scores,
        pair_scores=pair_scores,
        utility=utility_results,
        privacy=privacy_result,
    )


def _fits_version() -> str:
    try:
        from fits import __version__

        return str(__version__)
    except ImportError:  # pragma: no cover
        return "unknown"


# ---------------------------------------------------------------------------------------
# summary text
# ---------------------------------------------------------------------------------------


def _metric_name(task: str) -> tuple[str, str]:
    return ("mse", "test MSE") if task == "regression" else ("accuracy", "test accuracy")


def _utility_headline(u: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers for the utility summary: M1 vs pooled, and M4 vs M2 per client."""
    rows = pd.DataFrame(u["rows"])
    model = u["parametric_model"]
    key, label = _metric_name(u["task"])
    sub = rows[rows["model"] == model]
    out: dict[str, Any] = {"model": model, "metric": key, "metric_label": label}
    for mode in ("M1", "pooled"):
        value = sub.loc[sub["mode"] == mode, key]
        out[mode] = float(value.iloc[0]) if len(value) and value.notna().any() else None
    m2 = sub[sub["mode"] == "M2"].set_index("client")
    m4 = sub[sub["mode"] == "M4"]
    if len(m2) and len(m4):
        setting = m4["setting"].iloc[0]
        m4 = m4[m4["setting"] == setting].set_index("client")
        both = m2.index.intersection(m4.index)
        err2 = m2.loc[both, "param_error"].astype(float)
        err4 = m4.loc[both, "param_error"].astype(float)
        out["m4_setting"] = setting
        out["m4_better_param"] = int((err4 < err2).sum())
        out["n_clients"] = len(both)
    return out


def _with_headline(u: dict[str, Any]) -> dict[str, Any]:
    u["headline"] = _utility_headline(u)
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
        line += f"; the synthetic table {_gap_text(energy, html_out=False)}"
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
    for target, u in data["utility"].items():
        h = _utility_headline(u)
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
    p = data["privacy"]
    if p is not None:
        line = (
            f"Privacy: {fmt_percent(p['synthetic_copy_share'])} of synthetic rows copy a training "
            f"row (real baseline: {fmt_percent(p['holdout_copy_share'])}); median distance to "
            f"closest record ratio {fmt_number(p['median_ratio'])} -> "
        )
        line += "look closer" if p["flag"] else "no sign of copying"
        lines.append(line)
    for note in data["notes"]:
        lines.append(f"note: {note}")
    return lines


# ---------------------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------------------

_CSS = """
:root { --real: #3b6ea8; --syn: #e07b39; --ink: #1f2933; --muted: #5f6b7a; --line: #e3e7ec;
        --card: #f7f9fb; --good: #1e7b4f; --warn: #b35c00; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue",
       Arial, sans-serif; color: var(--ink); background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 60px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 40px 0 8px; padding-top: 12px; border-top: 1px solid var(--line); }
h3 { font-size: 16px; margin: 22px 0 6px; }
p.lead { color: var(--muted); margin: 0 0 18px; }
p.explain { color: var(--muted); max-width: 900px; margin: 4px 0 12px; font-size: 14px; }
.cards { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 14px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px;
        padding: 14px 18px; }
.card h3 { margin: 0 0 6px; font-size: 13px; text-transform: uppercase; letter-spacing: .05em;
           color: var(--muted); }
.big { font-size: 30px; font-weight: 650; line-height: 1.15; }
.big small { font-size: 14px; font-weight: 400; color: var(--muted); }
.card p { margin: 6px 0 0; font-size: 14px; }
.tag { display: inline-block; padding: 1px 9px; border-radius: 999px; font-size: 12.5px;
       font-weight: 600; color: #fff; background: var(--good); vertical-align: middle; }
.tag.warn { background: var(--warn); }
.scale { position: relative; height: 30px; margin: 12px 2px 0; }
.scale .axis { position: absolute; left: 0; right: 0; top: 9px; height: 4px;
               background: linear-gradient(90deg, #d4e6da, #efe2d2); border-radius: 2px; }
.scale .mark { position: absolute; top: 0; width: 4px; height: 22px; margin-left: -2px;
               border-radius: 2px; }
.scale .lab { position: absolute; top: 14px; font-size: 11px; color: var(--muted); }
.legend span { margin-right: 14px; font-size: 12.5px; color: var(--muted);
               white-space: nowrap; display: inline-block; }
.dot { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px;
       vertical-align: -1px; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 13.5px; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: left;
         vertical-align: top; }
th { background: #f2f4f7; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.num.left { text-align: left; }
tr.first td { border-top: 2px solid #d5dbe2; }
img { max-width: 100%; height: auto; display: block; margin: 8px 0; }
nav { margin: 18px 0 0; font-size: 14px; }
nav a { margin-right: 14px; color: var(--real); text-decoration: none; }
.notes { color: var(--muted); font-size: 13px; }
details { margin: 8px 0; }
summary { cursor: pointer; color: var(--real); }
footer { margin-top: 40px; color: var(--muted); font-size: 12.5px; }
@media (max-width: 800px) { .cards { grid-template-columns: 1fr; } }
"""


def _img(figures: Mapping[str, str], name: str, alt: str) -> str:
    return f'<img src="data:image/png;base64,{figures[name]}" alt="{_esc(alt)}">'


def _gap_text(energy: Mapping[str, Any], html_out: bool) -> str:
    """How far the synthetic table moved from "independent columns" towards real data."""
    gap = energy.get("gap_closed")
    if gap is None:
        return ""
    value = _span(gap, percent=True) if html_out else fmt_percent(gap)
    if gap >= 1.0:
        return (
            "is as close to the real table as the real held-out rows are (the floor is "
            "sampling noise and grows as the held-out set shrinks; rows copied from the "
            "training data also score this low: see the privacy checks)"
        )
    return (
        f"closes {value} of the gap from independent columns (no dependence) to the real "
        "held-out rows"
    )


def _energy_card(data: Mapping[str, Any]) -> str:
    e = data["energy"]
    head = e["headline"]
    syn = head["synthetic"]
    marks = [("synthetic", syn, SYNTHETIC_COLOUR)]
    if "real held-out rows" in head:
        marks.append(("real held-out rows", head["real held-out rows"], REAL_COLOUR))
    marks.append(("independent columns", head["independent columns"], "#7a7a7a"))
    top = max(v for _, v, _ in marks) * 1.08 or 1.0
    scale = ['<div class="scale"><div class="axis"></div>']
    legend = []
    for label, value, colour in marks:
        left = 100.0 * value / top
        scale.append(f'<div class="mark" style="left:{left:.2f}%;background:{colour}"></div>')
        legend.append(
            f'<span><i class="dot" style="background:{colour}"></i>{_esc(label)} '
            f"{_span(value)}</span>"
        )
    scale.append('<div class="lab" style="left:0">0</div></div>')
    gap = _gap_text(e, html_out=True)
    return (
        '<div class="card"><h3>Joint fidelity: energy distance</h3>'
        f'<div class="big">{_span(syn)} <small>on {_esc(e["headline_columns"])}; lower is '
        "better</small></div>"
        f'{"".join(scale)}<p class="legend">{"".join(legend)}</p>'
        + (f"<p>The synthetic table {gap}.</p>" if gap else "")
        + "</div>"
    )


def _fidelity_card(data: Mapping[str, Any]) -> str:
    c = data["columns"]
    p = data["pairs"]
    text = (
        '<div class="card"><h3>Columns and pairs</h3>'
        f'<div class="big">{_span(c["mean_score"])} <small>mean column score (1 = identical '
        "marginals)</small></div>"
        f"<p>Worst column: {_esc(c['worst']['column'])} {_span(c['worst']['score'])}.</p>"
    )
    if p["mean_score"] is not None:
        text += f"<p>Mean pair score {_span(p['mean_score'])}"
        if p["independent_mean_score"] is not None:
            text += f" (independent columns: {_span(p['independent_mean_score'])})"
        if p["worst"]:
            w = p["worst"][0]
            text += f"; worst pair: {_esc(w['col_a'])} × {_esc(w['col_b'])} {_span(w['score'])}"
        text += ".</p>"
    return text + "</div>"


def _utility_card(data: Mapping[str, Any]) -> str:
    if not data["utility"]:
        return (
            '<div class="card"><h3>Downstream utility</h3><p>Not evaluated: no target column '
            "was given.</p></div>"
        )
    parts = ['<div class="card"><h3>Downstream utility</h3>']
    for i, (target, u) in enumerate(data["utility"].items()):
        h = _utility_headline(u)
        pooled = ""
        if h.get("pooled") is not None:
            pooled = f"; pooled real data: {_span(h['pooled'])}"
        if i == 0:
            parts.append(
                f'<div class="big">{_span(h["M1"])} <small>{_esc(h["metric_label"])} of '
                f"{_esc(h['model'])} for {_esc(target)}, trained on synthetic data only "
                f"(M1){pooled}</small></div>"
            )
            line = "<p>"
        else:
            line = (
                f"<p>{_esc(target)}, {_esc(h['model'])}: {_esc(h['metric_label'])} "
                f"{_span(h['M1'])} (M1){pooled}. "
            )
        if h.get("n_clients"):
            line += (
                "Local rows plus weighted synthetic rows "
                f"(M4, {_esc(h['m4_setting'].replace('lambda', 'λ'))}) estimate "
                f"the parameters better than local rows alone for {_span(h['m4_better_param'])} "
                f"of {_span(h['n_clients'])} clients."
            )
        parts.append(line + "</p>")
    return "".join(parts) + "</div>"


def _privacy_card(data: Mapping[str, Any]) -> str:
    p = data["privacy"]
    if p is None:
        return '<div class="card"><h3>Privacy checks</h3><p>Not run.</p></div>'
    tag = (
        '<span class="tag warn">look closer</span>'
        if p["flag"]
        else '<span class="tag">no sign of copying</span>'
    )
    base = "real held-out rows" if p["baseline"] == "holdout" else "real rows (leave-one-out)"
    return (
        f'<div class="card"><h3>Privacy checks</h3><div class="big">'
        f"{_span(p['synthetic_copy_share'], percent=True)} <small>of synthetic rows copy a "
        f"training row</small> {tag}</div>"
        f"<p>{_esc(base)}: {_span(p['holdout_copy_share'], percent=True)}. Median distance to "
        f"the closest training row: synthetic {_span(p['dcr_quantiles']['synthetic']['q50'])}, "
        f"{_esc(base)} {_span(p['dcr_quantiles']['holdout']['q50'])} (ratio "
        f"{_span(p['median_ratio'])}).</p></div>"
    )


def _energy_section(data: Mapping[str, Any]) -> str:
    e = data["energy"]
    table = e["table"]
    sets = list(next(iter(table.values())))
    head = "".join(f"<th>{_esc(s)}</th>" for s in sets)
    body = []
    names = {
        "synthetic": "synthetic table",
        "real held-out rows": "real held-out rows (floor)",
        "independent columns": f"independent columns, resampled from the {e['independent_source']}",
    }
    for row, values in table.items():
        cells = "".join(_cell(values[s]) for s in sets)
        body.append(f"<tr><td>{_esc(names.get(row, row))}</td>{cells}</tr>")
    rows = data["meta"]["rows"]
    how = "exactly, on all rows" if e["exact"] else "on uniform subsamples"
    return (
        '<h2 id="energy">Energy distance</h2>'
        '<p class="explain">The energy distance D<sub>E</sub> (paper sec. 6.2.3) compares whole '
        f"rows of each table with the {_span(rows['real'])} real rows: 0 means the same "
        "distribution, larger is further apart. Continuous and ordinal columns are "
        "standardized by the real table's mean and sd, nominal columns one-hot with each block "
        "divided by √2. Two floors frame the synthetic value: real held-out rows (what new "
        "real data scores, a sampling-noise floor) and every column resampled independently "
        "(keeps each marginal, destroys all dependence). A good synthesizer sits near the "
        f"first and far below the second. Computed {how}.</p>"
        f"<table><tr><th>table</th>{head}</tr>{''.join(body)}</table>"
    )


def _columns_section(data: Mapping[str, Any], figures: Mapping[str, str]) -> str:
    c = data["columns"]
    rows = []
    for s in c["scores"]:
        rows.append(
            f"<tr><td>{_esc(s['column'])}</td><td>{_esc(s['kind'])}</td>"
            f"<td>{'1 − KS' if s['metric'] == 'KS' else '1 − TV'}</td>{_cell(s['score'])}</tr>"
        )
    images = "".join(
        _img(figures, name, "marginal distributions, real vs synthetic")
        for name in sorted(k for k in figures if k.startswith("marginals_"))
    )
    many = [col for col, m in data["marginals"].items() if "other" in m]
    extra = ""
    if many:
        extra = (
            f" Nominal columns with more than {TOP_LEVELS} levels ({_esc(', '.join(many))}) show "
            f"their {TOP_LEVELS} most frequent real levels and pool the rest as “other”."
        )
    return (
        '<h2 id="columns">Column by column</h2>'
        '<p class="explain">Each column\'s marginal distribution, real (blue) against synthetic '
        "(orange). The score in brackets is 1 − Kolmogorov-Smirnov statistic for continuous "
        "columns and 1 − total variation distance for discrete ones: 1 means identical "
        "marginals. Histograms show shares of rows per bin over the central 99% of values "
        "(the most extreme 0.5% on each side are not drawn); a log scale is used when one bin "
        "holds more than half of the rows."
        f"{extra}</p>"
        f'<div class="legend"><span><i class="dot" style="background:{REAL_COLOUR}"></i>'
        f'real</span><span><i class="dot" style="background:{SYNTHETIC_COLOUR}"></i>'
        f"synthetic</span></div>{images}"
        "<details><summary>Column scores as a table</summary><table><tr><th>column</th>"
        f"<th>kind</th><th>measure</th><th>score</th></tr>{''.join(rows)}</table></details>"
    )


def _pairs_section(data: Mapping[str, Any], figures: Mapping[str, str]) -> str:
    if "associations" not in figures:
        return ""
    p = data["pairs"]
    rows = [
        f"<tr><td>{_esc(w['col_a'])} × {_esc(w['col_b'])}</td><td>{_esc(w['metric'])}</td>"
        f"{_cell(w['score'])}</tr>"
        for w in p["worst"]
    ]
    floor = ""
    if p["independent_mean_score"] is not None:
        floor = (
            f" For comparison, the independent-columns resample scores "
            f"{_span(p['independent_mean_score'])} on average."
        )
    return (
        '<h2 id="pairs">Pairs of columns</h2>'
        '<p class="explain">Association matrices of the real and the synthetic table, and '
        "their absolute difference (right; values of 0.05 and more are printed). Two numeric "
        "(continuous or ordinal) columns: Pearson correlation, from −1 to 1. Any pair with a "
        "nominal column: Cramér's V, from 0 to 1, with continuous columns cut into 10 bins at "
        "the real quantiles.</p>"
        f"{_img(figures, 'associations', 'association heatmaps, real and synthetic')}"
        f'<p class="explain">Pair scores (1 = identical pairwise structure): 1 − |Δ correlation| '
        f"/ 2 for two continuous columns, 1 − total variation between the contingency tables "
        f"otherwise. Mean pair score: {_span(p['mean_score'])}.{floor} The ten lowest:</p>"
        "<table><tr><th>pair</th><th>measure</th><th>score</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _short_label(rec: Mapping[str, Any]) -> str:
    """``M1 synthetic only``, ``M2 local only``, ``M3 (r=1)``, ``M4 (λ=0.1)``, ``pooled real``."""
    mode = rec["mode"]
    if mode == "M1":
        return "M1 synthetic only"
    if mode == "M2":
        return "M2 local only"
    if mode == "pooled":
        return "pooled real data"
    setting = str(rec.get("setting") or "").replace("lambda", "λ")
    return f"{mode} ({setting})" if setting else mode


def _utility_section(data: Mapping[str, Any], figures: Mapping[str, str]) -> str:
    if not data["utility"]:
        return ""
    parts = [
        '<h2 id="utility">Downstream utility</h2>',
        '<p class="explain">The data usage modes of the paper (app. D.1), per client: '
        "<b>M1</b> fits the model on the synthetic table only; <b>M2</b> on the client's own "
        "rows only; <b>M3</b> on its rows plus r × (its row count) synthetic rows drawn at "
        "random, all at weight 1; <b>M4</b> on its rows plus every synthetic row, the "
        "synthetic rows' losses weighted by λ. “Pooled real data” fits all clients' rows "
        "together, which federation does not allow: the yardstick. The parameter error is "
        "the Euclidean norm of the difference between the fitted and the reference "
        "coefficient vectors, intercept included (numeric covariates per standard deviation "
        "of the pooled real rows, nominal ones as 0/1 indicators); lower is better. Test "
        "metrics use the held-out real rows. Best value per client in bold.</p>",
    ]
    for target, u in data["utility"].items():
        rows = pd.DataFrame(u["rows"])
        regression = u["task"] == "regression"
        metrics = ["mse", "r2"] if regression else ["accuracy", "roc_auc"]
        names = {"mse": "MSE", "r2": "R²", "accuracy": "accuracy", "roc_auc": "ROC AUC"}
        better_low = {"mse": True, "r2": False, "accuracy": False, "roc_auc": False}
        parametric = u["parametric_model"]
        has_boost = (rows["model"] == "gradient boosting").any()
        parts.append(
            f"<h3>Target {_esc(target)}: {_esc(parametric)}"
            f"{' and gradient boosting' if has_boost else ''}</h3>"
        )
        positive = ""
        if u["task"] == "classification":
            positive = f" Positive class: {_esc(u['positive_class'])}."
        parts.append(
            f'<p class="explain">Reference parameter: {_esc(u["reference_source"])}.'
            f" Test rows: {_span(u['test_rows'])}.{positive}</p>"
        )
        for note in u.get("notes", []):
            parts.append(f'<p class="explain">Note: {_esc(note)}.</p>')
        if f"utility_{target}" in figures:
            parts.append(_img(figures, f"utility_{target}", f"utility per client, {target}"))
        header = (
            "<tr><th>client</th><th>local rows</th><th>mode</th><th>training rows</th>"
            "<th>parameter error</th>"
            + "".join(f"<th>{names[m]}</th>" for m in metrics)
            + ("".join(f"<th>{names[m]} (boosting)</th>" for m in metrics) if has_boost else "")
            + "<th>note</th></tr>"
        )
        body = []
        param = rows[rows["model"] == parametric]
        boost = rows[rows["model"] == "gradient boosting"]
        keys = ["client", "mode", "setting"]
        for client, group in param.groupby("client", sort=False):
            best: dict[str, float] = {}
            if client != "all clients":
                for col in ["param_error", *metrics]:
                    values = group[col].astype(float)
                    if values.notna().any():
                        best[col] = values.min() if better_low.get(col, True) else values.max()
                bgroup = boost[boost["client"] == client]
                for col in metrics:
                    values = bgroup[col].astype(float)
                    if values.notna().any():
                        best["b_" + col] = (
                            values.min() if better_low.get(col, True) else values.max()
                        )
            records = group.to_dict(orient="records")
            for i, rec in enumerate(records):
                match = boost
                for k in keys:
                    match = match[match[k] == rec[k]]
                brec = match.iloc[0].to_dict() if len(match) else {}
                cells = []
                if i == 0:
                    span = f' rowspan="{len(records)}"' if len(records) > 1 else ""
                    local = rec["n_local"] if client != "all clients" else None
                    cells.append(f"<td{span}>{_esc(client)}</td>")
                    cells.append(
                        _cell(local).replace("<td", f"<td{span}", 1)
                        if local
                        else f"<td{span}></td>"
                    )
                cells += [
                    f"<td>{_esc(_short_label(rec))}</td>",
                    _cell(rec["n_train"]),
                    _cell(rec["param_error"], bold=best.get("param_error") == rec["param_error"]),
                ]
                for m in metrics:
                    cells.append(_cell(rec.get(m), bold=best.get(m) == rec.get(m)))
                if has_boost:
                    for m in metrics:
                        cells.append(_cell(brec.get(m), bold=best.get("b_" + m) == brec.get(m)))
                note = " ".join(n for n in (rec.get("note"), brec.get("note")) if n)
                cells.append(f"<td>{_esc(note)}</td>")
                first = ' class="first"' if i == 0 else ""
                body.append(f"<tr{first}>{''.join(cells)}</tr>")
        parts.append(f"<table>{header}{''.join(body)}</table>")
    return "".join(parts)


def _privacy_section(data: Mapping[str, Any], figures: Mapping[str, str]) -> str:
    p = data["privacy"]
    if p is None:
        return ""
    base = "real held-out rows" if p["baseline"] == "holdout" else "real rows (leave-one-out)"
    q = p["dcr_quantiles"]
    qcols = list(q["synthetic"])
    head = "".join(f"<th>{int(c[1:])}% quantile</th>" for c in qcols)
    rows = "".join(
        f"<tr><td>{_esc(name)}</td>{''.join(_cell(q[key][c]) for c in qcols)}</tr>"
        for key, name in (("synthetic", "synthetic rows"), ("holdout", base))
    )
    loo = ""
    if p["baseline"] != "holdout":
        loo = (
            " No held-out rows were given, so the baseline is each real row's distance to the "
            "other training rows (leave-one-out)."
        )
    return (
        '<h2 id="privacy">Privacy checks</h2>'
        '<p class="explain">Distance to closest record (DCR): for each row, the Euclidean '
        "distance to the nearest of the "
        f"{_span(p['n_train'])} training rows, on the energy distance's encoding (standardized "
        "numbers, one-hot categories at distance 1). If the synthesizer had memorized its "
        f"input, synthetic rows would sit much closer to training rows than {_esc(base)} do."
        f"{loo} Exact copies are rows equal to a training row in every column; in tables of "
        "mostly discrete columns real rows repeat too, so compare with the baseline. These "
        "checks detect copying; they are not a formal privacy guarantee.</p>"
        f"{_img(figures, 'privacy', 'distance to closest record, synthetic vs real')}"
        f"<table><tr><th>rows</th>{head}</tr>{rows}</table>"
        "<table><tr><th>check</th><th>value</th><th>what to expect</th></tr>"
        f"<tr><td>synthetic rows in the distance check</td>{_cell(p['n_synthetic_checked'])}"
        f"<td>of {_span(p['n_synthetic_rows'])}</td></tr>"
        f"<tr><td>{_esc(base)} in the distance check</td>{_cell(p['n_holdout_checked'])}"
        f"<td>of {_span(p['n_holdout_rows'])}</td></tr>"
        f"<tr><td>synthetic rows that copy a training row</td>"
        f"{_cell(p['synthetic_copy_share'], percent=True)}<td>about the baseline's share"
        f" ({_span(p['synthetic_copies'])} rows)</td></tr>"
        f"<tr><td>{_esc(base)} equal to a training row</td>"
        f"{_cell(p['holdout_copy_share'], percent=True)}<td>the baseline "
        f"({_span(p['holdout_copies'])} rows)</td></tr>"
        f"<tr><td>median DCR, synthetic / {_esc(base)}</td>{_cell(p['median_ratio'])}"
        "<td>about 1 or more</td></tr>"
        f"<tr><td>synthetic rows closer than the baseline's 5% DCR quantile</td>"
        f"{_cell(p['share_below_holdout_p5'], percent=True)}<td>about 5%</td></tr>"
        "</table>"
    )


def _settings_section(data: Mapping[str, Any]) -> str:
    def rows_of(mapping: Mapping[str, Any]) -> str:
        out = []
        for key, value in mapping.items():
            if isinstance(value, bool) or value is None:
                cell = f"<td>{_esc(fmt_number(value))}</td>"
            elif isinstance(value, (int, float)):
                cell = _cell(value).replace('class="num"', 'class="num left"', 1)
            else:
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                if len(text) > 400:
                    text = text[:400] + " …"
                cell = f"<td><code>{_esc(text)}</code></td>"
            out.append(f"<tr><td>{_esc(key)}</td>{cell}</tr>")
        return "".join(out)

    meta = data["meta"]
    rows = meta["rows"]
    counts = {
        "real rows": rows["real"],
        "synthetic rows": rows["synthetic"],
        "training rows": rows["train"],
        "held-out rows": rows["test"],
    }
    counts.update({f"rows of {k}": v for k, v in rows["clients"].items()})
    parts = ['<h2 id="settings">Settings</h2>']
    if data["settings"]:
        parts.append("<h3>How the synthetic data was made</h3>")
        parts.append(f"<table>{rows_of(data['settings'])}</table>")
    else:
        parts.append(
            '<p class="explain">No synthesizer settings were given (pass <code>settings='
            "</code> to <code>fits.evaluate</code> or <code>--settings</code> to <code>fits "
            "report</code>).</p>"
        )
    if data["sources"]:
        parts.append(f"<h3>Inputs</h3><table>{rows_of(data['sources'])}</table>")
    parts.append(f"<h3>Tables</h3><table>{rows_of(counts)}</table>")
    kinds = ", ".join(f"{c} ({k})" for c, k in data["kinds"].items())
    parts.append(f'<h3>Column kinds</h3><p class="explain">{_esc(kinds)}</p>')
    parts.append(f"<h3>Evaluation</h3><table>{rows_of(data['evaluation_settings'])}</table>")
    return "".join(parts)


def _render_html(data: Mapping[str, Any], figures: Mapping[str, str]) -> str:
    meta = data["meta"]
    rows = meta["rows"]
    nav = [("energy", "Energy distance"), ("columns", "Columns")]
    if "associations" in figures:
        nav.append(("pairs", "Pairs"))
    if data["utility"]:
        nav.append(("utility", "Utility"))
    if data["privacy"] is not None:
        nav.append(("privacy", "Privacy"))
    nav.append(("settings", "Settings"))
    notes = ""
    if data["notes"]:
        notes = '<ul class="notes">' + "".join(f"<li>{_esc(n)}</li>" for n in data["notes"])
        notes += "</ul>"
    timings = meta["timings_s"]
    timing_text = ", ".join(f"{_esc(k)} {_span(v)} s" for k, v in timings.items() if k != "total")
    body = [
        f"<h1>{_esc(data['title'])}</h1>",
        f'<p class="lead">{_span(rows["synthetic"])} synthetic rows compared with '
        f"{_span(rows['real'])} real rows, {_span(meta['n_columns'])} columns"
        + (f"; target {_esc(', '.join(data['targets']))}" if data["targets"] else "")
        + ".</p>",
        '<div class="cards">',
        _energy_card(data),
        _fidelity_card(data),
        _utility_card(data),
        _privacy_card(data),
        "</div>",
        notes,
        "<nav>" + "".join(f'<a href="#{a}">{_esc(t)}</a>' for a, t in nav) + "</nav>",
        _energy_section(data),
        _columns_section(data, figures),
        _pairs_section(data, figures),
        _utility_section(data, figures),
        _privacy_section(data, figures),
        _settings_section(data),
        f"<footer>Generated by fits {_esc(meta['fits_version'])} on {_esc(meta['generated'])} "
        f"in {_span(timings.get('total', 0.0))} s ({timing_text}). Seed {_span(meta['seed'])}."
        "</footer>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(data['title'])}</title><style>{_CSS}</style></head>"
        f"<body><main>{''.join(body)}</main></body></html>\n"
    )
