"""FITSSynthesizer as a scikit-learn estimator, and persistence without site rows."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from fits import FITSSynthesizer, GaussianKernel, Schema
from fits.deploy.inprocess import build_federation
from fits.synthesizer import NotConnectedError

from conftest import mixed_table, split

KERNELS = ["knn", "gaussian", "knn"]
PLANTED = 123456.789  # a continuous value held by one row of one site only


@pytest.fixture(scope="module")
def sites() -> list[pd.DataFrame]:
    frame = mixed_table(900, seed=21)
    rng = np.random.default_rng(5)
    frame["amount"] = rng.uniform(0.0, 1e6, size=len(frame)).round(3)
    frame.loc[17, "amount"] = PLANTED
    assert frame["amount"].min() < PLANTED < frame["amount"].max()
    assert (frame["amount"] == PLANTED).sum() == 1
    return split(frame, [450, 300, 150])


def _row_values(tables: list[pd.DataFrame], schema: Schema) -> set[float]:
    """Every continuous value held by a row, except those the schema legitimately
    names (bounds and point masses)."""
    named = set()
    for spec in schema.columns:
        named |= {spec.lower, spec.upper, spec.point_mass}
    values = set()
    for t in tables:
        for spec in schema.columns:
            if spec.kind == "continuous":
                values |= set(t[spec.name].dropna().astype(float).tolist())
    return values - named


def _holds_any(blob: bytes, values: set[float]) -> list[float]:
    return [
        v
        for v in values
        if struct.pack("<d", v) in blob or struct.pack(">d", v) in blob or repr(v).encode() in blob
    ]


def test_params_are_stored_as_given_and_round_trip():
    kinds = {"o": "ordinal"}
    order = ("b", "x", "o", "c", "y")
    kernel = GaussianKernel(bandwidth=0.3)
    synth = FITSSynthesizer(kernel, seed=4, kinds=kinds, order=order, grid_size=120)
    params = synth.get_params()
    assert params["kinds"] is kinds and params["order"] is order and params["kernel"] is kernel
    assert params["grid_size"] == 120 and params["secure_aggregation"] is False
    assert not hasattr(synth, "coordinator_options")
    again = FITSSynthesizer().set_params(**params)
    assert again.get_params() == params
    assert synth.set_params(ridge=0.5) is synth and synth.ridge == 0.5


def test_clone_gives_an_unfitted_copy_with_the_same_params(mixed_clients):
    synth = FITSSynthesizer(KERNELS, seed=2, n_jobs=1).fit(mixed_clients)
    copy = clone(synth)
    assert copy is not synth
    assert copy.get_params() == synth.get_params()
    assert not hasattr(copy, "schema_")
    with pytest.raises(NotFittedError):
        copy.sample(5)
    # the clone fits to the same synthesizer
    pd.testing.assert_frame_equal(copy.fit(mixed_clients).sample(200), synth.sample(200))


def test_bad_params_are_caught_at_fit_not_at_construction(mixed_clients):
    synth = FITSSynthesizer(grid_size=1, kinds="o", seed="zero")  # stored as given
    with pytest.raises(TypeError, match="seed"):
        synth.fit(mixed_clients)
    with pytest.raises(TypeError, match="kinds"):
        synth.set_params(seed=0).fit(mixed_clients)
    with pytest.raises(ValueError, match="grid_size"):
        synth.set_params(kinds=None).fit(mixed_clients)


def test_a_negative_or_boolean_seed_is_refused_naming_seed(mixed_clients):
    """seed=-1 at fit and sample(seed=-1 or True) are refused with a message that names
    ``seed``, not numpy's "expected non-negative integer" (or, for True, accepted as 1)."""
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0 or None, got -1"):
        FITSSynthesizer(seed=-1).fit(mixed_clients)
    synth = FITSSynthesizer(seed=0).fit(mixed_clients)
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0 or None, got -1"):
        synth.sample(5, seed=-1)
    with pytest.raises(TypeError, match=r"seed must be an integer >= 0 or None, got True"):
        synth.sample(5, seed=True)
    with pytest.raises(TypeError, match=r"seed must be an integer >= 0 or None, got 1.5"):
        next(synth.iter_sample(5, seed=1.5))
    assert len(synth.sample(5, seed=np.int64(3))) == 5


def test_sample_before_fit_raises_not_fitted_with_the_fix():
    with pytest.raises(NotFittedError, match=r"call fit\(tables\)"):
        FITSSynthesizer(seed=0).sample(10)
    with pytest.raises(NotFittedError):
        FITSSynthesizer().connect([])


