"""Booleans keep the input's spelling: a CSV column written ``true``/``false`` (or
``TRUE``/``FALSE``) at every site is written so in a CSV output, not as pandas'
``True``/``False``; yes/no, Y/N and 0/1 stay the text or numbers they are.  Tiny
tables, in process."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import BOOL_TEXTS_ATTR, describe_table, description_digest
from fits.io import iter_table, read_table

from conftest import fits_in_process


def _write(path: Path, true: str, false: str, seed: int, blank: str | None = None) -> Path:
    rng = np.random.default_rng(seed)
    n = 40
    flag = np.where(rng.random(n) < 0.5, true, false).astype(object)
    if blank is not None:  # a missing value so written
        flag[rng.random(n) < 0.2] = blank
    pd.DataFrame(
        {
            "flag": flag,
            "yn": rng.choice(["yes", "no"], n),
            "YN": rng.choice(["Y", "N"], n),
            "b01": rng.choice([0, 1], n),
            "x": rng.normal(size=n).round(2),
        }
    ).to_csv(path, index=False)
    return path


def _quiet_read(path: Path) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_table(path)


@pytest.mark.parametrize(
    ("true", "false", "blank", "spelt"),
    [
        ("true", "false", None, ["true", "false"]),
        ("TRUE", "FALSE", "", ["TRUE", "FALSE"]),
        ("true", "false", "NA", ["true", "false"]),  # 'NA': a missing value
        ("True", "False", None, None),  # pandas' own: nothing to keep
        ("true", "False", None, None),  # two spellings: none kept
    ],
)
def test_read_table_keeps_the_spelling(
    tmp_path: Path, true: str, false: str, blank: str | None, spelt: list[str] | None
) -> None:
    path = _write(tmp_path / "a.csv", true, false, 0, blank)
    frame = _quiet_read(path)
    assert frame["flag"].dropna().map(lambda v: isinstance(v, (bool, np.bool_))).all()
    assert frame.attrs.get(BOOL_TEXTS_ATTR, {}).get("flag") == spelt
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunks = list(iter_table(path, 7))
    assert all(c.attrs.get(BOOL_TEXTS_ATTR, {}).get("flag") == spelt for c in chunks)


def test_the_spelling_is_no_part_of_the_site_digest(tmp_path: Path) -> None:
    frame = _quiet_read(_write(tmp_path / "a.csv", "true", "false", 0))
    spelt = describe_table(frame)
    assert spelt["bool_texts"] == {"flag": ["true", "false"]}
    plain = frame.copy()
    plain.attrs = {}
    assert "bool_texts" not in describe_table(plain)
    assert description_digest(spelt) == description_digest(describe_table(plain))


def _synthetic_csv(tables: list[pd.DataFrame], path: Path) -> pd.DataFrame:
    synth = FITSSynthesizer(seed=0).fit(tables)
    synth.sample_to_file(path, 60)
    synth.sample_to_file(path.with_suffix(".parquet"), 30)  # no spelling: booleans
    flags = pd.read_parquet(path.with_suffix(".parquet"))["flag"].dropna()
    assert flags.map(lambda v: isinstance(v, (bool, np.bool_))).all()
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def test_a_csv_output_writes_the_sites_spelling(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lower = [
            _quiet_read(_write(tmp_path / f"l{k}.csv", "true", "false", k, "")) for k in (1, 2)
        ]
        out = _synthetic_csv(lower, tmp_path / "l.csv")
        assert set(out["flag"]) == {"true", "false", ""}  # missing: an empty field
        # yes/no, Y/N, 0/1 come back as written
        assert set(out["yn"]) <= {"yes", "no"} and set(out["YN"]) <= {"Y", "N"}
        assert set(out["b01"]) <= {"0", "1"}
        # sites that disagree: pandas' spelling
        mixed = [
            _quiet_read(_write(tmp_path / "m1.csv", "true", "false", 1)),
            _quiet_read(_write(tmp_path / "m2.csv", "TRUE", "FALSE", 2)),
        ]
        assert set(_synthetic_csv(mixed, tmp_path / "m.csv")["flag"]) == {"True", "False"}


def test_fits_synthesize_writes_true_false_as_the_input(tmp_path: Path) -> None:
    paths = [_write(tmp_path / f"s{k}.csv", "TRUE", "FALSE", k) for k in (1, 2)]
    res = fits_in_process("synthesize", *paths, "--rows", 50, "--out", tmp_path / "o.csv", "-q")
    assert res.returncode == 0, res.stderr
    out = pd.read_csv(tmp_path / "o.csv", dtype=str, keep_default_na=False)
    assert set(out["flag"]) == {"TRUE", "FALSE"}


def test_output_forms_say_what_a_csv_writes(tmp_path: Path) -> None:
    """:meth:`FITSSynthesizer.output_forms`: the sites' agreed spelling and date format,
    the one object every writer is given (``fits synthesize``, ``sample_to_file``, the
    Flower ServerApp)."""
    from sklearn.exceptions import NotFittedError

    from fits.io import OutputForms

    with pytest.raises(NotFittedError):
        FITSSynthesizer().output_forms()
    tables = []
    for k in (1, 2):
        path = _write(tmp_path / f"s{k}.csv", "true", "false", k)
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)  # true/false as written
        frame["day"] = [f"{d % 28 + 1:02d}/03/2021" for d in range(len(frame))]
        frame.to_csv(path, index=False)
        tables.append(_quiet_read(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        synth = FITSSynthesizer(seed=0).fit(tables)
    forms = synth.output_forms()
    assert forms == OutputForms(
        decimal_types={}, date_formats={"day": "%d/%m/%Y"}, bool_texts={"flag": ("true", "false")}
    )
    synth.sample_to_file(tmp_path / "o.csv", 40)
    out = pd.read_csv(tmp_path / "o.csv", dtype=str, keep_default_na=False)
    assert set(out["flag"]) <= {"true", "false"} and out["day"].str.match(r"\d\d/03/2021").all()
