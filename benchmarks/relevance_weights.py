"""Bike's ``cnt`` drawn with per-covariate relevance weights (issue 12; a measurement of
a lever the engine does not have).

Every site's kernel for ``cnt``'s conditional CDF multiplies each covariate's
standardized distance and its category penalty rate (lambda_q -> w lambda_q,
gamma_q -> gamma_q^w) by a weight w; w = 0 drops the covariate from the kernel (the
local-linear design keeps it). The other columns' kernels are untouched. The weights
are applied by wrapping ``FITSClient._weights`` for the prefix of ``cnt``'s covariates,
so the federation runs as it does with the defaults (10 sites with the paper's shares,
the default site policy and its widening floor), and only the weights change.

The default weights are those a coordinate search on the pooled training rows of seed
0's split chose by leave-one-out CRPS, with ``hr`` at 4 instead of the search's 2.8
(docs/benchmarks.md, "Bike's cnt from fewer, weighted covariates").

Usage::

    python benchmarks/relevance_weights.py --data-dir ../shared/datasets --seed 0 --seed 1
    python benchmarks/relevance_weights.py --data-dir ../shared/datasets --weight hr=2.8

Prints, per seed: the R^2 of gradient boosting (scikit-learn defaults) trained on the
real training split and on the synthetic table, scored on the test split, and the exact
energy distance of all columns to the full data next to the real test split's.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

import numpy as np
import pandas as pd

from fits import FITSSynthesizer
from fits.datasets import federated_split, load_dataset
from fits.evaluation.distance import energy_distances
from fits.evaluation.utility import boosting_comparison
from fits.federation import client as client_module

RESPONSE = "cnt"
WEIGHTS = {
    "season": 0.0, "yr": 1.4, "mnth": 0.0, "hr": 4.0, "holiday": 0.0, "weekday": 0.35,
    "workingday": 1.4, "weathersit": 0.0, "temp": 1.4, "atemp": 2.0, "hum": 1.0,
    "windspeed": 0.0,
}  # fmt: skip


def weigh(weights: dict[str, float]) -> None:
    """Make every site's kernel for ``RESPONSE`` use ``weights`` (see the module)."""
    plain = client_module.FITSClient._weights

    def weighted(self: Any, x: np.ndarray, qcodes: np.ndarray, kernel: Any,
                 widen: float = 1.0, design: np.ndarray | None = None) -> Any:  # fmt: skip
        d = x.shape[1]
        if RESPONSE not in self.columns or d != self.columns.index(RESPONSE):
            return plain(self, x, qcodes, kernel, widen, design)
        # an engine column such as 'windspeed (at point mass)' takes its column's weight
        w = np.array([weights[name.split(" (")[0]] for name in self.columns[:d]])
        saved = self.scale
        scale = saved.copy()
        scale[:d] = np.where(w > 0, saved[:d] / np.where(w > 0, w, 1.0), 1e12)
        penalties = {}
        for j in range(d):
            spec = self.encoders[j].spec
            if spec.is_discrete:
                rate = kernel.penalty_for(spec.name, spec.kind)
                penalties[spec.name] = rate * w[j] if spec.kind == "ordinal" else rate ** w[j]
        self.scale = scale
        try:
            return plain(self, x, qcodes, dataclasses.replace(kernel, column_penalties=penalties),
                         widen, design)  # fmt: skip
        finally:
            self.scale = saved

    client_module.FITSClient._weights = weighted  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--seed", type=int, action="append", help="repeatable; default 0")
    parser.add_argument("--weight", action="append", default=[], help="COLUMN=W, repeatable")
    args = parser.parse_args()
    weights = dict(WEIGHTS)
    for item in args.weight:
        column, _, value = item.partition("=")
        if column not in weights:
            parser.error(
                f"--weight {item!r}: no covariate {column!r} (covariates: {list(weights)})"
            )
        weights[column] = float(value)
    weigh(weights)
    data = load_dataset("bike", args.data_dir)
    print(f"weights: {weights}")  # noqa: T201
    for seed in args.seed or [0]:
        clients, test = federated_split(data.frame, seed=seed)
        train = pd.concat(clients, ignore_index=True)
        start = time.perf_counter()
        synth = FITSSynthesizer(kernel="knn", seed=seed, kinds=data.kinds, order=data.order)
        synthetic = synth.fit(clients).sample(len(train))
        seconds = time.perf_counter() - start
        scores = boosting_comparison(train, synthetic, test, RESPONSE, data.kinds, seed=seed)
        energy = energy_distances(
            data.frame, {"synthetic": synthetic, "test": test}, data.kinds, list(data.frame.columns)
        )["covariates"]  # every column
        print(  # noqa: T201
            f"seed {seed}: R^2 real {scores.real['r2']:.4f}, "
            f"synthetic {scores.synthetic['r2']:.4f}; "
            f"energy {energy['synthetic']:.4f}, floor {energy['test']:.4f} "
            f"({energy['synthetic'] / energy['test']:.2f}x); {seconds:.0f} s"
        )


if __name__ == "__main__":
    main()
