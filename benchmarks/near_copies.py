"""Near copies of the kernel chain and of boosted columns: the release check's DCR share.

    python benchmarks/near_copies.py --dataset german --data-dir ../shared/datasets \
        --variants kernel,target,all,all:n_trees=30,all:n_trees=10,all:min_leaf_rows=50

The data set is split as ``fits benchmark`` splits it (seed 0: 10 sites with the
paper's shares, 20% held out). FITS-K is fitted on the sites with each variant and
draws ``--rows`` rows (default: as many as the training split, at most 4,000);
:class:`fits.evaluation.copies.ReleaseCheck` (what ``fits synthesize`` prints) compares
the first 2,000 of them with the sites' rows. Variants: ``kernel`` (the defaults),
``target`` (the data set's target boosted), ``all`` (every column after the first
boosted), ``all:[COLUMN:]SETTING=VALUE;...`` (every column boosted with these
:class:`~fits.core.boosting.BoostingParams`, for every column or, after ``COLUMN:``,
for that column alone). Reported: the share of synthetic rows
closer to a real row than the real rows' 5% DCR quantile (5% for a fresh real sample;
``fits synthesize`` warns above 10%), the exact-copy share and the wall time.
"""

from __future__ import annotations

import argparse
import time

from fits import FITSSynthesizer
from fits.core.boosting import INTEGER_SETTINGS
from fits.datasets import federated_split, load_dataset
from fits.evaluation.copies import ReleaseCheck


def _settings(variant: str, target: str) -> dict:
    if variant == "kernel":
        return {}
    if variant == "target":
        return {"column_models": {target: "boosting"}}
    if variant == "all":
        return {"column_models": {"*": "boosting"}}
    if variant.startswith("all:"):
        boosting: dict = {}
        for item in variant[4:].split(";"):
            key, value = item.split("=")
            column, _, name = key.rpartition(":")
            number = int(value) if name in INTEGER_SETTINGS else float(value)
            (boosting.setdefault(column, {}) if column else boosting)[name] = number
        return {"column_models": {"*": "boosting"}, "boosting": boosting}
    raise SystemExit(f"unknown variant {variant!r}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="german")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--variants", default="kernel,target,all")
    ap.add_argument("--rows", type=int, default=None)
    args = ap.parse_args(argv)
    data = load_dataset(args.dataset, args.data_dir)
    clients, _ = federated_split(data.frame, seed=0, min_rows=2)
    sites = {f"site {k + 1}": c for k, c in enumerate(clients)}
    rows = args.rows or min(sum(len(c) for c in clients), 4_000)
    print(f"{args.dataset}: {sum(len(c) for c in clients)} training rows, {rows} drawn")
    print(
        "| variant | rows closer than the real 5% DCR quantile | exact copies "
        "| trees kept per boosted column (min, median, max) | seconds |"
    )
    print("| --- | --- | --- | --- | --- |")
    for variant in args.variants.split(","):
        start = time.perf_counter()
        synth = FITSSynthesizer("knn", seed=0, kinds=data.kinds, order=data.order or None)
        synth.set_params(**_settings(variant, data.target)).fit(sites)
        table = synth.sample(rows)
        kinds = {c: synth.schema_[c].kind for c in synth.schema_.names}
        check = ReleaseCheck(sites, kinds, max_rows=2_000, seed=0)
        check.update(table)
        result = check.result()
        seconds = time.perf_counter() - start
        trees = sorted(m.n_trees for m in synth.coordinator.models.values())
        kept = f"{trees[0]}, {trees[len(trees) // 2]}, {trees[-1]}" if trees else ""
        print(
            f"| {variant} | {result.close_share:.1%} | {result.copy_share:.2%} "
            f"(real duplicates {result.real_duplicate_share:.2%}) | {kept} | {seconds:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
