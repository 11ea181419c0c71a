"""The pandas API on tables nobody designed for it (third pass; see tests/test_api_qa.py
and tests/test_api_qa2.py): pandas categoricals of odd labels, ordered categoricals
ordered apart, and saved synthesizers from another version of fits."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, SchemaError

N = 120


def _sites(make) -> dict[str, pd.DataFrame]:
    """Sites north and south: a continuous ``x`` and the column ``c`` that
    ``make(rng)`` gives."""
    out = {}
    for k, name in enumerate(("north", "south")):
        rng = np.random.default_rng(k)
        out[name] = pd.DataFrame({"x": rng.normal(size=N), "c": make(rng)})
    return out


def _fit(sites) -> FITSSynthesizer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return FITSSynthesizer(seed=0).fit(sites)


def _pick(values):
    return lambda rng: pd.Categorical(rng.choice(np.array(values, dtype=object), N))


@pytest.mark.parametrize(
    ("make", "what", "fix"),
    [
        (lambda rng: pd.cut(rng.normal(size=N), [-10, 0, 10]), "intervals",
         "df['c'].cat.rename_categories(str)"),
        (_pick(pd.to_datetime(["2020-01-01", "2021-01-01"])), "datetimes",
         "df['c'].astype(df['c'].cat.categories.dtype)"),
        (_pick(pd.to_datetime(["2020-01-01", "2021-01-01"]).tz_localize("UTC")), "datetimes",
         "df['c'].astype(df['c'].cat.categories.dtype)"),
        (_pick(pd.to_timedelta([1, 2], unit="D")), "durations", "rename_categories(str)"),
        (_pick(pd.period_range("2020-01", periods=2, freq="M")), "periods",
         "rename_categories(str)"),
        (_pick([b"a", b"b"]), "bytes", "rename_categories(bytes.decode)"),
        (_pick([decimal.Decimal("1.5"), decimal.Decimal("2.5")]), "Decimal",
         "df['c'].astype(float)"),
        (_pick([dt.date(2020, 1, 1), dt.date(2020, 2, 1)]), "dates", "rename_categories(str)"),
        (lambda rng: pd.Categorical([(1, 2), (3, 4)] * (N // 2)), "tuples",
         "rename_categories(str)"),
    ],
    ids=["pd.cut", "datetimes", "tz-datetimes", "timedeltas", "periods", "bytes", "decimals",
         "dates", "tuples"],
)  # fmt: skip
def test_categories_that_are_no_labels_are_refused_naming_site_column_and_fix(make, what, fix):
    """A categorical of intervals (``pd.cut``), datetimes, durations, periods, bytes,
    Decimals, dates or tuples: the site described its categories as their text, which
    its own values never equal, so the fit stopped on "the schema's categories are
    text, the column's values numbers: write them in the schema as numbers" (tuples: a
    TypeError, unhashable type 'list'). It is refused at the site, naming what the
    categories are and the fix."""
    with pytest.raises(SchemaError) as info:
        _fit(_sites(make))
    message = str(info.value)
    assert message.startswith("north: column 'c' holds pandas categories that are ")
    assert what in message and fix in message


def test_the_fixes_the_refusal_names_work():
    """pd.cut's bins renamed to text keep their order; datetime categories made a
    datetime column are a datetime column; bytes labels decoded are text."""
    bins = _sites(lambda rng: pd.cut(rng.normal(size=N), [-10, -1, 0, 1, 10]))
    for df in bins.values():
        df["c"] = df["c"].cat.rename_categories(str)
    out = _fit(bins).sample(50)
    assert out["c"].dtype == bins["north"]["c"].dtype and out["c"].cat.ordered

    days = _sites(_pick(pd.to_datetime(["2020-01-01", "2021-01-01"])))
    for df in days.values():
        df["c"] = df["c"].astype(df["c"].cat.categories.dtype)
    assert pd.api.types.is_datetime64_dtype(_fit(days).sample(5)["c"])

    raw = _sites(_pick([b"a", b"b"]))
    for df in raw.values():
        df["c"] = df["c"].cat.rename_categories(bytes.decode)
    assert set(_fit(raw).sample(50)["c"]) == {"a", "b"}


@pytest.mark.parametrize(
    "make",
    [
        _pick(["a", "b"]),
        _pick([1, 2, 3]),
        _pick([0.5, 1.5]),
        _pick([True, False]),
        lambda rng: pd.Categorical(rng.choice(["a", "b"], N), categories=["a", "b", "zz"]),
    ],
    ids=["text", "ints", "floats", "bools", "unused"],
)
def test_categories_of_labels_are_kept_with_their_dtype(make):
    sites = _sites(make)
    out = _fit(sites).sample(60)
    assert out["c"].dtype == sites["north"]["c"].dtype
    assert set(out["c"].dropna()) <= set(sites["north"]["c"].cat.categories)


def test_ordered_categoricals_ordered_apart_say_both_orders_and_the_fix():
    """Two sites ordering two labels oppositely: the error said only "south orders its
    categories differently from north"; it shows both orders and the call that gives
    every site one, which then fits. (``astype('category').cat.as_ordered()`` at a site
    missing a label gives a shorter list that agrees: merged, tests/test_odd_inputs.py.)"""
    orders = {"north": ["lo", "mid", "hi"], "south": ["mid", "lo"]}
    sites = {}
    for k, (name, order) in enumerate(orders.items()):
        rng = np.random.default_rng(k)
        c = pd.Categorical(rng.choice(order, N), categories=order, ordered=True)
        sites[name] = pd.DataFrame({"x": rng.normal(size=N), "c": c})
    with pytest.raises(SchemaError) as info:
        _fit(sites)
    message = str(info.value)
    assert "('mid' < 'lo' at south, 'lo' < 'mid' < 'hi' at north)" in message
    fix = "df['c'] = df['c'].cat.set_categories(['lo', 'mid', 'hi'], ordered=True)"
    assert fix in message
    for df in sites.values():
        df["c"] = df["c"].cat.set_categories(["lo", "mid", "hi"], ordered=True)
    out = _fit(sites).sample(40)
    assert out["c"].dtype == sites["north"]["c"].dtype


def _fitted(tmp_path) -> FITSSynthesizer:
    return _fit(_sites(_pick(["a", "b"])))


def test_a_file_saved_by_a_newer_fits_is_refused_naming_both_versions(tmp_path, monkeypatch):
    """load read a newer fits' file as its own, however its settings and schema had
    changed, and failed later, or sampled wrong, deep inside. It is refused before its
    state is read, naming both versions and the fix; the file of the running version
    loads as before."""
    import fits
    from fits.synthesizer import SavedByNewerFitsError

    synth = _fitted(tmp_path)
    same = synth.save(tmp_path / "same.pkl")
    monkeypatch.setattr(fits, "__version__", "99.1.0")
    newer = synth.save(tmp_path / "newer.pkl")
    monkeypatch.undo()
    with pytest.raises(SavedByNewerFitsError) as info:
        FITSSynthesizer.load(newer)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert message.startswith(f"load: {str(newer)!r}: saved by fits 99.1.0, newer than ")
    assert f"this fits {fits.__version__}" in message and "upgrade fits" in message
    assert FITSSynthesizer.load(same).get_params() == synth.get_params()


def test_a_file_saved_before_a_parameter_existed_takes_its_default(tmp_path):
    """A file from before a parameter was added lacks it: get_params (and so clone,
    repr) raised AttributeError. The parameter takes its default."""
    from sklearn.base import clone

    synth = _fitted(tmp_path)
    del synth.near_linear  # as a fits before near_linear saved it
    loaded = FITSSynthesizer.load(synth.save(tmp_path / "old.pkl"))
    assert loaded.get_params()["near_linear"] is True
    assert clone(loaded).get_params() == FITSSynthesizer(seed=0).get_params()


def test_a_pickle_of_a_newer_protocol_is_not_a_saved_synthesizer(tmp_path):
    """pickle's 'unsupported pickle protocol' (a newer Python's file) is a ValueError
    that escaped load as it was; it says the file is no saved synthesizer it can read."""
    path = tmp_path / "future.pkl"
    path.write_bytes(b"\x80\x09garbage")
    with pytest.raises(ValueError, match=r"not a saved FITSSynthesizer \(unsupported pickle"):
        FITSSynthesizer.load(path)


class _Payload:
    """Unpickling this calls os.system: what a file from elsewhere could do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"echo ran > {self.marker}",))


