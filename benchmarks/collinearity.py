"""The collinearity guard of eq. 7: a sweep of its threshold.

    python benchmarks/collinearity.py [--out record.json]
    python benchmarks/collinearity.py --dataset bike --data-dir ../shared/datasets \
        --kernels knn,gaussian --thresholds 0,1e-4,1e-3,1e-2,3e-2,1e-1

Without ``--dataset``: issue 11's table.
C ~ N(20, 5), F = 1.8 C + 32 + e (e normal, its sd a given fraction of F's sd, 9),
y = 0.5 C + N(0, 1); 3,000 rows over three sites (1,500, 750, 750).  For each noise
level, kernel and threshold ``collinearity`` (0: the guard off), FITS synthesizes 3,000
rows and the script prints the residual sd of y given C (least squares of y on 1, C)
in the synthetic table over the real one, and how many queries the guard reduced.
The table in docs/method.md ("The collinearity guard") is this script's output.

With ``--dataset``: the split and seed of ``fits benchmark``'s first repeat (10 clients
with the paper's shares, seed ``--seed``), as many synthetic rows as the training split,
and the energy distance of all columns to the full data exactly as ``fits benchmark``
computes it (20,000-row subsamples seeded by the repeat's seed), per kernel and
threshold (docs/benchmarks.md, "Collinearity guard").
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd

from fits import FITSSynthesizer
from fits.datasets import federated_split, load_dataset, simulate
from fits.evaluation import energy_distance

NOISE = [1e-4, 1e-3, 1e-2, 3e-2, 1e-1, 3e-1]
THRESHOLDS = [0.0, 1e-4, 1e-3, 1e-2]
N = 3000


def residual_sd(table: pd.DataFrame) -> float:
    """sd of the residuals of y ~ 1 + C."""
    design = np.column_stack([np.ones(len(table)), table["C"].to_numpy(float)])
    y = table["y"].to_numpy(float)
    beta = np.linalg.lstsq(design, y, rcond=None)[0]
    return float(np.std(y - design @ beta))


def table(noise: float, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    c = rng.normal(20, 5, N)
    f = 1.8 * c + 32 + noise * 9 * rng.normal(size=N)
    y = 0.5 * c + rng.normal(size=N)
    return pd.DataFrame({"C": c, "F": f, "y": y})


def dataset_sweep(
    name: str, data_dir: str | None, kernels: list[str], thresholds: list[float], seed: int
) -> list[dict]:
    """Energy distance of FITS per kernel and threshold on a benchmark data set."""
    data = simulate(n=10_000, seed=seed) if name == "simulation" else load_dataset(name, data_dir)
    clients, _ = federated_split(data.frame, seed=seed)
    n = sum(len(c) for c in clients)
    columns = [str(c) for c in data.frame.columns]
    rows = []
    for kernel in kernels:
        for tau in thresholds:
            synth = FITSSynthesizer(
                kernel, seed=seed, kinds=data.kinds, order=data.order, collinearity=tau
            ).fit(clients)
            synthetic = synth.sample(n)
            energy = energy_distance(
                data.frame, synthetic, data.kinds, columns=columns, max_rows=20_000,
                seed=seed,
            )  # fmt: skip
            row = {
                "dataset": name,
                "kernel": kernel,
                "collinearity": tau,
                "energy": energy,
                "guarded": synth.coordinator.guarded,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--kernels", default="knn,gaussian")
    ap.add_argument("--thresholds", default="0,1e-4,1e-3,1e-2")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.dataset:
        rows = dataset_sweep(
            args.dataset.lower(),
            args.data_dir,
            args.kernels.split(","),
            [float(t) for t in args.thresholds.split(",")],
            args.seed,
        )
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(rows, fh, indent=1)
        return rows
    rows = []
    for kernel in ("knn", "gaussian"):
        for noise in NOISE:
            real = table(noise)
            sites = [real.iloc[: N // 2], real.iloc[N // 2 : 3 * N // 4], real.iloc[3 * N // 4 :]]
            for tau in THRESHOLDS:
                synth = FITSSynthesizer(kernel, seed=1, collinearity=tau).fit(sites)
                ratio = residual_sd(synth.sample(N)) / residual_sd(real)
                row = {
                    "kernel": kernel,
                    "noise": noise,
                    "collinearity": tau,
                    "ratio": ratio,
                    "guarded": synth.coordinator.guarded,
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
