"""Proposition 3.1: the federated estimate equals the pooled local-linear estimator.

The reference below is written from the paper's formulas alone -- kernel weights
computed row by row (eqs. 11, 13, 24-26), the pooled weighted least-squares fit solved
per query with ``numpy.linalg.lstsq`` (eq. 2 / eq. 4) -- and shares no code with the
engine except the continualized values each client drew (whose correctness is tested
in test_continualization.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtr
from scipy.stats import iqr

from fits import GaussianKernel, KNNKernel, estimate_conditional_cdf
from fits.federation.policy import DEFAULT_MIN_EFFECTIVE_ROWS, SitePolicy

COVARIATES = ["b", "x", "o", "c"]
KINDS = {"b": "nominal", "o": "ordinal", "c": "nominal"}
GAMMA, LAMBDA = 0.1, 1.0


def _lifted(result):
    """Each client's continualized table (covariates then response)."""
    return [c.z for c in result.coordinator.transport._clients]


def _codes(result):
    return [c.codes for c in result.coordinator.transport._clients]


def _encoders(result):
    return result.coordinator.transport._clients[0].encoders


def _midpoints(x, encoders):
    """Eq. 24: discrete query coordinates -> midpoint of their interval."""
    x = x.copy()
    codes = np.full(x.shape, -1)
    for j, enc in enumerate(encoders[: x.shape[1]]):
        if enc.spec.is_discrete:
            b = enc.boundaries
            for i, v in enumerate(x[:, j]):
                lvl = int(np.flatnonzero((b[:-1] < v) & (v <= b[1:]))[0])
                codes[i, j] = lvl
                x[i, j] = (b[lvl] + b[lvl + 1]) / 2
    return x, codes


def _penalty(row_codes, q_codes, encoders, t=1.0, a=None):
    """rho of eq. 26; relaxed to gamma^(1/t) and lambda / t for a kernel widened by t;
    with relevance weights ``a`` (one per covariate), gamma^(a_q / t) and a_q lambda / t."""
    a = np.ones(len(q_codes)) if a is None else a
    rho = 1.0
    for j, enc in enumerate(encoders[: len(q_codes)]):
        if enc.spec.kind == "nominal":
            rho *= 1.0 if row_codes[j] == q_codes[j] else GAMMA ** (a[j] / t)
        elif enc.spec.kind == "ordinal":
            rho *= np.exp(-a[j] * LAMBDA / t * abs(row_codes[j] - q_codes[j]))
    return rho


def _penalty_mass(q_codes, encoders, t, a=None):
    """The penalty summed over each discrete covariate's categories, at the query's."""
    a = np.ones(len(q_codes)) if a is None else a
    z = 1.0
    for j, enc in enumerate(encoders[: len(q_codes)]):
        levels = range(enc.spec.n_levels) if enc.spec.is_discrete else []
        if enc.spec.kind == "nominal":
            z *= sum(1.0 if g == q_codes[j] else GAMMA ** (a[j] / t) for g in levels)
        elif enc.spec.kind == "ordinal":
            z *= sum(np.exp(-a[j] * LAMBDA / t * abs(g - q_codes[j])) for g in levels)
    return z


def _response_bandwidths(z, codes, encoders, j):
    enc = encoders[j]
    if enc.spec.is_discrete:
        return 0.05 * enc.widths[codes[:, j]]
    y = z[:, j]  # min(sd, IQR / 1.349): Silverman's robust spread (docs/method.md)
    return np.full(len(z), 0.05 * min(y.std(), iqr(y) / 1.3489795003921634))


def _pooled_cdf(zs, codes, weights, x, grid, encoders, d, design=None):
    """Pooled local-linear fit per query: argmin sum_i w_i (K_i(z) - b0 - b'(h_i - x))^2;
    with ``design`` (covariate positions) only those covariates are in the fit:
    argmin sum_i w_i (K_i(z) - b0 - b'(h_i[design] - x[design]))^2."""
    h = np.vstack([z[:, :d] for z in zs])
    y = np.concatenate([z[:, d] for z in zs])
    wz = np.concatenate(
        [_response_bandwidths(z, c, encoders, d) for z, c in zip(zs, codes, strict=True)]
    )
    k = ndtr((grid[None, :] - y[:, None]) / wz[:, None])
    out = np.empty((len(x), grid.size))
    for b in range(len(x)):
        w = np.concatenate([wk[b] for wk in weights])
        diff = h - x[b]
        if design is not None:
            diff = diff[:, design]
        u = np.column_stack([np.ones(len(h)), diff])
        sw = np.sqrt(w)[:, None]
        beta = np.linalg.lstsq(sw * u, sw * k, rcond=None)[0]
        out[b] = beta[0]
    return out


