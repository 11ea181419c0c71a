"""Never lose the user's data (issue 11), through the `fits` command line.

Outputs that are inputs, unusable output locations, stop signals, huge ``--rows``
(streamed in chunks), the exact-copy / DCR release check, and the smaller mends: each
on tables the tests write themselves. The commands run in this process
(:func:`conftest.fits_in_process`: the same exit code, stdout and stderr, without a
Python start per command); the stop signals go to the real executable (subprocess).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import FITS
from conftest import fits_in_process as run


def _table(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.choice(["a", "b", "c"], n)
    x = rng.normal(size=n) + (g == "b")
    k = rng.integers(0, 100, n)
    return pd.DataFrame({"g": g, "x": x, "k": k})


@pytest.fixture()
def sites(tmp_path: Path) -> list[Path]:
    """Two site files of 300 rows (a table that gives no release-check warning)."""
    t = _table(600)
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    t.iloc[:300].to_csv(paths[0], index=False)
    t.iloc[300:].to_csv(paths[1], index=False)
    return paths


@pytest.fixture()
def small_sites(tmp_path: Path) -> list[Path]:
    """Two 30-row sites of two columns: sampling is fast, for many-row runs."""
    rng = np.random.default_rng(1)
    t = pd.DataFrame({"g": rng.choice(["u", "v"], 60), "x": rng.normal(size=60)})
    paths = [tmp_path / "s1.csv", tmp_path / "s2.csv"]
    t.iloc[:30].to_csv(paths[0], index=False)
    t.iloc[30:].to_csv(paths[1], index=False)
    return paths


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and mtime (links followed), to prove nothing was touched."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            out[str(p)] = (p.read_bytes(), p.stat().st_mtime_ns)
    return out


def _no_temp_files(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]


def _being_written(folder: Path) -> list[str]:
    """Temporary files some process is writing in ``folder``: hidden ``*.tmp`` files,
    and (Linux) files without a name yet (``O_TMPFILE``) that a process holds open
    there, which ``/proc/<pid>/fd`` shows as ``<folder>/#<inode> (deleted)``."""
    found = _no_temp_files(folder)
    prefix = f"{folder}/"
    for entry in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            target = os.readlink(entry)
        except OSError:  # the process or descriptor is gone
            continue
        if target.startswith(prefix) and target.endswith(" (deleted)"):
            found.append(target)
    return found


# ---------------------------------------------------------------------------------------
# 1. An output that is an input is refused (same file, not only the same string)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("alias", ["same", "dotdot", "symlink", "hardlink"])
def test_synthesize_refuses_to_write_over_a_site_table(sites, tmp_path, alias):
    (tmp_path / "x").mkdir()
    target = sites[0]
    if alias == "same":
        out = target
    elif alias == "dotdot":
        out = tmp_path / "x" / ".." / target.name
    elif alias == "symlink":
        out = tmp_path / "link.csv"
        out.symlink_to(target)
    else:
        out = tmp_path / "hard.csv"
        os.link(target, out)
    before = _snapshot(tmp_path)
    res = run("synthesize", *sites, "--rows", 10, "--out", out)
    assert res.returncode == 2, res.stderr
    assert str(out) in res.stderr and str(target) in res.stderr
    assert "same file" in res.stderr and "Traceback" not in res.stderr
    assert _snapshot(tmp_path) == before  # touched nothing
    assert _no_temp_files(tmp_path) == []


def test_every_command_refuses_an_input_as_output(sites, tmp_path):
    schema = tmp_path / "schema.json"
    assert run("schema", *sites, "--out", schema).returncode == 0
    synthetic = tmp_path / "syn.csv"
    assert run("synthesize", *sites, "--rows", 50, "--out", synthetic, "-q").returncode == 0
    link = tmp_path / "link.json"
    link.symlink_to(schema)
    before = _snapshot(tmp_path)
    cases = [
        ("synthesize", *sites, "--rows", 10, "--schema", schema, "--out", link),
        ("schema", *sites, "--out", sites[1]),
        ("report", "--real", sites[0], "--synthetic", synthetic, "--out", "r.html", "--json",
         sites[0]),
        ("report", "--real", sites[0], "--synthetic", synthetic, "--out",
         tmp_path / "x.html", "--json", synthetic),
        ("report", "--real", sites[0], "--synthetic", synthetic, "--clients", sites[1],
         "--json", tmp_path / "r.json", "--out", tmp_path / "r.html", "--train", sites[1]),
    ]  # fmt: skip
    for args in cases[:-1]:
        res = run(*args, cwd=tmp_path)
        assert res.returncode == 2, (args, res.stderr)
        assert "same file" in res.stderr, res.stderr
    assert _snapshot(tmp_path) == before
    html = tmp_path / "r.html"
    html.write_text("<html>")
    res = run("report", "--real", sites[0], "--synthetic", synthetic, "--out", html, "--json", html)
    assert res.returncode == 2 and "same file as --out" in res.stderr
    assert html.read_text() == "<html>"


