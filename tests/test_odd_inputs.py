"""Tables fits was not designed for, as a new user hands them to the command line:
a row index pandas saved with an empty header, decimal commas in tab- and
'|'-separated files, a Parquet file whose columns pandas keeps in its index. In
process, on small tables written under ``tmp_path``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from fits.cli.main import app


def _fits(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def _flat(text: str) -> str:
    return " ".join(text.split())


def _indexed_sites(tmp_path: Path) -> list[Path]:
    """Two sites saved by ``DataFrame.to_csv`` with its default ``index=True``: a first
    column of an empty header holding the row numbers."""
    rng = np.random.default_rng(0)
    paths = []
    for k in range(2):
        frame = pd.DataFrame(
            {"age": rng.integers(18, 90, 60), "sex": rng.choice(["F", "M"], 60)},
            index=np.arange(60) + 60 * k,
        )
        paths.append(tmp_path / f"site{k}.csv")
        frame.to_csv(paths[-1])
    return paths


def test_the_identifier_advice_for_an_empty_header_works(tmp_path) -> None:
    """The warning about a saved row index (a column of an empty name) advised
    ``--kind =id``, which --kind refused as malformed (exit 2): now it declares that
    column an identifier; a table with no such column refuses it as an unknown one."""
    a, b = _indexed_sites(tmp_path)
    out = tmp_path / "s.csv"
    res = _fits("synthesize", a, b, "--rows", 5, "--out", out, "-q")
    assert res.exit_code == 0, res.output
    assert "--kind =id" in _flat(res.output), res.output
    out.unlink()
    res = _fits("synthesize", a, b, "--rows", 5, "--out", out, "-q", "--kind", "=id")
    assert res.exit_code == 0, res.output
    synthetic = pd.read_csv(out, keep_default_na=False)
    assert list(synthetic.columns) == ["Unnamed: 0", "age", "sex"]  # pandas' name for ''
    assert out.read_text().splitlines()[0] == ",age,sex"
    assert synthetic["Unnamed: 0"].str.startswith("synthetic-").all()
    plain = tmp_path / "plain.csv"
    pd.read_csv(a, index_col=0).to_csv(plain, index=False)
    other = tmp_path / "plain2.csv"
    pd.read_csv(b, index_col=0).to_csv(other, index=False)
    res = _fits(
        "synthesize", plain, other, "--rows", 5, "--out", tmp_path / "t.csv", "--kind", "=id"
    )
    assert res.exit_code == 2, res.output
    assert "--kind: no column ['']" in _flat(res.output), res.output
    assert not (tmp_path / "t.csv").exists()
