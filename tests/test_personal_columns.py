"""Personal data and free text that the near-unique rule misses are refused too: values
shaped like phone, social security, card or ID numbers, IP addresses or URLs (judged at
each site, which says only the shape's name), a name that says personal data on a column
of many values (names repeated over visits), and long text however often it repeats.
A column declared nominal is kept; the real data sets' columns are not refused."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import (
    IdentifierColumnError,
    _value_shape,
    describe_table,
    merge_descriptions,
    parse_text_columns,
    personal_name,
)

from conftest import SHARED_DATA, fits_in_process

NAMES = [f"Maria Rossi {i}" for i in range(40)]


def _patients(seed: int, n: int) -> pd.DataFrame:
    """The tester's table: 40 patients over many visits (each value in about 9 rows, so
    no column is near-unique), with a name, an SSN, a phone number and a repeated note."""
    rng = np.random.default_rng(seed)
    p = rng.integers(0, 40, n)
    return pd.DataFrame(
        {
            "name": [NAMES[i] for i in p],
            "ssn": [f"078-05-{1120 + i:04d}" for i in p],
            "phone": [f"+1 555 010 {i:04d}" for i in p],
            "note": [
                f"Patient {NAMES[i % 15]} called about results, lives at {i % 15} Elm St" for i in p
            ],
            "bp": rng.normal(120, 10, n).round(),
        }
    )


@pytest.fixture(scope="module")
def patients() -> list[pd.DataFrame]:
    return [_patients(0, 200), _patients(1, 150)]


def _setup(frames: list[pd.DataFrame], kinds: dict[str, str] | None = None) -> list[dict]:
    declared = {c: {"kind": k} for c, k in (kinds or {}).items()}
    out = []
    for k, frame in enumerate(frames):
        parsed, notes = parse_text_columns(frame, declared)
        out.append(describe_table(parsed, declared, client=f"s{k}", notes=notes))
    return out


def test_the_testers_table_is_refused_naming_each_column_and_the_fix(patients) -> None:
    with pytest.raises(IdentifierColumnError) as caught:
        FITSSynthesizer(seed=0).fit(patients)
    err = caught.value
    assert err.columns == ["name", "ssn", "phone", "note"]
    text = str(err)
    assert "column 'ssn' looks like" in text and "social security numbers" in text
    assert "column 'phone' looks like" in text and "phone numbers" in text
    assert "its name ('name') says personal data" in text
    assert "12 words long on average (free text)" in text
    assert "--drop name --drop ssn --drop phone --drop note" in text
    assert "--kind name=id --kind ssn=id --kind phone=id --kind note=id" in text
    assert "declare it nominal" in text
    assert "at client 1" in text and "at client 2" in text  # the sites, each with its counts


def test_no_site_sends_the_values(patients) -> None:
    for description in _setup(patients):
        for column in ("name", "ssn", "phone", "note"):
            info = description["columns"][column]
            assert "values" not in info and "identifier" in info
        said = str(description)
        for real in ("Maria", "078-05", "555 010", "Elm St"):
            assert real not in said
    flags = _setup(patients)[0]["columns"]
    assert flags["ssn"]["identifier"]["shape"] == "social security numbers"
    assert flags["phone"]["identifier"]["shape"] == "phone numbers"
    assert "shape" not in flags["name"]["identifier"]  # its name says it, at the merge


def test_fits_synthesize_refuses_and_writes_nothing(patients, tmp_path: Path) -> None:
    paths = []
    for k, frame in enumerate(patients):
        paths.append(tmp_path / f"p{k}.csv")
        frame.to_csv(paths[-1], index=False)
    out = tmp_path / "o.csv"
    res = fits_in_process("synthesize", *paths, "--rows", 10, "--out", out, "-q")
    assert res.returncode == 2, res.stderr
    for column in ("name", "ssn", "phone", "note"):
        assert f"column {column!r} looks like an identifier or free text" in res.stderr
        assert f"--drop {column}" in res.stderr
    assert "at p0" in res.stderr and "at p1" in res.stderr
    assert not out.exists()
    # declared nominal, an identifier, or dropped: written as the user chose
    res = fits_in_process(
        "synthesize", *paths, "--rows", 10, "--out", out, "-q",
        "--kind", "name=nominal", "--kind", "ssn=id", "--drop", "phone",
        "--kind", "note=nominal",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    written = pd.read_csv(out)
    assert list(written.columns) == ["name", "ssn", "note", "bp"]
    assert written["ssn"].str.startswith("synthetic-").all()
    assert set(written["name"]) <= set(NAMES)


def test_declared_nominal_is_kept(patients) -> None:
    kinds = dict.fromkeys(("name", "ssn", "phone", "note"), "nominal")
    synth = FITSSynthesizer(seed=0, kinds=kinds).fit(patients)
    out = synth.sample(50)
    real = pd.concat(patients)
    for column in kinds:
        assert synth.schema_[column].kind == "nominal"
        assert set(out[column]) <= set(real[column])  # copied on purpose


def test_codes_at_one_site_only_refuse_the_column_naming_that_site() -> None:
    rng = np.random.default_rng(3)
    phones = [f"(555) 010-{i:04d}" for i in range(6)]  # a few, each in many rows
    ssns = [f"219-09-{9990 + i:04d}" for i in range(4)]
    a = pd.DataFrame(
        {
            "contact": rng.choice(phones, 80),
            "ref": rng.choice(ssns, 80),
            "x": rng.normal(size=80),
        }
    )
    b = pd.DataFrame(
        {
            "contact": rng.choice(["none", "refused"], 60),
            "ref": rng.choice(["n/a", "later"], 60),
            "x": rng.normal(size=60),
        }
    )
    descriptions = _setup([a, b])
    assert "values" not in descriptions[0]["columns"]["contact"]  # the codes stay at a
    assert descriptions[1]["columns"]["contact"]["values"] == ["none", "refused"]
    with pytest.raises(IdentifierColumnError) as caught:
        merge_descriptions(descriptions, ["a", "b"])
    assert caught.value.columns == ["contact", "ref"]
    text = str(caught.value)
    assert "6 distinct values in 80 rows at a, phone numbers" in text
    assert "4 distinct values in 80 rows at a, social security numbers" in text
    assert "at b" not in text  # b's labels are no reason


def test_ten_thousand_character_strings_are_free_text() -> None:
    rng = np.random.default_rng(0)
    docs = [f"{w} " * 2500 for w in ("alpha", "beta", "gamma")]  # three long documents
    blobs = ["x" * 10_000, "y" * 10_000, "z" * 10_000]  # no words: long all the same
    sites = [
        pd.DataFrame(
            {
                "doc": rng.choice(docs, 40),
                "blob": rng.choice(blobs, 40),
                "g": rng.choice(["a", "b"], 40),
            }
        )
        for _ in range(2)
    ]
    described = _setup(sites)[0]["columns"]
    assert "values" not in described["doc"] and described["doc"]["identifier"]["long_values"]
    with pytest.raises(IdentifierColumnError, match=r"a value over 200 characters") as caught:
        FITSSynthesizer(seed=0).fit(sites)
    assert caught.value.columns == ["doc", "blob"]
    out = FITSSynthesizer(seed=0, kinds={"doc": "nominal", "blob": "nominal"}).fit(sites)
    assert set(out.sample(10)["doc"]) <= set(docs)


def test_a_long_label_of_one_word_is_kept_a_paragraph_is_not() -> None:
    """Over 200 characters: free text with 6 words or more; one word (a 300-character
    code) stays a category, as test_qa_schema_report's odd labels do."""
    paragraph = " ".join(["word"] * 50)  # 249 characters
    frame = pd.DataFrame(
        {
            "label": ["a" * 300, "béta", "γ"] * 10,
            "para": [paragraph, "short", "other"] * 10,
            "x": np.random.default_rng(0).normal(size=30),
        }
    )
    described = describe_table(frame)["columns"]
    assert "values" in described["label"]
    assert described["para"]["identifier"]["long_values"]