# ---------------------------------------------------------------------------------------
# 2. The output location is checked before any synthesis starts
# ---------------------------------------------------------------------------------------


def test_output_location_is_checked_before_anything_is_read(sites, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")  # a data error (exit 1) if it were read first
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    for out, words in (
        (tmp_path / "no" / "such" / "o.csv", ["does not exist"]),
        (folder, ["is a folder"]),
    ):
        res = run("synthesize", empty, "--rows", 10, "--out", out)
        assert res.returncode == 2, res.stderr
        assert all(w in res.stderr for w in words), res.stderr
        assert "Traceback" not in res.stderr
    assert not (tmp_path / "no").exists()
    readonly = tmp_path / "ro.csv"
    readonly.write_text("keep\n")
    readonly.chmod(0o444)
    res = run("synthesize", *sites, "--rows", 10, "--out", readonly)
    assert res.returncode == 2 and "read-only" in res.stderr
    assert readonly.read_text() == "keep\n"


def _read_only_folder() -> Path | None:
    """A folder on a read-only file system (or closed to us), if this machine has one."""
    for candidate in (Path("/proc/self"), Path("/sys")):
        try:
            fd = os.open(candidate / ".fits-probe", os.O_CREAT | os.O_WRONLY, 0o600)
        except OSError:
            return candidate
        os.close(fd)
        os.unlink(candidate / ".fits-probe")
    return None


def test_unwritable_output_folder_is_a_usage_error(sites, tmp_path):
    target = _read_only_folder()
    if target is None:
        pytest.skip("no read-only folder on this machine")
    res = run("synthesize", *sites, "--rows", 10, "--out", target / "out.csv")
    assert res.returncode == 2, res.stderr
    assert "cannot write in the folder" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_folder_without_write_permission(sites, tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir()
    closed.chmod(0o555)
    try:
        res = run("synthesize", *sites, "--rows", 10, "--out", closed / "o.csv")
    finally:
        closed.chmod(0o755)
    assert res.returncode == 2 and "cannot write in the folder" in res.stderr


# ---------------------------------------------------------------------------------------
# 3. Stop signals remove the temporary file
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(  # SIGHUP slow: 12 s, CI budget; it takes the SIGTERM path
    "sig", [signal.SIGTERM, signal.SIGINT, pytest.param(signal.SIGHUP, marks=pytest.mark.slow)]
)
def test_a_stop_signal_leaves_no_partial_output(small_sites, tmp_path, sig):
    out = tmp_path / "big.csv"
    # the run's messages go to a file, not a pipe nobody reads while waiting: a slow
    # (loaded) run prints more progress, and a full pipe would block it before it writes
    log = tmp_path / "stderr.txt"
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [FITS, "synthesize", *map(str, small_sites), "--rows", "3000000", "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            text=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not _being_written(tmp_path) and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
        assert _being_written(tmp_path), f"the run never started writing: {log.read_text()}"
        time.sleep(0.5)  # in the middle of the write
        proc.send_signal(sig)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = log.read_text()
    assert proc.returncode == 128 + sig, err
    assert f"interrupted by {sig.name}" in err and "Traceback" not in err
    assert _no_temp_files(tmp_path) == [] and not out.exists()


_KILLED_MID_WRITE = """
import sys
import pandas as pd
from fits import FITSSynthesizer
paths = sys.argv[1:-1]
synth = FITSSynthesizer(seed=0).fit([pd.read_csv(p) for p in paths])
synth.sample_to_file(sys.argv[-1], 3_000_000)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="unnamed files are Linux's")
@pytest.mark.parametrize("how", ["python", "cli"])
def test_a_killed_process_leaves_nothing_in_the_output_folder(small_sites, tmp_path, how):
    """SIGKILL (no handler runs) in the middle of a write: the table is written to a
    file without a name (O_TMPFILE), which the kernel frees with the process."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "big.csv"
    if how == "python":
        cmd = [sys.executable, "-c", _KILLED_MID_WRITE, *map(str, small_sites), str(out)]
    else:
        cmd = [FITS, "synthesize", *map(str, small_sites), "--rows", "3000000", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not _being_written(out_dir) and time.monotonic() < deadline:
            assert proc.poll() is None, f"{how}: ended before writing"
            time.sleep(0.2)
        assert _being_written(out_dir), "the write never started"
        assert _no_temp_files(out_dir) == []  # no named temporary file while writing
        time.sleep(0.5)
        proc.kill()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert list(out_dir.iterdir()) == []


# ---------------------------------------------------------------------------------------
# 4. Many rows: chunks, streamed, reproducible, estimated, bounded memory
# ---------------------------------------------------------------------------------------


def _fitted(paths: list[Path], seed: int = 3):
    from fits import FITSSynthesizer

    return FITSSynthesizer(seed=seed).fit({p.stem: pd.read_csv(p) for p in paths})


def test_chunks_do_not_change_the_rows(small_sites):
    whole = _fitted(small_sites).sample(2000)
    for chunk_rows in (1, 7, 999, 2000, 10**6):
        if chunk_rows == 1:
            synth = _fitted(small_sites)
            parts = list(synth.iter_sample(40, chunk_rows=1))
            assert len(parts) == 40
            pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), whole.iloc[:40])
            continue
        parts = list(_fitted(small_sites).iter_sample(2000, chunk_rows=chunk_rows))
        assert [len(p) for p in parts[:-1]] == [chunk_rows] * (len(parts) - 1)
        pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), whole)
    # two calls continue one stream: the same rows as one call
    synth = _fitted(small_sites)
    both = pd.concat([synth.sample(1234), synth.sample(2000 - 1234)], ignore_index=True)
    pd.testing.assert_frame_equal(both, whole)


