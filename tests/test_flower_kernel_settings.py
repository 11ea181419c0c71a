"""A Flower site's kernel penalties and relevance weights (node config
``ordinal-penalty``, ``nominal-penalty``, ``column-penalties``, ``relevance``), and
``fits federate site`` / ``local``'s ``--ordinal-penalty``, ``--column-penalty`` and
``--relevance``: the same kernels, checks and table as ``fits synthesize``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")

from fits.core.kernels import GaussianKernel, KNNKernel  # noqa: E402
from fits.deploy.flower import site_kernel  # noqa: E402
from fits.deploy.flower_launch import (  # noqa: E402
    FederationError,
    LocalFederation,
    supernode_command,
)
from fits.io import read_table  # noqa: E402

FITS = str(Path(sys.executable).with_name("fits"))


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """Two small sites: a nominal, an ordinal and a continuous column."""
    rng = np.random.default_rng(3)
    n = 240
    season = rng.choice(["spring", "summer", "winter"], n)
    hr = rng.integers(0, 6, n)
    cnt = hr * 2.0 + (season == "summer") * 3 + rng.normal(size=n)
    frame = pd.DataFrame({"season": season, "hr": hr, "cnt": cnt.round(2)})
    folder = tmp_path_factory.mktemp("kernel-sites")
    files = [folder / "a.csv", folder / "b.csv"]
    frame.iloc[:140].to_csv(files[0], index=False)
    frame.iloc[140:].to_csv(files[1], index=False)
    return files


def _fits(*args, timeout=400):
    return subprocess.run(
        [FITS, *map(str, args)], capture_output=True, text=True, timeout=timeout, check=False
    )


# ---------------------------------------------------------------- node config
def test_site_kernel_reads_penalties_and_relevance():
    config = {
        "kernel": "gaussian",
        "bandwidth": 0.4,
        "ordinal-penalty": 2.5,
        "nominal-penalty": "0.3",
        "column-penalties": "hr=3.0,season=0.5",
        "relevance": "cnt:hr=4.0,cnt:season=0.0",
    }
    assert site_kernel(config) == GaussianKernel(
        ordinal_penalty=2.5,
        nominal_penalty=0.3,
        column_penalties={"hr": 3.0, "season": 0.5},
        relevance={"cnt": {"hr": 4.0, "season": 0.0}},
        bandwidth=0.4,
    )
    # absent or "" keys: the kernel's defaults, as before these keys existed
    assert site_kernel({"knn-budget": 300, "relevance": "", "ordinal-penalty": ""}) == KNNKernel(
        budget=300
    )
    # JSON objects, for names the compact text cannot carry; names resolved to the
    # site's headers as fits synthesize resolves them
    kernel = site_kernel(
        {"column-penalties": '{"a,b": 2}', "relevance": '{"y": {" x ": 0.5}}'},
        ["a,b", " x ", "y"],
        "site-a",
    )
    assert kernel.column_penalties == {"a,b": 2.0}
    assert kernel.relevance == {"y": {" x ": 0.5}}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"column-penalties": "hr"}, "node config column-penalties 'hr': write COLUMN=VALUE"),
        ({"column-penalties": "hr=-1"}, "node config column-penalties 'hr=-1': the value must"),
        ({"column-penalties": "hr=1,hr=2"}, "node config column-penalties names 'hr' twice"),
        ({"column-penalties": '{"hr": true}'}, "node config column-penalties='{\"hr\": true}'"),
        ({"relevance": "cnt=4"}, "node config relevance 'cnt=4': write RESPONSE:COVARIATE"),
        ({"relevance": "cnt:hr=x"}, "node config relevance 'cnt:hr=x': the weight must"),
        ({"relevance": '{"cnt": 4}'}, "or a JSON object response -> {covariate"),
        ({"ordinal-penalty": "high"}, "node config ordinal-penalty='high': write a number >= 0"),
        ({"nominal-penalty": 2}, "node config nominal-penalty=2: write a number in (0, 1]"),
        ({"knn-budget": "many"}, "node config knn-budget='many': write an integer >= 0"),
        ({"kernel": "gaussian", "bandwidth": -1.0}, "node config bandwidth=-1.0: write"),
        ({"kernel": "tree"}, "node config kernel='tree': use 'knn' or 'gaussian'"),
        ({"column-penalties": "week=2"}, "node config column-penalties: no column ['week'] in "),
        ({"relevance": "cnt:week=2"}, "node config relevance: no column ['week'] in site-a's"),
    ],
)
def test_site_kernel_refuses_bad_values_naming_the_key(config, message):
    with pytest.raises(ValueError) as caught:
        site_kernel(config, ["season", "hr", "cnt"], "site-a")
    assert message in str(caught.value)


def test_supernode_command_writes_the_settings_the_site_reads(tmp_path):
    """The node config text travels through Flower's own parser of --node-config and
    gives the site the kernel it was given, bit for bit, whatever the names."""
    from flwr.common.config import parse_config_args

    data = tmp_path / "site.csv"
    data.write_text("x\n1\n")
    penalties = {"hr": 1 / 3, " h r ": 3.0, "a'b\"c": 0.1}
    relevance = {"c:d": {"x, y": 0.7}, "cnt": {"hr": 4.0}}
    cmd = supernode_command(
        "127.0.0.1:9093",
        data,
        insecure=True,
        ordinal_penalty=2.0,
        nominal_penalty=0.25,
        column_penalties=penalties,
        relevance=relevance,
    )
    config = parse_config_args([cmd[cmd.index("--node-config") + 1]])
    assert site_kernel(config) == KNNKernel(
        ordinal_penalty=2.0, nominal_penalty=0.25, column_penalties=penalties, relevance=relevance
    )
    plain = supernode_command("127.0.0.1:9093", data, insecure=True)
    node_config = plain[plain.index("--node-config") + 1]
    assert "penalt" not in node_config and "relevance" not in node_config  # as before
    with pytest.raises(FederationError, match="node config nominal-penalty=1.5"):
        supernode_command("127.0.0.1:9093", data, insecure=True, nominal_penalty=1.5)
    with pytest.raises(FederationError, match="unknown kernel settings"):
        LocalFederation({"a": data}, kernel_settings={"bandwidth": 1.0})


# ---------------------------------------------------------------- the command line
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--relevance", "season:cnt=2"], "--relevance ['season']: 'season' is the chain's first"),
        (["--relevance", "cnt:week=2"], "--relevance: no column ['week'] in the site tables"),
        (["--column-penalty", "cnt=2"], "--column-penalty ['cnt']: 'cnt' is a continuous column"),
        (["--column-penalty", "season=3"], "'season' is nominal, so its penalty (gamma_q) must"),
        (["--column-penalty", "season"], "--column-penalty 'season': write COLUMN=VALUE"),
        (["--nominal-penalty", "0"], "--nominal-penalty 0: gamma_q must lie in (0, 1]"),
        (["--relevance", "cnt:hr=-2"], "--relevance 'cnt:hr=-2': the weight must be a number"),
        (["--kernel", "tree", "--kernel", "knn"], "--kernel 'tree': use knn or gaussian"),
    ],
)
def test_federate_local_refuses_what_synthesize_refuses(sites, tmp_path, args, message):
    """Exit 2 with fits synthesize's message, before any process starts."""
    common = [*sites, "--rows", "20", "--kind", "hr=ordinal", *args]
    for command in (["federate", "local"], ["synthesize"]):
        if command == ["synthesize"] and "--kernel" in args:
            continue  # synthesize takes one --kernel, a choice typer checks
        res = _fits(*command, *common, "--out", tmp_path / "out.csv", timeout=120)
        assert res.returncode == 2, res.stdout + res.stderr
        assert message in res.stderr
        assert "Traceback" not in res.stderr
        assert "SuperLink" not in res.stderr  # nothing was started
    assert not (tmp_path / "out.csv").exists()


