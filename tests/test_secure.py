"""Secure aggregation (fits.federation.secure): exact fixed-point sums under pairwise masks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, GaussianKernel, estimate_conditional_cdf
from fits.federation.client import FITSClient
from fits.federation.coordinator import Coordinator
from fits.federation.protocol import Message, ProtocolError, check_reply
from fits.federation.secure import (
    KEY_BYTES,
    LIMBS,
    SecureAggregator,
    decode,
    encode,
    pair_key,
    unmask_sum,
)
from fits.federation.transport import InProcessTransport


def _values(rng: np.random.Generator, n: int) -> np.ndarray:
    """Signed values over 60 orders of magnitude, with zeros and integers."""
    v = rng.standard_normal(n) * 10.0 ** rng.uniform(-12, 25, n)
    v[:5] = [0.0, -0.0, 1.0, -3.0, 2.0**60]
    return v


def _federation(k: int, neighbours: int | None = None) -> list[SecureAggregator]:
    sites = [SecureAggregator() for _ in range(k)]
    keys = np.stack([s.public_array() for s in sites])
    for s in sites:
        s.connect(keys, neighbours)
    return sites


def test_fixed_point_round_trip_is_exact():
    v = _values(np.random.default_rng(0), 5000)
    limbs = encode(v)
    assert limbs.shape == (LIMBS, 5000) and limbs.dtype == np.int64
    assert np.all(np.abs(limbs) <= 2**48)
    exact = np.abs(v) >= 2.0**-40  # 53 significant bits lie above 2^-96
    np.testing.assert_array_equal(decode(limbs)[exact], v[exact])
    assert np.all(np.abs(decode(limbs) - v) <= 2.0**-97)  # tiny values: nearest 2^-96


def test_masked_sum_is_the_correctly_rounded_exact_sum():
    rng = np.random.default_rng(1)
    sites = _federation(5)
    values = [_values(rng, 2000).reshape(40, 50) for _ in sites]
    masked = [s.mask(v, "hessian|r0|x||S") for s, v in zip(sites, values, strict=True)]
    total = unmask_sum(masked)
    exact = np.array([math.fsum(col) for col in np.stack(values).reshape(5, -1).T])
    exact = exact.reshape(40, 50)
    # the fixed-point sum is exact; decoding rounds it once (within an ulp)
    assert np.all(np.abs(total - exact) <= np.spacing(np.abs(exact)) + 2.0**-94)
    # and it does not depend on the order of the clients
    np.testing.assert_array_equal(unmask_sum(masked[::-1]), total)


@pytest.mark.parametrize(
    ("clients", "neighbours"), [(2, 1), (3, 1), (5, 1), (5, 2), (5, None), (6, 2), (7, 3)]
)
def test_masks_cancel_for_any_number_of_mask_peers(clients, neighbours):
    rng = np.random.default_rng(clients)
    sites = _federation(clients, neighbours)
    expected_peers = clients - 1 if neighbours is None else min(clients - 1, 2 * neighbours)
    assert [len(s._peers) for s in sites] == [expected_peers] * clients
    values = [rng.normal(size=30) for _ in sites]
    masked = [s.mask(v, "marginal||y||F") for s, v in zip(sites, values, strict=True)]
    assert all(np.any(m != encode(v).view(np.uint64)) for m, v in zip(masked, values, strict=True))
    total = unmask_sum(masked)
    exact = np.array([math.fsum(col) for col in np.stack(values).T])
    assert np.all(np.abs(total - exact) <= np.spacing(np.abs(exact)))


def test_a_single_upload_hides_the_values():
    sites = _federation(3)
    zeros = np.zeros(4000)
    masked = sites[0].mask(zeros, "cdf|r1|y|own|F")
    assert masked.dtype == np.uint64 and masked.shape == (LIMBS, 4000)
    # zeros encode to zero limbs, but the upload looks uniform: about half the bits set
    bits = np.unpackbits(masked.view(np.uint8))
    assert abs(bits.mean() - 0.5) < 0.01
    # a different label (another request) gives an unrelated mask
    other = sites[0].mask(zeros, "cdf|r2|y|own|F")
    assert np.mean(other == masked) < 0.01
    # one client alone is not unmasked by the coordinator's sum
    assert not np.allclose(unmask_sum([masked]), 0.0)


def test_bad_values_and_keys_are_refused():
    with pytest.raises(ValueError, match="not finite"):
        encode(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="exceeds 2\\^94"):
        encode(np.array([1e30]))
    a, b = SecureAggregator(), SecureAggregator()
    with pytest.raises(ValueError, match="not among the relayed keys"):
        a.connect(np.stack([b.public_array(), b.public_array()]))
    with pytest.raises(ValueError, match="uint64"):
        unmask_sum([np.zeros((3, LIMBS))])
    restored = SecureAggregator(a.private_key)
    assert restored.public_key == a.public_key  # a rebuilt site keeps its key


def test_pair_keys_are_x25519_hkdf_bound_to_the_pair_and_the_run():
    """An independent derivation: RFC 7748 X25519, then RFC 5869 HKDF-SHA-256."""
    import hashlib
    import hmac

    from cryptography.hazmat.primitives.asymmetric.x25519 import (
        X25519PrivateKey,
        X25519PublicKey,
    )

    sites = _federation(3)
    keys = [s.public_key for s in sites]
    assert all(len(k) == KEY_BYTES == 32 for k in keys)
    # HKDF by hand (extract with a zero salt, one expand block)
    shared = X25519PrivateKey.from_private_bytes(sites[0].private_key).exchange(
        X25519PublicKey.from_public_bytes(keys[1])
    )
    prk = hmac.new(b"\0" * 32, shared, hashlib.sha256).digest()
    run = hashlib.sha256(b"".join(keys)).digest()
    info = b"fits secure aggregation pair key v2" + run + keys[0] + keys[1]
    okm = hmac.new(prk, info + b"\x01", hashlib.sha256).digest()
    assert sites[0]._peers[0] == (1, okm)  # site 1's key with site 2, added
    assert sites[1]._peers[0] == (-1, okm)  # the same key at site 2, subtracted
    # the same pair in another run (another participant list) gets another key
    stranger = SecureAggregator()
    other_run = hashlib.sha256(keys[0] + keys[1] + stranger.public_key).digest()
    private = X25519PrivateKey.from_private_bytes(sites[0].private_key)
    assert pair_key(private, keys[1], keys[0], keys[1], other_run) != okm
    # a low-order public key (all zeros) gives no shared secret: refused, naming the peer
    bad = np.stack([sites[0].public_array(), np.zeros(KEY_BYTES, np.uint8)])
    with pytest.raises(ValueError, match="client 2's public key is invalid"):
        SecureAggregator(sites[0].private_key).connect(bad)
    with pytest.raises(ValueError, match="32 bytes"):
        SecureAggregator(b"short")


def test_synthesizer_with_secure_aggregation(mixed_clients):
    kernels = ["knn", "gaussian", "knn"]
    plain = FITSSynthesizer(kernels, seed=7, upload_precision="float64")
    plain = plain.fit(mixed_clients).sample(500)
    synth = FITSSynthesizer(kernels, seed=7, secure_aggregation=True).fit(mixed_clients)
    seen: list[tuple[str, dict[str, np.ndarray]]] = []
    synth.coordinator.transport.observers.append(
        lambda k, msg, reply: seen.append((msg.type, reply.arrays))
    )
    secure = synth.sample(500)
    # the same table up to the rounding of the sums
    pd.testing.assert_frame_equal(
        plain.select_dtypes("number"), secure.select_dtypes("number"), rtol=1e-9, atol=1e-9
    )
    pd.testing.assert_frame_equal(
        plain.select_dtypes(exclude="number"), secure.select_dtypes(exclude="number")
    )
    # reproducible bit for bit, whatever the (random) keys
    again = FITSSynthesizer(kernels, seed=7, secure_aggregation=True).fit(mixed_clients)
    pd.testing.assert_frame_equal(secure, again.sample(500))
    # the coordinator saw only masked limbs for every summed upload
    summed = [arrays for kind, arrays in seen if kind in ("marginal", "hessian", "cdf")]
    assert summed
    for arrays in summed:
        (a,) = arrays.values()
        assert a.dtype == np.uint64 and a.shape[0] == LIMBS


def test_protocol_enforces_the_masked_form(mixed_clients):
    queries = np.zeros((4, 2))
    request = Message("hessian", {"queries": queries}, {"column": "o", "secure": True})
    plain = Message("hessian", {"S": np.zeros((4, 6))})
    with pytest.raises(ProtocolError, match="shape"):
        check_reply(request, plain)
    wrong_type = Message("hessian", {"S": np.zeros((LIMBS, 4, 6))})
    with pytest.raises(ProtocolError, match="dtype"):
        check_reply(request, wrong_type)
    check_reply(request, Message("hessian", {"S": np.zeros((LIMBS, 4, 6), np.uint64)}))
    # a client asked for masked uploads that never had a secure setup refuses
    client = FITSClient(mixed_clients[0], "site a")
    coordinator = Coordinator(InProcessTransport([client]))
    coordinator.setup()
    coordinator.configure(0)
    with pytest.raises(ProtocolError, match="site a: secure aggregation was asked for"):
        client.handle(Message("marginal", config={"column": "b", "grid_size": 4, "secure": True}))
    with pytest.raises(ValueError, match="at least two clients"):
        Coordinator(InProcessTransport([client]), secure=True)
    bad = Message(
        "hessian",
        {"queries": np.zeros((3, 1)), "weight_exponent": np.zeros(2, np.int64)},
        {"column": "x", "request": "r9"},
    )
    with pytest.raises(ProtocolError, match="weight_exponent needs one integer per query"):
        client.handle(bad)


def test_secure_runs_cover_missing_values_point_masses_and_fallbacks(mixed_clients):
    """Every summed round (indicator columns, fallbacks) goes masked and sums the same."""
    rng = np.random.default_rng(3)
    n = 900
    g = rng.choice(["north", "south", "east"], n)
    age = rng.integers(18, 90, n)
    hours = np.where(rng.random(n) < 0.4, 40.0, rng.normal(38, 8, n))  # a point mass
    score = age * 0.5 + (g == "south") * 10 + rng.normal(size=n) * 3
    score[rng.random(n) < 0.1] = np.nan  # missing values: an indicator column
    frame = pd.DataFrame({"g": g, "age": age, "hours": hours, "score": score})
    tables = [frame.iloc[:400], frame.iloc[400:700], frame.iloc[700:]]
    kernels = ["gaussian", "knn", "gaussian"]
    plain = FITSSynthesizer(kernels, seed=1, upload_precision="float64").fit(tables)
    secure = FITSSynthesizer(kernels, seed=1, secure_aggregation=True).fit(tables)
    indicators = [c.indicates for c in secure.coordinator.schema.columns if c.indicates]
    assert indicators == ["hours", "score"]
    pd.testing.assert_frame_equal(plain.sample(600), secure.sample(600), rtol=1e-9, atol=1e-9)
    # far queries with a tiny bandwidth: the KNN and local-constant fallback rounds
    kinds = {"b": "nominal", "o": "ordinal", "c": "nominal"}
    x = np.array([[1.5, 40.0, 2.0], [0.5, -0.2, 1.5]])
    results = [
        estimate_conditional_cdf(
            mixed_clients,
            ["b", "x", "o"],
            "y",
            x,
            kernel=GaussianKernel(bandwidth=0.01),
            kinds=kinds,
            seed=0,
            secure=flag,
        )
        for flag in (False, True)
    ]
    assert results[1].coordinator.fallbacks == results[0].coordinator.fallbacks >= 1
    np.testing.assert_allclose(results[1].values, results[0].values, rtol=0, atol=1e-12)


def test_a_value_too_large_to_mask_names_the_site_and_column():
    rng = np.random.default_rng(0)
    big = pd.DataFrame({"a": rng.normal(size=200) * 1e20, "b": rng.normal(size=200)})
    tables = [big.iloc[:100], big.iloc[100:]]
    synth = FITSSynthesizer("knn", seed=0, secure_aggregation=True).fit(tables)
    with pytest.raises(ValueError, match=r"client 1, column 'b': .*exceeds 2\^94.*rescale"):
        synth.sample(20)
