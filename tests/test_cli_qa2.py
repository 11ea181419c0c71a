"""`fits synthesize`, `fits schema` and `fits benchmark` as a data steward meets them
(second command-line QA pass): the mends of what the first passes left, each on small
tables the tests write themselves."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process as run


@pytest.fixture()
def sites(tmp_path: Path) -> list[Path]:
    """Two sites of 80 rows: a number, a label with accents and a yes/no column."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 80, 160),
            "city": rng.choice(["Zürich", "Genève", "Köln"], 160),
            "smoker": rng.choice(["yes", "no"], 160),
        }
    )
    paths = [tmp_path / "site_a.csv", tmp_path / "site_b.csv"]
    frame.iloc[:80].to_csv(paths[0], index=False)
    frame.iloc[80:].to_csv(paths[1], index=False)
    return paths


# ---------------------------------------------------------------------------------------
# A stop signal during the release check, after the table is written
# ---------------------------------------------------------------------------------------

_STOPPED_IN_THE_CHECK = """
import os, signal, sys, time
from fits.evaluation import copies

def result(self):  # as if the check of a large table were under way
    os.kill(os.getpid(), signal.{sig})
    time.sleep(60)
    raise AssertionError("the signal did not stop the command")

copies.ReleaseCheck.result = result
from fits.cli.main import app
sys.argv[0] = "fits"
app()
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_in_the_release_check_says_the_table_is_written(sites, tmp_path, sig):
    """The release check runs after the table is put in place (on large sites it takes
    seconds to minutes). A stop signal there ended the command without a word (SIGTERM:
    killed by the signal; SIGINT: exit 130, silent); it now says that the table is
    written and complete and only the check was not finished, and exits 128 + N."""
    out = tmp_path / "synthetic.csv"
    code = _STOPPED_IN_THE_CHECK.replace("{sig}", sig.name)
    args = ["synthesize", *map(str, sites), "--rows", "50", "--out", str(out), "-q"]
    res = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 128 + sig, (res.returncode, res.stderr)
    assert f"interrupted by {sig.name}" in res.stderr and "Traceback" not in res.stderr
    assert "is written and complete" in res.stderr and "release check" in res.stderr
    assert "no output was written" not in res.stderr
    assert len(pd.read_csv(out)) == 50  # the table stays: it was complete


def test_a_slow_release_check_says_what_it_does(sites, tmp_path, monkeypatch):
    """The check of many real rows takes seconds to minutes after the "wrote" line:
    a line on stderr says what runs (none with --quiet)."""
    import fits.cli.main as cli_main

    monkeypatch.setattr(cli_main, "SLOW_RELEASE_CHECK_ROWS", 100)
    out = tmp_path / "synthetic.csv"
    res = run("synthesize", *sites, "--rows", 20, "--out", out)
    assert res.returncode == 0, res.stderr
    assert "release check: distances of 20 synthetic rows to the sites' 160 rows" in res.stderr
    quiet = run("synthesize", *sites, "--rows", 20, "--out", out, "-q")
    assert quiet.returncode == 0 and "release check" not in quiet.stderr


# ---------------------------------------------------------------------------------------
# fits schema --out
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["schema.csv", "synthetic.parquet", "schema.txt", "schema"])
def test_schema_out_must_be_a_json_file(sites, tmp_path, name):
    """`fits schema --out schema.csv` wrote JSON into a .csv file (a table's name: one
    typed `fits schema` for `fits synthesize`); a path not ending in .json is now a
    usage error, before anything is read, and nothing is written."""
    out = tmp_path / name
    res = run("schema", *sites, "--out", out)
    assert res.returncode == 2, res.stderr
    assert f"--out {str(out)!r}" in res.stderr and "JSON" in res.stderr
    assert "schema.json" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()
    ok = run("schema", *sites, "--out", tmp_path / "Schema.JSON")
    assert ok.returncode == 0, ok.stderr


# ---------------------------------------------------------------------------------------
# A schema file edited by hand, fed back with --schema
# ---------------------------------------------------------------------------------------


def _edited_schema(sites: list[Path], tmp_path: Path, edit) -> Path:
    import json

    path = tmp_path / "schema.json"
    assert run("schema", *sites, "--out", path).returncode == 0
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc, indent=2))
    return path


def _column(doc: dict, name: str) -> dict:
    return next(c for c in doc["columns"] if c["name"] == name)


def test_a_column_renamed_in_the_schema_names_both_names_and_the_file(sites, tmp_path):
    """A column renamed in the schema file (smoker -> smokes) was reported from one side
    only (`site_a: column(s) ['smokes'] of the schema are missing here`), without the
    schema file or the table's own name for it: now one message names the file, both
    names and the fixes, before the fit (exit 1)."""

    def rename(doc: dict) -> None:
        _column(doc, "smoker")["name"] = "smokes"
        doc["order"] = ["smokes" if c == "smoker" else c for c in doc["order"]]

    schema = _edited_schema(sites, tmp_path, rename)
    out = tmp_path / "o.csv"
    res = run("synthesize", *sites, "--rows", 5, "--schema", schema, "--out", out, "-q")
    assert res.returncode == 1, res.stderr
    err = res.stderr
    assert f"--schema {str(schema)!r}" in err and "site_a" in err, err
    assert "['smokes']" in err and "['smoker']" in err and "rename" in err, err
    assert "--drop" in err and "Traceback" not in err and "[fit" not in err
    assert not out.exists()


def test_errors_the_fit_finds_in_an_edited_schema_name_the_file(sites, tmp_path):
    """What only the sites' values show (a category taken out, a bound set to null) was
    reported without the schema file's name: the message now starts with it."""

    def drop_category(doc: dict) -> None:
        _column(doc, "city")["categories"].remove("Zürich")

    def null_bound(doc: dict) -> None:
        _column(doc, "age")["lower"] = None

    for edit, words in ((drop_category, ["'city'", "Zürich"]), (null_bound, ["'age'", "lower"])):
        schema = _edited_schema(sites, tmp_path, edit)
        out = tmp_path / "o.csv"
        res = run("synthesize", *sites, "--rows", 5, "--schema", schema, "--out", out, "-q")
        assert res.returncode == 1, res.stderr
        assert res.stderr.startswith(f"error: --schema {str(schema)!r}: "), res.stderr
        assert all(w in res.stderr for w in words) and "Traceback" not in res.stderr
        assert not out.exists()


