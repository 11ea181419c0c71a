"""Near-linear columns drawn as their residual (issue 12; docs/method.md, "Near-linear
columns"): a continuous column whose pooled least-squares line on an earlier continuous
column has R^2 >= NEAR_LINEAR_R2 is found at setup ("linear" rule), modelled by the
sites as its residual, drawn truncated so that it stays within its bounds, and written
as the line plus the drawn residual."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.cdf import cdf_at, inverse_cdf, truncated_inverse_cdf
from fits.core.rules import NEAR_LINEAR_R2, answer_rules, residuals
from fits.core.schema import Rule, Schema, SchemaError
from fits.evaluation import rules_kept

from conftest import fits_in_process as run


def toy(seed: int = 0, n: int = 300, k: int = 3, missing: float = 0.0) -> list[pd.DataFrame]:
    """k sites: age, income (log-normal, whole numbers), income2 = income + N(0, 50)
    (2 decimals; a share ``missing`` of it missing), and a later z."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        income = rng.lognormal(10, 0.5, n).round(0)
        income2 = (income + rng.normal(0, 50, n)).round(2)
        if missing:
            income2[rng.random(n) < missing] = np.nan
        out.append(
            pd.DataFrame(
                {
                    "age": rng.integers(18, 80, n),
                    "income": income,
                    "income2": income2,
                    "z": rng.normal(0, 1, n).round(3),
                }
            )
        )
    return out


def pooled_line(frames: list[pd.DataFrame]) -> tuple[float, float]:
    """numpy's least-squares line of income2 on income over the concatenated rows."""
    real = pd.concat(frames, ignore_index=True).dropna(subset=["income2"])
    slope, intercept = np.polyfit(real["income"], real["income2"], 1)
    return float(slope), float(intercept)


def resid_sd(table: pd.DataFrame, slope: float, intercept: float) -> float:
    return float((table["income2"] - (intercept + slope * table["income"])).std())


@pytest.fixture(scope="module")
def frames() -> list[pd.DataFrame]:
    return toy()


@pytest.fixture(scope="module")
def fitted(frames):
    return FITSSynthesizer(seed=0, near_linear=True).fit(frames)


# ------------------------------------------------------------------ detection
def test_the_near_copy_is_found_with_the_pooled_line_and_residual_bounds(frames, fitted):
    rules = [r for r in fitted.schema_.rules if r.kind == "linear"]
    assert len(rules) == 1
    rule = rules[0]
    assert (rule.column, rule.of) == ("income2", ["income"])
    slope, intercept = pooled_line(frames)
    assert rule.slope == pytest.approx(slope, rel=1e-9)
    assert rule.intercept == pytest.approx(intercept, rel=1e-7, abs=1e-7)
    real = pd.concat(frames, ignore_index=True)
    r = residuals(real["income2"], real["income"], rule.slope, rule.intercept)
    assert (rule.lower, rule.upper) == (float(np.nanmin(r)), float(np.nanmax(r)))
    # the engine models the residual in income2's place, within those bounds
    engine = fitted.coordinator.schema
    assert engine.order == fitted.schema_.order
    assert (engine["income2"].lower, engine["income2"].upper) == (rule.lower, rule.upper)
    assert engine["income2"].decimals is None


def test_no_near_linear_pair_leaves_the_output_bit_for_bit():
    rng = np.random.default_rng(1)
    parts = [
        pd.DataFrame({"a": rng.normal(0, 1, 200), "b": rng.normal(0, 1, 200).round(2)})
        for _ in range(2)
    ]
    on = FITSSynthesizer(seed=3).fit(parts)  # the default: on
    off = FITSSynthesizer(seed=3, near_linear=False).fit(parts)
    assert on.schema_.rules == [] and off.schema_.rules == []
    pd.testing.assert_frame_equal(on.sample(400), off.sample(400))


def test_the_threshold_and_the_exclusions():
    rng = np.random.default_rng(2)
    n = 400
    x = rng.normal(0, 1, n)
    weak = x + rng.normal(0, 0.5, n)  # R^2 0.8: below the threshold
    frame = pd.DataFrame(
        {
            "x": x,
            "weak": weak,
            "mass": np.where(rng.random(n) < 0.3, 0.0, x * 2 + rng.normal(0, 0.01, n)),
            "f": np.round(1.8 * x + 32, 8),  # an exact affine rule, not a near-linear one
        }
    )
    schema = Schema.detect([frame.iloc[::2], frame.iloc[1::2]], near_linear=True)
    kinds = {r.column: r.kind for r in schema.rules}
    assert kinds == {"f": "affine"}  # weak: R^2 < 0.95; mass: a point mass
    assert NEAR_LINEAR_R2 == 0.95
    # boosted columns are not drawn as residuals
    synth = FITSSynthesizer(seed=0, near_linear=True, column_models={"income2": "boosting"})
    synth.fit(toy(n=120))
    assert all(r.kind != "linear" for r in synth.schema_.rules)


