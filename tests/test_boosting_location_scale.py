"""The location-scale model of a boosted continuous column
(``BoostingParams(continuous="location-scale")``, :func:`fits.core.boosting.location_scale_cdf`):
its gradients against complex-step derivatives of its own log loss, its Fisher
Hessian against the expectation it stands for, the federated model against an
independent pooled booster, the sites' check of the request, the bytes it saves, and
the option on the command line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_boosting import _grow_pooled, _record_boosts

from fits import FITSSynthesizer
from fits.core.boosting import (
    BoostingParams,
    bin_codes,
    class_levels,
    gradients,
    location_scale_cdf,
    log_loss,
    resolve_settings,
    thresholds_of,
)
from fits.federation.client import FITSClient
from fits.federation.coordinator import Coordinator
from fits.federation.policy import SitePolicy
from fits.federation.protocol import Message, ProtocolError
from fits.federation.transport import InProcessTransport

LS = {"continuous": "location-scale"}


def _neg_log_p(f: np.ndarray, s: np.ndarray, c: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """-log P(class c) of the location-scale model, written out afresh (works on complex
    numbers, for complex-step derivatives): sigmoid((theta_c - f) e^-s) differenced."""
    last = theta.size  # the top class: P(class <= last) = 1; class 0: P(class < 0) = 0
    scale = np.exp(-s)

    def sig(k):
        return 1 / (1 + np.exp(-(theta[np.clip(k, 0, last - 1)] - f) * scale))

    upper = np.where(c == last, 1.0, sig(c))
    lower = np.where(c == 0, 0.0, sig(c - 1))
    return -np.log(upper - lower)


def _complex_step(fun, x: np.ndarray) -> np.ndarray:
    """d fun / d x at real x by the complex step (exact to rounding, no cancellation)."""
    step = 1e-30
    return np.imag(fun(x + 1j * step)) / step


def _theta(levels: int = 8) -> np.ndarray:
    shares = np.arange(1, levels) / levels
    return np.log(shares / (1 - shares)) + np.linspace(-0.2, 0.3, levels - 1)


def test_gradients_are_the_derivatives_of_the_log_loss_and_h_is_the_fisher_information():
    rng = np.random.default_rng(4)
    theta = _theta()
    n = 40
    f = np.column_stack([rng.normal(0, 0.8, n), rng.normal(0, 0.4, n)])
    y = rng.integers(0, theta.size + 1, n)
    g, h = gradients(f, y, thresholds=theta)
    g_f = _complex_step(lambda loc: _neg_log_p(loc, f[:, 1], y, theta), f[:, 0])
    g_s = _complex_step(lambda sc: _neg_log_p(f[:, 0], sc, y, theta), f[:, 1])
    np.testing.assert_allclose(g, np.column_stack([g_f, g_s]), rtol=1e-9, atol=1e-12)
    # the loss is the model's own -log P_y
    np.testing.assert_allclose(
        log_loss(f, y, thresholds=theta), _neg_log_p(f[:, 0], f[:, 1], y, theta), rtol=1e-12
    )
    # h: E over the model's own classes of g^2 (the Fisher information's diagonal)
    fisher = np.zeros((n, 2))
    for c in range(theta.size + 1):
        cls = np.full(n, c)
        p_c = np.exp(-_neg_log_p(f[:, 0], f[:, 1], cls, theta))
        d_f = _complex_step(lambda loc, cls=cls: _neg_log_p(loc, f[:, 1], cls, theta), f[:, 0])
        d_s = _complex_step(lambda sc, cls=cls: _neg_log_p(f[:, 0], sc, cls, theta), f[:, 1])
        fisher += p_c[:, None] * np.column_stack([d_f, d_s]) ** 2
    np.testing.assert_allclose(h, fisher, rtol=1e-9)
    # at the model's own distribution the expected gradient is 0 (a proper score)
    probs = np.diff(np.column_stack([np.zeros(n), location_scale_cdf(f, theta), np.ones(n)]))
    expected = sum(
        probs[:, c : c + 1] * gradients(f, np.full(n, c), thresholds=theta)[0]
        for c in range(theta.size + 1)
    )
    np.testing.assert_allclose(expected, 0.0, atol=1e-12)


def test_the_cdf_at_zero_is_the_marginal_and_increases():
    levels = np.array([0.0, 0.1, 0.25, 0.5, 0.8, 0.95, 1.0])
    theta = thresholds_of(levels)
    cdf = location_scale_cdf(np.zeros((1, 2)), theta)
    np.testing.assert_allclose(cdf[0], levels[1:-1], rtol=1e-12)
    rng = np.random.default_rng(0)
    f = rng.normal(0, 2, (200, 2))
    cdf = location_scale_cdf(f, theta)
    assert np.all(np.diff(cdf, axis=1) >= 0) and np.all((cdf >= 0) & (cdf <= 1))
    # a larger location moves mass up: P(class <= c) falls
    up = location_scale_cdf(f + np.array([1.0, 0.0]), theta)
    assert np.all(up <= cdf)
    # extreme scores neither overflow nor give NaN
    wild = location_scale_cdf(np.array([[1e6, -1e6], [-1e6, 1e6]]), theta)
    assert np.all(np.isfinite(wild))
    # a flat marginal's levels 0 and 1 give finite thresholds
    assert np.all(np.isfinite(thresholds_of(np.array([0.0, 0.0, 1.0, 1.0]))))


def _table(n: int = 900) -> pd.DataFrame:
    rng = np.random.default_rng(9)
    x1 = rng.normal(size=n)
    x2 = rng.integers(0, 6, n)
    x3 = rng.uniform(0, 2, n)
    y = x1 * (x2 >= 3) + rng.gamma(2.0, 0.3 + x3)  # location and spread depend on x
    return pd.DataFrame({"x1": x1, "x2": x2, "x3": x3, "y": y})


def _pooled_location_scale(x_bins, y, theta, params, n_bins):
    """Second-order boosting of (f, s) on the pooled rows (test_boosting's
    ``_grow_pooled``: splits by direct sums over row masks), gradients and Fisher
    Hessians by complex steps of :func:`_neg_log_p` (independent of fits.core.boosting)."""
    n = y.size
    k_classes = theta.size + 1

    def g_h(f):
        g = np.column_stack(
            [
                _complex_step(lambda loc: _neg_log_p(loc, f[:, 1], y, theta), f[:, 0]),
                _complex_step(lambda sc: _neg_log_p(f[:, 0], sc, y, theta), f[:, 1]),
            ]
        )
        h = np.zeros((n, 2))
        for c in range(k_classes):
            cls = np.full(n, c)
            p_c = np.exp(-_neg_log_p(f[:, 0], f[:, 1], cls, theta))
            d = np.column_stack(
                [
                    _complex_step(
                        lambda loc, cls=cls: _neg_log_p(loc, f[:, 1], cls, theta), f[:, 0]
                    ),
                    _complex_step(lambda sc, cls=cls: _neg_log_p(f[:, 0], sc, cls, theta), f[:, 1]),
                ]
            )
            h += p_c[:, None] * d**2
        return g, h

    g, h = g_h(np.zeros((n, 2)))
    f = np.tile(-g.sum(0) / h.sum(0), (n, 1))  # one Newton step from (0, 0)
    f = _grow_pooled(x_bins, f, g_h, params, n_bins)
    cdf = 1 / (1 + np.exp(-(theta[None, :] - f[:, :1]) * np.exp(-f[:, 1:])))
    return np.diff(np.column_stack([np.zeros(n), cdf, np.ones(n)]), axis=1)


def _federation(tables, policy=None):
    clients = [
        FITSClient(t, f"site {i}", policy=policy or SitePolicy.unrestricted())
        for i, t in enumerate(tables)
    ]
    return clients, InProcessTransport(clients)


def test_federated_location_scale_equals_pooled_oracle():
    """Three sites, no floor: the federated location-scale model's class probabilities
    at every row equal an independent pooled booster's with the same bins, classes and
    thresholds; its thresholds are the marginal's logits at the class edges."""
    table = _table()
    clients, transport = _federation([table.iloc[:200], table.iloc[200:500], table.iloc[500:]])
    params = BoostingParams(n_trees=4, depth=3, min_leaf_rows=15, bins=16, classes=8, **LS)
    coord = Coordinator(transport, column_models={"y": "boosting"}, boosting=params)
    coord.setup(kinds={"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": "continuous"})
    coord.configure(0)
    sizes: list = []
    transport.observers.append(
        lambda k, msg, reply: (
            sizes.append(reply.arrays["H"].shape[-1]) if msg.type == "boost" else 0
        )
    )
    model = coord.boosted_model("y")
    assert model.thresholds is not None and model.init.shape == (2,)
    cdf = coord.marginal_cdf("y").ravel()
    np.testing.assert_allclose(
        model.thresholds, thresholds_of(class_levels(model.response_edges, coord.grids["y"], cdf))
    )
    assert set(sizes) == {5}  # G_f, G_s, H_f, H_s, count per bin
    z = np.vstack([c.z for c in clients])
    y = np.searchsorted(model.response_edges, z[:, 3], side="left")
    x_bins = bin_codes(z[:, :3], model.edges)
    n_bins = np.array([e.size + 1 for e in model.edges])
    expected = _pooled_location_scale(x_bins, y, model.thresholds, params, n_bins)
    np.testing.assert_allclose(model.probabilities(z[:, :3]), expected, rtol=1e-8, atol=1e-11)