def _typed_table(n: int = 80) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "uid": [f"u{i}" for i in range(n)],
            "x": rng.normal(size=n),
            "k": pd.array(
                np.where(rng.random(n) < 0.1, None, rng.integers(0, 1000, n)), dtype="Int64"
            ),
            "b": pd.array(
                np.where(rng.random(n) < 0.1, None, rng.random(n) < 0.5), dtype="boolean"
            ),
            "c": pd.Categorical(
                rng.choice(["lo", "mid", "hi"], n), categories=["lo", "mid", "hi", "unused"]
            ),
        }
    )


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_chunks_keep_types_and_number_surrogates_across_chunks(tmp_path, suffix):
    from fits import FITSSynthesizer

    frame = _typed_table()
    synth = FITSSynthesizer(seed=1, kinds={"uid": "id", "k": "continuous"})
    synth.fit([frame[:40], frame[40:]])
    whole = synth.sample(300, seed=4)
    parts = list(synth.iter_sample(300, chunk_rows=7, first_chunk_rows=3, seed=4))
    assert [len(p) for p in parts[:3]] == [3, 7, 7]
    pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), whole)
    assert whole["uid"].iloc[-1] == "synthetic-000300" and whole["uid"].is_unique
    out = tmp_path / f"typed{suffix}"
    synth.sample_to_file(out, 300, chunk_rows=7, seed=4)
    if suffix == ".parquet":
        pd.testing.assert_frame_equal(pd.read_parquet(out), whole)
    else:
        from fits.io import write_table

        write_table(whole, tmp_path / "whole.csv")
        assert out.read_bytes() == (tmp_path / "whole.csv").read_bytes()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_sample_to_file_streams_the_same_table(small_sites, tmp_path, suffix):
    import pyarrow.parquet as pq

    from fits.io import write_table

    out = tmp_path / f"streamed{suffix}"
    _fitted(small_sites).sample_to_file(out, 5000, chunk_rows=1024, seed=11)
    reference = tmp_path / f"whole{suffix}"
    write_table(_fitted(small_sites).sample(5000, seed=11), reference)
    if suffix == ".csv":
        assert out.read_bytes() == reference.read_bytes()
    else:
        assert pq.ParquetFile(out).metadata.num_row_groups == 5  # one per chunk
        pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(reference))
    assert _no_temp_files(tmp_path) == []


