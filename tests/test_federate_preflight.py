"""``fits federate local`` refuses site tables that could not take part before any
Flower process starts: a header with no rows and sites whose columns differ were
reported by the run's setup round, right but only once the SuperLink and the
SuperNodes were up (about 20 s). Flower is not run here: a stand-in fails the test if
the command gets as far as starting it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import fits_in_process


def _site(path: Path, n: int = 30, columns: tuple[str, ...] = ("x", "g")) -> Path:
    rng = np.random.default_rng(len(path.name))
    frame = pd.DataFrame(
        {c: rng.normal(size=n).round(2) if c != "g" else rng.choice(["u", "v"], n) for c in columns}
    )
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)
    return path


@pytest.fixture
def no_flower(monkeypatch):
    """Fail if the command starts Flower; else record that it would have."""
    from fits.cli import federate

    started: list[dict] = []

    def never(launch, sites, config, **options):
        started.append(dict(sites))
        raise AssertionError("Flower was started")

    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(federate, "run_local_federation", never)
    return started


def _local(*args):
    return fits_in_process("federate", "local", *args, "--rows", 5)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_site_table_of_a_header_alone_is_refused_at_once(tmp_path, no_flower, suffix):
    a = _site(tmp_path / f"a{suffix}")
    b = tmp_path / f"b{suffix}"
    empty = pd.DataFrame({"x": pd.Series([], dtype=float), "g": pd.Series([], dtype=object)})
    if suffix == ".csv":
        b.write_text("x,g\n\n  \n")  # blank lines are no rows
    else:
        empty.to_parquet(b, index=False)
    res = _local(a, b, "--out", tmp_path / "o.csv")
    assert res.returncode == 1, res.stderr
    assert f"{b}: the table has a header but no rows" in res.stderr
    assert "site 'b'" in res.stderr and "Traceback" not in res.stderr
    assert not no_flower and not (tmp_path / "o.csv").exists()


def test_sites_whose_columns_differ_are_refused_at_once(tmp_path, no_flower):
    a = _site(tmp_path / "a.csv", columns=("x", "g", "y"))
    b = _site(tmp_path / "b.parquet", columns=("x", "g", "z"))
    res = _local(a, b, "--out", tmp_path / "o.csv")
    assert res.returncode == 1, res.stderr
    text = " ".join(res.stderr.split())
    assert f"'{b}' (site 'b'): columns differ from those of '{a}' (site 'a')" in text
    assert "missing: ['y']; extra: ['z']" in text and "Traceback" not in text
    assert not no_flower


def test_columns_in_another_order_or_left_out_by_drop_pass(tmp_path, no_flower):
    """The run's merge compares the sets of columns after each site's --drop: so does
    the check (no false refusal)."""
    a = _site(tmp_path / "a.csv", columns=("x", "g", "note"))
    b = _site(tmp_path / "b.csv", columns=("g", "note", "x"))
    res = _local(a, b, "--drop", "note", "--out", tmp_path / "o.csv")
    assert "Flower was started" in res.stderr and "columns differ" not in res.stderr
    assert no_flower == [{"a": a, "b": b}]


@pytest.mark.parametrize(
    "text",
    [
        "x,g\n",
        "x,g\n\n\n",
        "x,g\r\n \t\r\n",
        "\n\nx,g\n",
        '"x\nwith a line break",g\n\n',
        "x;g\n\n",
        "x,g\n,\n",  # a row of blanks is a row
        'x,g\n""\n',
        "x,g\n1,u",  # no line break at the end
        '"x\nwith a line break",g\n1,u\n',
    ],
)
def test_table_has_rows_agrees_with_read_table(tmp_path, text):
    from fits.cli.federate import table_has_rows
    from fits.io import DataFileError, read_table

    path = tmp_path / "t.csv"
    path.write_bytes(text.encode())
    try:
        rows = len(read_table(path)) > 0
    except DataFileError as exc:
        assert "no rows" in str(exc)
        rows = False
    assert table_has_rows(path) == rows


def test_sites_too_small_for_any_answer_are_refused_at_once(tmp_path, no_flower):
    """Sites of 2 rows each, under the default floor of 5 rows: the run said "every
    site abstained from its marginal" after about 40 s of Flower."""
    a = _site(tmp_path / "a.csv", n=2)
    b = _site(tmp_path / "b.parquet", n=3)
    res = _local(a, b, "--out", tmp_path / "o.csv")
    assert res.returncode == 1, res.stderr
    text = " ".join(res.stderr.split())
    assert f"'a' ('{a}'): 2, 'b' ('{b}'): 3" in text
    assert "min_effective_rows = 5" in text and "--policy" in text
    assert not no_flower
    policy = tmp_path / "p.json"
    policy.write_text('{"min_effective_rows": 2}')
    res = _local(a, b, "--policy", policy, "--out", tmp_path / "o.csv")
    assert "Flower was started" in res.stderr and len(no_flower) == 1


