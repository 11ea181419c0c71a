"""Secure aggregation: the coordinator learns only the sums of the clients' uploads.

FITS needs from the clients only *sums over clients* of their step-1 Hessians S_k(x),
their step-2 CDF vectors F_k(z | x) and their marginal vectors (paper eqs. 6, 10, 16).
With secure aggregation each client adds pairwise masks to those uploads; the masks of
any two clients cancel in the sum, so the coordinator can add the masked uploads but
learns nothing about any single client's values (Bonawitz et al., 2017, without the
dropout recovery: a client that drops out stops a fits run anyway).

How (all of it in this module):

* **Key agreement** (setup round).  Each client draws an X25519 private key (RFC 7748)
  from the operating system's random source and uploads its 32-byte public key.  The
  coordinator relays every client's public key in the configure round; each pair of
  clients computes the X25519 shared secret and derives its pair key with HKDF-SHA-256
  (RFC 5869), whose ``info`` binds the key to the pair and to the run: a label, the
  SHA-256 of the whole relayed key list (the run's participants, in the coordinator's
  order) and the two clients' public keys in that order.  Both primitives come from the
  reviewed ``cryptography`` package; the coordinator never holds a private key.

  The keys are fresh random ones, not drawn from the run's seed, and the output is still
  reproducible from the seed: the masks cancel exactly in integer arithmetic, so the
  decoded sums (and the synthetic table) do not depend on the keys at all (tested).
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
the schema merge needs), each site's count of abstained queries (its policy), and the
sums themselves.  A sum over one site is that site's upload: the coordinator refuses
secure aggregation with one site, and (at configure) with one site able to answer, the
others holding fewer rows than their effective-rows floor
(:class:`~fits.federation.coordinator.SecureAggregationError`).  See ``docs/privacy.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = [
    "SecureAggregator",
    "pair_key",
    "encode",
    "decode",
    "unmask_sum",
    "KEY_BYTES",
    "LIMBS",
    "MAX_ABS_VALUE",
]

#: Bytes of a public (and of a private) X25519 key.
KEY_BYTES = 32
#: HKDF ``info`` label: names the protocol and its version.
_KDF_LABEL = b"fits secure aggregation pair key v2"
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


def pair_key(
    private_key: X25519PrivateKey, peer_public: bytes, first: bytes, second: bytes, run: bytes
) -> bytes:
    """The 32-byte mask key of one pair of clients: HKDF-SHA-256 of their X25519 secret.

    ``info`` = label | ``run`` (32 bytes) | ``first`` | ``second``: the pair's public keys
    in the coordinator's order, so that both clients derive the same key and a key
    belongs to one pair in one run.  Raises ValueError for a peer key that gives no
    shared secret (a low-order point).
    """
    shared = private_key.exchange(X25519PublicKey.from_public_bytes(peer_public))
    info = _KDF_LABEL + run + first + second
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(shared)


class SecureAggregator:
    """A client's side of secure aggregation: its key pair and its pairwise masks.

    Parameters
    ----------
    private_key : bytes, optional
        The 32 raw bytes of the X25519 private key, to restore a client (e.g. a Flower
        site that is rebuilt for every message).  Default: a fresh key from the
        operating system's random source.
    """

    def __init__(self, private_key: bytes | None = None) -> None:
        if private_key is None:
            key = X25519PrivateKey.generate()
        else:
            raw = bytes(private_key)
            if len(raw) != KEY_BYTES:
                raise ValueError(
                    f"secure aggregation: a private key has {KEY_BYTES} bytes, got {len(raw)}"
                )
            key = X25519PrivateKey.from_private_bytes(raw)
        self._key = key
        #: The raw private key (stays at the client).
        self.private_key: bytes = key.private_bytes_raw()
        #: The raw public key (sent in the setup reply).
        self.public_key: bytes = key.public_key().public_bytes_raw()
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
        if len(set(rows)) != len(rows):
            raise ValueError("secure aggregation: the relayed public keys repeat a key")
        if neighbours is not None and neighbours < 1:
            raise ValueError("secure aggregation: neighbours must be at least 1")
        me, k = rows.index(self.public_key), len(rows)
        run = hashlib.sha256(b"".join(rows)).digest()  # the run's participants, in order
        peers = []
        for j, row in enumerate(rows):
            apart = min((j - me) % k, (me - j) % k)
            if j == me or (neighbours is not None and apart > neighbours):
                continue
            first, second = (self.public_key, row) if me < j else (row, self.public_key)
            try:
                key = pair_key(self._key, row, first, second, run)
            except ValueError as exc:
                raise ValueError(
                    f"secure aggregation: client {j + 1}'s public key is invalid ({exc})"
                ) from None
            sign = 1 if me < j else -1  # the pair's two masks cancel in the sum
            peers.append((sign, key))
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
