"""Privacy accounting for mu-Gaussian differential privacy (GDP).

The federated GLM estimators (:mod:`fits.analysis.glm`) make every site mu-fed-GDP
(Definition 2.2 of the DP federated M-estimation paper: the site's releases to the
honest-but-curious server, whatever the other sites hold).  Towards a third party who
sees only the server's aggregates (Definition 2.1) :func:`third_party_mu` claims, per
method, only what the arithmetic supports: mu/sqrt(m) for FedSGD (Lemma 3.1), each
site's mu for FedAvg (not Lemma 3.6's mu/sqrt(m), whose proof does not hold), and the
composition of the two for FedHybrid and FedNewton (``docs/analysis.md``, "The
third-party guarantee").

A mechanism is mu-GDP if and only if it is (epsilon, delta(epsilon))-DP for every
epsilon >= 0 with (Dong, Roth and Su 2022, Corollary 1; the paper's proof of Theorem
3.10)::

    delta(epsilon) = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2).

:func:`gdp_delta` evaluates it, :func:`gdp_epsilon` inverts it in epsilon (given mu and
delta) and :func:`gdp_mu` in mu (given epsilon and delta), both by root finding:
delta(epsilon) decreases in epsilon and increases in mu.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import erfcx, ndtr, ndtri

__all__ = [
    "PrivacyBudget",
    "PrivacySpent",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "resolve_budget",
    "third_party_mu",
]

#: delta reported beside mu when the user gives mu alone.
DEFAULT_DELTA = 1e-5

#: The largest mu accepted: its epsilon, about mu^2 / 2, must be a float (mu = 1e150
#: gives about 5e299; above about 1.9e154 it is inf).  Such a budget protects nothing.
MU_MAX = 1e150


def _number(value: float, name: str) -> float:
    """``value`` as a float, or an error naming the parameter (``float('a')``'s says
    only "could not convert string to float")."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {value!r} (option --{name})")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r} (option --{name})") from None


def _check_mu(mu: float) -> float:
    mu = _number(mu, "mu")
    if not math.isfinite(mu) or mu <= 0:
        raise ValueError(f"mu must be a positive finite number, got {mu!r} (option --mu)")
    if mu > MU_MAX:
        raise ValueError(
            f"mu must be at most {MU_MAX:g}, got {mu!r} (option --mu): its epsilon (about "
            "mu^2 / 2) is beyond floating point and such a budget protects nothing; for a "
            "fit without privacy leave --mu out"
        )
    return mu


def _check_delta(delta: float) -> float:
    delta = _number(delta, "delta")
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie strictly between 0 and 1, got {delta!r} (option --delta)")
    return delta


def _check_epsilon(epsilon: float) -> float:
    epsilon = _number(epsilon, "epsilon")
    if not math.isfinite(epsilon) or epsilon < 0:
        raise ValueError(
            f"epsilon must be a non-negative finite number, got {epsilon!r} (option --epsilon)"
        )
    return epsilon


def _delta_t(t: float, mu: float) -> float:
    """delta(epsilon) at ``t = epsilon / mu - mu / 2`` (so ``epsilon = mu (t + mu / 2)``).

    With Phi(-x) = erfcx(x / sqrt 2) e^(-x^2 / 2) / 2 the second term of
    :func:`gdp_delta`, ``e^eps Phi(-t - mu)``, is ``erfcx((t + mu) / sqrt 2) e^(-t^2 / 2)
    / 2`` exactly: no ``e^eps`` to overflow and no difference of two numbers of size
    mu^2 (which lost every digit for mu of 1e10 and more).  ``t + mu >= mu / 2 > 0``."""
    a = float(ndtr(-t))
    b = 0.5 * float(erfcx((t + mu) / math.sqrt(2.0))) * math.exp(-0.5 * t * t)
    return max(a - b, 0.0)


