"""Numbers written with a unit or separators ("45.3%", "$1,234.56", "12 €", "1.234,56 €"
in a decimal-comma file) are read as numbers, as plain text numbers are: the value the
user sees (45.3 for "45.3%"), markers ("n/a") read as missing, a note naming the unit
and separators, plain numbers in the synthetic output.  A column written with several
units, or with one fits does not read ("12 kg"), stays text and the note or the refusal
says how to convert it; codes with leading zeros stay text; the sites must agree on the
unit."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from fits.core.schema import (
    DECIMAL_MARK_ATTR,
    DataNote,
    IdentifierColumnError,
    SchemaError,
    describe_table,
    merge_descriptions,
    parse_text_columns,
)
from fits.io import read_table

from conftest import fits_in_process as run


def _merge(frames, names=None):
    """The sites' descriptions merged as at setup (each parsed first, as a site does)."""
    names = names or [f"site {k + 1}" for k in range(len(frames))]
    descs = []
    for frame, name in zip(frames, names, strict=True):
        parsed, notes = parse_text_columns(frame)
        descs.append(describe_table(parsed, client=name, notes=notes))
    return merge_descriptions(descs, names)


def _money(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pct = np.round(rng.normal(40, 15, n), 1)
    money = np.round(rng.gamma(2, 900, n), 2)
    return pd.DataFrame(
        {
            "pct": [f"{v:g}%" for v in pct],
            "money": [f"${v:,.2f}" for v in money],
            "y": np.round(rng.normal(size=n), 3),
        }
    )


def test_percent_is_read_as_the_number_shown_with_markers_missing():
    frame = pd.DataFrame({"pct": ["45.3%", "-2%", " 12.5 % ", "0.5%"] * 25 + ["n/a"]})
    out, notes = parse_text_columns(frame)
    assert out["pct"].iloc[:4].tolist() == [45.3, -2.0, 12.5, 0.5]  # as shown, not 0.453
    assert pd.isna(out["pct"].iloc[-1])
    assert notes["pct"]["unit"] == "%" and notes["pct"]["markers"] == {"n/a": 1}
    assert frame["pct"].iloc[0] == "45.3%"  # the site's table is not changed


def test_percent_and_money_are_numbers_and_the_note_names_the_unit():
    a, b = _money(150, 0), _money(150, 1)
    a.loc[3, "pct"] = "n/a"
    with pytest.warns(DataNote) as caught:
        schema = _merge([a, b])
    notes = [str(w.message) for w in caught]
    assert (
        "column 'pct' is text read as numbers written with '%' (at site 1, site 2); 1 of its "
        "300 values are not numbers and are read as missing: 'n/a' (1); its synthetic values "
        "are written as plain numbers"
    ) in notes
    assert (
        "column 'money' is text read as numbers written with '$' and ',' thousands separators "
        "(at site 1, site 2); its synthetic values are written as plain numbers"
    ) in notes
    assert schema["pct"].kind == "continuous" and schema["pct"].missing
    assert schema["money"].kind == "continuous" and schema["money"].decimals == 2
    assert schema["money"].parsed == "number written with '$' and ',' thousands separators"
    # the bounds are the numbers the user sees: 45.3 for "45.3%", not 0.453
    pct = pd.to_numeric(pd.concat([a, b])["pct"].str.rstrip("%"), errors="coerce")
    assert schema["pct"].lower == pct.min() and schema["pct"].upper == pct.max()


def test_currency_after_or_before_the_number():
    frame = pd.DataFrame({"m": ["12 €", "3.5€", "-4 €", "1,234.5 €", "(2 €)", "0 €", "€7"]})
    out, notes = parse_text_columns(frame)
    assert out["m"].tolist() == [12.0, 3.5, -4.0, 1234.5, -2.0, 0.0, 7.0]
    assert notes["m"]["unit"] == "€" and notes["m"]["thousands"] == [","]
    assert notes["m"]["negative_parentheses"]
    whole, notes = parse_text_columns(pd.DataFrame({"m": ["£3", "£12", "-£4"]}))
    assert str(whole["m"].dtype) == "Int64" and notes["m"]["unit"] == "£"


def test_one_unit_a_column_negatives_and_accounting_parentheses():
    values = ["$1,234.56", "-$5", "$-7.25", "($5.00)", "$12", "+$1,000,000"] * 4
    out, notes = parse_text_columns(pd.DataFrame({"m": values}))
    assert out["m"].tolist()[:6] == [1234.56, -5.0, -7.25, -5.0, 12.0, 1e6]
    assert notes["m"] | {"markers": None} == {
        "as": "number",
        "format": "number",
        "markers": None,
        "n_markers": 0,
        "n_present": 24,
        "unit": "$",
        "thousands": [","],
        "decimal_comma": False,
        "negative_parentheses": True,
    }
    # "£3.50" among '$' values: two units, not one quantity; the column stays text
    mixed = pd.DataFrame({"m": values + ["£3.50"] * 1})
    out, notes = parse_text_columns(mixed)
    assert "m" not in notes and out["m"].iloc[0] == "$1,234.56"


def test_a_column_mixing_units_is_not_read_and_the_note_or_the_refusal_says_so():
    few = pd.DataFrame({"m": ["5%", "$5", "6%", "7%"] * 30, "y": np.arange(120.0) / 7})
    with pytest.warns(DataNote, match=r"column 'm' looks like numbers written with several "):
        schema = _merge([few, few.copy()])
    assert schema["m"].kind == "nominal"  # text: its four labels, as before
    rng = np.random.default_rng(2)
    v = np.round(rng.normal(50, 10, 200), 2)
    many = pd.DataFrame({"m": [f"{x}%" if k % 2 else f"${x}" for k, x in enumerate(v)]})
    with pytest.raises(IdentifierColumnError) as err:
        _merge([many, many.copy()])
    text = str(err.value)
    assert "column 'm' looks like numbers written with several units ('%' and '$'" in text
    assert "one unit per column: convert it to numbers in one unit before fitting" in text


def test_an_unread_unit_is_named_in_the_refusal_with_a_pandas_fix():
    rng = np.random.default_rng(3)
    w = pd.DataFrame({"w": [f"{x:.1f} kg" for x in rng.normal(70, 10, 300)]})
    with pytest.raises(IdentifierColumnError) as err:
        _merge([w.iloc[:150], w.iloc[150:]], ["a", "b"])
    text = str(err.value)
    assert "column 'w' looks like an identifier or free text" in text
    assert (
        "column 'w' looks like numbers written with a unit ('kg' at a, b), which fits does not read"
    ) in text
    assert "df['w'] = pd.to_numeric(df['w'].str.replace('kg', '').str.strip())" in text
    # not every refused text column gets the hint: free text and identifiers do not
    ids = pd.DataFrame({"w": [f"patient {k} of ward {k % 7}" for k in range(300)]})
    with pytest.raises(IdentifierColumnError) as err:
        _merge([ids.iloc[:150], ids.iloc[150:]], ["a", "b"])
    assert "written with" not in str(err.value)


def test_zip_codes_and_leading_zero_amounts_stay_text():
    frame = pd.DataFrame(
        {
            "zip": ["02139", "1,234", "00501", "12345"] * 10,
            "code": ["$05", "$12", "$1,000", "$7"] * 10,
        }
    )
    out, notes = parse_text_columns(frame)
    assert notes == {} and out["zip"].iloc[0] == "02139" and out["code"].iloc[0] == "$05"


def test_sites_writing_different_units_are_refused():
    a = pd.DataFrame({"m": [f"${k % 9 + 1},000" for k in range(40)]})
    b = pd.DataFrame({"m": [f"{k % 9 + 1} €" for k in range(40)]})
    with pytest.raises(SchemaError, match="different units at the sites") as err:
        _merge([a, b], ["boston", "paris"])
    assert "'$' at boston; '€' at paris" in str(err.value)


def test_a_long_column_is_read_past_the_quick_sample():
    rng = np.random.default_rng(4)
    v = np.round(rng.gamma(2, 500, 5000), 2)
    frame = pd.DataFrame({"m": [f"${x:,.2f}" for x in v]})
    out, notes = parse_text_columns(frame)
    assert notes["m"]["unit"] == "$"
    assert np.allclose(out["m"].to_numpy(dtype=float), v)


def test_a_decimal_comma_file_reads_points_and_spaces_as_thousands(tmp_path):
    lines = ["x;price;share"]
    rng = np.random.default_rng(5)
    for k in range(60):
        euros = f"{rng.integers(1000, 9999999) / 100:,.2f}".replace(",", " ").replace(".", ",")
        if k % 2:
            euros = euros.replace(" ", ".")
        share = "?" if k == 7 else f"{rng.integers(0, 1000) / 10}".replace(".", ",") + " %"
        lines.append(f"{k % 13};{euros} €;{share}")
    path = tmp_path / "site.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)  # the ';' separator's
        frame = read_table(path)
    assert frame.attrs[DECIMAL_MARK_ATTR] == ","
    out, notes = parse_text_columns(frame)
    raw = pd.Series(lines[1:]).str.split(";").str[1]
    want = raw.str.rstrip(" €").str.replace(r"[ .]", "", regex=True).str.replace(",", ".")
    assert np.allclose(out["price"].to_numpy(dtype=float), want.astype(float).to_numpy())
    assert notes["price"]["unit"] == "€" and notes["price"]["decimal_comma"]
    assert notes["price"]["thousands"] == [" ", "."]
    assert notes["share"]["unit"] == "%" and notes["share"]["markers"] == {"?": 1}
    with pytest.warns(DataNote) as caught:
        schema = _merge([frame], ["berlin"])
    assert (
        "column 'price' is text read as numbers written with '€', space or '.' thousands "
        "separators and a decimal comma (at berlin); its synthetic values are written as "
        "plain numbers"
    ) in [str(w.message) for w in caught]
    assert schema["price"].decimals == 2
    # the same text in a file with a decimal point: "1.234,56 €" is no number there
    plain = frame.copy()
    plain.attrs = {}
    out, notes = parse_text_columns(plain)
    assert "price" not in notes


def test_synthesize_writes_plain_numbers(tmp_path):
    files = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for k, path in enumerate(files):
        t = _money(200, k)
        t.loc[k, "money"] = "unknown"  # a marker ("n/a" pandas reads as missing itself)
        t["zip"] = np.random.default_rng(k).choice(["02134", "00501", "10001"], 200)
        t.to_csv(path, index=False)
    out = tmp_path / "out.csv"
    res = run("synthesize", *map(str, files), "--rows", "300", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert (
        "note: column 'money' is text read as numbers written with '$' and ',' thousands "
        "separators (at a, b); 2 of its 400 values are not numbers and are read as missing: "
        "'unknown' (2); its synthetic values are written as plain numbers"
    ) in " ".join(res.stderr.split())
    assert "column 'pct' is text read as numbers written with '%' (at a, b)" in res.stderr.replace(
        "\n", " "
    )
    back = pd.read_csv(out, dtype={"zip": str})
    assert len(back) == 300
    assert pd.api.types.is_float_dtype(back["money"].dtype)
    assert pd.api.types.is_float_dtype(back["pct"].dtype)
    assert set(back["zip"]) <= {"02134", "00501", "10001"}
    money = back["money"].dropna()
    assert (money == money.round(2)).all() and money.between(-1e-9, 1e6).all()
    schema = tmp_path / "schema.json"
    res = run("schema", *map(str, files), "--out", str(schema))
    assert res.returncode == 0, res.stderr
    cols = {c["name"]: c for c in json.loads(schema.read_text())["columns"]}
    assert cols["pct"]["parsed"] == "number written with '%'"


def test_synthesize_reads_a_decimal_comma_file_s_amounts(tmp_path):
    rng = np.random.default_rng(6)
    files = [tmp_path / "berlin.csv", tmp_path / "wien.csv"]
    for path in files:
        lines = ["x;price"]
        for k in range(150):
            euros = f"{rng.gamma(2, 800):,.2f}".replace(",", " ").replace(".", ",")
            lines.append(f"{k % 13};{euros} €")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    res = run("synthesize", *map(str, files), "--rows", "200", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert (
        "note: column 'price' is text read as numbers written with '€', space thousands "
        "separators and a decimal comma (at berlin, wien)"
    ) in " ".join(res.stderr.split())
    back = pd.read_csv(out)
    assert pd.api.types.is_float_dtype(back["price"].dtype) and back["price"].notna().all()


def test_a_site_whose_unit_column_stays_text_is_told_why():
    a = pd.DataFrame({"m": [f"${k % 9 + 1},000" for k in range(40)]})
    b = pd.DataFrame({"m": [f"${k % 9 + 1},000" if k % 4 else "unknown" for k in range(40)]})
    with pytest.raises(SchemaError, match="numeric at some clients and text at others") as err:
        _merge([a, b], ["a", "b"])
    assert (
        "The text: column 'm' looks like numbers written with '$' (at b), but fewer than 95% "
        "of its values are such numbers, so it stays text: fix or blank the other values"
    ) in str(err.value)


def test_known_values_written_with_the_unit_are_refused_with_the_fix():
    from fits import FITSSynthesizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        syn = FITSSynthesizer().fit([_money(150, 0), _money(150, 1)])
    first = syn.schema_.order[0]
    shown = _money(3, 2)[[first]]
    with pytest.raises(SchemaError) as err:
        syn.sample_remaining_columns(shown)
    assert "the sites' text was read as numbers written with" in str(err.value)
    assert "give plain numbers, as the synthetic values are written" in str(err.value)
    plain = shown.apply(lambda c: pd.to_numeric(c.str.replace(r"[$,%]", "", regex=True)))
    out = syn.sample_remaining_columns(plain)
    assert out[first].tolist() == plain[first].tolist()


def test_the_release_check_compares_the_numbers_the_sites_read(tmp_path):
    """The exact-copy check compared the sites' raw text ("$1,000.50") with the written
    plain numbers (1000.5): no synthetic row ever equalled a real one, and a table of
    copies passed as 0% copies."""
    rng = np.random.default_rng(7)
    files = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for path in files:
        pd.DataFrame(
            {
                "money": rng.choice(["$1,000.50", "$2,000.25", "$3,500.75"], 100),
                "pct": rng.choice(["5%", "10%", "15%"], 100),
            }
        ).to_csv(path, index=False)
    out = tmp_path / "out.csv"
    res = run("synthesize", *map(str, files), "--rows", "200", "--out", str(out))
    assert res.returncode == 0, res.stderr
    # 9 possible rows, every one at the sites: each synthetic row is a copy
    assert "exact copies: 200 of 200 synthetic rows (100.00%)" in res.stdout


def test_the_report_reads_the_real_text_as_numbers(tmp_path):
    """fits report compared a real "$1,000.50" with a synthetic 1000.5 as two labels:
    the column's fidelity was 0 ('a different coding') and no row a copy."""
    rng = np.random.default_rng(8)
    real = pd.DataFrame(
        {
            "money": rng.choice(["$1,000.50", "$2,000.25", "$3,500.75"], 200),
            "pct": rng.choice(["5%", "10%", "15%"], 200),
        }
    )
    synthetic = real.sample(frac=1.0, random_state=1).apply(
        lambda c: pd.to_numeric(c.str.replace(r"[$,%]", "", regex=True))
    )
    real.to_csv(tmp_path / "real.csv", index=False)
    synthetic.to_csv(tmp_path / "synthetic.csv", index=False)
    res = run(
        "report",
        "--real",
        str(tmp_path / "real.csv"),
        "--synthetic",
        str(tmp_path / "synthetic.csv"),
        "--out",
        str(tmp_path / "r.html"),
    )
    assert res.returncode == 0, res.stderr
    assert "a different coding" not in res.stderr
    assert "Privacy: 100.00% of synthetic rows copy a training row" in res.stdout + res.stderr
