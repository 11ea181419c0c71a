"""Early stopping of boosted columns (fits.core.boosting, ``validation_fraction``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_boosting import _federation, _oracle_table, _pooled_oracle, _record_boosts, _table

from fits import FITSSynthesizer
from fits.core.boosting import (
    BoostingParams,
    TreeGrower,
    bin_codes,
    class_probabilities,
    held_out,
    log_loss,
    should_stop,
)
from fits.federation.coordinator import Coordinator
from fits.federation.policy import SitePolicy


def _prefix(model, t):
    """The model's first t trees (same start scores and bins)."""
    import copy

    out = copy.copy(model)
    out.feature, out.left, out.value = model.feature[:t], model.left[:t], model.value[:t]
    return out


@pytest.mark.parametrize("kind", ["binary", "softmax", "cumulative"])
def test_log_loss_is_minus_the_log_likelihood(kind):
    """log_loss against -log p(y) from class_probabilities (softmax, one score), and
    against the binomial log losses of 1{y <= c} summed by hand (cumulative)."""
    rng = np.random.default_rng(0)
    k = {"binary": 1, "softmax": 4, "cumulative": 5}[kind]
    f = rng.normal(scale=3.0, size=(200, k))
    y = rng.integers(0, 2 if kind == "binary" else k + (kind == "cumulative"), 200)
    got = log_loss(f, y, cumulative=kind == "cumulative")
    if kind == "cumulative":
        p = 1 / (1 + np.exp(-f))
        below = y[:, None] <= np.arange(k)[None, :]
        expected = -np.where(below, np.log(p), np.log(1 - p)).sum(axis=1)
    else:
        expected = -np.log(class_probabilities(f)[np.arange(200), y])
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    # large scores neither overflow nor round a tiny loss to 0
    big = log_loss(np.full((1, 1), 700.0), np.array([1]))  # e^-700
    assert np.isfinite(log_loss(np.full((1, 1), -800.0), np.array([1]))).all()
    assert 0 < big[0] < 1e-300


def test_should_stop_is_scikit_learns_rule():
    """Stop once none of the last n losses is below the one before them by more than tol."""
    assert not should_stop([1.0, 0.9, 0.95], 3, 0.0)  # too few losses yet
    assert should_stop([1.0, 0.9, 0.95, 0.96, 0.91], 3, 0.0)  # 0.9 is never beaten
    assert not should_stop([1.0, 0.9, 0.95, 0.96, 0.89], 3, 0.0)
    assert should_stop([1.0, 0.9, 0.95, 0.96, 0.89], 3, 0.02)  # 0.01 better: under tol
    assert should_stop([0.5, 0.5], 1, 0.0)  # equal is no improvement


def test_held_out_share_is_exact_reproducible_and_the_sites_own():
    a = held_out(101, 0.1, [7, 1])
    assert a.dtype == bool and a.sum() == 10  # round(10.1)
    assert held_out(5, 0.5, [7, 1]).sum() == 3  # half up
    np.testing.assert_array_equal(a, held_out(101, 0.1, [7, 1]))
    assert not np.array_equal(a, held_out(101, 0.1, [7, 2]))  # another site's rows
    assert not np.array_equal(a, held_out(101, 0.1, [8, 1]))  # another fit's


def _fit(tables, params, policy=None, kind="nominal"):
    clients, transport = _federation(tables, policy)
    coord = Coordinator(transport, column_models={"y": "boosting"}, boosting=params)
    coord.setup(kinds={"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": kind})
    coord.configure(0)
    return clients, coord


@pytest.mark.parametrize("classes", [2, 3, "continuous"])
def test_fit_uses_the_training_rows_and_scores_the_held_out_ones(classes):
    """With early stopping that does not trigger, the federated model equals the
    independent pooled booster run on the sites' training rows only, and the pooled
    held-out loss after t trees equals -log p(y) of the model's first t trees summed
    over the held-out rows, per row (an independent computation from the model)."""
    table, kind = _oracle_table(classes)
    tables = [table.iloc[:200], table.iloc[200:500], table.iloc[500:]]
    params = BoostingParams(
        n_trees=4, depth=3, min_leaf_rows=15, bins=16, validation_fraction=0.2,
        classes=8 if classes == "continuous" else 64,
        n_iter_no_change=10,
    )  # fmt: skip
    clients, coord = _fit(tables, params, kind=kind)
    model = coord.boosted_model("y")
    assert model.n_trees == 4
    losses = coord.boosting_losses["y"]
    assert len(losses) == 4  # after 0, 1, 2, 3 trees (the full model is never scored)
    held = [held_out(c.n_rows, 0.2, [coord._validation_seed, c._site_seed]) for c in clients]
    assert [h.sum() for h in held] == [40, 60, 80]
    mask = np.concatenate(held)
    z = np.vstack([c.z for c in clients])
    if classes == "continuous":
        y = np.searchsorted(model.response_edges, z[:, 3], side="left")
        k, cumulative = 7, True
    else:
        y = np.concatenate([c.codes[:, 3] for c in clients])
        k, cumulative = (1 if classes == 2 else classes), False
    train = ~mask
    x_bins = bin_codes(z[train, :3], model.edges)
    n_bins = np.array([e.size + 1 for e in model.edges])
    expected = _pooled_oracle(x_bins, y[train], k, params, n_bins, cumulative)
    np.testing.assert_allclose(model.probabilities(z[train, :3]), expected, rtol=1e-9, atol=1e-12)
    for t, loss in enumerate(losses):
        p = _prefix(model, t).probabilities(z[mask, :3])
        if cumulative:  # the binomial log losses of 1{y <= c}, from P(class <= c)
            cdf = np.cumsum(p, axis=1)[:, :-1]
            below = y[mask][:, None] <= np.arange(k)[None, :]
            want = -np.where(below, np.log(cdf), np.log(1 - cdf)).sum(axis=1).mean()
        else:
            want = -np.log(p[np.arange(mask.sum()), y[mask]]).mean()
        assert loss == pytest.approx(want, rel=1e-9)


