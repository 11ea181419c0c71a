"""sample_remaining_columns: the rest of the chain drawn given known first columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, SchemaError


def _table(n: int = 1200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.choice(["a", "b"], n)
    x = rng.normal(size=n)
    y = np.where(g == "a", 0.0, 5.0) + x + rng.normal(scale=0.5, size=n)
    return pd.DataFrame({"x": x, "g": g, "y": y})


def _sites(frame: pd.DataFrame) -> list[pd.DataFrame]:
    return [frame.iloc[: len(frame) // 2], frame.iloc[len(frame) // 2 :]]


@pytest.fixture(scope="module")
def synth() -> FITSSynthesizer:
    return FITSSynthesizer(seed=0).fit(_sites(_table()))


@pytest.fixture(scope="module")
def synth_g_first() -> FITSSynthesizer:
    return FITSSynthesizer(seed=0, order=["g", "x", "y"]).fit(_sites(_table()))


def test_a_draws_own_first_column_gives_the_draw_back(synth) -> None:
    """The same uniforms: given the continuous first column of sample(seed=5), the
    rest is drawn exactly as sample(seed=5) drew it -- where the decoded value is the
    engine's (a draw beyond the real range is clipped when decoded, and then the
    given value differs from the one the chain conditioned on)."""
    drawn = synth.sample(500, seed=5)
    again = synth.sample_remaining_columns(drawn[["x"]], seed=5)
    lo, hi = synth.schema_["x"].lower, synth.schema_["x"].upper
    inside = (drawn["x"] > lo) & (drawn["x"] < hi)
    assert inside.sum() >= 490
    pd.testing.assert_frame_equal(again[inside], drawn[inside])
    pd.testing.assert_series_equal(again["x"], drawn["x"])  # the known column as given


def test_the_rest_follows_the_conditional_of_the_known_values(synth_g_first) -> None:
    real = _table()
    for label, mean in (("a", 0.0), ("b", 5.0)):
        known = pd.DataFrame({"g": [label] * 3000})
        out = synth_g_first.sample_remaining_columns(known, seed=1)
        assert (out["g"] == label).all()
        assert out["y"].mean() == pytest.approx(mean, abs=0.15)
        real_mean = real.loc[real["g"] == label, "y"].mean()
        assert out["y"].mean() == pytest.approx(real_mean, abs=0.15)
    # two known columns: y given x and g, E[y | x, g] = 5 [g = b] + x
    known = pd.DataFrame({"g": ["b"] * 2000, "x": [1.0] * 2000})
    out = synth_g_first.sample_remaining_columns(known, seed=2)
    assert out["y"].mean() == pytest.approx(6.0, abs=0.25)
    assert (out["x"] == 1.0).all()


def test_the_output_has_the_inputs_columns_and_dtypes(synth_g_first) -> None:
    known = pd.DataFrame({"g": ["a", "b", "a"]}, index=[10, 20, 30])
    out = synth_g_first.sample_remaining_columns(known, seed=3)
    full = synth_g_first.sample(3, seed=3)
    assert list(out.columns) == ["x", "g", "y"]
    assert out.dtypes.equals(full.dtypes)
    assert out["g"].tolist() == ["a", "b", "a"]
    pd.testing.assert_frame_equal(out, synth_g_first.sample_remaining_columns(known, seed=3))
    spaced = known.rename(columns={"g": " g "})  # names by fits' one rule, as everywhere
    pd.testing.assert_frame_equal(out, synth_g_first.sample_remaining_columns(spaced, seed=3))


def test_the_rows_do_not_depend_on_the_chunks(synth, synth_g_first) -> None:
    """iter_sample_remaining_columns: the same seed gives the same table, bit for bit,
    whatever the chunks, and the same as one sample_remaining_columns call (each row
    takes its own row of uniforms from one stream, as in iter_sample)."""
    rng = np.random.default_rng(3)
    n = 500
    known = pd.DataFrame({"g": rng.choice(["a", "b"], n), "x": rng.uniform(-2, 2, n)})
    whole = synth_g_first.sample_remaining_columns(known, seed=4)
    for chunk_rows, first in ((7, None), (64, 5), (n, None), (10**6, 1)):
        chunks = list(
            synth_g_first.iter_sample_remaining_columns(
                known, chunk_rows=chunk_rows, first_chunk_rows=first, seed=4
            )
        )
        sizes = [len(c) for c in chunks]
        assert sum(sizes) == n and sizes[0] == min(first or chunk_rows, n)
        pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), whole)
    # in chunks too, a draw's own continuous first column gives that draw back
    drawn = synth.sample(300, seed=5)
    chunks = synth.iter_sample_remaining_columns(drawn[["x"]], chunk_rows=37, seed=5)
    again = pd.concat(list(chunks), ignore_index=True)
    pd.testing.assert_frame_equal(again, synth.sample_remaining_columns(drawn[["x"]], seed=5))
    lo, hi = synth.schema_["x"].lower, synth.schema_["x"].upper
    inside = (drawn["x"] > lo) & (drawn["x"] < hi)
    pd.testing.assert_frame_equal(again[inside], drawn[inside])


def test_every_chunk_has_the_dtypes_of_the_whole_table() -> None:
    """A known column goes into the output's dtype as a whole: whole ages given as
    floats are int64 in every chunk (a chunk of int64 then one of float64 could not be
    streamed into one Parquet file; 40.5 for an age is refused, tests/test_known_values.py),
    and the progress runs over all the chunks."""
    rng = np.random.default_rng(0)
    age = rng.integers(20, 70, 800)
    frame = pd.DataFrame({"age": age, "y": age * 0.1 + rng.normal(size=800)})
    synth = FITSSynthesizer(seed=0).fit(_sites(frame))
    known = pd.DataFrame({"age": [30.0] * 10 + [40.0]})
    seen: list[tuple[str, int, int]] = []
    chunks = list(
        synth.iter_sample_remaining_columns(
            known, chunk_rows=5, seed=1, progress=lambda *a: seen.append(a)
        )
    )
    assert [len(c) for c in chunks] == [5, 5, 1]
    assert all(c["age"].dtype == np.int64 for c in chunks)
    assert pd.concat(chunks, ignore_index=True)["age"].tolist() == known["age"].tolist()
    assert {total for _, _, total in seen} == {11}
    assert {c: d for c, d, _ in seen} == {"age": 11, "y": 11}  # the last report per column
    whole = synth.sample_remaining_columns(known.iloc[:10], seed=1)
    assert whole["age"].dtype == np.int64  # whole ages: the output's dtype


def test_a_known_table_of_no_rows_gives_the_table_of_no_rows() -> None:
    """One synthetic row per known row: none for none (it was refused), with the
    output's columns and dtypes, an id column's included; its columns are checked as
    any known table's, and the random stream does not move."""
    from decimal import Decimal

    rng = np.random.default_rng(3)
    frame = _table(600).assign(
        n=rng.integers(0, 9, 600),
        price=[Decimal(f"{v:.2f}") for v in rng.uniform(1, 50, 600)],
        uid=[f"u{i}" for i in range(600)],
    )
    synth = FITSSynthesizer(seed=0, kinds={"uid": "id"}).fit(_sites(frame))
    known = frame[["x"]].head(3)
    full = synth.sample_remaining_columns(known, seed=2)
    state = synth._rng.bit_generator.state
    empty = synth.sample_remaining_columns(known.iloc[:0])
    assert len(empty) == 0 and synth._rng.bit_generator.state == state
    assert list(empty.columns) == list(frame.columns)
    pd.testing.assert_series_equal(empty.dtypes, full.dtypes)
    chunks = list(synth.iter_sample_remaining_columns(pd.DataFrame({"x": []}), chunk_rows=5))
    assert [len(c) for c in chunks] == [0] and list(chunks[0].columns) == list(frame.columns)
    with pytest.raises(ValueError, match="not the first columns of the chain"):
        synth.sample_remaining_columns(frame[["y"]].iloc[:0])
    with pytest.raises(ValueError, match=r"column\(s\) \['note'\]"):
        synth.sample_remaining_columns(pd.DataFrame({"x": [], "note": []}))