def _gaussian_weights(zs, codes, x, qcodes, encoders, loc, scale, bandwidth, t=1.0, a=None):
    """Eq. 11 row by row; widened by t: bandwidth t w_x, penalties relaxed, and the
    weights times t^-d Z(rho) / Z(rho_t) (the site's own kernel's mass).  With relevance
    weights ``a``: each standardized coordinate times a_q, the penalties' rates times a_q,
    and t^-d over the coordinates with a_q > 0 (the kernel is flat along the others)."""
    a = np.ones(x.shape[1]) if a is None else a
    dims = int(np.count_nonzero(a))
    out = []
    for z, cd in zip(zs, codes, strict=True):
        w = np.empty((len(x), len(z)))
        for b in range(len(x)):
            mass = t**-dims * _penalty_mass(qcodes[b], encoders, 1.0, a)
            mass /= _penalty_mass(qcodes[b], encoders, t, a)
            for i in range(len(z)):
                u = ((x[b] - loc) / scale - (z[i, : x.shape[1]] - loc) / scale) / (bandwidth * t)
                u = u * a
                w[b, i] = np.exp(-0.5 * u @ u) * _penalty(cd[i], qcodes[b], encoders, t, a) * mass
        out.append(w)
    return out


def _knn_weights(zs, codes, x, qcodes, encoders, loc, scale, n_total, r0, t=1.0, k=0.0, a=None):
    """Eqs. 12-13 row by row; widened by t: max(ceil(t c_k), ceil(k)) neighbours,
    penalties relaxed, and the weights times c_k / c Z(rho) / Z(rho_t).  With relevance
    weights ``a``: each standardized coordinate times a_q (in the distance and in u),
    the penalties' rates times a_q."""
    d = x.shape[1]
    a = np.ones(d) if a is None else a
    out = []
    for z, cd in zip(zs, codes, strict=True):
        m = len(z)
        own = max(2, min(int(np.floor(m * r0 / n_total + 0.5)), m))
        c = own if t == 1.0 else min(m, max(int(np.ceil(own * t - 1e-9)), int(np.ceil(k))))
        w = np.zeros((len(x), m))
        hbar = (z[:, :d] - loc) / scale * a
        for b in range(len(x)):
            mass = own / c * _penalty_mass(qcodes[b], encoders, 1.0, a)
            mass /= _penalty_mass(qcodes[b], encoders, t, a)
            xbar = (x[b] - loc) / scale * a
            dist = np.sqrt(((hbar - xbar) ** 2).sum(axis=1))
            nb = np.argsort(dist, kind="stable")[:c]
            r = dist[nb[-1]]
            for i in nb:
                u = (hbar[i] - xbar) / (1.05 * r)
                w[b, i] = np.prod(1 - u**2) * _penalty(cd[i], qcodes[b], encoders, t, a) * mass
        out.append(w)
    return out


def _n_eff(row):
    v = row / row.max()  # n_eff is scale-free
    return v.sum() ** 2 / (v @ v)


def _effective_rows_floor(weights_at, k, widen=True):
    """The site policy's floor, from its definition: where a client's weights for query
    b have n_eff = (sum w)^2 / sum w^2 < k, it uses its kernel widened by the smallest
    t = 2^(j/2), j = 1..20, that reaches n_eff >= k (``weights_at(t)``: every client's
    weights widened by t), and contributes nothing if none does (or if not ``widen``).

    ``weights_at`` may also be the list of unwidened weights (no widening possible).
    Returns the floored weights and (clients, B) masks of abstentions and widenings.
    """
    cache = {}

    def at(t):
        if t not in cache:
            cache[t] = weights_at(t) if callable(weights_at) else None
        return cache[t]

    base = at(1.0) if callable(weights_at) else weights_at
    out, abstained, widened = [], [], []
    for c, w in enumerate(base):
        w = w.copy()
        low, wide = np.zeros(len(w), bool), np.zeros(len(w), bool)
        for b in range(len(w)):
            if not w[b].any() or _n_eff(w[b]) >= k:
                continue
            w[b] = 0.0
            for t in [2 ** (j / 2) for j in range(1, 21)] if widen else []:
                wt = at(t)[c][b]
                if wt.any() and _n_eff(wt) >= k:
                    w[b], wide[b] = wt, True
                    break
            else:
                low[b] = True
        out.append(w)
        abstained.append(low)
        widened.append(wide)
    return out, np.array(abstained), np.array(widened)


