"""Loose ends of ``fits federate`` found by QA: a site's ``--policy`` file named in its
errors, a site's bounded wait for its SuperLink, ``--schema`` checked against the site
tables before Flower starts, SuperNodes restarted on a port taken at start, and
``--max-tries`` carried to the coordinator.  No Flower process runs here unless a test
is marked ``flower``: stand-ins fail a test that gets as far as starting one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process


def _table(path: Path, n: int = 40, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.normal(40, 9, n).round(1),
            "sex": rng.choice(["f", "m"], n),
            "hours": rng.integers(0, 5, n),
        }
    )
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def sites(tmp_path: Path) -> list[Path]:
    return [_table(tmp_path / "a.csv", seed=1), _table(tmp_path / "b.csv", seed=2)]


@pytest.fixture
def no_flower(monkeypatch):
    """Commands run without Flower (its launch module stands in, importable without it);
    a test fails if one gets as far as starting a Flower process or submitting a run."""
    from fits.cli import federate
    from fits.deploy import flower_launch

    def never(*args, **kwargs):
        raise AssertionError("Flower was started")

    monkeypatch.setattr(federate, "_launch", lambda: flower_launch)
    monkeypatch.setattr(federate, "_exec", never)
    monkeypatch.setattr(federate, "run_local_federation", never)
    monkeypatch.setattr(flower_launch, "submit_run", never)


# ------------------------------------------------------------ 1. --policy's errors
def _bad_policies(folder: Path) -> dict[str, tuple[Path, str]]:
    """Policy files fits cannot use, and what the error must say of each."""
    texts = {
        "not-json": ("{max_grid_size: 10", "not valid JSON"),
        "unknown-key": ('{"min_efective_rows": 3}', "unknown field(s) ['min_efective_rows']"),
        "bad-value": ('{"below_floor": "skip"}', "below_floor must be one of"),
    }
    out = {}
    for name, (text, said) in texts.items():
        path = folder / f"{name}.json"
        path.write_text(text)
        out[name] = (path, said)
    out["missing"] = (folder / "missing.json", "no such file")
    return out


@pytest.mark.parametrize("case", ["not-json", "unknown-key", "bad-value", "missing"])
def test_a_site_policy_file_that_cannot_be_read_names_the_option(sites, tmp_path, no_flower, case):
    """fits federate site, fits federate local and fits benchmark say the same: the
    option, the file, what is wrong and the fix, in one line; exit 2, nothing written
    (fits federate site did not name --policy)."""
    path, said = _bad_policies(tmp_path)[case]
    out = tmp_path / "out.csv"
    commands = {
        "site": ("federate", "site", "--data", sites[0], "--superlink", "127.0.0.1:9093",
                 "--insecure", "--home", tmp_path / "home"),
        "local": ("federate", "local", *sites, "--rows", 5, "--out", out),
        "benchmark": ("benchmark", "--dataset", "simulation", "--out", tmp_path / "bench"),
    }  # fmt: skip
    for command, args in commands.items():
        res = fits_in_process(*args, "--policy", path)
        assert res.returncode == 2, (command, res.stderr)
        message = res.stderr.strip()
        assert message.count("\n") == 0 and "Traceback" not in message, (command, message)
        assert message.startswith("error: --policy "), (command, message)
        assert path.name in message and said in message, (command, message)
        if case != "missing":  # (a missing input: "no such file", as for every input)
            assert "leave --policy out for the default policy" in message, (command, message)
        assert not out.exists() and not (tmp_path / "bench").exists()
        assert not (tmp_path / "home").exists()


# ------------------------------------------- 2. a site's bounded wait for its SuperLink
def _closed_port() -> int:
    """A port of 127.0.0.1 where nothing listens (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _site_args(data: Path, superlink: str, home: Path) -> tuple:
    return ("federate", "site", "--data", data, "--superlink", superlink, "--insecure",
            "--home", home)  # fmt: skip


def test_the_supernode_waits_for_its_superlink_at_most_max_wait_time():
    """fits-flower-supernode with --max-wait-time first waits for the SuperLink's port,
    before Flower starts anything: exit UNREACHABLE_EXIT after that long (it retried
    without end), or on as soon as the port takes a connection."""
    import socket
    import threading
    import time

    from fits.deploy.flower_supernode import UNREACHABLE_EXIT, _wait_first

    port = _closed_port()
    args = ["--superlink", f"127.0.0.1:{port}", "--insecure", "--max-wait-time", "1"]
    started = time.monotonic()
    with pytest.raises(SystemExit) as stopped:
        _wait_first(args)
    assert stopped.value.code == UNREACHABLE_EXIT
    assert 0.9 < time.monotonic() - started < 5
    _wait_first(args[:3])  # no bound: Flower's own retries, without end

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def late() -> None:
        listener.bind(("127.0.0.1", port))
        listener.listen(8)

    timer = threading.Timer(1.0, late)
    timer.start()
    try:
        _wait_first(["--superlink", f"127.0.0.1:{port}", "--max-wait-time=20"])
    finally:
        timer.cancel()
        listener.close()


def test_a_site_says_why_its_supernode_ended(sites, tmp_path, monkeypatch):
    """fits federate site --connect-timeout (or FITS_CONNECT_TIMEOUT; default 600, 0:
    without end) bounds the SuperNode's wait (--max-wait-time); when it ends by itself,
    one line says why and what to check (exit 1)."""
    pytest.importorskip("flwr")  # supernode_command finds Flower's programs
    import typer

    from fits.cli import federate
    from fits.deploy.flower_supernode import UNREACHABLE_EXIT

    started: list[list[str]] = []
    ends = iter([0, 0, 0, UNREACHABLE_EXIT, 1, 130])

    def run(cmd, home):
        started.append(cmd)
        raise typer.Exit(next(ends))

    monkeypatch.setattr(federate, "_exec", run)
    args = _site_args(sites[0], "coord:9093", tmp_path / "home")

    def bound() -> str | None:
        cmd = started[-1]
        return cmd[cmd.index("--max-wait-time") + 1] if "--max-wait-time" in cmd else None

    assert fits_in_process(*args).returncode == 0 and bound() == "600"
    res = fits_in_process(*args, env={"FITS_CONNECT_TIMEOUT": "30"})
    assert res.returncode == 0 and bound() == "30"
    assert "waiting for it up to 30 s, --connect-timeout" in res.stderr
    assert fits_in_process(*args, "--connect-timeout", "0").returncode == 0 and bound() is None
    res = fits_in_process(*args, "--connect-timeout", "5")
    assert res.returncode == 1, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: a: the SuperLink at coord:9093 did not answer within 5 s;")
    assert "--connect-timeout SECONDS (0: wait forever)" in last
    res = fits_in_process(*args, "--connect-timeout", "5")
    assert res.returncode == 1, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: a: the SuperNode stopped (exit code 1): see its log above")
    assert "reach the SuperLink at coord:9093 within --connect-timeout 5 s" in last
    res = fits_in_process(*args)  # stopped by Ctrl-C: no error line
    assert res.returncode == 130 and "error:" not in res.stderr


@pytest.mark.flower
def test_a_supernode_that_cannot_reach_its_superlink_stops_with_the_site(sites, tmp_path):
    """Real processes: a SuperLink whose port takes no connection stops the site after
    --connect-timeout seconds, before Flower starts; past that check (a port that takes
    connections and closes them, as no SuperLink does) Flower's SuperNode gives up after
    as long (--max-wait-time). Each time the site exits 1 with one line, and no process
    it started is left."""
    pytest.importorskip("flwr")
    import os
    import socket
    import subprocess
    import threading
    import uuid

    from test_flower import _marked

    from conftest import FITS

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)

    def refuse() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            conn.close()

    threading.Thread(target=refuse, daemon=True).start()
    marker = f"FITS_SITE_TEST={uuid.uuid4().hex}"
    env = {**os.environ, marker.split("=")[0]: marker.split("=")[1]}
    address = f"127.0.0.1:{server.getsockname()[1]}"
    args = _site_args(sites[0], address, tmp_path / "home")
    closed = _site_args(sites[0], f"127.0.0.1:{_closed_port()}", tmp_path / "home")
    try:
        for site in (closed, args):
            res = subprocess.run(
                [FITS, *map(str, site), "--connect-timeout", "3", "--port", str(_closed_port())],
                env=env,
                capture_output=True,
                text=True,
                timeout=90,
            )
            assert res.returncode == 1, res.stderr[-3000:]
            assert not _marked(marker), "a process of the site was left running"
            if site is closed:
                last = res.stderr.strip().splitlines()[-1]
                assert "did not answer within 3 s; check that it runs" in last, last
                assert "Starting Flower SuperNode" not in res.stderr  # nothing started
        last = res.stderr.strip().splitlines()[-1]  # the port that closes connections
        assert last.startswith("error: a: the SuperNode stopped (exit code 1)"), last
        assert f"the SuperLink at {address} within --connect-timeout 3 s" in last
        assert "Exit Code: 305" in res.stderr
    finally:
        server.close()
        for pid in _marked(marker):
            os.kill(pid, 9)


