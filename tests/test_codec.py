"""Bytes on the wire: real message sizes, the upload precisions' error bounds, the
one-round mode and the deduplication of query points."""

from __future__ import annotations

import numpy as np
import pytest

from fits import FITSSynthesizer, Message, ProtocolError
from fits.federation.codec import (
    CDF_BOUND,
    HESSIAN_BOUND,
    decode_block,
    decode_cdf,
    decode_hessian,
    encode_block,
    encode_cdf,
    encode_hessian,
)
from fits.federation.policy import SitePolicy
from fits.federation.protocol import check_reply

OPEN = SitePolicy.unrestricted()


def _psd_batch(rng, b, p, scales):
    """b random PSD matrices (sums of weighted outer products), covariates on ``scales``."""
    u = np.concatenate([np.ones((b, 40, 1)), rng.normal(size=(b, 40, p - 1)) * scales], axis=2)
    w = rng.random((b, 40)) * np.exp(rng.normal(scale=30, size=(b, 1)))  # tiny to huge
    s = np.einsum("bi,bij,bik->bjk", w, u, u)
    iu = np.triu_indices(p)
    return s, s[:, iu[0], iu[1]]


def _record(synth):
    log = []
    synth.coordinator.transport.observers.append(lambda k, req, rep: log.append((k, req, rep)))
    return log


# ---------------------------------------------------------------------- wire size
def test_nbytes_is_the_length_of_the_serialized_message():
    rng = np.random.default_rng(0)
    messages = [
        Message("setup"),
        Message("hessian", {"queries": rng.normal(size=(7, 3))}, {"column": "y", "secure": True}),
        Message(
            "cdf",
            {"F_fixed": np.arange(12, dtype=np.int16).reshape(3, 4), "F_scale": np.ones(3, "f4")},
            {"abstained": 2, "note": "é", "x": 0.25, "big": 2**70, "n": np.int64(5)},
        ),
        Message("block", {"T": np.zeros((0, 3, 5)), "k": np.zeros(32, np.uint8)}),
    ]
    for m in messages:
        data = m.to_bytes()
        assert m.nbytes() == len(data)
        back = Message.from_bytes(data)
        assert back.type == m.type and set(back.arrays) == set(m.arrays)
        for name, a in m.arrays.items():
            assert back.arrays[name].dtype == a.dtype
            np.testing.assert_array_equal(back.arrays[name], a)
        assert {k: (str(v) if k == "big" else v) for k, v in m.config.items()} == back.config
    with pytest.raises(ProtocolError, match="magic"):
        Message.from_bytes(b"nope")


@pytest.mark.parametrize("precision", ["float64", "float32", "fixed16"])
def test_transport_counts_the_serialized_size_of_every_reply(mixed_clients, precision):
    synth = FITSSynthesizer(
        "knn", seed=0, upload_precision=precision, site_policy=OPEN, grid_size=51
    ).fit(mixed_clients)
    before = list(synth.uploaded_bytes_)
    down = list(synth.coordinator.transport.downloaded_bytes)
    log = _record(synth)
    synth.sample(120)
    for k in range(len(mixed_clients)):
        sent = [(req, rep) for c, req, rep in log if c == k]
        assert synth.uploaded_bytes_[k] - before[k] == sum(len(r.to_bytes()) for _, r in sent)
        assert synth.coordinator.transport.downloaded_bytes[k] - down[k] == sum(
            len(q.to_bytes()) for q, _ in sent
        )
    kinds = {rep.type for _, _, rep in log}
    assert {"hessian", "cdf"} & kinds
    for _, _req, rep in log:
        if rep.type in ("hessian", "cdf", "block"):
            want = {"float64": "f8", "float32": "f4", "fixed16": "i2"}[precision]
            assert any(a.dtype.str.endswith(want) for a in rep.arrays.values())


