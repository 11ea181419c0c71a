"""Every FITSSynthesizer parameter is stored as given and checked at fit, with an error
that names it and says what it takes: a wrong type is refused, not read as something
else (``rules="no"`` is truthy, ``order="age"`` is a list of letters, ``n_jobs=1.5``
rounds down), and not left to fail deep inside numpy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from fits import FITSSynthesizer


def _site(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "income": rng.normal(50_000, 10_000, n).round(2),
            "color": rng.choice(["red", "green", "blue"], n),
        }
    )


@pytest.fixture(scope="module")
def sites() -> list[pd.DataFrame]:
    return [_site(80, 1), _site(60, 2)]


@pytest.mark.parametrize(
    ("param", "value", "error", "message"),
    [
        ("rules", "no", TypeError, "rules must be True or False, got 'no'"),
        ("deduplicate", "no", TypeError, "deduplicate must be True or False"),
        ("secure_aggregation", 1, TypeError, "secure_aggregation must be True or False"),
        ("min_client_rows", 0, ValueError, "min_client_rows must be a whole number >= 1"),
        ("min_client_rows", 2.5, ValueError, "min_client_rows must be a whole number >= 1"),
        ("order", "age", TypeError, "order must be a list of every column"),
        ("smoothing_candidates", [1, 2], ValueError, "smoothing_candidates: a smoothing is"),
        ("smoothing_candidates", "x", TypeError, "smoothing_candidates must be a list"),
        ("smoothing_candidates", [], ValueError, "smoothing_candidates is empty"),
        ("smoothing", {"income": 5}, ValueError, "smoothing: a smoothing is a Smoothing"),
    ],
)
def test_settings_are_checked_at_fit(sites, param, value, error, message):
    synth = FITSSynthesizer(seed=0, n_jobs=1, **{param: value})
    assert synth.get_params()[param] is value  # stored as given
    assert clone(synth).get_params()[param] == value
    with pytest.raises(error, match=message):
        synth.fit(sites)
    assert not hasattr(synth, "schema_")


def test_smoothing_candidates_as_pairs_and_mappings_still_work(sites):
    synth = FITSSynthesizer(
        seed=0,
        n_jobs=1,
        smoothing="auto",
        smoothing_candidates=[(1, 1), {"sharpness": 3, "reach": 2}],
    ).fit(sites)
    assert len(synth.sample(5)) == 5


@pytest.mark.parametrize(
    ("param", "value", "message"),
    [
        ("kernel", 3, "kernel must be 'knn', 'gaussian', a KNNKernel / GaussianKernel, or one"),
        ("kernel", None, "kernel must be 'knn', 'gaussian'"),
        ("site_policy", 5, "site_policy must be a SitePolicy or None, or one per site"),
        # a string is no list of policies (it was read as one per letter)
        ("site_policy", "strict", "site_policy must be a SitePolicy or None"),
        ("site_audit", 5, "site_audit must be a file path, a callable or None, or one"),
    ],
)
def test_per_site_settings_of_the_wrong_type_are_refused(sites, param, value, message):
    with pytest.raises(TypeError, match=message):
        FITSSynthesizer(seed=0, n_jobs=1, **{param: value}).fit(sites)


@pytest.mark.parametrize("tables", [None, 5, "site_a.csv"])
def test_tables_that_are_not_one_frame_per_site_are_refused(tables):
    with pytest.raises(TypeError, match=r"fit\(\) takes one DataFrame per site, as a list"):
        FITSSynthesizer(seed=0, n_jobs=1).fit(tables)


@pytest.mark.parametrize(
    ("param", "value", "error", "message"),
    [
        ("ridge", float("nan"), TypeError, "ridge must be a finite number, got nan"),
        ("ridge", "a", TypeError, "ridge must be a finite number, got 'a'"),
        ("collinearity", "x", TypeError, "collinearity must be a finite number"),
        # an infinite bandwidth was taken and ended in "the marginal CDF has no mass"
        ("response_bandwidth", float("inf"), TypeError, "response_bandwidth must be a finite"),
        ("discrete_response_bandwidth", -1, ValueError, "discrete_response_bandwidth=-1"),
        ("mask_neighbours", 1.5, TypeError, "mask_neighbours must be a whole number"),
        ("round_cost_bytes", 1.5, TypeError, "round_cost_bytes must be a whole number"),
        ("n_jobs", 1.5, TypeError, "n_jobs must be a whole number of threads, -1 or None"),
        ("n_jobs", "a", TypeError, "n_jobs must be a whole number of threads, -1 or None"),
    ],
)
def test_numbers_are_checked_at_fit(sites, param, value, error, message):
    settings = {"n_jobs": 1, param: value}
    with pytest.raises(error, match=message):
        FITSSynthesizer(seed=0, **settings).fit(sites)


def test_the_coordinator_refuses_switches_that_are_not_booleans(sites):
    from fits.deploy.inprocess import build_federation
    from fits.federation.coordinator import Coordinator

    _, transport = build_federation(sites, n_jobs=1)
    with pytest.raises(TypeError, match="deduplicate must be True or False, got 'no'"):
        Coordinator(transport, deduplicate="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="secure must be True or False"):
        Coordinator(transport, secure=1)  # type: ignore[arg-type]
