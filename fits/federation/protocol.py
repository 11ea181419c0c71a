"""The messages the coordinator and the clients exchange -- the only thing they share.

Every message is a :class:`Message`: a type, named numpy arrays, and a few scalar or
text config values (the shape of Flower's ``RecordDict`` of array and config records).
The coordinator sends requests; a client answers each with a reply of the same type.

===========  ==========================================  ===================================
type         request (coordinator -> client)             reply (client -> coordinator)
===========  ==========================================  ===================================
setup        config ``declared`` (JSON kinds)            ``n_rows`` (1,); config
                                                         ``description`` (JSON: dtypes,
                                                         category sets, min / max) and
                                                         ``name`` (the site's name)
configure    config ``schema``, ``n_total``, ``seed``,   ``n_rows`` (1,); config ``policy``
             ``rows`` (declared synthetic rows),         (JSON: the bandwidths, M, rows
             ``unmodelled`` (JSON: "id", "constant"),    and query budget the site
             bandwidths; arrays ``grid:<column>``,       applies, and what it adjusted)
             optional ``scale_mean`` / ``scale_sd``;
             optional ``residuals`` (JSON: the
             near-linear rules, column, of, slope,
             intercept: each column modelled as its
             residual)
marginal     config ``column``, ``grid_size``            ``F`` (L,): sum over local rows of
                                                         the smoothed indicator (eq. 16)
hessian      config ``column``, ``request``, ``scheme``,  ``S`` (B, p(p+1)/2): upper triangle
             optional ``design``; arrays ``queries``     of S_k(x) per query (eq. 5), p the
             (B, d)                                      design's size (d + 1 by default)
cdf          config ``column``, ``request``, ``scheme``,  ``F`` (B, L): local CDF vector per
             ``grid_size``; arrays ``queries`` (B, d),   query (eq. 9)
             ``q`` (B, p)
block        as hessian, with ``grid_size``              ``S`` as hessian and ``T`` (B, p, L):
                                                         the response block sum_i w_i U_i
                                                         Phi((z_l - y_i) / w_i) (one round
                                                         per column instead of two)
neff         as hessian, with config ``ladder_start``,   ``N`` (B, S, 2): per query and
             ``ladder_steps`` (S); optional arrays       factor, the sums of the site's
             ``pending`` (B,) 0/1, ``weight_exponent``   kernel weights and of their
             (B, S)                                      squares (pooled floor only)
boost        config ``column``, ``request``,             ``H`` (2^level, W, 2K + 1): per node
             ``depth``, ``level``, ``outputs`` (K);      of the level and bin, the sums of
             arrays ``edges`` (all e_j edges),           the boosting gradients g_k and
             ``edge_counts`` (d,) (e_j: covariate        Hessians h_k (k = 1..K) and the
             j's interior bin edges), ``init``           row count over the site's rows
             (K,), ``feature`` (T + 1, 2^depth - 1),     (:mod:`fits.core.boosting`),
             ``left`` (T + 1, 2^depth - 1, bytes):       W = sum of (e_j + 1)
             bit-packed bin masks, ``value``
             (T, 2^depth, K): the T trees so far        With config ``validation``, at
             and the levels grown of the next;          level 0 also ``loss`` (2,): the
             early stopping: config ``validation``      sum of the model's log loss over
             (the share held out) and                   the held-out rows and their count
             ``validation_seed``                        (zeros under the site's floor)
rules        config ``stage`` (``check`` / ``map`` /     ``holds`` (n,) uint8 0/1 (check):
             ``moments`` / ``totals`` /                  does candidate i hold in every
             ``residuals`` / ``ranges``),                row here; or ``pairs`` (size,)
             ``schema``
             (JSON, the merged schema),
             ``candidates`` (JSON, n candidate rules;    uint8 0/1 (map): which (a, b)
             totals: n columns), ``size`` (map,          value pairs occur here; or
             moments, totals, ranges)                    ``moments`` (size,) float64
                                                         (moments): summed moments of
                                                         the affine candidates; or
                                                         ``totals`` (size,) float64
                                                         (totals): per numeric column,
                                                         the sum of its scaled values;
                                                         or ``residuals`` (3 n,) float64
                                                         (residuals, ``linear``
                                                         candidates): per candidate the
                                                         min and max here of its
                                                         residual (NaN: no row) and, two
                                                         datetime columns, the coarsest
                                                         unit (a week, day, hour, minute,
                                                         second; 0: none) its durations
                                                         are whole multiples of (NaN:
                                                         numbers), in the clear; or
                                                         ``ranges`` (size,) float64
                                                         (ranges, ``interval``
                                                         candidates): per candidate and
                                                         value of its column (missing:
                                                         one of them), the row count
                                                         here and the min and max of
                                                         its source (a datetime's in
                                                         seconds since 1970 UTC; NaN:
                                                         no row), in the clear
===========  ==========================================  ===================================

``rules`` comes between setup and configure, when rule detection is on
(:mod:`fits.core.rules`; what it reveals: docs/privacy.md).  Its check and map answers
are bits and are checked to be 0 or 1; they are not masked by secure aggregation.  Its
moments and totals answers are summed over the sites: with secure aggregation the
request carries ``secure``, ``secure_neighbours`` and the relayed ``secure_keys`` (as
configure does, which comes later), and ``moments`` (``totals``) is sent masked,
(LIMBS, size) uint64.

A hessian, cdf or block request may carry config ``design``: the positions (0-based,
comma-separated, increasing; ``""`` for none) of the covariates kept in the local-linear
design U_i = (1, h_i[design] - x[design]); absent, all d of them (the paper's design,
eq. 5).  Every covariate stays in the kernel weights either way; p is then
``1 + len(design)`` (:func:`design_covariates`, :func:`design_size`).

Under a pooled effective-rows floor (``SitePolicy.floor_scope="pooled"``, secure
aggregation only; :mod:`fits.federation.policy`) a hessian, cdf or block request carries
arrays ``widen`` (B,): the common widening factor of each query (0: no answer, 1: the
site's own kernel, else a power of sqrt(2) up to 1024), chosen from the pooled n_eff
that ``neff`` rounds reveal, and a marginal request carries config ``present``: how
many of the federation's rows hold the column (from the setup round); a neff request
asks for factors
``WIDENING_LADDER[ladder_start : ladder_start + ladder_steps]``
(:data:`WIDENING_LADDER`).

A hessian, cdf or block request may carry config ``precision`` (``"float32"`` or
``"fixed16"``; absent: float64): the reply then holds the arrays of
:func:`fits.federation.codec.reply_arrays` (for example ``S_exp``, ``S_diag``,
``S_corr`` for a fixed16 Hessian) instead of ``S`` / ``F`` / ``T``; each precision's
error bound is stated in :mod:`fits.federation.codec`.

:meth:`Message.to_bytes` is the wire format of a transport without its own, and
:meth:`Message.nbytes` its exact length, which the transports count.

A marginal, hessian, cdf, block, tune or boost reply may add config ``abstained`` (int): the
number of queries (tune: columns; boost: nodes) the site answered with zeros under its
policy's effective-rows floor (:mod:`fits.federation.policy`); a hessian or cdf reply may
add ``widened`` (int): the number of queries it answered with its kernel widened to meet
that floor.

:func:`check_reply` enforces the right-hand column: a reply with any other array, or an
array of any other shape, is refused.  No reply can carry a client's rows.

With secure aggregation (:mod:`fits.federation.secure`) the requests carry config ``secure``; the
setup reply adds ``public_key`` (32,) uint8 (X25519), the configure request adds
``secure_keys`` (K, 32) uint8 (and config ``secure_neighbours``), and ``F`` / ``S``
are sent masked: uint64 with a first axis of :data:`fits.federation.secure.LIMBS` fixed-point
limbs (always at float64 precision).  A hessian / cdf / block request may then carry
``weight_exponent`` (B,) integers: the client multiplies its weights for query b by
2^weight_exponent[b] (the estimate does not change; it keeps tiny weights above the
fixed point's resolution).

Federated analysis (:mod:`fits.analysis`) sites answer ``setup`` as above and these
message types (:data:`ANALYSIS_REPLIES` gives each reply's arrays and shapes as a function of
the request, so the checks stay exact: no reply can carry more than a few numbers per
parameter):

==============  ======================================  ====================================
type            request (coordinator -> site)           reply (site -> coordinator)
==============  ======================================  ====================================
moments         config ``design`` (JSON),               ``n`` (1,), ``mean`` (2, q): the
                ``n_numeric`` (q)                       site's mean of each numeric
                                                        feature, rounded to float64 and
                                                        the rounding's remainder; ``sd``
                                                        (q,): its population sd about
                                                        that mean; ``dropped`` (1,): rows
                                                        left out for a missing value (the
                                                        design's ``missing`` "drop")
glm_configure   arrays ``means``, ``sds``; config       ``n_rows`` (1,); with ``null_space``
                ``family``, ``method``, ``settings``    = p > 0 also ``null`` (p, p): the
                (JSON), ``tau1``, ``mu`` (0: none),     projector onto the null space of the
                ``null_space`` (p, or 0),               site's design (zeros when it has
                ``near_space`` (p, or 0; private        full column rank or fewer than p
                fits only), ``separation_check``        rows); with ``near_space`` = p > 0
                (0/1), ``weight_sum`` (0/1: a design    also ``near`` (p, p): the projector
                with prior weights, no privacy),        onto its nearly collinear
                ``max_weight`` (a private fit's         directions; with ``weight_sum``
                declared largest weight, or 0)          also ``weight_sum`` (1,): the sum
                                                        of the site's prior weights
glm_clip        ``theta`` (p,); config ``quantile``     ``b`` (1,): that quantile of the
                                                        site's per-row gradient norms
glm_gradient    ``theta`` (p,); config ``stage``,       ``g`` (p,): noisy mean clipped
                ``clip``                                gradient
glm_local       ``theta`` (p,); config ``stage``,       ``theta`` (p,): after the site's
                ``clip``                                noisy local steps
glm_newton      ``theta`` (p,); config ``clip``         ``theta`` (p,): the noisy local
                                                        Newton step
glm_check       ``theta`` (p,)                          ``lo``, ``hi`` (2, p + 1): per class
                                                        (y = 0; y = 1, Poisson y > 0) the
                                                        least and greatest value of each
                                                        design column and of x'theta
glm_fisher      ``theta`` (p,); config ``dispersion``   ``info`` (p(p+1)/2,): upper triangle
                (0/1), ``robust`` (0/1); only in a      of the site's X'W(theta)X; ``score``
                fit without privacy, once               (p,): X'(mu - y); ``loss`` (2,):
                                                        summed negative log-likelihood at
                                                        theta and at 0; with
                                                        dispersion ``rss`` (1,): residual
                                                        sum of squares; with robust
                                                        ``meat`` (p(p+1)/2,): upper triangle
                                                        of sum of score outer products
glm_sums        ``theta`` (p,); config ``clip`` (inf);  ``loss`` (1,): summed negative
                only method ``newton`` (no privacy),    log-likelihood; ``score`` (p,):
                once per iteration or halving           X'(mu - y); ``info``
                                                        (p(p+1)/2,): upper triangle of
                                                        X'W(theta)X, all at theta
lsa_setup       config ``seed``, ``n_bootstrap`` (M),   ``n_rows`` (1,), ``gram``
                ``sampling``, ``total_steps``,          (d(d+1)/2,): upper triangle of the
                ``n_features`` (d); arrays ``means``,   site's X'X
                ``sds`` (tables only)
lsa_precondition
                ``precondition`` (d, d): P              ``s_sum``, ``s2_sum`` (1,): sums of
                                                        s = x'Px and of s^2
lsa_round       ``theta`` (M+1, d); config ``round``,   ``theta`` (M+1, d): the M+1
                ``eta``, ``local_steps``                sequences after H_t local steps
==============  ======================================  ====================================
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from fits.federation.codec import histogram_arrays, reply_arrays
from fits.federation.secure import KEY_BYTES, LIMBS

__all__ = [
    "ANALYSIS_REPLIES",
    "Message",
    "ProtocolError",
    "check_reply",
    "DESIGNS",
    "design_covariates",
    "design_size",
    "MESSAGE_TYPES",
    "WIDENING_LADDER",
    "WIDENING_STEPS",
    "packed_size",
]

#: The synthesis protocol's message types (analysis types: :data:`ANALYSIS_REPLIES`).
MESSAGE_TYPES = (
    "setup",
    "configure",
    "rules",
    "marginal",
    "hessian",
    "cdf",
    "block",
    "tune",
    "neff",
    "boost",
)

#: Widening factors t of the effective-rows floor, in order (a site's own floor,
#: ``SitePolicy.below_floor="widen"``, and the pooled floor): steps of sqrt(2) to 1024.
WIDENING_STEPS = tuple(2.0 ** (j / 2) for j in range(1, 21))
#: The factors a ``neff`` request's ladder indexes (``ladder_start``): 1, then the steps.
WIDENING_LADDER = (1.0, *WIDENING_STEPS)

ConfigValue = str | int | float | bool


class ProtocolError(RuntimeError):
    """A message does not follow the FITS protocol."""


@dataclass
class Message:
    """One protocol message.

    Parameters
    ----------
    type : str
        One of :data:`MESSAGE_TYPES` (or of :data:`ANALYSIS_REPLIES`).
    arrays : dict of str to ndarray
        Numeric payload.
    config : dict of str to str, int, float or bool
        Scalar and text settings.
    """

    type: str
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    config: dict[str, ConfigValue] = field(default_factory=dict)

    def nbytes(self) -> int:
        """Size of the message on the wire in bytes: ``len(self.to_bytes())``.

        Computed without serializing: the arrays' data plus, per array, its name, dtype
        and shape, and per config value its key, a type tag and the value
        (:meth:`to_bytes` gives the layout).
        """
        n = len(_MAGIC) + _text_size(self.type) + 4
        for name, a in self.arrays.items():
            a = np.asarray(a)
            n += _text_size(name) + _text_size(_dtype_code(a)) + 1 + 8 * a.ndim + a.nbytes
        for key, value in self.config.items():
            n += _text_size(key) + 1
            n += 4 + len(str(value).encode()) if _tag(value) == b"s" else 8
        return n

    def to_bytes(self) -> bytes:
        """The message as bytes, the way a transport without its own format sends it.

        Layout (little-endian): ``FITS1``; the type; the numbers of arrays and of config
        values (2 bytes each); per array its name, dtype code (numpy's ``'<f8'`` etc.),
        number of axes (1 byte), shape (8 bytes an axis) and data (C order); per config
        value its key, a tag (``s``, ``i``, ``f``, ``b``) and the value (text with a
        4-byte length, or 8 bytes).  Names and codes are UTF-8 with a 2-byte length.
        """
        out = bytearray(_MAGIC)
        out += _text(self.type)
        out += struct.pack("<HH", len(self.arrays), len(self.config))
        for name, a in self.arrays.items():
            a = np.ascontiguousarray(a)
            out += _text(name) + _text(_dtype_code(a)) + struct.pack("<B", a.ndim)
            out += struct.pack(f"<{a.ndim}Q", *a.shape)
            out += a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        for key, value in self.config.items():
            tag = _tag(value)
            out += _text(key) + tag
            if tag == b"f":
                out += struct.pack("<d", float(value))
            elif tag != b"s":
                out += struct.pack("<q", int(value))
            else:
                data = str(value).encode()
                out += struct.pack("<I", len(data)) + data
        return bytes(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> Message:
        """The message :meth:`to_bytes` wrote."""
        view = memoryview(data)
        if bytes(view[: len(_MAGIC)]) != _MAGIC:
            raise ProtocolError("not a fits message (bad magic bytes)")
        pos = len(_MAGIC)
        mtype, pos = _read_text(view, pos)
        n_arrays, n_config = struct.unpack_from("<HH", view, pos)
        pos += 4
        arrays: dict[str, np.ndarray] = {}
        for _ in range(n_arrays):
            name, pos = _read_text(view, pos)
            code, pos = _read_text(view, pos)
            (ndim,) = struct.unpack_from("<B", view, pos)
            shape = struct.unpack_from(f"<{ndim}Q", view, pos + 1)
            pos += 1 + 8 * ndim
            dtype = np.dtype(code)
            size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
            arrays[name] = np.frombuffer(view[pos : pos + size], dtype=dtype).reshape(shape)
            pos += size
        config: dict[str, ConfigValue] = {}
        for _ in range(n_config):
            key, pos = _read_text(view, pos)
            tag = bytes(view[pos : pos + 1])
            pos += 1
            if tag == b"s":
                (length,) = struct.unpack_from("<I", view, pos)
                config[key] = bytes(view[pos + 4 : pos + 4 + length]).decode()
                pos += 4 + length
                continue
            raw = view[pos : pos + 8]
            pos += 8
            if tag == b"f":
                config[key] = struct.unpack("<d", raw)[0]
            else:
                number = struct.unpack("<q", raw)[0]
                config[key] = bool(number) if tag == b"b" else number
        if pos != len(view):
            raise ProtocolError("a fits message has trailing bytes")
        return cls(mtype, arrays, config)


_MAGIC = b"FITS1"


def _tag(value: object) -> bytes:
    """The wire tag of a config value: b(ool), i(nteger), f(loat) or s (text)."""
    if isinstance(value, (bool, np.bool_)):
        return b"b"
    if isinstance(value, (int, np.integer)) and -(2**63) <= int(value) < 2**63:
        return b"i"
    if isinstance(value, (float, np.floating)):
        return b"f"
    return b"s"


def _dtype_code(a: np.ndarray) -> str:
    return a.dtype.newbyteorder("<").str if a.dtype.byteorder != "|" else a.dtype.str


def _text(value: str) -> bytes:
    data = value.encode()
    return struct.pack("<H", len(data)) + data


def _text_size(value: str) -> int:
    return 2 + len(value.encode())


def _read_text(view: memoryview, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<H", view, pos)
    return bytes(view[pos + 2 : pos + 2 + length]).decode(), pos + 2 + length


def packed_size(p: int) -> int:
    """Number of entries in the upper triangle of a p x p symmetric matrix."""
    return p * (p + 1) // 2


def _moments_shapes(request: Message) -> dict[str, tuple[int, ...]]:
    q = int(request.config["n_numeric"])
    return {"n": (1,), "mean": (2, q), "sd": (q,), "dropped": (1,)}


def _theta_shape(request: Message) -> tuple[int, ...]:
    return (int(np.asarray(request.arrays["theta"]).shape[0]),)


def _glm_configure_shapes(request: Message) -> dict[str, tuple[int, ...]]:
    p = int(request.config.get("null_space", 0))
    q = int(request.config.get("near_space", 0))
    return {
        "n_rows": (1,),
        **({"null": (p, p)} if p > 0 else {}),
        **({"near": (q, q)} if q > 0 else {}),
        **({"weight_sum": (1,)} if int(request.config.get("weight_sum", 0)) else {}),
    }


def _glm_check_shapes(request: Message) -> dict[str, tuple[int, ...]]:
    p = _theta_shape(request)[0]
    return {"lo": (2, p + 1), "hi": (2, p + 1)}


def _glm_fisher_shapes(request: Message) -> dict[str, tuple[int, ...]]:
    k = packed_size(_theta_shape(request)[0])
    return {
        "info": (k,),
        "score": _theta_shape(request),
        "loss": (2,),
        **({"rss": (1,)} if int(request.config.get("dispersion", 0)) else {}),
        **({"meat": (k,)} if int(request.config.get("robust", 0)) else {}),
    }


def _lsa_setup_shapes(request: Message) -> dict[str, tuple[int, ...]]:
    d = int(request.config["n_features"])
    return {"n_rows": (1,), "gram": (packed_size(d),)}


def _lsa_round_shapes(request: Message) -> dict[str, tuple[int, ...]]:
    return {"theta": tuple(request.arrays["theta"].shape)}


#: Analysis message types: request -> the reply's exact array names and shapes.
ANALYSIS_REPLIES: dict[str, Callable[[Message], dict[str, tuple[int, ...]]]] = {
    "moments": _moments_shapes,
    "glm_configure": _glm_configure_shapes,
    "glm_clip": lambda r: {"b": (1,)},
    "glm_gradient": lambda r: {"g": _theta_shape(r)},
    "glm_local": lambda r: {"theta": _theta_shape(r)},
    "glm_newton": lambda r: {"theta": _theta_shape(r)},
    "glm_check": _glm_check_shapes,
    "glm_fisher": _glm_fisher_shapes,
    "glm_sums": lambda r: {
        "loss": (1,),
        "score": _theta_shape(r),
        "info": (packed_size(_theta_shape(r)[0]),),
    },
    "lsa_setup": _lsa_setup_shapes,
    "lsa_precondition": lambda request: {"s_sum": (1,), "s2_sum": (1,)},
    "lsa_round": _lsa_round_shapes,
}


def _expect(
    reply: Message,
    shapes: Mapping[str, tuple[int, ...]],
    config: set[str],
    dtypes: dict[str, str] | None = None,
) -> None:
    if set(reply.arrays) != set(shapes):
        raise ProtocolError(
            f"{reply.type} reply carries arrays {sorted(reply.arrays)}, "
            f"the protocol allows exactly {sorted(shapes)}"
        )
    for name, shape in shapes.items():
        a = reply.arrays[name]
        if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype.kind not in "fiu":
            raise ProtocolError(
                f"{reply.type} reply array {name!r} has shape {getattr(a, 'shape', None)}, "
                f"expected numeric {shape}"
            )
        if dtypes and name in dtypes and a.dtype != np.dtype(dtypes[name]):
            raise ProtocolError(
                f"{reply.type} reply array {name!r} has dtype {a.dtype}, expected "
                f"{dtypes[name]} (secure aggregation sends masked fixed-point limbs)"
            )
    extra = set(reply.config) - config
    if extra:
        raise ProtocolError(f"{reply.type} reply carries unexpected config {sorted(extra)}")


#: The coordinator's local-linear designs (``Coordinator(design=...)``): every covariate
#: (the paper's, eq. 5), the ordered ones (continuous and ordinal), the continuous
#: ones, or none (local-constant); sent as the covariates' positions.
DESIGNS = ("all", "ordered", "continuous", "constant")


def design_covariates(config: Mapping[str, ConfigValue], d: int) -> np.ndarray | None:
    """The covariates a hessian, cdf or block request keeps in its local-linear design.

    Parameters
    ----------
    config : mapping
        The request's config; its ``design`` (if any) lists covariate positions,
        comma-separated, strictly increasing, each in ``0 .. d-1`` (``""``: none, the
        local-constant design U_i = 1).
    d : int
        The number of covariates (the request's query columns).

    Returns
    -------
    ndarray of int, or None
        The positions; None when the request has no ``design`` (all d covariates).

    Raises
    ------
    ProtocolError
        If ``design`` is not such a list.
    """
    if "design" not in config:
        return None
    text = str(config["design"]).strip()
    try:
        cols = np.array([int(t) for t in text.split(",")] if text else [], dtype=np.int64)
    except ValueError:
        raise ProtocolError(
            f"config 'design' must list covariate positions like '0,2,3', got {text!r}"
        ) from None
    if cols.size and (cols[0] < 0 or cols[-1] >= d or np.any(np.diff(cols) <= 0)):
        raise ProtocolError(
            f"config 'design' must list increasing covariate positions in 0..{d - 1}, got {text!r}"
        )
    return cols


def design_size(request: Message) -> int:
    """p, the size of a hessian, cdf or block request's design: 1 + its covariates."""
    d = int(np.shape(request.arrays["queries"])[1])
    cols = design_covariates(request.config, d)
    return d + 1 if cols is None else 1 + int(cols.size)


def check_reply(request: Message, reply: Message) -> None:
    """Check that a reply is one the protocol allows for this request.

    Raises
    ------
    ProtocolError
        If the reply's type, arrays, shapes or config differ from the protocol's.
    """
    if reply.type != request.type:
        raise ProtocolError(f"a {request.type} request got a {reply.type} reply")
    mtype = request.type
    secure = bool(request.config.get("secure", False))
    if mtype == "setup":
        setup_shapes = {"n_rows": (1,), **({"public_key": (KEY_BYTES,)} if secure else {})}
        _expect(reply, setup_shapes, {"description", "name"}, {"public_key": "uint8"})
        return
    if mtype == "configure":
        _expect(reply, {"n_rows": (1,)}, {"policy"})
        return
    if mtype == "rules":
        stage = request.config.get("stage")
        if stage in ("moments", "totals"):
            size, key = int(request.config["size"]), str(stage)
            if secure:
                _expect(reply, {key: (LIMBS, size)}, set(), {key: "uint64"})
            else:
                _expect(reply, {key: (size,)}, set(), {key: "float64"})
            return
        if stage == "residuals":  # per candidate a site's min and max residual, and step
            n = 3 * len(json.loads(str(request.config["candidates"])))
            _expect(reply, {"residuals": (n,)}, set(), {"residuals": "float64"})
            return
        if stage == "ranges":  # per interval candidate and value: count, min, max
            n = int(request.config["size"])
            _expect(reply, {"ranges": (n,)}, set(), {"ranges": "float64"})
            return
        if request.config.get("stage") == "map":
            name, n = "pairs", int(request.config["size"])
        else:
            name, n = "holds", len(json.loads(str(request.config["candidates"])))
        _expect(reply, {name: (n,)}, set(), {name: "uint8"})
        if np.any(reply.arrays[name] > 1):
            raise ProtocolError(f"rules reply array {name!r} holds values other than 0 and 1")
        return
    if mtype in ANALYSIS_REPLIES:
        _expect(reply, ANALYSIS_REPLIES[mtype](request), set())
        return
    expected: dict[str, tuple[tuple[int, ...], str]]
    if mtype == "marginal":
        expected = {"F": ((int(request.config["grid_size"]),), "float64")}
    elif mtype == "tune":
        n_columns = len(json.loads(str(request.config["columns"])))
        n_candidates = len(json.loads(str(request.config["candidates"])))
        expected = {
            "scores": ((n_columns, n_candidates), "float64"),
            "rows": ((n_columns,), "float64"),
        }
    elif mtype == "neff":
        b = request.arrays["queries"].shape[0]
        steps = int(request.config.get("ladder_steps", 1))
        expected = {"N": ((b, steps, 2), "float64")}
    elif mtype == "boost":
        nodes = 2 ** int(request.config["level"])
        width = int(np.sum(np.asarray(request.arrays["edge_counts"]) + 1))
        outputs = int(request.config["outputs"])
        precision = "float64" if secure else str(request.config.get("precision", "float64"))
        try:
            expected = histogram_arrays(precision, nodes, width, 2 * outputs + 1)
        except ValueError as exc:
            raise ProtocolError(f"boost request: {exc}") from None
        if "validation" in request.config and int(request.config["level"]) == 0:
            expected["loss"] = ((2,), "float64")  # early stopping's held-out loss, rows
    elif mtype in ("hessian", "cdf", "block"):
        b, d = request.arrays["queries"].shape
        grid_size = int(request.config.get("grid_size", 0))
        precision = "float64" if secure else str(request.config.get("precision", "float64"))
        try:
            expected = reply_arrays(mtype, precision, b, design_size(request), grid_size)
        except ValueError as exc:
            raise ProtocolError(f"{mtype} request: {exc}") from None
    else:
        raise ProtocolError(f"unknown message type {mtype!r}")
    if secure:  # the summed arrays, masked (float64 precision only)
        shapes = {name: (LIMBS, *shape) for name, (shape, _) in expected.items()}
        dtypes = dict.fromkeys(expected, "uint64")
    else:
        shapes = {name: shape for name, (shape, _) in expected.items()}
        dtypes = {name: dtype for name, (_, dtype) in expected.items()}
    _expect(reply, shapes, {"abstained", "widened"}, dtypes)