def _queries(zs, d, seed):
    rng = np.random.default_rng(seed)
    pool = np.vstack([z[:, :d] for z in zs])
    x = pool[rng.integers(0, len(pool), 12)].copy()
    x[:, 1] += rng.normal(scale=0.3, size=len(x))  # continuous coordinate off the data
    return x


@pytest.mark.parametrize("response", ["y", "o"])
@pytest.mark.parametrize(
    ("scheme", "policy"),
    [
        ("gaussian", "default"),
        ("gaussian", "unrestricted"),
        ("gaussian", "widen10"),
        ("knn", "default"),
        ("knn", "unrestricted"),
        ("knn", "widen10"),
        ("knn", "abstain"),
        ("knn-brute", "widen10"),
        ("knn-blocks", "widen10"),
        ("gaussian-secure", "widen10"),
        ("knn-secure", "widen10"),
    ],
)
def test_federated_equals_pooled(mixed_clients, scheme, policy, response, monkeypatch):
    """Under the site policy's floor (the default k, or k = 10 where it binds more
    often: "widen10"), a client widens its kernel for a query under k effective rows
    (below_floor="widen"); the identity then holds with the widened weights, computed
    here from their definition.  With below_floor="abstain" (k = 10) it holds with those
    clients' weights zeroed wherever some client answers.  Without a policy it holds
    everywhere with the paper's weights."""
    covariates = [c for c in COVARIATES if c != response]
    if response == "o":
        covariates = ["b", "x", "c"]
    d = len(covariates)
    loc = np.zeros(d) + 0.3
    scale = np.linspace(0.8, 1.6, d)
    kernel = {
        "gaussian": GaussianKernel(),
        "knn": KNNKernel(budget=120, search="kdtree"),
        "knn-brute": KNNKernel(budget=120, search="brute"),  # the scan used from d = 11 on
        "knn-blocks": KNNKernel(budget=120),
        "gaussian-secure": GaussianKernel(),  # sums by secure aggregation (fits.federation.secure)
        "knn-secure": KNNKernel(budget=120),
    }[scheme]
    options: dict = {"secure": True} if scheme.endswith("secure") else {}
    if policy == "unrestricted":
        options["site_policy"] = SitePolicy.unrestricted()
    if policy == "abstain":
        options["site_policy"] = SitePolicy(min_effective_rows=10, below_floor="abstain")
    if policy == "widen10":
        options["site_policy"] = SitePolicy(min_effective_rows=10)
    if scheme == "knn-blocks":  # one query per block of neighbour-list work
        monkeypatch.setattr("fits.federation.client._BLOCK_VALUES", 1)
    tables = [t[[*covariates, response]] for t in mixed_clients]
    first = estimate_conditional_cdf(
        tables,
        covariates,
        response,
        np.zeros((1, d)),
        kernel=kernel,
        kinds=KINDS,
        postprocess=False,
        scaling=(loc, scale),
        ridge=0.0,
        seed=3,
        **options,
    )
    zs, codes, encoders = _lifted(first), _codes(first), _encoders(first)
    x_raw = _queries(zs, d, seed=4)
    result = estimate_conditional_cdf(
        tables,
        covariates,
        response,
        x_raw,
        kernel=kernel,
        kinds=KINDS,
        postprocess=False,
        scaling=(loc, scale),
        ridge=0.0,
        seed=3,
        **options,
    )
    x, qcodes = _midpoints(x_raw, encoders)
    n_total = sum(len(z) for z in zs)
    k = {"unrestricted": 0.0, "default": DEFAULT_MIN_EFFECTIVE_ROWS}.get(policy, 10.0)

    def weights_at(t):
        if scheme.startswith("gaussian"):
            bw = n_total ** (-1 / (d + 4))
            return _gaussian_weights(zs, codes, x, qcodes, encoders, loc, scale, bw, t)
        return _knn_weights(zs, codes, x, qcodes, encoders, loc, scale, n_total, 120, t, k)

    weights, abstained, widened = _effective_rows_floor(weights_at, k, policy != "abstain")
    answered = ~abstained.all(axis=0)  # all clients abstaining: the KNN fallback's answer
    assert answered.sum() >= 6
    expected = _pooled_cdf(zs, codes, weights, x[answered], result.grid, encoders, d)
    np.testing.assert_allclose(result.values[answered], expected, rtol=0, atol=1e-10)
    if answered.all():  # no fallback round: the sites' reported floor answers are these
        assert result.coordinator.abstained == abstained.sum()
        assert result.coordinator.widened == widened.sum()
    if policy == "widen10":  # the floor binds here: the identity is checked where it acts
        assert widened.any() and not abstained.any()
    # the collinearity guard (on by default) did not act on these well-conditioned
    # designs, so this is the plain local-linear fit; test_collinear_design_... below
    # covers a design where it acts
    assert result.coordinator.guarded == 0
    # and it is a real CDF estimate, not a trivial agreement on zeros
    assert np.ptp(expected) > 0.5


