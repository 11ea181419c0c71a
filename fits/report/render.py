"""The report's HTML page: Jinja2 templates with autoescaping, fed by small builders.

The page (``templates/page.html.j2``) is four summary cards, a navigation bar and
one section per part of the report. Each card and each section is one template under
``templates/`` and one builder here that turns the report's JSON-ready data into what
the template shows (a :class:`Part`). Every text that comes from the data (column
names, levels, targets, settings, file names) is escaped by Jinja2's autoescaping;
numbers reach the page only through :func:`fmt_number` and :func:`fmt_percent`.

Adding a section
----------------
Write ``templates/<name>.html.j2`` (it may ``{% import "macros.html.j2" as m %}``
for numbers, cells and figures) and a builder ``def name_section(data, figures) ->
Part | None`` (None: the section is left out, and so is its link), then add the
builder to :data:`SECTIONS` where the section belongs on the page.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CARDS",
    "REAL_COLOUR",
    "SECTIONS",
    "SYNTHETIC_COLOUR",
    "TOP_LEVELS",
    "Part",
    "fmt_number",
    "fmt_percent",
    "gap_text",
    "render_html",
    "utility_headline",
]

#: Colours of the real and the synthetic data in every figure.
REAL_COLOUR = "#3b6ea8"
SYNTHETIC_COLOUR = "#e07b39"
#: Most levels shown in a bar chart of a nominal column (the rest are pooled).
TOP_LEVELS = 20


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


# ---------------------------------------------------------------------------------------
# headlines shared by the page and the plain-text summary
# ---------------------------------------------------------------------------------------


def gap_text(energy: Mapping[str, Any]) -> tuple[str, str]:
    """How far the synthetic table moved from "independent columns" towards real data.

    Returns
    -------
    tuple of str
        The sentence's text before and after the share of the gap closed (the share
        itself is ``energy["gap_closed"]``, formatted by the caller); ``("", "")``
        without held-out rows; ``(sentence, "")`` when the gap is closed entirely.
    """
    gap = energy.get("gap_closed")
    if gap is None:
        return "", ""
    if gap >= 1.0:
        return (
            "is as close to the real table as the real held-out rows are (the floor is "
            "sampling noise and grows as the held-out set shrinks; rows copied from the "
            "training data also score this low: see the privacy checks)",
            "",
        )
    return "closes ", (
        " of the gap from independent columns (no dependence) to the real held-out rows"
    )


def _metric_name(task: str) -> tuple[str, str]:
    return ("mse", "test MSE") if task == "regression" else ("accuracy", "test accuracy")


def utility_headline(u: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers for the utility summary: M1 vs pooled, and M4 vs M2 per client.

    Parameters
    ----------
    u : mapping
        One target's utility result as :meth:`UtilityResult.to_dict` writes it.
    """
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


def _baseline_name(privacy: Mapping[str, Any]) -> str:
    if privacy["baseline"] == "holdout":
        return "real held-out rows"
    return "real rows (leave-one-out)"


# ---------------------------------------------------------------------------------------
# parts of the page
# ---------------------------------------------------------------------------------------

Data = Mapping[str, Any]
Figures = Mapping[str, str]


@dataclass(frozen=True)
class Part:
    """One card or section of the page: its template and what the template shows.

    Attributes
    ----------
    template : str
        File name under ``fits/report/templates``.
    context : dict
        The template's variables (``data`` and ``figures`` are always there too).
    anchor, title : str, optional
        A section's ``id`` and its entry in the navigation bar.
    """

    template: str
    context: dict[str, Any] = field(default_factory=dict)
    anchor: str | None = None
    title: str | None = None