def test_near_copies_each_take_their_best_source_left():
    """A Y whose best source is already another pair's residual takes its best source
    left (before, it was dropped): in the selection alone (c's best, b, is a residual),
    and with eight near-copies of one column (noise sd 0.05-0.15), every copy drawn on
    c0 and the copies' correlations back."""
    from fits.core.rules import select_near_linear

    fit = (1.0, 0.0)
    cands = [
        {"kind": "linear", "column": y, "of": [x]} for y, x in [("b", "a"), ("c", "a"), ("c", "b")]
    ]
    kept = select_near_linear(cands, [(*fit, 0.99), (*fit, 0.96), (*fit, 0.98)])
    assert [(k["column"], k["of"][0], k["r2"]) for k in kept] == [
        ("b", "a", 0.99),
        ("c", "a", 0.96),
    ]
    rng = np.random.default_rng(0)
    n = 400
    base = rng.normal(0, 1, n)
    frame = pd.DataFrame({f"c{i}": base + rng.normal(0, 0.05 * (1 + i % 3), n) for i in range(8)})
    synth = FITSSynthesizer(seed=0).fit([frame.iloc[i::3] for i in range(3)])
    pairs = {r.column: r.of[0] for r in synth.schema_.rules if r.kind == "linear"}
    assert pairs == {f"c{i}": "c0" for i in range(1, 8)}
    gap = np.abs(frame.corr().to_numpy() - synth.sample(400).corr().to_numpy())
    assert gap.mean() < 0.005


# ------------------------------------------------------------------ sampling
def test_the_truncated_draw_is_the_inverse_of_u_moved_into_f_lo_f_hi():
    grid = np.linspace(-1.0, 1.0, 9)
    cdf = np.tile(np.array([0.0, 0.05, 0.1, 0.3, 0.5, 0.6, 0.8, 0.95, 1.0]), (5, 1))
    lo = np.array([-0.9, -0.3, 0.0, -2.0, 0.55])
    hi = np.array([-0.1, 0.4, 0.05, 2.0, 0.6])
    u = np.array([0.0, 0.3, 0.5, 0.7, 0.999])
    f_lo, f_hi = cdf_at(cdf, grid, lo), cdf_at(cdf, grid, hi)
    np.testing.assert_allclose(f_lo, [np.interp(v, grid, cdf[0]) for v in np.maximum(lo, -1)])
    assert f_lo[3] == 0.0 and f_hi[3] == 1.0  # beyond the grid: 0 and 1
    values, empty = truncated_inverse_cdf(cdf, grid, u, lo, hi)
    want = inverse_cdf(cdf, grid, f_lo + u * (f_hi - f_lo))
    np.testing.assert_allclose(values, np.clip(want, lo, hi))
    assert np.all((values >= lo) & (values <= hi)) and not empty.any()
    assert np.all(cdf_at(cdf, grid, values) >= f_lo - 1e-12)
    assert np.all(cdf_at(cdf, grid, values) <= f_hi + 1e-12)
    # no mass in the interval: flagged for the caller's fallback
    flat = np.tile(np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]), (1, 1))
    _, empty = truncated_inverse_cdf(flat, grid, np.array([0.5]), np.array([0.3]), np.array([0.9]))
    assert empty.all()


def test_a_row_with_no_conditional_mass_falls_back_to_the_marginal(fitted):
    coord = fitted.coordinator
    rule = fitted.schema_.near_linear["income2"]
    grid = coord.grids["income2"]
    cdf = np.zeros((3, grid.size))
    cdf[:, -1] = 1.0  # every bit of mass above the residual's range
    x = np.full(3, fitted.schema_["income"].upper)  # the feasible residuals: all < 0
    spec = fitted.schema_["income2"]
    lo = spec.lower - (rule.slope * x + rule.intercept)
    hi = spec.upper - (rule.slope * x + rule.intercept)
    before = list(coord.truncation_fallbacks.get("income2", [0, 0]))
    r = coord._truncated("income2", cdf, np.array([0.1, 0.5, 0.9]), x)
    assert np.all((r >= lo) & (r <= hi)) and np.all(r < 0)
    assert coord.truncation_fallbacks["income2"][0] == before[0] + 3
    assert len(set(r.tolist())) == 3  # drawn from the marginal, not put at one point