def test_federate_site_refuses_bad_kernel_settings(sites):
    """Exit 2 before the SuperNode starts (the SuperLink address leads nowhere)."""
    for args, message in [
        (["--relevance", "cnt:week=2"], "--relevance: no column ['week']"),
        (["--column-penalty", "hr=x"], "--column-penalty 'hr=x': the value must be a number"),
        (["--ordinal-penalty", "-1"], "-1.0 is not in the range x>=0.0"),
        (["--nominal-penalty", "0"], "--nominal-penalty 0: gamma_q must lie in (0, 1]"),
    ]:
        res = _fits(
            "federate", "site", "--data", sites[0], "--superlink", "127.0.0.1:1", "--insecure",
            *args, timeout=120,
        )  # fmt: skip
        assert res.returncode == 2, res.stdout + res.stderr
        assert message in res.stderr
        assert "Traceback" not in res.stderr


@pytest.mark.flower
def test_federate_local_with_penalties_and_relevance_is_fits_synthesize(sites, tmp_path):
    """fits federate local a.csv b.csv with --ordinal-penalty, --nominal-penalty,
    --column-penalty and --relevance writes the table fits synthesize writes with the
    same options and seed; and the options change the table (they reach the sites'
    kernels)."""
    options = [
        "--kind", "hr=ordinal", "--ordinal-penalty", "0.5", "--nominal-penalty", "0.4",
        "--column-penalty", "hr=0.3",
        "--relevance", "cnt:hr=3", "--relevance", "cnt:season=0.5", "--rows", "120",
        "--seed", "4",
    ]  # fmt: skip
    tables = {}
    for command in (["federate", "local"], ["synthesize"]):
        out = tmp_path / f"{command[-1]}.csv"
        res = _fits(*command, *sites, *options, "--out", out)
        assert res.returncode == 0, res.stderr[-3000:]
        tables[command[-1]] = read_table(out)
    assert len(tables["local"]) == 120
    pd.testing.assert_frame_equal(tables["local"], tables["synthesize"], check_exact=True)
    plain = tmp_path / "plain.csv"
    res = _fits("synthesize", *sites, *options[:2], *options[-4:], "--out", plain)
    assert res.returncode == 0, res.stderr[-3000:]
    assert not read_table(plain).equals(tables["synthesize"])


