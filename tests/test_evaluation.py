"""Tests for fits.evaluation: energy distance and the fidelity diagnostics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.spatial.distance import cdist

from fits.evaluation import (
    column_fidelity,
    distance,
    energy_distance,
    energy_distances,
    independent_resample,
    mean_pairwise_distance,
    pair_fidelity,
)

KINDS = {"x": "continuous", "z": "continuous", "o": "ordinal", "c": "nominal"}


def _mixed(n: int, seed: int, shift: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(shift, 2.0, n)
    return pd.DataFrame(
        {
            "x": x,
            "z": 0.8 * x + rng.normal(0.0, 1.0, n),
            "o": rng.integers(1, 5, n),
            "c": rng.choice(np.array(["a", "b", "c"], dtype=object), n, p=[0.5, 0.3, 0.2]),
        }
    )


def _reference_energy(real: pd.DataFrame, syn: pd.DataFrame) -> float:
    """Unchunked D_E from an encoding built independently of the module."""
    cats = sorted(set(real["c"]) | set(syn["c"]))

    def enc(frame: pd.DataFrame) -> np.ndarray:
        parts = []
        for col in ("x", "z", "o"):
            ref = real[col].to_numpy(float)
            parts.append((frame[col].to_numpy(float) - ref.mean()) / ref.std())
        onehot = [(frame["c"] == cat).to_numpy(float) / np.sqrt(2.0) for cat in cats]
        return np.column_stack(parts + onehot)

    a, b = enc(real), enc(syn)
    radicand = 2 * cdist(a, b).mean() - cdist(a, a).mean() - cdist(b, b).mean()
    return float(np.sqrt(radicand))


# -- energy distance -----------------------------------------------------------------------


def test_single_continuous_column_matches_scipy() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 3.0, 700)
    y = rng.standard_t(4, 500) * 2.0 + 2.0
    sd = x.std()
    got = energy_distance(
        pd.DataFrame({"v": x}), pd.DataFrame({"v": y}), {"v": "continuous"}, chunk_size=128
    )
    assert got == pytest.approx(stats.energy_distance(x / sd, y / sd), abs=1e-10)


def test_mean_pairwise_distance_matches_scipy_and_cdist() -> None:
    rng = np.random.default_rng(1)
    x = rng.exponential(5.0, 600)
    y = rng.normal(4.0, 2.0, 450)
    mxy = mean_pairwise_distance(x, y, chunk_size=100)
    mxx = mean_pairwise_distance(x, chunk_size=100)
    myy = mean_pairwise_distance(y, chunk_size=100)
    assert mxy == pytest.approx(np.abs(x[:, None] - y[None, :]).mean(), abs=1e-10)
    assert mxx == pytest.approx(np.abs(x[:, None] - x[None, :]).mean(), abs=1e-10)
    assert np.sqrt(2 * mxy - mxx - myy) == pytest.approx(stats.energy_distance(x, y), abs=1e-10)

    a = rng.normal(size=(300, 7))
    b = rng.normal(size=(257, 7)) + 0.3
    a[:40] = a[40:80]  # duplicated rows
    assert mean_pairwise_distance(a, b, chunk_size=64) == pytest.approx(
        cdist(a, b).mean(), abs=1e-10
    )
    assert mean_pairwise_distance(a, chunk_size=64) == pytest.approx(cdist(a, a).mean(), abs=1e-10)


def test_mixed_table_matches_unchunked_computation() -> None:
    real = _mixed(400, seed=2)
    syn = _mixed(300, seed=3, shift=0.5)
    syn.loc[:9, "c"] = "d"  # a category only the synthetic table has
    expected = _reference_energy(real, syn)
    for chunk_size in (37, 128, 5000):
        got = energy_distance(real, syn, KINDS, chunk_size=chunk_size)
        assert got == pytest.approx(expected, abs=1e-10)


def test_identical_tables_score_zero_and_shift_is_monotone() -> None:
    real = _mixed(500, seed=4)
    assert energy_distance(real, real.copy(), KINDS, chunk_size=64) == 0.0
    assert energy_distance(real, real.sample(frac=1.0, random_state=0), KINDS) < 1e-7
    distances = []
    for shift in (0.25, 1.0, 3.0):
        syn = real.copy()
        syn["x"] = syn["x"] + shift
        distances.append(energy_distance(real, syn, KINDS))
    assert 0 < distances[0] < distances[1] < distances[2]


def test_nominal_one_hot_blocks_are_at_unit_distance() -> None:
    real = pd.DataFrame({"c": ["a"]})
    syn = pd.DataFrame({"c": ["b"]})
    got = energy_distance(real, syn, {"c": "nominal"})
    assert got == pytest.approx(np.sqrt(2.0), abs=1e-12)


def test_ordered_categorical_ordinal_uses_codes() -> None:
    levels = ["low", "mid", "high"]
    dtype = pd.CategoricalDtype(levels, ordered=True)
    real = pd.DataFrame({"o": pd.Series(["low", "mid", "high", "high"], dtype=dtype)})
    syn = pd.DataFrame({"o": pd.Series(["low", "low", "mid", "high"], dtype=dtype)})
    as_codes = energy_distance(
        pd.DataFrame({"o": [0, 1, 2, 2]}), pd.DataFrame({"o": [0, 0, 1, 2]}), {"o": "ordinal"}
    )
    assert energy_distance(real, syn, {"o": "ordinal"}) == pytest.approx(as_codes, abs=1e-12)


def test_subsample_is_reproducible() -> None:
    real = _mixed(900, seed=5)
    syn = _mixed(800, seed=6, shift=0.3)
    first = energy_distance(real, syn, KINDS, max_rows=200, seed=11)
    again = energy_distance(real, syn, KINDS, max_rows=200, seed=11)
    other = energy_distance(real, syn, KINDS, max_rows=200, seed=12)
    full = energy_distance(real, syn, KINDS)
    assert first == again
    assert first != other
    assert energy_distance(real, syn, KINDS, max_rows=10_000, seed=1) == full


def test_errors_name_the_problem() -> None:
    real = _mixed(50, seed=7)
    syn = _mixed(50, seed=8)
    with pytest.raises(ValueError, match=r"'z'.*synthetic"):
        energy_distance(real, syn.drop(columns="z"), KINDS)
    with pytest.raises(ValueError, match=r"'x'.*real"):
        energy_distance(real.drop(columns="x"), syn, KINDS)
    with_nan = syn.copy()
    with_nan.loc[3, "o"] = np.nan
    with pytest.raises(ValueError, match=r"'o'.*missing"):
        energy_distance(real, with_nan, KINDS)
    with pytest.raises(ValueError, match="unknown kind"):
        energy_distance(real, syn, {"x": "interval"})
    with pytest.raises(ValueError, match="no rows"):
        energy_distance(real, syn.iloc[:0], KINDS)
    with pytest.raises(ValueError, match="no kind"):
        energy_distance(real, syn, KINDS, columns=["x", "extra"])


def test_values_whose_squares_overflow_are_refused() -> None:
    """Real values of 1e300 made the real sd overflow, standardized the column to 0 and
    reported an energy distance of 0; synthetic values of 1e300 gave NaN distances and
    a crash when the page was drawn. Both are refused, naming the column and table."""
    real = _mixed(50, seed=7)
    syn = _mixed(50, seed=8)
    huge = syn.assign(x=syn["x"] * 1e300)
    with pytest.raises(ValueError, match=r"'x' in the synthetic table holds values beyond"):
        energy_distance(real, huge, KINDS)
    with pytest.raises(ValueError, match=r"'x' in the real table holds values beyond"):
        energy_distance(real.assign(x=real["x"] * 1e300), huge, KINDS)
    far = syn.copy()
    far.loc[0, "x"] = 1e140  # finite, but 1e140 / sd(real x) = 5e139 sds; tiny real sd:
    with pytest.raises(ValueError, match=r"'x' in the synthetic table holds a value 1e\+140"):
        energy_distance(real.assign(x=real["x"] * 1e-20), far, KINDS)
    assert np.isfinite(energy_distance(real, far, KINDS))
    # energy_distances (the report's) names the reference as the caller says
    from fits.evaluation.distance import energy_distances

    with pytest.raises(ValueError, match=r"'x' in the real table holds values beyond"):
        energy_distances(real.assign(x=real["x"] * 1e300), {"s": syn}, KINDS, reference_name="real")


# -- independent resample ------------------------------------------------------------------


def test_independent_resample_keeps_marginals_and_breaks_dependence() -> None:
    rng = np.random.default_rng(9)
    n = 4000
    x = rng.normal(size=n)
    frame = pd.DataFrame(
        {
            "x": x,
            "y": x + 0.1 * rng.normal(size=n),
            "k": rng.integers(0, 4, n),
            "c": pd.Categorical(rng.choice(["u", "v"], n)),
        }
    )
    out = independent_resample(frame, seed=3)
    assert list(out.columns) == list(frame.columns)
    assert (out.dtypes == frame.dtypes).all()
    assert len(out) == n
    for col in frame.columns:
        assert set(out[col]) <= set(frame[col])
    assert frame["x"].corr(frame["y"]) > 0.99
    assert abs(out["x"].corr(out["y"])) < 0.06
    assert len(independent_resample(frame, n=10, seed=3)) == 10
    pd.testing.assert_frame_equal(out, independent_resample(frame, seed=3))


# -- column and pair fidelity --------------------------------------------------------------


def test_fidelity_of_identical_tables_is_one() -> None:
    real = _mixed(600, seed=10)
    cols = column_fidelity(real, real.copy(), KINDS)
    assert list(cols.columns) == ["column", "kind", "metric", "score"]
    assert list(cols["metric"]) == ["KS", "KS", "TV", "TV"]
    np.testing.assert_allclose(cols["score"], 1.0)
    pairs = pair_fidelity(real, real.copy(), KINDS)
    assert list(pairs.columns) == ["col_a", "col_b", "metric", "score"]
    assert len(pairs) == 6
    metric = dict(
        zip(zip(pairs["col_a"], pairs["col_b"], strict=True), pairs["metric"], strict=True)
    )
    assert metric[("x", "z")] == "correlation"
    assert metric[("x", "o")] == "contingency"
    np.testing.assert_allclose(pairs["score"], 1.0)


def test_shuffle_lowers_pair_score_and_shift_lowers_column_score() -> None:
    real = _mixed(2000, seed=11)
    real["o"] = np.where(real["c"] == "a", 1, real["o"])  # make (o, c) dependent
    syn = real.copy()
    rng = np.random.default_rng(0)
    syn["z"] = rng.permutation(syn["z"].to_numpy())
    syn["c"] = rng.permutation(syn["c"].to_numpy())

    pairs = pair_fidelity(real, syn, KINDS).set_index(["col_a", "col_b"])["score"]
    assert pairs[("x", "z")] < 0.7  # correlation ~0.85 destroyed
    assert pairs[("o", "c")] < 0.9
    assert pairs[("x", "o")] == pytest.approx(1.0)  # untouched pair

    cols = column_fidelity(real, syn, KINDS).set_index("column")["score"]
    np.testing.assert_allclose(cols, 1.0)  # shuffling keeps marginals

    shifted = real.copy()
    shifted["x"] += 1.0
    shifted["o"] += 1
    cols = column_fidelity(real, shifted, KINDS).set_index("column")["score"]
    assert cols["x"] < 0.9
    assert cols["o"] < 0.9
    assert cols["z"] == pytest.approx(1.0)


# -- several tables and column sets at once ------------------------------------------------


def _with_responses(n: int, seed: int, shift: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = _mixed(n, seed, shift)
    frame["y"] = frame["x"] - frame["z"] + rng.normal(0.0, 1.0, n)
    frame["r"] = rng.choice(np.array(["no", "yes"], dtype=object), n)
    return frame


RESPONSE_KINDS = {**KINDS, "y": "continuous", "r": "nominal"}


def _tables_with_twins() -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Reference and tables with rows that coincide on the covariates only."""
    real = _with_responses(400, seed=20)
    syn = _with_responses(300, seed=21, shift=0.4)
    syn.loc[:9, "c"] = "d"  # a category only the synthetic table has
    covs = list(KINDS)
    syn.loc[20:39, covs] = real.loc[0:19, covs].to_numpy()  # covariate twins across tables
    real.loc[100:109, covs] = real.loc[110:119, covs].to_numpy()  # twins within a table
    real.loc[200:204] = real.loc[205:209].to_numpy()  # exact duplicate rows
    small = real.sample(60, random_state=0).reset_index(drop=True)  # rows of the reference
    return real, {"synthetic": syn, "subset": small, "itself": real.copy()}


