"""Affine exact rules (issue #11): the Celsius / Fahrenheit table before and after.

    python benchmarks/affine.py [--seeds 0,1,2] [--out record.json]

Two tables, three sites each:

* ``small``: 540 rows, c ~ N(15, 8) rounded to one decimal, f = round(1.8 c + 32, 2),
  y = 0.5 c + N(0, 1), a category; sites are rows 0, 3, 6, ... / 1, 4, ... / 2, 5, ...;
* ``issue11``: the table of tests/test_collinearity.py and benchmarks/collinearity.py,
  3,000 rows, C ~ N(20, 5) (not rounded), F = round(1.8 C + 32, 2), y = 0.5 C + N(0, 1),
  sites of 1,500, 750, 750 rows.

For each kernel and ``rules`` off (f drawn by the chain: before) and on (the default:
after), FITS (``seed``) synthesizes as many rows as the table has (``small``: 2,000) and
the script prints the rule found, the sd and the largest absolute value of
f - 1.8 c - 32 in the synthetic rows (real: below 0.005), their correlation of c and f,
and the residual sd of y given c (least squares of y on 1, c) over the real one.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from fits import FITSSynthesizer


def small(seed: int) -> tuple[pd.DataFrame, list[pd.DataFrame], int]:
    rng = np.random.default_rng(seed)
    n = 540
    c = np.round(rng.normal(15.0, 8.0, n), 1)
    table = pd.DataFrame(
        {
            "c": c,
            "f": np.round(1.8 * c + 32, 2),
            "y": 0.5 * c + rng.normal(0.0, 1.0, n),
            "cat": rng.choice(["a", "b", "c"], n),
        }
    )
    return table, [table.iloc[i::3].reset_index(drop=True) for i in range(3)], 2000


def issue11(seed: int) -> tuple[pd.DataFrame, list[pd.DataFrame], int]:
    rng = np.random.default_rng(seed)
    n = 3000
    c = rng.normal(20.0, 5.0, n)
    table = pd.DataFrame(
        {"c": c, "f": np.round(1.8 * c + 32, 2), "y": 0.5 * c + rng.normal(size=n)}
    )
    cuts = [table.iloc[: n // 2], table.iloc[n // 2 : 3 * n // 4], table.iloc[3 * n // 4 :]]
    return table, [t.reset_index(drop=True) for t in cuts], n


def residual_sd(table: pd.DataFrame) -> float:
    """sd of the residuals of y ~ 1 + c."""
    design = np.column_stack([np.ones(len(table)), table["c"].to_numpy(float)])
    y = table["y"].to_numpy(float)
    beta = np.linalg.lstsq(design, y, rcond=None)[0]
    return float(np.std(y - design @ beta))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out")
    args = parser.parse_args()
    record = []
    for name, make in (("small", small), ("issue11", issue11)):
        for seed in (int(s) for s in args.seeds.split(",")):
            real, sites, rows = make(seed)
            off = real["f"] - 1.8 * real["c"] - 32
            print(
                f"{name} seed {seed}: real f - 1.8c - 32 sd {off.std():.4f}, "
                f"max {off.abs().max():.4f}"
            )
            for kernel in ("knn", "gaussian"):
                for rules in (False, True):
                    t0 = time.perf_counter()
                    synth = FITSSynthesizer(kernel, seed=seed, rules=rules).fit(sites)
                    out = synth.sample(rows)
                    seconds = time.perf_counter() - t0
                    res = out["f"] - 1.8 * out["c"] - 32
                    rec = {
                        "table": name,
                        "seed": seed,
                        "kernel": kernel,
                        "rules": rules,
                        "found": [r.describe() for r in synth.schema_.rules or []],
                        "sd": float(res.std()),
                        "max": float(res.abs().max()),
                        "corr": float(np.corrcoef(out["c"], out["f"])[0, 1]),
                        "y_ratio": residual_sd(out) / residual_sd(real),
                        "seconds": seconds,
                    }
                    record.append(rec)
                    print(
                        f"  {kernel:8s} rules={'on ' if rules else 'off'} {rec['found']}: "
                        f"sd {rec['sd']:.3g}, max {rec['max']:.3g}, corr {rec['corr']:.5f}, "
                        f"y residual sd ratio {rec['y_ratio']:.3f}, {seconds:.1f} s",
                        flush=True,
                    )
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(record, fh, indent=1)


if __name__ == "__main__":
    main()