def test_the_residual_spread_comes_back(frames, fitted):
    slope, intercept = pooled_line(frames)
    real = pd.concat(frames, ignore_index=True)
    out = fitted.sample(900)
    real_sd = resid_sd(real, slope, intercept)
    assert resid_sd(out, slope, intercept) == pytest.approx(real_sd, rel=0.3)
    off = FITSSynthesizer(seed=0, near_linear=False).fit(frames).sample(900)
    assert resid_sd(off, slope, intercept) > 20 * real_sd  # the chain alone: ~100x


@pytest.mark.parametrize(("missing", "kernel"), [(0.0, "knn"), (0.2, "knn"), (0.2, "gaussian")])
def test_later_columns_see_the_column_not_its_residual(missing, kernel):
    """With the rule on, the sites model income2 as its residual only as the response
    of its own conditional CDF: every later column's covariate is income2 itself (a
    missing one at income2's lower bound), on its own scale, so a later column's
    conditional CDF given a query (in income2's units) is the one without the rule."""
    parts = toy(n=150, missing=missing)
    on = FITSSynthesizer(seed=2, kernel=kernel, near_linear=True).fit(parts)
    off = FITSSynthesizer(seed=2, kernel=kernel, near_linear=False).fit(parts)
    assert "income2" in on.schema_.near_linear and not off.schema_.near_linear
    order = on.coordinator.schema.order
    assert order == off.coordinator.schema.order
    j = order.index("income2")
    assert j < len(order) - 1  # columns come after it
    chain = on.coordinator.sample(60, np.random.default_rng(4))  # income2 in its units
    spec = on.schema_["income2"]
    present = chain[:, j][chain[:, j] != spec.lower]
    assert present.min() > spec.lower and present.max() <= spec.upper  # Y, not R
    for later in order[j + 1 :]:
        if on.coordinator.encoders[later].spec.is_discrete:
            continue
        q = chain[:, : order.index(later)]
        a = on.coordinator.conditional_cdf(later, q)
        b = off.coordinator.conditional_cdf(later, q)
        np.testing.assert_array_equal(a, b)  # bit for bit
    # and income2's own conditional CDF is its residual's, on the residual's grid
    assert on.coordinator.grids["income2"][0] < 0 < on.coordinator.grids["income2"][-1]


def test_the_chain_holds_the_column_and_the_output_is_it_once(fitted):
    """Coordinator.sample puts the line plus the drawn residual in income2's place (what
    later queries hold); the decoded output is that value, clipped and rounded, with
    no second line added."""
    coord = fitted.coordinator
    order = coord.schema.order
    chain = coord.sample(500, np.random.default_rng(7))
    out = fitted._decode(chain)
    y = chain[:, order.index("income2")]
    spec = fitted.schema_["income2"]
    np.testing.assert_allclose(out["income2"], np.clip(y, *spec.bounds).round(2), atol=5e-3)
    rule = fitted.schema_.near_linear["income2"]
    r = y - (rule.slope * chain[:, order.index("income")] + rule.intercept)
    assert np.all((r >= rule.lower - 1e-6) & (r <= rule.upper + 1e-6))


def test_a_boosted_later_column_bins_the_column_on_its_own_scale():
    parts = toy(n=150)
    synth = FITSSynthesizer(
        seed=0, near_linear=True, column_models={"z": "boosting"}, boosting={"n_trees": 3}
    )
    synth.fit(parts)
    coord = synth.coordinator
    assert "income2" in synth.schema_.near_linear
    edges = coord._covariate_edges("income2", 16)
    spec, rule = synth.schema_["income2"], synth.schema_.near_linear["income2"]
    np.testing.assert_allclose(
        edges, rule.slope * coord._covariate_edges("income", 16) + rule.intercept
    )
    assert spec.lower < edges.min() and edges.max() < spec.upper  # income2's, not R's
    out = synth.sample(300, seed=1)
    assert out["z"].notna().all() and out["income2"].between(*spec.bounds).all()


