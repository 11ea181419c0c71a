"""Federated model fitting on the same federation layer as synthesis.

- :mod:`fits.analysis.design`: site-side design matrices from the shared schema (one-hot
  nominal, numeric standardized with federation-wide statistics from a round of sums);
  :class:`DesignSite` is the base of the analysis sites;
- :mod:`fits.analysis.glm`: GLMs (linear, logistic, Poisson) fitted by FedSGD,
  FedHybrid, FedAvg or FedNewton under mu-GDP (:func:`fit_glm`);
- :mod:`fits.analysis.accounting`: mu-GDP <-> (epsilon, delta);
- :mod:`fits.analysis.lsa`: linear regression by FedLSA with confidence intervals
  from the online multiplier bootstrap (:func:`fedlsa`); :func:`inference_check`
  compares those intervals with OLS on a synthetic table;
- :mod:`fits.analysis.run`: one analysis from a plain spec, in process or through any
  transport (what ``fits analyze`` and the Flower ServerApp run).
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
    "GLMInferenceError": "fits.analysis.glm",
    "GLMResults": "fits.analysis.glm",
    "GLMWarning": "fits.analysis.glm",
    "LocalSingularityWarning": "fits.analysis.glm",
    "NearCollinearityWarning": "fits.analysis.glm",
    "SeparationWarning": "fits.analysis.glm",
    "GLMSite": "fits.analysis.glm",
    "fit_glm": "fits.analysis.glm",
    "PrivacySpent": "fits.analysis.accounting",
    "gdp_delta": "fits.analysis.accounting",
    "gdp_epsilon": "fits.analysis.accounting",
    "gdp_mu": "fits.analysis.accounting",
    "FedLSAConvergenceWarning": "fits.analysis.lsa",
    "FedLSAResults": "fits.analysis.lsa",
    "FedLSASite": "fits.analysis.lsa",
    "fedlsa": "fits.analysis.lsa",
    "InferenceCheck": "fits.analysis.inference",
    "inference_check": "fits.analysis.inference",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