@pytest.mark.parametrize("chunk_size", [37, 128, 5000])
def test_energy_distances_match_energy_distance(chunk_size: int) -> None:
    real, tables = _tables_with_twins()
    got = energy_distances(
        real, tables, RESPONSE_KINDS, list(KINDS), responses=["y", "r"], chunk_size=chunk_size
    )
    assert list(got.index) == list(tables)
    assert list(got.columns) == ["covariates", "covariates + y", "covariates + r"]
    sets = {"covariates": [], "covariates + y": ["y"], "covariates + r": ["r"]}
    for name, table in tables.items():
        for label, extra in sets.items():
            expected = energy_distance(real, table, RESPONSE_KINDS, list(KINDS) + extra)
            assert got.loc[name, label] == pytest.approx(expected, abs=1e-10)
    assert (got.loc["itself"] == 0.0).all()


def test_energy_distances_direct_computation() -> None:
    real, tables = _tables_with_twins()
    got = energy_distances(real, {"synthetic": tables["synthetic"]}, RESPONSE_KINDS, list(KINDS))
    assert got.loc["synthetic", "covariates"] == pytest.approx(
        _reference_energy(real[list(KINDS)], tables["synthetic"][list(KINDS)]), abs=1e-10
    )


def test_energy_distances_fallback_and_threads_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    real, tables = _tables_with_twins()
    args = (real, tables, RESPONSE_KINDS, list(KINDS))
    shared = energy_distances(*args, responses=["y", "r"], n_jobs=1)
    threaded = energy_distances(*args, responses=["y", "r"], n_jobs=3, chunk_size=64)
    single = energy_distances(*args, responses=["y", "r"], n_jobs=1, chunk_size=64)
    pd.testing.assert_frame_equal(threaded, single, check_exact=True)  # independent of n_jobs
    pd.testing.assert_frame_equal(shared, single, rtol=0, atol=1e-12)
    # too many coinciding rows: one pass per column set, same numbers
    monkeypatch.setattr(distance, "_MAX_TWIN_PAIRS", 0)
    fallback = energy_distances(*args, responses=["y", "r"])
    pd.testing.assert_frame_equal(fallback, shared, rtol=0, atol=1e-12)


