"""Coverage of FedLSA's multiplier-bootstrap intervals on simulated heterogeneous federations.

R replications of one federation run as a batch dimension through the same functions
the sites use (:func:`fits.analysis.lsa.local_updates`,
:func:`fits.analysis.lsa.bootstrap_weights`): every replication draws fresh rows
(sampling without replacement from a large table is sampling i.i.d. from its
population), runs Algorithm 1 with M bootstrap sequences and averages with the sites'
size weights.  The true coefficients are the solution of the size-weighted population
system, in closed form (Gaussian features).

The federation: 4 sites with 6,000 / 12,000 / 25,000 / 57,000 rows (weights p_c), an
intercept and two features whose means, spreads and correlation differ by site,
site-specific coefficients (so the local solutions differ: zeta_1 > 0) and
heteroskedastic noise.

Usage::

    python benchmarks/fedlsa_coverage.py --replications 500 --regime both \
        --plot docs/fedlsa-bootstrap.png
    python benchmarks/fedlsa_coverage.py --replications 500 --regime one_pass --scale 0.1

``--regime one_pass`` runs the real code (:func:`fits.analysis.lsa.fedlsa_arrays` with
``regime="one_pass"``) once per replication on fresh rows of the same federation (site
sizes times ``--scale``), and compares every replication's intervals with the pooled
OLS HC1 intervals of the same rows: both are intervals for the population
coefficients ``theta_star``.

Prints coverage per coefficient and jointly, mean interval widths, and (``--widths``)
the ratio of the mean FedLSA width to the pooled HC1 (sandwich) width of OLS on the
same sites' full tables.  Both schedules use at most 6,000 rows per site (the smallest
site), so every row is used at most once.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from fits.analysis.lsa import Schedule, bootstrap_weights, local_updates

SIZES = np.array([6000, 12000, 25000, 57000])
MEANS = np.array([[0.0, 0.0], [1.0, -0.5], [-0.5, 1.0], [0.5, 0.5]])
SDS = np.array([[1.0, 1.0], [0.6, 1.4], [1.3, 0.8], [1.0, 1.0]])
CORR = np.array([0.0, 0.4, -0.3, 0.2])
BETA = np.array([[1.0, 2.0, -1.0], [1.3, 1.7, -0.8], [0.8, 2.2, -1.3], [1.1, 2.0, -1.0]])
NOISE = 1.0  # sd of the noise is NOISE * (1 + 0.5 |x1|)


def site_cov(c: int) -> np.ndarray:
    s = SDS[c]
    r = CORR[c]
    return np.array([[s[0] ** 2, r * s[0] * s[1]], [r * s[0] * s[1], s[1] ** 2]])


def draw(rng: np.random.Generator, c: int, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Rows of site c: design (..., 3) with intercept, response (...)."""
    z = rng.multivariate_normal(MEANS[c], site_cov(c), size=shape)
    x = np.concatenate([np.ones((*shape, 1)), z], axis=-1)
    y = x @ BETA[c] + NOISE * (1.0 + 0.5 * np.abs(z[..., 0])) * rng.standard_normal(shape)
    return x, y


def true_theta(p: np.ndarray) -> np.ndarray:
    """Solution of (sum_c p_c Abar^c) theta = sum_c p_c bbar^c (population moments)."""
    a_tot = np.zeros((3, 3))
    b_tot = np.zeros(3)
    for c in range(len(p)):
        m = np.concatenate([[1.0], MEANS[c]])
        second = np.zeros((3, 3))
        second[1:, 1:] = site_cov(c)
        abar = second + np.outer(m, m)
        a_tot += p[c] * abar
        b_tot += p[c] * abar @ BETA[c]
    return np.linalg.solve(a_tot, b_tot)


def pooled_precondition(rng: np.random.Generator) -> np.ndarray:
    """P = (X'X / n)^-1 of one full-size draw of the federation (what the setup round of
    :func:`fits.analysis.lsa.run_fedlsa` computes from the sites' tables)."""
    gram = np.zeros((3, 3))
    for c in range(len(SIZES)):
        x, _ = draw(rng, c, (int(SIZES[c]),))
        gram += x.T @ x
    return np.linalg.inv(gram / SIZES.sum())