def test_long_notes_at_one_site_each_are_refused_by_their_union() -> None:
    """One long value at each site (no site holds two) is no reason there; the two
    together are."""
    x = np.random.default_rng(0).normal(size=30)
    sites = [
        pd.DataFrame({"memo": ["w " * 150 + "one"] * 30, "x": x}),
        pd.DataFrame({"memo": ["w " * 150 + "two"] * 30, "x": x}),
    ]
    assert all("values" in d["columns"]["memo"] for d in _setup(sites))  # one value each
    with pytest.raises(IdentifierColumnError, match=r"'memo'.*a value over 200 characters"):
        merge_descriptions(_setup(sites), ["a", "b"])


def test_names_that_say_personal_data() -> None:
    personal = {
        "name": "name",
        "Patient Name": "patient name",
        "PatientName": "patient name",
        "first_name": "first name",
        "surname": "surname",
        "username": "username",
        "ssn": "ssn",
        "social_security_number": "social security",
        "national_id": "national id",
        "passport_no": "passport",
        "phone_number": "phone",
        "PhoneNumber": "phone",
        "home_phone": "phone",
        "cell": "cell",
        "fax": "fax",
        "e-mail": "e mail",
        "ip_address": "address",
        "street_address": "address",
        "address_line_1": "address line",
        "street_name": "street name",
        "telephone": "telephone",
    }
    for column, term in personal.items():
        assert personal_name(column) == term, column
    for column in (
        "address_type", "phone_type", "cell_line", "filename", "file_name",
        "product_name", "hostname", "company_name", "name_length", "ip_country",
        "hotel", "native-country", "occupation", "personal_status_sex", "patient_id",
    ):  # fmt: skip
        assert personal_name(column) is None, column