# ------------------------------------- 3. columns named in options, before Flower starts
def test_a_schema_that_names_other_columns_is_refused_before_flower_starts(
    sites, tmp_path, no_flower
):
    """fits federate local --schema whose columns are not the sites' was reported by
    the run's setup round, once Flower was up (about 48 s); now before anything starts,
    with fits synthesize's message (the same check, cli.main._check_schema_columns)."""
    import json

    schema = tmp_path / "schema.json"
    res = fits_in_process("schema", *sites, "--out", schema)
    assert res.returncode == 0, res.stderr
    renamed = schema.read_text().replace('"hours"', '"hourz"')
    assert renamed != schema.read_text()
    schema.write_text(renamed)
    out = tmp_path / "out.csv"
    said = {}
    for command in (("federate", "local"), ("synthesize",)):
        res = fits_in_process(*command, *sites, "--rows", 5, "--out", out, "--schema", schema)
        assert res.returncode == 1, (command, res.stderr)
        said[command[0]] = res.stderr.strip().splitlines()[-1]
    assert said["federate"] == said["synthesize"]
    assert "it names column(s) ['hourz'] that a's table does not have" in said["federate"]
    assert "column(s) ['hours'] of a's table are not in the schema" in said["federate"]
    assert not out.exists()

    # a schema without a column --drop leaves out passes the check (and Flower would start)
    doc = json.loads(renamed.replace('"hourz"', '"hours"'))
    doc["columns"] = [c for c in doc["columns"] if c["name"] != "sex"]
    doc["order"] = [c for c in doc["order"] if c != "sex"]
    schema.write_text(json.dumps(doc))
    res = fits_in_process("federate", "local", *sites, "--rows", 5, "--out", out,
                          "--schema", schema, "--drop", "sex")  # fmt: skip
    assert "Flower was started" in res.stderr, res.stderr