# ---------------------------------------------------------------------------------------
# Site files fits cannot read: what to do about them
# ---------------------------------------------------------------------------------------


def test_a_latin_1_csv_names_the_line_and_says_to_save_it_as_utf_8(sites, tmp_path):
    """A CSV saved as Latin-1 (accents: 'Zürich') said `cannot read it as csv ('utf-8'
    codec can't decode byte 0xfc in position 1: ...)`: a position in pandas' buffer,
    no line, no fix. It now names the line and says how to save the file as UTF-8."""
    latin = tmp_path / "latin.csv"
    text = sites[0].read_text(encoding="utf-8")
    latin.write_bytes(text.encode("latin-1"))
    line = next(k for k, ln in enumerate(text.splitlines(), 1) if any(ord(c) > 127 for c in ln))
    res = run("synthesize", latin, sites[1], "--rows", 5, "--out", tmp_path / "o.csv")
    assert res.returncode == 1, res.stderr
    assert f"{latin}: cannot read it as csv: line {line} is not UTF-8 text" in res.stderr, (
        res.stderr
    )
    first = next(c for c in text.splitlines()[line - 1] if ord(c) > 127)  # 'ü' or 'ö'
    assert f"byte {ord(first):#04x}, which is {first!r} in Latin-1" in res.stderr, res.stderr
    assert "save the file as UTF-8" in res.stderr
    assert "position" not in res.stderr and "Traceback" not in res.stderr


def test_a_utf_16_csv_says_so(sites, tmp_path):
    """A UTF-16 file (a spreadsheet's "Unicode Text") was called Latin-1 (its byte-order
    mark, byte 0xff, read as 'ÿ') and the fix given was `iconv -f latin1`."""
    wide = tmp_path / "wide.csv"
    wide.write_text(sites[0].read_text(encoding="utf-8"), encoding="utf-16")
    res = run("synthesize", wide, sites[1], "--rows", 5, "--out", tmp_path / "o.csv")
    assert res.returncode == 1, res.stderr
    assert f"{wide}: cannot read it as csv: the file is UTF-16 text" in res.stderr, res.stderr
    assert "iconv -f utf-16 -t utf-8" in res.stderr and "Latin-1" not in res.stderr


