"""Known values of conditional sampling (``sample_remaining_columns`` and ``fits
synthesize --known``) as the conditional-sampling QA pass met them:

* a known date outside the sites' range was refused in epoch seconds
  (``range [1.29384e+09, 1.35691e+09] (e.g. 1.42007e+09)``): dates are shown as dates;
* a fractional value (age 38.5) for a column of whole numbers was taken, and the output's
  column became float: refused, naming the column and the row; 38.0 stays accepted and
  the output keeps the sites' integer dtype;
* a known date written ``06/01/2011`` was written back as given (the output's date column
  mixed two forms): it is written as the synthetic rows' dates are, and a form whose day
  and month could be swapped in every row gets one note;
* the library's refusals of a missing known value and of a category written with
  another case gave schema advice meant for files: they speak of ``known_columns``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import SchemaError

from conftest import fits_in_process as run

ORDER = ["age", "day", "level", "sex"]


def _frame(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "day": pd.Timestamp("2011-01-01") + pd.to_timedelta(rng.integers(0, 365, n), "D"),
            "level": rng.choice([1, 2, 3, 4], n),
            "sex": rng.choice(["Female", "Male"], n),
        }
    )


@pytest.fixture(scope="module")
def synth() -> FITSSynthesizer:
    frame = _frame()
    return FITSSynthesizer(seed=0, order=ORDER).fit([frame.iloc[:100], frame.iloc[100:]])


def _sites(tmp_path: Path) -> list[str]:
    frame = _frame()
    frame["day"] = frame["day"].dt.strftime("%Y-%m-%d")
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:100].to_csv(paths[0], index=False)
    frame.iloc[100:].to_csv(paths[1], index=False)
    return [str(p) for p in paths]


def _synthesize(tmp_path: Path, known: str, out: Path):
    path = tmp_path / "known.csv"
    path.write_text(known)
    order = ",".join(ORDER)
    return run(
        "synthesize", *_sites(tmp_path), "--order", order, "--known", path, "--out", out, "-q"
    )


# -- 1. dates outside the range, shown as dates -------------------------------------------


def test_a_date_outside_the_range_is_shown_as_a_date(synth):
    known = pd.DataFrame({"age": [40], "day": pd.to_datetime(["2015-01-01"])})
    with pytest.raises(ValueError, match="column 'day'") as caught:
        synth.sample_remaining_columns(known)
    message = str(caught.value)
    assert "range [2011-01-0" in message and "2011-12-" in message, message
    assert "(e.g. 2015-01-01)" in message and "e+09" not in message, message


def test_a_date_outside_the_range_is_shown_as_a_date_by_the_cli(tmp_path):
    out = tmp_path / "s.csv"
    res = _synthesize(tmp_path, "age,day\n40,2015-01-01\n", out)
    assert res.returncode == 1, res.stderr
    assert "(e.g. 2015-01-01)" in res.stderr and "e+09" not in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not out.exists()


# -- 2. whole numbers ------------------------------------------------------------------


@pytest.mark.parametrize("column", ["age", "level"], ids=["continuous", "ordinal"])
def test_a_fraction_for_whole_numbers_is_refused(synth, column):
    known = pd.DataFrame({"age": [40.0, 41, 42], "level": [1.0, 2, 3]}, index=[10, 11, 12])
    known.loc[12, column] = 3.5
    with pytest.raises(ValueError, match=f"column {column!r} holds whole numbers") as caught:
        synth.sample_remaining_columns(known)
    assert "3.5" in str(caught.value) and "known_columns.loc[12]" in str(caught.value)


def test_whole_numbers_given_as_floats_keep_the_integer_dtype(synth):
    known = pd.DataFrame({"age": [40.0, 38.0], "level": [1.0, 3.0]})
    out = synth.sample_remaining_columns(known, seed=1)
    assert out["age"].dtype == np.int64 and out["level"].dtype == np.int64
    assert out["age"].tolist() == [40, 38] and out["level"].tolist() == [1, 3]


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_the_cli_refuses_a_fraction_and_keeps_whole_floats(tmp_path, suffix):
    out = tmp_path / f"s.{suffix}"
    res = _synthesize(tmp_path, "age,level\n40,1\n38.5,2\n", out)
    assert res.returncode == 1, res.stderr
    assert "column 'age' holds whole numbers" in res.stderr, res.stderr
    assert "38.5" in res.stderr and "row 2 of the file" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not out.exists()
    res = _synthesize(tmp_path, "age,level\n40,1\n38.0,\n", out)  # 38.0: a blank elsewhere
    assert res.returncode == 1 and "'level'" in res.stderr, res.stderr  # (no missing level)
    res = _synthesize(tmp_path, "age,level\n40.0,1\n38.0,2\n", out)
    assert res.returncode == 0, res.stderr
    table = pd.read_parquet(out) if suffix == "parquet" else pd.read_csv(out)
    assert pd.api.types.is_integer_dtype(table["age"].dtype), table.dtypes
    assert table["age"].tolist() == [40, 38]
    if suffix == "csv":
        assert "38.0" not in out.read_text()


# -- 3. known dates written as the synthetic rows' dates ----------------------------------


def test_known_text_dates_become_the_columns_dates(synth):
    known = pd.DataFrame({"age": [40, 50], "day": ["2011-06-01", "2011-07-02"]})
    out = synth.sample_remaining_columns(known, seed=1)
    drawn = synth.sample(3, seed=1)
    assert out["day"].dtype == drawn["day"].dtype, (out["day"].dtype, drawn["day"].dtype)
    assert out["day"].tolist() == [pd.Timestamp("2011-06-01"), pd.Timestamp("2011-07-02")]


def test_an_ambiguous_day_and_month_gets_one_note(synth):
    known = pd.DataFrame({"age": [40, 50], "day": ["06/01/2011", "07/02/2011"]})
    with pytest.warns(UserWarning, match="month first") as caught:
        out = synth.sample_remaining_columns(known, seed=1)
    assert len([w for w in caught if "month first" in str(w.message)]) == 1
    assert "'day'" in str(caught[0].message) and "2011-06-01" in str(caught[0].message)
    assert out["day"].tolist() == [pd.Timestamp("2011-06-01"), pd.Timestamp("2011-07-02")]
    with warnings.catch_warnings():  # a day past 12: one reading, no note
        warnings.simplefilter("error")
        out = synth.sample_remaining_columns(
            pd.DataFrame({"age": [40], "day": ["13/06/2011"]}), seed=1
        )
    assert out["day"].tolist() == [pd.Timestamp("2011-06-13")]


def test_the_cli_writes_known_dates_as_the_synthetic_ones(tmp_path):
    out = tmp_path / "s.csv"
    res = _synthesize(tmp_path, "age,day\n40,06/01/2011\n50,07/02/2011\n", out)
    assert res.returncode == 0, res.stderr
    assert "month first" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    text = out.read_text()
    assert "06/01/2011" not in text and "2011-06-01" in text and "2011-07-02" in text, text
    res = _synthesize(tmp_path, "age,day\n40,2011-06-01\n", tmp_path / "s.parquet")
    assert res.returncode == 0, res.stderr
    table = pd.read_parquet(tmp_path / "s.parquet")
    assert pd.api.types.is_datetime64_any_dtype(table["day"].dtype), table.dtypes


# -- 4. the library's refusals in the library's terms ------------------------------------


def test_a_missing_known_value_says_to_fill_known_columns(synth):
    known = pd.DataFrame({"sex": ["Male", None]}, index=["a", "b"])
    with pytest.raises(SchemaError, match="column 'sex'") as caught:
        synth.sample_remaining_columns(known)
    message = str(caught.value)
    assert '"missing": true' not in message and "schema" not in message, message
    assert "known_columns.loc['b']" in message, message
    assert "give a value in those rows of known_columns, or leave the rows out" in message


def test_a_category_written_differently_is_named_by_the_library(synth):
    known = pd.DataFrame({"sex": ["female", "Male"]})
    with pytest.raises(SchemaError, match="not among its categories") as caught:
        synth.sample_remaining_columns(known)
    message = str(caught.value)
    assert "'female' stands for 'Female'" in message, message
    assert "add them to the schema" not in message and "known_columns.loc[0]" in message
    assert "give one of its categories in those rows of known_columns" in message


def test_a_time_of_day_for_a_column_of_whole_days_is_refused(synth):
    known = pd.DataFrame({"age": [40, 50], "day": ["2011-06-01", "2011-06-02 10:30"]})
    with pytest.raises(ValueError, match="column 'day' holds whole days") as caught:
        synth.sample_remaining_columns(known)
    assert "'2011-06-02 10:30:00' in known_columns.loc[1]" in str(caught.value)


@pytest.mark.parametrize("column", ["age", "level"], ids=["continuous", "ordinal"])
def test_true_for_a_number_is_named_by_the_known_tables_row_label(synth, column):
    """The True / False refusal named 'row 2' (its position, 1-based) where its
    neighbours name known_columns.loc[LABEL]: the user's label 11, not 'row 2'."""
    known = pd.DataFrame({"age": [40, 41, 42], "level": [1, 2, 3]}, index=[10, 11, 12])
    known[column] = known[column].astype(object)
    known.loc[11, column] = True
    with pytest.raises(ValueError, match=f"column {column!r} is") as caught:
        synth.sample_remaining_columns(known)
    message = str(caught.value)
    assert "True / False (e.g. True in known_columns.loc[11])" in message, message
    assert "row 2" not in message and "in those rows of known_columns" in message, message