def test_sampling_memory_does_not_grow_with_the_rows(small_sites, tmp_path):
    import tracemalloc

    synth = _fitted(small_sites)
    peaks = []
    for n in (4_000, 32_000):
        tracemalloc.start()
        synth.sample_to_file(tmp_path / "m.csv", n, chunk_rows=2_000, overwrite=True)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 1.3 * peaks[0], peaks  # 8x the rows, about the same peak


def test_large_request_prints_an_estimate_and_keeps_the_rows(small_sites, tmp_path):
    from fits.io import ESTIMATE_ROWS, LARGE_REQUEST_ROWS

    rows = LARGE_REQUEST_ROWS + 1
    out = tmp_path / "large.parquet"
    res = run("synthesize", *small_sites, "--rows", rows, "--seed", 3, "--out", out)
    assert res.returncode == 0, res.stderr
    assert f"{rows:,} rows: estimated" in res.stderr and "free" in res.stderr
    got = pd.read_parquet(out)
    assert len(got) == rows
    # the CLI's pieces (a timed first piece, then chunks) give the API's rows
    synth = _fitted(small_sites, seed=3)
    first = next(synth.iter_sample(rows, chunk_rows=2 * ESTIMATE_ROWS))
    pd.testing.assert_frame_equal(
        got.iloc[: len(first)].reset_index(drop=True), first, check_dtype=False
    )


def _known_file(tmp_path: Path, rows: int) -> Path:
    path = tmp_path / "known.csv"
    pd.DataFrame({"g": np.random.default_rng(7).choice(["u", "v"], rows)}).to_csv(path, index=False)
    return path


def _small_chunks(monkeypatch) -> None:
    """Large requests from 100 rows on, a first piece of 32, chunks of 128: the --known
    paths of large requests on a small table."""
    from fits import io as fits_io
    from fits import synthesizer

    monkeypatch.setattr(fits_io, "LARGE_REQUEST_ROWS", 100)
    monkeypatch.setattr(fits_io, "ESTIMATE_ROWS", 32)
    monkeypatch.setattr(synthesizer, "SAMPLE_CHUNK_ROWS", 128)


def test_a_large_known_table_is_streamed_in_chunks_with_an_estimate(
    small_sites, tmp_path, monkeypatch
):
    """--known as --rows: a large known table gets the timed first piece's estimate, is
    drawn and written in chunks that the release check all sees, and the output is the
    table of one sample_remaining_columns call (cut into other chunks)."""
    from fits.evaluation.copies import ReleaseCheck
    from fits.io import read_table

    known = _known_file(tmp_path, 1000)
    expected = _fitted(small_sites, seed=3).sample_remaining_columns(read_table(known))
    _small_chunks(monkeypatch)
    checked: list[int] = []
    update = ReleaseCheck.update

    def counted(self, chunk):
        checked.append(len(chunk))
        return update(self, chunk)

    monkeypatch.setattr(ReleaseCheck, "update", counted)
    out = tmp_path / "completed.parquet"
    res = run("synthesize", *small_sites, "--known", known, "--seed", 3, "--out", out)
    assert res.returncode == 0, res.stderr
    assert "1,000 rows: estimated" in res.stderr and "free" in res.stderr
    assert checked == [32, *[128] * 7, 72]
    pd.testing.assert_frame_equal(pd.read_parquet(out), expected, check_dtype=False)
    assert _no_temp_files(tmp_path) == []


def test_the_known_progress_runs_over_every_chunk(small_sites, tmp_path, monkeypatch):
    from fits.cli.main import _complete_rows
    from fits.io import read_table

    _small_chunks(monkeypatch)
    seen: list[tuple[str, int, int]] = []
    known = _known_file(tmp_path, 300)
    written, _ = _complete_rows(
        _fitted(small_sites),
        known,
        read_table(known),
        tmp_path / "o.csv",
        lambda *a: seen.append(a),
        None,
        True,
    )
    assert written == 300 and len(pd.read_csv(tmp_path / "o.csv")) == 300
    assert {total for _, _, total in seen} == {300}
    assert [d for c, d, _ in seen if c == "x"][-1] == 300
    assert sorted(d for c, d, _ in seen if c == "g") == [32, 160, 288, 300]


