"""The site policy (fits.federation.policy): a coordinator that asks too much is refused,
or the site abstains, with the reason in the reply and in the site's audit log."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, GaussianKernel, KNNKernel
from fits.federation.client import FITSClient
from fits.federation.coordinator import Coordinator
from fits.federation.policy import DEFAULT_MIN_EFFECTIVE_ROWS, PolicyError, SitePolicy
from fits.federation.protocol import Message
from fits.federation.transport import InProcessTransport


def _salaries(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "salary": np.round(np.exp(rng.normal(10.5, 0.5, n))),
            "age": rng.integers(20, 65, n).astype(float),
        }
    )


def _federation(policy: SitePolicy | None, audit=None, kernel="knn"):
    a = FITSClient(_salaries(400, 0), "site a", kernel, policy=policy, audit=audit)
    b = FITSClient(_salaries(300, 1), "site b", kernel, policy=policy)
    transport = InProcessTransport([a, b], n_jobs=1)
    seen: list[tuple[int, Message, Message]] = []
    transport.observers.append(lambda k, m, r: seen.append((k, m, r)))
    return a, transport, seen


def test_policy_defaults_limits_and_json(tmp_path):
    p = SitePolicy()
    assert (p.max_grid_size, p.min_effective_rows, p.min_response_bandwidth) == (1000, 5, 0.02)
    assert p.below_floor == "widen"
    assert p.query_budget(100) == 3 * 100 + 1000
    assert SitePolicy(max_rows=50).query_budget(100) == 3 * 50 + 1000
    assert math.isinf(SitePolicy.unrestricted().query_budget(10))
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"min_effective_rows": 20, "max_rows": None}))
    assert SitePolicy.from_json(path) == SitePolicy(min_effective_rows=20)
    path.write_text(json.dumps({"min_effective_row": 20}))
    with pytest.raises(
        ValueError, match=r"policy.json: unknown field\(s\) \['min_effective_row'\]"
    ):
        SitePolicy.from_json(path)
    path.write_text(json.dumps({"max_grid_size": 2.5}))
    with pytest.raises(ValueError, match="max_grid_size must be an integer"):
        SitePolicy.from_json(path)
    path.write_text(json.dumps({"min_effective_rows": -1}))
    with pytest.raises(ValueError, match="min_effective_rows must be >= 0"):
        SitePolicy.from_json(path)
    path.write_text(json.dumps({"below_floor": "abstain", "min_effective_rows": 3}))
    assert SitePolicy.from_json(path) == SitePolicy(min_effective_rows=3, below_floor="abstain")
    path.write_text(json.dumps({"below_floor": "shrink"}))
    with pytest.raises(ValueError, match=r"below_floor must be one of \('widen', 'abstain'\)"):
        SitePolicy.from_json(path)
    path.write_text(json.dumps({"below_floor": 1}))
    with pytest.raises(ValueError, match="below_floor must be a string"):
        SitePolicy.from_json(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        SitePolicy.from_json(path)
    assert SitePolicy.from_dict(SitePolicy.unrestricted().to_dict()) == SitePolicy.unrestricted()


def test_policy_file_with_a_field_twice_or_a_byte_order_mark(tmp_path):
    """JSON keeps the last of two equal keys: {"min_effective_rows": 5,
    "min_effective_rows": 0} would turn the floor off unseen, so it is refused; a
    UTF-8 byte-order mark (some editors write one) is read as no character; bytes that
    are not UTF-8 are an error naming the file."""
    path = tmp_path / "policy.json"
    path.write_text('{"min_effective_rows": 5, "max_rows": 9, "min_effective_rows": 0}')
    with pytest.raises(
        ValueError, match=r"policy.json: the site policy names field\(s\) \['min_effective_rows'\]"
    ):
        SitePolicy.from_json(path)
    path.write_bytes(b'\xef\xbb\xbf{"min_effective_rows": 7}')
    assert SitePolicy.from_json(path) == SitePolicy(min_effective_rows=7)
    path.write_bytes(b'\xff\xfe{"min_effective_rows": 7}')
    with pytest.raises(ValueError, match="policy.json: the site policy is not valid JSON"):
        SitePolicy.from_json(path)


def test_grid_and_bandwidth_attack_is_refused_then_blunted(tmp_path):
    """The issue's attack: a 20,000-point grid and a response bandwidth of 1e-7 sd
    read every salary back from one marginal request."""
    salaries = _salaries(400, 0)["salary"].to_numpy()

    def cells_read(policy):
        site, transport, seen = _federation(policy, audit=tmp_path / "audit.jsonl")
        # the attack's one marginal request, on its grid (no adaptive grid's requests)
        coord = Coordinator(
            transport, response_bandwidth=1e-7, grid_size=1000, adaptive_grids=False
        )
        coord.setup(order=["salary", "age"])
        coord.configure(0)
        coord.marginal_cdf("salary")
        (f,) = [r.arrays["F"] for k, m, r in seen if k == 0 and m.type == "marginal"]
        grid = coord.grids["salary"]
        counts = np.bincount(np.searchsorted(grid, salaries), minlength=grid.size)
        steps = np.diff(f, prepend=0.0)  # rows per grid cell, smoothed by the bandwidth
        return np.mean(np.abs(steps - counts)[counts > 0] < 0.05), coord

    # without a policy the site answers and every occupied cell's count is read exactly
    exposed, _ = cells_read(SitePolicy.unrestricted())
    assert exposed == 1.0
    # with the default policy: the huge grid is refused, with the reason ...
    site, transport, _ = _federation(None, audit=tmp_path / "refused.jsonl")
    coord = Coordinator(transport, response_bandwidth=1e-7, grid_size=20000)
    coord.setup(order=["salary", "age"])
    with pytest.raises(PolicyError, match=r"site a refused the configuration: grid.*20000.*1000"):
        coord.configure(0)
    setup, *rules, refused = map(json.loads, (tmp_path / "refused.jsonl").read_text().splitlines())
    assert setup["type"] == "setup" and setup["outcome"] == "answered"
    # between them only the rule-detection stages (the near-linear moments of the pair)
    assert all(e["type"] == "rules" and e["outcome"] == "answered" for e in rules)
    entry = refused
    assert entry["type"] == "configure" and entry["outcome"] == "refused"
    assert "max_grid_size" in entry["reason"]
    # ... and on an allowed grid the bandwidth is raised to the site's floor, said so in
    # the reply and the log: the cells' counts are no longer read off
    blunted, coord = cells_read(None)
    assert blunted < 0.1
    assert coord.site_policies[0]["response_bandwidth"] == 0.02
    assert "raised to the site's floor" in coord.site_policies[0]["adjusted"][0]
    configure = [
        json.loads(x)
        for x in (tmp_path / "audit.jsonl").read_text().splitlines()
        if json.loads(x)["type"] == "configure"
    ][-1]
    assert configure["policy"]["adjusted"] == coord.site_policies[0]["adjusted"]


def test_a_lie_about_the_federation_size(tmp_path):
    site, transport, seen = _federation(None, audit=tmp_path / "a.jsonl")
    coord = Coordinator(transport)
    coord.setup(order=["salary", "age"])
    coord.n_rows = [100, 100]  # M = 200: fewer than site a's own 400 rows
    with pytest.raises(PolicyError, match="M=200 rows, fewer than this site's own 400"):
        coord.configure(0)
    # a huge M would make c_k = 2 neighbours (eq. 12): the site takes M as 1000 x its rows,
    # and a KNN site then has too few effective rows behind every answer: it widens its
    # own kernel until n_eff >= k (the default, below_floor="widen")
    coord.n_rows = [10**9, 10**9]
    coord.configure(0)
    assert site.n_total == 400_000
    assert "M=2000000000 taken as 400000" in coord.site_policies[0]["adjusted"][0]
    queries = np.column_stack([np.linspace(30_000, 60_000, 20)])
    coord.conditional_cdf("age", queries)
    hessians = [r for k, m, r in seen if k == 0 and m.type == "hessian"]
    assert hessians[0].config == {"widened": 20}  # said so in the reply ...
    logged = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    first = next(e for e in logged if e["type"] == "hessian")
    assert first["outcome"] == "answered with widened kernels"
    assert first["widened"] == list(range(20))  # ... and in the log, query by query
    assert all(t >= 2**0.5 for t in first["widening"]) and len(first["widening"]) == 20
    assert f"fewer than k={DEFAULT_MIN_EFFECTIVE_ROWS:g} effective rows" in first["reason"]
    assert coord.widened == 40 and coord.abstained == 0  # both sites, every query, step 1
    # with below_floor="abstain" the site answers nothing instead, and says so
    site, transport, seen = _federation(SitePolicy(below_floor="abstain"), tmp_path / "b.jsonl")
    coord = Coordinator(transport)
    coord.setup(order=["salary", "age"])
    coord.n_rows = [10**9, 10**9]
    coord.configure(0)
    coord.conditional_cdf("age", queries)
    hessians = [r for k, m, r in seen if k == 0 and m.type == "hessian"]
    assert hessians[0].config == {"abstained": 20}
    logged = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    first = next(e for e in logged if e["type"] == "hessian")
    assert first["abstained"] == list(range(20)) and "widened" not in first
    assert first["outcome"] == "answered with abstentions"
    assert coord.abstained >= 40 and coord.widened == 0  # both sites, for every query
    # the coordinator's fallbacks still give a proper CDF for every query (the marginal)
    out = coord.conditional_cdf("age", queries)
    np.testing.assert_allclose(out[:, -1], 1.0)


def _recording(client: FITSClient) -> list:
    """Record the weights behind every answer of a client: (main weights, groups)."""
    seen: list = []
    inner = client._weights_for

    def weights_for(msg):
        wts = inner(msg)
        seen.append(wts)
        return wts

    client._weights_for = weights_for  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("kernel", ["knn", "gaussian", "gaussian-narrow"])
@pytest.mark.parametrize("k", [2.0, 10.0])
def test_no_answer_rests_on_fewer_than_k_rows(kernel, k, tmp_path):
    """A coordinator double that shrinks every kernel (a lie about M, the site's own tiny
    bandwidth): every answer a site gives rests on n_eff >= k, widened where needed."""
    from fits.federation.client import effective_rows

    spec = {"knn": "knn", "gaussian": "gaussian", "gaussian-narrow": GaussianKernel(1e-3)}
    policy = SitePolicy(min_effective_rows=k)
    site, transport, seen = _federation(policy, tmp_path / "a.jsonl", spec[kernel])
    weights = [w for client in transport._clients for w in [_recording(client)]]
    coord = Coordinator(transport)
    coord.setup(order=["salary", "age"])
    coord.n_rows = [10**9, 10**9]  # the site takes M as 1000 x its rows
    coord.configure(0)
    rng = np.random.default_rng(0)
    queries = np.column_stack([rng.uniform(20_000, 80_000, 200)])
    coord.conditional_cdf("age", queries)
    assert coord.widened > 0
    widened = 0
    for wts in weights[0] + weights[1]:
        for w in [wts.w, *(part.w for _, part in wts.groups or ())]:
            n_eff = effective_rows(w)
            assert np.all((n_eff >= k) | (w.max(axis=1) == 0))  # answered, or nothing
        widened += 0 if wts.widened is None else wts.widened.size
    assert widened > 0
    # the reply counts match the log, query for query
    logged = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    counted = sum(len(e.get("widened", [])) for e in logged if e["type"] == "hessian")
    replied = sum(r.config.get("widened", 0) for i, m, r in seen if i == 0 and m.type == "hessian")
    assert counted == replied
    assert sum(r.config.get("widened", 0) for i, m, r in seen if m.type == "hessian") > 0


def test_widening_changes_nothing_where_the_floor_does_not_bind(mixed_clients):
    """Where every site has k effective rows behind every query, the default policy's
    output is the paper's (no floor) bit for bit."""
    big = [pd.concat([c] * 3, ignore_index=True) for c in mixed_clients[:2]]
    tables = {}
    for name, policy in [("default", SitePolicy(min_effective_rows=2)), ("off", None)]:
        synth = FITSSynthesizer(
            KNNKernel(budget=400),
            seed=3,
            site_policy=policy if policy is not None else SitePolicy(min_effective_rows=0),
        ).fit(big)
        tables[name] = synth.sample(200)
        if name == "default":
            assert synth.coordinator.widened == 0 and synth.coordinator.abstained == 0
    pd.testing.assert_frame_equal(tables["default"], tables["off"])


