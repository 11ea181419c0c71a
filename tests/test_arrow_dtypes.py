"""pyarrow-backed DataFrames (``pd.read_parquet(..., dtype_backend="pyarrow")``,
``df.convert_dtypes(dtype_backend="pyarrow")``) given to the Python API: a ``date32``
column raised pandas' NotImplementedError, Arrow decimals were refused as identifiers,
dictionary-encoded text named a schema file the user never wrote, durations were called
identifier-like. They are now taken in pandas' default dtypes, every value kept."""

from __future__ import annotations

import datetime
import warnings
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from fits import FITSSynthesizer, Schema
from fits.core.schema import SchemaError
from fits.io import from_arrow_dtypes


def _arrow(values: list, kind: pa.DataType, index=None) -> pd.Series:
    return pd.Series(pd.arrays.ArrowExtensionArray(pa.array(values, type=kind)), index=index)


def test_every_value_is_kept_in_a_dtype_fits_models() -> None:
    index = [7, 3, 5]
    frame = pd.DataFrame(
        {
            "money": _arrow([Decimal("12.30"), None, Decimal("-0.05")], pa.decimal128(6, 2), index),
            "day": _arrow(
                [datetime.date(2020, 1, 2), None, datetime.date(2021, 3, 4)], pa.date32(), index
            ),
            "wait": _arrow([1, None, 3], pa.duration("s"), index),
            "big": _arrow([2**60 + 1, None, 3], pa.int64(), index),  # modelled: kept
            "at": _arrow([0, 3_600_000_000, None], pa.timestamp("us", tz="Europe/Paris"), index),
            "plain": [1.5, 2.5, 3.5],
        },
        index=index,
    )
    frame["level"] = pd.Series(
        pd.arrays.ArrowExtensionArray(
            pa.DictionaryArray.from_arrays(
                pa.array([1, 0, None], pa.int32()), pa.array(["lo", "hi"]), ordered=True
            )
        ),
        index=index,
    )
    out = from_arrow_dtypes(frame)
    assert list(out.index) == index and list(out.columns) == list(frame.columns)
    assert out["money"].tolist()[0] == Decimal("12.30") and str(out["money"].iloc[0]) == "12.30"
    assert out["money"].iloc[1] is None and out["money"].dtype == object
    assert out["day"].iloc[0] == datetime.date(2020, 1, 2) and out["day"].dtype == object
    assert out["wait"].dtype == "timedelta64[s]" and pd.isna(out["wait"].iloc[1])
    assert isinstance(out["level"].dtype, pd.CategoricalDtype) and out["level"].cat.ordered
    assert out["level"].tolist()[:2] == ["hi", "lo"] and pd.isna(out["level"].iloc[2])
    for kept in ("big", "at", "plain"):  # Arrow types fits models as they are
        assert out[kept].dtype == frame[kept].dtype
    assert out["big"].iloc[0] == 2**60 + 1
    assert isinstance(frame["day"].dtype, pd.ArrowDtype)  # the caller's frame unchanged
    modelled = frame[["big", "at", "plain"]]
    assert from_arrow_dtypes(modelled) is modelled


def _sites(extra: dict) -> list[pd.DataFrame]:
    sites = []
    for k in range(2):
        rng = np.random.default_rng(k)
        n = 40
        columns = {"a": rng.normal(size=n)}
        columns.update({name: make(rng, n) for name, make in extra.items()})
        sites.append(pd.DataFrame(columns).convert_dtypes(dtype_backend="pyarrow"))
    return sites


def test_a_fit_on_pyarrow_backed_tables() -> None:
    def dates(rng, n):
        return pd.array(
            (pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 60, n), "D")).date,
            dtype="date32[pyarrow]",
        )

    def money(rng, n):
        values = [Decimal(f"{v:.2f}") for v in rng.normal(100, 10, n)]
        return pd.array(values, dtype=pd.ArrowDtype(pa.decimal128(10, 2)))

    def labels(rng, n):
        return pd.arrays.ArrowExtensionArray(
            pa.array(rng.choice(["p", "q"], n)).dictionary_encode()
        )

    sites = _sites({"d": dates, "m": money, "c": labels})
    assert isinstance(sites[0]["d"].dtype, pd.ArrowDtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = FITSSynthesizer(seed=0).fit(sites).sample(30)
    assert all(isinstance(v, datetime.date) for v in out["d"])
    assert all(isinstance(v, Decimal) and v.as_tuple().exponent == -2 for v in out["m"])
    assert set(out["c"]) <= {"p", "q"} and isinstance(out["c"].dtype, pd.CategoricalDtype)
    assert isinstance(sites[0]["d"].dtype, pd.ArrowDtype)  # the caller's frames unchanged
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        detected = Schema.detect(sites)  # it raised pandas' "dt.tz is not supported"
    assert detected.kinds() == {"a": "continuous", "d": "continuous", "m": "continuous",
                                "c": "nominal"}  # fmt: skip


def test_pyarrow_durations_get_the_durations_message() -> None:
    def waits(rng, n):
        return pd.array(
            pd.to_timedelta(rng.integers(0, 100, n), unit="s"), dtype="duration[s][pyarrow]"
        )

    with pytest.raises(SchemaError, match=r"column 'w' holds durations \(timedelta\)"):
        FITSSynthesizer(seed=0).fit(_sites({"w": waits}))


def test_estimate_conditional_cdf_takes_pyarrow_backed_tables() -> None:
    """fits.estimate_conditional_cdf takes the sites' tables and the queries as fit does:
    the same estimate from Arrow decimals as from the ``Decimal`` objects of pandas'
    default backend."""
    from fits import estimate_conditional_cdf

    rng = np.random.default_rng(3)
    plain = []
    for _ in range(2):
        x = [Decimal(f"{v:.1f}") for v in rng.uniform(0, 10, 40)]
        plain.append(pd.DataFrame({"x": x, "y": rng.normal(size=40)}))
    arrow = [t.assign(x=t["x"].astype(pd.ArrowDtype(pa.decimal128(4, 1)))) for t in plain]
    queries = pd.DataFrame({"x": [Decimal("2.5"), Decimal("7.5")]})
    arrow_queries = queries.astype({"x": pd.ArrowDtype(pa.decimal128(4, 1))})
    want = estimate_conditional_cdf(plain, ["x"], "y", queries, seed=0)
    got = estimate_conditional_cdf(arrow, ["x"], "y", arrow_queries, seed=0)
    assert np.array_equal(got.values, want.values)
