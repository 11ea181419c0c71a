"""The collinearity guard of eq. 7: a sweep of its threshold on issue 11's table.

    python benchmarks/collinearity.py [--out record.json]

C ~ N(20, 5), F = 1.8 C + 32 + e (e normal, its sd a given fraction of F's sd, 9),
y = 0.5 C + N(0, 1); 3,000 rows over three sites (1,500, 750, 750).  For each noise
level, kernel and threshold ``collinearity`` (0: the guard off), FITS synthesizes 3,000
rows and the script prints the residual sd of y given C (least squares of y on 1, C)
in the synthetic table over the real one, and how many queries the guard reduced.
The table in docs/method.md ("The collinearity guard") is this script's output.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd

from fits import FITSSynthesizer

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


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
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
