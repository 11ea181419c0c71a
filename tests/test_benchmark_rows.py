"""``fits benchmark --rows N`` past a data set's size: it took the whole data set
without a word (``fits.benchmark._load`` subsamples only when N is smaller), so a run
asked for 5,000 German rows ran on 1,000 and its results said so only in the JSON.
It is refused before any work, naming the data set's size (a usage error, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fits.benchmark import run_benchmark

from conftest import SHARED_DATA, fits_in_process

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="UCI files not available")


def test_run_benchmark_refuses_more_rows_than_the_data_set_has() -> None:
    with pytest.raises(ValueError, match=r"n_rows=5000: german has 1,000 rows"):
        run_benchmark("german", data_dir=SHARED_DATA, repeats=1, n_rows=5000)


def test_cli_rows_past_the_data_set_is_a_usage_error_naming_its_size(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = fits_in_process(
        "benchmark", "--dataset", "german", "--data-dir", SHARED_DATA, "--rows", "1001",
        "--repeats", "1", "-g", "knn", "--no-modes", "--no-boosting", "-q", "--out", out,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: --rows 1001: german has 1,000 rows"), proc.stderr
    assert "--rows 1000" in proc.stderr  # the fix: at most the data set, or no --rows
    assert "Traceback" not in proc.stderr and not out.exists()


def test_rows_up_to_the_data_set_still_subsample_or_take_it_whole() -> None:
    from fits.benchmark import _load

    assert len(_load("german", SHARED_DATA, 1000, 0).frame) == 1000
    assert len(_load("german", SHARED_DATA, 300, 0).frame) == 300
    assert len(_load("simulation", None, 20_000, 0).frame) == 20_000  # no cap there