def test_every_synthetic_value_is_within_bounds_and_rounded(frames, fitted):
    out = fitted.sample(2000, seed=5)
    spec = fitted.schema_["income2"]
    assert out["income2"].between(spec.lower, spec.upper).all()
    assert (out["income2"] == out["income2"].round(2)).all()
    assert out["income2"].dtype == np.float64
    # reproducible from the one seed
    pd.testing.assert_frame_equal(out, fitted.sample(2000, seed=5))


def test_missing_values_stay_missing_and_a_missing_source_is_no_candidate():
    parts = toy(n=200, missing=0.2)
    synth = FITSSynthesizer(seed=0, near_linear=True).fit(parts)
    rule = synth.schema_.near_linear["income2"]
    real = pd.concat(parts, ignore_index=True)
    held = real.dropna(subset=["income2"])
    slope, intercept = np.polyfit(held["income"], held["income2"], 1)
    assert rule.slope == pytest.approx(slope, rel=1e-9)
    out = synth.sample(3000)
    assert out["income2"].isna().mean() == pytest.approx(0.2, abs=0.04)
    present = out.dropna(subset=["income2"])
    assert resid_sd(present, slope, intercept) < 2 * resid_sd(held, slope, intercept)
    # the source with missing values: no rule (R would be missing where Y is not)
    swapped = [p.rename(columns={"income": "income2", "income2": "income"}) for p in parts]
    swapped = [p[["age", "income", "income2", "z"]] for p in swapped]
    schema = Schema.detect(swapped, near_linear=True)
    assert all(r.kind != "linear" or r.of != ["income"] for r in schema.rules)


# ------------------------------------------------------------------ known values
def test_known_source_and_column_give_the_residual_and_keep_both(frames, fitted):
    real = pd.concat(frames, ignore_index=True)
    known = real[["age", "income", "income2"]].iloc[:50]
    out = fitted.sample_remaining_columns(known, seed=1)
    pd.testing.assert_frame_equal(out[["age", "income", "income2"]], known.reset_index(drop=True))
    assert out["z"].notna().all()
    # the source known, the column drawn: near the line
    out = fitted.sample_remaining_columns(real[["age", "income"]].iloc[:200], seed=1)
    slope, intercept = pooled_line(frames)
    assert resid_sd(out, slope, intercept) < 2 * resid_sd(real, slope, intercept)


def test_a_known_column_without_its_source_is_refused(frames, fitted):
    real = pd.concat(frames, ignore_index=True)
    with pytest.raises(ValueError, match=r"'income2'.*near-linear rule.*give 'income' too"):
        fitted.sample_remaining_columns(real[["income2"]].iloc[:5])
    far = real[["age", "income", "income2"]].iloc[:3].copy()
    far["income2"] = far["income"] + 5000.0
    with pytest.raises(ValueError, match="farther from its near-linear rule's line"):
        fitted.sample_remaining_columns(far)


# ------------------------------------------------------------------ schema, persistence
def test_the_rule_round_trips_and_editing_it_out_switches_it_off(frames, fitted):
    text = fitted.schema_.to_json()
    again = Schema.from_json(text)
    assert [r.to_dict() for r in again.rules] == [r.to_dict() for r in fitted.schema_.rules]
    assert "near-linear" in again.near_linear["income2"].describe()
    doc = json.loads(text)
    doc["rules"] = [r for r in doc["rules"] if r["kind"] != "linear"]
    edited = FITSSynthesizer(seed=0, schema=Schema.from_dict(doc)).fit(frames)
    off = FITSSynthesizer(seed=0, near_linear=False).fit(frames)
    pd.testing.assert_frame_equal(edited.sample(300), off.sample(300))
    # a user's schema brings the rule itself, and the sites check its bounds
    kept = FITSSynthesizer(seed=0, schema=again, near_linear=False).fit(frames)
    pd.testing.assert_frame_equal(kept.sample(300, seed=4), fitted.sample(300, seed=4))
    narrow = json.loads(text)
    for r in narrow["rules"]:
        r["upper"] = r["lower"] + 1.0
    with pytest.raises(SchemaError, match="residuals outside"):
        FITSSynthesizer(seed=0, schema=Schema.from_dict(narrow)).fit(frames)


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"lower": 5.0, "upper": 1.0}, "must be below"),
        ({"lower": None}, 'needs a number "lower"'),
        ({"decimals": 2}, 'no "mapping", "decimals"'),
        ({"of": ["income", "age"]}, "exactly one column"),
        ({"step": 0}, '"step" must be a number of seconds > 0'),
        ({"step": "1 day"}, '"step" must be a number of seconds > 0'),
    ],
)
def test_a_bad_edit_names_the_column(edit, message):
    base = {
        "column": "income2",
        "kind": "linear",
        "of": ["income"],
        "slope": 1.0,
        "intercept": 0.0,
        "lower": -1.0,
        "upper": 1.0,
    }
    with pytest.raises(SchemaError, match=message):
        Rule.from_dict({**base, **edit})
    with pytest.raises(SchemaError, match='"lower", "upper" and "step" belong'):
        Rule("c", ["a", "b"], "sum", lower=0.0)
    with pytest.raises(SchemaError, match='"lower", "upper" and "step" belong'):
        Rule("c", ["a"], "affine", slope=1.0, intercept=0.0, step=60.0)


