"""sample_to_file and save check their path before any work: a folder named like a
table, or a folder fits cannot write in, is refused naming the path and the fix, and
no row is drawn (the synthesizer's random stream does not move).  A ``progress`` that is
neither a switch nor a callable is refused, not taken and ignored."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.io import OutputError


def _site(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"age": rng.integers(18, 90, n), "color": rng.choice(["red", "green", "blue"], n)}
    )


@pytest.fixture(scope="module")
def sites() -> list[pd.DataFrame]:
    return [_site(80, 1), _site(60, 2)]


def test_sample_to_file_onto_a_folder_is_refused_before_drawing(sites, tmp_path):
    folder = tmp_path / "synthetic.csv"
    folder.mkdir()
    synth = FITSSynthesizer(seed=0, n_jobs=1).fit(sites)
    with pytest.raises(OutputError, match=r"synthetic\.csv' is a folder; give a file name"):
        synth.sample_to_file(folder, 50)
    # was: every row drawn, then IsADirectoryError naming a temporary file
    fresh = FITSSynthesizer(seed=0, n_jobs=1).fit(sites)
    pd.testing.assert_frame_equal(synth.sample(20), fresh.sample(20))


def test_save_onto_a_folder_names_the_folder(sites, tmp_path):
    synth = FITSSynthesizer(seed=0, n_jobs=1).fit(sites)
    with pytest.raises(OutputError, match="save: path .* is a folder; give a file name"):
        synth.save(tmp_path)


def test_sample_to_file_in_a_file_not_a_folder_is_refused(sites, tmp_path):
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("x")
    synth = FITSSynthesizer(seed=0, n_jobs=1).fit(sites)
    with pytest.raises(OutputError, match="is not a folder"):
        synth.sample_to_file(not_a_folder / "synthetic.csv", 10)


@pytest.mark.parametrize("progress", ["yes", 1])
def test_a_progress_that_is_no_switch_or_callable_is_refused(sites, progress):
    synth = FITSSynthesizer(seed=0, n_jobs=1).fit(sites)
    with pytest.raises(TypeError, match="progress must be True .*, False, or a callable"):
        synth.sample(5, progress=progress)  # was: taken, and showed nothing
    with pytest.raises(TypeError, match="progress must be None or a callable"):
        synth.iter_sample(5, progress=progress)
    known = pd.DataFrame({"age": [30, 40]})
    with pytest.raises(TypeError, match="progress must be None or a callable"):
        synth.sample_remaining_columns(known, progress=progress)
    assert len(synth.sample(5, progress=False)) == 5
    assert len(pd.concat(synth.iter_sample(5, progress=False))) == 5


def test_sample_to_file_does_not_replace_a_file_unless_asked(sites, tmp_path):
    """Was: a site's own table read into pandas and then given as the path was replaced
    by the synthetic rows without a word (save() refused the same path)."""
    table = tmp_path / "site_a.csv"
    sites[0].to_csv(table, index=False)
    before = table.read_bytes()
    synth = FITSSynthesizer(seed=0, n_jobs=1).fit(sites)
    with pytest.raises(OutputError, match=r"site_a\.csv' exists; .* pass overwrite=True"):
        synth.sample_to_file(table, 10)
    assert table.read_bytes() == before
    fresh = FITSSynthesizer(seed=0, n_jobs=1).fit(sites)  # refused before any row is drawn
    pd.testing.assert_frame_equal(synth.sample(20), fresh.sample(20))
    assert synth.sample_to_file(table, 10, overwrite=True, seed=3) == table
    pd.testing.assert_frame_equal(pd.read_csv(table), synth.sample(10, seed=3))
    empty = tmp_path / "empty.csv"
    empty.touch()  # an empty file holds nothing to lose (as `touch` before a run)
    synth.sample_to_file(empty, 5)
    assert len(pd.read_csv(empty)) == 5


def test_sample_to_file_refuses_a_file_larger_than_the_free_space(sites, tmp_path, monkeypatch):
    """Was: sample_to_file(path, 10**13) started streaming towards hundreds of terabytes;
    ``fits synthesize`` refused it from an estimate. Now both do, before writing."""
    import shutil
    from collections import namedtuple

    from fits.io import LARGE_REQUEST_ROWS, OutputTooLarge

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**6, 0, 10**6))
    synth = FITSSynthesizer(seed=0, n_jobs=1).fit(sites)
    out = tmp_path / "huge.csv"
    said = r"huge\.csv', 10000000000000\): the output would take about .* 1\.0 MB free; ask"
    with pytest.raises(OutputTooLarge, match=said):
        synth.sample_to_file(out, 10**13)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(TypeError, match="num_rows must be an integer"):
        synth.sample_to_file(out, "10")
    assert LARGE_REQUEST_ROWS < 10**13
