"""The Flower ServerApp of fits: ``fits.flower_app:server_app``.

Install with ``pip install "fits[flower]"``.  The Flower machinery -- the transport, the
ClientApp each site runs, the run config -- is :mod:`fits.deploy.flower`; this module,
at the level of the pandas facade, adds what runs on it, chosen by the run config's
``task``:

* ``synthesize`` (the default): :func:`synthesize` fits a
  :class:`~fits.synthesizer.FITSSynthesizer` (setup, configure, sample) and writes the
  table atomically;
* ``analyze``: :func:`analyze` fits a model directly across the sites
  (:func:`fits.analysis.glm.fit_glm` or :func:`fits.analysis.lsa.fedlsa`, with the
  options in the run config's ``analysis``) and writes the result as JSON.

:func:`fits.deploy.flower.write_app` names this ServerApp in the Flower app it writes.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fits.core.schema import DataNote, Schema
from fits.deploy.flower import SITE_MEMORY_BUDGET, FlowerTransport, run_coordinator
from fits.federation.protocol import Message
from fits.io import OutputForms
from fits.synthesizer import FITSSynthesizer

__all__ = ["server_app", "synthesize", "analyze", "read_schema", "run_synthesis", "run_task"]


def read_schema(path: str | Path) -> Schema:
    """A schema file as ``fits synthesize --schema`` reads it (an editor's byte-order
    mark is no error); ValueError naming the file when it is not a usable one."""
    try:
        return Schema.from_json(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"{path}: not a usable schema file ({exc}); write one with `fits schema`"
        ) from None


def synthesize(transport: FlowerTransport, cfg: Mapping[str, Any]) -> Path:
    """Fit a :class:`~fits.synthesizer.FITSSynthesizer` on the sites and write a table.

    Parameters
    ----------
    transport : FlowerTransport
        The channel to the sites.
    cfg : mapping
        The parsed run config (see :mod:`fits.deploy.flower`).

    Returns
    -------
    Path
        Where the synthetic table was written (atomically, in chunks).
    """
    schema = read_schema(cfg["schema"]) if cfg["schema"] else None
    synth = FITSSynthesizer(
        seed=cfg["seed"],
        kinds=cfg["kinds"],
        order=cfg["order"],
        schema=schema,
        batch_size=cfg["batch_size"] or None,
        secure_aggregation=cfg["secure"],
        rules=cfg.get("rules", True),
        near_linear=cfg.get("near_linear", True),
        **({"design": cfg["design"]} if cfg.get("design") else {}),
        **({"column_designs": cfg["column_designs"]} if cfg.get("column_designs") else {}),
        **({"column_models": cfg["column_models"]} if cfg.get("column_models") else {}),
        **({"boosting": cfg["boosting"]} if cfg.get("boosting") else {}),
        **({"smoothing": cfg["smoothing"]} if cfg.get("smoothing") else {}),
        round_cost_bytes=cfg.get("round_cost_bytes", 0),
    )
    learn = list(cfg.get("tune_relevance") or [])
    if learn:  # relevance weights learned from the sites' held-out scores
        synth.set_params(
            tune_relevance="*" if "*" in learn else learn,
            relevance_budget=int(cfg.get("relevance_budget", 0)) or None,  # 0: the default
        )
    known = None
    rows = int(cfg["rows"])
    if cfg.get("known"):  # conditional sampling: one row per row of the known table
        from fits.known import read_known_table

        # read before any round (no rows: the header alone); its header is checked on
        # the sites' first replies, before the rounds of the fit
        known = read_known_table(cfg["known"], cfg.get("na_values") or None)
        rows = int(known.shape[0])
        transport.observers.append(_known_header_check(cfg, known, schema))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        synth.fit(transport, rows=rows)  # rows declared at configure: one round less
    notes = []
    for w in caught:  # what fits inferred (DataNote): in the summary, for the command
        if issubclass(w.category, DataNote):
            notes.append(str(w.message))
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if not cfg["batch_size"]:  # each site is its own machine: budget per site
        synth.coordinator.batch_size = int(
            np.clip(SITE_MEMORY_BUDGET // max(max(synth.n_rows_), 1), 64, max(rows, 1))
        )
    # streamed in chunks to an unnamed or temporary file linked into place at the end:
    # bounded memory for any number of rows, the same rows as one synth.sample(rows) or
    # synth.sample_remaining_columns(known) call
    if known is not None:
        path = _stream_to_file(
            lambda first: _complete(synth, known, cfg["known"], first, cfg.get("max_tries", 0)),
            Path(cfg["output"]),
            rows,
            f"known={cfg['known']!r} ({rows} rows)",
            "split the known table or write elsewhere",
            synth.output_forms().with_known(known),
        )
    else:
        path = _stream_to_file(
            lambda first: synth.iter_sample(rows, first_chunk_rows=first),
            Path(cfg["output"]),
            rows,
            f"rows={rows}",
            "ask for fewer rows or write elsewhere",
            synth.output_forms(),
        )
    summary = {
        "output": str(path),
        "rows": rows,
        "sites": dict(zip(synth.client_names_, synth.n_rows_, strict=True)),
        "uploaded_bytes": dict(zip(synth.client_names_, synth.uploaded_bytes_, strict=True)),
        **({"notes": notes} if notes else {}),
    }
    print(json.dumps(summary))  # noqa: T201 - shows in the ServerApp's log (flwr log)
    return path


def _known_header_check(
    cfg: Mapping[str, Any], known: pd.DataFrame, schema: Schema | None
) -> Callable[[int, Message, Message], None]:
    """A transport observer that checks the known table's header against the site
    tables' header (:func:`fits.known.check_known_columns`, as ``fits synthesize
    --known`` checks it before its fit) on the first setup reply, where the header is
    first known: a refusal stops the run before rule detection, configure and the other
    rounds of the fit.  The columns the run config's ``drop`` leaves out, its ``id``
    kinds and the schema file's identifiers are refused as there (where the known
    columns lie in the chain is checked by the fit, which knows their kinds)."""
    from fits.known import check_known_columns

    done = False

    def check(k: int, request: Message, reply: Message) -> None:
        nonlocal done
        if done or request.type != "setup":
            return
        done = True
        description = json.loads(str(reply.config["description"]))
        columns = [str(c) for c in description["order"]]  # the site's, less its drop
        ids = [c.name for c in schema.columns if c.kind == "id"] if schema is not None else []
        check_known_columns(
            cfg["known"],
            [str(c) for c in known.columns],
            columns,
            dropped=cfg.get("drop") or [],
            kinds=cfg["kinds"],
            identifiers=ids,
        )

    return check


def _complete(
    synth: FITSSynthesizer,
    known: pd.DataFrame,
    where: str,
    first: int | None,
    max_tries: int = 0,
) -> Iterator[pd.DataFrame]:
    """``synth.iter_sample_remaining_columns(known, max_tries=...)`` (``max_tries`` 0:
    the library's default); a refusal of the known table names the file and says what
    ``fits federate --known`` says as ``fits synthesize --known`` does (the order to run
    with, not Python's ``order=[...]``), also one met while drawing (a rare combination
    that found no agreeing draw within ``max_tries`` draws per row)."""
    from fits.known import in_file_terms
    from fits.synthesizer import DEFAULT_MAX_TRIES

    try:
        chunks = synth.iter_sample_remaining_columns(
            known, first_chunk_rows=first, max_tries=max_tries or DEFAULT_MAX_TRIES
        )
    except ValueError as exc:
        message = str(exc)
        if "not the first columns of the chain" in message:
            message = message.replace("known_columns", "its columns", 1)
            message = message.split(" Fit with")[0].rstrip(".")
            message += f". Put them first with --order {_known_first(synth, known)}"
        message = message.replace("known_columns break", "its rows break")
        message = in_file_terms(message)  # known_columns.loc[5]: the file's row 6
        raise ValueError(
            f"--known {where!r}: {message.replace('known_columns', 'the table')}"
        ) from None
    return _failing_as(where, chunks, synth, known, max_tries or DEFAULT_MAX_TRIES)


def _known_first(synth: FITSSynthesizer, known: pd.DataFrame) -> str:
    """The ``--order`` value that puts the known table's columns first (by the schema's
    names: 'age' may stand for the header ' age '), the chain's order after."""
    from fits.known import known_first_order

    return known_first_order(synth.schema_, known)


