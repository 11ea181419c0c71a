"""A column near-linear in an earlier one, drawn as its residual (an experiment, issue 12).

    python benchmarks/near_linear.py --data-dir ../shared/datasets --seed 0 --variant default
    python benchmarks/near_linear.py --data-dir ../shared/datasets --seed 0 --variant detrend
    python benchmarks/near_linear.py --toy --variant default   # income2 = income + noise
    python benchmarks/near_linear.py --data-dir ../shared/datasets --seed 0 --variant builtin

Bike's ``atemp`` is near-linear in ``temp`` (correlation 0.988). The chain draws ``atemp``
from its local-linear conditional CDF given the earlier columns; the conditional is a
narrow band whose location moves with ``temp`` inside every neighbourhood, and the
local-linear fit of the indicator ``1(atemp <= z)`` over that neighbourhood spreads it
to the neighbourhood's width. ``--variant detrend`` tests the remedy without changing
fits: every site replaces ``atemp`` by its residual ``atemp - (a + b temp)``, with
(a, b) the pooled least-squares line from per-site sums (n, sum x, sum y, sum x^2,
sum xy: the sums fits' affine-rule moments stage already gathers), fits synthesizes
that table, and ``a + b temp`` is added back to the synthetic residual (rounded to
atemp's 4 decimals). The protocol is ``fits benchmark``'s for one seed: 80/20 split,
10 clients with the paper's shares, FITS-K defaults, as many rows as the training
split; exact energy distance of all columns to the full data, boosting R^2 of ``cnt``,
and the pair's correlation and residual sd, real (training rows) against synthetic.

``--toy``: three sites of 300 rows, ``income`` log-normal, ``income2 = income + N(0, 50)``
(a near-copy), FITS-K defaults, the same two variants, and four of fits' own options
on the plain table (``--variant``): ``tune-relevance`` (``tune_relevance=["income2"]``),
``gaussian`` (FITS-G), ``order`` (income, income2, age), ``auto``
(``smoothing="auto"``).

``--variant builtin`` (Bike or ``--toy``): fits' own near-linear columns
(``FITSSynthesizer(near_linear=True)``, the default since later columns see the
column itself rather than its residual, 2026-12-03: docs/method.md, "Near-linear
columns"), which finds the pair itself and draws the residual truncated to the
column's bounds.  Every other variant runs with
``near_linear=False``, the engine these figures were first taken with.

One JSON line per run is printed.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd
from fidelity_levers import score  # the same folder: the scoring of fidelity_levers.py

from fits import FITSSynthesizer
from fits.datasets import federated_split, load_dataset


def pooled_line(sites: list[pd.DataFrame], x: str, y: str) -> tuple[float, float]:
    """Least squares y = a + b x over all sites' rows, from per-site sums only."""
    sums = np.sum(
        [[len(s), s[x].sum(), s[y].sum(), (s[x] ** 2).sum(), (s[x] * s[y]).sum()] for s in sites],
        axis=0,
    )
    n, sx, sy, sxx, sxy = (float(v) for v in sums)
    b = (sxy - sx * sy / n) / (sxx - sx * sx / n)
    return (sy - b * sx) / n, b


def pair_figures(
    real: pd.DataFrame, synthetic: pd.DataFrame, x: str, y: str, a: float, b: float
) -> dict[str, float]:
    """Correlation and residual sd about the pooled line, real against synthetic."""

    def resid(f: pd.DataFrame) -> pd.Series:
        return f[y] - (a + b * f[x])

    return {
        "corr_real": round(float(real[[x, y]].corr().iloc[0, 1]), 5),
        "corr_synthetic": round(float(synthetic[[x, y]].corr().iloc[0, 1]), 5),
        "resid_sd_real": round(float(resid(real).std()), 4),
        "resid_sd_synthetic": round(float(resid(synthetic).std()), 4),
    }