def test_check_reply_holds_each_precision_to_its_arrays_and_dtypes():
    q = {"queries": np.zeros((4, 2))}
    req = Message("hessian", q, {"column": "y", "precision": "fixed16"})
    good = Message("hessian", encode_hessian(np.zeros((4, 6)), 3, "fixed16"))
    check_reply(req, good)
    with pytest.raises(ProtocolError, match="allows exactly"):
        check_reply(req, Message("hessian", {"S": np.zeros((4, 6))}))
    bad = dict(good.arrays, S_corr=good.arrays["S_corr"].astype(np.int32))
    with pytest.raises(ProtocolError, match="dtype"):
        check_reply(req, Message("hessian", bad))
    with pytest.raises(ProtocolError, match="precision"):
        check_reply(Message("hessian", q, {"precision": "int4"}), good)
    block = Message("block", q, {"column": "y", "grid_size": 5})
    check_reply(
        block, Message("block", encode_block(np.zeros((4, 6)), np.zeros((4, 3, 5)), 3, "float64"))
    )


# ---------------------------------------------------------------------- error bounds
def test_fixed16_hessian_within_its_bound_and_float32_relative():
    rng = np.random.default_rng(1)
    p = 6
    s, packed = _psd_batch(rng, 300, p, np.array([1e-3, 1.0, 1e4, 1e8, 0.5]))
    iu = np.triu_indices(p)
    diag = s[:, iu[0], iu[0]], s[:, iu[1], iu[1]]
    fixed = decode_hessian(encode_hessian(packed, p, "fixed16"), p, "fixed16")
    assert np.all(np.abs(fixed - packed) <= HESSIAN_BOUND * np.sqrt(diag[0] * diag[1]))
    single = decode_hessian(encode_hessian(packed, p, "float32"), p, "float32")
    assert np.all(np.abs(single - packed) <= 2.0**-24 * np.abs(packed) + 1e-300)
    assert np.array_equal(
        decode_hessian(encode_hessian(packed, p, "float64"), p, "float64"), packed
    )
    # the bound is tight: the correlations' rounding reaches a good part of it
    ratio = np.abs(fixed - packed) / np.sqrt(diag[0] * diag[1])
    assert ratio.max() > 0.5 / 65534


def test_fixed16_pooled_hessian_within_the_bound_of_the_pooled_diagonal():
    """Summed over sites, the decoded Hessians stay within the bound of the *pooled* S
    (Cauchy-Schwarz), so the pooled identity holds to that bound."""
    rng = np.random.default_rng(2)
    p = 4
    sites = [_psd_batch(rng, 200, p, np.array([1.0, 30.0, 1e-2]))[1] for _ in range(5)]
    exact = sum(sites)
    decoded = sum(decode_hessian(encode_hessian(s, p, "fixed16"), p, "fixed16") for s in sites)
    iu = np.triu_indices(p)
    d = np.flatnonzero(iu[0] == iu[1])
    pooled_diag = exact[:, d]
    bound = HESSIAN_BOUND * np.sqrt(pooled_diag[:, iu[0]] * pooled_diag[:, iu[1]])
    assert np.all(np.abs(decoded - exact) <= bound)


def test_fixed16_cdf_and_block_within_their_bounds():
    rng = np.random.default_rng(3)
    f = np.cumsum(rng.normal(size=(50, 30)), axis=1) * np.exp(rng.normal(size=(50, 1)))
    f[3] = 0.0
    fixed = decode_cdf(encode_cdf(f, "fixed16"), "fixed16")
    top = np.abs(f).max(axis=1, keepdims=True)
    assert np.all(np.abs(fixed - f) <= CDF_BOUND * top)
    assert np.all(fixed[3] == 0)
    single = decode_cdf(encode_cdf(f, "float32"), "float32")
    assert np.all(np.abs(single - f) <= 2.0**-24 * np.abs(f) + 1e-300)
    # response block: T_jl = sum_i w_i U_ij Phi_il, bounded by sqrt(S_00 S_jj)
    p, b, n, grid = 4, 40, 30, 9
    u = np.concatenate([np.ones((b, n, 1)), rng.normal(size=(b, n, p - 1)) * [1, 1e3, 1e-3]], 2)
    w = rng.random((b, n))
    phi = np.sort(rng.random((b, n, grid)), axis=2)
    t = np.einsum("bi,bij,bil->bjl", w, u, phi)
    s = np.einsum("bi,bij,bik->bjk", w, u, u)
    iu = np.triu_indices(p)
    arrays = encode_block(s[:, iu[0], iu[1]], t, p, "fixed16")
    _, t_hat = decode_block(arrays, p, "fixed16")
    diag = np.einsum("bjj->bj", s)
    assert np.all(np.abs(t_hat - t) <= HESSIAN_BOUND * np.sqrt(diag[:, :1] * diag)[:, :, None])