class _Greedy(Coordinator):
    """A coordinator double that asks for points without declaring the rows."""

    def _ask(self, columns, n):
        pass


def test_too_many_queries_are_refused(tmp_path):
    site, transport, _ = _federation(None, audit=tmp_path / "a.jsonl")
    coord = _Greedy(transport, batch_size=600, deduplicate=False)  # asks every copy
    coord.setup(order=["salary", "age"])
    coord.configure(0, rows=100)  # budget: 3 x 100 + 1000 = 1300 points per column
    queries = np.full((1200, 1), 45_000.0)
    coord.conditional_cdf("age", queries[:600])
    coord.conditional_cdf("age", queries[:600])
    with pytest.raises(PolicyError, match=r"1200 of its 1300 per column are spent"):
        coord.conditional_cdf("age", queries[:600])
    entry = json.loads((tmp_path / "a.jsonl").read_text().splitlines()[-1])
    assert entry["outcome"] == "refused" and entry["queries"] == 600
    assert "queries_per_row=3 x 100 declared rows" in entry["reason"]
    # a site's limit on declarations holds whatever the coordinator declares
    assert SitePolicy(max_rows=10).query_budget(10**9) == 1030


def test_honest_runs_stay_within_the_budget_and_declare_as_they_go(mixed_clients):
    synth = FITSSynthesizer(["knn", "gaussian", "knn"], seed=0).fit(mixed_clients)
    coord = synth.coordinator
    assert coord.declared_rows == 0
    synth.sample(300)
    assert coord.declared_rows == 300
    synth.sample(200)  # the budget grows with what is sampled
    assert coord.declared_rows == 500
    for client in coord.transport._clients:
        budget = client.policy.query_budget(client.rows_declared)
        assert budget == 3 * 500 + 1000
        assert max(client.policy_state()["asked"].values()) <= budget
    # drawing in chunks declares the total once, not once per chunk
    rounds: list[str] = []
    coord.transport.observers.append(lambda k, m, r: rounds.append(m.type))
    chunks = list(synth.iter_sample(250, chunk_rows=50))
    assert len(chunks) == 5 and coord.declared_rows == 750
    assert rounds.count("configure") == len(mixed_clients)  # one round, every site
    # the same seed gives the same table: declaring does not touch the sites' lifting
    again = FITSSynthesizer(["knn", "gaussian", "knn"], seed=0).fit(mixed_clients)
    pd.testing.assert_frame_equal(
        again.sample(300),
        FITSSynthesizer(["knn", "gaussian", "knn"], seed=0).fit(mixed_clients).sample(300),
    )


