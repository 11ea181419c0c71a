"""The engine's pure parts: functions of arrays and tables, no messages, no sites.

- :mod:`fits.core.schema`: column specs (:class:`ColumnSpec`, :class:`Schema`), kind
  inference, the setup round's per-site descriptions and their merge;
- :mod:`fits.core.continualization`: lifting discrete columns to intervals and back
  (paper sec. 4.1-4.2);
- :mod:`fits.core.kernels`: the client-designed kernels, fixed-bandwidth Gaussian and
  KNN (sec. 3.2), with the penalty-adaptive weights (sec. 4.4);
- :mod:`fits.core.cdf`: the CDF operators of Algorithms 1 and 2 (first-row solve,
  post-processing, inverse sampling, category masses).
"""

from fits._lazy import lazy_exports

_EXPORTS = {
    "ColumnSpec": "fits.core.schema",
    "Schema": "fits.core.schema",
    "SchemaError": "fits.core.schema",
    "Encoder": "fits.core.continualization",
    "GaussianKernel": "fits.core.kernels",
    "KNNKernel": "fits.core.kernels",
    "Kernel": "fits.core.kernels",
    "default_grid": "fits.core.cdf",
    "inverse_cdf": "fits.core.cdf",
    "postprocess_cdf": "fits.core.cdf",
    "solve_first_row": "fits.core.cdf",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