def gdp_delta(epsilon: float, mu: float) -> float:
    """delta(epsilon) of a mu-GDP mechanism (Dong et al. 2022, Corollary 1).

    ``Phi(-eps/mu + mu/2) - exp(eps) * Phi(-eps/mu - mu/2)``, evaluated at
    ``t = eps/mu - mu/2`` (:func:`_delta_t`) so that no size of epsilon or mu overflows.
    """
    epsilon, mu = _check_epsilon(epsilon), _check_mu(mu)
    return _delta_t(epsilon / mu - mu / 2.0, mu)


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon >= 0 with delta(epsilon) <= delta for a mu-GDP mechanism.

    Solved in ``t = epsilon / mu - mu / 2`` (delta decreases in t), between
    ``t = -mu / 2`` (epsilon = 0) and ``Phi^-1(1 - delta)``, where the first term alone
    is delta."""
    mu, delta = _check_mu(mu), _check_delta(delta)
    lo, hi = -mu / 2.0, -float(ndtri(delta))
    if lo >= hi or _delta_t(lo, mu) <= delta:
        return 0.0
    t = brentq(lambda u: _delta_t(u, mu) - delta, lo, hi, xtol=1e-13, rtol=1e-13)
    return max(float(mu * (t + mu / 2.0)), 0.0)


def gdp_mu(epsilon: float, delta: float) -> float:
    """The mu whose GDP curve passes through (epsilon, delta): mu-GDP then implies
    (epsilon, delta)-DP, and any larger mu does not.  (delta increases in mu; solved in
    log mu, so that a tiny delta's tiny mu keeps its relative precision.)"""
    epsilon, delta = _check_epsilon(epsilon), _check_delta(delta)

    def gap(log_mu: float) -> float:
        mu = math.exp(log_mu)
        return _delta_t(epsilon / mu - mu / 2.0, mu) - delta

    lo, hi = math.log(1e-8), 0.0
    while gap(lo) > 0:
        lo -= 10.0
        if lo < math.log(1e-300):  # pragma: no cover - delta > 0 and delta(0) ~ 0.4 mu
            raise ValueError(f"no mu reaches delta={delta} at epsilon={epsilon} (option --delta)")
    while gap(hi) < 0:
        hi += 1.0
    mu = math.exp(brentq(gap, lo, hi, xtol=1e-14, rtol=1e-14))
    if mu > MU_MAX:
        raise ValueError(
            f"epsilon={epsilon!r} at delta={delta!r} is mu = {mu:.3g}-GDP, beyond the largest "
            f"mu, {MU_MAX:g} (option --epsilon): such a budget protects nothing; for a fit "
            "without privacy leave --epsilon out"
        )
    return mu


@dataclass(frozen=True)
class PrivacyBudget:
    """A checked budget: the per-site mu and the delta at which epsilon is reported."""

    mu: float
    delta: float
    given: str  # "mu" or "epsilon-delta"


def resolve_budget(
    mu: float | None, epsilon: float | None, delta: float | None
) -> PrivacyBudget | None:
    """Check the user's budget before any round runs.

    Either ``mu`` (with an optional ``delta`` at which to report epsilon, default
    :data:`DEFAULT_DELTA`), or ``epsilon`` and ``delta`` together (mu is then
    :func:`gdp_mu`), or none of them (no privacy: returns None).

    Raises
    ------
    ValueError
        mu <= 0, delta outside (0, 1), epsilon < 0, epsilon without delta, or mu
        together with epsilon.
    """
    if mu is not None and epsilon is not None:
        raise ValueError(
            "give either mu (--mu) or epsilon and delta (--epsilon, --delta), not both"
        )
    if mu is not None:
        return PrivacyBudget(
            _check_mu(mu), _check_delta(delta if delta is not None else DEFAULT_DELTA), "mu"
        )
    if epsilon is not None:
        if delta is None:
            raise ValueError("epsilon needs delta (--delta), e.g. 1e-5")
        return PrivacyBudget(gdp_mu(epsilon, delta), _check_delta(delta), "epsilon-delta")
    if delta is not None:
        _check_delta(delta)
        raise ValueError("delta alone sets no budget: give mu (--mu) or epsilon (--epsilon) too")
    return None


#: Each private method's noisy stages, as a third party sees them: (kind, share of the
#: per-site mu^2 the stage spends).  "aggregate": every release is a weighted average
#: of the sites' noisy replies at a point the earlier releases fix, a Gaussian mechanism
#: in which a record of site i moves the average by w_i Delta_i against noise
#: sqrt(sum_j (w_j sigma_j)^2) (the proof of Lemma 3.1).  "local": the sites' noisy
#: local descents (FedAvg rounds), whose averages a third party sees; only the site's
#: own level holds for them (:func:`third_party_mu`).
THIRD_PARTY_STAGES: dict[str, tuple[tuple[str, float], ...]] = {
    "fedsgd": (("aggregate", 1.0),),
    "fedhybrid": (("local", 0.5), ("aggregate", 0.5)),
    "fedavg": (("local", 1.0),),
    "fednewton": (("local", 0.5), ("aggregate", 0.5)),
}

_STAGE_NAMES = {
    "fedsgd": ("the K noisy gradient averages",),
    "fedhybrid": ("stage I (one FedAvg round)", "stage II (K2 noisy gradient averages)"),
    "fedavg": ("the R FedAvg rounds",),
    "fednewton": ("the FedAvg round", "the Newton step's average"),
}


def third_party_mu(
    method: str, mu: float, n_sites: int, noise_ratios: np.ndarray | None = None
) -> tuple[float, str, str]:
    """The GDP mu of a private run towards a third party who sees only the server's
    aggregates (Definition 2.1), as far as the arithmetic supports it.

    Each stage of :data:`THIRD_PARTY_STAGES` spends mu_s = mu sqrt(share) per site.

    * An ``"aggregate"`` stage is mu_s max_i r_i / ||r|| towards a third party, r_i =
      w_i sigma_i relative (``noise_ratios``; None: all equal, which gives mu_s /
      sqrt(m)): a record of site i moves each average by w_i Delta_i <= w_i sigma_i
      mu_s / sqrt(releases), against noise of sd ||(w_j sigma_j)_j|| (Lemma 3.1's proof;
      exact for the linear family).
    * A ``"local"`` stage is mu_s: a record lives at one site, the other sites' replies
      depend on it only through the released past, so everything the server receives,
      and every function of it, is as private as that site's own replies (adaptive
      composition, then post-processing).  Lemma 3.6's mu_s / sqrt(m) is not claimed:
      its proof bounds the aggregate's noise from above (the other sites' descents
      contract it) where a privacy bound needs it from below, and for the linear family
      the exact mu of one FedAvg round exceeds mu_s / sqrt(m) whenever one site's loss
      is much flatter than the others' along some direction (a feature constant or
      nearly constant there, or a site with fewer rows than coefficients), up to about
      mu_s: 0.90 mu against 0.32 mu for 10 sites (``tests/test_third_party_privacy.py``).
      The sites' losses are not known to the coordinator, so no condition on them
      can be checked without a new release.

    The stages compose (Dong, Roth and Su 2022): mu_3 = sqrt(sum mu_stage^2).

    Returns
    -------
    (mu_3, basis, note)
        ``basis`` is ``"aggregate"`` (every stage an aggregate: FedSGD), ``"site"``
        (every stage local: FedAvg, mu_3 = mu) or ``"composed"`` (FedHybrid,
        FedNewton); ``note`` says what was composed and how.
    """
    if method not in THIRD_PARTY_STAGES:
        raise ValueError(f"unknown private method {method!r}")
    r = np.ones(int(n_sites)) if noise_ratios is None else np.asarray(noise_ratios, float)
    equal = bool(np.all(r == r[0]))
    factor = float(r.max() / np.sqrt(np.sum(r * r)))
    parts: list[float] = []
    words: list[str] = []
    for (kind, share), name in zip(THIRD_PARTY_STAGES[method], _STAGE_NAMES[method], strict=True):
        whole = share == 1.0
        if kind == "aggregate":
            parts.append(math.sqrt(share) * factor)
            how = (
                ("mu/sqrt(m)" if whole else "mu/sqrt(2m)")
                if equal
                else (("mu" if whole else "mu/sqrt(2)") + " max_i r_i/||r|| (odd site sizes)")
            )
            words.append(f"{name}: {how} = {parts[-1]:.4g} mu (Lemma 3.1's argument)")
        else:
            parts.append(math.sqrt(share))
            words.append(
                f"{name}: {'mu' if whole else f'mu/sqrt(2) = {parts[-1]:.4g} mu'}, each "
                "site's own level (a record lives at one site: post-processing); not Lemma "
                "3.6's mu/sqrt(m), which fails where one site's loss is flatter than the "
                "others' (docs/analysis.md)"
            )
    mu3 = mu * math.sqrt(sum(v * v for v in parts))
    kinds = {kind for kind, _ in THIRD_PARTY_STAGES[method]}
    basis = "aggregate" if kinds == {"aggregate"} else "site" if kinds == {"local"} else "composed"
    note = "; ".join(words)
    if basis == "composed":
        squares = " + ".join(f"{v:.4g}^2" for v in parts)
        note += f"; composed: sqrt({squares}) = {mu3 / mu:.4g} mu"
    return mu3, basis, note


@dataclass(frozen=True)
class PrivacySpent:
    """What a private run spent.

    Parameters
    ----------
    mu_site : float
        Every site is mu-fed-GDP towards the server (Definition 2.2).
    mu_third_party : float
        The run's GDP mu towards a third party seeing only the server's aggregates
        (Definition 2.1), by :func:`third_party_mu`: mu/sqrt(m) for FedSGD (m the
        number of sites), mu for FedAvg, between the two for FedHybrid and FedNewton.
    delta : float
        The delta at which the epsilons are reported.
    epsilon_site, epsilon_third_party : float
        The equivalent epsilon at ``delta`` (:func:`gdp_epsilon`).
    n_sites : int
        m.
    third_party_basis : str
        ``"aggregate"``, ``"site"`` or ``"composed"`` (:func:`third_party_mu`).
    third_party_note : str
        What :attr:`mu_third_party` composes, and why.
    """

    mu_site: float
    mu_third_party: float
    delta: float
    epsilon_site: float
    epsilon_third_party: float
    n_sites: int
    third_party_basis: str = "aggregate"
    third_party_note: str = ""

    @classmethod
    def from_budget(
        cls,
        budget: PrivacyBudget,
        n_sites: int,
        noise_ratios: np.ndarray | None = None,
        *,
        method: str,
    ) -> PrivacySpent:
        """The spend of a run of ``method`` over ``n_sites`` sites at ``budget``.

        ``noise_ratios`` (per site; None: all equal) are the r_i = w_i sigma_i of the
        method's aggregate stage, relative (FedSGD, FedHybrid and an even FedNewton:
        all equal; FedNewton with an odd site size not, its noise using
        2 floor(n_i / 2) rows in place of n_i); see :func:`third_party_mu`."""
        mu3, basis, note = third_party_mu(method, budget.mu, n_sites, noise_ratios)
        return cls(
            mu_site=budget.mu,
            mu_third_party=mu3,
            delta=budget.delta,
            epsilon_site=gdp_epsilon(budget.mu, budget.delta),
            epsilon_third_party=gdp_epsilon(mu3, budget.delta),
            n_sites=int(n_sites),
            third_party_basis=basis,
            third_party_note=note,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            k: (float(v) if isinstance(v, float | np.floating) else v)
            for k, v in asdict(self).items()
        }
