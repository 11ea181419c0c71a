"""Federated GLMs with differential privacy: FedSGD, FedHybrid, FedAvg, FedNewton.

The paper "Statistical Limits and Efficient Algorithms for Differentially Private
Federated Learning" (Peng, Paul, Auddy 2026; ``dp-federated-m-estimation.txt``) fits an
M-estimator theta_0 = argmin E rho(X, theta) over m sites, each site mu-fed-GDP
(Definition 2.2) towards the server and the whole run mu/sqrt(m)-GDP towards a third
party (Definition 2.1; fits claims that for FedSGD only, each site's mu for FedAvg and
their composition for FedHybrid and FedNewton: :func:`fits.analysis.accounting.
third_party_mu`).  Here the M-estimators are generalized linear models with the
canonical link, rho = the negative log-likelihood per row (sec. 4):

=========  =========================  ==============  =============================
family     loss rho(y, eta)           mean mu(eta)    Hessian weight
=========  =========================  ==============  =============================
linear     (y - eta)^2 / 2            eta             1
logistic   log(1 + e^eta) - y eta     1/(1+e^-eta)    mu (1 - mu)
poisson    e^eta - y eta              e^eta           mu
=========  =========================  ==============  =============================

so the per-row gradient is (mu(x'theta) - y) x.  Every per-row gradient is clipped to
Euclidean norm at most B, g * min(1, B / ||g||) (sec. 4.1), before it is averaged.

The four estimators, exactly as Algorithms 1-4 state them (weights w_i = n_i / N):

* **FedSGD** (Algorithm 1): K server steps theta <- theta - eta sum_i w_i g~_i, each
  site sending its mean clipped gradient plus N(0, sigma_i^2 I),
  sigma_i = 2 B sqrt(K) / (mu n_i) (Lemma 3.1).
* **FedHybrid** (Algorithm 2): stage I, K1 private local steps at each site from 0,
  theta <- theta - eta1 mean g + a_i Z, a_i = 2 B eta1 sqrt(2 K1) / (mu n_i); the
  server averages; stage II, K2 FedSGD steps (step eta2) from that average with
  sigma_i = 2 B sqrt(2 K2) / (mu n_i) (Lemma 3.4).
* **FedAvg** (Algorithm 3): R rounds of K private local steps,
  sigma_i = 2 B eta sqrt(R K) / (mu n_i) added to each local step (Lemma 3.6).
* **FedNewton** (Algorithm 4): each site splits its rows into halves X1, X2; one
  round of FedAvg on X1 with sigma_i = 4 B eta sqrt(2 K) / (mu n_i); then one local
  Newton step theta_i = theta - H(theta; X1)^-1 g(theta; X2) + 2 B_new / (mu n_i) Z
  with B_new = 4 sqrt(2) B / tau1 (Lemma 3.8); the server averages.

With an offset o (``offset=``, ``exposure=``) eta = x'theta + o in every formula; each
per-row gradient is still clipped to B, so the noise scales do not change.  With prior
weights w (``weights=``) each row's loss, clipped gradient and Hessian are multiplied
by w; a private fit needs a declared ``max_weight`` W and calibrates every noise scale
to W B in place of B (``docs/analysis.md``, "Offsets, exposure and prior weights").

``mu=None`` runs the same algorithms without noise and without clipping.  The choices
the paper leaves open (the clipping bound, tau1, odd site sizes, the FedAvg step size,
...) are listed in ``docs/analysis.md``.

Messages (:mod:`fits.federation.protocol`): ``setup`` and ``moments`` (the design,
:mod:`fits.analysis.design`), then ``glm_configure``, ``glm_clip`` (the paper's
data-driven clipping bound), ``glm_gradient`` (one noisy mean gradient), ``glm_local``
(a site's noisy local descent), ``glm_newton`` (the noisy local Newton step),
``glm_check`` (the separation check) and ``glm_fisher`` (without privacy only: each
site's Fisher information X'WX and score at the estimate, for the standard errors).
The ``glm_configure`` reply carries each site's design null space, from which the
coordinator refuses a design collinear across the sites before any fitting round
(``docs/analysis.md``, "Ill-posed data").  Each
site draws its noise from its own generator, seeded when the site is built (never by
a message: a server that knew a site's seed could subtract its noise), and refuses
any release beyond the plan it was configured with, so the server cannot spend more
than the budget.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import scipy.linalg
from scipy.special import expit, gammaln

from fits.analysis.design import (
    INTERCEPT,
    MISSING_POLICIES,
    DesignBuilder,
    DesignError,
    DesignSite,
    DesignSpec,
    Standardization,
    check_new_rows,
    check_seed,
    dropped_note,
    fit_columns,
    labels_as_fitted,
    original_map,
    scale_note,
    schema_round,
    site_items,
    standardization_round,
)
from fits.core.schema import NA_TEXTS, ColumnSpec, Schema, parse_text_columns
from fits.federation.protocol import Message, ProtocolError
from fits.federation.transport import InProcessTransport, Transport

if TYPE_CHECKING:  # the accounting (scipy.optimize) is the coordinator's: a site never loads it
    from fits.analysis.accounting import PrivacyBudget, PrivacySpent

__all__ = [
    "FAMILIES",
    "METHODS",
    "GLMInferenceError",
    "GLMResults",
    "GLMWarning",
    "LocalSingularityWarning",
    "NearCollinearityWarning",
    "SeparationWarning",
    "BatchTransport",
    "GLMSite",
    "GLMSiteBatch",
    "make_sites",
    "direct_fit",
    "fit_glm",
    "glm_settings",
    "noise_scales",
    "noise_floor",
    "planned_rounds",
    "variance_inflation",
    "near_projector",
    "VIF_WARN",
    "PRIVATE_VIF_WARN",
]

FAMILIES = ("linear", "logistic", "poisson")

#: Paper's experimental choices (sec. 4): iterations and step sizes of each method.
DEFAULTS: dict[str, dict[str, float | int]] = {
    "fedsgd": {"K": 50, "eta": 0.5},
    "fedhybrid": {"K1": 30, "eta1": 0.5, "K2": 20, "eta2": 0.5},
    "fedavg": {"K": 50, "R": 2, "eta": 0.5},
    "fednewton": {"K": 50, "eta": 0.5},
    # not the paper's: the exact pooled Newton-Raphson (no privacy); K caps its rounds
    "newton": {"K": 50},
}
#: ``newton`` stops when its step's largest coordinate (standardized design) is at most
#: this times max(1, the estimate's largest coordinate) (relative for a target in the
#: millions, whose coefficients float64 holds to about 1e-16 of their size): Newton's
#: quadratic convergence leaves the estimate about this squared from the pooled
#: maximum-likelihood estimate.
NEWTON_TOL = 1e-8
#: ``newton`` stops, not converged, when its step would lower the pooled loss by at most
#: this fraction of it (Newton's predicted decrease g'H^-1 g / 2) while still moving a
#: coefficient by 1 or more (standardized scale): the loss is flat along a direction in
#: which the estimate runs off (separation), and more rounds would not tell more.
NEWTON_FLAT = 1e-13
#: A linear fit by ``newton`` whose residual sum of squares is at most this fraction of
#: the target's sum of squares is an exact fit (its standard errors are rounding noise).
PERFECT_FIT = 1e-20
#: A Poisson fit without privacy whose estimate has a coefficient (standardized design)
#: past this has diverged, finite or not: its mean would change by a factor e^1000, past
#: float64, within one standard deviation of a feature (fedsgd, fedavg, fedhybrid and
#: fednewton from 0 on counts in the hundreds oscillated at +-1e303 and returned that). A
#: logistic fit's gradient is bounded, so its iterate cannot run off so; its estimate
#: grows large only under separation, which SeparationWarning names. Private fits are
#: noisy by design; their noise floor says so (``GLMResults.noise_floor``).
MAX_EXP_COEFFICIENT = 1000.0
#: ``newton`` halves a step that raises the pooled loss, at most this many times.
NEWTON_HALVINGS = 30
#: Default tau1, the strong-convexity constant of Assumption 2 that calibrates the
#: Newton step's noise (Algorithm 4); local Hessians are floored at it.
DEFAULT_TAU1 = 0.1
#: The paper's clipping rule (sec. 4.1): B = max over sites of this quantile of the
#: per-row gradient norms at theta = 0.
CLIP_QUANTILE = 0.9
#: A site's design has a null direction where an eigenvalue of its X'X / n is at most
#: this fraction of the largest (the standardized columns make the scales comparable).
NULL_TOL = 1e-10
#: A private fit has no standard errors to show a poorly determined coefficient, so its
#: near-collinearity check (:func:`near_projector`) warns from this variance inflation
#: factor on, at every site: R^2 >= 0.99 on the other features (a pair correlated
#: 0.995 or more), ten times below :data:`VIF_WARN` of the standard errors' check.
PRIVATE_VIF_WARN = 100.0
#: Sites' nearly collinear directions are one direction when the sum of their
#: projectors has an eigenvalue of at least this share of the sites counted (mean
#: squared cosine 0.9: within about 18 degrees).
NEAR_AGREE = 0.9
#: A design column is part of a near relation when its weight in it is at least this
#: share of the largest weight.
NEAR_MEMBER = 0.05


class GLMInferenceError(ValueError):
    """No standard errors or intervals for this fit (the message says why)."""


class GLMWarning(UserWarning):
    """A federated GLM fit ran, but its coefficients need care (the message says why)."""


class NearCollinearityWarning(GLMWarning):
    """A private fit whose features are nearly collinear at every site: no standard
    errors show it, and their coefficients are not determined by the data.  Raised
    after ``glm_configure``, before any noisy round: turn it into an error
    (``warnings.simplefilter("error", NearCollinearityWarning)``) to stop there,
    before any budget is spent."""


class SeparationWarning(GLMWarning):
    """Logistic (or Poisson) data with complete or quasi-complete separation: the
    maximum-likelihood estimate does not exist, and the coefficients grow without bound
    with the iterations (statsmodels' ``PerfectSeparationWarning``)."""


class LocalSingularityWarning(GLMWarning):
    """Every site's own design is rank deficient (e.g. a feature constant within each
    site) though the pooled one is not: FedNewton's local Newton steps cannot move the
    coefficients along those directions."""


# ---------------------------------------------------------------------- families
def _mean(family: str, eta: np.ndarray) -> np.ndarray:
    if family == "linear":
        return eta
    if family == "logistic":
        return expit(eta)
    return np.exp(np.minimum(eta, 700.0))


def _hessian_weight(family: str, eta: np.ndarray) -> np.ndarray:
    if family == "linear":
        return np.ones_like(eta)
    mu = _mean(family, eta)
    return mu * (1.0 - mu) if family == "logistic" else mu


def loss(family: str, eta: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-row negative log-likelihood rho (up to terms free of theta, except that
    Poisson keeps log y! so the value is the exact negative log-likelihood)."""
    if family == "linear":
        return 0.5 * (y - eta) ** 2
    if family == "logistic":
        return np.logaddexp(0.0, eta) - y * eta
    return np.exp(eta) - y * eta + gammaln(y + 1.0)


def check_target(family: str, y: np.ndarray, site: str, target: str) -> None:
    """A target that does not fit the family is an error naming the site."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of {', '.join(FAMILIES)}")
    if not np.all(np.isfinite(y)):
        raise DesignError(f"{site}: target {target!r} holds non-finite values")
    if family == "logistic" and not np.all((y == 0) | (y == 1)):
        bad = sorted(set(np.unique(y[(y != 0) & (y != 1)]).tolist()))[:5]
        raise DesignError(
            f"{site}: target {target!r} must be binary 0/1 for family 'logistic'; found "
            f"{bad}: recode it, or choose family 'linear'"
        )
    if family == "poisson" and not np.all((y >= 0) & (y == np.round(y))):
        bad = sorted(set(np.unique(y[(y < 0) | (y != np.round(y))]).tolist()))[:5]
        raise DesignError(
            f"{site}: target {target!r} must be a count (integer >= 0) for family "
            f"'poisson'; found {bad}: drop or recode those rows, or choose family 'linear'"
        )


def _eta(x: np.ndarray, theta: np.ndarray, off: np.ndarray | None) -> np.ndarray:
    """The linear predictor x'theta (+ the offset), for one site or a stack of them."""
    eta = (x @ theta[..., None])[..., 0]
    return eta if off is None else eta + off


def clipped_gradients(
    family: str,
    x: np.ndarray,
    y: np.ndarray,
    theta: np.ndarray,
    clip: float,
    off: np.ndarray | None = None,
    w: np.ndarray | None = None,
) -> np.ndarray:
    """Per-row gradients (mu(x'theta + offset) - y) x (``off``: the offsets, None
    for none), each scaled to norm at most ``clip``, then times the row's prior weight
    (``w``, None for 1): a weighted row's gradient has norm at most w ``clip``."""
    r = _mean(family, _eta(x, theta, off)) - y
    g = r[:, None] * x
    if math.isfinite(clip):
        norms = np.abs(r) * np.sqrt(np.einsum("ij,ij->i", x, x))
        scale = np.minimum(1.0, clip / np.maximum(norms, 1e-300))
        g *= scale[:, None]
    if w is not None:
        g *= w[:, None]
    return g


# ---------------------------------------------------------------------- site computations
# The site's arithmetic, written for one site (x of shape (r, p), n a number) or for a
# stack of sites padded with zero rows (x of shape (m, r, p), n of shape (m,)): a zero
# row has a zero gradient and a zero Hessian, so padding changes nothing.  GLMSite
# calls these on its own rows, GLMSiteBatch on the stack; the numbers are the same.


def site_gradient(
    family: str,
    x: np.ndarray,
    y: np.ndarray,
    xnorm: np.ndarray,
    n: np.ndarray | float,
    theta: np.ndarray,
    clip: float,
    off: np.ndarray | None = None,
    w: np.ndarray | None = None,
) -> np.ndarray:
    """Sum over a site's rows of the per-row gradients (mu(x'theta + off) - y) x
    clipped at ``clip``, each then times its prior weight ``w``, divided by n
    (``xnorm``: the rows' Euclidean norms; ``n``: the row count, or in a fit with
    weights but no privacy the weights' sum; ``off``, ``w``: None for none)."""
    r = _mean(family, _eta(x, theta, off)) - y
    if math.isfinite(clip):
        norms = np.abs(r) * xnorm
        r = r * np.minimum(1.0, clip / np.maximum(norms, 1e-300))
    if w is not None:
        r = r * w
    g = (r[..., None, :] @ x)[..., 0, :]
    return g / np.asarray(n, dtype=np.float64)[..., None]


def site_descent(
    family: str,
    x: np.ndarray,
    y: np.ndarray,
    xnorm: np.ndarray,
    n: np.ndarray | float,
    theta: np.ndarray,
    clip: float,
    steps: int,
    eta: float,
    noise: Callable[[], np.ndarray],
    off: np.ndarray | None = None,
    w: np.ndarray | None = None,
) -> np.ndarray:
    """``steps`` private local steps theta <- theta - eta g(theta) + noise() (Algorithm
    2 stage I, Algorithm 3, Algorithm 4's FedAvg round)."""
    theta = np.array(theta, dtype=np.float64)
    for _ in range(steps):
        theta = theta - eta * site_gradient(family, x, y, xnorm, n, theta, clip, off, w)
        theta = theta + noise()
    return theta


def site_newton_step(
    family: str,
    x1: np.ndarray,
    n1: np.ndarray | float,
    g2: np.ndarray,
    theta: np.ndarray,
    floor: float | None,
    off1: np.ndarray | None = None,
    w1: np.ndarray | None = None,
) -> np.ndarray:
    """H(theta; X1)^-1 g2 (Algorithm 4): the first half's Hessian (its rows' offsets
    ``off1`` and prior weights ``w1``, None for none; ``n1`` their count, or the
    weights' sum), its eigenvalues floored at ``floor`` (tau1, when private); without a
    floor the minimum-norm solution (pseudo-inverse)."""
    w = _hessian_weight(family, _eta(x1, theta, off1))
    if w1 is not None:
        w = w * w1
    h = np.einsum("...r,...rp,...rq->...pq", w, x1, x1)
    h = h / np.asarray(n1, dtype=np.float64)[..., None, None]
    if floor is None:
        return np.einsum("...pq,...q->...p", np.linalg.pinv(h, hermitian=True), g2)
    vals, vecs = np.linalg.eigh(h)
    coords = np.einsum("...qp,...q->...p", vecs, g2) / np.maximum(vals, floor)
    return np.einsum("...pq,...q->...p", vecs, coords)


def site_fisher(
    family: str,
    x: np.ndarray,
    y: np.ndarray,
    theta: np.ndarray,
    *,
    dispersion: bool = False,
    robust: bool = False,
    off: np.ndarray | None = None,
    pw: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The ``glm_fisher`` reply: ``info``, the upper triangle (row by row) of the
    site's Fisher information X'W(theta)X (W the Hessian weights of the family);
    ``score``, its summed gradient X'(mu - y) at theta (zero in sum over the sites at
    the pooled maximum-likelihood estimate); with
    ``dispersion`` also ``rss`` (1,), the residual sum of squares sum (y - mu)^2; with
    ``robust`` also ``meat``, the upper triangle of sum_r (mu_r - y_r)^2 x_r x_r' (the
    per-row scores' outer products); ``loss`` (2,), the summed negative log-likelihood
    (:func:`loss`) at theta and at the start theta = 0, for the check that a fit
    whose Fisher information is singular at its end has not moved away
    (:func:`_saturated_away`).  With offsets ``off`` and prior weights ``pw``
    (statsmodels' ``var_weights``): eta = x'theta + off, X'(pw W)X, the score
    X'(pw (mu - y)), rss sum pw (y - mu)^2, the meat sum (pw (mu - y))^2 x x', each
    row's loss times its weight."""
    eta = _eta(x, theta, off)
    iu = np.triu_indices(x.shape[1])
    w = _hessian_weight(family, eta)
    if pw is not None:
        w = w * pw
    out = {"info": ((x * w[:, None]).T @ x)[iu]}
    with np.errstate(over="ignore"):  # a diverged Poisson fit: an infinite loss
        losses = [loss(family, e, y) for e in (eta, _eta(x, np.zeros_like(theta), off))]
        out["loss"] = np.array([float(r.sum() if pw is None else (pw * r).sum()) for r in losses])
    r = _mean(family, eta) - y
    s = r if pw is None else pw * r
    out["score"] = s @ x
    if dispersion:
        out["rss"] = np.array([float(s @ r)])
    if robust:
        out["meat"] = ((x * (s**2)[:, None]).T @ x)[iu]
    return out


def site_sums(
    family: str,
    x: np.ndarray,
    y: np.ndarray,
    theta: np.ndarray,
    off: np.ndarray | None = None,
    pw: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The ``glm_sums`` reply (method ``newton``, no privacy): at theta, the site's
    summed loss ``loss`` (1,), summed gradient ``score`` X'(mu - y) (p,) and the upper
    triangle ``info`` of its Hessian X'W(theta)X (as :func:`site_fisher`; with offsets
    ``off`` and prior weights ``pw``, each row's terms times its weight)."""
    eta = _eta(x, theta, off)
    w = _hessian_weight(family, eta)
    r = _mean(family, eta) - y
    with np.errstate(over="ignore"):  # a trial step too far: an infinite loss, halved
        rho = loss(family, eta, y)
        value = float(rho.sum() if pw is None else (pw * rho).sum())
    if pw is not None:
        w, r = w * pw, r * pw
    return {
        "loss": np.array([value]),
        "score": r @ x,
        "info": ((x * w[:, None]).T @ x)[np.triu_indices(x.shape[1])],
    }


def unpack_symmetric(packed: np.ndarray, p: int) -> np.ndarray:
    """The p x p symmetric matrix whose upper triangle (row by row) is ``packed``."""
    m = np.zeros((p, p))
    m[np.triu_indices(p)] = packed
    return m + np.triu(m, 1).T


def null_projector(x: np.ndarray, small: bool = False) -> np.ndarray:
    """The projector onto the null space of a site's design ``x`` (n, p): zeros when
    ``x`` has full column rank.  A site with fewer than p rows has a rank deficient
    design whatever the data, and its null space tells the span of its few rows: it
    sends it only with ``small`` (a fit without privacy, whose ``glm_sums`` and
    ``glm_fisher`` rounds send the site's X'WX, of the same null space, anyway); else
    zeros, and the coordinator leaves such a site out of the check."""
    n, p = x.shape
    if n < p and not small:
        return np.zeros((p, p))
    if n == 0:  # no rows: every direction is null there
        return np.eye(p)
    vals, vecs = np.linalg.eigh(x.T @ x / n)
    v = vecs[:, vals <= NULL_TOL * max(float(vals[-1]), np.finfo(float).tiny)]
    return v @ v.T


def near_projector(
    x: np.ndarray, intercept: bool, threshold: float = PRIVATE_VIF_WARN
) -> np.ndarray:
    """The projector onto a site's nearly collinear directions (the ``near`` part of a
    private fit's ``glm_configure`` reply; zeros when there are none).

    On the site's own rows, its design columns (but the intercept) centred and scaled
    to unit variance give the correlation matrix R = V diag(lambda) V'; an eigenvector v
    is nearly collinear when max_j v_j^2 / lambda >= ``threshold``, so that the variance
    inflation factor (R^-1)_jj = sum_k v_kj^2 / lambda_k of its largest column reaches
    the threshold (R^2 >= 1 - 1/threshold on the others).  The directions are sent as
    coefficients on the design columns (v_j / sd_j, the same relation at every site
    whatever its spread), orthonormalized.  Only these directions leave the site, not
    R or the factors.  A column constant at the site, and a site with fewer rows than
    the p design columns, are left out (zeros), as in :func:`null_projector`.
    """
    n, p = x.shape
    out = np.zeros((p, p))
    if n < p:
        return out
    cols = np.arange(1 if intercept else 0, p)
    xc = x[:, cols] - x[:, cols].mean(axis=0) if intercept else x[:, cols]
    sd = np.sqrt(np.einsum("ij,ij->j", xc, xc) / n)
    live = sd > 1e-8
    if live.sum() < 2:
        return out
    z = xc[:, live] / sd[live]
    vals, vecs = np.linalg.eigh(z.T @ z / n)
    pick = (vecs**2).max(axis=0) >= threshold * np.maximum(vals, 0.0)
    if not pick.any():
        return out
    u = np.zeros((p, int(pick.sum())))
    u[cols[live]] = vecs[:, pick] / sd[live][:, None]
    q, _ = np.linalg.qr(u)
    return q @ q.T


def class_extremes(
    family: str,
    x: np.ndarray,
    y: np.ndarray,
    theta: np.ndarray,
    off: np.ndarray | None = None,
    pw: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``glm_check`` reply: per class (row 0: y = 0; row 1: y = 1, Poisson y > 0)
    the least and the greatest value of each design column and of x'theta (p + 1
    columns), over the rows of positive prior weight ``pw`` (all rows without); +inf /
    -inf for a class without rows at the site.  ``off`` is not added: a fixed offset
    can separate the classes while the MLE exists, whereas x'theta separating them
    means the loss falls without bound along theta whatever the (finite) offsets."""
    del off  # the same signature as the other site computations
    z = np.column_stack([x, x @ theta])
    lo = np.full((2, z.shape[1]), np.inf)
    hi = np.full((2, z.shape[1]), -np.inf)
    counted = np.ones(len(y), dtype=bool) if pw is None else pw > 0
    for k, rows in enumerate((counted & (y == 0), counted & (y > 0))):
        if rows.any():
            lo[k], hi[k] = z[rows].min(axis=0), z[rows].max(axis=0)
    return lo, hi


# ---------------------------------------------------------------------- noise scales
def noise_scales(
    method: str, settings: Mapping[str, float], clip: float, mu: float, n_rows: int, tau1: float
) -> dict[str, float]:
    """Each release's Gaussian noise sd at a site of ``n_rows`` rows (the lemmas).

    Returns a dict stage -> sd: ``fedsgd`` (Lemma 3.1, on the mean gradient),
    ``hybrid1`` and ``hybrid2`` (Lemma 3.4, on each local step / on the mean
    gradient), ``fedavg`` (Lemma 3.6, on each local step), ``newton_avg`` and
    ``newton`` (Algorithm 4 / Lemma 3.8: each local step of the FedAvg round on the
    first half, and the Newton step's output).  For FedNewton with an odd ``n_rows``
    the formulas use ``2 * floor(n_rows / 2)`` in place of n_i: the smaller half has
    floor(n_i / 2) rows, and the lemma's sensitivity 2B / (n_i / 2) must hold for it.
    A fit with prior weights bounded by ``max_weight`` W passes ``clip`` = W B: a
    row's clipped gradient times its weight has norm at most W B.
    """
    b, n = float(clip), float(n_rows)
    s = settings
    if method == "fedsgd":
        return {"fedsgd": 2 * b * math.sqrt(s["K"]) / (mu * n)}
    if method == "fedhybrid":
        return {
            "hybrid1": 2 * b * s["eta1"] * math.sqrt(2 * s["K1"]) / (mu * n),
            "hybrid2": 2 * b * math.sqrt(2 * s["K2"]) / (mu * n),
        }
    if method == "fedavg":
        return {"fedavg": 2 * b * s["eta"] * math.sqrt(s["R"] * s["K"]) / (mu * n)}
    if method == "fednewton":
        n_even = 2.0 * (n_rows // 2)
        b_new = 4.0 * math.sqrt(2.0) * b / tau1
        return {
            "newton_avg": 4 * b * s["eta"] * math.sqrt(2 * s["K"]) / (mu * n_even),
            "newton": 2 * b_new / (mu * n_even),
        }
    raise ValueError(f"unknown method {method!r}")


#: Each private method's last noisy release: its stage and the setting (None: 1) by which
#: its noise enters the estimate (FedSGD's and FedHybrid's server step size).
_LAST_RELEASE = {
    "fedsgd": ("fedsgd", "eta"),
    "fedhybrid": ("hybrid2", "eta2"),
    "fedavg": ("fedavg", None),
    "fednewton": ("newton", None),
}


def noise_floor(
    method: str,
    settings: Mapping[str, float],
    clip: float,
    mu: float,
    n_rows: Sequence[int] | np.ndarray,
    tau1: float,
) -> float:
    """A lower bound on the standard deviation of the privacy noise in each coefficient
    of a private fit (design scale), from public quantities only (the plan, B, mu, the
    row counts): the noise of the last noisy release alone.

    That release's Gaussian noise enters the estimate linearly and independently of
    everything before it: FedSGD's (FedHybrid's) last server step adds
    -eta sum_i w_i sigma_i Z_i, FedAvg's last round and FedNewton's Newton step add
    sum_i w_i sigma_i Z_i (w_i = n_i / N, sigma_i from :func:`noise_scales`), so each
    coefficient's variance is at least sum_i (f w_i sigma_i)^2, f the step size or 1.
    The earlier releases' noise adds to it (after contraction by the later steps).
    """
    stage, factor = _LAST_RELEASE[method]
    n = np.asarray(n_rows, dtype=np.float64)
    w = n / n.sum()
    sig = np.array([noise_scales(method, settings, clip, mu, int(k), tau1)[stage] for k in n])
    f = 1.0 if factor is None else float(settings[factor])
    v = np.abs(w * sig)
    top = float(v.max())
    if not (math.isfinite(top) and top > 0):
        return f * top
    return float(f * top * np.sqrt(np.sum((v / top) ** 2)))  # scaled: mu = 1e-300 overflowed


def _noise_note(
    floor: float, family: str, target_range: float | None, method: str = ""
) -> str | None:
    """The warning of a private fit whose noise floor (:func:`noise_floor`) reaches the
    size of a large effect: 1 on the design scale for logistic and Poisson (a feature's
    standard deviation moving the log-odds or the log-mean by 1), a quarter of the
    target's range (about its standard deviation) for linear; None below it."""
    if family == "linear":
        if target_range is None or not target_range > 0:
            return None
        scale = target_range / 4.0
        what = f"a quarter of the target's range ({target_range:.4g} / 4 = {scale:.4g})"
    else:
        scale, what = (
            1.0,
            "1 (a change of one standard deviation of a feature moving the "
            + ("log-odds" if family == "logistic" else "log of the mean")
            + " by 1)",
        )
    if not floor >= scale:
        return None
    return (
        f"the privacy noise dominates the estimate: each coefficient carries noise of "
        f"standard deviation at least {floor:.3g} (design scale; the last noisy release "
        f"alone), at or above {what}, so the coefficients say little about the data; give "
        "a larger budget (mu, epsilon), pool small sites into larger ones (the noise falls "
        "as 1 / rows per site), or a smaller clip"
        + (
            "; FedNewton's Newton-step noise grows as 1 / tau1: a larger tau1, or method fedsgd"
            if method == "fednewton"
            else ""
        )
    )


#: Releases each site allows per stage: settings -> count.
def _release_plan(method: str, s: Mapping[str, float]) -> dict[str, int]:
    if method == "fedsgd":
        return {"fedsgd": int(s["K"])}
    if method == "fedhybrid":
        return {"hybrid1": 1, "hybrid2": int(s["K2"])}
    if method == "fedavg":
        return {"fedavg": int(s["R"])}
    if method == "newton":  # each try of a step (halvings included) is one query, after
        # the query at theta = 0 and, for Poisson, the one at the intercept's start
        return {"sums": int(s["K"]) * (NEWTON_HALVINGS + 1) + 2}
    return {"newton_avg": 1, "newton": 1}


# ---------------------------------------------------------------------- the site
class GLMSite(DesignSite):
    """One site of a federated GLM fit: holds its rows, answers the GLM messages.

    Parameters
    ----------
    data : DataFrame
        The site's table.
    name : str
        The site's name.
    seed : int, SeedSequence or None
        Seed of the site's own noise generator (and of its FedNewton sample split).
        :func:`fit_glm` derives one per site from the user's seed.
    """

    def __init__(
        self,
        data: pd.DataFrame,
        name: str = "site",
        seed: int | np.random.SeedSequence | None = None,
    ) -> None:
        super().__init__(data, name)
        self._rng = np.random.default_rng(seed)
        self._parts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, float]] = {}
        #: Per part, the rows' offsets and prior weights (None where the fit has none).
        self._extras: dict[str, tuple[np.ndarray | None, np.ndarray | None]] = {}
        self.family = ""
        self.method = ""
        self.clip = math.inf
        self.mu: float | None = None
        self.tau1 = DEFAULT_TAU1
        self.settings: dict[str, float] = {}
        #: Noise sd of each stage (empty without privacy), from :func:`noise_scales`.
        self.sigmas: dict[str, float] = {}
        #: Releases left per stage; a request beyond them is refused.
        self.releases_left: dict[str, int] = {}
        #: Every Gaussian draw added, per stage (for tests of the mechanism).
        self.noise_log: dict[str, list[np.ndarray]] = {}
        #: Whether to keep :attr:`noise_log` (off by default: it grows with the rounds).
        self.log_noise = False
        self._clip_fixed = False
        #: The declared largest prior weight w_max of a private fit with weights (1
        #: otherwise): a row's clipped gradient times its weight has norm at most
        #: w_max B, so every noise scale is that of the clip w_max B.
        self.weight_bound = 1.0

    def handlers(self) -> dict[str, Callable[[Message], Message]]:
        """Message type -> method answering it."""
        return {
            **super().handlers(),
            "glm_configure": self._configure,
            "glm_clip": self._clip,
            "glm_gradient": self._gradient,
            "glm_local": self._local,
            "glm_newton": self._newton,
            "glm_check": self._check,
            "glm_fisher": self._fisher,
            "glm_sums": self._sums,
        }

    # -------------------------------------------------------------- configure
    def _configure(self, msg: Message) -> Message:
        if self.builder is None:
            raise ProtocolError(f"{self.name}: glm_configure before the moments round")
        st = Standardization(msg.arrays["means"], msg.arrays["sds"], np.zeros(0, np.int64))
        self.family = str(msg.config["family"])
        self.method = str(msg.config["method"])
        self.settings = {k: float(v) for k, v in json.loads(str(msg.config["settings"])).items()}
        self.tau1 = float(msg.config["tau1"])
        self.mu = float(msg.config["mu"]) if float(msg.config["mu"]) > 0 else None
        if self.method == "newton" and self.mu is not None:
            raise ProtocolError(
                f"{self.name}: method 'newton' sends exact sums each round and has no "
                "private form; a private fit uses fedsgd, fedhybrid, fedavg or fednewton"
            )
        x = self.builder.matrix(st)
        y = self.builder.target()
        check_target(self.family, y, self.name, str(self.builder.spec.target))
        off, pw = self.builder.offset(), self.builder.weights()
        declared = float(msg.config.get("max_weight", 0.0))
        self.weight_bound = 1.0
        if pw is not None and self.mu is not None:
            if not (math.isfinite(declared) and declared > 0):
                raise ProtocolError(
                    f"{self.name}: prior weights in a private fit need a declared largest "
                    "weight (max_weight): a row's weight scales its gradient, and the noise "
                    "is calibrated to the largest"
                )
            over = pw > declared
            if over.any():
                raise DesignError(
                    f"{self.name}: weights column {self.builder.spec.weights!r} has "
                    f"{int(over.sum())} value(s) above the declared max weight {declared:g} "
                    "the privacy noise is calibrated to: declare a larger max_weight "
                    "(--max-weight), or cap those weights"
                )
            self.weight_bound = declared
        xnorm = np.sqrt(np.einsum("ij,ij->i", x, x))
        # with privacy the sites' means are over their row counts (public); the
        # weights' sums would be an exact release outside the guarantee
        exact = pw is not None and self.mu is None
        total = float(pw.sum()) if exact and pw is not None else float(self.n_rows)
        self._parts = {"all": (x, y, xnorm, total)}
        self._extras = {"all": (off, pw)}
        if self.method == "fednewton":
            perm = self._rng.permutation(self.n_rows)
            half = self.n_rows // 2
            for part, idx in (("first", perm[:half]), ("second", perm[half:])):
                size = float(pw[idx].sum()) if exact and pw is not None else float(len(idx))
                self._parts[part] = (np.ascontiguousarray(x[idx]), y[idx], xnorm[idx], size)
                self._extras[part] = (
                    None if off is None else off[idx],
                    None if pw is None else pw[idx],
                )
        self.releases_left = _release_plan(self.method, self.settings)
        if int(msg.config.get("separation_check", 0)):
            self.releases_left["check"] = 1
        if self.mu is None:  # the standard errors' round: only in a fit without privacy
            self.releases_left["fisher"] = 1
        self._clip_fixed = False
        self.noise_log = {k: [] for k in self.releases_left}
        reply = {"n_rows": np.array([self.n_rows], dtype=np.int64)}
        if int(msg.config.get("weight_sum", 0)) != int(exact):
            raise ProtocolError(
                f"{self.name}: glm_configure must ask for the weights' sum exactly when the "
                "design has prior weights and the fit no privacy"
            )
        if exact:  # the server averages the sites by their weights' sums
            reply["weight_sum"] = np.array([total])
        p = int(msg.config.get("null_space", 0))
        if p > 0:
            if p != x.shape[1]:
                raise ProtocolError(
                    f"{self.name}: the site's design has {x.shape[1]} columns, the "
                    f"coordinator fits {p}"
                )
            reply["null"] = null_projector(x, small=self.mu is None)
        if int(msg.config.get("near_space", 0)) > 0:  # a private fit's near-collinearity check
            if self.mu is None:
                raise ProtocolError(
                    f"{self.name}: the near-collinearity directions are a private fit's check "
                    "(without privacy the standard errors' round has it)"
                )
            reply["near"] = near_projector(x, self.builder.spec.intercept)
        return Message("glm_configure", reply)

    def _parts_names(self) -> list[str]:
        return list(self._parts)

    # -------------------------------------------------------------- state
    def export_state(self) -> dict[str, Any]:
        """What this site must remember between messages when each message is answered
        by a fresh process (Flower's ClientApp): its generator's state, the releases
        left in its plan and the fit's clipping bound, as JSON-ready values.

        The rows, the design, the configuration and the FedNewton split are not in it:
        they follow from the site's table and seed by replaying the requests that set
        them (:mod:`fits.deploy.flower`).  The state never leaves the site: it holds
        the generator of the site's noise, so a server that read it could subtract the
        noise.
        """
        return {
            "rng": self._rng.bit_generator.state,
            "releases_left": dict(self.releases_left),
            "clip": None if math.isinf(self.clip) else self.clip,
            "clip_fixed": self._clip_fixed,
        }

    def restore_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`export_state`: the next noise draw, release check and
        clipping bound are those the exporting site would have used."""
        self._rng.bit_generator.state = state["rng"]
        self.releases_left = {str(k): int(v) for k, v in state["releases_left"].items()}
        self.clip = math.inf if state["clip"] is None else float(state["clip"])
        self._clip_fixed = bool(state["clip_fixed"])
        if self._clip_fixed and self.method:
            self._set_clip(self.clip)

    def _set_clip(self, clip: float) -> None:
        self.clip = float(clip)
        if self.mu is not None:
            bound = self.clip * self.weight_bound  # a row's gradient: norm <= w_max B
            self.sigmas = noise_scales(
                self.method, self.settings, bound, self.mu, self.n_rows, self.tau1
            )

    def _clip(self, msg: Message) -> Message:
        """The paper's data-driven clipping rule, this site's part: the quantile of
        its per-row gradient norms at theta (sec. 4.1)."""
        x, y, _, _ = self._data()
        theta = msg.arrays["theta"]
        off, _ = self._extra()  # B bounds the gradient before its weight
        grads = clipped_gradients(self.family, x, y, theta, math.inf, off)
        norms = np.linalg.norm(grads, axis=1)
        q = float(np.quantile(norms, float(msg.config["quantile"])))
        return Message("glm_clip", {"b": np.array([q])})

    def _data(self, part: str = "all") -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Design, target, row norms and row count (with weights: the weights' sum) of
        all rows or of one half."""
        if part not in self._parts:
            raise ProtocolError(f"{self.name}: GLM request before glm_configure")
        return self._parts[part]

    def _extra(self, part: str = "all") -> tuple[np.ndarray | None, np.ndarray | None]:
        """Offsets and prior weights of all rows or of one half (None: none)."""
        self._data(part)
        return self._extras[part]

    def _release(self, msg: Message, stage: str) -> None:
        """Accept one release of ``stage``: within the plan, at the fit's one clipping
        bound (it rides on every request; the first release fixes it and the noise)."""
        left = self.releases_left.get(stage, 0)
        if left <= 0:
            raise ProtocolError(
                f"{self.name}: no {stage!r} release left in the plan it was configured with "
                "(the privacy budget would be exceeded)"
            )
        clip = float(msg.config["clip"])
        if not self._clip_fixed:
            if self.mu is not None and not (math.isfinite(clip) and clip > 0):
                raise ProtocolError(f"{self.name}: a private fit needs a finite clipping bound")
            self._set_clip(clip)
            self._clip_fixed = True
        elif clip != self.clip:
            raise ProtocolError(f"{self.name}: the clipping bound changed during the fit")
        self.releases_left[stage] = left - 1

    def _noise(self, stage: str, p: int) -> np.ndarray:
        if self.mu is None:
            return np.zeros(p)
        z = self._rng.standard_normal(p) * self.sigmas[stage]
        if self.log_noise:
            self.noise_log[stage].append(z)
        return z

    def local_plan(self, stage: str) -> tuple[str, int, float]:
        """(part, steps, step size) of a local run: the site's own plan sets them (a
        server asking for more steps would spend more budget)."""
        if stage == "hybrid1":
            return "all", int(self.settings["K1"]), self.settings["eta1"]
        return (
            ("first" if stage == "newton_avg" else "all"),
            int(self.settings["K"]),
            (self.settings["eta"]),
        )

    # -------------------------------------------------------------- releases
    def _gradient(self, msg: Message) -> Message:
        """Algorithm 1 (and stage II of Algorithm 2): g~_i = mean clipped gradient +
        sigma_i Z."""
        stage = str(msg.config["stage"])
        self._release(msg, stage)
        theta = np.asarray(msg.arrays["theta"], dtype=np.float64)
        g = site_gradient(self.family, *self._data(), theta, self.clip, *self._extra())
        return Message("glm_gradient", {"g": g + self._noise(stage, g.size)})

    def _local(self, msg: Message) -> Message:
        """K private local steps theta <- theta - eta mean g(theta) + sigma Z
        (Algorithm 2 stage I, Algorithm 3, Algorithm 4's FedAvg round on X1)."""
        stage = str(msg.config["stage"])
        self._release(msg, stage)
        part, k, eta = self.local_plan(stage)
        theta = np.asarray(msg.arrays["theta"], dtype=np.float64)
        out = site_descent(
            self.family,
            *self._data(part),
            theta,
            self.clip,
            k,
            eta,
            lambda: self._noise(stage, theta.size),
            *self._extra(part),
        )
        return Message("glm_local", {"theta": out})

    def _newton(self, msg: Message) -> Message:
        """Algorithm 4's local step: theta - H(theta; X1)^-1 g(theta; X2) + 2 B_new /
        (mu n_i) Z, the Hessian's eigenvalues floored at tau1 when private."""
        self._release(msg, "newton")
        theta = np.asarray(msg.arrays["theta"], dtype=np.float64)
        x1, _, _, n1 = self._data("first")
        g2 = site_gradient(
            self.family, *self._data("second"), theta, self.clip, *self._extra("second")
        )
        floor = self.tau1 if self.mu is not None else None
        step = site_newton_step(self.family, x1, n1, g2, theta, floor, *self._extra("first"))
        return Message("glm_newton", {"theta": theta - step + self._noise("newton", theta.size)})

    def _check(self, msg: Message) -> Message:
        """The separation check (once, if the plan it was configured with has it):
        per class, the extremes of each design column and of x'theta."""
        if self.releases_left.get("check", 0) <= 0:
            raise ProtocolError(
                f"{self.name}: no separation check in the plan it was configured with"
            )
        if self.family == "linear":
            raise ProtocolError(f"{self.name}: the separation check is for logistic and poisson")
        self.releases_left["check"] -= 1
        x, y, _, _ = self._data()
        theta = np.asarray(msg.arrays["theta"], dtype=np.float64)
        lo, hi = class_extremes(self.family, x, y, theta, *self._extra())
        return Message("glm_check", {"lo": lo, "hi": hi})

    def _fisher(self, msg: Message) -> Message:
        """The standard errors' round (once, and only in a fit without privacy): the
        site's Fisher information X'W(theta)X at the final estimate (upper triangle),
        with config ``dispersion`` its residual sum of squares (linear), with
        ``robust`` its sum of per-row score outer products (the sandwich's meat)."""
        if self.mu is not None:
            raise ProtocolError(
                f"{self.name}: no Fisher information in a private fit (it would be an exact "
                "release outside the privacy guarantee)"
            )
        if self.releases_left.get("fisher", 0) <= 0:
            raise ProtocolError(f"{self.name}: the Fisher information was sent already")
        self.releases_left["fisher"] -= 1
        x, y, _, _ = self._data()
        off, pw = self._extra()
        theta = np.asarray(msg.arrays["theta"], dtype=np.float64)
        out = site_fisher(
            self.family,
            x,
            y,
            theta,
            dispersion=bool(int(msg.config.get("dispersion", 0))),
            robust=bool(int(msg.config.get("robust", 0))),
            off=off,
            pw=pw,
        )
        return Message("glm_fisher", out)

    def _sums(self, msg: Message) -> Message:
        """One round of method ``newton`` (no privacy): the site's summed loss,
        gradient and Hessian at theta (:func:`site_sums`)."""
        if self.mu is not None or self.method != "newton":
            raise ProtocolError(
                f"{self.name}: glm_sums is method 'newton''s round, in a fit without "
                f"privacy; this site was configured for {self.method!r}"
                + (" with privacy" if self.mu is not None else "")
            )
        self._release(msg, "sums")
        x, y, _, _ = self._data()
        theta = np.asarray(msg.arrays["theta"], dtype=np.float64)
        return Message("glm_sums", site_sums(self.family, x, y, theta, *self._extra()))


class GLMSiteBatch:
    """Many :class:`GLMSite` answered together, for simulations (the benchmark).

    Every site keeps its own rows, generator, release plan and noise scales (each
    release is accepted and each noise vector drawn by the site itself, in the same
    order as alone); only the arithmetic of a round runs once for all sites, on their
    rows stacked and padded with zero rows (:func:`site_gradient`,
    :func:`site_descent`, :func:`site_newton_step`, the functions each site uses
    alone).  The replies equal the sites' own replies (tested).

    Parameters
    ----------
    sites : sequence of GLMSite
    """

    def __init__(self, sites: Sequence[GLMSite]) -> None:
        self.sites = list(sites)
        self._stacks: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        #: Per part, the stacked offsets and prior weights (zero-padded; None: none).
        self._extras: dict[str, tuple[np.ndarray | None, np.ndarray | None]] = {}

    def _stack(self) -> None:
        self._stacks = {}
        for part in self.sites[0]._parts_names():
            data = [s._data(part) for s in self.sites]
            r = max(d[0].shape[0] for d in data)
            p = data[0][0].shape[1]
            x = np.zeros((len(data), r, p))
            y = np.zeros((len(data), r))
            xn = np.zeros((len(data), r))
            for i, (xi, yi, ni, _) in enumerate(data):
                x[i, : len(yi)], y[i, : len(yi)], xn[i, : len(yi)] = xi, yi, ni
            n = np.array([d[3] for d in data], dtype=np.float64)
            self._stacks[part] = (x, y, xn, n)
            extras: list[np.ndarray | None] = []
            for k in range(2):  # offsets, weights: padded rows 0 (a zero row adds nothing)
                cols = [s._extra(part)[k] for s in self.sites]
                if any(c is None for c in cols):
                    extras.append(None)
                    continue
                z = np.zeros((len(data), r))
                for i, c in enumerate(cols):
                    assert c is not None
                    z[i, : len(c)] = c
                extras.append(z)
            self._extras[part] = (extras[0], extras[1])

    def handle_all(self, messages: Sequence[Message]) -> list[Message]:
        """Answer one round: message k to site k."""
        mtype = messages[0].type
        sites = self.sites
        if mtype not in ("glm_gradient", "glm_local", "glm_newton"):
            replies = [s.handle(m) for s, m in zip(sites, messages, strict=True)]
            if mtype == "glm_configure":
                self._stack()
            return replies
        theta = np.vstack([np.asarray(m.arrays["theta"], dtype=np.float64) for m in messages])
        family, p = sites[0].family, theta.shape[1]
        stage = str(messages[0].config.get("stage", "newton"))
        for s, m in zip(sites, messages, strict=True):
            s._release(m, stage)
        clip = sites[0].clip

        def noise() -> np.ndarray:
            return np.vstack([s._noise(stage, p) for s in sites])

        if mtype == "glm_gradient":
            out = site_gradient(family, *self._stacks["all"], theta, clip, *self._extras["all"])
            out = out + noise()
            return [Message(mtype, {"g": g}) for g in out]
        if mtype == "glm_local":
            part, k, eta = sites[0].local_plan(stage)
            out = site_descent(
                family, *self._stacks[part], theta, clip, k, eta, noise, *self._extras[part]
            )
            return [Message(mtype, {"theta": t}) for t in out]
        x1, _, _, n1 = self._stacks["first"]
        g2 = site_gradient(family, *self._stacks["second"], theta, clip, *self._extras["second"])
        floor = sites[0].tau1 if sites[0].mu is not None else None
        step = site_newton_step(family, x1, n1, g2, theta, floor, *self._extras["first"])
        out = theta - step + noise()
        return [Message(mtype, {"theta": t}) for t in out]


class BatchTransport(Transport):
    """A :class:`Transport` to a :class:`GLMSiteBatch`: every round is answered by the
    batch at once; replies are checked and counted per site as by any transport."""

    def __init__(self, sites: Sequence[GLMSite], *, validate: bool = True) -> None:
        super().__init__([s.name for s in sites], validate=validate)
        self.batch = GLMSiteBatch(sites)

    def _deliver(self, client: int, message: Message) -> Message:
        return self.batch.sites[client].handle(message)

    def _deliver_all(self, messages: Sequence[Message]) -> list[Message]:
        return self.batch.handle_all(messages)


# ---------------------------------------------------------------------- coordinator
@dataclass
class _Run:
    """Coordinator state of one fit: the transport, weights, rounds."""

    transport: Transport
    weights: np.ndarray
    clip: float
    #: The GLM family (``newton`` starts a Poisson fit at the log of the target's mean).
    family: str = ""
    #: Whether the design's first column is the intercept.
    intercept: bool = True
    rounds: int = 0
    #: What the algorithm reports beyond theta (``newton``: ``converged``).
    extra: dict[str, Any] = field(default_factory=dict)
    #: The method and the per-site mu (None: no privacy), for the divergence error.
    method: str = ""
    mu: float | None = None
    #: ``on_round(done, total)`` after every fitting round (:func:`fit_glm`), or None.
    on_round: Callable[[int, int], None] | None = None
    #: The fitting rounds planned (:func:`planned_rounds`; ``newton``: at most).
    planned: int = 0

    def tick(self) -> None:
        """Report the fitting rounds done so far to :attr:`on_round`, with the planned
        total (or the rounds done, where step halvings ran past it)."""
        if self.on_round is not None:
            self.on_round(self.rounds, max(self.planned, self.rounds))

    def exchange(self, mtype: str, theta: np.ndarray, **config: Any) -> list[np.ndarray]:
        msg = Message(
            mtype, {"theta": np.asarray(theta, dtype=np.float64)}, {"clip": self.clip, **config}
        )
        replies = self.transport.broadcast(msg)
        self.rounds += 1
        self.tick()
        key = {"glm_gradient": "g"}.get(mtype, "theta")
        return [r.arrays[key] for r in replies]

    def average(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        out = np.einsum("i,ij->j", self.weights, np.vstack(arrays))
        if not np.all(np.isfinite(out)):
            raise self.diverged()
        return out

    def diverged(self, size: float | None = None) -> DesignError:
        """The error of an iterate that is no longer a finite number, or (``size``, a
        Poisson fit's) whose largest coefficient is past :data:`MAX_EXP_COEFFICIENT`
        (never returned as coefficients)."""
        head = (
            f"the {self.method} iterate is no longer a finite number after {self.rounds} "
            "fitting round(s), so there are no coefficients to report"
        )
        if size is not None:
            head = (
                f"the {self.method} iterate has a coefficient of {size:.3g} (standardized "
                f"design) after {self.rounds} fitting round(s); past "
                f"{MAX_EXP_COEFFICIENT:g} a {self.family} model's mean changes by more "
                "than float64 holds within one standard deviation of a feature, so there "
                "are no coefficients to report"
            )
        if self.mu is not None:
            newton = self.method == "fednewton"
            return DesignError(
                f"{head}: at mu = {self.mu:.4g} and clip B = {self.clip:.4g} the privacy "
                "noise (its sd grows as B / mu"
                + (", the Newton step's also as 1 / tau1" if newton else "")
                + ") is beyond floating point; give a larger budget (mu=, epsilon=; fits "
                "analyze --mu / --epsilon) or a smaller clip (clip=; --clip)"
                + (", or a larger tau1 (tau1=; --tau1)" if newton else "")
            )
        return DesignError(
            f"{head}: the iterations diverged; give a smaller step size (eta=; fits "
            "analyze --step) or fit with method newton"
        )

    def saturated_away(self, end: float, begin: float) -> DesignError:
        """The error of a fit without privacy whose Fisher information is singular at
        its end and whose summed negative log-likelihood ``end`` exceeds ``begin``, the
        start theta = 0's (:func:`_saturated_away`)."""
        head = (
            f"the {self.method} estimate ended with a negative log-likelihood of "
            f"{end:.6g} (summed over the sites) against {begin:.6g} at its start theta = 0, "
            f"after {self.rounds} fitting round(s), and a singular Fisher information "
            "(fitted values saturated at the family's bounds): it has moved away from the "
            "maximum-likelihood estimate instead of towards it"
        )
        return self._diverged(head)

    def moved_away(self, distance: float, start: float) -> DesignError:
        """The error of a fit without privacy that ended farther from the pooled
        maximum-likelihood estimate than its start theta = 0 is (``distance`` and
        ``start`` in standard errors, :func:`_covariance`): its steps moved it away, so
        its coefficients are not returned (was: x1 = -3.4e117, exit 0, "run more
        iterations")."""
        times = f"{distance / start:.3g} times as far" if start > 0 else "farther"
        head = (
            f"the {self.method} estimate ended {times} from the pooled maximum-likelihood "
            f"estimate (Fisher metric) as its start theta = 0: after {self.rounds} fitting "
            "round(s) it has moved away from the estimate instead of towards it"
        )
        return self._diverged(head)

    def _diverged(self, head: str) -> DesignError:
        """``head`` with the cause (a step too large) and the fix."""
        if self.method == "fedhybrid":
            fix = "give smaller step sizes (eta1=, eta2=; fits analyze --step)"
        else:
            fix = "give a smaller step size (eta=; fits analyze --step)"
        if self.method != "newton":
            fix += " or fit with method newton"
        return DesignError(f"{head}: the iterations diverged, the step is too large; {fix}")


def _fedsgd(
    run: _Run,
    theta: np.ndarray,
    s: Mapping[str, float],
    stage: str = "fedsgd",
    steps: str = "K",
    eta: str = "eta",
) -> np.ndarray:
    """Algorithm 1: K server steps on the weighted noisy gradients."""
    for _ in range(int(s[steps])):
        theta = theta - s[eta] * run.average(run.exchange("glm_gradient", theta, stage=stage))
    return theta


def _fedhybrid(run: _Run, theta: np.ndarray, s: Mapping[str, float]) -> np.ndarray:
    """Algorithm 2: K1 local steps at each site, weighted average, K2 FedSGD steps."""
    local = run.exchange("glm_local", theta, stage="hybrid1")
    return _fedsgd(run, run.average(local), s, stage="hybrid2", steps="K2", eta="eta2")


def _fedavg(run: _Run, theta: np.ndarray, s: Mapping[str, float]) -> np.ndarray:
    """Algorithm 3: R rounds of K local steps, weighted average after each."""
    for _ in range(int(s["R"])):
        theta = run.average(run.exchange("glm_local", theta, stage="fedavg"))
    return theta


def _fednewton(run: _Run, theta: np.ndarray, s: Mapping[str, float]) -> np.ndarray:
    """Algorithm 4: one FedAvg round on the first halves, one local Newton step using
    the second halves' gradients, weighted average."""
    theta = run.average(run.exchange("glm_local", theta, stage="newton_avg"))
    return run.average(run.exchange("glm_newton", theta))


def _newton(run: _Run, theta: np.ndarray, s: Mapping[str, float]) -> np.ndarray:
    """Method ``newton`` (not in the paper; no privacy): Newton-Raphson on the pooled
    negative log-likelihood sum_i sum_r rho(x_r'theta, y_r), from the sites' summed
    losses, gradients and Hessians (``glm_sums``; one round per iteration).

    Its fixed point is the pooled maximum-likelihood estimate, which each of the
    paper's algorithms approaches only up to its own error (sec. 3; FedNewton's local
    Newton step keeps a federation bias).  The step H^-1 g is halved while it raises
    the pooled loss (at most :data:`NEWTON_HALVINGS` times; each try is a round); the
    iteration stops when the step's largest coordinate is at most :data:`NEWTON_TOL`
    times max(1, the estimate's largest) (the step is then taken without another
    round), when the loss is flat while the estimate still runs off
    (:data:`NEWTON_FLAT`: separation), or after ``K`` iterations; the last two with a
    :class:`GLMWarning`.
    """
    p = theta.size

    def query(t: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        msg = Message("glm_sums", {"theta": t}, {"clip": run.clip})
        replies = run.transport.broadcast(msg)
        run.rounds += 1
        run.tick()
        value = float(sum(float(r.arrays["loss"][0]) for r in replies))
        g = np.sum([r.arrays["score"] for r in replies], axis=0)
        h = sum(unpack_symmetric(r.arrays["info"], p) for r in replies)
        return value, g, np.asarray(h, dtype=np.float64)

    value, g, h = query(theta)
    run.extra["loss0"] = value
    start = _poisson_start(run.family, theta, g, h) if run.intercept else None
    if start is not None:  # the intercept alone at its MLE: a lower loss than theta = 0
        theta = start
        value, g, h = query(theta)
    for _ in range(int(s["K"])):
        if not (math.isfinite(value) and np.all(np.isfinite(g)) and np.all(np.isfinite(h))):
            break
        try:
            with warnings.catch_warnings():
                # nearly singular: coefficients running off under separation; go on,
                # the separation check and the not-converged warning say so
                warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
                step = scipy.linalg.solve(h, g, assume_a="pos")
        except (np.linalg.LinAlgError, ValueError):
            step = np.linalg.lstsq(h, g, rcond=None)[0]
        size = float(np.max(np.abs(theta), initial=0.0))
        if float(np.max(np.abs(step), initial=0.0)) <= NEWTON_TOL * max(1.0, size):
            run.extra["converged"] = True
            return theta - step
        if float(np.max(np.abs(step))) >= 1.0 and float(g @ step) / 2.0 <= NEWTON_FLAT * max(
            1.0, abs(value)
        ):
            # the loss would fall by less than double precision can tell, yet the
            # estimate still moves: it runs off to infinity (separation)
            run.extra["converged"], run.extra["flat"] = False, True
            return theta - step
        t = 1.0
        for _ in range(NEWTON_HALVINGS + 1):
            trial = theta - t * step
            new = query(trial)
            if new[0] <= value + 1e-12 * abs(value):
                break
            t /= 2.0
        else:  # no halving lowered the loss: theta is as good as the sums can tell
            run.extra["stuck"] = True
            break
        theta, (value, g, h) = trial, new
    run.extra["converged"] = False
    return theta


def _poisson_start(
    family: str, theta: np.ndarray, g: np.ndarray, h: np.ndarray
) -> np.ndarray | None:
    """Where ``newton`` starts a Poisson fit: the intercept at log(ybar), the other
    coefficients 0 (the minimum of the pooled loss along the intercept, as the numeric
    features are centred), from the first round's sums at theta = 0 (``g[0]`` =
    N - sum y, ``h[0, 0]`` = N); None for another family, another theta, or a target
    that is 0 in every row.  From theta = 0 a target in the trillions (log ybar = 30)
    sends the full Newton step to exp(1e13) and 30 halvings do not bring it back: the
    fit stayed at 0."""
    if family != "poisson" or np.any(theta != 0.0) or not h[0, 0] > 0:
        return None
    n = float(h[0, 0])
    ybar = (n - float(g[0])) / n
    if not (math.isfinite(ybar) and ybar > 0):
        return None
    start = np.zeros_like(theta)
    start[0] = math.log(ybar)
    return start


def planned_rounds(method: str, settings: Mapping[str, float], poisson_start: bool = False) -> int:
    """The fitting rounds of ``method`` under ``settings`` (:func:`glm_settings`): the
    total that :func:`fit_glm`'s ``on_round`` reports.

    FedSGD ``K``; FedHybrid ``1 + K2`` (its ``K1`` local steps are one round); FedAvg
    ``R``; FedNewton 2; ``newton`` at most ``1 + K`` (one more with ``poisson_start``: a
    Poisson fit's start at the intercept's estimate), which step halvings can exceed
    and convergence usually cuts short.  The setup rounds (schema, standardization,
    configuration, clipping bound) and the rounds after the fit (separation check,
    standard errors) are not among them.
    """
    if method == "fedsgd":
        return int(settings["K"])
    if method == "fedhybrid":
        return 1 + int(settings["K2"])
    if method == "fedavg":
        return int(settings["R"])
    if method == "fednewton":
        return 2
    return 1 + int(settings["K"]) + int(poisson_start)


#: Method name -> coordinator algorithm (the table the CLI dispatches on).
METHODS: dict[str, Callable[[_Run, np.ndarray, Mapping[str, float]], np.ndarray]] = {
    "fedsgd": _fedsgd,
    "fedhybrid": _fedhybrid,
    "fedavg": _fedavg,
    "fednewton": _fednewton,
    "newton": _newton,
}


#: ``cov_type`` values of :func:`fit_glm` (None: no standard errors).
COV_TYPES = ("nonrobust", "HC0", None)

#: Why a private fit has no standard errors (:attr:`GLMResults.bse`).
PRIVATE_NOTE = (
    "standard errors are not available for a private fit: model-based ones need each "
    "site's Fisher information X'WX at the estimate, an exact release outside the "
    "privacy guarantee, and even with it they would leave out the variance of the "
    "privacy noise in the estimate, which the paper bounds (the mean-squared-error "
    "bounds of Theorems 3.2-3.9, up to unspecified constants) but does not give, so "
    "no interval built from them would have its stated coverage; fit without privacy "
    "for standard errors"
)


#: A fit whose estimate lies farther than this many standard errors (in the Fisher
#: metric) from the pooled maximum-likelihood estimate gets a :class:`GLMWarning`.
MLE_DISTANCE_WARN = 0.1


#: FedAvg and FedNewton without privacy count as diverged only when their estimate is
#: more than this many times as far from the pooled MLE as the start theta = 0: their
#: federation bias alone can put them farther than the start (:func:`_moved_away`).
MOVED_AWAY_BIASED = 1000.0


def _moved_away(method: str, distance: float, start: float) -> bool:
    """Whether a fit without privacy ended farther from the pooled maximum-likelihood
    estimate than its start theta = 0 (``distance`` and ``start`` in standard errors at
    the estimate, :func:`_covariance`), i.e. its steps moved it away: its step is too
    large.

    ``newton``, FedSGD and FedHybrid converge to the MLE without noise, and a stable
    gradient step of a linear fit never increases the distance in the Fisher metric
    (each step multiplies the error by I - eta X'X / n, a contraction in that metric): an
    estimate farther than the start, and more than :data:`MLE_DISTANCE_WARN` standard
    errors from the MLE (closer it has arrived, whatever the start), has diverged.
    FedAvg and FedNewton converge to a point off the MLE (the federation bias of the
    paper's sec. 3, measured at 1.9-3.7 standard errors), which on a target the features
    hardly explain (the MLE near 0) is farther than the start (FedNewton at its default
    step: 1.3 times as far on a pure-noise target): for them only a ratio ``distance /
    start`` above :data:`MOVED_AWAY_BIASED` counts, with ``distance`` above 1 standard
    error (diverged runs measured 1e13 to 1e15 times).  The ratio is free of the scale:
    a diverged linear fit's residual variance, hence its standard errors, are
    astronomically large, and both distances are measured in them.  A choice, not the
    paper's: the paper runs its methods with privacy, where this check is not made.
    """
    if method in ("fedavg", "fednewton"):
        return distance > 1.0 and distance > MOVED_AWAY_BIASED * start
    return distance > max(start, MLE_DISTANCE_WARN)


def _saturated_away(end: float, begin: float) -> bool:
    """Whether a fit without privacy whose Fisher information is singular at its end
    (:func:`_covariance` gives no metric) ended with a larger summed negative
    log-likelihood than its start theta = 0 had (``end``, ``begin``: summed over the
    sites, from the ``glm_fisher`` replies).

    No separation was found (else no ``glm_fisher`` round is run), so the
    maximum-likelihood estimate is finite and its information nonsingular: an estimate
    of saturated fitted probabilities (``x'theta`` of 1e5: W = p (1 - p) underflows to
    0) is far from it, and one whose loss exceeds the start's has moved away (a logistic
    FedSGD at step 1e6 ended at coefficients of 2e5, with exit 0 and "no standard
    errors").  Every method's end lies at or near a minimizer, whose loss is below the
    start's; a relative slack of 1e-9 keeps float rounding of equal losses from
    counting.  A choice, not the paper's (its methods run with privacy, unchecked).
    """
    return not math.isfinite(end) or end > begin + 1e-9 * abs(begin)


#: A feature whose variance inflation factor (below) reaches this gets a
#: :class:`GLMWarning`: R^2 >= 0.999 on the other features, its standard error at least
#: 31.6 times what it would be alone (statsmodels' summary warns on the design's
#: condition number above 1000 in the same spirit).
VIF_WARN = 1000.0


def variance_inflation(info: np.ndarray, names: Sequence[str]) -> pd.Series:
    """Each feature's variance inflation factor from the pooled Fisher information
    I = X'WX (W the family's Hessian weights at the estimate): VIF_j = 1 / (1 - R_j^2),
    R_j^2 of the W-weighted regression of feature j on the others and the intercept.

    With the intercept (column 0 named :data:`~fits.analysis.design.INTERCEPT`) the
    features are centred by the weighted means, C = I_xx - I_x0 I_0x / I_00 (the Schur
    complement; without an intercept C = I), and VIF_j = C_jj (C^-1)_jj, the classical
    identity for least squares (the diagonal of the inverse correlation matrix).  It
    uses only the information the coordinator already sums for the standard errors.
    Returns the factors indexed by feature (the intercept left out); inf where C is
    singular.
    """
    names = list(names)
    keep = [j for j, n in enumerate(names) if n != INTERCEPT]
    if not keep:
        return pd.Series(dtype=float)
    c = info[np.ix_(keep, keep)].astype(float)
    if INTERCEPT in names:
        k = names.index(INTERCEPT)
        cross = info[keep, k]
        c = c - np.outer(cross, cross) / info[k, k]
    d = np.sqrt(np.clip(np.diag(c), 1e-300, None))
    corr = c / np.outer(d, d)
    try:
        vif = np.diag(np.linalg.inv(corr))
    except np.linalg.LinAlgError:
        vif = np.full(len(keep), np.inf)
    return pd.Series(np.maximum(vif, 1.0), index=[names[j] for j in keep], name="vif")


def _inflation_note(info: np.ndarray, names: Sequence[str]) -> str | None:
    """The warning for features whose :func:`variance_inflation` reaches
    :data:`VIF_WARN` (None when none does)."""
    vif = variance_inflation(info, names)
    high = vif[vif >= VIF_WARN].sort_values(ascending=False)
    if high.empty:
        return None
    listed = ", ".join(f"{n!r} ({v:,.0f})" for n, v in high.items())
    return (
        f"nearly collinear features: {listed} are almost a linear function of the other "
        f"features (variance inflation factor >= {VIF_WARN:,.0f}: R^2 >= 0.999 on them), "
        "so their coefficients are poorly determined and their standard errors large; "
        "if they measure the same thing (a value in two units, a near copy), leave all "
        "but one of them out and fit again"
    )


def _covariance(
    replies: Sequence[Message],
    p: int,
    n_obs: int,
    linear: bool,
    robust: bool,
    theta: np.ndarray | None = None,
) -> tuple[np.ndarray | None, float | None, str | None, float | None, float | None]:
    """The coefficients' covariance from the ``glm_fisher`` replies at the estimate theta:
    (cov, scale, note, distance, start), cov None and a note saying why when it cannot be
    computed; distance: sqrt(g' I^-1 g / scale), g the pooled score at the estimate, the
    length in standard errors of the Newton step to the pooled maximum-likelihood
    estimate theta_hat = theta - I^-1 g; start: in the same metric, the distance
    sqrt(theta_hat' I theta_hat / scale) from the start theta = 0 to theta_hat (both
    exact for the linear family, whose loss is quadratic; for the others, those of the
    quadratic approximation of the loss at the estimate).  ``distance > start`` says the
    fit ended farther from the estimate it seeks than it began: it moved away."""
    info = sum(unpack_symmetric(r.arrays["info"], p) for r in replies)
    scale = 1.0
    if linear:
        if n_obs <= p:
            why = f"no standard errors: {n_obs} rows for {p} coefficients"
            return None, None, why, None, None
        scale = float(sum(float(r.arrays["rss"][0]) for r in replies)) / (n_obs - p)
    vals = np.linalg.eigvalsh(info)
    if not (np.all(np.isfinite(vals)) and vals[0] > 1e-12 * max(vals[-1], 1e-300)):
        why = (
            "no standard errors: the Fisher information at the estimate is singular or "
            "not finite (e.g. fitted probabilities of 0 or 1 under separation)"
        )
        return None, None, why, None, None
    inv = np.linalg.inv(info)
    inv = (inv + inv.T) / 2.0
    if robust:
        meat = sum(unpack_symmetric(r.arrays["meat"], p) for r in replies)
        cov = inv @ meat @ inv
    else:
        cov = scale * inv
    g = np.sum([r.arrays["score"] for r in replies], axis=0)
    # scale 0 (linear, residuals exactly 0): no standard error to measure it in (was: inf)
    distance = start = None
    if scale > 0:
        distance = math.sqrt(max(float(g @ inv @ g), 0.0) / scale)
        hat = (np.zeros(p) if theta is None else np.asarray(theta, dtype=np.float64)) - inv @ g
        start = math.sqrt(max(float(hat @ info @ hat), 0.0) / scale)
    return (cov + cov.T) / 2.0, scale, None, distance, start


# ---------------------------------------------------------------------- design checks
def _source(spec: DesignSpec, column: str) -> str:
    """The table column a design column comes from (``"g=b"`` -> ``"g"``)."""
    for name, levels in spec.nominal.items():
        if column in [f"{name}={'<missing>' if v is None else v}" for v in levels[1:]]:
            return name
    return column


def _relations(
    basis: np.ndarray, tol: float = 1e-8, member: float = math.sqrt(NULL_TOL)
) -> list[tuple[list[int], int]]:
    """A basis (p, d) of null vectors in reduced row echelon form, pivots on the last
    columns: per relation, the design columns it involves and its pivot.  Leaving out
    the pivot columns leaves a design of full rank (every null vector has a non-zero
    entry at some pivot)."""
    a = basis.T[:, ::-1].copy()
    d, p = a.shape
    out, row = [], 0
    for col in range(p):
        if row == d:
            break
        k = row + int(np.argmax(np.abs(a[row:, col])))
        if abs(a[k, col]) <= tol:
            continue
        a[[row, k]] = a[[k, row]]
        a[row] /= a[row, col]
        for r in range(d):
            if r != row:
                a[r] -= a[r, col] * a[row]
        row += 1
    # A column whose weight in a relation is below sqrt(NULL_TOL) of the largest is not
    # part of it: without that column the relation still holds to NULL_TOL (was: x2 named
    # with x1 and x3 = x1 + 1e-5 noise, its weight there 1e-7, of rounding)
    for r in range(row):
        nz = np.flatnonzero(np.abs(a[r]) > member * np.abs(a[r]).max())
        involved = sorted(p - 1 - j for j in nz)
        out.append((involved, p - 1 - int(nz[0])))
    return out


def _row_check(n_rows: np.ndarray, spec: DesignSpec, sites: Sequence[str]) -> None:
    """An error when the federation holds fewer rows in all than the design has
    columns: the pooled design's rank is then below p whatever the data (was: with
    every site below p rows, no site could tell, and the fit returned an arbitrary
    split with exit 0).  From the public row counts alone, before ``glm_configure``."""
    names = spec.feature_names
    p, total = len(names), int(np.sum(n_rows))
    if total >= p:
        return
    parts = ["the intercept"] if spec.intercept else []
    if spec.numeric:
        parts.append(f"{len(spec.numeric)} numeric feature(s)")
    wide = sorted(spec.nominal.items(), key=lambda kv: -len(kv[1]))
    for name, levels in wide:
        parts.append(f"{len(levels) - 1} one-hot column(s) of nominal {name!r}")
    many = [name for name, levels in wide if len(levels) - 1 >= total / 2]
    fix = (
        f"a nominal feature with a level in nearly every row ({', '.join(map(repr, many))}) "
        "is likely a number or an identifier: give it a numeric kind (kinds={"
        f"{many[0]!r}: 'continuous'}}, fits analyze --kind {many[0]}=continuous) or leave "
        "it out; else "
        if many
        else ""
    )
    counts = ", ".join(f"{n!r} {int(k)}" for n, k in zip(sites, n_rows, strict=True))
    raise DesignError(
        f"the model has more coefficients than the whole federation has rows: p = {p} "
        f"design columns ({', '.join(parts)}) but {total} row(s) in all ({counts}), so "
        f"the pooled design has rank at most {total} < {p} and no fit can identify the "
        f"coefficients; {fix}leave features out (features=, fits analyze --features) or "
        "fit on more rows"
    )


def _rank_check(
    nulls: Sequence[np.ndarray],
    n_rows: np.ndarray,
    spec: DesignSpec,
    method: str,
    sites: Sequence[str],
    private: bool = False,
) -> list[str]:
    """Collinearity from the sites' null-space projectors (``glm_configure``): an error
    when the pooled design is rank deficient (a null direction shared by every site;
    in a private fit, by every site with at least p rows, the others sending zeros);
    for FedNewton a warning when every site's design is rank deficient but the pooled
    one is not.  Returns the warnings' texts.

    The pooled X'X is the sum of the sites' X_k'X_k, so a direction is null in the
    pooled design exactly when it is null at every site, whatever their sizes.  Was:
    the sites with fewer than p rows were left out of every fit, and with every site
    below p rows nothing was checked (x1 and a copy of it split 0.221 / 0.221, exit 0).
    Without privacy those sites now send their null space too (see
    :func:`null_projector`)."""
    names = spec.feature_names
    p = len(names)
    used = [k for k, n in enumerate(n_rows) if n >= p or not private]
    if not used:
        return []
    total = np.sum([nulls[k] for k in used], axis=0)
    vals, vecs = np.linalg.eigh(total)
    common = vecs[:, vals >= len(used) * (1.0 - 1e-8)]
    if common.shape[1]:
        parts, drop = [], []
        for involved, pivot in _relations(common):
            group = [names[j] for j in involved]
            with_intercept = " and the intercept" if INTERCEPT in group else ""
            parts.append(f"{[n for n in group if n != INTERCEPT]}{with_intercept}")
            drop.append(_source(spec, names[pivot]))
        skipped = [sites[k] for k in range(len(n_rows)) if k not in used]
        raise DesignError(
            f"the features are collinear across the federation (the pooled design has rank "
            f"{p - common.shape[1]} < {p} columns): "
            + "; ".join(f"{part} are linearly dependent" for part in parts)
            + ", so their coefficients are not identified; leave out one column of each "
            f"group (e.g. {sorted(set(drop))}) and fit again"
            + (
                f" (site(s) {skipped}, with fewer rows than the {p} design columns, were "
                "not counted: in a private fit their null space would disclose the span of "
                "their rows; if their rows are what tells these columns apart, fit without "
                "privacy, which counts every site)"
                if skipped
                else ""
            )
        )
    if method != "fednewton" or len(used) < len(n_rows):
        return []
    if not all(np.trace(q) > 0.5 for q in nulls):
        return []
    local = {int(j) for q in nulls for j in np.flatnonzero(np.diag(q) > 1e-8)}
    cols = [names[j] for j in sorted(local) if names[j] != INTERCEPT]
    return [
        f"every site's own design is rank deficient, though the pooled one is not: at each "
        f"site {cols} are collinear with other columns (e.g. a feature constant within each "
        "site, or a category each site lacks). FedNewton's local Newton step uses one "
        "site's rows, whose Hessian is singular along those directions, so it leaves their "
        "coefficients where its FedAvg round put them; fedsgd or fedhybrid estimate them "
        "from the pooled gradient"
    ]


def _unchecked_rank_note(n_rows: np.ndarray, p: int, private: bool) -> str | None:
    """A private fit in which every site holds fewer rows than the p design columns:
    no site can say, without disclosing the span of its rows, whether the features are
    collinear across the federation, so the rank check (and the near-collinearity
    check) did not run: the warning's text (None otherwise)."""
    if not private or len(n_rows) == 0 or int(np.max(n_rows)) >= p:
        return None
    return (
        f"the features' collinearity was not checked: every site holds fewer rows than "
        f"the p = {p} design columns (at most {int(np.max(n_rows))}), so each site's own "
        "design is rank deficient whatever the data, and its null space would disclose "
        "the span of its rows, which a private fit does not send. If some features are "
        "linearly dependent across the federation (a copy of a column, a sum of others), "
        "their coefficients are not identified and a private fit sets them by its noise. "
        "To check: fit the same features once without privacy (no mu/epsilon; its check "
        "counts every site), or use fewer features (a site of at least p rows is checked)"
    )


def _near_check(
    nears: Sequence[np.ndarray], n_rows: np.ndarray, spec: DesignSpec, method: str
) -> list[str]:
    """A private fit's near-collinearity check, from the sites' ``near`` projectors
    (:func:`near_projector`): a warning for each group of design columns that is nearly
    collinear at every site with at least p rows (their projectors share a direction:
    an eigenvalue of their sum of at least :data:`NEAR_AGREE` times their number).
    Returns the warnings' texts (empty when there is none)."""
    names = spec.feature_names
    p = len(names)
    used = [k for k, n in enumerate(n_rows) if n >= p]
    if not used:
        return []
    vals, vecs = np.linalg.eigh(np.sum([nears[k] for k in used], axis=0))
    common = vecs[:, vals >= NEAR_AGREE * len(used)]
    if not common.shape[1]:
        return []
    groups, drop = [], []
    for involved, pivot in _relations(common, member=NEAR_MEMBER):
        groups.append([names[j] for j in involved if names[j] != INTERCEPT])
        drop.append(_source(spec, names[pivot]))
    where = "every site" if len(used) == len(n_rows) else "every site of at least p rows"
    how = {
        "fednewton": "its FedAvg round's few steps and the Hessian floor tau1",
        "fedavg": "its few local steps",
    }.get(method, "its few gradient steps")
    listed = "; ".join(map(str, groups))
    return [
        f"nearly collinear features at {where}: {listed} are almost linearly dependent in "
        f"each site's rows (a variance inflation factor of at least {PRIVATE_VIF_WARN:,.0f}"
        f" there: R^2 >= {1 - 1 / PRIVATE_VIF_WARN:g} on the other features). A private "
        "fit has no standard errors to show it: the coefficients of these columns are set "
        f"by the privacy noise and by {how}, not by the data, and only their combination is "
        "estimated. If they measure the same thing (a value in two units, a near copy), "
        f"leave all but one of each group out (e.g. {sorted(set(drop))}) and fit again. "
        "(Checked before any noisy round, from each site's nearly collinear directions, "
        "which the privacy guarantee does not cover.)"
    ]


def _separation_check(
    los: Sequence[np.ndarray], his: Sequence[np.ndarray], spec: DesignSpec, family: str
) -> list[str]:
    """Separation from the sites' ``glm_check`` replies: a design column (or the
    fitted linear predictor) whose values in the rows of one class all lie at or
    beyond its values in the other class's rows, pooled over the sites.  Returns the
    warnings' texts (empty when none is found; multivariate separation that the fitted
    predictor does not show is not detected)."""
    lo = np.min(los, axis=0)
    hi = np.max(his, axis=0)
    target = str(spec.target)
    one = "1" if family == "logistic" else "> 0"
    if family == "poisson" and not np.isfinite(lo[0, 0]):
        # no zero count: the Poisson MLE exists (the loss grows without bound in every
        # direction of a full-rank design); only a target 0 in every row has none
        return []
    if not (np.isfinite(lo[0, 0]) and np.isfinite(lo[1, 0])):
        value = "0" if np.isfinite(lo[0, 0]) else one
        return [
            f"target {target!r} is {value} in every row of every site: the maximum-likelihood "
            "estimate does not exist (the intercept diverges)"
        ]
    names = spec.feature_names
    onehot = {n for n in names if _source(spec, n) != n}
    tail = (
        "the maximum-likelihood estimate does not exist: the coefficients grow without "
        "bound as the iterations go on, and the values reported are where the iterations "
        "stopped, not estimates"
    )
    found = []
    for j, name in enumerate(names):
        if name == INTERCEPT:
            continue
        if family == "logistic":
            up, down = hi[0, j] <= lo[1, j], hi[1, j] <= lo[0, j]
            if not (up or down):
                continue
            strict = hi[0, j] < lo[1, j] if up else hi[1, j] < lo[0, j]
            kind = "complete" if strict else "quasi-complete"
            if name in onehot:
                if up and hi[0, j] == 0:
                    what = f"every row with {name} has {target} = 1"
                elif down and hi[1, j] == 0:
                    what = f"every row with {name} has {target} = 0"
                elif up:
                    what = f"every row with {target} = 1 has {name}"
                else:
                    what = f"every row with {target} = 0 has {name}"
            else:
                hi_cls, lo_cls = ("1", "0") if up else ("0", "1")
                what = (
                    f"every row with {target} = {hi_cls} has {name!r} at or above its value in "
                    f"every row with {target} = {lo_cls}"
                )
            found.append((name, f"{kind} separation by {name!r} ({what})"))
        else:  # Poisson: zero counts against positive counts on which the column is constant
            const = lo[1, j] == hi[1, j]
            if const and (hi[0, j] <= lo[1, j] or lo[0, j] >= hi[1, j]):
                what = (
                    f"every row with {name} has {target} = 0"
                    if name in onehot and lo[1, j] == 0
                    else f"{name!r} takes one value in the rows with {target} > 0 and lies on "
                    "one side of it in the rows with a zero count"
                )
                found.append((name, f"separation by {name!r} ({what})"))
    if found:
        cols = sorted({_source(spec, n) for n, _ in found})
        return [
            f"{text}: {tail}; leave {cols} out, merge rare categories, or fit a penalized model"
            for _, text in found
        ]
    j = len(names)  # the fitted linear predictor x'theta
    if family == "logistic" and hi[0, j] <= lo[1, j] and min(lo[:, j]) < max(hi[:, j]):
        return [
            f"the fitted linear predictor separates {target!r} across the sites (every row "
            f"with {target} = 1 has a fitted probability at or above every row with "
            f"{target} = 0): a combination of the features predicts the target perfectly, "
            f"so {tail}; leave out features, or fit a penalized model"
        ]
    return []


# ---------------------------------------------------------------------- results
def _fixed(v: float, width: int = 12, digits: int = 6) -> str:
    """A summary's number with ``digits`` significant digits (``g``: exponent notation
    below 1e-4 and from 10^digits on).  Was: six decimals, so a linear target in units
    of 1e-12 printed every coefficient, std err and interval as 0.000000 (and, before
    that, a coefficient of 1e140 with its 141 digits)."""
    return f"{v:{width}.{digits}g}" if width else f"{v: .{digits}g}"


def _digits(*values_and_se: float) -> int:
    """Significant digits for a coefficient and its interval's ends (the last argument
    the standard error): six, or as many as show the standard error's first three
    digits (a coefficient of 287569 with a std err of 0.05 and its interval
    287569.0 - 287569.1 would all read 287569), at most 15."""
    *values, se = (abs(float(v)) for v in values_and_se)
    top = max((v for v in values if math.isfinite(v)), default=0.0)
    if not (math.isfinite(se) and se > 0 and top > 0):
        return 6
    return int(min(15, max(6, math.ceil(math.log10(top / se)) + 3)))


def _wald(params: pd.Series, bse: Callable[[], pd.Series], alpha: float) -> pd.DataFrame:
    """Wald intervals params -/+ z_{1 - alpha/2} bse (columns 0 and 1); ``alpha``
    checked first, then ``bse()`` (which raises when there are no standard errors)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise GLMInferenceError(f"alpha must be a number in (0, 1), e.g. 0.05, got {alpha!r}")
    if not 0.0 < alpha < 1.0:
        raise GLMInferenceError(f"alpha must lie in (0, 1), got {alpha}")
    from scipy.stats import norm

    se = bse()
    z = float(norm.ppf(1.0 - alpha / 2.0))
    return pd.DataFrame({0: params - z * se, 1: params + z * se})


@dataclass
class GLMResults:
    """The result of :func:`fit_glm` (statsmodels-like).

    Attributes
    ----------
    params : Series
        The coefficients, indexed by design column (``"(intercept)"`` first); numeric
        features are on the standardized scale (see :attr:`standardization`).
        :attr:`original_params`, :attr:`original_bse`, :meth:`original_cov_params` and
        :meth:`original_conf_int` give them, and their inference, with the numeric
        features on their own scale (what statsmodels would give on the raw features).
    family, method : str
    privacy : PrivacySpent or None
        What the run spent (None without privacy).
    rounds : int
        Communication rounds (each a request to every site and its replies), the
        setup and standardization rounds included.
    uploaded_bytes, downloaded_bytes : int
        Payload bytes the sites sent / received over the whole run.
    clip : float
        The clipping bound B (``inf`` without privacy unless given).
    clip_data_driven : bool
        Whether B came from the paper's data-driven rule (not covered by the guarantee).
    settings : dict
        Iterations and step sizes used; ``tau1`` for FedNewton.
    n_obs : int
        N, the rows over all sites.
    n_rows : list of int
        Rows per site.
    spec : DesignSpec
    standardization : Standardization
    warnings : list of str
        What the checks found (each also raised as a :class:`GLMWarning`): separation,
        or a design that every site alone cannot estimate (FedNewton).
    cov : DataFrame or None
        The coefficients' estimated covariance (:meth:`cov_params`), None when there
        is none (:attr:`bse_note` says why).
    cov_type : str or None
        ``"nonrobust"`` (model-based: the inverse pooled Fisher information, times
        :attr:`scale`) or ``"HC0"`` (sandwich); None without standard errors.
    scale : float or None
        The dispersion: 1 for logistic and Poisson, RSS / (N - p) for linear (as
        statsmodels' GLM); None without standard errors.
    bse_note : str or None
        Why there are no standard errors (a private fit, ``cov_type=None``, a singular
        Fisher information); None when there are.
    mle_distance : float or None
        With standard errors: sqrt(g' I^-1 g / scale), g the pooled score at the
        estimate, the Newton step to the pooled maximum-likelihood estimate in standard
        errors (near 0 for a converged fit; above 0.1 a :class:`GLMWarning` says so).
    """

    params: pd.Series
    family: str
    method: str
    privacy: PrivacySpent | None
    rounds: int
    uploaded_bytes: int
    downloaded_bytes: int
    clip: float
    clip_data_driven: bool
    settings: dict[str, float]
    n_obs: int
    n_rows: list[int]
    spec: DesignSpec
    standardization: Standardization
    target: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    cov: pd.DataFrame | None = None
    cov_type: str | None = None
    scale: float | None = None
    bse_note: str | None = None
    mle_distance: float | None = None
    #: Whether the separation check (``glm_check``) ran.
    separation_checked: bool = False
    #: A private fit: whether the sites sent their nearly collinear directions
    #: (``check_collinearity``).
    near_checked: bool = False
    #: A private fit: a lower bound on each coefficient's privacy-noise standard
    #: deviation (:func:`noise_floor`); None without privacy.
    noise_floor: float | None = None
    #: Datetime feature -> the ``strftime`` format the sites read its text dates with
    #: (:meth:`fits.core.schema.Schema.date_formats`; ISO 8601 columns are not listed):
    #: :meth:`predict` reads new rows' text dates with it ("01/02/2024" as the sites read
    #: it, day first or month first).
    date_formats: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        """The :meth:`summary` (``print(res)``), as :class:`FedLSAResults` prints."""
        return self.summary()

    @property
    def n_dropped(self) -> list[int] | None:
        """Per site, the rows the fit left out for a missing value (``missing="drop"``;
        None with ``missing="raise"``, which leaves out none)."""
        d = self.standardization.n_dropped
        return None if self.spec.missing != "drop" or d is None else [int(v) for v in d]

    # -------------------------------------------------------------- inference
    def cov_params(self) -> pd.DataFrame:
        """The coefficients' estimated covariance (design scale), as statsmodels'
        ``cov_params()``.

        Raises
        ------
        GLMInferenceError
            No standard errors for this fit (the message says why: a private fit,
            ``cov_type=None``, a singular Fisher information).
        """
        if self.cov is None:
            raise GLMInferenceError(self.bse_note or "no standard errors for this fit")
        return self.cov

    @property
    def bse(self) -> pd.Series:
        """Standard errors of :attr:`params` (design scale): model-based (the inverse
        pooled Fisher information at the estimate, times :attr:`scale`) or the HC0
        sandwich, per :attr:`cov_type`.  Only for a fit without privacy
        (:class:`GLMInferenceError` otherwise, saying why)."""
        cov = self.cov_params()
        return pd.Series(np.sqrt(np.diag(cov.to_numpy())), index=self.params.index, name="bse")

    @property
    def tvalues(self) -> pd.Series:
        """z statistics params / bse (statsmodels' GLM name)."""
        return (self.params / self.bse).rename("z")

    @property
    def pvalues(self) -> pd.Series:
        """Two-sided p-values of the z statistics (normal reference, as statsmodels'
        GLM)."""
        from scipy.stats import norm

        return pd.Series(
            2.0 * norm.sf(np.abs(self.tvalues.to_numpy())), index=self.params.index, name="p"
        )

    def conf_int(self, alpha: float = 0.05) -> pd.DataFrame:
        """Wald intervals params -/+ z_{1 - alpha/2} bse, normal quantiles for every
        family (as statsmodels' GLM, linear included; OLS would use t with N - p degrees
        of freedom).  Columns ``0`` (lower) and ``1`` (upper), one row per coefficient.

        Raises
        ------
        GLMInferenceError
            No standard errors for this fit, or an ``alpha`` outside (0, 1).
        """
        return _wald(self.params, lambda: self.bse, alpha)

    @property
    def intercept_(self) -> float:
        """The intercept (design column ``"(intercept)"``)."""
        return float(self.params.iloc[0])

    @property
    def coef_(self) -> np.ndarray:
        """The coefficients without the intercept."""
        return self.params.to_numpy()[1:]

    @property
    def original_params(self) -> pd.Series:
        """The coefficients with the numeric features back on their own scale:
        theta_j / sd_j for a numeric feature, the intercept minus sum_j theta_j
        mean_j / sd_j (a post-processing of :attr:`params`: no privacy cost)."""
        values = self._to_original() @ self.params.to_numpy()
        return pd.Series(values, index=self.params.index, name=self.params.name)

    def _to_original(self) -> np.ndarray:
        """A with original_params = A params: the linear map of :attr:`original_params`."""
        return original_map(self.spec, self.standardization)

    def original_cov_params(self) -> pd.DataFrame:
        """:meth:`cov_params` with the numeric features on their own scale (as
        statsmodels would give on the raw features): A cov A', A the map of
        :attr:`original_params`.

        Raises
        ------
        GLMInferenceError
            As :meth:`cov_params`.
        """
        a = self._to_original()
        cov = a @ self.cov_params().to_numpy() @ a.T
        return pd.DataFrame((cov + cov.T) / 2.0, index=self.params.index, columns=self.params.index)

    @property
    def original_bse(self) -> pd.Series:
        """:attr:`bse` with the numeric features on their own scale: the square roots
        of the diagonal of :meth:`original_cov_params`, computed without forming it
        (``A cov A'`` overflows for a feature whose sd is below about 1e-154, where the
        per-unit standard error itself is still a float): per row of ``B = A D``
        (``D`` the standard errors, ``R`` the correlations), ``|B_i| sqrt(r_i R r_i')``
        with ``r_i = B_i / max|B_i|``."""
        cov = self.cov_params().to_numpy()
        sd = np.sqrt(np.diag(cov))
        safe = np.where(sd > 0, sd, 1.0)
        corr = cov / np.outer(safe, safe)
        b = self._to_original() * sd
        top = np.abs(b).max(axis=1)
        r = b / np.where(top > 0, top, 1.0)[:, None]
        diag = top * np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", r, corr, r), 0.0))
        return pd.Series(diag, index=self.params.index, name="bse")

    def original_conf_int(self, alpha: float = 0.05) -> pd.DataFrame:
        """:meth:`conf_int` with the numeric features on their own scale (Wald
        intervals around :attr:`original_params`)."""
        return _wald(self.original_params, lambda: self.original_bse, alpha)

    def design(self, frame: pd.DataFrame) -> np.ndarray:
        """The design matrix of new rows, with the fit's coding and standardization."""
        # a prediction per row: no row is left out (missing values are an error)
        spec = dataclasses.replace(
            self.spec, target=None, missing="raise", offset=None, exposure=None, weights=None
        )
        frame = labels_as_fitted(_read_new_rows(frame, spec, self.date_formats), spec)
        check_new_rows(frame, spec)  # errors in a prediction's words, not a site's
        return DesignBuilder(frame, spec, site="predict").matrix(self.standardization)

    def predict(self, frame: pd.DataFrame, *, linear: bool = False) -> np.ndarray:
        """Predicted means (probabilities for logistic) of new rows; ``linear=True``
        gives the linear predictor x'theta.  A model fitted with an offset (or
        exposure) column adds the new rows' own offset (log exposure), which they must
        hold: a Poisson model with exposure predicts the count over each row's
        exposure, as statsmodels' ``predict(exog, exposure=...)``."""
        eta = self.design(frame) @ self.params.to_numpy()
        column = self.spec.offset or self.spec.exposure
        if column is not None:
            if column not in frame.columns:
                what = "offset" if self.spec.offset is not None else "exposure"
                raise ValueError(
                    f"the model was fitted with the {what} column {column!r}, which the new "
                    "rows lack: add it (the linear predictor adds each row's "
                    f"{'offset' if what == 'offset' else 'log exposure'})"
                )
            only = DesignSpec(
                target=None, intercept=False, offset=self.spec.offset, exposure=self.spec.exposure
            )
            off = DesignBuilder(frame, only, site="predict").offset()
            assert off is not None
            eta = eta + off
        return eta if linear else _mean(self.family, eta)

    @property
    def privacy_scope(self) -> str | None:
        """What the privacy guarantee covers, and what the fit released exactly
        (docs/analysis.md, "What is released without noise"); None without privacy."""
        if self.privacy is None:
            return None
        exact = [
            "the setup round (row counts, categories, min/max)",
            "the standardization moments (each site's row count and its mean and sd of each "
            "numeric feature)",
        ]
        if self.spec.missing == "drop":  # the count alone: the rows themselves stay
            exact.append("each site's count of the rows it left out for a missing value")
        exact.append(
            "each site's design null space"
            + (" with its nearly collinear directions" if self.near_checked else "")
        )
        if self.clip_data_driven:
            exact.append("the clipping percentile")
        if self.separation_checked:
            exact.append("the separation check's per-class extremes")
        return (
            "the fitting rounds only; released exactly, outside it: "
            + ", ".join(exact[:-1])
            + f" and {exact[-1]}"
        )

    def to_dict(self, alpha: float = 0.05) -> dict[str, Any]:
        """JSON-ready (what ``fits analyze`` writes); with standard errors, ``bse``,
        ``pvalues`` and the ``conf_int`` at level 1 - ``alpha`` (else None, and
        ``bse_note`` says why)."""
        return {
            "family": self.family,
            "method": self.method,
            "target": self.target,
            "target_levels": [str(v) for v in self.spec.target_levels] or None,
            "params": {k: float(v) for k, v in self.params.items()},
            "original_params": {k: float(v) for k, v in self.original_params.items()},
            "privacy": self.privacy.to_dict() if self.privacy else None,
            "privacy_scope": self.privacy_scope,
            "rounds": self.rounds,
            "uploaded_bytes": self.uploaded_bytes,
            "downloaded_bytes": self.downloaded_bytes,
            "clip": None if not math.isfinite(self.clip) else self.clip,
            "clip_data_driven": self.clip_data_driven,
            "settings": self.settings,
            "n_obs": self.n_obs,
            "n_rows": self.n_rows,
            "missing": self.spec.missing,
            "n_dropped": self.n_dropped,
            "offset": self.spec.offset,
            "exposure": self.spec.exposure,
            "weights": self.spec.weights,
            "standardization": {
                "columns": list(self.spec.numeric),
                "means": self.standardization.means.tolist(),
                "sds": self.standardization.sds.tolist(),
            },
            "noise_floor": self.noise_floor,
            "warnings": list(self.warnings),
            **self._inference_dict(alpha),
        }

    def _inference_dict(self, alpha: float = 0.05) -> dict[str, Any]:
        """Standard errors, p-values and the 1 - alpha intervals (None and the reason
        when there are none)."""
        if self.cov is None:
            none = ("bse", "conf_int", "pvalues", "cov_type", "scale", "mle_distance")
            original = ("original_bse", "original_conf_int")
            return {**dict.fromkeys(none + original), "bse_note": self.bse_note}
        names = [str(k) for k in self.params.index]

        def interval(ci: pd.DataFrame) -> dict[str, Any]:
            return {
                "level": 1.0 - alpha,
                "lower": dict(zip(names, map(float, ci[0]), strict=True)),
                "upper": dict(zip(names, map(float, ci[1]), strict=True)),
            }

        return {
            "bse": dict(zip(names, map(float, self.bse), strict=True)),
            "conf_int": interval(self.conf_int(alpha)),
            "original_bse": dict(zip(names, map(float, self.original_bse), strict=True)),
            "original_conf_int": interval(self.original_conf_int(alpha)),
            "pvalues": dict(zip(names, map(float, self.pvalues), strict=True)),
            "cov_type": self.cov_type,
            "scale": self.scale,
            "mle_distance": self.mle_distance,
            "bse_note": None,
        }

    def summary(self, alpha: float = 0.05) -> str:
        """A plain-text summary: with standard errors, a table of coefficient, std err,
        z, P>|z| and the 1 - ``alpha`` interval."""
        lines = [
            f"Federated GLM: family={self.family}, method={self.method}, target={self.target}",
            f"sites={len(self.n_rows)}, N={self.n_obs}, rounds={self.rounds}, "
            f"uploaded={self.uploaded_bytes} B",
        ]
        if self.spec.target_levels:
            zero, one = self.spec.target_levels
            lines.append(f"target {self.target!r} coded 1 = {one!r}, 0 = {zero!r}")
        lines += self.spec.extra_lines()
        if self.privacy is None:
            lines.append("privacy: none (non-private run)")
        else:
            p = self.privacy
            lines.append(
                f"privacy: each site {p.mu_site:.4g}-fed-GDP (eps={p.epsilon_site:.4g} at "
                f"delta={p.delta:g}); third party {p.mu_third_party:.4g}-GDP "
                f"(eps={p.epsilon_third_party:.4g}); clip B={self.clip:.4g}"
                + (" (data-driven, not covered)" if self.clip_data_driven else "")
                + (
                    f"; weights <= max_weight {self.settings['max_weight']:.4g}, noise as for "
                    f"a clip of {self.clip * self.settings['max_weight']:.4g}"
                    if "max_weight" in self.settings
                    else ""
                )
            )
            lines.append(f"third party: {p.third_party_note}")
            if self.clip_data_driven:
                lines.append(
                    f"clip: B = {self.clip:.4g} is the largest of the sites' 90th "
                    "percentiles of their per-row gradient norms at theta = 0, so it clips "
                    "about a tenth of one site's rows there; wherever it binds, the estimate "
                    "solves the clipped score, not the likelihood: a bias that more rows do "
                    "not remove (every method); a clip above the gradients' norms (clip=, "
                    "--clip) avoids it"
                )
            lines.append(f"privacy covers {self.privacy_scope}")
            if self.noise_floor is not None:
                lines.append(
                    f"privacy noise: each coefficient's standard deviation from it is at "
                    f"least {self.noise_floor:.4g} (design scale; the last noisy release alone)"
                )
        scale = scale_note(self.spec)
        if scale is not None:
            lines.append(scale)
        width = max(len(n) for n in self.params.index)
        if self.cov is None:
            lines += [f"  {n:<{width}}  {_fixed(v, 0)}" for n, v in self.params.items()]
            lines.append(f"std err: none ({self.bse_note})")
        else:
            ci, bse, z, pv = self.conf_int(alpha), self.bse, self.tvalues, self.pvalues
            lo, hi = f"[{alpha / 2:.4g}", f"{1 - alpha / 2:.4g}]"
            cells = [["", "coef", "std err", "z", "P>|z|", lo, hi]]
            for n, v in self.params.items():
                d = _digits(v, ci.loc[n, 0], ci.loc[n, 1], bse[n])
                cells.append(
                    [
                        str(n),
                        _fixed(v, 0, d),
                        _fixed(bse[n], 0),
                        _fixed(z[n], 0, 4),
                        f"{pv[n]:.3f}",
                        _fixed(ci.loc[n, 0], 0, d),
                        _fixed(ci.loc[n, 1], 0, d),
                    ]
                )
            widths = [max(len(row[j].strip()) for row in cells) for j in range(7)]
            lines += [
                f"  {row[0]:<{widths[0]}}  "
                + "  ".join(f"{c.strip():>{w}}" for c, w in zip(row[1:], widths[1:], strict=True))
                for row in cells
            ]
            what = "model-based" if self.cov_type == "nonrobust" else "sandwich (HC0)"
            lines.append(
                f"std err: {what}, from the pooled Fisher information at the estimate"
                + (f" (scale {self.scale:.6g})" if self.family == "linear" else "")
                + "; intervals: normal quantiles"
                + (
                    f"; the estimate is {self.mle_distance:.3g} std err from the pooled MLE"
                    if self.mle_distance is not None
                    else ""
                )
            )
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


# ---------------------------------------------------------------------- fit_glm
def glm_settings(method: str, overrides: Mapping[str, float | None]) -> dict[str, float]:
    """The method's iterations and step sizes: the paper's defaults (:data:`DEFAULTS`)
    with the given ``overrides`` (None: keep the default), checked.

    Raises
    ------
    ValueError
        Unknown method, an option the method does not take, a step size that is not
        positive, or an iteration count that is not a positive integer.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    s = dict(DEFAULTS[method])
    unknown = sorted(k for k, v in overrides.items() if v is not None and k not in s)
    if unknown:
        raise ValueError(
            f"option(s) {unknown} do not apply to method {method!r}; it takes {sorted(s)}"
        )
    for k, v in overrides.items():
        if v is None:
            continue
        if k.startswith("eta"):
            try:
                step = float(v)
            except (TypeError, ValueError):  # was: "could not convert string to float"
                step = math.nan
            if isinstance(v, bool) or not (math.isfinite(step) and step > 0):
                raise ValueError(f"step size {k} must be a positive number, got {v!r}")
            s[k] = step
        else:
            if int(v) != v or int(v) < 1:
                raise ValueError(f"iteration count {k} must be a positive integer, got {v!r}")
            s[k] = int(v)
    return s


def direct_fit(
    method: str = "fednewton",
    mu: float | None = None,
    seed: int | None = 0,
    *,
    advice: str | None = None,
    **options: Any,
) -> Callable[[list[tuple[np.ndarray, np.ndarray]], str], np.ndarray]:
    """A "fit directly across sites" for the fidelity report's utility section.

    The returned function takes every client's ``(x, y)`` -- the report's design in
    its reporting parametrization and the coded response -- and the task, fits a
    logistic (classification) or linear (regression) GLM across the clients with
    :func:`fit_glm` (each client a site; every column a numeric feature, standardized
    with federation-wide statistics) and returns the parameters in the design's own
    parametrization (intercept first, :attr:`GLMResults.original_params`).  See
    :func:`fits.evaluation.utility.downstream_utility` (``direct=``).

    ``advice``, when given, replaces the fix that the fit's errors and warnings
    (:class:`GLMWarning`) propose: theirs names :func:`fit_glm`'s arguments and ``fits
    analyze``'s options, which a caller with other knobs (``fits report``'s
    ``--direct-mu``) cannot follow (:func:`_with_advice`).
    """

    options.setdefault("check_separation", False)  # the report's rows: as before
    options.setdefault("cov_type", None)  # the report uses the coefficients only

    def fit(parts: list[tuple[np.ndarray, np.ndarray]], task: str) -> np.ndarray:
        p = parts[0][0].shape[1]
        names = [f"x{j}" for j in range(p)]
        # the response's range, as a setup round would merge it from the sites'
        # bounds: a linear fit's noise warning is relative to it (without it, FedNewton
        # at mu = 1e-30 gave an R^2 of -1e61 and no warning)
        ys = [np.asarray(y, dtype=np.float64) for _, y in parts if len(y)]
        low = min(float(np.min(y)) for y in ys) if ys else None
        high = max(float(np.max(y)) for y in ys) if ys else None
        schema = Schema(
            [ColumnSpec(n, "continuous") for n in names]
            + [ColumnSpec("y", "continuous", lower=low, upper=high)]
        )
        tables = {
            f"site{k + 1}": pd.DataFrame(np.column_stack([x, y]), columns=[*names, "y"])
            for k, (x, y) in enumerate(parts)
        }
        family = "logistic" if task == "classification" else "linear"
        if advice is None:
            res = fit_glm(
                tables, "y", family=family, method=method, mu=mu, seed=seed, schema=schema,
                **options,
            )  # fmt: skip
            return res.original_params.to_numpy()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", GLMWarning)
            try:
                res = fit_glm(
                    tables, "y", family=family, method=method, mu=mu, seed=seed,
                    schema=schema, **options,
                )  # fmt: skip
            except DesignError as err:
                raise DesignError(_with_advice(str(err), advice)) from err
        for w in caught:  # outside the recorder: the caller sees them
            if issubclass(w.category, GLMWarning):
                warnings.warn(_with_advice(str(w.message), advice), w.category, stacklevel=2)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return res.original_params.to_numpy()

    return fit


def _with_advice(message: str, advice: str) -> str:
    """``message`` with its fix (from its first "; give ..." or ": give ...", the form
    of every fix this module's messages propose) replaced by ``advice``; a message
    without such a fix keeps its text, and ``advice`` follows it."""
    head = re.split(r"[;:] give\b", message, maxsplit=1)[0].rstrip(" ;:,")
    return f"{head}; {advice}"


def make_sites(tables: Mapping[str, pd.DataFrame], seed: int | None) -> list[GLMSite]:
    """One :class:`GLMSite` per table, each with its own generator spawned from
    ``seed`` (what :func:`fit_glm` builds in process)."""
    seeds = np.random.SeedSequence(seed).spawn(len(tables))
    return [GLMSite(t, name=n, seed=s) for (n, t), s in zip(tables.items(), seeds, strict=True)]


def fit_glm(
    tables: Sequence[pd.DataFrame] | Mapping[str, pd.DataFrame] | None,
    target: str,
    features: Sequence[str] | None = None,
    family: str = "logistic",
    method: str | None = None,
    mu: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    seed: int | None = 0,
    *,
    transport: Transport | None = None,
    clip: float | str | None = "auto",
    tau1: float = DEFAULT_TAU1,
    kinds: Mapping[str, str] | None = None,
    schema: Schema | None = None,
    vectorized: bool = False,
    check_separation: bool | None = None,
    check_collinearity: bool = True,
    cov_type: str | None = "nonrobust",
    K: int | None = None,
    eta: float | None = None,
    K1: int | None = None,
    eta1: float | None = None,
    K2: int | None = None,
    eta2: float | None = None,
    R: int | None = None,
    on_round: Callable[[int, int], None] | None = None,
    missing: str = "raise",
    positive: str | None = None,
    offset: str | None = None,
    exposure: str | None = None,
    weights: str | None = None,
    max_weight: float | None = None,
) -> GLMResults:
    """Fit a GLM across sites, optionally with mu-GDP (Algorithms 1-4 of the paper).

    Parameters
    ----------
    tables : sequence or mapping of DataFrame, or None
        The sites' tables (in process: one :class:`GLMSite` each, its noise seeded
        from ``seed``); None when ``transport`` reaches sites built elsewhere.
    target : str
        The response column.
    features : sequence of str, optional
        Feature columns (default all but the target).
    family : {"linear", "logistic", "poisson"}
    method : {"newton", "fednewton", "fedsgd", "fedhybrid", "fedavg"}, optional
        ``"fedsgd"``, ``"fedhybrid"``, ``"fedavg"``, ``"fednewton"``: the paper's
        Algorithms 1-4, private with ``mu`` / ``epsilon``.  ``"newton"`` (not in the
        paper; no privacy): Newton-Raphson on the sites' summed losses, gradients and
        Hessians, one round per iteration, which reaches the pooled maximum-likelihood
        estimate (statsmodels' GLM on the pooled rows) to about 1e-8 or better, where
        the paper's algorithms stop at their own error.  Default: ``"newton"``
        without privacy, ``"fednewton"`` with it.
    mu : float, optional
        Each site is mu-fed-GDP (Definition 2.2).  Towards a third party (Definition
        2.1) the run is mu/sqrt(m)-GDP with FedSGD, mu-GDP with FedAvg, and
        mu sqrt((1 + 1/m) / 2)-GDP with FedHybrid and FedNewton (even site sizes);
        ``res.privacy.third_party_note`` says why (docs/analysis.md, "The third-party
        guarantee").
    epsilon, delta : float, optional
        Instead of mu: mu is the GDP parameter whose (epsilon, delta) curve passes
        through the given point (:func:`fits.analysis.accounting.gdp_mu`).  With ``mu``,
        ``delta`` only sets where epsilon is reported (default 1e-5).
    seed : int or None
        One seed for every random draw: each site's noise generator is spawned from it.
        Default 0: the same call gives the same fit (and, with privacy, the same noise).
        ``None`` draws fresh entropy from the operating system, so two identical calls
        differ.
    transport : Transport, optional
        Talk to existing sites (:class:`GLMSite` answering the GLM messages).
    clip : float, "auto" or None
        The clipping bound B.  ``"auto"``: none without privacy; with privacy, the
        paper's rule (sec. 4.1: the largest site's 90th percentile of per-row gradient
        norms at theta = 0), which the guarantee does not cover -- give a number for a
        formal guarantee.  ``None``: no clipping (only without privacy).
    tau1 : float
        FedNewton's strong-convexity constant (Algorithm 4: B_new = 4 sqrt(2) B /
        tau1); local Hessians are floored at it when private.
    kinds : mapping, optional
        Column kind overrides for the setup round.
    schema : Schema, optional
        The shared schema, if known: the setup round (the sites' descriptions) is then
        skipped and the row counts come with the standardization round.
    vectorized : bool
        In process only: answer each round for all sites at once
        (:class:`BatchTransport`; the same replies, faster for many small sites).
    check_separation : bool, optional
        Logistic and Poisson: after the fit, one more round (``glm_check``) in which
        each site sends, per class of the target, the least and greatest value of each
        design column and of the fitted linear predictor; a column (or the predictor)
        that separates the classes across the sites gives a :class:`SeparationWarning`.
        Default: on without privacy, off with it (the extremes are exact values of
        single rows, paired with their class, outside the guarantee).
    check_collinearity : bool
        A private fit: whether each site sends, with ``glm_configure``, the projector
        onto its nearly collinear directions (:func:`near_projector`), from which a
        :class:`NearCollinearityWarning` names features nearly collinear at every site
        before any noisy round. Those directions are released exactly, outside the
        guarantee (:attr:`GLMResults.privacy_scope`); ``False`` keeps them at the
        sites (the exact null space is still sent: a collinear design stays an
        error). Without privacy it changes nothing: the standard errors' round has
        the check and nothing more leaves a site.
    cov_type : {"nonrobust", "HC0"} or None
        Without privacy, the standard errors of :attr:`GLMResults.bse` (statsmodels'
        names): ``"nonrobust"``, model-based, from the pooled Fisher information
        X'W(theta)X at the estimate (times the residual variance RSS / (N - p) for
        linear); ``"HC0"``, the sandwich I^-1 (sum of per-row score outer products)
        I^-1.  Either costs one more round (``glm_fisher``) in which each site sends
        its p x p matrix X'W X at the estimate (linear: and its residual sum of
        squares; HC0: and its p x p sum of score outer products).  ``None``: no such
        round and no standard errors.  Ignored with privacy: a private fit has no
        standard errors (:attr:`GLMResults.bse` says why).
    K, eta, K1, eta1, K2, eta2, R : optional
        Iterations and step sizes; defaults are the paper's (sec. 4): FedSGD K=50,
        eta=0.5; FedHybrid K1=30, eta1=0.5, K2=20, eta2=0.5; FedAvg K=50, R=2,
        eta=0.5; FedNewton K=50, eta=0.5.  ``newton``: K=50, the most iterations
        (it usually stops after 5-10).
    on_round : callable, optional
        Progress: ``on_round(done, total)`` with the fitting rounds done and the total
        planned (:func:`planned_rounds`: FedSGD ``K``, FedHybrid ``1 + K2``, FedAvg
        ``R``, FedNewton 2, ``newton`` at most ``1 + K``), once with ``done = 0``
        before the first fitting round and after each; the last call of a fit that
        returns has ``done == total`` (``newton``, which stops when it converges,
        ends with the rounds it ran as the total).  Called every round: throttle a
        display in the callback.  It does not change the fit (the same coefficients,
        bit for bit); an exception it raises ends the fit.
    missing : {"raise", "drop"}
        A row missing a value of the target or of a numeric feature: ``"raise"`` (the
        default) stops the fit with an error naming the site and the column;
        ``"drop"`` fits the complete cases (R's ``na.omit``, statsmodels'
        ``missing="drop"``): each site leaves such rows out before any sum and reports
        how many (:attr:`GLMResults.n_dropped`, a warning names them).  A nominal
        feature's missing values stay their own level either way.  With privacy the
        guarantee is for each site's complete rows, their count public as a site's row
        count always is.
    positive : str, optional
        Logistic regression of a target of two values: the value coded 1 (the event
        whose log-odds the coefficients describe; the other value is coded 0).  Default:
        for two text labels the second in sorted order (``"yes"`` of ``"no"`` /
        ``"yes"``, ``">50K"`` of Adult's ``"<=50K"`` / ``">50K"``); a 0/1 target as it
        is; two other numbers (``1`` / ``2``) need it (``positive="2"``).  The summary
        says which.
    offset : str, optional
        A column added to the linear predictor with its coefficient fixed to 1, eta =
        x'theta + offset (statsmodels' ``offset``); not a feature.  Its missing values
        follow ``missing``.  Allowed in private fits: every per-row gradient is clipped
        to norm B whatever its offset, so the noise scales do not change (docs/
        analysis.md, "Offsets and weights").
    exposure : str, optional
        Poisson only: a column of positive values (person-years, trips...) whose log is
        the offset (statsmodels' ``exposure``); a value <= 0 is an error naming the site,
        the column and the count.  Not together with ``offset``.
    weights : str, optional
        A column of non-negative prior weights (statsmodels' ``var_weights``, R's
        ``glm(weights=)``): each row's loss, score and Hessian are multiplied by its
        weight, so the coefficients equal statsmodels' with ``var_weights`` or
        ``freq_weights``; the standard errors equal ``var_weights``' (a linear fit's
        residual variance is sum w r^2 / (N - p), N the rows; for logistic and Poisson
        they equal ``freq_weights``' too).  Without privacy the paper's methods
        average each site's weighted gradients over its weights' sum and the sites by
        those sums (each site sends its sum in ``glm_configure``).  A private fit needs
        ``max_weight``.
    max_weight : float, optional
        Private fits with ``weights`` only: the declared largest weight w_max, public.
        Each row's gradient is clipped to norm B and then multiplied by its weight, so
        it has norm at most w_max B, and every noise scale of the lemmas is computed
        with w_max B in place of B (the noise sd is w_max times that of the fit
        without weights).  A site holding a weight above it refuses the fit (an error
        naming the site, the column and the count).  The sites' means stay over their
        row counts (n_i, public; the weights' sums are never sent), so the fixed point
        is the weighted MLE and the steps scale with the mean weight: weights near 1
        (divide them by their largest) keep the paper's step sizes.

    Returns
    -------
    GLMResults

    Raises
    ------
    ValueError
        A bad option (mu <= 0, delta outside (0, 1), unknown family or method, an
        option the method does not take), before any round runs;
        :class:`~fits.analysis.design.DesignError` for rows that do not fit (naming
        the site); a site too small for FedNewton's sample splitting; features that are
        collinear across the federation (naming them; without privacy every site is
        counted, whatever its size), or more design columns than the federation has
        rows, before any fitting round.

    Warns
    -----
    GLMWarning
        ``newton`` stopped short of the pooled maximum-likelihood estimate (``K``
        iterations, a flat loss under separation, or no halving that lowered the
        loss); a linear target that is an exact function of the features; an estimate
        more than 0.1 standard errors from the pooled maximum-likelihood estimate; a
        private fit in which every site holds fewer rows than the design has columns
        (no site can check collinearity without disclosing its rows' span).
    SeparationWarning
        The separation check found a column, or the fitted predictor, that separates
        the target's classes: the maximum-likelihood estimate does not exist.
    LocalSingularityWarning
        FedNewton, when every site's own design is rank deficient.
    """
    from fits.analysis.accounting import resolve_budget

    budget: PrivacyBudget | None = resolve_budget(mu, epsilon, delta)
    check_seed(seed)
    if method is None:
        method = "newton" if budget is None else "fednewton"
    if method == "newton" and budget is not None:
        raise ValueError(
            "method 'newton' sends each site's exact sums every round and has no private "
            "form; with mu or epsilon choose fednewton, fedsgd, fedhybrid or fedavg"
        )
    if method == "newton" and clip not in ("auto", None):
        raise ValueError(
            "method 'newton' does not clip (clipping is for the private methods); leave "
            "clip at 'auto'"
        )
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of {', '.join(FAMILIES)}")
    settings = glm_settings(
        method, {"K": K, "eta": eta, "K1": K1, "eta1": eta1, "K2": K2, "eta2": eta2, "R": R}
    )
    if method == "fednewton" and not (math.isfinite(float(tau1)) and float(tau1) > 0):
        raise ValueError(f"tau1 must be a positive number, got {tau1!r}")
    if cov_type not in COV_TYPES:
        raise ValueError(
            f"cov_type must be one of {', '.join(map(repr, COV_TYPES))}, got {cov_type!r}"
        )
    if isinstance(clip, str) and clip != "auto":
        raise ValueError(f"clip must be a positive number, 'auto' or None, got {clip!r}")
    if clip is None and budget is not None:
        raise ValueError("a private fit needs a clipping bound: clip='auto' or a number")
    if missing not in MISSING_POLICIES:
        raise ValueError(
            f"missing must be one of {', '.join(map(repr, MISSING_POLICIES))}, got {missing!r}"
        )
    if isinstance(clip, int | float) and not (math.isfinite(float(clip)) and clip > 0):
        raise ValueError(f"clip must be a positive finite number, got {clip!r}")
    for what, col in (("offset", offset), ("exposure", exposure), ("weights", weights)):
        if col is not None and not isinstance(col, str):
            raise ValueError(f"{what} must be a column name (a str), got {col!r}")
    if offset is not None and exposure is not None:
        raise ValueError("give offset or exposure, not both (exposure E is the offset log(E))")
    if exposure is not None and family != "poisson":
        raise ValueError(
            f"exposure is for family 'poisson' (its log is the offset of a rate); family "
            f"{family!r} takes an offset on its own scale: give offset= instead"
        )
    if max_weight is not None:
        if weights is None or budget is None:
            raise ValueError(
                "max_weight bounds the prior weights of a private fit (the noise is "
                "calibrated to it); without weights= and mu/epsilon it has no use: drop it"
            )
        if isinstance(max_weight, bool) or not (
            isinstance(max_weight, numbers.Real)
            and math.isfinite(float(max_weight))
            and max_weight > 0
        ):
            raise ValueError(f"max_weight must be a positive finite number, got {max_weight!r}")
    if weights is not None and budget is not None and max_weight is None:
        raise ValueError(
            "prior weights in a private fit need a declared largest weight, max_weight= "
            "(fits analyze --max-weight): a row's weight scales its clipped gradient, so "
            "the noise is calibrated to max_weight B in place of B; declare it, or fit "
            "without weights or without mu/epsilon"
        )
    if positive is not None:
        if isinstance(positive, numbers.Number) and not isinstance(positive, bool):
            positive = str(positive)  # a target's value given as a number (2)
        if not isinstance(positive, str):
            raise ValueError(f"positive must be a label (a str), got {positive!r}")
        if family != "logistic":
            raise ValueError(
                f"positive names the label coded 1 of a logistic target; family {family!r} "
                "takes the target's numbers as they are: leave positive out"
            )

    own = transport is None
    if own:
        if tables is None:
            raise ValueError("give the sites' tables or a transport")
        items = site_items(tables, "fit_glm")
        if not items:
            raise ValueError("fit_glm needs at least one site table")
        sites = make_sites(dict(items), seed)
        transport = BatchTransport(sites) if vectorized else InProcessTransport(sites, n_jobs=1)
    elif tables is not None:
        raise ValueError("give either tables or a transport, not both")
    assert transport is not None
    try:
        return _fit(
            transport,
            target,
            features,
            family,
            method,
            budget,
            settings,
            clip,
            float(tau1),
            kinds,
            schema,
            (budget is None) if check_separation is None else bool(check_separation),
            cov_type,
            on_round,
            missing,
            positive,
            (offset, exposure, weights),
            None if max_weight is None else float(max_weight),
            bool(check_collinearity),
        )
    finally:
        if own and isinstance(transport, InProcessTransport):
            transport.close()


def _newton_stop_note(extra: Mapping[str, Any], settings: Mapping[str, float]) -> str | None:
    """Why ``newton`` stopped short of the maximum-likelihood estimate (None when it
    converged): a flat loss (separation), a step no halving could make lower the loss,
    or ``K`` iterations."""
    if extra.get("flat", False):
        return (
            "newton stopped without converging: the pooled loss no longer falls while the "
            "estimate still moves, so some coefficients run off to infinity and the "
            "maximum-likelihood estimate does not exist (separation: see the separation "
            "check; leave out or merge the separating column or categories)"
        )
    if extra.get("stuck", False):
        return (
            f"newton stopped without converging: no step towards the maximum-likelihood "
            f"estimate, halved {NEWTON_HALVINGS} times, lowered the pooled loss, so the "
            "estimate is where it stopped, not the MLE; rescale the target or the features "
            "(e.g. smaller units), or see the separation check"
        )
    if not extra.get("converged", False):
        return (
            f"newton did not converge in K={int(settings['K'])} iterations (its last step "
            "still moved the estimate); a larger -K, or see the separation check"
        )
    return None


def _label_target(
    spec: DesignSpec, schema: Schema, family: str, positive: str | None = None
) -> DesignSpec:
    """A logistic target of two text labels (``"<=50K"`` / ``">50K"``, ``"no"`` /
    ``"yes"``) is coded at the sites as 0 for the schema's first label (sorted, as a
    nominal feature's reference level) and 1 for the second, or 1 for ``positive``
    where given; the spec carries them (0's label first).  A target of two numbers
    other than 0/1 (``1`` / ``2``) is coded so with ``positive`` naming the event (the
    value coded 1; the other is coded 0), and is an error naming the values without
    it; 0/1 is used as it is (``positive="0"`` codes 0 as the event)."""
    column = schema[str(spec.target)]
    labels = [c for c in column.categories or [] if c is not None]
    numeric = bool(labels) and all(
        isinstance(c, numbers.Number) and not isinstance(c, bool) for c in labels
    )
    if family != "logistic":
        return spec
    if column.kind not in ("nominal", "ordinal") or not labels:
        if positive not in (None, "1"):  # "1": the event of a 0/1 target as it is
            raise DesignError(
                f"positive={positive!r}: target {spec.target!r} is a {column.kind} column "
                "of many values, not two; logistic regression needs a target of two values "
                "(code it as 0/1, or declare it nominal if it takes two)"
            )
        return spec
    shown = [str(c) for c in labels]
    if len(labels) != 2:
        if numeric and positive is None:
            return spec  # each site names its values other than 0/1 (check_target)
        raise DesignError(
            f"target {spec.target!r} has {len(labels)} {'values' if numeric else 'labels'} "
            f"({shown[:6]}); logistic regression needs two: merge them into two classes, or "
            "code the target as 0/1" + ("" if numeric else _alike_labels(labels))
        )
    if positive is None:
        if numeric and set(labels) != {0, 1}:
            raise DesignError(
                f"target {spec.target!r} holds the two values {shown[0]} and {shown[1]}, not "
                f"0 and 1: name the event, the value coded 1 (the other is coded 0), with "
                f"positive={shown[1]!r} (fits analyze --positive {shown[1]}), or recode the "
                "target as 0/1"
            )
        return spec if numeric else dataclasses.replace(spec, target_levels=tuple(labels))
    named = [c for c in labels if str(c) == positive or _same_number(c, positive)]
    if not named:
        raise DesignError(
            f"positive={positive!r} is not a {'value' if numeric else 'label'} of target "
            f"{spec.target!r} (its {'values' if numeric else 'labels'}: {shown}); name one "
            "of them"
        )
    if numeric and set(labels) == {0, 1} and named[0] == 1:
        return spec  # 0/1 with 1 the event: the numbers as they are
    labels = [c for c in labels if c is not named[0]] + named
    return dataclasses.replace(spec, target_levels=tuple(labels))


def _same_number(value: Any, text: str) -> bool:
    """Whether ``text`` (``positive`` as given) is the number ``value`` ("2.0" for 2)."""
    if not isinstance(value, numbers.Number) or isinstance(value, bool):
        return False
    try:
        return float(text) == float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _alike_labels(labels: Sequence[Any]) -> str:
    """A hint for labels that differ only in case or in spaces around them (``'Yes'``
    and ``'yes'``, ``'no'`` and ``'no '``: a site writes them its own way); "" when none
    do."""
    groups: dict[str, list[str]] = {}
    for label in labels:
        if isinstance(label, str):
            groups.setdefault(label.strip().casefold(), []).append(label)
    alike = [g for g in groups.values() if len(g) > 1]
    written = [x for x in labels if isinstance(x, str) and x in NA_TEXTS]
    if written:  # "NA" kept as written in a CSV column of labels (fits.io.read_table)
        return (
            f"; {', '.join(map(repr, written))} is read as a label, as written: where it "
            "marks a missing value, leave those fields empty, and missing='drop' "
            "(fits analyze --missing drop) leaves their rows out"
        )
    if not alike:
        return ""
    named = ", ".join(" and ".join(repr(x) for x in g) for g in alike)
    return (
        f"; {named} differ only in case or in spaces around them: write each label the "
        "same way at every site (e.g. lower case, without surrounding spaces)"
    )


def _fit(
    transport: Transport,
    target: str,
    features: Sequence[str] | None,
    family: str,
    method: str,
    budget: PrivacyBudget | None,
    settings: dict[str, float],
    clip: float | str | None,
    tau1: float,
    kinds: Mapping[str, str] | None,
    schema: Schema | None,
    check_separation: bool = False,
    cov_type: str | None = None,
    on_round: Callable[[int, int], None] | None = None,
    missing: str = "raise",
    positive: str | None = None,
    extra: tuple[str | None, str | None, str | None] = (None, None, None),
    max_weight: float | None = None,
    check_collinearity: bool = True,
) -> GLMResults:
    up0, down0 = sum(transport.uploaded_bytes), sum(transport.downloaded_bytes)
    rounds = 0
    offset, exposure, prior = extra
    if schema is None:
        used, more = fit_columns(target, features, extra)
        schema, _ = schema_round(transport, kinds=kinds, columns=used, target=target, exclude=more)
        rounds += 1
    spec = DesignSpec.from_schema(
        schema,
        target,
        features,
        missing=missing,
        offset=offset,
        exposure=exposure,
        weights=prior,
    )
    spec = _label_target(spec, schema, family, positive)
    p = spec.n_columns
    st = standardization_round(transport, spec)
    dropped = dropped_note(st, transport.client_names, spec)
    if dropped:
        warnings.warn(dropped, GLMWarning, stacklevel=3)
    n_rows = st.n_rows
    _row_check(n_rows, spec, transport.client_names)
    if method == "fednewton":
        small = [
            (n, int(k)) for n, k in zip(transport.client_names, n_rows, strict=True) if k < 2 * p
        ]
        if small:
            raise DesignError(
                f"site(s) {', '.join(f'{n!r} ({k} rows)' for n, k in small)} too small for "
                f"FedNewton's sample splitting (Algorithm 4): each half must hold at least "
                f"p = {p} rows, so a site needs {2 * p}; merge small sites, use fewer "
                "features, or choose another method"
            )
    mu_value = budget.mu if budget is not None else 0.0
    separation = check_separation and family != "linear"
    configure = Message(
        "glm_configure",
        {"means": st.means, "sds": st.sds},
        {
            "family": family,
            "method": method,
            "settings": json.dumps(settings),
            "tau1": tau1,
            "mu": mu_value,
            "null_space": p,
            "near_space": p if budget is not None and check_collinearity else 0,
            "separation_check": int(separation),
            "weight_sum": int(spec.weights is not None and budget is None),
            "max_weight": 0.0 if max_weight is None else max_weight,
        },
    )
    replies = transport.broadcast(configure)
    rounds += 2
    notes = _rank_check(
        [r.arrays["null"] for r in replies],
        n_rows,
        spec,
        method,
        transport.client_names,
        private=budget is not None,
    )
    for note in notes:
        warnings.warn(note, LocalSingularityWarning, stacklevel=3)
    unchecked = _unchecked_rank_note(n_rows, p, budget is not None)
    if unchecked is not None:  # before any noisy round: an error filter spends no budget
        warnings.warn(unchecked, GLMWarning, stacklevel=3)
        notes.append(unchecked)
    if budget is not None and check_collinearity:  # no standard errors: the near directions
        near = _near_check([r.arrays["near"] for r in replies], n_rows, spec, method)
        for note in near:
            warnings.warn(note, NearCollinearityWarning, stacklevel=3)
        notes += near
    if dropped:
        notes = [dropped, *notes]
    if spec.weights is not None and budget is None:  # the sites' weights' sums
        totals = np.array([float(r.arrays["weight_sum"][0]) for r in replies])
        weights = totals / totals.sum()
    else:
        weights = n_rows / n_rows.sum()
    theta0 = np.zeros(p)
    data_driven = False
    if clip == "auto" and budget is not None:
        request = Message("glm_clip", {"theta": theta0}, {"quantile": CLIP_QUANTILE})
        b = max(float(r.arrays["b"][0]) for r in transport.broadcast(request))
        rounds += 1
        if not b > 0:
            raise DesignError("every per-row gradient is zero at theta = 0; give clip= a number")
        clip_value, data_driven = b, True
    elif isinstance(clip, int | float) and not isinstance(clip, bool):
        clip_value = float(clip)
    else:
        clip_value = math.inf
    run = _Run(
        transport,
        weights,
        clip_value,
        family,
        spec.intercept,
        method=method,
        mu=budget.mu if budget is not None else None,
        on_round=on_round,
        planned=planned_rounds(method, settings, family == "poisson" and spec.intercept),
    )
    run.tick()  # 0 of the total: the fitting rounds begin
    with np.errstate(over="ignore", invalid="ignore"):  # a non-finite iterate: the error
        theta = METHODS[method](run, theta0, settings)
    if not np.all(np.isfinite(theta)):
        raise run.diverged()
    size = float(np.max(np.abs(theta), initial=0.0))
    if budget is None and family == "poisson" and size > MAX_EXP_COEFFICIENT:
        raise run.diverged(size)  # e.g. fedsgd at too large a step: +-1e303, finite
    if on_round is not None and run.rounds < run.planned:  # newton, converged early
        on_round(run.rounds, run.rounds)
    stop = _newton_stop_note(run.extra, settings) if method == "newton" else None
    if stop is not None:
        warnings.warn(stop, GLMWarning, stacklevel=3)
        notes = [*notes, stop]
    found: list[str] = []
    if separation:
        checks = transport.broadcast(Message("glm_check", {"theta": theta}))
        rounds += 1
        found = _separation_check(
            [r.arrays["lo"] for r in checks], [r.arrays["hi"] for r in checks], spec, family
        )
        for note in found:
            warnings.warn(note, SeparationWarning, stacklevel=3)
        notes += found
    cov: np.ndarray | None = None
    scale: float | None = None
    why: str | None = None
    distance: float | None = None
    if budget is not None:
        why = PRIVATE_NOTE
    elif cov_type is None:
        why = "no standard errors were asked for (cov_type=None)"
    elif found:
        why = (
            "no standard errors: the maximum-likelihood estimate does not exist "
            "(separation, see the warnings)"
        )
    else:
        linear, robust = family == "linear", cov_type == "HC0"
        request = Message(
            "glm_fisher", {"theta": theta}, {"dispersion": int(linear), "robust": int(robust)}
        )
        fisher = transport.broadcast(request)
        rounds += 1
        cov, scale, why, distance, start = _covariance(
            fisher, p, int(n_rows.sum()), linear, robust, theta
        )
        if distance is not None and start is not None and _moved_away(method, distance, start):
            raise run.moved_away(distance, start)
        if cov is None and scale is None:  # no Fisher metric to measure the distance in
            end, begin = np.sum([r.arrays["loss"] for r in fisher], axis=0)
            if _saturated_away(float(end), float(begin)):
                raise run.saturated_away(float(end), float(begin))
        if cov is not None:
            info = sum(unpack_symmetric(r.arrays["info"], p) for r in fisher)
            inflated = _inflation_note(np.asarray(info), spec.feature_names)
            if inflated is not None:
                warnings.warn(inflated, GLMWarning, stacklevel=3)
                notes = [*notes, inflated]
        rss = float(sum(float(r.arrays["rss"][0]) for r in fisher)) if linear else math.nan
        if linear and rss <= PERFECT_FIT * 2.0 * float(run.extra.get("loss0", math.nan)):
            # newton's first round gave sum y^2 / 2: the residuals are rounding error
            exact = (
                f"the target is an exact linear function of the features (residual sum of "
                f"squares {rss:.3g}, at float rounding of the target's sum of squares): "
                "there is no error to estimate, the standard errors are rounding noise; "
                "leave out the feature(s) the target is computed from"
            )
            warnings.warn(exact, GLMWarning, stacklevel=3)
            notes = [*notes, exact]
        elif distance is not None and distance > MLE_DISTANCE_WARN:
            fix = (
                "more iterations do not remove it (its sites' local steps carry the "
                "federation bias of the paper's sec. 3); for intervals, fit with method "
                "newton (the default without privacy), which reaches the pooled estimate"
                if method in ("fednewton", "fedavg")
                else "run more iterations (a larger -K / K2) until it is near 0"
            )
            far = (
                f"the estimate lies {distance:.3g} standard errors (Fisher metric) from the "
                f"pooled maximum-likelihood estimate ({method} stopped short of it): the "
                "standard errors are the MLE's evaluated at this estimate, and its intervals "
                f"may not have their level; {fix}"
            )
            warnings.warn(far, GLMWarning, stacklevel=3)
            notes = [*notes, far]
    floor = None
    if budget is not None:
        bound = clip_value * (1.0 if max_weight is None else max_weight)
        floor = noise_floor(method, settings, bound, budget.mu, n_rows, tau1)
        noisy = _noise_note(floor, family, _target_range(schema, str(spec.target)), method)
        if noisy is not None:
            warnings.warn(noisy, GLMWarning, stacklevel=3)
            notes = [*notes, noisy]
    from fits.analysis.accounting import PrivacySpent

    # FedNewton's noise uses 2 floor(n_i / 2) rows and its weights n_i: for an odd n_i
    # the Newton step's average hides a record of site i less than mu / sqrt(2m) says
    ratios = n_rows / (2 * (n_rows // 2)) if method == "fednewton" else None
    privacy = (
        PrivacySpent.from_budget(budget, len(n_rows), ratios, method=method)
        if budget is not None
        else None
    )
    out_settings = dict(settings)
    if method == "fednewton":
        out_settings["tau1"] = tau1
    if max_weight is not None:
        out_settings["max_weight"] = max_weight
    return GLMResults(
        params=pd.Series(theta, index=spec.feature_names, name="coef"),
        family=family,
        method=method,
        privacy=privacy,
        rounds=rounds + run.rounds,
        uploaded_bytes=sum(transport.uploaded_bytes) - up0,
        downloaded_bytes=sum(transport.downloaded_bytes) - down0,
        clip=clip_value,
        clip_data_driven=data_driven,
        settings=out_settings,
        n_obs=int(n_rows.sum()),
        n_rows=[int(k) for k in n_rows],
        spec=spec,
        standardization=st,
        target=target,
        warnings=notes,
        cov=None
        if cov is None
        else pd.DataFrame(cov, index=spec.feature_names, columns=spec.feature_names),
        cov_type=None if cov is None else cov_type,
        scale=scale,
        bse_note=why,
        mle_distance=distance,
        separation_checked=separation,
        near_checked=budget is not None and check_collinearity,
        noise_floor=floor,
        date_formats={c: f for c, f in schema.date_formats().items() if c in spec.datetimes},
    )


def _read_new_rows(
    frame: Any, spec: DesignSpec, date_formats: Mapping[str, str] | None = None
) -> Any:
    """New rows' numeric columns read as the sites read theirs at the setup round
    (:func:`fits.core.schema.parse_text_columns`): text that is numbers ("12 €", "1,5")
    or dates ("2024-03-01", as read from a CSV) as numbers or dates, a datetime column
    in ``date_formats`` with the sites' format.  Was: a date column of text, which
    ``fit_glm`` accepted at the sites, failed in ``predict`` with pandas' "Can only use
    .dt accessor with datetimelike values".  A datetime column that does not read as
    dates is a :class:`DesignError` naming it."""
    if not isinstance(frame, pd.DataFrame):
        return frame  # check_new_rows says what to give
    formats = {
        c: f
        for c, f in (date_formats or {}).items()
        if c in spec.datetimes
        and c in frame.columns
        and not pd.api.types.is_datetime64_any_dtype(frame[c])
    }
    if formats:
        frame = frame.copy()
        for c, fmt in formats.items():
            s = frame[c]
            read = pd.to_datetime(s.astype(str).str.strip(), format=fmt, errors="coerce")
            bad = s.notna() & read.isna()
            if bad.any():
                raise DesignError(
                    f"predict: column {c!r} holds value(s) {sorted(map(str, s[bad]))[:3]} "
                    f"that do not read as dates in the sites' format {fmt!r}: write them "
                    "so, or convert them with pandas.to_datetime"
                )
            frame[c] = read.where(s.notna())
    text = [
        c
        for c in spec.numeric
        if c in frame.columns
        and c not in spec.ordinal_levels  # matched by label against the fit's levels
        and not pd.api.types.is_numeric_dtype(frame[c])
        and not pd.api.types.is_datetime64_any_dtype(frame[c])
    ]
    if text:
        parsed, _ = parse_text_columns(frame[text])
        frame = frame.copy()
        for c in text:
            frame[c] = parsed[c]
    for c in spec.datetimes:
        if c in frame.columns and not pd.api.types.is_datetime64_any_dtype(frame[c]):
            present = frame[c].dropna()
            if present.empty:
                continue  # all missing: check_new_rows says so
            raise DesignError(
                f"predict: column {c!r} holds values that do not read as dates (values like "
                f"{sorted({str(v) for v in present.iloc[:50]})[:3]}), while the fit read it "
                "as dates (seconds since 1970-01-01 UTC): write them as dates, e.g. "
                "2024-03-01 or 2024-03-01 12:00, or convert them with pandas.to_datetime"
            )
    return frame


def _target_range(schema: Schema, target: str) -> float | None:
    """The target's range from the setup round's schema (max - min; None when it has
    none as numbers)."""
    column = schema[target]
    if column.lower is not None and column.upper is not None:
        return float(column.upper) - float(column.lower)
    values = [c for c in column.categories or [] if _is_real(c)]
    return float(max(values) - min(values)) if values else None


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))
