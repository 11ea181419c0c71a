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
    DECIMAL_SOURCE_ATTR,
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


def _table(values, mark=None, source=None) -> pd.DataFrame:
    """One column ``m`` of ``values``, as read from a file of decimal ``mark`` (None: a
    comma-separated file, or a DataFrame) and ``source`` (how sure the mark is)."""
    frame = pd.DataFrame({"m": values})
    if mark is not None:
        frame.attrs[DECIMAL_MARK_ATTR] = mark
    if source is not None:
        frame.attrs[DECIMAL_SOURCE_ATTR] = source
    return frame


def _read(values, mark=None, source=None):
    """``m`` read: (its numbers, its note), or (None, None) where it stays text."""
    out, notes = parse_text_columns(_table(values, mark, source))
    if "m" not in notes:
        assert out["m"].tolist() == list(values)  # the site's text, unchanged
        return None, None
    return out["m"].tolist(), notes["m"]


def test_currency_codes_before_or_after_the_number_are_read_as_the_symbols_are():
    got, note = _read(["USD 5", "5 USD", "USD 1,234.50", "(USD 3.00)", "USD -2", "7.5 USD"])
    assert got == [5.0, 5.0, 1234.5, -3.0, -2.0, 7.5]
    assert note["unit"] == "USD" and note["thousands"] == [","] and note["negative_parentheses"]
    got, note = _read(["EUR 1.234,56", "12 EUR", "EUR 3,5", "EUR 1 000"], ",")
    assert got == [1234.56, 12.0, 3.5, 1000.0]
    assert note["unit"] == "EUR" and note["decimal_comma"]
    got, note = _read(["CHF 12.50", "CHF 1'234.50", "CHF 1\u2019000", "CHF 0.05"])
    assert got == [12.5, 1234.5, 1000.0, 0.05] and note["unit"] == "CHF"
    assert note["thousands"] == ["'", "\u2019"]


def test_what_is_not_a_currency_code_stays_text():
    # not ISO 4217, lower case, no space, more beside it: text, not numbers
    for values in (
        ["ABC 5", "ABC 7"],
        ["usd 5", "usd 7"],
        ["USD5", "USD7"],
        ["5USD", "7USD"],
        ["paid 5 USD", "paid 7 USD"],
        ["USD 5 USD", "USD 7"],
    ):
        assert _read(values * 10) == (None, None), values
    # several codes, or a code and a symbol: not one quantity, as several units
    assert _read(["USD 5", "EUR 7"] * 10) == (None, None)
    assert _read(["USD 5", "$7"] * 10) == (None, None)


def test_a_currency_code_is_read_only_where_every_number_has_it():
    """A code is told from free text by being on every number of its column: one
    "TOP 10" among plain numbers is a marker (not 10 Tongan pa'anga), and a column of
    "5 USD" with a plain "7" among them stays text, with the fix at setup."""
    got, note = _read([str(k) for k in range(60)] + ["TOP 10"])
    assert got[:60] == list(range(60)) and pd.isna(got[60])
    assert note["markers"] == {"TOP 10": 1} and "unit" not in note
    some = ["5 USD", "12 USD", "7.25 USD"] * 20 + ["7"]
    assert _read(some) == (None, None)
    with pytest.warns(DataNote) as caught:
        _merge([pd.DataFrame({"m": some})], ["zurich"])
    assert (
        "column 'm' looks like numbers written with 'USD' (at zurich), but fits reads a "
        "currency code only on a column whose every number has it"
    ) in " ".join(str(w.message) for w in caught)
    # markers beside them are read as missing, as with a symbol
    got, note = _read(["5 USD", "12 USD", "7.25 USD"] * 20 + ["n/a"])
    assert got[:3] == [5.0, 12.0, 7.25] and note["markers"] == {"n/a": 1}


def test_sites_writing_the_code_before_or_after_agree_and_other_units_do_not():
    a = pd.DataFrame({"m": [f"USD {k % 9 + 1},000.50" for k in range(40)]})
    b = pd.DataFrame({"m": [f"{k % 9 + 1}.25 USD" for k in range(40)]})
    with pytest.warns(DataNote) as caught:
        schema = _merge([a, b], ["boston", "denver"])
    assert (
        "column 'm' is text read as numbers written with 'USD' and ',' thousands separators "
        "(at boston, denver)"
    ) in " ".join(str(w.message) for w in caught)
    assert schema["m"].kind == "ordinal" and schema["m"].dtype == "float"
    assert min(schema["m"].categories) == 1.25 and max(schema["m"].categories) == 9000.5
    # '$' is not 'USD' (it may be Canadian): the sites must write one unit
    c = pd.DataFrame({"m": [f"${k % 9 + 1}.25" for k in range(40)]})
    with pytest.raises(SchemaError, match="different units at the sites") as err:
        _merge([a, c], ["boston", "toronto"])
    assert "'USD' at boston; '$' at toronto" in str(err.value)