def test_a_row_with_an_extra_field_names_the_line_and_the_fix(sites, tmp_path):
    """A ragged row said pandas' `Error tokenizing data. C error: Expected 3 fields in
    line 6, saw 4` with a line break inside the message; it now says it in words, with
    the fix."""
    ragged = tmp_path / "ragged.csv"
    lines = sites[0].read_text(encoding="utf-8").splitlines()
    lines[5] += ",extra"
    ragged.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = run("synthesize", ragged, sites[1], "--rows", 5, "--out", tmp_path / "o.csv")
    assert res.returncode == 1, res.stderr
    assert f"{ragged}: line 6 has 4 fields, the header 3" in res.stderr, res.stderr
    assert "quote" in res.stderr and "C error" not in res.stderr
    assert res.stderr.count("\n") == 1  # one line


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("site.tsv", "rename it to .csv"),
        ("site.txt", "rename it to .csv"),
        ("site.csv.gz", "decompress it"),
        ("site.zip", "decompress it"),
        ("site.xlsx", "save it as CSV"),
        ("site.ods", "save it as CSV"),
    ],
)
def test_a_site_file_of_another_type_says_how_to_make_it_readable(sites, tmp_path, name, words):
    """.tsv, compressed and spreadsheet files were refused with `use a .csv or .parquet
    file` alone; the message now also says how to turn the file into one."""
    path = tmp_path / name
    path.write_bytes(sites[0].read_bytes())
    res = run("synthesize", path, sites[1], "--rows", 5, "--out", tmp_path / "o.csv")
    assert res.returncode == 2, res.stderr
    message = " ".join(res.stderr.replace("│", " ").split())
    assert "use a .csv or .parquet file" in message and words in message, res.stderr


# ---------------------------------------------------------------------------------------
# fits benchmark --data-dir
# ---------------------------------------------------------------------------------------


def test_benchmark_data_dir_messages_speak_the_command_line(sites, tmp_path):
    """Without --data-dir or FITS_DATA_DIR the command said `pass data_dir=...` (the
    Python argument), a --data-dir that is a file `no such directory`, and a folder
    without the files `point fits at its directory with the data_dir argument`: each
    now names the option and says what to give. Each is a usage error (exit 2), as a
    missing input file is to every command (they exited 1)."""
    out = tmp_path / "results"
    unset = run("benchmark", "-d", "german", "-o", out, env={"FITS_DATA_DIR": None})
    assert unset.returncode == 2 and "FITS_DATA_DIR" in unset.stderr, unset.stderr
    assert "--data-dir DIR" in unset.stderr and "pass data_dir=" not in unset.stderr
    a_file = run("benchmark", "-d", "german", "--data-dir", sites[0], "-o", out)
    assert a_file.returncode == 2, a_file.stderr
    assert f"--data-dir {str(sites[0])!r} is a file, not a folder" in a_file.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    no_files = run("benchmark", "-d", "german", "--data-dir", empty, "-o", out)
    assert no_files.returncode == 2 and "german.data" in no_files.stderr, no_files.stderr
    assert "--data-dir" in no_files.stderr and "FITS_DATA_DIR" in no_files.stderr
    assert not out.exists()


# ---------------------------------------------------------------------------------------
# A full disk in the middle of the write
# ---------------------------------------------------------------------------------------


