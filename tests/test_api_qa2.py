"""The pandas API on tables nobody designed for it (second pass; the first is
tests/test_api_qa.py): what a data scientist might hand ``FITSSynthesizer``, and what
must come back -- the input's columns, dtypes and value domain, or a clear error."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from fits import FITSSynthesizer, Schema, SchemaError
from fits.core.schema import DataNote, IdentifierColumnError

N = 200


def _sites(first, second) -> dict[str, pd.DataFrame]:
    """Sites north and south, each with a continuous column ``x`` and the column ``c``
    of the given values."""
    out = {}
    for k, (name, values) in enumerate((("north", first), ("south", second))):
        rng = np.random.default_rng(k)
        out[name] = pd.DataFrame({"x": rng.normal(size=N), "c": values})
    return out


def _fit_notes(sites) -> tuple[FITSSynthesizer, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        synth = FITSSynthesizer(seed=0).fit(sites)
    return synth, [str(w.message) for w in caught if issubclass(w.category, DataNote)]


def test_labels_not_all_text_fall_back_to_object_with_a_note():
    """A categorical of integers at one site and text at another: a text dtype would
    make 1 and '1' one label, so the output is object; the fit says so, naming the
    column, the sites with their dtypes and the output dtype (it said nothing)."""
    rng = np.random.default_rng(0)
    text = pd.Series(rng.choice(["a", "b"], N), dtype="string")
    synth, notes = _fit_notes(_sites(pd.Categorical(rng.integers(0, 3, N)), text))
    out = synth.sample(50)
    assert out["c"].dtype == object
    assert set(out["c"]) <= {0, 1, 2, "a", "b"}
    [note] = [n for n in notes if "'c'" in n]
    assert "north: category" in note and "south: string" in note
    assert "not all text" in note and "output is object" in note


def test_integers_past_2_53_next_to_floats_stay_integers_with_a_note():
    """Integers past 2**53 at one site and floats at another: float64, the common type,
    would round them, so the output stays int64; the fit says so (it said nothing)."""
    rng = np.random.default_rng(1)
    big = 2**60 + rng.integers(0, 10**6, N)
    floats = (2**60 + rng.integers(0, 10**6, N)).astype(float)
    synth, notes = _fit_notes(_sites(big, floats))
    assert synth.sample(20)["c"].dtype == np.int64
    [note] = [n for n in notes if "'c'" in n and "north" in n]
    assert "north: int64" in note and "south: float64" in note
    assert "2**53" in note and "output is int64" in note
    [steps] = [n for n in notes if "'c'" in n and "north" not in n]  # 1e6 / 256 steps
    assert "every 256th whole number" in steps and "fall on those steps (3,880 across" in steps


def test_int64_and_uint64_stay_integers_with_a_note():
    """int64 at one site and uint64 at another: pd.concat gives float64, which fits does
    not take for whole numbers; the output stays int64, and the fit says so."""
    rng = np.random.default_rng(3)
    second = rng.integers(0, 1000, N).astype("uint64")
    synth, notes = _fit_notes(_sites(rng.integers(0, 1000, N), second))
    assert synth.sample(20)["c"].dtype == np.int64
    [note] = [n for n in notes if "'c'" in n]
    assert "north: int64, south: uint64" in note and "output is int64" in note


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (np.arange(N), np.linspace(0, 1, N)),  # int and float: float64
        (pd.Categorical(["a", "b"] * (N // 2)), pd.Series(["b", "a"] * (N // 2), dtype=object)),
        (np.arange(N, dtype="int32"), np.arange(N, dtype="int16")),
    ],
)
def test_sites_dtypes_with_a_common_type_draw_no_note(first, second):
    """Where the common type holds every value, no note: it is pd.concat's own."""
    _, notes = _fit_notes(_sites(first, second))
    assert not [n for n in notes if "'c'" in n]


def _table(seed: int, n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.normal(size=n), "k": rng.choice(["a", "b", "c"], n)})


