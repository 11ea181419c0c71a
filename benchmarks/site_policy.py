"""What the site policy's effective-rows floor costs in fidelity: a sweep of k.

    python benchmarks/site_policy.py --dataset simulation --repeats 3 [--k 0,5,10,20]
    python benchmarks/site_policy.py --dataset bike --data-dir ../shared/datasets
    python benchmarks/site_policy.py --dataset bike --data-dir ../shared/datasets \
        --k 0,10 --modes widen,abstain [--no-normalize]

For each repeat r (seed r) the data set is split as ``fits benchmark`` splits it (10
clients with the paper's shares, 20% held out), and FITS-G and FITS-K synthesize as
many rows as the training split with every site under ``SitePolicy(min_effective_rows=
k, below_floor=mode)`` for each mode of ``--modes`` (default: widen, the policy's
default); k = 0 is no floor.  ``--no-normalize`` turns off the rescaling of widened
weights to the site's own kernel's mass (``fits.federation.client.NORMALIZE_WIDENED``;
for measuring what it does).  Reported per setting: the energy distance of the synthetic
table to the full data (all columns, 20,000-row subsamples, as in docs/benchmarks.md),
the (site, query) answers the sites gave with a widened kernel and abstained from, the
coordinator's fallbacks, and the wall time.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

import fits.federation.client
from fits import FITSSynthesizer, SitePolicy
from fits.datasets import federated_split, load_dataset, simulate
from fits.evaluation import energy_distance

GENERATORS = ("gaussian", "knn")


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="simulation")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--k", default="0,5,10,20", help="comma-separated values of k")
    ap.add_argument("--modes", default="widen", help="comma-separated below_floor modes")
    ap.add_argument("--no-normalize", action="store_true")
    ap.add_argument("--generators", default=",".join(GENERATORS))
    ap.add_argument("--out", default=None, help="JSON file for the records")
    args = ap.parse_args(argv)
    ks = [float(v) for v in args.k.split(",")]
    modes = args.modes.split(",")
    settings = [(k, m) for k in ks for m in (modes if k > 0 else modes[:1])]
    generators = args.generators.split(",")
    if args.no_normalize:
        fits.federation.client.NORMALIZE_WIDENED = False

    rows = []
    base = None if args.dataset == "simulation" else load_dataset(args.dataset, args.data_dir)
    for r in range(args.repeats):
        data = simulate(10_000, seed=r) if base is None else base
        clients, _ = federated_split(data.frame, seed=r)
        n = sum(len(c) for c in clients)
        for gen in generators:
            for k, mode in settings:
                start = time.perf_counter()
                synth = FITSSynthesizer(
                    gen,
                    seed=r,
                    kinds=data.kinds,
                    order=data.order,
                    site_policy=SitePolicy(min_effective_rows=k, below_floor=mode),
                )
                table = synth.fit(clients).sample(n)
                seconds = time.perf_counter() - start
                ed = energy_distance(data.frame, table, data.kinds, max_rows=20_000, seed=r)
                coord = synth.coordinator
                rec = {
                    "dataset": args.dataset,
                    "repeat": r,
                    "generator": gen,
                    "k": k,
                    "mode": mode if k > 0 else "-",
                    "normalized": not args.no_normalize,
                    "energy": ed,
                    "widened": coord.widened,
                    "abstained": coord.abstained,
                    "queries": n * (len(data.order) - 1),
                    "fallbacks": coord.fallbacks,
                    "seconds": seconds,
                }
                rows.append(rec)
                print(json.dumps(rec), flush=True)
    frame = pd.DataFrame(rows)
    print()
    print(
        "| generator | k | below floor | energy distance, mean (sd) | vs k = 0 | widened "
        "answers per query | abstained answers per query | fallbacks per query | seconds |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for gen in generators:
        sub = frame[frame.generator == gen]
        ref = sub[sub.k == 0].energy.mean() if (sub.k == 0).any() else np.nan
        for k, mode in settings:
            s = sub[(sub.k == k) & (sub["mode"] == (mode if k > 0 else "-"))]
            print(
                f"| {gen} | {k:g} | {mode if k > 0 else '-'} | {s.energy.mean():.4f} "
                f"({s.energy.std():.4f}) | {s.energy.mean() / ref:.3f} | "
                f"{(s.widened / s.queries).mean():.2f} | "
                f"{(s.abstained / s.queries).mean():.2f} | "
                f"{(s.fallbacks / s.queries).mean():.4f} | {s.seconds.mean():.1f} |"
            )
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