def test_ridge_changes_little_and_mixed_schemes_still_pool(mixed_clients):
    """Per-client schemes: the pooled fit uses each client's own weights (Prop. 3.1)."""
    covariates, response = ["b", "x"], "y"
    tables = [t[[*covariates, response]] for t in mixed_clients]
    kernels = [GaussianKernel(bandwidth=0.4), KNNKernel(budget=90), KNNKernel(budget=200)]
    loc, scale = np.zeros(2), np.ones(2)
    base = estimate_conditional_cdf(
        tables,
        covariates,
        response,
        np.zeros((1, 2)),
        kernel=kernels,
        kinds=KINDS,
        postprocess=False,
        scaling=(loc, scale),
        ridge=0.0,
        seed=5,
    )
    zs, codes, encoders = _lifted(base), _codes(base), _encoders(base)
    x_raw = _queries(zs, 2, seed=6)
    result = estimate_conditional_cdf(
        tables,
        covariates,
        response,
        x_raw,
        kernel=kernels,
        kinds=KINDS,
        postprocess=False,
        scaling=(loc, scale),
        ridge=0.0,
        seed=5,
    )
    x, qcodes = _midpoints(x_raw, encoders)
    n_total = sum(len(z) for z in zs)
    k = DEFAULT_MIN_EFFECTIVE_ROWS

    def weights_at(t):
        w0 = _gaussian_weights(zs[:1], codes[:1], x, qcodes, encoders, loc, scale, 0.4, t)
        w1 = _knn_weights(zs[1:2], codes[1:2], x, qcodes, encoders, loc, scale, n_total, 90, t, k)
        w2 = _knn_weights(zs[2:], codes[2:], x, qcodes, encoders, loc, scale, n_total, 200, t, k)
        return w0 + w1 + w2

    weights, abstained, _ = _effective_rows_floor(weights_at, k)
    assert not abstained.any()
    expected = _pooled_cdf(zs, codes, weights, x, result.grid, encoders, 2)
    np.testing.assert_allclose(result.values, expected, rtol=0, atol=1e-10)
    ridged = estimate_conditional_cdf(
        tables,
        covariates,
        response,
        x_raw,
        kernel=kernels,
        kinds=KINDS,
        postprocess=False,
        scaling=(loc, scale),
        ridge=1e-8,
        seed=5,
    )
    assert np.max(np.abs(ridged.values - expected)) < 1e-5