def test_site_cdf_upload_within_bound_of_its_float64_answer(mixed_clients):
    """Against the site's own float64 answer to the same request (same q)."""
    synth = FITSSynthesizer("knn", seed=0, site_policy=OPEN, upload_precision="float64")
    synth.fit(mixed_clients)
    coord = synth.coordinator
    client = coord.transport._clients[0]
    column = coord.schema.order[4]  # continuous: the full grid
    x = np.column_stack([np.full(30, 0.5), np.linspace(-2, 3, 30), np.full(30, 2.0), np.ones(30)])
    q = np.random.default_rng(0).normal(size=(30, 5)) * [1e-2, 1e-3, 1e-3, 1e-3, 1e-3]
    config = {"column": column, "request": "t1", "grid_size": coord.grids[column].size}
    exact = client.handle(Message("cdf", {"queries": x, "q": q}, config)).arrays["F"]
    reply = client.handle(
        Message("cdf", {"queries": x, "q": q}, {**config, "request": "t2", "precision": "fixed16"})
    )
    fixed = decode_cdf(reply.arrays, "fixed16")
    assert np.all(np.abs(fixed - exact) <= CDF_BOUND * np.abs(exact).max(axis=1, keepdims=True))
    assert reply.nbytes() < 0.3 * Message("cdf", {"F": exact}).nbytes()


@pytest.mark.parametrize("kernel", ["knn", "gaussian"])
def test_fixed16_estimate_close_to_the_float64_one(mixed_clients, kernel):
    out = {}
    for precision in ("float64", "fixed16"):
        synth = FITSSynthesizer(
            kernel, seed=0, site_policy=OPEN, upload_precision=precision, rounds=2
        ).fit(mixed_clients)
        coord = synth.coordinator
        column = coord.schema.order[4]
        rng = np.random.default_rng(5)
        x = np.column_stack(
            [rng.random(60), rng.normal(size=60), rng.random(60) * 3, rng.random(60) * 3]
        )
        out[precision] = coord.conditional_cdf(column, x, postprocess=False)
    # S within 1.6e-5 of its diagonal scale and F within 1.5e-5 of sum |alpha|: the
    # CDFs agree to a few 1e-5 (the solve amplifies S's error by the local conditioning)
    assert np.abs(out["fixed16"] - out["float64"]).max() < 1e-3


# ---------------------------------------------------------------------- rounds and dedup
@pytest.mark.parametrize("kernel", ["knn", "gaussian"])
@pytest.mark.parametrize(("secure", "policy"), [(False, "open"), (True, "open"), (True, "widen")])
def test_one_round_equals_two_rounds(mixed_clients, kernel, secure, policy):
    """Also where sites widen their kernels to the effective-rows floor (k = 10 here):
    the block reply uses the widened weights as the hessian and cdf replies do."""
    cdfs, masses, types, widened = {}, {}, {}, {}
    for rounds in (1, 2):
        synth = FITSSynthesizer(
            kernel,
            seed=0,
            site_policy=OPEN if policy == "open" else SitePolicy(min_effective_rows=10),
            upload_precision="float64",
            rounds=rounds,
            secure_aggregation=secure,
        ).fit(mixed_clients)
        coord = synth.coordinator
        log = _record(synth)
        rng = np.random.default_rng(7)
        x = np.column_stack([rng.random(40), rng.normal(size=40), rng.random(40) * 3])
        cdfs[rounds] = coord.conditional_cdf(coord.schema.order[3], x[:, :3], postprocess=False)
        masses[rounds] = coord.conditional_masses(coord.schema.order[3], x[:, :3])
        types[rounds] = {rep.type for _, _, rep in log} - {"configure"}
        widened[rounds] = coord.widened
    assert types[1] == {"block"} and types[2] == {"hessian", "cdf"}
    # the hessian round and the block round each count each widened answer once
    assert (widened[1] > 0) == (policy == "widen")
    assert widened[2] == widened[1]
    np.testing.assert_allclose(cdfs[1], cdfs[2], rtol=0, atol=1e-12)
    np.testing.assert_allclose(masses[1], masses[2], rtol=0, atol=1e-12)