def synthesize(
    sites: list[pd.DataFrame],
    x: str,
    y: str,
    variant: str,
    rows: int,
    decimals: int,
    **params: object,
) -> tuple[pd.DataFrame, float, float]:
    """FITS-K on the sites (``detrend``: on their residual tables), the line added back."""
    a, b = pooled_line(sites, x, y)
    if variant == "detrend":
        sites = [s.assign(**{y: s[y] - (a + b * s[x])}) for s in sites]
    params = {"near_linear": variant == "builtin", **params}
    synthetic = FITSSynthesizer(kernel="knn", **params).fit(sites).sample(rows)  # type: ignore[arg-type]
    if variant == "detrend":
        synthetic[y] = (a + b * synthetic[x] + synthetic[y]).round(decimals)
    return synthetic, a, b


def run_bike(data_dir: str, seed: int, variant: str) -> dict[str, object]:
    """One seed of Bike, ``atemp`` on ``temp``."""
    data = load_dataset("bike", data_dir)
    clients, test = federated_split(data.frame, seed=seed)
    train = pd.concat(clients, ignore_index=True)
    start = time.perf_counter()
    synthetic, a, b = synthesize(
        clients,
        "temp",
        "atemp",
        variant,
        len(train),
        4,
        seed=seed,
        kinds=data.kinds,
        order=data.order,
    )
    seconds = time.perf_counter() - start
    lo, hi = train["atemp"].min(), train["atemp"].max()
    return {
        "data": "bike", "seed": seed, "variant": variant, "a": round(a, 4), "b": round(b, 4),
        "seconds": round(seconds, 1),
        **score(data, synthetic, train, test, seed),
        **pair_figures(train, synthetic, "temp", "atemp", a, b),
        "outside_range": int(((synthetic["atemp"] < lo) | (synthetic["atemp"] > hi)).sum()),
    }  # fmt: skip


def run_toy(seed: int, variant: str) -> dict[str, object]:
    """Three sites of 300 rows with a near-copy ``income2`` of ``income``."""
    rng = np.random.default_rng(seed)
    sites = []
    for _ in range(3):
        income = rng.lognormal(10, 0.5, 300).round(0)
        sites.append(
            pd.DataFrame({
                "age": rng.integers(18, 80, 300),
                "income": income,
                "income2": (income + rng.normal(0, 50, 300)).round(2),
            })
        )  # fmt: skip
    options: dict[str, dict[str, object]] = {
        "tune-relevance": {"tune_relevance": ["income2"]},
        "order": {"order": ["income", "income2", "age"]},
        "auto": {"smoothing": "auto"},
    }
    if variant == "gaussian":
        a, b = pooled_line(sites, "income", "income2")
        synthetic = (
            FITSSynthesizer(kernel="gaussian", seed=seed, near_linear=False).fit(sites).sample(900)
        )
    else:
        synthetic, a, b = synthesize(
            sites, "income", "income2", variant, 900, 2, seed=seed, **options.get(variant, {})
        )
    real = pd.concat(sites, ignore_index=True)
    return {
        "data": "toy",
        "seed": seed,
        "variant": variant,
        **pair_figures(real, synthetic, "income", "income2", a, b),
    }


def main(argv: list[str] | None = None) -> None:
    """Command line: one run, one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="folder holding bike_hour.csv")
    parser.add_argument("--toy", action="store_true", help="the near-copy table instead of Bike")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--variant",
        choices=["default", "detrend", "builtin", "tune-relevance", "gaussian", "order", "auto"],
        default="default",
        help="the last four with --toy only",
    )
    args = parser.parse_args(argv)
    if not args.toy and args.variant not in ("default", "detrend", "builtin"):
        parser.error(f"--variant {args.variant} is for --toy only")
    if args.toy:
        result = run_toy(args.seed, args.variant)
    else:
        if args.data_dir is None:
            parser.error("--data-dir is required for Bike (or give --toy)")
        result = run_bike(args.data_dir, args.seed, args.variant)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
