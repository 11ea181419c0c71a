"""A stranger's tables and requests for ``fits analyze`` and :mod:`fits.analysis`: what a
QA round found, each with the behaviour it fixed (small tables, in this process)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.analysis import fit_glm, gdp_delta, gdp_epsilon, gdp_mu
from fits.analysis.design import DesignError

from conftest import fits_in_process as run
from conftest import write_sites


def _logistic(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(0.5 + x1 - 0.5 * x2)))).astype(int)
    return pd.DataFrame({"x1": x1, "x2": x2, "y": y})


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return {f"s{k}": _logistic(150, k) for k in range(2)}


@pytest.fixture(scope="module")
def files(tables, tmp_path_factory) -> list[str]:
    return write_sites(tables, tmp_path_factory.mktemp("qa"))


# ------------------------------------------------------------------ accounting
@pytest.mark.parametrize("mu", [1e10, 1e20, 1e100, 1e150])
def test_a_huge_mu_is_accounted_without_overflow(mu: float) -> None:
    # was: OverflowError (math range error) from e^eps from mu = 1e10 on, a traceback
    # after the whole fit had run
    eps = gdp_epsilon(mu, 1e-5)
    assert np.isfinite(eps) and eps == pytest.approx(mu * mu / 2, rel=1e-9)


def test_the_accounting_still_inverts_itself() -> None:
    for mu in (0.05, 0.5, 1.0, 4.0, 40.0, 1e4):
        eps = gdp_epsilon(mu, 1e-6)
        assert gdp_delta(eps, mu) == pytest.approx(1e-6, rel=1e-7)
        assert gdp_mu(eps, 1e-6) == pytest.approx(mu, rel=1e-8)


@pytest.mark.parametrize(("epsilon", "delta"), [(1e8, 1e-5), (1e12, 1e-5), (0.0, 1e-12)])
def test_gdp_mu_finds_large_and_tiny_budgets(epsilon: float, delta: float) -> None:
    # was: "no mu reaches delta=1e-05 at epsilon=1e8" (mu capped at 1e4), and scipy's
    # "f(a) and f(b) must have different signs" for epsilon 0 at delta 1e-12
    mu = gdp_mu(epsilon, delta)
    assert gdp_delta(epsilon, mu) == pytest.approx(delta, rel=1e-3)
    if epsilon > 0:
        assert gdp_epsilon(mu, delta) == pytest.approx(epsilon, rel=1e-9)


def test_a_mu_beyond_floating_point_is_a_usage_error(files, tmp_path: Path) -> None:
    # was: exit 1 "ValueError: epsilon must be a non-negative finite number, got inf
    # (option --epsilon)" for --mu 1e300, after the fit
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "y", "--mu", "1e300", "--out", out)
    assert res.returncode == 2 and "--mu" in res.stderr and "at most" in res.stderr
    assert not out.exists()
    res = run("analyze", *files, "--target", "y", "--mu", "1e20", "--out", out)
    assert res.returncode == 0, res.stderr
    assert "eps=5e+39" in res.stdout and "Traceback" not in res.stderr


# ------------------------------------------------------------------ non-finite fits
@pytest.mark.parametrize("method", ["fedsgd", "fedhybrid", "fedavg", "fednewton"])
def test_noise_beyond_floating_point_is_an_error_not_nan_coefficients(tables, method) -> None:
    # was: NaN coefficients written as the result (exit 0), or for FedNewton
    # "LinAlgError: Eigenvalues did not converge"
    with pytest.raises(DesignError, match="no longer a finite number.*larger budget"):
        fit_glm(tables, "y", method=method, mu=1e-310, seed=0)


def test_a_diverging_step_is_an_error_naming_the_step(files, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ("--target", "y", "--family", "linear", "--method", "fedsgd", "--step", "1e10")
    res = run("analyze", *files, *args, "--out", out)
    assert res.returncode == 1 and "--step" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "warning" not in res.stderr
    assert not out.exists()


def test_the_json_of_a_fit_holds_only_numbers(files, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "y", "--mu", "1e-3", "--out", out)
    assert res.returncode == 0, res.stderr
    json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))


# ------------------------------------------------------------------ near-duplicate features
def _near_copy(noise: float) -> dict[str, pd.DataFrame]:
    """x3 = x1 plus noise of sd ``noise``: collinear within the tolerance (1e-10 of the
    largest eigenvalue of X'X / n) for noise up to about 1e-5."""
    out = {}
    for s in range(2):
        t = _logistic(200, s)
        t["x3"] = t["x1"] + np.random.default_rng(9 + s).normal(size=200) * noise
        out[f"s{s}"] = t
    return out


def test_a_near_copy_names_only_the_columns_of_the_relation() -> None:
    # was: "['x1', 'x2', 'x3'] are linearly dependent": x2, of weight 1e-7 in the
    # relation, named with them
    with pytest.raises(DesignError, match=r"\['x1', 'x3'\] are linearly dependent"):
        fit_glm(_near_copy(1e-5), "y", method="newton")
    with pytest.raises(DesignError, match=r"\['x1', 'x3'\] are linearly dependent"):
        fit_glm(_near_copy(0.0), "y", method="fedsgd")


def test_fedlsa_names_only_the_columns_of_the_relation() -> None:
    from fits.analysis import fedlsa
    from fits.analysis.lsa import FedLSAError

    tables = {k: t.assign(y=t["y"].astype(float)) for k, t in _near_copy(1e-5).items()}
    with pytest.raises(FedLSAError, match=r"\['x1', 'x3'\] are linearly dependent"):
        fedlsa(tables, "y", regime="one_pass")


# ------------------------------------------------------------------ huge requests
def test_a_huge_bootstrap_is_refused_before_it_fills_the_memory(tables, files, tmp_path) -> None:
    from fits.analysis import fedlsa
    from fits.analysis.lsa import FedLSAError

    # was: 10^8 sequences took 15 GiB and minutes (a stop signal unheard meanwhile)
    linear = {k: t.assign(y=t["y"].astype(float)) for k, t in tables.items()}
    with pytest.raises(FedLSAError, match="--bootstrap"):
        fedlsa(linear, "y", n_bootstrap=10**8, sampling="with_replacement", rounds=2)
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "x1", "--method", "fedlsa", "--bootstrap",
              "100000000", "--out", out)  # fmt: skip
    assert res.returncode == 2 and "--bootstrap" in res.stderr and "at most" in res.stderr