def simulate(
    schedule: Schedule,
    reps: int,
    n_boot: int,
    seed: int,
    chunk: int = 100,
    precondition: bool = False,
    shared: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """theta_T (reps, d) and bootstrap theta_T^b (reps, M, d), size-weighted averaging.

    With ``precondition`` every replication gets its own ``P`` from an independent
    full-size draw of the federation (in a real run the streamed rows are part of the
    tables P comes from; with 100,000 rows behind P the difference is negligible).
    With ``shared`` the multipliers of a local step are the same at every site
    (``multipliers="shared"``); else each site draws its own (the paper's section 6).
    """
    p = SIZES / SIZES.sum()
    rng = np.random.default_rng(seed)
    thetas, boots = [], []
    for start in range(0, reps, chunk):
        r = min(chunk, reps - start)
        pre = np.stack([pooled_precondition(rng) for _ in range(r)]) if precondition else None
        theta = np.zeros((r, n_boot + 1, 3))
        for t in range(1, schedule.rounds + 1):
            h, eta = schedule.h(t), schedule.eta(t)
            new = np.zeros_like(theta)
            if shared:
                w_shared = np.ones((r, h, n_boot + 1))
                w_shared[..., 1:] = bootstrap_weights(rng, (r, h, n_boot))
            for c in range(len(SIZES)):
                x, y = draw(rng, c, (r, h))
                if shared:
                    w = w_shared
                else:
                    w = np.ones((r, h, n_boot + 1))
                    w[..., 1:] = bootstrap_weights(rng, (r, h, n_boot))
                z = None if pre is None else np.einsum("rhd,rde->rhe", x, pre)
                new += p[c] * local_updates(theta, x, y, eta, w, z)
            theta = new
        thetas.append(theta[:, 0])
        boots.append(theta[:, 1:])
    return np.concatenate(thetas), np.concatenate(boots)


def intervals(theta: np.ndarray, boot: np.ndarray, alpha: float) -> dict[str, np.ndarray]:
    """Per-coefficient (EQ) and joint (max-statistic) intervals, as FedLSAResults does."""
    dev = boot - theta[:, None, :]
    lo, hi = np.quantile(dev, [alpha / 2, 1 - alpha / 2], axis=1)
    s = dev.std(axis=1, ddof=1)
    c = np.quantile(np.max(np.abs(dev) / s[:, None, :], axis=2), 1 - alpha, axis=1)
    return {
        "lower": theta - hi,
        "upper": theta - lo,
        "jlower": theta - c[:, None] * s,
        "jupper": theta + c[:, None] * s,
    }


def sandwich_width(rng: np.random.Generator, reps: int, alpha: float) -> np.ndarray:
    """Mean width of the pooled OLS HC1 intervals on the full site tables."""
    from scipy.stats import norm

    z = norm.ppf(1 - alpha / 2)
    widths = []
    for _ in range(reps):
        parts = [draw(rng, c, (int(SIZES[c]),)) for c in range(len(SIZES))]
        x = np.concatenate([q[0] for q in parts])
        y = np.concatenate([q[1] for q in parts])
        n, d = x.shape
        xtx_inv = np.linalg.inv(x.T @ x)
        e = y - x @ (xtx_inv @ (x.T @ y))
        meat = (x * e[:, None] ** 2).T @ x
        cov = n / (n - d) * xtx_inv @ meat @ xtx_inv
        widths.append(2 * z * np.sqrt(np.diag(cov)))
    return np.mean(widths, axis=0)


def simulate_one_pass(
    reps: int,
    n_boot: int,
    seed: int,
    scale: float,
    alpha: float,
    local_steps: int = 1,
    rounds: int | None = None,
    multipliers: str = "shared",
) -> dict:
    """Regime ``one_pass`` through :func:`fits.analysis.lsa.fedlsa_arrays`, one run per
    replication, against the pooled OLS HC1 intervals of the same rows."""
    from fits.analysis.inference import ols_hc1
    from fits.analysis.lsa import fedlsa_arrays

    sizes = np.maximum(1, np.round(SIZES * scale)).astype(int)
    star = true_theta(sizes / sizes.sum())
    seq = np.random.SeedSequence(seed)
    data_rng = np.random.default_rng(seq.spawn(1)[0])
    run_seeds = seq.spawn(reps)
    keys = ("coef", "se", "ci", "joint", "ols", "hc1", "boot_sd")
    out: dict[str, list] = {k: [] for k in keys}
    res = None
    for i in range(reps):
        parts = [draw(data_rng, c, (int(sizes[c]),)) for c in range(len(sizes))]
        xs, ys = [q[0] for q in parts], [q[1] for q in parts]
        res = fedlsa_arrays(
            xs,
            ys,
            regime="one_pass",
            rounds=rounds,
            local_steps=local_steps,
            n_bootstrap=n_boot,
            multipliers=multipliers,
            seed=run_seeds[i],
        )
        beta, se, hc1 = ols_hc1(np.vstack(xs), np.concatenate(ys), alpha)
        out["coef"].append(res.coef_)
        out["ci"].append(res.conf_int(alpha).to_numpy())
        out["joint"].append(res.conf_int(alpha, joint=True).to_numpy())
        out["ols"].append(beta)
        out["hc1"].append(hc1)
        out["boot_sd"].append(res.bse.to_numpy())
    arr = {k: np.array(v) for k, v in out.items() if v}
    ci, joint, hc1 = arr["ci"], arr["joint"], arr["hc1"]
    cover = (ci[..., 0] <= star) & (star <= ci[..., 1])
    jcover = np.all((joint[..., 0] <= star) & (star <= joint[..., 1]), axis=1)
    hcover = (hc1[..., 0] <= star) & (star <= hc1[..., 1])
    width = (ci[..., 1] - ci[..., 0]).mean(axis=0)
    hwidth = (hc1[..., 1] - hc1[..., 0]).mean(axis=0)
    theta = arr["coef"]
    assert res is not None
    sch = res.schedule
    return {
        "sizes": sizes.tolist(),
        "theta_star": star.tolist(),
        "rounds": sch.rounds,
        "local_steps": sch.local_steps,
        "eta_0": sch.step_size,
        "burn_in_rounds": getattr(sch, "burn_in_rounds", 0),
        "eta_T": res.eta_final,
        "multipliers": multipliers,
        "coverage": cover.mean(axis=0).tolist(),
        "joint_coverage": float(jcover.mean()),
        "hc1_coverage": hcover.mean(axis=0).tolist(),
        "mean_width": width.tolist(),
        "mean_hc1_width": hwidth.tolist(),
        "width_ratio_to_pooled_hc1": (width / hwidth).tolist(),
        "sd_theta": theta.std(axis=0, ddof=1).tolist(),
        "mean_boot_sd": arr["boot_sd"].mean(axis=0).tolist(),
        "sd_ols": arr["ols"].std(axis=0, ddof=1).tolist(),
        "bias_over_sd": ((theta.mean(axis=0) - star) / theta.std(axis=0, ddof=1)).tolist(),
        "sd_of_fedlsa_minus_ols_over_sd_ols": (
            (theta - arr["ols"]).std(axis=0, ddof=1) / arr["ols"].std(axis=0, ddof=1)
        ).tolist(),
    }


def multiplier_inflation(rows: int = 400_000, seed: int = 0) -> np.ndarray:
    """sd of the raw last iterate's Lyapunov law with per-site multipliers over that with
    shared ones: ``Abar X + X Abar' = sum_c p_c^2 E[g g']`` with the per-site second
    moments of ``g = x (x' theta_* - y)`` uncentred (per-site multipliers) against
    centred (shared ones), ``Abar = sum_c p_c Abar^c``."""
    from scipy.linalg import solve_continuous_lyapunov

    p = SIZES / SIZES.sum()
    star = true_theta(p)
    rng = np.random.default_rng(seed)
    unc, cen, abar = np.zeros((3, 3)), np.zeros((3, 3)), np.zeros((3, 3))
    for c in range(len(p)):
        x, y = draw(rng, c, (rows,))
        g = x * (x @ star - y)[:, None]
        unc += p[c] ** 2 * g.T @ g / rows
        cen += p[c] ** 2 * np.cov(g.T)
        abar += p[c] * x.T @ x / rows
    var_site = np.diag(solve_continuous_lyapunov(abar, unc))
    var_shared = np.diag(solve_continuous_lyapunov(abar, cen))
    return np.sqrt(var_site / var_shared)


SCHEDULES = {
    # S1: constant eta and H
    "constant": Schedule(rounds=1000, step_size=0.02, local_steps=5),
    # S2: eta_t = eta (1+t)^-0.6, H_t = ceil(H (1+t)^0.2) (the paper's section 7 exponents)
    "decreasing": Schedule(rounds=400, step_size=0.05, local_steps=5, gamma_eta=0.6, gamma_h=0.2),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replications", type=int, default=500)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument(
        "--regime", choices=["constant", "decreasing", "both", "one_pass"], default="both"
    )
    ap.add_argument(
        "--multipliers",
        choices=["site", "shared"],
        default=None,
        help="bootstrap weights per site (the paper; default of the paper's regimes) or "
        "shared by the sites (default of one_pass)",
    )
    ap.add_argument("--scale", type=float, default=0.1, help="one_pass: site sizes x scale")
    ap.add_argument("--local-steps", type=int, default=1, help="one_pass: H")
    ap.add_argument("--one-pass-rounds", type=int, default=None, help="one_pass: T")
    ap.add_argument("--rounds", type=int, default=None, help="override T")
    ap.add_argument(
        "--precondition",
        choices=["no", "yes", "both"],
        default="both",
        help="run on the raw design (the paper's update) and/or preconditioned by the "
        "pooled (X'X/n)^-1 (fits' default)",
    )
    ap.add_argument(
        "--multiplier-inflation",
        action="store_true",
        help="print the sd inflation of per-site over shared multipliers (raw design) and exit",
    )
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--widths", action="store_true", help="compare with pooled HC1 widths")
    ap.add_argument("--plot", default=None, help="PNG of bootstrap vs sampling distribution")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    if args.multiplier_inflation:
        print("sd with per-site / shared multipliers:", np.round(multiplier_inflation(), 4))
        return
    if args.regime == "one_pass":
        start = time.perf_counter()
        res = simulate_one_pass(
            args.replications,
            args.bootstrap,
            args.seed,
            args.scale,
            args.alpha,
            local_steps=args.local_steps,
            rounds=args.one_pass_rounds,
            multipliers=args.multipliers or "shared",
        )
        res["seconds"] = time.perf_counter() - start
        print(json.dumps(res, indent=1))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(res, fh, indent=1)
        return
    p = SIZES / SIZES.sum()
    star = true_theta(p)
    regimes = ["constant", "decreasing"] if args.regime == "both" else [args.regime]
    out = {"theta_star": star.tolist(), "sizes": SIZES.tolist()}
    draws = {}
    variants = {"no": [False], "yes": [True], "both": [False, True]}[args.precondition]
    runs = [(r, v) for v in variants for r in regimes]
    for regime, pre in runs:
        name = regime + ("+precondition" if pre else "")
        sch = SCHEDULES[regime]
        if args.rounds:
            sch = Schedule(args.rounds, sch.step_size, sch.local_steps, sch.gamma_eta, sch.gamma_h)
        start = time.perf_counter()
        theta, boot = simulate(
            sch,
            args.replications,
            args.bootstrap,
            args.seed,
            precondition=pre,
            shared=args.multipliers == "shared",
        )
        secs = time.perf_counter() - start
        ci = intervals(theta, boot, args.alpha)
        cover = (ci["lower"] <= star) & (star <= ci["upper"])
        jcover = np.all((ci["jlower"] <= star) & (star <= ci["jupper"]), axis=1)
        res = {
            "schedule": sch.__dict__,
            "rows_per_site": sch.total_local_steps,
            "coverage": cover.mean(axis=0).tolist(),
            "coverage_se": np.sqrt(cover.mean(0) * (1 - cover.mean(0)) / len(theta)).tolist(),
            "joint_coverage": float(jcover.mean()),
            "mean_width": (ci["upper"] - ci["lower"]).mean(axis=0).tolist(),
            "bias": (theta.mean(axis=0) - star).tolist(),
            "sd_theta": theta.std(axis=0, ddof=1).tolist(),
            "mean_boot_sd": boot.std(axis=1, ddof=1).mean(axis=0).tolist(),
            "seconds": secs,
        }
        out[name] = res
        draws[name] = (theta, boot, sch)
        print(name, json.dumps(res, indent=1))
    if args.widths:
        sw = sandwich_width(np.random.default_rng(args.seed + 1), 50, args.alpha)
        out["pooled_hc1_width"] = sw.tolist()
        for name in draws:
            ratio = np.array(out[name]["mean_width"]) / sw
            out[name]["width_ratio_to_pooled_hc1"] = ratio.tolist()
            print(name, "width / pooled HC1 width:", np.round(ratio, 3))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    if args.plot:
        plot(draws, star, args.plot)


def plot(draws: dict, star: np.ndarray, path: str) -> None:
    """The paper's figure 1 idea: eta_T^-1/2 (theta_T - theta_star) over replications
    against eta_T^-1/2 (theta_T^b - theta_T) given one replication's data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["intercept", "x1", "x2"]
    fig, axes = plt.subplots(len(draws), 3, figsize=(11, 3.2 * len(draws)), squeeze=False)
    for i, (regime, (theta, boot, sch)) in enumerate(draws.items()):
        scale = sch.eta(sch.rounds) ** -0.5
        for j in range(3):
            ax = axes[i, j]
            real = scale * (theta[:, j] - star[j])
            bins = np.linspace(*np.quantile(real, [0.001, 0.999]) * 1.4, 40)
            ax.hist(real, bins=bins, density=True, alpha=0.45, label="sampling: theta_T - theta*")
            for r in range(3):
                b = scale * (boot[r, :, j] - theta[r, j])
                ax.hist(
                    b,
                    bins=bins,
                    density=True,
                    histtype="step",
                    lw=1.3,
                    label=f"bootstrap | data {r + 1}" if j == 0 else None,
                )
            ax.set_title(f"{regime}: {names[j]} (scaled by eta_T^-1/2)", fontsize=9)
            if j == 0:
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", path)


if __name__ == "__main__":
    main()
