"""The missing share of a column, real against synthetic, over several seeds.

A table of correlated continuous columns (three factors plus noise), a nominal ``g``
(three values), an ordinal ``k`` (four) and a boolean ``b`` (30% true), split row by row
over three sites.  Missing values: ``x3`` 11% (completely at random, or with
``--mechanism mar`` more often where ``x0`` is large), the third-last continuous column
12% (``--late-share``; completely at random; its indicator has many covariates before
it) and ``g`` 11% (completely at random).  Prints per seed and the means over the seeds:

    python benchmarks/missing_share.py --rows 4000 --columns 15 --mechanism mar \
        --late-share 0.112 --kernel gaussian --seeds 0,1,2

docs/benchmarks.md, "Missing shares with many covariates".
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from fits import FITSSynthesizer


def table(
    rows: int, columns: int, mechanism: str, late_share: float = 0.12, seed: int = 0
) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    factors = rng.normal(size=(rows, 3))
    data: dict[str, object] = {
        f"x{j}": factors @ rng.normal(size=3) + rng.normal(size=rows) for j in range(columns)
    }
    data["g"] = rng.choice(["a", "b", "c"], size=rows).astype(object)
    data["k"] = rng.integers(0, 4, size=rows)
    data["b"] = rng.random(rows) < 0.3
    df = pd.DataFrame(data)
    if mechanism == "mar":
        p = 1 / (1 + np.exp(-(-2.3 + 1.2 * df["x0"] / df["x0"].std())))
        df.loc[rng.random(rows) < p, "x3"] = np.nan
    else:
        df.loc[rng.random(rows) < 0.11, "x3"] = np.nan
    df.loc[rng.random(rows) < late_share, f"x{columns - 3}"] = np.nan
    df.loc[rng.random(rows) < 0.11, "g"] = None
    return df


def shares(df: pd.DataFrame, late: str, cuts: np.ndarray) -> list[float]:
    low, high = df["x0"] <= cuts[0], df["x0"] > cuts[1]
    miss = df["x3"].isna()
    return [
        miss.mean(),
        df[late].isna().mean(),
        df["g"].isna().mean(),
        df["b"].mean(),
        miss[low].mean(),
        miss[high].mean(),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--columns", type=int, default=10)
    parser.add_argument("--mechanism", choices=("mcar", "mar"), default="mcar")
    parser.add_argument("--late-share", type=float, default=0.12)
    parser.add_argument("--kernel", choices=("gaussian", "knn"), default="gaussian")
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    df = table(args.rows, args.columns, args.mechanism, args.late_share)
    late = f"x{args.columns - 3}"
    cuts = df["x0"].quantile([1 / 3, 2 / 3]).to_numpy()
    sites = [df.iloc[k::3].reset_index(drop=True) for k in range(3)]
    real = np.array(shares(df, late, cuts))
    names = ["x3 missing", f"{late} missing", "g missing", "b true", "x3 | x0 low", "x3 | x0 high"]
    seeds = [int(s) for s in args.seeds.split(",")]
    found = []
    for seed in seeds:
        start = time.perf_counter()
        out = FITSSynthesizer(kernel=args.kernel, seed=seed).fit(sites).sample(args.rows)
        found.append(shares(out, late, cuts))
        print(
            f"seed {seed}: {np.round(found[-1], 4).tolist()} ({time.perf_counter() - start:.0f} s)"
        )
    synth = np.array(found).mean(axis=0)
    counts = [args.rows] * 4 + [args.rows / 3] * 2
    print(f"{args.kernel}, {args.mechanism}, {args.rows} rows, {args.columns} continuous columns")
    for name, r, s, n in zip(names, real, synth, counts, strict=True):
        sd = np.sqrt(r * (1 - r) / n)
        print(
            f"  {name:14s} real {r:.4f}  synthetic (mean) {s:.4f}  "
            f"({(s - r) / sd:+.1f} sd of a share of {n:.0f} rows)"
        )


if __name__ == "__main__":
    main()