def energy_card(data: Data, figures: Figures) -> Part:
    """The energy distance of the synthetic table on a scale with its two floors."""
    e = data["energy"]
    head = e["headline"]
    marks = [("synthetic", head["synthetic"], SYNTHETIC_COLOUR)]
    if "real held-out rows" in head:
        marks.append(("real held-out rows", head["real held-out rows"], REAL_COLOUR))
    marks.append(("independent columns", head["independent columns"], "#7a7a7a"))
    top = max(v for _, v, _ in marks) * 1.08 or 1.0
    before, after = gap_text(e)
    return Part(
        "energy_card.html.j2",
        {
            "marks": [
                {"label": label, "value": v, "colour": colour, "left": f"{100.0 * v / top:.2f}"}
                for label, v, colour in marks
            ],
            "gap_before": before,
            "gap_after": after,
        },
    )


def fidelity_card(data: Data, figures: Figures) -> Part:
    """Mean column and pair scores, the worst column and pair."""
    return Part("fidelity_card.html.j2")


def utility_card(data: Data, figures: Figures) -> Part:
    """M1 against pooled real data, and how often M4 beats local-only, per target."""
    heads = [(target, utility_headline(u)) for target, u in data["utility"].items()]
    return Part("utility_card.html.j2", {"heads": heads})


def privacy_card(data: Data, figures: Figures) -> Part:
    """Copies of training rows and the distance to the closest record."""
    p = data["privacy"]
    return Part("privacy_card.html.j2", {"base": _baseline_name(p) if p is not None else ""})


def inference_card(data: Data, figures: Figures) -> Part | None:
    """The inference check's one number: the mean confidence-interval overlap."""
    inf = data.get("inference")
    if not inf:
        return None
    inside = sum(bool(c["inside"]) for c in inf["coefficients"])
    return Part("inference_card.html.j2", {"inf": inf, "inside": inside})


def inference_section(data: Data, figures: Figures) -> Part | None:
    """Per coefficient: FedLSA across the sites against OLS on the synthetic table."""
    inf = data.get("inference")
    if not inf:
        return None
    return Part("inference.html.j2", {"inf": inf}, "inference", "Inference")


def energy_section(data: Data, figures: Figures) -> Part:
    """Every energy distance: the synthetic table and its floors, per column set."""
    e = data["energy"]
    names = {
        "synthetic": "synthetic table",
        "real held-out rows": "real held-out rows (floor)",
        "independent columns": f"independent columns, resampled from the {e['independent_source']}",
    }
    table = e["table"]
    sets = list(next(iter(table.values())))
    rows = [(names.get(row, row), [values[s] for s in sets]) for row, values in table.items()]
    return Part("energy.html.j2", {"sets": sets, "rows": rows}, "energy", "Energy distance")


def columns_section(data: Data, figures: Figures) -> Part:
    """Marginal overlays and per-column scores."""
    return Part(
        "columns.html.j2",
        {
            "images": sorted(k for k in figures if k.startswith("marginals_")),
            "pooled": [col for col, m in data["marginals"].items() if "other" in m],
            "top_levels": TOP_LEVELS,
        },
        "columns",
        "Columns",
    )


def pairs_section(data: Data, figures: Figures) -> Part | None:
    """Association heatmaps and the lowest pair scores (two or more columns)."""
    if "associations" not in figures:
        return None
    return Part("pairs.html.j2", {}, "pairs", "Pairs")


def short_label(rec: Mapping[str, Any]) -> str:
    """``M1 synthetic only``, ``M2 local only``, ``M3 (r=1)``, ``M4 (λ=0.1)``, ``pooled real``."""
    mode = rec["mode"]
    if mode == "M1":
        return "M1 synthetic only"
    if mode == "M2":
        return "M2 local only"
    if mode == "pooled":
        return "pooled real data"
    if mode == "direct":
        return f"fit directly across sites ({rec.get('setting')})"
    setting = str(rec.get("setting") or "").replace("lambda", "λ")
    return f"{mode} ({setting})" if setting else mode


_METRIC_NAMES = {"mse": "MSE", "r2": "R²", "accuracy": "accuracy", "roc_auc": "ROC AUC"}
_LOWER_IS_BETTER = {"mse": True, "r2": False, "accuracy": False, "roc_auc": False}


