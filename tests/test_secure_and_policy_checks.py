"""Checks the coordinator and the sites make before any statistic is asked.

1. Secure aggregation with only one site able to answer: the other sites hold fewer
   rows than their floor k and abstain from every answer, so every masked sum would be
   that one site's upload. Refused at configure (:class:`SecureAggregationError`), as
   one site is refused at once.
2. A site policy's ``max_rows``: a declaration above it is refused at configure, naming
   the limit and the fix, not by the query budget in the middle of the draw.
3. A pooled floor the sites miss together: the message says that the sites *together*
   hold too few rows, not that none holds as many.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import SchemaError, SparseColumnError
from fits.federation.client import FITSClient
from fits.federation.coordinator import Coordinator, SecureAggregationError
from fits.federation.policy import PolicyError, SitePolicy, pooled_floor_shortfall
from fits.federation.protocol import Message
from fits.federation.transport import InProcessTransport

from conftest import fits_in_process as run

POOLED = SitePolicy(floor_scope="pooled")


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "income": np.round(rng.normal(5e4, 1e4, n), 2),
            "sex": rng.choice(["M", "F"], n),
            "grade": rng.choice(["a", "b", "c"], n),
        }
    )


@pytest.fixture()
def files(tmp_path):
    """Site files a (60 rows), b (40), c (3), d and e (2 each)."""
    paths = {}
    for i, (name, n) in enumerate([("a", 60), ("b", 40), ("c", 3), ("d", 2), ("e", 2)]):
        paths[name] = tmp_path / f"{name}.csv"
        _table(n, i).to_csv(paths[name], index=False)
    return paths


def _policy(tmp_path, values: dict):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(values))
    return path


def _clean_error(res, out) -> str:
    assert res.returncode == 1, res.stderr[-2000:]
    assert "Traceback" not in res.stderr and not out.exists()
    return res.stderr.strip().splitlines()[-1]


# ---------------------------------------------------------------------------------------
# 1. secure aggregation with one site that answers
# ---------------------------------------------------------------------------------------


def _coordinator(sizes: dict[str, int], policy: SitePolicy | None = None, secure: bool = True):
    clients = [
        FITSClient(_table(n, i), name, "knn", policy=policy)
        for i, (name, n) in enumerate(sizes.items())
    ]
    transport = InProcessTransport(clients, n_jobs=1)
    asked: list[str] = []
    transport.observers.append(lambda k, m, r: asked.append(m.type))
    return Coordinator(transport, secure=secure), asked


def test_secure_aggregation_with_one_site_that_answers_is_refused_before_any_statistic():
    coord, asked = _coordinator({"a": 60, "c": 3})
    coord.setup()
    with pytest.raises(SecureAggregationError) as info:
        coord.configure(0, rows=20)
    message = str(info.value)
    assert "only 'a' (60 rows; k = 5) can" in message
    assert "'c' (3 rows; k = 5) holds fewer rows than its policy's floor" in message
    assert "would hide nothing" in message
    # the fixes: more sites, a lower floor (one at which c answers), a pooled floor, or
    # no secure aggregation
    assert "Add a site" in message and '{"min_effective_rows": 3}' in message
    assert "floor_scope" in message and "--secure-aggregation" in message
    assert info.value.rows == {"a": 60, "c": 3} and info.value.floors == {"a": 5, "c": 5}
    # nothing summed was asked after configure: no marginal, hessian, cdf, neff, tune
    assert set(asked) <= {"setup", "rules", "configure"}, asked


def test_the_refusal_reaches_the_python_api_and_names_the_sites():
    tables = {"a": _table(60, 0), "c": _table(3, 2)}
    with pytest.raises(SecureAggregationError, match=r"'c' \(3 rows; k = 5\)"):
        FITSSynthesizer(seed=0, secure_aggregation=True).fit(tables)


def test_what_still_runs_with_a_small_site_under_secure_aggregation():
    """Two sites that answer beside the small one; the small site's own floor lowered to
    its rows; a pooled floor (under which the small site takes part, masked); and no
    secure aggregation (the small site is then only noted)."""
    tables = {"a": _table(60, 0), "b": _table(40, 1), "c": _table(3, 2)}
    with pytest.warns(UserWarning, match="'c' \\(3 rows; k = 5\\)"):
        out = FITSSynthesizer(seed=0, secure_aggregation=True).fit(tables).sample(10)
    assert len(out) == 10
    two = {"a": tables["a"], "c": tables["c"]}
    lowered = {"a": SitePolicy(), "c": SitePolicy(min_effective_rows=3)}
    synth = FITSSynthesizer(seed=0, secure_aggregation=True, site_policy=lowered)
    assert len(synth.fit(two).sample(10)) == 10
    synth = FITSSynthesizer(seed=0, secure_aggregation=True, site_policy=POOLED)
    assert len(synth.fit(two).sample(10)) == 10
    with warnings.catch_warnings():  # the small site's note: test_site_policy.py checks it
        warnings.simplefilter("ignore")  # (recorded here, it was lost once in a full run)
        assert len(FITSSynthesizer(seed=0).fit(two).sample(10)) == 10


def test_every_site_under_its_floor_keeps_its_own_message():
    """None able to answer is the error it was (every site would abstain), not this one."""
    coord, _ = _coordinator({"c": 3, "d": 2})
    coord.setup()
    with pytest.raises(SchemaError, match="every site would abstain") as info:
        coord.configure(0)
    assert not isinstance(info.value, SecureAggregationError)


def test_synthesize_refuses_secure_aggregation_with_one_site_that_answers(files, tmp_path):
    out = tmp_path / "sc.csv"
    res = run(
        "synthesize", files["a"], files["c"], "--rows", 20, "--out", out, "--secure-aggregation"
    )
    last = _clean_error(res, out)
    assert last.startswith("error: secure aggregation needs at least two sites that answer")
    assert "'a' (60 rows; k = 5)" in last and "'c' (3 rows; k = 5)" in last
    assert "min_effective_rows" in last and "leave out --secure-aggregation" in last
    # the pooled floor it names as a fix does run
    res = run(
        "synthesize", files["a"], files["c"], "--rows", 20, "--out", out, "-q",
        "--secure-aggregation", "--policy", _policy(tmp_path, {"floor_scope": "pooled"}),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert len(pd.read_csv(out)) == 20


# ---------------------------------------------------------------------------------------
# 2. max_rows: refused at configure
# ---------------------------------------------------------------------------------------


def test_a_declaration_above_max_rows_is_refused_at_configure(tmp_path):
    audit = tmp_path / "audit.jsonl"
    clients = [
        FITSClient(_table(60, 0), "a", "knn", policy=SitePolicy(max_rows=10), audit=audit),
        FITSClient(_table(40, 1), "b", "knn"),
    ]
    transport = InProcessTransport(clients, n_jobs=1)
    asked: list[str] = []
    transport.observers.append(lambda k, m, r: asked.append(m.type))
    coord = Coordinator(transport)
    coord.setup()
    with pytest.raises(PolicyError, match="a refused the configuration") as info:
        coord.configure(0, rows=2000)
    message = str(info.value)
    assert "declared 2000 synthetic rows" in message and "max_rows = 10" in message
    assert "at most 10 rows" in message and "--rows 10" in message  # the fixes
    assert '{"max_rows": 2000}' in message
    assert set(asked) <= {"setup", "rules", "configure"}, asked  # before any query
    entry = json.loads(audit.read_text().splitlines()[-1])
    assert entry["type"] == "configure" and entry["outcome"] == "refused"
    coord.configure(0, rows=10)  # at the limit: accepted
    assert clients[0].rows_declared == 10


def test_max_rows_through_the_synthesizer():
    tables = {"a": _table(60, 0), "b": _table(40, 1)}
    policy = SitePolicy(max_rows=10)
    with pytest.raises(PolicyError, match=r"declared 2000 synthetic rows.*max_rows = 10"):
        FITSSynthesizer(seed=0, site_policy=policy).fit(tables, rows=2000)  # fit's configure
    synth = FITSSynthesizer(seed=0, site_policy=policy).fit(tables)
    with pytest.raises(PolicyError, match="refused the configuration") as info:
        synth.sample(2000)  # declared before the draw
    assert "declared rows + extra_queries" not in str(info.value)
    assert len(synth.sample(10)) == 10
    with pytest.raises(PolicyError, match=r"declared 11 synthetic rows for this run"):
        synth.sample(1)  # max_rows is for the run: the rows drawn already count


def test_the_query_budget_names_what_it_counts():
    site = FITSClient(_table(60, 0), "a", "knn", policy=SitePolicy(max_rows=10))
    coord = Coordinator(InProcessTransport([site], n_jobs=1))
    coord.setup()
    coord.configure(0, rows=10)
    queries = np.full((1031, 3), 1.0)
    base = {"column": "income", "request": "q", "scheme": "own"}
    with pytest.raises(PolicyError, match=r"queries_per_row=3 x 10 declared rows \+") as info:
        site.handle(Message("hessian", {"queries": queries}, base))
    assert "max_rows" not in str(info.value)  # 10 were declared: no cap to name
    site.rows_declared = 2000  # a base above max_rows (no configure accepts one)
    with pytest.raises(PolicyError, match=r"x max_rows=10 \(of 2000 declared rows\) \+"):
        site.handle(Message("hessian", {"queries": queries}, base))


def test_synthesize_with_rows_above_max_rows(files, tmp_path):
    out = tmp_path / "o2.csv"
    policy = _policy(tmp_path, {"max_rows": 10})
    args = ["synthesize", files["a"], files["b"], "--out", out, "--policy", policy, "--quiet"]
    last = _clean_error(run(*args, "--rows", 2000), out)
    assert "refused the configuration" in last and "declared 2000 synthetic rows" in last
    assert "max_rows = 10" in last and "--rows 10" in last
    assert "declared rows + extra_queries" not in last
    res = run(*args, "--rows", 10)
    assert res.returncode == 0, res.stderr
    assert len(pd.read_csv(out)) == 10


# ---------------------------------------------------------------------------------------
# 3. a pooled floor the sites miss together
# ---------------------------------------------------------------------------------------


def test_a_pooled_floor_missed_together_says_together():
    tables = {"d": _table(2, 3), "e": _table(2, 4)}
    synth = FITSSynthesizer(seed=0, secure_aggregation=True, site_policy=POOLED)
    with pytest.raises(SchemaError, match="every site would abstain") as info:
        synth.fit(tables)
    message = str(info.value)
    assert "the sites hold d: 2, e: 2 rows" in message
    assert "the sites together hold 4 rows, fewer than the pooled floor k = 5" in message
    assert "none holds" not in message
    assert pooled_floor_shortfall(4, 5.0) in message  # one wording for every such message


def test_a_pooled_column_missed_together_says_together():
    """Enough rows in all, too few holding the column: the column's message says the
    same, counting the rows that hold a value."""
    tables = {"a": _table(6, 0), "b": _table(6, 1)}
    tables["a"].loc[1:, "income"] = np.nan  # one value
    tables["b"].loc[2:, "income"] = np.nan  # two values
    synth = FITSSynthesizer(seed=0, secure_aggregation=True, site_policy=POOLED)
    with pytest.raises(SparseColumnError) as info:
        synth.fit(tables)
    message = str(info.value)
    total = sum(info.value.present.values())  # less a point mass's rows, if one is found
    assert 0 < total < 5 and info.value.present["b"] > 0
    shortfall = pooled_floor_shortfall(total, 5.0, "rows with a value of it")
    assert f"{shortfall}, so every site would abstain" in message
    assert f"the sites together hold {total} rows with a value of it, fewer than" in message
    assert "no site holds" not in message


def test_synthesize_pooled_floor_missed_together(files, tmp_path):
    out = tmp_path / "o3.csv"
    res = run(
        "synthesize", files["d"], files["e"], "--rows", 20, "--out", out, "--quiet",
        "--secure-aggregation", "--policy", _policy(tmp_path, {"floor_scope": "pooled"}),
    )  # fmt: skip
    last = _clean_error(res, out)
    assert "the sites together hold 4 rows, fewer than the pooled floor k = 5" in last
    assert "none holds" not in last
