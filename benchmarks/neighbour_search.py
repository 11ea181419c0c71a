"""KD-tree or brute-force scan: neighbour-search time per chain prefix length d.

Fits the Adult federation of ``benchmarks/engine.py`` (10 clients, the paper's shares)
and, for each number of conditioning columns d, times one batch of queries against
every client's neighbour index, with each search method (and the tree on one thread).
The queries are client 2's continualized rows (jittered), standardized by each client.
Example (the crossover in docs/benchmarks.md and :data:`fits.core.kernels.BRUTE_FORCE_MIN_DIM`):

    python benchmarks/neighbour_search.py --data-dir ../shared/datasets
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from fits import FITSSynthesizer, KNNKernel
from fits.datasets import federated_split, load_dataset


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--batch", type=int, default=8192, help="queries per batch")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    data = load_dataset(args.dataset, args.data_dir)
    clients, _ = federated_split(data.frame, seed=args.seed)
    synth = FITSSynthesizer(KNNKernel(), seed=args.seed, kinds=data.kinds, order=data.order)
    synth.fit(clients)
    sites = synth.coordinator.transport._clients
    rng = np.random.default_rng(args.seed + 1)
    source = sites[1]
    rows = []
    for d in range(1, len(source.columns)):
        picked = source.z[rng.integers(0, source.n_rows, args.batch), :d]
        queries = picked + 0.01 * rng.standard_normal(picked.shape)
        seconds = {}
        for method in ("kdtree", "kdtree-1", "brute"):
            total = 0.0
            for site in sites:
                xbar = (queries - site.loc[:d]) / site.scale[:d]
                index, _ = site._tree(d, method.split("-")[0])
                if index is None:
                    continue
                k = site.kernel.neighbors(site.n_rows, site.n_total, d)
                start = time.perf_counter()
                if method == "brute":
                    index.kneighbors(xbar, n_neighbors=min(k, index.n_samples_fit_))
                else:  # "kdtree": all cores (the default); "kdtree-1": one thread
                    workers = 1 if method == "kdtree-1" else -1
                    index.query(xbar, k=min(k, index.n), workers=workers)
                total += time.perf_counter() - start
            seconds[method] = round(total, 3)
        row = {"d": d, **seconds, "scan_over_tree": round(seconds["brute"] / seconds["kdtree"], 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


if __name__ == "__main__":
    main()
