"""The one rule for column names (:mod:`fits.core.names`) in the library: the
synthesizer's ``kinds``, ``order``, ``column_designs``, ``column_models``, ``boosting``
and ``smoothing``, a site's declared kinds and ``Schema.detect`` find a header with
surrounding spaces (``' y '``) by its name without them, whether the coordinator holds
the tables or learns the headers only from the sites' setup replies (a Transport, as in
``fits federate run``).  Resolved names give the table the exact names give, bit for
bit."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.names import (
    ColumnNameError,
    header_for,
    match_columns,
    match_keys,
    resolve_columns,
    resolve_keys,
)
from fits.core.schema import Schema, SchemaError
from fits.core.tuning import Smoothing
from fits.deploy.inprocess import build_federation
from fits.federation.protocol import Message

#: stripped name -> the header it stands for
HEADERS = {"x": " x ", "g": "g ", "y": " y", "pid": " pid "}


def _sites() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(3)
    out = {}
    for k, name in enumerate(("a", "b", "c")):
        g = rng.choice(["u", "v", "w"], 60)
        x = rng.normal(size=60) + (g == "u")
        y = (x + rng.normal(size=60) > 0.5).astype(int)
        pid = np.arange(60) + 1000 * k
        out[name] = pd.DataFrame({" x ": x.round(4), "g ": g, " y": y, " pid ": pid})
    return out


def _options(names: dict[str, str]) -> dict:
    """Every naming option of the synthesizer, naming the columns through ``names``."""
    x, g, y, pid = (names[c] for c in ("x", "g", "y", "pid"))
    return {
        "kinds": {g: "nominal", y: "nominal", pid: "id"},
        "order": [x, g, y, pid],
        "column_designs": {g: "constant"},
        "column_models": {y: "boosting"},
        "boosting": {"n_trees": 3, y: {"depth": 2}},
        "smoothing": {g: (2.0, 1.0)},
    }


def test_header_for_exact_wins_then_stripped_then_refuses() -> None:
    headers = [" a", "b", "b ", "c "]
    assert header_for("b", headers, "opt") == "b"  # exact wins over 'b '
    assert header_for("c", headers, "opt") == "c "
    assert header_for(" c  ", headers, "opt") == "c "
    assert header_for("d", headers, "opt") is None
    with pytest.raises(ColumnNameError, match=r"opt: 'b  ' could be column 'b' or 'b '"):
        header_for("b  ", headers, "opt")
    assert resolve_columns(["a", "d"], headers, "opt") == [" a", "d"]  # unknown kept
    with pytest.raises(ColumnNameError, match=r"opt: no column \['d'\] in t \(columns: ' a'"):
        match_columns(["a", "d"], headers, "opt", "t")
    assert resolve_keys({"a": 1, "d": 2}, headers, "opt") == {" a": 1, "d": 2}
    with pytest.raises(ColumnNameError, match=r"no column \['d'\]"):
        match_keys({"a": 1, "d": 2}, headers, "opt")
    with pytest.raises(ColumnNameError, match=r"opt names column 'c ' twice"):
        resolve_keys({"c": 1, "c ": 2}, headers, "opt")
    # keys that are not columns are kept as they are
    got = resolve_keys({"*": 1, "a": 2}, headers, "opt", is_column=lambda k, _: k != "*")
    assert got == {"*": 1, " a": 2}


@pytest.mark.parametrize("through", ["tables", "transport"])
def test_stripped_names_give_the_exact_names_table(through) -> None:
    """Named without their spaces, the columns give the table of their exact headers,
    bit for bit: in process, and through a Transport (the coordinator sees the headers
    only in the sites' setup replies, as in ``fits federate run``)."""
    sites = _sites()
    exact = FITSSynthesizer(seed=7, **_options(HEADERS)).fit(sites)
    expected = exact.sample(80)

    def fit(names: dict[str, str]) -> FITSSynthesizer:
        synth = FITSSynthesizer(seed=7, **_options(names))
        if through == "tables":
            return synth.fit(sites)
        _, transport = build_federation(sites, "knn")
        return synth.fit(transport)

    stripped = fit({c: c for c in HEADERS})
    got = stripped.sample(80)
    if through == "transport":  # ids are fresh surrogates either way; the rest is equal
        pd.testing.assert_frame_equal(got, expected[got.columns], check_exact=True)
    else:
        pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert stripped.schema_.order == [" x ", "g ", " y", " pid "]
    assert stripped.schema_[" pid "].kind == "id"  # the site was told the kind
    assert stripped.schema_["g "].kind == "nominal"
    assert stripped.coordinator.column_designs == {"g ": "constant"}
    assert stripped.coordinator.column_models == {" y": "boosting"}
    assert set(stripped.coordinator.column_boosting) == {" y"}
    assert stripped.smoothing_["g "] == Smoothing(2.0, 1.0)
    assert stripped.get_params()["order"] == ["x", "g", "y", "pid"]  # parameters kept as given


def test_a_site_resolves_the_declared_kinds_itself() -> None:
    """A column declared an identifier by its name without spaces is described as one
    at the site: no minimum or maximum leaves it (before, the site did not match the
    name and described the column's values)."""
    clients, transport = build_federation(_sites(), "knn")
    declared = json.dumps({"pid": {"kind": "id"}})
    reply = clients[0].handle(Message("setup", {}, {"declared": declared}))
    described = json.loads(str(reply.config["description"]))["columns"][" pid "]
    assert described.get("id") is True and "min" not in described and "max" not in described
    synth = FITSSynthesizer(seed=1, kinds={"pid": "id"}).fit(transport)
    assert synth.schema_[" pid "].kind == "id"


def test_schema_detect_resolves_kinds_and_order() -> None:
    sites = _sites()
    schema = Schema.detect(sites, kinds={"pid": "id", "y": "nominal"}, order=["y", "x", "g", "pid"])
    assert schema.order[:3] == [" y", " x ", "g "]
    assert schema[" pid "].kind == "id" and schema[" y"].kind == "nominal"


def test_ambiguous_and_unknown_names_are_clear_errors() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({" a": rng.normal(size=40), "a ": rng.normal(size=40)})
    sites = {"s1": frame, "s2": frame.copy()}
    with pytest.raises(ColumnNameError, match=r"'a' could be column ' a' or 'a '"):
        FITSSynthesizer(seed=0, order=["a", " a"]).fit(sites)
    with pytest.raises(ColumnNameError, match=r"'a' could be column ' a' or 'a '"):
        FITSSynthesizer(seed=0, column_designs={"a": "constant"}).fit(sites)
    with pytest.raises(SchemaError, match=r"kinds given for unknown column\(s\) \['zz'\]"):
        FITSSynthesizer(seed=0, kinds={"zz": "nominal"}).fit(_sites())
    with pytest.raises(ValueError, match=r"column_designs names \['zz'\]"):
        FITSSynthesizer(seed=0, kinds={"pid": "id"}, column_designs={"zz": "constant"}).fit(
            _sites()
        )


@pytest.mark.parametrize(
    "option",
    [
        {"kinds": {1: "nominal"}},
        {"order": [1, 2]},
        {"column_designs": {1: "constant"}},
        {"column_models": {1: "boosting"}},
    ],
)
def test_a_name_that_is_not_a_string_is_a_type_error_naming_the_option(option) -> None:
    """Column names are strings (the sites refuse other headers): an int key is a
    TypeError that names the option, not "'int' object has no attribute 'strip'"."""
    (name,) = option
    with pytest.raises(TypeError, match=rf"{name}: column names are strings, got 1 \(int\)"):
        FITSSynthesizer(seed=0, **option).fit(
            {k: t.drop(columns=" pid ") for k, t in _sites().items()}
        )


def test_a_column_named_like_an_indicator_says_whose_and_what_to_do() -> None:
    """A column 'x (missing)' next to a column x with missing values: the refusal says
    which column's indicator holds the name and to rename it."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=300)
    x[::7] = np.nan
    frame = pd.DataFrame({"a": rng.normal(size=300), "x": x, "x (missing)": rng.normal(size=300)})
    with pytest.raises(
        SchemaError, match=r"indicator fits adds for the missing values of 'x': rename"
    ):
        FITSSynthesizer(seed=0).fit([frame.iloc[:150], frame.iloc[150:]])


def test_an_unknown_column_name_suggests_the_header_it_resembles():
    """A misspelt or wrongly cased name is named with the header it most resembles; a
    name like no header gets no guess."""
    headers = ["age", "income", "sex"]
    with pytest.raises(ColumnNameError, match=r"; did you mean 'age'\?$"):
        match_columns(["Age"], headers, "--order")
    with pytest.raises(ColumnNameError, match=r"'age' for 'agee', 'income' for 'incme'\?$"):
        match_columns(["agee", "incme"], headers, "--order")
    with pytest.raises(ColumnNameError) as info:
        match_columns(["zzz"], headers, "--order")
    assert "did you mean" not in str(info.value)