def test_effective_rows_floor_abstains_and_fallbacks_cover(mixed_clients, tmp_path):
    """A site with few rows near a query abstains (below_floor="abstain", or a k above
    its rows, which no widening reaches); the table is still drawn."""
    for policy in [
        SitePolicy(min_effective_rows=50, below_floor="abstain"),
        SitePolicy(min_effective_rows=101),  # client 3 holds 100 rows
    ]:
        log: list[dict] = []
        synth = FITSSynthesizer(
            KNNKernel(budget=60),
            seed=1,
            site_policy={"client 3": policy},
            site_audit={"client 3": log.append},
        ).fit(mixed_clients)
        table = synth.sample(200)
        assert len(table) == 200 and table.notna().all().all()
        assert synth.coordinator.abstained > 0
        abstentions = [e for e in log if e.get("abstained")]
        assert abstentions
        assert all(e["outcome"] == "answered with abstentions" for e in abstentions)
        assert not any(e.get("widened") for e in log)
    # the other sites use the default policy: their audit trails say what they answered
    first = synth.coordinator.transport._clients[0]
    assert {e["type"] for e in first.audit_trail} >= {"setup", "configure", "hessian", "cdf"}
    assert all(e["site"] == "client 1" for e in first.audit_trail)
    # no site answers the marginal of a column from fewer than k rows
    tiny = FITSClient(mixed_clients[2].iloc[:4], "tiny", "gaussian")  # 4 rows < k
    big = FITSClient(mixed_clients[0], "big", "gaussian")
    coord = Coordinator(InProcessTransport([tiny, big], n_jobs=1), adaptive_grids=False)
    coord.setup()
    coord.configure(0)
    coord.marginal_cdf("x")
    assert coord.abstained == 1
    assert tiny.audit_trail[-1]["abstained"] == [0]