def test_missing_known_values_are_kept_and_conditioned_on() -> None:
    frame = _table(1000, 4)
    frame.loc[frame.index[::7], "x"] = np.nan  # x has missing values: an indicator first
    synth = FITSSynthesizer(seed=0).fit(_sites(frame))
    known = pd.DataFrame({"x": [np.nan] * 50 + [0.5] * 50})
    out = synth.sample_remaining_columns(known, seed=0)
    assert out["x"].isna().tolist() == [True] * 50 + [False] * 50
    assert (out["x"].iloc[50:] == 0.5).all()


@pytest.mark.parametrize(
    ("known", "error", "message"),
    [
        ({"y": [1.0]}, ValueError, r"not the first columns of the chain \(x, g, y\)"),
        ({"g": ["a"], "y": [1.0]}, ValueError, r"continuous \['y'\] come after \['x'\]"),
        ({"y": [1.0]}, ValueError, "Fit with order=" + r"\[...\] listing the known columns first"),
        ({"zz": [1.0]}, ValueError, r"column\(s\) \['zz'\] that the synthesizer does not model"),
        (
            {"x": [99.0]},
            ValueError,
            r"the known values: 1 value\(s\) of column 'x' lie outside its range",
        ),
        ({"x": [0.0], "g": ["c"]}, SchemaError, r"value\(s\) \['c'\] that are not among"),
        ({"x": [0.0], "g": ["a"], "y": [1.0]}, ValueError, "nothing is left to draw"),
    ],
)
def test_known_columns_that_cannot_be_given_are_refused(synth, known, error, message) -> None:
    with pytest.raises(error, match=message):
        synth.sample_remaining_columns(pd.DataFrame(known))