def test_tables_without_columns_are_refused_at_fit_naming_the_site():
    """DataFrames with rows but no columns: the fit went through, and sample() then
    raised 'run setup() and configure() first' from the coordinator (Schema.detect of
    them is the empty schema, which the report's kind inference relies on)."""
    empty = {"north": pd.DataFrame(index=range(10)), "south": pd.DataFrame(index=range(8))}
    with pytest.raises(SchemaError, match=r"north: the table has no columns"):
        FITSSynthesizer(seed=0).fit(empty)


@pytest.mark.parametrize("call", ["fit", "detect"])
def test_a_series_is_refused_as_a_series(call):
    """A Series where tables are expected was iterated as a list of sites: 'client 1:
    expected a pandas DataFrame, got float'."""
    series = _table(0)["x"]
    with pytest.raises(TypeError, match=r"got a Series.*to_frame\(\)"):
        if call == "fit":
            FITSSynthesizer(seed=0).fit(series)
        else:
            Schema.detect(series)


def test_schema_detect_of_none_says_what_it_takes():
    """Schema.detect(None) raised "'NoneType' object is not iterable"."""
    with pytest.raises(TypeError, match=r"Schema.detect takes a DataFrame.*got NoneType"):
        Schema.detect(None)  # type: ignore[arg-type]


def test_site_names_that_are_one_as_text_are_refused():
    """{1: df_a, "1": df_b}: both sites were called '1' (in messages and audit logs)."""
    with pytest.raises(ValueError, match=r"site names 1 and '1' are both '1'"):
        FITSSynthesizer(seed=0).fit({1: _table(0), "1": _table(1)})


def test_save_of_a_parameter_that_cannot_be_pickled_names_it(tmp_path):
    """A lambda as site_audit: save() raised pickle's "Can't pickle <function
    <lambda>...>: attribute lookup <lambda> on __main__ failed"; the file already
    there is left as it was."""
    lines: list[str] = []
    synth = FITSSynthesizer(seed=0, site_audit=lambda line: lines.append(line))
    synth.fit([_table(0), _table(1)])
    path = tmp_path / "synth.pkl"
    # an earlier saved synthesizer there (save replaces only its own files, 15922a5)
    FITSSynthesizer(seed=1).fit([_table(0), _table(1)]).save(path)
    old = path.read_bytes()
    with pytest.raises(TypeError, match=r"site_audit=.*cannot be saved.*file path"):
        synth.save(path)
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["synth.pkl"]
    synth.set_params(site_audit=str(tmp_path / "audit.log"))  # as the message says
    again = FITSSynthesizer.load(synth.save(path)).connect([_table(0), _table(1)])
    assert again.sample(5, seed=1).equals(synth.sample(5, seed=1))


@pytest.mark.parametrize("unit", ["s", "ms", "ns"])
@pytest.mark.parametrize("tz", [None, "Europe/Paris"])
def test_datetimes_keep_the_sites_time_unit(unit, tz):
    """datetime64[s], [ms] and [ns] columns came back as datetime64[us] (pandas 3): the
    output has the sites' unit, with or without a time zone, in every chunk."""
    sites = []
    for seed in (0, 1):
        table = _table(seed)
        start = pd.Timestamp("2021-03-01", tz=tz)
        seconds = np.random.default_rng(seed).integers(0, 10**7, len(table))
        table["t"] = (start + pd.to_timedelta(seconds, unit="s")).as_unit(unit)
        sites.append(table)
    expected = sites[0]["t"].dtype
    synth = FITSSynthesizer(seed=0).fit(sites)
    out = synth.sample(40)
    assert out["t"].dtype == expected
    assert synth.sample(0)["t"].dtype == expected
    assert all(chunk["t"].dtype == expected for chunk in synth.iter_sample(30, chunk_rows=10))
    assert (
        out["t"].between(min(s["t"].min() for s in sites), max(s["t"].max() for s in sites)).all()
    )