def test_stops_on_noise_and_keeps_the_best_trees():
    """A column independent of its covariates stops after n_iter_no_change trees and
    keeps the trees of the lowest held-out loss; a column that depends on them keeps
    many more trees.  Fewer rounds are sent, and progress ends at the rounds done."""
    rng = np.random.default_rng(3)
    table = _table(3000, 1)
    noise = table.assign(y=rng.choice(["no", "yes"], 3000))
    tables = [noise.iloc[i::3] for i in range(3)]
    params = BoostingParams(n_trees=60, depth=2, validation_fraction=0.2, n_iter_no_change=5)
    clients, coord = _fit(tables, params)
    seen: list[tuple[int, int]] = []
    coord.fit_boosted(progress=lambda name, done, total: seen.append((done, total)))
    losses = coord.boosting_losses["y"]
    model = coord.boosted_model("y")
    assert len(losses) < 20 and model.n_trees == int(np.argmin(losses))
    assert losses[model.n_trees] <= min(losses[-5:])
    # round 1 starts; tree t + 1's first level (round 2 + 2t) scores t trees
    assert seen[-1] == (2 * len(losses), 2 * len(losses))
    assert seen[:-1] == [(r, 1 + 60 * 2) for r in range(1, 2 * len(losses))]
    signal = [table.iloc[i::3] for i in range(3)]
    _, coord = _fit(signal, params)
    assert coord.boosted_model("y").n_trees > model.n_trees + 5


def test_secure_aggregation_gives_the_same_stop():
    table = _table(900, 5)
    tables = {f"s{i}": table.iloc[i::3].reset_index(drop=True) for i in range(3)}
    kw = {
        "seed": 3,
        "column_models": {"y": "boosting"},
        "boosting": {"n_trees": 40, "depth": 2, "validation_fraction": 0.2, "n_iter_no_change": 3},
    }
    plain = FITSSynthesizer(**kw, upload_precision="float64").fit(tables)
    masked = FITSSynthesizer(**kw, secure_aggregation=True).fit(tables)
    a, b = plain.coordinator.boosted_model("y"), masked.coordinator.boosted_model("y")
    assert a.n_trees == b.n_trees < 40
    np.testing.assert_allclose(a.value, b.value)
    np.testing.assert_allclose(
        plain.coordinator.boosting_losses["y"], masked.coordinator.boosting_losses["y"]
    )
    # another seed holds out other rows: another loss path
    other = FITSSynthesizer(**{**kw, "seed": 4}, upload_precision="float64").fit(tables)
    other.coordinator.boosted_model("y")  # fitted on first use
    assert other.coordinator.boosting_losses["y"] != plain.coordinator.boosting_losses["y"]


def test_sites_under_their_floor_report_no_loss():
    """A site with fewer than k held-out rows reports (0, 0); when every site does,
    the fit stops with a message that says what to change."""
    table = _table(600, 2)
    small = [table.iloc[:40], table.iloc[40:]]
    params = BoostingParams(n_trees=3, depth=2, validation_fraction=0.1)
    policy = SitePolicy(min_effective_rows=5)
    clients, coord = _fit(small, params, policy=policy)
    replies: list = []
    coord.transport.observers.append(
        lambda k, msg, reply: replies.append((k, reply)) if "loss" in reply.arrays else 0
    )
    coord.fit_boosted()
    assert {k for k, r in replies if r.arrays["loss"][1] == 0} == {0}  # 4 rows held out
    assert all(r.arrays["loss"][1] == 56 for k, r in replies if k == 1)
    # every site under its floor: refused at configure, before any boost round
    tiny = [table.iloc[:40], table.iloc[40:80]]
    with pytest.raises(ValueError, match=r"hold out \[4, 4\] rows.*raise validation_fraction"):
        _fit(tiny, params, policy=policy)
    # should no site report a held-out loss all the same (a continuous column's rows
    # holding a value can be fewer than the checked ones), the fit stops with the fix
    grower = TreeGrower([np.array([0.0])], np.array([False]), 1, params)
    grower.absorb(np.array([[[0.0, 1.0, 10.0], [0.0, 1.0, 10.0]]]))  # the start round
    with pytest.raises(ValueError, match="early stopping: no site reported.*validation_fraction"):
        grower.absorb(np.zeros((1, 2, 3)), np.zeros(2))


