"""The `fits` command line, driven as a user would.

Most tests run the command in this process (:func:`conftest.fits_in_process`: the same
exit code, stdout and stderr, without a Python start per command); the installed
executable itself (subprocess) answers the tests of the console script, of a real
process's exit codes 2 and 1, and of an output replaced only on success.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import FITS  # the command installed next to this Python, else PATH's
from conftest import fits_in_process as run


def run_installed(*args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    """The installed `fits` command in a process of its own."""
    return subprocess.run(
        [FITS, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _sites(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.choice(["north", "south", "east"], n)
    age = rng.integers(18, 90, n)
    flag = rng.random(n) < 0.3
    score = age * 0.5 + (g == "south") * 10 + rng.normal(size=n) * 3
    score[rng.random(n) < 0.1] = np.nan
    when = pd.Timestamp("2023-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D")
    return pd.DataFrame({"g": g, "age": age, "flag": flag, "score": score, "when": when})


@pytest.fixture()
def site_files(tmp_path):
    t = _sites(900)
    paths = [tmp_path / "site_a.csv", tmp_path / "site_b.csv", tmp_path / "site_c.parquet"]
    t.iloc[:450].to_csv(paths[0], index=False)
    t.iloc[450:750].to_csv(paths[1], index=False)
    t.iloc[750:].to_parquet(paths[2], index=False)
    return paths


def test_fits_executable_is_installed():
    assert Path(FITS).exists(), "the `fits` command is not installed"
    res = run_installed("--help")
    assert res.returncode == 0
    for command in ("synthesize", "schema", "demo"):
        assert command in res.stdout


@pytest.mark.parametrize("command", ["synthesize", "schema", "demo"])
def test_every_command_has_help_with_an_example(command):
    res = run(command, "--help")
    assert res.returncode == 0
    assert "Example" in res.stdout and "fits " in res.stdout


def test_synthesize_keeps_columns_and_types(site_files, tmp_path):
    out = tmp_path / "synthetic.csv"
    res = run("synthesize", *map(str, site_files), "--rows", "400", "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert "wrote 400 synthetic rows" in res.stdout and "site_a (450 rows)" in res.stdout
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # not the temp file's 0600
    syn = pd.read_csv(out, parse_dates=["when"])
    assert list(syn.columns) == ["g", "age", "flag", "score", "when"]
    assert len(syn) == 400
    assert syn["age"].dtype == np.int64  # integers stay integers
    assert syn["flag"].dtype == bool
    assert set(syn["g"]) <= {"north", "south", "east"}
    assert pd.api.types.is_datetime64_any_dtype(syn["when"])
    assert 0.02 < syn["score"].isna().mean() < 0.25  # missing values are modelled
    parquet = tmp_path / "synthetic.parquet"
    res = run("synthesize", *map(str, site_files), "--rows", "50", "--out", str(parquet), "-q")
    assert res.returncode == 0, res.stderr
    back = pd.read_parquet(parquet)
    assert pd.api.types.is_datetime64_any_dtype(back["when"]) and back["flag"].dtype == bool


def test_seed_reproduces_the_file(site_files, tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for out, jobs in ((a, "2"), (b, "1")):  # sites in parallel or one after another
        res = run(
            "synthesize",
            *map(str, site_files),
            "--rows",
            "200",
            "--out",
            str(out),
            "--seed",
            "5",
            "--kernel",
            "gaussian",
            "--jobs",
            jobs,
            "-q",
        )
        assert res.returncode == 0, res.stderr
    assert a.read_bytes() == b.read_bytes()


def test_design_option_reaches_the_synthesizer(site_files, tmp_path):
    """--design all / ordered / continuous give different tables; no --design gives
    the synthesizer's default's table; a wrong value is a usage error (exit 2)."""
    from fits import FITSSynthesizer

    files = {}
    for design in ("all", "ordered", "continuous", None):
        out = tmp_path / f"{design}.csv"
        extra = ["--design", design] if design else []
        res = run("synthesize", *map(str, site_files), "--rows", "150", "--out", str(out), "-q",
                  *extra)  # fmt: skip
        assert res.returncode == 0, res.stderr
        files[design] = out.read_bytes()
    assert files["all"] != files["continuous"]
    # no ordinal column here (age has > 20 values: continuous), so the ordered design
    # is the continuous one, bit for bit
    assert files["ordered"] == files["continuous"]
    assert files[None] == files[FITSSynthesizer().design]
    res = run("synthesize", *map(str, site_files), "--rows", "10", "--out",
              str(tmp_path / "x.csv"), "--design", "linear")  # fmt: skip
    assert res.returncode == 2 and "--design" in res.stderr
    assert not (tmp_path / "x.csv").exists()


def test_schema_round_trip_with_edits(site_files, tmp_path):
    schema = tmp_path / "schema.json"
    res = run("schema", *map(str, site_files), "--out", str(schema))
    assert res.returncode == 0, res.stderr
    doc = json.loads(schema.read_text())
    kinds = {c["name"]: c["kind"] for c in doc["columns"]}
    assert kinds == {
        "g": "nominal",
        "age": "continuous",
        "flag": "nominal",
        "score": "continuous",
        "when": "continuous",
    }
    # the user edits it: a different chain order
    doc["order"] = ["g", "flag", "age", "when", "score"]
    schema.write_text(json.dumps(doc))
    out = tmp_path / "s.csv"
    res = run(
        "synthesize",
        *map(str, site_files),
        "--rows",
        "100",
        "--out",
        str(out),
        "--schema",
        str(schema),
        "-q",
    )
    assert res.returncode == 0, res.stderr
    assert list(pd.read_csv(out).columns) == ["g", "age", "flag", "score", "when"]


def test_simulate_clients_from_one_table(tmp_path):
    pooled = tmp_path / "pooled.csv"
    _sites(1000, seed=3).to_csv(pooled, index=False)
    out = tmp_path / "out.csv"
    res = run(
        "synthesize",
        str(pooled),
        "--simulate-clients",
        "4",
        "--shares",
        "40,30,20,10",
        "--rows",
        "300",
        "--out",
        str(out),
        "-q",
    )
    assert res.returncode == 0, res.stderr
    assert "site 1 (400 rows)" in res.stdout and "site 4 (100 rows)" in res.stdout
    res = run(
        "synthesize",
        str(pooled),
        "--simulate-clients",
        "3",
        "--shares",
        "50,50",
        "--rows",
        "10",
        "--out",
        str(out),
    )
    assert res.returncode == 2 and "--shares" in res.stderr


def _expect_error(res, code, *fragments):
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    for fragment in fragments:
        assert fragment in res.stderr, (fragment, res.stderr)


def test_bad_files(site_files, tmp_path):
    out = tmp_path / "out.csv"
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    _expect_error(
        run("synthesize", str(empty), str(site_files[0]), "--rows", "5", "--out", str(out)),
        1,
        "empty.csv",
        "empty",
    )
    header = tmp_path / "header.csv"
    header.write_text("a,b\n")
    _expect_error(
        run("synthesize", str(header), str(site_files[0]), "--rows", "5", "--out", str(out)),
        1,
        "header.csv",
        "no rows",
    )
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet at all")
    _expect_error(
        run("synthesize", str(junk), str(site_files[0]), "--rows", "5", "--out", str(out)),
        1,
        "junk.parquet",
        "cannot read",
    )
    xlsx = tmp_path / "sheet.xlsx"
    xlsx.write_text("x")
    _expect_error(
        run("synthesize", str(xlsx), "--rows", "5", "--out", str(out)),
        2,
        "sheet.xlsx",
        ".csv or .parquet",
    )
    _expect_error(
        run(
            "synthesize", *map(str, site_files), "--rows", "5", "--out", str(tmp_path / "out.json")
        ),
        2,
        "out.json",
    )
    _expect_error(
        run("synthesize", str(tmp_path / "nope.csv"), "--rows", "5", "--out", str(out)),
        2,
        "nope.csv",
        "no such file",
    )
    assert not out.exists()


def test_unknown_file_type_message_reads_as_english(site_files, tmp_path):
    """The message names what the file was for, in a sentence that reads ("for the
    output", not "for a output")."""
    proc = run(
        "synthesize", *map(str, site_files), "--rows", "5", "--out", str(tmp_path / "out.json")
    )
    message = " ".join(proc.stderr.replace("│", " ").split())
    assert proc.returncode == 2, proc.stderr
    assert "unknown file type '.json' for the output; use a .csv or .parquet file" in message
    xlsx = tmp_path / "sheet.xlsx"
    xlsx.write_text("x")
    proc = run("synthesize", str(xlsx), *map(str, site_files), "--rows", "5", "--out", "o.csv")
    message = " ".join(proc.stderr.replace("│", " ").split())
    assert "unknown file type '.xlsx' for the site table" in message, proc.stderr


def test_sites_that_do_not_fit_together(site_files, tmp_path):
    out = tmp_path / "out.csv"
    frame = pd.read_csv(site_files[1])
    frame.drop(columns="age").assign(extra=1).to_csv(tmp_path / "odd.csv", index=False)
    _expect_error(
        run(
            "synthesize",
            str(site_files[0]),
            str(tmp_path / "odd.csv"),
            "--rows",
            "5",
            "--out",
            str(out),
        ),
        1,
        "odd",
        "missing: ['age']",
        "extra: ['extra']",
    )
    frame.assign(age=frame["age"].astype(str) + "y").to_csv(tmp_path / "text.csv", index=False)
    _expect_error(
        run(
            "synthesize",
            str(site_files[0]),
            str(tmp_path / "text.csv"),
            "--rows",
            "5",
            "--out",
            str(out),
        ),
        1,
        "'age'",
        "numeric at some clients and text",
    )
    assert not out.exists()


def test_degenerate_columns(site_files, tmp_path):
    """A column missing in every row, or of one value, at every site stopped the run
    ("drop it"); it is written as missing / as its value, with a note."""
    out = tmp_path / "out.csv"
    a = pd.read_csv(site_files[0])
    b = pd.read_csv(site_files[1])
    a.assign(empty=np.nan, k="same").to_csv(tmp_path / "a.csv", index=False)
    b.assign(empty=np.nan, k="same").to_csv(tmp_path / "b.csv", index=False)
    res = run(
        "synthesize",
        str(tmp_path / "a.csv"),
        str(tmp_path / "b.csv"),
        "--rows",
        "5",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    assert "note: " in res.stderr and "'empty' is missing in every row" in res.stderr
    assert "'k' holds 'same' in every row" in res.stderr
    assert "--drop empty --drop k" in res.stderr
    written = pd.read_csv(out)
    assert written["empty"].isna().all() and (written["k"] == "same").all()
    out.unlink()
    a.iloc[:1].to_csv(tmp_path / "one.csv", index=False)
    _expect_error(
        run(
            "synthesize",
            str(site_files[0]),
            str(tmp_path / "one.csv"),
            "--rows",
            "5",
            "--out",
            str(out),
        ),
        1,
        "one has 1 row",
    )
    assert not out.exists()


def test_identifier_columns_are_refused_until_dropped_or_declared(site_files, tmp_path):
    a = pd.read_csv(site_files[0])
    b = pd.read_csv(site_files[1])
    rng = np.random.default_rng(0)
    real_ids = [f"id{i}" for i in rng.permutation(len(a))]
    a.assign(uid=real_ids).to_csv(tmp_path / "a.csv", index=False)
    b.assign(uid=[f"x{i}" for i in range(len(b))]).to_csv(tmp_path / "b.csv", index=False)
    files = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    res = run("schema", *files, "--out", str(tmp_path / "s.json"))
    _expect_error(res, 2, "'uid' looks like an identifier", "--drop uid", "--kind uid=id")
    assert not (tmp_path / "s.json").exists()
    res = run("schema", *files, "--drop", "uid", "--out", str(tmp_path / "s.json"))
    assert res.returncode == 0, res.stderr
    assert "uid" not in json.loads((tmp_path / "s.json").read_text())["order"]
    out = tmp_path / "o.csv"
    res = run("synthesize", *files, "--kind", "uid=id", "--rows", "300", "--out", str(out))
    assert res.returncode == 0, res.stderr
    ids = pd.read_csv(out)["uid"]
    assert ids.is_unique and not set(ids) & (set(real_ids) | set(b.index.map("x{}".format)))
    assert ids.iloc[0] == "synthetic-000001"
    res = run("synthesize", *files, "--kind", "uid", "--rows", "3", "--out", str(out))
    _expect_error(res, 2, "--kind", "COLUMN=KIND")


def test_text_in_a_column_the_schema_says_is_numeric(site_files, tmp_path):
    schema = tmp_path / "schema.json"
    assert run("schema", *map(str, site_files), "--out", str(schema)).returncode == 0
    b = pd.read_csv(site_files[1])
    b["age"] = b["age"].astype(object)
    b.loc[5, "age"] = "unknown"
    b.to_csv(tmp_path / "b.csv", index=False)
    res = run(
        "synthesize",
        str(site_files[0]),
        str(tmp_path / "b.csv"),
        "--rows",
        "5",
        "--out",
        str(tmp_path / "o.csv"),
        "--schema",
        str(schema),
    )
    _expect_error(res, 1, "b: column 'age'", "holds text", "'unknown'")


def test_schema_file_that_does_not_match(site_files, tmp_path):
    schema = tmp_path / "schema.json"
    assert run("schema", *map(str, site_files), "--out", str(schema)).returncode == 0
    doc = json.loads(schema.read_text())
    doc["columns"] = [c for c in doc["columns"] if c["name"] != "flag"]
    doc["order"] = [c for c in doc["order"] if c != "flag"]
    schema.write_text(json.dumps(doc))
    res = run(
        "synthesize",
        *map(str, site_files),
        "--rows",
        "5",
        "--out",
        str(tmp_path / "o.csv"),
        "--schema",
        str(schema),
    )
    _expect_error(res, 1, "site_a", "['flag']", "not in the schema")
    schema.write_text("{not json")
    res = run(
        "synthesize",
        *map(str, site_files),
        "--rows",
        "5",
        "--out",
        str(tmp_path / "o.csv"),
        "--schema",
        str(schema),
    )
    _expect_error(res, 1, "schema.json", "fits schema")


def test_an_incomplete_or_repeating_order_is_a_usage_error(site_files, tmp_path):
    """--order that misses a column or names one twice is the command line's mistake:
    exit 2, naming the columns, before any work (it was the schema's exit 1)."""
    out = tmp_path / "o.csv"
    synth = ["synthesize", *map(str, site_files), "--rows", "5", "--out", str(out), "-q"]
    _expect_error(
        run(*synth, "--order", "score,g"),
        2,
        "--order must name every column exactly once; missing: age, flag, when",
    )
    _expect_error(
        run(*synth, "--order", "g,age,age,flag,score,when"),
        2,
        "named more than once: age",
    )
    schema = ["schema", *map(str, site_files), "--out", str(tmp_path / "s.json")]
    _expect_error(run(*schema, "--order", "when,g"), 2, "missing: age, flag, score")
    assert not out.exists() and not (tmp_path / "s.json").exists()
    res = run(*synth, "--order", "score,g", "--drop", "age", "--drop", "flag", "--drop", "when")
    assert res.returncode == 0, res.stderr  # what --drop leaves out need not be named


def test_schema_file_with_a_byte_order_mark_and_a_folder_for_an_option(site_files, tmp_path):
    """A schema file that an editor saved with a UTF-8 byte-order mark is read; a folder
    given to --schema or --policy is a usage error that does not call it a table."""
    schema = tmp_path / "schema.json"
    assert run("schema", *map(str, site_files), "--out", str(schema)).returncode == 0
    schema.write_bytes(b"\xef\xbb\xbf" + schema.read_bytes())
    out = tmp_path / "o.csv"
    synth = ["synthesize", *map(str, site_files), "--rows", "5", "--out", str(out), "-q"]
    res = run(*synth, "--schema", str(schema))
    assert res.returncode == 0, res.stderr
    folder = tmp_path / "folder"
    folder.mkdir()
    for option in ("--schema", "--policy"):
        _expect_error(run(*synth, option, str(folder)), 2, "is a directory, not a file")


def test_a_column_given_two_kinds_is_a_usage_error(site_files, tmp_path):
    out = tmp_path / "o.csv"
    synth = ["synthesize", *map(str, site_files), "--rows", "5", "--out", str(out), "-q"]
    res = run(*synth, "--kind", "X_C=continuous", "--kind", "X_C=ordinal")
    _expect_error(res, 2, "--kind", "two kinds")
    assert not out.exists()


@pytest.mark.parametrize("rows", ["-3", "2.5"])  # 0 writes the header alone
def test_bad_row_counts_are_usage_errors(site_files, tmp_path, rows):
    res = run_installed(
        "synthesize", *map(str, site_files), "--rows", rows, "--out", str(tmp_path / "o.csv")
    )
    _expect_error(res, 2, "--rows")


def test_existing_output_is_replaced_only_on_success(site_files, tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("precious\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    res = run_installed("synthesize", str(empty), "--rows", "5", "--out", str(out))
    assert res.returncode == 1
    assert out.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    res = run_installed("synthesize", *map(str, site_files), "--rows", "5", "--out", str(out), "-q")
    assert res.returncode == 0 and out.read_text() != "precious\n"


def test_demo_runs_and_says_where_outputs_are(tmp_path):
    """The README's main job, on few rows (its time is the report's, whatever the rows):
    every site gets at least two of them (one made the demo crash), and it says where
    its outputs are."""
    res = run("demo", "--out", str(tmp_path / "demo"), "--rows", "100", "--quiet")
    assert res.returncode == 0, res.stderr
    sizes = json.loads(res.stdout.split("sites of sizes ")[1].split("]")[0] + "]")
    assert min(sizes) >= 2 and sum(sizes) == 80
    for name in ("synthetic.csv", "report.html", "report.json"):
        assert (tmp_path / "demo" / name).exists()
        assert str(tmp_path / "demo" / name) in res.stdout
    assert "Energy distance" in res.stdout


def _has_flower() -> bool:
    import importlib.util

    return importlib.util.find_spec("flwr") is not None


@pytest.mark.parametrize("command", ["superlink", "site", "run", "local"])
def test_federate_commands_have_help_with_an_example(command):
    res = run("federate", command, "--help")
    assert res.returncode == 0
    assert "Example" in res.stdout and "fits federate" in res.stdout


def test_kernel_once_per_site(site_files, tmp_path):
    """--kernel given once per site took the last one for every site (a table of
    all-Gaussian sites, exit 0): it is now each site's scheme, as in fits federate local
    and FITSSynthesizer({site: kernel}); another count is a usage error."""
    from fits import FITSSynthesizer

    out = tmp_path / "mixed.csv"
    kernels = ["--kernel", "knn", "--kernel", "gaussian", "--kernel", "knn"]
    res = run("synthesize", *site_files, "--rows", "40", *kernels, "--out", out, "-q")
    assert res.returncode == 0, res.stderr
    tables = {p.stem: pd.read_csv(p) if p.suffix == ".csv" else pd.read_parquet(p)
              for p in site_files}  # fmt: skip
    schemes = dict(zip(tables, ["knn", "gaussian", "knn"], strict=True))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = FITSSynthesizer(schemes, seed=0).fit(tables).sample(40)
    written = pd.read_csv(out)
    np.testing.assert_allclose(written["score"], expected["score"], rtol=1e-12)
    assert (written["g"] == expected["g"]).all()
    res = run("synthesize", *site_files, "--rows", "5", *kernels[:4], "--out", out)
    assert res.returncode == 2 and "--kernel given 2 times for 3 sites" in res.stderr


_COMMANDS = [
    ("synthesize",),
    ("schema",),
    ("demo",),
    ("report",),
    ("benchmark",),
    ("analyze",),
    ("federate", "superlink"),
    ("federate", "site"),
    ("federate", "run"),
    ("federate", "local"),
]


@pytest.mark.parametrize("command", _COMMANDS, ids=" ".join)
def test_help_reads_well_on_an_80_column_terminal(command):
    """Typer keeps a docstring's line breaks: lines wrapped at 88 characters left a word
    alone on every other line at 80 columns, and examples wrapped mid-command. Prose
    fills its lines; an example's lines keep their indentation (a wrapped example would
    go on at the margin)."""
    res = run(*command, "--help", env={"COLUMNS": "80", "TERMINAL_WIDTH": None})
    assert res.returncode == 0, res.stderr
    description = res.stdout.split("\u256d")[0].splitlines()  # up to the first panel
    body = [line.rstrip() for line in description if not line.lstrip().startswith("Usage:")]
    for line, following in zip(body, body[1:], strict=False):
        if not line.strip() or line.startswith("   ") or not following.strip():
            continue  # a blank line, an example's line, or a paragraph's last line
        assert len(line) >= 60, f"a short line inside a paragraph: {line!r}"
    for line, following in zip(body, body[1:], strict=False):
        if line.startswith("   fits") and following.strip():
            assert following.startswith("   "), f"an example wraps at the margin: {line!r}"


@pytest.mark.skipif(_has_flower(), reason="Flower is installed here")
def test_federate_without_flower_says_how_to_install(site_files, tmp_path):
    res = run("federate", "local", *map(str, site_files), "--rows", "5", "--out", "x.csv")
    assert res.returncode == 2
    assert "pip install 'fits[flower]'" in res.stderr


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_federate_local_refuses_bad_arguments(site_files, tmp_path):
    out = str(tmp_path / "x.csv")
    res = run(
        "federate", "local", *map(str, site_files), "--rows", "5", "--out", out, "--kernel", "knn"
    )
    assert res.returncode == 2 and "one --kernel per site" in res.stderr
    res = run("federate", "local", str(tmp_path / "nope.csv"), "--rows", "5", "--out", out)
    assert res.returncode == 2 and "no such file" in res.stderr
    res = run(
        "federate", "local", *map(str, site_files), "--rows", "5", "--out", str(site_files[1])
    )
    assert res.returncode == 2 and "same file" in res.stderr
    res = run(
        "federate",
        "site",
        "--data",
        str(site_files[0]),
        "--superlink",
        "x:1",
        "--kernel",
        "tree",
        "--insecure",
    )
    assert res.returncode == 2 and "use knn or gaussian" in res.stderr
    assert not (tmp_path / "x.csv").exists()
    bad = tmp_path / "policy.json"
    bad.write_text('{"min_effective_rows": 10, "max_grids": 5}')
    site = ["federate", "site", "--data", str(site_files[0]), "--superlink", "x:1"]
    res = run(*site, "--insecure", "--policy", str(bad))
    assert res.returncode == 2
    assert "policy.json: unknown field(s) ['max_grids']" in res.stderr
    assert "Traceback" not in res.stderr
    res = run(*site, "--insecure", "--audit", str(tmp_path / "no-dir" / "a.jsonl"))
    assert res.returncode == 2 and "no such folder (for the audit log)" in res.stderr


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_federate_refuses_bad_tables_and_outputs_before_any_process_starts(site_files, tmp_path):
    """As fits synthesize does, with exit 2 and before a SuperLink starts: a site table
    given twice (its rows would count twice), two tables that would be one site, an
    unknown file type (site table or --out, also for fits federate run) and, for fits
    federate site, a missing file, a folder, or a table that cannot be a site (exit 1).
    They were found only during the run (exit 1), or not at all (a copy ran twice)."""
    out = str(tmp_path / "x.csv")
    copy = tmp_path / "copy.csv"
    copy.write_bytes(site_files[0].read_bytes())
    res = run("federate", "local", str(site_files[0]), str(copy), "--rows", "5", "--out", out)
    assert res.returncode == 2, res.stderr
    assert f"site tables '{site_files[0]}' and '{copy}' are the same file" in res.stderr
    (tmp_path / "other").mkdir()
    same_stem = tmp_path / "other" / site_files[1].name
    same_stem.write_text(site_files[1].read_text().replace("north", "west"))
    res = run("federate", "local", str(site_files[1]), str(same_stem), "--rows", "5", "-o", out)
    assert res.returncode == 2 and "would both be site 'site_b'" in res.stderr
    xlsx = tmp_path / "data.xlsx"
    xlsx.write_bytes(b"PK")
    res = run("federate", "local", str(site_files[0]), str(xlsx), "--rows", "5", "--out", out)
    assert res.returncode == 2 and "unknown file type '.xlsx' for the site table" in res.stderr
    bad_out = str(tmp_path / "x.xlsx")
    res = run("federate", "local", *map(str, site_files), "--rows", "5", "--out", bad_out)
    assert res.returncode == 2 and "unknown file type '.xlsx' for the output" in res.stderr
    res = run("federate", "run", "--superlink", "x:1", "--insecure", "-n", "5", "-o", bad_out)
    assert res.returncode == 2 and "unknown file type '.xlsx' for the output" in res.stderr
    site = ["federate", "site", "--superlink", "x:1", "--insecure", "--home", str(tmp_path)]
    res = run(*site, "--data", str(tmp_path / "nope.csv"))
    assert (
        res.returncode == 2 and "'" + str(tmp_path / "nope.csv") + "': no such file" in res.stderr
    )
    res = run(*site, "--data", str(tmp_path / "other"))
    assert res.returncode == 2 and "is a directory" in res.stderr
    res = run(*site, "--data", str(xlsx))
    assert res.returncode == 2 and "unknown file type '.xlsx'" in res.stderr
    one = tmp_path / "one.csv"
    pd.read_csv(site_files[0]).head(1).to_csv(one, index=False)
    res = run(*site, "--data", str(one))
    assert res.returncode == 1 and "one has 1 row(s); a client needs at least 2" in res.stderr
    assert not list(tmp_path.glob("x.*")) and "Traceback" not in res.stderr


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_federate_refuses_an_audit_log_at_the_output_path(site_files, tmp_path, monkeypatch):
    """--audit and --out naming one file (the ServerApp wrote the audit log over the
    synthetic table, and the command reported the table as written): exit 2."""
    monkeypatch.chdir(tmp_path)
    res = run("federate", "local", *map(str, site_files), "-n", "5", "-o", "s.csv",
              "--audit", str(tmp_path / "s.csv"))  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert f"--audit '{tmp_path / 's.csv'}' is the same file as --out 's.csv'" in res.stderr
    res = run("federate", "run", "--superlink", "x:1", "--insecure", "-n", "5",
              "-o", "s.csv", "--audit", "./s.csv")  # fmt: skip
    assert res.returncode == 2 and "the audit log would replace the synthetic" in res.stderr
    assert not (tmp_path / "s.csv").exists()


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_federate_local_reads_the_schema_file_before_starting(site_files, tmp_path):
    """A schema file that is not one: exit 1 naming it, before a SuperLink starts (the
    run failed after the federation started, without naming the file)."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"columns": [')
    out = str(tmp_path / "s.csv")
    res = run("federate", "local", *map(str, site_files), "-n", "5", "-o", out,
              "--schema", str(bad))  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert f"{bad}: not a usable schema file (the schema is not valid JSON" in res.stderr
    assert "SuperLink at" not in res.stderr


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_federate_refuses_kinds_with_a_schema_as_synthesize_does(site_files, tmp_path):
    """--kind with --schema: the schema's kinds won and --kind was ignored without a
    word; fits synthesize refuses the pair (exit 2), and so do fits federate local/run."""
    schema = tmp_path / "schema.json"
    assert run("schema", *map(str, site_files), "--out", str(schema)).returncode == 0
    out = str(tmp_path / "s.csv")
    for command in (["local", *map(str, site_files)], ["run", "--superlink", "x:1", "--insecure"]):
        res = run("federate", *command, "-n", "5", "-o", out, "--schema", str(schema),
                  "--kind", "g=ordinal")  # fmt: skip
        assert res.returncode == 2, res.stderr
        assert "--kind cannot be combined with --schema" in res.stderr


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_federate_superlink_and_site_refuse_a_port_in_use(site_files, tmp_path):
    """A second site on one machine with the default --port (or a SuperLink on a taken
    port): exit 2 naming the port and the fix, before Flower starts (the SuperNode
    failed with a Python traceback, the SuperLink with its server's log)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        res = run(
            "federate", "site", "--data", str(site_files[0]), "--superlink", "x:1",
            "--insecure", "--port", port, "--home", str(tmp_path / "site"),
        )  # fmt: skip
        assert res.returncode == 2, res.stderr
        assert f"--port {port}: the SuperNode's local port 127.0.0.1:{port} is taken" in res.stderr
        assert "its own --port" in res.stderr and "Traceback" not in res.stderr
        res = run(
            "federate", "superlink", "--insecure", "--host", "127.0.0.1", "--port", port,
            "--home", str(tmp_path / "link"),
        )  # fmt: skip
        assert res.returncode == 2, res.stderr
        assert f"--port {port}: the SuperLink cannot listen on 127.0.0.1:{port}" in res.stderr


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_federate_superlink_checks_its_certificates(tmp_path):
    res = run(
        "federate",
        "superlink",
        "--tls",
        "nope.pem",
        "nope.key",
        "ca.pem",
        "--home",
        str(tmp_path / "home"),
    )
    assert res.returncode == 2 and "--tls 'nope.pem': cannot read it" in res.stderr
    res = run("federate", "superlink", "--home", str(tmp_path / "home"))
    assert res.returncode == 2 and "or choose --insecure" in res.stderr


def test_synthesize_smoothing_auto_and_a_bad_value(site_files, tmp_path):
    out = tmp_path / "auto.csv"
    res = run(
        "synthesize", *map(str, site_files), "--rows", "100", "--out", str(out), "-q",
        "--smoothing", "auto",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert len(pd.read_csv(out)) == 100
    bad = tmp_path / "bad.csv"
    res = run(
        "synthesize", *map(str, site_files), "--rows", "10", "--out", str(bad),
        "--smoothing", "sharp",
    )  # fmt: skip
    assert res.returncode == 2 and "--smoothing" in res.stderr and "fixed or auto" in res.stderr
    assert not bad.exists()


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_federate_superlink_ctrl_c_exits_130(tmp_path):
    """Ctrl-C (SIGINT to the foreground process group) stops fits federate superlink
    and its Flower processes; the exit code is 128 + 2, as for every fits command."""
    import signal
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    proc = subprocess.Popen(
        [FITS, "federate", "superlink", "--insecure", "--host", "127.0.0.1", "--port", port,
         "--home", str(tmp_path / "home")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", int(port))) == 0:
                    break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1]
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err


def test_synthesize_known_completes_the_given_rows(site_files, tmp_path):
    """--known FILE: one synthetic row per row, the first chain columns as given."""
    known = tmp_path / "known.csv"
    pd.DataFrame({"g": ["south"] * 300 + ["north"] * 300}).to_csv(known, index=False)
    out = tmp_path / "completed.csv"
    res = run("synthesize", *site_files, "--known", known, "--out", out, "-q")
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(out)
    assert list(table.columns) == ["g", "age", "flag", "score", "when"]
    assert table["g"].tolist() == ["south"] * 300 + ["north"] * 300
    # score = 0.5 age + 10 [south] + noise: the south rows are drawn about 10 higher
    gap = table["score"][:300].mean() - table["score"][300:].mean()
    assert 7.0 < gap < 13.0, gap
    assert "wrote 600 synthetic rows" in res.stdout


def test_synthesize_known_usage_and_data_errors(site_files, tmp_path):
    out = tmp_path / "o.csv"
    known = tmp_path / "known.csv"
    pd.DataFrame({"age": [30, 40]}).to_csv(known, index=False)
    res = run("synthesize", *site_files, "--out", out)
    assert res.returncode == 2 and "give either --rows N" in res.stderr
    res = run("synthesize", *site_files, "--rows", "5", "--known", known, "--out", out)
    assert res.returncode == 2 and "give either --rows N" in res.stderr
    res = run("synthesize", *site_files, "--known", known, "--out", out)  # age is second
    assert res.returncode == 2, res.stderr
    assert "are not the first columns of the chain (g, age, flag, score, when)" in res.stderr
    assert "Put them first with --order age,g,flag,score,when" in res.stderr
    res = run("synthesize", *site_files, "--known", known, "--out", known)
    assert res.returncode == 2 and "--out" in res.stderr
    pd.DataFrame({"g": ["west"]}).to_csv(known, index=False)
    res = run("synthesize", *site_files, "--known", known, "--out", out)
    assert res.returncode == 1 and "value(s) ['west'] that are not among" in res.stderr
    assert "Traceback" not in res.stderr and not out.exists()
    # the library's argument name is the file here (it said 'known_columns has ...')
    pd.DataFrame({"g": ["south"], "note": ["x"]}).to_csv(known, index=False)
    res = run("synthesize", *site_files, "--known", known, "--out", out)
    assert res.returncode == 1, res.stderr
    assert "known.csv': the table has column(s) ['note'] that the site tables" in res.stderr
    assert "leave them out of the file" in res.stderr and "known_columns" not in res.stderr


def test_synthesize_known_header_is_checked_before_the_fit(site_files, tmp_path, monkeypatch):
    """--known: the file is read and its header checked against the site tables'
    before the fit (it was checked after it: minutes on a real table), each refusal
    naming the file, the column and the fix; the values, which need the fitted schema,
    after it."""
    import fits

    def no_fit(self, *args, **kwargs):
        raise AssertionError("fitted before the known file was checked")

    monkeypatch.setattr(fits.FITSSynthesizer, "fit", no_fit)
    out = tmp_path / "o.csv"
    known = tmp_path / "known.csv"

    def refused(text: str, *options: str) -> str:
        known.write_text(text)
        res = run("synthesize", *site_files, "--known", known, "--out", out, *options)
        assert "Traceback" not in res.stderr and not out.exists()
        return f"{res.returncode} {res.stderr}"

    where = f"--known {str(known)!r}"
    got = refused("g,note\nsouth,x\n")
    assert got.startswith("1 ") and f"{where}: the table has column(s) ['note']" in got
    assert "(their columns: g, age, flag, score, when); leave them out of the file" in got
    got = refused("g,age\nsouth,30\n", "--drop", "age")
    assert got.startswith("2 ") and "column(s) ['age'] are left out by --drop" in got
    got = refused("g, g\nsouth,south\n")
    assert got.startswith("1 ") and "names column(s) ['g'] more than once" in got
    got = refused("when\n2023-01-05\n", "--kind", "when=id", "--order", "when,g,age,flag,score")
    assert got.startswith("1 ") and "column 'when' is an identifier (kind id)" in got
    got = refused("g,age,flag,score,when\nsouth,30,True,1.0,2023-01-05\n")
    assert got.startswith("1 ") and "nothing is left to draw" in got
    got = refused("")
    assert got.startswith("1 ") and "known.csv: the file is empty" in got
    # where the columns lie in the chain is checked by the fit, which knows their kinds
    # (a discrete column may come anywhere; test_conditional_matching)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_synthesize_known_of_no_rows_writes_the_header(site_files, tmp_path, suffix):
    """--known FILE of no rows: one synthetic row per known row, so none: the header
    alone (it was refused: 'the table has a header but no rows'), in a Parquet file
    the columns' types of a table with rows; a bad header is still refused."""
    known = tmp_path / f"known{suffix}"
    if suffix == ".csv":
        known.write_text("g\n")
    else:
        pd.DataFrame({"g": pd.Series([], dtype=str)}).to_parquet(known, index=False)
    out = tmp_path / f"o{suffix}"
    res = run("synthesize", *site_files, "--known", known, "--out", out, "-q")
    assert res.returncode == 0, res.stderr
    assert "wrote 0 synthetic rows" in res.stdout and "exact copies" not in res.stdout
    if suffix == ".csv":
        assert out.read_text() == "g,age,flag,score,when\n"
    else:
        import pyarrow.parquet as pq

        rows = tmp_path / "rows.parquet"
        pd.DataFrame({"g": ["south", "north"]}).to_parquet(known, index=False)
        res = run("synthesize", *site_files, "--known", known, "--out", rows, "-q")
        assert res.returncode == 0, res.stderr
        assert pq.read_schema(out).remove_metadata() == pq.read_schema(rows).remove_metadata()
        assert pq.read_table(out).num_rows == 0
        pd.testing.assert_series_equal(pd.read_parquet(out).dtypes, pd.read_parquet(rows).dtypes)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_synthesize_rows_0_writes_the_header(site_files, tmp_path, suffix):
    """--rows 0 writes the header alone, as --known of no rows does (it was a usage
    error, exit 2), in a Parquet file with each column's type of a file with rows; the
    release check is skipped; a negative --rows is still a usage error."""
    out = tmp_path / f"o{suffix}"
    res = run("synthesize", *site_files, "--rows", "0", "--out", out, "-q")
    assert res.returncode == 0, res.stderr
    assert "wrote 0 synthetic rows" in res.stdout and "exact copies" not in res.stdout
    if suffix == ".csv":
        assert out.read_text() == "g,age,flag,score,when\n"
    else:
        import pyarrow.parquet as pq

        rows = tmp_path / "rows.parquet"
        res = run("synthesize", *site_files, "--rows", "5", "--out", rows, "-q")
        assert res.returncode == 0, res.stderr
        assert pq.read_schema(out).remove_metadata() == pq.read_schema(rows).remove_metadata()
        assert pq.read_table(out).num_rows == 0
    res = run("synthesize", *site_files, "--rows", "-1", "--out", tmp_path / "n.csv")
    assert res.returncode == 2 and not (tmp_path / "n.csv").exists()


def test_synthesize_known_order_advice_uses_the_headers_names(site_files, tmp_path):
    """A known column named without its header's spaces ('age' for ' age '): the advised
    --order names it once, as the header does (it named it twice: 'age, age ,...')."""
    paths = []
    for path in site_files[:2]:
        spaced = tmp_path / f"spaced_{path.name}"
        pd.read_csv(path).rename(columns={"age": " age "}).to_csv(spaced, index=False)
        paths.append(spaced)
    known = tmp_path / "known.csv"
    pd.DataFrame({"age": [30, 40]}).to_csv(known, index=False)
    res = run("synthesize", *paths, "--known", known, "--out", tmp_path / "o.csv")
    assert res.returncode == 2, res.stderr
    assert "Put them first with --order ' age ,g,flag,score,when'" in res.stderr, res.stderr


def test_federate_local_checks_the_known_header_before_any_process(site_files, tmp_path):
    """fits federate local --known: the file's header is checked against the site
    tables' before any process starts (with or without Flower installed), as fits
    synthesize checks it; the values, after the fit, by the ServerApp."""
    known = tmp_path / "known.csv"
    out = tmp_path / "o.csv"
    known.write_text("g,note\nsouth,x\n")
    res = run("federate", "local", *site_files, "--known", known, "--out", out)
    assert res.returncode == 1, res.stderr
    assert f"--known {str(known)!r}: the table has column(s) ['note']" in res.stderr
    known.write_text("g,age\nsouth,30\n")
    res = run("federate", "local", *site_files, "--known", known, "--out", out, "--drop", "age")
    assert res.returncode == 2 and "['age'] are left out by --drop" in res.stderr, res.stderr
    assert "SuperLink" not in res.stderr and not out.exists()


@pytest.mark.skipif(not _has_flower(), reason="needs the flower extra")
def test_federate_known_usage_errors(site_files, tmp_path):
    """fits federate local/run --known: one of --rows and --known, a table type, and
    never the output; all before any process starts."""
    known = tmp_path / "known.csv"
    pd.DataFrame({"g": ["south"]}).to_csv(known, index=False)
    out = tmp_path / "o.csv"
    for args in ([], ["--rows", "5", "--known", known]):
        res = run("federate", "local", *site_files, "--out", out, *args)
        assert res.returncode == 2 and "give either --rows N" in res.stderr, res.stderr
        res = run("federate", "run", "--superlink", "x:1", "--insecure", "--out", out, *args)
        assert res.returncode == 2 and "give either --rows N" in res.stderr, res.stderr
    res = run("federate", "local", *site_files, "--known", known, "--out", known)
    assert res.returncode == 2 and "--out" in res.stderr
    res = run(
        "federate", "run", "--superlink", "x:1", "--insecure", "--known", known, "--out", known
    )
    assert res.returncode == 2 and "is the --known table" in res.stderr
    res = run("federate", "local", *site_files, "--known", tmp_path / "nope.csv", "--out", out)
    assert res.returncode == 2 and "--known" in res.stderr and "no such file" in res.stderr
    res = run(
        "federate",
        "run",
        "--superlink",
        "x:1",
        "--insecure",
        "--known",
        tmp_path / "k.xlsx",
        "--out",
        out,
    )
    assert res.returncode == 2 and "unknown file type '.xlsx'" in res.stderr
    assert not out.exists()
