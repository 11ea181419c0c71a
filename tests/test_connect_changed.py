"""connect() refuses sites whose data changed since the fit (same names, same row
counts): each site's setup description is kept at fit as a SHA-256 digest."""

from __future__ import annotations

import hashlib
import json
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import MAX_ORDINAL_LEVELS, DataNote, describe_table, description_digest
from fits.deploy.inprocess import build_federation

from conftest import mixed_table, split

KERNELS = ["knn", "gaussian", "knn"]
NAMES = ["client 1", "client 2", "client 3"]


@pytest.fixture(scope="module")
def sites() -> list[pd.DataFrame]:
    frame = mixed_table(600, seed=13)
    # two sites hold 20 levels each, 40 over all: continuous, though each site alone
    # would call it ordinal (so its description depends on what the setup declares)
    frame["f"] = np.r_[np.arange(300) % MAX_ORDINAL_LEVELS, 20 + np.arange(300) % 20] * 1.0
    return split(frame, [300, 200, 100])


@pytest.fixture(scope="module")
def fitted(sites) -> FITSSynthesizer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)  # f's note on its point mass
        return FITSSynthesizer(KERNELS, seed=7, n_jobs=1).fit(sites)


def _loaded(synth: FITSSynthesizer, tmp_path) -> FITSSynthesizer:
    return FITSSynthesizer.load(synth.save(tmp_path / "synth.pkl"))


def test_digest_is_a_sha256_of_the_canonical_description():
    desc = {"n_rows": 3, "columns": {"x": {"min": 0.1, "max": 2.0}}, "order": ["x"]}
    text = '{"columns":{"x":{"max":2.0,"min":0.1}},"n_rows":3}'  # sorted, no order
    assert description_digest(desc) == hashlib.sha256(text.encode()).hexdigest()
    # as the coordinator receives it (a JSON string), with exact floats
    again = json.loads(json.dumps({"order": ["x"], **desc}))
    assert description_digest(again) == description_digest(desc)
    assert description_digest({**desc, "order": ["y", "x"]}) == description_digest(desc)
    other = {"n_rows": 3, "columns": {"x": {"min": 0.1, "max": 2.0000000000000004}}}
    assert description_digest(other) != description_digest(desc)


def test_fit_keeps_one_digest_per_site_of_its_description(sites, fitted):
    assert list(fitted.site_digests_) == NAMES
    assert fitted.setup_declared_ == {}  # no kinds, no schema: nothing declared
    for table, name in zip(sites, NAMES, strict=True):
        desc = json.loads(json.dumps(describe_table(table, {}, client=name)))
        assert fitted.site_digests_[name] == description_digest(desc)
        assert len(fitted.site_digests_[name]) == 64


def test_digests_are_the_same_across_fits_and_differ_with_the_data(sites, fitted):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        again = FITSSynthesizer("knn", seed=99, n_jobs=1).fit(sites)
        changed = [sites[0], sites[1].assign(y=sites[1]["y"] + 1.0), sites[2]]
        other = FITSSynthesizer("knn", seed=99, n_jobs=1).fit(changed)
    assert again.site_digests_ == fitted.site_digests_
    assert other.site_digests_["client 1"] == fitted.site_digests_["client 1"]
    assert other.site_digests_["client 2"] != fitted.site_digests_["client 2"]
    assert other.site_digests_["client 3"] == fitted.site_digests_["client 3"]


def test_a_loaded_synthesizer_reconnects_to_the_same_sites_bit_for_bit(sites, fitted, tmp_path):
    loaded = _loaded(fitted, tmp_path)
    assert loaded.site_digests_ == fitted.site_digests_
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no note: the check was made
        loaded.connect(sites)
    pd.testing.assert_frame_equal(loaded.sample(300, seed=4), fitted.sample(300, seed=4))
    # f is continuous in the schema but was described undeclared at fit: connect sends
    # the fit's declarations, so the unchanged sites' descriptions match (declared as
    # the schema has it, site 1 would describe f otherwise: no value set, a point mass)
    assert fitted.schema_["f"].kind == "continuous"
    by_schema = {c.name: {"kind": c.kind} for c in fitted.schema_.columns}
    desc = json.loads(json.dumps(describe_table(sites[0], by_schema, client="client 1")))
    assert description_digest(desc) != fitted.site_digests_["client 1"]


