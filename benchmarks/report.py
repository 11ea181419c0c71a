"""Time the full fidelity report (``fits.evaluate``) on UCI Adult.

The setting of the paper's Adult experiment: the 45,222 complete rows are the real
reference, split 80/20 (``federated_split``, seed 0) into ten clients holding 36,177
training rows and 9,045 held-out rows; the synthetic table has 36,177 rows drawn by
FITS-K (``FITSSynthesizer("knn", seed=0)``, about 100 s). The report then runs
everything: exact energy distances (covariates, covariates + income, and both floors),
column and pair fidelity, the utility modes M1-M4 for all ten clients with logistic
regression and gradient boosting, the privacy checks, and every figure.

Usage (from the repository root)::

    python benchmarks/report.py --data-dir ../shared/datasets --out /tmp/adult-report
    python benchmarks/report.py --synthetic /tmp/adult-report/synthetic.parquet  # reuse
    python benchmarks/report.py --quick   # independent resample instead of FITS (plumbing)

It prints the time of each step and writes ``report.html``, ``report.json`` and
``timings.json`` to ``--out``. The synthetic table is saved there too
(``synthetic.parquet``) so later runs can pass it with ``--synthetic``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import pandas as pd

from fits import FITSSynthesizer
from fits.datasets import federated_split, load_adult
from fits.evaluation import independent_resample
from fits.report import evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("FITS_DATA_DIR", "../shared/datasets"))
    parser.add_argument("--out", type=Path, default=Path("adult-report"))
    parser.add_argument("--synthetic", type=Path, help="reuse a synthetic table (.parquet/.csv)")
    parser.add_argument(
        "--quick", action="store_true", help="independent resample instead of FITS (not timed)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    data = load_adult(args.data_dir)
    clients, test = federated_split(data.frame, seed=args.seed)
    train = pd.concat(clients, ignore_index=True)
    synth = None
    synth_seconds = None
    if args.synthetic is not None:
        reader = pd.read_parquet if args.synthetic.suffix == ".parquet" else pd.read_csv
        synthetic = reader(args.synthetic)
        source = str(args.synthetic)
    elif args.quick:
        synthetic = independent_resample(train, len(train), seed=args.seed)
        source = "independent resample of the training rows (--quick)"
    else:
        start = time.perf_counter()
        synth = FITSSynthesizer("knn", seed=args.seed, kinds=data.kinds, order=data.order)
        synthetic = synth.fit(clients).sample(len(train))
        synth_seconds = time.perf_counter() - start
        synthetic.to_parquet(args.out / "synthetic.parquet")
        source = "FITS-K, seed 0"
        print(f"synthesized {len(synthetic):,} rows in {synth_seconds:.1f} s")

    settings = (
        synth
        if synth is not None
        else {"synthetic table": source, "kernel": "knn (FITS-K)", "seed": args.seed}
    )
    start = time.perf_counter()
    report = evaluate(
        data.frame,
        synthetic,
        data.kinds,
        target=data.target,
        train=train,
        test=test,
        clients=clients,
        settings=settings,
        seed=args.seed,
        title="fits fidelity report: UCI Adult",
        progress=lambda line: print(f"  {line}", flush=True),
    )
    evaluate_seconds = time.perf_counter() - start
    start = time.perf_counter()
    report.save(args.out / "report.html", args.out / "report.json")
    save_seconds = time.perf_counter() - start
    total = evaluate_seconds + save_seconds
    print(report.summary())
    timings = {
        "dataset": "adult",
        "real_rows": len(data.frame),
        "synthetic_rows": len(synthetic),
        "synthetic_source": source,
        "synthesis_s": synth_seconds,
        "steps_s": report.data["meta"]["timings_s"],
        "evaluate_s": evaluate_seconds,
        "render_and_save_s": save_seconds,
        "report_total_s": total,
        "html_bytes": (args.out / "report.html").stat().st_size,
        "cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
    }
    (args.out / "timings.json").write_text(json.dumps(timings, indent=2) + "\n")
    print(f"report for Adult in {total:.1f} s (evaluate {evaluate_seconds:.1f} s, render and save "
          f"{save_seconds:.1f} s); outputs in {args.out}")  # fmt: skip


if __name__ == "__main__":
    main()
