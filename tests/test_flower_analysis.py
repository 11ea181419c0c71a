"""Federated model fitting on Flower (issues #14, #15): the GLMs under mu-GDP and FedLSA
through the ClientApp, with a fresh site per message, equal the in-process fits.

The first tests drive the ServerApp's transport against the ClientApp's handler through
a stand-in for Flower's Grid that passes each site's ``context.state`` through Flower's
own serialization between messages (what a SuperNode does for a ClientApp process).  The
tests marked ``flower`` start a real SuperLink and SuperNodes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")

from flwr.app import Context, RecordDict  # noqa: E402
from flwr.common.serde import recorddict_from_proto, recorddict_to_proto  # noqa: E402

from fits.analysis.glm import fit_glm  # noqa: E402
from fits.analysis.lsa import fedlsa  # noqa: E402
from fits.deploy.flower import RunStopped, _handle, site_seed  # noqa: E402
from fits.deploy.flower_launch import die_with_parent  # noqa: E402
from fits.federation.protocol import ProtocolError  # noqa: E402
from fits.flower_app import run_task  # noqa: E402
from fits.io import read_table  # noqa: E402

NAMES = ("site-a", "site-b", "site-c")  # in name order: the Flower transport's order


@pytest.fixture(autouse=True)
def _task_identity(monkeypatch):
    """What Flower sets in a ServerApp process before messages are created."""
    from flwr.supercore.task_identity import TaskIdentity

    for attr, value in (("_run_id", 1), ("_node_id", 1), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, attr, value)


class SerializingGrid:
    """Flower's Grid interface, answering with the ClientApp handler in this process.

    Each message gets a new Context whose state is decoded from the bytes the previous
    message's state was encoded to, as a SuperNode hands a new ClientApp process its
    context; nothing else survives from one message to the next.
    """

    def __init__(self, node_configs, run_config=None):
        self.run_config = dict(run_config or {"task": "analyze"})
        self.nodes = {2000 + 11 * k: cfg for k, cfg in enumerate(node_configs)}
        self.states = {n: recorddict_to_proto(RecordDict()).SerializeToString() for n in self.nodes}
        self.replies = {}
        self.types: list[str] = []

    def get_node_ids(self):
        return list(self.nodes)[::-1]

    def push_messages(self, messages):
        from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

        ids = []
        for msg in messages:
            mid = uuid.uuid4().hex
            msg.metadata.__dict__["_message_id"] = mid
            node = msg.metadata.dst_node_id
            proto = ProtoRecordDict()
            proto.ParseFromString(self.states[node])
            ctx = Context(1, node, self.nodes[node], recorddict_from_proto(proto), self.run_config)
            self.replies[mid] = _handle(msg, ctx)
            self.states[node] = recorddict_to_proto(ctx.state).SerializeToString()
            self.types.append(msg.metadata.message_type)
            ids.append(mid)
        return ids

    def pull_messages(self, message_ids):
        return [self.replies.pop(m) for m in message_ids if m in self.replies]


def _logistic_tables(sizes=(140, 90, 170), seed=3):
    rng = np.random.default_rng(seed)
    out = {}
    for name, n in zip(NAMES, sizes, strict=True):
        x1 = rng.normal(0, 1, n)
        x2 = rng.normal(5, 2, n)
        c = rng.choice(["a", "b", "c"], n)
        eta = 0.2 + 0.7 * x1 - 0.3 * (x2 - 5) / 2 + 0.4 * (c == "b")
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
        out[name] = pd.DataFrame({"x1": x1, "x2": x2, "c": c, "y": y})
    return out


@pytest.fixture(scope="module")
def glm_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("glm-sites")
    paths = {}
    for name, frame in _logistic_tables().items():
        paths[name] = folder / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


def _configs(paths, seed):
    """Node configs; site k gets child k of the user's seed, as in process."""
    return [
        {"data-path": str(p), "name": n, "seed": f"{seed}/{k}"}
        for k, (n, p) in enumerate(sorted(paths.items()))
    ]


