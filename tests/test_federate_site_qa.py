"""``fits federate site``, ``run`` and ``superlink`` as a data steward and the
coordinator's operator use them across machines: what they got wrong before Flower
started (no Flower process runs here: a stand-in fails the test if the command gets as
far as starting one), and the coordinator's wait for its sites."""

from __future__ import annotations

import json
import stat
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("flwr")

from conftest import fits_in_process  # noqa: E402


@pytest.fixture
def site_csv(tmp_path: Path) -> Path:
    path = tmp_path / "site-a.csv"
    pd.DataFrame({"x": [float(i % 7) for i in range(40)], "g": ["u", "v"] * 20}).to_csv(
        path, index=False
    )
    return path


@pytest.fixture
def no_flower(monkeypatch):
    """Fail if a command starts a Flower process or submits a run."""
    from fits.cli import federate
    from fits.deploy import flower_launch

    def never(*args, **kwargs):
        raise AssertionError("Flower was started")

    monkeypatch.setattr(federate, "_exec", never)
    monkeypatch.setattr(flower_launch, "submit_run", never)


def _site(data: Path, *args: object):
    return fits_in_process(
        "federate", "site", "--data", data, "--superlink", "127.0.0.1:9093", *args
    )


def test_site_audit_log_that_is_the_data_file_is_refused(site_csv, no_flower):
    before = site_csv.read_bytes()
    res = _site(site_csv, "--insecure", "--audit", site_csv)
    assert res.returncode == 2, res.stderr
    assert "--audit" in res.stderr and "site's data" in res.stderr
    assert "Traceback" not in res.stderr
    assert site_csv.read_bytes() == before


def test_site_audit_log_that_is_the_policy_or_a_folder_is_refused(site_csv, tmp_path, no_flower):
    policy = tmp_path / "policy.json"
    policy.write_text('{"min_effective_rows": 5}')
    res = _site(site_csv, "--insecure", "--policy", policy, "--audit", policy)
    assert res.returncode == 2, res.stderr
    assert "site policy" in res.stderr
    res = _site(site_csv, "--insecure", "--audit", tmp_path)
    assert res.returncode == 2, res.stderr
    assert "is a folder" in res.stderr


@pytest.mark.parametrize("content", [None, "hello\n", "folder"])
def test_site_ca_that_is_missing_or_no_pem_is_refused(site_csv, tmp_path, no_flower, content):
    ca = tmp_path / "ca.pem"
    if content == "folder":
        ca.mkdir()
    elif content is not None:
        ca.write_text(content)
    res = _site(site_csv, "--ca", ca)
    assert res.returncode == 2, res.stderr
    assert "--ca" in res.stderr and "Traceback" not in res.stderr


def test_site_ca_that_is_a_certificate_passes(site_csv, tmp_path, monkeypatch):
    from fits.cli import federate
    from fits.deploy.flower_launch import make_test_certificates

    _, _, ca = make_test_certificates(tmp_path / "certs")
    started: list[list[str]] = []

    def record(cmd, home):
        started.append(cmd)

    monkeypatch.setattr(federate, "_exec", record)
    res = _site(site_csv, "--ca", ca, "--port", "0")
    assert res.returncode == 0, res.stderr
    assert started and str(ca) in started[0]
    assert "connecting to the SuperLink at 127.0.0.1:9093" in res.stderr
    assert "Ctrl-C" in res.stderr


