"""fit_glm and fedlsa on arguments a new user gets wrong: one DataFrame for the sites,
a string for the features, a seed numpy refuses, no local steps.  Each is refused
naming the argument and the fix, not read as something else or left to numpy."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fits.analysis import fedlsa, fit_glm
from fits.analysis.lsa import FedLSAError


def _site(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, n)
    return pd.DataFrame(
        {
            "age": age,
            "income": (age * 1000 + rng.normal(0, 5000, n)).round(2),
            "sex": rng.choice(["F", "M"], n),
            "y": rng.integers(0, 2, n),
        }
    )


@pytest.fixture(scope="module")
def sites() -> list[pd.DataFrame]:
    return [_site(120, 1), _site(90, 2)]


def _fedlsa(tables, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fedlsa(tables, "income", **{"regime": "one_pass", **kwargs})


@pytest.mark.parametrize("fit", ["fit_glm", "fedlsa"])
def test_one_dataframe_for_the_sites_is_refused(sites, fit):
    # was: its column names read as sites ("site1: expected a pandas DataFrame, got str")
    call = (lambda t: fit_glm(t, "y")) if fit == "fit_glm" else _fedlsa
    with pytest.raises(TypeError, match=f"{fit} takes one DataFrame per site, e.g. {fit}"):
        call(sites[0])


@pytest.mark.parametrize("fit", ["fit_glm", "fedlsa"])
def test_features_given_as_one_string_are_refused(sites, fit):
    # was: "feature(s) ['a', 'g', 'e'] not in the tables"
    call = (
        (lambda: fit_glm(sites, "y", features="age"))
        if fit == "fit_glm"
        else (lambda: _fedlsa(sites, features="age"))
    )
    with pytest.raises(TypeError, match=r"features must be a list of column names, e.g. \['age'\]"):
        call()


@pytest.mark.parametrize(("seed", "error"), [(-1, ValueError), (1.5, TypeError)])
def test_a_bad_seed_names_the_parameter(sites, seed, error):
    # was numpy's "expected non-negative integer" / "SeedSequence expects int ..."
    with pytest.raises(error, match=f"seed must be an integer >= 0 or None, got {seed}"):
        fit_glm(sites, "y", seed=seed)
    with pytest.raises(FedLSAError, match=f"seed must be an integer >= 0 or None, got {seed}"):
        _fedlsa(sites, seed=seed)


def test_site_names_and_results_are_unchanged(sites):
    res = fit_glm(sites, "y", features=["age"], seed=0)
    again = fit_glm({"site1": sites[0], "site2": sites[1]}, "y", features=["age"], seed=0)
    np.testing.assert_array_equal(res.params.to_numpy(), again.params.to_numpy())


@pytest.mark.parametrize("regime", ["one_pass", "paper"])
def test_no_local_steps_is_refused(sites, regime):
    # was: ZeroDivisionError in regime one_pass when the rounds are left to the data
    with pytest.raises(FedLSAError, match="local_steps must be a positive integer, got 0"):
        sampling = "with_replacement" if regime == "paper" else "without_replacement"
        _fedlsa(sites, regime=regime, local_steps=0, sampling=sampling)


@pytest.mark.parametrize("key", ["mu", "epsilon", "delta"])
def test_a_privacy_budget_that_is_no_number_names_the_parameter(sites, key):
    # was float()'s "could not convert string to float: 'a'"
    budget = {"epsilon": 1.0, "delta": 1e-5} if key != "mu" else {}
    with pytest.raises(TypeError, match=f"{key} must be a number, got 'a' \\(option --{key}\\)"):
        fit_glm(sites, "y", **{**budget, key: "a"})


def test_conf_int_of_an_alpha_that_is_no_number_says_so(sites):
    res = _fedlsa(sites, features=["age"], seed=0)
    with pytest.raises(FedLSAError, match="alpha must be a number in \\(0, 1\\), e.g. 0.05"):
        res.conf_int("x")  # was: '<' not supported between 'float' and 'str'
    assert res.conf_int(0.1).shape == (2, 2)