def _disk_fills_up(monkeypatch, suffix: str) -> None:
    """Make the table writer fail as a full file system does, after the CSV writer
    wrote its chunk (the Parquet writer writes row groups)."""
    import errno

    import pyarrow.parquet as pq

    def full(self, *args, **kwargs):
        if suffix == ".csv":
            original(self, *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    if suffix == ".csv":
        original = pd.DataFrame.to_csv
        monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    else:
        monkeypatch.setattr(pq.ParquetWriter, "write_table", full)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_full_disk_mid_write_is_one_line_and_leaves_nothing(sites, tmp_path, monkeypatch, suffix):
    """Under 100,000 rows nothing estimates the file's size first; a file system that
    filled up during the write ended the command with two tracebacks (`OSError: [Errno
    28] No space left on device`). It is now one line naming --out and the fix, exit 2,
    and nothing is left in the folder."""
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / f"synthetic{suffix}"
    _disk_fills_up(monkeypatch, suffix)
    res = run("synthesize", *sites, "--rows", 50, "--out", out, "-q")
    assert res.returncode == 2, res.stderr
    errors = [line for line in res.stderr.splitlines() if not line.startswith("note: ")]
    assert "Traceback" not in res.stderr and len(errors) == 1, res.stderr  # notes on the data
    assert f"--out {str(out)!r}" in res.stderr and "no space left" in res.stderr.lower()
    assert "no output was written" in res.stderr
    assert list(folder.iterdir()) == []


def test_a_full_disk_while_writing_the_schema_is_one_line(sites, tmp_path, monkeypatch):
    import errno

    import fits.io

    def full(text, path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fits.io, "write_text", full)
    out = tmp_path / "schema.json"
    res = run("schema", *sites, "--out", out)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and f"--out {str(out)!r}" in res.stderr
    assert "no schema was written" in res.stderr and not out.exists()


def test_benchmark_names_tune_relevance_and_the_budget_not_relevance(tmp_path):
    """Every ValueError of the run was reported as a --relevance error (a line of the
    handler sat outside its `if`): `--tune-relevance nosuch` said `--relevance
    tune_relevance: no column ...` and too small a --relevance-budget `--relevance
    learning relevance weights ...`."""
    args = ["benchmark", "-d", "simulation", "--rows", 400, "-r", 1, "-g", "knn", "--no-modes"]
    out = tmp_path / "results"
    res = run(*args, "-o", out, "-q", "--tune-relevance", "nosuch")
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error: --tune-relevance: no column ['nosuch']"), res.stderr
    res = run(*args, "-o", out, "-q", "--tune-relevance", "Y_lin", "--relevance-budget", 3)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error: --relevance-budget: learning relevance"), res.stderr


def test_benchmark_on_a_full_disk_is_one_line(tmp_path, monkeypatch):
    """A full disk when the results are written after a repeat ended with a traceback."""
    import errno

    import fits.benchmark

    def full(result, base):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fits.benchmark, "write_result", full)
    out = tmp_path / "results"
    args = ["benchmark", "-d", "simulation", "--rows", 400, "-r", 1, "-g", "knn", "--no-modes"]
    res = run(*args, "-o", out, "-q")
    assert res.returncode == 2, res.stderr
    errors = [line for line in res.stderr.splitlines() if not line.startswith("note: ")]
    assert "Traceback" not in res.stderr and len(errors) == 1, res.stderr  # notes on the data
    assert f"--out {str(out)!r}" in res.stderr and "No space left on device" in res.stderr


def test_demo_on_a_full_disk_is_one_line(tmp_path, monkeypatch):
    """The demo (the README's main job) ended with a traceback on a full disk."""
    import errno

    import fits.io

    def full(frame, path, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fits.io, "write_table", full)
    out = tmp_path / "demo"
    res = run("demo", "--out", out, "--rows", 400, "-q")
    assert res.returncode == 2, res.stderr
    errors = [line for line in res.stderr.splitlines() if not line.startswith("note: ")]
    assert "Traceback" not in res.stderr and len(errors) == 1, res.stderr  # notes on the data
    assert f"--out {str(out)!r}" in res.stderr and "free some space" in res.stderr


def test_a_row_missing_a_field_is_refused_not_read_as_missing(sites, tmp_path):
    """A row of fewer fields than the header (`37,Köln` under `age,city,smoker`) was read
    with its last value missing, without a word: a value fits never saw became a
    missing one. It is refused as a row of extra fields is, naming the line and the
    fix; an empty field (`37,Köln,`) stays a missing value."""
    lines = sites[0].read_text(encoding="utf-8").splitlines()
    short = tmp_path / "short.csv"
    short.write_text("\n".join([*lines[:4], lines[4].rsplit(",", 1)[0], *lines[5:]]) + "\n")
    res = run("synthesize", short, sites[1], "--rows", 5, "--out", tmp_path / "o.csv")
    assert res.returncode == 1, res.stderr
    assert f"{short}: line 5 has 2 fields, the header 3" in res.stderr, res.stderr
    assert not (tmp_path / "o.csv").exists()
    empty = tmp_path / "empty_field.csv"
    empty.write_text("\n".join([*lines[:4], lines[4].rsplit(",", 1)[0] + ",", *lines[5:]]) + "\n")
    from fits.io import read_table

    assert read_table(empty)["smoker"].isna().sum() == 1


