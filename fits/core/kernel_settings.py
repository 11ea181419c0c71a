"""A kernel's category penalties and relevance weights as text.

The ``fits`` command takes them as items, one per column or pair
(``--column-penalty COLUMN=VALUE``, ``--relevance RESPONSE:COVARIATE=WEIGHT``); a
Flower site takes them in its node config, one line of text per key
(:data:`NODE_KEYS`).  Both are read here, so that a site refuses what ``fits
synthesize`` refuses, with the same messages (naming the option or the key):

- :func:`parse_column_penalties`, :func:`parse_relevance`: the command's items;
- :func:`format_column_penalties`, :func:`format_relevance`: a mapping as one line of
  node config text (``"hr=3.0,season=0.5"``, ``"cnt:hr=4.0,cnt:season=0.0"``, or a
  JSON object where a name needs it), and :func:`read_column_penalties`,
  :func:`read_relevance` back;
- :func:`read_penalty`: the global penalties (``ordinal-penalty``, ``nominal-penalty``).

The values are the :class:`~fits.core.kernels.Kernel`'s fields ``ordinal_penalty``,
``nominal_penalty``, ``column_penalties`` and ``relevance``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fits.core.names import column_items

__all__ = [
    "NODE_KEYS",
    "format_column_penalties",
    "format_relevance",
    "nonnegative",
    "parse_column_penalties",
    "parse_relevance",
    "read_column_penalties",
    "read_penalty",
    "read_relevance",
]

#: A Flower site's node config keys of its kernel's penalties and relevance weights,
#: with the :class:`~fits.core.kernels.Kernel` field each sets.
NODE_KEYS: dict[str, str] = {
    "ordinal-penalty": "ordinal_penalty",
    "nominal-penalty": "nominal_penalty",
    "column-penalties": "column_penalties",
    "relevance": "relevance",
}

_PENALTY_EXAMPLE = "COLUMN=VALUE, e.g. hr=3"
_RELEVANCE_EXAMPLE = "RESPONSE:COVARIATE=WEIGHT, e.g. cnt:hr=4"


def nonnegative(text: str, what: str) -> float:
    """``text`` as a finite number >= 0.

    Raises
    ------
    ValueError
        ``"{what} must be a number >= 0"``.
    """
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise ValueError(f"{what} must be a number >= 0")
    return value


def parse_column_penalties(
    items: Iterable[str] | None, option: str = "--column-penalty"
) -> dict[str, float]:
    """``COLUMN=VALUE`` items (``--column-penalty``) as a mapping column -> penalty.

    Raises
    ------
    ValueError
        An item without ``=``, with an empty column, a value that is not a number >= 0,
        or a column named twice (the message names ``option`` and the item).
    """
    penalties: dict[str, float] = {}
    for item, column, text in column_items(items, option, _PENALTY_EXAMPLE):
        penalties[column] = nonnegative(text, f"{option} {item!r}: the value")
    return penalties


def parse_relevance(
    items: Iterable[str] | None, columns: Sequence[str] = (), option: str = "--relevance"
) -> dict[str, dict[str, float]]:
    """``RESPONSE:COVARIATE=WEIGHT`` items (``--relevance``) as a mapping response ->
    covariate -> weight (the response ends at the first ``:``, or, given the tables'
    ``columns``, at the first ``:`` before which stands a header: ``'a: b:x=2'`` for the
    header ``'a: b'``).

    Raises
    ------
    ValueError
        An item without ``:`` or ``=``, an empty name, a weight that is not a number
        >= 0, or a (response, covariate) pair named twice (the message names ``option``
        and the item).
    """
    out: dict[str, dict[str, float]] = {}
    headers = {c.strip() for c in columns}
    for item in items or []:
        key, sep, text = item.rpartition("=")
        response, colon, covariate = key.partition(":")
        for at in (i for i, ch in enumerate(key) if ch == ":"):  # a header with a ':'
            if key[:at].strip() in headers:
                response, colon, covariate = key[:at], ":", key[at + 1 :]
                break
        response, covariate = response.strip(), covariate.strip()
        if not sep or not colon or not response or not covariate:
            raise ValueError(f"{option} {item!r}: write {_RELEVANCE_EXAMPLE}")
        value = nonnegative(text, f"{option} {item!r}: the weight")
        weights = out.setdefault(response, {})
        if covariate in weights:
            raise ValueError(f"{option} names {response}:{covariate} twice")
        weights[covariate] = value
    return out


def _plain(name: str) -> bool:
    """Whether a name can stand in the compact text: no separator, quote or
    surrounding space, printable, not starting a JSON object."""
    return (
        bool(name)
        and name == name.strip()
        and name.isprintable()
        and not any(ch in name for ch in ",\"'")
        and not name.startswith("{")
    )


def _json(value: Any) -> str:
    """JSON without a ``'`` (escaped ``\\u0027``), so that it travels in a Flower node
    config as ``key='...'`` (:func:`fits.core.names.format_column_list` does the same)."""
    return json.dumps(value).replace("'", "\\u0027")


def format_column_penalties(penalties: Mapping[str, float]) -> str:
    """Column penalties as node config text: ``"hr=3.0,season=0.5"``, or a JSON object
    (``'{" hr ": 3.0}'``) where a name has a comma, a quote or surrounding spaces.
    :func:`read_column_penalties` reads it back, the values bit for bit."""
    items = {str(c): float(v) for c, v in penalties.items()}
    if all(_plain(c) for c in items):
        return ",".join(f"{c}={v!r}" for c, v in items.items())
    return _json(items)


def format_relevance(relevance: Mapping[str, Mapping[str, float]]) -> str:
    """Relevance weights as node config text: ``"cnt:hr=4.0,cnt:season=0.0"``, or a
    JSON object (``'{"cnt": {"hr": 4.0}}'``) where a name has a comma, a quote or
    surrounding spaces, or a response a ``:``.  :func:`read_relevance` reads it back,
    the values bit for bit."""
    weights = {
        str(r): {str(c): float(v) for c, v in given.items()} for r, given in relevance.items()
    }
    plain = all(
        _plain(r) and ":" not in r and all(_plain(c) for c in given) for r, given in weights.items()
    )
    if plain:
        return ",".join(f"{r}:{c}={v!r}" for r, given in weights.items() for c, v in given.items())
    return _json(weights)


def _number(value: Any) -> float | None:
    """A JSON value as a finite number >= 0, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value < math.inf else None


