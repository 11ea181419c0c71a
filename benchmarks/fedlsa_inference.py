"""Inference check of FITS-K and FITS-G synthetic tables (FedLSA across the real sites).

Loads a real data set (Bike or Adult), splits it over sites
(:func:`fits.datasets.federated_split`), synthesizes as many rows as the training
split with FITS-K (KNN kernel) and FITS-G (Gaussian kernel), and runs
:func:`fits.analysis.inference_check` on each synthetic table: the linear regression
of the target by FedLSA across the real sites (95% multiplier-bootstrap intervals)
against OLS with HC1 intervals on the synthetic table.

Usage::

    python benchmarks/fedlsa_inference.py --dataset bike --data-dir ../shared/datasets \
        --shares 0.5,0.3,0.2 --out /tmp/fedlsa_bike.json

Prints one table per synthesizer and the summary numbers (mean overlap, share of
synthetic estimates inside the federated intervals).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from fits.analysis import inference_check
from fits.core.kernels import GaussianKernel, KNNKernel
from fits.datasets import federated_split, load_dataset
from fits.synthesizer import FITSSynthesizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", choices=["bike", "adult"], default="bike")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--shares", default="0.5,0.3,0.2", help="site shares of the training split")
    ap.add_argument("--target", default=None, help="numeric target (default: bike cnt, adult age)")
    ap.add_argument("--kernels", default="knn,gaussian")
    ap.add_argument("--rounds", type=int, default=None, help="default: inference_check's")
    ap.add_argument("--local-steps", type=int, default=None, help="default: inference_check's")
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument(
        "--regimes",
        default="one_pass,paper",
        help="FedLSA regimes to check each synthetic table with (the first is the default)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    data = load_dataset(args.dataset, args.data_dir)
    target = args.target or ("cnt" if args.dataset == "bike" else "age")
    shares = [float(s) for s in args.shares.split(",")]
    clients, _ = federated_split(data.frame, shares, seed=args.seed)
    sites = {f"site{c + 1}": t for c, t in enumerate(clients)}
    n = sum(len(t) for t in clients)
    kinds = dict(data.kinds)
    out: dict = {
        "dataset": args.dataset,
        "target": target,
        "site_rows": [len(t) for t in clients],
    }
    regimes = [r for r in args.regimes.split(",") if r]
    fed_kw: dict = dict(n_bootstrap=args.bootstrap, seed=args.seed, kinds=kinds)
    if args.rounds is not None:
        fed_kw["rounds"] = args.rounds
    if args.local_steps is not None:
        fed_kw["local_steps"] = args.local_steps
    for regime in regimes:
        # the real-data reference: pooled OLS (HC1) on the same design (the ceiling)
        start = time.perf_counter()
        real = inference_check(
            sites, pd.concat(clients, ignore_index=True), target, regime=regime, **fed_kw
        )
        out[regime] = {
            "fedlsa_seconds": round(time.perf_counter() - start, 1),
            "pooled_real": real.to_dict(),
            "fedlsa": real.federated.to_dict()["schedule"],
        }
        print(regime, "FedLSA vs pooled real OLS:", round(real.mean_overlap, 3), real.share_inside)
        print(real.federated.summary())
    for name in [k for k in args.kernels.split(",") if k]:
        kernel = KNNKernel() if name == "knn" else GaussianKernel()
        label = "FITS-K" if name == "knn" else "FITS-G"
        start = time.perf_counter()
        synth = FITSSynthesizer(kernel, seed=args.seed, kinds=kinds, order=data.order)
        synth.fit(clients)
        synthetic = synth.sample(n)
        secs = time.perf_counter() - start
        out[f"{label}_synthesis_seconds"] = round(secs, 1)
        for regime in regimes:
            check = inference_check(sites, synthetic, target, regime=regime, **fed_kw)
            out[regime][label] = check.to_dict()
            with pd.option_context("display.width", 160, "display.max_columns", 20):
                print(label, regime, f"({secs:.0f} s)")
                print(check.table.round(3))
            print(
                label,
                regime,
                "mean overlap",
                round(check.mean_overlap, 3),
                "inside",
                round(check.share_inside, 3),
            )
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(
                out,
                fh,
                indent=1,
                default=lambda v: v.item() if isinstance(v, np.generic) else str(v),
            )


if __name__ == "__main__":
    main()