def test_a_saved_synthesizer_keeps_the_rule(tmp_path, frames, fitted):
    path = fitted.save(tmp_path / "model.pkl")
    first = fitted.sample(300, seed=2)
    loaded = FITSSynthesizer.load(path).connect(frames)
    assert loaded.schema_.near_linear == fitted.schema_.near_linear
    pd.testing.assert_frame_equal(first, loaded.sample(300, seed=2))


def test_secure_aggregation_finds_the_same_rule(frames, fitted):
    secure = FITSSynthesizer(seed=0, secure_aggregation=True, near_linear=True).fit(frames)
    a, b = secure.schema_.near_linear["income2"], fitted.schema_.near_linear["income2"]
    # the masked moments are fixed point: the line agrees to float64 noise, and so do
    # the residual extremes (per site, not summed: from that line)
    assert a.slope == pytest.approx(b.slope, rel=1e-9)
    assert a.intercept == pytest.approx(b.intercept, rel=1e-9, abs=1e-9)
    assert (a.lower, a.upper) == pytest.approx((b.lower, b.upper), rel=1e-9)


def test_the_report_does_not_call_it_kept(fitted):
    table = pd.DataFrame({"income": [1.0], "income2": [2.0]})
    assert rules_kept(table, fitted.schema_.rules).empty


def test_the_sites_answer_residual_extremes(frames, fitted):
    schema = fitted.schema_.without_rules()
    rule = fitted.schema_.near_linear["income2"]
    cand = {
        "kind": "linear",
        "column": "income2",
        "of": ["income"],
        "slope": rule.slope,
        "intercept": rule.intercept,
    }
    answer = answer_rules(frames[0], schema, [cand], "residuals")
    r = residuals(frames[0]["income2"], frames[0]["income"], rule.slope, rule.intercept)
    assert answer[:2].tolist() == [float(r.min()), float(r.max())]
    assert np.isnan(answer[2])  # a step only for two datetime columns


def test_cli_switch(tmp_path, frames):
    paths = []
    for k, part in enumerate(frames):
        paths.append(tmp_path / f"site_{k}.csv")
        part.to_csv(paths[-1], index=False)
    res = run("schema", *map(str, paths), "--out", str(tmp_path / "s.json"))  # on: default
    assert res.returncode == 0, res.stderr
    assert "near-linear columns (1)" in res.stdout and "income2 = " in res.stdout
    res = run("schema", *map(str, paths), "--out", str(tmp_path / "t.json"), "--no-near-linear")
    assert res.returncode == 0, res.stderr
    assert "near-linear" not in res.stdout
    assert json.loads((tmp_path / "t.json").read_text())["rules"] == []
    out = tmp_path / "syn.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run("synthesize", *map(str, paths), "--rows", "300", "--out", str(out))
    assert res.returncode == 0, res.stderr
    syn = pd.read_csv(out)
    slope, intercept = pooled_line(frames)
    real = pd.concat(frames, ignore_index=True)
    assert resid_sd(syn, slope, intercept) < 2 * resid_sd(real, slope, intercept)
    off = tmp_path / "off.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run(
            "synthesize", *map(str, paths), "--rows", "300", "--out", str(off), "--no-near-linear"
        )
    assert res.returncode == 0, res.stderr
    assert resid_sd(pd.read_csv(off), slope, intercept) > 10 * resid_sd(real, slope, intercept)


