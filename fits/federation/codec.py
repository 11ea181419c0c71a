"""How a site's summed uploads are written on the wire: exact, float32 or 16-bit fixed point.

The coordinator asks for a precision in each hessian, cdf or block request (config
``precision``); the site encodes its reply with :func:`encode_hessian`,
:func:`encode_cdf` and :func:`encode_block`, and the coordinator decodes every site's
reply before it sums them.  Secure aggregation (:mod:`fits.federation.secure`) always
sends its own exact fixed point (precision ``"float64"``): the masks need every site on
one common integer scale, which the per-query scales below are not.

Precisions and their error bounds (each site's decoded upload against its float64
values; the bounds are what ``tests/test_codec.py`` checks):

``"float64"``
    Exact (8 bytes a value).
``"float32"``
    Each value rounded to float32 after scaling its query's row by a power of two
    (``e_b``, int16, so that tiny kernel weights do not underflow); relative error at
    most 2^-24 per value, plus 2^-149 of the row's largest magnitude (4 bytes a value,
    2 per query).
``"fixed16"``
    *Hessian* S (p x p, symmetric positive semi-definite): its diagonal as float32 after
    the row's power-of-two scaling (relative error 2^-24), its off-diagonal entries as
    correlations ``r_ij = S_ij / sqrt(S_ii S_jj)``, which lie in [-1, 1], rounded to
    multiples of 1/32767 (int16).  So

        |S^_ij - S_ij| <= HESSIAN_BOUND * sqrt(S_ii S_jj),   HESSIAN_BOUND = 1.6e-5,

    and, summed over sites, the same bound holds for the pooled S against its
    square-root diagonal, since sum_k sqrt(a_k b_k) <= sqrt(sum a_k sum b_k)
    (Cauchy-Schwarz).  p(p-1) + 4p + 2 bytes a query instead of 4 p (p + 1).  (A
    diagonal entry below 2^-149 of the row's largest one is flushed to 0, and its row
    and column with it.)

    *CDF vector* F (L values per query): the row's largest magnitude s_b as float32 and
    F / s_b rounded to multiples of 1/32767 (int16): ``|F^_l - F_l| <= s_b / 65534 (1 +
    2^-23)``.  Since F_l = sum_i alpha_i Phi_il with Phi in [0, 1], s_b <= sum_i
    |alpha_i|, so the summed CDF's error is at most CDF_BOUND * sum over every site's
    rows of |alpha_i| (about 1.5e-5 for the local-linear weights, whose sum is 1).

    *Response block* T (p x L per query, the one-round mode): T_0l = sum_i w_i Phi_il
    and T_jl = sum_i w_i (h_ij - x_j) Phi_il, so by Cauchy-Schwarz |T_jl| <= sqrt(S_00
    S_jj); T_jl / sqrt(S^_00 S^_jj) (with the decoded diagonal, which both sides know)
    is rounded to multiples of 1/32767: ``|T^_jl - T_jl| <= HESSIAN_BOUND sqrt(S_00
    S_jj)``.

The choice of 32767 levels, not 32768, keeps +1 and -1 both representable.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "CDF_BOUND",
    "HESSIAN_BOUND",
    "PRECISIONS",
    "decode_block",
    "decode_cdf",
    "decode_hessian",
    "encode_block",
    "encode_cdf",
    "encode_hessian",
    "reply_arrays",
]

#: The upload precisions a coordinator may ask for.
PRECISIONS = ("float64", "float32", "fixed16")
#: Levels of the 16-bit fixed point on each side of 0.
_LEVELS = 32767
#: Bound on |S^_ij - S_ij| / sqrt(S_ii S_jj) under "fixed16" (1/65534 + 2^-23 rounded up).
HESSIAN_BOUND = 1.6e-5
#: Bound on |F^_l - F_l| / max_l |F_l| under "fixed16" (1/65534 (1 + 2^-23) rounded up).
CDF_BOUND = 1.53e-5


def _check(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")


def _row_exponent(values: np.ndarray) -> np.ndarray:
    """Per row b, e_b with max_l |v_bl| in [2^(e_b - 1), 2^e_b) (0 for an all-zero row)."""
    top = np.max(np.abs(values), axis=1) if values.shape[1] else np.zeros(values.shape[0])
    if not np.all(np.isfinite(top)):
        raise ValueError("an upload holds a value that is not finite")
    return np.frexp(top)[1].astype(np.int16)


def _scaled32(values: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    return np.ldexp(values, -exponent.astype(np.int32)[:, None]).astype(np.float32)


def _unscaled(values32: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    return np.ldexp(values32.astype(np.float64), exponent.astype(np.int32)[:, None])


def _fix(ratio: np.ndarray) -> np.ndarray:
    """Values in [-1, 1] as int16 multiples of 1/32767 (rounded to nearest)."""
    return np.rint(np.clip(ratio, -1.0, 1.0) * _LEVELS).astype(np.int16)


def _split(p: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the diagonal and of the off-diagonal entries in the packed triangle."""
    iu = np.triu_indices(p)
    diag = np.flatnonzero(iu[0] == iu[1])
    off = np.flatnonzero(iu[0] != iu[1])
    return diag, off


