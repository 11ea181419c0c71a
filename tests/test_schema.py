"""Schema inference, the setup-round merge, and JSON round trips."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits.core.schema import (
    MAX_ORDINAL_LEVELS,
    ColumnSpec,
    DataNote,
    Schema,
    SchemaError,
    describe_table,
    merge_descriptions,
)


def _merge(frames, **kw):
    names = [f"site {k + 1}" for k in range(len(frames))]
    return merge_descriptions(
        [describe_table(f, client=n) for f, n in zip(frames, names, strict=True)], names, **kw
    )


def test_inference_rules():
    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame(
        {
            "few_ints": rng.integers(0, MAX_ORDINAL_LEVELS, n),
            "many_ints": np.arange(n),
            "floats": rng.normal(size=n),
            "integral_floats": rng.integers(0, 5, n).astype(float),
            "text": rng.choice(["a", "b", "c"], n),
            "flag": rng.random(n) < 0.5,
            "cat": pd.Categorical(rng.choice(["x", "y"], n)),
            "grade": pd.Categorical(
                rng.choice(["low", "mid", "high"], n),
                categories=["low", "mid", "high"],
                ordered=True,
            ),
        }
    )
    with pytest.warns(UserWarning, match="'many_ints' .* numeric identifier"):
        schema = _merge([frame])
    assert schema.kinds() == {
        "few_ints": "ordinal",
        "many_ints": "continuous",
        "floats": "continuous",
        "integral_floats": "ordinal",
        "text": "nominal",
        "flag": "nominal",
        "cat": "nominal",
        "grade": "ordinal",
    }
    assert schema["grade"].categories == ["low", "mid", "high"]  # the dtype's order
    assert schema["text"].categories == ["a", "b", "c"]  # sorted labels
    assert schema["many_ints"].dtype == "int"
    assert schema.order == list(frame.columns)


def test_merge_unions_categories_and_bounds():
    a = pd.DataFrame({"c": ["x", "y"], "v": [1.5, 5.25], "o": [1, 2]})
    b = pd.DataFrame({"c": ["z", "y"], "v": [-2.5, 3.1], "o": [2, 4]})
    schema = _merge([a, b])
    assert schema["c"].categories == ["x", "y", "z"]
    assert (schema["v"].lower, schema["v"].upper) == (-2.5, 5.25)
    assert schema["o"].categories == [1, 2, 4]


def test_overrides_and_order():
    a = pd.DataFrame({"o": [1, 2, 3], "v": [0.5, 1.5, 2.5]})
    schema = _merge([a], kinds={"o": "nominal"}, order=["v", "o"])
    assert schema["o"].kind == "nominal" and schema.order == ["v", "o"]
    with pytest.raises(SchemaError, match="unknown column"):
        _merge([a], kinds={"zz": "nominal"})
    with pytest.raises(SchemaError, match="unknown kind"):
        _merge([a], kinds={"o": "categorical"})
    with pytest.raises(SchemaError, match="every column exactly once"):
        _merge([a], order=["v"])


def test_many_valued_integer_declared_ordinal_reports_its_values():
    a = pd.DataFrame({"age": np.arange(18, 90), "v": np.linspace(0, 1, 72)})
    declared = {"age": {"kind": "ordinal"}}
    desc = describe_table(a, declared, client="site 1")
    schema = merge_descriptions([desc], ["site 1"], kinds={"age": "ordinal"})
    assert schema["age"].kind == "ordinal" and len(schema["age"].categories) == 72


def test_continuous_columns_report_no_values():
    a = pd.DataFrame({"v": np.random.default_rng(0).normal(size=50)})
    info = describe_table(a)["columns"]["v"]
    assert "values" not in info
    assert set(info) == {
        "dtype",
        "pandas_dtype",
        "n_missing",
        "min",
        "max",
        "integral",
        "decimals",  # how many decimals its values are written with (None: more than 12)
        "n_present",
    }
    assert info["decimals"] is None


def test_bad_tables():
    with pytest.raises(SchemaError, match="site 1: the table is empty"):
        describe_table(pd.DataFrame({"v": []}), client="site 1")
    # a column missing everywhere, or of one value, is kept as kind "constant" (written
    # as missing / as its value, not modelled), with a note naming --drop for a shell
    with pytest.warns(DataNote, match=r"'v' is missing in every row at every site"):
        empty = _merge([pd.DataFrame({"v": [None, None]}), pd.DataFrame({"v": [np.nan]})])
    assert empty["v"].kind == "constant" and empty["v"].all_missing
    with pytest.warns(DataNote, match=r"instead: --drop 'my v'$"):
        schema = Schema.detect([pd.DataFrame({"my v": [3, 3], "x": [1.0, 2.0]})] * 2)
    assert schema["my v"].kind == "constant" and schema["my v"].constant_value == 3
    with pytest.raises(SchemaError, match="infinite"):
        describe_table(pd.DataFrame({"v": [1.0, np.inf]}))
    with pytest.raises(SchemaError, match="extra: \\['w'\\]"):
        _merge([pd.DataFrame({"v": [1.0, 2.0]}), pd.DataFrame({"v": [1.0, 2.0], "w": [1, 2]})])


def test_json_round_trip():
    schema = Schema(
        [
            ColumnSpec("a", "nominal", "object", ["p", "q"]),
            ColumnSpec("b", "ordinal", "int", [1, 3, 9]),
            ColumnSpec("c", "continuous", "float", lower=-1.5, upper=2.0),
            ColumnSpec("d", "nominal", "bool", [False, True]),
        ],
        ["c", "a", "b", "d"],
    )
    again = Schema.from_json(schema.to_json())
    assert again == schema


def test_spec_validation():
    with pytest.raises(SchemaError, match="needs categories"):
        ColumnSpec("a", "nominal", "object", [])
    with pytest.raises(SchemaError, match="not unique"):
        ColumnSpec("a", "nominal", "object", ["x", "x"])
    with pytest.raises(SchemaError, match="duplicate"):
        Schema([ColumnSpec("a", "continuous", lower=0, upper=1)] * 2)


def _ages(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 86, 600),  # 68 whole numbers in all
            "group": rng.integers(0, 3, 600),
            "score": rng.normal(size=600).round(2),  # a few hundred decimals, some repeat
            "rate": np.where(rng.random(600) < 0.5, 0.5, rng.normal(size=600).round(1)),
        }
    )


def test_kind_follows_the_pooled_distinct_count():
    """30 sites of 20 rows each list at most 20 values of 'age', 68 in all: the column is
    continuous, as at one site holding all 600 rows (it was ordinal with 68 levels), and
    the whole schema is the pooled table's, point mass included ('rate' at 0.5)."""
    table = _ages()
    assert table["age"].nunique() == 68
    split = [table.iloc[k * 20 : (k + 1) * 20].reset_index(drop=True) for k in range(30)]
    assert all(part["age"].nunique() <= MAX_ORDINAL_LEVELS for part in split)
    federated = Schema.detect(split, rules=False)
    pooled = Schema.detect(table, rules=False)
    assert federated.kinds() == pooled.kinds()
    assert federated.kinds()["age"] == "continuous" and federated.kinds()["score"] == "continuous"
    assert federated["rate"].point_mass == 0.5
    assert federated.to_dict() == pooled.to_dict()


