"""Differentially private federated GLMs: the paper's simulation (sec. 4.3) and Adult.

Part ``sim`` reproduces the comparison of the DP federated M-estimation paper's
Figure 3: logistic and Poisson GLMs, m clients from 60 to 140, local sizes equal to
400, uniform on [100, 700] or log-normal(5.5, 1); the empirical MSE
``||beta_hat - beta||^2`` of FedSGD, FedHybrid, FedAvg and FedNewton, averaged over
replications.  Every fit is a real :func:`fits.analysis.fit_glm` run through the
in-process Transport (the schema is given, so the setup round of descriptions is
skipped; the standardization round, configure and the algorithm's rounds run).

Part ``adult`` fits logistic regression for income on Adult split over the paper's 10
sites, each method at mu in {0.5, 1, 2, none}: test AUC, parameter error against the
pooled maximum-likelihood fit, rounds and uploaded bytes.

Choices the paper leaves open (also in docs/analysis.md): p = 5 (intercept and four
N(0, 1) covariates, sigma_c = 1); beta = (0.5, 1, -1, 0.5, -0.5) for logistic and
(0.5, 0.5, -0.5, 0.25, -0.25) for Poisson; mu = 2; FedNewton's tau1 = the smallest
eigenvalue of the population Hessian at beta (:func:`population_tau1`); log-normal sizes rounded and
raised to at least 2p = 10 rows (FedNewton's halves need p rows each).

Usage::

    python benchmarks/dp_glm.py sim --reps 50 --m 60,100,140 --out SIM.csv
    python benchmarks/dp_glm.py plot SIM.csv --png docs/dp_glm_mse.png
    python benchmarks/dp_glm.py adult --seeds 3 --data-dir DIR --out ADULT.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from fits.analysis.glm import fit_glm
from fits.core.schema import ColumnSpec, Schema

METHODS = ("fedsgd", "fedhybrid", "fedavg", "fednewton")
BETA = {
    "logistic": np.array([0.5, 1.0, -1.0, 0.5, -0.5]),
    "poisson": np.array([0.5, 0.5, -0.5, 0.25, -0.25]),
}
COLUMNS = ["x1", "x2", "x3", "x4"]
SCHEMA = Schema([ColumnSpec(c, "continuous") for c in COLUMNS] + [ColumnSpec("y", "continuous")])


def population_tau1(family: str, n: int = 400_000) -> float:
    """Assumption 2's tau1 for the simulation design: the smallest eigenvalue of the
    population Hessian E[w(x'beta) x x'] at the true beta (Monte Carlo, fixed seed).
    The paper treats tau1 as a known constant; in simulation it is."""
    rng = np.random.default_rng(12345)
    x = np.column_stack([np.ones(n), rng.normal(size=(n, len(COLUMNS)))])
    eta = x @ BETA[family]
    p = 1.0 / (1.0 + np.exp(-eta))
    w = p * (1 - p) if family == "logistic" else np.exp(eta)
    return float(np.linalg.eigvalsh((x.T * w) @ x / n)[0])


def site_sizes(regime: str, m: int, rng: np.random.Generator, p: int = 5) -> np.ndarray:
    """Local sample sizes of sec. 4.3's three regimes."""
    if regime == "equal":
        return np.full(m, 400)
    if regime == "uniform":
        return rng.integers(100, 701, m)  # discrete uniform on [100, 700]
    if regime == "lognormal":
        return np.maximum(np.rint(rng.lognormal(5.5, 1.0, m)).astype(int), 2 * p)
    raise ValueError(regime)


def simulate_sites(family: str, sizes: np.ndarray, rng: np.random.Generator) -> list[pd.DataFrame]:
    """Sec. 4.1: pooled N rows from the GLM with canonical link, cut into sites."""
    beta = BETA[family]
    n = int(sizes.sum())
    x = rng.normal(0.0, 1.0, (n, len(COLUMNS)))
    eta = beta[0] + x @ beta[1:]
    if family == "logistic":
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(float)
    else:
        y = rng.poisson(np.exp(eta)).astype(float)
    data = np.column_stack([x, y])
    cuts = np.cumsum(sizes)[:-1]
    return [pd.DataFrame(part, columns=[*COLUMNS, "y"]) for part in np.split(data, cuts)]


def run_sim(args: argparse.Namespace) -> pd.DataFrame:
    rows = []
    start = time.perf_counter()
    ms = [int(v) for v in args.m.split(",")]
    for family in args.families.split(","):
        tau1 = population_tau1(family) if args.tau1 == "population" else float(args.tau1)
        print(f"{family}: tau1 = {tau1:.4f}", file=sys.stderr)
        for regime in args.regimes.split(","):
            for m in ms:
                for rep in range(args.reps):
                    ss = np.random.SeedSequence(
                        [
                            args.seed,
                            ms.index(m),
                            rep,
                            ["logistic", "poisson"].index(family),
                            ["equal", "uniform", "lognormal"].index(regime),
                        ]
                    )
                    data_seed, fit_seed = ss.spawn(2)
                    rng = np.random.default_rng(data_seed)
                    tables = simulate_sites(family, site_sizes(regime, m, rng), rng)
                    for method in METHODS:
                        res = fit_glm(
                            tables,
                            "y",
                            family=family,
                            method=method,
                            mu=args.mu,
                            seed=int(fit_seed.generate_state(1)[0]),
                            schema=SCHEMA,
                            tau1=tau1,
                            vectorized=True,
                        )
                        err = res.original_params.to_numpy() - BETA[family]
                        rows.append(
                            {
                                "family": family,
                                "regime": regime,
                                "m": m,
                                "rep": rep,
                                "method": method,
                                "sq_error": float(err @ err),
                                "rounds": res.rounds,
                                "uploaded_bytes": res.uploaded_bytes,
                                "clip": res.clip,
                                "N": res.n_obs,
                                "tau1": tau1,
                            }
                        )
                print(
                    f"{family} {regime} m={m}: {time.perf_counter() - start:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    return pd.DataFrame(rows)


def sim_table(frame: pd.DataFrame) -> str:
    """Markdown: mean squared error (and its standard error) per method."""
    g = frame.groupby(["family", "regime", "m", "method"])["sq_error"]
    stats = g.mean().unstack("method")[list(METHODS)]
    se = (g.std() / np.sqrt(g.count())).unstack("method")[list(METHODS)]
    lines = [
        "| family | sizes | m | " + " | ".join(METHODS) + " | best |",
        "|---|---|---|" + "---|" * (len(METHODS) + 1),
    ]
    for key, row in stats.iterrows():
        cells = [f"{row[mth]:.4f} ± {se.loc[key, mth]:.4f}" for mth in METHODS]
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + f" | {row.idxmin()} |"
        )
    return "\n".join(lines)


def findings(frame: pd.DataFrame) -> str:
    """The paper's three findings, checked per (family, sizes, m) cell."""
    stats = frame.groupby(["family", "regime", "m", "method"])["sq_error"].mean().unstack()
    n = len(stats)
    a = int((stats["fedhybrid"] < stats["fedsgd"]).sum())
    b = int((stats["fednewton"] < stats["fedavg"]).sum())
    c = int((stats.idxmin(axis=1) == "fednewton").sum())
    return (
        f"FedHybrid < FedSGD in {a}/{n} cells; FedNewton < FedAvg in {b}/{n}; "
        f"FedNewton best in {c}/{n}"
    )


def plot_sim(frame: pd.DataFrame, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = list(dict.fromkeys(frame["family"]))
    regimes = list(dict.fromkeys(frame["regime"]))
    fig, axes = plt.subplots(
        len(families), len(regimes), figsize=(4 * len(regimes), 3.2 * len(families)), squeeze=False
    )
    for i, fam in enumerate(families):
        for j, reg in enumerate(regimes):
            ax = axes[i][j]
            sub = frame[(frame.family == fam) & (frame.regime == reg)]
            for method in METHODS:
                s = sub[sub.method == method].groupby("m")["sq_error"]
                mean, se = s.mean(), s.std() / np.sqrt(s.count())
                ax.errorbar(
                    mean.index,
                    mean.values,
                    yerr=se.values,
                    marker="o",
                    ms=3,
                    capsize=2,
                    label=method,
                )
            ax.set_yscale("log")
            ax.set_title(f"{fam}, sizes {reg}", fontsize=9)
            ax.set_xlabel("clients m")
            if j == 0:
                ax.set_ylabel("empirical MSE")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def utility_design(sites, test, reference, target, kinds):
    """The fidelity report's encoding and yardstick (:mod:`fits.evaluation.utility`):
    its ``Design`` (reference level the most frequent, levels under 1% folded into it,
    scale of the pooled sites' rows) and its reference parameter (its logistic fit on
    the reference table).  Returns the design, the reference parameter and a function
    turning a table into the design's columns plus the target."""
    from fits.evaluation.utility import Design, fit_logistic

    covariates = [c for c in kinds if c != target]
    pooled = pd.concat(sites, ignore_index=True)
    design = Design.from_frames(covariates, kinds, [test, *sites, reference], pooled)
    ref, _ = fit_logistic(design.matrix(reference, "reference"), reference[target].to_numpy(float))

    def encode(frame: pd.DataFrame) -> pd.DataFrame:
        out = pd.DataFrame(design.matrix(frame), columns=design.feature_names)
        out[target] = frame[target].to_numpy()
        return out

    return design, ref, encode


def run_adult(args: argparse.Namespace) -> pd.DataFrame:
    """Logistic regression for income, fitted across the 10 Adult sites by each method.

    Every site's table is first encoded with the fidelity report's design (so the
    parameter error is the report's yardstick, against the same reference fit on all
    45,222 rows, as in docs/benchmark-results/adult.md); fit_glm then standardizes these
    columns with federation-wide statistics and ``original_params`` maps the estimate
    back to the design's scale."""
    from sklearn.metrics import roc_auc_score

    from fits.datasets import federated_split, load_dataset

    data = load_dataset("adult", args.data_dir)
    rows = []
    for split_seed in range(args.seeds):
        sites, test = federated_split(data.frame, seed=split_seed)
        design, ref, encode = utility_design(sites, test, data.frame, "income", data.kinds)
        enc_sites = [encode(s) for s in sites]
        enc_test = encode(test)
        kinds = {c: "continuous" for c in design.feature_names}
        y_test = test["income"].to_numpy(float)
        for method in args.methods.split(","):
            # newton (not in the paper) is the pooled MLE without privacy: no mu
            for mu in (None,) if method == "newton" else (0.5, 1.0, 2.0, None):
                t0 = time.perf_counter()
                res = fit_glm(
                    enc_sites,
                    "income",
                    family="logistic",
                    method=method,
                    mu=mu,
                    seed=split_seed,
                    kinds=kinds,
                    cov_type=None,  # the fit's rounds and bytes only, as benchmarked before
                )
                seconds = time.perf_counter() - t0
                theta = res.original_params.to_numpy()
                rows.append(
                    {
                        "split": split_seed,
                        "method": method,
                        "mu": "none" if mu is None else mu,
                        "auc": roc_auc_score(y_test, res.predict(enc_test)),
                        "param_error": float(np.linalg.norm(theta - ref)),
                        "rounds": res.rounds,
                        "uploaded_bytes": res.uploaded_bytes,
                        "seconds": seconds,
                        "clip": res.clip,
                        "p": len(theta),
                    }
                )
                print(
                    f"split {split_seed} {method} mu={mu}: auc={rows[-1]['auc']:.4f} "
                    f"err={rows[-1]['param_error']:.3f} ({seconds:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    return pd.DataFrame(rows)


def adult_table(frame: pd.DataFrame) -> str:
    g = frame.groupby(["method", "mu"], sort=False)
    lines = [
        "| method | mu | test AUC | parameter error (L2) | rounds | uploaded bytes |",
        "|---|---|---|---|---|---|",
    ]
    for (method, mu), sub in g:
        lines.append(
            f"| {method} | {mu} | {sub.auc.mean():.4f} ± {sub.auc.std():.4f} | "
            f"{sub.param_error.mean():.3f} ± {sub.param_error.std():.3f} | "
            f"{int(sub.rounds.mean())} | {int(sub.uploaded_bytes.mean()):,} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="part", required=True)
    s = sub.add_parser("sim")
    s.add_argument("--reps", type=int, default=50)
    s.add_argument("--m", default="60,80,100,120,140")
    s.add_argument("--families", default="logistic,poisson")
    s.add_argument("--regimes", default="equal,uniform,lognormal")
    s.add_argument("--mu", type=float, default=2.0)
    s.add_argument("--seed", type=int, default=2026)
    s.add_argument("--tau1", default="population", help="'population' or a number")
    s.add_argument("--out", type=Path, required=True)
    pl = sub.add_parser("plot")
    pl.add_argument("csv", type=Path)
    pl.add_argument("--png", type=Path, required=True)
    a = sub.add_parser("adult")
    a.add_argument("--seeds", type=int, default=3)
    a.add_argument(
        "--methods",
        default=",".join(METHODS),
        help="comma-separated: the paper's fedsgd, fedhybrid, fedavg, fednewton, and newton "
        "(the pooled maximum-likelihood estimate without privacy)",
    )
    a.add_argument("--data-dir", default=None)
    a.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.part == "sim":
        t0 = time.perf_counter()
        frame = run_sim(args)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.out, index=False)
        print(sim_table(frame))
        print(findings(frame))
        print(f"total {time.perf_counter() - t0:.0f} s")
    elif args.part == "plot":
        frame = pd.read_csv(args.csv)
        plot_sim(frame, args.png)
        print(sim_table(frame))
        print(findings(frame))
    else:
        t0 = time.perf_counter()
        frame = run_adult(args)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.out, index=False)
        print(adult_table(frame))
        print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