def test_energy_distances_subsample_and_errors() -> None:
    real, tables = _tables_with_twins()
    first = energy_distances(real, tables, RESPONSE_KINDS, max_rows=100, seed=3)
    again = energy_distances(real, tables, RESPONSE_KINDS, max_rows=100, seed=3)
    pd.testing.assert_frame_equal(first, again)
    assert list(first.columns) == ["covariates"]
    with pytest.raises(ValueError, match=r"'y'.*both"):
        energy_distances(real, tables, RESPONSE_KINDS, list(RESPONSE_KINDS), responses=["y"])
    with pytest.raises(ValueError, match=r"'r'.*missing from the subset table"):
        energy_distances(real, {"subset": tables["subset"].drop(columns="r")}, RESPONSE_KINDS)
    with pytest.raises(ValueError, match="empty"):
        energy_distances(real, {}, RESPONSE_KINDS)


def test_energy_distance_threads_give_the_same_number() -> None:
    real = _mixed(700, seed=30)
    syn = _mixed(500, seed=31, shift=0.2)
    one = energy_distance(real, syn, KINDS, chunk_size=64, n_jobs=1)
    three = energy_distance(real, syn, KINDS, chunk_size=64, n_jobs=3)
    assert one == three
    assert one == pytest.approx(_reference_energy(real, syn), abs=1e-10)


def test_kind_names_agree_with_the_schema() -> None:
    """The evaluators keep their own copy of the kind names; it must match the engine's."""
    from fits.core.schema import KINDS as SCHEMA_KINDS
    from fits.datasets import KINDS as DATASET_KINDS
    from fits.evaluation.encoding import KINDS

    modelled = tuple(k for k in SCHEMA_KINDS if k not in ("id", "constant"))  # the others
    assert KINDS == DATASET_KINDS == modelled  # are not modelled
    assert KINDS == ("continuous", "ordinal", "nominal")