def test_apostrophes_and_spaces_are_thousands_separators_with_either_mark():
    nb, nnb = "\u00a0", "\u202f"
    got, note = _read(["1'234.50", "12.5", "3'000", f"1{nb}234.5", f"2{nnb}000{nnb}000", "4 500"])
    assert got == [1234.5, 12.5, 3000.0, 1234.5, 2_000_000.0, 4500.0]
    assert note["thousands"] == [" ", "'", nb, nnb] and not note["decimal_comma"]
    got, note = _read(["1 234,56", "12,5", f"1{nnb}234,5", f"1{nb}000", "7'500,25"], ",")
    assert got == [1234.56, 12.5, 1234.5, 1000.0, 7500.25]
    assert note["decimal_comma"] and note["thousands"] == [" ", "'", nb, nnb]
    with pytest.warns(DataNote) as caught:
        _merge([_table(["1 234,56", "12,5", f"1{nnb}234,5", f"1{nb}000"] * 10, ",")], ["lyon"])
    assert (
        "column 'm' is text read as numbers written with space or no-break space or narrow "
        "no-break space thousands separators and a decimal comma (at lyon)"
    ) in " ".join(str(w.message) for w in caught)


def test_a_number_is_grouped_one_way_in_threes():
    """One separator throughout a number, groups of three digits, a first group that is
    not 0: "1,234 567", "1'23" and "0,125" are no thousands-grouped numbers."""
    for bad in ("1,234 567.5", "1'234,567", "1'23", "12'3456", "1 23"):
        assert _read([bad] * 20 + ["5"]) == (None, None), bad
    # "0,125" is no 125 (it was): with a decimal point it is no number, so a marker
    got, note = _read(["1,234.5", "2,000.25"] * 20 + ["0,125"])
    assert got[:2] == [1234.5, 2000.25] and note["markers"] == {"0,125": 1}
    # beside "2,000" (2000, or 2.0 with a decimal comma as in "0,125"): read neither way
    assert _read(["1,234.5", "2,000"] * 20 + ["0,125"]) == (None, None)


def test_a_column_whose_numbers_read_two_ways_stays_text_with_the_reason():
    """'1,234' is 1234 with a decimal point and 1.234 with a decimal comma: it is read
    only where the column's other values, or the file, settle which."""
    # a comma-separated file (or a DataFrame): its numbers have a decimal point
    got, note = _read(["1,234", "2,500", "12,000"] * 10)
    assert got[:3] == [1234, 2500, 12000] and note["thousands"] == [","]
    # ... unless the column itself holds decimal commas: read neither way
    mixed = ["1,234", "2,500", "12,5", "0,75"] * 10
    assert _read(mixed) == (None, None)
    with pytest.warns(DataNote) as caught:
        schema = _merge([pd.DataFrame({"m": mixed})], ["a"])
    assert (
        "column 'm' holds numbers that read two ways: values written like '1,234' (2 "
        "distinct at a) are 1234 with ',' as a thousands separator or 1.234 with ',' as the "
        "decimal mark, and others are written with a decimal comma (like '12,5'), so the "
        "column does not say which; it stays text: convert it to plain numbers"
    ) in " ".join(str(w.message) for w in caught)
    assert schema["m"].kind == "nominal"
    # a file of decimal commas: "1.234" is 1234 (pandas' plain reading gave 1.234) ...
    got, note = _read(["1.234", "2.500", "n/a"] + ["12.000"] * 30, ",")
    assert got[:2] == [1234, 2500] and pd.isna(got[2])
    assert note["thousands"] == ["."]
    # ... unless the column is written with decimal points: its own values settle it
    got, note = _read(["1.234", "2.5", "0.75"] * 10, ",", "settled")
    assert got[:3] == [1.234, 2.5, 0.75]
    # both ways in one column: text
    assert _read(["1.234", "2.5", "3,25"] * 10, ",", "settled") == (None, None)
    # a ';' file whose decimal comma is a guess (its only such numbers read two ways)
    guess = ["1,234 €", "2,500 €", "12,000 €"] * 10
    assert _read(guess, ",", "guess") == (None, None)
    with pytest.warns(DataNote) as caught:
        _merge([_table(guess, ",", "guess")], ["b"])
    assert (
        "are 1234 with ',' as a thousands separator or 1.234 with ',' as the decimal mark, "
        "and neither its other values nor the file's other numbers say which"
    ) in " ".join(str(w.message) for w in caught)
    # the same column with one value that reads one way is read
    got, note = _read([*guess, "1,25 €"], ",", "guess")
    assert got[:3] == [1.234, 2.5, 12.0] and note["decimal_comma"]


