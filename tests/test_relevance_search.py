"""Relevance weights learned from the sites' held-out scores (``tune_relevance``).

The weights themselves are checked against the pooled fit in ``test_equivalence.py``
(``Kernel(relevance=...)``); here: that a coordinator's smoothing with weights is
exactly the site kernel with them, the search's step rule in closed form, that the
search finds a planted irrelevant covariate, what it refuses, and that the choice is
saved with the synthesizer.
"""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, GaussianKernel, KNNKernel, SitePolicy
from fits.core.tuning import (
    RELEVANCE_PROBE,
    Smoothing,
    relevance_groups,
    relevance_probes,
    relevance_steps,
    with_relevance,
)
from fits.federation.policy import PolicyError

from conftest import mixed_table, split


def test_smoothing_weights_are_the_kernels_weights(mixed_clients):
    """``smoothing={col: {"relevance": w}}`` (the coordinator's choice, sent with every
    request) draws exactly what the sites' kernels with ``relevance={col: w}`` draw,
    for both schemes; a site's own weights and the smoothing's multiply."""
    w = {"x": 0.5, "o": 3.0}
    for cls in (KNNKernel, GaussianKernel):
        own = FITSSynthesizer(cls(relevance={"y": w}), seed=3).fit(mixed_clients).sample(300)
        coordinated = FITSSynthesizer(cls(), seed=3, smoothing={"y": {"relevance": w}})
        assert own.equals(coordinated.fit(mixed_clients).sample(300))
        split_weights = FITSSynthesizer(
            cls(relevance={"y": {"x": 0.25}}),
            seed=3,
            smoothing={"y": {"relevance": {"x": 2.0, "o": 3.0}}},
        )
        assert own.equals(split_weights.fit(mixed_clients).sample(300))
        plain = FITSSynthesizer(cls(), seed=3).fit(mixed_clients).sample(300)
        assert not own.equals(plain)


def test_with_relevance_multiplies_the_kernels_own_weights():
    kernel = KNNKernel(relevance={"y": {"x": 0.5, "c": 2.0}, "o": {"x": 3.0}})
    out = with_relevance(kernel, "y", {"x": 4.0, "b": 0.0})
    assert out.relevance == {"y": {"x": 2.0, "c": 2.0, "b": 0.0}, "o": {"x": 3.0}}
    assert with_relevance(kernel, "y", {}) is kernel
    assert with_relevance(KNNKernel(), "o", {"x": 2.0}).relevance == {"o": {"x": 2.0}}


def test_smoothing_relevance_fields():
    s = Smoothing(relevance={"b": 1.0, "a": 0.5})
    assert s.relevance == (("a", 0.5),) and not s.is_default  # weights of 1 left out
    assert Smoothing(relevance={"a": 1.0}).is_default
    assert Smoothing.from_value(s.to_dict()) == s
    assert Smoothing.from_value([2.0, 1.0, {"a": 0.5}]) == Smoothing(2.0, 1.0, {"a": 0.5})
    assert s.to_dict() == {"sharpness": 1.0, "reach": 1.0, "relevance": {"a": 0.5}}
    assert "relevance" not in Smoothing().to_dict()
    for bad in ({"a": -1.0}, {"a": float("nan")}, {"a": True}, {"a": "2"}, [1.0]):
        with pytest.raises(ValueError, match="relevance"):
            Smoothing(relevance=bad)
    with pytest.raises(ValueError, match="unknown field"):
        Smoothing.from_value({"weights": {"a": 2.0}})
    # a Smoothing pickled before relevance existed (a saved synthesizer) loads
    state = {"sharpness": 3.0, "reach": 2.0}
    old = Smoothing.__new__(Smoothing)
    old.__setstate__(state)
    assert old == Smoothing(3.0, 2.0) and old.is_default is False
    assert pickle.loads(pickle.dumps(s)) == s