@pytest.mark.parametrize(
    "kind", ["parquet as csv", "csv as parquet", "xlsx as csv", "gzip as csv", "empty parquet"]
)
def test_a_file_under_the_wrong_extension_says_what_it_is(sites, tmp_path, kind):
    """A Parquet file named .csv was called 'not UTF-8 text' (and before that pandas'
    codec error), a CSV named .parquet got pyarrow's 'magic bytes not found in footer';
    a zip (a spreadsheet) or gzip file named .csv, the codec error: each now says what
    the file is and what to do."""
    import gzip
    import zipfile

    frame = pd.read_csv(sites[0])
    if kind == "parquet as csv":
        path = tmp_path / "site.csv"
        frame.to_parquet(path)
        words = "the file is a Parquet file, not CSV text; rename it to .parquet"
    elif kind == "csv as parquet":
        path = tmp_path / "site.parquet"
        path.write_bytes(sites[0].read_bytes())
        words = "the file is no Parquet file (it does not start as one); if it is CSV"
    elif kind == "empty parquet":  # told as an empty CSV is (was: "no Parquet file")
        path = tmp_path / "site.parquet"
        path.write_bytes(b"")
        words = ""
    elif kind == "xlsx as csv":
        path = tmp_path / "site.csv"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("xl/worksheets/sheet1.xml", "<worksheet/>")
        words = "the file is a zip archive (an .xlsx spreadsheet?), not CSV text"
    else:
        path = tmp_path / "site.csv"
        path.write_bytes(gzip.compress(sites[0].read_bytes()))
        words = "the file is gzip-compressed, not CSV text; decompress it first"
    res = run("synthesize", path, sites[1], "--rows", 5, "--out", tmp_path / "o.csv")
    assert res.returncode == 1, res.stderr
    message = " ".join(res.stderr.split())
    expected = f"{path}: cannot read it as {path.suffix[1:]}: {words}"
    if not words:
        expected = f"{path}: the file is empty"
    assert expected in message, res.stderr


# ---------------------------------------------------------------------------------------
# Reading large site files
# ---------------------------------------------------------------------------------------


def test_reading_a_large_site_file_says_so(sites, tmp_path, monkeypatch):
    """A site file of a gigabyte takes a minute to read, before the fit's first line:
    a line on stderr now says which file is read, and its size (none with --quiet)."""
    import fits.cli.main as cli_main

    monkeypatch.setattr(cli_main, "LARGE_SITE_FILE_BYTES", 1000)  # the fixture's files
    out = tmp_path / "o.csv"
    res = run("synthesize", *sites, "--rows", 5, "--out", out)
    assert res.returncode == 0, res.stderr
    size = sites[0].stat().st_size
    assert f"reading {sites[0]} ({size / 1e3:.1f} kB) ..." in res.stderr, res.stderr
    assert res.stderr.index("reading") < res.stderr.index("[fit")
    quiet = run("synthesize", *sites, "--rows", 5, "--out", out, "-q")
    assert quiet.returncode == 0 and "reading" not in quiet.stderr
    schema = run("schema", *sites, "--out", tmp_path / "s.json")
    assert schema.returncode == 0 and f"reading {sites[1]}" in schema.stderr


def test_categories_typed_as_text_in_the_schema_say_so(tmp_path):
    """Categories of a whole-number nominal column written as text in an edited schema
    ("1" for 1) were refused as `value(s) [2, 3, 1] that are not among its categories
    ['1', '2', '3']`, values and categories alike to the eye; the message now says the
    types differ and how to write them."""
    import json

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=160).round(3), "g": rng.choice([1, 2, 3], 160)})
    sites = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:80].to_csv(sites[0], index=False)
    frame.iloc[80:].to_csv(sites[1], index=False)
    schema = tmp_path / "schema.json"
    assert run("schema", *sites, "--out", schema, "--kind", "g=nominal").returncode == 0
    doc = json.loads(schema.read_text())
    g = next(c for c in doc["columns"] if c["name"] == "g")
    g["categories"] = [str(v) for v in g["categories"]]
    schema.write_text(json.dumps(doc))
    res = run("synthesize", *sites, "--rows", 5, "--out", tmp_path / "o.csv", "--schema", schema)
    assert res.returncode == 1, res.stderr
    assert "column 'g'" in res.stderr and "numbers" in res.stderr, res.stderr
    assert "the schema's categories are text" in res.stderr and "without quotes" in res.stderr


def test_benchmark_dataset_names_take_any_case(tmp_path):
    """`-d Adult` (the UCI page's spelling) was refused as no data set."""
    res = run("benchmark", "-d", "German", "-o", tmp_path / "r", env={"FITS_DATA_DIR": None})
    assert res.returncode == 2 and "no data directory given" in res.stderr, res.stderr
    res = run("benchmark", "-d", "census", "-o", tmp_path / "r")
    assert res.returncode == 2 and "census" in res.stderr