def _cell(value: Any, bold: bool = False, rowspan: int | None = None) -> dict[str, Any]:
    return {"text": fmt_number(value), "num": True, "bold": bold, "rowspan": rowspan}


def _text_cell(text: Any, rowspan: int | None = None) -> dict[str, Any]:
    return {"text": "" if text is None else str(text), "num": False, "bold": False,
            "rowspan": rowspan}  # fmt: skip


def _best(values: pd.Series, col: str) -> float | None:
    values = values.astype(float)
    if not values.notna().any():
        return None
    return values.min() if _LOWER_IS_BETTER.get(col, True) else values.max()


def _utility_rows(u: Mapping[str, Any], metrics: list[str], has_boost: bool) -> list[dict]:
    """The per-client table of one target: one row per mode, the best value in bold."""
    rows = pd.DataFrame(u["rows"])
    param = rows[rows["model"] == u["parametric_model"]]
    boost = rows[rows["model"] == "gradient boosting"]
    out = []
    for client, group in param.groupby("client", sort=False):
        best: dict[str, Any] = {}
        if client != "all clients":
            for col in ["param_error", *metrics]:
                best[col] = _best(group[col], col)
            bgroup = boost[boost["client"] == client]
            for col in metrics:
                best["b_" + col] = _best(bgroup[col], col)
        records = group.to_dict(orient="records")
        for i, rec in enumerate(records):
            match = boost
            for k in ("client", "mode", "setting"):
                match = match[match[k] == rec[k]]
            brec = match.iloc[0].to_dict() if len(match) else {}
            cells = []
            if i == 0:
                span = len(records) if len(records) > 1 else None
                local = rec["n_local"] if client != "all clients" else None
                cells.append(_text_cell(client, span))
                cells.append(_cell(local, rowspan=span) if local else _text_cell("", span))
            cells += [
                _text_cell(short_label(rec)),
                _cell(rec["n_train"]),
                _cell(rec["param_error"], bold=best.get("param_error") == rec["param_error"]),
            ]
            cells += [_cell(rec.get(m), bold=best.get(m) == rec.get(m)) for m in metrics]
            if has_boost:
                cells += [
                    _cell(brec.get(m), bold=best.get("b_" + m) == brec.get(m)) for m in metrics
                ]
            cells.append(_text_cell(" ".join(n for n in (rec.get("note"), brec.get("note")) if n)))
            out.append({"first": i == 0, "cells": cells})
    return out


def utility_section(data: Data, figures: Figures) -> Part | None:
    """Per target: the utility figure and the per-client table of modes M1-M4."""
    if not data["utility"]:
        return None
    targets = []
    for target, u in data["utility"].items():
        metrics = ["mse", "r2"] if u["task"] == "regression" else ["accuracy", "roc_auc"]
        has_boost = any(r["model"] == "gradient boosting" for r in u["rows"])
        figure = f"utility_{target}"
        targets.append(
            {
                "target": target,
                "u": u,
                "boosting": data.get("boosting", {}).get(target),
                "has_boost": has_boost,
                "figure": figure if figure in figures else None,
                "metric_names": [_METRIC_NAMES[m] for m in metrics],
                "rows": _utility_rows(u, metrics, has_boost),
            }
        )
    return Part("utility.html.j2", {"targets": targets}, "utility", "Utility")


def privacy_section(data: Data, figures: Figures) -> Part | None:
    """Distances to the closest record and copies, against the real baseline."""
    p = data["privacy"]
    if p is None:
        return None
    q = p["dcr_quantiles"]
    qcols = list(q["synthetic"])
    base = _baseline_name(p)
    return Part(
        "privacy.html.j2",
        {
            "base": base,
            "quantiles": [int(c[1:]) for c in qcols],
            "quantile_rows": [
                (name, [q[key][c] for c in qcols])
                for key, name in (("synthetic", "synthetic rows"), ("holdout", base))
            ],
        },
        "privacy",
        "Privacy",
    )