def test_local_constant_fallback_is_nadaraya_watson(mixed_clients):
    """The fallback fit (q = e1 / S_00) is sum_i w_i K_i(z) / sum_i w_i, same weights."""
    covariates, response = ["b", "x"], "y"
    tables = [t[[*covariates, response]] for t in mixed_clients]
    loc, scale = np.zeros(2), np.ones(2)
    res = estimate_conditional_cdf(
        tables,
        covariates,
        response,
        np.zeros((1, 2)),
        kernel=GaussianKernel(),
        kinds=KINDS,
        postprocess=False,
        scaling=(loc, scale),
        seed=2,
    )
    zs, codes, encoders = _lifted(res), _codes(res), _encoders(res)
    x_raw = _queries(zs, 2, seed=9)
    coord = res.coordinator
    got = coord._local_constant(response, x_raw, "own")
    x, qcodes = _midpoints(x_raw, encoders)
    n_total = sum(len(z) for z in zs)
    bw = n_total ** (-1 / 6)
    w = np.hstack(
        _effective_rows_floor(
            lambda t: _gaussian_weights(zs, codes, x, qcodes, encoders, loc, scale, bw, t),
            DEFAULT_MIN_EFFECTIVE_ROWS,
        )[0]
    )
    y = np.concatenate([z[:, 2] for z in zs])
    wz = np.concatenate(
        [_response_bandwidths(z, c, encoders, 2) for z, c in zip(zs, codes, strict=True)]
    )
    k = ndtr((res.grid[None, :] - y[:, None]) / wz[:, None])
    expected = (w @ k) / w.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)


def _guarded_pooled_cdf(zs, weights, x, grid, encoders, d, threshold):
    """The pooled fit with the collinearity guard, from the rows (docs/method.md).

    Per query: the local principal directions from an SVD of the weighted, centred,
    standardized rows; directions whose squared singular value is at most ``threshold``
    times the largest are dropped and the fit uses the design (1, basis'(h_i - x)).
    """
    h = np.vstack([z[:, :d] for z in zs])
    y = np.concatenate([z[:, d] for z in zs])
    codes = [np.zeros((len(z), d + 1), dtype=int) for z in zs]
    wz = np.concatenate(
        [_response_bandwidths(z, c, encoders, d) for z, c in zip(zs, codes, strict=True)]
    )
    k = ndtr((grid[None, :] - y[:, None]) / wz[:, None])
    out = np.empty((len(x), grid.size))
    dropped = 0
    for b in range(len(x)):
        w = np.concatenate([wk[b] for wk in weights])
        mean = w @ h / w.sum()
        sd = np.sqrt(w @ (h - mean) ** 2)
        _, sv, vt = np.linalg.svd(np.sqrt(w)[:, None] * (h - mean) / sd, full_matrices=False)
        keep = sv**2 > threshold * sv[0] ** 2
        dropped += int(not keep.all())
        u = np.column_stack([np.ones(len(h)), (h - x[b]) @ (vt[keep] / sd).T])
        sw = np.sqrt(w)[:, None]
        out[b] = np.linalg.lstsq(sw * u, sw * k, rcond=None)[0][0]
    return out, dropped


@pytest.mark.parametrize("scheme", ["gaussian", "knn", "knn-secure"])
def test_collinear_design_pools_with_the_guard(scheme):
    """Celsius, Fahrenheit rounded to 2 decimals, y: the guard acts on every query, and
    the federated estimate is the pooled fit of the reduced design (to 1e-10)."""
    rng = np.random.default_rng(8)
    c = rng.normal(20.0, 5.0, 600)
    table = pd.DataFrame(
        {"C": c, "F": np.round(c * 9 / 5 + 32, 2), "y": 0.5 * c + rng.normal(size=c.size)}
    )
    tables = [table.iloc[:300], table.iloc[300:500], table.iloc[500:]]
    loc, scale = np.array([20.0, 68.0]), np.array([5.0, 9.0])
    kernel = GaussianKernel() if scheme == "gaussian" else KNNKernel(budget=150)
    options = {"secure": True} if scheme.endswith("secure") else {}
    x = np.column_stack([rng.normal(20.0, 5.0, 10), np.zeros(10)])
    x[:, 1] = x[:, 0] * 9 / 5 + 32 + rng.normal(scale=0.5, size=10)  # off the line
    result = estimate_conditional_cdf(
        tables, ["C", "F"], "y", x, kernel=kernel, postprocess=False,
        scaling=(loc, scale), ridge=0.0, seed=3, **options,
    )  # fmt: skip
    zs, encoders = _lifted(result), _encoders(result)
    codes = [np.zeros((len(z), 3), dtype=int) for z in zs]
    qcodes = np.zeros((len(x), 2), dtype=int)
    n_total = sum(len(z) for z in zs)
    k = DEFAULT_MIN_EFFECTIVE_ROWS

    def weights_at(t):
        if scheme == "gaussian":
            bw = n_total ** (-1 / 6)
            return _gaussian_weights(zs, codes, x, qcodes, encoders, loc, scale, bw, t)
        return _knn_weights(zs, codes, x, qcodes, encoders, loc, scale, n_total, 150, t, k)

    # the default site policy: a client under k effective rows widens its kernel
    weights, abstained, _ = _effective_rows_floor(weights_at, k)
    assert not abstained.any()
    threshold = result.coordinator.collinearity
    expected, dropped = _guarded_pooled_cdf(zs, weights, x, result.grid, encoders, 2, threshold)
    assert dropped == len(x) == result.coordinator.guarded
    np.testing.assert_allclose(result.values, expected, rtol=0, atol=1e-10)
    assert np.ptp(expected) > 0.5