def _tables(paths):
    return {n: read_table(p) for n, p in sorted(paths.items())}


def _flower_result(paths, spec, tmp_path, seed):
    grid = SerializingGrid(_configs(paths, seed))
    out = tmp_path / "result.json"
    config = {"task": "analyze", "analysis": json.dumps(spec), "output": str(out)}
    run_task(grid, config)
    return json.loads(out.read_text()), grid


GLM_CASES = [
    ("fednewton", {"mu": 1.0}),
    ("fedsgd", {"mu": 2.0, "K": 6}),
    ("fedhybrid", {"mu": 0.5, "K1": 4, "K2": 3}),
    ("fedavg", {"mu": 1.0, "K": 5, "R": 3}),
    ("fednewton", {}),
    ("newton", {}),
    ("newton", {"family": "poisson", "cov_type": "HC0"}),
]


@pytest.mark.parametrize(("method", "extra"), GLM_CASES)
def test_glm_over_flower_equals_in_process_bit_for_bit(glm_files, tmp_path, method, extra):
    options = {"target": "y", "family": "logistic", "seed": 7, **extra}
    spec = {"method": method, "options": options}
    got, grid = _flower_result(glm_files, spec, tmp_path, seed=7)
    expected = fit_glm(_tables(glm_files), method=method, **options).to_dict()
    assert got["params"] == expected["params"]  # bit for bit (JSON floats round-trip)
    assert got["clip"] == expected["clip"] and got["privacy"] == expected["privacy"]
    assert got["rounds"] == expected["rounds"]
    assert got["uploaded_bytes"] == expected["uploaded_bytes"]
    # without privacy the standard errors' round (glm_fisher) went through the ClientApp
    assert got["bse"] == expected["bse"] and got["conf_int"] == expected["conf_int"]
    assert (got["bse"] is None) == ("mu" in extra)
    assert ("query.fits_glm_fisher" in grid.types) == ("mu" not in extra)
    assert ("query.fits_glm_sums" in grid.types) == (method == "newton")
    # every message was answered by a site rebuilt from its file and its kept state
    assert len(grid.types) == 3 * expected["rounds"]


def test_a_site_of_na_alone_enters_a_glm_over_flower_with_its_label(tmp_path):
    """A site whose file writes 'NA' in every row of a feature, rebuilt from its file
    for every message: its rows enter the model with region 'NA' (a level, as another
    site holds it), and the fit equals the in-process one bit for bit."""
    rng = np.random.default_rng(5)
    paths = {}
    for name, n in (("mixed", 300), ("america", 200)):
        region = (
            np.full(n, "NA", dtype=object) if name == "america" else rng.choice(["NA", "EU"], n)
        )
        x = rng.normal(size=n)
        y = 0.5 + x + np.where(region == "NA", 1.5, 0.0) + rng.normal(size=n)
        paths[name] = tmp_path / f"{name}.csv"
        pd.DataFrame({"x": x.round(4), "region": region, "y": y.round(4)}).to_csv(
            paths[name], index=False
        )
    options = {"target": "y", "family": "linear", "features": ["x", "region"], "seed": 3}
    got, _ = _flower_result(paths, {"method": "newton", "options": options}, tmp_path, seed=3)
    expected = fit_glm(_tables(paths), method="newton", **options).to_dict()
    assert got["params"] == expected["params"]
    assert "region=NA" in expected["params"] and expected["params"]["region=NA"] > 1  # 1.5


def test_the_coordinator_logs_its_rounds_for_the_progress_bar(glm_files, tmp_path, capsys):
    """The ServerApp writes its fitting rounds in its log (``[fits] rounds 0/6`` ...
    ``6/6``), which ``fits analyze --flower`` draws as its bar; the result is the same."""
    from fits.deploy.flower_launch import PROGRESS, read_rounds

    options = {"target": "y", "family": "logistic", "seed": 7, "mu": 2.0, "K": 6}
    got, _ = _flower_result(glm_files, {"method": "fedsgd", "options": options}, tmp_path, 7)
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith(PROGRESS)]
    rounds = [read_rounds(x[len(PROGRESS) :]) for x in lines]
    assert rounds[0] == (0, 6) and rounds[-1] == (6, 6) and None not in rounds
    expected = fit_glm(_tables(glm_files), method="fedsgd", **options).to_dict()
    assert got["params"] == expected["params"]


