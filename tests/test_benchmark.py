"""The paper-reproduction benchmark (`fits.benchmark`, `fits benchmark`), on tiny settings."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.benchmark import GENERATOR_NAMES, BenchmarkResult, run_benchmark

from conftest import FITS, fits_in_process

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"

LAMBDAS = (0.0, 0.1, 1.0)


@pytest.fixture(scope="module")
def sim_result() -> BenchmarkResult:
    messages: list[str] = []
    result = run_benchmark(
        "simulation",
        repeats=2,
        seed=3,
        lambdas=LAMBDAS,
        n_rows=600,
        boosting=False,
        progress=messages.append,
    )
    assert any("repeat 2/2" in m for m in messages)
    return result


def test_structure(sim_result: BenchmarkResult) -> None:
    cfg = sim_result.config
    assert sim_result.dataset == "simulation"
    assert len(sim_result.runs) == 2
    assert [run["seed"] for run in sim_result.runs] == [3, 4]
    assert cfg["n_rows"] == 600 and cfg["n_test"] == 120 and cfg["n_train"] == 480
    assert sum(cfg["client_sizes"]) == 480 and len(cfg["client_sizes"]) == 10
    assert [t["target"] for t in cfg["tasks"]] == ["Y_lin", "Y_log"]
    assert cfg["tasks"][0]["reference_source"] == "true parameters"
    # both responses are left out of the covariates of either task
    assert "Y_log" not in cfg["tasks"][0]["covariates"]
    assert "Y_lin" not in cfg["tasks"][1]["covariates"]
    for run in sim_result.runs:
        assert set(run["floors"]) == {"real_test", "independent"}
        assert set(run["generators"]) == {"gaussian", "knn"}
        for res in run["generators"].values():
            assert res["n_synthetic"] == 480
            assert len(res["uploaded_bytes"]) == 10 and min(res["uploaded_bytes"]) > 0
            assert res["wall_s"] > 0 and res["peak_rss_mb"] > 0
            assert 0 < res["energy"]["covariates"] and 0 < res["energy"]["all"]
            assert set(res["utility"]) == {"Y_lin", "Y_log"}
            cols = {rec["column"] for rec in res["fidelity"]["columns"]}
            assert cols == set(cfg["kinds"])
    util = sim_result.utility_frame()
    lin = util[(util["target"] == "Y_lin") & (util["generator"] == "knn")]
    assert set(lin["mode"]) == {"M1", "M2", "M3", "M4", "pooled"}
    assert np.isfinite(lin["param_error"]).all()
    # a simulation table sits between the real test split and the independent resample
    energy = sim_result.energy_summary().set_index("table")
    assert energy.loc["knn", "all_mean"] < energy.loc["independent", "all_mean"]


def test_m4_lambda0_equals_m2(sim_result: BenchmarkResult) -> None:
    util = sim_result.utility_frame()
    keys = ["repeat", "generator", "target", "client"]
    m2 = util[util["mode"] == "M2"].set_index(keys)
    m4 = util[(util["mode"] == "M4") & (util["lam"] == 0.0)].set_index(keys)
    assert len(m2) == len(m4) == 2 * 2 * 2 * 10
    m4 = m4.loc[m2.index]
    np.testing.assert_allclose(m4["param_error"], m2["param_error"], rtol=1e-9)
    np.testing.assert_allclose(m4["mse"].dropna(), m2["mse"].dropna(), rtol=1e-9)
    table = sim_result.mode_table("gaussian", "Y_lin", "param_error")
    np.testing.assert_allclose(
        table.loc["M4 (lambda=0)"].to_numpy(), table.loc["M2"].to_numpy(), rtol=1e-9
    )


def test_mode_table_layout(sim_result: BenchmarkResult) -> None:
    table = sim_result.mode_table("knn", "Y_lin", "param_error")
    clients = list(dict.fromkeys(table.columns.get_level_values(0)))
    assert clients == [f"client {k}" for k in range(1, 11)]
    assert list(table.index) == [
        "M1",
        "M2",
        "M3 (r=1)",
        "M4 (lambda=0)",
        "M4 (lambda=0.1)",
        "M4 (lambda=1)",
        "M4 (best lambda)",
        "pooled real (yardstick)",
    ]
    # M1 is one fit on the synthetic table, the same in every column
    m1 = table.loc["M1"].xs("mean", level=1)
    assert np.allclose(m1, m1.iloc[0])
    # the best lambda is the smallest mean among the lambdas
    lam = table.loc[["M4 (lambda=0)", "M4 (lambda=0.1)", "M4 (lambda=1)"]].xs(
        "mean", axis=1, level=1
    )
    best = table.loc["M4 (best lambda)"].xs("mean", level=1)
    np.testing.assert_allclose(best.to_numpy(), lam.min(axis=0).to_numpy())
    assert set(sim_result.best_lambdas("knn", "Y_lin").values()) <= set(LAMBDAS)


def test_markdown(sim_result: BenchmarkResult) -> None:
    md = sim_result.to_markdown()
    assert md.startswith("# Benchmark: simulation")
    assert "## Energy distance to the full data" in md
    assert "## Time, memory, upload" in md
    assert "## What contributes most to the distance" in md
    assert "### Y_lin (regression; linear regression)" in md
    assert "### Y_log (classification; logistic regression)" in md
    for gen in GENERATOR_NAMES.values():
        assert f"**{gen}, linear regression: parameter error" in md
        assert f"**{gen}, logistic regression: test ROC AUC" in md
    header = "| mode | C1 (144) | C2 (96) |"
    assert header in md
    # every table row has as many cells as its header
    for block in md.split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        if rows:
            assert len({row.count("|") for row in rows}) == 1, block
    assert "M4 (lambda=0.1) |" in md and "(" in md  # mean (sd)


def test_json_round_trip(sim_result: BenchmarkResult) -> None:
    text = sim_result.to_json()
    obj = json.loads(text)  # strict JSON: no NaN
    assert obj["dataset"] == "simulation" and len(obj["runs"]) == 2
    back = BenchmarkResult.from_json(text)
    assert back.to_json() == text
    assert back.to_markdown() == sim_result.to_markdown()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="repeats"):
        run_benchmark("simulation", repeats=0)
    with pytest.raises(ValueError, match="generator"):
        run_benchmark("simulation", repeats=1, generators=("nope",), n_rows=200)


def run_cli(*args: str, env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess:
    """``fits benchmark ARGS`` in this process (the same exit code, stdout and stderr as
    the installed command, without a Python start); ``env``: variables to set (None
    removes one)."""
    return fits_in_process("benchmark", *args, env=env)


def run_installed(*args: str) -> subprocess.CompletedProcess:
    """``fits benchmark ARGS`` by the installed command, in a process of its own."""
    return subprocess.run(
        [FITS, "benchmark", *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.slow  # 12 s; the benchmark CLI on real data stays in CI (budget)
def test_cli_simulation(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = run_installed(
        "--dataset", "simulation", "--repeats", "1", "--rows", "300", "--no-boosting",
        "--out", str(out), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    md, js = out / "simulation.md", out / "simulation.json"
    assert f"wrote {md}" in proc.stdout and f"wrote {js}" in proc.stdout
    # --quiet: no progress; the one note is on the data (300 rows over the paper's shares
    # leave the smallest site 2 rows, under its floor)
    assert [line.split(" (")[0] for line in proc.stderr.splitlines()] == [
        "note: site(s) 'client 10'"
    ], proc.stderr
    obj = json.loads(js.read_text())
    assert obj["config"]["n_rows"] == 300 and len(obj["runs"]) == 1
    text = md.read_text()
    assert "fits benchmark --dataset simulation" in text
    assert "| FITS-K |" in text
    assert not list(out.glob(".*.tmp"))  # atomic writes leave nothing behind


def test_cli_out_that_cannot_be_a_folder_is_refused_before_any_repeat(tmp_path: Path) -> None:
    """--out naming a file ran the whole first repeat and then failed with a traceback
    (FileExistsError) when writing; it is a usage error before any work."""
    a_file = tmp_path / "site.csv"
    a_file.write_text("x\n1\n")
    args = ("--dataset", "simulation", "--repeats", "1", "--rows", "60", "--no-modes", "-q")
    proc = run_cli(*args, "--out", str(a_file))
    assert proc.returncode == 2, proc.stderr
    assert "is a file" in proc.stderr and "give a folder" in proc.stderr
    assert "Traceback" not in proc.stderr and "FITS-K" not in proc.stdout
    assert a_file.read_text() == "x\n1\n"
    proc = run_cli(*args, "--out", str(a_file / "sub"))  # a file above --out
    assert proc.returncode == 2 and "is a file" in proc.stderr, proc.stderr
    (tmp_path / "res" / "simulation.md").mkdir(parents=True)
    proc = run_cli(*args, "--out", str(tmp_path / "res"))
    assert proc.returncode == 2 and "is a folder" in proc.stderr, proc.stderr
    assert "FITS-K" not in proc.stdout


def test_cli_stopped_by_sigterm_says_so_and_leaves_no_folder(tmp_path: Path) -> None:
    """SIGTERM killed fits benchmark without a word (and, mid-write, would have left a
    temporary file); it ends with 143, says what is kept, and creates nothing before the
    first repeat has finished."""
    import signal
    import time

    out = tmp_path / "results"
    proc = subprocess.Popen(
        [FITS, "benchmark", "--dataset", "simulation", "--rows", "3000", "--repeats", "2",
         "-g", "knn", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    assert proc.stderr is not None
    for line in proc.stderr:  # wait until it works on the first repeat
        if "repeat 1/2" in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "interrupted by SIGTERM; only finished repeats are kept" in err
    assert not out.exists()


def test_cli_seed_below_zero_is_a_usage_error(tmp_path: Path) -> None:
    """--seed -1 ended in numpy's traceback ('expected non-negative integer')."""
    proc = run_cli("--dataset", "simulation", "--seed", "-1", "--out", str(tmp_path))
    assert proc.returncode == 2 and "'--seed'" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="UCI files not available")
