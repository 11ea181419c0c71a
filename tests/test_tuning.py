"""Smoothing per chain column chosen by a federated held-out score (fits.core.tuning).

The pooled reference below is written from the formulas alone -- KNN weights row by
row (eqs. 13, 24-26), the local-linear fit of each grid point's smoothed indicator by
weighted least squares (``numpy.linalg.lstsq``, eq. 2), isotonic post-processing with
scikit-learn and the CRPS by ``scipy.integrate.trapezoid`` -- and shares no code with the engine
except the continualized values and the fold split each site drew.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import trapezoid
from scipy.special import ndtr
from scipy.stats import norm
from sklearn.isotonic import IsotonicRegression

from fits import FITSSynthesizer, KNNKernel
from fits.core.tuning import Smoothing, crps_on_grid, smoothed_kernel
from fits.deploy.inprocess import build_federation
from fits.federation.coordinator import Coordinator
from fits.federation.policy import PolicyError, SitePolicy
from fits.federation.protocol import Message, ProtocolError, check_reply

SHARP, SMOOTH = Smoothing(10.0, 1.0), Smoothing(1.0, 1.0)


def _planted(effect: str, seed: int, sites: int = 2, rows: int = 600) -> list[pd.DataFrame]:
    """An ordinal covariate ``o`` with 30 levels and a continuous response ``y``.

    ``flip``: y's mean flips between neighbouring levels (+-2, noise sd 0.3), so rows one
    level away are from another distribution: the sharper penalty must win.  ``smooth``:
    y = 0.02 o + N(0, 1), nearly flat, so pooling neighbouring levels only cuts the
    variance: the default penalty must win.
    """
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(sites):
        o = rng.integers(0, 30, rows)
        if effect == "flip":
            y = 2.0 * (o % 2) + rng.normal(0, 0.3, rows)
        else:
            y = 0.02 * o + rng.normal(0, 1.0, rows)
        out.append(pd.DataFrame({"o": o, "y": y}))
    return out


def _coordinator(tables, kernel="knn", policy=None, **kw):
    clients, transport = build_federation(tables, kernel, n_jobs=1, policy=policy)
    coordinator = Coordinator(transport, **kw)
    coordinator.setup(kinds={"o": "ordinal"} if "o" in tables[0] else None)
    coordinator.configure(0)
    return clients, coordinator


@pytest.mark.parametrize("kernel", ["knn", "gaussian"])
def test_flipping_ordinal_effect_picks_the_sharper_penalty(kernel):
    _, coordinator = _coordinator(_planted("flip", 1), kernel)
    chosen = coordinator.tune(3, candidates=[SMOOTH, SHARP])
    assert chosen == {"y": SHARP}
    scores = coordinator.tuning["y"]["scores"]
    assert scores[1] < 0.8 * scores[0]


@pytest.mark.parametrize("kernel", ["knn", "gaussian"])
def test_smooth_ordinal_effect_keeps_the_default_penalty(kernel):
    _, coordinator = _coordinator(_planted("smooth", 2, rows=300), kernel)
    chosen = coordinator.tune(3, candidates=[SMOOTH, SHARP])
    assert chosen == {"y": SMOOTH}


def _pooled_scores(clients, seed, candidates, rows, column="y"):
    """Sum over sites and held-out rows of the CRPS, from the formulas (module doc)."""
    seqs = np.random.SeedSequence(seed).spawn(len(clients))
    n_total = sum(c.n_rows for c in clients)
    totals = np.zeros(len(candidates))
    for client, seq in zip(clients, seqs, strict=True):
        j = client.columns.index(column)
        d = j
        rng = np.random.default_rng(int(seq.generate_state(1)[0]))
        m = client.n_rows
        perm = rng.permutation(m)
        fold = np.empty(m, dtype=int)
        fold[perm] = np.arange(m) % 5
        share = math.ceil(rows * m / n_total)
        grid = client.grids[column]
        z, codes = client.z, client.codes
        for i in perm[:share]:
            train = np.flatnonzero(fold != fold[i])
            xq = z[i, :d].copy()
            for k in range(d):  # eq. 24: the interval midpoint of a discrete coordinate
                enc = client.encoders[k]
                if enc.spec.is_discrete:
                    xq[k] = (enc.boundaries[codes[i, k]] + enc.boundaries[codes[i, k] + 1]) / 2
            hbar = (z[train, :d] - client.loc[:d]) / client.scale[:d]
            xbar = (xq - client.loc[:d]) / client.scale[:d]
            dist = np.sqrt(((hbar - xbar) ** 2).sum(axis=1))
            order = np.argsort(dist, kind="stable")
            phi = ndtr((grid[None, :] - z[train, j][:, None]) / client.wz[train, j][:, None])
            for ci, cand in enumerate(candidates):
                r0 = client.kernel.budget_for(d) * cand.reach
                c = int(math.floor(r0 * (len(train) / n_total) ** (4 / (d + 4)) + 0.5))
                c = min(max(c, 2), len(train))
                near = order[:c]
                u = (hbar[near] - xbar) / (client.kernel.eta * dist[order[c - 1]])
                w = np.prod(np.clip(1 - u**2, 0, None), axis=1)
                for k in range(d):
                    enc = client.encoders[k]
                    if enc.spec.kind == "ordinal":
                        gap = np.abs(codes[train[near], k] - codes[i, k])
                        w = w * np.exp(-cand.sharpness * client.kernel.ordinal_penalty * gap)
                design = np.column_stack([np.ones(c), z[train[near], :d] - xq])
                sw = np.sqrt(w)[:, None]
                beta, *_ = np.linalg.lstsq(sw * design, sw * phi[near], rcond=None)
                f = np.clip(beta[0], 0, 1)
                f = IsotonicRegression().fit_transform(np.arange(grid.size), f)
                f = f / f[-1]
                fine = np.sort(np.concatenate([np.linspace(grid[0], grid[-1], 20001), grid]))
                g = np.interp(fine, grid, f) - (fine >= z[i, j])
                totals[ci] += trapezoid(g**2, fine)
    return totals


def test_score_sums_equal_an_independent_pooled_computation():
    tables = _planted("flip", 5, sites=3, rows=150)
    rng = np.random.default_rng(9)
    for t in tables:
        t.insert(0, "x", rng.normal(size=len(t)))
    kernel = KNNKernel(budget=60)
    clients, coordinator = _coordinator(
        tables, kernel, SitePolicy.unrestricted(), ridge=0.0, collinearity=0.0
    )
    candidates = [Smoothing(1, 1), Smoothing(4, 1), Smoothing(1, 2), Smoothing(2, 0.5)]
    coordinator.tune(11, candidates=candidates, columns=["y"], rows=200)
    got = np.array(coordinator.tuning["y"]["scores"])
    assert coordinator.tuning["y"]["rows"] == sum(math.ceil(200 * 150 / 450) for _ in tables)
    want = _pooled_scores(clients, 11, candidates, 200)
    np.testing.assert_allclose(got, want, rtol=1e-5)  # the reference integrates on 20,001 points


def test_tuning_is_deterministic_for_a_seed_and_moves_with_it():
    def run(seed):
        _, coordinator = _coordinator(_planted("flip", 4, rows=200))
        coordinator.tune(seed, candidates=[SMOOTH, SHARP, Smoothing(1, 2)])
        return coordinator.tuning

    first, again, other = run(5), run(5), run(6)
    assert first == again
    assert first["y"]["scores"] != other["y"]["scores"]


def test_secure_aggregation_gives_the_plain_sums():
    tables = _planted("flip", 4, sites=3, rows=150)
    results = []
    for secure in (False, True):
        _, coordinator = _coordinator(tables, secure=secure)
        coordinator.tune(2, candidates=[SMOOTH, SHARP])
        results.append(coordinator.tuning["y"])
    assert results[0]["chosen"] == results[1]["chosen"]
    np.testing.assert_allclose(results[0]["scores"], results[1]["scores"], rtol=1e-12)


def test_synthesizer_auto_records_the_choice_and_reconnects_without_tuning(tmp_path):
    tables = _planted("flip", 6, rows=300)
    kinds = {"o": "ordinal"}
    synth = FITSSynthesizer(seed=3, kinds=kinds, smoothing="auto").fit(tables)
    record = synth.tuning_["y"]
    assert synth.smoothing_["y"] == Smoothing.from_value(record["candidates"][record["chosen"]])
    assert synth.smoothing_["y"].sharpness > 1  # the flipping effect
    path = synth.save(tmp_path / "s.pkl")
    first = synth.sample(200)
    again = FITSSynthesizer.load(path).connect(tables)
    pd.testing.assert_frame_equal(again.sample(200), first)
    assert not any(e["type"] == "tune" for c in again.coordinator.transport._clients
                   for e in c.audit_trail)  # fmt: skip
    fixed = FITSSynthesizer(seed=3, kinds=kinds).fit(tables)
    assert fixed.smoothing_ == {} and fixed.tuning_ == {}
    by_hand = FITSSynthesizer(seed=3, kinds=kinds, smoothing={"y": synth.smoothing_["y"]})
    pd.testing.assert_frame_equal(by_hand.fit(tables).sample(200), first)
    assert not fixed.sample(200).equals(first)


def test_bad_smoothing_is_named():
    tables = _planted("flip", 6, rows=100)
    with pytest.raises(ValueError, match="smoothing must be"):
        FITSSynthesizer(smoothing="sharp").fit(tables)
    with pytest.raises(ValueError, match="sharpness"):
        FITSSynthesizer(smoothing={"y": {"sharpness": -1}}).fit(tables)
    with pytest.raises(ValueError, match="not in the schema"):
        FITSSynthesizer(smoothing={"nope": {"sharpness": 2}}).fit(tables)


def test_site_policy_limits_tuning():
    tables = _planted("flip", 7, rows=100)
    _, coordinator = _coordinator(tables, policy=SitePolicy(tuning_candidates=0))
    with pytest.raises(PolicyError, match="tuning_candidates"):
        coordinator.tune(1, candidates=[SMOOTH])
    _, coordinator = _coordinator(tables, policy=SitePolicy(tuning_candidates=3))
    coordinator.tune(1, candidates=[SMOOTH, SHARP])
    with pytest.raises(PolicyError, match="2 of its 3"):
        coordinator.tune(2, candidates=[SMOOTH, SHARP])
    # a site that would score fewer rows than its effective-rows floor abstains
    _, coordinator = _coordinator(tables, policy=SitePolicy(min_effective_rows=50))
    coordinator.tune(1, candidates=[SMOOTH, SHARP], rows=40)
    assert coordinator.abstained == 2 and coordinator.tuning["y"]["rows"] == 0
    assert coordinator.smoothing["y"] == SMOOTH


def test_tune_reply_is_checked():
    request = Message(
        "tune", config={"columns": '["y"]', "candidates": "[[1, 1], [3, 1]]", "column": "*"}
    )
    good = Message("tune", {"scores": np.zeros((1, 2)), "rows": np.zeros(1)})
    check_reply(request, good)
    with pytest.raises(ProtocolError):
        check_reply(request, Message("tune", {"scores": np.zeros((1, 3)), "rows": np.zeros(1)}))


def test_smoothed_kernel_scales_rates_and_reach():
    kernel = KNNKernel(budget=200, ordinal_penalty=1.5, nominal_penalty=0.1)
    out = smoothed_kernel(
        kernel, Smoothing(2.0, 0.5), {"o": "ordinal", "c": "nominal"}, n_total=1000, d=3
    )
    assert out.penalty_for("o", "ordinal") == pytest.approx(3.0)
    assert out.penalty_for("c", "nominal") == pytest.approx(0.01)
    assert out.neighbors(1000, 1000, 3) == 100
    assert smoothed_kernel(kernel, Smoothing(), {}, n_total=10, d=1) is kernel


def test_crps_on_a_fine_grid_matches_the_normal_closed_form():
    grid = np.linspace(-12, 12, 20001)
    y = np.array([-1.3, 0.0, 0.4, 2.5])
    mu, sigma = 0.2, 1.7
    cdf = np.broadcast_to(norm.cdf(grid, mu, sigma), (len(y), grid.size))
    w = (y - mu) / sigma
    exact = sigma * (w * (2 * norm.cdf(w) - 1) + 2 * norm.pdf(w) - 1 / np.sqrt(np.pi))
    np.testing.assert_allclose(crps_on_grid(cdf, grid, y), exact, atol=1e-7)
    # exact for a piecewise-linear F, also for y beyond the grid: F rises linearly from 0
    # at -1 to 1 at 0.3 (each of int F^2 and int (1 - F)^2 over the ramp is 1.3 / 3)
    coarse = np.array([-1.0, 0.3, 2.0])
    ramp = np.array([[0.0, 1.0, 1.0]] * 4)
    ys = np.array([-3.0, 0.3, 1.1, 5.0])
    r = 1.3 / 3
    want = [2.0 + r, r, r + 0.8, r + 4.7]  # + |y - (-1)| below the grid, + |y - 0.3| above
    np.testing.assert_allclose(crps_on_grid(ramp, coarse, ys), want, atol=1e-12)


def test_smoothing_request_reaches_the_sites_kernel():
    tables = _planted("flip", 8, rows=200)
    clients, coordinator = _coordinator(tables)
    x = np.array([[4.0], [5.0]])
    plain = coordinator.conditional_cdf("y", x)
    coordinator.smoothing = {"y": SHARP}
    sharp = coordinator.conditional_cdf("y", x)
    assert not np.allclose(plain, sharp)
    # level 4 is even: y near 0; the sharp kernel puts less mass near 2 than the plain
    middle = np.searchsorted(coordinator.grids["y"], 1.0)
    assert sharp[0, middle] > plain[0, middle]


def test_a_gaussian_site_scores_a_bounded_number_of_rows(monkeypatch):
    import fits.federation.client as client_module

    monkeypatch.setattr(client_module, "GAUSSIAN_PAIRS", 4096)
    tables = _planted("smooth", 3, sites=1, rows=600)
    _, coordinator = _coordinator(tables, "gaussian")
    coordinator.tune(1, candidates=[SMOOTH], rows=4000)
    assert coordinator.tuning["y"]["rows"] == 4096 // 600
    _, coordinator = _coordinator(tables, "knn")
    coordinator.tune(1, candidates=[SMOOTH], rows=4000)
    assert coordinator.tuning["y"]["rows"] == 600  # a KNN site: its whole share


def test_tuning_follows_the_coordinators_design():
    tables = _planted("flip", 1)
    clients, coordinator = _coordinator(tables, design="continuous")
    coordinator.tune(3, candidates=[SMOOTH, SHARP])
    asked = [e for e in clients[0].audit_trail if e["type"] == "tune"]
    assert len(asked) == 1
    assert coordinator.tuning["y"]["chosen"] == 1  # local constant in o: sharp still wins
    _, full = _coordinator(tables)
    full.tune(3, candidates=[SMOOTH, SHARP])
    assert coordinator.tuning["y"]["scores"] != full.tuning["y"]["scores"]