def test_the_release_plan_and_noise_state_hold_across_processes(glm_files):
    """One release beyond the plan is refused, though each process rebuilds the site.

    And the noise continues the site's one stream: were it restarted from the seed in
    each process, two releases at the same theta would carry the same noise."""
    from fits.analysis.design import DesignSpec, schema_round, standardization_round
    from fits.deploy.flower import FlowerTransport
    from fits.federation.protocol import Message

    grid = SerializingGrid(_configs(glm_files, 7))
    transport = FlowerTransport(grid, grid.get_node_ids())
    schema, _ = schema_round(transport)
    spec = DesignSpec.from_schema(schema, "y", None)
    st = standardization_round(transport, spec)
    settings = json.dumps({"K": 2.0, "eta": 0.5})
    config = {"family": "logistic", "method": "fedsgd", "settings": settings, "tau1": 0.1}
    transport.broadcast(
        Message("glm_configure", {"means": st.means, "sds": st.sds}, {**config, "mu": 1.0})
    )
    request = Message(
        "glm_gradient", {"theta": np.zeros(spec.n_columns)}, {"stage": "fedsgd", "clip": 1.0}
    )
    first, second = ([r.arrays["g"] for r in transport.broadcast(request)] for _ in range(2))
    for a, b in zip(first, second, strict=True):
        assert not np.array_equal(a, b)  # the same gradient, fresh noise
    with pytest.raises(ProtocolError, match="no 'fedsgd' release left in the plan"):
        transport.broadcast(request)


def test_a_site_without_a_seed_draws_its_own_and_keeps_it(glm_files, tmp_path):
    configs = [{"data-path": str(p), "name": n} for n, p in sorted(glm_files.items())]
    results = []
    for _ in range(2):
        grid = SerializingGrid(configs)
        out = tmp_path / "r.json"
        spec = {"method": "fednewton", "options": {"target": "y", "mu": 1.0, "seed": 7}}
        run_task(grid, {"task": "analyze", "analysis": json.dumps(spec), "output": str(out)})
        results.append(json.loads(out.read_text())["params"])
    # fresh entropy per run: the noise differs between runs, and neither is the seeded fit
    assert results[0] != results[1]
    seeded = fit_glm(_tables(glm_files), "y", method="fednewton", mu=1.0, seed=7).to_dict()
    assert seeded["params"] not in results


def test_site_seed_is_the_in_process_child():
    a = np.random.SeedSequence(11).spawn(4)[3]
    np.testing.assert_array_equal(site_seed("11/3").generate_state(4), a.generate_state(4))
    np.testing.assert_array_equal(
        site_seed(" 11 ").generate_state(4), np.random.SeedSequence(11).generate_state(4)
    )
    with pytest.raises(ValueError, match="write an integer, or ENTROPY/INDEX"):
        site_seed("eleven")


def test_a_site_error_in_an_analysis_names_the_site(tmp_path):
    frames = _logistic_tables()
    frames["site-b"]["y"] = frames["site-b"]["y"] + 3  # not 0/1 at one site
    paths = {}
    for name, frame in frames.items():
        paths[name] = tmp_path / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    spec = {"method": "fedsgd", "options": {"target": "y", "K": 2}}
    with pytest.raises(RunStopped, match=r"site-b.*the run stopped and no output was written"):
        _flower_result(paths, spec, tmp_path, seed=1)
    assert not (tmp_path / "result.json").exists()