@pytest.mark.slow  # 10 s, CI budget; the split is tested directly
def test_cli_small_rows_split_keeps_two_rows_per_client(tmp_path: Path) -> None:
    """German at --rows 100: the 1% client got 0-1 rows and the site refused it with a
    traceback; every client now gets at least 2 rows (taken from the largest). At
    --rows 50 a column is constant in the subsample: it was refused (an error); it is
    now written as its value, which one note line says (not each fit's raw warning)."""
    base = ("--dataset", "german", "--data-dir", str(SHARED_DATA), "--repeats", "1",
            "-g", "knn", "--no-modes", "--no-boosting", "-q", "--out", str(tmp_path))  # fmt: skip
    proc = run_cli(*base, "--rows", "100")
    assert proc.returncode == 0, proc.stderr
    sizes = json.loads((tmp_path / "german.json").read_text())["config"]["client_sizes"]
    assert min(sizes) >= 2 and sum(sizes) == 80
    proc = run_cli(*base, "--rows", "50")
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "'foreign_worker' holds" in line]
    assert len(notes) == 1 and notes[0].startswith("note: "), proc.stderr
    assert notes[0].endswith("(--rows 50 subsamples the data set)")
    assert "ConstantNote" not in proc.stderr and "Traceback" not in proc.stderr


