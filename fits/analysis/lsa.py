"""FedLSA with the online multiplier bootstrap: confidence intervals across sites.

Linear regression fitted by federated linear stochastic approximation (FedLSA,
Algorithm 1 of Levin, Shuklin, Moulines, Mangold and Samsonov, "Gaussian
Approximation and Multiplier Bootstrap for Federated Linear Stochastic
Approximation"; ``../shared/papers/federated-lsa-multiplier-bootstrap.txt``), with
confidence intervals from the paper's online multiplier bootstrap (section 6).

The algorithm
-------------
For linear regression one sampled row ``z = (x, y)`` gives ``A(z) = x x'`` and
``b(z) = x y``, so ``E A = Abar^c = X_c'X_c / n_c`` and ``E b = bbar^c = X_c'y_c / n_c``
at site c (eq. 2).  In round ``t = 1..T`` the coordinator sends the current global
parameter; every site runs ``H_t`` local updates (eq. 6, Algorithm 1 lines 5-8)

    theta <- theta - eta_t (x x' theta - x y)

on its own rows and sends the result back; the coordinator averages (line 9).  The
online multiplier bootstrap (section 6) runs ``M`` further sequences from the same
start ``theta_0`` alongside, each local update of sequence ``m`` multiplied by an
i.i.d. weight ``w`` with ``E w = 1`` and ``Var w = 1``:

    theta^b <- theta^b - eta_t w (x x' theta^b - x y),

on the *same* sampled rows.  The conditional law of ``theta_T^b - theta_T`` given the
data approximates the law of ``theta_T - theta_star`` (Theorem 4; the paper scales both
by ``eta_T^{-1/2}``, which cancels in the intervals).  Only parameter vectors travel:
each round the coordinator sends the ``M + 1`` vectors ``(theta, theta^1..theta^M)``
in one message and each site answers with its ``M + 1`` updated vectors.

Choices the paper leaves open (stated here and in ``docs/analysis.md``)
-----------------------------------------------------------------------
* **Weighting of sites of different sizes.**  Algorithm 1 averages with equal weights
  1/N, so its fixed point solves eq. (1), ``(mean_c Abar^c) theta = mean_c bbar^c``:
  each site counts as much as any other, whatever its size, and the target is *not*
  the pooled least-squares fit.  fits averages with weights ``p_c = n_c / n``
  (``site_weights="size"``, the default): the same analysis goes through with
  ``E_c`` replaced by ``sum_c p_c``, and the target becomes the solution of
  ``(sum_c n_c Abar^c) theta = sum_c n_c bbar^c``, i.e. ``X'X theta = X'y`` on the
  pooled rows: the pooled ordinary-least-squares coefficients.  The paper's bias
  discussion carries over: the first-order drift of a round,
  ``eta_t H_t sum_c p_c Abar^c (theta^c_star - theta_star)``, vanishes exactly when
  ``theta_star`` solves the weighted system, so what is left is the heterogeneity
  bias of order ``eta_t^2 H_t^2 zeta_1 zeta_2`` (Lemma 2, with ``zeta`` weighted by
  ``p_c``).  It is zero for ``H_t = 1``, vanishes as ``eta_t H_t -> 0`` in the
  decreasing regime S2 (Corollary 2), and stays of order ``eta H zeta_1 zeta_2 / a`` in
  the constant regime S1 (Corollary 1): choose ``eta H`` small there.
  ``site_weights="equal"`` runs the paper's Algorithm 1 as printed.
* **What one sampled row is.**  Assumption A2 wants the rows ``Z^c_{t,h}`` i.i.d. from
  the site's distribution ``pi_c``.  With ``sampling="without_replacement"`` (default)
  each site draws a random order of its rows once and uses every row at most once,
  so the rows are i.i.d. draws from the population the site's table was sampled from,
  and the intervals cover the population coefficients ``theta_star``.  A site must hold
  at least ``sum_t H_t`` rows.  ``sampling="with_replacement"`` draws rows uniformly
  from the site's table at every step: then ``pi_c`` is the table's empirical
  distribution, ``theta_star`` is exactly the pooled OLS fit of the tables, the
  estimate converges to it as T grows, and the intervals only describe the
  algorithm's own noise around it (they shrink to zero with T).
* **Bootstrap weights.**  ``w = 1 + (B - 1/5) / sd(B)`` with ``B ~ Beta(1/2, 2)``: the
  paper's experiments (appendix D) standardize Beta(0.5, 2) draws; shifting them to
  mean 1 gives mean 1 and variance 1 as section 6 requires, and the weights lie in
  ``(0.065, 4.74)``, positive and bounded as assumption A3 requires.
* **Step sizes.**  Regime S1: ``eta_t = eta``, ``H_t = H``.  Regime S2:
  ``eta_t = eta (1 + t)^-gamma_eta``, ``H_t = ceil(H (1 + t)^gamma_H)`` with
  ``gamma_eta`` in [1/2, 1) and ``0 <= gamma_H <= gamma_eta``.  Three quantities of the
  design enter, with ``s = x' P x`` the squared norm of a whitened row (``E`` over the
  rows, each site weighted by its averaging weight, so ``E s = d``; each site reports
  the sums of ``s`` and ``s^2`` in the preconditioning round):

  - *The mean-square contraction step* ``eta_c = E[s] / (2 E[s^2])``
    (:func:`default_step_size`).  For a unit vector ``u``, ``u'(I - eta w x x')^2 u =
    1 - 2 eta w (x'u)^2 + eta^2 w^2 s (x'u)^2``; averaged over the rows, the weights
    (``E w^2 = 2``) and ``u`` uniform on the sphere (``E_u (x'u)^2 = s / d``) this is
    ``1 - 2 eta + 2 eta^2 E[s^2] / d``, which is at most ``1 - eta`` exactly when
    ``eta <= d / (2 E[s^2]) = E[s] / (2 E[s^2])``: the mean-square contraction of
    assumption A1(2), on average over directions, for the bootstrap sequences too.  It
    is ``1 / (2 (d + 2))`` for Gaussian rows and smaller for heavy-tailed ones.  (A rule
    on the largest row, every factor non-expansive, was tried first and was far too
    timid: one rare category, Bike's ``holiday``, made ``max s`` 30 times ``E s``.)  It
    was the default of regime ``"paper"`` until 2026-12-05; it is now the default's
    upper end, and still ``eta_0`` of regime ``"one_pass"``.
  - *The bootstrap's variance inflation* ``x = eta_T E[s^2] / E[s]`` of the last step
    (``x = 1/2`` at ``eta_c``).  The Lyapunov equation (20),
    ``Abar Sigma + Sigma Abar' = N^-1 Sigma_*^avg``, is the small-step limit for both the
    real and the bootstrap sequences; at a finite step the ``eta^2 E[A Sigma A]`` terms
    it drops differ between them, because the bootstrap multiplies ``A(Z)`` by ``w``
    with ``E w^2 = 2``.  In one dimension (a row ``z`` with ``E z^2 = 1``,
    ``E z^4 = E[s^2] / E[s]``, noise variance ``sigma^2`` a row) the stationary variance of
    constant steps is ``eta^2 sigma^2 / (2 eta - eta^2 E z^4) = eta sigma^2 / (2 - x)``
    for the real iterate and ``2 eta^2 sigma^2 / (2 eta - 2 eta^2 E z^4) = eta sigma^2 /
    (1 - x)`` for a bootstrap sequence about ``theta_star``; since
    ``E[theta^b | data] = theta`` (the product of the update factors is linear in each
    independent ``w``), the conditional variance of ``theta^b - theta`` is the difference,
    ``eta sigma^2 / ((1 - x)(2 - x))``: **the bootstrap variance is** ``1 / (1 - x)``
    **times the real one**, 2 at ``eta_c`` (standard errors 41% too large).  Averaging
    ``N`` sites lowers it (the fluctuation terms carry ``sum_c p_c^2``), local steps
    raise it back (one site, or ``H`` large, is the worst case ``1 / (1 - x)``): the exact
    second-moment recursion of the three-site federation of ``docs/benchmarks.md``
    (``H = 10``) gives standard-error ratios 1.27-1.32 at ``eta_c = 0.115``, and 1.007-1.009
    at the default below (measured there: 1.13-1.21 before, 0.94-1.01 after).
  - *Forgetting the start*: Lemma 1's transient ``exp(-a sum_t eta_t H_t)``, with
    ``a = 1`` on the preconditioned design (``lambda_min(Abar)`` on the raw one).

  The paper leaves the step's choice open (A1 and Theorem 4 take a small enough step;
  its error bounds grow with ``eta``).  The default of regime ``"paper"``
  (:func:`paper_step_size`) is ``eta = min(eta_c, max(eta_x, eta_f))`` with
  ``g_t = eta_t / eta`` (1 in S1, ``(1 + t)^-gamma_eta`` in S2):

  - ``eta_x = STEP_X E[s] / (E[s^2] g_T)``, :data:`STEP_X` ``= 0.04``: the step whose last
    value has ``x = 0.04``, a bootstrap variance at most ``1 / 0.96 = 1.042`` times the
    real one (standard errors at most 2.1% too large, in the worst case);
  - ``eta_f = FORGET_HORIZON / (a sum_t g_t H_t)``, :data:`FORGET_HORIZON` ``= 10``: the
    step whose horizon ``a sum_t eta_t H_t`` is 10, leaving ``exp(-10) = 4.5e-5`` of the
    start.  When the rounds and local steps are too few for ``eta_x`` to get there the
    step is raised to ``eta_f``, up to ``eta_c`` at most: the intervals are then
    conservative by ``1 / (1 - x)`` (``x`` up to 1/2) rather than off-centre by an
    unforgotten start.  Beyond ``eta_c`` more rounds are needed, and
    :attr:`FedLSAResults.converged` (a quarter of a standard error) still says whether the
    start is forgotten.

  Arithmetic: Gaussian rows have ``E[s^2] = d (d + 2)``, so ``eta_x = 0.04 / (d + 2)``
  (S1), against ``eta_c = 0.5 / (d + 2)``, 12.5 times smaller; the default 200 rounds of
  10 local steps give ``eta_x`` a horizon of ``80 / (d + 2)``, at least 10 up to ``d = 6``;
  above, the step is ``10 / 2000 = 0.005`` (``x = 0.005 (d + 2)``: 0.11 at ``d = 20``).  On
  the benchmark federation (intercept and two Gaussian features, ``E s = 3``,
  ``E s^2 = 13``): ``eta_x = 0.0092``, horizon 18.5.  Smaller steps narrow the intervals
  (``Var theta_T ~ eta_T Sigma_infty``) as long as the start is forgotten; a smaller
  ``step_size`` is the user's choice.  In S2 the rule is on the last step, so
  ``eta_c`` binds once ``(1 + T)^gamma_eta > 12.5`` (e.g. ``gamma_eta = 1/2``,
  ``T >= 156``).  Regime ``"one_pass"`` keeps ``eta_0 = eta_c`` (batch form): its gain
  ``1/k`` ends far below ``x = 0.04`` and only the burn-in's share of the variance
  (about 5.5% on its benchmark federation) carries the inflation.
* **Steps that are too large** (the paper leaves this open: assumption A1 takes
  ``eta < eta_{infty,p}`` as given and names no way to compute ``eta_{infty,p}`` from
  the data).  The same average multiplier is below 1 exactly when
  ``eta < d / E[s^2] = E[s] / E[s^2]`` (:func:`step_bound`; on the raw design,
  ``P = I``, the factor is ``1 - 2 eta E[s] / d + 2 eta^2 E[s^2] / d``, the same
  bound), twice the default; for batches, twice the batch form of
  :func:`default_step_size`.  A user's step whose first (largest) value ``eta_1`` is at or
  above it is refused before the first round of Algorithm 1 (:class:`FedLSAError`
  naming the bound and the default): beyond it the iterates grow in mean square (was: a
  step of 1 returned an intercept of 2e19 and ``converged: true``).  It is an average over
  directions: a direction whose rows are much more heavy-tailed than the rest can still
  be unstable below it, so the run is guarded too: a main iterate whose norm exceeds
  :data:`DIVERGENCE_FACTOR` ``= 10^6`` times its scale in the first unit of
  ``sum_t eta_t H_t`` (``||theta_t|| / min(1, sum_{s<=t} eta_s H_s)``, about
  ``||theta_star||`` while the start is being forgotten) stops the run with the
  "diverged" error, as a non-finite one does.  The factor is a choice: a stable run from
  ``theta_0 = 0`` stays within a few times that scale on the preconditioned design, and an
  unstable one grows geometrically, so a large factor costs only a few rounds.
* **Intervals.**  Per coefficient: the paper's empirical-quantile interval (section 6,
  "EQ" in section 7) ``[theta_j - q_{1-alpha/2}, theta_j - q_{alpha/2}]`` with ``q`` the
  quantiles of ``theta^b_j - theta_j`` over the M bootstrap sequences.  Joint region
  (``conf_int(joint=True)``): the max-statistic rectangle
  ``theta_j +- c s_j``, ``s_j`` the bootstrap standard deviation and ``c`` the
  ``1 - alpha`` quantile of ``max_j |theta^b_j - theta_j| / s_j``; a rectangle is a
  convex set, so Theorem 4 covers it.  ``bse`` is the bootstrap standard deviation
  (the paper's "SDB").  *Which empirical quantile* (the paper says "empirical
  conditional quantiles" and names no estimator): the ``p``-quantile of the M draws is
  their ``p (M + 1)``-th smallest, interpolated (:data:`QUANTILE_METHOD`, numpy's
  ``"weibull"``, Hyndman and Fan's type 6).  A further draw from the same law as the M
  draws falls below their ``k``-th smallest with probability ``k / (M + 1)`` (its rank
  among the M + 1 is uniform), so at ``k = p (M + 1)`` the interval holds it with
  probability exactly ``1 - alpha`` (when ``alpha (M + 1) / 2`` is a whole number; between
  the neighbouring levels otherwise): what the bootstrap promises (Theorem 4: the law of
  ``theta_T - theta_star`` is that of ``theta^b - theta_T``), without a loss for finite
  M.  numpy's default (type 7, position ``1 + p (M - 1)``) holds it with probability
  ``(M - 1)(1 - alpha) / (M + 1)`` only: 0.9405 for a 95% interval from M = 200 sequences
  (the joint rectangle, one-sided: 0.9455), and 0.9025 at M = 39, where type 6 gives the
  range of the draws, the ``(M - 1) / (M + 1) = 0.95`` of
  :func:`bootstrap_level_problem`.  Type 7 was used until 2026-12-05
  (``docs/benchmarks.md``, "FedLSA: the default step", the rerun).
* **Start.** ``theta_0 = 0``.
* **Prior weights and offsets** (``fedlsa(weights="w", offset="o")``; beyond the
  paper).  A row with prior weight ``w_r >= 0`` and offset ``o_r`` enters as the row
  ``(sqrt(w_r) x_r, sqrt(w_r) (y_r - o_r))``: ``A(z) = w x x'`` and
  ``b(z) = w x (y - o)``.  The rows so transformed are i.i.d. when the rows
  ``(x, y, w, o)`` are (assumption A2), so Algorithm 1, its analysis and the bootstrap
  apply to them unchanged, and the target becomes the weighted least-squares
  coefficients ``E[w x x']^-1 E[w x (y - o)]`` (with size weights, the pooled WLS fit
  of the tables: statsmodels' ``WLS(y - o, X, weights=w)``, whose HC0 sandwich is the
  comparison for the intervals).  ``n_c`` in the size weights stays the row count:
  ``sum_c (n_c / n) Abar^c = sum_r w_r x_r x_r' / n`` over the pooled rows.  A row of
  weight 0 uses its local step without moving the iterate.

What the intervals are intervals for, and how wide they are
-----------------------------------------------------------
With ``sampling="without_replacement"`` the intervals are for the *population*
coefficients ``theta_star``: the solution of ``(sum_c p_c Abar^c) theta =
sum_c p_c bbar^c`` with the expectations over the sites' populations and the site
sizes fixed (what the pooled OLS estimates).  The pooled OLS fit of the tables differs
from ``theta_star`` by the data's own sampling noise, of the size of the pooled sandwich
(HC1) standard errors.

In the paper's regimes the width is set by the step size, not by the number of rows:
``eta_T^-1/2 (theta_T - theta_star)`` tends to ``N(0, Sigma_infty)`` with ``Sigma_infty``
the Lyapunov solution ``Abar Sigma + Sigma Abar' = N^-1 Sigma_*^avg`` (section 5, eq. 20), so
``Var theta_T ~ eta_T Sigma_infty``; and a site can use at most as many rows as the
smallest site holds (one row per local step).  In one dimension (``A = 1``, noise
variance ``sigma^2`` per row) the last iterate of constant steps has variance
``eta sigma^2 / (2 - eta)`` against ``sigma^2 / K`` for the mean of the ``K`` rows it
used: a ratio of ``eta K / 2``, which must be large for the start to be forgotten
(``exp(-eta K)`` small).  ``docs/benchmarks.md`` has the measured ratios (widths 4.5
to 22 times the pooled HC1 widths).

Regime ``"one_pass"`` (beyond the paper)
----------------------------------------
``regime="one_pass"`` makes the last iterate as precise as the pooled OLS fit while
keeping Algorithm 1's structure and the last-iterate bootstrap of section 6.  Three
changes, each a choice the paper does not make:

* **Every row once, in mini-batches.**  With ``S = sum_t H_t`` local steps, site c
  splits its shuffled rows into ``S`` batches of ``floor(n_c / S)`` or
  ``ceil(n_c / S)`` rows and its local step ``h`` of round ``t`` uses the next batch:
  the sampled ``Z^c_{t,h}`` of eq. (6) is a batch, ``A^c(Z)`` and ``b^c(Z)`` its means of
  ``x x'`` and ``x y`` (unbiased for ``Abar^c``, ``bbar^c``; the batches of a site are
  independent draws from its population, assumption A2).  With the size weights
  ``p_c = n_c / n`` every row then enters the averaged update with the same weight
  ``p_c eta_t / b_c ~ eta_t S / n``: the run is one pass over the pooled rows.
* **The optimal gain instead of ``eta_t ~ t^-gamma_eta`` with ``gamma_eta < 1``.**  On
  the preconditioned design (``P = Abar^-1``, known exactly from the setup round) the
  gain ``1/k`` at local step ``k`` is the asymptotically efficient stochastic
  approximation (Robbins-Monro with the optimal matrix gain ``Abar^-1 / k``; e.g.
  Kushner and Yin 2003, "Stochastic Approximation and Recursive Algorithms", ch. 10 on
  rates of convergence; Polyak and Juditsky 1992, the paper's ``polyak1992acceleration``,
  reach the same covariance by averaging the iterates instead): the Lyapunov equation becomes
  ``(G - I/2) Sigma + Sigma (G - I/2)' = P Sigma_* P`` with ``G = P Abar = I``, so
  ``k Var theta_k -> Abar^-1 Sigma_* Abar^-1``, the sandwich.  This is the paper's S2
  at ``gamma_eta = 1``, outside its range [1/2, 1): Theorem 4's rate is not claimed
  here; the validity is measured (``docs/benchmarks.md``).  A gain ``1/k`` forgets the
  start only as ``k0 / k`` (``k0`` the steps the first gain counts for), which at
  moderate n is a bias of several standard errors; so the schedule has a burn-in:
  constant ``eta_0`` for the first ``T_b = ceil(L / (eta_0 H))`` rounds (``L = 5``:
  ``exp(-5) = 0.7%`` of the start left), after which the iterate is weighted as worth
  ``m_0 = (2 - eta_0) / eta_0`` steps (its stationary variance is ``eta_0 /
  (2 - eta_0)`` times one step's noise) and the gain runs on as ``1 / (m_0 + j)``
  at the ``j``-th step after the burn-in.  The step is constant within a round, as in
  Algorithm 1: ``eta_t = 1 - (m / (m + H))^{1/H}`` with ``m`` the steps counted before
  the round, so that a round contracts exactly as ``H`` steps of gain ``1/k`` would.
  The rows of the burn-in count as ``m_0`` of their ``L / eta_0`` steps: a loss of
  ``(L - 2 + eta_0) / (eta_0 S)`` of the information (11% of the variance, 5% of
  the width on the benchmark federation of ``docs/benchmarks.md``).
  ``eta_0`` defaults to the mean-square rule of "Step sizes" for a batch of
  ``b = min_c b_c`` rows: ``E[s] / (2 (E[s^2] / b + (1 - 1/b) E[s]^2 / d))`` (for
  ``b = 1`` the single-row rule; ``E u'G^2u = (E s^2 / b + (1 - 1/b) d) / d`` for the
  whitened batch Gram ``G``).
* **One multiplier per local step, shared by the sites** (``multipliers="shared"``).
  The paper draws ``w_{t,h,c}`` independently at every site.  The bootstrap update's
  perturbation ``(w - 1)(A^c(Z) theta - b^c(Z))`` then carries, besides the noise
  ``epsilon^c(theta_star, Z)`` the linear term ``M^b_t`` keeps, its mean
  ``Abar^c (theta_star - theta^c_star)``, which is not zero on heterogeneous sites
  (``epsilon-tilde`` in section 6.1 holds it): ``Sigma^b`` exceeds ``Sigma`` by
  ``sum_c p_c^2 Var(w) ||Abar^c (theta_star - theta^c_star)||^2`` per update (a few
  percent for single rows; for a batch the noise shrinks as ``1 / b_c`` and this term
  does not, so it would dominate).  A weight shared by the sites multiplies
  ``sum_c p_c (A^c(Z) theta - b^c(Z))``, whose mean ``Abar (theta - theta_star)``
  vanishes at ``theta_star``: the bootstrap then has exactly the noise covariance of
  the main sequence.  The sites draw the shared weights themselves from a seed the
  coordinator sends them; they are data-free.

Alternative not taken (not implemented, not measured): Polyak-Ruppert averaging of the
iterates with the online bootstrap of averaged SGD (Fang, Xu and Yang 2018, the paper's
``fang2018online``) is efficient without knowing ``Abar``, but the bootstrap is then of
the averaged sequences (a second departure from section 6's last-iterate theory) and the
average keeps the start's transient at order ``1 / (eta K)`` unless a burn-in is cut
off; here ``Abar`` is known exactly from the setup round, so the optimal gain is
available and the last-iterate bootstrap stays as the paper has it.

``one_pass`` needs ``precondition=True`` (the gain ``1/k`` is efficient only for
``P Abar = I``), ``site_weights="size"`` and ``sampling="without_replacement"``.  Local
steps: ``H = 1`` by default (no heterogeneity drift: Lemma 2's bias vanishes for
``H_t = 1``); ``H > 1`` saves rounds at the price of a drift of order
``eta_t^2 H^2 zeta_1 zeta_2`` per round, measured in ``docs/benchmarks.md``.  Default
rounds: as many as keep the smallest site's batches at ``d + 2`` rows.  Why: for
Gaussian-like rows ``E[s^2] ~ d (d + 2)``, so ``eta_0 ~ b / (2 (d + 1 + b))`` and the
burn-in's loss ``(L - 2) / (eta_0 S)`` is about ``6 (d + 1 + b) / min_c n_c``: batches
much larger than ``d + 1`` cost precision, much smaller ones cost rounds.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import pandas as pd

from fits.analysis.design import (
    MISSING_POLICIES,
    DesignSite,
    DesignSpec,
    Standardization,
    check_seed,
    dropped_note,
    fit_columns,
    original_map,
    scale_note,
    schema_round,
    site_items,
    standardization_round,
)
from fits.federation.protocol import ConfigValue, Message, ProtocolError
from fits.federation.transport import InProcessTransport, Transport

__all__ = [
    "BETA_A",
    "BETA_B",
    "W_MAX",
    "W_MIN",
    "ArraySite",
    "FedLSAConvergenceWarning",
    "FedLSAError",
    "FedLSAResults",
    "FedLSASite",
    "LSASite",
    "OnePassSchedule",
    "Schedule",
    "batch_step",
    "FORGET_HORIZON",
    "QUANTILE_METHOD",
    "STEP_X",
    "bootstrap_variance_inflation",
    "bootstrap_weights",
    "default_step_size",
    "fedlsa",
    "fedlsa_arrays",
    "local_updates",
    "paper_step_size",
    "run_fedlsa",
    "step_bound",
]

#: Beta(a, b) draws, standardized and shifted to mean 1, are the bootstrap weights.
BETA_A, BETA_B = 0.5, 2.0
_BETA_MEAN = BETA_A / (BETA_A + BETA_B)
_BETA_SD = math.sqrt(BETA_A * BETA_B / ((BETA_A + BETA_B) ** 2 * (BETA_A + BETA_B + 1.0)))
#: Bounds of the bootstrap weights (assumption A3): W_MIN < w < W_MAX.
W_MIN = 1.0 - _BETA_MEAN / _BETA_SD
W_MAX = 1.0 + (1.0 - _BETA_MEAN) / _BETA_SD

SAMPLING = ("without_replacement", "with_replacement")
SITE_WEIGHTS = ("size", "equal")
#: ``"paper"``: Algorithm 1 with one row per local step (regimes S1 and S2);
#: ``"one_pass"``: every row once in mini-batches, optimal gain (module docstring).
REGIMES = ("paper", "one_pass")
#: ``"site"``: every site draws its own multipliers (section 6 as printed);
#: ``"shared"``: one multiplier per local step, the same at every site.
MULTIPLIERS = ("site", "shared")
#: The most rounds T a schedule takes.
MAX_ROUNDS = 10_000_000
#: Burn-in length ``L`` of the one-pass schedule: constant steps until
#: ``exp(-L)`` of the start is left.
BURN_IN = 5.0
#: The default step of regime ``"paper"`` keeps ``x = eta_T E[s^2] / E[s]`` of its last
#: step at this value: a bootstrap variance at most ``1 / (1 - x) = 1.042`` times the real
#: one (module docstring, "Step sizes"; :func:`paper_step_size`).
STEP_X = 0.04
#: ... unless ``a sum_t eta_t H_t`` would then stay below this horizon: the default step
#: is raised (up to :func:`default_step_size`) until ``exp(-10)`` of the start is left.
FORGET_HORIZON = 10.0
#: The empirical quantile of the bootstrap draws (numpy's ``method``): ``"weibull"``, the
#: ``p (M + 1)``-th smallest of M draws, which holds a further draw of the same law with
#: probability ``1 - alpha`` (module docstring, "Intervals").
QUANTILE_METHOD: Final = "weibull"


class FedLSAError(ValueError):
    """Bad input for FedLSA (the message names the site, column or option and the fix)."""


#: The most memory, in bytes, the M + 1 parameter sequences of a round may take
#: (:func:`check_bootstrap_size`): 2 GiB.
BOOTSTRAP_MEMORY = 2 * 1024**3


def bootstrap_bytes(n_bootstrap: int, n_features: int, n_sites: int, local_steps: int) -> int:
    """About the bytes a round of M = ``n_bootstrap`` sequences holds at once, in float64:
    the coordinator's (M + 1, d) array and each site's reply (two copies each: the message
    and the stack it is averaged from), a site's working copies (about 6 (M + 1, d)) and
    its multipliers with their draw (3 (H, M + 1))."""
    s = int(n_bootstrap) + 1
    return 8 * s * ((2 * int(n_sites) + 6) * int(n_features) + 3 * int(local_steps))


def check_bootstrap_size(n_bootstrap: int, n_features: int, n_sites: int, local_steps: int) -> None:
    """A :class:`FedLSAError` when the bootstrap's sequences would take more than
    :data:`BOOTSTRAP_MEMORY` (was: 10^8 sequences took 15 GiB and minutes before a
    stop signal was heard)."""
    need = bootstrap_bytes(n_bootstrap, n_features, n_sites, local_steps)
    if need > BOOTSTRAP_MEMORY:
        most = max(2, n_bootstrap * BOOTSTRAP_MEMORY // need)
        raise FedLSAError(
            f"{n_bootstrap} bootstrap sequences of {n_features} coefficients at {n_sites} "
            f"site(s), {local_steps} local steps a round, would hold about "
            f"{need / 1024**3:.3g} GiB at once (at most {BOOTSTRAP_MEMORY / 1024**3:g} GiB): "
            f"ask for at most {most} (n_bootstrap=; fits analyze --bootstrap); a few "
            "hundred already give the intervals' quantiles"
        )


class FedLSAConvergenceWarning(RuntimeWarning):
    """The run is too short for its start to be forgotten: the intervals are not valid."""


class FedLSABootstrapWarning(RuntimeWarning):
    """Too few bootstrap sequences for the intervals' level: an interval of level
    1 - alpha needs M + 1 >= 2 / alpha (:func:`bootstrap_level_problem`)."""


def bootstrap_level_problem(n_bootstrap: int, alpha: float) -> str | None:
    """Why ``n_bootstrap`` sequences cannot give intervals of level ``1 - alpha``, or
    None.  The range of M bootstrap draws holds a further draw with probability
    (M - 1) / (M + 1), so no empirical quantile of them makes an interval of a higher
    level: it needs M + 1 >= 2 / alpha (199 sequences for 99%; was: a "99.99%" interval
    from 20 draws, their range)."""
    need = math.ceil((2.0 / alpha - 1.0) * (1.0 - 1e-9))  # 1 - ci is not exact
    if n_bootstrap >= need:
        return None
    top = (n_bootstrap - 1) / (n_bootstrap + 1)
    return (
        f"{n_bootstrap} bootstrap sequences cannot give a {1 - alpha:.6g} interval: the range "
        f"of M draws reaches only the level (M - 1) / (M + 1) = {top:.4g}; ask for at least "
        f"{need} sequences (n_bootstrap={need}; fits analyze --bootstrap {need}) or a lower "
        "level"
    )


# ----------------------------------------------------------------------------- schedule
@dataclass(frozen=True)
class Schedule:
    """Step sizes ``eta_t`` and local step counts ``H_t`` for rounds ``t = 1..T``.

    Regime S1 (constant, ``gamma_eta = gamma_h = 0``): ``eta_t = eta``, ``H_t = H``.
    Regime S2 (decreasing): ``eta_t = eta (1 + t)^-gamma_eta`` and
    ``H_t = ceil(H (1 + t)^gamma_h)``, with ``1/2 <= gamma_eta < 1`` and
    ``0 <= gamma_h <= gamma_eta`` (the paper's section 4.2).

    Parameters
    ----------
    rounds : int
        Number of communication rounds T.
    step_size : float
        ``eta``.
    local_steps : int
        ``H``.
    gamma_eta, gamma_h : float
        Exponents of the decreasing regime (both 0: the constant regime).
    """

    rounds: int
    step_size: float
    local_steps: int
    gamma_eta: float = 0.0
    gamma_h: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.rounds, int | np.integer) and self.rounds >= 1):
            raise FedLSAError(f"rounds must be a positive integer, got {self.rounds!r}")
        if self.rounds > MAX_ROUNDS:  # was: minutes and GiB spent listing the steps
            raise FedLSAError(
                f"rounds must be at most {MAX_ROUNDS} (each round is one exchange with every "
                f"site), got {self.rounds!r}"
            )
        if not (np.isfinite(self.step_size) and self.step_size > 0):
            raise FedLSAError(f"step_size must be a positive number, got {self.step_size!r}")
        if not (isinstance(self.local_steps, int | np.integer) and self.local_steps >= 1):
            raise FedLSAError(f"local_steps must be a positive integer, got {self.local_steps!r}")
        if self.gamma_eta == 0.0 and self.gamma_h == 0.0:
            return
        if not 0.5 <= self.gamma_eta < 1.0:
            raise FedLSAError(
                f"gamma_eta must lie in [0.5, 1) for the decreasing regime (S2), got "
                f"{self.gamma_eta}; use gamma_eta = gamma_h = 0 for constant steps (S1)"
            )
        if not 0.0 <= self.gamma_h <= self.gamma_eta:
            raise FedLSAError(
                f"gamma_h must lie in [0, gamma_eta] = [0, {self.gamma_eta}] (S2 needs the "
                f"steps to shrink faster than the local steps grow), got {self.gamma_h}"
            )

    @property
    def regime(self) -> str:
        """``"constant"`` (S1) or ``"decreasing"`` (S2)."""
        return "constant" if self.gamma_eta == 0.0 and self.gamma_h == 0.0 else "decreasing"

    def eta(self, t: int) -> float:
        """Step size of round ``t`` (1-based)."""
        return float(self.step_size * (1.0 + t) ** (-self.gamma_eta))

    def h(self, t: int) -> int:
        """Local steps of round ``t`` (1-based)."""
        if self.gamma_h == 0.0:
            return int(self.local_steps)
        return int(math.ceil(self.local_steps * (1.0 + t) ** self.gamma_h - 1e-12))

    def etas(self) -> np.ndarray:
        """``eta_1 .. eta_T``."""
        if self.gamma_eta == 0.0 and type(self).eta is Schedule.eta:
            # constant steps (each eta(t) is exactly eta(1)): no Python loop over T, which
            # took 30 s and 400 MB before the first round at T = 10^7
            return np.full(self.rounds, self.eta(1))
        return np.array([self.eta(t) for t in range(1, self.rounds + 1)])

    def hs(self) -> np.ndarray:
        """``H_1 .. H_T``."""
        if self.gamma_h == 0.0:
            return np.full(self.rounds, int(self.local_steps), dtype=np.int64)
        return np.array([self.h(t) for t in range(1, self.rounds + 1)], dtype=np.int64)

    @property
    def total_local_steps(self) -> int:
        """``sum_t H_t``: the rows one site uses over the whole run."""
        if self.gamma_h == 0.0:
            return int(self.rounds) * int(self.local_steps)
        return int(self.hs().sum())

    def with_step_size(self, step_size: float) -> Schedule:
        """The same schedule with another ``eta``."""
        return Schedule(self.rounds, step_size, self.local_steps, self.gamma_eta, self.gamma_h)


@dataclass(frozen=True)
class OnePassSchedule(Schedule):
    """The one-pass schedule (regime ``"one_pass"``, beyond the paper; module docstring).

    ``H_t = H``.  Burn-in: ``eta_t = eta_0`` for ``t <= T_b = ceil(L / (eta_0 H))``.
    Then the gain of a run that counts the burn-in iterate as ``m_0 = (2 - eta_0) /
    eta_0`` steps: with ``m = m_0 + H (t - 1 - T_b)`` steps counted before round ``t``,
    ``eta_t = 1 - (m / (m + H))^{1/H}``, so that the round contracts by
    ``(1 - eta_t)^H = m / (m + H)``, as ``H`` steps of gain ``1 / k`` do.  For ``H = 1``:
    ``eta_t = 1 / (m + 1)``.

    Parameters
    ----------
    rounds : int
        T.
    step_size : float
        ``eta_0``, in (0, 1).
    local_steps : int
        H.
    burn_in : float
        ``L`` (default :data:`BURN_IN` = 5).
    """

    burn_in: float = BURN_IN

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gamma_eta != 0.0 or self.gamma_h != 0.0:
            raise FedLSAError(
                "the one-pass regime sets its own steps: leave gamma_eta and gamma_h at 0"
            )
        if not self.step_size < 1.0:
            raise FedLSAError(
                f"the one-pass regime needs a burn-in step_size in (0, 1), got {self.step_size}"
            )
        if not (np.isfinite(self.burn_in) and self.burn_in > 0):
            raise FedLSAError(f"burn_in must be a positive number, got {self.burn_in!r}")

    @property
    def regime(self) -> str:
        """``"one_pass"``."""
        return "one_pass"

    @property
    def burn_in_rounds(self) -> int:
        """``T_b = ceil(L / (eta_0 H))``."""
        return int(math.ceil(self.burn_in / (self.step_size * self.local_steps) - 1e-12))

    def eta(self, t: int) -> float:
        """Step size of round ``t`` (1-based)."""
        tb = self.burn_in_rounds
        if t <= tb:
            return float(self.step_size)
        h = self.local_steps
        m = (2.0 - self.step_size) / self.step_size + h * (t - 1 - tb)
        return float(-math.expm1(math.log(m / (m + h)) / h))

    def with_step_size(self, step_size: float) -> OnePassSchedule:
        """The same schedule with another ``eta_0``."""
        return OnePassSchedule(self.rounds, step_size, self.local_steps, burn_in=self.burn_in)


# ----------------------------------------------------------------------------- core
def bootstrap_weights(rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
    """I.i.d. multiplier-bootstrap weights with mean 1 and variance 1 (section 6).

    ``w = 1 + (B - E B) / sd(B)``, ``B ~ Beta(1/2, 2)`` (the standardized Beta(0.5, 2)
    of the paper's appendix D, shifted to mean 1); ``W_MIN < w < W_MAX`` (assumption A3).
    """
    return 1.0 + (rng.beta(BETA_A, BETA_B, size=size) - _BETA_MEAN) / _BETA_SD


def local_updates(
    theta: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    eta: float,
    w: np.ndarray | None = None,
    z: np.ndarray | None = None,
) -> np.ndarray:
    """``H`` local FedLSA updates (eq. 6) of several parameter sequences at once.

    ``theta_h = theta_{h-1} - eta w_h (x_h x_h' theta_{h-1} - x_h y_h)`` for
    ``h = 1..H``, for every sequence (the main one and the bootstrap ones, section 6)
    and every leading batch index (replications in a simulation).

    Parameters
    ----------
    theta : ndarray of shape (..., S, d)
        ``S`` parameter vectors (e.g. the main sequence and M bootstrap ones).
    x : ndarray of shape (..., H, d)
        The sampled rows, in order.
    y : ndarray of shape (..., H)
        Their responses.
    eta : float
        Step size of the round.
    w : ndarray of shape (..., H, S), optional
        Multiplier weights of each update of each sequence (default: all 1).
    z : ndarray of shape (..., H, d), optional
        Preconditioned rows ``P x_h`` (default ``x``): the update becomes
        ``theta - eta w P x (x' theta - y)``, which is eq. 6 for the transformed design
        ``L^-1 x`` (``P = L^-T L^-1``) written in the original coordinates.

    Returns
    -------
    ndarray of shape (..., S, d)
        The parameters after the H updates (a new array; ``theta`` is not changed).
    """
    out = np.array(theta, dtype=np.float64, copy=True)
    n_steps = x.shape[-2]
    for h in range(n_steps):
        xh = x[..., h, :]  # (..., d)
        resid = np.einsum("...sd,...d->...s", out, xh) - y[..., h, None]  # (..., S)
        if w is not None:
            resid *= w[..., h, :]
        zh = xh if z is None else z[..., h, :]
        out -= eta * resid[..., None] * zh[..., None, :]
    return out


def batch_step(
    theta: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    eta: float,
    w: np.ndarray | None = None,
    z: np.ndarray | None = None,
) -> np.ndarray:
    """One local FedLSA update (eq. 6) on a mini-batch, for several sequences at once.

    ``theta - eta w (A(Z) theta - b(Z))`` with ``A(Z) = mean_i z_i x_i'`` and
    ``b(Z) = mean_i z_i y_i`` over the ``b`` rows of the batch ``Z`` (``z = P x``, or
    ``x``): the one-pass regime's update (module docstring).  For ``b = 1`` it is one
    step of :func:`local_updates`.

    Parameters
    ----------
    theta : ndarray of shape (..., S, d)
    x : ndarray of shape (..., b, d)
        The batch's rows.
    y : ndarray of shape (..., b)
    eta : float
    w : ndarray of shape (..., S), optional
        One multiplier per sequence (default: all 1).
    z : ndarray of shape (..., b, d), optional
        Preconditioned rows (default ``x``).

    Returns
    -------
    ndarray of shape (..., S, d)
    """
    theta = np.asarray(theta, dtype=np.float64)
    resid = np.einsum("...sd,...bd->...sb", theta, x) - y[..., None, :]  # (..., S, b)
    grad = np.einsum("...sb,...bd->...sd", resid, x if z is None else z) / x.shape[-2]
    if w is not None:
        grad = grad * w[..., None]
    return theta - eta * grad


# ----------------------------------------------------------------------------- site
class LSASite:
    """Site side of FedLSA: answers ``lsa_setup`` and ``lsa_round`` on its design.

    A subclass provides the design matrix and the response (:meth:`design_arrays`).
    The site draws its row order (or rows) and its bootstrap weights from its own
    generator, seeded by the coordinator's per-site seed (derived from the user's
    seed); only parameter vectors leave it, besides the setup round (its row count and
    the upper triangle of its ``X'X``, for the collinearity check and the
    preconditioner) and the preconditioning round (its largest ``x' P x``, for the
    default step size).
    """

    name: str

    def design_arrays(self, message: Message) -> tuple[np.ndarray, np.ndarray]:
        """The site's design ``(n, d)`` and response ``(n,)`` for an ``lsa_setup`` request."""
        raise NotImplementedError

    def lsa_handlers(self) -> dict:
        """Message type -> method, for :meth:`handle`."""
        return {
            "lsa_setup": self._lsa_setup,
            "lsa_precondition": self._lsa_precondition,
            "lsa_round": self._lsa_round,
        }

    def _lsa_setup(self, msg: Message) -> Message:
        x, y = self.design_arrays(msg)
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
            raise FedLSAError(f"{self.name}: the design or the response holds NaN or inf")
        self._x, self._y = x, y
        self._rng = np.random.default_rng(int(msg.config["seed"]))
        self._m = int(msg.config["n_bootstrap"])
        self._sampling = str(msg.config["sampling"])
        self._regime = str(msg.config.get("regime", "paper"))
        self._wrng = (
            np.random.default_rng(int(msg.config["multiplier_seed"]))
            if str(msg.config.get("multipliers", "site")) == "shared"
            else self._rng
        )
        total = int(msg.config["total_steps"])
        n = x.shape[0]
        if x.shape[1] != int(msg.config["n_features"]):
            raise ProtocolError(
                f"{self.name}: the site's design has {x.shape[1]} columns, the coordinator "
                f"fits {int(msg.config['n_features'])}"
            )
        if self._regime == "one_pass":
            self._order = self._rng.permutation(n)  # the batches: checked in lsa_precondition
        elif self._sampling == "without_replacement":
            if n < total:
                raise FedLSAError(
                    f"site {self.name!r} holds {n} rows, but FedLSA without replacement "
                    f"uses sum_t H_t = {total} rows per site (rounds x local steps); ask "
                    f"for fewer rounds or local steps (at most {n} rows in all), or "
                    "regime='one_pass'"
                )
            self._order = self._rng.permutation(n)
        self._used = 0
        return Message(
            "lsa_setup",
            {
                "n_rows": np.array([n], dtype=np.int64),
                "gram": (x.T @ x)[np.triu_indices(x.shape[1])],
            },
        )

    def _lsa_precondition(self, msg: Message) -> Message:
        if not hasattr(self, "_x"):
            raise ProtocolError(f"{self.name}: lsa_precondition before lsa_setup")
        p = np.asarray(msg.arrays["precondition"], dtype=np.float64)
        d = self._x.shape[1]
        if p.shape != (d, d):
            raise ProtocolError(
                f"{self.name}: preconditioner of shape {p.shape}, expected {(d, d)}"
            )
        self._z = self._x @ p
        if self._regime == "one_pass":
            steps, n = int(msg.config["batches"]), self._x.shape[0]
            if n < steps:
                raise FedLSAError(
                    f"site {self.name!r} holds {n} rows, but the one-pass regime runs "
                    f"sum_t H_t = {steps} local steps of at least one row each; ask for "
                    f"at most {n} rounds x local steps"
                )
            sizes = np.full(steps, n // steps) + (np.arange(steps) < n % steps)
            self._bounds = np.concatenate([[0], np.cumsum(sizes)])
        s = np.einsum("ij,ij->i", self._x, self._z)
        return Message(
            "lsa_precondition",
            {"s_sum": np.array([float(s.sum())]), "s2_sum": np.array([float(s @ s)])},
        )

    def _lsa_round(self, msg: Message) -> Message:
        if not hasattr(self, "_z"):
            raise ProtocolError(f"{self.name}: lsa_round before lsa_precondition")
        theta = np.asarray(msg.arrays["theta"], dtype=np.float64)
        h, eta = int(msg.config["local_steps"]), float(msg.config["eta"])
        if theta.shape != (self._m + 1, self._x.shape[1]):
            raise ProtocolError(
                f"{self.name}: lsa_round sends theta of shape {theta.shape}, expected "
                f"{(self._m + 1, self._x.shape[1])}"
            )
        if self._regime == "one_pass":
            if self._used + h > len(self._bounds) - 1:
                raise FedLSAError(f"site {self.name!r}: no batches left for {h} more local steps")
            out = theta
            for k in range(self._used, self._used + h):
                w = np.ones(self._m + 1)
                w[1:] = bootstrap_weights(self._wrng, self._m)
                idx = self._order[self._bounds[k] : self._bounds[k + 1]]
                with np.errstate(over="ignore", invalid="ignore"):  # the coordinator's error
                    out = batch_step(out, self._x[idx], self._y[idx], eta, w, self._z[idx])
            self._used += h
            return Message("lsa_round", {"theta": out})
        if self._sampling == "without_replacement":
            if self._used + h > self._x.shape[0]:
                raise FedLSAError(
                    f"site {self.name!r}: no unused rows left for {h} more local steps"
                )
            idx = self._order[self._used : self._used + h]
        else:
            idx = self._rng.integers(0, self._x.shape[0], size=h)
        self._used += h
        w = np.ones((h, self._m + 1))
        w[:, 1:] = bootstrap_weights(self._wrng, (h, self._m))
        # an overflow (a step too large) sends inf or NaN: the coordinator stops with an
        # error naming the step, without numpy's warnings
        with np.errstate(over="ignore", invalid="ignore"):
            out = local_updates(theta, self._x[idx], self._y[idx], eta, w, self._z[idx])
        return Message("lsa_round", {"theta": out})

    def export_state(self) -> dict:
        """What this site must remember between messages when each message is answered
        by a fresh process (Flower's ClientApp): the states of its generators (rows,
        and the multipliers' own when they are shared) and the rows or batches it has
        used, as JSON-ready values (empty before ``lsa_setup``).  The design, the row
        order, the batches and the preconditioned design follow from the site's table
        by replaying ``lsa_setup`` and ``lsa_precondition`` (:mod:`fits.deploy.flower`)."""
        if not hasattr(self, "_rng"):
            return {}
        shared = self._wrng is not self._rng
        return {
            "rng": self._rng.bit_generator.state,
            "multiplier_rng": self._wrng.bit_generator.state if shared else None,
            "used": int(self._used),
        }

    def restore_state(self, state: dict) -> None:
        """Continue from :meth:`export_state`: the next rows and bootstrap weights are
        those the exporting site would have drawn."""
        if state and hasattr(self, "_rng"):
            self._rng.bit_generator.state = state["rng"]
            if state.get("multiplier_rng") is not None:
                self._wrng.bit_generator.state = state["multiplier_rng"]
            self._used = int(state["used"])

    def handle(self, message: Message) -> Message:
        """Answer one protocol message."""
        handler = self.lsa_handlers().get(message.type)
        if handler is None:
            raise ProtocolError(f"{self.name}: unknown message type {message.type!r}")
        return handler(message)


class ArraySite(LSASite):
    """A FedLSA site holding a ready design matrix (plain numpy arrays).

    Parameters
    ----------
    x : array-like of shape (n, d)
        Design matrix (include a column of ones for an intercept).
    y : array-like of shape (n,)
        Response.
    name : str
        Site name for messages and errors.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, name: str = "site") -> None:
        self.name = name
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if x.ndim != 2 or y.shape != (x.shape[0],):
            raise FedLSAError(
                f"site {name!r}: expected x of shape (n, d) and y of shape (n,), got "
                f"{x.shape} and {y.shape}"
            )
        self.x, self.y = x, y

    def design_arrays(self, message: Message) -> tuple[np.ndarray, np.ndarray]:
        return self.x, self.y


# ----------------------------------------------------------------------------- results
def _intervals(theta: np.ndarray, draws: np.ndarray, alpha: float, joint: bool) -> np.ndarray:
    """The bootstrap intervals (d, 2) around ``theta`` from the sequences ``draws`` (M, d):
    per coefficient the paper's empirical-quantile interval ``[theta_j - q_{1-alpha/2},
    theta_j - q_{alpha/2}]`` of ``theta^b_j - theta_j``, or (``joint``) the rectangle
    ``theta_j +- c s_j`` from the max-statistic; quantiles by :data:`QUANTILE_METHOD`."""
    dev = draws - theta
    if not joint:
        lo, hi = np.quantile(dev, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0, method=QUANTILE_METHOD)
        return np.column_stack([theta - hi, theta - lo])
    s = np.std(dev, axis=0, ddof=1)
    s = np.where(s > 0, s, np.finfo(float).tiny)
    c = float(np.quantile(np.max(np.abs(dev) / s, axis=1), 1.0 - alpha, method=QUANTILE_METHOD))
    return np.column_stack([theta - c * s, theta + c * s])


@dataclass
class FedLSAResults:
    """FedLSA estimate and its multiplier-bootstrap distribution (statsmodels style).

    The pandas containers are those of :class:`fits.analysis.glm.GLMResults` (and of
    statsmodels): :attr:`params` and :attr:`bse` are Series and :meth:`conf_int` a
    DataFrame, indexed by :attr:`feature_names`; :attr:`coef_` and :attr:`bootstrap`
    are plain arrays.

    Attributes
    ----------
    params : Series of shape (d,)
        ``theta_T``, the last iterate, indexed by :attr:`feature_names` (named
        ``"coef"``).  Built from any array of shape (d,): an ndarray given here is
        wrapped (its values unchanged).  :attr:`coef_` is the same as an ndarray.
    bootstrap : ndarray of shape (M, d)
        The bootstrap last iterates ``theta_T^b`` (columns in the order of
        :attr:`feature_names`).
    feature_names : list of str
        The coefficients' names (:func:`fedlsa`: the design's columns,
        ``"(intercept)"`` first; :func:`fedlsa_arrays`: as given, else ``x0, x1, ...``),
        the index of :attr:`params`, :attr:`bse` and :meth:`conf_int`.
    schedule : Schedule
    site_weights : ndarray of shape (K,)
        The averaging weights ``p_c``.
    n_rows : ndarray of shape (K,)
        Rows per site.
    rounds : int
        Communication rounds run (setup round included).
    bytes_up, bytes_down : int
        Bytes uploaded by / sent to the sites over the whole run.
    sampling : str
    target : str
    multipliers : str
        ``"site"`` or ``"shared"`` bootstrap weights.
    n_dropped : ndarray of shape (K,) or None
        Per site, the rows left out for a missing value (:func:`fedlsa` with
        ``missing="drop"``); None otherwise.
    """

    params: pd.Series
    bootstrap: np.ndarray
    feature_names: list[str]
    schedule: Schedule
    site_weights: np.ndarray
    n_rows: np.ndarray
    rounds: int
    bytes_up: int
    bytes_down: int
    sampling: str
    target: str = "y"
    multipliers: str = "site"
    extra: dict = field(default_factory=dict)
    n_dropped: np.ndarray | None = None

    def __post_init__(self) -> None:
        values = self.params.to_numpy() if isinstance(self.params, pd.Series) else self.params
        self.params = pd.Series(
            np.asarray(values, dtype=np.float64), index=list(self.feature_names), name="coef"
        )

    @property
    def coef_(self) -> np.ndarray:
        """``theta_T`` as an ndarray of shape (d,) (scikit-learn spelling of
        :attr:`params`; the intercept, when the design has one, is its first entry)."""
        return self.params.to_numpy()

    @property
    def converged(self) -> bool:
        """Whether the start is forgotten: the transient bound of Lemma 1,
        ``exp(-a sum_t eta_t H_t) ||theta_T||``, is below a quarter of the smallest
        bootstrap standard error.  A bias of a quarter of a standard error lowers the
        coverage of a 95% interval to 94.3% at worst; a larger one means the intervals
        describe the noise around a point the run has not reached."""
        transient = float(self.extra.get("transient", 0.0))
        bse = self._bse()
        return transient * float(np.linalg.norm(self.coef_)) < 0.25 * float(np.min(bse))

    def check_convergence(self) -> None:
        """Warn (:class:`FedLSAConvergenceWarning`) if :attr:`converged` is False."""
        if not self.converged:
            warnings.warn(
                f"FedLSA has not forgotten its start after {self.schedule.rounds} rounds "
                f"(transient bound exp(-a sum eta_t H_t) = {self.extra['transient']:.2g}): "
                "the intervals are not valid; run more rounds or local steps, or a larger "
                "step_size",
                FedLSAConvergenceWarning,
                stacklevel=3,
            )

    @property
    def intervals_for(self) -> str:
        """What the intervals cover: ``"population"`` (the coefficients of the
        population the sites' rows were drawn from; sampling without replacement) or
        ``"tables"`` (the least-squares fit of these very tables; sampling with
        replacement, :attr:`interval_note`)."""
        return "tables" if self.sampling == "with_replacement" else "population"

    @property
    def interval_note(self) -> str | None:
        """Why intervals from sampling with replacement are not intervals for the
        population coefficients (None without replacement).

        Theorem 4 of the paper (section 6) reproduces the law of ``theta_T -
        theta_star``, ``theta_star`` solving ``Abar theta = bbar`` with ``Abar^c =
        E_{pi_c}[A^c(Z)]`` (eq. 2) for the rows' distribution ``pi_c`` of assumption A2.
        Rows drawn with replacement from a table are i.i.d. from the table's empirical
        distribution, so ``theta_star`` is the fit of the tables themselves (with size
        weights their pooled least-squares fit) and the intervals hold only the
        algorithm's own noise around it: they shrink to zero as T grows, whatever the
        data's sampling error (measured: nominal 95% intervals covered the population
        coefficients about 70% of the time on two sites of 100 and 120 rows)."""
        if self.sampling != "with_replacement":
            return None
        return (
            "sampling with replacement: the intervals are for the least-squares fit of "
            "these very tables (the paper's theta_star when each site's rows are drawn from "
            "its own table, assumption A2 and Theorem 4), not for the population "
            "coefficients: they hold only the algorithm's own noise around that fit, not "
            "the data's sampling error, and shrink to zero with more rounds; for "
            "intervals for the population coefficients, sample without replacement (the "
            "default) or use regime='one_pass'"
        )

    @property
    def rows_used(self) -> int | list[int]:
        """Rows each site used: ``sum_t H_t`` (one per local step, regime ``"paper"``),
        or every row of every site (regime ``"one_pass"``, a list by site)."""
        if self.schedule.regime == "one_pass":
            return [int(v) for v in self.n_rows]
        return self.schedule.total_local_steps

    @property
    def eta_final(self) -> float:
        """``eta_T``, the last round's step size."""
        return self.schedule.eta(self.schedule.rounds)

    def _bse(self) -> np.ndarray:
        """:attr:`bse` as an ndarray of shape (d,)."""
        return np.std(self.bootstrap - self.coef_, axis=0, ddof=1)

    @property
    def bse(self) -> pd.Series:
        """Bootstrap standard deviation of each coefficient (the paper's SDB scale).

        Returns
        -------
        Series of shape (d,)
            Indexed by :attr:`feature_names`, named ``"bse"`` (as
            :attr:`fits.analysis.glm.GLMResults.bse`).
        """
        return pd.Series(self._bse(), index=self.params.index, name="bse")

    def _conf_int(self, alpha: float, joint: bool) -> np.ndarray:
        """:meth:`conf_int` as an ndarray of shape (d, 2)."""
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
            raise FedLSAError(f"alpha must be a number in (0, 1), e.g. 0.05, got {alpha!r}")
        if not 0.0 < alpha < 1.0:
            raise FedLSAError(f"alpha must lie in (0, 1), got {alpha}")
        problem = bootstrap_level_problem(int(self.bootstrap.shape[0]), float(alpha))
        if problem is not None:
            warnings.warn(problem, FedLSABootstrapWarning, stacklevel=3)
        return _intervals(self.coef_, self.bootstrap, float(alpha), joint)

    def _original_map(self) -> np.ndarray:
        """A with :attr:`original_params` = A :attr:`params` (the design's standardization)."""
        spec, st = self.extra.get("design"), self.extra.get("standardization")
        if spec is None or st is None:
            raise FedLSAError(
                "this result records no design (run_fedlsa on arrays): its coefficients "
                "have no original scale; fit with fedlsa on the sites' tables"
            )
        return original_map(spec, st)

    @property
    def original_params(self) -> pd.Series:
        """The coefficients with the numeric features on their own scale (per unit, as
        OLS on the raw features): theta_j / sd_j for a numeric feature, the intercept
        minus sum_j theta_j mean_j / sd_j (:func:`fits.analysis.design.original_map`)."""
        return pd.Series(self._original_map() @ self.coef_, index=self.params.index, name="coef")

    @property
    def original_bse(self) -> pd.Series:
        """:attr:`bse` on the features' own scale: the bootstrap sd of A theta^b."""
        a = self._original_map()
        dev = (self.bootstrap - self.coef_) @ a.T
        return pd.Series(np.std(dev, axis=0, ddof=1), index=self.params.index, name="bse")

    def original_conf_int(self, alpha: float = 0.05, *, joint: bool = False) -> pd.DataFrame:
        """:meth:`conf_int` on the features' own scale: the same intervals built from
        the mapped bootstrap sequences A theta^b around A theta_T (for a numeric
        feature, the design-scale interval divided by its sd)."""
        self._conf_int(alpha, joint)  # the checks of alpha, and the level warning
        a = self._original_map()
        ci = _intervals(a @ self.coef_, self.bootstrap @ a.T, float(alpha), joint)
        return pd.DataFrame({0: ci[:, 0], 1: ci[:, 1]}, index=self.params.index)

    def conf_int(self, alpha: float = 0.05, *, joint: bool = False) -> pd.DataFrame:
        """Confidence intervals for the coefficients.

        Parameters
        ----------
        alpha : float
            1 - confidence level.
        joint : bool
            False: per-coefficient empirical-quantile intervals (section 6)
            ``[theta_j - q_{1-alpha/2}, theta_j - q_{alpha/2}]``, ``q`` the bootstrap
            quantiles of ``theta^b_j - theta_j`` (the ``p (M + 1)``-th smallest of the M
            draws, :data:`QUANTILE_METHOD`).  True: simultaneous intervals from
            the max-statistic ``max_j |theta^b_j - theta_j| / s_j``.

        Returns
        -------
        DataFrame of shape (d, 2)
            One row per coefficient, indexed by :attr:`feature_names`; columns ``0``
            (lower) and ``1`` (upper), as :meth:`fits.analysis.glm.GLMResults.conf_int`
            and statsmodels' ``conf_int``.  ``.to_numpy()`` gives the (d, 2) array.

        Raises
        ------
        FedLSAError
            ``alpha`` is not a number in (0, 1).
        """
        ci = self._conf_int(alpha, joint)
        return pd.DataFrame({0: ci[:, 0], 1: ci[:, 1]}, index=self.params.index)

    def to_dict(self, alpha: float = 0.05) -> dict:
        """JSON-ready result: coefficients, bootstrap std. errors, per-coefficient and
        joint intervals at level ``1 - alpha``, the schedule, rounds and bytes."""
        ci = self._conf_int(alpha, False)
        joint = self._conf_int(alpha, True)
        theta, bse = self.coef_, self._bse()
        spec = self.extra.get("design")
        original: list[dict[str, float]] = [{} for _ in self.feature_names]
        if "design" in self.extra and "standardization" in self.extra:
            raw, raw_se = self.original_params, self.original_bse
            raw_ci = self.original_conf_int(alpha)
            original = [
                {
                    "original_coef": float(raw.iloc[j]),
                    "original_bootstrap_se": float(raw_se.iloc[j]),
                    "original_lower": float(raw_ci.iloc[j, 0]),
                    "original_upper": float(raw_ci.iloc[j, 1]),
                }
                for j in range(len(self.feature_names))
            ]
        return {
            "method": "fedlsa",
            "target": self.target,
            "level": 1.0 - alpha,
            "coefficients": [
                {
                    "name": name,
                    "coef": float(theta[j]),
                    "bootstrap_se": float(bse[j]),
                    "lower": float(ci[j, 0]),
                    "upper": float(ci[j, 1]),
                    "joint_lower": float(joint[j, 0]),
                    "joint_upper": float(joint[j, 1]),
                    **original[j],
                }
                for j, name in enumerate(self.feature_names)
            ],
            "converged": bool(self.converged),
            "schedule": {
                "rounds": int(self.schedule.rounds),
                "step_size": float(self.schedule.step_size),
                "local_steps": int(self.schedule.local_steps),
                "gamma_eta": float(self.schedule.gamma_eta),
                "gamma_h": float(self.schedule.gamma_h),
                "eta_final": self.eta_final,
                "rows_per_site": self.rows_used,
                "regime": self.schedule.regime,
                "burn_in_rounds": int(getattr(self.schedule, "burn_in_rounds", 0)),
            },
            "multipliers": self.multipliers,
            "n_bootstrap": int(self.bootstrap.shape[0]),
            "sampling": self.sampling,
            "intervals_for": self.intervals_for,
            "interval_note": self.interval_note,
            "site_weights": [float(v) for v in self.site_weights],
            "n_rows": [int(v) for v in self.n_rows],
            "n_dropped": None if self.n_dropped is None else [int(v) for v in self.n_dropped],
            "offset": spec.offset if isinstance(spec, DesignSpec) else None,
            "weights": spec.weights if isinstance(spec, DesignSpec) else None,
            "rounds": int(self.rounds),
            "bytes_up": int(self.bytes_up),
            "bytes_down": int(self.bytes_down),
        }

    def summary(self, alpha: float = 0.05) -> str:
        """A text table: coefficient, bootstrap std. error, interval."""
        ci = self._conf_int(alpha, False)
        theta, bse = self.coef_, self._bse()
        level = f"{100 * (1 - alpha):g}%"
        width = max([len(n) for n in self.feature_names] + [9])
        lines = [
            f"FedLSA linear regression of {self.target!r}: {len(self.n_rows)} sites, "
            f"{int(self.n_rows.sum())} rows, {self.schedule.rounds} rounds "
            f"({self.schedule.regime} steps, eta_T = {self.eta_final:.3g}, "
            f"sum H_t = {self.schedule.total_local_steps}, rows used per site "
            f"{self.rows_used}), "
            f"{self.bootstrap.shape[0]} bootstrap sequences ({self.multipliers} "
            f"multipliers), sampling {self.sampling}",
            f"{'':{width}}  {'coef':>11}  {'boot se':>10}  {level + ' lower':>11}  "
            f"{level + ' upper':>11}",
        ]
        for j, name in enumerate(self.feature_names):
            lines.append(
                f"{name:{width}}  {theta[j]:11.5g}  {bse[j]:10.4g}  "
                f"{ci[j, 0]:11.5g}  {ci[j, 1]:11.5g}"
            )
        spec = self.extra.get("design")
        if isinstance(spec, DesignSpec):
            lines += spec.extra_lines()
        scale = scale_note(spec, "original_coef") if isinstance(spec, DesignSpec) else None
        if scale is not None:
            lines.append(scale)
        if self.interval_note is not None:
            lines.append(f"NOTE: {self.interval_note}")
        if not self.converged:
            lines.append("WARNING: not converged (the start is not forgotten); see converged")
        if self.n_dropped is not None and self.n_dropped.any():
            lines.append(
                f"rows left out for a missing value (missing='drop'): "
                f"{int(self.n_dropped.sum())}, per site {[int(v) for v in self.n_dropped]}"
            )
        lines.append(
            f"messages: {self.rounds} rounds, {self.bytes_up} bytes up, "
            f"{self.bytes_down} bytes down"
        )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()


# ----------------------------------------------------------------------------- coordinator
def run_fedlsa(
    transport: Transport,
    n_features: int,
    schedule: Schedule | None = None,
    *,
    rounds: int | None = None,
    local_steps: int | None = None,
    step_size: float | None = None,
    gamma_eta: float = 0.0,
    gamma_h: float = 0.0,
    n_bootstrap: int = 200,
    seed: int | np.random.SeedSequence | None = 0,
    site_weights: str = "size",
    sampling: str = "without_replacement",
    precondition: bool = True,
    regime: str = "paper",
    multipliers: str | None = None,
    setup_arrays: dict[str, np.ndarray] | None = None,
    setup_config: dict | None = None,
    feature_names: Sequence[str] | None = None,
    target: str = "y",
    on_round: Callable[[int, int], None] | None = None,
) -> FedLSAResults:
    """The FedLSA coordinator: Algorithm 1 with the online multiplier bootstrap.

    It talks to the sites only through ``transport`` (``lsa_setup`` once, then one
    ``lsa_round`` per round carrying the ``M + 1`` parameter vectors).

    Parameters
    ----------
    transport : Transport
        Reaches the sites (each answers ``lsa_setup`` and ``lsa_round``).
    n_features : int
        Width d of the design (the number of coefficients).
    schedule : Schedule, optional
        Steps and local steps; default built from ``rounds``, ``local_steps``,
        ``step_size``, ``gamma_eta`` and ``gamma_h`` (regime ``"paper"``), or an
        :class:`OnePassSchedule` from ``rounds``, ``local_steps`` and ``step_size``
        (regime ``"one_pass"``).
    rounds, local_steps : int, optional
        T and H.  Defaults: 200 and 10 in regime ``"paper"``; in regime
        ``"one_pass"`` ``H = 1`` and as many rounds as keep the smallest site's
        batches at ``d + 2`` rows, ``T = floor(min_c n_c / ((d + 2) H))``, or, where
        that is within the burn-in (small sites), the fewest rounds that outlast it
        (one more ``lsa_precondition`` round sends the sites their batch count).
    step_size : float, optional
        ``eta`` (``eta_0`` of the burn-in in regime ``"one_pass"``).  Default in regime
        ``"paper"``: :func:`paper_step_size`, the step whose last value keeps the
        bootstrap's variance inflation at ``1 / (1 - STEP_X)``, raised (up to
        ``E[s] / (2 E[s^2])``, ``s = x'Px``) when the run would not forget its start;
        in regime ``"one_pass"``: ``E[s] / (2 E[s^2])`` in its batch form for batches of
        ``min_c b_c`` rows (module docstring, "Step sizes").
    n_bootstrap : int
        Bootstrap sequences M.
    seed : int, SeedSequence or None
        Root of every site's generator (row order and bootstrap weights).  Default 0,
        as :func:`fits.analysis.glm.fit_glm` and ``fits analyze --seed``: the same call
        gives the same estimate and intervals.  ``None`` draws fresh entropy from the
        operating system, so two identical calls differ.
    site_weights : {"size", "equal"}
        ``"size"``: average with ``n_c / n`` (target: pooled OLS); ``"equal"``: the
        paper's 1/N.
    sampling : {"without_replacement", "with_replacement"}
        See the module docstring.
    precondition : bool
        Run Algorithm 1 on the whitened design ``L^-1 x`` (``L L' = Abar``, the
        weighted ``X'X / n`` from the setup round), written in the original
        coordinates: each update moves along ``P x`` with ``P = Abar^-1``.  Then
        ``a = lambda_min = 1`` in assumption A1 and the run forgets its start in about
        ``1 / eta`` local steps whatever the correlation of the features.  The
        intervals carry over exactly: ``theta = L^-T phi`` is a fixed linear map, and
        convex sets stay convex (the paper notes the invariance after Theorem 3).
        False runs the paper's update on the raw design.
    regime : {"paper", "one_pass"}
        ``"paper"``: Algorithm 1 with one row per local step, regimes S1 / S2.
        ``"one_pass"``: every row once in mini-batches with the optimal gain (beyond the
        paper; module docstring); needs ``precondition``, size weights and sampling
        without replacement.
    multipliers : {"site", "shared"}, optional
        Bootstrap weights drawn by every site for itself (section 6 as printed) or one
        per local step shared by the sites (module docstring).  Default: ``"site"`` in
        regime ``"paper"``, ``"shared"`` in regime ``"one_pass"``.
    setup_arrays, setup_config : optional
        Extra payload of the ``lsa_setup`` request (e.g. the standardization of a
        design built from tables).
    on_round : callable, optional
        Progress: ``on_round(t, T)`` once with ``t = 0`` before the first round of
        Algorithm 1 and after each of its ``T`` rounds (the bootstrap sequences travel
        in the same rounds); a run that returns ends with ``t == T``.  Called every
        round: throttle a display in the callback.  It does not change the run; an
        exception it raises ends it.

    Returns
    -------
    FedLSAResults
    """
    if site_weights not in SITE_WEIGHTS:
        raise FedLSAError(f"site_weights must be one of {SITE_WEIGHTS}, got {site_weights!r}")
    if sampling not in SAMPLING:
        raise FedLSAError(f"sampling must be one of {SAMPLING}, got {sampling!r}")
    if not (isinstance(n_bootstrap, int | np.integer) and n_bootstrap >= 2):
        raise FedLSAError(f"n_bootstrap must be an integer >= 2, got {n_bootstrap!r}")
    if regime not in REGIMES:
        raise FedLSAError(f"regime must be one of {REGIMES}, got {regime!r}")
    if multipliers is None:
        multipliers = "shared" if regime == "one_pass" else "site"
    if multipliers not in MULTIPLIERS:
        raise FedLSAError(f"multipliers must be one of {MULTIPLIERS}, got {multipliers!r}")
    try:
        check_seed(seed)
    except (TypeError, ValueError) as exc:
        raise FedLSAError(str(exc)) from None
    one_pass = regime == "one_pass"
    rounds_given = rounds is not None
    if one_pass:
        _check_one_pass(schedule, precondition, site_weights, sampling, gamma_eta, gamma_h)
        local_steps = 1 if local_steps is None else local_steps
        if isinstance(local_steps, bool) or not (
            isinstance(local_steps, int | np.integer) and local_steps >= 1
        ):  # checked here too when the rounds are left to the data (was: division by 0)
            raise FedLSAError(f"local_steps must be a positive integer, got {local_steps!r}")
        if rounds is not None:  # validate T and H before any message
            OnePassSchedule(rounds, 0.5, local_steps)
        if schedule is not None:
            rounds, local_steps = schedule.rounds, schedule.local_steps
        explicit_step = step_size is not None or schedule is not None
    elif schedule is None:
        rounds = 200 if rounds is None else rounds
        local_steps = 10 if local_steps is None else local_steps
        schedule = Schedule(rounds, step_size or 1.0, local_steps, gamma_eta, gamma_h)
        explicit_step = step_size is not None
    else:
        explicit_step = True
    k = transport.n_clients
    most_steps = local_steps if schedule is None else schedule.h(schedule.rounds)  # H_t grows
    check_bootstrap_size(int(n_bootstrap), int(n_features), k, int(most_steps or 1))
    up0, down0 = sum(transport.uploaded_bytes), sum(transport.downloaded_bytes)
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    config: dict[str, ConfigValue] = {
        "n_bootstrap": int(n_bootstrap),
        "sampling": sampling,
        "total_steps": 0 if schedule is None else schedule.total_local_steps,
        "n_features": int(n_features),
        "regime": regime,
        "multipliers": multipliers,
        **(setup_config or {}),
    }
    children = seq.spawn(k)
    if multipliers == "shared":  # one seed for every site's multipliers
        config["multiplier_seed"] = int(
            seq.spawn(1)[0].generate_state(1, np.uint64)[0] >> np.uint64(1)
        )
    messages = []
    for child in children:
        site_seed = int(child.generate_state(1, np.uint64)[0] >> np.uint64(1))
        messages.append(
            Message("lsa_setup", dict(setup_arrays or {}), {**config, "seed": site_seed})
        )
    replies = transport.exchange(messages)
    n_rows = np.array([int(r.arrays["n_rows"][0]) for r in replies], dtype=np.int64)
    p = n_rows / n_rows.sum() if site_weights == "size" else np.full(k, 1.0 / k)
    d = int(n_features)
    if feature_names is not None and len(feature_names) != d:
        raise FedLSAError(f"{len(feature_names)} feature names for a design of {d} columns")
    iu = np.triu_indices(d)
    gram = np.zeros((d, d))
    for c, r in enumerate(replies):
        g = np.zeros((d, d))
        g[iu] = r.arrays["gram"]
        gram += p[c] / n_rows[c] * (g + np.triu(g, 1).T)
    a = _check_design(gram, feature_names)
    if precondition:
        pre = np.linalg.inv(gram)
        pre = (pre + pre.T) / 2.0
        a = 1.0  # lambda_min(P Abar) = 1
    else:
        pre = np.eye(d)
    pre_config: dict[str, ConfigValue] = {}
    batch = 1
    if one_pass:
        assert local_steps is not None
        if rounds is None:
            rounds = max(1, int(n_rows.min()) // ((d + 2) * local_steps))
        pre_config["batches"] = rounds * local_steps
        batch = max(1, int(n_rows.min()) // (rounds * local_steps))
    out = transport.broadcast(Message("lsa_precondition", {"precondition": pre}, pre_config))
    s1 = float(sum(p[c] * r.arrays["s_sum"][0] / n_rows[c] for c, r in enumerate(out)))
    s2 = float(sum(p[c] * r.arrays["s2_sum"][0] / n_rows[c] for c, r in enumerate(out)))
    if not explicit_step and not s2 > 0:
        raise FedLSAError("every row of the design is zero; nothing to fit")
    setup_rounds = 2  # lsa_setup and lsa_precondition
    if one_pass:
        built = schedule is None
        if schedule is None:
            assert rounds is not None and local_steps is not None
            eta0 = step_size if explicit_step else default_step_size(s1, s2, batch, d)
            schedule = OnePassSchedule(rounds, float(eta0), local_steps)  # type: ignore[arg-type]
        assert isinstance(schedule, OnePassSchedule)
        if built and not rounds_given and schedule.rounds <= schedule.burn_in_rounds:
            # the default T (batches of d + 2 rows at the smallest site) is shorter than
            # the burn-in, which depends on the data (E[s^2]): take the fewest rounds
            # that outlast it, and tell the sites their new batches (the sums of s do
            # not depend on them).  Was: an error asking for a count that, on other
            # data, failed again.
            enough = _one_pass_rounds(
                schedule, int(n_rows.min()), d, s1, s2, step_size if explicit_step else None
            )
            if enough is not None:
                h = schedule.local_steps
                batch = max(1, int(n_rows.min()) // (enough * h))
                pre_config["batches"] = enough * h
                transport.broadcast(Message("lsa_precondition", {"precondition": pre}, pre_config))
                setup_rounds += 1
                eta0 = step_size if explicit_step else default_step_size(s1, s2, batch, d)
                schedule = OnePassSchedule(enough, float(eta0), h)  # type: ignore[arg-type]
        if explicit_step:
            _check_step_size(schedule, s1, s2, batch, d)
        if schedule.rounds <= schedule.burn_in_rounds:
            asked = (
                f"only {schedule.rounds} rounds were asked for"
                if rounds_given or not built
                else f"the default gives only {schedule.rounds} rounds (the smallest site's "
                "rows in batches of d + 2)"
            )
            fix = "ask for more rounds"
            low = int(np.argmin(n_rows))
            smallest = f"{transport.client_names[low]!r} ({int(n_rows[low])} rows)"
            if built:
                enough = _one_pass_rounds(
                    schedule, int(n_rows.min()), d, s1, s2, step_size if explicit_step else None
                )
                fix = (
                    f"ask for at least {enough} rounds (rounds={enough}; fits analyze -R {enough})"
                    if enough is not None
                    else f"the smallest site, {smallest}, has too few rows for this regime; use "
                    "regime='paper' (fits analyze --regime paper) with at most "
                    f"{int(n_rows.min())} rounds x local steps (-R, -H), or merge small sites"
                )
            raise FedLSAError(
                f"the one-pass regime's burn-in takes {schedule.burn_in_rounds} rounds "
                f"(eta_0 = {schedule.step_size:.3g}, {schedule.local_steps} local steps), "
                f"but {asked}: {fix} (the smallest site caps "
                "rounds x local steps at its row count)"
            )
    elif not explicit_step:
        assert schedule is not None
        schedule = schedule.with_step_size(paper_step_size(s1, s2, schedule, a))
    assert schedule is not None
    if explicit_step and not one_pass:  # one_pass: checked above, before its burn-in
        _check_step_size(schedule, s1, s2, 1, d)
    horizon = float(np.sum(schedule.etas() * schedule.hs()))
    theta = np.zeros((n_bootstrap + 1, d))  # theta_0 = 0 for every sequence
    guard = _DivergenceGuard()
    if on_round is not None:
        on_round(0, int(schedule.rounds))
    for t in range(1, schedule.rounds + 1):
        eta_t, h_t = schedule.eta(t), schedule.h(t)
        config_t: dict[str, ConfigValue] = {"round": t, "eta": eta_t, "local_steps": h_t}
        out = transport.broadcast(Message("lsa_round", {"theta": theta}, config_t))
        with np.errstate(over="ignore", invalid="ignore"):  # not finite: the error below
            theta = np.einsum("c,csd->sd", p, np.stack([r.arrays["theta"] for r in out]))
        if not np.all(np.isfinite(theta)):
            raise FedLSAError(
                f"FedLSA diverged in round {t} (eta_t = {eta_t:.3g}): the iterates overflowed; "
                f"the step is too large: use a smaller step_size (fits analyze --step) or "
                "leave it to the default"
            )
        guard.check(t, theta[0], eta_t * h_t)
        if on_round is not None:
            on_round(t, int(schedule.rounds))
    names = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(d)]
    res = FedLSAResults(
        params=theta[0].copy(),
        bootstrap=theta[1:].copy(),
        feature_names=names,
        schedule=schedule,
        site_weights=p,
        n_rows=n_rows,
        rounds=schedule.rounds + setup_rounds,
        bytes_up=sum(transport.uploaded_bytes) - up0,
        bytes_down=sum(transport.downloaded_bytes) - down0,
        sampling=sampling,
        target=target,
        multipliers=multipliers,
        extra={"a": a, "transient": math.exp(-a * horizon), "precondition": pre},
    )
    res.check_convergence()
    return res


def _check_site_rows(
    names: Sequence[str],
    n_rows: np.ndarray,
    rounds: int | None,
    local_steps: int | None,
    gamma_eta: float,
    gamma_h: float,
) -> None:
    """Every site holds the rows Algorithm 1 uses without replacement (sum_t H_t), else
    one error naming every site too small (each site's own check names only itself)."""
    try:
        total = Schedule(
            200 if rounds is None else rounds,
            1.0,
            10 if local_steps is None else local_steps,
            gamma_eta,
            gamma_h,
        ).total_local_steps
    except FedLSAError:  # a bad schedule: run_fedlsa says what is wrong with it
        return
    small = [
        f"{name!r} ({int(n)} rows)" for name, n in zip(names, n_rows, strict=True) if n < total
    ]
    if small:
        raise FedLSAError(
            f"site(s) {', '.join(small)} hold fewer rows than FedLSA without replacement "
            f"uses: sum_t H_t = {total} per site (rounds x local steps); "
            + _fewer_steps(
                int(min(n_rows)),
                200 if rounds is None else rounds,
                10 if local_steps is None else local_steps,
                gamma_eta,
                gamma_h,
            )
            + (
                ", or regime='one_pass' (--regime one_pass), which uses every row once"
                if min(n_rows) > ONE_PASS_MIN_ROWS
                else ""
            )
            + ". (Sampling with replacement runs, but its intervals are for the "
            "least-squares fit of these very tables, not for the population coefficients.)"
        )


#: Rows a site needs, at least, for regime "one_pass": its burn-in takes
#: ``ceil(BURN_IN / eta_0)`` rounds with ``eta_0 < 1/2`` (the batch form of the default
#: step tends to 1/2 for large batches), and the run must outlast it, one row a round.
ONE_PASS_MIN_ROWS = int(math.ceil(BURN_IN / 0.5))


def _fewer_steps(
    n_min: int, rounds: int, local_steps: int, gamma_eta: float, gamma_h: float
) -> str:
    """The advice of :func:`_check_site_rows`: the most rounds with the local steps as
    given (else one local step) whose rows, ``sum_t H_t``, the smallest site holds."""
    for h in dict.fromkeys((local_steps, 1)):
        lo, hi = 0, rounds  # the most rounds R <= rounds with sum_t H_t <= n_min
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if Schedule(mid, 1.0, h, gamma_eta, gamma_h).total_local_steps <= n_min:
                lo = mid
            else:
                hi = mid - 1
        if lo >= 1:
            used = Schedule(lo, 1.0, h, gamma_eta, gamma_h).total_local_steps
            return (
                f"the smallest site's {n_min} rows allow at most {lo} rounds of {h} local "
                f"step{'' if h == 1 else 's'} ({used} rows): ask for them (rounds={lo}, "
                f"local_steps={h}; fits analyze -R {lo} -H {h}) or fewer"
            )
    return f"the smallest site's {n_min} rows are too few for any round: merge small sites"


def _one_pass_rounds(
    schedule: OnePassSchedule,
    n_min: int,
    d: int,
    mean_s: float,
    mean_s2: float,
    step_size: float | None,
) -> int | None:
    """The fewest rounds above ``schedule.rounds`` whose one-pass schedule outlasts its
    burn-in (more rounds make smaller batches, hence a smaller default ``eta_0`` and a
    longer burn-in), or None when the smallest site's rows allow none."""
    h = schedule.local_steps
    for rounds in range(schedule.rounds + 1, n_min // h + 1):
        batch = max(1, n_min // (rounds * h))
        eta0 = step_size if step_size is not None else default_step_size(mean_s, mean_s2, batch, d)
        candidate = OnePassSchedule(rounds, float(eta0), h, burn_in=schedule.burn_in)
        if rounds > candidate.burn_in_rounds:
            return rounds
    return None


def bootstrap_variance_inflation(x: float) -> float:
    """The conditional variance of the bootstrap's ``theta^b - theta`` over the variance of
    ``theta - theta_star``, stationary, in one dimension, for ``x = eta E[s^2] / E[s]``:
    ``1 / (1 - x)`` (module docstring, "Step sizes"; ``inf`` for ``x >= 1``, where the
    bootstrap sequences no longer contract in mean square).

    The real iterate's stationary variance is ``eta sigma^2 / (2 - x)``, a bootstrap
    sequence's (weights with ``E w^2 = 2``) ``eta sigma^2 / (1 - x)`` about ``theta_star``
    and ``eta sigma^2 / ((1 - x)(2 - x))`` about ``theta``.  With several sites the
    averaging lowers it; one site is the worst case.
    """
    return math.inf if x >= 1.0 else 1.0 / (1.0 - x)


def paper_step_size(mean_s: float, mean_s2: float, schedule: Schedule, a: float = 1.0) -> float:
    """The default step ``eta`` of regime ``"paper"`` (module docstring, "Step sizes").

    ``min(eta_c, max(eta_x, eta_f))`` with ``eta_c = E[s] / (2 E[s^2])``
    (:func:`default_step_size`, the mean-square contraction step),
    ``eta_x = STEP_X E[s] / (E[s^2] g_T)`` (the last step ``eta_T = eta g_T`` has
    ``x = eta_T E[s^2] / E[s] = STEP_X``: the bootstrap's variance inflation
    :func:`bootstrap_variance_inflation` stays at most 1.042) and
    ``eta_f = FORGET_HORIZON / (a sum_t g_t H_t)`` (the horizon ``a sum_t eta_t H_t``
    reaches :data:`FORGET_HORIZON`), where ``g_t = eta_t / eta`` is the schedule's shape
    (1 in S1, ``(1 + t)^-gamma_eta`` in S2) and ``a`` the rate of assumption A1 (1 on the
    preconditioned design).  The step is raised above ``eta_x`` only when the rounds and
    local steps are too few for it to forget the start, and never above ``eta_c``.
    """
    if not mean_s2 > 0:
        raise FedLSAError("every row of the design is zero; nothing to fit")
    contraction = default_step_size(mean_s, mean_s2)
    shape = schedule.with_step_size(1.0)
    g_last = shape.eta(shape.rounds)
    inflation = STEP_X * mean_s / (mean_s2 * g_last)
    horizon = float(np.sum(shape.etas() * shape.hs()))
    forget = FORGET_HORIZON / (a * horizon) if a > 0 else math.inf
    return float(min(contraction, max(inflation, forget)))


def default_step_size(
    mean_s: float, mean_s2: float, batch: int = 1, n_features: int | None = None
) -> float:
    """The mean-square contraction step ``eta_c`` (module docstring, "Step sizes"): the
    default ``eta_0`` of regime ``"one_pass"``, half of :func:`step_bound`, and the
    largest default step of regime ``"paper"`` (:func:`paper_step_size`, whose default is
    usually smaller).

    ``eta = E[s] / (E[w^2] E[s^2])`` with ``E w^2 = Var w + (E w)^2 = 2``, ``s = x'Px``,
    for single rows; for batches of ``b`` rows (regime ``"one_pass"``)
    ``E[s] / (2 (E[s^2] / b + (1 - 1/b) E[s]^2 / d))``, the same rule for the batch
    Gram ``G = mean_i z_i x_i'`` (``E tr G^2 = E[s^2] / b + (1 - 1/b) tr(P Abar)^2``, with
    ``tr (P Abar)^2 = E[s]^2 / d`` when ``P Abar`` is a multiple of I).
    """
    if batch <= 1:
        return mean_s / ((1.0 + 1.0) * mean_s2)
    d = float(n_features) if n_features else 1.0
    return mean_s / (2.0 * (mean_s2 / batch + (1.0 - 1.0 / batch) * mean_s**2 / d))


def step_bound(
    mean_s: float, mean_s2: float, batch: int = 1, n_features: int | None = None
) -> float:
    """The mean-square stability bound on the step (module docstring, "Step sizes").

    ``E[s] / E[s^2]`` (``s = x'Px``) for single rows, ``E[s] / (E[s^2] / b + (1 - 1/b)
    E[s]^2 / d)`` for batches of ``b`` rows: twice :func:`default_step_size`.  Averaged
    over the rows, the multipliers (``E w^2 = 2``) and the directions, a local step
    multiplies the squared error by ``1 - 2 eta E[s]/d + 2 eta^2 E[s^2]/d`` (single
    rows), which is below 1 exactly when ``eta`` is below this bound; at or above it the
    iterates grow instead of contracting.  ``inf`` when every row is zero (``E[s^2] = 0``).
    """
    if not mean_s2 > 0:
        return math.inf
    return 2.0 * default_step_size(mean_s, mean_s2, batch, n_features)


def _check_step_size(schedule: Schedule, mean_s: float, mean_s2: float, batch: int, d: int) -> None:
    """A :class:`FedLSAError` before any round of Algorithm 1 when the schedule's largest
    step, its first ``eta_1`` (the steps never grow: S1, S2 and the one-pass gains), is at or
    above :func:`step_bound` (was: a step of 1 returned an intercept of 2e19, "converged")."""
    bound = step_bound(mean_s, mean_s2, batch, d)
    eta1 = schedule.eta(1)
    if eta1 < bound:
        return
    default = default_step_size(mean_s, mean_s2, batch, d)
    first = (
        f"the first step eta_1 = step_size 2^-gamma_eta = {eta1:.3g}"
        if schedule.gamma_eta
        else f"step_size {schedule.step_size:.6g}"
    )
    rule = (
        "E[s] / E[s^2]"
        if batch <= 1
        else f"E[s] / (E[s^2] / b + (1 - 1/b) E[s]^2 / d) for batches of b = {batch} rows"
    )
    raise FedLSAError(
        f"{first} is at or above the mean-square stability bound {bound:.3g} of this design "
        f"({rule}, s = x'Px the squared norm of a row, P the preconditioner; see 'Step "
        "sizes' in fits.analysis.lsa): from such a step the iterates grow instead of "
        f"contracting. Use a step below {bound:.3g} (step_size=; fits analyze --step), e.g. "
        f"{default:.3g} (half the bound, the mean-square contraction step), or leave it "
        "unset: the default is at most that"
    )


#: The run stops with "diverged" when the main iterate's norm exceeds this many times its
#: scale in the first unit of ``sum_t eta_t H_t`` (:class:`_DivergenceGuard`).
DIVERGENCE_FACTOR = 1e6


class _DivergenceGuard:
    """Stops a run whose main iterate grows without bound (a choice beyond the paper,
    whose assumption A1 takes ``eta < eta_{infty,p}`` for granted).

    From ``theta_0 = 0`` a stable run moves towards ``theta_star``: after ``k`` steps of a
    small step ``eta`` it has covered about ``min(1, eta k)`` of the way, so
    ``||theta_t|| / min(1, sum_{s<=t} eta_s H_s)`` estimates ``||theta_star||``.  The
    reference is the largest of these ratios over the rounds that begin before that sum
    reaches 1 (the first unit of time, while the start is still being forgotten); a later
    round whose ``||theta_t||`` exceeds :data:`DIVERGENCE_FACTOR` times it is an error.
    A stable run on the preconditioned design stays within a few times its reference;
    an unstable one grows geometrically, so the factor costs only a few rounds.
    """

    def __init__(self) -> None:
        self.horizon = 0.0
        self.scale = 0.0

    def check(self, t: int, theta: np.ndarray, eta_h: float) -> None:
        """After round ``t`` (``eta_h = eta_t H_t``): update the reference, or raise."""
        big = float(np.max(np.abs(theta), initial=0.0))
        with np.errstate(over="ignore"):  # scaled: no overflow below float's largest
            norm = big * float(np.linalg.norm(theta / big)) if big > 0 else 0.0
        if self.horizon < 1.0 or self.scale == 0.0:
            self.horizon += eta_h
            self.scale = max(self.scale, norm / min(1.0, self.horizon))
            return
        if norm > DIVERGENCE_FACTOR * self.scale:
            raise FedLSAError(
                f"FedLSA diverged in round {t}: the coefficients' norm grew to {norm:.3g}, "
                f"more than {DIVERGENCE_FACTOR:.0e} times its scale in the first rounds "
                f"({self.scale:.3g}); the step is too large: use a smaller step_size "
                "(fits analyze --step) or leave it to the default"
            )


def _check_one_pass(
    schedule: Schedule | None,
    precondition: bool,
    site_weights: str,
    sampling: str,
    gamma_eta: float,
    gamma_h: float,
) -> None:
    """Options the one-pass regime cannot run with: a clear error for each."""
    if schedule is not None and not isinstance(schedule, OnePassSchedule):
        raise FedLSAError("regime='one_pass' takes a OnePassSchedule (or none), not a Schedule")
    if not precondition:
        raise FedLSAError(
            "regime='one_pass' needs precondition=True: its gain 1/k is efficient only on "
            "the whitened design"
        )
    if site_weights != "size":
        raise FedLSAError(
            "regime='one_pass' streams every row once with the same weight, which is the "
            "size weighting: use site_weights='size'"
        )
    if sampling != "without_replacement":
        raise FedLSAError(
            "regime='one_pass' uses every row exactly once: use sampling='without_replacement'"
        )
    if gamma_eta != 0.0 or gamma_h != 0.0:
        raise FedLSAError(
            "regime='one_pass' sets its own step sizes: leave gamma_eta and gamma_h at 0"
        )


def _check_design(abar: np.ndarray, feature_names: Sequence[str] | None) -> float:
    """``a = lambda_min(Abar)`` of the weighted system; an error if the design is singular.

    ``-Abar`` must be Hurwitz (assumption A1): collinear features make ``Abar`` singular
    and FedLSA would wander along the null direction forever.
    """
    vals, vecs = np.linalg.eigh(abar)
    top = max(float(vals[-1]), np.finfo(float).tiny)
    if vals[0] <= 1e-10 * top:
        v = vecs[:, 0]
        names = (
            list(feature_names)
            if feature_names is not None
            else [f"x{j}" for j in range(abar.shape[0])]
        )
        # sqrt of the eigenvalue tolerance: a column of smaller weight is not part of
        # the relation (it holds to 1e-10 without it)
        involved = [names[j] for j in np.flatnonzero(np.abs(v) > 1e-5 * np.abs(v).max())]
        raise FedLSAError(
            f"the features are collinear across the federation (the pooled design has "
            f"rank < {abar.shape[0]}): {involved} are linearly dependent; leave one of "
            "them out"
        )
    return float(vals[0])


def fedlsa_arrays(
    xs: Sequence[np.ndarray],
    ys: Sequence[np.ndarray],
    *,
    names: Sequence[str] | None = None,
    feature_names: Sequence[str] | None = None,
    **kwargs,
) -> FedLSAResults:
    """FedLSA on design matrices already held by each site (plain numpy arrays).

    Builds one :class:`ArraySite` per ``(x, y)`` and an in-process transport, then runs
    :func:`run_fedlsa` (its keyword arguments pass through).
    """
    if len(xs) != len(ys) or len(xs) == 0:
        raise FedLSAError(
            f"need one response per design and at least one site, got "
            f"{len(xs)} designs and {len(ys)} responses"
        )
    names = list(names) if names is not None else [f"site{c + 1}" for c in range(len(xs))]
    sites = [ArraySite(x, y, n) for x, y, n in zip(xs, ys, names, strict=True)]
    transport = InProcessTransport(sites, n_jobs=1)
    try:
        width = np.asarray(xs[0]).shape[-1]
        return run_fedlsa(transport, width, feature_names=feature_names, **kwargs)
    finally:
        transport.close()


# ----------------------------------------------------------------------------- tables
class FedLSASite(DesignSite, LSASite):
    """A FedLSA site holding a table: ``setup`` and ``moments`` as every analysis site
    (:class:`fits.analysis.design.DesignSite`), then ``lsa_setup`` (builds its design
    with the federation-wide standardization the request carries) and ``lsa_round``.

    Parameters
    ----------
    data : DataFrame
        The site's table (never leaves the site).
    name : str
        The site's name.
    """

    def handlers(self) -> dict:
        return {**super().handlers(), **self.lsa_handlers()}

    def handle(self, message: Message) -> Message:
        return DesignSite.handle(self, message)

    def design_arrays(self, message: Message) -> tuple[np.ndarray, np.ndarray]:
        """The design and the response, each row ``(sqrt(w) x, sqrt(w) (y - o))`` with
        the spec's prior weight ``w`` and offset ``o`` (module docstring)."""
        if self.builder is None:
            raise ProtocolError(f"{self.name}: lsa_setup before the moments round")
        st = Standardization(
            means=np.asarray(message.arrays["means"], dtype=np.float64),
            sds=np.asarray(message.arrays["sds"], dtype=np.float64),
            n_rows=np.zeros(0, dtype=np.int64),
        )
        x, y = self.design(st), self.builder.target()
        offset, weights = self.builder.offset(), self.builder.weights()
        if offset is not None:
            y = y - offset
        if weights is not None:
            root = np.sqrt(weights)
            x, y = x * root[:, None], y * root
        return x, y


NUMERIC_DTYPES = ("float", "int", "bool")


def fedlsa(
    tables: Mapping[str, pd.DataFrame] | Sequence[pd.DataFrame] | None,
    target: str,
    features: Sequence[str] | None = None,
    *,
    rounds: int | None = None,
    local_steps: int | None = None,
    step_size: float | None = None,
    gamma_eta: float = 0.0,
    gamma_h: float = 0.0,
    n_bootstrap: int = 200,
    seed: int | None = 0,
    site_weights: str = "size",
    sampling: str = "without_replacement",
    precondition: bool = True,
    regime: str = "paper",
    multipliers: str | None = None,
    transport: Transport | None = None,
    kinds: Mapping[str, str] | None = None,
    on_round: Callable[[int, int], None] | None = None,
    missing: str = "raise",
    offset: str | None = None,
    weights: str | None = None,
) -> FedLSAResults:
    """Linear regression across sites by FedLSA, with multiplier-bootstrap intervals.

    Rounds: the setup round (schema), one round of sums (federation-wide means and
    standard deviations of the numeric features, :mod:`fits.analysis.design`), the
    FedLSA setup and preconditioning rounds, then ``rounds`` rounds of Algorithm 1
    carrying the ``M + 1`` parameter vectors.  Coefficients are on the design's scale:
    numeric features standardized with the federation-wide mean and sd, nominal ones
    one-hot with the first level as reference, an intercept first.

    Parameters
    ----------
    tables : mapping of site name to DataFrame, or sequence of DataFrames
        One table per site (ignored when ``transport`` is given).
    target : str
        The numeric response.
    features : sequence of str, optional
        Feature columns (default: every other column).
    rounds, local_steps, step_size, gamma_eta, gamma_h :
        The schedule (:class:`Schedule`, or :class:`OnePassSchedule` in regime
        ``"one_pass"``); defaults in :func:`run_fedlsa`.
    n_bootstrap : int
        Bootstrap sequences M (default 200).
    seed : int or None
        The one seed every site's generator derives from (row order, bootstrap
        weights).  Default 0, as :func:`fits.analysis.glm.fit_glm` and ``fits analyze
        --seed``: two identical calls give the same ``coef_`` and intervals.  ``None``
        draws fresh entropy from the operating system, so two identical calls differ.
    site_weights, sampling, precondition, regime, multipliers :
        See :func:`run_fedlsa` and the module docstring.  ``regime="one_pass"`` gives
        intervals about as wide as the pooled OLS sandwich intervals; the default
        ``"paper"`` runs Algorithm 1 as printed, whose intervals are wider (their width
        is set by the last step size).
    transport : Transport, optional
        Reaches sites that answer the FedLSA messages (e.g. :class:`FedLSASite` over
        Flower); default: an in-process federation of ``tables``.
    kinds : mapping, optional
        Column kind overrides for the shared schema.
    on_round : callable, optional
        Progress: ``on_round(t, T)`` with the rounds of Algorithm 1 done and their
        number T (:func:`run_fedlsa`; the setup rounds before them are not counted).
    missing : {"raise", "drop"}
        Rows missing a value of the target or of a numeric feature: an error naming the
        site and the column (``"raise"``, the default), or left out by each site before
        any sum (``"drop"``: complete cases; :attr:`FedLSAResults.n_dropped` and a
        warning give the counts per site), as in :func:`fits.analysis.glm.fit_glm`.
        The offset and weights columns follow the same policy.
    offset : str, optional
        A numeric column subtracted from the target (statsmodels' ``offset``): the fit
        is of ``y - offset``, its coefficient fixed to 1.
    weights : str, optional
        A column of non-negative prior weights: weighted least squares (statsmodels'
        ``WLS(weights=)``), each row entering Algorithm 1 as ``(sqrt(w) x,
        sqrt(w) (y - offset))`` (module docstring).  A site whose weights are all 0 is
        an error naming it.

    Returns
    -------
    FedLSAResults
        ``params`` and ``bse`` (Series by design column; ``coef_`` the ndarray),
        ``conf_int(alpha)`` (a DataFrame with columns 0 and 1), ``summary()``, rounds
        and bytes.

    Raises
    ------
    FedLSAError
        Non-numeric target, collinear features, a site with fewer rows than the run
        needs, bad options.
    """
    try:  # before any site is built (run_fedlsa checks it again)
        check_seed(seed)
    except (TypeError, ValueError) as exc:
        raise FedLSAError(str(exc)) from None
    if missing not in MISSING_POLICIES:
        raise ValueError(
            f"missing must be one of {', '.join(map(repr, MISSING_POLICIES))}, got {missing!r}"
        )
    for what, col in (("offset", offset), ("weights", weights)):
        if col is not None and not isinstance(col, str):
            raise FedLSAError(f"{what} must be a column name (a str), got {col!r}")
    own = transport is None
    if own:
        if tables is None:
            raise FedLSAError("give the sites' tables or a transport that reaches them")
        items = site_items(tables, "fedlsa")
        if not items:
            raise FedLSAError("no tables: FedLSA needs at least one site")
        sites = [FedLSASite(t, str(n)) for n, t in items]
        transport = InProcessTransport(sites, n_jobs=1)
    assert transport is not None
    try:
        up0, down0 = sum(transport.uploaded_bytes), sum(transport.downloaded_bytes)
        used, more = fit_columns(target, features, (offset, weights))
        schema, _ = schema_round(transport, kinds=kinds, columns=used, target=target, exclude=more)
        if target not in schema.names:
            raise FedLSAError(
                f"target column {target!r} is not in the tables; columns: {schema.names}"
            )
        tspec = schema[target]
        if tspec.dtype not in NUMERIC_DTYPES:
            raise FedLSAError(
                f"target {target!r} is not numeric (its values are {tspec.dtype}); FedLSA "
                "fits a linear regression of a numeric target: code it as numbers"
            )
        spec = DesignSpec.from_schema(
            schema, target, features, missing=missing, offset=offset, weights=weights
        )
        st = standardization_round(transport, spec)
        dropped = dropped_note(st, transport.client_names, spec)
        if dropped:
            warnings.warn(dropped, UserWarning, stacklevel=2)
        if regime == "paper" and sampling == "without_replacement":
            _check_site_rows(
                transport.client_names, st.n_rows, rounds, local_steps, gamma_eta, gamma_h
            )
        res = run_fedlsa(
            transport,
            spec.n_columns,
            rounds=rounds,
            local_steps=local_steps,
            step_size=step_size,
            gamma_eta=gamma_eta,
            gamma_h=gamma_h,
            n_bootstrap=n_bootstrap,
            seed=seed,
            site_weights=site_weights,
            sampling=sampling,
            precondition=precondition,
            regime=regime,
            multipliers=multipliers,
            setup_arrays={"means": st.means, "sds": st.sds},
            feature_names=spec.feature_names,
            target=target,
            on_round=on_round,
        )
        res.rounds += 2
        res.bytes_up = sum(transport.uploaded_bytes) - up0
        res.bytes_down = sum(transport.downloaded_bytes) - down0
        res.extra.update({"design": spec, "standardization": st, "schema": schema})
        if missing == "drop":
            res.n_dropped = (
                np.zeros(len(st.n_rows), np.int64) if st.n_dropped is None else st.n_dropped
            )
        return res
    finally:
        if own:
            transport.close()  # type: ignore[attr-defined]
