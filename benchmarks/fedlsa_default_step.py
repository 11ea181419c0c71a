"""Coverage of ``fedlsa``'s intervals at its default step, through the public API.

Three homogeneous sites (3,000 / 2,500 / 2,200 rows) of ``y = 1 + 2 x1 - 0.5 x2 + e``,
``x1 ~ N(1, 1)``, ``x2 ~ N(0, 2^2)``, ``e ~ N(0, 1)``; fresh rows per replication;
``fedlsa(tables, "y", rounds=200, local_steps=10, seed=s)`` (regime ``"paper"``) with
the default step (:func:`fits.analysis.lsa.paper_step_size`), ``--step`` given, or
``--old-default``: the default before 2026-12-05, the mean-square contraction step
``E[s] / (2 E[s^2])`` (``s = x'Px`` over the pooled rows, what ``fedlsa`` computed; about
0.116 here). Prints the 95% coverage of the per-unit
intervals (``original_conf_int``), the mean bootstrap standard error over the standard
deviation of the estimates across replications, and the bias over that standard
deviation. ``--heterogeneous``: the sites' feature distributions and coefficients differ
(``HETERO``); the truth is then the size-weighted population solution (``hetero_truth``).

Usage::

    python benchmarks/fedlsa_default_step.py --replications 200
    python benchmarks/fedlsa_default_step.py --replications 200 --step 0.05
    python benchmarks/fedlsa_default_step.py --replications 200 --old-default
    python benchmarks/fedlsa_default_step.py --replications 200 --heterogeneous
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

import fits.analysis as fa
from fits.analysis import lsa

TRUTH = np.array([1.0, 2.0, -0.5])
SIZES = {"a": 3000, "b": 2500, "c": 2200}
#: ``--heterogeneous``: per site, the mean and sd of x1, the sd of x2 and the coefficients
HETERO = {
    "a": (1.0, 1.0, 2.0, np.array([1.0, 2.0, -0.5])),
    "b": (2.0, 1.5, 1.0, np.array([1.6, 1.4, -0.2])),
    "c": (-0.5, 0.7, 3.0, np.array([0.4, 2.6, -0.9])),
}


def hetero_truth() -> np.ndarray:
    """Solution of ``(sum_c p_c Abar^c) theta = sum_c p_c Abar^c beta_c`` (population
    moments, size weights): what the pooled OLS estimates and FedLSA targets."""
    n = sum(SIZES.values())
    a_sum, b_sum = np.zeros((3, 3)), np.zeros(3)
    for name, (m1, s1, s2, beta) in HETERO.items():
        a = np.diag([1.0, m1**2 + s1**2, s2**2])
        a[0, 1] = a[1, 0] = m1
        a_sum += SIZES[name] / n * a
        b_sum += SIZES[name] / n * a @ beta
    return np.linalg.solve(a_sum, b_sum)


def contraction_step(pooled: pd.DataFrame) -> float:
    """``E[s] / (2 E[s^2])``, ``s = x'Px`` with ``P = (X'X / n)^-1`` over the pooled rows
    (size weights); ``s`` does not change under the design's standardization."""
    x = np.column_stack([np.ones(len(pooled)), pooled["x1"], pooled["x2"]])
    p = np.linalg.inv(x.T @ x / len(x))
    s = np.einsum("ij,jk,ik->i", x, p, x)
    return float(lsa.default_step_size(s.mean(), np.mean(s**2)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=200)
    parser.add_argument("--step", type=float, default=None, help="step_size (default: fedlsa's)")
    parser.add_argument(
        "--old-default",
        action="store_true",
        help="the default before 2026-12-05: E[s] / (2 E[s^2]) on the pooled rows",
    )
    parser.add_argument(
        "--heterogeneous",
        action="store_true",
        help="site-specific feature distributions and coefficients (HETERO)",
    )
    args = parser.parse_args()
    truth = hetero_truth() if args.heterogeneous else TRUTH
    steps = []
    covered, estimates, errors = [], [], []
    for s in range(args.replications):
        rng = np.random.default_rng(1000 + s)
        tables = {}
        for name, n in SIZES.items():
            m1, s1, s2, beta = HETERO[name] if args.heterogeneous else (1.0, 1.0, 2.0, TRUTH)
            x1, x2 = rng.normal(m1, s1, n), rng.normal(0, s2, n)
            y = beta[0] + beta[1] * x1 + beta[2] * x2 + rng.normal(size=n)
            tables[name] = pd.DataFrame({"x1": x1, "x2": x2, "y": y})
        step = args.step
        if args.old_default:
            step = contraction_step(pd.concat(list(tables.values())))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fa.fedlsa(tables, "y", rounds=200, local_steps=10, seed=s, step_size=step)
        steps.append(res.schedule.step_size)
        ci = np.asarray(res.original_conf_int(0.05))
        covered.append((ci[:, 0] <= truth) & (truth <= ci[:, 1]))
        estimates.append(np.asarray(res.original_params))
        errors.append(np.asarray(res.original_bse))
    est = np.array(estimates)
    sd = est.std(axis=0, ddof=1)
    label = "old default" if args.old_default else "default" if args.step is None else "given"
    if args.heterogeneous:
        print("heterogeneous sites; truth", truth.round(4))
    print(f"step ({label}): mean {np.mean(steps):.4g}, range {min(steps):.4g}-{max(steps):.4g}")
    print("coverage (intercept, x1, x2):", np.mean(covered, axis=0).round(3))
    print("bootstrap se / sd of the estimates:", (np.mean(errors, axis=0) / sd).round(3))
    print("bias / sd:", ((est.mean(axis=0) - truth) / sd).round(2), "sd:", sd.round(4))


if __name__ == "__main__":
    main()