def test_one_round_fixed16_close_to_two_rounds(mixed_clients):
    cdfs = {}
    for rounds in (1, 2):
        synth = FITSSynthesizer("knn", seed=0, site_policy=OPEN, rounds=rounds)
        coord = synth.fit(mixed_clients).coordinator
        x = np.column_stack([np.full(30, 0.7), np.linspace(-2, 3, 30), np.linspace(0, 3, 30)])
        cdfs[rounds] = coord.conditional_cdf(coord.schema.order[3], x, postprocess=False)
    assert np.abs(cdfs[1] - cdfs[2]).max() < 1e-3


def test_auto_rounds_trade_added_bytes_against_the_round_cost(mixed_clients):
    synth = FITSSynthesizer("knn", seed=0, site_policy=OPEN, batch_size=50).fit(mixed_clients)
    coord = synth.coordinator
    assert coord.round_cost_bytes == 0  # by default: two rounds, fewer bytes, except
    # where the block adds nothing (no covariate in the design: T is one row, as F)
    for c in coord.schema.order[1:]:
        assert coord.one_round(c, 50) == (coord.design_covariates(c).size == 0)
    # a link that carries 20 kB in one round's latency: one round where a batch of 50
    # adds at most that (50 queries x 3 sites x d x L x 2 bytes, d the covariates in
    # the local-linear design: the block's rows beyond the cdf reply's one)
    coord.round_cost_bytes = 20_000
    for column in coord.schema.order[1:]:
        d = len(coord.design_covariates(column))
        extra = 50 * 3 * d * coord.grids[column].size * 2
        assert coord.one_round(column, 50) == (extra <= 20_000)
    log = _record(synth)
    synth.sample(50)
    used = {(req.config["column"], req.type) for _, req, _ in log if "column" in req.config}
    for column, kind in used:
        if kind in ("block", "hessian"):
            assert (kind == "block") == coord.one_round(column, 50)
    assert {"block", "hessian"} <= {kind for _, kind in used}


@pytest.mark.parametrize("precision", ["float64", "fixed16"])
def test_deduplication_gives_the_same_table_with_fewer_bytes(mixed_clients, precision):
    tables, sent = {}, {}
    for dedup in (False, True):
        synth = FITSSynthesizer(
            "knn", seed=3, site_policy=OPEN, upload_precision=precision, deduplicate=dedup
        ).fit(mixed_clients)
        log = _record(synth)
        tables[dedup] = synth.sample(300)
        sent[dedup] = sum(
            req.arrays["queries"].shape[0]
            for k, req, _ in log
            if k == 0 and req.type != "cdf" and "queries" in req.arrays
        )
    assert tables[True].equals(tables[False])
    # the first conditional column is asked given a binary column: two distinct points
    assert sent[True] < sent[False]


def test_deduplication_on_gaussian_sites_agrees_to_rounding(mixed_clients):
    out = {}
    for dedup in (False, True):
        synth = FITSSynthesizer(
            "gaussian", seed=3, site_policy=OPEN, upload_precision="float64", deduplicate=dedup
        ).fit(mixed_clients)
        out[dedup] = synth.sample(200).select_dtypes("number").to_numpy(float)
    np.testing.assert_allclose(out[True], out[False], rtol=0, atol=1e-9)


def test_coordinator_refuses_unknown_precision_and_rounds(mixed_clients):
    with pytest.raises(ValueError, match="precision"):
        FITSSynthesizer("knn", upload_precision="float16").fit(mixed_clients)
    with pytest.raises(ValueError, match="rounds"):
        FITSSynthesizer("knn", rounds=3).fit(mixed_clients)