def _json_object(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def read_column_penalties(text: Any, key: str = "column-penalties") -> dict[str, float]:
    """Node config ``column-penalties`` (:func:`format_column_penalties`'s text; ``""``:
    none) as a mapping column -> penalty.

    Raises
    ------
    ValueError
        An item :func:`parse_column_penalties` refuses, or a text that starts with ``{``
        but is no JSON object of numbers >= 0 (the message names ``node config {key}``
        and what to write).
    """
    text = str(text).strip()
    option = f"node config {key}"
    if not text.startswith("{"):
        return parse_column_penalties([t for t in text.split(",") if t.strip()], option)
    parsed = _json_object(text)
    if isinstance(parsed, dict):
        values = {str(c): _number(v) for c, v in parsed.items()}
        if all(v is not None for v in values.values()):
            return {c: float(v) for c, v in values.items() if v is not None}
    raise ValueError(
        f"{option}={text!r}: write COLUMN=VALUE items separated by commas (e.g. "
        "'hr=3,season=0.5'), or a JSON object column -> number >= 0 (e.g. "
        "'{\" hr \": 3}')"
    )


def read_relevance(
    text: Any, key: str = "relevance", columns: Sequence[str] = ()
) -> dict[str, dict[str, float]]:
    """Node config ``relevance`` (:func:`format_relevance`'s text; ``""``: none) as a
    mapping response -> covariate -> weight; ``columns`` as :func:`parse_relevance`'s.

    Raises
    ------
    ValueError
        An item :func:`parse_relevance` refuses, or a text that starts with ``{`` but is
        no JSON object of objects of numbers >= 0 (the message names ``node config
        {key}`` and what to write).
    """
    text = str(text).strip()
    option = f"node config {key}"
    if not text.startswith("{"):
        return parse_relevance([t for t in text.split(",") if t.strip()], columns, option)
    parsed = _json_object(text)
    if isinstance(parsed, dict) and all(isinstance(w, dict) for w in parsed.values()):
        out = {str(r): {str(c): _number(v) for c, v in w.items()} for r, w in parsed.items()}
        if all(v is not None for w in out.values() for v in w.values()):
            return {r: {c: float(v) for c, v in w.items() if v is not None} for r, w in out.items()}
    raise ValueError(
        f"{option}={text!r}: write RESPONSE:COVARIATE=WEIGHT items separated by commas "
        "(e.g. 'cnt:hr=4,cnt:season=0'), or a JSON object response -> {covariate: "
        'number >= 0} (e.g. \'{"cnt": {"hr": 4}}\')'
    )


def read_penalty(value: Any, key: str) -> float | None:
    """Node config ``ordinal-penalty`` (lambda_q, a number >= 0) or ``nominal-penalty``
    (gamma_q, in (0, 1]); None where it is absent or ``""`` (the kernel's default).

    Raises
    ------
    ValueError
        Not a number, or out of its range (the message names ``node config {key}``).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if key == "nominal-penalty":
        if not 0 < number <= 1:
            raise ValueError(
                f"node config {key}={value!r}: write a number in (0, 1], gamma_q of eq. 26 "
                "(the factor of a nominal category mismatch; default 0.1)"
            )
    elif not number >= 0:
        raise ValueError(
            f"node config {key}={value!r}: write a number >= 0, lambda_q of eq. 26 (default 1)"
        )
    return number
