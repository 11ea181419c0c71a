"""Near copies on a small table of few columns: the release check's DCR share and the
energy distance, for FITS-K's defaults and three settings that widen what each draw
rests on.

    python benchmarks/near_copies_small.py --rows 1000 --seeds 0,1,2

The table (:func:`small_table`): three categorical columns (2, 3 and 4 labels, so 24
cells), a whole-number ``age``, an ``income`` rounded to units that depends on age and
on two of the labels, and a ``score`` with two decimals that depends on age and a
label. It is split into three sites of 55%, 30% and 15% of its rows, in file order.
Per seed: the real table, a ``fresh`` second draw of as many rows (what a perfect
generator gives), and FITS-K's synthetic table of as many rows with ``default`` (every
setting at its default), ``budget800`` (a neighbour budget r0 of 800 instead of 200),
``auto`` (``smoothing="auto"``) and ``cont-first`` (the chain order age, income, score,
then the labels, instead of the file's labels first). Printed: the share of the first
2,000 rows closer to a real row than the real rows' 5% DCR quantile
(:class:`fits.evaluation.copies.ReleaseCheck`, what ``fits synthesize`` warns on above
10%; about 5% for a fresh sample) and each table's exact energy distance to a
20,000-row population sample (the real table's own distance is the floor).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from fits import FITSSynthesizer
from fits.core.kernels import KNNKernel
from fits.evaluation.copies import ReleaseCheck
from fits.evaluation.distance import energy_distances

KINDS = {
    "a": "nominal",
    "b": "nominal",
    "c": "nominal",
    "age": "continuous",
    "income": "continuous",
    "score": "continuous",
}
SETTINGS: dict[str, dict] = {
    "default": {},
    "budget800": {"kernel": KNNKernel(budget=800)},
    "auto": {"smoothing": "auto"},
    "cont-first": {"order": ["age", "income", "score", "a", "b", "c"]},
}


def small_table(n: int, seed: int) -> pd.DataFrame:
    """Three label columns, ``age``, ``income`` and ``score`` (see the module text)."""
    rng = np.random.default_rng(seed)
    a = rng.choice(np.array(["x", "y"]), n)
    b = rng.choice(np.array(["p", "q", "r"]), n)
    c = rng.choice(np.array(["u", "v", "w", "t"]), n)
    age = rng.integers(18, 90, n).astype(float)
    income = np.round(
        np.exp(rng.normal(10.0, 0.5, n)) + 300.0 * age + 2000.0 * ((a == "x") & (b == "p")), 0
    )
    score = np.round(rng.normal(0.0, 1.0, n) + 0.02 * age + 0.5 * (c == "u"), 2)
    return pd.DataFrame({"a": a, "b": b, "c": c, "age": age, "income": income, "score": score})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    n = args.rows
    cut = [0, int(0.55 * n), int(0.85 * n), n]
    print("| rows | seed | table | closer than the real 5% DCR quantile | energy distance |")
    print("| --- | --- | --- | --- | --- |")
    for seed in (int(s) for s in args.seeds.split(",")):
        real = small_table(n, seed)
        sites = {f"s{i}": real.iloc[cut[i] : cut[i + 1]].reset_index(drop=True) for i in range(3)}
        tables = {"real": real, "fresh": small_table(n, 500 + seed)}
        for name, settings in SETTINGS.items():
            synth = FITSSynthesizer("knn", seed=seed).set_params(**settings)
            tables[name] = synth.fit(list(sites.values())).sample(n)
        population = small_table(20_000, 1000 + seed)
        energy = energy_distances(population, tables, KINDS, list(KINDS))["covariates"]
        for name, table in tables.items():
            share = ""
            if name != "real":
                check = ReleaseCheck(sites, KINDS, max_rows=2_000, seed=0)
                check.update(table)
                share = f"{check.result().close_share:.1%}"
            print(f"| {n} | {seed} | {name} | {share} | {energy[name]:.4f} |", flush=True)


if __name__ == "__main__":
    main()
