"""``--drop`` of a column only some sites have, for ``fits federate local`` (``fits
synthesize`` leaves such a column out where it is: :func:`fits.cli.main._drop_columns`).

``fits federate`` sends one ``drop`` to every site in the run config, and each site,
alone, refuses a name its table lacks (a site cannot tell a column another site has
from a misspelt name, and must not send a column's description the user meant to
leave out), so the run cannot drop a column at only some sites; the message says what
to do instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fits.core.names import ColumnNameError, header_for, show_columns

__all__ = ["partial_drop_message"]


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