# ------------------------------------ 4. a SuperNode's local port taken as it starts
linux = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="a port's owner is read from /proc (Linux)"
)

#: A stand-in for a Flower server: listens on port argv[1] (exits "address already in
#: use" when it is taken, as Flower's do) until stopped.
_LISTEN = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen()\n"
    "time.sleep(600)\n"
)


@pytest.fixture
def stand_ins(monkeypatch):
    """LocalFederation's processes are stand-ins that listen where Flower's would; the
    worker commands each site got are recorded."""
    import sys

    from fits.deploy import flower_launch

    workers: dict[str, int] = {}

    def listener(*args, port, **options):
        return [sys.executable, "-c", _LISTEN, str(port)]

    def worker(port, parent_pid=None):
        workers[str(parent_pid)] = port
        return [sys.executable, "-c", "import time; time.sleep(600)"]

    monkeypatch.setattr(flower_launch, "superlink_command", listener)
    monkeypatch.setattr(flower_launch, "supernode_command", listener)
    monkeypatch.setattr(flower_launch, "worker_command", worker)
    return workers


@pytest.fixture
def held():
    """A port of 127.0.0.1 another process (this one) listens on."""
    import socket

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@linux
def test_a_supernode_whose_port_is_taken_starts_again_on_another(
    sites, tmp_path, stand_ins, held, monkeypatch
):
    """The SuperLink was started again on a port taken between the probe and the bind
    (PORT_TRIES); a SuperNode was not (the run stopped, saying to run again). Now it
    is, and its ClientApp process gets the new port; with every port taken, the error
    names the site and the ports, and nothing is left running."""
    from fits.deploy import flower_launch
    from fits.deploy.flower_launch import FederationError, LocalFederation

    real = flower_launch._free_port
    picks = iter([real(), held])  # the SuperLink's, then site a's: taken
    monkeypatch.setattr(flower_launch, "_free_port", lambda: next(picks, None) or real())
    paths = {"a": sites[0], "b": sites[1]}
    with LocalFederation(paths, workdir=tmp_path / "work") as fed:
        port = fed.site_ports["a"]
        assert port != held
        assert flower_launch._listener(port, fed.processes["site-a"]) == "mine"
        assert stand_ins[str(fed.processes["site-a"].pid)] == port  # the worker's port
        assert len(stand_ins) == 2
        procs = list(fed.processes.values())
    assert all(p.poll() is not None for p in procs)

    picks = iter([real()])  # the SuperLink's; then every port is the taken one
    monkeypatch.setattr(flower_launch, "_free_port", lambda: next(picks, None) or held)
    monkeypatch.setattr(flower_launch, "PORT_TRIES", 2)
    fed = LocalFederation({"a": sites[0]}, workdir=tmp_path / "work2")
    with pytest.raises(FederationError) as caught:
        fed.start(timeout=20)
    text = str(caught.value)
    assert "the SuperNode of site 'a' could not listen on 127.0.0.1" in text
    assert f"({held}, {held})" in text and "try again" in text
    assert not fed.processes


