"""Boosted columns (``column_models={col: "boosting"}``, :mod:`fits.core.boosting`): the
federated histogram booster against an independent pooled implementation, the nominal
split search against brute force, the sites' floor on what they report, and the
facade's checks."""

from __future__ import annotations

import itertools
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.boosting import (
    BoostedModel,
    BoostingParams,
    ScoreCache,
    best_splits,
    bin_codes,
    coarsen,
    histograms,
    quantile_edges,
    raw_scores,
    resolve_settings,
)
from fits.federation.client import FITSClient
from fits.federation.coordinator import BOOSTING_PROGRESS, Coordinator
from fits.federation.policy import PolicyError, SitePolicy
from fits.federation.transport import InProcessTransport


def _table(n: int, seed: int, classes: int = 2) -> pd.DataFrame:
    """x1 continuous, x2 ordinal 0..5, x3 continuous; y depends on an interaction."""
    rng = np.random.default_rng(seed)
    x1, x2, x3 = rng.normal(size=n), rng.integers(0, 6, n), rng.uniform(size=n)
    score = 2.0 * x1 * (x2 >= 3) - 1.5 * (x3 > 0.6) + 0.3 * x2
    if classes == 2:
        y = np.where(rng.random(n) < 1 / (1 + np.exp(-score)), "yes", "no")
    else:
        cut = np.quantile(score, [1 / 3, 2 / 3])
        level = np.searchsorted(cut, score + rng.normal(0, 0.5, n))
        y = np.array(["a", "b", "c"])[level]
    return pd.DataFrame({"x1": x1, "x2": x2, "x3": x3, "y": y})


def _oracle_table(classes) -> tuple[pd.DataFrame, str]:
    """The oracle tests' table (900 rows) and its response's kind: ``y`` with 2 or 3
    classes, or ``"continuous"`` (a skewed response that depends on an interaction)."""
    table = _table(900, 0, 3 if classes == "continuous" else classes)
    if classes != "continuous":
        return table, "nominal"
    rng = np.random.default_rng(9)
    table["y"] = table["x1"] * (table["x2"] >= 3) + rng.gamma(2.0, 0.3 + table["x3"])
    return table, "continuous"


def _federation(tables, policy=None):
    clients = [
        FITSClient(t, f"site {i}", policy=policy or SitePolicy.unrestricted())
        for i, t in enumerate(tables)
    ]
    return clients, InProcessTransport(clients)


def _record_boosts(client):
    """Record a site's ``boost`` (request, reply) pairs: returns the list it fills and
    the site's own handler (to send it requests directly)."""
    seen: list = []
    inner = client.handle

    def handle(msg):
        reply = inner(msg)
        if msg.type == "boost":
            seen.append((msg, reply))
        return reply

    client.handle = handle
    return seen, inner