def test_a_known_table_larger_than_the_free_disk_is_refused(small_sites, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from fits.cli import main

    class Usage:
        free = 1000  # bytes

    _small_chunks(monkeypatch)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage)
    known = _known_file(tmp_path, 1000)
    out = tmp_path / "huge.csv"
    res = CliRunner().invoke(
        main.app,
        ["synthesize", *map(str, small_sites), "--known", str(known), "--out", str(out)],
    )
    assert res.exit_code == 2, res.output
    assert f"--known {str(known)!r} (1000 rows): the output would take about" in res.output
    assert f"--out {str(out)!r} has 1.0 kB free" in res.output
    assert "split the --known table or write elsewhere" in res.output
    assert not out.exists() and _no_temp_files(tmp_path) == []


def test_a_request_larger_than_the_free_disk_is_refused(small_sites, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from fits.cli import main

    class Usage:
        free = 1000  # bytes

    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage)
    out = tmp_path / "huge.csv"
    res = CliRunner().invoke(
        main.app,
        ["synthesize", *map(str, small_sites), "--rows", "1000000000", "--out", str(out)],
    )
    assert res.exit_code == 2, res.output
    assert "--rows 1000000000" in res.output and "free" in res.output
    assert not out.exists() and _no_temp_files(tmp_path) == []


def test_an_absurd_row_count_is_refused_not_a_memory_error(small_sites, tmp_path):
    """--rows 10**20: the disk check answers (exit 2), no MemoryError traceback from
    listing every chunk before the first."""
    out = tmp_path / "huge.parquet"
    res = run("synthesize", *small_sites, "--rows", str(10**20), "--out", out, "-q")
    assert res.returncode == 2, res.stderr
    assert f"--rows {10**20}: the output would take about" in res.stderr
    assert "Traceback" not in res.stderr and "MemoryError" not in res.stderr
    assert not out.exists() and _no_temp_files(tmp_path) == []


@pytest.mark.slow
def test_peak_memory_of_two_million_rows(small_sites, tmp_path):
    """ru_maxrss of `fits synthesize` for 2e5 and 2e6 rows (about 3 minutes)."""
    script = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], check=True, capture_output=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    peaks = []
    for rows in (200_000, 2_000_000):
        out = tmp_path / f"m{rows}.parquet"
        cmd = [FITS, "synthesize", *map(str, small_sites), "--rows", str(rows), "--out", str(out)]
        res = subprocess.run(
            [sys.executable, "-c", script, *cmd], capture_output=True, text=True, check=True
        )
        peaks.append(int(res.stdout.split()[-1]))
        assert pd.io.parquet.read_parquet(out, columns=["x"]).shape[0] == rows
    print(f"peak RSS (kB) of fits synthesize: 2e5 rows {peaks[0]}, 2e6 rows {peaks[1]}")
    assert peaks[1] < 1.25 * peaks[0], peaks  # kB; 10x the rows


# ---------------------------------------------------------------------------------------
# 5. The exact-copy rate and the DCR check after every synthesis
# ---------------------------------------------------------------------------------------


def test_tiny_sites_warn_about_exact_copies(tmp_path):
    # 12 distinct rows per site (sites of fewer than 10 rows now get a clear refusal
    # from their policy: test_sites_below_the_policy_floor_are_a_clear_error)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    cells = [(g, k) for g in "pqr" for k in (1, 2, 3, 4)]
    pd.DataFrame({"g": [g for g, _ in cells], "x": [k / 2 for _, k in cells],
                  "k": [k for _, k in cells]}).to_csv(a, index=False)  # fmt: skip
    pd.DataFrame({"g": [chr(ord(g) + 3) for g, _ in cells], "x": [k * 2.5 for _, k in cells],
                  "k": [k + 4 for _, k in cells]}).to_csv(b, index=False)  # fmt: skip
    res = run("synthesize", a, b, "--rows", 1000, "--out", tmp_path / "o.csv", "-q")
    assert res.returncode == 0, res.stderr
    assert "exact copies:" in res.stdout and "distance to closest real row" in res.stdout
    assert "warning:" in res.stderr and "exact copies of real rows" in res.stderr


