"""``fits federate local`` prints ``fits synthesize``'s release check (exact copies and
distance to closest record) of the table its run wrote, against the site files
(:mod:`fits.cli.release`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process

FLOWER = "needs the flower extra: pip install 'fits[flower]'"


def _tiny_sites(folder: Path) -> list[Path]:
    """Two sites of 12 distinct rows: a synthetic table copies real rows (the warning)."""
    a, b = folder / "a.csv", folder / "b.csv"
    cells = [(g, k) for g in "pqr" for k in (1, 2, 3, 4)]
    pd.DataFrame({"g": [g for g, _ in cells], "x": [k / 2 for _, k in cells],
                  "k": [k for _, k in cells]}).to_csv(a, index=False)  # fmt: skip
    pd.DataFrame({"g": [chr(ord(g) + 3) for g, _ in cells], "x": [k * 2.5 for _, k in cells],
                  "k": [k + 4 for _, k in cells]}).to_csv(b, index=False)  # fmt: skip
    return [a, b]


def _check_lines(stdout: str, stderr: str) -> tuple[list[str], list[str]]:
    out = [line for line in stdout.splitlines() if line.startswith(("exact copies", "distance"))]
    return out, [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_the_run_config_drop_and_kinds_are_the_checks(tmp_path, capsys):
    """What fits federate local calls after its run, on a table fits synthesize wrote
    with the same options: the same lines (--drop uid; --kind k=nominal one-hot)."""
    pytest.importorskip("flwr", reason=FLOWER)
    from fits.cli.release import check_local_run

    rng = np.random.default_rng(4)
    n = 200
    frame = pd.DataFrame({"uid": [f"p{j:04d}" for j in range(n)],
                          "g": rng.choice(["u", "v"], n), "k": rng.integers(0, 3, n),
                          "x": rng.normal(size=n).round(2)})  # fmt: skip
    files = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:120].to_csv(files[0], index=False)
    frame.iloc[120:].to_csv(files[1], index=False)
    out = tmp_path / "o.csv"
    options = ["--drop", "uid", "--kind", "k=nominal", "--seed", 7]
    res = fits_in_process("synthesize", *files, "--rows", 300, "--out", out, "-q", *options)
    assert res.returncode == 0, res.stderr
    config = {"output": str(out), "seed": 7, "drop": "uid", "kinds": '{"k": "nominal"}'}
    check_local_run({"a": files[0], "b": files[1]}, config)
    got = capsys.readouterr()
    assert _check_lines(got.out, got.err) == _check_lines(res.stdout, res.stderr)
    assert got.out.startswith("exact copies: ")

    check_local_run({"a": files[0], "b": files[1]}, {**config, "drop": "nope"})
    got = capsys.readouterr()  # a check that cannot run says so; nothing else
    assert got.out == ""
    assert got.err.startswith("warning: the exact-copy check cannot run on this table (")


def test_a_written_table_is_checked_as_fits_synthesize_checks_it(tmp_path, capsys):
    """Tiny sites, whose synthetic rows copy real ones: the check of the table read
    back prints fits synthesize's lines and warnings."""
    from fits.cli.release import check_written_table
    from fits.core.schema import Schema
    from fits.io import read_table

    a, b = _tiny_sites(tmp_path)
    out = tmp_path / "o.csv"
    res = fits_in_process("synthesize", a, b, "--rows", 1000, "--out", out, "-q", "--seed", 2)
    assert res.returncode == 0, res.stderr
    assert "warning:" in res.stderr and "exact copies of real rows" in res.stderr
    tables = {"a": read_table(a), "b": read_table(b)}
    kinds = Schema.detect(tables, rules=False).kinds()
    check_written_table(tables, kinds, out, 2)
    got = capsys.readouterr()
    expected = [line for line in res.stdout.splitlines() if line.startswith(("exact", "distance"))]
    assert got.out.splitlines() == expected
    assert got.err == res.stderr


