"""Continualization (sec. 4.1-4.2): mass preservation and exact inversion."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits.core.continualization import Encoder, interval_boundaries
from fits.core.schema import ColumnSpec, SchemaError


def _encoder(kind, cats, dtype="int"):
    return Encoder(ColumnSpec("v", kind, dtype, cats))


def test_ordinal_boundaries_follow_eq_18():
    b = interval_boundaries(ColumnSpec("v", "ordinal", "int", [2, 3, 7, 10]))
    np.testing.assert_array_equal(b, [1, 2, 3, 7, 10])  # v_0 = v_1 - 1


def test_nominal_boundaries_follow_eq_20():
    b = interval_boundaries(ColumnSpec("v", "nominal", "object", ["a", "b", "c"]))
    np.testing.assert_array_equal(b, [0, 1, 2, 3])


@pytest.mark.parametrize(
    ("kind", "cats"),
    [("ordinal", [1, 2, 5, 6, 40]), ("nominal", ["x", "y", "z"]), ("ordinal", [0.5, 0.75])],
)
def test_mass_preserved_and_inverse_exact(kind, cats):
    enc = _encoder(kind, cats, "object" if kind == "nominal" else "float")
    rng = np.random.default_rng(0)
    codes = rng.integers(0, len(cats), 200_000)
    y = enc.lift(codes, rng)
    b = enc.boundaries
    # every lifted value lies in its own open-closed interval (v_{l-1}, v_l]
    assert np.all(y > b[codes]) and np.all(y <= b[codes + 1])
    # the ceiling map recovers every row exactly ...
    np.testing.assert_array_equal(enc.ceil(y), codes)
    # ... so every category keeps its count
    np.testing.assert_array_equal(
        np.bincount(enc.ceil(y), minlength=len(cats)), np.bincount(codes, minlength=len(cats))
    )
    # and within an interval the mass is uniform (Prop. 4.1: piecewise-constant density)
    for level in range(len(cats)):
        frac = (y[codes == level] - b[level]) / (b[level + 1] - b[level])
        assert abs(frac.mean() - 0.5) < 0.01 and abs(frac.var() - 1 / 12) < 0.005


def test_lift_stays_inside_open_end_under_rounding():
    enc = _encoder("ordinal", [1e16, 1e16 + 2])  # widths at the edge of float resolution

    class AlmostOne:
        def random(self, n):
            return np.full(n, 1 - 2**-53)

    y = enc.lift(np.array([1, 1]), AlmostOne())
    np.testing.assert_array_equal(enc.ceil(y), [1, 1])


def test_raw_labels_round_trip_with_dtypes():
    labels = pd.Series(["b", "a", "c", "a"])
    enc = _encoder("nominal", ["a", "b", "c"], "object")
    codes = enc.to_codes(labels)
    np.testing.assert_array_equal(codes, [1, 0, 2, 0])
    y = enc.lift(codes, np.random.default_rng(1))
    assert enc.decode(y).tolist() == labels.tolist()

    ints = _encoder("ordinal", [1, 2, 5], "int")
    out = ints.decode(ints.lift(np.array([2, 0, 1]), np.random.default_rng(2)))
    assert out.dtype == np.int64 and out.tolist() == [5, 1, 2]

    flags = _encoder("nominal", [False, True], "bool")
    out = flags.decode(np.array([0.3, 1.7]))
    assert out.dtype == bool and out.tolist() == [False, True]


def test_midpoint_substitution():
    enc = _encoder("ordinal", [1, 2, 5])
    np.testing.assert_allclose(enc.midpoint(np.array([0.01, 1.0, 1.2, 4.9])), [0.5, 0.5, 1.5, 3.5])


def test_unknown_category_names_column_and_client():
    enc = _encoder("nominal", ["a", "b"], "object")
    with pytest.raises(SchemaError, match=r"site 2: column 'v' .*\['zz'\]"):
        enc.to_codes(pd.Series(["a", "zz"]), client="site 2")


def test_text_in_continuous_column_is_a_clear_error():
    enc = Encoder(ColumnSpec("v", "continuous", "float", lower=0, upper=1))
    with pytest.raises(SchemaError, match="non-numeric"):
        enc.to_numeric(pd.Series(["1.5", "abc"]), client="site 1")


def test_whole_numbers_beyond_int64_are_not_wrapped(tmp_path):
    """An integer column past int64's top (a CSV column of such numbers reads as
    uint64) or below its bottom: its draws were cast to int64, so every one became
    -2**63 (9223372036854775808 once back in uint64), outside the real range. Now uint64
    where it holds them, else whole float64 numbers, within the bounds."""
    from conftest import fits_in_process

    top = 2**63
    enc = Encoder(ColumnSpec("v", "continuous", "int", lower=float(top), upper=float(top + 2**40)))
    got = enc.decode(np.array([float(top) + 2**39, float(top) + 2**40, 0.0]))
    assert got.dtype == np.uint64 and got.tolist() == [top + 2**39, top + 2**40, top]
    enc = Encoder(ColumnSpec("v", "continuous", "int", lower=-(2.0**64), upper=2.0**64))
    got = enc.decode(np.array([-(2.0**63) * 1.5, 2.0**63 * 1.5]))
    assert got.dtype == np.float64 and got.tolist() == [-(2.0**63) * 1.5, 2.0**63 * 1.5]
    small = Encoder(ColumnSpec("v", "continuous", "int", lower=-5.0, upper=5.0))
    assert small.decode(np.array([1.4, -7.0])).tolist() == [1, -5]
    rng = np.random.default_rng(0)
    files = []
    for k, n in enumerate((120, 100)):
        files.append(tmp_path / f"s{k}.csv")
        big = [str(top + int(v)) for v in rng.integers(0, 10**15, n)]
        pd.DataFrame({"x": rng.normal(size=n), "big": big}).to_csv(files[-1], index=False)
    out = tmp_path / "out.csv"
    res = fits_in_process("synthesize", *files, "--rows", "60", "--out", out, "--quiet")
    assert res.returncode == 0, res.stderr
    back = pd.read_csv(out)["big"]
    assert back.dtype == np.uint64 and back.min() > top and back.max() < top + 10**15 + 2**11
    # with missing values (UInt64): the indicator's blanks, the rest uint64 as above
    from fits import FITSSynthesizer

    column = pd.array([top + int(v) for v in rng.integers(0, 10**15, 200)], dtype="UInt64")
    column[rng.choice(200, 30, replace=False)] = pd.NA
    table = pd.DataFrame({"x": rng.normal(size=200), "big": column})
    synth = FITSSynthesizer(seed=0, kinds={"big": "continuous"})
    drawn = synth.fit([table.iloc[:100], table.iloc[100:]]).sample(80)
    assert str(drawn["big"].dtype) == "UInt64" and drawn["big"].isna().any()
    assert drawn["big"].dropna().min() >= top


def test_whole_numbers_past_2_53_stay_within_the_exact_observed_bounds():
    """Integer columns past 2**53 are modelled as float64, which rounds them (to a
    multiple of 2,048 near 2**63): the schema's float bounds, and so the synthetic
    values, could lie past the real column's min / max by up to half that spacing.
    The sites now report the exact bounds, the schema keeps them (JSON too), and draws
    come back within them; a few such values (ordinal) keep their exact values."""
    from fits import FITSSynthesizer, Schema

    top = 2**63
    rng = np.random.default_rng(0)
    n = 240
    u = (top + rng.integers(1_000, 5_000_000, n).astype(np.uint64)).astype(np.uint64)
    i = (-top + rng.integers(1_000, 5_000_000, n)).astype(np.int64)
    few_u = np.array([top + 1_000, top + 3_001, top + 9_999], dtype=np.uint64)
    few_i = np.array([-top + 1_000, -top + 3_001, -top + 9_999], dtype=np.int64)
    table = pd.DataFrame(
        {
            "u": u,
            "i": i,
            "few_u": few_u[rng.integers(0, 3, n)],
            "few_i": few_i[rng.integers(0, 3, n)],
            "x": rng.normal(size=n),
        }
    )
    sites = [table.iloc[:120], table.iloc[120:]]
    kinds = {"u": "continuous", "i": "continuous"}
    schema = Schema.detect(sites, kinds=kinds, rules=False)
    assert schema["u"].lower == int(u.min()) and schema["i"].upper == int(i.max())
    again = Schema.from_json(schema.to_json())
    assert again["u"].lower == int(u.min()) and again["i"].lower == int(i.min())
    synth = FITSSynthesizer(seed=0, kinds=kinds, rules=False).fit(sites)
    drawn = synth.sample(1500)
    assert drawn["u"].dtype == np.uint64 and drawn["i"].dtype == np.int64
    for c in ("u", "i"):
        values = [int(v) for v in drawn[c]]
        assert min(values) >= int(table[c].min()) and max(values) <= int(table[c].max()), c
    assert set(map(int, drawn["few_u"])) <= set(map(int, few_u))
    assert set(map(int, drawn["few_i"])) <= set(map(int, few_i))
    # a draw that rounding put past an exact bound comes back to it
    lo, hi = top + 1_000, top + 5_500
    enc = Encoder(ColumnSpec("v", "continuous", "int", lower=lo, upper=hi))
    got = enc.decode(np.array([float(lo), float(hi), float(top + 3_000)]))
    assert got.dtype == np.uint64 and got.tolist()[:2] == [lo, hi]