def rules_section(data: Data, figures: Figures) -> Part | None:
    """The share of synthetic rows keeping each exact rule of the real data."""
    rules = data.get("rules")
    if not rules:
        return None
    return Part("rules.html.j2", {"rules": rules}, "rules", "Rules kept")


def near_linear_section(data: Data, figures: Figures) -> Part | None:
    """The residual spread of each near-linear pair about its line, real and synthetic."""
    near = data.get("near_linear")
    if not near:
        return None
    return Part("near_linear.html.j2", {"near_linear": near}, "near-linear", "Near-linear columns")


def _setting_rows(mapping: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Key-value rows: numbers formatted, other values as (shortened) JSON."""
    out = []
    for key, value in mapping.items():
        if isinstance(value, bool) or value is None:
            out.append({"key": key, "style": "text", "text": fmt_number(value)})
        elif isinstance(value, (int, float)):
            out.append({"key": key, "style": "number", "text": fmt_number(value)})
        else:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if len(text) > 400:
                text = text[:400] + " …"
            out.append({"key": key, "style": "code", "text": text})
    return out


def settings_section(data: Data, figures: Figures) -> Part:
    """How the data was made, the inputs, the row counts, the kinds, the evaluation."""
    rows = data["meta"]["rows"]
    counts = {
        "real rows": rows["real"],
        "synthetic rows": rows["synthetic"],
        "training rows": rows["train"],
        "held-out rows": rows["test"],
    }
    counts.update({f"rows of {k}": v for k, v in rows["clients"].items()})
    return Part(
        "settings.html.j2",
        {
            "settings": _setting_rows(data["settings"]),
            "sources": _setting_rows(data["sources"]),
            "counts": _setting_rows(counts),
            "kinds": ", ".join(f"{c} ({k})" for c, k in data["kinds"].items()),
            "evaluation": _setting_rows(data["evaluation_settings"]),
        },
        "settings",
        "Settings",
    )


Builder = Callable[[Data, Figures], "Part | None"]
#: The summary cards, in page order.
CARDS: tuple[Builder, ...] = (
    energy_card,
    fidelity_card,
    utility_card,
    privacy_card,
    inference_card,
)
#: The sections, in page order (each one also gets a link in the navigation bar).
SECTIONS: tuple[Builder, ...] = (
    energy_section,
    columns_section,
    pairs_section,
    utility_section,
    inference_section,
    rules_section,
    near_linear_section,
    privacy_section,
    settings_section,
)


# ---------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------


@cache
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fits.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["number"] = fmt_number
    env.filters["percent"] = fmt_percent
    env.globals.update(real_colour=REAL_COLOUR, synthetic_colour=SYNTHETIC_COLOUR)
    return env


def _render(part: Part, data: Data, figures: Figures) -> Any:
    from markupsafe import Markup

    template = _environment().get_template(part.template)
    return Markup(template.render(data=data, figures=figures, **part.context))


def render_html(data: Data, figures: Figures) -> str:
    """The report as one self-contained HTML page.

    Inline CSS, figures as embedded PNG images, no scripts, nothing fetched.

    Parameters
    ----------
    data : mapping
        ``Report.data``: every number of the report, JSON-ready.
    figures : mapping of str to str
        Figure name -> PNG image, base64-encoded.
    """
    cards = [part for build in CARDS if (part := build(data, figures)) is not None]
    sections = [part for build in SECTIONS if (part := build(data, figures)) is not None]
    page = _environment().get_template("page.html.j2")
    return page.render(
        data=data,
        figures=figures,
        cards=[_render(p, data, figures) for p in cards],
        nav=[(p.anchor, p.title) for p in sections if p.anchor],
        sections=[_render(p, data, figures) for p in sections],
    )