def test_the_step_rule_in_closed_form():
    """Probes double one weight each; a step multiplies weight i by
    2^(eta * -g_i / max|g|), g_i = probe score - start score; no step without a move."""
    base = Smoothing(3.0, 2.0, {"a": 0.5})
    probes = relevance_probes(base, ["a", "b"])
    assert probes == [
        base,
        Smoothing(3.0, 2.0, {"a": 0.5 * RELEVANCE_PROBE}),
        Smoothing(3.0, 2.0, {"a": 0.5, "b": RELEVANCE_PROBE}),
    ]
    steps = relevance_steps(base, ["a", "b"], 10.0, [6.0, 11.0], steps=(1.0, 2.0))
    # g = (-4, +1): a gets 2^eta, b 2^(-eta sqrt(1/4)), on top of the start's weights
    assert steps == [
        Smoothing(3.0, 2.0, {"a": 0.5 * 2.0, "b": 2.0**-0.5}),
        Smoothing(3.0, 2.0, {"a": 0.5 * 4.0, "b": 0.5}),
    ]
    assert relevance_steps(base, ["a", "b"], 10.0, [10.0, 10.0]) == []
    with pytest.raises(ValueError, match="one probe score per covariate"):
        relevance_steps(base, ["a", "b"], 10.0, [1.0])


def test_groups_fit_the_budget():
    """One probe per covariate while the start, the probes and a step fit; else
    budget - 4 contiguous groups (three steps); a probe or step of a group moves its
    covariates together."""
    names = [f"c{i}" for i in range(20)]
    assert relevance_groups(names[:14], 16) == [[c] for c in names[:14]]
    groups = relevance_groups(names, 16)
    assert len(groups) == 12 and [c for g in groups for c in g] == names
    assert [len(g) for g in groups] == [2] * 8 + [1] * 4
    assert relevance_groups(names[:2], 4) == [["c0"], ["c1"]]
    with pytest.raises(ValueError, match="at least 5 candidates, got 4"):
        relevance_groups(names[:4], 4)
    with pytest.raises(ValueError, match="at least 4 candidates, got 3"):
        relevance_groups(names[:2], 3)
    base = Smoothing()
    probes = relevance_probes(base, [["a", "b"], "c"])
    assert probes[1] == Smoothing(relevance={"a": 2.0, "b": 2.0})
    steps = relevance_steps(base, [["a", "b"], "c"], 10.0, [6.0, 11.0], steps=(2.0,))
    assert steps == [Smoothing(relevance={"a": 4.0, "b": 4.0, "c": 0.5})]


@pytest.mark.slow  # 11-23 s each: the search is opt-in; CI keeps its oracle tests
def test_a_wide_column_is_searched_in_groups():
    """A response with more covariates than the budget allows one by one is searched
    with grouped probes, within the sites' default cap of 16 candidates."""
    rng = np.random.default_rng(2)
    n = 900
    frame = pd.DataFrame(rng.normal(size=(n, 16)), columns=[f"n{i}" for i in range(16)])
    frame["y"] = np.sin(2 * frame["n3"]) + 0.1 * rng.normal(size=n)
    clients = split(frame, [500, 400])
    synth = FITSSynthesizer(seed=0, tune_relevance="y").fit(clients)
    record = synth.tuning_["y"]
    assert len(record["candidates"]) <= 16
    probe = record["candidates"][1]["relevance"]
    assert probe == {"n0": 2.0, "n1": 2.0}  # the first group: two covariates at once
    weights = dict(synth.smoothing_["y"].relevance)
    assert weights["n3"] == max(weights.values()), weights


def _planted(n: int, seed: int) -> pd.DataFrame:
    """y depends on x alone; n1, n2 are noise of the same spread."""
    rng = np.random.default_rng(seed)
    x, n1, n2 = rng.normal(size=(3, n))
    return pd.DataFrame({"n1": n1, "x": x, "n2": n2, "y": np.sin(2 * x) + 0.1 * rng.normal(size=n)})


@pytest.mark.parametrize("cls", [KNNKernel, GaussianKernel])
def test_the_search_weighs_the_relevant_covariate_up(cls):
    """On a table where only x predicts y, the learned weights put x above both noise
    columns, the chosen candidate scores no worse than the start, and the record
    holds every candidate with its summed score."""
    clients = split(_planted(1200, seed=4), [700, 500])
    synth = FITSSynthesizer(cls(), seed=0, tune_relevance="y", relevance_budget=16)
    synth.fit(clients)
    weights = dict(synth.smoothing_["y"].relevance)
    x, n1, n2 = (weights.get(c, 1.0) for c in ("x", "n1", "n2"))
    assert x > 1.0 and x > n1 and x > n2, weights
    record = synth.tuning_["y"]
    assert record["search"] == "relevance" and len(record["candidates"]) <= 16
    scores = record["scores"]
    assert record["chosen"] == int(np.argmin(scores)) and scores[record["chosen"]] < scores[0]
    assert set(synth.smoothing_) == {"y"}  # no other column was searched
    # the learned weights draw what the same weights set by hand draw
    again = FITSSynthesizer(cls(), seed=0, smoothing={"y": synth.smoothing_["y"]})
    assert synth.sample(200).equals(again.fit(clients).sample(200))


