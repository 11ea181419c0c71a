"""A site whose file writes 'NA' in every field of a column (a branch of North America
in a table split by region) read the column as missing values, as pandas does, while
another site kept 'NA' as a label: the synthetic table had a missing share where the
real data had the label.  The sites now settle it at setup
(:func:`fits.core.schema.labels_of_na_only`)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import NA_ONLY_ATTR, describe_table, labels_of_na_only, na_only_cells
from fits.io import read_table


def _site(path: Path, regions: list[str] | str, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    region = (
        np.full(n, regions, dtype=object) if isinstance(regions, str) else rng.choice(regions, n)
    )
    pd.DataFrame({"x": rng.normal(size=n).round(3), "region": region}).to_csv(path, index=False)
    return path


def _read(path: Path) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_table(path)


def test_the_reader_remembers_which_fields_were_the_text(tmp_path):
    every = _read(_site(tmp_path / "a.csv", "NA", 20, 0))
    assert every["region"].isna().all()  # pandas' reading, alone
    assert every.attrs[NA_ONLY_ATTR] == {"region": {"text": "NA", "rows": None}}
    text, held = na_only_cells(every)["region"]
    assert text == "NA" and held.all()
    # 'NA' and empty fields: the rows that held 'NA' (13 rows: a packed bit string)
    lines = ["x,region", *[f"{k},{'' if k % 3 == 0 else 'NA'}" for k in range(13)]]
    (tmp_path / "b.csv").write_text("\n".join(lines) + "\n")
    some = _read(tmp_path / "b.csv")
    _, held = na_only_cells(some)["region"]
    assert held.tolist() == [k % 3 != 0 for k in range(13)]
    # a column with other labels keeps 'NA' as written (no attr); numbers: no attr
    labels = _read(_site(tmp_path / "c.csv", ["NA", "EU"], 30, 1))
    assert NA_ONLY_ATTR not in labels.attrs and (labels["region"] == "NA").any()
    # rows taken since the file was read: not trusted
    assert na_only_cells(some.iloc[:5]) == {}


def test_a_site_of_na_alone_reads_it_as_the_label_another_site_holds(tmp_path):
    paths = [
        _site(tmp_path / "mixed.csv", ["NA", "EU", "AS"], 300, 0),
        _site(tmp_path / "america.csv", "NA", 300, 1),
    ]
    tables = {p.stem: _read(p) for p in paths}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        synth = FITSSynthesizer(seed=0).fit(tables)
    notes = " ".join(str(w.message) for w in caught)
    assert "site 'america' writes 'NA' in 300 of its fields and no other value" in notes
    assert "--na-values region=NA" in notes
    assert "NA" in synth.schema_["region"].categories
    assert None not in synth.schema_["region"].categories  # no missing category invented
    out = synth.sample(3000, seed=1)
    assert out["region"].notna().all()
    share = (out["region"] == "NA").mean()  # 400 of the 600 real rows
    assert abs(share - 400 / 600) < 0.05, share


def test_without_a_site_that_holds_the_label_it_stays_missing(tmp_path):
    paths = [
        _site(tmp_path / "europe.csv", ["EU", "AS"], 200, 0),
        _site(tmp_path / "america.csv", "NA", 200, 1),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        synth = FITSSynthesizer(seed=0).fit({p.stem: _read(p) for p in paths})
    said = " ".join(str(w.message) for w in caught)
    assert "read as the label" not in said
    assert "site 'america' writes 'NA' in every field that is not empty" in said  # not silent
    assert "NA" not in synth.schema_["region"].categories
    assert synth.sample(2000, seed=1)["region"].isna().mean() == pytest.approx(0.5, abs=0.05)


def test_the_merge_rule_on_descriptions(tmp_path):
    """Only a site whose column is 'NA' alone changes: where another site holds 'NA'
    among its values, or every other site holds one label of its own (a table split by
    region); the description it reports is the column read as the label."""
    a = describe_table(_read(_site(tmp_path / "a.csv", ["NA", "EU"], 40, 0)))
    b = describe_table(_read(_site(tmp_path / "b.csv", "NA", 25, 1)))
    c = describe_table(_read(_site(tmp_path / "c.csv", ["EU", "AS"], 30, 2)))
    europe = describe_table(_read(_site(tmp_path / "e.csv", "EU", 10, 3)))
    asia = describe_table(_read(_site(tmp_path / "f.csv", "AS", 10, 4)))
    assert b["columns"]["region"]["n_missing"] == 25
    assert b["na_only"]["region"]["column"]["values"] == ["NA"]
    out, notes = labels_of_na_only([a, b, c], ["a", "b", "c"])
    assert out[1]["columns"]["region"] == b["na_only"]["region"]["column"]
    assert out[0] == a and out[2] == c and len(notes) == 1 and "as at 'a'" in notes[0]
    # labels elsewhere, not 'NA', not one per site: missing values, said
    same, none = labels_of_na_only([b, c], ["b", "c"])
    assert same == [b, c] and len(none) == 1 and "read as missing values" in none[0]
    # one label per site: the column names the site
    split, said = labels_of_na_only([europe, b, asia], ["eu", "na", "as"])
    assert split[1]["columns"]["region"]["values"] == ["NA"] and split[0] == europe
    assert len(said) == 1 and "every other site holds one label of its own" in said[0]
    # a site without a value in the column (all empty) is no such site
    empty = {**asia, "columns": {**asia["columns"], "region": b["columns"]["region"]}}
    assert labels_of_na_only([europe, b, empty], ["eu", "na", "as"])[0][1] == b


def test_a_table_split_by_region(tmp_path):
    """Three branches, each with its own region in every row; the North American one
    writes 'NA'.  The synthetic table holds the three regions in their shares."""
    paths = [
        _site(tmp_path / "europe.csv", "EU", 300, 0),
        _site(tmp_path / "asia.csv", "AS", 200, 1),
        _site(tmp_path / "america.csv", "NA", 100, 2),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        synth = FITSSynthesizer(seed=0).fit({p.stem: _read(p) for p in paths})
    assert sorted(synth.schema_["region"].categories) == ["AS", "EU", "NA"]
    shares = synth.sample(6000, seed=1)["region"].value_counts(normalize=True, dropna=False)
    np.testing.assert_allclose(
        [shares["EU"], shares["AS"], shares["NA"]], [0.5, 1 / 3, 1 / 6], atol=0.03
    )
    from cli.report import _pooled_real

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = _pooled_real(tuple(paths))  # fits report reads the files alike
    assert real["region"].value_counts().to_dict() == {"EU": 300, "AS": 200, "NA": 100}


def test_fits_synthesize_writes_the_label(tmp_path):
    from conftest import fits_in_process

    paths = [
        _site(tmp_path / "mixed.csv", ["NA", "EU"], 200, 0),
        _site(tmp_path / "america.csv", "NA", 200, 1),
    ]
    res = fits_in_process("synthesize", *paths, "--rows", 500, "--out", tmp_path / "o.csv", "-q")
    assert res.returncode == 0, res.stderr
    assert "read as the label 'NA'" in res.stderr
    out = pd.read_csv(tmp_path / "o.csv", keep_default_na=False)
    assert set(out["region"]) == {"NA", "EU"}


def test_fits_report_reads_the_real_files_as_the_sites_did(tmp_path):
    """``fits report --real mixed.csv --real america.csv``: the real table holds the
    label 'NA' where the synthetic one does, not a missing share the synthesis never saw."""
    from cli.report import _pooled_real

    from conftest import fits_in_process

    paths = [
        _site(tmp_path / "mixed.csv", ["NA", "EU"], 200, 0),
        _site(tmp_path / "america.csv", "NA", 200, 1),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = _pooled_real(tuple(paths))
    assert real["region"].notna().all() and (real["region"] == "NA").sum() > 200
    synthetic = tmp_path / "o.csv"
    res = fits_in_process("synthesize", *paths, "--rows", 400, "--out", synthetic, "-q")
    assert res.returncode == 0, res.stderr
    args = ["report", "--real", paths[0], "--real", paths[1], "--synthetic", synthetic]
    res = fits_in_process(*args, "--out", tmp_path / "r.html", "--json", tmp_path / "r.json", "-q")
    assert res.returncode == 0, res.stderr
    scores = json.loads((tmp_path / "r.json").read_text())["columns"]["scores"]
    region = next(s for s in scores if s["column"] == "region")
    assert region["score"] > 0.9, region  # about 0.5 with half the real rows missing


def test_a_glm_reads_the_label_as_the_synthesis_does(tmp_path):
    """``fit_glm`` over the same files: the North American site's rows enter the model
    with region 'NA' (a level), as the same rows given as a DataFrame do, not as rows
    of a missing region."""
    from fits.analysis import fit_glm

    rng = np.random.default_rng(3)
    frames = {}
    for name, regions in (("mixed", ["NA", "EU", "AS"]), ("america", "NA")):
        n = 400
        if isinstance(regions, str):
            region = np.full(n, regions, dtype=object)
        else:
            region = rng.choice(regions, n)
        x = rng.normal(size=n)
        y = 1.0 + 0.5 * x + np.where(region == "NA", 2.0, 0.0) + rng.normal(size=n)
        frames[name] = pd.DataFrame({"x": x.round(4), "region": region, "y": y.round(4)})
        frames[name].to_csv(tmp_path / f"{name}.csv", index=False)
    files = {name: _read(tmp_path / f"{name}.csv") for name in frames}
    assert files["america"]["region"].isna().all()  # as read, alone
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fit_glm(files, "y", family="linear", features=["x", "region"])
    assert any("read as the label 'NA'" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = fit_glm(frames, "y", family="linear", features=["x", "region"])
    assert list(got.params.index) == list(expected.params.index)
    np.testing.assert_allclose(got.params, expected.params, rtol=1e-10, atol=1e-12)


def test_schema_detect_reads_it_as_a_fit_does(tmp_path):
    """``Schema.detect`` (``fits schema``) runs the setup's rule: no missing category
    that the fit would not have, and the schema file given back to a fit works."""
    from fits.core.schema import Schema

    paths = [
        _site(tmp_path / "mixed.csv", ["NA", "EU"], 200, 0),
        _site(tmp_path / "america.csv", "NA", 200, 1),
    ]
    tables = {p.stem: _read(p) for p in paths}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        detected = Schema.detect(tables)
        synth = FITSSynthesizer(seed=0).fit(tables)
        given = FITSSynthesizer(seed=0, schema=detected).fit(tables)
    assert detected["region"].categories == ["EU", "NA"]
    assert synth.schema_["region"].categories == detected["region"].categories
    assert given.sample(500, seed=2)["region"].notna().all()


def test_the_release_check_counts_a_copy_of_such_a_sites_row(tmp_path):
    """The exact-copy check compares the synthetic rows with the sites' rows as the
    setup read them: a synthetic row equal to a North American row, 'NA' and all, is a
    copy (with the column left missing it would never match)."""
    from cli.release import start_release_check

    paths = [
        _site(tmp_path / "mixed.csv", ["NA", "EU"], 200, 0),
        _site(tmp_path / "america.csv", "NA", 200, 1),
    ]
    tables = {p.stem: _read(p) for p in paths}
    check = start_release_check(tables, {"x": "continuous", "region": "nominal"}, seed=0)
    copied = pd.read_csv(paths[1], keep_default_na=False).head(5)  # 'NA' as written
    check.update(copied)
    assert check.copies == 5 and check.copies_by_site["america"] == 5


def test_a_known_file_of_na_alone_asks_for_the_label(tmp_path):
    """``--known`` with 'NA' in every row of a column whose sites hold the label: the
    rows are drawn given region 'NA' (it was refused as 'missing values the sites do not
    have')."""
    paths = [
        _site(tmp_path / "mixed.csv", ["NA", "EU"], 200, 0),
        _site(tmp_path / "america.csv", "NA", 200, 1),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        synth = FITSSynthesizer(seed=0).fit({p.stem: _read(p) for p in paths})
    pd.DataFrame({"region": ["NA"] * 4}).to_csv(tmp_path / "known.csv", index=False)
    known = _read(tmp_path / "known.csv")
    assert known["region"].isna().all()
    out = synth.sample_remaining_columns(known, seed=1)
    assert (out["region"] == "NA").all() and out["x"].notna().all()


def test_a_column_of_numbers_elsewhere_draws_no_label_note(tmp_path):
    """A site that writes 'NA' in every row of a column the others hold as numbers (a
    score it does not record, written by R's write.csv): missing values, as pandas
    reads them, and no note about labels."""
    rng = np.random.default_rng(0)
    pd.DataFrame({"x": rng.normal(size=50), "score": rng.integers(1, 6, 50)}).to_csv(
        tmp_path / "a.csv", index=False
    )
    pd.DataFrame({"x": rng.normal(size=50), "score": ["NA"] * 50}).to_csv(
        tmp_path / "b.csv", index=False
    )
    descriptions = [describe_table(_read(tmp_path / f"{k}.csv")) for k in "ab"]
    out, notes = labels_of_na_only(descriptions, ["a", "b"])
    assert out == descriptions and notes == []
