"""Conditional sampling on later discrete columns (matched by drawing) against the real
conditional and against the exact conditioning of a chain that puts them first.

    python benchmarks/conditional_matching.py --data-dir ../shared/datasets --rows 2000

Adult, split as ``fits benchmark`` splits it (seed 0: 10 sites with the paper's
shares, 20% held out), FITS-K at its defaults. For each condition (``income = 1``, more
than 50K, the chain's last column; ``sex = Female`` with ``income = 1``, rarer)
``--rows`` known rows are completed three ways: **matched** (the file order, ``income``
last: the known columns matched by drawing), **free, kept** (an unconditional sample of
the same synthesizer, kept where the condition holds: the distribution the match must
equal) and **first** (a synthesizer fitted with the known columns first in the chain:
exact conditioning at no extra draws, but another chain). Reported per way: the
completed rows' mean age and hours per week, share of ``Married-civ-spouse`` and of
bachelors or higher, against the real training rows under the same condition; and the
chain draws per row and seconds it took.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from fits import FITSSynthesizer
from fits.datasets import federated_split, load_dataset

DEGREES = {"Bachelors", "Masters", "Doctorate", "Prof-school"}


def _summary(frame: pd.DataFrame) -> list[str]:
    return [
        f"{frame['age'].mean():.1f}",
        f"{frame['hours-per-week'].mean():.1f}",
        f"{(frame['marital-status'] == 'Married-civ-spouse').mean():.3f}",
        f"{frame['education'].isin(DEGREES).mean():.3f}",
    ]


def _counting(synth: FITSSynthesizer) -> list[int]:
    """Count the rows the chain draws (every call of the coordinator's sample)."""
    coord = synth.coordinator
    drawn = [0]
    sample = coord.sample

    def counted(n: int, rng: np.random.Generator, **kwargs: object) -> np.ndarray:
        drawn[0] += n
        return sample(n, rng, **kwargs)  # type: ignore[arg-type]

    coord.sample = counted  # type: ignore[method-assign]
    return drawn


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--rows", type=int, default=2_000)
    args = ap.parse_args(argv)
    data = load_dataset("adult", args.data_dir)
    clients, _ = federated_split(data.frame, seed=0, min_rows=2)
    sites = {f"site {k + 1}": c for k, c in enumerate(clients)}
    train = pd.concat(clients, ignore_index=True)
    start = time.perf_counter()
    synth = FITSSynthesizer("knn", seed=0, kinds=data.kinds).fit(sites)
    print(f"fit (file order, income last): {time.perf_counter() - start:.0f} s")
    free = synth.sample(20_000, seed=1)
    conditions = [{"income": 1}, {"sex": "Female", "income": 1}]
    print(
        "| condition | way | rows | mean age | mean hours | married-civ-spouse "
        "| bachelors or higher | chain draws per row | seconds |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for condition in conditions:
        name = ", ".join(f"{c} = {v}" for c, v in condition.items())
        holds = np.logical_and.reduce([train[c] == v for c, v in condition.items()])
        real = train[holds]
        print(f"| {name} | real training rows | {len(real)} | {' | '.join(_summary(real))} | | |")
        known = pd.DataFrame({c: [v] * args.rows for c, v in condition.items()})
        drawn = _counting(synth)
        start = time.perf_counter()
        out = synth.sample_remaining_columns(known, seed=2)
        seconds = time.perf_counter() - start
        print(
            f"| {name} | matched | {len(out)} | {' | '.join(_summary(out))} "
            f"| {drawn[0] / args.rows:.1f} | {seconds:.0f} |",
            flush=True,
        )
        kept = free[np.logical_and.reduce([free[c] == v for c, v in condition.items()])]
        print(f"| {name} | free, kept | {len(kept)} | {' | '.join(_summary(kept))} | | |")
        order = [*condition, *(c for c in data.frame.columns if c not in condition)]
        start = time.perf_counter()
        first = FITSSynthesizer("knn", seed=0, kinds=data.kinds, order=order).fit(sites)
        out = first.sample_remaining_columns(known, seed=2)
        seconds = time.perf_counter() - start
        print(
            f"| {name} | first (own fit) | {len(out)} | {' | '.join(_summary(out))} "
            f"| 1 | {seconds:.0f} (with its fit) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