def test_federate_run_and_local_take_smoothing(sites, tmp_path):
    """--smoothing (fits synthesize's) goes into the run config; "fixed" is the default."""
    import typer

    from fits.cli.federate import _run_config

    args = (tmp_path / "o.csv", 5, 0, [], "", None, 60.0, 2, None)
    assert _run_config(*args, smoothing="auto")["smoothing"] == "auto"
    assert _run_config(*args)["smoothing"] == ""
    with pytest.raises(typer.Exit):
        _run_config(*args, smoothing="sometimes")
    out = tmp_path / "o.csv"
    res = _fits("federate", "local", *sites, "--rows", "5", "--out", out, "--smoothing", "x")
    assert res.returncode == 2 and "--smoothing 'x': use fixed or auto" in res.stderr


@pytest.mark.flower
def test_federate_local_with_tune_relevance_is_fits_synthesize(sites, tmp_path):
    """--tune-relevance / --relevance-budget (the coordinator's search, run config
    tune-relevance, relevance-budget) give fits synthesize's table over Flower."""
    options = [
        "--kind", "hr=ordinal", "--tune-relevance", "cnt", "--relevance-budget", "6",
        "--rows", "120", "--seed", "4",
    ]  # fmt: skip
    tables = {}
    for command in (["federate", "local"], ["synthesize"]):
        out = tmp_path / f"{command[-1]}.csv"
        res = _fits(*command, *sites, *options, "--out", out)
        assert res.returncode == 0, res.stderr[-3000:]
        tables[command[-1]] = read_table(out)
    pd.testing.assert_frame_equal(tables["local"], tables["synthesize"], check_exact=True)
    plain = tmp_path / "plain.csv"
    res = _fits("synthesize", *sites, *options[:2], *options[-4:], "--out", plain)
    assert res.returncode == 0, res.stderr[-3000:]
    assert not read_table(plain).equals(tables["synthesize"])


def test_run_config_carries_tune_relevance(sites, tmp_path):
    from fits.cli.federate import _run_config
    from fits.deploy.flower import read_run_config

    args = (tmp_path / "o.csv", 5, 0, [], "", None, 60.0, 2, None)
    config = _run_config(*args, tune_relevance=["cnt", "hr"], relevance_budget=20)
    assert config["tune-relevance"] == "cnt,hr" and config["relevance-budget"] == 20
    assert _run_config(*args, tune_relevance=["cnt", "*"])["tune-relevance"] == "*"
    assert _run_config(*args)["tune-relevance"] == ""
    # fits federate local knows the headers: names resolve to them, a bad one is refused
    local = _run_config(*args, columns=["season", "hr", "cnt"], tune_relevance=[" cnt "])
    assert local["tune-relevance"] == "cnt"
    parsed = read_run_config({**config, "out": str(tmp_path / "o.csv")})
    assert parsed["tune_relevance"] == ["cnt", "hr"] and parsed["relevance_budget"] == 20
    out = tmp_path / "o.csv"
    res = _fits(
        "federate", "local", *sites, "--rows", "5", "--out", out, "--tune-relevance", "nope"
    )
    assert res.returncode == 2 and "--tune-relevance" in res.stderr and "nope" in res.stderr


@pytest.mark.flower
def test_federate_run_reports_a_sites_refused_kernel_settings(sites, tmp_path):
    """A site whose own kernel settings would do nothing given the run's schema refuses
    at configure (the coordinator never sees its kernel): fits federate run exits 1
    naming the site, the setting and where to change it, without a traceback or output.
    Here every site has relevance weight 0 for each covariate of cnt, which only the KNN
    site (a) refuses; the Gaussian site (b) takes them."""
    out = tmp_path / "out.csv"
    weights = {"cnt": {"season": 0.0, "hr": 0.0}}
    with LocalFederation(
        {"a": sites[0], "b": sites[1]},
        kernels={"a": "knn", "b": "gaussian"},
        workdir=tmp_path / "fed",
        kernel_settings={"relevance": weights},
    ) as fed:
        res = _fits(
            "federate", "run", "--superlink", fed.superlink, "--insecure", "--sites", "2",
            "--rows", "20", "--kind", "hr=ordinal", "--out", out, timeout=300,
        )  # fmt: skip
    text = " ".join(res.stderr.split())
    assert res.returncode == 1, res.stdout + res.stderr
    assert (
        "a refused the configuration: its kernel's relevance['cnt']: every covariate of "
        "'cnt' has weight 0" in text
    ), text
    assert "node config relevance, which fits federate site --relevance writes" in text
    assert "b refused" not in text
    assert "Traceback" not in res.stderr
    assert not out.exists()