def test_the_flower_run_config_carries_the_switch(tmp_path):
    pytest.importorskip("flwr")
    from cli.federate import _run_config
    from fits.deploy.flower import read_run_config

    out = tmp_path / "syn.csv"
    on = _run_config(out, 10, 0, [], "", None, 60.0, 2, None)  # the default: on
    off = _run_config(out, 10, 0, [], "", None, 60.0, 2, None, near_linear=False)
    assert "near-linear" not in on and off["near-linear"] is False
    assert read_run_config(on)["near_linear"] is True
    assert read_run_config(off)["near_linear"] is False


def test_a_near_linear_column_takes_a_design_of_its_own():
    """``column_designs`` on a near-linear column sets its residual's local-linear design
    (it was refused with the boosting message, "to boost it, drop the rule")."""
    parts = toy(n=120)
    synth = FITSSynthesizer(seed=1, near_linear=True, column_designs={"income2": "constant"})
    synth.fit(parts)
    assert "income2" in synth.schema_.near_linear
    assert synth.coordinator.design_covariates("income2").size == 0
    with pytest.raises(ValueError, match="drawn as the residual of its near-linear rule"):
        FITSSynthesizer(seed=1, column_models={"income2": "boosting"}, schema=synth.schema_).fit(
            parts
        )


# ------------------------------------------------------------------ datetimes, written pairs
def _stays(n: int = 900, seed: int = 1, tz: str | None = None) -> list[pd.DataFrame]:
    """3 sites: admitted (whole days over 4 years), discharged 0-29 days later (10%
    still admitted: missing), age; with ``tz``, admissions as instants in that zone."""
    rng = np.random.default_rng(seed)
    admitted = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 4 * 365, n), "D")
    discharged = pd.Series(admitted + pd.to_timedelta(rng.integers(0, 30, n), "D"))
    frame = pd.DataFrame(
        {
            "admitted": admitted,
            "discharged": discharged.where(rng.random(n) > 0.1),
            "age": rng.integers(18, 90, n),
        }
    )
    if tz is not None:
        frame["admitted"] = frame["admitted"].dt.tz_localize(tz)
        frame["discharged"] = frame["discharged"].dt.tz_localize(tz)
    return [frame.iloc[i::3].reset_index(drop=True) for i in range(3)]


def _days(a: pd.Series, b: pd.Series) -> pd.Series:
    return (b - a).dt.total_seconds() / 86400


def test_two_date_columns_keep_their_durations():
    """Two datetime columns: the line is Y = X + intercept (slope 1, not fitted), so R
    plus the intercept is the duration; the synthetic durations stay within the real
    ones (0-29 whole days), where without the rule they spread over years."""
    sites = _stays()
    real = pd.concat(sites, ignore_index=True)
    synth = FITSSynthesizer(seed=0).fit(sites)
    [rule] = synth.schema_.rules
    assert (rule.kind, rule.column, rule.of, rule.slope) == (
        "linear",
        "discharged",
        ["admitted"],
        1.0,
    )
    seconds = _days(real["admitted"], real["discharged"]).dropna() * 86400
    # the intercept is the mean duration rounded to the durations' step (whole days),
    # the bounds the real durations' range about it
    assert rule.step == 86400.0
    assert rule.intercept % 86400 == 0
    assert abs(rule.intercept - seconds.mean()) <= 43200
    assert rule.intercept + rule.lower == 0.0
    assert rule.intercept + rule.upper == 29 * 86400
    out = synth.sample(3000)
    days = _days(out["admitted"], out["discharged"]).dropna()
    assert days.min() >= 0 and days.max() <= 29
    assert np.all(days == np.round(days))  # whole days, as written
    assert out["discharged"].isna().mean() == pytest.approx(0.1, abs=0.03)
    assert rule.describe(clock=True) == (
        "discharged = admitted + duration in [0 days, 29 days] in steps of 1 day (near-linear)"
    )
    plain = FITSSynthesizer(seed=0, rules=False).fit(sites).sample(3000)
    assert _days(plain["admitted"], plain["discharged"]).abs().max() > 100  # the problem
    # without near-linear columns, the order rule discharged >= admitted keeps the order
    # (not the real durations' range)
    ordered = FITSSynthesizer(seed=0, near_linear=False).fit(sites)
    assert [r.describe() for r in ordered.schema_.rules] == ["discharged >= admitted (order)"]
    out = ordered.sample(3000)
    days = _days(out["admitted"], out["discharged"]).dropna()
    assert days.min() >= 0 and np.all(days == np.round(days))