@pytest.mark.slow  # see above
def test_search_every_column_and_save(tmp_path):
    """'*' searches every column the kernels draw after the first; the choice is saved
    and a loaded synthesizer samples what the original samples."""
    tables = split(mixed_table(900, seed=5), [500, 400])
    synth = FITSSynthesizer(seed=1, tune_relevance="*").fit(tables)
    assert set(synth.tuning_) == {"x", "o", "c", "y"}
    assert all(t["search"] == "relevance" for t in synth.tuning_.values())
    path = synth.save(tmp_path / "s.pkl")
    expected = synth.sample(100)
    again = FITSSynthesizer.load(path).connect(tables)
    assert again.smoothing_ == synth.smoothing_
    assert again.sample(100).equals(expected)


def test_search_refusals(mixed_clients):
    with pytest.raises(ValueError, match=r"budget of at least 5 candidates, got 4"):
        FITSSynthesizer(seed=0, tune_relevance="y", relevance_budget=4).fit(mixed_clients)
    with pytest.raises(ValueError, match="relevance_budget must be an integer >= 1"):
        FITSSynthesizer(seed=0, tune_relevance="y", relevance_budget=0).fit(mixed_clients)
    with pytest.raises(ValueError, match=r"tune_relevance: \['b'\] are not columns"):
        FITSSynthesizer(seed=0, tune_relevance=["b"]).fit(mixed_clients)
    with pytest.raises(ValueError, match="tune_relevance"):
        FITSSynthesizer(seed=0, tune_relevance=["nope"]).fit(mixed_clients)
    boosted = FITSSynthesizer(
        seed=0, tune_relevance=["y"], column_models={"y": "boosting"}, boosting={"n_trees": 2}
    )
    with pytest.raises(ValueError, match=r"tune_relevance: \['y'\] are not columns"):
        boosted.fit(mixed_clients)
    # the sites' policy caps the candidates per column: a larger search is refused
    policy = SitePolicy(tuning_candidates=8)
    with pytest.raises(Exception, match="tuning_candidates"):
        FITSSynthesizer(seed=0, tune_relevance="y", site_policy=policy).fit(mixed_clients)


@pytest.mark.slow  # see above
def test_a_refusal_by_tuning_candidates_says_what_to_do(mixed_clients):
    """smoothing="auto" spends candidates of the same per-column cap: a site's refusal
    mid-search (an explicit budget of 16 after auto's six) says how many, what budget
    fits the default policy and the other ways out."""
    synth = FITSSynthesizer(seed=0, tune_relevance="y", smoothing="auto", relevance_budget=16)
    with pytest.raises(PolicyError) as info:
        synth.fit(mixed_clients)
    text = str(info.value)
    assert "tuning_candidates" in text and "after the 6 of smoothing='auto'" in text, text
    assert "lower relevance_budget (--relevance-budget; at least 5, at most 10" in text, text
    assert "leave 'y' out of tune_relevance" in text, text
    # the budget it names fits
    FITSSynthesizer(seed=0, tune_relevance="y", smoothing="auto", relevance_budget=10).fit(
        mixed_clients
    )


def test_refusals_come_before_any_tune_round(mixed_clients):
    """A bad budget is refused before the setup round, an unknown column before
    smoothing="auto"'s tune round (which would spend the sites' tuning_candidates)."""
    phases: list[str] = []
    bad = FITSSynthesizer(seed=0, tune_relevance="y", relevance_budget=0)
    with pytest.raises(ValueError, match="relevance_budget must be an integer >= 1"):
        bad.fit(mixed_clients, on_phase=phases.append)
    assert phases == []
    unknown = FITSSynthesizer(seed=0, tune_relevance=["b"], smoothing="auto")
    with pytest.raises(ValueError, match=r"tune_relevance: \['b'\] are not columns"):
        unknown.fit(mixed_clients, on_phase=phases.append)
    assert phases and not any("tune round" in p for p in phases), phases


