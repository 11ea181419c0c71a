"""The standardization round's moments (fits.analysis.design: ``site_moments`` at each
site, ``pool_moments`` at the coordinator) are numerically stable.

They were sums and sums of squares pooled as sqrt(sumsq / n - mean^2): timestamps
within a minute (1.7e9 seconds since 1970) got sd 71.55 s instead of 16.98 s, so the
coefficients per sd were wrong; a feature 1e9 + N(0, 1), or one of 1e-200 * N(0, 1)
(its squares underflow), was refused as "take one value across the federation"; a
target of 1e-170 gave a false exact fit (scale 0, z values of +-inf).  The oracle here
is numpy on the pooled rows: ``np.std`` for the sd, ``np.linalg.lstsq`` for the fit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import fits.analysis as fa
from fits.analysis.design import (
    MIN_SD,
    DesignError,
    DesignSite,
    DesignSpec,
    pool_moments,
    schema_round,
    site_moments,
    standardization_round,
)
from fits.core.schema import datetime_seconds
from fits.federation.protocol import Message
from fits.federation.transport import InProcessTransport

T0 = pd.Timestamp("2024-03-01 12:00")


def _within_a_minute(sizes: tuple[int, ...] = (200, 150), seed: int = 4) -> list[pd.DataFrame]:
    """The tester's tables: timestamps within one minute, y = 0.1 s + x + noise."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        s, x = rng.uniform(0, 60, n), rng.normal(size=n)
        out.append(
            pd.DataFrame(
                {
                    "ts": T0 + pd.to_timedelta(s, unit="s"),
                    "x": x,
                    "y": 0.1 * s + x + rng.normal(size=n),
                }
            )
        )
    return out


def _tables(feature: str, sizes: tuple[int, ...] = (200, 150), seed: int = 0) -> list[pd.DataFrame]:
    """Tables of one feature ``z`` of a hard kind and y = u + noise (z = f(u))."""
    rng = np.random.default_rng(seed)
    out = []
    for k, n in enumerate(sizes):
        u = rng.normal(size=n)
        if feature == "big":  # 1e9 + N(0, 1): a spread far below the values
            z = 1e9 + u
        elif feature == "tiny":  # squares underflow to 0
            z = 1e-200 * u
        elif feature == "tiny150":
            z = 1e-150 * u
        elif feature == "one value here":  # every row of the last site alike
            z = np.full(n, 0.1) if k == len(sizes) - 1 else u
        else:
            z = u
        out.append(pd.DataFrame({"z": z, "y": 2.0 * u + 1.0 + rng.normal(size=n)}))
    return out