def test_a_value_beyond_a_column_maximum_is_refused_naming_the_site(sites, fitted, tmp_path):
    loaded = _loaded(fitted, tmp_path)
    edited = sites[1].copy()
    edited.loc[5, "x"] = float(edited["x"].max()) + 1.0  # same rows, a new maximum
    with pytest.raises(
        ValueError, match=r"data at site 'client 2' \(column 'x'\) changed since"
    ) as err:
        loaded.connect([sites[0], edited, sites[2]])
    assert "call fit() instead" in str(err.value)
    assert "client 1" not in str(err.value) and "client 3" not in str(err.value)
    assert loaded._coordinator is None  # closed: sampling asks to connect again
    # the unchanged sites reconnect afterwards
    loaded.connect(sites)
    pd.testing.assert_frame_equal(loaded.sample(100, seed=2), fitted.sample(100, seed=2))


def test_a_replaced_category_is_refused_naming_every_changed_site(sites, fitted, tmp_path):
    loaded = pickle.loads(pickle.dumps(fitted))
    renamed = [t.assign(c=t["c"].replace("west", "east")) for t in sites]
    with pytest.raises(
        ValueError, match=r"sites 'client 1' \(column 'c'\), 'client 2' \(column 'c'\), 'client 3'"
    ):
        loaded.connect(renamed)
    edited = sites[2].copy()
    edited.loc[0, "c"] = "east"  # a category no site had
    with pytest.raises(ValueError, match=r"site 'client 3' \(column 'c'\) changed since fit"):
        loaded.connect(dict(zip(NAMES, [sites[0], sites[1], edited], strict=True)))


def test_a_changed_site_behind_a_transport_is_refused(sites, fitted):
    loaded = pickle.loads(pickle.dumps(fitted))
    edited = sites[0].assign(o=sites[0]["o"].replace(5, 6))
    _, transport = build_federation([edited, sites[1], sites[2]], KERNELS, n_jobs=1)
    try:
        with pytest.raises(ValueError, match=r"site 'client 1' \(column 'o'\) changed since"):
            loaded.connect(transport)
    finally:
        transport.close()


def test_other_sites_are_still_refused_by_their_row_counts(sites, fitted):
    loaded = pickle.loads(pickle.dumps(fitted))
    with pytest.raises(ValueError, match=r"needs the sites this synthesizer was fitted on"):
        loaded.connect([sites[0], sites[1], sites[2].iloc[:50]])


def test_an_edit_within_every_range_is_not_seen(sites, fitted):
    """The documented limit: the digest covers the description, not the rows."""
    loaded = pickle.loads(pickle.dumps(fitted))
    edited = sites[0].copy()
    x = edited["x"]
    inner = int(((x > x.min()) & (x < x.max())).to_numpy().argmax())
    edited.loc[inner, "x"] = float(x.iloc[inner]) + 1e-9  # min, max and decimals kept
    assert description_digest(describe_table(edited)) == description_digest(
        describe_table(sites[0])
    )
    loaded.connect([edited, sites[1], sites[2]])  # accepted: the check cannot see it


def test_a_save_with_one_digest_per_site_checks_the_whole_description(sites, fitted):
    old = pickle.loads(pickle.dumps(fitted))
    del old.site_column_digests_  # as saved before the per-column digests
    old.connect(sites)
    edited = sites[2].copy()
    edited.loc[0, "c"] = "east"
    with pytest.raises(ValueError, match=r"data at site 'client 3' changed since fit"):
        old.connect([sites[0], sites[1], edited])


def test_an_old_save_without_digests_connects_with_a_note(sites, fitted, tmp_path):
    old = pickle.loads(pickle.dumps(fitted))
    del old.site_digests_, old.setup_declared_  # as saved before digests were kept
    loaded = _loaded(old, tmp_path)
    assert not hasattr(loaded, "site_digests_")
    with pytest.warns(DataNote, match=r"cannot be checked"):
        loaded.connect(sites)
    pd.testing.assert_frame_equal(loaded.sample(200, seed=5), fitted.sample(200, seed=5))


