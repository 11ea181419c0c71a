"""The messages the coordinator and the clients exchange -- the only thing they share.

Every message is a :class:`Message`: a kind, named numpy arrays, and a few scalar or
text config values (the shape of Flower's ``RecordDict`` of array and config records).
The coordinator sends requests; a client answers each with a reply of the same kind.

===========  ==========================================  ===================================
kind         request (coordinator -> client)             reply (client -> coordinator)
===========  ==========================================  ===================================
setup        config ``declared`` (JSON kinds)            ``n_rows`` (1,); config
                                                         ``description`` (JSON: dtypes,
                                                         category sets, min / max) and
                                                         ``name`` (the site's name)
configure    config ``schema``, ``n_total``, ``seed``,   ``n_rows`` (1,)
             bandwidths; arrays ``grid:<column>``,
             optional ``scale_mean`` / ``scale_sd``
marginal     config ``column``, ``grid_size``            ``F`` (L,): sum over local rows of
                                                         the smoothed indicator (eq. 16)
hessian      config ``column``, ``request``, ``scheme``;  ``S`` (B, p(p+1)/2): upper triangle
             arrays ``queries`` (B, d)                   of S_k(x) per query (eq. 5), p=d+1
cdf          config ``column``, ``request``, ``scheme``,  ``F`` (B, L): local CDF vector per
             ``grid_size``; arrays ``queries`` (B, d),   query (eq. 9)
             ``q`` (B, p)
===========  ==========================================  ===================================

:func:`check_reply` enforces the right-hand column: a reply with any other array, or an
array of any other shape, is refused.  No reply can carry a client's rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Message", "ProtocolError", "check_reply", "KINDS", "packed_size"]

KINDS = ("setup", "configure", "marginal", "hessian", "cdf")

ConfigValue = str | int | float | bool


class ProtocolError(RuntimeError):
    """A message does not follow the FITS protocol."""


@dataclass
class Message:
    """One protocol message.

    Parameters
    ----------
    kind : str
        One of :data:`KINDS`.
    arrays : dict of str to ndarray
        Numeric payload.
    config : dict of str to str, int, float or bool
        Scalar and text settings.
    """

    kind: str
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    config: dict[str, ConfigValue] = field(default_factory=dict)

    def nbytes(self) -> int:
        """Size of the payload in bytes (arrays plus config values as text)."""
        n = sum(int(np.asarray(a).nbytes) for a in self.arrays.values())
        n += sum(len(str(k)) + len(str(v).encode()) for k, v in self.config.items())
        return n


def packed_size(p: int) -> int:
    """Number of entries in the upper triangle of a p x p symmetric matrix."""
    return p * (p + 1) // 2


def _expect(reply: Message, shapes: dict[str, tuple[int, ...]], config: set[str]) -> None:
    if set(reply.arrays) != set(shapes):
        raise ProtocolError(
            f"{reply.kind} reply carries arrays {sorted(reply.arrays)}, "
            f"the protocol allows exactly {sorted(shapes)}"
        )
    for name, shape in shapes.items():
        a = reply.arrays[name]
        if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype.kind not in "fiu":
            raise ProtocolError(
                f"{reply.kind} reply array {name!r} has shape {getattr(a, 'shape', None)}, "
                f"expected numeric {shape}"
            )
    extra = set(reply.config) - config
    if extra:
        raise ProtocolError(f"{reply.kind} reply carries unexpected config {sorted(extra)}")


def check_reply(request: Message, reply: Message) -> None:
    """Check that a reply is one the protocol allows for this request.

    Raises
    ------
    ProtocolError
        If the reply's kind, arrays, shapes or config differ from the protocol's.
    """
    if reply.kind != request.kind:
        raise ProtocolError(f"a {request.kind} request got a {reply.kind} reply")
    kind = request.kind
    if kind == "setup":
        _expect(reply, {"n_rows": (1,)}, {"description", "name"})
    elif kind == "configure":
        _expect(reply, {"n_rows": (1,)}, set())
    elif kind == "marginal":
        _expect(reply, {"F": (int(request.config["grid_size"]),)}, set())
    elif kind == "hessian":
        b, d = request.arrays["queries"].shape
        _expect(reply, {"S": (b, packed_size(d + 1))}, set())
    elif kind == "cdf":
        b = request.arrays["queries"].shape[0]
        _expect(reply, {"F": (b, int(request.config["grid_size"]))}, set())
    else:
        raise ProtocolError(f"unknown message kind {kind!r}")
