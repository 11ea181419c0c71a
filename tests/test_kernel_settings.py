"""fits.core.kernel_settings: a kernel's penalties and relevance weights as the
command's items and as a Flower site's node config text."""

from __future__ import annotations

import pytest

from fits.core.kernel_settings import (
    format_column_penalties,
    format_relevance,
    parse_column_penalties,
    parse_relevance,
    read_column_penalties,
    read_penalty,
    read_relevance,
)


def test_items_as_fits_synthesize_reads_them():
    assert parse_column_penalties(["hr=3", " season = 0.5 "]) == {"hr": 3.0, "season": 0.5}
    assert parse_relevance(["cnt:hr=4", "cnt:season=0"]) == {"cnt": {"hr": 4.0, "season": 0.0}}
    # a response whose header holds a ':' ends where that header does
    assert parse_relevance(["a: b:x=2"], ["a: b", "x"]) == {"a: b": {"x": 2.0}}
    with pytest.raises(ValueError, match=r"--column-penalty 'hr': write COLUMN=VALUE"):
        parse_column_penalties(["hr"])
    with pytest.raises(ValueError, match=r"--relevance 'cnt:hr=inf': the weight must be"):
        parse_relevance(["cnt:hr=inf"])


@pytest.mark.parametrize(
    "penalties",
    [{"hr": 3.0, "season": 0.1 + 0.2}, {" hr ": 1.0}, {"a,b": 2.0}, {"it's": 0.5}, {"{x": 1.0}],
)
def test_column_penalties_round_trip(penalties):
    text = format_column_penalties(penalties)
    assert "'" not in text or "," not in text  # compact, or JSON without a quote
    assert read_column_penalties(text) == penalties


@pytest.mark.parametrize(
    "relevance",
    [
        {"cnt": {"hr": 4.0, "season": 1 / 3}},
        {"a:b": {"x": 2.0}},
        {"y": {" x ": 0.0, "p,q": 5.0}},
        {"y": {'say "hi"': 1.5}},
    ],
)
def test_relevance_round_trip(relevance):
    assert read_relevance(format_relevance(relevance)) == relevance


def test_compact_text():
    assert format_column_penalties({"hr": 3, "season": 0.5}) == "hr=3.0,season=0.5"
    assert format_relevance({"cnt": {"hr": 4}}) == "cnt:hr=4.0"
    assert read_column_penalties("") == {} and read_relevance(" ") == {}


@pytest.mark.parametrize(
    ("value", "key", "expected"),
    [(None, "ordinal-penalty", None), ("", "nominal-penalty", None), (2, "ordinal-penalty", 2.0),
     ("0.5", "nominal-penalty", 0.5), (1, "nominal-penalty", 1.0)],
)  # fmt: skip
def test_read_penalty(value, key, expected):
    assert read_penalty(value, key) == expected


@pytest.mark.parametrize(
    ("value", "key"),
    [("x", "ordinal-penalty"), (-1, "ordinal-penalty"), (True, "ordinal-penalty"),
     (0, "nominal-penalty"), (1.5, "nominal-penalty"), ("nan", "nominal-penalty")],
)  # fmt: skip
def test_read_penalty_refuses(value, key):
    with pytest.raises(ValueError, match=f"node config {key}="):
        read_penalty(value, key)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"hr": -1}', "or a JSON object column -> number >= 0"),
        ("[1, 2]", "node config column-penalties 'hr': write COLUMN=VALUE"),
        ("{oops", "node config column-penalties='{oops'"),
    ],
)
def test_read_column_penalties_refuses(text, message):
    with pytest.raises(ValueError) as caught:
        read_column_penalties(text if text != "[1, 2]" else "hr")
    assert message in str(caught.value)
