"""The pandas API end to end: fidelity, reproducibility, dtypes, degenerate cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, GaussianKernel, SchemaError, estimate_conditional_cdf
from fits.core.cdf import inverse_cdf, postprocess_cdf
from fits.datasets import simulate
from fits.evaluation import energy_distance, independent_resample

from conftest import mixed_table, split

KINDS = {"b": "nominal", "x": "continuous", "o": "ordinal", "c": "nominal", "y": "continuous"}


@pytest.fixture(scope="module")
def fidelity_data():
    real = mixed_table(4000, seed=11)
    clients = split(real, [1800, 1200, 700, 300])  # four clients of unequal size
    reference = mixed_table(4000, seed=12)  # fresh draw from the same distribution
    return clients, reference


@pytest.mark.parametrize("kernel", ["knn", "gaussian"])
def test_fidelity_far_better_than_independent_resample(fidelity_data, kernel):
    clients, reference = fidelity_data
    train = pd.concat(clients, ignore_index=True)
    synthetic = FITSSynthesizer(kernel, seed=0).fit(clients).sample(4000)
    ed_fits = energy_distance(reference, synthetic, KINDS)
    ed_indep = energy_distance(reference, independent_resample(train, 4000, seed=0), KINDS)
    ed_real = energy_distance(reference, train, KINDS)  # the sampling-noise floor
    assert ed_fits < 0.35 * ed_indep, (ed_fits, ed_indep, ed_real)
    assert ed_fits < 3 * ed_real + 0.05, (ed_fits, ed_real)
    # the dependence that drives the table is kept
    assert abs(synthetic["x"].corr(synthetic["y"]) - train["x"].corr(train["y"])) < 0.05
    p_real = train.groupby("b")["x"].mean()
    p_syn = synthetic.groupby("b")["x"].mean()
    assert np.all(np.abs(p_real - p_syn) < 0.15)


def test_fixed_seed_reproduces_bit_for_bit(mixed_clients):
    a = FITSSynthesizer(["knn", "gaussian", "knn"], seed=7).fit(mixed_clients).sample(500)
    b = FITSSynthesizer(["knn", "gaussian", "knn"], seed=7).fit(mixed_clients).sample(500)
    pd.testing.assert_frame_equal(a, b)
    c = FITSSynthesizer(["knn", "gaussian", "knn"], seed=8).fit(mixed_clients).sample(500)
    assert not a.equals(c)
    # the batch size does not change the draw
    d = (
        FITSSynthesizer(["knn", "gaussian", "knn"], seed=7, batch_size=64)
        .fit(mixed_clients)
        .sample(500)
    )
    pd.testing.assert_frame_equal(a, d)


def test_output_does_not_depend_on_threads_or_blocks(mixed_clients, monkeypatch):
    """Clients answering in parallel threads, or in one-query blocks, change nothing."""
    kernels = ["knn", "gaussian", "knn"]
    serial = FITSSynthesizer(kernels, seed=5, n_jobs=1).fit(mixed_clients)
    assert serial.coordinator.transport.n_jobs == 1
    a = serial.sample(400)
    threaded = FITSSynthesizer(kernels, seed=5, n_jobs=3).fit(mixed_clients)
    assert threaded.coordinator.transport.n_jobs == 3
    pd.testing.assert_frame_equal(a, threaded.sample(400))
    monkeypatch.setattr("fits.federation.client._BLOCK_VALUES", 1)
    tiny = FITSSynthesizer(kernels, seed=5).fit(mixed_clients).sample(400)
    pd.testing.assert_frame_equal(a, tiny)
    transport = threaded.coordinator.transport
    assert transport._pool is not None
    transport.close()  # the worker threads stop; a later round starts new ones
    assert transport._pool is None
    pd.testing.assert_frame_equal(serial.sample(300), threaded.sample(300))


def test_a_failing_client_in_a_parallel_round_is_named(mixed_clients):
    frames = [t.copy() for t in mixed_clients]
    frames[2] = frames[2].drop(columns="o")
    with pytest.raises(Exception, match="client 3"):
        FITSSynthesizer(seed=0, n_jobs=3).fit(frames)
    with pytest.raises(ValueError, match="n_jobs"):
        FITSSynthesizer(seed=0, n_jobs=0).fit(mixed_clients)


def test_output_keeps_columns_dtypes_and_valid_categories(mixed_clients):
    frames = [t.assign(c=pd.Categorical(t["c"]), o=t["o"].astype("int32")) for t in mixed_clients]
    synth = FITSSynthesizer(seed=0).fit(frames)
    out = synth.sample(800)
    assert list(out.columns) == list(mixed_clients[0].columns)
    assert out["b"].dtype == bool
    assert isinstance(out["c"].dtype, pd.CategoricalDtype)
    assert set(out["c"].cat.categories) == {"north", "south", "west"}
    assert pd.api.types.is_integer_dtype(out["o"])
    assert set(out["o"]) <= {1, 2, 5}
    assert out["y"].dtype == float
    lo, hi = min(t["y"].min() for t in frames), max(t["y"].max() for t in frames)
    assert out["y"].between(lo, hi).all()
    assert not out.isna().any().any()
    assert synth.schema_.kinds() == KINDS


def test_postprocessed_cdfs_are_monotone_in_unit_interval_ending_at_one(mixed_clients):
    for monotone in ("isotonic", "rearrange"):
        res = estimate_conditional_cdf(
            mixed_clients,
            ["b", "x", "o"],
            "y",
            np.random.default_rng(0).normal(size=(200, 3)),
            kinds=KINDS,
            seed=0,
            monotone=monotone,
        )
        f = res.values
        assert np.all(f >= 0) and np.all(f <= 1)
        assert np.all(np.diff(f, axis=1) >= 0)
        np.testing.assert_allclose(f[:, -1], 1.0)


def test_postprocess_isotonic_is_the_l2_projection():
    raw = np.array([[-0.1, 0.3, 0.2, 0.6, 0.5, 1.3]])
    out, bad = postprocess_cdf(raw, "isotonic")
    np.testing.assert_allclose(out[0], [0, 0.25, 0.25, 0.55, 0.55, 1.0] / np.float64(1.0))
    assert not bad[0]
    out, _ = postprocess_cdf(raw, "rearrange")
    np.testing.assert_allclose(out[0], [0, 0.2, 0.3, 0.5, 0.6, 1.0])
    # no running maximum: a dip is pooled, not carried forward
    out, _ = postprocess_cdf(np.array([[0.0, 0.9, 0.1, 1.0]]), "isotonic")
    np.testing.assert_allclose(out[0], [0, 0.5, 0.5, 1.0])
    _, bad = postprocess_cdf(np.array([[-0.2, -0.1, 0.0]]), "isotonic")
    assert bad[0]


def test_inverse_cdf_is_linear_interpolation_eq_17():
    grid = np.array([0.0, 1.0, 2.0, 4.0])
    cdf = np.tile([0.0, 0.2, 0.6, 1.0], (4, 1))
    u = np.array([0.1, 0.2, 0.8, 1.0])
    np.testing.assert_allclose(inverse_cdf(cdf, grid, u), [0.5, 1.0, 3.0, 4.0])


def test_query_far_from_all_data_falls_back_without_nan(mixed_clients):
    """A tiny Gaussian bandwidth leaves far queries with zero weight at every client."""
    kernel = GaussianKernel(bandwidth=0.01)
    x = np.array([[1.5, 40.0, 2.0], [0.5, -0.2, 1.5]])
    res = estimate_conditional_cdf(
        mixed_clients, ["b", "x", "o"], "y", x, kernel=kernel, kinds=KINDS, seed=0
    )
    assert np.all(np.isfinite(res.values))
    assert res.coordinator.fallbacks >= 1
    np.testing.assert_allclose(res.values[:, -1], 1.0)


def test_gaussian_synthesis_with_far_rows_has_no_nan(mixed_clients):
    out = FITSSynthesizer(GaussianKernel(bandwidth=0.02), seed=1).fit(mixed_clients).sample(300)
    assert not out.isna().any().any()


def test_client_below_knn_minimum_is_a_clear_error(mixed_clients):
    tiny = mixed_clients[2].iloc[:1]
    with pytest.raises(SchemaError, match="client 3 has 1 row"):
        FITSSynthesizer("knn").fit([mixed_clients[0], mixed_clients[1], tiny])


def test_constant_column_at_one_client_is_fine(mixed_clients):
    frames = [t.copy() for t in mixed_clients]
    frames[2]["x"] = 0.25  # constant at this client only
    frames[1]["c"] = "west"
    out = FITSSynthesizer("knn", seed=0).fit(frames).sample(400)
    assert not out.isna().any().any()
    assert out["x"].std() > 0.5


def test_category_present_at_one_client_only(mixed_clients):
    frames = [t.copy() for t in mixed_clients]
    frames[0].loc[frames[0].index[:150], "c"] = "east"  # only client 1 has "east"
    synth = FITSSynthesizer("gaussian", seed=0).fit(frames)
    assert "east" in synth.schema_["c"].categories
    out = synth.sample(2000)
    share = (out["c"] == "east").mean()
    assert 0.05 < share < 0.3  # true share 150 / 1000


def test_globally_constant_column_is_written_as_its_value(mixed_clients):
    """It stopped the fit ("'k' is constant"); it is written as its value, with a note
    (tests/test_constant_columns.py has the rest)."""
    frames = [t.assign(k=1.0) for t in mixed_clients]
    with pytest.warns(UserWarning, match="'k' holds 1.0 in every row at every site"):
        synth = FITSSynthesizer(seed=0).fit(frames)
    out = synth.sample(20)
    assert (out["k"] == 1.0).all() and out["k"].dtype == np.float64


def test_columns_missing_at_a_client_name_the_client(mixed_clients):
    frames = [mixed_clients[0], mixed_clients[1].drop(columns="o"), mixed_clients[2]]
    with pytest.raises(SchemaError, match=r"client 2: columns differ.*missing: \['o'\]"):
        FITSSynthesizer().fit(frames)


def test_numeric_and_text_types_disagreeing_is_a_clear_error(mixed_clients):
    frames = [t.copy() for t in mixed_clients]
    frames[1]["o"] = "level " + frames[1]["o"].astype(str)
    with pytest.raises(SchemaError, match="'o' is numeric at some clients and text at others"):
        FITSSynthesizer().fit(frames)
    # numbers written as text are read as numbers (a note says so), and fit together
    frames[1]["o"] = mixed_clients[1]["o"].astype(str)
    with pytest.warns(UserWarning, match="'o' is text read as numbers"):
        synth = FITSSynthesizer().fit(frames)
    assert synth.schema_["o"].kind == "ordinal"


def test_bad_sample_sizes(mixed_clients):
    synth = FITSSynthesizer(seed=0).fit(mixed_clients)
    for bad in (-1, -5, np.int64(-1)):
        with pytest.raises(ValueError, match="num_rows must be at least 0, got -"):
            synth.sample(bad)
        with pytest.raises(ValueError, match="num_rows must be at least 0"):
            synth.iter_sample(bad)
    for bad in (2.5, 3.0, 0.0, True, False, "3", None):
        with pytest.raises(TypeError, match="num_rows must be an integer"):
            synth.sample(bad)


def _all_dtypes(n: int, seed: int) -> pd.DataFrame:
    """One column of each dtype fits gives back: numpy and nullable integers and
    booleans, float32, categoricals (an unused category, ordered), text, datetimes (a
    time zone, whole days), Decimals, missing values, an identifier, an affine rule."""
    from decimal import Decimal

    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    imiss = pd.array(rng.integers(0, 50, n), dtype="Int64")
    imiss[::7] = pd.NA
    bmiss = pd.array(rng.random(n) < 0.5, dtype="boolean")
    bmiss[::5] = pd.NA
    stamps = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 10**6, n), unit="s")
    return pd.DataFrame(
        {
            "x": x,
            "i": rng.integers(0, 1000, n),
            "i32": rng.integers(0, 1000, n).astype("int32"),
            "u8": rng.integers(0, 200, n).astype("uint8"),
            "f32": rng.normal(size=n).astype("float32"),
            "imiss": imiss,
            "b": rng.random(n) < 0.3,
            "bmiss": bmiss,
            "cat": pd.Categorical(rng.choice(["p", "q", "r"], n), categories=["r", "q", "p", "u"]),
            "ocat": pd.Categorical(
                rng.choice(["lo", "mid", "hi"], n), categories=["lo", "mid", "hi"], ordered=True
            ),
            "s": rng.choice(["x", "y", "z"], n),
            "ob": pd.Series(rng.choice(["x", "y", None], n), dtype=object),
            "dtz": stamps.tz_localize("Europe/Paris"),
            "day": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 400, n), unit="D"),
            "dec": [Decimal(f"{v:.2f}") for v in rng.uniform(0, 100, n)],
            "fmiss": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
            "id": [f"row{seed}-{k}" for k in range(n)],
            "twice": 2 * x,
        }
    )


def test_sample_of_no_rows_is_the_empty_table(tmp_path):
    """sample(0) gives the table of no rows, as sample_remaining_columns of a known table
    of no rows does: the input's columns in order, in the dtypes sample(n) gives (every
    dtype fits restores), a RangeIndex; nothing is asked of the sites and the random
    stream does not move. iter_sample(0) is one such chunk; sample_to_file(path, 0)
    writes the header alone (Parquet: each column's type of a file with rows). It was
    refused: 'num_rows must be at least 1, got 0'."""
    import pyarrow.parquet as pq

    sites = [_all_dtypes(300, 1), _all_dtypes(300, 2)]
    synth = FITSSynthesizer(seed=0, kinds={"id": "id"}).fit(sites)
    twin = FITSSynthesizer(seed=0, kinds={"id": "id"}).fit(sites)
    assert [r.column for r in synth.schema_.rules or []] == ["twice"]
    sent = list(synth.uploaded_bytes_)
    empty = synth.sample(0)
    assert synth.uploaded_bytes_ == sent  # no round
    rows = synth.sample(40)
    pd.testing.assert_frame_equal(rows, twin.sample(40))  # the stream did not move
    assert list(empty.columns) == list(sites[0].columns) and len(empty) == 0
    pd.testing.assert_series_equal(empty.dtypes, rows.dtypes)
    pd.testing.assert_series_equal(empty.dtypes, synth.sample(np.int64(0), seed=3).dtypes)
    pd.testing.assert_index_equal(empty.index, pd.RangeIndex(0))
    pd.testing.assert_frame_equal(empty, rows.iloc[:0])
    known = synth.sample_remaining_columns(rows[[synth.schema_.order[0]]].iloc[:0])
    pd.testing.assert_frame_equal(empty, known)
    chunks = list(synth.iter_sample(0, chunk_rows=10))
    assert len(chunks) == 1
    pd.testing.assert_frame_equal(chunks[0], empty)
    csv = synth.sample_to_file(tmp_path / "none.csv", 0)
    assert csv.read_text() == ",".join(sites[0].columns) + "\n"
    none = synth.sample_to_file(tmp_path / "none.parquet", 0)
    some = synth.sample_to_file(tmp_path / "some.parquet", 5)
    assert pq.read_table(none).num_rows == 0
    assert pq.read_schema(none).remove_metadata() == pq.read_schema(some).remove_metadata()
    with pytest.raises(ValueError, match="at least 0"):
        synth.sample_to_file(tmp_path / "bad.csv", -1)
    assert not (tmp_path / "bad.csv").exists()


def test_iter_sample_of_a_huge_count_starts_at_once(mixed_clients):
    """iter_sample(10**18) yields its first chunk without a list of every chunk's start
    (1.5e13 of them: a MemoryError, or gigabytes, before the first row); the chunks
    are the rows sample() gives."""
    synth = FITSSynthesizer(seed=0).fit(mixed_clients)
    chunks = synth.iter_sample(10**18, first_chunk_rows=7, chunk_rows=5, seed=4)
    first, second = next(chunks), next(chunks)
    assert (len(first), len(second)) == (7, 5)
    pd.testing.assert_frame_equal(
        pd.concat([first, second], ignore_index=True), synth.sample(12, seed=4)
    )


def test_single_table_is_refused_with_a_hint(mixed_clients):
    with pytest.raises(TypeError, match="one DataFrame per client"):
        FITSSynthesizer().fit(mixed_clients[0])


def test_user_order_and_kinds(mixed_clients):
    synth = FITSSynthesizer(seed=0, order=["y", "x", "c", "o", "b"], kinds={"o": "nominal"})
    out = synth.fit(mixed_clients).sample(200)
    assert synth.schema_.order == ["y", "x", "c", "o", "b"]
    assert synth.schema_["o"].kind == "nominal"
    assert list(out.columns) == list(mixed_clients[0].columns)


def test_rows_declared_at_fit_save_the_configure_round_of_sampling(mixed_clients):
    """fit(rows=n) declares the rows in the configure round: sampling n rows then sends no
    configure round (one message round less on a network), and the table is the same."""
    tables = {}
    for rows in (0, 300):
        synth = FITSSynthesizer(seed=4).fit(mixed_clients, rows=rows)
        assert synth.coordinator.declared_rows == rows
        sent: list[str] = []
        synth.coordinator.transport.observers.append(
            lambda k, req, rep, sent=sent: sent.append(req.type)
        )
        tables[rows] = synth.sample(300)
        assert ("configure" in sent) == (rows == 0)
    pd.testing.assert_frame_equal(tables[0], tables[300], check_exact=True)
    with pytest.raises(ValueError, match="rows must be an integer >= 0"):
        FITSSynthesizer(seed=4).fit(mixed_clients, rows=-1)


def test_progress_is_reported_per_chain_column(mixed_clients, capsys):
    synth = FITSSynthesizer(seed=0, batch_size=100).fit(mixed_clients)
    seen: dict[str, list[int]] = {}
    synth.sample(250, progress=lambda col, done, total: seen.setdefault(col, []).append(done))
    assert list(seen) == synth.schema_.order
    assert all(v[-1] == 250 for v in seen.values())
    assert seen["x"] == [100, 200, 250]  # one step per batch
    synth.sample(50, progress=True)  # a rich progress bar, no error


def test_default_batch_counts_only_dense_gaussian_rows():
    from fits.deploy.inprocess import build_federation, in_process_batch

    rng = np.random.default_rng(0)
    tables = [pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n)}) for n in (300, 200)]
    knn, _ = build_federation(tables, "knn")
    assert in_process_batch(knn, 2**25) == 8192
    mixed, _ = build_federation(tables, ["gaussian", "knn"])
    assert in_process_batch(mixed, 300 * 100) == 100  # budget / the Gaussian client's rows
    gaussian, _ = build_federation(tables, "gaussian")
    assert in_process_batch(gaussian, 500 * 100) == 100
    assert in_process_batch(gaussian, 10) == 64  # never below 64 queries
    synth = FITSSynthesizer("knn", seed=0).fit(tables)
    assert synth.coordinator._batch() == 8192
    assert FITSSynthesizer("knn", batch_size=50).fit(tables).coordinator._batch() == 50


def test_default_stream_is_the_seeds_second_child() -> None:
    """The default sample stream is child 1 of ``SeedSequence(seed).spawn(2)`` (child 0
    lifts the discrete columns), as it was before fit() learned to reconnect: spawning
    twice from one SeedSequence gives other children, and other synthetic rows."""
    data = simulate(400, seed=1)
    clients = [data.frame.iloc[:200], data.frame.iloc[200:]]
    synth = FITSSynthesizer("knn", seed=5, kinds=data.kinds, order=data.order).fit(clients)
    first = synth.sample(60)
    expected = synth.sample(60, seed=np.random.SeedSequence(5).spawn(2)[1])
    pd.testing.assert_frame_equal(first, expected)


@pytest.mark.parametrize("precision", ["fixed16", "float64"])
def test_local_constant_fallback_of_a_one_round_column_needs_no_round(precision):
    """A one-round column's local-constant fallback comes from the block the sites sent
    (each query's weights and wire encoding depend on that query alone): the same table
    as with the fallback's own round, and one block round less."""
    rng = np.random.default_rng(0)
    n = 900
    x = rng.normal(size=n)
    frame = pd.DataFrame({"x": x})
    for j in range(6):  # binary columns ever more predictable from x and each other
        frame[f"b{j}"] = np.where(rng.random(n) < 1 / (1 + np.exp(-(x + j - 3))), "yes", "no")
    frame["y"] = np.where(rng.random(n) < 0.1, "rare", "common")
    clients = [frame.iloc[:500], frame.iloc[500:800], frame.iloc[800:]]

    def fitted(seed: int) -> FITSSynthesizer:
        # the paper's design: its binary slopes need the fallback at some draws
        return FITSSynthesizer(seed=seed, rounds=1, upload_precision=precision, design="all").fit(
            clients
        )

    # the first seed whose draws need the fallback (which ones do is the draws' luck)
    # which draws need the fallback is their luck: seed 4's 2,000 rows do (seeds 0-5 at
    # 2,000 rows: only 4; at 300 rows none), checked below, so a change of the draws
    # fails here loudly rather than passing without a fallback
    seed = 4
    out = {}
    for reuse in (True, False):
        synth = fitted(seed)
        synth.coordinator.reuse_blocks = reuse
        sent: list[str] = []
        synth.coordinator.transport.observers.append(
            lambda k, req, rep, sent=sent: sent.append(req.type) if k == 0 else None
        )
        out[reuse] = (synth.sample(2000), sent.count("block"), synth.coordinator.fallbacks)
    assert out[True][2] == out[False][2] >= 1  # the fallback was needed
    assert out[True][1] == out[False][1] - 1
    pd.testing.assert_frame_equal(out[True][0], out[False][0], check_exact=True)