def test_location_scale_draws_track_the_data_with_far_fewer_bytes():
    """The same table boosted both ways: the location-scale model uploads a small
    fraction of the cumulative model's bytes, and its draws keep the response's
    dependence on x2 (the interaction) about as well."""
    table = _table(3000)
    sites = [table.iloc[:1000], table.iloc[1000:2000], table.iloc[2000:]]
    out, sent = {}, {}
    for name, extra in (("cumulative", {}), ("location-scale", LS)):
        synth = FITSSynthesizer(
            seed=3, column_models={"y": "boosting"}, boosting={"n_trees": 20, **extra}
        ).fit(sites)
        out[name] = synth.sample(3000)
        sent[name] = sum(synth.uploaded_bytes_)
    assert sent["location-scale"] < sent["cumulative"] / 10
    real = table.groupby(table["x2"] >= 3)["y"].mean()
    for frame in out.values():
        drawn = frame.groupby(frame["x2"] >= 3)["y"].mean()
        assert np.allclose(drawn, real, atol=0.25), (drawn, real)


def test_settings_and_the_sites_check_of_thresholds():
    assert resolve_settings({"continuous": "location-scale"})[0].continuous == "location-scale"
    with pytest.raises(
        ValueError, match="continuous must be one of 'cumulative', 'location-scale'"
    ):
        BoostingParams(continuous="ordinal")
    with pytest.raises(ValueError, match="continuous must be one of"):
        BoostingParams(continuous=3)  # type: ignore[arg-type]
    table = _table(400)
    clients, transport = _federation([table.iloc[:200], table.iloc[200:]])
    params = BoostingParams(n_trees=1, depth=2, classes=8, **LS)
    coord = Coordinator(transport, column_models={"y": "boosting"}, boosting=params)
    coord.setup(kinds={"x2": "ordinal", "y": "continuous"})
    coord.configure(0)
    seen, inner = _record_boosts(clients[0])
    coord.boosted_model("y")
    request = seen[-1][0]
    theta = request.arrays["thresholds"]
    for bad in (
        theta[:-1],
        theta[::-1].copy(),
        np.where(np.arange(theta.size) == 0, np.nan, theta),
    ):
        broken = Message("boost", {**request.arrays, "thresholds": bad}, request.config)
        with pytest.raises(ProtocolError, match="thresholds for column 'y'"):
            inner(broken)
    # without thresholds the request stands for the cumulative model, whose 7 scores
    # its two do not match
    plain = {n: a for n, a in request.arrays.items() if n != "thresholds"}
    with pytest.raises(ProtocolError, match="needs outputs=7, got 2"):
        inner(Message("boost", plain, request.config))