def test_cli_missing_data_dir(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    proc = run_cli("--dataset", "adult", "--data-dir", str(missing), "--out", str(tmp_path))
    assert proc.returncode == 2  # usage, as a missing input file
    assert "error:" in proc.stderr and "nowhere" in proc.stderr
    proc = run_cli("--dataset", "bike", "--out", str(tmp_path), env={"FITS_DATA_DIR": None})
    assert proc.returncode == 2  # usage, as a missing input file
    assert "FITS_DATA_DIR" in proc.stderr
    # a folder without the files: the loader's message names the file
    proc = run_cli("--dataset", "german", "--data-dir", str(tmp_path), "--out", str(tmp_path))
    assert proc.returncode == 2  # usage, as a missing input file
    assert "german.data" in proc.stderr
    assert not (tmp_path / "german.md").exists()


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="UCI files not available")
def test_german_one_repeat() -> None:
    result = run_benchmark("german", data_dir=SHARED_DATA, repeats=1)
    assert result.config["n_rows"] == 1000
    cfg = result.config["tasks"][0]
    assert cfg["target"] == "credit_risk"
    assert "1,000 rows" in cfg["reference_source"]
    energy = result.energy_summary().set_index("table")
    assert math.isfinite(energy.loc["knn", "all_ratio"])


