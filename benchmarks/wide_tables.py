"""Wide tables: the time of fit and sample by the number of columns.

    python benchmarks/wide_tables.py [--widths 50,100,200,300] [--rows 300] [--fit-only]
        [--out record.json]

The table of docs/benchmarks.md ("Wide tables").  For each width d: a table of
``--rows`` rows split evenly over three sites, d - 5 continuous columns (lab values:
five latent factors with loadings N(0, 1) plus noise of sd 0.5, around 10, three
decimals) and 5 nominal columns of three levels (last in the chain); FITS-K with the
defaults of ``fits synthesize`` (one site at a time, as ``--jobs 1``) fits it and
draws ``--rows`` rows (not with ``--fit-only``).  Printed per width: the seconds of fit
(setup and rule detection) and of sample, the candidate rules every site was asked to
check (one yes/no answer each per site), and the queries the collinearity guard
reduced.  With ``--write DIR`` it also writes the three sites' CSV files
(``w{d}_a.csv``, ...), the input of the ``fits synthesize`` command in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from fits import FITSSynthesizer

NOMINAL = 5


def wide_table(columns: int, rows: int, seed: int = 1) -> pd.DataFrame:
    """``columns - 5`` lab values from five factors, then five nominal columns."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(rows, 5))
    data: dict[str, np.ndarray] = {}
    for k in range(columns - NOMINAL):
        data[f"lab{k}"] = np.round(z @ rng.normal(size=5) + rng.normal(size=rows) * 0.5 + 10, 3)
    for k in range(NOMINAL):
        data[f"cat{k}"] = rng.choice(np.array(["a", "b", "c"]), size=rows)
    return pd.DataFrame(data)


def sites(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    parts = np.array_split(np.arange(len(frame)), 3)
    return {f"site {'abc'[k]}": frame.iloc[p] for k, p in enumerate(parts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--widths", default="50,100,200,300")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--fit-only", action="store_true", help="fit only, draw nothing")
    args = parser.parse_args()
    record = []
    print("| columns | fit (s) | sample (s) | candidates checked | guarded queries |")
    print("| --- | --- | --- | --- | --- |")
    for width in (int(w) for w in args.widths.split(",")):
        tables = sites(wide_table(width, args.rows))
        if args.write is not None:
            args.write.mkdir(parents=True, exist_ok=True)
            for k, frame in enumerate(tables.values()):
                frame.to_csv(args.write / f"w{width}_{'abc'[k]}.csv", index=False)
        synth = FITSSynthesizer("knn", seed=args.seed, n_jobs=1)
        start = time.perf_counter()
        synth.fit(tables)
        fitted = time.perf_counter()
        if not args.fit_only:
            synth.sample(args.rows)
        done = time.perf_counter()
        row = {
            "columns": width,
            "fit_s": round(fitted - start, 1),
            "sample_s": None if args.fit_only else round(done - fitted, 1),
            "checked": int(synth.coordinator.rule_candidates.get("check", 0)),
            "guarded": int(synth.coordinator.guarded),
        }
        record.append(row)
        sample = "-" if row["sample_s"] is None else row["sample_s"]
        print(
            f"| {width} | {row['fit_s']} | {sample} | {row['checked']:,} | {row['guarded']:,} |",
            flush=True,
        )
    if args.out is not None:
        args.out.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
