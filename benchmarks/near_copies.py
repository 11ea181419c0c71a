"""Near copies of the kernel chain and of boosted columns: the release check's DCR share.

    python benchmarks/near_copies.py --dataset german --data-dir ../shared/datasets \
        --variants kernel,target,all,all:n_trees=30,all:n_trees=10,all:min_leaf_rows=50
    python benchmarks/near_copies.py --dataset near-copies --variants fresh,kernel,no-near-linear

The data set is split as ``fits benchmark`` splits it (seed 0: 10 sites with the
paper's shares, 20% held out). FITS-K is fitted on the sites with each variant and
draws ``--rows`` rows (default: as many as the training split, at most 4,000);
:class:`fits.evaluation.copies.ReleaseCheck` (what ``fits synthesize`` prints) compares
the first 2,000 of them with the sites' rows. Variants: ``kernel`` (the defaults),
``target`` (the data set's target boosted), ``all`` (every column after the first
boosted), ``all:[COLUMN:]SETTING=VALUE;...`` (every column boosted with these
:class:`~fits.core.boosting.BoostingParams`, for every column or, after ``COLUMN:``,
for that column alone), ``no-near-linear`` (the defaults with ``near_linear=False``)
and, for ``--dataset near-copies`` only, ``fresh`` (a second draw from the table's own
distribution: what a perfect generator gives). ``near-copies`` is a table this script
draws (:func:`near_copies_table`): a column ``x``, ``--copies`` columns each an affine
function of ``x`` plus independent noise of sd ``--noise``, and three unrelated
columns; it is split into three sites of 1/2, 1/3 and 1/6 of its rows. Reported: the
share of synthetic rows closer to a real row than the real rows' 5% DCR quantile (5% for
a fresh real sample; ``fits synthesize`` warns above 10%), the exact-copy share and the
wall time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from fits import FITSSynthesizer
from fits.core.boosting import INTEGER_SETTINGS
from fits.datasets import federated_split, load_dataset
from fits.evaluation.copies import ReleaseCheck


def near_copies_table(n: int, copies: int, noise: float, seed: int) -> pd.DataFrame:
    """``x``; ``c0, ...`` = 0.5 + (1 + 0.1 j) x + N(0, noise^2); ``z``, ``g``, ``w``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    cols: dict[str, np.ndarray] = {"x": x}
    for j in range(copies):
        cols[f"c{j}"] = 0.5 + (1 + 0.1 * j) * x + rng.normal(scale=noise, size=n)
    cols["z"] = rng.normal(size=n) + 0.3 * x
    cols["g"] = rng.choice(np.array(list("abc")), size=n)
    cols["w"] = rng.gamma(2.0, size=n)
    return pd.DataFrame(cols)


def _settings(variant: str, target: str) -> dict:
    if variant == "kernel":
        return {}
    if variant == "no-near-linear":
        return {"near_linear": False}
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
    ap.add_argument("--n", type=int, default=3_000, help="near-copies: rows of the table")
    ap.add_argument("--copies", type=int, default=4, help="near-copies: copies of x")
    ap.add_argument("--noise", type=float, default=0.05, help="near-copies: their noise sd")
    args = ap.parse_args(argv)
    if args.dataset == "near-copies":
        real = near_copies_table(args.n, args.copies, args.noise, seed=1)
        cut = [0, args.n // 2, args.n // 2 + args.n // 3, args.n]
        spans = zip(cut[:-1], cut[1:], strict=True)
        clients = [real.iloc[a:b].reset_index(drop=True) for a, b in spans]
        kinds = {c: "nominal" if c == "g" else "continuous" for c in real.columns}
        target, order = "w", None
    else:
        data = load_dataset(args.dataset, args.data_dir)
        clients, _ = federated_split(data.frame, seed=0, min_rows=2)
        kinds, target, order = data.kinds, data.target, data.order or None
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
        if variant == "fresh":
            if args.dataset != "near-copies":
                raise SystemExit("variant 'fresh' needs --dataset near-copies")
            table = near_copies_table(rows, args.copies, args.noise, seed=99)
            models: dict = {}
            check_kinds = kinds
        else:
            synth = FITSSynthesizer("knn", seed=0, kinds=kinds, order=order)
            synth.set_params(**_settings(variant, target)).fit(sites)
            table = synth.sample(rows)
            models = synth.coordinator.models
            check_kinds = {c: synth.schema_[c].kind for c in synth.schema_.names}
        check = ReleaseCheck(sites, check_kinds, max_rows=2_000, seed=0)
        check.update(table)
        result = check.result()
        seconds = time.perf_counter() - start
        trees = sorted(m.n_trees for m in models.values())
        kept = f"{trees[0]}, {trees[len(trees) // 2]}, {trees[-1]}" if trees else ""
        print(
            f"| {variant} | {result.close_share:.1%} | {result.copy_share:.2%} "
            f"(real duplicates {result.real_duplicate_share:.2%}) | {kept} | {seconds:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
