"""Evaluators of a synthetic table against real data (paper sec. 6.2.3, appendix D).

- :mod:`fits.evaluation.encoding`: the shared validation and mixed-type encoding;
- :mod:`fits.evaluation.distance`: the exact energy distance, chunked;
- :mod:`fits.evaluation.fidelity`: column and pair fidelity, the independent resample;
- :mod:`fits.evaluation.utility`: downstream utility in the data usage modes M1-M4;
- :mod:`fits.evaluation.rules`: the share of rows keeping each exact rule of the real data,
  and the residual spread of each near-linear pair about its line;
- :mod:`fits.evaluation.privacy`: distance to closest record and exact copies;
- :mod:`fits.evaluation.copies`: the release check ``fits synthesize`` prints (exact
  copies per site and DCR, streamed over the synthetic chunks).
"""

from fits._lazy import lazy_exports

_EXPORTS = {
    "KINDS": "fits.evaluation.encoding",
    "energy_distance": "fits.evaluation.distance",
    "energy_distances": "fits.evaluation.distance",
    "mean_pairwise_distance": "fits.evaluation.distance",
    "column_fidelity": "fits.evaluation.fidelity",
    "independent_resample": "fits.evaluation.fidelity",
    "pair_fidelity": "fits.evaluation.fidelity",
    "downstream_utility": "fits.evaluation.utility",
    "UtilityResult": "fits.evaluation.utility",
    "rules_kept": "fits.evaluation.rules",
    "near_linear_kept": "fits.evaluation.rules",
    "privacy_checks": "fits.evaluation.privacy",
    "distance_to_closest_record": "fits.evaluation.privacy",
    "PrivacyResult": "fits.evaluation.privacy",
    "ReleaseCheck": "fits.evaluation.copies",
    "ReleaseCheckResult": "fits.evaluation.copies",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
