"""The same rows in any order give the same synthetic table, byte for byte.

Each site puts its rows in a canonical order (:func:`fits.core.continualization.
canonical_order`) before its first random draw and its first sum over them
(docs/method.md, "Continualization"), so neither the continualization's per-row
uniforms nor a nearest-neighbour tie nor the order of a sum depends on how the user
happened to order the rows of a site.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.continualization import canonical_order, canonical_rows
from fits.core.schema import (
    NA_ONLY_ATTR,
    describe_table,
    description_digest,
    na_only_cells,
    parse_text_columns,
)


def _site(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Numbers, whole numbers, text categories, booleans, missing values (numbers and
    text), a datetime column, text dates and a rule (``grp`` fixes ``region``)."""
    age = rng.integers(18, 80, n)
    income = (rng.gamma(2.0, 900.0, n) + 30.0 * age).round(2)
    income[rng.random(n) < 0.08] = np.nan
    grp = rng.choice(list("abcd"), n).astype(object)
    grp[rng.random(n) < 0.06] = None
    start = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 900, n), unit="D")
    return pd.DataFrame(
        {
            "age": age,
            "income": income,
            "sex": rng.choice(["f", "m"], n),
            "grp": grp,
            "region": np.where(np.isin(grp, ["a", "b"]), "north", "south"),
            "smoker": rng.random(n) < 0.3,
            "kids": rng.integers(0, 4, n),
            "start": start,
            "visit": (start + pd.to_timedelta(rng.integers(0, 60, n), unit="D")).strftime(
                "%Y-%m-%d"
            ),
        }
    )


@pytest.fixture(scope="module")
def sites() -> list[pd.DataFrame]:
    rng = np.random.default_rng(11)
    return [_site(n, rng) for n in (240, 160, 120)]


def _shuffled(tables: list[pd.DataFrame]) -> list[pd.DataFrame]:
    """Every site's rows in another order (the index moves with them)."""
    return [t.sample(frac=1.0, random_state=7 + i) for i, t in enumerate(tables)]


@pytest.mark.parametrize("kernel", ["knn", "gaussian"])
def test_shuffled_sites_give_the_same_table(sites, kernel):
    original = FITSSynthesizer(kernel=kernel, seed=3).fit(sites).sample(600, seed=1)
    shuffled = FITSSynthesizer(kernel=kernel, seed=3).fit(_shuffled(sites)).sample(600, seed=1)
    pd.testing.assert_frame_equal(original, shuffled)
    assert original["income"].isna().any() and original["grp"].isna().any()


def test_shuffled_sites_give_the_same_table_with_secure_aggregation(sites):
    params = {"kernel": ["knn", "gaussian", "knn"], "seed": 4, "secure_aggregation": True}
    original = FITSSynthesizer(**params).fit(sites).sample(400, seed=2)
    shuffled = FITSSynthesizer(**params).fit(_shuffled(sites)).sample(400, seed=2)
    pd.testing.assert_frame_equal(original, shuffled)


def test_a_reconnected_shuffled_site_draws_what_the_original_does(sites, tmp_path):
    tables = [  # an ordered categorical: its values' order at setup is not the rows'
        t.assign(
            level=pd.Categorical(
                np.where(t["kids"] > 1, "high", "low"), categories=["low", "high"], ordered=True
            )
        )
        for t in sites
    ]
    synth = FITSSynthesizer(seed=5).fit(tables)
    path = synth.save(tmp_path / "synth.pkl")
    expected = synth.sample(500, seed=3)
    again = FITSSynthesizer.load(path).connect([tables[0], *_shuffled(tables)[1:]])
    pd.testing.assert_frame_equal(again.sample(500, seed=3), expected)
    # and the synthesizer's own stream continues alike
    pd.testing.assert_frame_equal(again.sample(200), synth.sample(200))


def test_canonical_order_is_a_function_of_the_rows_alone():
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame(
        {
            "x": rng.choice([1.5, -0.0, 0.0, np.nan, np.inf, -2.0], n),
            "n": pd.array(rng.choice([1, 2, 3], n), dtype="Int64"),
            "t": rng.choice(["b", "a", None], n),
            "mixed": pd.Series(rng.choice(["a", 1, 2.5, None], n), dtype=object),
            "b": rng.random(n) < 0.5,
            "d": pd.to_datetime(rng.choice(["2020-01-02", "2019-05-01", None], n)),
        }
    )
    canonical = frame.iloc[canonical_order(frame)].reset_index(drop=True)
    for seed in range(3):
        other = frame.sample(frac=1.0, random_state=seed)
        other = other[list(reversed(frame.columns))]  # the columns' order does not matter
        again = other.iloc[canonical_order(other)].reset_index(drop=True)[frame.columns]
        pd.testing.assert_frame_equal(again, canonical)
    # one column: by value, -0.0 before 0.0, missing values last
    x = frame[["x"]].iloc[canonical_order(frame[["x"]])]["x"].to_numpy()
    assert list(x[:3]) == [-2.0] * 3 and np.isnan(x[-1])
    present = x[~np.isnan(x)]
    assert np.all(present[1:] >= present[:-1]) and present[-1] == np.inf
    zeros = np.signbit(present[present == 0])
    assert zeros.any() and not zeros.all() and np.all(np.diff(zeros.astype(int)) <= 0)


def test_canonical_rows_keep_the_users_row_labels_and_move_the_na_texts():
    frame = pd.DataFrame({"code": [None, None, None, None], "v": [4, 1, 3, 2]})
    held = np.array([True, False, True, False])  # the file wrote 'NA' in rows 0 and 2
    frame.attrs[NA_ONLY_ATTR] = {"code": {"text": "NA", "rows": np.packbits(held).tobytes().hex()}}
    out = canonical_rows(frame)
    assert list(out["v"]) == [1, 2, 3, 4]
    assert list(out.index) == [1, 3, 2, 0]  # each row keeps the user's label
    text, moved = na_only_cells(out)["code"]
    assert text == "NA" and list(moved) == list(held[out.index])


def test_the_markers_kept_of_a_text_column_do_not_depend_on_the_row_order():
    """parse_text_columns names at most 10 markers; of more that tie in count it kept
    the first in row order, so the same rows shuffled gave another description digest.
    Ties are broken by the marker's text."""
    rng = np.random.default_rng(7)
    values = [f"{v:.3f}" for v in rng.normal(size=300)] + [f"m{k:02d}" for k in range(12)]
    values += ["?"] * 3  # the most frequent marker comes first
    frame = pd.DataFrame({"x": values})
    seen = set()
    for seed in range(4):
        shuffled = frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
        parsed, notes = parse_text_columns(shuffled)
        assert list(notes["x"]["markers"]) == ["?", *(f"m{k:02d}" for k in range(9))]
        assert notes["x"]["n_markers"] == 15
        seen.add(description_digest(describe_table(parsed, client="a", notes=notes)))
    assert len(seen) == 1
