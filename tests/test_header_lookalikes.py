"""Headers that differ across sites only in case or surrounding spaces ('Age' at one,
'age ' at another) are refused with both spellings, the files (or sites) and the
rename that makes them one column.  Tiny tables, in process."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import SchemaError, lookalike_names

from conftest import fits_in_process


def test_the_hint_names_both_spellings_and_how_they_differ() -> None:
    hint = lookalike_names(["Age", "g"], ["age ", "h"], ("'a.csv'", "'b.csv'"))
    assert (
        "'Age' in 'a.csv' and 'age ' in 'b.csv' differ only in case and surrounding spaces" in hint
    )
    assert "rename the column at one site" in hint and "'age ' to 'Age' in 'b.csv'" in hint
    assert "differ only in case." in lookalike_names(["Age"], ["age"])
    assert "surrounding spaces." in lookalike_names(["age"], [" age"])
    assert lookalike_names(["age"], ["height"]) == ""  # no look-alike: no hint
    # two candidates for one name: no guess
    assert lookalike_names(["age"], ["Age", "AGE"]) == ""


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    one = pd.DataFrame({"Age": range(20, 40), "g": ["a", "b"] * 10})
    two = pd.DataFrame({"age ": range(30, 50), "g": ["a", "b"] * 10})
    return one, two


def test_fits_synthesize_names_both_files_and_the_fix(tmp_path: Path) -> None:
    one, two = _tables()
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    one.to_csv(a, index=False)
    two.to_csv(b, index=False)
    res = fits_in_process("synthesize", a, b, "--rows", 5, "--out", tmp_path / "o.csv")
    assert res.returncode == 1, res.stderr
    text = res.stderr
    assert f"'{b}' (site 'b'): columns differ from those of '{a}' (site 'a')" in text
    assert f"'Age' in '{a}' and 'age ' in '{b}'" in text
    assert f"'age ' to 'Age' in '{b}'" in text
    assert "Traceback" not in text and not (tmp_path / "o.csv").exists()
    res = fits_in_process("schema", a, b, "--out", tmp_path / "s.json")
    assert res.returncode == 1 and f"'Age' in '{a}' and 'age ' in '{b}'" in res.stderr


def test_the_python_api_names_the_sites() -> None:
    one, two = _tables()
    with pytest.raises(SchemaError, match=r"'Age' in north and 'age ' in south differ only"):
        FITSSynthesizer(seed=0).fit({"north": one, "south": two})