def _pooled(tables: list[pd.DataFrame], features: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The pooled raw numeric features (datetimes as the design codes them) and y."""
    pooled = pd.concat(tables, ignore_index=True)
    cols = [
        datetime_seconds(pooled[f])
        if pd.api.types.is_datetime64_any_dtype(pooled[f])
        else pooled[f].to_numpy(float)
        for f in features
    ]
    return np.column_stack(cols), pooled["y"].to_numpy(float)


def _np_std(x: np.ndarray) -> np.ndarray:
    """``np.std`` of each column, its values first multiplied by a power of two (exact)
    that brings the largest to about 1, so that numpy's squares do not underflow."""
    e = np.frexp(np.abs(x).max(axis=0))[1]
    return np.ldexp(np.std(np.ldexp(x, -e), axis=0), e)


def _transport(tables: list[pd.DataFrame]) -> InProcessTransport:
    return InProcessTransport(
        [DesignSite(t, name=f"site{k}") for k, t in enumerate(tables)], n_jobs=1
    )


def _standardization(tables: list[pd.DataFrame], features: list[str]) -> np.ndarray:
    transport = _transport(tables)
    schema, _ = schema_round(transport, columns=["y", *features], target="y")
    spec = DesignSpec.from_schema(schema, "y", features)
    return standardization_round(transport, spec).sds


def _check_against_ols(tables: list[pd.DataFrame], features: list[str]) -> None:
    """A linear fit's params (per sd) and original_params (per unit) equal an OLS on
    the pooled rows, done with numpy alone (columns centred and divided by their
    largest magnitude, so that lstsq sees a well-scaled problem; the map back to per
    unit is exact algebra)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fa.fit_glm(tables, "y", features, family="linear")
    x, y = _pooled(tables, features)
    mean, sd = x.mean(axis=0), _np_std(x)
    np.testing.assert_allclose(res.standardization.sds, sd, rtol=1e-12)
    centred = x - mean
    scale = np.abs(centred).max(axis=0)
    b = np.linalg.lstsq(np.column_stack([np.ones(len(y)), centred / scale]), y, rcond=None)[0]
    per_unit = b[1:] / scale
    intercept = b[0] - per_unit @ mean
    np.testing.assert_allclose(res.params[features].to_numpy(), per_unit * sd, rtol=1e-7)
    np.testing.assert_allclose(res.original_params[features].to_numpy(), per_unit, rtol=1e-7)
    np.testing.assert_allclose(res.params["(intercept)"], b[0], rtol=1e-7)  # mean of y
    np.testing.assert_allclose(
        res.original_params["(intercept)"], intercept, rtol=1e-7, atol=1e-9 * abs(b[0])
    )


# ------------------------------------------------------------------ the tester's defects


def test_timestamps_within_a_minute_get_their_sd_and_coefficient() -> None:
    """Defect 1: sd 71.55 s instead of 16.98 s, params['ts'] 6.95 instead of 1.65."""
    tables = _within_a_minute()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fa.fit_glm(tables, "y", ["ts", "x"], family="linear")
    x, _ = _pooled(tables, ["ts"])
    assert res.standardization.sds[0] == pytest.approx(np.std(x[:, 0]), rel=1e-12)
    assert res.standardization.sds[0] == pytest.approx(16.976, abs=1e-3)
    assert res.params["ts"] == pytest.approx(res.original_params["ts"] * np.std(x[:, 0]))
    assert res.params["ts"] == pytest.approx(1.648, abs=1e-3)
    _check_against_ols(tables, ["ts", "x"])


@pytest.mark.parametrize("seed", range(5))
def test_a_large_common_value_is_no_constant(seed: int) -> None:
    """Defect 1: 1e9 + N(0, 1) was refused ("take one value") or got an sd of 11-23."""
    tables = _tables("big", seed=seed)
    sds = _standardization(tables, ["z"])
    assert sds[0] == pytest.approx(_np_std(_pooled(tables, ["z"])[0])[0], rel=1e-12)


def test_tiny_feature_fits_like_ols() -> None:
    """Defect 2: x * 1e-200 was refused as "take one value" (its squares underflow); it
    now fits, params per sd and original_params per unit as an OLS on the pooled rows."""
    for kind in ("tiny", "tiny150"):
        tables = _tables(kind)
        sds = _standardization(tables, ["z"])
        assert sds[0] == pytest.approx(_np_std(_pooled(tables, ["z"])[0])[0], rel=1e-12)
        _check_against_ols(tables, ["z"])


@pytest.mark.parametrize("scale", [1e-300, 1e-310])
def test_a_feature_near_the_smallest_float_is_refused_with_the_fix(scale: float) -> None:
    """Defect 2, decided: below MIN_SD (1e-250) the values lose digits (1e-310 is
    subnormal) and the coefficient per unit (per sd / sd) overflows: refused, naming the
    column and the power of ten to multiply it by."""
    tables = [t.assign(z=t["z"] * scale) for t in _tables("plain")]
    assert _np_std(_pooled(tables, ["z"])[0])[0] < MIN_SD
    with pytest.raises(DesignError, match=r"'z' \(sd .*\) vary by less than 1e-250.*'z' by 1e3"):
        fa.fit_glm(tables, "y", ["z"], family="linear")


def test_tiny_target_is_refused_not_reported_as_an_exact_fit() -> None:
    """Defect 3: y * 1e-170 gave "the target is an exact linear function of the
    features", scale 0 and z values of +-inf (the residual sum of squares underflows);
    it is refused from the setup round's range, naming the column and the fix."""
    tables = [t.assign(y=t["y"] * 1e-170) for t in _tables("plain")]
    with pytest.raises(DesignError, match=r"target 'y' holds no value beyond .*e-1[67]\d.*by 1e1"):
        fa.fit_glm(tables, "y", ["z"], family="linear")
    # above the bound a small target fits: no false exact fit, finite z values
    tables = [t.assign(y=t["y"] * 1e-99) for t in _tables("plain")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fa.fit_glm(tables, "y", ["z"], family="linear")
    assert not [w for w in caught if "exact linear function" in str(w.message)]
    assert 0 < res.scale < np.inf and np.isfinite(res.tvalues).all()
    base = fa.fit_glm(_tables("plain"), "y", ["z"], family="linear")
    np.testing.assert_allclose(res.tvalues, base.tvalues, rtol=1e-9)


# ------------------------------------------------------------------ pooled sd oracle


def _hard_cases() -> dict[str, list[pd.DataFrame]]:
    return {
        "big": _tables("big"),
        "tiny": _tables("tiny"),
        "unequal sizes": _tables("plain", sizes=(5000, 3, 40)),
        "a site of one row": _tables("plain", sizes=(120, 1, 60)),
        "a site of one value": _tables("one value here", sizes=(120, 80, 20)),
    }


@pytest.mark.parametrize("case", list(_hard_cases()))
def test_pooled_sd_equals_numpy_on_the_pooled_rows(case: str) -> None:
    tables = _hard_cases()[case]
    sds = _standardization(tables, ["z"])
    assert sds[0] == pytest.approx(_np_std(_pooled(tables, ["z"])[0])[0], rel=1e-12)
    _check_against_ols(tables, ["z"])


def test_pooled_timestamps_equal_numpy() -> None:
    tables = _within_a_minute(sizes=(3000, 2, 1, 400), seed=9)
    sds = _standardization(tables, ["ts", "x"])
    np.testing.assert_allclose(sds, _np_std(_pooled(tables, ["ts", "x"])[0]), rtol=1e-12)
    _check_against_ols(tables, ["ts", "x"])


def test_site_moments_and_pooling_by_hand() -> None:
    """site_moments: a column of one value gets it exactly and sd 0 (one row too); a
    site with no rows adds nothing to the pool; every site alike gives sd 0 exactly,
    so a constant like 0.1 (whose sums are not exact) is still refused."""
    rng = np.random.default_rng(3)
    parts = [
        np.column_stack([1e9 + rng.normal(size=n), 1e-200 * rng.normal(size=n), np.full(n, 0.1)])
        for n in (7, 1, 500)
    ]
    replies = []
    for x in parts:
        mean, sd = site_moments(x)
        np.testing.assert_allclose(sd[:2], _np_std(x[:, :2]), rtol=1e-12)
        assert mean[0, 2] == 0.1 and mean[1, 2] == 0.0 and sd[2] == 0.0
        replies.append(Message("moments", {"n": np.array([len(x)]), "mean": mean, "sd": sd}))
    empty = site_moments(np.empty((0, 3)))
    replies.append(Message("moments", {"n": np.array([0]), "mean": empty[0], "sd": empty[1]}))
    st = pool_moments(replies)
    pooled = np.vstack(parts)
    np.testing.assert_allclose(st.sds[:2], _np_std(pooled[:, :2]), rtol=1e-12)
    # a mean is exact to rounding of the values' spread, not of the mean itself
    err = np.abs(st.means[:2] - pooled[:, :2].mean(axis=0))
    assert (err <= 1e-15 * np.abs(st.means[:2]) + 1e-13 * _np_std(pooled[:, :2])).all()
    assert st.means[2] == 0.1 and st.sds[2] == 0.0
    assert list(st.n_rows) == [7, 1, 500, 0] and st.n_dropped is None
    mean, sd = site_moments(np.array([[3.5]]))
    assert mean.tolist() == [[3.5], [0.0]] and sd.tolist() == [0.0]


def test_a_constant_of_inexact_sums_is_still_refused() -> None:
    """123.456 in every row at every site: the sums of squares gave sd 1.3e-6 (rounding),
    so the feature was standardized into rounding noise; its sd is now 0 exactly, and it
    is refused."""
    spec = DesignSpec.from_schema(schema_round(_transport(_tables("plain")))[0], "y", ["z"])
    const = _transport([t.assign(z=123.456) for t in _tables("plain", sizes=(3, 7, 11))])
    with pytest.raises(DesignError, match=r"\['z'\] take one value"):
        standardization_round(const, spec)


def test_original_bse_of_a_tiny_feature_is_the_scaled_one_not_inf() -> None:
    """A cov A' overflows for a feature of sd 1e-200; its per-unit standard error is
    1e200 times that of the same feature at sd 1 (was: inf)."""
    rng = np.random.default_rng(1)
    tables = []
    for n in (200, 150):
        x, z = rng.normal(size=n), rng.normal(size=n)
        tables.append(pd.DataFrame({"x": x, "z": z, "y": x + 0.5 * z + rng.normal(size=n)}))
    plain = fa.fit_glm(tables, "y", ["x", "z"], family="linear")
    tiny = fa.fit_glm([t.assign(x=t.x * 1e-200) for t in tables], "y", ["x", "z"], family="linear")
    expected = plain.original_bse.to_numpy() * [1.0, 1e200, 1.0]
    np.testing.assert_allclose(tiny.original_bse.to_numpy(), expected, rtol=1e-9)
    np.testing.assert_allclose(
        plain.original_bse.to_numpy(), np.sqrt(np.diag(plain.original_cov_params())), rtol=1e-12
    )