def test_at_most_20_values_pooled_stays_ordinal():
    table = _ages()
    table["age"] = 18 + table["age"] % 20  # 20 values in all
    split = [table.iloc[k * 20 : (k + 1) * 20].reset_index(drop=True) for k in range(30)]
    federated = Schema.detect(split, rules=False)
    assert federated.kinds()["age"] == "ordinal" and federated["age"].categories == list(
        range(18, 38)
    )
    assert federated.to_dict() == Schema.detect(table, rules=False).to_dict()


def test_pooled_point_mass_the_value_sets_cannot_tell_is_named():
    """A zero-inflated count listed by each site (no counts sent): continuous, without a
    point mass, and a note says how to have it checked; declared continuous, the sites
    report their most frequent value and the point mass is found."""
    rng = np.random.default_rng(1)
    visits = np.where(rng.random(600) < 0.5, 0, rng.integers(1, 60, 600))
    table = pd.DataFrame({"visits": visits, "x": rng.normal(size=600)})
    split = [table.iloc[k * 20 : (k + 1) * 20].reset_index(drop=True) for k in range(30)]
    with pytest.warns(DataNote, match=r"'visits'.*--kind visits=continuous"):
        federated = Schema.detect(split, rules=False)
    assert federated["visits"].kind == "continuous" and federated["visits"].point_mass is None
    declared = Schema.detect(split, kinds={"visits": "continuous"}, rules=False)
    assert declared["visits"].point_mass == 0.0