def test_load_runs_no_code_from_a_file_that_is_not_a_saved_synthesizer(tmp_path):
    """load was a plain pickle.load: a file naming os.system ran it while being read
    (and only then was refused as "not a saved synthesizer"). It is refused before any
    call, naming the global and the escape for a trusted file; saved files load."""
    import pickle

    marker = tmp_path / "ran.txt"
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(ValueError, match=r"names posix\.system|names nt\.system") as info:
        FITSSynthesizer.load(evil)
    assert "trusted=True" in str(info.value) and not marker.exists()
    wrapped = tmp_path / "wrapped.pkl"  # inside a synthesizer's state, too
    synth = _fitted(tmp_path)
    synth.payload_ = _Payload(marker)
    wrapped.write_bytes(pickle.dumps(synth))
    with pytest.raises(ValueError, match="which a saved FITSSynthesizer never holds"):
        FITSSynthesizer.load(wrapped)
    assert not marker.exists()
    with pytest.raises(ValueError, match="holds a int"):  # trusted: plain pickle, as before
        FITSSynthesizer.load(evil, trusted=True)
    assert marker.read_text().strip() == "ran"


def test_saved_synthesizers_of_every_kind_load_under_the_check(tmp_path):
    """What the check lets through covers what saved synthesizers hold: kernels (the
    Gaussian's instance), tuned smoothing, boosted columns, rules, generators."""
    from fits.core.kernels import GaussianKernel

    rng = np.random.default_rng(0)
    n = 300
    table = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "d": pd.date_range("2020-01-01", periods=n, tz="Europe/Paris"),
            "c": pd.Categorical(rng.choice(["u", "v"], n)),
            "b": rng.random(n) < 0.5,
            "i": pd.array(rng.integers(0, 5, n), dtype="Int64"),
        }
    )
    table["y"] = 2 * table["x"] + 1 + rng.normal(size=n) * 0.01
    table["e"] = table["i"].astype(float) * 3
    for params in (
        {"kernel": GaussianKernel(0.3)},
        {"column_models": {"y": "boosting"}},
        {"smoothing": "auto"},
    ):
        synth = FITSSynthesizer(seed=0, **params).fit([table, table.copy()])
        loaded = FITSSynthesizer.load(synth.save(tmp_path / "s.pkl"))
        assert loaded.get_params().keys() == synth.get_params().keys()
        assert loaded.schema_.names == synth.schema_.names


