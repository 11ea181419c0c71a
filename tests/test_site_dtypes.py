"""Sites whose pandas dtypes for one column differ.

The output dtype is the sites' common type, the one ``pd.concat`` of their columns
gives (a categorical of text and ``str``: ``str``; ``int64`` and ``float64``:
``float64``; ``int64`` and ``Int64``: ``Int64``; ``bool`` and ``boolean``:
``boolean``), with the values unchanged; it was ``object`` for a categorical and text,
and the integers' ``int64`` for integers and whole floats. Where no type holds both
(true/false values at one site, 0/1 or text at another) the fit stops with an error
naming the column and the sites.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from fits import FITSSynthesizer, SchemaError

from conftest import fits_in_process as run

N = 300


def _pair(first, second, seed: int = 0) -> list[pd.DataFrame]:
    """Two sites with a continuous column ``x`` and the column ``c`` of the given
    values (the first site's, the second's)."""
    out = []
    for k, values in enumerate((first, second)):
        rng = np.random.default_rng(seed + k)
        out.append(pd.DataFrame({"x": rng.normal(size=N), "c": values}))
    return out


def _cases():
    rng = np.random.default_rng(5)
    labels = rng.choice(["a", "b", "c"], (2, N))
    whole = rng.integers(0, 1000, (2, N))
    small = rng.integers(0, 5, (2, N))
    flags = rng.random((2, N)) < 0.4
    return {
        # name: (site 1's column, site 2's column, the output dtype)
        # None: pd.concat's, which depends on pandas: str / string under pandas 3, object
        # under pandas 2 (no str dtype: "str" is object there)
        "category and str": (pd.Categorical(labels[0]), pd.Series(labels[1], dtype="str"), None),
        "category and object": (
            pd.Categorical(labels[0]),
            pd.Series(labels[1], dtype=object),
            "object",
        ),
        "str and string": (
            pd.Series(labels[0], dtype="str"),
            pd.Series(labels[1], dtype="string"),
            None,
        ),
        "int and float": (whole[0], rng.normal(500, 200, N), "float64"),
        "int and whole floats": (whole[0], whole[1].astype(float), "float64"),
        "int and float levels": (small[0], small[1].astype(float), "float64"),
        "int32 and int16": (whole[0].astype("int32"), whole[1].astype("int16"), "int32"),
        "int64 and Int64": (whole[0], pd.array(whole[1], dtype="Int64"), "Int64"),
        "float32 and float64": (
            rng.normal(size=N).astype("float32"),
            rng.normal(size=N),
            "float64",
        ),
        "bool and boolean": (flags[0], pd.array(flags[1], dtype="boolean"), "boolean"),
    }


CASES = _cases()
#: Whether this pandas has the str dtype (pandas 3; under pandas 2 "str" is object).
PANDAS_STR = str(pd.Series(["a"], dtype="str").dtype) == "str"


@pytest.mark.parametrize("case", list(CASES))
def test_the_output_has_the_sites_common_dtype(case):
    """The output dtype is pd.concat's of the sites' columns (it was object for a
    categorical and text, int64 for integers and whole floats, the integers' dtype for
    int64 and Int64, bool for bool and boolean), and no value changes: a discrete
    column's synthetic values are real ones, a column whole at every site stays whole."""
    first, second, expected = CASES[case]
    sites = _pair(first, second)
    pooled = pd.concat([s["c"] for s in sites], ignore_index=True)
    if expected is None:
        expected = str(pooled.dtype)
        assert expected in (("str", "string") if PANDAS_STR else ("object",))
    assert str(pooled.dtype) == expected  # the common type, as pandas has it
    synth = FITSSynthesizer(seed=0).fit(sites)
    out = synth.sample(400)
    assert str(out["c"].dtype) == expected, synth.schema_["c"]
    assert str(synth.sample(0)["c"].dtype) == expected
    spec = synth.schema_["c"]
    if spec.is_discrete:
        real = {v for v in pooled.astype(object)}
        assert set(out["c"].astype(object)) <= real
        assert len(set(out["c"].astype(object))) == len(real)
    else:
        assert out["c"].between(pooled.min(), pooled.max()).all()
    if case == "int and whole floats":
        assert (out["c"] == out["c"].round()).all()


def test_integers_past_2_53_and_floats_stay_integers():
    """Integers past 2**53 at one site and floats at another: float64, pd.concat's
    common type, would round the integers' values, so they come back as integers,
    within the exact bounds."""
    rng = np.random.default_rng(2)
    big = 2**60 + rng.integers(0, 10**6, N)
    sites = _pair(big, (2**60 + rng.integers(0, 10**6, N)).astype(float))
    out = FITSSynthesizer(seed=0).fit(sites).sample(100)
    assert out["c"].dtype == np.int64
    assert out["c"].min() >= 2**60 and out["c"].max() <= 2**60 + 10**6 + 256  # float spacing


