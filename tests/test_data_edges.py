"""Edges of the data a fit must refuse early and clearly, not deep in a run: a column
no site holds enough values of to answer under its floor, booleans given as numbers in
a known table, integer identifiers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import IdentifierColumnError, SchemaError, SparseColumnError
from fits.federation.policy import SitePolicy
from fits.known import KnownTableError

from conftest import fits_in_process as run


def _sparse_sites(present: list[int], n: int = 30, seed: int = 0) -> list[pd.DataFrame]:
    """One site per count; ``lab`` (continuous) holds ``present[s]`` values at site s."""
    rng = np.random.default_rng(seed)
    out = []
    for held in present:
        lab = np.full(n, np.nan)
        lab[:held] = rng.normal(5.0, 1.0, held).round(2)
        out.append(
            pd.DataFrame(
                {
                    "age": rng.normal(50, 10, n).round(1),
                    "sex": rng.choice(["F", "M"], n),
                    "lab": lab,
                    "bp": rng.normal(120, 10, n).round(1),
                }
            )
        )
    return out


@pytest.mark.parametrize("grid_points", [64, None])
def test_a_column_too_sparse_at_every_site_is_refused_at_fit(grid_points):
    synth = FITSSynthesizer(seed=0, grid_points=grid_points)
    with pytest.raises(SparseColumnError) as info:
        synth.fit(dict(zip("abc", _sparse_sites([0, 3, 4]), strict=True)))
    message = str(info.value)
    held = info.value.present
    assert info.value.column == "lab" and "'lab'" in message
    # per site, its rows with a value (a tiny column's top value is its point mass,
    # whose rows the point-mass indicator draws: not counted)
    assert held["a"] == 0 and 2 <= held["b"] <= 3 and 3 <= held["c"] <= 4
    assert f"a: 0, b: {held['b']}, c: {held['c']} rows" in message
    assert info.value.floors == {"a": 5, "b": 5, "c": 5}
    assert "min_effective_rows" in message and "--drop lab" in message  # the fixes


def test_one_site_holding_enough_values_is_enough():
    synth = FITSSynthesizer(seed=0).fit(_sparse_sites([0, 6, 2]))
    assert synth.sample(20).shape == (20, 4)


def test_a_lower_floor_lets_the_sparse_column_through():
    synth = FITSSynthesizer(seed=0, site_policy=SitePolicy(min_effective_rows=2))
    synth.fit(_sparse_sites([0, 3, 2]))
    assert synth.sample(20).shape == (20, 4)


def test_a_pooled_floor_is_judged_on_the_sum_over_the_sites():
    pooled = SitePolicy(floor_scope="pooled")
    synth = FITSSynthesizer(seed=0, site_policy=pooled, secure_aggregation=True)
    with pytest.raises(SparseColumnError, match="pooled floor k = 5"):
        synth.fit(_sparse_sites([0, 1, 2]))
    synth.fit(_sparse_sites([2, 3, 4]))  # 5 or more in all, fewer than 5 at each site
    assert synth.sample(10).shape == (10, 4)


def test_sites_all_smaller_than_their_floor_are_refused_at_fit_once():
    sites = {"a": _sparse_sites([2])[0].head(3), "b": _sparse_sites([4])[0].head(4)}
    with pytest.raises(SchemaError, match="every site would abstain") as info:
        FITSSynthesizer(seed=0, grid_points=None).fit(sites)
    assert "a: 3, b: 4 rows" in str(info.value) and "min_effective_rows" in str(info.value)
    assert not isinstance(info.value, SparseColumnError)  # the table, not one column


# ---------------------------------------------------------------------------------------
# True / False given as a number in a known table
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scored():
    """``score`` (continuous, -2..3: 0 and 1 within range) first, ``grade`` (ordinal,
    0..4) second, ``flag`` (bool, nominal) third."""
    rng = np.random.default_rng(1)
    sites = [
        pd.DataFrame(
            {
                "score": rng.uniform(-2, 3, 60).round(2),
                "grade": rng.integers(0, 5, 60),
                "flag": rng.random(60) < 0.5,
                "bp": rng.normal(120, 10, 60).round(1),
            }
        )
        for _ in range(2)
    ]
    return FITSSynthesizer(seed=0).fit(sites)


@pytest.mark.parametrize(
    "known",
    [
        pd.DataFrame({"score": [True, False]}),  # a bool column
        pd.DataFrame({"score": pd.array([True, False], dtype="boolean")}),
        pd.DataFrame({"score": pd.Series([0.5, True], dtype=object)}),  # one among numbers
        pd.DataFrame({"score": pd.Series([np.True_, None], dtype=object)}),
        pd.DataFrame({"score": [0.5, 1.0], "grade": [True, False]}),
        pd.DataFrame({"score": [0.5, 1.0], "grade": pd.Series([2, True], dtype=object)}),
    ],
)
def test_true_or_false_for_a_number_column_is_refused(scored, known):
    column = known.columns[-1]
    with pytest.raises(KnownTableError) as info:
        scored.sample_remaining_columns(known)
    message = str(info.value)
    assert f"column {column!r}" in message and "True" in message
    assert "1.0" in message or "numbers" in message  # the fix: give the numbers


def test_true_and_false_stay_fine_where_they_are_the_values(scored):
    out = scored.sample_remaining_columns(
        pd.DataFrame({"score": [0.5, 1.0], "grade": [2, 1], "flag": [True, False]})
    )
    assert out["flag"].tolist() == [True, False]
    out = scored.sample_remaining_columns(pd.DataFrame({"score": [0.0, 1.0]}))  # numbers
    assert out["score"].tolist() == [0.0, 1.0]


def test_fits_synthesize_known_refuses_true_for_a_number_column(tmp_path):
    rng = np.random.default_rng(1)
    sites = []
    for i in range(2):
        path = tmp_path / f"s{i}.csv"
        pd.DataFrame(
            {"score": rng.uniform(-2, 3, 40).round(2), "grade": rng.integers(0, 5, 40)}
        ).to_csv(path, index=False)
        sites.append(path)
    known, out = tmp_path / "known.csv", tmp_path / "out.csv"
    known.write_text("score\nTrue\nFalse\n")
    res = run("synthesize", *sites, "--known", known, "--out", out, "-q")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    line = res.stderr.strip()
    assert line.startswith(f"error: --known '{known}'") and "\n" not in line
    assert "column 'score'" in line and "True / False" in line and not out.exists()


# ---------------------------------------------------------------------------------------
# Integer identifiers: a row number at every site
# ---------------------------------------------------------------------------------------


def _patients(ids: list[list[int]], seed: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    return {
        f"site{k}": pd.DataFrame(
            {
                "patient_id": np.array(column, dtype=np.int64),
                "age": rng.normal(50, 10, len(column)).round(1),
                "sex": rng.choice(["F", "M"], len(column)),
            }
        )
        for k, column in enumerate(ids)
    }


CONSECUTIVE = [list(range(1, 13)), list(range(1, 16)), list(range(1, 15))]
ASCENDING = [[1, 2, 4, 5, 7, 8, 10, 11, 13, 14, 17, 19]] * 2  # gaps, but in row order


@pytest.mark.parametrize("ids", [CONSECUTIVE, ASCENDING], ids=["consecutive", "ascending"])
def test_an_integer_row_number_is_refused_as_an_identifier(ids):
    with pytest.raises(IdentifierColumnError) as info:
        FITSSynthesizer(seed=0).fit(_patients(ids))
    message = str(info.value)
    assert info.value.columns == ["patient_id"]
    assert "'patient_id'" in message and "whole number" in message
    assert "--drop patient_id" in message and "kinds={'patient_id': 'id'}" in message
    assert "ordinal" in message  # declaring its kind keeps it


def test_an_integer_identifier_declared_is_kept_as_declared():
    synth = FITSSynthesizer(seed=0, kinds={"patient_id": "ordinal"}).fit(_patients(CONSECUTIVE))
    assert synth.schema_["patient_id"].kind == "ordinal"
    ids = FITSSynthesizer(seed=0, kinds={"patient_id": "id"}).fit(_patients(CONSECUTIVE))
    assert ids.sample(5)["patient_id"].str.startswith("synthetic-").all()


@pytest.mark.parametrize(
    "ids",
    [
        # distinct counts in a small table, neither consecutive nor in row order
        [[3, 9, 1, 14, 6, 11, 2, 8, 17, 5, 12], [7, 2, 19, 4, 10, 1, 16, 3, 8, 13]],
        # 1..5 at three sites too small to tell, even together (5!^3 < 10!): a count
        [list(range(1, 6))] * 3,
        # consecutive at two sites of 6 rows (6! x 6! < 10!), and 8 unordered at a third
        [list(range(1, 7)), list(range(3, 9)), [4, 1, 9, 2, 8, 5, 3, 6]],
        # in row order at two sites of 8 rows, not at a third (gaps, unordered)
        [list(range(1, 9)), list(range(1, 9)), [9, 2, 5, 1, 12, 7, 3]],
        # in row order at one site, repeated values at the other
        [list(range(1, 13)), [1, 1, 2, 3, 3, 4, 5, 5, 6, 7, 8, 9]],
    ],
    ids=["unordered-counts", "tiny-sites", "small-sites", "one-small-site-says-no",
         "repeats-at-one-site"],
)  # fmt: skip
def test_whole_numbers_that_are_no_row_number_are_kept(ids):
    synth = FITSSynthesizer(seed=0).fit(_patients(ids))
    assert synth.schema_["patient_id"].kind == "ordinal"


def test_each_site_says_only_whether_its_whole_numbers_are_a_row_number():
    from fits.core.schema import describe_table

    rows = describe_table(pd.DataFrame({"n": np.arange(12)}))["columns"]["n"]
    assert rows["sequence"] is True
    shuffled = describe_table(pd.DataFrame({"n": [5, 1, 9, 3, 12, 7, 2, 11, 4, 8]}))
    assert shuffled["columns"]["n"]["sequence"] is False  # distinct, unordered, with gaps
    repeats = describe_table(pd.DataFrame({"n": [1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}))
    assert "sequence" not in repeats["columns"]["n"]
    small = describe_table(pd.DataFrame({"n": [3, 1, 2]}))["columns"]["n"]
    assert small["sequence"] is True  # at any size: the merge weighs it by the rows
    small = describe_table(pd.DataFrame({"n": [5, 2, 9]}))["columns"]["n"]
    assert small["sequence"] is False


@pytest.mark.parametrize(
    "ids",
    [
        [list(range(1, 9))] * 3,  # 1..8 at three sites of 8 rows: 8!^3 >= 10!
        [list(range(1, 8)), [2, 4, 5, 9, 11, 12, 20]],  # 7! x 7! = 10! x 7: consecutive, ascending
        [list(range(1, 6))] * 5,  # 1..5 at five sites of 5 rows: 5!^5 >= 10!
    ],
    ids=["three-of-8", "two-of-7", "five-of-5"],
)
def test_a_row_number_at_sites_all_under_10_rows_is_refused_on_their_pooled_evidence(ids):
    """Every site under 10 rows made the check not apply: 1..8 at three sites of 8 rows
    was taken as an ordinal of 8 categories, each real row's own. Each site still says
    one yes / no; together their rows weigh as much as one site of 10 rows would."""
    with pytest.raises(IdentifierColumnError) as info:
        FITSSynthesizer(seed=0).fit(_patients(ids))
    assert info.value.columns == ["patient_id"]
    assert f"site0 ({len(ids[0])} rows)" in str(info.value)


def test_a_row_number_too_varied_for_ordinal_is_warned_of_however_few_rows():
    """Row numbers 1-22 and 1-24: more than 20 values at a site, so modelled as
    continuous (fresh whole numbers in 1..24, every one a real identifier); warned of
    under the 50 rows of the warning about a column of distinct whole numbers."""
    from fits.core.schema import NumericIdentifierWarning

    tables = _patients([list(range(1, 23)), list(range(1, 25))])
    with pytest.warns(NumericIdentifierWarning, match="'patient_id'"):
        synth = FITSSynthesizer(seed=0).fit(tables)
    assert synth.schema_["patient_id"].kind == "continuous"


def test_a_pooled_marginal_counts_a_datetime_columns_rows_holding_it():
    """Under a pooled floor the coordinator tells the sites how many of the federation's
    rows hold the column: of a datetime column (whose description has no n_present) it
    said every row, missing ones included."""
    from fits.federation.client import FITSClient
    from fits.federation.coordinator import Coordinator
    from fits.federation.transport import InProcessTransport

    rng = np.random.default_rng(0)
    frames = []
    for n in (30, 20):
        when = pd.Series(pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 900, n), "D"))
        frames.append(
            pd.DataFrame(
                {"age": rng.normal(50, 10, n).round(1), "when": when.where(when.index >= 4)}
            )
        )
    pooled = SitePolicy(floor_scope="pooled")
    clients = [FITSClient(f, f"site {i}", policy=pooled) for i, f in enumerate(frames)]
    coord = Coordinator(InProcessTransport(clients, n_jobs=1), secure=True)
    coord.setup()
    coord.configure(0)
    assert coord._marginal_request("when").config["present"] == 50 - 8