def test_copies_and_clones_keep_working(tmp_path):
    import copy
    import pickle

    from sklearn.base import clone

    synth = _fitted(tmp_path)
    for other in (copy.deepcopy(synth), pickle.loads(pickle.dumps(synth)), clone(synth)):
        assert other.get_params() == synth.get_params()
    assert copy.deepcopy(synth).schema_.kinds() == synth.schema_.kinds()


@pytest.mark.parametrize(
    ("zone", "empty_dtype"),
    [("Europe/Paris", "datetime64[ns]"), (None, "datetime64[ns, UTC]")],
    ids=["zoned-vs-naive-NaT", "naive-vs-zoned-NaT"],
)
def test_a_datetime_column_missing_in_every_row_of_a_site_has_no_zone_to_disagree(
    zone, empty_dtype
):
    """A datetime column empty at one site (pd.to_datetime of empty cells: naive NaT)
    next to a zoned one elsewhere: the fit refused the empty site for 'times without a
    time zone' it does not hold. The column fits, in the other site's zone, missing in
    about the empty site's share of rows."""
    sites = _sites(lambda rng: rng.normal(size=N))
    sites["north"]["c"] = pd.date_range("2020-01-01", periods=N, freq="h", tz=zone)
    sites["south"]["c"] = pd.Series([pd.NaT] * N, dtype=empty_dtype)
    out = _fit(sites).sample(400)
    assert str(getattr(out["c"].dt, "tz", None)) == str(zone)
    assert 0.35 < out["c"].isna().mean() < 0.65


