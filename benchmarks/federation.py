"""Networked (Flower, loopback) against in-process synthesis on the demo data.

    python benchmarks/federation.py [--rows 10000] [--sites 10] [--out record.json]

The demo data (the paper's simulation design, `fits demo`'s default of 10,000 rows, 80%
for training over 10 sites with the paper's shares) is written to one CSV per site. The
in-process engine and a real Flower federation (a SuperLink and one SuperNode per site
on 127.0.0.1) then synthesize as many rows as the training split from those files with
the same seed; the two tables are compared and both times recorded.  Needs the flower
extra.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from fits import FITSSynthesizer
from fits.datasets import PAPER_SHARES, federated_split, simulate
from fits.deploy.flower import format_kinds
from fits.deploy.flower_launch import LocalFederation
from fits.io import read_table


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kernel", default="knn", choices=["knn", "gaussian"])
    ap.add_argument(
        "--sites",
        type=int,
        default=10,
        help="10: the paper's shares; else the first n of them, renormalized",
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    data = simulate(args.rows, seed=args.seed)
    clients, _ = federated_split(data.frame, PAPER_SHARES[: args.sites], seed=args.seed)
    n = sum(len(c) for c in clients)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for k, frame in enumerate(clients):
            paths[f"site{k + 1:02d}"] = Path(tmp) / f"site{k + 1:02d}.csv"
            frame.to_csv(paths[f"site{k + 1:02d}"], index=False)
        tables = {name: read_table(p) for name, p in sorted(paths.items())}

        start = time.perf_counter()
        synth = FITSSynthesizer(args.kernel, seed=args.seed, kinds=data.kinds, order=data.order)
        local_table = synth.fit(tables).sample(n)
        in_process_s = time.perf_counter() - start

        out = Path(tmp) / "networked.csv"
        config = {
            "output": str(out),
            "rows": n,
            "seed": args.seed,
            "kinds": format_kinds(data.kinds),
            "order": ",".join(data.order),
        }
        kernels = dict.fromkeys(paths, args.kernel)
        start = time.perf_counter()
        with LocalFederation(paths, kernels=kernels, workdir=Path(tmp) / "fed") as fed:
            started_s = time.perf_counter() - start
            result = fed.run(config, timeout=3600)
        total_s = time.perf_counter() - start
        if not result.ok:
            raise SystemExit(f"run failed: {result.details}\n{result.log[-3000:]}")
        net_table = read_table(out)
        diffs = [
            float(np.max(np.abs(local_table[c].to_numpy(float) - net_table[c].to_numpy(float))))
            for c in local_table.columns
        ]
    rounds = 3 + 2 * (len(data.order) - 1)
    record = {
        "data": f"simulation design, {args.rows} rows, seed {args.seed}",
        "sites": {name: len(c) for name, c in zip(sorted(paths), clients, strict=True)},
        "kernel": args.kernel,
        "rows_synthesized": n,
        "in_process_seconds": round(in_process_s, 2),
        "networked_run_seconds": round(result.seconds, 2),
        "networked_seconds_with_startup": round(total_s, 2),
        "federation_startup_seconds": round(started_s, 2),
        "ratio_networked_to_in_process": round(result.seconds / in_process_s, 1),
        "rounds_at_least": rounds,
        "networked_seconds_per_round": round(result.seconds / rounds, 2),
        "max_abs_difference": max(diffs),
        "tables_equal": max(diffs) == 0.0,
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}",
    }
    text = json.dumps(record, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return record


if __name__ == "__main__":
    main()