@pytest.mark.parametrize(
    "address", ["coordinator.example.org", "http://coord:9093", "coord:99999", "::1:9093", ""]
)
def test_site_and_run_refuse_an_address_flower_cannot_use(site_csv, tmp_path, no_flower, address):
    res = fits_in_process(
        "federate", "site", "--data", site_csv, "--superlink", address, "--insecure"
    )
    assert res.returncode == 2, res.stderr
    assert "--superlink" in res.stderr
    res = fits_in_process(
        "federate", "run", "--superlink", address, "--insecure", "--rows", 5,
        "--out", tmp_path / "o.csv",
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "--superlink" in res.stderr


@pytest.mark.parametrize("content", [None, "not a certificate\n"])
def test_run_ca_that_is_missing_or_no_pem_is_a_usage_error(tmp_path, no_flower, content):
    ca = tmp_path / "ca.pem"
    if content is not None:
        ca.write_text(content)
    res = fits_in_process(
        "federate", "run", "--superlink", "coord:9093", "--ca", ca, "--rows", 5,
        "--out", tmp_path / "o.csv",
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "--ca" in res.stderr and "refused the run" not in res.stderr


def test_superlink_tls_files_must_be_pem(tmp_path, no_flower):
    from fits.deploy.flower_launch import make_test_certificates

    cert, key, ca = make_test_certificates(tmp_path / "certs")
    junk = tmp_path / "junk.key"
    junk.write_text("junk\n")
    for files, named in (((cert, junk, ca), "junk.key"), ((key, key, ca), "server.key")):
        res = fits_in_process("federate", "superlink", "--port", "0", "--tls", *files)
        assert res.returncode == 2, res.stderr
        assert "--tls" in res.stderr and named in res.stderr and "PEM" in res.stderr


# ------------------------------------------------------------------ the coordinator
class _EmptyGrid:
    """A Flower grid no SuperNode ever connects to."""

    def get_node_ids(self):
        return []


def test_no_sites_connected_stops_the_run_with_what_to_do(tmp_path, capsys, monkeypatch):
    from fits.deploy import flower
    from fits.flower_app import run_synthesis

    monkeypatch.setattr(flower, "WAIT_REPORT_INTERVAL", 0.4)
    config = {"output": str(tmp_path / "o.csv"), "rows": 5, "min-sites": 2, "timeout": 1.2}
    with pytest.raises(flower.RunStopped) as info:
        run_synthesis(_EmptyGrid(), config)
    message = str(info.value)
    assert "only 0 of the 2 sites" in message and flower.STOPPED in message
    assert "fits federate site" in message and "--sites" in message
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith(flower.PROGRESS)]
    assert len(lines) >= 2 and "waiting for sites: 0 of 2 connected" in lines[0]
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("where", ["missing folder", "folder", "read-only"])
def test_an_output_the_coordinator_cannot_write_stops_the_run_before_the_wait(tmp_path, where):
    from fits.deploy import flower
    from fits.flower_app import run_synthesis

    out = tmp_path / "nodir" / "o.csv"
    if where == "folder":
        out = tmp_path / "o.csv"
        out.mkdir()
    elif where == "read-only":
        out = tmp_path / "o.csv"
        out.write_text("keep me\n")
        out.chmod(stat.S_IRUSR)
    config = {"output": str(out), "rows": 5, "min-sites": 1, "timeout": 30.0}
    start = time.monotonic()
    with pytest.raises(flower.RunStopped) as info:
        run_synthesis(_EmptyGrid(), config)
    assert time.monotonic() - start < 5  # not after waiting for the sites
    assert "--out" in str(info.value) and flower.STOPPED in str(info.value)
    if where == "read-only":
        assert out.read_text() == "keep me\n"


def test_audit_that_is_the_schema_stops_the_run(tmp_path):
    from fits.deploy import flower
    from fits.flower_app import run_synthesis

    schema = tmp_path / "schema.json"
    schema.write_text("{}")
    config = {
        "output": str(tmp_path / "o.csv"),
        "audit": str(schema),
        "schema": str(schema),
        "rows": 5,
        "timeout": 30.0,
    }
    with pytest.raises(flower.RunStopped) as info:
        run_synthesis(_EmptyGrid(), config)
    assert "audit" in str(info.value) and "schema" in str(info.value)
    assert schema.read_text() == "{}"


def test_a_bad_run_config_value_stops_the_run_without_a_traceback():
    from fits.deploy import flower
    from fits.flower_app import run_synthesis

    with pytest.raises(flower.RunStopped) as info:
        run_synthesis(_EmptyGrid(), {"rows": "many", "timeout": 30.0})
    assert flower.STOPPED in str(info.value)


def test_progress_markers_agree():
    from fits.deploy import flower, flower_launch

    assert flower.PROGRESS == flower_launch.PROGRESS


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for flwr")
def test_the_waiting_lines_of_the_serverapps_log_reach_the_operator(tmp_path):
    """``fits federate run`` shows the ServerApp's "waiting for sites" lines while it
    follows the run's log (before, only "running" until the run ended)."""
    from fits.deploy import flower_launch

    flwr = tmp_path / "flwr"
    flwr.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = log ]; then\n'
        "  echo 'INFO : Start flwr-serverapp process'\n"
        "  echo '[fits] waiting for sites: 0 of 2 connected (0 s of at most 600 s)'\n"
        "  sleep 1.6\n"
        "  echo '[fits] waiting for sites: 1 of 2 connected (1 s of at most 600 s)'\n"
        "  sleep 1.6\n"
        "  exit 0\n"
        "fi\n"
        'if [ "$1" = ls ]; then echo \'{"runs": [{"status": "finished:completed"}]}\'; fi\n'
    )
    flwr.chmod(0o755)
    shown: list[str] = []
    log, status, _ = flower_launch._follow_run(
        str(flwr), 7, {"PATH": "/usr/bin:/bin"}, tmp_path, time.monotonic(), 60.0,
        poll=0.1, progress=shown.append,
    )  # fmt: skip
    assert status == "finished:completed"
    waiting = [s for s in shown if s.startswith("waiting for sites")]
    assert waiting == [
        "waiting for sites: 0 of 2 connected (0 s of at most 600 s)",
        "waiting for sites: 1 of 2 connected (1 s of at most 600 s)",
    ]


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [((), None, 3600.0), (("--run-timeout", "7200"), None, 7200.0), ((), "5000", 5000.0)],
)
def test_run_time_limit_can_be_raised(tmp_path, monkeypatch, args, env, expected):
    """``fits federate run`` stopped every run after an hour (submit_run's default),
    with no option to allow more: a large synthesis across machines could not finish."""
    from fits.deploy import flower_launch

    asked: list[float] = []

    def submit(superlink, config, **options):
        asked.append(options["timeout"])
        raise flower_launch.FederationError("stand-in: no run")

    monkeypatch.setattr(flower_launch, "submit_run", submit)
    res = fits_in_process(
        "federate", "run", "--superlink", "coord:9093", "--insecure", "--rows", 5,
        "--out", tmp_path / "o.csv", *args, env={"FITS_RUN_TIMEOUT": env},
    )  # fmt: skip
    assert res.returncode == 1 and "stand-in" in res.stderr, res.stderr
    assert asked == [expected]


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for flwr")
def test_a_run_past_its_time_limit_says_how_to_allow_more(tmp_path):
    from fits.deploy import flower_launch

    flwr = tmp_path / "flwr"
    flwr.write_text('#!/bin/sh\nif [ "$1" = log ]; then sleep 5; fi\n')
    flwr.chmod(0o755)
    with pytest.raises(flower_launch.RunTimeoutError) as info:
        flower_launch._follow_run(
            str(flwr), 7, {"PATH": "/usr/bin:/bin"}, tmp_path, time.monotonic(), 1.0, poll=0.1
        )
    assert "--run-timeout" in str(info.value) and "FITS_RUN_TIMEOUT" in str(info.value)
    # a FederationError, which names the run and its limit for the command's own words
    assert isinstance(info.value, flower_launch.FederationError)
    assert info.value.run_id == 7 and info.value.timeout == 1.0