def test_sites_below_the_policy_floor_are_a_clear_error(tmp_path):
    """Two rows per site: every site abstains (fewer than the default k = 5 rows of any column)."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    pd.DataFrame({"g": ["p", "q"], "x": [1.0, 2.0], "k": [1, 2]}).to_csv(a, index=False)
    pd.DataFrame({"g": ["p", "r"], "x": [3.0, 4.0], "k": [5, 9]}).to_csv(b, index=False)
    res = run("synthesize", a, b, "--rows", 100, "--out", tmp_path / "o.csv", "-q")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "a: 2, b: 2 rows" in res.stderr and "every site would abstain" in res.stderr
    assert "min_effective_rows" in res.stderr and not (tmp_path / "o.csv").exists()


def test_a_normal_table_gives_no_copy_warning(sites, tmp_path):
    res = run("synthesize", *sites, "--rows", 1000, "--out", tmp_path / "o.csv", "-q")
    assert res.returncode == 0, res.stderr
    assert "exact copies: 0 of 1000" in res.stdout
    assert "warning" not in res.stderr, res.stderr


def test_release_check_counts_copies_like_a_join():
    """Oracle: a pandas merge on the (normalized) values counts the same copies."""
    from fits.evaluation.copies import ReleaseCheck

    rng = np.random.default_rng(5)
    real = pd.DataFrame(
        {
            "g": rng.choice(["a", "b", None], 80),
            "k": rng.integers(0, 4, 80),
            "x": rng.choice([0.5, 1.5, np.nan], 80),
        }
    )
    sites = {"one": real.iloc[:50], "two": real.iloc[50:]}
    syn = pd.DataFrame(
        {
            "g": pd.array(rng.choice(["a", "b", "c", None], 500), dtype="string"),
            "k": pd.array(rng.integers(0, 5, 500), dtype="Int64"),
            "x": rng.choice([0.5, 1.5, 2.5, np.nan], 500),
        }
    )
    check = ReleaseCheck(sites, {"g": "nominal", "k": "ordinal", "x": "continuous"})
    for start in range(0, 500, 128):
        check.update(syn.iloc[start : start + 128])
    result = check.result()

    def keyed(frame):
        f = frame.astype(object).where(frame.notna(), "<NA>")
        return f.assign(k=f["k"].map(str), x=f["x"].map(str))

    def copies(of):
        real_rows = keyed(of).drop_duplicates()
        hit = keyed(syn).reset_index().merge(real_rows, on=["g", "k", "x"])
        return set(hit["index"])

    union = copies(sites["one"]) | copies(sites["two"])
    assert result.copies == len(union) > 0
    assert result.copies_by_site == {"one": len(copies(sites["one"])), "two": len(
        copies(sites["two"]))}  # fmt: skip
    dup = keyed(real).duplicated(keep=False).sum()
    assert result.real_duplicates == dup
    assert result.n_synthetic == 500


def test_near_copy_warning_names_what_lowers_it():
    """Synthetic rows a hair from real ones (no exact copy) trip the near-copy warning,
    which names the remedies measured in benchmarks.md; a fresh sample does not."""
    from fits.evaluation.copies import ReleaseCheck

    rng = np.random.default_rng(7)
    real = pd.DataFrame({"x": rng.normal(size=600), "y": rng.normal(size=600)})
    sites = {"one": real.iloc[:400], "two": real.iloc[400:]}
    kinds = {"x": "continuous", "y": "continuous"}
    near = real + rng.normal(scale=1e-4, size=real.shape)
    check = ReleaseCheck(sites, kinds)
    check.update(near)
    result = check.result()
    assert result.copies == 0 and result.close_share > 0.9
    (line,) = result.warnings
    assert "nearly verbatim" in line
    assert "--order" in line and "--smoothing auto" in line
    fresh = ReleaseCheck(sites, kinds)
    fresh.update(pd.DataFrame({"x": rng.normal(size=600), "y": rng.normal(size=600)}))
    assert fresh.result().warnings == []


# ---------------------------------------------------------------------------------------
# 6. Smaller mends
# ---------------------------------------------------------------------------------------


def test_bad_seed_and_shares_name_the_option(sites, tmp_path):
    out = tmp_path / "o.csv"
    res = run("synthesize", *sites, "--rows", 5, "--out", out, "--seed", -1)
    assert res.returncode == 2 and "--seed" in res.stderr
    for shares in ("nan,1", "inf,1", "1,-1", "1,x"):
        res = run(
            "synthesize", sites[0], "--simulate-clients", 2, "--shares", shares, "--rows", 5,
            "--out", out,
        )  # fmt: skip
        assert res.returncode == 2 and "--shares" in res.stderr, (shares, res.stderr)
        assert "Traceback" not in res.stderr
    assert not out.exists()


def test_schema_file_errors_name_the_file_and_column(sites, tmp_path):
    schema = tmp_path / "schema.json"
    assert run("schema", *sites, "--out", schema).returncode == 0
    spec = json.loads(schema.read_text())
    no_kind = json.loads(json.dumps(spec))
    del no_kind["columns"][0]["kind"]
    bad_lower = json.loads(json.dumps(spec))
    bad_lower["columns"][1]["lower"] = "abc"
    for name, content, words in (
        ("no_kind.json", no_kind, ["column 'g'", '"kind"']),
        ("bad_lower.json", bad_lower, ["column 'x'", '"lower"', "'abc'"]),
    ):
        path = tmp_path / name
        path.write_text(json.dumps(content))
        res = run("synthesize", *sites, "--rows", 5, "--schema", path, "--out", tmp_path / "o.csv")
        assert res.returncode == 1, res.stderr
        assert name in res.stderr and all(w in res.stderr for w in words), res.stderr
        assert "KeyError" not in res.stderr and "Traceback" not in res.stderr


def test_schema_bounds_that_exclude_data_are_refused(sites, tmp_path):
    schema = tmp_path / "schema.json"
    assert run("schema", *sites, "--out", schema).returncode == 0
    spec = json.loads(schema.read_text())
    x = next(c for c in spec["columns"] if c["name"] == "x")
    x["lower"] = 0.0
    schema.write_text(json.dumps(spec))
    below = {p.stem: int((pd.read_csv(p)["x"] < 0).sum()) for p in sites}
    out = tmp_path / "o.csv"
    res = run("synthesize", *sites, "--rows", 5, "--schema", schema, "--out", out)
    assert res.returncode == 1, res.stderr
    site = next(iter(below))
    assert f"{site}: {below[site]} of 300 values of column 'x'" in res.stderr, res.stderr
    assert "outside the schema's bounds" in res.stderr and not out.exists()


def test_federated_split_gives_each_client_min_rows():
    from fits.datasets import PAPER_SHARES, federated_split

    frame = pd.DataFrame({"v": np.arange(100)})
    clients, test = federated_split(frame, PAPER_SHARES, seed=0, min_rows=2)
    plain, _ = federated_split(frame, PAPER_SHARES, seed=0)
    assert min(len(c) for c in plain) == 1  # what made the demo crash
    sizes, before = [len(c) for c in clients], [len(c) for c in plain]
    assert min(sizes) == 2 and sum(sizes) == 80 and len(test) == 20
    # the short client took exactly one row from the largest client
    assert sizes[-1] == before[-1] + 1 and sizes[0] == before[0] - 1
    assert sizes[1:-1] == before[1:-1]
    with pytest.raises(ValueError, match="at least 2"):
        federated_split(frame.iloc[:20], PAPER_SHARES, seed=0, min_rows=2)


def test_a_folder_or_missing_file_as_input_is_a_usage_error(sites, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    out = tmp_path / "o.csv"
    res = run("synthesize", folder, "--rows", 5, "--out", out)
    assert res.returncode == 2 and "is a directory" in res.stderr, res.stderr
    assert "no such file" not in res.stderr
    res = run("report", "--real", folder, "--synthetic", sites[0], "--out", tmp_path / "r.html")
    assert res.returncode == 2 and "is a directory" in res.stderr, res.stderr
    missing = tmp_path / "missing.csv"
    res_s = run("synthesize", missing, "--rows", 5, "--out", out)
    res_r = run("report", "--real", missing, "--synthetic", sites[0], "--out", tmp_path / "r.html")
    assert res_s.returncode == res_r.returncode == 2
    assert "no such file" in res_s.stderr and "no such file" in res_r.stderr


@pytest.mark.parametrize(
    ("column", "values", "words"),
    [
        ("t", pd.to_timedelta(np.arange(40), unit="s"), ["durations", "total_seconds"]),
        ("p", pd.period_range("2020-01", periods=40, freq="M"), ["periods", "to_timestamp"]),
        ("c", np.arange(40) + 1j, ["complex numbers", ".real"]),
        ("l", [np.array([1, 2])] * 40, ["nested values", "astype(str)"]),  # Parquet lists
        ("r", [{"k": i % 3} for i in range(40)], ["nested values", "a column of its own"]),
    ],
)
def test_fit_refuses_unmodelled_column_types_by_name(column, values, words):
    from fits import FITSSynthesizer
    from fits.core.schema import SchemaError

    frame = pd.DataFrame({"a": np.arange(40, dtype=float), column: values})
    with pytest.raises(SchemaError) as err:
        FITSSynthesizer(seed=0).fit([frame.iloc[:20], frame.iloc[20:]])
    assert f"column {column!r}" in str(err.value)
    assert all(w in str(err.value) for w in words)


def test_synthesize_refuses_a_parquet_list_column_by_name(tmp_path):
    """A Parquet list column: exit 1 naming the site and the column, not "TypeError:
    unhashable type: 'numpy.ndarray'"."""
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"s{i}.parquet")
        pd.DataFrame({"x": np.arange(30.0) + i, "tags": [[1, 2]] * 30}).to_parquet(paths[-1])
    res = run("synthesize", *paths, "--rows", 5, "--out", tmp_path / "o.csv", "-q")
    assert res.returncode == 1, res.stderr
    assert "s0: column 'tags' holds nested values" in res.stderr
    assert "unhashable" not in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "o.csv").exists()