def test_absurd_rounds_are_a_usage_error(files, tmp_path: Path) -> None:
    # was: -R 10^9 listed 10^9 step sizes in Python before the first round (a GiB a
    # minute, no output)
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "x1", "--method", "fedlsa", "-R", "1000000000",
              "--sampling", "with_replacement", "--out", out)  # fmt: skip
    assert res.returncode == 2 and "--rounds" in res.stderr and "at most" in res.stderr


# ------------------------------------------------------------------ usage errors name the option
@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--method", "fedsgd", "-R", "5"], "--rounds"),
        (["--method", "fedhybrid", "-K", "5"], "--iterations"),
        (["--method", "fedhybrid", "--step", "0"], "--step"),
        (["--method", "fedavg", "-R", "0"], "--rounds"),
        (["--method", "fedsgd", "-K", "0"], "--iterations"),
        (["--method", "fedlsa", "--step", "-1"], "--step"),
        (["--method", "fedlsa", "-H", "0"], "--local-steps"),
        (["--method", "fedlsa", "-R", "0"], "--rounds"),
        (["--method", "fedlsa", "--gamma-eta", "0.6", "--gamma-h", "0.9"], "--gamma-h"),
        (["--method", "fedlsa", "--regime", "one_pass", "--step", "5"], "--step"),
        (["--round-timeout", "5"], "--round-timeout"),
        (["--flower", "--round-timeout", "-1"], "--round-timeout"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_its_option(files, tmp_path, args, option) -> None:
    # was: "iteration count K must be ...", "option(s) ['R'] do not apply", "step size
    # eta1 ...", "rounds must be ...": the parameter's name in the code, not the option;
    # --round-timeout without --flower was taken and ignored
    target = "x1" if "fedlsa" in args else "y"
    res = run("analyze", *files, "--target", target, *args, "--out", tmp_path / "r.json")
    assert res.returncode == 2, res.stdout
    assert option in res.stderr, res.stderr


@pytest.mark.parametrize("args", [["--kind", "y=id"], ["--kind", "x1=id", "--features", "x1,x2"]])
def test_an_id_kind_for_a_column_of_the_model_is_a_usage_error(files, tmp_path, args) -> None:
    # was: exit 1 "are identifiers or free text (kind 'id'); they cannot be a feature or
    # the target", without the fix
    res = run("analyze", *files, "--target", "y", *args, "--out", tmp_path / "r.json")
    assert res.returncode == 2 and "--kind" in res.stderr and "declare another kind" in res.stderr


# ------------------------------------------------------------------ the summary
def test_the_summary_writes_huge_numbers_in_exponent_notation(tables) -> None:
    # was: a coefficient of 1e140 printed with its 141 digits (a target in such units, or
    # the noise of a tiny mu)
    big = {k: t.assign(y=t["x2"] * 1e140 + t["x1"] * 1e139) for k, t in tables.items()}
    summary = fit_glm(big, "y", family="linear").summary()
    rows = [line for line in summary.splitlines() if line.startswith(("  (intercept)", "  x"))]
    assert len(rows) == 3 and max(len(line) for line in rows) < 120, summary
    assert "e+140" in summary


# ------------------------------------------------------------------ the privacy statement
def test_a_private_summary_says_what_the_guarantee_does_not_cover(files, tmp_path) -> None:
    # was: "privacy: each site 1-fed-GDP ..." and nothing about the exact releases (the
    # standardization sums, the separation check's extremes asked for) outside it
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "y", "--mu", "1", "--check-separation",
              "--out", out)  # fmt: skip
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("privacy covers"))
    assert (
        "fitting rounds only" in line
        and "standardization moments (each site's row count and its mean and sd" in line
    )
    assert "separation check" in line and "clipping percentile" in line
    assert json.loads(out.read_text())["privacy_scope"] == line.removeprefix("privacy covers ")
    res = run("analyze", *files, "--target", "y", "--mu", "1", "--clip", "2", "--out", out)
    scope = json.loads(out.read_text())["privacy_scope"]
    assert "separation" not in scope and "clipping" not in scope
    run("analyze", *files, "--target", "y", "--out", out)
    assert json.loads(out.read_text())["privacy_scope"] is None