@pytest.mark.parametrize(
    "args",
    [
        ("--kernel", "gaussian", "--bandwidth", "-1"),  # was a traceback
        ("--knn-budget", "-1"),  # was started; every request then failed at the site
        ("--bandwidth", "-0.5"),
    ],
)
def test_site_negative_kernel_numbers_are_usage_errors(site_csv, no_flower, args):
    res = _site(site_csv, "--insecure", *args)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("value", ["0", "-1"])
def test_run_round_timeout_must_be_positive(tmp_path, no_flower, value):
    res = fits_in_process(
        "federate", "run", "--superlink", "coord:9093", "--insecure", "--rows", 5,
        "--out", tmp_path / "o.csv", "--round-timeout", value,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "--round-timeout" in res.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for flwr")
@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_stopping_fits_federate_run_stops_the_run_at_the_superlink(tmp_path, stop):
    """Ctrl-C (or SIGTERM) of ``fits federate run`` left the run going at the SuperLink:
    its ServerApp waited for the sites and then wrote --out, with nobody watching."""
    from fits.deploy import flower_launch

    flwr = tmp_path / "flwr"
    stopped = tmp_path / "stopped"
    flwr.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = log ]; then sleep 30; fi\n'
        f'if [ "$1" = stop ]; then echo "$2" > {stopped}; fi\n'
    )
    flwr.chmod(0o755)
    shown: list[str] = []

    def interrupt() -> None:
        raise stop()

    with pytest.raises(stop):
        flower_launch._follow_run(
            str(flwr), 7, {"PATH": "/usr/bin:/bin"}, tmp_path, time.monotonic(), 60.0,
            poll=0.1, progress=shown.append, watch=interrupt,
        )  # fmt: skip
    assert stopped.read_text().strip() == "7"
    assert any("stopping run 7" in line for line in shown)


