"""A table refused for a column no kind models (durations, bytes) names, in the same
error, the other columns the setup round would refuse next as identifiers or free text
(:func:`fits.core.schema.check_columns`). Those others are judged as a fit reads them:
numbers written as text with a currency ("$5,123.45"), ``Decimal`` objects and dates
written as text are numbers and dates there, not identifiers, so they are neither named
nor in the ``--drop`` advice (dropping them would discard data a fit models); a column
of free text still is, with the Python form of the fix beside the command line's."""

from __future__ import annotations

import warnings
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, Schema, SchemaError
from fits.core.schema import DataNote, check_columns

from conftest import fits_in_process


def _durations(rng: np.random.Generator, n: int) -> pd.Series:
    return pd.Series(pd.to_timedelta(rng.integers(0, 100, n), unit="s"))


def _money_sites() -> list[pd.DataFrame]:
    """Two sites: ``money`` numbers written with '$' and thousands separators, every
    value different; ``td`` durations."""
    rng = np.random.default_rng(0)
    return [
        pd.DataFrame(
            {
                "money": [f"${v:,.2f}" for v in rng.normal(5000, 800, n)],
                "td": _durations(rng, n),
            }
        )
        for n in (60, 50)
    ]


def _decimal_sites() -> list[pd.DataFrame]:
    """Two sites: ``dec`` Decimal objects with two places, every value different;
    ``td`` durations."""
    rng = np.random.default_rng(1)
    return [
        pd.DataFrame(
            {
                "dec": [Decimal(f"{v:.2f}") for v in rng.normal(100, 15, n)],
                "td": _durations(rng, n),
            }
        )
        for n in (60, 50)
    ]


def _date_sites() -> list[pd.DataFrame]:
    """Two sites: ``day`` ISO dates written as text, every value different; ``blob``
    bytes."""
    rng = np.random.default_rng(2)
    sites = []
    for n in (60, 50):
        days = pd.Timestamp("2020-01-01") + pd.to_timedelta(
            rng.choice(2000, n, replace=False), unit="D"
        )
        sites.append(
            pd.DataFrame(
                {
                    "day": days.strftime("%Y-%m-%d").tolist(),
                    "blob": [bytes([k % 7, 1]) for k in range(n)],
                }
            )
        )
    return sites


def _refused(tables: list[pd.DataFrame]) -> str:
    with pytest.raises(SchemaError) as e:
        FITSSynthesizer(seed=0).fit(tables)
    return str(e.value)


@pytest.mark.parametrize(
    ("sites", "bad", "good", "kind"),
    [
        (_money_sites, "td", "money", "continuous"),
        (_decimal_sites, "td", "dec", "continuous"),
        (_date_sites, "blob", "day", "continuous"),
    ],
    ids=["currency-text", "decimal", "iso-date-text"],
)
def test_modelled_columns_are_not_named(sites, bad, good, kind):
    """The error names the column no kind models, and no other: the other column is
    modelled once that one is dropped, so it is no identifier and no --drop for it."""
    tables = sites()
    text = _refused(tables)
    assert f"column {bad!r} holds" in text
    assert repr(good) not in text
    assert "look(s) like identifiers" not in text
    assert f"--drop {good}" not in text
    # the successful path: with the refused column dropped, the other one is modelled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)  # "text read as numbers / dates"
        schema = Schema.detect([t.drop(columns=bad) for t in tables])
    assert schema.kinds() == {good: kind}


def test_same_in_check_columns_and_detect():
    """Schema.detect (fits schema) refuses the same table with the same message."""
    tables = _decimal_sites()
    with pytest.raises(SchemaError) as e:
        check_columns(tables[0], "s0")
    assert "'dec'" not in str(e.value)
    with pytest.raises(SchemaError) as e:
        Schema.detect(tables)
    assert "'dec'" not in str(e.value) and "identifiers" not in str(e.value)


def test_free_text_next_to_durations_is_still_named():
    """A column of free text (every value different, no number or date) beside a
    duration column is still named, with one --drop for both and its declaration, on
    the command line and in Python."""
    rng = np.random.default_rng(3)
    tables = [
        pd.DataFrame(
            {
                "note": [f"customer said {w} on visit {k}" for k, w in enumerate(rng.random(n))],
                "money": [f"${v:,.2f}" for v in rng.normal(5000, 800, n)],
                "td": _durations(rng, n),
            }
        )
        for n in (60, 50)
    ]
    text = _refused(tables)
    assert "column 'td' holds durations" in text
    assert "Also, 'note' (60 distinct values in 60 rows) look(s) like identifiers" in text
    assert "'money'" not in text  # numbers with a currency: modelled, not named
    assert "Python: kinds={'note': 'id'}" in text
    assert "df.drop(columns=['td', 'note'])" in text
    assert text.endswith("--drop td --drop note; or declare those identifiers (--kind note=id)")


def test_several_refused_columns_say_the_python_drop():
    """Two columns no kind models: one --drop for both on the command line, and the
    Python form beside it; a Decimal column next to them is not named."""
    rng = np.random.default_rng(4)
    n = 60
    table = pd.DataFrame(
        {
            "dec": [Decimal(f"{v:.2f}") for v in rng.normal(100, 15, n)],
            "td": _durations(rng, n),
            "blob": [bytes([k % 7, 1]) for k in range(n)],
        }
    )
    with pytest.raises(SchemaError) as e:
        check_columns(table, "s0")
    text = str(e.value)
    assert "s0: 2 columns hold values fits cannot model" in text
    assert "df.drop(columns=['td', 'blob'])" in text
    assert text.endswith("(fits synthesize and fits federate: --drop td --drop blob)")
    assert "'dec'" not in text


@pytest.mark.parametrize("other", ["td", "blob"])
def test_cli_decimal_parquet(tmp_path, other):
    """fits synthesize on Parquet files with a decimal column beside a duration or
    bytes column: the error names only the column no kind models; with it dropped,
    fits schema reads the decimal column as continuous."""
    rng = np.random.default_rng(5)
    files = []
    for k, n in enumerate((60, 50)):
        frame = pd.DataFrame({"dec": [Decimal(f"{v:.2f}") for v in rng.normal(100, 15, n)]})
        if other == "td":
            frame["td"] = _durations(rng, n)
        else:
            frame["blob"] = [bytes([j % 7, 1]) for j in range(n)]
        files.append(tmp_path / f"{other}{k}.parquet")
        frame.to_parquet(files[-1])
    res = fits_in_process("synthesize", *files, "--rows", "20", "--out", tmp_path / "o.csv")
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert f"column {other!r} holds" in res.stderr
    assert "'dec'" not in res.stderr and "--drop dec" not in res.stderr, res.stderr
    out = tmp_path / "schema.json"
    res = fits_in_process("schema", *files, "--drop", other, "--out", out)
    assert res.returncode == 0, res.stderr
    assert Schema.from_json(out.read_text()).kinds() == {"dec": "continuous"}