def test_early_stopping_settings_are_checked():
    for bad in ({"validation_fraction": 0.6}, {"validation_fraction": -0.1}):
        with pytest.raises(ValueError, match="validation_fraction must be in"):
            BoostingParams(**bad)
    with pytest.raises(ValueError, match="n_iter_no_change must be an integer"):
        BoostingParams(n_iter_no_change=2.5)
    with pytest.raises(ValueError, match="tol must be >= 0"):
        BoostingParams(tol=-1.0)
    assert not BoostingParams().early_stopping
    from fits.cli.options import parse_boosting

    parsed = parse_boosting(["validation_fraction=0.1", "y:n_iter_no_change=4"], {"y": "boosting"})
    assert parsed == {"validation_fraction": 0.1, "y": {"n_iter_no_change": 4}}


def test_every_column_boosted_on_a_tiny_table_keeps_few_trees():
    """Every column boosted on small sites: early stopping keeps far fewer trees than
    the most allowed, and the synthetic table has the real one's columns and rows."""
    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=n)
    table = pd.DataFrame(
        {
            "x": x,
            "g": rng.choice(list("abc"), n),
            "y": np.where(x + rng.normal(size=n) > 0, "p", "q"),
        }
    )
    tables = {f"s{i}": table.iloc[i::4].reset_index(drop=True) for i in range(4)}
    synth = FITSSynthesizer(
        seed=1, column_models={"*": "boosting"}, boosting={"validation_fraction": 0.2}
    ).fit(tables)
    out = synth.sample(300)
    assert list(out.columns) == list(table.columns) and len(out) == 300
    kept = {c: synth.coordinator.boosted_model(c).n_trees for c in ("g", "y")}
    assert all(t < 40 for t in kept.values()), kept


def test_the_site_audit_log_names_the_held_out_share():
    from fits.federation.client import FITSClient
    from fits.federation.transport import InProcessTransport

    table = _table(400, 3)
    entries: list[dict] = []
    clients = [
        FITSClient(
            table.iloc[i::2], f"s{i}", policy=SitePolicy.unrestricted(), audit=entries.append
        )
        for i in range(2)
    ]
    params = BoostingParams(n_trees=2, depth=1, validation_fraction=0.25)
    coord = Coordinator(
        InProcessTransport(clients), column_models={"y": "boosting"}, boosting=params
    )
    coord.setup(kinds={"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": "nominal"})
    coord.configure(0)
    coord.fit_boosted()
    boosts = [e for e in entries if e["type"] == "boost"]
    assert boosts and all(e["validation"] == 0.25 for e in boosts)


def test_malformed_early_stopping_requests_and_replies_are_refused():
    """A site refuses a boost request whose held-out share or seed is out of range;
    check_reply wants the loss in a first level's reply with early stopping, and
    refuses it anywhere else."""
    from fits.federation.protocol import Message, ProtocolError, check_reply

    table = _table(300, 13)
    params = BoostingParams(n_trees=1, depth=2, validation_fraction=0.2)
    clients, coord = _fit([table.iloc[:150], table.iloc[150:]], params)
    seen, inner = _record_boosts(clients[0])
    coord.boosted_model("y")
    first, second = seen[-2], seen[-1]  # the tree's levels 0 and 1
    check_reply(*first)
    check_reply(*second)
    assert "loss" in first[1].arrays and "loss" not in second[1].arrays
    with pytest.raises(ProtocolError, match="exactly"):
        check_reply(first[0], Message("boost", {"H": first[1].arrays["H"]}, {}))
    with pytest.raises(ProtocolError, match="exactly"):
        check_reply(second[0], Message("boost", {**second[1].arrays, "loss": np.zeros(2)}, {}))
    request = first[0]
    for change in ({"validation": 0.9}, {"validation": 0.0}, {"validation_seed": -1},
                   {"validation": True}, {"validation_seed": "7"}):  # fmt: skip
        broken = Message("boost", request.arrays, {**request.config, **change})
        with pytest.raises(ProtocolError, match="early stopping needs"):
            inner(broken)
    no_seed = {k: v for k, v in request.config.items() if k != "validation_seed"}
    with pytest.raises(ProtocolError, match="early stopping needs"):
        inner(Message("boost", request.arrays, no_seed))
