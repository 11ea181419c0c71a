"""What crosses the wire: only the protocol's arrays, never rows."""

from __future__ import annotations

import numpy as np
import pytest

from fits import FITSSynthesizer, Message, ProtocolError
from fits.federation.protocol import check_reply, packed_size


def _record(synth):
    log = []
    synth.coordinator.transport.observers.append(lambda k, req, rep: log.append((k, req, rep)))
    return log


def test_clients_send_only_protocol_arrays_and_no_rows(mixed_clients):
    synth = FITSSynthesizer(
        ["knn", "gaussian", "knn"],
        seed=0,
        grid_size=101,
        upload_precision="float64",
        rounds=2,
        design="all",  # the paper's design (the others: test_equivalence.py)
    ).fit(mixed_clients)  # the other precisions and the one-round mode: test_codec.py
    log = _record(synth)
    n = 257
    synth.sample(n)
    sizes = [len(t) for t in mixed_clients]
    types_seen = set()
    raw_values = [
        set(np.round(t["x"].to_numpy(), 12)) | set(np.round(t["y"].to_numpy(), 12))
        for t in mixed_clients
    ]
    for k, req, rep in log:
        check_reply(req, rep)  # the transport already did; do it again explicitly
        types_seen.add(rep.type)
        if rep.type == "configure":  # sample() declared its rows to the sites' policies
            assert set(rep.config) == {"policy"} and req.config["rows"] == n
            assert set(rep.arrays) == {"n_rows"}
            continue
        # counts, when the site widened its kernel or abstained (the effective-rows floor)
        assert set(rep.config) <= {"abstained", "widened"}
        for name, arr in rep.arrays.items():
            assert arr.dtype.kind == "f"
            assert sizes[k] not in arr.shape, f"{rep.type}.{name} has a row-sized axis"
            # no uploaded number is one of the client's raw continuous values
            assert not (set(np.round(arr.ravel(), 12)) & raw_values[k])
        if rep.type == "hessian":
            b, d = req.arrays["queries"].shape
            assert rep.arrays["S"].shape == (b, packed_size(d + 1))
        if rep.type == "cdf":
            assert rep.arrays["F"].shape == (req.arrays["q"].shape[0], req.config["grid_size"])
    # the marginals, the first column's too, were asked in fit() with those of the
    # thinned grids (one round trip), so sampling asks none
    assert types_seen == {"configure", "hessian", "cdf"}


def test_upload_volume_matches_remark_3_3(mixed_clients):
    """The paper's wire (float64, two rounds, every query, the uniform grid): per row and
    chain column a client uploads p(p+1)/2 Hessian and L CDF values, 8 bytes each; the
    transport counts them with each message's framing (names, dtypes, shapes)."""
    synth = FITSSynthesizer(
        "knn",
        seed=0,
        batch_size=10_000,
        upload_precision="float64",
        rounds=2,
        deduplicate=False,
        grid_points=None,
        design="all",  # the paper's design: p = d + 1
    ).fit(mixed_clients)
    before = list(synth.uploaded_bytes_)
    log = _record(synth)
    n = 300
    synth.sample(n)
    coord = synth.coordinator
    order = coord.schema.order
    per_row = sum(packed_size(j + 1) + coord.grids[c].size for j, c in enumerate(order) if j > 0)
    for k, b0 in enumerate(before):
        replies = [r for c, _, r in log if c == k]
        assert synth.uploaded_bytes_[k] - b0 == sum(r.nbytes() for r in replies)
        # the configure round that declares the rows is not the method's upload; the first
        # column's marginal (G values) was asked at fit, with the adaptive grids' round
        assert not [r for r in replies if r.type == "marginal"]
        data = sum(a.nbytes for r in replies if r.type != "configure" for a in r.arrays.values())
        assert data == 8 * n * per_row


def test_check_reply_refuses_extra_or_misshaped_arrays():
    req = Message("hessian", {"queries": np.zeros((4, 2))}, {"column": "y", "request": "r0"})
    good = Message("hessian", {"S": np.zeros((4, 6))})
    check_reply(req, good)
    with pytest.raises(ProtocolError, match="allows exactly"):
        check_reply(req, Message("hessian", {"S": np.zeros((4, 6)), "rows": np.zeros((9, 3))}))
    with pytest.raises(ProtocolError, match="shape"):
        check_reply(req, Message("hessian", {"S": np.zeros((9, 6))}))
    with pytest.raises(ProtocolError, match="config"):
        check_reply(req, Message("hessian", {"S": np.zeros((4, 6))}, {"leak": "1,2,3"}))
    with pytest.raises(ProtocolError, match="reply"):
        check_reply(req, Message("cdf", {"F": np.zeros((4, 3))}))


def test_design_sets_the_hessian_size_and_is_checked(mixed_clients):
    """config ``design`` (covariate positions): p = 1 + their number, for the reply
    check and the site; a malformed design is refused by name."""
    from fits.federation.client import FITSClient
    from fits.federation.coordinator import Coordinator
    from fits.federation.protocol import design_covariates
    from fits.federation.transport import InProcessTransport

    q = {"queries": np.zeros((4, 3))}
    req = Message("hessian", q, {"column": "y", "request": "r0", "design": "0,2"})
    check_reply(req, Message("hessian", {"S": np.zeros((4, 6))}))  # p = 3
    with pytest.raises(ProtocolError, match="shape"):
        check_reply(req, Message("hessian", {"S": np.zeros((4, 10))}))  # p = 4: refused
    assert design_covariates({"design": ""}, 3).tolist() == []
    assert design_covariates({}, 3) is None
    for bad in ("0,0", "2,1", "3", "-1", "a"):
        with pytest.raises(ProtocolError, match="design"):
            design_covariates({"design": bad}, 3)
    # a site refuses a malformed design before answering anything
    tables = [t[["b", "x", "o", "y"]] for t in mixed_clients]
    clients = [FITSClient(t, f"site{k}") for k, t in enumerate(tables)]
    coord = Coordinator(InProcessTransport(clients))
    coord.setup(kinds={"b": "nominal", "o": "ordinal"}, rules=False)
    coord.configure(0)
    bad_req = Message(
        "hessian", q, {"column": "y", "request": "r1", "scheme": "own", "design": "0,5"}
    )
    with pytest.raises(ProtocolError, match="design"):
        clients[0].handle(bad_req)


class _Echo:
    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[Message] = []

    def handle(self, message: Message) -> Message:
        self.seen.append(message)
        return Message("setup", {"n_rows": np.array([len(self.name)])}, {"description": "{}"})


def test_exchange_is_one_round_of_one_type_in_client_order():
    from fits.federation.transport import InProcessTransport

    clients = [_Echo("a"), _Echo("bb"), _Echo("ccc")]
    transport = InProcessTransport(clients)
    msgs = [Message("setup", config={"declared": str(k)}) for k in range(3)]
    replies = transport.exchange(msgs)
    assert [int(r.arrays["n_rows"][0]) for r in replies] == [1, 2, 3]
    assert [c.seen[0].config["declared"] for c in clients] == ["0", "1", "2"]
    assert all(b > 0 for b in transport.uploaded_bytes)
    with pytest.raises(ValueError, match="needs 3 messages"):
        transport.exchange(msgs[:2])
    with pytest.raises(ValueError, match="one type"):
        transport.exchange([msgs[0], msgs[1], Message("marginal", config={"grid_size": 3})])