def test_a_site_too_small_for_one_pass_is_not_sent_back_and_forth(tables) -> None:
    from fits.analysis import fedlsa
    from fits.analysis.lsa import FedLSAError

    # was: "use regime='paper'", whose own error (the paper's 2000 rows per site) offered
    # regime='one_pass' back
    tiny = {"big": tables["s0"], "tiny": tables["s1"].iloc[:3]}
    with pytest.raises(FedLSAError, match="regime='paper'.*at most 3 rounds x local steps"):
        fedlsa(tiny, "x1", regime="one_pass")
    # and the paper regime's error names 3 rounds of 1 local step, not one_pass back
    # (nor sampling with replacement, whose intervals are not for the population)
    fewer = r"allow at most 3 rounds of 1 local step \(3 rows\)"
    with pytest.raises(FedLSAError, match=fewer) as err:
        fedlsa(tiny, "x1", local_steps=5)
    assert "one_pass" not in str(err.value) and "--sampling" not in str(err.value)


# ------------------------------------------------------------------ options a method does not use
@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--bootstrap", "500"], "--bootstrap"),
        (["--regime", "one_pass"], "--regime"),
        (["--sampling", "with_replacement"], "--sampling"),
        (["--gamma-eta", "0.6"], "--gamma-eta"),
        (["--multipliers", "shared"], "--multipliers"),
        (["-H", "5"], "--local-steps"),
        (["--mu", "1", "--cov-type", "HC0"], "--cov-type"),
        (["--mu", "1", "--ci", "0.9"], "--ci"),
        (["--family", "linear", "--check-separation"], "--check-separation"),
    ],
)
def test_an_option_the_glm_does_not_use_is_refused(files, tmp_path, args, option) -> None:
    # was: taken and ignored (exit 0): FedLSA's options with a GLM method, sandwich
    # standard errors or a confidence level for a private fit (which has neither), a
    # separation check for a linear model
    res = run("analyze", *files, "--target", "y", *args, "--out", tmp_path / "r.json")
    assert res.returncode == 2, res.stdout
    assert option in res.stderr and "drop" in res.stderr, res.stderr


def test_the_defaults_still_run_and_none_is_refused_for_nothing(files, tmp_path) -> None:
    out = tmp_path / "r.json"
    for args in (["--ci", "0.9"], ["--mu", "1", "--cov-type", "none"], ["--no-check-separation"]):
        res = run("analyze", *files, "--target", "y", *args, "--out", out)
        assert res.returncode == 0, res.stderr
    res = run("analyze", *files, "--target", "x1", "--method", "fedlsa", "--regime",
              "one_pass", "--bootstrap", "20", "--ci", "0.9", "--out", out)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text())["level"] == pytest.approx(0.9)


@pytest.mark.parametrize("eta", ["a", None, True])
def test_a_step_that_is_no_number_names_the_step(tables, eta) -> None:
    # was: "could not convert string to float: 'a'"
    from fits.analysis.glm import glm_settings

    if eta is None:
        assert glm_settings("fedsgd", {"eta": None})["eta"] == 0.5
        return
    with pytest.raises(ValueError, match="step size eta must be a positive number"):
        fit_glm(tables, "y", method="fedsgd", eta=eta)


