"""New-user QA of the schema file round trip (``fits schema``, edit, ``--schema``;
``FITSSynthesizer(schema=...)``), ``fits report`` and ``FITSSynthesizer.save`` / ``load``
on tables nobody designed for them: an edit is never silently ignored, and a saved model
never takes the place of a user's file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, Schema
from fits.core.schema import DataNote, SchemaError
from fits.io import OutputError

from conftest import fits_in_process


def _site(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "âge 🎂": rng.integers(18, 90, n),
            "income": np.round(rng.lognormal(10, 1, n), 2),
            "small": rng.integers(0, 3, n),
            "cat": rng.choice(["a" * 300, "béta", "γ"], n),
        }
    )


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return {"s0": _site(120, 0), "s1": _site(80, 1)}


# ---------------------------------------------------------------- the schema file


def test_kinds_with_a_schema_are_refused_not_ignored(tables):
    """The schema fixes every kind: ``kinds`` next to it was silently dropped (the
    column stayed ordinal), where ``fits synthesize --kind`` with ``--schema`` exits 2."""
    schema = Schema.detect(tables)
    assert schema["small"].kind == "ordinal"
    synth = FITSSynthesizer(schema=schema, kinds={"small": "nominal"}, seed=0, n_jobs=1)
    with pytest.raises(ValueError, match="kinds cannot be combined with schema.*'small'"):
        synth.fit(tables)
    # an empty mapping asks for nothing
    FITSSynthesizer(schema=schema, kinds={}, seed=0, n_jobs=1).fit(tables)


def test_a_key_given_twice_in_a_schema_file_is_refused(tables, tmp_path):
    """A user who adds ``"kind": "nominal"`` above the old ``"kind"`` line instead of
    replacing it: JSON parsers keep the last, so the edit was silently lost."""
    text = Schema.detect(tables).to_json(indent=1)
    edited = text.replace('"kind": "ordinal"', '"kind": "nominal",\n  "kind": "ordinal"', 1)
    assert edited != text
    with pytest.raises(
        SchemaError, match=r"column 'small' has key 'kind' twice \('nominal', then 'ordinal'\)"
    ):
        Schema.from_json(edited)
    path = tmp_path / "edited.json"
    path.write_text(edited, encoding="utf-8")
    sites = []
    for name, frame in tables.items():
        sites.append(tmp_path / f"{name}.csv")
        frame.to_csv(sites[-1], index=False)
    out = tmp_path / "out.csv"
    res = fits_in_process(
        "synthesize", *sites, "--schema", path, "--rows", 5, "--out", out, "--quiet"
    )
    assert res.returncode == 1, res.stderr
    assert "edited.json" in res.stderr and "'kind' twice" in res.stderr
    assert "Traceback" not in res.stderr
    assert not out.exists()


# ---------------------------------------------------------------- save / load


def test_save_does_not_write_over_a_file_that_is_not_a_saved_synthesizer(tables, tmp_path):
    """``save`` wrote its pickle over whatever was at the path: a site's CSV given by
    mistake was gone."""
    synth = FITSSynthesizer(seed=0, n_jobs=1).fit(tables)
    table = tmp_path / "site.csv"
    tables["s0"].to_csv(table, index=False)
    before = table.read_bytes()
    with pytest.raises(OutputError, match=r"site\.csv' exists and is not a saved FITSSynthesizer"):
        synth.save(table)
    assert table.read_bytes() == before
    # a saved synthesizer is replaced, and an empty file (a fresh temporary file) is taken
    model = synth.save(tmp_path / "model.pkl")
    again = FITSSynthesizer(seed=1, n_jobs=1).fit(tables)
    assert FITSSynthesizer.load(again.save(model)).seed == 1
    empty = tmp_path / "empty.pkl"
    empty.write_bytes(b"")
    assert FITSSynthesizer.load(synth.save(empty)).seed == 0


def test_saved_loaded_and_reconnected_samples_the_same_table(tables, tmp_path):
    synth = FITSSynthesizer(seed=4, n_jobs=1).fit(tables)
    path = synth.save(tmp_path / "m.pkl")
    first = synth.sample(40, seed=7)
    loaded = FITSSynthesizer.load(path).connect(tables)
    pd.testing.assert_frame_equal(loaded.sample(40, seed=7), first)
    assert loaded.get_params() == synth.get_params()


def test_rules_null_in_a_schema_file_is_refused_not_read_as_detect_again(tables):
    """``"rules": null`` (meant as "no rules") had the rules detected again, so the
    edit was silently undone; ``[]`` is none, and no entry at all detects them."""
    d = Schema.detect(tables).to_dict()
    d["rules"] = None
    with pytest.raises(SchemaError, match=r'"rules" is null.*"rules": \[\] for no rules'):
        Schema.from_dict(d)
    d["rules"] = []
    assert Schema.from_dict(d).rules == []
    del d["rules"]
    assert Schema.from_dict(d).rules is None


# ---------------------------------------------------------------- fits report


@pytest.mark.slow  # evaluate's energy distances and figures: 6-14 s on a busy machine
def test_a_constant_column_does_not_switch_off_the_reports_rule_detection():
    """A constant column (real and synthetic) made the report's rule detection stop
    with the fit's advice ("drop it before fitting (fits synthesize ...)"), so the
    "Rules kept" section lost the copy rule the other columns hold."""
    from fits import evaluate

    rng = np.random.default_rng(3)
    n = 120
    real = pd.DataFrame({"x": rng.normal(size=n).round(2), "g": rng.choice(["a", "b"], n)})
    real["x_copy"] = real["x"]
    real["const"] = 7
    synthetic = real.sample(frac=1.0, random_state=1).reset_index(drop=True)
    synthetic["x"] = (synthetic["x"] + 0.5).round(2)  # breaks the copy in every row
    rep = evaluate(real, synthetic, seed=0, utility=False, privacy=False, n_jobs=1)
    kept = {r["column"]: r for r in rep.data["rules"]}
    assert "x_copy" in kept, rep.data["notes"]
    assert not any("no rule detection" in n for n in rep.data["notes"])


@pytest.mark.parametrize("as_path", [False, True])
def test_schema_from_json_given_a_file_name_says_to_read_the_file(tables, tmp_path, as_path):
    """``Schema.from_json("schema.json")`` (the file's name, not its text) said "not
    valid JSON: Expecting value: line 1 column 1", and a Path a TypeError of json's."""
    path = tmp_path / "schema.json"
    path.write_text(Schema.detect(tables).to_json(), encoding="utf-8")
    with pytest.raises(SchemaError, match=r"takes the JSON text, not a file name.*read_text"):
        Schema.from_json(path if as_path else str(path))  # type: ignore[arg-type]


def test_a_kind_changed_to_ordinal_without_categories_says_how_to_get_them(tables):
    """The docs' first edit, "change a kind": continuous -> ordinal in the file was refused
    with "a ordinal column needs categories", which named no way to get them."""
    d = Schema.detect(tables).to_dict()
    spec = next(c for c in d["columns"] if c["name"] == "âge 🎂")
    spec["kind"] = "ordinal"
    with pytest.raises(SchemaError) as err:
        Schema.from_dict(d)
    msg = str(err.value)
    assert 'an ordinal column needs categories (a "categories" list' in msg
    assert "--kind 'âge 🎂=ordinal'" in msg and "Schema.detect" in msg


# ---------------------------------------------------------------- odd dtypes


@pytest.mark.parametrize(("start", "span"), [(2**63, 2_100_000), (2**54, 4_100)])
def test_whole_numbers_past_2_53_in_a_narrow_range_are_drawn_later_in_the_chain(start, span):
    """A uint64 column of 2**63 + 0..2.1e6 (about 1,000 float64 values) or 2**54 +
    0..4,099 (steps of 4) after another column: its evenly spaced grid repeated points,
    and the draw stopped with scipy's "`x` must be strictly increasing sequence".
    (Narrower ranges are refused: test_odd_inputs.py.)"""
    rng = np.random.default_rng(0)
    x = np.uint64(start) + rng.integers(0, span, 150).astype(np.uint64)
    table = pd.DataFrame({"y": rng.normal(size=150), "x": x})
    with pytest.warns(DataNote, match="its synthetic values fall on those steps"):
        synth = FITSSynthesizer(seed=0, n_jobs=1).fit([table])
    out = synth.sample(30)
    assert out["x"].dtype == np.uint64
    assert out["x"].min() >= table["x"].min() and out["x"].max() <= table["x"].max()


def test_save_load_and_sample_to_file_expand_a_leading_tilde(tables, tmp_path, monkeypatch):
    """``save("~/models/m.pkl")`` made a folder named '~' in the working folder: one
    ``rm -rf ~`` from losing a home folder. The paths are the user's home's, as pandas
    reads them (whose folders must exist, as for ``to_csv``)."""
    home, work = tmp_path / "home", tmp_path / "work"
    for folder in (home / "models", home / "out", work):
        folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    synth = FITSSynthesizer(seed=0, n_jobs=1).fit(tables)
    assert synth.save("~/models/m.pkl") == home / "models" / "m.pkl"
    assert FITSSynthesizer.load("~/models/m.pkl").seed == 0
    assert synth.sample_to_file("~/out/s.csv", 5) == home / "out" / "s.csv"
    assert not (work / "~").exists()
    assert len(pd.read_csv(home / "out" / "s.csv")) == 5