def test_column_energy() -> None:
    from fits.benchmark import column_energy
    from fits.datasets import simulate
    from fits.evaluation import independent_resample

    data = simulate(400, seed=1)
    fake = independent_resample(data.frame, seed=2)
    out = column_energy(data.frame, fake, data.kinds, seed=0)
    assert set(out["column"]) == set(data.kinds)
    assert (out["marginal"] >= 0).all() and out.attrs["all"] > 0
    np.testing.assert_allclose(out["drop"], out.attrs["all"] - out["without"])
    assert list(out["drop"]) == sorted(out["drop"], reverse=True)


def test_energy_is_exact_and_boosting_matches_a_direct_call(sim_result: BenchmarkResult) -> None:
    """Repeat 0's floor equals an exact energy_distance call; the real-trained boosting
    score equals boosting_comparison on the same split (an independent recomputation)."""
    from fits.datasets import federated_split, simulate
    from fits.evaluation import energy_distance
    from fits.evaluation.utility import boosting_comparison

    run = sim_result.runs[0]
    data = simulate(600, seed=3)
    clients, test = federated_split(data.frame, seed=3)
    assert sim_result.config["energy_max_rows"] is None
    exact = energy_distance(data.frame, test, data.kinds)
    assert run["floors"]["real_test"]["all"] == pytest.approx(exact, rel=1e-9)
    train = pd.concat(clients, ignore_index=True)
    for task in sim_result.config["tasks"]:
        target = task["target"]
        kinds = {c: data.kinds[c] for c in [*task["covariates"], target]}
        direct = boosting_comparison(
            train, train, test, target, kinds, covariates=task["covariates"], seed=3
        )
        for gen in ("gaussian", "knn"):
            rec = run["generators"][gen]["boosting"][target]
            assert rec["metric"] == {"Y_lin": "r2", "Y_log": "roc_auc"}[target]
            assert rec["real"][rec["metric"]] == pytest.approx(direct.real[direct.metric])
            assert rec["gap"] == pytest.approx(
                rec["real"][rec["metric"]] - rec["synthetic"][rec["metric"]]
            )
    head = sim_result.headline()
    assert list(head.index) == ["FITS-G", "FITS-K"]
    energies = [r["generators"]["knn"]["energy"]["all"] for r in sim_result.runs]
    assert head.loc["FITS-K", "energy"][0] == pytest.approx(np.mean(energies))
    md = sim_result.to_markdown()
    assert "## Headline" in md and "Y_log AUC: trained on real" in md
    assert "exact (every row)" in md
    text = sim_result.headline_text()
    assert "FITS-K: energy distance" in text and ", on synthetic " in text