# ------------------------------------------------ 5. --max-tries over Flower
def _matching_sites(folder: Path) -> tuple[list[Path], Path]:
    """Two sites where b = one is rare given a = y (10 %), and a known table asking
    for that combination (b after c in the chain: matched by drawing)."""
    rng = np.random.default_rng(0)
    n = 300
    a = rng.choice(["x", "y"], n)
    b = np.where(a == "x", rng.random(n) < 0.9, rng.random(n) < 0.1).astype(int)
    c = rng.normal(size=n) + 3 * b
    frame = pd.DataFrame({"a": a, "c": c, "b": np.where(b == 1, "one", "zero")})
    sites = [folder / "a.csv", folder / "b.csv"]
    frame.iloc[:150].to_csv(sites[0], index=False)
    frame.iloc[150:].to_csv(sites[1], index=False)
    known = folder / "known.csv"
    pd.DataFrame({"a": ["y"] * 100, "b": ["one"] * 100}).to_csv(known, index=False)
    return sites, known


def test_max_tries_over_flower_stops_as_in_process(tmp_path, monkeypatch):
    """The run config's max-tries reaches the coordinator's matching draws: at one
    draw per row the rare combination stops the run with fits synthesize --max-tries
    1's message (there was no bound to set: always the default, 100)."""
    pytest.importorskip("flwr")
    from flwr.supercore.task_identity import TaskIdentity
    from test_flower import FakeGrid

    for attr in ("_run_id", "_node_id", "_task_id"):  # as Flower sets them in a ServerApp
        monkeypatch.setattr(TaskIdentity, attr, 1)

    from fits.deploy.flower import RunStopped
    from fits.flower_app import run_synthesis

    sites, known = _matching_sites(tmp_path)
    out = tmp_path / "out.csv"
    res = fits_in_process("synthesize", *sites, "--known", known, "--out", out,
                          "--max-tries", 1, "--no-rules")  # fmt: skip
    assert res.returncode == 1, res.stderr
    expected = res.stderr.strip().splitlines()[-1].removeprefix("error: ")
    assert "in 1 draws per row" in expected and expected.startswith(f"--known '{known}'")
    nodes = [{"data-path": str(p), "name": p.stem, "kernel": "knn"} for p in sites]
    config = {"output": str(out), "rows": 0, "known": str(known), "max-tries": 1, "rules": False}
    with pytest.raises(RunStopped) as caught:
        run_synthesis(FakeGrid(nodes), config)
    assert str(caught.value).startswith(expected + ";"), str(caught.value)
    assert not out.exists()


def test_federate_takes_max_tries_with_known_only(tmp_path, monkeypatch, no_flower):
    """fits federate run / local --max-tries N: the same name, default and checks as
    fits synthesize's (refused without --known), carried in the run config."""
    from fits.cli import federate, main, options
    from fits.synthesizer import DEFAULT_MAX_TRIES

    assert options.MAX_TRIES == main.MAX_TRIES == DEFAULT_MAX_TRIES
    sites, known = _matching_sites(tmp_path)
    out = tmp_path / "out.csv"
    for command in (("local", *sites), ("run", "--superlink", "127.0.0.1:9093", "--insecure")):
        res = fits_in_process("federate", *command, "--rows", 5, "--out", out, "--max-tries", 3)
        assert res.returncode == 2, res.stderr
        assert "--max-tries is for --known (the draws that match its values)" in res.stderr
        res = fits_in_process("federate", *command, "--known", known, "--out", out,
                              "--max-tries", 0)  # fmt: skip
        assert res.returncode == 2 and "--max-tries" in res.stderr
    configs: list[dict] = []

    def record(launch, sites, config, **options):
        configs.append(dict(config))
        raise SystemExit(0)

    monkeypatch.setattr(federate, "run_local_federation", record)
    local = ("federate", "local", *sites, "--known", known, "--out", out)
    fits_in_process(*local, "--max-tries", 7)
    fits_in_process(*local)
    fits_in_process("federate", "local", *sites, "--rows", 5, "--out", out)
    assert [c["max-tries"] for c in configs] == [7, DEFAULT_MAX_TRIES, 0]
