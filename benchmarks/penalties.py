"""Category penalties of the penalty-adaptive kernel: a sweep of gamma and lambda.

    python benchmarks/penalties.py --data-dir ../shared/datasets [--out record.json]

FITS-K on UCI Adult (the split of ``benchmarks/engine.py``: 10 clients with the
paper's shares, as many rows as the training split), once per setting of the nominal
penalty gamma (eq. 26: the factor for a category mismatch) and the ordinal penalty
lambda (exp(-lambda |rank gap|)); each synthetic table's energy distance to the full
data (20,000-row subsamples, as in docs/benchmarks.md).  The paper's defaults are
gamma = 0.1, lambda = 1.
"""

from __future__ import annotations

import argparse
import json
import time

import pandas as pd

from fits import FITSSynthesizer, KNNKernel
from fits.datasets import federated_split, load_dataset
from fits.evaluation import energy_distance

SETTINGS = [(0.1, 1.0), (0.01, 1.0), (0.3, 1.0), (1.0, 1.0), (0.1, 0.25), (0.1, 3.0), (1.0, 0.0)]


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    data = load_dataset(args.dataset, args.data_dir)
    clients, _ = federated_split(data.frame, seed=args.seed)
    n = len(pd.concat(clients))
    rows = []
    for gamma, lam in SETTINGS:
        start = time.perf_counter()
        kernel = KNNKernel(ordinal_penalty=lam, nominal_penalty=gamma)
        synth = FITSSynthesizer(kernel, seed=args.seed, kinds=data.kinds, order=data.order)
        table = synth.fit(clients).sample(n)
        seconds = time.perf_counter() - start
        ed = energy_distance(data.frame, table, data.kinds, max_rows=20_000, seed=args.seed)
        row = {"gamma": gamma, "lambda": lam, "energy_distance": round(ed, 4),
               "seconds": round(seconds, 1)}  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    main()
