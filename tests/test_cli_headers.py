"""Every option that names a column finds a header with surrounding spaces (``' y '``)
by its name without them, the same way (:func:`fits.cli.options.match_columns`): an
exact header wins, else the one header equal up to surrounding whitespace; a name two
headers match that way, or none, is a usage error (exit 2). In process, on tiny tables."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fits.cli.main import app
from fits.cli.options import ColumnNameError, match_columns, match_keys
from fits.core.names import parse_column_list

#: The headers of the spaced tables, all with surrounding spaces.
SPACED = [" x ", " g ", " h ", " n ", " id "]


def _fits(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def sites(tmp_path_factory) -> list[Path]:
    """Two sites of 30 rows whose every header has surrounding spaces."""
    folder = tmp_path_factory.mktemp("spaced")
    rng = np.random.default_rng(0)
    paths = []
    for k, name in enumerate(("a", "b")):
        g = rng.choice(["u", "v", "w"], 30)
        x = rng.normal(size=30) + (g == "u")
        frame = pd.DataFrame(
            {
                " x ": x.round(3),
                " g ": g,
                " h ": 1 + (x > 0) + (x > 1),
                " n ": rng.integers(0, 10, 30),
                " id ": np.arange(30) + 100 * k,
            }
        )
        paths.append(folder / f"{name}.csv")
        frame.to_csv(paths[-1], index=False)
    return paths


@pytest.fixture(scope="module")
def ambiguous(tmp_path_factory) -> Path:
    """Headers ' a' and 'a ': the name 'a' could be either."""
    path = tmp_path_factory.mktemp("ambiguous") / "t.csv"
    rng = np.random.default_rng(1)
    pd.DataFrame(
        {" a": rng.normal(size=20), "a ": rng.normal(size=20), "b": rng.normal(size=20)}
    ).to_csv(path, index=False)
    return path


def test_match_columns_exact_wins_then_stripped_then_refuses() -> None:
    assert match_columns(["a"], ["a", " a "], "--kind") == ["a"]
    assert match_columns(["a", " a "], ["a", " a "], "--kind") == ["a", " a "]
    assert match_columns(["y", "x "], [" x", " y "], "--order") == [" y ", " x"]
    with pytest.raises(ColumnNameError, match=r"--order: 'a' could be column ' a' or 'a '"):
        match_columns(["a"], [" a", "a ", "b"], "--order")
    with pytest.raises(ColumnNameError) as info:
        match_columns(["zz", "b", "qq"], [" a", "b"], "--drop", "t's table")
    assert str(info.value) == "--drop: no column ['qq', 'zz'] in t's table (columns: ' a', b)"
    star = match_keys(
        {"*": "boosting", "y": "kernel"}, [" y "], "--column-model", is_column=lambda c, _: c != "*"
    )
    assert star == {"*": "boosting", " y ": "kernel"}
    with pytest.raises(ColumnNameError, match=r"--kind names column ' y ' twice"):
        match_keys({"y": "nominal", " y ": "ordinal"}, [" y "], "--kind")


def test_synthesize_resolves_every_column_option(sites, tmp_path, monkeypatch) -> None:
    """--drop, --kind, --order, --column-design, --column-model and --boosting COL: name
    spaced headers without the spaces; the synthesizer gets the headers."""
    import fits

    real = fits.FITSSynthesizer
    seen: dict = {}

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(fits, "FITSSynthesizer", spy)
    out = tmp_path / "s.csv"
    res = _fits("synthesize", *sites, "--rows", 20, "--out", out, "-q", "--drop", "n",
                "--kind", "id=id", "--order", "g, x ,h,id", "--column-design", "x=constant",
                "--column-model", "h=boosting", "--boosting", "h:n_trees=2")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert seen["kinds"] == {" id ": "id"}
    assert seen["order"] == [" g ", " x ", " h ", " id "]
    assert seen["column_designs"] == {" x ": "constant"}
    assert seen["column_models"] == {" h ": "boosting"}
    assert seen["boosting"] == {" h ": {"n_trees": 2}}
    synthetic = pd.read_csv(out)
    assert list(synthetic.columns) == [" x ", " g ", " h ", " id "]  # ' n ' dropped
    assert synthetic[" id "].str.startswith("synthetic-").all()  # kind id: surrogates


def test_schema_resolves_drop_kind_order(sites, tmp_path) -> None:
    out = tmp_path / "schema.json"
    res = _fits("schema", *sites, "--out", out, "--drop", "n", "--kind", "id=id",
                "--kind", "h=nominal", "--order", "h,g,x,id")  # fmt: skip
    assert res.exit_code == 0, res.output
    schema = json.loads(out.read_text())
    assert schema["order"] == [" h ", " g ", " x ", " id "]
    kinds = {c["name"]: c["kind"] for c in schema["columns"]}
    assert kinds == {" x ": "continuous", " g ": "nominal", " h ": "nominal", " id ": "id"}


def test_an_exact_header_wins(tmp_path) -> None:
    """Headers 'h' and ' h ': --kind h=... is 'h', and ' h =...' the other."""
    path = tmp_path / "t.csv"
    # x not 0..14: whole numbers in row order are a row number, refused as an identifier
    pd.DataFrame({"h": [1, 2, 3] * 5, " h ": [3, 1, 2] * 5, "x": np.arange(15.0) / 7}).to_csv(
        path, index=False
    )
    out = tmp_path / "schema.json"
    res = _fits("schema", path, "--out", out, "--kind", "h=nominal", "--order", "x,h, h ")
    assert res.exit_code == 0, res.output
    schema = json.loads(out.read_text())
    assert {c["name"]: c["kind"] for c in schema["columns"]}["h"] == "nominal"
    assert {c["name"]: c["kind"] for c in schema["columns"]}[" h "] == "ordinal"
    assert schema["order"] == ["x", "h", " h "]


def test_report_target(sites, tmp_path) -> None:
    out, js = tmp_path / "r.html", tmp_path / "r.json"
    res = _fits("report", "--real", sites[0], "--synthetic", sites[1], "--out", out,
                "--json", js, "--target", "x", "--quiet", "--no-direct")  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads(js.read_text())
    assert report["targets"] == [" x "] and report["utility"][" x "]["target"] == " x "


@pytest.mark.filterwarnings("ignore:column ' id ' holds a different whole number")
def test_analyze_target_and_features(sites, tmp_path) -> None:
    out = tmp_path / "result.json"
    res = _fits("analyze", *sites, "--target", "x", "--features", "h, n", "--family",
                "linear", "--out", out)  # fmt: skip
    assert res.exit_code == 0, res.output
    result = json.loads(out.read_text())
    assert result["target"] == " x " and set(result["params"]) == {"(intercept)", " h ", " n "}


def test_federate_local_resolves_every_column_option(sites, tmp_path, monkeypatch) -> None:
    """fits federate local reads the first site's header and sends the headers in the
    run config (the kinds as JSON, which keeps their spaces); Flower itself is not run."""
    from fits.cli import federate

    seen: dict = {}

    def run_local_federation(launch, site_files, config, **options):
        seen.update(config)
        Path(config["output"]).write_text("g\nu\n")  # what the ServerApp writes
        return SimpleNamespace(ok=True, log="", run_id=1, seconds=0.0)

    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(federate, "run_local_federation", run_local_federation)
    res = _fits("federate", "local", *sites, "--rows", 5, "--out", tmp_path / "s.csv",
                "--kind", "id:id", "--order", "g,x,h,n,id", "--column-design", "x=constant",
                "--column-model", "h=boosting", "--boosting", "h:n_trees=2")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(seen["kinds"]) == {" id ": "id"}
    assert parse_column_list(seen["order"], "order") == [" g ", " x ", " h ", " n ", " id "]
    assert json.loads(seen["column-designs"]) == {" x ": "constant"}
    assert json.loads(seen["column-models"]) == {" h ": "boosting"}
    assert json.loads(seen["boosting"]) == {" h ": {"n_trees": 2}}
    # fits federate run (the SuperLink's machine holds no table): names go as given
    config = federate._run_config(tmp_path / "o.csv", 5, 0, ["age:continuous", "b:id"], ["b,age"],
                                  None, 60.0, 2, None)  # fmt: skip
    assert config["kinds"] == "age:continuous,b:id" and config["order"] == "b,age"


def test_federate_drop_is_synthesize_drop(sites, tmp_path, monkeypatch) -> None:
    """fits federate local --drop: the names go in the run config as given (each site
    resolves them to its own header and leaves the column out of its table), and are
    checked here, site by site, as fits synthesize --drop checks them: a site without
    the column is the same usage error (exit 2), and the other options name the columns
    left, as with fits synthesize."""
    from fits.cli import federate

    seen: dict = {}

    def run_local_federation(launch, site_files, config, **options):
        seen.update(config)
        Path(config["output"]).write_text("g\nu\n")  # what the ServerApp writes
        return SimpleNamespace(ok=True, log="", run_id=1, seconds=0.0)

    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(federate, "run_local_federation", run_local_federation)
    out = tmp_path / "s.csv"
    local = ["federate", "local", *sites, "--rows", 5, "--out", out]
    res = _fits(*local, "--drop", "n", "--drop", "id", "--order", "g,x,h", "--kind", "h:nominal")
    assert res.exit_code == 0, res.output
    assert seen["drop"] == "n,id"
    assert parse_column_list(seen["order"], "order") == [" g ", " x ", " h "]
    assert json.loads(seen["kinds"]) == {" h ": "nominal"}
    seen.clear()
    res = _fits(*local, "--drop", " n ", "--drop", "x,y")  # as given: a JSON array
    assert res.exit_code == 2 and not seen, res.output  # no column 'x,y'
    config = federate._run_config(out, 5, 0, [], "", None, 60.0, 2, None, drop=[" n ", "x,y"])
    assert json.loads(config["drop"]) == [" n ", "x,y"]
    # a name no site has: what fits synthesize says, word for word
    said = []
    for argv in (
        ["synthesize", *sites, "--rows", 5, "--out", out, "-q"],
        ["federate", "local", *sites, "--rows", 5, "--out", out],
    ):
        res = _fits(*argv, "--drop", "zz")
        assert res.exit_code == 2, res.output
        said.append(" ".join(res.output.split()))
    assert said[0] == said[1], said
    assert "--drop: no column ['zz'] in a's table" in said[1]
    # a column only one site has: fits synthesize leaves it out where it is (the sites
    # then hold the same columns); fits federate cannot (one drop for every site, each
    # refusing a name it lacks): it says what to do instead
    lacking = tmp_path / "c.csv"
    pd.read_csv(sites[1]).drop(columns=[" n "]).to_csv(lacking, index=False)
    res = _fits("synthesize", sites[0], lacking, "--rows", 5, "--out", out, "-q", "--drop", "n")
    assert res.exit_code == 0, res.output
    assert list(pd.read_csv(out).columns) == [" x ", " g ", " h ", " id "]
    out.unlink()
    res = _fits(
        "synthesize", sites[0], lacking, "--rows", 5, "--out", out, "-q"
    )  # without --drop: the columns differ
    assert res.exit_code == 1 and "columns differ" in res.output, res.output
    res = _fits("federate", "local", sites[0], lacking, "--rows", 5, "--out", out, "--drop", "n")
    assert res.exit_code == 2, res.output
    flat = " ".join(res.output.split())
    assert "--drop: column 'n' is in the table(s) of a but not of c." in flat, flat
    assert "leave it out of the file(s) of a yourself" in flat
    assert "run fits synthesize on the same files with --drop 'n'" in flat
    # what --drop leaves out cannot be named by the other options, as in fits synthesize
    for command in (["synthesize", *sites, "--rows", 5, "--out", out, "-q"], local):
        res = _fits(*command, "--drop", "n", "--kind", "n=nominal")
        assert res.exit_code == 2 and "--kind: no column ['n']" in res.output, res.output
    assert not out.exists() and not seen


def test_federate_site_drop(sites, tmp_path, monkeypatch) -> None:
    """fits federate site --drop (the data holder's own): resolved to this table's
    header as fits synthesize --drop resolves it (unknown: exit 2 before Flower starts);
    the SuperNode's node config gets the header, and the site's check and its line on
    stderr see the table without it."""
    from fits.cli import federate

    given: dict = {}

    def supernode_command(superlink, data, **options):
        given.update(options)
        return ["flower-supernode"]

    launch = SimpleNamespace(FederationError=RuntimeError, supernode_command=supernode_command)
    monkeypatch.setattr(federate, "_launch", lambda: launch)
    monkeypatch.setattr(federate, "_port_problem", lambda host, port: None)
    monkeypatch.setattr(federate, "_exec", lambda cmd, home: None)
    site = ["federate", "site", "--data", sites[0], "--superlink", "x:1", "--insecure"]
    res = _fits(*site, "--drop", "zz")
    assert res.exit_code == 2 and not given, res.output
    flat = " ".join(res.output.split())
    assert (
        "--drop: no column ['zz'] in a's table (columns: ' x ', ' g ', ' h ', ' n ', ' id ')"
        in flat
    )
    res = _fits(*site, "--name", "north", "--drop", "n", "--drop", "id", "--drop", " n ")
    assert res.exit_code == 0, res.output
    assert given["drop"] == [" n ", " id "]
    assert "north: 30 rows, 3 columns (left out: ' n ', ' id ')" in res.output
    from fits.core.names import format_column_list, parse_column_list

    assert parse_column_list(format_column_list(given["drop"]), "drop") == [" n ", " id "]


def _cases(table: str, name: str, other: str) -> list[tuple[str, list[str]]]:
    """(option, command line) of every option naming column ``name`` of ``table``
    (``other``: a column the name resolves to without doubt)."""
    synth = ["synthesize", table, "--rows", "5", "--out", "{out}/s.csv", "-q"]
    schema = ["schema", table, "--out", "{out}/schema.json"]
    real = ["report", "--real", table, "--synthetic", table, "--out", "{out}/r.html"]
    analyze = ["analyze", table, "--out", "{out}/r.json", "--family", "linear"]
    federate = ["federate", "local", table, "--rows", "5", "--out", "{out}/s.csv"]
    return [
        ("--drop", [*synth, "--drop", name]),
        ("--kind", [*synth, "--kind", f"{name}=nominal"]),
        ("--order", [*synth, "--order", f"{name},{other}"]),
        ("--column-design", [*synth, "--column-design", f"{name}=constant"]),
        ("--column-model", [*synth, "--column-model", f"{name}=boosting"]),
        ("--boosting", [*synth, "--column-model", "*=boosting", "--boosting", f"{name}:depth=2"]),
        ("--drop", [*schema, "--drop", name]),
        ("--kind", [*schema, "--kind", f"{name}=nominal"]),
        ("--order", [*schema, "--order", f"{other},{name}"]),
        ("--target", [*real, "--target", name]),
        ("--target", [*analyze, "--target", name]),
        ("--features", [*analyze, "--target", other, "--features", name]),
        ("--drop", [*federate, "--drop", name]),
        ("--kind", [*federate, "--kind", f"{name}:nominal"]),
        ("--order", [*federate, "--order", f"{other},{name}"]),
        ("--column-design", [*federate, "--column-design", f"{name}=constant"]),
        ("--column-model", [*federate, "--column-model", f"{name}=boosting"]),
        (
            "--boosting",
            [*federate, "--column-model", "*=boosting", "--boosting", f"{name}:depth=2"],
        ),
    ]


@pytest.mark.parametrize("case", range(len(_cases("", "", ""))))
def test_a_name_two_headers_match_is_a_usage_error(ambiguous, tmp_path, case) -> None:
    option, argv = _cases(str(ambiguous), "a", "b")[case]
    res = _fits(*(a.format(out=tmp_path) for a in argv))
    assert res.exit_code == 2, res.output
    assert f"{option}: 'a' could be column ' a' or 'a '" in res.output, res.output
    assert "Traceback" not in res.output and not list(tmp_path.iterdir())


@pytest.mark.parametrize("case", range(len(_cases("", "", ""))))
def test_an_unknown_name_is_a_usage_error(sites, tmp_path, case) -> None:
    option, argv = _cases(str(sites[0]), "zz", "x")[case]
    res = _fits(*(a.format(out=tmp_path) for a in argv))
    assert res.exit_code == 2, res.output
    assert f"{option}: no column ['zz'] in " in res.output, res.output
    assert "(columns: ' x ', ' g ', ' h ', ' n ', ' id ')" in res.output, res.output
    assert "Traceback" not in res.output and not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", ["synthesize", "schema", "federate"])
def test_order_names_a_header_with_a_comma_in_a_json_array(tmp_path, command, monkeypatch) -> None:
    """--order is split at commas, so 'y, z,x' cannot name a header 'y, z': the usage
    error quotes that header in the list of columns and gives the order as a JSON array
    (it said to reorder a schema file instead); that array names it, and so does the
    option repeated (the lists joined). Flower itself is not run."""
    from fits.cli import federate

    seen: dict = {}

    def run_local_federation(launch, site_files, config, **options):
        seen.update(config)
        Path(config["output"]).write_text('x,"y, z"\n1,2\n')  # what the ServerApp writes
        return SimpleNamespace(ok=True, log="", run_id=1, seconds=0.0)

    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(federate, "run_local_federation", run_local_federation)
    rng = np.random.default_rng(2)
    path, other = tmp_path / "t.csv", tmp_path / "u.csv"
    for p in (path, other):
        frame = pd.DataFrame({"x": rng.normal(size=30), "y, z": rng.normal(size=30)})
        frame.to_csv(p, index=False)
    out = tmp_path / "out"
    argv = {
        "synthesize": ["synthesize", path, other, "--rows", 5, "--out", f"{out}.csv", "-q"],
        "schema": ["schema", path, other, "--out", f"{out}.json"],
        "federate": ["federate", "local", path, other, "--rows", 5, "--out", f"{out}.csv"],
    }[command]
    res = _fits(*argv, "--order", "y, z,x")
    assert res.exit_code == 2, res.output
    flat = " ".join(res.output.split())
    assert "no column [' z', 'y'] in the site tables (columns: x, 'y, z')" in flat, flat
    assert """name column(s) 'y, z' in a JSON array: --order '["x", "y, z"]'""" in flat, flat
    assert not out.with_suffix(".csv").exists() and not out.with_suffix(".json").exists()
    for given in (['["y, z", "x"]'], ['["y, z"]', "x"]):
        res = _fits(*argv, *(a for g in given for a in ("--order", g)))
        assert res.exit_code == 0, res.output
        if command == "schema":
            assert json.loads(out.with_suffix(".json").read_text())["order"] == ["y, z", "x"]
        if command == "federate":
            assert parse_column_list(seen["order"], "order") == ["y, z", "x"]
            assert json.loads(seen["order"]) == ["y, z", "x"]  # a JSON array: one name
    res = _fits(*argv, "--order", "x", "--order", ",")
    assert res.exit_code == 2 and "give column names separated by commas, got ','" in res.output


def test_the_known_first_order_names_a_header_with_a_comma() -> None:
    """The --order a --known refusal advises reads back as that order: a JSON array when
    a header holds a comma ('y, z,x' named no column), else names and commas."""
    import shlex

    from fits.cli.options import parse_order
    from fits.core.schema import Schema
    from fits.known import known_first_order

    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"x": rng.normal(size=30), "y, z": rng.normal(size=30)})
    said = known_first_order(Schema.detect(frame, rules=False), frame[["y, z"]])
    assert parse_order(shlex.split(said), ["x", "y, z"]) == ["y, z", "x"]
    plain = frame.rename(columns={"y, z": "y"})
    assert known_first_order(Schema.detect(plain, rules=False), plain[["y"]]) == "y,x"


def test_the_run_config_order_reads_a_json_array() -> None:
    """The ServerApp reads the run config's order as fits federate writes it."""
    pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")
    from fits.deploy.flower import read_run_config

    assert read_run_config({"order": '["y, z", "x"]'})["order"] == ["y, z", "x"]
    assert read_run_config({"order": "x,y"})["order"] == ["x", "y"]


def test_features_name_a_header_with_a_comma_in_a_json_array(tmp_path) -> None:
    """--features takes the same lists as --order: a JSON array names a header that
    holds a comma ('y, z' was split into 'y' and ' z', no columns)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=40)
    path = tmp_path / "t.csv"
    pd.DataFrame({"x": x, "y, z": x + rng.normal(size=40), "w": rng.normal(size=40)}).to_csv(
        path, index=False
    )
    out = tmp_path / "r.json"
    base = ["analyze", path, "--target", "x", "--family", "linear", "--out", out]
    res = _fits(*base, "--features", "y, z")
    assert res.exit_code == 2 and "--features: no column" in " ".join(res.output.split())
    res = _fits(*base, "--features", '["y, z"]', "--features", "w")
    assert res.exit_code == 0, res.output
    assert set(json.loads(out.read_text())["params"]) == {"(intercept)", "y, z", "w"}


def test_kind_takes_either_separator_in_every_command(sites, tmp_path) -> None:
    """--kind COL=KIND and COL:KIND mean the same in fits synthesize, fits schema and
    fits federate local (they took one form each); the split is at the last separator,
    so a column name may hold the other; a bad kind is a usage error everywhere."""
    from fits.cli.options import parse_kind

    assert parse_kind("age=continuous") == parse_kind("age:continuous") == ("age", "continuous")
    assert parse_kind("t:utc=ordinal") == ("t:utc", "ordinal")
    assert parse_kind("a=b:nominal") == ("a=b", "nominal")
    assert parse_kind("=id") == ("", "id")  # the column of an empty header field
    for bad in ("age", "age=discrete", "age:"):
        with pytest.raises(ValueError, match="expected COLUMN=KIND"):
            parse_kind(bad)
    a, b = sites
    out = tmp_path / "s.json"
    res = _fits("schema", a, b, "--out", out, "--kind", "g:ordinal", "--kind", "id=id")
    assert res.exit_code == 0, res.output
    columns = {c["name"]: c["kind"] for c in json.loads(out.read_text())["columns"]}
    assert columns[" g "] == "ordinal" and columns[" id "] == "id"
    for argv in (
        ["synthesize", a, b, "--rows", 5, "--out", tmp_path / "o.csv"],
        ["federate", "local", a, b, "--rows", 5, "--out", tmp_path / "o.csv"],
    ):
        res = _fits(*argv, "--kind", "g=discrete")
        assert res.exit_code == 2, res.output
        assert "expected COLUMN=KIND (or COLUMN:KIND)" in " ".join(res.output.split())
        assert not (tmp_path / "o.csv").exists()


def test_help_names_the_flower_extra() -> None:
    """The extra's brackets survive the help's markup (they read 'fits' before)."""
    for argv in (["--help"], ["federate", "--help"]):
        res = _fits(*argv)
        flat = " ".join(res.output.replace("│", " ").split())  # wrapped in a box or not
        assert res.exit_code == 0 and "pip install 'fits[flower]'" in flat, res.output


def test_a_drop_of_every_column_is_a_usage_error(tmp_path) -> None:
    """--drop naming every column: fits synthesize said "the table has no columns; check
    its separator" (exit 1), fits schema wrote an empty schema (exit 0), fits report said
    every column was a target. Each now names --drop (exit 2) and writes nothing."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("p,q\n1,2\n3,4\n5,6\n")
    b.write_text("p,q\n1,2\n3,5\n5,7\n")
    drop = ["--drop", "p", "--drop", "q"]
    for args in (
        ["synthesize", a, b, "--rows", 5, "--out", tmp_path / "o.csv", *drop],
        ["schema", a, b, "--out", tmp_path / "o.json", *drop],
        ["report", "--real", a, "--synthetic", b, "--out", tmp_path / "r.html", *drop],
    ):
        res = _fits(*args)
        assert res.exit_code == 2, res.output
        assert "--drop leaves no column of" in res.output and "drop fewer" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv"]


def test_sites_of_one_file_name_are_named_by_their_folders_in_synthesize(tmp_path) -> None:
    """d1/s.csv and d2/s.csv were sites 's' and 's (2)' in fits synthesize, so a note or
    an error about 's' named no file; they are 'd1/s' and 'd2/s', as in fits analyze."""
    for k, folder in enumerate(("d1", "d2")):
        (tmp_path / folder).mkdir()
        rows = "".join(f"{i + 30 * k},{(i * 7) % 5}\n" for i in range(30))
        (tmp_path / folder / "s.csv").write_text("p,q\n" + rows)
    out = tmp_path / "o.json"
    res = _fits("schema", tmp_path / "d1" / "s.csv", tmp_path / "d2" / "s.csv", "--out", out)
    assert res.exit_code == 0, res.output
    assert "s (2)" not in res.output
    from fits.cli.main import _load_sites

    tables = _load_sites(
        [tmp_path / "d1" / "s.csv", tmp_path / "d2" / "s.csv"], None, None, 0, True, None
    )
    assert list(tables) == [str(Path("d1") / "s"), str(Path("d2") / "s")]


def test_an_order_naming_a_column_that_starts_with_a_bracket(tmp_path) -> None:
    """``--order '[br],y'`` for a column named ``[br]`` was refused as malformed JSON:
    read as comma-separated names when each is a column; else the error gives the JSON
    form."""
    assert parse_column_list("[br],y", "order", ["y", "[br]"]) == ["[br]", "y"]
    assert parse_column_list("[br], y", "order", ["y", "[br]"]) == ["[br]", " y"]
    with pytest.raises(ValueError, match=r"needs the JSON form: \[\"\[br\]\", \"z\"\]"):
        parse_column_list("[br],z", "order", ["y", "[br]"])
    with pytest.raises(ValueError, match=r"needs the JSON form: \[\"\[br\]\", \"y\"\]"):
        parse_column_list("[br],y", "order")  # no headers to tell by
    rng = np.random.default_rng(2)
    site = tmp_path / "s.csv"
    pd.DataFrame({"[br]": rng.normal(size=30).round(2), "y": rng.normal(size=30)}).to_csv(
        site, index=False
    )
    out = tmp_path / "s.json"
    res = _fits("schema", site, "--order", "[br],y", "--out", out)
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["order"] == ["[br]", "y"]
