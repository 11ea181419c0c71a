"""The report's figures: matplotlib on an Agg canvas (never pyplot), as base64 PNG.

Each function takes the report's JSON-ready numbers (or a result object) and returns
one PNG image, base64-encoded, that the page embeds.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fits.report.render import REAL_COLOUR, SYNTHETIC_COLOUR, fmt_number

if TYPE_CHECKING:
    from fits.evaluation.privacy import PrivacyResult

__all__ = ["heatmap_figure", "marginal_figures", "privacy_figure", "utility_figure"]


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


def marginal_figures(marginals: Mapping[str, dict], scores: Mapping[str, float]) -> list[str]:
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
            name = col if len(col) <= 40 else col[:39] + "…"  # the table shows it whole
            title = name if score is None else f"{name}  ({fmt_number(score)})"
            ax.set_title(title, fontsize=8.5, loc="left")
        fig.tight_layout()
        images.append(_png(fig))
    return images


def heatmap_figure(assoc: Mapping[str, Any]) -> str:
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


def utility_figure(result: Mapping[str, Any]) -> str:
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
        direct = sub[sub["mode"] == "direct"]
        for i, (setting, value) in enumerate(zip(direct["setting"], direct[col], strict=True)):
            if np.isfinite(float(value)):
                ax.axhline(float(value), linestyle="-.", color=("#1f618d", "#7d3c98")[i % 2],
                           linewidth=1.1, label=f"direct: {setting}")  # fmt: skip
        ax.set_xticks(x, [f"{c}" for c in clients], rotation=45, ha="right", fontsize=6.5)
        values = sub[col].to_numpy(dtype=float)
        if col == "param_error" and np.isfinite(values).any() and np.nanmin(values) > 0:
            ax.set_yscale("log")  # (all missing on a tiny table: no nanmin warning)
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


def privacy_figure(privacy: PrivacyResult) -> str:
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
