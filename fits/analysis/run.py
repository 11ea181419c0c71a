"""One analysis from a plain spec, in process or through any transport.

``fits analyze`` builds the spec from its options; :func:`run_analysis` runs it on the
sites' tables in this process, or through a :class:`~fits.federation.transport.Transport`
to sites elsewhere (the Flower ServerApp, :func:`fits.flower_app.analyze`, runs the same
spec), so both give the same result for the same seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from fits.federation.transport import Transport

__all__ = ["ANALYSIS_METHODS", "json_safe", "run_analysis"]

#: ``method`` of a spec -> the GLMs of :func:`fits.analysis.glm.fit_glm` and FedLSA
#: (:func:`fits.analysis.lsa.fedlsa`).
ANALYSIS_METHODS = ("newton", "fednewton", "fedsgd", "fedhybrid", "fedavg", "fedlsa")


def run_analysis(
    spec: Mapping[str, Any],
    tables: Mapping[str, Any] | None = None,
    *,
    transport: Transport | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, Any], str]:
    """Run one analysis; return its result (JSON-ready) and its summary text.

    Parameters
    ----------
    spec : mapping
        ``{"method": ..., "options": {...}, "ci": 0.95}``: ``options`` are the keyword
        arguments of :func:`fits.analysis.glm.fit_glm` (for the GLM methods, which add
        ``method``) or of :func:`fits.analysis.lsa.fedlsa` (``method="fedlsa"``); ``ci``
        is the intervals' level (default 0.95): FedLSA's, and a GLM's without privacy.
        Plain JSON values only.
    tables : mapping of site name to DataFrame, optional
        The sites' tables (an in-process federation); None with ``transport``.
    transport : Transport, optional
        The channel to sites built elsewhere (each answers the analysis messages).
    on_round : callable, optional
        Progress, ``on_round(done, total)`` over the fitting rounds: the ``on_round``
        of :func:`fits.analysis.glm.fit_glm` or :func:`fits.analysis.lsa.fedlsa`.  It
        does not change the result.

    Returns
    -------
    result : dict
        ``GLMResults.to_dict(1 - ci)`` or ``FedLSAResults.to_dict(1 - ci)``.
    summary : str
        The result's ``summary()``.
    """
    method = str(spec["method"])
    alpha = 1.0 - float(spec.get("ci", 0.95))
    options = dict(spec.get("options", {}))
    if method not in ANALYSIS_METHODS:
        raise ValueError(
            f"unknown analysis method {method!r}; use one of {', '.join(ANALYSIS_METHODS)}"
        )
    if method == "fedlsa":
        from fits.analysis.lsa import fedlsa

        res = fedlsa(tables, transport=transport, on_round=on_round, **options)
        return json_safe(res.to_dict(alpha)), res.summary(alpha)
    from fits.analysis.glm import fit_glm

    glm = fit_glm(tables, transport=transport, method=method, on_round=on_round, **options)
    return json_safe(glm.to_dict(alpha)), glm.summary(alpha)


def json_safe(value: Any) -> Any:
    """``value`` with every float that is not finite (inf, NaN) as None: JSON has no
    such numbers, and Python's ``json`` wrote them as ``Infinity`` / ``NaN``, which
    strict parsers (JavaScript's, jq) refuse."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
