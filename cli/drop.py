"""``--drop``: leaving columns out of the sites' tables (:func:`drop_columns`, for ``fits
synthesize``, ``fits schema`` and ``fits report``), and the refusal of a column only
some sites have in ``fits federate local`` (:func:`partial_drop_message`).

``fits federate`` sends one ``drop`` to every site in the run config, and each site,
alone, refuses a name its table lacks (a site cannot tell a column another site has
from a misspelt name, and must not send a column's description the user meant to
leave out), so the run cannot drop a column at only some sites; the message says what
to do instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from fits.core.names import ColumnNameError, header_for, match_columns, show_columns

__all__ = ["drop_columns", "partial_drop_message"]


def drop_columns(
    tables: dict[str, pd.DataFrame], drop: list[str] | None
) -> dict[str, pd.DataFrame]:
    """Remove the ``--drop`` columns from every site's table that has them (names
    resolved as :func:`~fits.core.names.match_columns` resolves them, per site).

    A column only some sites have is left out where it is: that is what makes sites
    whose columns differ by it hold the same columns, which the merge of their
    descriptions demands (``columns differ ... rename, add or drop them``). A name no
    site has is refused (a misspelt name must not go unnoticed), and so is a ``--drop``
    that leaves a site's table without a column (:class:`ColumnNameError`, exit 2)."""
    if not drop:
        return tables
    headers = {site: [str(c) for c in frame.columns] for site, frame in tables.items()}
    found = {
        site: [header_for(name, columns, "--drop", f"{site}'s table") for name in drop]
        for site, columns in headers.items()
    }
    nowhere = [n for k, n in enumerate(drop) if all(f[k] is None for f in found.values())]
    if nowhere:
        first = next(iter(headers))
        match_columns(nowhere, headers[first], "--drop", f"{first}'s table")  # raises
    kept = {
        site: frame.drop(columns=list(dict.fromkeys(h for h in found[site] if h is not None)))
        for site, frame in tables.items()
    }
    for site, frame in kept.items():
        if tables[site].shape[1] and not frame.shape[1]:
            raise ColumnNameError(
                f"--drop leaves no column of {site}'s table (it names all "
                f"{tables[site].shape[1]}: {show_columns(headers[site])}); a table needs at "
                "least one column: drop fewer"
            )
    return kept


def partial_drop_message(
    drop: Sequence[str], site_headers: Mapping[str, Sequence[str]]
) -> str | None:
    """The refusal of ``--drop`` names that some sites' tables have and others lack
    (``site_headers``: each site's header), saying what to do; None when there is none
    (a name no site has is refused as a misspelt one)."""
    have: dict[str, list[str]] = {}
    lack: dict[str, list[str]] = {}
    for name in drop:
        for site, header in site_headers.items():
            try:
                hit = header_for(name, [str(c) for c in header], "--drop", f"{site}'s table")
            except ColumnNameError:  # two headers match: refused by match_columns
                hit = name
            (have if hit is not None else lack).setdefault(name, []).append(site)
    partial = [n for n in drop if n in have and n in lack]
    if not partial:
        return None
    name = partial[0]
    return (
        f"--drop: column {name!r} is in the table(s) of {show_columns(have[name])} but "
        f"not of {show_columns(lack[name])}. fits federate leaves a --drop column out at "
        "every site, and every site must have it; so leave it out of the file(s) of "
        f"{show_columns(have[name])} yourself (a copy without the column) and do not "
        f"name it in --drop, or run fits synthesize on the same files with --drop "
        f"{name!r}, which leaves a column out where a site has it. (On machines of their "
        f"own, those sites leave it out with fits federate site --drop {name!r}.)"
    )