# ---------------------------------------------------------------------- thinned grids
def test_thin_grid_spends_points_where_the_cdf_bends_and_none_where_it_is_flat():
    from fits.core.cdf import thin_grid

    grid = np.linspace(0.0, 10.0, 301)
    cdf = np.clip((grid - 2.0) / 2.0, 0.0, 1.0)  # flat, linear ramp on [2, 4], flat
    kept = thin_grid(grid, cdf, 64)
    # a piecewise-linear CDF needs only its two kinks (and the ends): exact thereafter
    np.testing.assert_array_equal(grid[kept], [0.0, 2.0, 4.0, 10.0])
    assert np.array_equal(np.interp(grid, grid[kept], cdf[kept]), cdf)
    # a smooth CDF: the largest interpolation error falls as points are added, and the
    # kept points crowd where the density changes (not in the flat tails)
    smooth = 1.0 / (1.0 + np.exp(-(grid - 5.0) * 3.0))
    errors = []
    for n in (8, 16, 32, 64):
        k = thin_grid(grid, smooth, n, keep=(10,))
        assert k.size == n and k[0] == 0 and k[-1] == 300 and 10 in k
        assert np.all(np.diff(k) > 0)
        errors.append(np.abs(np.interp(grid, grid[k], smooth[k]) - smooth).max())
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-3
    centre = np.sum((grid[k] > 3.0) & (grid[k] < 7.0))
    assert centre > 0.5 * k.size
    assert np.array_equal(thin_grid(grid, smooth, 500), np.arange(301))


def test_thinned_grids_are_sent_to_the_sites_and_drawn_by_monotone_interpolation(
    mixed_clients,
):
    synth = FITSSynthesizer("knn", seed=0, site_policy=OPEN, grid_points=20)
    synth.fit(mixed_clients)
    coord = synth.coordinator
    default = FITSSynthesizer("knn", seed=0, site_policy=OPEN, grid_points=None)
    full = default.fit(mixed_clients).coordinator.grids
    for column in coord.schema.order:
        spec = coord.encoders[column].spec
        thinned = column != coord.schema.order[0] and not spec.is_discrete
        assert (column in coord.fine_grids) == thinned
        if thinned:  # a subset of the default grid, at most 20 points
            assert coord.grids[column].size <= 20
            assert np.isin(coord.grids[column], full[column]).all()
            for client in coord.transport._clients:
                np.testing.assert_array_equal(client.grids[column], coord.grids[column])
        else:
            np.testing.assert_array_equal(coord.grids[column], full[column])
    out = synth.sample(400)
    real = np.concatenate([t["y"].to_numpy() for t in mixed_clients])
    assert out["y"].between(real.min(), real.max()).all()
    assert abs(out["y"].mean() - real.mean()) < 0.3 * real.std()


def test_a_rounding_error_below_zero_on_the_diagonal_decodes_without_nan():
    """A Hessian diagonal is >= 0 in exact arithmetic; a site whose moments leave it a
    rounding error below 0 must not turn the fixed16 correlations into NaN."""
    p = 3
    # packed upper triangle (S00, S01, S02, S11, S12, S22): covariate 1 has no spread,
    # its row of S is 0 in exact arithmetic, and S_11 came out -1e-18
    packed = np.array([[5.0, 0.0, 2.0, -1e-18, 0.0, 4.0]])
    with np.errstate(invalid="raise"):
        back = decode_hessian(encode_hessian(packed, p, "fixed16"), p, "fixed16")
    assert np.all(np.isfinite(back))
    assert back[0, 1] == back[0, 4] == 0.0
    assert abs(back[0, 2] - 2.0) <= HESSIAN_BOUND * np.sqrt(5.0 * 4.0)
    np.testing.assert_allclose(back[0, [0, 5]], [5.0, 4.0], rtol=1e-7)


def test_a_gaussian_site_at_a_point_mass_uploads_finite_hessians():
    """A continuous covariate at a point mass (95% of rows at 0, the rest 1e6 away): a
    Gaussian site's dense Hessian, shifted from raw moments, has S_jj = 0 up to rounding
    at a query on the mass; it is kept >= 0, so no sqrt of a negative number anywhere
    (before the fix: FloatingPointError here, NaN and a fallback in a plain run)."""
    import pandas as pd

    rng = np.random.default_rng(0)
    tables = []
    for m in (400, 300, 200):
        gain = np.where(rng.random(m) < 0.95, 0.0, 1e6 + rng.normal(size=m))
        age = rng.normal(40, 10, m)
        tables.append(pd.DataFrame({"age": age, "gain": gain, "y": age + rng.normal(size=m)}))
    with np.errstate(invalid="raise"):
        synth = FITSSynthesizer("gaussian", seed=0).fit(tables)
        synth.sample(300)
    assert synth.coordinator.fallbacks == 0
