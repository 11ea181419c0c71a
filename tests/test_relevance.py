"""Relevance weights per response and covariate (``Kernel(relevance=...)``).

Their estimate is checked against the pooled local-linear fit written from the
definitions in ``test_equivalence.py`` (``test_relevance_weights_equal_pooled``); here:
what is refused, how engine columns take their column's weight, that the tune round
scores the weighted kernel, and the command-line option.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, GaussianKernel, KNNKernel

from conftest import mixed_table, split


@pytest.mark.parametrize(
    ("relevance", "error", "says"),
    [
        ({"y": {"x": -1.0}}, ValueError, "must be a number >= 0"),
        ({"y": {"x": float("nan")}}, ValueError, "must be a number >= 0"),
        ({"y": {"x": float("inf")}}, ValueError, "must be a number >= 0"),
        ({"y": {"x": True}}, ValueError, "must be a number >= 0"),
        ({"y": {"x": "2"}}, ValueError, "must be a number >= 0"),
        ({"y": [1.0]}, TypeError, "must be a mapping covariate -> weight"),
        ([("y", {})], TypeError, "relevance must be a mapping"),
    ],
)
def test_bad_weights_are_refused(relevance, error, says):
    for kernel in (KNNKernel, GaussianKernel):
        with pytest.raises(error, match=says):
            kernel(relevance=relevance)


def test_engine_columns_take_their_columns_weight():
    """An indicator ('x (at point mass)', 'x (missing)') takes x's weight unless it is
    named itself, and as a response x's weights; no weights for the response, or all
    1, is the plain kernel (None)."""
    kernel = KNNKernel(relevance={"y": {"x": 0.0, "o": 3.0, "x (missing)": 2.0}})
    names = ["x", "x (at point mass)", "x (missing)", "o", "c"]
    np.testing.assert_array_equal(kernel.relevance_for("y", names), [0.0, 0.0, 2.0, 3.0, 1.0])
    assert kernel.relevance_for("o", ["x"]) is None
    # the response's own indicators are drawn with its weights (they had the plain
    # kernel: whether y is at its point mass ignored the weights that y's values used)
    own = ["x", "o", "y (missing)"]
    for flag in ("y (at point mass)", "y (missing)"):
        np.testing.assert_array_equal(kernel.relevance_for(flag, own), [0.0, 3.0, 1.0])
    assert KNNKernel(relevance={"y": {"x": 1.0}}).relevance_for("y", names) is None
    # keyword only: the subclasses' positional parameters are where they were
    assert KNNKernel(1.0, 0.1, {}, 300).budget == 300


def test_a_users_column_named_like_an_indicator_keeps_its_own_weight():
    """A user's own column 'x (missing)' (x has no missing value) is no indicator of x:
    it took x's weight, judged by its name; the sites now ask the column's spec."""
    rng = np.random.default_rng(1)
    x, f = rng.normal(size=600), rng.normal(size=600)
    table = pd.DataFrame({"x": x, "x (missing)": f, "y": 3 * f + x + rng.normal(size=600)})
    sites = split(table, [300, 300])
    draws = [
        FITSSynthesizer(GaussianKernel(relevance=relevance), seed=0).fit(sites).sample(200)
        for relevance in ({"y": {"x": 0.0}}, {"y": {"x": 0.0, "x (missing)": 1.0}})
    ]
    pd.testing.assert_frame_equal(draws[0], draws[1])
    indicates = {"x (at point mass)": "x"}
    names = ["x", "x (at point mass)", "x (missing)"]
    kernel = KNNKernel(relevance={"y": {"x": 0.0}})
    np.testing.assert_array_equal(kernel.relevance_for("y", names, indicates), [0, 0, 1])


@pytest.mark.parametrize(
    ("relevance", "says"),
    [
        ({"zz": {"x": 2.0}}, r"relevance\['zz'\]: 'zz' is no column"),
        ({"b": {"x": 2.0}}, r"'b' is the chain's first column"),
        ({"x": {"y": 2.0}}, r"\['y'\] are not columns before 'x' in the chain"),
        ({"y": {"nope": 0.0}}, r"\['nope'\] are not columns before 'y'"),
    ],
)
def test_fit_refuses_weights_that_would_do_nothing(mixed_clients, relevance, says):
    synth = FITSSynthesizer(KNNKernel(relevance=relevance), seed=0)
    with pytest.raises(ValueError, match=says):
        synth.fit(mixed_clients)


def test_fit_refuses_weights_for_boosted_or_rule_set_columns(mixed_clients):
    """A boosted response is not drawn by a kernel, and a column an affine rule sets is
    out of the engine's chain: weights for them did nothing, silently."""
    synth = FITSSynthesizer(
        KNNKernel(relevance={"y": {"x": 2.0}}), column_models={"y": "boosting"}, seed=0
    )
    with pytest.raises(ValueError, match=r"relevance\['y'\]: 'y' is drawn from its boosted"):
        synth.fit(mixed_clients)
    ruled = [
        t.assign(x3=3.0 * t["x"] + 1.0)[["b", "x", "x3", "o", "c", "y"]] for t in mixed_clients
    ]
    for relevance in ({"y": {"x3": 0.0}}, {"x3": {"b": 2.0}}):
        synth = FITSSynthesizer(KNNKernel(relevance=relevance), seed=0)
        with pytest.raises(ValueError, match=r"\['x3'\] are set by the schema's affine rules"):
            synth.fit(ruled)
    rules_off = FITSSynthesizer(KNNKernel(relevance={"y": {"x3": 0.0}}), rules=False, seed=0)
    rules_off.fit(ruled)
    # a sum rule's column is set by it, never drawn by a kernel (the weights did nothing)
    rng = np.random.default_rng(0)
    parts = pd.DataFrame({"a": rng.integers(0, 50, 600), "b": rng.integers(0, 50, 600)})
    summed = split(parts.assign(c=rng.normal(size=600), tot=parts["a"] + parts["b"]), [300, 300])
    synth = FITSSynthesizer(KNNKernel(relevance={"tot": {"c": 5.0}}), seed=0)
    with pytest.raises(ValueError, match=r"'tot' is set by the schema's sum rule"):
        synth.fit(summed)


