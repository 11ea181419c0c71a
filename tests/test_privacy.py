"""Tests for fits.evaluation.privacy: distance to closest record and exact copies."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist

from fits.evaluation.privacy import distance_to_closest_record, privacy_checks

KINDS = {"x": "continuous", "o": "ordinal", "c": "nominal"}


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame(
        {
            "x": x,
            "o": np.digitize(x + rng.normal(0.0, 0.5, n), [-0.5, 0.5]) + 1,
            "c": rng.choice(np.array(["u", "v", "w"], dtype=object), n),
        }
    )


def test_copies_of_training_rows_are_flagged() -> None:
    train = _table(500, seed=0)
    holdout = _table(200, seed=1)
    copies = train.sample(300, random_state=2).reset_index(drop=True)
    result = privacy_checks(train, copies, KINDS, holdout=holdout)
    assert result.synthetic_copy_share == 1.0
    assert result.synthetic_copies == 300
    np.testing.assert_array_equal(result.synthetic_dcr, 0.0)
    assert result.median_ratio == 0.0
    assert result.flag
    summary = result.to_dict()
    assert summary["synthetic_copy_share"] == 1.0
    assert summary["dcr_quantiles"]["synthetic"]["q50"] == 0.0
    assert summary["baseline"] == "holdout"
    # exact copies are counted on every row, even when the distances use a subsample
    sub = privacy_checks(train, copies, KINDS, holdout=holdout, max_rows=100)
    assert sub.synthetic_dcr.size == 100 and sub.synthetic_copies == 300
    assert sub.synthetic_copy_share == 1.0
    # leave-one-out: training rows with a duplicate elsewhere are the baseline's copies
    doubled = pd.concat([train, train.head(10)], ignore_index=True)
    loo = privacy_checks(doubled, copies, KINDS)
    assert loo.holdout_copies == 20 and loo.holdout_copy_share == 20 / 510


def test_fresh_rows_look_like_the_holdout() -> None:
    train = _table(800, seed=3)
    holdout = _table(400, seed=4)
    fresh = _table(400, seed=5)
    result = privacy_checks(train, fresh, KINDS, holdout=holdout)
    assert result.synthetic_copies == 0
    assert 0.8 < result.median_ratio < 1.25
    assert result.share_below_holdout_p5 < 0.10
    assert not result.flag
    q = result.quantiles()
    assert list(q.index) == ["synthetic", "holdout"]
    assert list(q.columns) == ["q05", "q25", "q50", "q75", "q95"]


def test_dcr_matches_brute_force_on_the_encoding() -> None:
    rng = np.random.default_rng(6)
    train = rng.normal(size=(300, 4))
    query = rng.normal(size=(120, 4))
    query[:5] = train[10:15]  # exact copies
    got = distance_to_closest_record(train, query, batch_size=50)
    expected = cdist(query, train).min(axis=1)
    np.testing.assert_allclose(got, expected, atol=1e-9)
    assert np.all(got[:5] == 0.0)

    # leave-one-out: each training row against the others; duplicates count at distance 0
    train[1] = train[0]
    loo = distance_to_closest_record(train, self_index=np.arange(300))
    full = cdist(train, train)
    np.fill_diagonal(full, np.inf)
    np.testing.assert_allclose(loo, full.min(axis=1), atol=1e-9)
    assert loo[0] == 0.0 and loo[1] == 0.0


def test_encoding_standardizes_and_one_hots() -> None:
    """One training row; distances follow the energy distance's encoding."""
    train = pd.DataFrame({"x": [0.0, 2.0], "c": ["u", "u"]})  # sd of x: 1
    synthetic = pd.DataFrame({"x": [3.0, 0.0], "c": ["u", "v"]})
    result = privacy_checks(train, synthetic, {"x": "continuous", "c": "nominal"})
    # row 1: 1 sd from (2, u); row 2: distinct category at distance 1 from (0, u)
    np.testing.assert_allclose(result.synthetic_dcr, [1.0, 1.0])
    assert result.baseline == "leave-one-out"
    np.testing.assert_allclose(result.holdout_dcr, [2.0, 2.0])


def test_leave_one_out_baseline_and_subsamples() -> None:
    train = _table(900, seed=7)
    synthetic = _table(700, seed=8)
    result = privacy_checks(train, synthetic, KINDS, max_rows=250, seed=1)
    assert result.baseline == "leave-one-out"
    assert result.synthetic_dcr.size == 250 and result.holdout_dcr.size == 250
    assert len(result.notes) == 2 and "250 of 700 synthetic rows" in result.notes[0]
    again = privacy_checks(train, synthetic, KINDS, max_rows=250, seed=1)
    np.testing.assert_array_equal(result.synthetic_dcr, again.synthetic_dcr)
    assert 0.7 < result.median_ratio < 1.4


def test_errors_name_the_table() -> None:
    train = _table(50, seed=9)
    with pytest.raises(ValueError, match=r"'c'.*synthetic"):
        privacy_checks(train, train.drop(columns="c"), KINDS)
    with pytest.raises(ValueError, match=r"'x'.*held-out"):
        privacy_checks(train, train, KINDS, holdout=train.drop(columns="x"))
    holdout = _table(30, seed=10)
    holdout["c"] = "u"
    train_same = holdout.copy()
    result = privacy_checks(train_same, holdout, {"c": "nominal"}, holdout=holdout)
    assert math.isnan(result.median_ratio)  # every distance 0: no ratio