def test_a_coarser_time_unit_never_cuts_finer_draws():
    """A schema without a time resolution draws microseconds: a datetime64[s] column
    then comes back in microseconds, never truncated to whole seconds."""
    sites = []
    for seed in (0, 1):
        table = _table(seed)
        seconds = np.random.default_rng(seed).integers(0, 10**7, len(table))
        table["t"] = (pd.Timestamp("2021-03-01") + pd.to_timedelta(seconds, unit="s")).as_unit("s")
        sites.append(table)
    schema = Schema.detect(sites)
    schema["t"].resolution = None
    out = FITSSynthesizer(seed=0, schema=schema).fit(sites).sample(40)
    assert out["t"].dt.unit in ("us", "ns")  # as decoded: us (pandas 3), ns (pandas 2)
    assert (out["t"] != out["t"].dt.floor("s")).any()  # microseconds, kept


def _small_sites(n: int) -> list[pd.DataFrame]:
    out = []
    for site in (1, 2):
        rng = np.random.default_rng(site)
        out.append(
            pd.DataFrame(
                {
                    "x": rng.normal(size=n),
                    "email": [f"person{site}_{i}@example.com" for i in range(n)],
                    "colour": rng.choice(["red", "blue"], n),
                }
            )
        )
    return out


def test_a_small_tables_unique_text_is_refused_as_an_identifier():
    """Two sites of 8 rows, a different email in every row: with at most 20 distinct
    values the column was modelled as nominal and every synthetic email was a real
    one, copied verbatim, without a word."""
    sites = _small_sites(8)
    with pytest.raises(
        IdentifierColumnError,
        # e-mail addresses: flagged at each site, which sends none of them
        match=r"'email' looks like an identifier .*8 distinct values in 8 rows at client 1, "
        r"e-mail addresses",
    ):
        FITSSynthesizer(seed=0).fit(sites)
    with pytest.raises(IdentifierColumnError, match="'email'"):
        Schema.detect(sites)
    out = FITSSynthesizer(seed=0, kinds={"email": "id"}).fit(sites).sample(5)
    assert not set(out["email"]) & {e for s in sites for e in s["email"]}
    # copied on purpose: declared nominal
    out = FITSSynthesizer(seed=0, kinds={"email": "nominal"}).fit(sites).sample(5)
    assert set(out["email"]) <= {e for s in sites for e in s["email"]}


def _flag_sites(first: list, second: list) -> dict[str, pd.DataFrame]:
    return _sites(
        pd.Series([first[i % len(first)] for i in range(N)], dtype=object),
        pd.Series([second[i % len(second)] for i in range(N)], dtype=object),
    )


def test_true_and_1_in_one_object_column_are_refused_not_merged():
    """An object column holding True and 1 (or False and 0.0): Python counts them as
    one value, and every True came back as 1 (every 0 as False), silently."""
    with pytest.raises(
        SchemaError, match=r"north: column 'c' holds True and 1, one value to Python"
    ):
        FITSSynthesizer(seed=0).fit(_flag_sites([True, 1, "a"], ["a", "b"]))
    with pytest.raises(SchemaError, match=r"south: column 'c' holds False and 0.0.*astype\(str\)"):
        FITSSynthesizer(seed=0).fit(_flag_sites(["a", "b"], [False, "a", 0.0]))
    # at two sites: True at one, 1 at the other
    with pytest.raises(SchemaError, match=r"column 'c' holds True at north and 1 at south"):
        FITSSynthesizer(seed=0).fit(_flag_sites([True, "a"], [1, "a"]))
    # labels of several types that Python tells apart are kept apart
    out = FITSSynthesizer(seed=0).fit(_flag_sites([True, 2, "a"], ["1", "a", 2.5])).sample(300)
    assert {(type(v).__name__, v) for v in out["c"]} <= {
        ("bool", True),
        ("int", 2),
        ("str", "a"),
        ("str", "1"),
        ("float", 2.5),
    }


def _timed_sites(tz: str | None) -> list[pd.DataFrame]:
    sites = []
    for seed in (0, 1):
        table = _table(seed)
        seconds = np.random.default_rng(seed).integers(0, 10**6, len(table))
        table["t"] = pd.Timestamp("2021-01-01", tz=tz) + pd.to_timedelta(seconds, unit="s")
        sites.append(table[["t", "x", "k"]])
    return sites