def test_a_pooled_floor_counts_the_sites_rows_together(tmp_path, no_flower):
    policy = tmp_path / "p.json"
    policy.write_text('{"floor_scope": "pooled", "min_effective_rows": 5}')
    a, b = _site(tmp_path / "a.csv", n=3), _site(tmp_path / "b.csv", n=2)
    pooled = ("--policy", policy, "--secure-aggregation", "--out", tmp_path / "o.csv")
    res = _local(a, b, *pooled)
    assert "Flower was started" in res.stderr, res.stderr  # 5 rows together
    _site(b, n=1)
    res = _local(a, b, *pooled)
    assert res.returncode == 1 and "the sites together hold fewer" in res.stderr, res.stderr
    assert len(no_flower) == 1


@pytest.mark.parametrize(
    "text",
    [
        "x,g\n\n",
        "x,g\n1,u\n \n2,v\n",
        'x,g\n"1\n5",u\n2,v\n\n3,w\n',
        "x;g\n1;u\n2;v\n3;w\n4;x\n5;y\n6;z\n",
        'x,g\n,\n""\n',
    ],
)
def test_count_rows_agrees_with_read_table(tmp_path, text):
    from fits.cli.federate import count_rows
    from fits.io import DataFileError, read_table

    path = tmp_path / "t.csv"
    path.write_bytes(text.encode())
    try:
        rows = len(read_table(path))
    except DataFileError:
        rows = 0
    assert count_rows(path, 5) == min(rows, 5)


def test_count_rows_counts_a_one_column_table_s_blank_values(tmp_path):
    """A blank line between the values of a one-column CSV is a missing value, a row
    (fits.io.read_table); the pre-flight count skipped it and so undercounted."""
    from fits.cli.federate import count_rows
    from fits.io import read_table

    path = tmp_path / "t.csv"
    path.write_text("sex\nFemale\n\nMale\n")
    assert count_rows(path, 10) == 3 == len(read_table(path))
    assert count_rows(tmp_path / "missing.csv", 7) == 7  # the site says what is wrong


def test_sites_whose_column_types_differ_are_refused_at_once(tmp_path, no_flower):
    """A column of numbers at one site and of text at another ('31 years') stopped the
    run only at its setup round, after a minute or two of Flower: the setup's own
    description and merge now run here, one table at a time, with the same words."""
    a, b = _site(tmp_path / "a.csv", columns=("x", "g", "age")), tmp_path / "b.csv"
    frame = pd.read_csv(a)
    frame.assign(age=[f"{v:.0f} years" for v in frame["age"] * 10 + 40]).to_csv(b, index=False)
    res = _local(a, b, "--out", tmp_path / "o.csv")
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "column 'age' is numeric at some clients and text at others" in res.stderr
    assert "(a: float, b: string)" in res.stderr and "'years' at b" in res.stderr
    assert no_flower == [] and not (tmp_path / "o.csv").exists()
    # the run's --drop is the setup's: without the column the run starts
    res = _local(a, b, "--out", tmp_path / "o.csv", "--drop", "age")
    assert "Flower was started" in res.stderr and "numeric at some" not in res.stderr
    res = _local(a, b, "--out", tmp_path / "o.csv", "--kind", "g=ordinal")
    assert res.returncode == 1 and "numeric at some clients" in res.stderr
    assert len(no_flower) == 1


def test_an_identifier_column_is_a_usage_error_as_in_fits_synthesize(tmp_path, no_flower):
    """The same refusal as fits synthesize's (a column to drop or declare: the user must
    decide, exit 2) exited 1 from fits federate local's check."""
    paths = []
    for k, n in enumerate((40, 30)):
        frame = pd.DataFrame({"uid": [f"u{k}x{j:04d}" for j in range(n)], "x": np.arange(n) * 0.5})
        paths.append(tmp_path / f"s{k}.csv")
        frame.to_csv(paths[-1], index=False)
    res = _local(*paths, "--out", tmp_path / "o.csv")
    assert res.returncode == 2, res.stderr
    assert "column 'uid' looks like an identifier" in res.stderr and no_flower == []
    res = fits_in_process("synthesize", *paths, "--rows", "5", "--out", tmp_path / "s.csv")
    assert res.returncode == 2 and "column 'uid' looks like an identifier" in res.stderr