def _pooled_oracle(x_bins, y, k, params, n_bins, cumulative=False):
    """Level-wise second-order boosting on the pooled rows, every split found by direct
    sums over row masks (no histograms), ordered covariates only; ``cumulative``: k
    binomial deviances of 1{y <= c}, c = 0..k-1."""
    n = y.size
    if cumulative:
        below = np.stack([(y <= c).astype(float) for c in range(k)], axis=1)
        share = below.mean(axis=0)
        f = np.tile(np.log(share / (1 - share)), (n, 1))
    else:
        onehot = np.eye(max(k, 2))[y]
        share = onehot.sum(axis=0) / n
        f = np.tile(np.log(share[1:] / share[:1]) if k == 1 else np.log(share), (n, 1))

    def g_h(f):
        if cumulative:
            p = 1 / (1 + np.exp(-f))
            return p - below, np.maximum(p * (1 - p), 1e-16)
        if k == 1:
            p = 1 / (1 + np.exp(-f))
            return p - onehot[:, 1:], np.maximum(p * (1 - p), 1e-16)
        e = np.exp(f - f.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        return p - onehot, np.maximum(p * (1 - p), 1e-16)

    f = _grow_pooled(x_bins, f, g_h, params, n_bins)
    if cumulative:
        cdf = np.sort(1 / (1 + np.exp(-f)), axis=1)
        return np.diff(np.column_stack([np.zeros(n), cdf, np.ones(n)]), axis=1)
    if k == 1:
        p1 = 1 / (1 + np.exp(-f[:, 0]))
        return np.column_stack([1 - p1, p1])
    e = np.exp(f - f.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _grow_pooled(x_bins, f, g_h, params, n_bins):
    """The pooled oracle's trees: from raw scores ``f`` (n, K), ``params.n_trees``
    trees grown level by level on the gradients and Hessians ``g_h(f)`` gives, every
    split by direct sums over row masks; the final raw scores."""
    n = f.shape[0]
    f = f.copy()
    lam, m = params.l2, params.min_leaf_rows
    for _ in range(params.n_trees):
        g, h = g_h(f)
        node = np.zeros(n, dtype=int)
        for _level in range(params.depth):
            new = 2 * node + 1  # every row goes right unless a split sends it left
            for v in np.unique(node):
                rows = node == v
                gt, ht = g[rows].sum(0), h[rows].sum(0)
                best, chosen = 0.0, None
                for j in range(x_bins.shape[1]):
                    for t in range(n_bins[j] - 1):
                        go = rows & (x_bins[:, j] <= t)
                        cl = go.sum()
                        if cl < m or rows.sum() - cl < m:
                            continue
                        gl, hl = g[go].sum(0), h[go].sum(0)
                        gain = (
                            gl**2 / (hl + lam)
                            + (gt - gl) ** 2 / (ht - hl + lam)
                            - gt**2 / (ht + lam)
                        ).sum()
                        if gain > best + 1e-12 * abs(best):
                            best, chosen = gain, go
                if chosen is None:
                    new[rows] = 2 * v
                else:
                    new[chosen] = 2 * v
            node = new
        for leaf in np.unique(node):
            rows = node == leaf
            f[rows] += -params.learning_rate * g[rows].sum(0) / (h[rows].sum(0) + lam)
    return f


@pytest.mark.parametrize("classes", [2, 3, "continuous"])
def test_federated_booster_equals_pooled_oracle(classes):
    """Three sites, no floor: the federated model's class probabilities at every row
    equal those of an independent booster run on the pooled rows with the same bins (a
    continuous column: with the same quantile classes)."""
    table, kind = _oracle_table(classes)
    clients, transport = _federation([table.iloc[:200], table.iloc[200:500], table.iloc[500:]])
    classes_of_y = {"classes": 8} if classes == "continuous" else {}  # else no effect
    params = BoostingParams(n_trees=4, depth=3, min_leaf_rows=15, bins=16, **classes_of_y)
    coord = Coordinator(transport, column_models={"y": "boosting"}, boosting=params)
    coord.setup(kinds={"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": kind})
    coord.configure(0)
    boosts: list = []
    transport.observers.append(lambda k, msg, reply: boosts.append(k) if msg.type == "boost" else 0)
    model = coord.boosted_model("y")
    assert model.n_trees == 4 and [e.size for e in model.edges][1] == 5  # x2: 6 levels
    z = np.vstack([c.z for c in clients])
    if classes == "continuous":
        assert model.response_edges is not None and model.response_edges.size == 7
        y = np.searchsorted(model.response_edges, z[:, 3], side="left")
        k, cumulative = 7, True  # the cumulative logits of P(class <= c), c < 7
    else:
        y = np.concatenate([c.codes[:, 3] for c in clients])
        k, cumulative = (1 if classes == 2 else classes), False
    x_bins = bin_codes(z[:, :3], model.edges)
    n_bins = np.array([e.size + 1 for e in model.edges])
    expected = _pooled_oracle(x_bins, y, k, params, n_bins, cumulative)
    np.testing.assert_allclose(model.probabilities(z[:, :3]), expected, rtol=1e-9, atol=1e-12)
    # the boosting rounds are 1 + n_trees * depth, one message per site each
    assert sorted(boosts) == sorted([0, 1, 2] * (1 + 4 * 3))
    assert coord.boosted_model("y") is model  # fitted once


def test_nominal_split_is_the_best_partition():
    """For one output, scanning the categories sorted by G / (H + l2) finds the
    two-group partition of largest gain among all 2^(L-1) - 1 of them."""
    rng = np.random.default_rng(1)
    params = BoostingParams(l2=0.5, min_leaf_rows=1)
    for _ in range(20):
        levels = 6
        c = rng.integers(1, 30, levels).astype(float)
        g = rng.normal(0, 3, levels)
        h = c * rng.uniform(0.1, 0.25, levels)
        hist = np.stack([g, h, c], axis=1)[None]  # one node, one covariate
        feature, left = best_splits(hist, np.array([levels]), np.array([True]), params, levels)
        assert feature[0] == 0

        def gain(mask, g=g, h=h):
            gl, hl = g[mask].sum(), h[mask].sum()
            gt, ht = g.sum(), h.sum()
            return gl**2 / (hl + 0.5) + (gt - gl) ** 2 / (ht - hl + 0.5) - gt**2 / (ht + 0.5)

        best = max(
            gain(np.array(bits, dtype=bool))
            for bits in itertools.product([0, 1], repeat=levels)
            if 0 < sum(bits) < levels
        )
        assert gain(left[0].astype(bool)) == pytest.approx(best, rel=1e-12)


def test_coarsen_reports_no_bin_under_k():
    """Every bin a site reports holds 0 or >= k rows; per (node, covariate) the sums are
    kept; a node under k is reported as zeros."""
    rng = np.random.default_rng(2)
    codes = np.column_stack([rng.integers(0, 20, 300), rng.integers(0, 3, 300)])
    node = np.where(np.arange(300) < 297, rng.integers(0, 3, 300), 3)  # node 3: 3 rows
    g, h = rng.normal(size=(300, 1)), rng.uniform(0.1, 0.2, (300, 1))
    n_bins = np.array([20, 3])
    hist = histograms(codes, node, 4, n_bins, g, h)
    out, dropped = coarsen(hist, n_bins, 5)
    count = out[..., -1]
    assert np.all((count == 0) | (count >= 5))
    assert dropped.tolist() == [3] and np.all(out[3] == 0)
    for lo, hi in ((0, 20), (20, 23)):
        np.testing.assert_allclose(out[:3, lo:hi].sum(axis=1), hist[:3, lo:hi].sum(axis=1))
    assert np.any(hist[:3, :20, -1] % 5 != 0)  # the test data needed coarsening
    same, none = coarsen(hist, n_bins, 0)
    assert same is hist and none.size == 0


def test_sites_report_no_bin_under_their_floor():
    """Through the protocol: with k = 5 every boost reply's bins hold 0 or >= 5 rows of
    that site, and the model still fits (the sums the coordinator sees are coarser)."""
    table = _table(600, 3)
    clients, transport = _federation(
        [table.iloc[:40], table.iloc[40:300], table.iloc[300:]], SitePolicy()
    )
    replies: list = []
    for client in clients:
        inner = client.handle

        def handle(msg, inner=inner):
            reply = inner(msg)
            if msg.type == "boost":
                replies.append(reply.arrays["H"])
            return reply

        client.handle = handle  # type: ignore[method-assign]
    params = BoostingParams(n_trees=3, depth=3, bins=32)
    coord = Coordinator(transport, column_models={"y": "boosting"}, boosting=params)
    coord.setup(kinds={"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": "nominal"})
    coord.configure(0)
    coord.boosted_model("y")
    assert len(replies) == 3 * (1 + 3 * 3)
    for hist in replies:
        count = hist[..., -1]
        assert np.all((count == 0) | (count >= 5))
    assert coord.nodes_withheld > 0  # the 40-row site's deep nodes
    log = clients[0].audit_trail[-1]
    assert log["type"] == "boost" and log["outcome"].startswith("answered")
    assert log["level"] == 2 and log["depth"] == 3 and log["column"] == "y"
    withheld = [
        e for e in clients[0].audit_trail if e.get("outcome") == "answered with abstentions"
    ]
    assert withheld and all(e["type"] == "boost" for e in withheld)  # the 40-row site


@pytest.mark.slow  # 17 s; run with -m slow (CI budget)
def test_boosted_column_keeps_an_interaction():
    """On a table whose target flips with an interaction, the boosted column keeps the
    conditional shares of every cell within sampling error; the default kernel
    column is drawn as before (the option changes only that column)."""
    rng = np.random.default_rng(4)
    n = 4000
    a, b = rng.normal(size=n), rng.normal(size=n)
    prob = np.where((a > 0) ^ (b > 0), 0.9, 0.1)
    y = np.where(rng.random(n) < prob, "yes", "no")
    table = pd.DataFrame({"a": a, "b": b, "y": y})
    tables = {f"s{i}": table.iloc[i::4].reset_index(drop=True) for i in range(4)}
    synth = FITSSynthesizer(seed=0, column_models={"y": "boosting"})
    out = synth.fit(tables).sample(8000)
    inside = (out["a"].abs() > 0.3) & (out["b"].abs() > 0.3)  # away from the flips
    cell = ((out["a"] > 0) ^ (out["b"] > 0))[inside]
    share = (out["y"] == "yes")[inside].groupby(cell).mean()
    print(share)
    assert share[True] == pytest.approx(0.9, abs=0.03)
    assert share[False] == pytest.approx(0.1, abs=0.03)
    # the same seed without the option draws a and b identically
    plain = FITSSynthesizer(seed=0).fit(tables).sample(8000)
    pd.testing.assert_frame_equal(plain[["a", "b"]], out[["a", "b"]])


def test_boosted_secure_equals_plain():
    """Secure aggregation sums the histograms exactly (fixed point): the same model."""
    table = _table(500, 5)
    tables = {f"s{i}": table.iloc[i::3].reset_index(drop=True) for i in range(3)}
    kw = {"seed": 3, "column_models": {"y": "boosting"}, "boosting": {"n_trees": 5, "depth": 2}}
    plain = FITSSynthesizer(**kw, upload_precision="float64").fit(tables)
    masked = FITSSynthesizer(**kw, secure_aggregation=True).fit(tables)
    a, b = plain.sample(300), masked.sample(300)
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-7)
    assert a["y"].equals(b["y"])
    np.testing.assert_allclose(
        plain.coordinator.boosted_model("y").value, masked.coordinator.boosted_model("y").value
    )


def test_column_models_are_checked():
    table = _table(300, 6)
    tables = {"a": table.iloc[:150], "b": table.iloc[150:]}
    with pytest.raises(ValueError, match="the chain's first column.*--order"):
        FITSSynthesizer(column_models={"x1": "boosting"}).fit(tables)
    with pytest.raises(ValueError, match="not a column the chain draws"):
        FITSSynthesizer(column_models={"nope": "boosting"}).fit(tables)
    with pytest.raises(ValueError, match="must be one of"):
        FITSSynthesizer(column_models={"y": "forest"}).fit(tables)
    with pytest.raises(TypeError, match=r"column_models must be a mapping .*e\.g\. \{'income'"):
        FITSSynthesizer(column_models=["y"]).fit(tables)
    with pytest.raises(TypeError, match="column_designs must be a mapping"):
        FITSSynthesizer(column_designs="y=constant").fit(tables)
    with pytest.raises(ValueError, match="unknown setting"):
        FITSSynthesizer(column_models={"y": "boosting"}, boosting={"trees": 5}).fit(tables)
    with pytest.raises(ValueError, match="depth must be"):
        BoostingParams(depth=0)
    # a site that refuses boosting (it says so at configure) stops the fit, not a sample
    refusing = SitePolicy(boosting_trees=0)
    with pytest.raises(ValueError, match=r"refuse every boost request.*boosting_trees is 0"):
        FITSSynthesizer(column_models={"y": "boosting"}, site_policy=refusing).fit(tables)


def test_boosting_params_take_numbers_of_the_right_kind():
    """Counts are integers (numpy's too, stored as int; a bool or a float is refused),
    the rates real and finite; the mapping form gives the same errors, naming the column."""
    params = BoostingParams(n_trees=np.int64(5), learning_rate=np.float32(0.5), l2=2)
    assert params == BoostingParams(n_trees=5, learning_rate=0.5, l2=2.0)
    assert type(params.n_trees) is int and type(params.l2) is float
    for field, value, says in [
        ("n_trees", 5.0, "n_trees must be an integer, got 5.0 (float)"),
        ("depth", True, "depth must be an integer, got True (bool)"),
        ("bins", "64", "bins must be an integer"),
        ("l2", None, "l2 must be a real number, got None"),
        ("l2", float("inf"), "l2 must be finite"),
        ("learning_rate", float("nan"), "learning_rate must be finite"),
        ("learning_rate", False, "learning_rate must be a real number"),
    ]:
        with pytest.raises(ValueError, match=re.escape(says)):
            BoostingParams(**{field: value})
    with pytest.raises(
        ValueError, match=re.escape("boosting['y']: boosting depth must be an integer")
    ):
        resolve_settings({"y": {"depth": 2.5}})


def test_settings_no_site_or_column_can_take_are_refused_at_fit():
    """What would fail in the boost rounds, or be ignored, is refused (or warned about)
    at fit, before any boost round, with a message that says what to change."""
    rng = np.random.default_rng(3)
    n = 600
    table = _table(n, 8)
    table["many"] = [f"c{i}" for i in rng.integers(0, 300, n)]  # more than 256 categories
    table["g"] = rng.choice(["p", "q", "r"], n)
    table["gcopy"] = table["g"].map({"p": "P", "q": "Q", "r": "R"})  # a function rule
    table["xcopy"] = 2.0 * table["x3"] + 1.0  # an affine rule: not drawn
    tables = {"a": table.iloc[:300], "b": table.iloc[300:]}
    kinds = {"x2": "ordinal", "many": "nominal"}

    def fit(**kw):
        synth = FITSSynthesizer(kinds=kinds, **kw)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            synth.fit(tables)
        assert synth.coordinator.models == {}  # no boost round ran
        return [str(w.message) for w in caught if "boost" in str(w.message)]

    cases = [
        ({"column_models": {"many": "boosting"}}, r"has 2\d\d categories.*at most 256"),
        (  # 255 cumulative outputs over 1,030 bins at depth 8: 67 million values
            {
                "column_models": {"x3": "boosting"},
                "boosting": {"x3": {"classes": 256, "depth": 8, "bins": 1024}},
            },
            r"'x3' would need replies of up to 67,.* values.*depth, bins or classes",
        ),
        (
            {"column_models": {"y": "boosting"}, "boosting": {"n_trees": 300}},
            r"asks for 300 trees, .*allows at most 200 .*n_trees=200",
        ),
        ({"column_models": {"xcopy": "boosting"}}, r"rule xcopy = 2 \* x3 \+ 1.*--no-rules"),
        ({"column_models": {"y": "boosting"}, "boosting": {"xcopy": {"depth": 2}}}, "rule"),
        (
            {"column_models": {"y": "boosting"}, "column_designs": {"y": "constant"}},
            r"column_designs\['y'\].*boosted.*drop one of the two",
        ),
    ]
    for kw, says in cases:
        with pytest.raises(ValueError, match=says):
            fit(**kw)
    # the sites' own cap, when larger, admits more trees (fit only: no boost round yet)
    assert (
        fit(
            column_models={"y": "boosting"},
            boosting={"n_trees": 300},
            site_policy=SitePolicy(boosting_trees=300),
        )
        == []
    )
    # a boosted column that a function rule sets is drawn by the rule: said, not hidden
    said = fit(column_models={"gcopy": "boosting"})
    assert len(said) == 1 and "rule gcopy = f(g)" in said[0] and "--no-rules" in said[0]
    with pytest.raises(ValueError, match=r"'many' has .* many=kernel"):  # '*' names it too
        fit(column_models={"*": "boosting"})
    # '*' takes the rules as they are: no warning
    assert fit(column_models={"*": "boosting", "many": "kernel"}) == []
    # settings with no boosted column have no effect: said
    said = fit(boosting={"n_trees": 5})
    assert len(said) == 1 and "no column is boosted" in said[0]
    assert fit() == []


def test_quantile_edges_follow_the_cdf():
    grid = np.linspace(0, 10, 11)
    cdf = grid / 10
    np.testing.assert_allclose(quantile_edges(grid, cdf, 4), [2.5, 5.0, 7.5])
    flat = np.array([0, 0, 0.5, 0.5, 0.5, 1, 1, 1, 1, 1, 1.0])  # two steps: repeats dropped
    edges = quantile_edges(grid, flat, 8)
    assert np.all(np.diff(edges) > 0) and edges.size <= 7


def test_cli_column_model(tmp_path):
    """``fits synthesize --column-model y=boosting`` is the Python API's table; a bad
    item, an unknown column and a continuous column are usage errors (exit 2) that
    leave no output; ``fits federate`` puts the mapping in the run config."""
    import json

    import typer

    from fits.cli.federate import _run_config

    from conftest import fits_in_process

    table = _table(400, 7)
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"site{i}.csv")
        table.iloc[i * 200 : (i + 1) * 200].to_csv(paths[-1], index=False)
    kinds = ["--kind", "x2=ordinal"]

    def run(*args):
        return fits_in_process("synthesize", *paths, *args)

    out = tmp_path / "out.csv"
    res = run("--rows", "100", "--out", str(out), "-q", "--seed", "2", *kinds,
              "--column-model", "y=boosting", "--boosting", "n_trees=7")  # fmt: skip
    assert res.returncode == 0, res.stderr
    tables = {p.stem: pd.read_csv(p) for p in paths}
    synth = FITSSynthesizer(
        seed=2, kinds={"x2": "ordinal"}, column_models={"y": "boosting"}, boosting={"n_trees": 7}
    )
    expected = synth.fit(tables).sample(100)
    pd.testing.assert_frame_equal(pd.read_csv(out), expected, check_dtype=False)
    assert "boosted columns: y 7 trees\n" in res.stdout
    # early stopping: the summary says how many trees the column kept, of at most how many
    res = run("--rows", "50", "--out", str(tmp_path / "es.csv"), "-q", *kinds,
              "--column-model", "y=boosting", "--boosting", "validation_fraction=0.2",
              "--boosting", "n_iter_no_change=2")  # fmt: skip
    assert res.returncode == 0, res.stderr
    kept = re.search(r"boosted columns: y (\d+) trees \(early stopping; at most 100\)", res.stdout)
    assert kept is not None and int(kept.group(1)) < 100, res.stdout
    for item, says in [
        ("y", "write COLUMN=MODEL"),
        ("y=forest", "must be one of kernel, boosting"),
        ("nope=boosting", "no column ['nope']"),
        ("x1=boosting", "the chain's first column, drawn from its marginal"),
    ]:
        bad = tmp_path / "bad.csv"
        res = run("--rows", "20", "--out", str(bad), "-q", *kinds, "--column-model", item)
        assert res.returncode == 2, (item, res.stderr)
        assert says in res.stderr and "Traceback" not in res.stderr
        assert not bad.exists()
    for item, says in [
        ("trees=5", "the settings are n_trees"),
        ("depth=x", "depth must be an integer"),
        ("depth=12", "depth must be in 1..8"),
        ("y:depth=12", "boosting['y']: boosting depth must be in 1..8"),
        ("y:trees=5", "the settings are n_trees"),
        ("x3:depth=2", "settings of their own for ['x3'], which are not boosted"),
        ("n_trees=300", "allows at most 200 per column (boosting_trees)"),  # at fit
        ("validation_fraction=0.01", "would hold out [2, 2] rows at the sites"),  # at fit
    ]:
        bad = tmp_path / "bad.csv"
        res = run("--rows", "20", "--out", str(bad), "-q", "--column-model", "y=boosting",
                  "--boosting", item)  # fmt: skip
        assert res.returncode == 2, (item, res.stderr)
        assert says in res.stderr and "Traceback" not in res.stderr
        assert not bad.exists()
    res = run("--rows", "20", "--out", str(bad), "-q", "--column-model", "y=boosting",
              "--column-design", "y=constant")  # fmt: skip
    assert res.returncode == 2 and "--column-design ['y'] = 'constant'" in res.stderr
    assert "Traceback" not in res.stderr and not bad.exists()
    res = run("--rows", "20", "--out", str(bad), "-q", "--boosting", "n_trees=5")
    assert res.returncode == 0 and "no column is boosted" in res.stderr, res.stderr
    # a header with surrounding spaces (' y '): the options name it without them
    spaced = []
    for i, path in enumerate(paths):
        spaced.append(tmp_path / f"spaced{i}.csv")
        pd.read_csv(path).rename(columns={"y": " y "}).to_csv(spaced[-1], index=False)
    res = fits_in_process(
        "synthesize", *spaced, "--rows", "20", "--out", tmp_path / "s.csv", "-q", *kinds,
        "--column-model", "y=boosting", "--boosting", "y:n_trees=3",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert list(pd.read_csv(tmp_path / "s.csv").columns) == ["x1", "x2", "x3", " y "]
    args = (tmp_path / "o.csv", 10, 0, [], "", None, 60.0, 2, None)
    config = _run_config(
        *args, column_model=["y=boosting"], boosting=["depth=3", "y:learning_rate=0.1"]
    )
    assert json.loads(config["column-models"]) == {"y": "boosting"}
    assert json.loads(config["boosting"]) == {"depth": 3, "y": {"learning_rate": 0.1}}
    for bad_args in (
        {"column_model": ["y=trees"]},
        {"column_model": ["y=boosting"], "boosting": ["x3:depth=2"]},  # x3 not boosted
    ):
        with pytest.raises(typer.Exit) as info:
            _run_config(*args, **bad_args)
        assert info.value.exit_code == 2


def test_continuous_draws_follow_the_classes():
    """values_from_classes: with the marginal's own class masses the draw is the
    marginal's inverse CDF at u exactly; with one class, every value lies in it; and
    cdf_from_classes is the CDF the draws follow."""
    from fits.core.boosting import cdf_from_classes, values_from_classes

    grid = np.linspace(0.0, 10.0, 41)
    cdf = 1 - np.exp(-grid / 3)
    cdf[-1] = 1.0
    edges = quantile_edges(grid, cdf, 8)
    levels = np.interp(edges, grid, cdf)
    masses = np.diff(np.concatenate([[0.0], levels, [1.0]]))
    u = np.random.default_rng(0).random(2000)
    p = np.tile(masses, (u.size, 1))
    keep = np.concatenate([[True], np.diff(cdf) > 0])
    np.testing.assert_allclose(
        values_from_classes(p, u, edges, grid, cdf), np.interp(u, cdf[keep], grid[keep]),
        atol=1e-9,
    )  # fmt: skip
    one = np.zeros((u.size, edges.size + 1))
    one[:, 3] = 1.0
    got = values_from_classes(one, u, edges, grid, cdf)
    assert np.all((got >= edges[2] - 1e-9) & (got <= edges[3] + 1e-9))
    on_grid = cdf_from_classes(p[:1], edges, grid, cdf)[0]
    np.testing.assert_allclose(on_grid, cdf, atol=1e-9)  # the marginal's masses: F itself
    rng = np.random.default_rng(1)
    q = rng.dirichlet(np.ones(edges.size + 1), size=1)
    draws = values_from_classes(np.tile(q, (20000, 1)), rng.random(20000), edges, grid, cdf)
    implied = cdf_from_classes(q, edges, grid, cdf)[0]
    empirical = (draws[:, None] <= grid[None, :]).mean(axis=0)
    assert np.max(np.abs(empirical - implied)) < 0.015


def test_tiny_sites_and_oversized_models_are_refused_clearly():
    """Sites all under k withhold every histogram: the run stops naming the column and
    the fix (no model of nothing is drawn from); a model whose replies would be too
    large is refused before any boost round."""
    from fits.federation.protocol import ProtocolError

    table = _table(12, 8).drop(columns="x3")
    clients, transport = _federation([table.iloc[:4], table.iloc[4:8], table.iloc[8:]])
    coord = Coordinator(transport, column_models={"y": "boosting"})
    coord.setup(kinds={"x1": "continuous", "x2": "ordinal", "y": "nominal"})
    coord.configure(0)
    coord.marginal_cdf("x1")  # the bins' marginal, asked before the sites' floor rises
    for client in clients:  # 4 rows each, under k = 5
        client.policy = SitePolicy(min_effective_rows=5)
    with pytest.raises(ProtocolError, match="every site withheld its boosting histograms"):
        coord.boosted_model("y")
    big = _table(400, 9)
    big["y"] = [f"level {i % 300}" for i in range(400)]
    clients, transport = _federation([big.iloc[:200], big.iloc[200:]])
    coord = Coordinator(transport, column_models={"y": "boosting"})
    kinds = {"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": "nominal"}
    with pytest.raises(ValueError, match="'y' has 300 categories"):  # at setup
        coord.setup(kinds=kinds)
    # settings changed after setup: the bins found are checked again before any round
    coord = Coordinator(transport, column_models={"x3": "boosting"})
    coord.setup(kinds=kinds)
    coord.configure(0)
    coord.boosting = BoostingParams(depth=8, bins=1024, classes=256)
    with pytest.raises(ValueError, match="make a site's reply"):
        coord.boosted_model("x3")


def test_saved_boosted_synthesizer_samples_the_same_after_reconnecting(tmp_path):
    """A saved synthesizer keeps no model (the sites' sums); reconnected, it fits the
    same model again and samples what the original would have."""
    table = _table(400, 10)
    tables = {"a": table.iloc[:250].reset_index(drop=True), "b": table.iloc[250:]}
    kw = {"seed": 4, "column_models": {"y": "boosting"}, "boosting": {"n_trees": 4}}
    synth = FITSSynthesizer(**kw).fit(tables)
    path = synth.save(tmp_path / "s.pkl")
    first = synth.sample(200)
    loaded = FITSSynthesizer.load(path).connect(tables)
    pd.testing.assert_frame_equal(loaded.sample(200), first)


@pytest.mark.parametrize("precision", ["float64", "float32", "fixed16"])
def test_histogram_codec_round_trip(precision):
    """Boost histograms on the wire: float64 exact; fixed16 within 1/65534 of each
    (node, statistic)'s largest magnitude, zeros kept as zeros; shapes as check_reply
    expects."""
    from fits.federation.codec import decode_histograms, encode_histograms, histogram_arrays

    rng = np.random.default_rng(11)
    hist = rng.normal(0, 50, (4, 30, 5))
    hist[:, ::7] = 0.0
    arrays = encode_histograms(hist, precision)
    expected = histogram_arrays(precision, 4, 30, 5)
    assert {n: (a.shape, str(a.dtype)) for n, a in arrays.items()} == expected
    back = decode_histograms(arrays, precision, hist.shape)
    scale = np.abs(hist).max(axis=1, keepdims=True)
    bound = {"float64": 0.0, "float32": 1e-6, "fixed16": 1 / 65534 + 1e-9}[precision]
    assert np.all(np.abs(back - hist) <= bound * scale + 1e-12)
    assert np.all(back[:, ::7] == 0.0)


def test_star_boosts_every_column_after_the_first():
    """``{"*": "boosting"}``: every column of the chain after its first is boosted, a
    named column overrides it, and the draws come from the models."""
    table = _table(600, 12)
    tables = {"a": table.iloc[:300].reset_index(drop=True), "b": table.iloc[300:]}
    kw = {"seed": 1, "boosting": {"n_trees": 5, "depth": 3}}
    synth = FITSSynthesizer(column_models={"*": "boosting", "x3": "kernel"}, **kw).fit(tables)
    out = synth.sample(300)
    coord = synth.coordinator
    assert sorted(coord.models) == ["x2", "y"]  # x1 is first; x3 stays a kernel column
    assert coord._column_model == {"x2": "boosting", "x3": "kernel", "y": "boosting"}
    assert set(out["y"]) <= {"yes", "no"} and out["x2"].isin(range(6)).all()


def test_first_column_behind_its_own_indicators_is_not_boosted():
    """A first column with missing values (or a point mass) comes after its indicators
    in the engine's chain, which say only whether it has a value: it is still the
    chain's first column, so ``"*"`` leaves it to its marginal and naming it (or a
    design for it) is refused, as for any first column."""
    table = _table(600, 13)
    table.loc[table.index % 7 == 0, "x1"] = np.nan
    tables = {"a": table.iloc[:300].reset_index(drop=True), "b": table.iloc[300:]}
    kw = {"seed": 1, "boosting": {"n_trees": 3, "depth": 2}}
    synth = FITSSynthesizer(column_models={"*": "boosting"}, **kw).fit(tables)
    assert synth.coordinator.schema.order[:2] == ["x1 (missing)", "x1"]
    assert synth.coordinator._column_model == {"x2": "boosting", "x3": "boosting", "y": "boosting"}
    with pytest.raises(ValueError, match=r"'x1' is the chain's first column"):
        FITSSynthesizer(column_models={"x1": "boosting"}, **kw).fit(tables)


def test_malformed_boost_requests_and_replies_are_refused():
    """A site refuses a boost request whose trees or edges are malformed or beyond its
    policy; check_reply refuses a reply of any other shape than the request implies."""
    from fits.federation.protocol import Message, ProtocolError, check_reply

    table = _table(300, 13)
    clients, transport = _federation([table.iloc[:150], table.iloc[150:]], SitePolicy())
    coord = Coordinator(
        transport, column_models={"y": "boosting"}, boosting=BoostingParams(n_trees=1, depth=2)
    )
    coord.setup(kinds={"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": "nominal"})
    coord.configure(0)
    seen, inner = _record_boosts(clients[0])
    coord.boosted_model("y")
    request, reply = seen[-1]
    check_reply(request, reply)  # the real pair passes
    bad_reply = Message("boost", {"H": reply.arrays["H"][:, :-1]}, {})
    with pytest.raises(ProtocolError, match="shape"):
        check_reply(request, bad_reply)
    for name, value, says in [
        ("feature", np.full_like(request.arrays["feature"], 7), "trees are malformed"),
        ("edges", request.arrays["edges"][::-1].copy(), "finite and increasing"),
        ("edge_counts", request.arrays["edge_counts"] + 1, "edge_counts"),
    ]:
        broken = Message("boost", {**request.arrays, name: value}, request.config)
        with pytest.raises(ProtocolError, match=says):
            inner(broken)
    deep = Message("boost", request.arrays, {**request.config, "depth": 12})
    with pytest.raises(ProtocolError, match="depth"):
        inner(deep)
    clients[0].policy = SitePolicy(boosting_trees=0)  # refuses boosted columns
    with pytest.raises(PolicyError, match="boosting_trees"):
        inner(request)


def _prefix(model: BoostedModel, t: int) -> BoostedModel:
    return BoostedModel(model.init, model.feature[:t], model.left[:t], model.value[:t], model.edges)


def test_score_cache_gives_the_scores_bit_for_bit():
    """A site's memo of its last scores (ScoreCache) returns exactly bin_codes and
    raw_scores: for a model growing tree by tree, for a shorter or altered model (not an
    extension of the cached one: scored afresh), and with no room to cache."""
    table = _table(500, 14, classes=3)
    clients, transport = _federation([table.iloc[:250], table.iloc[250:]])
    params = BoostingParams(n_trees=6, depth=3, min_leaf_rows=10, bins=16)
    coord = Coordinator(transport, column_models={"y": "boosting"}, boosting=params)
    coord.setup(kinds={"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": "nominal"})
    coord.configure(0)
    model = coord.boosted_model("y")
    x = clients[0].z[:, :3]
    altered = _prefix(model, 4)
    altered.value = altered.value.copy()
    altered.value[2, 0, 0] += 1e-3
    sequence = [*(_prefix(model, t) for t in range(7)), _prefix(model, 3), altered, model]
    caches = (ScoreCache(), ScoreCache(max_bytes=0))
    for cache in caches:
        for m in sequence:
            codes, f = cache.scores("y", m, lambda: x)
            np.testing.assert_array_equal(codes, bin_codes(x, m.edges))
            np.testing.assert_array_equal(f, raw_scores(m, codes))
            f += 1.0  # the caller's copy: the cache keeps its own
        codes, f = cache.scores("y", model, lambda: x)
        np.testing.assert_array_equal(f, raw_scores(model, codes))
    assert list(caches[0]._entries) == ["y"] and not caches[1]._entries


def test_boosted_columns_grow_together_as_one_by_one():
    """fit_boosted grows every boosted column in the same rounds (one broadcast_many
    per round); the models equal those fitted column by column, bit for bit, and the
    progress callback counts the rounds."""
    table = _table(600, 15)
    params = BoostingParams(n_trees=3, depth=2, min_leaf_rows=10, bins=16, classes=8)
    kinds = {"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": "nominal"}
    models, rounds = [], []
    for together in (True, False):
        _, transport = _federation([table.iloc[:300], table.iloc[300:]])
        coord = Coordinator(transport, column_models={"*": "boosting"}, boosting=params)
        coord.setup(kinds=kinds)
        coord.configure(0)
        if together:
            coord.fit_boosted(progress=lambda name, done, total: rounds.append((name, done, total)))
        else:
            for column in ("y", "x3", "x2"):
                coord.boosted_model(column)
        models.append(coord.models)
    assert sorted(models[0]) == sorted(models[1]) == ["x2", "x3", "y"]
    for column in ("x2", "x3", "y"):
        a, b = models[0][column], models[1][column]
        for name in ("init", "feature", "left", "value"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert models[0]["x3"].response_edges is not None  # a continuous boosted column
    with pytest.raises(ValueError, match="not boosted"):
        coord.fit_boosted(["x1"])  # the chain's first column: drawn from its marginal
    assert rounds == [(BOOSTING_PROGRESS, r, 7) for r in range(1, 8)]


def test_resolve_settings_merges_a_columns_own_over_every_columns():
    base, own = resolve_settings({"n_trees": 7, "y": {"depth": 3}, "depth": {"l2": 2.0}})
    assert base == BoostingParams(n_trees=7)
    # a column named like a setting is told apart by its value (a mapping)
    assert own == {
        "y": BoostingParams(n_trees=7, depth=3),
        "depth": BoostingParams(n_trees=7, l2=2.0),
    }
    assert resolve_settings(None) == (BoostingParams(), {})
    assert resolve_settings(BoostingParams(depth=2)) == (BoostingParams(depth=2), {})
    with pytest.raises(ValueError, match=r"boosting\['y'\]: unknown setting\(s\) \['trees'\]"):
        resolve_settings({"y": {"trees": 5}})
    with pytest.raises(ValueError, match=r"boosting\['y'\]: boosting depth must be in 1\.\.8"):
        resolve_settings({"y": {"depth": 0}})
    with pytest.raises(ValueError, match="unknown setting"):
        resolve_settings({"trees": 5})
    with pytest.raises(TypeError, match="mapping of BoostingParams fields"):
        resolve_settings([("depth", 2)])  # type: ignore[arg-type]


def test_a_columns_own_settings_give_its_model_as_if_they_were_everyones():
    """column_boosting: y's model equals the one fitted with y's settings for every
    column, the other columns' the ones fitted with the common settings (bit for bit);
    the fit takes the most rounds of any column, and a column whose model is complete
    stops asking.  Settings for a column that is not boosted are refused."""
    table = _table(600, 16)
    tables = [table.iloc[:300], table.iloc[300:]]
    kinds = {"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": "nominal"}
    common = BoostingParams(n_trees=2, depth=2, min_leaf_rows=10, bins=16, classes=8)
    own = BoostingParams(
        n_trees=3, depth=3, learning_rate=0.1, min_leaf_rows=10, bins=16, classes=8
    )

    def fit(boosting, column_boosting=None, rounds=None):
        _, transport = _federation(tables)
        coord = Coordinator(
            transport, column_models={"*": "boosting"}, boosting=boosting,
            column_boosting=column_boosting,
        )  # fmt: skip
        coord.setup(kinds=kinds)
        coord.configure(0)
        sent = []
        many = transport.broadcast_many
        transport.broadcast_many = lambda ms: sent.append([m.type for m in ms]) or many(ms)
        coord.fit_boosted(progress=None if rounds is None else lambda *a: rounds.append(a))
        return coord.models, sent

    rounds: list = []
    mixed, sent = fit(common, {"y": own}, rounds)
    for reference, columns in ((fit(own)[0], ["y"]), (fit(common)[0], ["x2", "x3"])):
        for column in columns:
            a, b = mixed[column], reference[column]
            for name in ("init", "feature", "left", "value"):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert mixed["y"].n_trees == 3 and mixed["x2"].n_trees == 2
    assert rounds == [(BOOSTING_PROGRESS, r, 10) for r in range(1, 11)]  # 1 + 3 x 3
    boosts = [len(types) for types in sent if "boost" in types]
    assert boosts == [3] * 5 + [1] * 5  # x2, x3 done after 1 + 2 x 2 rounds
    _, transport = _federation(tables)
    coord = Coordinator(transport, column_models={"y": "boosting"}, column_boosting={"x3": own})
    with pytest.raises(ValueError, match=r"settings of their own for 'x3', which is not boosted"):
        coord.setup(kinds=kinds)
    synth = FITSSynthesizer(column_models={"y": "boosting"}, boosting={"x2": {"depth": 2}})
    with pytest.raises(ValueError, match=r"'x2', which is not boosted"):
        synth.fit({"a": tables[0], "b": tables[1]})