def test_an_analysis_message_before_its_setup_is_refused(glm_files):
    from fits.deploy.flower import FlowerTransport
    from fits.federation.protocol import Message

    grid = SerializingGrid(_configs(glm_files, 7))
    transport = FlowerTransport(grid, grid.get_node_ids())
    with pytest.raises(ProtocolError, match="glm_configure before the moments round"):
        transport.broadcast(Message("glm_configure", {"means": np.zeros(2), "sds": np.ones(2)}, {}))


# ------------------------------------------------------------------ FedLSA
def _linear_tables(sizes=(300, 200, 260), seed=5):
    rng = np.random.default_rng(seed)
    out = {}
    for k, (name, n) in enumerate(zip(NAMES, sizes, strict=True)):
        x1 = rng.normal(k * 0.5, 1, n)
        c = rng.choice(["p", "q"], n)
        y = 1.0 + 2.0 * x1 - 0.5 * (c == "q") + rng.normal(0, 1, n)
        out[name] = pd.DataFrame({"x1": x1, "c": c, "y": y})
    return out


@pytest.fixture(scope="module")
def lsa_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lsa-sites")
    paths = {}
    for name, frame in _linear_tables().items():
        paths[name] = folder / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


@pytest.mark.parametrize(
    "extra",
    [
        {"sampling": "without_replacement"},
        {"sampling": "with_replacement"},
        {"regime": "one_pass", "multipliers": "shared"},
    ],
)
def test_fedlsa_over_flower_equals_in_process_bit_for_bit(lsa_files, tmp_path, extra):
    options = {"target": "y", "rounds": 6, "local_steps": 5, "n_bootstrap": 30, "seed": 3,
               **extra}  # fmt: skip
    spec = {"method": "fedlsa", "options": options, "ci": 0.9}
    got, grid = _flower_result(lsa_files, spec, tmp_path, seed=0)
    res = fedlsa(_tables(lsa_files), **options)
    expected = res.to_dict(1.0 - 0.9)  # the alpha run_analysis derives from ci = 0.9
    assert got == json.loads(json.dumps(expected))  # every number, bit for bit
    # each round carries the M + 1 = 31 parameter vectors in one message per site
    assert grid.types.count("query.fits_lsa_round") == 3 * 6
    assert got["rounds"] == 6 + 4


def test_weighted_fedlsa_over_flower_equals_in_process_bit_for_bit(tmp_path):
    """Prior weights and an offset travel in the design spec; each site applies them
    to its own rows when it replays lsa_setup for every message."""
    rng = np.random.default_rng(8)
    paths = {}
    for name, frame in _linear_tables().items():
        paths[name] = tmp_path / f"{name}.csv"
        n = len(frame)
        frame.assign(w=rng.uniform(0.0, 3.0, n), o=rng.normal(size=n)).to_csv(
            paths[name], index=False
        )
    options = {"target": "y", "rounds": 6, "local_steps": 5, "n_bootstrap": 30, "seed": 3,
               "features": ["x1", "c"], "weights": "w", "offset": "o"}  # fmt: skip
    spec = {"method": "fedlsa", "options": options, "ci": 0.9}
    got, _ = _flower_result(paths, spec, tmp_path, seed=0)
    res = fedlsa(_tables(paths), **options)
    assert got == json.loads(json.dumps(res.to_dict(1.0 - 0.9)))
    assert got["weights"] == "w" and [c["name"] for c in got["coefficients"]] == [
        "(intercept)", "x1", "c=q"]  # fmt: skip
    plain = fedlsa(_tables(paths), **{**options, "weights": None, "offset": None})
    assert np.abs(plain.coef_ - res.coef_).max() > 0.05


# ------------------------------------------------------------------ real processes
FITS = str(Path(sys.executable).with_name("fits"))


