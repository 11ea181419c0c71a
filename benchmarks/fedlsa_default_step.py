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
Replication ``s`` draws its rows from seed ``1000 + s`` and runs ``fedlsa`` with
``seed=s``, ``s = first_seed .. first_seed + replications - 1`` (``--first-seed``,
default 0).  Also printed: the coverage of the same intervals with numpy's default
quantile (type 7, ``fedlsa``'s until 2026-12-05) from the same bootstrap draws, and, on
the homogeneous design, the standard deviation the exact second-moment recursion
predicts (``recursion_sd``) with the coverage of ``estimate +- 1.96 x`` that sd (no
bootstrap at all).  ``--population-design`` (homogeneous): instead of ``fedlsa`` on the
tables, Algorithm 1 on the design standardized with the population means and sds and
preconditioned by the population ``Abar^-1 = I`` (``precondition=False``), at the default
step of the population moments (``E s = 3``, ``E s^2 = 13``): the setting of Theorem 4,
with nothing estimated from the rows the iteration uses; same rows, seeds and multipliers.

Usage::

    python benchmarks/fedlsa_default_step.py --replications 200
    python benchmarks/fedlsa_default_step.py --replications 200 --step 0.05
    python benchmarks/fedlsa_default_step.py --replications 200 --old-default
    python benchmarks/fedlsa_default_step.py --replications 200 --heterogeneous
    python benchmarks/fedlsa_default_step.py --replications 600 --first-seed 600
    python benchmarks/fedlsa_default_step.py --replications 600 --population-design
    python benchmarks/fedlsa_default_step.py --replications 600 --heterogeneous --multipliers shared
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


def recursion_sd(step: float, rounds: int = 200, local_steps: int = 10) -> np.ndarray:
    """Exact sd of the homogeneous design's per-unit estimates after ``rounds`` rounds
    at a constant ``step``: the second-moment recursion of the error on the whitened
    design ``z = (1, u1, u2)``, ``u ~ N(0, I)``, noise variance 1 (local step:
    ``D -> E[(I - eta z z') D (I - eta z z')] + eta^2 I``; averaging the sites:
    ``sum_c p_c^2`` times the sites' second moment plus ``1 - sum_c p_c^2`` times
    ``(1 - eta)^(2H) D``), from ``theta_0 = 0``, mapped to the per-unit scale."""
    e0, j = np.eye(3)[0], np.diag([0.0, 1.0, 1.0])
    ee = np.outer(e0, e0) + j

    def fourth(m: np.ndarray) -> np.ndarray:  # E[(z'Mz) z z'] for symmetric M
        mj = j @ m[0]
        return (
            (m[0, 0] + np.trace(j @ m)) * ee
            + 2 * (np.outer(e0, mj) + np.outer(mj, e0))
            + 2 * j @ m @ j
        )

    sizes = np.array(list(SIZES.values()), dtype=float)
    sp2 = float(np.sum((sizes / sizes.sum()) ** 2))
    start = np.array([TRUTH[0] + TRUTH[1], TRUTH[1], 2 * TRUTH[2]])  # theta_* on z
    d = np.outer(start, start)
    for _ in range(rounds):
        v = d
        for _ in range(local_steps):
            v = v - 2 * step * v + step**2 * fourth(v) + step**2 * np.eye(3)
        d = sp2 * v + (1 - sp2) * (1 - step) ** (2 * local_steps) * d
    a = np.array([[1.0, -1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]])  # z -> per unit
    return np.sqrt(np.diag(a @ d @ a.T))


def population_fit(
    tables: dict[str, pd.DataFrame], seed: int, step: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """``--population-design``: the per-unit estimate and bootstrap draws of Algorithm 1
    on ``(1, x1 - 1, x2 / 2)`` with ``P = I`` (the population standardization and
    preconditioner), the same rows, seeds and multipliers as ``fedlsa(tables, seed=seed)``."""
    xs = [np.column_stack([np.ones(len(t)), t["x1"] - 1.0, t["x2"] / 2.0]) for t in tables.values()]
    ys = [t["y"].to_numpy() for t in tables.values()]
    schedule = lsa.Schedule(200, 1.0, 10)
    eta = lsa.paper_step_size(3.0, 13.0, schedule) if step is None else step
    res = lsa.fedlsa_arrays(
        xs,
        ys,
        names=list(tables),
        rounds=200,
        local_steps=10,
        seed=seed,
        step_size=eta,
        precondition=False,
    )
    a = np.array([[1.0, -1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]])
    return a @ res.coef_, res.bootstrap @ a.T


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
    parser.add_argument("--first-seed", type=int, default=0, help="seed of the first replication")
    parser.add_argument(
        "--multipliers",
        choices=("site", "shared"),
        default=None,
        help="fedlsa's multipliers (default: its own, 'site' in regime paper)",
    )
    parser.add_argument(
        "--population-design",
        action="store_true",
        help="Algorithm 1 with the population standardization and preconditioner (homogeneous)",
    )
    args = parser.parse_args()
    if args.population_design and (args.heterogeneous or args.old_default or args.multipliers):
        parser.error(
            "--population-design runs the homogeneous design at the default step or --step, "
            "with per-site multipliers"
        )
    truth = hetero_truth() if args.heterogeneous else TRUTH
    steps = []
    covered, covered7, estimates, errors = [], [], [], []
    for s in range(args.first_seed, args.first_seed + args.replications):
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
            if args.population_design:
                schedule = lsa.Schedule(200, 1.0, 10)
                steps.append(lsa.paper_step_size(3.0, 13.0, schedule) if step is None else step)
                theta, boot = population_fit(tables, s, step)
            else:
                res = fa.fedlsa(
                    tables,
                    "y",
                    rounds=200,
                    local_steps=10,
                    seed=s,
                    step_size=step,
                    multipliers=args.multipliers,
                )
                steps.append(res.schedule.step_size)
                a = res._original_map()
                theta, boot = a @ res.coef_, res.bootstrap @ a.T
        ci = lsa._intervals(theta, boot, 0.05, False)  # = res.original_conf_int(0.05)
        covered.append((ci[:, 0] <= truth) & (truth <= ci[:, 1]))
        lo, hi = np.quantile(boot - theta, [0.025, 0.975], axis=0)  # numpy's type 7
        covered7.append((theta - hi <= truth) & (truth <= theta - lo))
        estimates.append(theta)
        errors.append(np.std(boot - theta, axis=0, ddof=1))
    est = np.array(estimates)
    sd = est.std(axis=0, ddof=1)
    n = args.replications
    label = "old default" if args.old_default else "default" if args.step is None else "given"
    if args.heterogeneous:
        print("heterogeneous sites; truth", truth.round(4))
    print(f"step ({label}): mean {np.mean(steps):.4g}, range {min(steps):.4g}-{max(steps):.4g}")
    print(
        "coverage (intercept, x1, x2):",
        np.mean(covered, axis=0).round(3),
        f"(se at 0.95: {np.sqrt(0.95 * 0.05 / n):.4f})",
    )
    print("coverage with numpy's default quantile (type 7):", np.mean(covered7, axis=0).round(3))
    print("bootstrap se / sd of the estimates:", (np.mean(errors, axis=0) / sd).round(3))
    print("bias / sd:", ((est.mean(axis=0) - truth) / sd).round(2), "sd:", sd.round(4))
    if not args.heterogeneous:
        rec = recursion_sd(float(np.mean(steps)))  # the steps differ by about 1%
        print(
            "recursion sd (at the mean step):",
            rec.round(4),
            "sd / recursion sd:",
            (sd / rec).round(3),
            f"(se {1 / np.sqrt(2 * (n - 1)):.3f})",
        )
        inside = np.mean(np.abs(est - truth) <= 1.96 * rec, axis=0)
        print("coverage of estimate +- 1.96 recursion sd:", inside.round(3))


if __name__ == "__main__":
    main()
