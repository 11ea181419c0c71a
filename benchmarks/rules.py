"""Exact rules kept on Adult and Bike, with generation by rule on and off (issue #12).

    python benchmarks/rules.py --data-dir /work/shared/datasets [--datasets adult,bike]
        [--seed 0] [--kernel knn] [--energy bike] [--out record.json]

The split and seed of ``fits benchmark``'s first repeat (10 clients with the paper's
shares, seed ``--seed``), FITS with the defaults of ``--kernel`` and as many synthetic
rows as the training split, once with ``rules=True`` (the default) and once with
``rules=False``.  Printed per data set and run: the rules found in the training clients
(``Schema.detect``, as the setup round finds them), the share of synthetic rows keeping
each (:func:`fits.evaluation.rules_kept`), the share keeping the issue's semantic rule
(Adult: ``education-num`` is the number of ``education`` in the real data; Bike:
``workingday == (weekday in 1..5 and not holiday)``), the wall time of fit + sample,
the bytes uploaded (in all, and per chain column from the sites' audit entries), the
coordinator's fallback and abstention counts; for the data sets in ``--energy``, the
exact energy distance of all columns to the full data (paper encoding, no subsample).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

import numpy as np
import pandas as pd

from fits import FITSSynthesizer
from fits.core.schema import Schema
from fits.datasets import federated_split, load_dataset
from fits.evaluation import energy_distance, rules_kept


def semantic(name: str, table: pd.DataFrame, full: pd.DataFrame) -> float:
    """The share of rows keeping the issue's rule, defined without fits' detection."""
    if name == "adult":
        pairs = full.groupby("education")["education-num"].first()
        return float((table["education-num"] == table["education"].map(pairs)).mean())
    working = table["weekday"].between(1, 5) & (table["holiday"] == 0)
    return float((table["workingday"] == working.astype(int)).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--datasets", default="adult,bike")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kernel", default="knn")
    parser.add_argument("--energy", default="bike", help="data sets to compute it for")
    parser.add_argument("--out")
    args = parser.parse_args()
    record = []
    for name in args.datasets.split(","):
        data = load_dataset(name, args.data_dir)
        clients, _ = federated_split(data.frame, seed=args.seed)
        n = sum(len(c) for c in clients)
        found = Schema.detect(clients, kinds=data.kinds, order=data.order).rules or []
        print(f"{name}: rules found in the {n} training rows:", [r.describe() for r in found])
        for rules in (False, True):
            t0 = time.perf_counter()
            per_column: dict[str, int] = {}

            lock = threading.Lock()  # the sites answer in threads

            def audit(entry: dict, per_column: dict = per_column, lock: Any = lock) -> None:
                if entry.get("type") in ("marginal", "hessian", "cdf"):
                    column, size = str(entry.get("column")), int(entry["reply_bytes"])
                    with lock:
                        per_column[column] = per_column.get(column, 0) + size

            synth = FITSSynthesizer(
                args.kernel,
                seed=args.seed,
                kinds=data.kinds,
                order=data.order,
                rules=rules,
                site_audit=audit,
            )
            synth.fit(clients)
            table = synth.sample(n)
            wall = time.perf_counter() - t0
            kept = rules_kept(table, found)
            rec = {
                "dataset": name,
                "rules": rules,
                "kernel": args.kernel,
                "seed": args.seed,
                "rows": n,
                "wall_s": wall,
                "uploaded_bytes": int(sum(synth.uploaded_bytes_)),
                "uploaded_bytes_per_column": per_column,
                "fallbacks": int(synth.coordinator.fallbacks),
                "abstained": int(synth.coordinator.abstained),
                "semantic_kept": semantic(name, table, data.frame),
                "kept": kept.to_dict(orient="records"),
            }
            if name in args.energy.split(","):
                cols = [str(c) for c in data.frame.columns]
                rec["energy_all"] = energy_distance(
                    data.frame, table, data.kinds, columns=cols, max_rows=None
                )
            record.append(rec)
            print(json.dumps(rec), flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(record, fh, indent=1)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