def test_site_policy_per_site_is_checked(mixed_clients):
    with pytest.raises(ValueError, match=r"site policies given for unknown sites \['nope'\]"):
        FITSSynthesizer(site_policy={"nope": SitePolicy()}).fit(mixed_clients)
    with pytest.raises(TypeError, match="policy must be a SitePolicy"):
        FITSClient(mixed_clients[0], "a", policy={"max_grid_size": 10})


def test_a_malformed_request_is_logged_as_failed(tmp_path):
    site, transport, _ = _federation(None, audit=tmp_path / "a.jsonl")
    coord = Coordinator(transport)
    coord.setup(order=["salary", "age"])
    coord.configure(0)
    bad = Message("hessian", {"queries": np.zeros((3, 2))}, {"column": "age", "request": "r"})
    with pytest.raises(Exception, match="need 1 columns, got shape"):
        site.handle(bad)
    entry = json.loads((tmp_path / "a.jsonl").read_text().splitlines()[-1])
    assert entry["outcome"] == "failed" and entry["arrays"] == {"queries": [[3, 2], "float64"]}
    assert "need 1 columns" in entry["reason"]


def test_a_site_below_its_floor_is_named_not_dropped_silently():
    """A site of 3 rows under the default floor k = 5 abstains from every answer; the
    run went on without a word (its category and range gone from the output). It is
    named in a DataNote with the fix, once."""
    from fits import DataNote

    rng = np.random.default_rng(0)
    tables = [
        pd.DataFrame({"x": rng.normal(size=n), "k": rng.integers(0, 3, n)}) for n in (300, 200, 3)
    ]
    with pytest.warns(DataNote) as caught:
        FITSSynthesizer(seed=0).fit(tables).sample(20)
    notes = [str(w.message) for w in caught if "hold fewer rows than" in str(w.message)]
    assert len(notes) == 1 and "'client 3' (3 rows; k = 5)" in notes[0]
    assert "min_effective_rows" in notes[0]