def test_known_times_without_the_schemas_time_zone_are_refused():
    """Naive known times for a column in Europe/Paris were read as UTC (an hour off,
    silently), and given back naive; times with a zone for a naive column were read
    as their UTC times. Schema.validate took both too."""
    aware = _timed_sites("Europe/Paris")
    synth = FITSSynthesizer(seed=0).fit(aware)
    t0 = aware[0]["t"].iloc[:3]
    with pytest.raises(
        SchemaError, match=r"'t' holds times without a time zone.*Europe/Paris.*tz_localize"
    ):
        synth.sample_remaining_columns(pd.DataFrame({"t": t0.dt.tz_localize(None)}))
    with pytest.raises(SchemaError, match=r"'t' holds times without a time zone"):
        synth.schema_.validate(aware[0].assign(t=aware[0]["t"].dt.tz_localize(None)))
    out = synth.sample_remaining_columns(pd.DataFrame({"t": t0.dt.tz_convert("UTC")}))
    assert (out["t"] == t0.reset_index(drop=True)).all()  # the same instants: fine
    naive = _timed_sites(None)
    synth = FITSSynthesizer(seed=0).fit(naive)
    with pytest.raises(SchemaError, match=r"'t' holds times in UTC.*has no time zone"):
        synth.sample_remaining_columns(
            pd.DataFrame({"t": naive[0]["t"].iloc[:3].dt.tz_localize("UTC")})
        )


def test_known_times_as_text_are_read_as_written_for_a_zoned_column():
    """The same, for times given as text: "2021-01-01 10:00" for a column in
    Europe/Paris was read as 10:00 UTC and given back as 11:00 in Paris, silently. Text
    with its offset is read at that offset; offsets on some values only are refused."""
    aware = _timed_sites("Europe/Paris")
    synth = FITSSynthesizer(seed=0).fit(aware)
    with pytest.raises(SchemaError, match=r"'t' holds times without a time zone"):
        synth.sample_remaining_columns(pd.DataFrame({"t": ["2021-01-01 10:00"]}))
    text = ["2021-01-01 10:00+01:00", "2021-01-05T10:00:00+02:00", "2021-01-03 08:00Z"]
    out = synth.sample_remaining_columns(pd.DataFrame({"t": text}))
    expected = pd.to_datetime(text, format="ISO8601", utc=True).tz_convert("Europe/Paris")
    assert list(out["t"]) == list(expected)  # 10:00, 09:00 and 09:00 in Paris
    with pytest.raises(SchemaError, match="some are written with an offset from UTC and some"):
        synth.sample_remaining_columns(pd.DataFrame({"t": [text[0], "2021-01-05 10:00"]}))


@pytest.mark.parametrize(
    ("columns", "fix"),
    [
        ([0, 1], r"got 0 \(int\); name them with text, e.g. df.columns = df.columns.astype"),
        (
            pd.MultiIndex.from_tuples([("a", "x"), ("a", "k")]),
            r"got \('a', 'x'\) \(a MultiIndex header\); flatten it",
        ),
    ],
)
def test_column_names_that_are_not_text_say_how_to_rename_them(columns, fix):
    """Integer names and a MultiIndex header: 'column names must be strings, got 0',
    with no fix; Schema.validate said the schema's columns were missing."""
    sites = [_table(0).set_axis(columns, axis=1), _table(1).set_axis(columns, axis=1)]
    with pytest.raises(SchemaError, match=rf"client 1: column names must be strings, {fix}"):
        FITSSynthesizer(seed=0).fit(sites)
    schema = Schema.detect([_table(0), _table(1)])
    with pytest.raises(SchemaError, match=rf"table: column names must be strings, {fix}"):
        schema.validate(sites[0])