def _index_notes(sites) -> list[str]:
    from fits import DataNote

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FITSSynthesizer(seed=0).fit(sites)
    return [str(w.message) for w in caught if issubclass(w.category, DataNote)]


def test_an_index_that_holds_data_is_named_in_a_note():
    """A time series' dates, or a column moved there by set_index, were left out of the
    synthetic table without a word. The fit says which sites' index holds what, and
    the fix (reset_index)."""
    sites = _sites(_pick(["a", "b"]))
    dated = {
        "north": sites["north"].set_axis(pd.date_range("2020-01-01", periods=N, name="day")),
        "south": sites["south"].set_index("c"),
    }
    dated["north"] = dated["north"].drop(columns="c")
    [note] = [n for n in _index_notes(dated) if "index" in n]
    assert "north: dates, named 'day'; south: categories, named 'c'" in note
    assert "df.reset_index()" in note


def test_a_plain_or_gapped_integer_index_draws_no_note():
    """Row numbers, with gaps after a filter or repeated after a concat, are no data."""
    sites = _sites(_pick(["a", "b"]))
    gapped = {"north": sites["north"].iloc[::2], "south": pd.concat([sites["south"]] * 2)}
    assert not [n for n in _index_notes(gapped) if "index" in n]


@pytest.mark.parametrize("given", ["schema.json", {"x": "continuous"}], ids=["path", "dict"])
def test_a_schema_given_as_a_path_or_a_dict_says_how_to_make_a_schema(given):
    """schema='schema.json' (the CLI's --schema takes a path) said only 'schema must be
    a fits Schema, got str'; it names the two ways to make one."""
    with pytest.raises(TypeError) as info:
        FITSSynthesizer(schema=given).fit(_sites(_pick(["a", "b"])))
    assert "Schema.from_json(Path(path).read_text(" in str(info.value)
    assert "Schema.detect(tables)" in str(info.value)


def test_a_row_number_held_as_floats_is_warned_of_as_the_integers_are():
    """1.0, 2.0, ... (an id column read with a missing value, or computed) at every
    site: the same fresh whole numbers coinciding with real identifiers as int64 gives,
    which draws NumericIdentifierWarning; as floats it drew nothing."""
    from fits.core.schema import NumericIdentifierWarning

    sites = {
        name: pd.DataFrame({"x": np.arange(N) % 7 * 0.5, "id": np.arange(1.0, N + 1) + k * N})
        for k, name in enumerate(("north", "south"))
    }
    with pytest.warns(NumericIdentifierWarning, match="column 'id' holds a different whole"):
        FITSSynthesizer(seed=0).fit(sites)


def test_whole_floats_that_repeat_draw_no_identifier_warning():
    from fits.core.schema import NumericIdentifierWarning

    sites = _sites(lambda rng: rng.integers(0, 100, N).astype(float))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FITSSynthesizer(seed=0).fit(sites)
    assert not [w for w in caught if issubclass(w.category, NumericIdentifierWarning)]


def _glm_sites(y) -> dict[str, pd.DataFrame]:
    out = {}
    for k, name in enumerate(("north", "south")):
        rng = np.random.default_rng(k)
        out[name] = pd.DataFrame({"x": rng.normal(size=N), "c": 1.0, "y": y(rng)})
    return out


@pytest.mark.parametrize("family", ["logistic", "poisson"])
def test_a_glm_target_of_one_value_says_choose_another_target_only(family):
    """A response of one class at every site: the error advised 'or name the features
    without it', which cannot help a target; it says the model needs two of its values
    and to choose another target."""
    from fits.analysis import fit_glm

    with pytest.raises(SchemaError) as info:
        fit_glm(_glm_sites(lambda rng: np.zeros(N, dtype=int)), "y", ["x"], family=family)
    message = str(info.value)
    assert "'y' takes one value at every site" in message
    assert "needs at least two distinct values of it" in message
    assert message.endswith("choose another target") and "features" not in message


