"""A schema file's keys: a misspelt one is refused, naming it and the key meant."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fits.cli.main import app
from fits.core.schema import Schema, SchemaError


def _schema() -> dict:
    frame = pd.DataFrame({"a": np.linspace(0, 1, 30), "g": ["u", "v", "w"] * 10})
    return Schema.detect([frame]).to_dict()


def _order(d: dict) -> None:
    d["Order"] = d.pop("order")


def _missing(d: dict) -> None:
    d["columns"][0]["mising"] = True


def _colour(d: dict) -> None:
    d["columns"][1]["colour"] = "red"


def _rule(d: dict) -> None:
    d["rules"] = [{"column": "g", "of": ["a"], "knd": "function"}]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_order, r"the schema has key\(s\) 'Order' \(did you mean 'order'\?\)"),
        (_missing, r"column 'a' has key\(s\) 'mising' \(did you mean 'missing'\?\)"),
        (_colour, r"column 'g' has key\(s\) 'colour' that fits does not know"),
        (_rule, r"the rule for column 'g' has key\(s\) 'knd' \(did you mean 'kind'\?\)"),
    ],
)
def test_an_unknown_key_is_refused(edit, message) -> None:
    d = _schema()
    Schema.from_dict(d)  # as written: fine
    edit(d)
    with pytest.raises(SchemaError, match=message):
        Schema.from_dict(d)


def test_fits_synthesize_names_the_schema_file_and_the_key(tmp_path) -> None:
    frame = pd.DataFrame({"a": np.linspace(0, 1, 30), "g": ["u", "v", "w"] * 10})
    sites = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:15].to_csv(sites[0], index=False)
    frame.iloc[15:].to_csv(sites[1], index=False)
    d = _schema()
    d["columns"][0]["mising"] = True
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(d))
    out = tmp_path / "o.csv"
    res = CliRunner().invoke(app, ["synthesize", *map(str, sites), "--schema", str(path),
                                   "--rows", "5", "--out", str(out)])  # fmt: skip
    assert res.exit_code in (1, 2), res.output
    assert str(path) in res.output and "'mising' (did you mean 'missing'?)" in res.output
    assert "Traceback" not in res.output and not out.exists()
