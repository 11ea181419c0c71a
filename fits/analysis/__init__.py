"""Federated model fitting on the same federation layer as synthesis.

- :mod:`fits.analysis.design`: site-side design matrices from the shared schema (one-hot
  nominal, numeric standardized with federation-wide statistics from a round of sums);
  :class:`DesignSite` is the base of the analysis sites.
"""

from fits._lazy import lazy_exports

_EXPORTS = {
    "DesignBuilder": "fits.analysis.design",
    "DesignError": "fits.analysis.design",
    "DesignSite": "fits.analysis.design",
    "DesignSpec": "fits.analysis.design",
    "Standardization": "fits.analysis.design",
    "schema_round": "fits.analysis.design",
    "standardization_round": "fits.analysis.design",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