def test_the_cli_names_the_files_row_of_true_for_a_number(tmp_path):
    out = tmp_path / "s.csv"
    res = _synthesize(tmp_path, "age,level\n40,\n41,\n42,True\n", out)  # (True, blanks)
    assert res.returncode == 1, res.stderr
    line = res.stderr.strip()
    assert "column 'level'" in line and "(e.g. True in row 3 of the file)" in line, line
    assert "known_columns" not in line and "in those rows of the file" in line, line
    assert "Traceback" not in res.stderr and not out.exists()


def test_the_flower_server_app_names_the_files_row(synth):
    """The ServerApp's refusal of a known value (``fits federate run/local --known``)
    names the file's row, as ``fits synthesize --known`` does, not ``known_columns``."""
    pytest.importorskip("flwr", reason="needs the flower extra")
    from fits.flower_app import _complete

    known = pd.DataFrame({"age": [40.0, 41.5]})
    with pytest.raises(ValueError, match="column 'age' holds whole numbers") as caught:
        _complete(synth, known, "k.csv", None)
    message = str(caught.value)
    assert "--known 'k.csv'" in message and "row 2 of the file" in message, message
    assert "known_columns" not in message and "rows of the file" in message, message


# -- one wording for a known row no draw matched (command line and Flower ServerApp) -----


def test_an_unmatched_known_row_is_worded_once_for_the_file(synth):
    from fits.known import unmatched_known_row

    known = pd.DataFrame({"sex": ["Male"], "level": [4]})
    message = (
        "known column(s) ['sex', 'level'] come after ...; the known row at position 4 "
        "(sex='Male', level=4) found none in 7 draws per row (...). Put the known columns "
        "first in the chain (order=[...]; fits synthesize --order), or allow more draws "
        "per row (max_tries)"
    )
    said = unmatched_known_row(message, synth.schema_, known, 7)
    assert "row 5 of the file (sex='Male', level=4)" in said
    assert "(--order sex,level,age,day)" in said and "(--max-tries, now 7)" in said
    assert "order=[...]" not in said and "position" not in said


def test_the_cli_and_the_server_app_share_the_unmatched_row_wording():
    """Neither keeps a copy of the wording that could drift from fits.known's."""
    root = Path(__file__).resolve().parents[1]
    for path in (root / "cli" / "main.py", root / "fits" / "flower_app.py"):
        source = path.read_text(encoding="utf-8")
        assert "the known row at position" not in source, path
        assert "unmatched_known_row(" in source, path