def _diag_and_corr(packed: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exponent, the float32 (scaled) diagonal and the int16 correlations of S."""
    diag_at, off_at = _split(p)
    iu = np.triu_indices(p)
    diag = packed[:, diag_at]
    e = _row_exponent(diag)
    d32 = _scaled32(diag, e)
    dhat = _unscaled(d32, e)  # what the coordinator will decode
    return e, d32, _corr(packed[:, off_at], dhat, iu[0][off_at], iu[1][off_at])


def _corr(values: np.ndarray, dhat: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    denom = np.sqrt(np.maximum(dhat[:, i] * dhat[:, j], 0.0))  # a diagonal is >= 0
    ratio = np.divide(values, denom, out=np.zeros_like(values), where=denom > 0)
    return _fix(ratio)


def encode_hessian(packed: np.ndarray, p: int, precision: str) -> dict[str, np.ndarray]:
    """A site's packed Hessians (B, p(p+1)/2), upper triangle row by row, for the wire."""
    _check(precision)
    packed = np.asarray(packed, dtype=np.float64)
    if precision == "float64":
        return {"S": packed}
    if precision == "float32":
        e = _row_exponent(packed)
        return {"S_exp": e, "S": _scaled32(packed, e)}
    e, d32, corr = _diag_and_corr(packed, p)
    return {"S_exp": e, "S_diag": d32, "S_corr": corr}


def _decoded_diag(arrays: dict[str, np.ndarray]) -> np.ndarray:
    return _unscaled(arrays["S_diag"], arrays["S_exp"])


def decode_hessian(arrays: dict[str, np.ndarray], p: int, precision: str) -> np.ndarray:
    """The packed Hessians (B, p(p+1)/2) from :func:`encode_hessian`'s arrays."""
    _check(precision)
    if precision == "float64":
        return np.asarray(arrays["S"], dtype=np.float64)
    if precision == "float32":
        return _unscaled(arrays["S"], arrays["S_exp"])
    diag_at, off_at = _split(p)
    iu = np.triu_indices(p)
    dhat = _decoded_diag(arrays)
    out = np.empty((dhat.shape[0], p * (p + 1) // 2))
    out[:, diag_at] = dhat
    i, j = iu[0][off_at], iu[1][off_at]
    out[:, off_at] = (
        arrays["S_corr"].astype(np.float64)
        / _LEVELS
        * np.sqrt(np.maximum(dhat[:, i] * dhat[:, j], 0.0))
    )
    return out


def encode_cdf(f: np.ndarray, precision: str) -> dict[str, np.ndarray]:
    """A site's CDF vectors (B, L) for the wire."""
    _check(precision)
    f = np.asarray(f, dtype=np.float64)
    if precision == "float64":
        return {"F": f}
    if precision == "float32":
        e = _row_exponent(f)
        return {"F_exp": e, "F": _scaled32(f, e)}
    top = np.max(np.abs(f), axis=1) if f.shape[1] else np.zeros(f.shape[0])
    if not np.all(np.isfinite(top)):
        raise ValueError("an upload holds a value that is not finite")
    scale = top.astype(np.float32)
    s64 = scale.astype(np.float64)
    ratio = np.divide(f, s64[:, None], out=np.zeros_like(f), where=s64[:, None] > 0)
    return {"F_scale": scale, "F_fixed": _fix(ratio)}


def decode_cdf(arrays: dict[str, np.ndarray], precision: str) -> np.ndarray:
    """The CDF vectors (B, L) from :func:`encode_cdf`'s arrays."""
    _check(precision)
    if precision == "float64":
        return np.asarray(arrays["F"], dtype=np.float64)
    if precision == "float32":
        return _unscaled(arrays["F"], arrays["F_exp"])
    scale = arrays["F_scale"].astype(np.float64)
    return arrays["F_fixed"].astype(np.float64) * (scale / _LEVELS)[:, None]


def encode_block(
    packed: np.ndarray, block: np.ndarray, p: int, precision: str
) -> dict[str, np.ndarray]:
    """A site's Hessians and response blocks T (B, p, L) for the wire (one-round mode).

    Under ``"fixed16"`` row j of T is scaled by sqrt(S^_00 S^_jj) of the decoded
    diagonal, so the Hessian is encoded first.
    """
    arrays = encode_hessian(packed, p, precision)
    block = np.asarray(block, dtype=np.float64)
    if precision == "float64":
        arrays["T"] = block
    elif precision == "float32":
        b = block.shape[0]
        flat = block.reshape(b, -1)
        e = _row_exponent(flat)
        arrays["T_exp"] = e
        arrays["T"] = _scaled32(flat, e).reshape(block.shape)
    else:
        dhat = _decoded_diag(arrays)
        denom = np.sqrt(dhat[:, :1] * dhat)[:, :, None]  # sqrt(S_00 S_jj)
        ratio = np.divide(block, denom, out=np.zeros_like(block), where=denom > 0)
        arrays["T_fixed"] = _fix(ratio)
    return arrays


def decode_block(
    arrays: dict[str, np.ndarray], p: int, precision: str
) -> tuple[np.ndarray, np.ndarray]:
    """The packed Hessians and the response blocks from :func:`encode_block`'s arrays."""
    packed = decode_hessian(arrays, p, precision)
    if precision == "float64":
        return packed, np.asarray(arrays["T"], dtype=np.float64)
    if precision == "float32":
        t = arrays["T"]
        b = t.shape[0]
        return packed, _unscaled(t.reshape(b, -1), arrays["T_exp"]).reshape(t.shape)
    dhat = _decoded_diag(arrays)
    denom = np.sqrt(dhat[:, :1] * dhat)[:, :, None]
    return packed, arrays["T_fixed"].astype(np.float64) / _LEVELS * denom


def reply_arrays(
    kind: str, precision: str, b: int, p: int, grid_size: int
) -> dict[str, tuple[tuple[int, ...], str]]:
    """The arrays (shape, dtype) a hessian, cdf or block reply carries at a precision."""
    _check(precision)
    packed = p * (p + 1) // 2
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    if kind in ("hessian", "block"):
        if precision == "float64":
            out["S"] = ((b, packed), "float64")
        elif precision == "float32":
            out.update({"S_exp": ((b,), "int16"), "S": ((b, packed), "float32")})
        else:
            out.update(
                {
                    "S_exp": ((b,), "int16"),
                    "S_diag": ((b, p), "float32"),
                    "S_corr": ((b, packed - p), "int16"),
                }
            )
    if kind == "cdf":
        if precision == "float64":
            out["F"] = ((b, grid_size), "float64")
        elif precision == "float32":
            out.update({"F_exp": ((b,), "int16"), "F": ((b, grid_size), "float32")})
        else:
            out.update({"F_scale": ((b,), "float32"), "F_fixed": ((b, grid_size), "int16")})
    if kind == "block":
        if precision == "float64":
            out["T"] = ((b, p, grid_size), "float64")
        elif precision == "float32":
            out.update({"T_exp": ((b,), "int16"), "T": ((b, p, grid_size), "float32")})
        else:
            out["T_fixed"] = ((b, p, grid_size), "int16")
    return out


def encode_histograms(hist: np.ndarray, precision: str) -> dict[str, np.ndarray]:
    """A site's boost histograms (V, W, S) for the wire: float64 as they are (``H``);
    otherwise each node's W values of one statistic as one row of :func:`encode_cdf`
    (float32: ``H_exp``, ``H``; fixed16: ``H_scale`` (V * S,) float32 and ``H_fixed``
    (V * S, W) int16, each entry within 1/65534 of its row's largest magnitude)."""
    _check(precision)
    hist = np.asarray(hist, dtype=np.float64)
    if precision == "float64":
        return {"H": hist}
    v, w, s = hist.shape
    rows = hist.transpose(0, 2, 1).reshape(v * s, w)
    return {"H" + name[1:]: a for name, a in encode_cdf(rows, precision).items()}


def decode_histograms(
    arrays: dict[str, np.ndarray], precision: str, shape: tuple[int, int, int]
) -> np.ndarray:
    """The histograms (V, W, S) from :func:`encode_histograms`'s arrays."""
    _check(precision)
    if precision == "float64":
        return np.asarray(arrays["H"], dtype=np.float64)
    v, w, s = shape
    parts = {"F" + name[1:]: a for name, a in arrays.items() if name.startswith("H")}
    rows = decode_cdf(parts, precision)
    return rows.reshape(v, s, w).transpose(0, 2, 1)


def histogram_arrays(
    precision: str, nodes: int, width: int, stats: int
) -> dict[str, tuple[tuple[int, ...], str]]:
    """The arrays (shape, dtype) a boost reply carries at a precision."""
    _check(precision)
    if precision == "float64":
        return {"H": ((nodes, width, stats), "float64")}
    rows = nodes * stats
    if precision == "float32":
        return {"H_exp": ((rows,), "int16"), "H": ((rows, width), "float32")}
    return {"H_scale": ((rows,), "float32"), "H_fixed": ((rows, width), "int16")}