def test_a_constant_feature_named_says_name_the_features_without_it():
    from fits.analysis import fit_glm

    sites = _glm_sites(lambda rng: rng.integers(0, 2, N))
    with pytest.raises(SchemaError) as info:
        fit_glm(sites, "y", ["x", "c"])
    message = str(info.value)
    assert "'c' takes one value at every site" in message
    assert "name the features without it (features=[...]" in message
    assert "choose another target" not in message


@pytest.mark.parametrize(
    ("offset", "spread"),
    [(1.7e9, 0.5), (1e9, 0.01), (1e12, 100.0)],
    ids=["stopped-the-fit", "stopped-the-fit-2", "collapsed"],
)
def test_a_large_column_of_small_spread_is_no_rule_of_another(offset, spread):
    """A column of large values varying by under 1e-9 of them (seconds since 1970
    with sub-second jitter; 1e12 +- 100), unrelated to x: every line through it
    passes the affine check's float slack (AFFINE_RTOL of its magnitude). The slope
    snapped to 0 stopped the fit on 'rule for column 'c': "slope" 0 makes a constant
    column; remove the rule' (a rule nobody wrote), or the 'rule' c = 6 x + 1e12 drew
    c from x with a twentieth of its spread. No rule; c keeps its spread."""
    sites = {}
    for k, name in enumerate(("north", "south")):
        rng = np.random.default_rng(k)
        x = rng.normal(size=300)
        sites[name] = pd.DataFrame({"x": x, "c": offset + spread * rng.normal(size=300)})
    synth = _fit(sites)
    assert not [r for r in synth.schema_.rules if r.column == "c"]
    real = pd.concat(sites.values())["c"]
    ratio = synth.sample(600)["c"].std() / real.std()
    assert 0.8 < ratio < 1.25


@pytest.mark.parametrize(
    ("scale", "fix"),
    [(1e104, "* 1e-104"), (1e-200, "* 1e+200"), (1.7e308, "* 1e-300"), (1e-310, "* 1e+300")],
    ids=["huge", "tiny", "float64-max", "subnormal"],
)
def test_a_column_spanning_past_what_the_estimates_hold_is_refused_with_the_rescaling(scale, fix):
    """Values of +-1e104 (or +-1e-200) drawn given x came out as one value in every
    synthetic row, without a word; +-1.7e308 stopped the fit on 'a moments answer has
    shape (34,), not (34,)'. Refused at fit, naming the column, its span and the
    power of ten that brings it in range."""
    sites = _sites(lambda rng: rng.uniform(-1, 1, N) * scale)
    with pytest.raises(SchemaError) as info:
        _fit(sites)
    message = str(info.value)
    assert message.startswith("column 'c' spans ") and f"df['c'] {fix}" in message
    for df in sites.values():
        df["c"] *= float(fix.removeprefix("* "))
    out = _fit(sites).sample(300)["c"]
    assert out.nunique() > 250


@pytest.mark.parametrize("scale", [1e90, 1e-90])
def test_a_column_spanning_within_the_limits_keeps_its_spread(scale):
    sites = _sites(lambda rng: rng.uniform(-1, 1, N) * scale)
    out = _fit(sites).sample(300)["c"]
    assert out.nunique() > 250
    assert 0.8 < out.std() / pd.concat(sites.values())["c"].std() < 1.25


