"""The pooled effective-rows floor (``SitePolicy(floor_scope="pooled")``): with secure
aggregation the floor holds for the sum over the sites, with one widening factor per
query chosen by the coordinator from ``neff`` rounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, GaussianKernel, KNNKernel
from fits.core.schema import SchemaError, SparseColumnError
from fits.federation.client import FITSClient, effective_rows
from fits.federation.coordinator import Coordinator
from fits.federation.policy import PolicyError, SitePolicy
from fits.federation.protocol import WIDENING_LADDER, Message, ProtocolError
from fits.federation.transport import InProcessTransport

POOLED = SitePolicy(floor_scope="pooled")


def _salaries(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "salary": np.round(np.exp(rng.normal(10.5, 0.5, n))),
            "age": rng.integers(20, 65, n).astype(float),
        }
    )


def _sites(policy: SitePolicy, kernel="knn", sizes=(60, 40, 30)) -> list[FITSClient]:
    return [
        FITSClient(_salaries(n, i), f"site {i}", kernel, policy=policy) for i, n in enumerate(sizes)
    ]


def _record(client: FITSClient) -> list:
    """The weights behind each of a client's hessian / cdf / block answers."""
    seen: list = []
    inner = client._weights_for

    def weights_for(msg):
        wts = inner(msg)
        seen.append((msg, wts))
        return wts

    client._weights_for = weights_for  # type: ignore[method-assign]
    return seen


def _sums(wts) -> tuple[np.ndarray, np.ndarray]:
    """Per query: the sum of the weights a site answered with, and of their squares."""
    total = wts.w.sum(axis=1)
    squares = np.einsum("ij,ij->i", wts.w, wts.w)
    for rows, part in wts.groups or ():
        total[rows] += part.w.sum(axis=1)
        squares[rows] += np.einsum("ij,ij->i", part.w, part.w)
    return total, squares


@pytest.mark.parametrize(("kernel", "k"), [("knn", 4.0), ("gaussian-narrow", 5.0)])
def test_every_pooled_answer_rests_on_k_rows_at_the_smallest_factor(kernel, k):
    """Summed over the sites, the weights behind every answer have n_eff >= k; the factor
    is the smallest of the ladder that gets there (one step less falls short), and where
    the floor does not bind the sites' own kernels answer (factor 1)."""
    spec = {"knn": "knn", "gaussian-narrow": GaussianKernel(0.02)}
    clients = _sites(SitePolicy(floor_scope="pooled", min_effective_rows=k), spec[kernel])
    records = [_record(c) for c in clients]
    transport = InProcessTransport(clients, n_jobs=1)
    scaled: list[bool] = []
    transport.observers.append(
        lambda i, m, r: scaled.append(m.type == "neff" and "weight_exponent" in m.arrays)
    )
    # equal grids: the marginals adaptive grids ask for would carry the made-up row count
    coord = Coordinator(transport, secure=True, adaptive_grids=False)
    coord.setup(order=["salary", "age"])
    coord.n_rows = [10**9] * 3  # each site takes M as 1000 x its rows: narrow kernels
    coord.configure(0)
    rng = np.random.default_rng(1)
    # and far-off points, where a narrow Gaussian's weights are tiny until widened: their
    # neff sums are asked again at a scale 2^e per query and factor
    far = np.geomspace(1.2e5, 1e6, 20)
    queries = np.column_stack([np.r_[rng.uniform(15_000, 90_000, 150), far]])
    cdf = coord.conditional_cdf("age", queries)
    np.testing.assert_allclose(cdf[:, -1], 1.0)
    hessians = [[(m, w) for m, w in r if m.type in ("hessian", "block")] for r in records]
    assert hessians[0]
    factors_seen: set[float] = set()
    for answers in zip(*hessians, strict=True):
        factor = answers[0][0].arrays["widen"]
        assert all(np.array_equal(m.arrays["widen"], factor) for m, _ in answers)
        factors_seen.update(factor.tolist())
        total = sum(_sums(w)[0] for _, w in answers)
        squares = sum(_sums(w)[1] for _, w in answers)
        # the answer's pooled n_eff, by its definition (scale-free: the secure 2^e cancels)
        answered = factor > 0
        pooled = total[answered] ** 2 / squares[answered]
        assert np.all(pooled >= k * (1 - 1e-9))
        # one step less would not do: recompute the sites' weights at the previous factor
        m0 = answers[0][0]
        wider = np.flatnonzero(factor > 1)
        if wider.size:
            before = np.array(
                [WIDENING_LADDER[WIDENING_LADDER.index(t) - 1] for t in factor[wider]]
            )
            s, q = np.zeros(wider.size), np.zeros(wider.size)
            for client in clients:
                x, qcodes, kern, design = client._request_kernel(m0)
                for i, (row, t) in enumerate(zip(wider, before, strict=True)):
                    w = client._weights(x[[row]], qcodes[[row]], kern, t, design).w[0]
                    s[i] += w.sum()
                    q[i] += w @ w
            assert np.all(np.divide(s**2, q, out=np.zeros_like(s), where=q > 0) < k)
    assert 1.0 in factors_seen and max(factors_seen) > 1.0  # some bind, some do not
    assert any(scaled) == (kernel == "gaussian-narrow")
    # a site alone would have widened far more: its own n_eff is below k where the sum is not
    own = [effective_rows(w.w) for _, w in hessians[2]]
    assert any(np.any(n < k) for n in own)