@pytest.mark.parametrize(
    ("covariates", "response", "kind", "design"),
    [
        (["b", "x", "o", "c"], "y", "continuous", [1]),  # one continuous covariate of four
        (["b", "x", "o", "y"], "c", "continuous", [1, 3]),  # two; a nominal response
        (["b", "o", "c"], "y", "continuous", []),  # none: the local-constant fit, U_i = 1
        (["b", "x", "o", "c"], "y", "ordered", [1, 2]),  # continuous and ordinal
        (["b", "o", "c"], "y", "ordered", [1]),  # the ordinal one only
        (["b", "x", "o", "c"], "y", "constant", []),  # none: Nadaraya-Watson, U_i = 1
    ],
)
@pytest.mark.parametrize(
    ("scheme", "options"),
    [
        ("gaussian", {}),
        ("knn", {}),
        ("knn-blocks", {}),
        ("knn", {"rounds": 1}),  # one block message: the coordinator solves
        ("gaussian", {"rounds": 1}),
        ("knn", {"secure": True}),
        ("gaussian", {"secure": True}),
    ],
)
def test_continuous_design_equals_pooled(
    mixed_clients, covariates, response, kind, design, scheme, options, monkeypatch
):
    """design="continuous" ("ordered"): the federated estimate equals the pooled weighted
    least-squares fit in the design U_i = (1, h_i[c] - x[c]), c the continuous (and
    ordinal) covariates (local-linear there, local-constant in the others; Li and
    Racine), with the same kernel weights over every covariate -- the independent oracle
    of Prop. 3.1 with the reduced design.  Under the default site policy (widening)."""
    d = len(covariates)
    loc = np.zeros(d) + 0.3
    scale = np.linspace(0.8, 1.6, d)
    kernel = GaussianKernel() if scheme == "gaussian" else KNNKernel(budget=120)
    if scheme == "knn-blocks":  # one query per block of neighbour-list work
        monkeypatch.setattr("fits.federation.client._BLOCK_VALUES", 1)
    tables = [t[[*covariates, response]] for t in mixed_clients]
    common = dict(
        kernel=kernel, kinds=KINDS, postprocess=False, scaling=(loc, scale), ridge=0.0,
        seed=3, design=kind, **options,
    )  # fmt: skip
    first = estimate_conditional_cdf(tables, covariates, response, np.zeros((1, d)), **common)
    assert list(first.coordinator.design_covariates(response)) == design
    zs, codes, encoders = _lifted(first), _codes(first), _encoders(first)
    rng = np.random.default_rng(4)
    pool = np.vstack([z[:, :d] for z in zs])
    x_raw = pool[rng.integers(0, len(pool), 12)].copy()
    for j in design:  # continuous coordinates off the data
        if covariates[j] in ("x", "y"):
            x_raw[:, j] += rng.normal(scale=0.3, size=len(x_raw))
    result = estimate_conditional_cdf(tables, covariates, response, x_raw, **common)
    x, qcodes = _midpoints(x_raw, encoders)
    n_total = sum(len(z) for z in zs)
    k = DEFAULT_MIN_EFFECTIVE_ROWS

    def weights_at(t):
        if scheme == "gaussian":
            bw = n_total ** (-1 / (d + 4))
            return _gaussian_weights(zs, codes, x, qcodes, encoders, loc, scale, bw, t)
        return _knn_weights(zs, codes, x, qcodes, encoders, loc, scale, n_total, 120, t, k)

    weights, abstained, _ = _effective_rows_floor(weights_at, k)
    assert not abstained.any()
    expected = _pooled_cdf(zs, codes, weights, x, result.grid, encoders, d, design)
    np.testing.assert_allclose(result.values, expected, rtol=0, atol=1e-10)
    # not the full design's fit: the discrete covariates' slopes are really gone
    full = _pooled_cdf(zs, codes, weights, x, result.grid, encoders, d)
    assert np.max(np.abs(full - expected)) > 1e-3
    assert np.ptp(expected) > 0.5


