"""The Flower ServerApp checks the header of its run config's ``known`` table (the
file, its columns against the sites', the chain's first columns) on the sites' first
replies, before the rounds of the fit, with the words of ``fits synthesize --known``
(it was checked only after the whole fit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")

from test_flower import FakeGrid, _task_identity  # noqa: E402, F401 - the fixture, used

from fits.deploy.flower import RunStopped  # noqa: E402
from fits.flower_app import run_synthesis  # noqa: E402

from conftest import fits_in_process  # noqa: E402


@pytest.fixture
def sites(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(3)
    n = 80
    frame = pd.DataFrame({"g": rng.choice(["u", "v"], n), "x": rng.normal(size=n).round(2),
                          "k": rng.integers(0, 4, n),
                          "note": rng.choice(["a", "b"], n)})  # fmt: skip
    paths = {"site-a": tmp_path / "a.csv", "site-b": tmp_path / "b.csv"}
    frame.iloc[:40].to_csv(paths["site-a"], index=False)
    frame.iloc[40:].to_csv(paths["site-b"], index=False)
    return paths


def _run(sites: dict[str, Path], config: dict, run_config: dict | None = None) -> tuple[str, list]:
    """The ServerApp's refusal and the message types it sent."""
    nodes = [{"data-path": str(p), "name": n, "kernel": "knn"} for n, p in sites.items()]
    grid = FakeGrid(nodes, run_config=run_config)
    with pytest.raises(RunStopped) as caught:
        run_synthesis(grid, config)
    sent = [t.rsplit("_", 1)[1] for batch in getattr(grid, "batches", []) for t in batch]
    return str(caught.value), sent


def _synthesize_says(sites: dict[str, Path], known: Path, *options: object) -> str:
    out = known.parent / "o.csv"
    res = fits_in_process("synthesize", *sites.values(), "--known", known, "--out", out, *options)
    assert res.returncode != 0 and not out.exists()
    return res.stderr.strip().removeprefix("error: ")


def test_a_known_header_is_refused_after_the_setup_round(sites, tmp_path):
    known = tmp_path / "known.csv"
    pd.DataFrame({"g": ["u", "v"], "extra": [1, 2]}).to_csv(known, index=False)
    config = {"output": str(tmp_path / "out.csv"), "rows": 0, "known": str(known)}
    said, sent = _run(sites, config)
    assert set(sent) == {"setup"}  # no rule detection, no configure: the fit never began
    expected = _synthesize_says(sites, known)
    assert "the table has column(s) ['extra'] that the site tables do not have" in expected
    assert said.startswith(expected + ";")

    # a continuous column after one not given: refused by the fit, which knows the
    # kinds (a discrete one may come anywhere), with the order that puts it first
    pd.DataFrame({"x": [0.5, 1.0]}).to_csv(known, index=False)
    said, sent = _run(sites, {**config, "rules": "false", "order": "g,x,k,note"})
    assert "hessian" not in sent and "cdf" not in sent  # no row drawn
    expected = _synthesize_says(sites, known, "--no-rules", "--order", "g,x,k,note")
    expected = expected.splitlines()[-1].removeprefix("error: ")  # after the fit's lines
    assert "Put them first with --order x,g,k,note" in expected
    assert said.startswith(expected + ";")

    # a column the run's drop leaves out at every site
    pd.DataFrame({"g": ["u"], "note": ["a"]}).to_csv(known, index=False)
    said, sent = _run(sites, {**config, "drop": "note"}, run_config={"drop": "note"})
    assert set(sent) == {"setup"}
    expected = _synthesize_says(sites, known, "--drop", "note")
    assert "are left out by --drop" in expected
    assert said.startswith(expected + ";")


def test_a_known_file_that_cannot_be_read_is_refused_before_any_round(sites, tmp_path):
    config = {"output": str(tmp_path / "out.csv"), "rows": 0}
    for name, words in (("gone.csv", "no such file"), ("known.txt", "unknown file type")):
        known = tmp_path / name
        if name.endswith(".txt"):
            known.write_text("g\nu\n", encoding="utf-8")
        said, sent = _run(sites, {**config, "known": str(known)})
        assert sent == []
        expected = _synthesize_says(sites, known)
        assert words in expected and said.startswith(expected + ";")


def test_a_good_known_table_still_completes(sites, tmp_path):
    known = tmp_path / "known.csv"
    pd.DataFrame({"g": ["u", "v", "u"]}).to_csv(known, index=False)
    out = tmp_path / "out.csv"
    nodes = [{"data-path": str(p), "name": n, "kernel": "knn"} for n, p in sites.items()]
    run_synthesis(FakeGrid(nodes), {"output": str(out), "rows": 0, "known": str(known)})
    got = pd.read_csv(out)
    assert got["g"].tolist() == ["u", "v", "u"] and list(got.columns) == ["g", "x", "k", "note"]