@pytest.mark.parametrize("k", ["100", "1e999"])
def test_a_site_smaller_than_its_own_floor_is_refused(site_csv, tmp_path, no_flower, k):
    """A site whose policy's min_effective_rows exceeds its rows (40 here) abstains from
    every request; it was started all the same."""
    policy = tmp_path / "policy.json"
    policy.write_text(f'{{"min_effective_rows": {k}}}')
    res = _site(site_csv, "--insecure", "--policy", policy)
    assert res.returncode == 1, res.stderr
    assert "40 rows" in res.stderr and "min_effective_rows" in res.stderr
    assert str(policy) in res.stderr


def test_a_pooled_floor_above_the_sites_rows_is_no_reason_to_refuse(
    site_csv, tmp_path, monkeypatch
):
    from fits.cli import federate

    started: list[list[str]] = []
    monkeypatch.setattr(federate, "_exec", lambda cmd, home: started.append(cmd))
    policy = tmp_path / "policy.json"
    policy.write_text('{"min_effective_rows": 100, "floor_scope": "pooled"}')
    res = _site(site_csv, "--insecure", "--policy", policy, "--port", "0")
    assert res.returncode == 0, res.stderr
    assert started


def test_run_reports_the_absolute_path_the_coordinator_wrote(tmp_path, monkeypatch):
    """A relative --out is resolved here and written there: the report said
    'synthetic table: o.csv', not where to look on the SuperLink's machine."""
    from fits.deploy import flower_launch

    def submit(superlink, config, **options):
        log = json.dumps({"output": config["output"], "sites": {"a": 5}}) + "\n"
        return flower_launch.RunResult(3, "finished:completed", "", 1.0, log)

    monkeypatch.setattr(flower_launch, "submit_run", submit)
    res = fits_in_process(
        "federate", "run", "--superlink", "coord:9093", "--insecure", "--rows", 5,
        "--out", "o.csv", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert f"synthetic table: {tmp_path.resolve() / 'o.csv'}" in res.stdout


def test_tls_files_and_insecure_together_are_refused(site_csv, tmp_path, no_flower):
    """With both, the connection was plain HTTP (--insecure won) though TLS was asked."""
    from fits.deploy.flower_launch import make_test_certificates

    cert, key, ca = make_test_certificates(tmp_path / "certs")
    runs = (
        ("site", "--data", site_csv, "--superlink", "coord:9093", "--ca", ca),
        ("run", "--superlink", "coord:9093", "--ca", ca, "--rows", 5, "--out", tmp_path / "o.csv"),
        ("superlink", "--port", "0", "--tls", cert, key, ca),
    )
    for args in runs:
        res = fits_in_process("federate", *args, "--insecure")
        assert res.returncode == 2, (args[0], res.stderr)
        assert "--insecure" in res.stderr and "contradict" in res.stderr