def test_policy_modes_and_synthesizer_params() -> None:
    """site_policy reaches the sites (no abstention with the floor off, some with the
    default k = 5 on 2-row clients, which no widening helps), modes=False keeps the
    headline only, and synthesizer_params reach the synthesizer (a different w_z,
    different rows)."""
    from fits.federation.policy import SitePolicy

    common = {"repeats": 1, "seed": 1, "n_rows": 300, "generators": ("knn",), "modes": False}
    off = run_benchmark("simulation", site_policy=SitePolicy(min_effective_rows=0), **common)
    default = run_benchmark("simulation", **common)
    wz = run_benchmark(
        "simulation", site_policy=SitePolicy(min_effective_rows=0),
        synthesizer_params={"discrete_response_bandwidth": 0.5}, **common,
    )  # fmt: skip
    res_off, res_def = off.runs[0]["generators"]["knn"], default.runs[0]["generators"]["knn"]
    assert res_off["abstained"] == 0 and res_def["abstained"] > 0
    assert res_off["widened"] == 0 and res_def["widened"] > 0
    assert off.config["site_policy"]["min_effective_rows"] == 0
    assert default.config["site_policy"] == "default"
    assert res_off["utility"] == {} and res_off["fidelity"] == {"columns": [], "pairs": []}
    assert set(res_off["boosting"]) == {"Y_lin", "Y_log"}
    assert wz.config["synthesizer_params"] == {"discrete_response_bandwidth": "0.5"}
    assert wz.runs[0]["generators"]["knn"]["energy"] != res_off["energy"]
    md = off.to_markdown()
    assert "## Headline" in md and "## Downstream utility" not in md and "--no-modes" in md