def test_datetimes_with_a_time_zone():
    out = FITSSynthesizer(seed=0).fit(_stays(tz="Europe/Berlin")).sample(1000)
    assert str(out["discharged"].dt.tz) == "Europe/Berlin"
    days = _days(out["admitted"], out["discharged"]).dropna()
    # whole days on the wall clock: a stay over a DST change is 23 or 25 hours off
    assert days.min() >= -1 / 24 - 1e-9 and days.max() <= 29 + 1 / 24 + 1e-9


def test_a_rule_between_a_datetime_and_a_number_is_refused():
    sites = _stays()
    schema = Schema.detect(sites, near_linear=False).to_dict()
    schema["rules"] = [
        {"kind": "linear", "column": "age", "of": ["admitted"], "slope": 0.0,
         "intercept": 50.0, "lower": -40.0, "upper": 40.0}
    ]  # fmt: skip
    with pytest.raises(SchemaError, match="two datetime columns or two number columns"):
        Schema.from_dict(schema)


def test_a_number_column_that_looks_like_a_residual_is_still_refused_a_datetime_source():
    """The check tells the engine's schema (whose rule column holds the residual's
    float spec, also for a pair of dates) by how it was made (:meth:`Schema.expanded`),
    not by comparing specs: before, a user's float column with bounds equal to the
    rule's and nothing else set compared equal to the residual's spec, so a rule from
    a datetime to it passed as the engine's."""
    from fits.core.schema import ColumnSpec, residual_spec

    when = ColumnSpec("when", "continuous", "datetime", lower=1.6e9, upper=1.7e9)
    rule = Rule("y", ["when"], "linear", slope=1.0, intercept=0.0, lower=-1.0, upper=1.0)
    for lower, upper in ((-2.0, 2.0), (-1.0, 1.0)):  # the second: the residual's spec
        y = ColumnSpec("y", "continuous", "float", lower=lower, upper=upper)
        assert (y == residual_spec(y, rule)) == (lower == -1.0)
        with pytest.raises(SchemaError, match="two datetime columns or two number columns"):
            Schema([when, y], rules=[rule])
    # the engine's schema of a real pair of dates: the column a float, the rule kept
    schema = Schema.detect(_stays())
    [rule] = schema.rules
    engine = schema.expanded()
    assert engine["discharged"] == residual_spec(schema["discharged"], rule)
    assert engine["admitted"].dtype == "datetime" and engine.rules == [rule]
    assert not schema._engine and engine._engine


@pytest.mark.parametrize("kind", ["decimals", "whole"])
def test_the_written_residual_stays_within_the_rules_bounds(kind):
    """R is drawn within its own bounds (the real residuals' range) as well as Y's, and
    the line is taken at X as written: the residual of the written pair is the drawn
    one up to Y's own rounding (half a step), never X's."""
    rng = np.random.default_rng(3)
    n = 600
    if kind == "whole":
        x = rng.integers(0, 1000, n)
        y = 3 * x + rng.integers(-5, 6, n)
        half = 0.5
    else:
        x = rng.uniform(0, 1000, n).round(1)
        y = (x + rng.uniform(0, 2, n)).round(2)
        half = 0.005
    frame = pd.DataFrame({"x": x, "y": y})
    synth = FITSSynthesizer(seed=0).fit([frame.iloc[i::3] for i in range(3)])
    [rule] = synth.schema_.rules
    out = synth.sample(4000)
    r = residuals(out["y"].to_numpy(float), out["x"].to_numpy(float), rule.slope, rule.intercept)
    assert r.min() >= rule.lower - half - 1e-9 and r.max() <= rule.upper + half + 1e-9


def test_written_is_what_decode_writes():
    from fits.core.continualization import Encoder
    from fits.core.schema import ColumnSpec

    y = np.array([-3.0, 0.123456, 2.5, 7.77777, 99.0])
    spec = ColumnSpec("v", "continuous", "float", lower=0.0, upper=10.0, decimals=2)
    assert Encoder(spec).written(y).tolist() == [0.0, 0.12, 2.5, 7.78, 10.0]
    spec = ColumnSpec("d", "continuous", "datetime", lower=0.0, upper=1e9, date_only=True)
    got = Encoder(spec).written(np.array([86400 * 1.4, 86400 * 2.6]))
    assert got.tolist() == [86400.0, 3 * 86400.0]
