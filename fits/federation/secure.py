"""Secure aggregation: the coordinator learns only the sums of the clients' uploads.

FITS needs from the clients only *sums over clients* of their step-1 Hessians S_k(x),
their step-2 CDF vectors F_k(z | x) and their marginal vectors (paper eqs. 6, 10, 16).
With secure aggregation each client adds pairwise masks to those uploads; the masks of
any two clients cancel in the sum, so the coordinator can add the masked uploads but
learns nothing about any single client's values (Bonawitz et al., 2017, without the
dropout recovery: a client that drops out stops a fits run anyway).

How (all of it in this module):

* **Key agreement** (setup round).  Each client draws a private exponent from the
  operating system's random source (``secrets``) and uploads ``2^x mod p`` in the
  2048-bit MODP group of RFC 3526.  The coordinator relays every client's public value
  in the configure round; each pair of clients derives a shared key
  ``SHA-256(g^(x_i x_j) mod p)``.  The coordinator never holds a private exponent.
* **Exact fixed point.**  A float64 value v becomes the integer round(v 2^96), split
  into four signed 48-bit limbs (a 192-bit number), sent limb-major.  Sums of limbs are
  exact integers for fewer than 2^14 clients, so the decoded sum equals the exact sum
  of the clients' values (to 2^-96 each) and is rounded to float64 once: as accurate
  as the plain float sum, and independent of the order of the clients.  Values must be
  finite and below 2^94 in magnitude.
* **Masks.**  Every limb is masked modulo 2^64 with a stream of SHAKE-128 keyed by the
  pair's key and a label naming the request, the column and the array, so no mask is
  used for two different uploads.  Client i adds the pair's stream for every peer
  after it in the coordinator's order and subtracts it for every peer before it.  By
  default a client shares masks with its two neighbours in the cyclic order of the
  clients (``neighbours=1``); drawing the masks costs one SHAKE stream per peer, the
  size of the upload, so more peers cost proportionally more time.

Threat model: an honest-but-curious coordinator that relays the public keys faithfully
and does not collude with all of a client's mask peers.  What still reaches the
coordinator in the clear: the setup round (row counts and column descriptions, which
the schema merge needs) and the sums themselves.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence

import numpy as np

__all__ = [
    "SecureAggregator",
    "encode",
    "decode",
    "unmask_sum",
    "KEY_BYTES",
    "LIMBS",
    "MAX_ABS_VALUE",
]

#: RFC 3526 group 14: a 2048-bit safe prime; generator 2.
_P = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A0879"
    "8E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B"
    "0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA4836"
    "1C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804"
    "F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6"
    "955817183995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF",
    16,
)
_G = 2
#: Bytes of a public key (a residue modulo the 2048-bit prime).
KEY_BYTES = 256
#: Limbs per value, 48 bits each; the fixed point has 96 fractional bits.
LIMBS = 4
_LIMB_BITS = 48
_FRACTION_BITS = 96
#: Largest magnitude a securely summed value may have.
MAX_ABS_VALUE = 2.0**94


def encode(values: np.ndarray) -> np.ndarray:
    """float64 values -> int64 limbs, shape ``(LIMBS,) + values.shape``.

    ``sum_l limbs[l] * 2^(48 l - 96)`` equals round(v 2^96) 2^-96 exactly.  Each limb
    is below 2^48 in magnitude (the lowest may reach 2^48 after rounding) and has the
    sign of v.
    """
    v = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise ValueError("secure aggregation: a value to be summed is not finite")
    if v.size and np.max(np.abs(v)) >= MAX_ABS_VALUE:
        raise ValueError(
            f"secure aggregation: a value to be summed exceeds 2^94 "
            f"({np.max(np.abs(v)):.3g}); rescale the column (e.g. other units)"
        )
    rest = np.ldexp(v, _FRACTION_BITS)  # exact: a power-of-two scaling
    out = np.empty((LIMBS,) + v.shape, dtype=np.int64)
    for limb in range(LIMBS - 1, 0, -1):  # peel whole multiples of 2^(48 limb), exactly
        weight = float(2 ** (_LIMB_BITS * limb))
        digit = np.trunc(rest * (1.0 / weight))  # towards zero: the limb keeps v's sign
        out[limb] = digit
        rest -= digit * weight  # the mantissa's lower bits: representable, so exact
    out[0] = np.rint(rest)
    return out


def decode(limb_sums: np.ndarray) -> np.ndarray:
    """Exact integer limb sums (int64, first axis ``LIMBS``) -> float64 values."""
    s = np.asarray(limb_sums, dtype=np.int64)
    total = np.zeros(s.shape[1:])
    for limb in range(LIMBS - 1, -1, -1):  # largest first, so small limbs round last
        total += np.ldexp(s[limb].astype(np.float64), _LIMB_BITS * limb - _FRACTION_BITS)
    return total


def _stream(key: bytes, label: str, shape: tuple[int, ...]) -> np.ndarray:
    """A uniform uint64 mask of ``shape`` from SHAKE-128(key, label)."""
    n = int(np.prod(shape, dtype=np.int64))
    digest = hashlib.shake_128(key + b"\x00" + label.encode()).digest(8 * n)
    return np.frombuffer(digest, dtype="<u8").reshape(shape).astype(np.uint64, copy=False)


def unmask_sum(masked: Sequence[np.ndarray]) -> np.ndarray:
    """The coordinator's side: add the clients' masked uploads, return the float sum.

    The masks cancel modulo 2^64 limb by limb; the limb sums, read as signed integers,
    are exact, and :func:`decode` turns them into floats.
    """
    if not masked:
        raise ValueError("secure aggregation: nothing to sum")
    total: np.ndarray = np.zeros(masked[0].shape, dtype=np.uint64)
    for m in masked:
        if m.dtype != np.uint64 or m.shape != total.shape or m.shape[0] != LIMBS:
            raise ValueError(
                f"secure aggregation: a masked upload has dtype {m.dtype} and shape "
                f"{m.shape}; expected uint64 {total.shape} with {LIMBS} limbs first"
            )
        total += m  # wraps modulo 2^64, as the masks do
    return decode(total.view(np.int64))


class SecureAggregator:
    """A client's side of secure aggregation: its key pair and its pairwise masks.

    Parameters
    ----------
    private_key : int, optional
        The private exponent, to restore a client (e.g. a Flower site that is rebuilt
        for every message).  Default: a fresh 256-bit exponent from ``secrets``.
    """

    def __init__(self, private_key: int | None = None) -> None:
        self.private_key = int(private_key) if private_key is not None else secrets.randbits(256)
        if not 1 < self.private_key < _P - 1:
            raise ValueError("secure aggregation: the private key is out of range")
        self.public_key = pow(_G, self.private_key, _P).to_bytes(KEY_BYTES, "big")
        self._peers: list[tuple[int, bytes]] = []
        self._connected = False

    def public_array(self) -> np.ndarray:
        """The public key as the uint8 array the setup reply carries."""
        return np.frombuffer(self.public_key, dtype=np.uint8).copy()

    def connect(self, public_keys: np.ndarray, neighbours: int | None = None) -> None:
        """Derive the pairwise keys from every client's public key (configure round).

        Parameters
        ----------
        public_keys : ndarray of shape (K, KEY_BYTES)
            One row per client, in the coordinator's order; this client's own key must
            be among them exactly once.
        neighbours : int, optional
            Share masks only with the clients at most this many places away in the
            cyclic order of ``public_keys`` (up to 2 * neighbours peers); None: every
            other client.  Fewer peers mean fewer masks to draw; a client's upload can
            then be unmasked only if the coordinator colludes with all its peers.
        """
        keys = np.asarray(public_keys, dtype=np.uint8)
        if keys.ndim != 2 or keys.shape[1] != KEY_BYTES:
            raise ValueError(f"secure aggregation: public keys of shape {keys.shape}")
        rows = [bytes(row) for row in keys]
        if rows.count(self.public_key) != 1:
            raise ValueError(
                "secure aggregation: this client's public key is not among the relayed "
                "keys exactly once; the coordinator must relay every setup key unchanged"
            )
        if neighbours is not None and neighbours < 1:
            raise ValueError("secure aggregation: neighbours must be at least 1")
        me, k = rows.index(self.public_key), len(rows)
        peers = []
        for j, row in enumerate(rows):
            apart = min((j - me) % k, (me - j) % k)
            if j == me or (neighbours is not None and apart > neighbours):
                continue
            other = int.from_bytes(row, "big")
            if not 1 < other < _P - 1:
                raise ValueError(f"secure aggregation: client {j + 1}'s public key is invalid")
            shared = pow(other, self.private_key, _P).to_bytes(KEY_BYTES, "big")
            sign = 1 if me < j else -1  # the pair's two masks cancel in the sum
            peers.append((sign, hashlib.sha256(b"fits secure aggregation" + shared).digest()))
        self._peers = peers
        self._connected = True

    @property
    def connected(self) -> bool:
        """Whether :meth:`connect` has run."""
        return self._connected

    def mask(self, values: np.ndarray, label: str) -> np.ndarray:
        """Encode ``values`` and add this client's masks: uint64, (LIMBS,) + shape."""
        out = encode(values).view(np.uint64)
        for sign, key in self._peers:
            stream = _stream(key, label, out.shape)
            if sign > 0:
                out += stream
            else:
                out -= stream
        return out