def _failing_as(
    where: str,
    chunks: Iterator[pd.DataFrame],
    synth: FITSSynthesizer,
    known: pd.DataFrame,
    max_tries: int,
) -> Iterator[pd.DataFrame]:
    """``chunks``, a ValueError while drawing them named as the known table's in the
    words ``fits synthesize --known`` uses (:func:`fits.known.unmatched_known_row`, one
    function for both): the file's row (1-based), the ``--order`` that puts the known
    columns first and ``--max-tries`` with its value, not the library's (a 0-based
    position, ``order=[...]``, ``max_tries``)."""
    from fits.known import unmatched_known_row

    try:
        yield from chunks
    except ValueError as exc:
        message = unmatched_known_row(str(exc), synth.schema_, known, max_tries)
        raise ValueError(f"--known {where!r}: {message}") from None


def _stream_to_file(
    stream: Callable[[int | None], Iterator[pd.DataFrame]],
    out: Path,
    rows: int,
    request: str,
    advice: str,
    forms: OutputForms | None = None,
) -> Path:
    """Write the chunks ``stream(first_chunk_rows)`` gives (a draw of ``rows`` rows whose
    rows do not depend on where the chunks are cut) to ``out`` atomically, as
    ``fits synthesize`` does (:func:`fits.io.write_stream`): a request of more than
    :data:`fits.io.LARGE_REQUEST_ROWS` rows that would not fit in the free space of
    ``out``'s file system stops the run (:class:`fits.io.OutputTooLarge`, a ValueError;
    nothing written; the message starts with ``request`` and ends with ``advice``), and
    the estimate of one that fits shows in the ServerApp's log.  ``forms`` are the
    sites' forms of the values to write them in (:class:`fits.io.OutputForms`)."""
    from fits import io as fits_io

    def estimated(estimate: fits_io.StreamEstimate) -> None:
        print(  # noqa: T201 - shows in the ServerApp's log (flwr log)
            f"{estimate.rows:,} rows: about {estimate.size / 1e9:,.2f} GB "
            f"({estimate.free / 1e9:,.1f} GB free)"
        )

    written, _ = fits_io.write_stream(
        stream,
        out,
        rows,
        request=request,
        advice=advice,
        forms=forms,
        on_estimate=estimated,
    )
    return written


