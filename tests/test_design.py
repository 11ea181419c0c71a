"""Site-side design matrices (fits.analysis.design): the federated standardization and
coding equal a pooled build done independently with pandas."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fits.analysis.design import (
    INTERCEPT,
    DesignError,
    DesignSite,
    DesignSpec,
    schema_round,
    standardization_round,
)
from fits.core.schema import SchemaError
from fits.federation.protocol import Message, ProtocolError, check_reply
from fits.federation.transport import InProcessTransport


def _tables(seed: int = 0) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    out = []
    for n in (40, 70, 55):
        out.append(
            pd.DataFrame(
                {
                    "age": rng.normal(40, 12, n),
                    "grade": rng.choice(["low", "mid", "high"], n),
                    "rank": rng.integers(1, 6, n),
                    "flag": rng.random(n) < 0.3,
                    "y": (rng.random(n) < 0.4).astype(int),
                }
            )
        )
    out[1].loc[3, "grade"] = None  # a missing nominal value is a level of its own
    return out


def _federation(tables: list[pd.DataFrame]) -> InProcessTransport:
    return InProcessTransport(
        [DesignSite(t, name=f"site{k}") for k, t in enumerate(tables)], n_jobs=1
    )


def test_design_equals_pooled_pandas_build() -> None:
    tables = _tables()
    transport = _federation(tables)
    schema, n_rows = schema_round(transport)
    assert list(n_rows) == [40, 70, 55]
    spec = DesignSpec.from_schema(schema, "y")
    st = standardization_round(transport, spec)
    pooled = pd.concat(tables, ignore_index=True)
    # numeric: age (continuous) and rank (ordinal with numeric categories)
    assert spec.numeric == ("age", "rank")
    np.testing.assert_allclose(st.means, pooled[["age", "rank"]].mean().to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(st.sds, pooled[["age", "rank"]].std(ddof=0).to_numpy(), rtol=1e-10)
    sites = transport._clients
    x = np.vstack([s.design(st) for s in sites])
    # independent oracle: pandas standardization and dummies with the first sorted level dropped
    oracle = pd.DataFrame({INTERCEPT: 1.0}, index=pooled.index)
    for c in ("age", "rank"):
        oracle[c] = (pooled[c] - pooled[c].mean()) / pooled[c].std(ddof=0)
    grade = pooled["grade"].fillna("<missing>")
    for level in ("low", "mid", "<missing>"):  # sorted labels high < low < mid, None last
        oracle[f"grade={level}"] = (grade == level).astype(float)
    oracle["flag=True"] = pooled["flag"].astype(float)
    assert spec.feature_names == list(oracle.columns)
    np.testing.assert_allclose(x, oracle.to_numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(
        np.concatenate([s.builder.target() for s in sites]), pooled["y"].to_numpy(float)
    )


def test_ordinal_text_levels_are_positions_and_spec_roundtrips() -> None:
    t = pd.DataFrame(
        {
            "size": pd.Categorical(["S", "L", "M", "S"], categories=["S", "M", "L"], ordered=True),
            "y": [0.0, 1.0, 2.0, 3.0],
        }
    )
    transport = _federation([t, t.copy()])
    schema, _ = schema_round(transport)
    spec = DesignSpec.from_schema(schema, "y")
    assert spec.ordinal_levels == {"size": ["S", "M", "L"]}
    assert DesignSpec.from_json(spec.to_json()) == spec
    st = standardization_round(transport, spec)
    np.testing.assert_allclose(st.means, [np.mean([0, 2, 1, 0])])


def test_moments_reply_is_checked() -> None:
    request = Message("moments", config={"design": "{}", "n_numeric": 2})
    good = Message(
        "moments",
        {"n": np.array([3]), "mean": np.zeros((2, 2)), "sd": np.zeros(2), "dropped": np.zeros(1)},
    )
    check_reply(request, good)
    with pytest.raises(ProtocolError, match="allows exactly"):
        check_reply(request, Message("moments", {**good.arrays, "rows": np.zeros((3, 2))}))
    with pytest.raises(ProtocolError, match="expected numeric"):
        check_reply(request, Message("moments", {**good.arrays, "sd": np.zeros(5)}))


def test_errors_name_site_and_column() -> None:
    tables = _tables()
    tables[2].loc[5, "age"] = np.nan
    transport = _federation(tables)
    schema, _ = schema_round(transport)
    spec = DesignSpec.from_schema(schema, "y")
    with pytest.raises(DesignError, match=r"site2: column 'age' has 1 missing"):
        standardization_round(transport, spec)
    with pytest.raises(Exception, match="target column 'nope'"):
        DesignSpec.from_schema(schema, "nope")
    with pytest.raises(Exception, match=r"feature\(s\) \['zzz'\]"):
        DesignSpec.from_schema(schema, "y", ["zzz"])
    # a schema given by the user may hold a column that is constant in the rows
    spec = DesignSpec.from_schema(schema_round(_federation(_tables()))[0], "y")
    const = _federation([t.assign(age=1.5) for t in _tables()])
    with pytest.raises(DesignError, match=r"\['age'\] take one value"):
        standardization_round(const, spec)


def test_values_whose_squares_overflow_are_refused_naming_site_and_column() -> None:
    """A feature of 1e300 made the standardization sums overflow and was reported as
    "take one value across the federation"; a target of 1e300 gave NaN or meaningless
    fits. Both are refused at the site, naming it, the column and the fix."""
    tables = _tables()
    tables[1]["age"] = tables[1]["age"] * 1e300
    transport = _federation(tables)
    spec = DesignSpec.from_schema(schema_round(transport)[0], "y")
    with pytest.raises(DesignError, match=r"site1: column 'age' holds 70 value\(s\) beyond"):
        standardization_round(transport, spec)
    tables = _tables()
    tables[2]["age"] = tables[2]["age"] * 1e160
    spec = DesignSpec.from_schema(schema_round(_federation(_tables()))[0], "age")
    site = DesignSite(tables[2], "west")
    site.handle(Message("moments", config={"design": spec.to_json(), "n_numeric": 3}))
    with pytest.raises(DesignError, match=r"west: target 'age' holds 55 .*rescale the column"):
        site.builder.target()  # type: ignore[union-attr]


def test_design_names_that_clash_are_refused() -> None:
    """A column named '(intercept)', or 'grade=low' next to the nominal column 'grade',
    gave two coefficients one name: the result's params (a dict by name) kept one and
    dropped the other without a word."""
    for extra in ("(intercept)", "grade=mid"):
        tables = [t.assign(**{extra: np.arange(len(t), dtype=float)}) for t in _tables()]
        schema, _ = schema_round(_federation(tables))
        with pytest.raises(SchemaError, match=r"would stand for two coefficients.*rename"):
            DesignSpec.from_schema(schema, "y")
    tables = [t.assign(**{"grade=mid": np.arange(len(t), dtype=float)}) for t in _tables()]
    schema, _ = schema_round(_federation(tables))
    spec = DesignSpec.from_schema(schema, "y", ["age", "grade=mid"])  # no nominal 'grade'
    assert spec.feature_names == [INTERCEPT, "age", "grade=mid"]


def test_a_column_left_out_as_an_identifier_is_said() -> None:
    """A column numeric at one site and text at another (or free text) became kind 'id'
    and was left out of the model's features without a word."""
    tables = _tables()
    tables[1] = tables[1].assign(age=[f"{v:.3f} years" for v in tables[1]["age"]])
    transport = _federation(tables)
    with pytest.warns(UserWarning, match=r"\['age'\] are left out of the model: 'age' is text"):
        schema, _ = schema_round(transport)
    assert "age" not in DesignSpec.from_schema(schema, "y").numeric
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # named features: no warning (the design decides)
        schema, _ = schema_round(transport, columns=["y", "grade"])
