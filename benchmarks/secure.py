"""Secure aggregation against plain sums, in process, on the demo data.

    python benchmarks/secure.py [--rows 10000] [--sites 10] [--repeats 2] [--out record.json]

The demo data (the paper's simulation design, 80% for training over the sites with the
paper's shares) is synthesized with FITS-K and the same seed, alternating plain and
secure runs; the record has each run's wall time and uploaded bytes and the largest
difference between the plain and the secure table's numeric columns.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from fits import FITSSynthesizer
from fits.datasets import PAPER_SHARES, federated_split, simulate


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--sites", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    data = simulate(args.rows, seed=args.seed)
    shares = PAPER_SHARES if args.sites == 10 else [1.0] * args.sites
    clients, _ = federated_split(data.frame, shares=shares, seed=args.seed)
    n = sum(len(c) for c in clients)
    runs: dict[str, list[dict]] = {"plain": [], "secure": []}
    tables = {}
    for _ in range(args.repeats):
        for mode in ("plain", "secure"):
            start = time.perf_counter()
            synth = FITSSynthesizer(
                "knn",
                seed=args.seed,
                kinds=data.kinds,
                order=data.order,
                secure_aggregation=mode == "secure",
            )
            tables[mode] = synth.fit(clients).sample(n)
            runs[mode].append(
                {
                    "seconds": round(time.perf_counter() - start, 2),
                    "uploaded_bytes": int(sum(synth.uploaded_bytes_)),
                }
            )
    numeric = tables["plain"].select_dtypes("number").columns
    diff = np.abs(
        tables["plain"][numeric].to_numpy(float) - tables["secure"][numeric].to_numpy(float)
    )
    record = {
        "data": f"simulation design, {args.rows} rows, seed {args.seed}",
        "sites": len(clients),
        "rows_synthesized": n,
        "runs": runs,
        "time_ratio_secure_to_plain": round(
            min(r["seconds"] for r in runs["secure"]) / min(r["seconds"] for r in runs["plain"]),
            1,
        ),
        "bytes_ratio": round(
            runs["secure"][0]["uploaded_bytes"] / runs["plain"][0]["uploaded_bytes"], 2
        ),
        "max_abs_difference_numeric": float(np.nanmax(diff)),
        "discrete_columns_equal": bool(
            tables["plain"].drop(columns=numeric).equals(tables["secure"].drop(columns=numeric))
        ),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {sys.version.split()[0]}",
        "date": time.strftime("%Y-%m-%d"),
    }
    text = json.dumps(record, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return record


if __name__ == "__main__":
    main()