def test_a_check_that_fails_keeps_the_output(tmp_path, capsys):
    from fits.cli.release import check_written_table

    table = pd.DataFrame({"g": ["p", "q"] * 10, "x": np.arange(20.0)})
    gone = tmp_path / "gone.csv"  # no such file: the check fails, and says so
    check_written_table({"a": table}, {"g": "nominal", "x": "continuous"}, gone, 0)
    got = capsys.readouterr()
    assert got.out == "" and got.err.startswith("warning: the exact-copy check failed (")


@pytest.mark.flower
def test_fits_federate_local_prints_the_release_check_of_fits_synthesize(tmp_path):
    pytest.importorskip("flwr", reason=FLOWER)
    files = _tiny_sites(tmp_path)
    fits = Path(sys.executable).with_name("fits")
    said = {}
    for command in (["federate", "local"], ["synthesize"]):
        out = tmp_path / f"{command[-1]}.csv"
        res = subprocess.run(
            [str(fits), *command, *map(str, files), "--rows", "1000", "--seed", "2",
             "--out", str(out)],
            capture_output=True, text=True, timeout=400, check=False,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        assert out.is_file()
        said[command[-1]] = _check_lines(res.stdout, res.stderr)
    lines, warnings = said["local"]
    assert lines[0].startswith("exact copies: ") and lines[1].startswith("distance to closest")
    assert any("exact copies of real rows" in w for w in warnings), warnings
    assert said["local"] == said["synthesize"]  # the same table: the same words


def test_the_written_table_is_read_back_in_chunks(tmp_path, monkeypatch, capsys):
    """The check reads the written table chunk by chunk (never whole: memory is one
    chunk), with the counts of the whole table read at once, even where a chunk alone
    would parse a column otherwise: integers first and a decimal later, blanks only
    later, codes with leading zeros later, booleans with a blank later."""
    import fits.io
    from fits.cli import release
    from fits.evaluation.copies import ReleaseCheck
    from fits.io import read_table

    real = tmp_path / "real.csv"
    real.write_text(
        "code,flag,x,n\n0125,True,4.5,1\n12,False,2,2\n13,True,3,\n14,,1,4\n", encoding="utf-8"
    )
    out = tmp_path / "o.csv"
    lines = ["code,flag,x,n"] + ["12,False,2,2", "13,True,3,3", "14,False,1,4"] * 3
    lines += ["0125,True,4.5,1", "13,,3,", "0125,True,4.5,1", "14,,1,4"]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tables = {"a": read_table(real)}
    kinds = {"code": "nominal", "flag": "nominal", "x": "continuous", "n": "continuous"}

    whole = ReleaseCheck(tables, kinds, max_rows=release.RELEASE_CHECK_ROWS, seed=0)
    whole.update(read_table(out))
    expected = whole.result()
    assert expected.copies == 6  # 12,False,2,2 thrice, 0125 twice, 14 with a blank flag

    sizes: list[int] = []
    seen: list[ReleaseCheck] = []
    update = ReleaseCheck.update

    def spy(self: ReleaseCheck, chunk: pd.DataFrame) -> None:
        sizes.append(len(chunk))
        seen.append(self)
        update(self, chunk)

    def whole_read(path, *args, **kwargs):
        assert Path(path) != out, "the written table is read whole"
        return read_table(path, *args, **kwargs)

    monkeypatch.setattr(ReleaseCheck, "update", spy)
    monkeypatch.setattr(fits.io, "read_table", whole_read)
    monkeypatch.setattr(release, "CHECK_CHUNK_ROWS", 3)
    release.check_written_table(tables, kinds, out, 0)
    got = capsys.readouterr()
    assert "exact-copy check failed" not in got.err
    assert sizes == [3, 3, 3, 3, 1] and sum(sizes) == len(lines) - 1
    result = seen[0].result()
    assert (result.copies, result.copies_by_site, result.n_synthetic) == (
        expected.copies,
        expected.copies_by_site,
        expected.n_synthetic,
    )
    np.testing.assert_array_equal(result.synthetic_dcr, expected.synthetic_dcr)
    assert got.out.splitlines()[0] == expected.summary().splitlines()[0]
