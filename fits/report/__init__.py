"""The fidelity report: every evaluator on one synthetic table, as HTML and JSON.

- :mod:`fits.report.build`: :func:`evaluate` runs the evaluators and returns a
  :class:`Report` (``summary``, ``to_html``, ``to_json``, ``save``).
"""

from fits._lazy import lazy_exports

_EXPORTS = {"Report": "fits.report.build", "evaluate": "fits.report.build"}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
