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