def test_cli_location_scale(tmp_path):
    from conftest import fits_in_process

    table = _table(600)
    paths = []
    for k in range(2):
        paths.append(tmp_path / f"s{k}.csv")
        table.iloc[k * 300 : (k + 1) * 300].to_csv(paths[-1], index=False)
    out = tmp_path / "out.csv"
    common = ["synthesize", *paths, "--rows", "50", "--out", out, "--column-model", "y=boosting"]
    res = fits_in_process(
        *common, "--boosting", "continuous=location-scale", "--boosting", "n_trees=3"
    )
    assert res.returncode == 0, res.stderr
    assert pd.read_csv(out).shape == (50, 4)
    out.unlink()
    res = fits_in_process(*common, "--boosting", "continuous=ordinal")
    assert res.returncode == 2 and "continuous must be cumulative or location-scale" in res.stderr
    assert not out.exists()


def test_early_stopping_scores_the_location_scale_model():
    """With early stopping, each pooled held-out loss is the mean over the held-out
    rows of -log P(class) under the model's first t trees, computed from the model by
    its class probabilities (not by the sites' loss)."""
    from fits.core.boosting import BoostedModel, held_out

    table = _table()
    clients, transport = _federation([table.iloc[:300], table.iloc[300:600], table.iloc[600:]])
    params = BoostingParams(
        n_trees=4, depth=3, min_leaf_rows=15, bins=16, classes=8, validation_fraction=0.2, **LS
    )
    coord = Coordinator(transport, column_models={"y": "boosting"}, boosting=params)
    coord.setup(kinds={"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": "continuous"})
    coord.configure(0)
    model = coord.boosted_model("y")
    losses = coord.boosting_losses["y"]
    assert model.n_trees == 4 and len(losses) == 4
    mask = np.concatenate(
        [held_out(c.n_rows, 0.2, [coord._validation_seed, c._site_seed]) for c in clients]
    )
    z = np.vstack([c.z for c in clients])
    y = np.searchsorted(model.response_edges, z[mask, 3], side="left")
    for t, loss in enumerate(losses):
        prefix = BoostedModel(
            model.init,
            model.feature[:t],
            model.left[:t],
            model.value[:t],
            model.edges,
            model.response_edges,
            model.thresholds,
        )
        p = prefix.probabilities(z[mask, :3])
        assert loss == pytest.approx(-np.log(p[np.arange(y.size), y]).mean(), rel=1e-9)


