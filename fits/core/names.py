"""One rule for naming columns: the header itself, or the one header equal to it up to
surrounding whitespace.

Every place that takes column names from a user -- the ``fits`` command's options, the
synthesizer's ``kinds``, ``order``, ``column_designs``, ``column_models``, ``boosting``
and ``smoothing``, the kinds a site is told at setup -- resolves them here, so that a
header such as ``' age '`` (which option parsing may strip) can be named ``age`` the
same way on the command line, in Python and in a networked run whose coordinator
learns the headers only from the sites' setup replies.

- :func:`header_for`: one name's header, ``None`` when no header matches;
- :func:`resolve_columns`, :func:`resolve_keys`: names resolved where they match, the
  others kept as given (for callers with their own message for an unknown column);
- :func:`match_columns`, :func:`match_keys`: the same, and an unknown name is an error;
- :func:`format_column_list`, :func:`parse_column_list`: a list of names as one line of
  text (a Flower run or node config value, e.g. ``drop``) and back;
- :func:`column_items`: ``COLUMN=VALUE`` items (an option given once per column) split.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

__all__ = [
    "ColumnNameError",
    "column_items",
    "format_column_list",
    "header_for",
    "header_hint",
    "match_columns",
    "match_keys",
    "parse_column_list",
    "resolve_columns",
    "resolve_keys",
    "show_columns",
]

T = TypeVar("T")


class ColumnNameError(ValueError):
    """A name that matches no column of the table, or two (a usage error: exit 2)."""


def show_columns(columns: Iterable[str]) -> str:
    """Column names for a message: plain, or quoted when they have surrounding spaces,
    a comma (the separator of the list) or no characters at all."""
    return ", ".join(c if c == c.strip() and c and "," not in c else repr(c) for c in columns)


def header_for(
    name: str, columns: Sequence[str], option: str, where: str = "the site tables"
) -> str | None:
    """The header ``name`` (given with ``option``) stands for, or ``None``.

    A header equal to ``name`` wins; otherwise the one header equal to it up to
    surrounding whitespace.

    Raises
    ------
    ColumnNameError
        Two headers equal ``name`` up to surrounding whitespace (naming both).
    TypeError
        ``name`` is not a string (every column name is one).
    """
    if not isinstance(name, str):
        raise TypeError(
            f"{option}: column names are strings, got {name!r} ({type(name).__name__}); "
            f"name the column as its header is written, e.g. {str(name)!r}"
        )
    headers = [str(c) for c in columns]
    if name in headers:
        return name
    match = [h for h in headers if h.strip() == name.strip()]
    if len(match) > 1:
        raise ColumnNameError(
            f"{option}: {name!r} could be column {match[0]!r} or {match[1]!r} of "
            f"{where} (their names differ only in surrounding spaces); rename one of them"
        )
    return match[0] if match else None


def resolve_columns(
    names: Iterable[str], columns: Sequence[str], option: str, where: str = "the site tables"
) -> list[str]:
    """``names`` with each that matches a header (:func:`header_for`) replaced by it; a
    name no header matches is kept as given."""
    return [header_for(name, columns, option, where) or name for name in names]


def match_columns(
    names: Iterable[str], columns: Sequence[str], option: str, where: str = "the site tables"
) -> list[str]:
    """The header each of ``names`` (given with ``option``) stands for, in order.

    Raises
    ------
    ColumnNameError
        A name that two headers equal up to surrounding whitespace (naming both), or
        names no header matches (listing them and ``where``'s columns, and the header
        each most resembles, if any).
    """
    names = list(names)
    out = resolve_columns(names, columns, option, where)
    headers = {str(c) for c in columns}
    unknown = sorted(
        {name for name, header in zip(names, out, strict=True) if header not in headers}
    )
    if unknown:
        raise ColumnNameError(
            f"{option}: no column {unknown} in {where} (columns: {show_columns(map(str, columns))})"
            + _closest_hint(unknown, [str(c) for c in columns])
        )
    return out


def _closest_hint(unknown: Sequence[str], headers: Sequence[str]) -> str:
    """``'; did you mean 'age'?'`` for each of ``unknown`` that a header resembles
    (:func:`difflib.get_close_matches`, case-blind), else ``''``."""
    lowered = {h.casefold(): h for h in headers}
    pairs = []
    for name in unknown:
        close = difflib.get_close_matches(name.casefold(), list(lowered), n=1, cutoff=0.6)
        if close:
            pairs.append(
                f"{lowered[close[0]]!r} for {name!r}"
                if len(unknown) > 1
                else repr(lowered[close[0]])
            )
    return f"; did you mean {', '.join(pairs)}?" if pairs else ""


def header_hint(missing: Sequence[str], headers: Sequence[str]) -> str:
    """Where a table lacks columns ``missing`` that it may hold under another header: a
    header equal to one up to surrounding whitespace (``" (the header has ' income ',
    with spaces)"``), else the one it most resembles (``" (did you mean 'Income'?)"``,
    as :func:`match_columns` says); ``""`` when none.

    Parameters
    ----------
    missing : sequence of str
        The names the table lacks.
    headers : sequence of str
        The table's headers.

    Returns
    -------
    str
        The hint, with a leading space and in parentheses, or ``""``.
    """
    headers = [str(h) for h in headers]
    spaced: list[str] = []
    rest: list[str] = []
    for name in missing:
        same = [h for h in headers if h != name and h.strip() == str(name).strip()]
        if same:
            how = "with spaces" if same[0] != same[0].strip() else "without the spaces"
            lead = f"for {name!r} " if len(missing) > 1 else ""
            spaced.append(f"{lead}the header has {same[0]!r}, {how}")
        else:
            rest.append(str(name))
    close = _closest_hint(rest, headers).removeprefix("; ") if rest else ""
    parts = [*spaced, *([close] if close else [])]
    return f" ({'; '.join(parts)})" if parts else ""


def resolve_keys(
    named: Mapping[str, T],
    columns: Sequence[str],
    option: str,
    where: str = "the site tables",
    *,
    is_column: Callable[[str, T], bool] = lambda key, value: True,
    strict: bool = False,
) -> dict[str, T]:
    """``named`` (column -> value, from ``option``) with each key for which ``is_column``
    holds resolved to its header (:func:`header_for`); the other keys (``'*'``, a
    setting) are kept, and so, unless ``strict``, is a key no header matches.

    Raises
    ------
    ColumnNameError
        A key two headers match, two keys that stand for one header, or (``strict``)
        keys no header matches.
    """
    keys = [key for key, value in named.items() if is_column(key, value)]
    matcher = match_columns if strict else resolve_columns
    resolved = dict(zip(keys, matcher(keys, columns, option, where), strict=True))
    out: dict[str, T] = {}
    by: dict[str, str] = {}
    for key, value in named.items():
        header = resolved.get(key, key)
        if header in by:
            raise ColumnNameError(
                f"{option} names column {header!r} twice (as {by[header]!r} and {key!r})"
            )
        by[header] = key
        out[header] = value
    return out


def match_keys(
    named: Mapping[str, T],
    columns: Sequence[str],
    option: str,
    where: str = "the site tables",
    *,
    is_column: Callable[[str, T], bool] = lambda key, value: True,
) -> dict[str, T]:
    """:func:`resolve_keys` with every column key required to match a header.

    Raises
    ------
    ColumnNameError
        As :func:`match_columns`, or two keys that stand for one header.
    """
    return resolve_keys(named, columns, option, where, is_column=is_column, strict=True)


def format_column_list(names: Iterable[str]) -> str:
    """Column names as one line of text: ``"a,b"``, or a JSON array where a name has
    surrounding spaces, a comma, no characters, or starts the text with ``[`` (which
    ``"a,b"`` cannot carry).  The JSON escapes every quote ``'`` (``\\u0027``) and every
    character outside ASCII, so the text holds no ``'``: it travels in a Flower node
    config (``key='...'``) whatever the names.  :func:`parse_column_list` reads it."""
    names = [str(n) for n in names]
    if all(n and n == n.strip() and "," not in n for n in names) and not (
        names and names[0].startswith("[")
    ):
        return ",".join(names)
    return json.dumps(names).replace("'", "\\u0027")


def parse_column_list(text: str, key: str, columns: Sequence[str] | None = None) -> list[str]:
    """The names of :func:`format_column_list`'s text (``""``: none); a JSON array
    when it starts with ``[``, else names separated by commas.

    A text that starts with ``[`` but is no JSON array is read as names separated by
    commas when ``columns`` is given and each of them is one (``[br],y`` for a column
    named ``[br]``; :func:`resolve_columns`' matching: spaces around a name ignored).

    Raises
    ------
    ValueError
        A text that starts with ``[`` but is no JSON array of strings (naming ``key``,
        and the JSON array of its comma-separated names, which names a column whose name
        starts with ``[``).
    """
    text = str(text)
    split = [n for n in text.split(",") if n.strip()]
    if not text.strip().startswith("["):
        return split
    try:
        names = json.loads(text)
    except json.JSONDecodeError:
        names = None
        if columns is not None and split:
            headers = [str(c) for c in columns]
            stripped = {h.strip() for h in headers}
            if all(n in headers or n.strip() in stripped for n in split):
                return split
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        example = json.dumps([n.strip() for n in split]) if names is None and split else ""
        raise ValueError(
            f"{key}={text!r}: write column names separated by commas, or a JSON array "
            'of them, e.g. ["uid", " notes "]'
            + (f"; a name that starts with '[' needs the JSON form: {example}" if example else "")
        )
    return names


def column_items(
    items: Iterable[str] | None, option: str, example: str
) -> list[tuple[str, str, str]]:
    """``(item, column, value)`` of ``COLUMN=VALUE`` items (split at the last ``=``, so a
    column name may hold one; column and value stripped).

    Raises
    ------
    ValueError
        An item without ``=`` or a column (``"{option} 'item': write {example}"``), or a
        column named twice.
    """
    out: list[tuple[str, str, str]] = []
    for item in items or []:
        column, sep, value = item.rpartition("=")
        column = column.strip()
        if not sep or not column:
            raise ValueError(f"{option} {item!r}: write {example}")
        if column in {c for _, c, _ in out}:
            raise ValueError(f"{option} names {column!r} twice")
        out.append((item, column, value.strip()))
    return out