@pytest.mark.parametrize(
    ("second", "what"),
    [
        (np.random.default_rng(1).integers(0, 2, N), "numbers"),
        (
            pd.Series(np.random.default_rng(1).choice(["True", "False"], N), dtype="str"),
            r"other.*map\(\{'True': True, 'False': False\}\)",  # their own words (said yes/no)
        ),
        (
            pd.Series(np.random.default_rng(1).choice(["yes", "no"], N), dtype=object),
            r"other.*map\(\{'yes': True, 'no': False\}\)",
        ),
        (
            pd.Series(np.random.default_rng(1).choice(["red", "no"], N), dtype=object),
            r"other.*map\(\{'yes': True, 'no': False\}\)",  # not all words: the example
        ),
    ],
)
def test_true_false_values_and_others_are_refused_naming_the_sites(second, what):
    """True/false values at one site and 0/1 or text at another: no type holds both
    without changing values, so the fit stops naming the column and both sites (0/1
    was refused as 'numeric at some clients and text at others'; text was taken, and
    the column modelled True and 'True' as two labels)."""
    flags = np.random.default_rng(0).random(N) < 0.5
    sites = dict(zip(["north", "south"], _pair(flags, second), strict=True))
    with pytest.raises(
        SchemaError, match=rf"column 'c' holds true/false values at north and {what}"
    ):
        FITSSynthesizer(seed=0).fit(sites)
    # an object column of True/False values is true/false values too: fitted, object
    objects = pd.Series(flags[::-1], dtype=object)
    out = FITSSynthesizer(seed=0).fit(_pair(flags, objects)).sample(50)
    assert out["c"].dtype == object and set(out["c"]) <= {True, False}


def test_text_and_categorical_sites_through_the_command_line(tmp_path):
    """fits synthesize site.csv site.parquet, the Parquet column a categorical and the
    CSV's text: the output column is the text a CSV site alone gives (in a Parquet
    output the same column type as from two CSV sites); integers in one file and whole
    floats in another come back as floats; 0/1 in a CSV and booleans in a Parquet file
    are refused naming both files."""
    rng = np.random.default_rng(3)
    a = pd.DataFrame(
        {
            "x": rng.normal(size=N),
            "c": rng.choice(["a", "b", "c"], N),
            "n": rng.integers(0, 1000, N),
            "f": rng.integers(0, 2, N),
        }
    )
    b = pd.DataFrame(
        {
            "x": rng.normal(size=N),
            "c": pd.Categorical(rng.choice(["a", "b", "c"], N)),
            "n": rng.integers(0, 1000, N).astype(float),
            "f": rng.random(N) < 0.5,
        }
    )
    a.to_csv(tmp_path / "one.csv", index=False)
    b.to_parquet(tmp_path / "two.parquet", index=False)
    a.iloc[::-1].to_csv(tmp_path / "three.csv", index=False)  # text alone, other bytes
    out = tmp_path / "out.parquet"
    res = run("synthesize", tmp_path / "one.csv", tmp_path / "two.parquet", "--rows", "50",
              "--out", out, "--drop", "f", "-q")  # fmt: skip
    assert res.returncode == 0, res.stderr
    ref = tmp_path / "ref.parquet"
    res = run("synthesize", tmp_path / "one.csv", tmp_path / "three.csv", "--rows", "50",
              "--out", ref, "--drop", "f", "-q")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert pq.read_schema(out).field("c").type == pq.read_schema(ref).field("c").type
    assert pq.read_schema(out).field("n").type == "double"
    back = pd.read_parquet(out)
    assert set(back["c"]) <= {"a", "b", "c"} and (back["n"] == back["n"].round()).all()
    res = run("synthesize", tmp_path / "one.csv", tmp_path / "two.parquet", "--rows", "50",
              "--out", tmp_path / "no.csv")  # fmt: skip
    assert res.returncode == 1
    assert "column 'f' holds true/false values at two and numbers at one" in res.stderr
    assert not (tmp_path / "no.csv").exists()


@pytest.mark.parametrize("ordered_first", [True, False])
def test_an_ordered_categorical_at_one_site_and_text_at_another_is_named(ordered_first):
    """Synthesis and analysis share the merge: it raised KeyError: 'categories' (text
    site first) or said the text site 'orders its categories differently'."""
    rng = np.random.default_rng(0)
    levels = ["low", "medium", "high"]
    values = rng.choice(levels, 120)
    ordered = pd.DataFrame(
        {"x": rng.normal(size=120), "size": pd.Categorical(values, levels, ordered=True)}
    )
    text = pd.DataFrame({"x": rng.normal(size=120), "size": values.astype(object)})
    sites = [ordered, text] if ordered_first else [text, ordered]
    with pytest.raises(SchemaError, match=r"'size' is an ordered categorical \('low' < 'medium'"):
        FITSSynthesizer(seed=0).fit(sites)