def test_continuous_design_sends_fewer_values(mixed_clients):
    """The Hessian reply of the continuous design holds p(p+1)/2 values per query with
    p = 1 + the continuous covariates (here 3 values, against 15 for all four)."""
    covariates, response = ["b", "x", "o", "c"], "y"
    tables = [t[[*covariates, response]] for t in mixed_clients]
    sizes = {}
    for design in ("all", "continuous"):
        res = estimate_conditional_cdf(
            tables, covariates, response, np.zeros((5, 4)), kinds=KINDS, seed=1,
            design=design, precision="float64",
        )  # fmt: skip
        seen: list = []

        def watch(k, req, rep, seen=seen):
            if req.type == "hessian":
                seen.append(rep.arrays["S"].shape)

        res.coordinator.transport.observers.append(watch)
        res.coordinator.conditional_cdf(response, np.full((5, 4), 0.5))
        sizes[design] = seen[0]
    assert sizes == {"all": (1, 15), "continuous": (1, 3)}  # five equal queries, asked once


@pytest.mark.parametrize("scheme", ["knn", "gaussian"])
def test_relevance_weights_equal_pooled(mixed_clients, scheme):
    """``Kernel(relevance={y: {covariate: a}})``: the federated estimate equals the
    pooled local-linear fit with every standardized coordinate times its a_q and every
    penalty rate times a_q (a = 0 leaves the nominal ``b`` out of the weights), under a
    binding effective-rows floor (k = 10: widened weights, whose Gaussian mass counts
    only the coordinates of weight > 0); computed from the definitions above.  The
    weights change the estimate (it is not the plain kernel's), and weights of 1 give
    the plain kernel's bit for bit."""
    covariates, response = ["b", "x", "o", "c"], "y"
    d = len(covariates)
    loc, scale = np.zeros(d) + 0.3, np.linspace(0.8, 1.6, d)
    given = {"b": 0.0, "x": 2.0, "o": 0.5}  # c: 1 (not named)
    a = np.array([given.get(c, 1.0) for c in covariates])
    make = (lambda **kw: KNNKernel(budget=120, **kw)) if scheme == "knn" else GaussianKernel
    tables = [t[[*covariates, response]] for t in mixed_clients]
    policy = SitePolicy(min_effective_rows=10)

    def estimate(kernel, queries):
        return estimate_conditional_cdf(
            tables, covariates, response, queries, kernel=kernel, kinds=KINDS,
            postprocess=False, scaling=(loc, scale), ridge=0.0, seed=3, site_policy=policy,
        )  # fmt: skip

    first = estimate(make(), np.zeros((1, d)))
    zs, codes, encoders = _lifted(first), _codes(first), _encoders(first)
    x_raw = _queries(zs, d, seed=4)
    result = estimate(make(relevance={response: given}), x_raw)
    x, qcodes = _midpoints(x_raw, encoders)
    n_total = sum(len(z) for z in zs)

    def weights_at(t):
        if scheme == "gaussian":
            bw = n_total ** (-1 / (d + 4))
            return _gaussian_weights(zs, codes, x, qcodes, encoders, loc, scale, bw, t, a)
        return _knn_weights(zs, codes, x, qcodes, encoders, loc, scale, n_total, 120, t, 10.0, a)

    weights, abstained, widened = _effective_rows_floor(weights_at, 10.0)
    assert widened.any() and not abstained.any()  # the floor binds
    expected = _pooled_cdf(zs, codes, weights, x, result.grid, encoders, d)
    np.testing.assert_allclose(result.values, expected, rtol=0, atol=1e-10)
    plain = estimate(make(), x_raw).values
    assert np.abs(plain - result.values).max() > 0.05
    ones = estimate(make(relevance={response: dict.fromkeys(covariates, 1.0)}), x_raw)
    np.testing.assert_array_equal(ones.values, plain)