@pytest.mark.parametrize(("unit", "zone"), [("s", None), ("us", "Europe/Paris")])
def test_dates_past_2262_keep_their_range_and_unit(unit, zone):
    """An 'open end' of 9999-12-31 in a datetime64[s] or [us] column: the sites read
    every datetime through datetime64[ns] (1677 to 2262), which wrapped 9999 around
    silently: the synthetic dates reached back to 1816, below every real one, none came
    after 2029, and the unit became us. They keep the real range, its far end, and the
    unit."""
    sites = {}
    for k, name in enumerate(("north", "south")):
        rng = np.random.default_rng(k)
        days = pd.to_timedelta(rng.integers(0, 30 * 365, N), unit="D")
        end = pd.Series(pd.Timestamp("2000-01-01") + days).astype(f"datetime64[{unit}]")
        end[rng.random(N) < 0.1] = pd.Timestamp("9999-12-31")
        sites[name] = pd.DataFrame({"x": rng.normal(size=N), "end": end.dt.tz_localize(zone)})
    out = _fit(sites).sample(400)["end"]
    real = pd.concat(sites.values())["end"]
    assert out.dtype == real.dtype
    assert real.min() <= out.min() and out.max() <= real.max()
    assert (out.dt.year == 9999).any()


def test_the_release_check_counts_copies_of_rows_dated_past_2262():
    """fits synthesize's release check read datetimes as datetime64[ns]: a 9999-12-31
    stopped it on pandas' OutOfBoundsDatetime after the synthesis. It counts the copy."""
    from fits.evaluation import ReleaseCheck

    rng = np.random.default_rng(0)
    end = pd.Series(pd.date_range("2000-01-01", periods=N, freq="D")).astype("datetime64[s]")
    end[::10] = pd.Timestamp("9999-12-31")
    real = pd.DataFrame({"x": rng.normal(size=N), "end": end})
    check = ReleaseCheck({"a": real}, {"x": "continuous", "end": "continuous"})
    synthetic = real.iloc[[0, 1]].assign(x=[real["x"].iloc[0], 99.0])
    check.update(synthetic)
    assert check.result().copies == 1
    assert check.result().copies_by_site == {"a": 1}


@pytest.mark.parametrize(
    ("column", "dtype", "held"),
    [("flag", "string", "[False, True] (bool)"), ("g", "bool", "['u', 'v'] (str)")],
)
def test_a_schema_whose_dtype_cannot_hold_its_labels_is_refused(tmp_path, column, dtype, held):
    """A bool column's "dtype" edited to "string" gave True in every synthetic row (the
    labels went out as text, and any text is true); a text column's edited to "bool"
    too. The schema file is refused, naming the column, the dtype and the labels."""
    import json

    from fits.core.schema import Schema

    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {"x": rng.normal(size=80), "flag": rng.random(80) < 0.3, "g": rng.choice(["u", "v"], 80)}
    )
    d = json.loads(FITSSynthesizer(seed=0).fit([table, table.copy()]).schema_.to_json())
    Schema.from_dict(d)  # as written: fine
    for entry in d["columns"]:
        if entry["name"] == column:
            entry["dtype"] = dtype
    with pytest.raises(SchemaError, match=rf'column {column!r}: "dtype" is {dtype!r}') as info:
        Schema.from_dict(d)
    assert held in str(info.value)


def test_int64_and_uint64_past_int64_are_refused_not_written_as_floats():
    """A column int64 with negatives at one site and uint64 past 2**63 at another: the
    note promised int64, the output was float64 and its values collapsed. No integer
    type holds both; the fit is refused, naming the column, both dtypes and the fixes."""
    rng = np.random.default_rng(0)
    a = pd.DataFrame({"x": rng.normal(size=60), "c": rng.integers(-100, 100, 60)})
    b = pd.DataFrame(
        {
            "x": rng.normal(size=40),
            "c": rng.integers(0, 100, 40).astype("uint64") + np.uint64(2**63),
        }
    )
    with pytest.raises(
        SchemaError, match=r"column 'c' holds whole numbers from -\d+ to 92233"
    ) as info:
        FITSSynthesizer(seed=0).fit([a, b])
    assert (
        "int64" in str(info.value) and "uint64" in str(info.value) and "--drop" in str(info.value)
    )
    b["c"] = rng.integers(0, 100, 40).astype("uint64")  # small uint64: one integer output
    FITSSynthesizer(seed=0).fit([a, b])
