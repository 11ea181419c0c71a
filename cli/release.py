"""The release check the commands print after writing a synthetic table.

``fits synthesize`` and ``fits federate local`` (whose site tables are on this machine)
print the exact-copy rate and the distance-to-closest-record check of
:class:`fits.evaluation.copies.ReleaseCheck` after the table is written, with a
``warning:`` line on stderr per threshold exceeded. The check never costs the user the
output: a check that cannot run or fails says so in a warning, and the command goes on.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import typer

__all__ = [
    "CHECK_CHUNK_ROWS",
    "RELEASE_CHECK_ROWS",
    "check_local_run",
    "check_written_table",
    "release_kinds",
    "report_release_check",
    "start_release_check",
]

#: Synthetic rows (the first ones) and real baseline rows whose DCR the check computes.
RELEASE_CHECK_ROWS = 2_000
#: Rows of a written table the check takes at a time (:func:`check_written_table`).
CHECK_CHUNK_ROWS = 100_000


def release_kinds(schema: Any) -> dict[str, str]:
    """Column -> kind of a :class:`~fits.core.schema.Schema`, identifiers left out: their
    fresh surrogates (kind ``"id"``) never equal a real value, so the rest is compared."""
    return {c: schema[c].kind for c in schema.names if schema[c].kind != "id"}


def start_release_check(
    tables: Mapping[str, pd.DataFrame], kinds: Mapping[str, str], seed: int
) -> Any:
    """The :class:`~fits.evaluation.copies.ReleaseCheck` of the site ``tables`` for the
    columns of ``kinds``, or None: with no column to compare, or (after a warning on
    stderr) when it cannot be set up on these tables.  Text the sites read as numbers or
    dates (``"$1,234.56"``, ``"12.5"`` with markers, ``"03/15/2021"``) is read so here
    too (:func:`~fits.core.schema.parse_text_columns`, nominal columns left as text),
    as the synthetic table writes it: a synthetic 1234.56 is a copy of a real
    ``"$1,234.56"``."""
    from fits.core.schema import na_labels_across, parse_text_columns
    from fits.evaluation.copies import ReleaseCheck

    try:
        if not kinds:
            return None
        declared = {c: {"kind": k} for c, k in kinds.items()}
        # a site's column of 'NA' alone is the label where another site holds it, as
        # the setup read it (fits.core.schema.labels_of_na_only): a synthetic row is
        # then a copy of such a site's row when it is one
        labelled = dict(zip(tables, na_labels_across(list(tables.values())), strict=True))
        parsed = {
            name: parse_text_columns(t, declared, text_only=True)[0] for name, t in labelled.items()
        }
        return ReleaseCheck(parsed, kinds, max_rows=RELEASE_CHECK_ROWS, seed=seed)
    except Exception as exc:  # noqa: BLE001 - the check must never cost the user the output
        typer.echo(f"warning: the exact-copy check cannot run on this table ({exc})", err=True)
        return None


def report_release_check(check: Any) -> None:
    """Print the result of ``check`` (a fed :class:`~fits.evaluation.copies.ReleaseCheck`,
    or None: nothing): its summary on stdout, a ``warning:`` line on stderr per
    threshold exceeded, or a warning saying why it failed."""
    if check is None:
        return
    try:
        result = check.result()
    except Exception as exc:  # noqa: BLE001 - the table is written; say why the check failed
        typer.echo(f"warning: the exact-copy check failed ({exc})", err=True)
        return
    typer.echo(result.summary())
    for line in result.warnings:
        typer.echo(f"warning: {line}", err=True)


def check_written_table(
    tables: Mapping[str, pd.DataFrame], kinds: Mapping[str, str], path: Path, seed: int
) -> None:
    """Run the release check on the synthetic table written at ``path`` against the site
    ``tables`` and print it as ``fits synthesize`` does (:func:`report_release_check`).

    The table is read back in chunks of :data:`CHECK_CHUNK_ROWS` rows
    (:func:`fits.io.iter_table`, which parses them as :func:`fits.io.read_table` parses
    the whole file, as the sites' tables are read), each fed to the check and let go:
    memory holds one chunk, however many rows were asked for. A table of no rows is
    not checked. Whatever goes wrong is a warning: the table stays written.
    """
    from fits.io import iter_table

    check = start_release_check(tables, kinds, seed)
    if check is None:
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # notes on reading it: said when the sites read theirs
            fed = False
            for chunk in iter_table(path, CHECK_CHUNK_ROWS, empty_ok=True):
                if len(chunk):
                    check.update(chunk)
                    fed = True
                del chunk  # let it go before the next one is read
        if not fed:
            return
    except Exception as exc:  # noqa: BLE001 - never lose the output to it
        typer.echo(f"warning: the exact-copy check failed ({exc})", err=True)
        return
    report_release_check(check)


def check_local_run(sites: Mapping[str, Path], config: Mapping[str, Any]) -> None:
    """``fits federate local``: the release check of the table its run wrote (the run
    config's ``output``) against the site tables, which are on this machine, printed as
    ``fits synthesize`` prints it (:func:`check_written_table`).

    Each site's table is read as the site read it, less the run's ``drop`` columns
    (:func:`fits.deploy.flower.site_drop`); the columns' kinds are the run's schema file's,
    else those :meth:`~fits.core.schema.Schema.detect` infers with the run's ``kinds``,
    as the run's setup round does. The seed is the run's.
    """
    try:
        from fits.core.schema import Schema
        from fits.deploy.flower import read_run_config, site_drop, site_na_values
        from fits.io import read_table

        cfg = read_run_config(config)
        tables = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # notes on the tables: the sites said them
            for name, path in sites.items():
                frame = read_table(path, na_values=site_na_values({}, config))
                gone = site_drop([str(c) for c in frame.columns], name, {}, config)
                tables[name] = frame.drop(columns=gone) if gone else frame
            if cfg["schema"]:
                text = Path(cfg["schema"]).read_text(encoding="utf-8-sig")
                schema = Schema.from_json(text)
            else:
                schema = Schema.detect(tables, kinds=cfg["kinds"], rules=False)
        kinds = release_kinds(schema)
    except Exception as exc:  # noqa: BLE001 - the check must never cost the user the output
        typer.echo(f"warning: the exact-copy check cannot run on this table ({exc})", err=True)
        return
    check_written_table(tables, kinds, Path(cfg["output"]), int(cfg["seed"]))