def test_where_the_pooled_floor_does_not_bind_the_table_is_the_papers(mixed_clients):
    """k = 2 on large sites: every query's pooled n_eff is far above k, so the output is
    the unfloored one bit for bit (both with secure aggregation)."""
    tables = {}
    for name, policy in [
        ("pooled", SitePolicy(floor_scope="pooled", min_effective_rows=2)),
        ("off", SitePolicy(min_effective_rows=0)),
    ]:
        synth = FITSSynthesizer(
            KNNKernel(budget=400), seed=3, site_policy=policy, secure_aggregation=True
        ).fit(mixed_clients)
        tables[name] = synth.sample(150)
        if name == "pooled":
            assert synth.coordinator.widened == 0 and synth.coordinator.abstained == 0
    pd.testing.assert_frame_equal(tables["pooled"], tables["off"])


def test_tiny_sites_answer_together_what_none_answers_alone():
    """Three sites of 3 rows each: under a site's own floor of 5 every site abstains; under
    the pooled floor the 9 rows together carry the run."""
    sites = [_salaries(3, i) for i in range(3)]
    with pytest.raises(SchemaError, match="every site would abstain"):  # at fit
        FITSSynthesizer("gaussian", seed=0, secure_aggregation=True).fit(sites)
    out = (
        FITSSynthesizer("gaussian", seed=0, site_policy=POOLED, secure_aggregation=True)
        .fit(sites)
        .sample(20)
    )
    assert len(out) == 20 and out.notna().all().all()


def test_a_pooled_floor_needs_secure_aggregation_and_every_site():
    with pytest.raises(ValueError, match="only under secure aggregation"):
        FITSSynthesizer("knn", seed=0, site_policy=POOLED).fit([_salaries(40, i) for i in (0, 1)])
    mixed = _sites(POOLED, sizes=(40, 40))
    mixed[1].policy = SitePolicy()
    coord = Coordinator(InProcessTransport(mixed, n_jobs=1), secure=True)
    coord.setup()
    with pytest.raises(ValueError, match=r"\['site 0'\] pool .* but \['site 1'\] do not"):
        coord.configure(0)


def _configured(policy: SitePolicy) -> tuple[FITSClient, Coordinator]:
    clients = _sites(policy, sizes=(40, 40))
    coord = Coordinator(InProcessTransport(clients, n_jobs=1), secure=True)
    coord.setup(order=["salary", "age"])
    coord.configure(0)
    return clients[0], coord


def test_a_site_refuses_what_the_pooled_floor_does_not_allow():
    site, _ = _configured(POOLED)
    queries = np.array([[40_000.0], [60_000.0]])
    base = {"column": "age", "request": "q1", "scheme": "own"}
    with pytest.raises(PolicyError, match="refused a plain hessian request"):
        site.handle(Message("hessian", {"queries": queries, "widen": np.ones(2)}, base))
    with pytest.raises(PolicyError, match="without widening factors"):
        site.handle(Message("hessian", {"queries": queries}, {**base, "secure": True}))
    for bad, says in [
        (np.array([1.0, 3.0]), r"factors such as \[3.0\]"),
        (np.array([1.0]), r"got shape \(1,\)"),
        (np.array([-1.0, 1.0]), r"factors such as \[-1.0\]"),
    ]:
        with pytest.raises(ProtocolError, match="widen needs one factor per query .*" + says):
            site.handle(
                Message("hessian", {"queries": queries, "widen": bad}, {**base, "secure": True})
            )
    with pytest.raises(ProtocolError, match="ladder must lie within"):
        site.handle(
            Message(
                "neff",
                {"queries": queries},
                {**base, "secure": True, "ladder_start": 20, "ladder_steps": 3},
            )
        )
    mine, _ = _configured(SitePolicy())
    with pytest.raises(PolicyError, match="refused a neff request"):
        mine.handle(Message("neff", {"queries": queries}, {**base, "secure": True}))