def _csv(tmp_path, name: str, lines: list[str]):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)  # the ';' separator's
        return read_table(path)


def test_a_semicolon_file_s_decimal_mark_and_how_sure_it_is(tmp_path):
    rng = np.random.default_rng(9)
    amounts = [f"{x:,.2f}" for x in rng.gamma(2, 900, 60)]
    # French: narrow no-break spaces and a decimal comma, and the code after
    french = [a.replace(",", "\u202f").replace(".", ",") + " EUR" for a in amounts]
    frame = _csv(tmp_path, "paris.csv", ["k;m"] + [f"{i};{v}" for i, v in enumerate(french)])
    assert frame.attrs[DECIMAL_MARK_ATTR] == "," and frame.attrs[DECIMAL_SOURCE_ATTR] == "settled"
    out, notes = parse_text_columns(frame)
    want = [float(a.replace(",", "")) for a in amounts]
    assert np.allclose(out["m"].to_numpy(dtype=float), want) and notes["m"]["unit"] == "EUR"
    # Swiss: apostrophes and a decimal point
    swiss = ["CHF " + a.replace(",", "'") for a in amounts]
    frame = _csv(tmp_path, "bern.csv", ["k;m"] + [f"{i};{v}" for i, v in enumerate(swiss)])
    assert DECIMAL_MARK_ATTR not in frame.attrs
    assert frame.attrs[DECIMAL_SOURCE_ATTR] == "settled"
    out, notes = parse_text_columns(frame)
    assert np.allclose(out["m"].to_numpy(dtype=float), want) and notes["m"]["unit"] == "CHF"
    # only numbers that read two ways: a decimal comma, but a guess; the column stays text
    lines = ["k;m"] + [f"{i};{(i % 9) + 1},{i % 7}00 €" for i in range(40)]
    (tmp_path / "guess.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.warns(DataNote, match=r"the decimal mark is a guess: every number with a"):
        frame = read_table(tmp_path / "guess.csv")
    assert frame.attrs[DECIMAL_MARK_ATTR] == "," and frame.attrs[DECIMAL_SOURCE_ATTR] == "guess"
    out, notes = parse_text_columns(frame)
    assert "m" not in notes and out["m"].iloc[0] == "1,000 €"
    from fits.io import iter_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        chunks = list(iter_table(tmp_path / "guess.csv", 15))
    assert [c.attrs for c in chunks] == [frame.attrs] * 3  # read in chunks: the same
    # a comma-separated file: no attribute, a decimal point for sure
    frame = _csv(tmp_path, "plain.csv", ["k,m"] + [f'{i},"${i + 1},000"' for i in range(40)])
    assert DECIMAL_SOURCE_ATTR not in frame.attrs and DECIMAL_MARK_ATTR not in frame.attrs
    out, notes = parse_text_columns(frame)
    assert out["m"].iloc[1] == 2000 and notes["m"]["unit"] == "$"


def test_synthesize_reads_codes_written_before_at_one_site_and_after_at_another(tmp_path):
    rng = np.random.default_rng(10)
    files = [tmp_path / "zurich.csv", tmp_path / "geneva.csv"]
    for k, path in enumerate(files):
        v = rng.gamma(2, 900, 150)
        money = [f"CHF {x:,.2f}".replace(",", "'") if k == 0 else f"{x:.2f} CHF" for x in v]
        pd.DataFrame({"money": money, "y": rng.normal(size=150).round(2)}).to_csv(path, index=False)
    out = tmp_path / "out.csv"
    res = run("synthesize", *map(str, files), "--rows", "100", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert (
        "note: column 'money' is text read as numbers written with 'CHF' and \"'\" thousands "
        "separators (at zurich, geneva); its synthetic values are written as plain numbers"
    ) in " ".join(res.stderr.split())
    back = pd.read_csv(out)
    assert pd.api.types.is_float_dtype(back["money"].dtype) and back["money"].notna().all()


def test_sites_of_a_decimal_comma_and_of_a_decimal_point_read_the_same_amounts(tmp_path):
    """Each site reads its own file's decimal mark: "1.234,56 €" in a ';' file of
    decimal commas and "€1,234.56" in a comma-separated file are both 1234.56, and the
    note says where the decimal comma is."""
    berlin = _csv(tmp_path, "berlin.csv", ["k;m"] + [f"{k};{k + 1}.234,56 €" for k in range(40)])
    dublin = pd.DataFrame({"m": [f"€{k + 1},234.56" for k in range(40)]})
    for frame in (berlin, dublin):
        out, _ = parse_text_columns(frame)
        assert out["m"].tolist() == [(k + 1) * 1000 + 234.56 for k in range(40)]
    with pytest.warns(DataNote) as caught:
        _merge([berlin[["m"]], dublin], ["berlin", "dublin"])
    assert (
        "column 'm' is text read as numbers written with '€', ',' or '.' thousands "
        "separators and a decimal comma at berlin (at berlin, dublin)"
    ) in " ".join(str(w.message) for w in caught)


def test_decimal_commas_in_a_comma_separated_file_are_named_with_the_fix(tmp_path):
    """Numbers written with a decimal comma are read only where the separator is not a
    comma; in a comma-separated file the refusal says what they are (it said "fewer than
    95% of its values are such numbers", though every value was one)."""
    rng = np.random.default_rng(0)
    euro = [
        f"{v:,.2f} €".replace(",", "_").replace(".", ",").replace("_", ".")
        for v in rng.gamma(2, 900, 300)
    ]
    path = tmp_path / "eu.csv"
    pd.DataFrame({"x": rng.normal(size=300), "amount": euro}).to_csv(path, index=False)
    frame = read_table(path)
    with pytest.raises(IdentifierColumnError) as err:
        _merge([frame.iloc[:150], frame.iloc[150:]], ["a", "b"])
    text = str(err.value)
    assert (
        "column 'amount' holds numbers written with a decimal comma (like '1.234,56' or "
        "'12,5', at a, b), in a comma-separated file or a DataFrame, where fits reads "
        "decimal points only"
    ) in text
    assert "save the file with ';' as the separator" in text
    assert "fewer than 95%" not in text
    assert not any(v in text for v in euro)  # shapes, never a value
    # the same amounts in a ';' file are read as numbers
    path.write_text(
        "x;amount\n" + "".join(f"{i / 7:.3f};{v}\n" for i, v in enumerate(euro)), encoding="utf-8"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataNote)
        schema = _merge([read_table(path)], ["a"])
    assert schema["amount"].kind == "continuous"
    # a DataFrame column of few decimal-comma values: a nominal column, with the reason
    few = pd.DataFrame({"r": ["12,5", "3,75", "0,5", "7,25"] * 20})
    with pytest.warns(DataNote, match=r"column 'r' holds numbers written with a decimal comma"):
        schema = _merge([few], ["a"])
    assert schema["r"].kind == "nominal"
    # text with commas that are not decimal commas gets no such note
    words = pd.DataFrame({"t": ["red, green", "blue, red", "green"] * 20})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _merge([words], ["a"])
    assert not any("decimal comma" in str(w.message) for w in caught)


def test_analyze_names_decimal_commas_in_a_comma_separated_file_as_synthesize_does(tmp_path):
    """fits analyze called such a column an identifier or free text ("a value of its own
    in nearly every row"); it now gives synthesize's words (one function, ``unit_advice``)."""
    rng = np.random.default_rng(1)
    files = []
    for site in ("a", "b"):
        x = rng.normal(size=120)
        euro = [
            f"{v:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")
            for v in rng.gamma(2, 900, 120)
        ]
        path = tmp_path / f"{site}.csv"
        pd.DataFrame({"x": x, "amount": euro, "y": 2 * x + rng.normal(size=120)}).to_csv(
            path, index=False
        )
        files.append(str(path))
    advice = (
        "column 'amount' holds numbers written with a decimal comma (like '1.234,56' or "
        "'12,5', at a, b), in a comma-separated file or a DataFrame, where fits reads "
        "decimal points only (a comma there may separate a list): save the file with ';' "
        "as the separator"
    )
    out = str(tmp_path / "r.json")
    named = run("analyze", *files, "--target", "y", "--features", "x,amount", "--out", out)
    said = " ".join(named.stderr.split())
    assert named.returncode == 1 and advice in said, said
    assert "identifier" not in said and "value of its own" not in said
    # not named: left out of the model with the same words, the fit goes on
    left = run("analyze", *files, "--target", "y", "--family", "linear", "--out", out)
    said = " ".join(left.stderr.split())
    assert left.returncode == 0 and advice in said and "left out of the model" in said
