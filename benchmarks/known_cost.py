"""Per-row cost of conditional sampling against an unconditional draw, and the draws
matching takes per known row.

    python benchmarks/known_cost.py --rows 20000 [--data adult --data-dir DIR]

FITS-K (seed 0) on the simulation design (2,000 rows, default) or UCI Adult, split
into 5 equal sites; known tables resampled from the real rows.  Three ways, each
``--rows`` rows, seed 7: ``rows`` (``iter_sample``), ``first`` (the chain's first
column known: conditioned on directly) and ``later`` (the chain's last column known,
discrete: matched by drawing).  Reported per way: CPU seconds per row (all threads;
compare the ways of one run, the machine's load moves the absolute figures), chain
draws per row, and the process's peak memory so far.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pandas as pd

from fits import FITSSynthesizer
from fits.datasets import federated_split, load_adult, simulate
from fits.federation.coordinator import Coordinator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--data", choices=["sim", "adult"], default="sim")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    frame = simulate(2_000, seed=0).frame if args.data == "sim" else load_adult(args.data_dir).frame
    sites, _ = federated_split(frame, shares=[0.2] * 5, test_size=0.0, seed=0, min_rows=2)
    synth = FITSSynthesizer(kernel="knn", seed=0).fit(sites)
    order = synth.schema_.order
    real = pd.concat(sites, ignore_index=True)
    pool = real.iloc[np.random.default_rng(123).integers(0, len(real), args.rows)]
    pool = pool.reset_index(drop=True)

    draws = [0]
    sample = Coordinator.sample

    def counted(self: Coordinator, n: int, rng: np.random.Generator, **kw: object) -> np.ndarray:
        draws[0] += n
        return sample(self, n, rng, **kw)  # type: ignore[arg-type]

    Coordinator.sample = counted  # type: ignore[method-assign]
    print(f"{args.data}: chain {order}; {args.rows:,} rows each")
    print("way    | CPU us/row | draws/row | peak MiB")
    for way in ("rows", "first", "later"):
        draws[0] = 0
        cpu = time.process_time()
        if way == "rows":
            chunks = synth.iter_sample(args.rows, seed=7)
        else:
            known = pool[[order[0] if way == "first" else order[-1]]]
            chunks = synth.iter_sample_remaining_columns(known, seed=7)
        n = sum(len(chunk) for chunk in chunks)
        cpu = time.process_time() - cpu
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{way:6} | {cpu / n * 1e6:10.0f} | {draws[0] / n:9.2f} | {peak:8.0f}")


if __name__ == "__main__":
    main()
