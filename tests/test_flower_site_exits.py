"""A site's SuperNode that ends before its run does (it could not read its node config,
its port was taken, it was killed) left ``fits federate local`` waiting for that site
until the run's round timeout, ten minutes by default, and then ended it with "only 1
of the 2 sites asked for ('min-sites') connected", naming neither the site nor the
cause. The federation now watches its processes while the run goes on; and a site
file whose path holds both quote characters, which Flower's node config cannot carry
(the SuperNode exited at start: the ten-minute wait), is refused before any process
starts."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.deploy.flower_launch import (
    FederationError,
    LocalFederation,
    check_node_config_text,
    supernode_command,
)

from conftest import fits_in_process


def _site(path: Path, n: int = 40, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    pd.DataFrame({"g": rng.choice(["u", "v"], n), "x": rng.normal(size=n)}).to_csv(
        path, index=False
    )
    return path


def test_a_path_with_both_quotes_is_refused_before_any_process(tmp_path):
    a = _site(tmp_path / "a.csv")
    b = _site(tmp_path / 'it\'s "b".csv', seed=1)
    res = fits_in_process("federate", "local", a, b, "--rows", 5, "--out", tmp_path / "o.csv")
    assert res.returncode == 2, res.stderr
    assert "holds both ' and \"" in res.stderr and "rename the file" in res.stderr
    assert "Traceback" not in res.stderr
    with pytest.raises(FederationError, match="holds both"):
        supernode_command("127.0.0.1:9092", b, insecure=True)
    check_node_config_text("name", "it's")  # one kind of quote: Flower reads it
    check_node_config_text("name", 'say "b"')


class _Ended:
    pid = 0

    def __init__(self, code: int | None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


def test_check_processes_names_the_site_its_exit_code_and_log(tmp_path):
    fed = LocalFederation({"a": _site(tmp_path / "a.csv")}, workdir=tmp_path / "work")
    fed.workdir.mkdir()
    fed.processes = {"superlink": _Ended(None), "site-a": _Ended(None)}
    fed.check_processes()  # all running
    (fed.workdir / "site-a.log").write_text("starting\nError: the node config is invalid\n")
    fed.processes["site-a"] = _Ended(1)
    with pytest.raises(FederationError) as caught:
        fed.check_processes()
    assert "the SuperNode of site 'a' stopped (exit code 1) before the run ended" in str(
        caught.value
    )
    assert "the node config is invalid" in str(caught.value)
    fed.processes = {"worker-a": _Ended(-9)}
    with pytest.raises(FederationError, match="the ClientApp process of site 'a' stopped"):
        fed.check_processes()
    fed.processes = {}


@pytest.mark.flower
@pytest.mark.slow
def test_a_supernode_that_dies_ends_the_run_at_once_by_name(tmp_path):
    """About 15 s (was: the run's round timeout, 600 s by default)."""
    pytest.importorskip("flwr")
    sites = {"a": _site(tmp_path / "a.csv"), "b": _site(tmp_path / "b.csv", seed=1)}
    started = time.monotonic()
    with LocalFederation(sites) as fed:
        os.killpg(fed.processes["site-b"].pid, signal.SIGKILL)  # b's SuperNode, at start
        with pytest.raises(FederationError, match="the SuperNode of site 'b' stopped"):
            fed.run({"output": str(tmp_path / "o.csv"), "rows": 20, "timeout": 600.0})
    assert time.monotonic() - started < 120
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize(
    "content, words",
    [(b"", "the file is empty"), (bytes(range(128, 256)) * 8, "cannot read it as csv")],
)
def test_a_site_file_no_site_could_read_is_refused_before_any_process(
    tmp_path, monkeypatch, content, words
):
    """An empty or unreadable site file failed only once the SuperLink and SuperNodes
    were up and the setup round asked the site (about 20 s)."""
    from fits.cli import federate

    def never(*args, **kwargs):
        raise AssertionError("a process was started")

    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(federate, "run_local_federation", never)
    a = _site(tmp_path / "a.csv")
    (tmp_path / "b.csv").write_bytes(content)
    res = fits_in_process(
        "federate", "local", a, tmp_path / "b.csv", "--rows", 5, "--out", tmp_path / "o.csv"
    )
    assert res.returncode == 1, res.stderr
    assert f"{tmp_path / 'b.csv'}: {words}" in res.stderr and "Traceback" not in res.stderr