def test_a_personal_name_refuses_many_values_not_a_few_categories() -> None:
    rng = np.random.default_rng(1)
    people = [f"Client {i}" for i in range(30)]
    products = [f"Product {i}" for i in range(30)]

    def site(n: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "customer_name": rng.choice(people, n),  # repeated: no near-unique column
                "product_name": rng.choice(products, n),
                "address_type": rng.choice(["home", "work"], n),
                "telephone": rng.choice(["A191", "A192"], n),  # German Credit's
                "x": rng.normal(size=n),
            }
        )

    with pytest.raises(IdentifierColumnError) as caught:
        FITSSynthesizer(seed=0).fit([site(300), site(300)])
    assert caught.value.columns == ["customer_name"]
    assert "its name ('customer name') says personal data" in str(caught.value)
    # few names at each site, many together: the union's count (the sites sent them)
    small = [site(300).assign(customer_name=rng.choice(people[k::2], 300)) for k in range(2)]
    assert all(s["customer_name"].nunique() <= 20 for s in small)
    with pytest.raises(IdentifierColumnError, match=r"'customer_name'.*30 distinct values"):
        merge_descriptions(_setup(small), ["a", "b"])


@pytest.mark.parametrize(
    ("value", "shape"),
    [
        ("078-05-1120", "social security numbers"),
        ("+1 555 010 0031", "phone numbers"),
        ("(555) 010-0031", "phone numbers"),
        ("555.010.0031", "phone numbers"),
        ("030 1234567", "phone numbers"),
        ("0171/1234567", "phone numbers"),
        ("(030) 1234567", "phone numbers"),
        ("+4915112345678", "phone numbers"),
        ("123.456.789-09", "phone numbers"),
        ("12 345 678 901 234 56", "ID numbers"),
        ("4111 1111 1111 1111", "card numbers"),
        ("4111111111111111", "card numbers"),
        ("192.168.0.1", "IP addresses"),
        ("fe80::1", "IP addresses"),
        ("https://example.org/u/1", "URLs"),
        ("www.example.org", "URLs"),
        ("maria@example.org", "e-mail addresses"),
    ],
)
def test_value_shapes(value: str, shape: str) -> None:
    assert _value_shape(value) == shape


@pytest.mark.parametrize(
    "value",
    [
        "A11", "United-States", "Exec-managerial", "2021-03-04", "04.03.2021", "3/4/21",
        "50000-74999", "02139-4307", "02139", "2019/20", "15-1252", "555-1234",
        "1.234.567", "10.0.19041.1", "4.4.2", "4111111111111112", "01001020100",
        "12:30:45", "1,234,567", "N/A", "(1234.56)", "(1234567)",
    ],
)  # fmt: skip
def test_labels_ranges_dates_and_codes_have_no_shape(value: str) -> None:
    assert _value_shape(value) is None


def test_long_category_labels_of_few_words_are_kept() -> None:
    """Few values, long but not sentences: labels (a 40-character label of 5 words)."""
    labels = [
        "Some college or associate degree, no BA",
        "Bachelor degree or higher from a college",
        "High school graduate, GED or equivalent",
    ]
    frame = pd.DataFrame({"edu": labels * 20, "x": np.arange(60.0)})
    assert "values" in describe_table(frame)["columns"]["edu"]


@pytest.mark.skipif(not (SHARED_DATA / "adult.data").is_file(), reason="UCI files not found")
def test_no_column_of_the_real_data_sets_is_refused() -> None:
    """Adult ('native-country', 'occupation': hyphenated words), Bike, German Credit
    (codes 'A11'; a 'telephone' column of two codes) and the simulation, each split over
    three sites: no site flags a column, and the merge refuses none."""
    from fits import datasets

    frames = {
        d.name: d.frame
        for d in (
            datasets.load_adult(data_dir=SHARED_DATA),
            datasets.load_bike(data_dir=SHARED_DATA),
            datasets.load_german(data_dir=SHARED_DATA),
            datasets.simulate(n=3000),
        )
    }
    for name, frame in frames.items():
        sites = [frame.iloc[k::3].reset_index(drop=True) for k in range(3)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            descriptions = _setup(sites)
            schema = merge_descriptions(descriptions, ["a", "b", "c"])
        for description in descriptions:
            flagged = [c for c, i in description["columns"].items() if "identifier" in i]
            assert not flagged, (name, flagged)
        assert schema.names == list(frame.columns), name
