"""The collinearity guard of eq. 7 on wide tables (hundreds of covariates, fewer
neighbours than covariates): no work whose result is thrown away, and the same q
(docs/benchmarks.md, "Wide tables")."""

from __future__ import annotations

import numpy as np


def _hessians(rng: np.random.Generator, b: int, d: int, n: int) -> np.ndarray:
    """S = sum_i w_i U_i U_i' (eq. 5) of b queries, each over n weighted rows of d
    covariates: rank-deficient (the guard acts) when n <= d."""
    h = rng.normal(size=(b, n, d)) * rng.uniform(0.1, 10, d)  # independent covariates
    x = rng.normal(size=(b, 1, d))
    u = np.concatenate([np.ones((b, n, 1)), h - x], axis=2)
    w = rng.uniform(0.01, 1, size=(b, n, 1))
    return np.matmul((u * w).transpose(0, 2, 1), u)


def _old_solve(s: np.ndarray, ridge: float, collinearity: float) -> np.ndarray:
    """eq. 7 as before: the ridged solve of every query, then the guard's q over it."""
    from fits.core.cdf import _ridged_first_row, collinear_first_row

    q = _ridged_first_row(s, ridge)
    rows, reduced = collinear_first_row(s, collinearity)
    q[rows] = reduced
    return q


def test_guarded_queries_are_not_solved_and_q_is_the_same_bits(monkeypatch):
    from fits.core import cdf

    rng = np.random.default_rng(5)
    wide = _hessians(rng, 6, 40, 25)  # 25 rows, 40 covariates: singular, guarded
    narrow = _hessians(rng, 6, 40, 400)  # well-conditioned: the ridged solve
    order = rng.permutation(12)
    s = np.concatenate([wide, narrow])[order]
    expected = _old_solve(s, 1e-8, cdf.COLLINEARITY_THRESHOLD)

    solved: list[int] = []
    solve = np.linalg.solve

    def counting(a, b):
        solved.append(a.shape[0])
        return solve(a, b)

    monkeypatch.setattr(np.linalg, "solve", counting)
    q, rows = cdf.solve_guarded(s, 1e-8, cdf.COLLINEARITY_THRESHOLD)
    np.testing.assert_array_equal(q, expected)
    np.testing.assert_array_equal(cdf.solve_first_row(s), expected)
    assert sorted(rows.tolist()) == np.flatnonzero(order < 6).tolist()  # the wide ones
    assert solved == [6, 6]  # the six unguarded queries, once per call above
    solved.clear()
    q_wide, rows_wide = cdf.solve_guarded(wide)
    assert rows_wide.size == 6 and solved == []  # all guarded: no solve at all
    np.testing.assert_array_equal(q_wide, _old_solve(wide, 1e-8, cdf.COLLINEARITY_THRESHOLD))
    solved.clear()
    q_off, rows_off = cdf.solve_guarded(s, 1e-8, 0.0)  # the guard off: every query solved
    assert rows_off.size == 0 and solved == [12]
    np.testing.assert_array_equal(q_off, cdf._ridged_first_row(s, 1e-8))


def test_the_guard_of_many_covariates_keeps_q_to_rounding(monkeypatch):
    # from _SUBSET_EIGH_MIN_DIM covariates on the guard decomposes only the kept
    # eigenpairs, query by query; the q's are those of the whole batched decomposition
    from fits.core import cdf

    rng = np.random.default_rng(11)
    d = cdf._SUBSET_EIGH_MIN_DIM + 10
    low_rank = rng.normal(size=(5, 30, 4)) @ rng.normal(size=(4, d))  # 4 directions
    h = low_rank + 0.01 * rng.normal(size=(5, 30, d))  # 30 rows < d covariates
    x = rng.normal(size=(5, 1, d))
    u = np.concatenate([np.ones((5, 30, 1)), h - x], axis=2)
    w = rng.uniform(0.1, 1, size=(5, 30, 1))
    s = np.matmul((u * w).transpose(0, 2, 1), u)
    s = np.concatenate([s, _hessians(rng, 2, d, 3 * d)])  # two well-conditioned
    rows, q = cdf.collinear_first_row(s)
    monkeypatch.setattr(cdf, "_SUBSET_EIGH_MIN_DIM", 10**9)
    rows_all, q_all = cdf.collinear_first_row(s)
    np.testing.assert_array_equal(rows, rows_all)
    assert rows.tolist() == [0, 1, 2, 3, 4]
    scale = np.abs(q_all).max(axis=1, keepdims=True)
    assert np.max(np.abs(q - q_all) / scale) < 1e-9


def _blas_threads() -> set[int]:
    from threadpoolctl import threadpool_info

    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_one_blas_thread_inside_then_restored():
    from fits.core.cdf import one_blas_thread

    with one_blas_thread():  # loads scipy's BLAS too, so both are seen below
        pass
    before = _blas_threads()
    with one_blas_thread():
        assert _blas_threads() == {1}
        with one_blas_thread():  # nested
            assert _blas_threads() == {1}
        assert _blas_threads() == {1}
    assert _blas_threads() == before