def test_knn_refuses_every_covariate_at_weight_0():
    """With every covariate of a response at weight 0, every row is at distance 0 and
    a KNN site's c_k nearest rows were whichever its search returned first: on sites
    sorted by a, y = a^2 came out with twice its mean.  Refused; the Gaussian kernel's
    weights are then flat, whatever the row order."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=4000)
    table = pd.DataFrame({"a": a, "y": a**2 + 0.1 * rng.normal(size=4000)})
    sites = [t.sort_values("a", ignore_index=True) for t in split(table, [2000, 2000])]
    synth = FITSSynthesizer(KNNKernel(relevance={"y": {"a": 0.0}}), seed=0)
    with pytest.raises(ValueError, match=r"relevance\['y'\]: every covariate of 'y' has weight 0"):
        synth.fit(sites)
    got = FITSSynthesizer(GaussianKernel(relevance={"y": {"a": 0.0}}), seed=0).fit(sites)
    assert abs(got.sample(3000)["y"].mean() - table["y"].mean()) < 0.1


def test_fit_refuses_weights_for_identifiers(mixed_clients):
    """An identifier is not modelled: a weight for it, or for it as a response, did
    nothing (as a response, the check that follows failed with 'is not in list')."""
    tables = [
        t.assign(pid=[f"p{k}-{i}" for i in range(len(t))]) for k, t in enumerate(mixed_clients)
    ]
    tables = [t[["b", "pid", "x", "o", "c", "y"]] for t in tables]
    for relevance in ({"y": {"pid": 0.0}}, {"pid": {"b": 2.0}}):
        synth = FITSSynthesizer(KNNKernel(relevance=relevance), kinds={"pid": "id"}, seed=0)
        with pytest.raises(ValueError, match=r"\['pid'\] are identifiers"):
            synth.fit(tables)


def test_weights_change_the_draw_and_ones_do_not(mixed_clients):
    """The weights reach every site's kernel for their response: the table differs, and
    the columns before the response are drawn as without them (same seed)."""
    plain = FITSSynthesizer(KNNKernel(), seed=1).fit(mixed_clients).sample(400)
    ones = FITSSynthesizer(KNNKernel(relevance={"y": {"x": 1.0}}), seed=1)
    pd.testing.assert_frame_equal(ones.fit(mixed_clients).sample(400), plain)
    weighted = FITSSynthesizer(KNNKernel(relevance={"y": {"b": 0.0, "x": 3.0}}), seed=1)
    got = weighted.fit(mixed_clients).sample(400)
    pd.testing.assert_frame_equal(got[["b", "x", "o", "c"]], plain[["b", "x", "o", "c"]])
    assert not np.allclose(got["y"], plain["y"])


@pytest.mark.parametrize("kernel", [KNNKernel, GaussianKernel])
def test_a_huge_weight_on_a_nominal_covariate(mixed_clients, kernel):
    """gamma_q^a underflows to 0 from a of a few hundred (0.1^400): the rate -log 0
    made every site's upload 'not finite'; the fit and the draw now work, and the
    weighted nominal covariate still counts (the draw differs from a weight of 1)."""
    plain = FITSSynthesizer(kernel(), seed=3).fit(mixed_clients).sample(300)
    for weight in (400.0, 1e12):
        synth = FITSSynthesizer(kernel(relevance={"y": {"c": weight, "b": weight}}), seed=3)
        got = synth.fit(mixed_clients).sample(300)
        assert np.isfinite(got["y"]).all()
        assert not np.allclose(got["y"], plain["y"])


def test_the_tune_round_scores_the_weighted_kernel():
    """With ``smoothing="auto"``, the sites' held-out scores of y are those of the
    weighted kernel (they differ from the plain kernel's; the other columns' are the
    same)."""
    clients = split(mixed_table(900, seed=5), [500, 400])
    scores = {}
    for label, relevance in (("plain", {}), ("weighted", {"y": {"x": 0.0}})):
        # near-linear off: with it on, y is drawn as its residual about the line in x,
        # which x no longer predicts, so leaving x out would not score worse
        synth = FITSSynthesizer(
            KNNKernel(relevance=relevance), seed=2, smoothing="auto", near_linear=False
        )
        synth.fit(clients)
        scores[label] = {c: t["scores"] for c, t in synth.coordinator.tuning.items()}
    assert scores["plain"]["o"] == scores["weighted"]["o"]
    assert scores["plain"]["y"] != scores["weighted"]["y"]
    # x carries most of y (y = 2x + ...): leaving it out of the kernel scores worse
    assert min(scores["weighted"]["y"]) > min(scores["plain"]["y"])


def test_cli_relevance(tmp_path):
    """``fits synthesize --relevance RESPONSE:COVARIATE=WEIGHT`` gives the Python API's
    table with those weights (a spaced header named without its spaces); what would do
    nothing or cannot be read is a usage error (exit 2) that says so."""
    from conftest import fits_in_process

    paths = []
    for k, table in enumerate(split(mixed_table(600, seed=3), [350, 250])):
        paths.append(tmp_path / f"site{k}.csv")
        table.rename(columns={"x": " x "}).to_csv(paths[-1], index=False)
    out = tmp_path / "out.csv"

    def run(*extra):
        return fits_in_process("synthesize", *paths, "--rows", 120, "--out", out, *extra)

    res = run("--relevance", "y:x=3", "--relevance", "y:b=0")
    assert res.returncode == 0, res.stderr
    got = pd.read_csv(out)
    out.unlink()
    kernel = KNNKernel(relevance={"y": {" x ": 3.0, "b": 0.0}})
    synth = FITSSynthesizer(kernel, seed=0).fit({p.stem: pd.read_csv(p) for p in paths})
    pd.testing.assert_frame_equal(got, synth.sample(120), check_dtype=False)
    for extra, says in [
        (("--relevance", "y=3"), "write RESPONSE:COVARIATE=WEIGHT"),
        (("--relevance", "y:x=-1"), "the weight must be a number >= 0"),
        (("--relevance", "y:x=2", "--relevance", "y: x=1"), "names y:x twice"),
        (("--relevance", "zz:x=2"), "--relevance: no column ['zz']"),
        (("--relevance", "y:zz=2"), "--relevance: no column ['zz']"),
        (("--relevance", "x:y=2"), "['y'] are not columns before ' x ' in the chain"),
        (("--relevance", "b:x=2"), "'b' is the chain's first column"),
    ]:
        res = run(*extra)
        assert res.returncode == 2, (extra, res.stderr)
        assert says in " ".join(res.stderr.split()), (extra, res.stderr)
        assert not out.exists()


def test_cli_relevance_of_a_response_with_a_colon(tmp_path):
    """A response whose header holds a ':' ends where that header does ('y: two:x=3');
    it ended at the first ':', so such a column could not be named ('no column ['y']')."""
    from conftest import fits_in_process

    paths = []
    for k, table in enumerate(split(mixed_table(600, seed=3), [350, 250])):
        paths.append(tmp_path / f"site{k}.csv")
        table.rename(columns={"y": "y: two", "x": "x:1"}).to_csv(paths[-1], index=False)
    out = tmp_path / "out.csv"
    res = fits_in_process(
        "synthesize", *paths, "--rows", 100, "--out", out, "--relevance", "y: two:x:1=3"
    )
    assert res.returncode == 0, res.stderr
    kernel = KNNKernel(relevance={"y: two": {"x:1": 3.0}})
    synth = FITSSynthesizer(kernel, seed=0).fit({p.stem: pd.read_csv(p) for p in paths})
    pd.testing.assert_frame_equal(pd.read_csv(out), synth.sample(100), check_dtype=False)


def test_a_kernel_pickled_before_relevance_loads():
    """A saved synthesizer's kernel from before ``relevance`` existed (its pickled state
    lacks the field) loads as the paper's kernel; one with weights keeps them."""
    import pickle

    for cls in (KNNKernel, GaussianKernel):
        old = cls(ordinal_penalty=2.0)
        state = dict(old.__dict__)
        del state["relevance"]
        loaded = cls.__new__(cls)
        loaded.__setstate__(state)
        assert loaded == old and loaded.relevance_for("y", ["x"]) is None
    kept = pickle.loads(pickle.dumps(KNNKernel(relevance={"y": {"x": 0.5}})))
    np.testing.assert_array_equal(kept.relevance_for("y", ["x", "b"]), [0.5, 1.0])