@pytest.mark.parametrize("n_jobs", [1, 3])
def test_saved_and_pickled_bytes_hold_no_site_row(sites, tmp_path, n_jobs):
    synth = FITSSynthesizer(KERNELS, seed=8, n_jobs=n_jobs).fit(sites)
    synth.sample(50)  # rounds have run (threads started, caches filled)
    path = synth.save(tmp_path / "synth.pkl")
    saved = path.read_bytes()
    pickled = pickle.dumps(synth)
    values = _row_values(sites, synth.schema_)
    assert PLANTED in values and len(values) > 1000
    # the search would find a planted row: the live federation's rows hold it
    assert _holds_any(pickle.dumps(sites), {PLANTED})
    for blob in (saved, pickled):
        assert not _holds_any(blob, {PLANTED})
        assert not _holds_any(blob, values)
        assert b"123456.789" not in blob
    # the synthesizer still works after being pickled
    assert len(synth.sample(20)) == 20


def test_loaded_synthesizer_samples_only_after_reconnecting(sites, tmp_path):
    synth = FITSSynthesizer(KERNELS, seed=3, n_jobs=1).fit(sites)
    synth.save(tmp_path / "s.pkl")
    loaded = FITSSynthesizer.load(tmp_path / "s.pkl")
    assert loaded.get_params() == synth.get_params()
    assert loaded.schema_ == synth.schema_
    with pytest.raises(NotConnectedError, match=r"connect\(tables\)"):
        loaded.sample(10)
    unpickled = pickle.loads(pickle.dumps(synth))
    with pytest.raises(NotConnectedError):
        unpickled.sample(10)
    assert loaded.connect(sites) is loaded
    # bit for bit: the default stream, then an explicit seed
    pd.testing.assert_frame_equal(loaded.sample(400), synth.sample(400))
    pd.testing.assert_frame_equal(loaded.sample(300, seed=11), synth.sample(300, seed=11))
    again = unpickled.connect(sites).sample(200, seed=1)
    pd.testing.assert_frame_equal(again, synth.sample(200, seed=1))


def test_saving_after_sampling_continues_the_stream(sites, tmp_path):
    """A synthesizer without a seed, saved after it has sampled, continues its stream."""
    synth = FITSSynthesizer(KERNELS, n_jobs=1).fit(sites)
    assert synth.seed is None and synth.entropy_ > 0
    synth.sample(100)
    loaded = FITSSynthesizer.load(synth.save(tmp_path / "s.pkl"))
    loaded.connect(dict(zip(["client 1", "client 2", "client 3"], sites, strict=True)))
    pd.testing.assert_frame_equal(loaded.sample(300), synth.sample(300))


def test_connect_through_a_transport(sites):
    synth = FITSSynthesizer(KERNELS, seed=6).fit(sites)
    loaded = pickle.loads(pickle.dumps(synth))
    _, transport = build_federation(sites, KERNELS, n_jobs=1)
    loaded.connect(transport)
    pd.testing.assert_frame_equal(loaded.sample(200), synth.sample(200))


def test_connect_refuses_other_sites(sites):
    synth = FITSSynthesizer(KERNELS, seed=6, n_jobs=1).fit(sites)
    loaded = pickle.loads(pickle.dumps(synth))
    with pytest.raises(ValueError, match="call fit"):
        loaded.connect([sites[0], sites[1], sites[2].iloc[:100]])
    with pytest.raises(ValueError, match="call fit"):
        loaded.connect(build_federation(sites[:2], "knn", n_jobs=1)[1])


def test_load_refuses_other_files(tmp_path):
    bad = tmp_path / "x.pkl"
    bad.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match="not a saved FITSSynthesizer"):
        FITSSynthesizer.load(bad)
    bad.write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="x.pkl"):
        FITSSynthesizer.load(bad)


def test_identifier_columns_are_not_saved(sites, tmp_path):
    """An "id" column's values (fresh surrogates in the output) never reach the bytes."""
    with_ids = [t.assign(pid=[f"patient-{k}-{i:05d}" for i in range(len(t))]) for k, t in
                enumerate(sites)]  # fmt: skip
    synth = FITSSynthesizer(KERNELS, seed=2, n_jobs=1, kinds={"pid": "id"}).fit(with_ids)
    for blob in (synth.save(tmp_path / "s.pkl").read_bytes(), pickle.dumps(synth)):
        assert b"patient-" not in blob
    loaded = FITSSynthesizer.load(tmp_path / "s.pkl").connect(with_ids)
    pd.testing.assert_frame_equal(loaded.sample(100), synth.sample(100))


def test_load_of_no_file_or_a_folder_says_so(tmp_path):
    """A missing path or a folder raised a bare FileNotFoundError / IsADirectoryError;
    now the library's ValueError, naming the path and the fix."""
    with pytest.raises(ValueError, match=r"load: no file .*nothere\.pkl.*path that save wrote"):
        FITSSynthesizer.load(tmp_path / "nothere.pkl")
    with pytest.raises(ValueError, match=r"load: .* is a folder.*synth\.pkl"):
        FITSSynthesizer.load(tmp_path)
