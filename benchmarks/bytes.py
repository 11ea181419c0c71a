"""Upload bytes per synthetic row, by message type, and the energy distance, for one
data set, seed and setting of the byte levers (docs/benchmarks.md, "Bytes").

    python benchmarks/bytes.py --dataset adult --seed 0 --data-dir ../shared/datasets
    python benchmarks/bytes.py --dataset adult --seed 0 --paper-wire --data-dir ...

``--paper-wire`` is the protocol as it was before the levers (float64 uploads, two
rounds, no deduplication, the uniform grid of 300 points, every covariate in the
local-linear design).  ``--design`` sets the design (default: the synthesizer's).  The
sites' policies are off (``SitePolicy.unrestricted()``) unless ``--policy default``, so
that the figures measure the wire alone.  Prints one JSON record (and appends it to ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import defaultdict

from fits import FITSSynthesizer, KNNKernel
from fits.datasets import federated_split, load_dataset
from fits.evaluation import energy_distance
from fits.federation.policy import SitePolicy


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=None, help="default: the training size")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--precision", default="fixed16", choices=["fixed16", "float32", "float64"])
    ap.add_argument("--rounds", default="auto", choices=["auto", "1", "2"])
    ap.add_argument("--no-dedup", action="store_true")
    ap.add_argument("--grid-points", type=int, default=64, help="0: the uniform grid")
    ap.add_argument("--paper-wire", action="store_true", help="every lever off")
    ap.add_argument("--policy", default="off", choices=["off", "default"])
    ap.add_argument(
        "--design",
        default=None,
        choices=["all", "ordered", "continuous"],
        help="default: the synthesizer's",
    )
    ap.add_argument("--no-fidelity", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rounds: str | int = args.rounds if args.rounds == "auto" else int(args.rounds)
    levers = {
        "upload_precision": args.precision,
        "rounds": rounds,
        "deduplicate": not args.no_dedup,
        "grid_points": args.grid_points or None,
    }
    if args.paper_wire:
        levers = {
            "upload_precision": "float64",
            "rounds": 2,
            "deduplicate": False,
            "grid_points": None,
            "design": "all",
        }
    elif args.design:
        levers["design"] = args.design

    data = load_dataset(args.dataset, args.data_dir)
    clients, _ = federated_split(data.frame, seed=args.seed)
    n = args.rows or sum(len(c) for c in clients)
    synth = FITSSynthesizer(
        KNNKernel(),
        seed=args.seed,
        kinds=data.kinds,
        order=data.order,
        site_policy=SitePolicy.unrestricted() if args.policy == "off" else None,
        **levers,  # type: ignore[arg-type]
    )
    start = time.perf_counter()
    synth.fit(clients)
    by_type: dict[str, int] = defaultdict(int)
    synth.coordinator.transport.observers.append(
        lambda k, req, rep: by_type.__setitem__(req.type, by_type[req.type] + rep.nbytes())
    )
    fit_bytes = sum(synth.uploaded_bytes_)
    synthetic = synth.sample(n)
    seconds = time.perf_counter() - start
    record = {
        "dataset": args.dataset,
        "seed": args.seed,
        "levers": levers,
        "policy": args.policy,
        "rows": n,
        "seconds": round(seconds, 1),
        "bytes_per_row": round(sum(synth.uploaded_bytes_) / n, 1),
        "fit_bytes": fit_bytes,
        "sample_bytes_per_row_by_type": {k: round(v / n, 1) for k, v in by_type.items()},
        "fallbacks": synth.coordinator.fallbacks,
        "guarded": synth.coordinator.guarded,
        "design": synth.design,
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {sys.version.split()[0]}",
    }
    if not args.no_fidelity:
        record["energy_distance"] = energy_distance(
            data.frame, synthetic, data.kinds, max_rows=20_000, seed=0
        )
    text = json.dumps(record)
    print(text)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(text + "\n")
    return record


if __name__ == "__main__":
    main()
