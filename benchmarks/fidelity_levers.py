"""Fidelity levers (issue #12): one FITS-K run per setting, exact energy distance and boosting.

    python benchmarks/fidelity_levers.py --dataset bike --data-dir ../shared/datasets \\
        --variant default --variant wz-0.005 --policy off --out levers.jsonl

The protocol of ``fits benchmark`` for one seed: 80/20 split, the training rows over 10
clients with the paper's shares (:func:`fits.datasets.federated_split`), FITS-K with the
variant's settings synthesizes as many rows as the training split; then

* the exact energy distance (no subsampling) of all columns to the full data, next to
  the real held-out split's (the floor), via :func:`fits.evaluation.energy_distances`;
* scikit-learn's histogram gradient boosting with default settings trained on the real
  training rows and on the synthetic table, scored on the held-out rows
  (:func:`fits.evaluation.utility.boosting_comparison`: R^2 for regression, ROC AUC
  for classification).

One JSON line per variant is printed and appended to ``--out``. Variants (combine with
``+``, e.g. ``order-dependence+wz-0.005``):

``default``
    The defaults (file order, lambda_q = 1 per rank, w_z = 0.05 of an interval).
``order-dependence``
    Chain order: the target last, the other columns by decreasing dependence on the
    target (:func:`dependence_on`, computed here from the pooled training rows: the
    sums it needs are sums over sites, so a federation would get the same numbers
    from one aggregate of per-site sums).
``wz-<v>``
    Discrete response bandwidth ``discrete_response_bandwidth=v`` (METHOD.md).
``hr-lambda-<v>``
    Ordinal penalty lambda_q = v for the column ``hr`` only (eq. 26).
``lambda-<v>``
    Ordinal penalty lambda_q = v for every ordinal covariate.
``gamma-<v>``
    Nominal penalty gamma_q = v for every nominal covariate (eq. 26).
``hr-nominal``
    ``hr`` drawn and penalized as a nominal column (gamma_q = 0.1 per mismatch).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from fits import FITSSynthesizer, KNNKernel
from fits.datasets import federated_split, load_dataset
from fits.evaluation import energy_distances
from fits.evaluation.utility import boosting_comparison
from fits.federation.policy import SitePolicy


def _encode(frame: pd.DataFrame, col: str, kind: str) -> np.ndarray:
    """Continuous: the value; ordinal and nominal: indicators of all levels but the first."""
    if kind == "continuous":
        return frame[col].to_numpy(dtype=float)[:, None]
    codes, levels = pd.factorize(frame[col], sort=True)
    out = np.zeros((len(frame), max(len(levels) - 1, 1)))
    rows = np.flatnonzero(codes > 0)
    out[rows, codes[rows] - 1] = 1.0
    return out


def dependence_on(frame: pd.DataFrame, kinds: dict[str, str], target: str) -> dict[str, float]:
    """Dependence of every other column on ``target``: mean squared canonical correlation.

    Each column is encoded as a block (continuous: itself; discrete: level indicators),
    and for blocks A and B the measure is trace(S_AA^-1 S_AB S_BB^-1 S_BA) / min(p_A, p_B)
    (Pillai's trace over the smaller block's width): r^2 for two continuous columns, the
    correlation ratio eta^2 for a discrete and a continuous one, Cramer's V^2 for two
    discrete ones. It needs only the covariance matrix of the encoding, i.e. the sums
    of products, which are sums over sites.
    """
    blocks = {c: _encode(frame, c, k) for c, k in kinds.items()}
    yb = blocks[target] - blocks[target].mean(axis=0)
    syy = np.linalg.pinv(yb.T @ yb)
    out = {}
    for col, xb in blocks.items():
        if col == target:
            continue
        xb = xb - xb.mean(axis=0)
        sxy = xb.T @ yb
        m = np.linalg.pinv(xb.T @ xb) @ sxy @ syy @ sxy.T
        out[col] = float(np.trace(m) / min(xb.shape[1], yb.shape[1]))
    return out


def settings_for(
    variant: str, kinds: dict[str, str], train: pd.DataFrame, target: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """FITSSynthesizer keyword arguments and kinds for one variant string."""
    params: dict[str, Any] = {}
    kinds = dict(kinds)
    column_penalties: dict[str, float] = {}
    ordinal_penalty = 1.0
    nominal_penalty = 0.1
    for part in variant.split("+"):
        if part == "default":
            continue
        if part == "order-dependence":
            dep = dependence_on(train, kinds, target)
            params["order"] = sorted(dep, key=lambda c: -dep[c]) + [target]
        elif part.startswith("wz-"):
            params["discrete_response_bandwidth"] = float(part[3:])
        elif part.startswith("hr-lambda-"):
            column_penalties["hr"] = float(part[len("hr-lambda-") :])
        elif part.startswith("lambda-"):
            ordinal_penalty = float(part[len("lambda-") :])
        elif part.startswith("gamma-"):
            nominal_penalty = float(part[len("gamma-") :])
        elif part == "hr-nominal":
            kinds["hr"] = "nominal"
        else:
            raise SystemExit(f"unknown variant part {part!r}")
    if column_penalties or ordinal_penalty != 1.0 or nominal_penalty != 0.1:
        params["kernel"] = KNNKernel(
            ordinal_penalty=ordinal_penalty,
            nominal_penalty=nominal_penalty,
            column_penalties=column_penalties,
        )
    return params, kinds


def score(
    data: Any, synthetic: pd.DataFrame, train: pd.DataFrame, test: pd.DataFrame, seed: int
) -> dict[str, Any]:
    """Exact energy distance of all columns to the full data (and the real test split's,
    the floor) and the boosting score trained on real and on synthetic rows."""
    ed = energy_distances(
        data.frame, {"synthetic": synthetic, "real test": test}, data.kinds,
        columns=[str(c) for c in data.frame.columns],
    )["covariates"]  # fmt: skip
    boost = boosting_comparison(train, synthetic, test, data.target, data.kinds, seed=seed)
    return {
        "energy": round(float(ed["synthetic"]), 5),
        "energy_floor": round(float(ed["real test"]), 5),
        "ratio": round(float(ed["synthetic"] / ed["real test"]), 3),
        "boosting_metric": boost.metric,
        "boosting_real": round(boost.real[boost.metric], 4),
        "boosting_synthetic": round(boost.synthetic[boost.metric], 4),
    }


def run(variant: str, data: Any, seed: int, policy: str) -> dict[str, Any]:
    """One variant on one seed: settings, seconds, energy distances, boosting scores."""
    clients, test = federated_split(data.frame, seed=seed)
    train = pd.concat(clients, ignore_index=True)
    params, kinds = settings_for(variant, data.kinds, train, data.target)
    params.setdefault("order", data.order)
    params.setdefault("kernel", "knn")
    site_policy = SitePolicy(min_effective_rows=0) if policy == "off" else None
    start = time.perf_counter()
    synth = FITSSynthesizer(seed=seed, kinds=kinds, site_policy=site_policy, **params)
    synthetic = synth.fit(clients).sample(len(train))
    seconds = time.perf_counter() - start
    return {
        "dataset": data.name,
        "variant": variant,
        "seed": seed,
        "site_policy": "min_effective_rows=0" if policy == "off" else "default (k=10)",
        "order": list(synth.schema_.order),
        "seconds": round(seconds, 1),
        **score(data, synthetic, train, test, seed),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}",
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="bike")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--seed", type=int, action="append")
    ap.add_argument("--variant", action="append")
    ap.add_argument("--policy", choices=["off", "default"], default="off")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    data = load_dataset(args.dataset, args.data_dir)
    for seed in args.seed or [0]:
        for variant in args.variant or ["default"]:
            row = run(variant, data, seed, args.policy)
            line = json.dumps(row)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a", encoding="utf-8") as fh:
                    fh.write(line + "\n")


if __name__ == "__main__":
    main()