def run_synthesis(grid: Grid, config: Mapping[str, Any]) -> Path:
    """The ServerApp's work: :func:`fits.deploy.flower.run_coordinator` with
    :func:`synthesize`.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The ServerApp's grid.
    config : mapping
        The run config (see :mod:`fits.deploy.flower`).

    Returns
    -------
    Path
        Where the synthetic table was written.
    """
    return run_coordinator(grid, config, synthesize)


def analyze(transport: FlowerTransport, cfg: Mapping[str, Any]) -> Path:
    """Fit a model across the sites (run config ``analysis``) and write the result.

    Parameters
    ----------
    transport : FlowerTransport
        The channel to the sites.
    cfg : mapping
        The parsed run config: ``analysis`` is the JSON of the spec
        :func:`fits.analysis.run.run_analysis` takes, ``output`` where the result JSON
        goes.

    Returns
    -------
    Path
        Where the result was written (atomically).
    """
    from fits.io import write_text

    if not cfg["analysis"]:
        raise ValueError("run config task='analyze' needs 'analysis' (the fit's options, JSON)")
    from fits.analysis.run import run_analysis
    from fits.deploy.flower_launch import round_logger

    # the rounds in the ServerApp's log, which fits analyze --flower draws as its bar
    result, summary = run_analysis(
        json.loads(cfg["analysis"]), transport=transport, on_round=round_logger()
    )
    path = write_text(json.dumps(result, indent=2), cfg["output"])
    # shows in the ServerApp's log (flwr log); fits analyze --flower prints it
    print(json.dumps({"analysis_summary": summary, "output": str(path)}))  # noqa: T201
    return path


def run_task(grid: Grid, config: Mapping[str, Any]) -> Path:
    """The ServerApp's work: :func:`fits.deploy.flower.run_coordinator` with
    :func:`synthesize` or :func:`analyze`, as the run config's ``task`` says."""
    task = str(config.get("task", "synthesize")).strip().lower()
    return run_coordinator(grid, config, analyze if task == "analyze" else synthesize)


server_app = ServerApp()


@server_app.main()
def _server_main(grid: Grid, context: Context) -> None:
    run_task(grid, context.run_config)
