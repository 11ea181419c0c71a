"""The pandas API on tables nobody designed for it (second pass; the first is
tests/test_api_qa.py): what a data scientist might hand ``FITSSynthesizer``, and what
must come back -- the input's columns, dtypes and value domain, or a clear error."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import DataNote

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
    [note] = [n for n in notes if "'c'" in n]
    assert "north: int64" in note and "south: float64" in note
    assert "2**53" in note and "output is int64" in note


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