def test_neff_replies_and_the_budget_of_a_ladder():
    """A neff reply holds the sums of w and w^2 at each factor asked (masked); going up
    the ladder with the same points costs no budget, new points do."""
    site, coord = _configured(POOLED)
    queries = np.array([[40_000.0], [60_000.0], [80_000.0]])
    config = {"column": "age", "scheme": "own", "secure": True}
    first = Message("neff", {"queries": queries}, {**config, "request": "n1", "ladder_steps": 3})
    reply = site.handle(first)
    assert reply.arrays["N"].shape[-3:] == (3, 3, 2) and reply.arrays["N"].dtype == np.uint64
    used = dict(site._asked)
    assert used["neff:age"] == 3
    more = {**config, "request": "n2", "ladder_start": 3, "ladder_steps": 3}
    pending = np.array([0, 1, 1], dtype=np.uint8)
    site.handle(Message("neff", {"queries": queries, "pending": pending}, more))
    assert site._asked == used  # the same points, further up: free
    site.handle(Message("neff", {"queries": queries[:2]}, {**more, "request": "n3"}))
    assert site._asked["neff:age"] == 5  # other points: counted
    # the unmasked sums are the sites' weights summed: the same as a plain computation
    totals = coord._total(coord.transport.broadcast(first), "N")
    x, qcodes, kern, design = site._request_kernel(first)
    expected = np.zeros((3, 3, 2))
    for client in coord.transport._clients:
        for j, t in enumerate(WIDENING_LADDER[:3]):
            w = client._weights(x, qcodes, kern, t, design).w
            expected[:, j, 0] += w.sum(axis=1)
            expected[:, j, 1] += (w * w).sum(axis=1)
    np.testing.assert_allclose(totals, expected, rtol=1e-12)


def test_policy_json_floor_scope(tmp_path):
    from fits.cli.options import pooled_without_secure

    path = tmp_path / "p.json"
    path.write_text('{"floor_scope": "pooled"}')
    assert SitePolicy.from_json(path) == POOLED and POOLED.pools_floor
    # a pooled scope with the floor off pools nothing: no secure aggregation needed
    off = SitePolicy(floor_scope="pooled", min_effective_rows=0)
    assert not off.pools_floor and not SitePolicy().pools_floor
    assert pooled_without_secure(off, False) is None
    assert pooled_without_secure(None, False) is None
    assert pooled_without_secure(POOLED, True) is None
    assert "add --secure-aggregation" in str(pooled_without_secure(POOLED, False))
    synth = FITSSynthesizer("knn", seed=0, site_policy=off)  # plain run, no floor
    assert len(synth.fit([_salaries(40, i) for i in (0, 1)]).sample(10)) == 10
    path.write_text('{"floor_scope": "global"}')
    with pytest.raises(ValueError, match=r"floor_scope must be one of \('site', 'pooled'\)"):
        SitePolicy.from_json(path)
    path.write_text('{"floor_scope": 1}')
    with pytest.raises(ValueError, match="floor_scope must be a string"):
        SitePolicy.from_json(path)


def test_no_round_is_spent_on_queries_no_factor_can_answer():
    """Six rows in all: many queries reach no pooled n_eff of 5 at any factor (factor 0).
    They are not re-asked at a larger weight scale (their zeros are known), and each
    step-1 request costs at most three neff rounds (the ladder's stages)."""
    a = pd.DataFrame({"g": ["p", "q", "p"], "x": [1.0, 2.0, 1.5], "k": [1, 2, 3]})
    b = pd.DataFrame({"g": ["p", "r", "r"], "x": [3.0, 4.0, 3.5], "k": [5, 9, 7]})
    synth = FITSSynthesizer("knn", seed=0, site_policy=POOLED, secure_aggregation=True)
    synth.fit({"a": a, "b": b})
    sent: list[Message] = []
    synth.coordinator.transport.observers.append(lambda i, m, r: sent.append(m) if i == 0 else None)
    out = synth.sample(10)
    assert len(out) == 10 and synth.coordinator.abstained > 0
    step1 = [m for m in sent if m.type in ("hessian", "block")]
    assert step1 and not any("weight_exponent" in m.arrays for m in step1)
    assert any((m.arrays["widen"] == 0).any() for m in step1)
    assert sum(m.type == "neff" for m in sent) <= 3 * len(step1)


def test_a_pooled_marginal_counts_the_federations_rows_holding_the_column():
    """The marginal's floor under a pooled floor: the federation's rows that hold the
    column (the setup round's counts, sent as ``present``), not its row count M."""
    frames = [_salaries(n, i) for i, n in enumerate((40, 30))]
    frames[0].loc[2:, "salary"] = np.nan  # site 0 holds 2 salaries
    frames[1]["salary"] = np.nan
    frames[1].loc[:1, "salary"] = 50_000.0  # the federation holds 4 salaries, M = 70
    clients = [FITSClient(f, f"site {i}", policy=POOLED) for i, f in enumerate(frames)]
    coord = Coordinator(InProcessTransport(clients, n_jobs=1), secure=True)
    coord.setup(kinds={"salary": "continuous"}, order=["age", "salary"])
    # the coordinator refuses such a column at configure (the sites' counts: fewer
    # than k in all); the sites, configured by then, still abstain on their own
    with pytest.raises(SparseColumnError, match="'salary'"):
        coord.configure(0)
    request = coord._marginal_request("salary")
    assert request.config["present"] == 4
    reply = clients[0].handle(request)
    assert reply.config.get("abstained") == 1  # (its zeros travel masked)
    assert coord._marginal_request("age").config["present"] == 70
    assert not clients[0].handle(coord._marginal_request("age")).config.get("abstained")
    for bad in (1, 71):  # fewer than the site's own 2 rows of salary, or more than M
        wrong = Message("marginal", {}, {**request.config, "present": bad})
        with pytest.raises(ProtocolError, match="needs config 'present'"):
            clients[0].handle(wrong)