@pytest.mark.parametrize("tz", [None, "Europe/Paris"])
def test_arrow_timestamps_come_back_as_arrow_timestamps(tz):
    """A timestamp[s][pyarrow] column (pd.read_parquet(dtype_backend="pyarrow")) came
    back as datetime64[us], while Arrow integers and floats kept their types."""
    sites = []
    for table in _timed_sites(tz):
        sites.append(table.assign(t=table["t"].astype(f"datetime64[s{', ' + tz if tz else ''}]")))
    for table in sites:
        table["t"] = table["t"].astype(pd.ArrowDtype(pa.timestamp("s", tz=tz)))
    expected = sites[0]["t"].dtype
    synth = FITSSynthesizer(seed=0).fit(sites)
    assert synth.sample(30)["t"].dtype == expected
    assert synth.sample(0)["t"].dtype == expected


def test_a_copy_is_told_to_reconnect_as_a_copy():
    """copy.deepcopy(synth) pickles it (no sites); the message said only 'saved or
    pickled', which the user had not done."""
    import copy

    from fits.synthesizer import NotConnectedError

    synth = FITSSynthesizer(seed=0).fit([_table(0), _table(1)])
    with pytest.raises(NotConnectedError, match=r"copied \(copy.copy and copy.deepcopy"):
        copy.deepcopy(synth).sample(3)
    again = copy.deepcopy(synth).connect([_table(0), _table(1)])
    assert again.sample(4, seed=2).equals(synth.sample(4, seed=2))


def test_an_order_naming_a_column_twice_says_which():
    """order=['x', 'x', 'k'] said only 'must name every column exactly once'."""
    with pytest.raises(SchemaError, match=r"named more than once: \['x'\]"):
        FITSSynthesizer(seed=0, order=["x", "x", "k"]).fit([_table(0), _table(1)])


def test_the_notes_and_errors_a_user_handles_are_importable_from_fits():
    """To filter the dtype notes (warnings.filterwarnings(category=fits.DataNote)) or
    catch a refused identifier or an unconnected synthesizer, a user had to know the
    submodules (fits.core.schema, fits.synthesizer)."""
    import fits

    assert fits.DataNote is DataNote and issubclass(fits.DataNote, UserWarning)
    assert fits.IdentifierColumnError is IdentifierColumnError
    assert issubclass(fits.NotConnectedError, RuntimeError)
    assert {"DataNote", "IdentifierColumnError", "NotConnectedError"} <= set(fits.__all__)


_LOAD_AND_SAMPLE = """
import sys, warnings
import pandas as pd
warnings.simplefilter("ignore")
from fits import FITSSynthesizer
folder = sys.argv[1]
sites = {name: pd.read_pickle(f"{folder}/{name}.pkl") for name in ("north", "south")}
synth = FITSSynthesizer.load(f"{folder}/synth.pkl").connect(sites)
synth.sample(40, seed=3).to_pickle(f"{folder}/out.pkl")
"""


def test_a_saved_synthesizer_samples_the_same_rows_in_a_fresh_process(tmp_path):
    """Saved here, loaded in another Python (another string hash seed, so another
    iteration order of any set of labels), reconnected: the same rows for the same
    seed, labels of mixed types and a categorical with unused categories included."""
    import os
    import subprocess
    import sys

    sites = {}
    for k, name in enumerate(("north", "south")):
        rng = np.random.default_rng(k)
        sites[name] = pd.DataFrame(
            {
                "x": rng.normal(size=N),
                "k": rng.choice([f"label{j}" for j in range(9 - k)], N),
                "cat": pd.Categorical(rng.choice(["z", "a", "m"], N), ["z", "a", "m", "q"]),
                "mix": pd.Series(
                    [[1, "a", 2.5, "b"][i] for i in rng.integers(0, 4, N)], dtype=object
                ),
            }
        )
        sites[name].to_pickle(tmp_path / f"{name}.pkl")
    synth = FITSSynthesizer(seed=0).fit(sites)
    synth.save(tmp_path / "synth.pkl")
    expected = synth.sample(40, seed=3)
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    res = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_SAMPLE, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    pd.testing.assert_frame_equal(pd.read_pickle(tmp_path / "out.pkl"), expected)
