"""Kernel schemes: the KNN budget rule (eq. 12), bandwidths, penalties."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.kernels import (
    GaussianKernel,
    KNNKernel,
    epanechnikov_product,
    knn_budget,
    resolve_kernel,
)


@pytest.mark.parametrize(
    ("m_k", "n_total", "r0", "c0", "expected"),
    [
        (10853, 36177, 200, 2, 60),  # 10853 * 200 / 36177 = 59.99... -> 60
        (362, 36177, 200, 2, 2),  # 2.001 -> 2
        (100, 1000, 350, 2, 35),
        (5, 1000, 350, 2, 2),  # share 1.75 -> 2 = c0
        (3, 10, 350, 2, 3),  # share 105 > m_k -> m_k
        (1, 1000, 200, 5, 5),  # c0 wins over everything (eq. 12 as written)
        (25, 100, 10, 2, 3),  # 2.5 rounds half up
    ],
)
def test_knn_budget_follows_eq_12(m_k, n_total, r0, c0, expected):
    assert knn_budget(m_k, n_total, r0, c0) == expected


def test_knn_budget_totals_about_r0():
    sizes = [10853, 7235, 3618, 3256, 2894, 2532, 2171, 1809, 1447, 362]
    total = sum(knn_budget(m, sum(sizes), 200) for m in sizes)
    assert abs(total - 200) <= len(sizes) / 2


def test_default_budget_by_dimension():
    k = KNNKernel()
    assert [k.budget_for(d) for d in (1, 2, 3, 9)] == [350, 250, 200, 200]
    assert KNNKernel(budget=50).budget_for(1) == 50
    assert KNNKernel(budget={1: 10, 0: 20}).budget_for(4) == 20


def test_gaussian_default_bandwidth_is_scott_like():
    assert GaussianKernel().bandwidth_for(10_000, 2) == pytest.approx(10_000 ** (-1 / 6))
    assert GaussianKernel(bandwidth=0.3).bandwidth_for(10_000, 2) == 0.3


def test_epanechnikov_product():
    u = np.array([[0.0, 0.0], [0.5, 0.0], [0.5, 0.5], [1.2, 0.0]])
    np.testing.assert_allclose(epanechnikov_product(u), [1.0, 0.75, 0.5625, 0.0])


def test_invalid_parameters_are_refused():
    with pytest.raises(ValueError, match="gamma"):
        KNNKernel(nominal_penalty=0.0)
    with pytest.raises(ValueError, match="c0"):
        KNNKernel(min_neighbors=1)
    with pytest.raises(ValueError, match="bandwidth"):
        GaussianKernel(bandwidth=-1)
    with pytest.raises(ValueError, match="unknown kernel"):
        resolve_kernel("cubic")


def test_per_column_penalties():
    k = KNNKernel(column_penalties={"a": 0.5})
    assert k.penalty_for("a", "nominal") == 0.5
    assert k.penalty_for("b", "nominal") == 0.1
    assert k.penalty_for("b", "ordinal") == 1.0


def test_approximate_search_is_opt_in_and_close(mixed_clients):
    from fits import estimate_conditional_cdf

    with pytest.raises(ValueError, match="search_eps"):
        KNNKernel(search_eps=-0.1)
    assert KNNKernel().search_eps == 0.0  # exact neighbours unless asked
    kinds = {"b": "nominal", "o": "ordinal", "c": "nominal"}
    x = np.random.default_rng(0).normal(size=(300, 3))
    exact = estimate_conditional_cdf(mixed_clients, ["b", "x", "o"], "y", x, kinds=kinds, seed=0)
    approx = estimate_conditional_cdf(
        mixed_clients,
        ["b", "x", "o"],
        "y",
        x,
        kinds=kinds,
        seed=0,
        kernel=KNNKernel(search_eps=0.2),
    )
    assert np.max(np.abs(exact.values - approx.values)) < 0.1
    assert np.mean(np.abs(exact.values - approx.values)) < 0.005


def test_neighbour_search_choice():
    assert KNNKernel().search_method(3) == "kdtree"
    assert KNNKernel().search_method(12) == "brute"
    assert KNNKernel(search_eps=0.1).search_method(12) == "kdtree"
    assert KNNKernel(search="kdtree").search_method(12) == "kdtree"
    assert KNNKernel(search="brute").search_method(1) == "brute"
    with pytest.raises(ValueError, match="search must be one of"):
        KNNKernel(search="ball")
    with pytest.raises(ValueError, match="needs search='kdtree'"):
        KNNKernel(search="brute", search_eps=0.1)
    assert KNNKernel().search_method(10) == "kdtree"  # BRUTE_FORCE_MIN_DIM = 11
    assert KNNKernel().search_method(11) == "brute"
    for bad in (0, -2):
        with pytest.raises(ValueError, match="n_jobs"):
            KNNKernel(n_jobs=bad)


def test_search_threads_do_not_change_the_estimate(mixed_clients):
    from fits import estimate_conditional_cdf

    kinds = {"b": "nominal", "o": "ordinal", "c": "nominal"}
    x = np.array([[1.0, 0.2, 2.0], [0.0, -1.0, 1.0], [1.0, 2.5, 5.0]])
    est = [
        estimate_conditional_cdf(
            mixed_clients,
            ["b", "x", "o"],
            "y",
            x,
            kinds=kinds,
            seed=0,
            kernel=KNNKernel(n_jobs=jobs),
        ).values
        for jobs in (1, -1)
    ]
    np.testing.assert_array_equal(est[0], est[1])


def test_scan_and_tree_give_the_same_synthetic_table():
    rng = np.random.default_rng(5)
    n = 900
    cols = {f"x{j}": rng.normal(size=n) for j in range(9)}
    frame = pd.DataFrame(cols)
    frame["x8"] = frame["x0"] + 0.3 * frame["x8"]
    frame["g"] = np.where(frame["x1"] > 0, "a", "b")
    sites = [frame.iloc[:500], frame.iloc[500:750], frame.iloc[750:]]
    out = [
        FITSSynthesizer(KNNKernel(search=s), seed=1).fit(sites).sample(300)
        for s in ("kdtree", "brute")
    ]
    pd.testing.assert_frame_equal(out[0], out[1], check_exact=False, rtol=1e-12, atol=1e-12)