def _analyze(files, out, *args):
    return subprocess.run(
        [FITS, "analyze", *map(str, files), "--out", str(out), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        preexec_fn=die_with_parent(),  # a killed test run takes its federation with it
    )


@pytest.mark.flower
@pytest.mark.slow  # about 100 s on 2 cores: 7 rounds of Flower ClientApp processes
def test_fits_analyze_on_flower_equals_in_process_fednewton_private(glm_files, tmp_path):
    files = [p for _, p in sorted(glm_files.items())]
    args = ["--target", "y", "--method", "fednewton", "--mu", "1", "--seed", "4"]
    local = _analyze(files, tmp_path / "in-process.json", *args)
    assert local.returncode == 0, local.stderr
    net = _analyze(files, tmp_path / "flower.json", *args, "--flower")
    assert net.returncode == 0, net.stderr[-3000:]
    a = json.loads((tmp_path / "in-process.json").read_text())
    b = json.loads((tmp_path / "flower.json").read_text())
    assert a == b  # bit for bit: coefficients, clip, privacy spent, rounds, bytes
    assert b["privacy"] is not None  # mu = 1 was spent
    assert "x1" in net.stdout and "result:" in net.stdout  # the summary, as in process


@pytest.mark.flower
@pytest.mark.slow  # about 100 s on 2 cores
def test_fits_analyze_fedlsa_on_flower_equals_in_process(lsa_files, tmp_path):
    files = [p for _, p in sorted(lsa_files.items())]
    args = ["--target", "y", "--method", "fedlsa", "--family", "linear", "--rounds", "3",
            "--local-steps", "4", "--bootstrap", "40", "--seed", "2", "--ci", "0.9"]  # fmt: skip
    local = _analyze(files, tmp_path / "in-process.json", *args)
    assert local.returncode == 0, local.stderr
    net = _analyze(files, tmp_path / "flower.json", *args, "--flower")
    assert net.returncode == 0, net.stderr[-3000:]
    a = json.loads((tmp_path / "in-process.json").read_text())
    b = json.loads((tmp_path / "flower.json").read_text())
    assert a == b  # bit for bit, the 41 sequences of every round included


@pytest.mark.flower
@pytest.mark.slow
def test_fits_analyze_on_flower_names_a_failing_site(tmp_path):
    frames = _logistic_tables()
    frames["site-b"]["y"] = frames["site-b"]["y"] + 3  # not 0/1 at one site
    files = []
    for name, frame in frames.items():
        files.append(tmp_path / f"{name}.csv")
        frame.to_csv(files[-1], index=False)
    out = tmp_path / "r.json"
    res = _analyze(files, out, "--target", "y", "--method", "fedsgd", "-K", "2", "--flower")
    assert res.returncode == 1, res.stderr[-2000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and "site-b" in last and "Traceback" not in res.stderr
    assert not out.exists()


@pytest.fixture(scope="module")
def weighted_files(tmp_path_factory):
    from test_glm_offset import TABLES

    folder = tmp_path_factory.mktemp("weighted-sites")
    paths = {}
    for name, frame in TABLES.items():
        paths[name] = folder / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("newton", {"family": "poisson", "exposure": "e", "weights": "w"}),
        ("fedsgd", {"family": "poisson", "offset": "a", "mu": 2.0, "K": 6, "clip": 3.0}),
        ("fednewton", {"family": "linear", "weights": "w", "max_weight": 3.0, "mu": 1.0}),
    ],
)
def test_offsets_and_weights_over_flower_equal_in_process(weighted_files, tmp_path, method, extra):
    """The offsets and weights reach each ClientApp, which rebuilds its site from its
    file and kept state: the same numbers as in process, bit for bit."""
    import warnings

    target = "z" if extra["family"] == "linear" else "y"
    options = {"target": target, "features": ["a", "g"], "seed": 7, **extra}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = {"method": method, "options": options}
        got, _ = _flower_result(weighted_files, spec, tmp_path, seed=7)
        expected = fit_glm(_tables(weighted_files), method=method, **options).to_dict()
    assert got["params"] == expected["params"] and got["bse"] == expected["bse"]
    assert got["weights"] == extra.get("weights") and got["offset"] == extra.get("offset")