def test_size_check_counts_two_scores_and_moot_settings_warn():
    """The check at setup of a reply's size counts two outputs for a location-scale
    column (settings the cumulative model cannot take are fine), and says so in the
    cumulative model's refusal; classes or continuous set where every boosted column
    is discrete warn that they do nothing."""
    table = _table(400)
    kinds = {"x1": "continuous", "x2": "ordinal", "x3": "continuous", "y": "continuous"}

    def setup(boosting, models=None, kinds=kinds):
        _, transport = _federation([table.iloc[:200], table.iloc[200:]])
        common, own = resolve_settings(boosting)
        coord = Coordinator(
            transport,
            column_models=models or {"y": "boosting"},
            boosting=common,
            column_boosting=own,
        )
        coord.setup(kinds=kinds)
        return coord

    big = {"classes": 256, "depth": 8, "bins": 300}
    with pytest.raises(ValueError, match=r"would need replies.*continuous='location-scale'"):
        setup(BoostingParams(**big))
    setup(BoostingParams(**big, **LS))  # 5 sums per bin: well within a reply
    discrete = {**kinds, "x2": "nominal"}
    with pytest.warns(UserWarning, match=r"boosting\['x2'\]: classes set for a discrete column"):
        setup(
            {"x2": {"classes": 8}},
            models={"x2": "boosting", "y": "boosting"},
            kinds=discrete,
        )
    with pytest.warns(UserWarning, match=r"continuous set, but every boosted column is discrete"):
        setup(LS, models={"x2": "boosting"}, kinds=discrete)