def test_hand_set_smoothing_weights_are_checked(mixed_clients):
    with pytest.raises(ValueError, match=r"smoothing: relevance\['o'\]: \['y'\] are not columns"):
        FITSSynthesizer(seed=0, smoothing={"o": {"relevance": {"y": 2.0}}}).fit(mixed_clients)


def test_cli_tune_relevance(tmp_path):
    """``fits synthesize --tune-relevance COLUMN --relevance-budget N`` gives the Python
    API's table (a spaced header named without its spaces); a column the kernels do not
    draw, an unknown one or too small a budget is a usage error (exit 2) that says so."""
    from conftest import fits_in_process

    paths = []
    for k, table in enumerate(split(mixed_table(600, seed=3), [350, 250])):
        paths.append(tmp_path / f"site{k}.csv")
        table.rename(columns={"y": " y "}).to_csv(paths[-1], index=False)
    out = tmp_path / "out.csv"

    def run(*extra):
        return fits_in_process("synthesize", *paths, "--rows", 120, "--out", out, *extra)

    res = run("--tune-relevance", "y", "--relevance-budget", "8")
    assert res.returncode == 0, res.stderr
    got = pd.read_csv(out)
    out.unlink()
    synth = FITSSynthesizer(seed=0, tune_relevance=[" y "], relevance_budget=8)
    synth.fit({p.stem: pd.read_csv(p) for p in paths})
    assert synth.smoothing_[" y "].relevance  # weights were learned
    pd.testing.assert_frame_equal(got, synth.sample(120), check_dtype=False)
    for extra, says in [
        (("--tune-relevance", "b"), "--tune-relevance: ['b'] are not columns the kernels draw"),
        (("--tune-relevance", "zz"), "--tune-relevance: no column ['zz']"),
        (("--tune-relevance", "y", "--tune-relevance", " y "), "--tune-relevance names column"),
        (("--tune-relevance", "y", "--relevance-budget", "4"), "needs a budget of at least 5"),
    ]:
        res = run(*extra)
        assert res.returncode == 2, (extra, res.stderr)
        assert says in " ".join(res.stderr.split()), (extra, res.stderr)
        assert not out.exists()


def test_star_skips_ruled_columns_and_own_indicators():
    """'*' leaves out a column a function rule draws (its kernel only serves a
    combination the rule does not cover); a column's own indicators ('y (missing)') are
    no covariates of its search (constant where it is fitted)."""
    rng = np.random.default_rng(6)
    n = 900
    x = rng.normal(size=n)
    o = rng.integers(1, 4, n)
    y = x + o + 0.3 * rng.normal(size=n)
    y[rng.random(n) < 0.1] = np.nan
    frame = pd.DataFrame({"x": x, "o": o, "band": np.where(o > 1, "high", "low"), "y": y})
    synth = FITSSynthesizer(seed=0, tune_relevance="*").fit(split(frame, [500, 400]))
    # y = x + o + noise, o >= 1: y >= x in every row (an order rule; y is drawn as the
    # difference, by a kernel whose relevance '*' searches)
    assert [(r.column, r.kind) for r in synth.schema_.rules] == [
        ("band", "function"),
        ("y", "order"),
    ]
    assert "band" not in synth.tuning_ and {"o", "y"} <= set(synth.tuning_)
    assert "y (missing)" in synth.coordinator.schema.order
    assert synth.coordinator.relevance_covariates("y") == ["x", "o", "band"]


@pytest.mark.slow  # see above
def test_the_default_budget_is_what_the_sites_default_cap_leaves():
    """relevance_budget=None (the default): 16 candidates per column, or 10 after
    smoothing="auto"'s six, so both searches fit the sites' default tuning_candidates
    (16) on a column of 8 covariates (it failed half-way with a budget of 16)."""
    rng = np.random.default_rng(8)
    n = 800
    frame = pd.DataFrame(rng.normal(size=(n, 8)), columns=[f"n{i}" for i in range(8)])
    frame["y"] = np.sin(2 * frame["n5"]) + 0.1 * rng.normal(size=n)
    clients = split(frame, [450, 350])
    both = FITSSynthesizer(seed=0, smoothing="auto", tune_relevance="y").fit(clients)
    record = both.tuning_["y"]
    assert record["search"] == "relevance" and len(record["candidates"]) <= 10
    alone = FITSSynthesizer(seed=0, tune_relevance="y").fit(clients)
    assert 10 < len(alone.tuning_["y"]["candidates"]) <= 16