def test_fednewton_reports_the_third_party_mu_of_an_odd_site_size(tables) -> None:
    # was: mu / sqrt(m) = 0.7071 for a 7-row site next to a 150-row one; its noise uses
    # 6 rows and its weight 7, so a record there is hidden less than that
    # (its Newton step's average; its FedAvg round counts at the site's own mu / sqrt(2),
    # tests/test_third_party_privacy.py)
    odd = {"a": tables["s0"], "b": tables["s1"].iloc[:7]}
    res = fit_glm(odd, "y", method="fednewton", mu=1.0, clip=1.0, seed=0)
    r = np.array([1.0, 7 / 6])
    newton = r.max() / np.sqrt(r @ r) / np.sqrt(2)  # 0.7592566 / sqrt(2)
    assert res.privacy.mu_third_party == pytest.approx(np.sqrt(0.5 + newton**2))
    assert res.privacy.epsilon_third_party == pytest.approx(
        gdp_epsilon(float(np.sqrt(0.5 + 0.7592566**2 / 2)), 1e-5), 1e-6
    )
    for method, mu3 in (("fedsgd", 1 / np.sqrt(2)), ("fedavg", 1.0)):
        spent = fit_glm(odd, "y", method=method, mu=1.0, clip=1.0, seed=0).privacy
        assert spent.mu_third_party == pytest.approx(mu3)
    even = fit_glm(tables, "y", method="fednewton", mu=1.0, clip=1.0, seed=0).privacy
    assert even.mu_third_party == pytest.approx(np.sqrt(0.75))


def test_a_poisson_target_that_is_no_count_says_the_fix(tables) -> None:
    # was: "... must be a count (integer >= 0) for family 'poisson'; found [-1.0]", no fix
    bad = {k: t.assign(y=t["y"] - 1) for k, t in tables.items()}
    with pytest.raises(DesignError, match="found \\[-1.0\\]: drop or recode those rows"):
        fit_glm(bad, "y", family="poisson")


# ------------------------------------------------------------------ bootstrap and level
def test_the_bootstrap_must_reach_the_intervals_level(files, tmp_path: Path) -> None:
    from fits.analysis.lsa import bootstrap_level_problem

    # was: "99.99% lower/upper" printed from 20 draws: their range, a 90% interval at best
    assert bootstrap_level_problem(39, 0.05) is None
    assert "at least 39" in str(bootstrap_level_problem(38, 0.05))
    assert bootstrap_level_problem(199, 1 - 0.99) is None
    assert "at least 19999 " in str(bootstrap_level_problem(20, 1 - 0.9999))
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "x1", "--method", "fedlsa", "--bootstrap", "20",
              "--ci", "0.9999", "--out", out)  # fmt: skip
    assert res.returncode == 2 and "--bootstrap" in res.stderr and not out.exists()


def test_an_interval_beyond_the_bootstrap_is_warned_in_python(tables) -> None:
    from fits.analysis import fedlsa
    from fits.analysis.lsa import FedLSABootstrapWarning

    linear = {k: t.assign(y=t["y"].astype(float)) for k, t in tables.items()}
    res = fedlsa(linear, "x1", regime="one_pass", n_bootstrap=20)
    with pytest.warns(FedLSABootstrapWarning, match="at least 39"):
        res.conf_int(0.05)


# ------------------------------------------------------------------ strict JSON
def test_an_exact_fit_writes_strict_json(tmp_path: Path) -> None:
    # was: "mle_distance": Infinity (the residuals exactly 0, scale 0), which JSON has
    # not (JavaScript's JSON.parse and jq refuse it), and "the estimate is inf std err
    # from the pooled MLE" for the MLE itself
    files = []
    for k in range(2):
        x = np.array([0.0, 1.0, 0.0, 1.0] * (5 + k))
        files.append(tmp_path / f"e{k}.csv")
        pd.DataFrame({"x": x, "y": x}).to_csv(files[-1], index=False)
    out = tmp_path / "r.json"
    res = run("analyze", *files, "--target", "y", "--family", "linear", "--out", out)
    assert res.returncode == 0, res.stderr
    assert "inf std err" not in res.stdout and "exact linear function" in res.stdout
    data = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert data["mle_distance"] is None


def test_json_safe_leaves_finite_numbers_and_drops_the_rest() -> None:
    from fits.analysis.run import json_safe

    got = json_safe({"a": [1.0, float("inf"), np.float64("nan")], "b": {"c": 2, "d": "x"}})
    assert got == {"a": [1.0, None, None], "b": {"c": 2, "d": "x"}}


def test_fednewtons_noise_beyond_floating_point_names_tau1(tables) -> None:
    # was: "at mu = 1 the privacy noise ... give a larger budget" for --tau1 1e-310
    with pytest.raises(DesignError, match="clip B = 1 .*larger tau1"):
        fit_glm(tables, "y", method="fednewton", mu=1.0, clip=1.0, tau1=1e-310)


def test_the_help_names_the_defaults_of_the_options_without_one() -> None:
    # the options that default to None (to tell a given one) name their default in the
    # help; rich took a "[default: ...]" written there for markup and dropped it
    res = run("analyze", "--help", env={"COLUMNS": "200"})
    text = " ".join(res.stdout.replace("│", " ").split())
    for default in ("(default: 0.95)", "(default: 200)", "(default: paper)", "(default: 600)"):
        assert default in text, default