def test_fit_refuses_duplicate_column_names():
    from fits import FITSSynthesizer
    from fits.core.schema import SchemaError

    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(40, 3)), columns=["a", "b", "a"])
    with pytest.raises(SchemaError, match=r"\['a'\] appear more than once"):
        FITSSynthesizer(seed=0).fit([frame.iloc[:20], frame.iloc[20:]])


def _has_flower() -> bool:
    import importlib.util

    return importlib.util.find_spec("flwr") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_sigterm_stops_a_local_federation_and_removes_its_temporary_file(sites, tmp_path):
    """About a minute: a real SuperLink and two SuperNodes on 127.0.0.1."""
    out = tmp_path / "fed.csv"
    proc = subprocess.Popen(
        [FITS, "federate", "local", *map(str, sites), "--rows", "300000", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not _being_written(tmp_path) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        assert _being_written(tmp_path), "the ServerApp never started writing"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted by SIGTERM" in err
    assert _no_temp_files(tmp_path) == [] and not out.exists()


def test_the_estimate_pays_the_boosted_models_once(tmp_path, capsys):
    """The boosted columns' models are fitted once, before the first row: the estimate
    of a large request counts their time once, not once per chunk (a stand-in
    synthesizer whose first chunk spends 0.5 s in its boost rounds)."""
    from fits.cli.main import _stream_rows
    from fits.federation.coordinator import BOOSTING_PROGRESS
    from fits.io import ESTIMATE_ROWS, LARGE_REQUEST_ROWS, OutputForms

    rows = 20 * LARGE_REQUEST_ROWS  # the old estimate: 0.5 s x rows / ESTIMATE_ROWS, 4 min

    class Boosted:
        def output_forms(self):  # no Decimal, text-date or spelt boolean column
            return OutputForms()

        def iter_sample(self, n, *, first_chunk_rows=None, progress=None):
            time.sleep(0.5)
            progress(BOOSTING_PROGRESS, 1, 1)
            yield pd.DataFrame({"x": np.arange(first_chunk_rows)})
            yield pd.DataFrame({"x": np.arange(n - first_chunk_rows)})

    written, _ = _stream_rows(Boosted(), rows, tmp_path / "o.csv", None, None, False)
    assert written == rows and ESTIMATE_ROWS < rows
    said = capsys.readouterr().err
    seconds = float(said.split("estimated ")[1].split(" s ")[0])
    assert 0 < seconds < 30, said  # the old estimate: 122 s; a loaded machine adds some
