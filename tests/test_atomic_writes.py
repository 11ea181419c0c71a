"""Output files appear whole or not at all, by both of fits.io's ways of writing them:
a file without a name (Linux O_TMPFILE) linked into place, or a hidden temporary file
renamed into place where the file system has no unnamed files."""

from __future__ import annotations

import os
import stat

import numpy as np
import pandas as pd
import pytest

import fits.io as fio


@pytest.fixture(params=["unnamed", "hidden"])
def mode(request, monkeypatch, tmp_path) -> str:
    if request.param == "hidden":
        monkeypatch.setattr(fio, "_unnamed_file", lambda folder: None)
        return request.param
    fd = fio._unnamed_file(tmp_path)
    if fd is None:
        pytest.skip("this system has no unnamed files")
    os.close(fd)

    def no_named_files(*args, **kwargs):
        raise AssertionError("a named temporary file was made where an unnamed one works")

    monkeypatch.setattr(fio.tempfile, "mkstemp", no_named_files)
    return request.param


def _frame(n: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice(["a", "b"], n)})


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_new_and_replaced_files_hold_the_table(mode, tmp_path, suffix) -> None:
    path = tmp_path / f"t{suffix}"
    for n in (50, 7):  # a new file, then one written over it
        fio.write_table(_frame(n), path)
        back = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
        pd.testing.assert_frame_equal(back, _frame(n))
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_chunks_and_text(mode, tmp_path) -> None:
    path, rows = fio.write_table_chunks(iter([_frame(5), _frame(6)]), tmp_path / "c.csv")
    assert rows == 11 and len(pd.read_csv(path)) == 11
    fio.write_text("hello", tmp_path / "t.txt")
    fio.write_bytes(b"\x00\x01", tmp_path / "b.bin")
    assert (tmp_path / "t.txt").read_text() == "hello"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.bin", "c.csv", "t.txt"]


def test_an_error_mid_write_leaves_the_old_file_and_nothing_else(mode, tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("old\n")

    def chunks():
        yield _frame(5)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fio.write_table_chunks(chunks(), path)
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_a_symlink_at_the_path_is_written_through(mode, tmp_path) -> None:
    """The file a link leads to is replaced, atomically, beside itself; the link stays
    (it was replaced by a regular file, as a rename over it does)."""
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "target.txt"
    target.write_text("old")
    link = tmp_path / "out.txt"
    link.symlink_to(target)
    assert fio.write_text("new", link) == link
    assert link.is_symlink() and target.read_text() == "new"
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["target.txt"]


def test_write_stream_estimates_refuses_and_writes_the_same_bytes(tmp_path, monkeypatch) -> None:
    """fits.io.write_stream (fits synthesize and the Flower ServerApp): a small request
    is drawn in the default chunks; a large one first asks for a piece of ESTIMATE_ROWS
    rows, reports the estimate, and writes the bytes of the whole table; one that would
    not fit on the disk raises OutputTooLarge naming the request, the output and the
    advice, and writes nothing."""
    import shutil

    whole = _frame(300)
    asked: list[int | None] = []

    def draw(first: int | None):
        asked.append(first)
        cut = first or 64
        return iter([whole.iloc[:cut], *(whole.iloc[k : k + 64] for k in range(cut, 300, 64))])

    monkeypatch.setattr(fio, "LARGE_REQUEST_ROWS", 100)
    monkeypatch.setattr(fio, "ESTIMATE_ROWS", 32)
    reference = tmp_path / "whole.csv"
    fio.write_table(whole, reference)
    seen: list[fio.StreamEstimate] = []
    out = tmp_path / "streamed.csv"
    path, rows = fio.write_stream(draw, out, 300, request="r", advice="a", on_estimate=seen.append)
    assert (path, rows) == (out, 300) and asked == [32]
    assert out.read_bytes() == reference.read_bytes()
    assert len(seen) == 1 and seen[0].rows == 300 and seen[0].sample_rows == 32
    assert seen[0].size == fio.encoded_size(whole.iloc[:32], ".csv") * 300 / 32
    fio.write_stream(draw, out, 100, request="r", advice="a", on_estimate=seen.append)
    assert asked[-1] is None and len(seen) == 1  # not large: no estimate
    out.unlink()
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1000))
    with pytest.raises(
        fio.OutputTooLarge, match=r"^--rows 300: .* of --out 'o' has 1.0 kB free; a$"
    ):
        fio.write_stream(draw, out, 300, request="--rows 300", advice="a", where="--out 'o'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["whole.csv"]


def test_parquet_chunks_keep_text_columns_whose_first_chunk_has_no_value(tmp_path):
    """A text column with no value in the first chunk (no rows, or only missing values)
    is written as Arrow ``string``, not the ``null`` that older pyarrow infers, so the
    file keeps the column's type and a later chunk's text fits it (it failed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fits.io import write_table_chunks

    first = pd.DataFrame({"g": pd.Series([None, None], dtype=object), "x": [1.0, 2.0]})
    later = pd.DataFrame({"g": pd.Series(["a", None], dtype=object), "x": [3.0, 4.0]})
    path, rows = write_table_chunks([first, later], tmp_path / "t.parquet")
    assert rows == 4 and pq.read_schema(path).field("g").type == pa.string()
    assert pd.read_parquet(path)["g"].tolist()[2] == "a"
    empty = pd.DataFrame({"g": pd.Series([], dtype=object), "x": pd.Series([], dtype=float)})
    path, rows = write_table_chunks([empty], tmp_path / "e.parquet")
    assert rows == 0 and pq.read_schema(path).field("g").type == pa.string()