def test_the_check_holds_through_a_flower_transport(tmp_path, monkeypatch):
    """connect() over Flower (its Grid stood in for, as in tests/test_flower.py): the
    coordinator side is shared, so a changed site is refused there too."""
    pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")
    from flwr.supercore.task_identity import TaskIdentity
    from test_flower import FakeGrid

    from fits.deploy.flower import FlowerTransport

    for attr, value in (("_run_id", 1), ("_node_id", 1), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, attr, value)
    frame = mixed_table(450, seed=3)
    paths = {}
    parts = split(frame, [200, 150, 100])
    for name, part in zip(["site-a", "site-b", "site-c"], parts, strict=True):
        paths[name] = tmp_path / f"{name}.csv"
        part.to_csv(paths[name], index=False)

    def transport(files: dict) -> FlowerTransport:
        grid = FakeGrid(
            [{"data-path": str(p), "name": n, "kernel": "knn"} for n, p in files.items()]
        )
        return FlowerTransport(grid, grid.get_node_ids())

    synth = FITSSynthesizer(seed=5).fit(transport(paths))
    assert list(synth.site_digests_) == ["site-a", "site-b", "site-c"]
    loaded = pickle.loads(pickle.dumps(synth)).connect(transport(paths))
    pd.testing.assert_frame_equal(loaded.sample(150, seed=1), synth.sample(150, seed=1))
    edited = pd.read_csv(paths["site-b"])
    edited.loc[3, "y"] = float(edited["y"].max()) + 5.0
    changed = {**paths, "site-b": tmp_path / "site-b-edited.csv"}
    edited.to_csv(changed["site-b"], index=False)
    with pytest.raises(ValueError, match=r"data at site 'site-b' \(column 'y'\) changed since"):
        pickle.loads(pickle.dumps(synth)).connect(transport(changed))


def test_under_secure_aggregation_the_descriptions_are_in_the_clear(sites):
    """The setup description is not masked (the public keys, fresh each run, travel
    beside it as arrays): the same check, the same digests as without it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        synth = FITSSynthesizer("knn", seed=3, n_jobs=1, secure_aggregation=True).fit(sites)
        plain = FITSSynthesizer("knn", seed=3, n_jobs=1).fit(sites)
    assert synth.site_digests_ == plain.site_digests_
    loaded = pickle.loads(pickle.dumps(synth)).connect(sites)
    pd.testing.assert_frame_equal(loaded.sample(100, seed=6), synth.sample(100, seed=6))
    edited = sites[0].copy()
    edited.loc[0, "c"] = "east"
    with pytest.raises(ValueError, match=r"site 'client 1' \(column 'c'\) changed since fit"):
        pickle.loads(pickle.dumps(synth)).connect([edited, sites[1], sites[2]])


def test_the_same_values_in_pyarrow_dtypes_connect_bit_for_bit(sites, fitted):
    """Only how pandas stores a column differs (double[pyarrow], string[pyarrow], whole
    numbers with gaps read as int64[pyarrow]): the same data, so connect() accepts it."""
    arrow = [t.convert_dtypes(dtype_backend="pyarrow") for t in sites]
    loaded = pickle.loads(pickle.dumps(fitted)).connect(arrow)
    pd.testing.assert_frame_equal(loaded.sample(200, seed=3), fitted.sample(200, seed=3))
    one = [sites[0].astype({"x": "double[pyarrow]"}), sites[1], sites[2]]
    pickle.loads(pickle.dumps(fitted)).connect(one)


def test_a_changed_site_is_refused_naming_the_columns_that_changed(sites, fitted):
    loaded = pickle.loads(pickle.dumps(fitted))
    edited = sites[1].copy()
    edited.loc[5, "x"] = float(edited["x"].max()) + 1.0
    edited["c"] = edited["c"].replace("west", "north")
    with pytest.raises(ValueError, match=r"site 'client 2' \(columns 'x', 'c'\) changed"):
        loaded.connect([sites[0], edited, sites[2]])
    with pytest.raises(ValueError, match=r"site 'client 1' \(column 'x'\) changed"):
        loaded.connect([sites[0].drop(columns="x").assign(x="a"), sites[1], sites[2]])


def test_fit_keeps_a_digest_per_column_and_site(sites, fitted):
    from fits.core.schema import column_digests

    assert list(fitted.site_column_digests_) == NAMES
    desc = json.loads(json.dumps(describe_table(sites[2], {}, client="client 3")))
    assert fitted.site_column_digests_["client 3"] == column_digests(desc)
    assert set(column_digests(desc)) == set(sites[2].columns)