def test_cli_headline_generator_and_policy(tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text('{"min_effective_rows": 0}')
    out = tmp_path / "results"
    proc = run_cli(
        "--dataset", "simulation", "--repeats", "1", "--rows", "300", "--generator", "knn",
        "--policy", str(policy), "--no-modes", "--ordinal-penalty", "5", "--out", str(out),
        "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "FITS-K: energy distance" in proc.stdout and "FITS-G" not in proc.stdout
    assert "gradient boosting for Y_log (test ROC AUC): trained on real" in proc.stdout
    obj = json.loads((out / "simulation.json").read_text())
    assert obj["config"]["generators"] == ["knn"]
    assert obj["config"]["site_policy"]["min_effective_rows"] == 0
    assert obj["config"]["kernel_params"] == {"ordinal_penalty": 5.0}
    bad = tmp_path / "bad.json"
    bad.write_text('{"min_effective_rows": -1}')
    proc = run_cli("--dataset", "simulation", "--policy", str(bad), "--out", str(out))
    assert (
        proc.returncode == 2 and "--policy" in proc.stderr and "min_effective_rows" in proc.stderr
    )


def test_kernel_params_reach_the_sites() -> None:
    """kernel_params: the default lambda_q given explicitly changes nothing (bit for bit);
    another lambda_q changes the rows; the setting is recorded."""
    from fits.federation.policy import SitePolicy

    common = {
        "repeats": 1, "seed": 2, "n_rows": 300, "generators": ("knn", "gaussian"),
        "modes": False, "site_policy": SitePolicy(min_effective_rows=0),
    }  # fmt: skip
    plain = run_benchmark("simulation", **common)
    same = run_benchmark("simulation", kernel_params={"ordinal_penalty": 1.0}, **common)
    other = run_benchmark("simulation", kernel_params={"ordinal_penalty": 5.0}, **common)
    for gen in ("knn", "gaussian"):
        a, b, c = (r.runs[0]["generators"][gen]["energy"] for r in (plain, same, other))
        assert a == b and a != c
    assert other.config["kernel_params"] == {"ordinal_penalty": 5.0}


def test_cli_column_design(tmp_path: Path) -> None:
    """``--column-design COL=DESIGN`` reaches the synthesizer (recorded in the result's
    config); a column not in the data set's chain is a usage error naming the chain."""
    out = tmp_path / "results"
    proc = run_cli(
        "--dataset", "simulation", "--repeats", "1", "--rows", "300", "--generator", "knn",
        "--no-modes", "--no-boosting", "--column-design", "Y_lin=constant", "--out", str(out),
        "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    params = json.loads((out / "simulation.json").read_text())["config"]["synthesizer_params"]
    assert "column_designs" in params and "Y_lin" in str(params["column_designs"])
    proc = run_cli("--dataset", "simulation", "--column-design", "nope=constant", "--out",
                   str(tmp_path / "x"))  # fmt: skip
    assert proc.returncode == 2 and "nope" in proc.stderr and "chain" in proc.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.slow  # 10 s, CI budget; test_boosting runs --column-model
def test_cli_column_model(tmp_path: Path) -> None:
    """``--column-model COL=boosting`` reaches the synthesizer (recorded); an unknown
    column, the chain's first, or an unknown model is a usage error."""
    out = tmp_path / "results"
    # 10 trees, not the default 100: each tree is depth rounds with every site
    proc = run_cli(
        "--dataset", "simulation", "--repeats", "1", "--rows", "300", "--generator", "knn",
        "--no-modes", "--no-boosting", "--column-model", "X_O=boosting", "--boosting",
        "n_trees=10", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "simulation.json").read_text())
    params = result["config"]["synthesizer_params"]
    assert "X_O" in params["column_models"] and "boosting" in params["column_models"]
    # the trees each boosted column kept, per repeat (early stopping would keep fewer)
    assert result["runs"][0]["generators"]["knn"]["boosted_trees"] == {"X_O": 10}
    assert (
        "Trees per boosted column of FITS-K, by repeat: X_O 10."
        in (out / "simulation.md").read_text()
    )
    for item, says in [
        ("nope=boosting", "not in simulation's chain after its first column"),
        ("X_B=boosting", "not in simulation's chain after its first column"),
        ("X_O=forest", "must be one of kernel, boosting"),
    ]:
        proc = run_cli("--dataset", "simulation", "--column-model", item, "--out",
                       str(tmp_path / "x"))  # fmt: skip
        assert proc.returncode == 2 and says in proc.stderr, (item, proc.stderr)
        assert not (tmp_path / "x").exists()


def test_cli_pooled_floor_with_secure_aggregation(tmp_path: Path) -> None:
    """``--policy`` with floor_scope 'pooled' runs with ``--secure-aggregation`` (recorded
    in the config) and is a usage error without it."""
    policy = tmp_path / "pooled.json"
    policy.write_text('{"floor_scope": "pooled"}')
    out = tmp_path / "results"
    proc = run_cli("--dataset", "simulation", "--policy", str(policy), "--out", str(out))
    assert proc.returncode == 2 and "add --secure-aggregation" in proc.stderr, proc.stderr
    assert not out.exists()
    proc = run_cli(
        "--dataset", "simulation", "--repeats", "1", "--rows", "300", "--generator", "knn",
        "--no-modes", "--no-boosting", "--policy", str(policy), "--secure-aggregation",
        "--out", str(out), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    config = json.loads((out / "simulation.json").read_text())["config"]
    assert config["synthesizer_params"]["secure_aggregation"] == "True"  # recorded as repr
    assert config["site_policy"]["floor_scope"] == "pooled"


def test_cli_column_penalty(tmp_path: Path) -> None:
    """``--column-penalty COL=VALUE`` reaches the sites' kernels (recorded); a column that
    is not discrete, or a nominal gamma above 1, is a usage error."""
    out = tmp_path / "results"
    proc = run_cli(
        "--dataset", "simulation", "--repeats", "1", "--rows", "300", "--generator", "knn",
        "--no-modes", "--no-boosting", "--column-penalty", "X_O=4", "--out", str(out),
        "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    kernel = json.loads((out / "simulation.json").read_text())["config"]["kernel_params"]
    assert kernel == {"column_penalties": {"X_O": 4.0}}
    for bad, says in [
        ("X_G1=2", "a penalty is for an ordinal or nominal column"),
        ("X_B=2", "(gamma_q) must lie in (0, 1]"),
        ("X_O=-1", "a number >= 0"),
        ("X_O", "write COLUMN=VALUE"),
    ]:
        proc = run_cli("--dataset", "simulation", "--column-penalty", bad, "--out",
                       str(tmp_path / "x"))  # fmt: skip
        assert proc.returncode == 2 and says in proc.stderr, (bad, proc.stderr)
    assert not (tmp_path / "x").exists()


def test_cli_order(tmp_path: Path) -> None:
    """``--order`` sets the synthesizers' chain (recorded as the config's order, and
    rules are looked for along it); an order that misses or repeats a column, or names
    none of the data set's, is a usage error."""
    from fits.datasets import load_dataset

    chain = list(load_dataset("simulation").order)
    reordered = [*chain[1:], chain[0]]
    out = tmp_path / "results"
    proc = run_cli(
        "--dataset", "simulation", "--repeats", "1", "--rows", "300", "--generator", "knn",
        "--no-modes", "--no-boosting", "--order", ",".join(reordered), "--out", str(out),
        "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    config = json.loads((out / "simulation.json").read_text())["config"]
    assert config["order"] == reordered and config["order"] != chain
    assert config["synthesizer_params"]["order"] == repr(reordered)
    for bad, says in [
        (",".join(chain[1:]), f"missing: {chain[0]}"),
        (",".join([*chain, chain[0]]), "named more than once"),
        (",".join([*chain[1:], "nope"]), "nope"),
    ]:
        proc = run_cli("--dataset", "simulation", "--order", bad, "--out", str(tmp_path / "x"))
        assert proc.returncode == 2 and says in proc.stderr, (bad, proc.stderr)
    assert not (tmp_path / "x").exists()


def test_cli_relevance(tmp_path: Path) -> None:
    """``--relevance RESPONSE:COVARIATE=WEIGHT`` reaches the sites' kernels (recorded);
    weights that would do nothing are a usage error before anything runs."""
    out = tmp_path / "results"
    proc = run_cli(
        "--dataset", "simulation", "--repeats", "1", "--rows", "300", "--generator", "knn",
        "--no-modes", "--no-boosting", "--relevance", "Y_lin:X_G2=0", "--relevance",
        "Y_lin:X_O=3", "--nominal-penalty", "0.5", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    kernel = json.loads((out / "simulation.json").read_text())["config"]["kernel_params"]
    assert kernel == {"nominal_penalty": 0.5, "relevance": {"Y_lin": {"X_G2": 0.0, "X_O": 3.0}}}
    for bad, says in [
        ("X_B:X_G1=2", "'X_B' is the chain's first column"),
        ("X_G1:Y_lin=2", "['Y_lin'] are not columns before 'X_G1'"),
        ("nope:X_B=1", "'nope' is no column"),
        ("Y_lin=2", "write RESPONSE:COVARIATE=WEIGHT"),
        ("X_G1:X_B=0", "every covariate of 'X_G1' has weight 0"),  # the fit's traceback
    ]:
        proc = run_cli("--dataset", "simulation", "--relevance", bad, "--out", str(tmp_path / "x"))
        assert proc.returncode == 2 and says in proc.stderr, (bad, proc.stderr)
    for bad, says in [  # the options fits synthesize shares
        (("--nominal-penalty", "0"), "--nominal-penalty 0: gamma_q must lie in (0, 1]"),
        (("--smoothing", "often"), "--smoothing 'often': use fixed or auto"),
    ]:
        proc = run_cli("--dataset", "simulation", *bad, "--out", str(tmp_path / "x"))
        assert proc.returncode == 2 and says in proc.stderr, (bad, proc.stderr)
    boosted = ("--column-model", "Y_lin=boosting", "--relevance", "Y_lin:X_G2=0")
    proc = run_cli("--dataset", "simulation", *boosted, "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "'Y_lin' is drawn from its boosted model" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_notes_of_the_fits_are_passed_on_once_and_end(capsys: pytest.CaptureFixture[str]) -> None:
    """Each warning passed on was recorded again inside the recording, and the loop over
    them never ended (24 GB, then killed): a warning that is not a ConstantNote ends it
    now, a DataNote as one ``note:`` line, any other warning passed on."""
    import warnings

    from fits.cli.benchmark import _constant_notes
    from fits.core.schema import DataNote

    with pytest.warns(RuntimeWarning, match="other"):
        with _constant_notes(None):
            warnings.warn("a site is small", DataNote, stacklevel=1)
            warnings.warn("a site is small", DataNote, stacklevel=1)
            warnings.warn("other", RuntimeWarning, stacklevel=1)
    assert capsys.readouterr().err.count("note: a site is small") == 1
