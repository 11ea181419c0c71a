"""Output paths a stranger gave: ``--out`` a symbolic link to a file (the atomic rename
put a regular file in the link's place), ``--out o.csv/`` (a folder: a file named o.csv
was written), and the Python API's writers, which created a missing folder the command
line refuses."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.io import (
    DataFileError,
    OutputError,
    check_output,
    output_path,
    write_table,
    write_text,
)

from conftest import fits_in_process


def _sites(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for k in range(2):
        frame = pd.DataFrame({"x": rng.normal(size=30).round(2), "g": rng.choice(["a", "b"], 30)})
        paths.append(tmp_path / f"s{k}.csv")
        frame.to_csv(paths[-1], index=False)
    return paths


@pytest.fixture(scope="module")
def fitted() -> FITSSynthesizer:
    rng = np.random.default_rng(1)
    frames = [
        pd.DataFrame({"x": rng.normal(size=30), "g": rng.choice(["a", "b"], 30)}) for _ in range(2)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return FITSSynthesizer(seed=0).fit(frames)


def test_out_through_a_symbolic_link_keeps_the_link(tmp_path) -> None:
    sites = _sites(tmp_path)
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "t.csv"
    target.write_text("old\n")
    link = tmp_path / "o.csv"
    link.symlink_to(target)
    res = fits_in_process("synthesize", *sites, "--rows", 7, "--out", link, "--seed", 0)
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert list(pd.read_csv(target).columns) == ["x", "g"] and len(pd.read_csv(target)) == 7
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["t.csv"]  # no temp left
    bad = tmp_path / "in.csv"
    bad.symlink_to(sites[0])  # a link to an input: still refused, the input untouched
    before = sites[0].read_bytes()
    res = fits_in_process("synthesize", *sites, "--rows", 7, "--out", bad)
    assert res.returncode == 2 and "is the same file as the site table" in res.stderr
    assert sites[0].read_bytes() == before and bad.is_symlink()


def test_a_dangling_link_is_written_through_or_refused_naming_its_folder(tmp_path) -> None:
    link = tmp_path / "l.csv"
    link.symlink_to(tmp_path / "new.csv")
    write_table(pd.DataFrame({"a": [1]}), link)
    assert link.is_symlink() and (tmp_path / "new.csv").read_text() == "a\n1\n"
    gone = tmp_path / "g.csv"
    gone.symlink_to(tmp_path / "nodir" / "x.csv")
    with pytest.raises(OutputError, match="a link to .*the folder .*nodir' does not exist"):
        check_output(gone)
    with pytest.raises(FileNotFoundError, match="the folder .*nodir' does not exist"):
        write_text("x", gone)


@pytest.mark.parametrize("command", ["synthesize", "schema"])
def test_out_ending_with_a_slash_is_refused(tmp_path, command) -> None:
    sites = _sites(tmp_path)
    extra = ["--rows", 5] if command == "synthesize" else []
    res = fits_in_process(command, *sites, *extra, "--out", f"o.csv{os.sep}", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    said = " ".join(res.stderr.replace("\u2502", " ").split())  # the box's side lines
    assert "Invalid value for '--out': 'o.csv/' ends with '/', so it names a folder" in said
    assert not (tmp_path / "o.csv").exists()


def test_the_python_writers_refuse_a_missing_folder_and_a_slash(tmp_path, fitted) -> None:
    """``save`` and ``sample_to_file`` created ``nodir/sub`` where the command line and
    ``DataFrame.to_csv`` refuse; they also dropped a trailing slash."""
    with pytest.raises(OutputError, match="the folder '.*nodir/sub' does not exist"):
        fitted.save(tmp_path / "nodir" / "sub" / "s.pkl")
    with pytest.raises(OutputError, match="the folder '.*nodir/sub' does not exist"):
        fitted.sample_to_file(tmp_path / "nodir" / "sub" / "s.csv", 5)
    assert not (tmp_path / "nodir").exists()
    with pytest.raises(OutputError, match="ends with '/'"):
        fitted.save(f"{tmp_path / 's.pkl'}/")
    with pytest.raises(OutputError, match="ends with '/'"):
        fitted.sample_to_file(f"{tmp_path / 's.csv'}/", 5)
    assert sorted(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError, match="nodir' does not exist"):
        write_table(pd.DataFrame({"a": [1]}), tmp_path / "nodir" / "t.csv")
    assert output_path("~/x.csv") == output_path(os.path.expanduser("~/x.csv"))


def test_the_python_writers_write_through_a_link(tmp_path, fitted) -> None:
    target, link = tmp_path / "t.csv", tmp_path / "l.csv"
    target.write_text("")
    link.symlink_to(target)
    fitted.sample_to_file(link, 4)
    assert link.is_symlink() and len(pd.read_csv(target)) == 4
    pkl, plink = tmp_path / "s.pkl", tmp_path / "l.pkl"
    plink.symlink_to(pkl)
    fitted.save(plink)
    assert plink.is_symlink() and pkl.stat().st_size > 0


@pytest.mark.parametrize("tail", [f"{os.sep}.", f"{os.sep}.."])
def test_out_ending_with_a_dot_component_is_refused(tmp_path, tail) -> None:
    """``--out o.csv/.`` wrote a file o.csv (Path drops the '.'), exit 0."""
    sites = _sites(tmp_path)
    res = fits_in_process("synthesize", *sites, "--rows", 5, "--out", f"o.csv{tail}", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    said = " ".join(res.stderr.replace("\u2502", " ").split())
    assert f"'o.csv{tail}' ends with '{tail}', so it names a folder" in said
    assert not (tmp_path / "o.csv").exists()
    assert "('o.csv')" in str(pytest.raises(OutputError, output_path, "o.csv/.").value)
    with pytest.raises(OutputError, match=r"ends with '/\.'"):
        output_path(f"{tmp_path}/.")


def test_a_link_whose_name_and_target_disagree_is_refused(tmp_path) -> None:
    """``p.csv -> t2.parquet`` got CSV text written into t2.parquet; a link with no
    suffix to ``target.csv`` was refused as "unknown file type '(none)'"."""
    sites = _sites(tmp_path)
    parquet = tmp_path / "t2.parquet"
    parquet.write_bytes(b"keep")
    (tmp_path / "p.csv").symlink_to(parquet)
    (tmp_path / "plain").symlink_to(tmp_path / "target.csv")
    for out, said in (
        ("p.csv", "the link's name says .csv but the file it leads to ends in .parquet"),
        ("plain", "fits takes the file type from the name given, which has none; give"),
    ):
        res = fits_in_process("synthesize", *sites, "--rows", 5, "--out", out, cwd=tmp_path)
        assert res.returncode == 2, res.stderr
        assert said in " ".join(res.stderr.replace("\u2502", " ").split())
        with pytest.raises(DataFileError, match=said.split(";")[0]):
            write_table(pd.DataFrame({"a": [1]}), tmp_path / out)
    assert parquet.read_bytes() == b"keep" and not (tmp_path / "target.csv").exists()
