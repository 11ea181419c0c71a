"""Engine benchmark: time, memory and upload volume of FITS-K / FITS-G on one data set.

Runs one kernel scheme per process (so peak memory is that scheme's own) and prints a
JSON record.  Example (the figures in docs/benchmarks.md):

    python benchmarks/engine.py --dataset adult --kernel knn
    python benchmarks/engine.py --dataset adult --kernel gaussian

The data set is split 80/20 and the training part over 10 clients with the paper's
shares; as many rows as the training split are synthesized.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time

import pandas as pd

from fits import FITSSynthesizer, GaussianKernel, KNNKernel
from fits.datasets import federated_split, load_dataset
from fits.evaluation import energy_distance, independent_resample


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--kernel", default="knn", choices=["knn", "gaussian"])
    ap.add_argument("--rows", type=int, default=None, help="default: the training size")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fidelity", action="store_true", help="also compute energy distances")
    ap.add_argument("--out", default=None, help="write the JSON record here")
    ap.add_argument("--discrete-sampling", default="mass", choices=["mass", "grid"])
    ap.add_argument("--discrete-bandwidth", type=float, default=0.05)
    ap.add_argument("--search-eps", type=float, default=0.0, help="KNN: approximate search")
    ap.add_argument("--batch-size", type=int, default=None, help="queries per message")
    ap.add_argument(
        "--search", default="auto", choices=["auto", "kdtree", "brute"], help="KNN: how"
    )
    ap.add_argument(
        "--n-jobs", type=int, default=None, help="clients answering at once (default: cores)"
    )
    args = ap.parse_args(argv)

    data = load_dataset(args.dataset, args.data_dir)
    clients, test = federated_split(data.frame, seed=args.seed)
    train = pd.concat(clients, ignore_index=True)
    n = args.rows or len(train)

    per_column: dict[str, float] = {}
    mark = [time.perf_counter()]

    def progress(column: str, done: int, total: int) -> None:
        if done == total:
            now = time.perf_counter()
            per_column[column] = round(now - mark[0], 2)
            mark[0] = now

    start = time.perf_counter()
    kernel = (
        KNNKernel(search_eps=args.search_eps, search=args.search)
        if args.kernel == "knn"
        else GaussianKernel()
    )
    synth = FITSSynthesizer(
        kernel,
        seed=args.seed,
        kinds=data.kinds,
        order=data.order,
        discrete_sampling=args.discrete_sampling,
        discrete_response_bandwidth=args.discrete_bandwidth,
        batch_size=args.batch_size,
        n_jobs=args.n_jobs,
    )
    synth.fit(clients)
    fit_s = time.perf_counter() - start
    mark[0] = time.perf_counter()
    synthetic = synth.sample(n, progress=progress)
    total_s = time.perf_counter() - start

    transport = synth.coordinator.transport
    step1 = transport.seconds["hessian"]  # wall time of the rounds
    step2 = transport.seconds["cdf"]
    # the clients' own seconds (they overlap when clients answer in parallel)
    busy = {
        kind: sum(c.timings[kind] for c in transport._clients)
        for kind in ("hessian", "cdf", "neighbour_search")
    }
    record = {
        "dataset": args.dataset,
        "kernel": args.kernel,
        "discrete_sampling": args.discrete_sampling,
        "discrete_bandwidth": args.discrete_bandwidth,
        "search_eps": args.search_eps,
        "search": args.search,
        "batch_size": synth.coordinator._batch(),
        "n_jobs": transport.n_jobs,
        "clients": [len(c) for c in clients],
        "rows_synthesized": n,
        "seconds_total": round(total_s, 1),
        "seconds_fit": round(fit_s, 2),
        "seconds_per_column": per_column,
        "share_step1": round(step1 / total_s, 3),
        "share_step2": round(step2 / total_s, 3),
        "share_coordinator_and_other": round(1 - (step1 + step2) / total_s, 3),
        "client_seconds": {k: round(v, 1) for k, v in busy.items()},
        "search_share_of_client_work": round(
            busy["neighbour_search"] / (busy["hessian"] + busy["cdf"]), 3
        ),
        "uploaded_bytes_per_row": round(sum(synth.uploaded_bytes_) / n, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "fallback_queries": synth.coordinator.fallbacks,
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {sys.version.split()[0]}",
    }
    if args.fidelity:
        full = data.frame
        record["energy_distance"] = {
            "fits": energy_distance(full, synthetic, data.kinds, max_rows=20_000, seed=0),
            "real_test": energy_distance(full, test, data.kinds, max_rows=20_000, seed=0),
            "independent": energy_distance(
                full,
                independent_resample(train, n, seed=0),
                data.kinds,
                max_rows=20_000,
                seed=0,
            ),
        }
    text = json.dumps(record, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return record


if __name__ == "__main__":
    main()