def test_bad_arguments(synth) -> None:
    with pytest.raises(TypeError, match="must be a DataFrame"):
        synth.sample_remaining_columns({"x": [1.0]})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one column"):
        synth.sample_remaining_columns(pd.DataFrame(index=range(3)))
    with pytest.raises(ValueError, match="must be an integer >= 0"):
        synth.sample_remaining_columns(pd.DataFrame({"x": [0.0]}), seed=-1)
    # checked when called, before a chunk is asked for
    with pytest.raises(ValueError, match="chunk_rows must be at least 1, got 0"):
        synth.iter_sample_remaining_columns(pd.DataFrame({"x": [0.0]}), chunk_rows=0)
    with pytest.raises(TypeError, match="first_chunk_rows must be an integer"):
        synth.iter_sample_remaining_columns(pd.DataFrame({"x": [0.0]}), first_chunk_rows=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not the first columns of the chain"):
        synth.iter_sample_remaining_columns(pd.DataFrame({"y": [0.0]}))
    for bad, error in ((0, ValueError), (2.0, TypeError), (True, TypeError)):
        with pytest.raises(error, match="max_tries must be an integer >= 1"):
            synth.iter_sample_remaining_columns(pd.DataFrame({"g": ["a"]}), max_tries=bad)


def test_identifiers_and_rules() -> None:
    rng = np.random.default_rng(5)
    n = 900
    level = rng.choice(["low", "mid", "high"], n)
    code = pd.Series(level).map({"low": 1, "mid": 2, "high": 3}).to_numpy()  # code = f(level)
    v = code + rng.normal(size=n)
    frame = pd.DataFrame({"uid": [f"u{i:05d}" for i in range(n)], "level": level, "code": code})
    frame["v"] = v
    frame["w"] = v + rng.normal(size=n)
    synth = FITSSynthesizer(
        seed=0, kinds={"uid": "id"}, order=["level", "code", "uid", "v", "w"]
    ).fit(_sites(frame))
    assert [r.column for r in synth.schema_.rules or []] == ["code"]
    with pytest.raises(ValueError, match="'uid' is an identifier"):
        synth.sample_remaining_columns(pd.DataFrame({"uid": ["u1"]}))
    bad = pd.DataFrame({"level": ["low", "high"], "code": [1, 1]})
    with pytest.raises(ValueError, match=r"break the exact rule code = f\(level\) in 50.0%"):
        synth.sample_remaining_columns(bad)
    out = synth.sample_remaining_columns(pd.DataFrame({"level": ["high"] * 200}), seed=0)
    assert (out["code"] == 3).all()  # generated by its rule
    # a column its rule sets from known columns, among them, need not be given
    both = pd.DataFrame({"level": ["low", "high"] * 50, "v": [1.5] * 100})
    out = synth.sample_remaining_columns(both, seed=0)
    assert out["code"].tolist() == [1, 3] * 50 and (out["v"] == 1.5).all()
    assert out["code"].dtype == synth.sample(3)["code"].dtype
    assert out["uid"].str.startswith("synthetic-").all()  # fresh surrogates


def test_known_text_numbers_with_the_sites_markers_read_as_missing() -> None:
    """A known table read from CSV like the sites' ('?' among the numbers): the markers
    the schema records for the column are missing values, as at the sites (they were
    refused as 'non-numeric values')."""
    rng = np.random.default_rng(0)
    sites = []
    for _ in range(2):
        w = np.round(rng.normal(70, 10, 400), 1).astype(object)
        w[rng.random(400) < 0.03] = "?"
        sites.append(pd.DataFrame({"w": w, "g": rng.choice(["a", "b"], 400)}))
    synth = FITSSynthesizer(seed=0).fit(sites)
    assert synth.schema_["w"].markers
    known = pd.DataFrame({"w": ["72.5", "?", None, "80"]}, dtype=object)
    out = synth.sample_remaining_columns(known, seed=1)
    assert out["w"].isna().tolist() == [False, True, True, False]
    assert out["g"].notna().all()


def test_the_engine_checks_the_shape_of_given_values(synth) -> None:
    rng = np.random.default_rng(0)
    coord = synth.coordinator
    with pytest.raises(ValueError, match=r"given must have 5 rows and at most 3 columns"):
        coord.sample(5, rng, given=np.zeros((4, 1)))
    with pytest.raises(ValueError, match=r"at most 3 columns, got \(5, 4\)"):
        coord.sample(5, rng, given=np.zeros((5, 4)))


def test_each_row_keeps_its_known_rows_index_label(synth_g_first) -> None:
    """The rows came back with a fresh 0..n-1 index whatever the known table's index
    (10, 20, ... came back as 0, 1, ...), so the result could not be joined back to the
    known rows; now every row, in every chunk, has its known row's label."""
    rng = np.random.default_rng(6)
    n = 50
    known = pd.DataFrame(
        {"g": rng.choice(["a", "b"], n), "x": rng.uniform(-2, 2, n)},
        index=pd.Index(np.arange(n) * 10 + 7, name="patient"),
    )
    whole = synth_g_first.sample_remaining_columns(known, seed=2)
    pd.testing.assert_index_equal(whole.index, known.index)
    pd.testing.assert_frame_equal(whole[["g", "x"]], known, check_dtype=False)
    chunks = list(synth_g_first.iter_sample_remaining_columns(known, chunk_rows=7, seed=2))
    for chunk, start in zip(chunks, range(0, n, 7), strict=True):
        pd.testing.assert_index_equal(chunk.index, known.index[start : start + 7])
    pd.testing.assert_frame_equal(pd.concat(chunks), whole)
    plain = synth_g_first.sample_remaining_columns(known.reset_index(drop=True), seed=2)
    pd.testing.assert_frame_equal(whole.reset_index(drop=True), plain)  # the same rows
    empty = synth_g_first.sample_remaining_columns(known.iloc[:0])
    pd.testing.assert_index_equal(empty.index, known.index[:0])


def test_a_bad_upload_precision_is_named_as_the_synthesizers_parameter() -> None:
    """The coordinator's own name for it ('precision must be one of ...') was what a
    user of FITSSynthesizer(upload_precision=...) read."""
    with pytest.raises(ValueError, match=r"^upload_precision must be one of .*'float16'"):
        FITSSynthesizer(upload_precision="float16").fit(_sites(_table(200)))
