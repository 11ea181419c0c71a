"""FITS on Flower: the coordinator as a ServerApp, each site as a ClientApp.

This module holds the ClientApp (``fits.deploy.flower:client_app``), the transport and
the run config; the ServerApp that runs a synthesis is ``fits.flower_app:server_app``
(:mod:`fits.flower_app`, beside the :class:`~fits.synthesizer.FITSSynthesizer` it runs).

Install with ``pip install "fits[flower]"``.  This module adds no second implementation
of the method: the ServerApp drives the same :class:`~fits.federation.coordinator.Coordinator`
(through :class:`FlowerTransport`, a :class:`~fits.federation.transport.Transport`) and
the ClientApp answers with the same :class:`~fits.federation.client.FITSClient`.  A fits
:class:`~fits.federation.protocol.Message` travels as a Flower ``RecordDict`` with one
``ArrayRecord`` (``"arrays"``) and one ``ConfigRecord`` (``"config"``); its type ``t`` is
the Flower message type ``query.fits_<t>``.

Site side (node config of each SuperNode, see ``docs/federation.md``)::

    data-path = "/data/site-a.csv"   # the site's table (CSV or Parquet); required
    name      = "site-a"             # how the site is named (default: the file's stem)
    kernel    = "knn"                # or "gaussian": the site's own scheme
    bandwidth = 0.0                  # gaussian: h on the standardized scale (0: default)
    knn-budget = 0                   # knn: r0 of eq. 12 (0: the paper's default)
    ordinal-penalty = ""             # lambda_q of eq. 26 (>= 0; "" = the kernel's 1)
    nominal-penalty = ""             # gamma_q of eq. 26 (in (0, 1]; "" = the kernel's 0.1)
    column-penalties = ""            # per column, overriding those: "hr=3,season=0.5"
                                     # (or a JSON object, e.g. '{" hr ": 3}'; "" = none)
    relevance = ""                   # relevance weights: "cnt:hr=4,cnt:season=0" (or a
                                     # JSON object, '{"cnt": {"hr": 4}}'; "" = none)
    policy    = ""                   # path of the site's policy JSON ("" = the default)
    seed      = ""                   # analysis: the site's noise seed ("" = fresh entropy)
    audit     = ""                   # path: one JSON line per request this site handled
    drop      = ""                   # columns this site leaves out of its table, "uid,notes"
                                     # (a JSON array for names with commas or surrounding
                                     # spaces; "" = none); never described, never sent
    na-values = ""                   # texts that mean a missing value in this site's
                                     # file, beside the run's na-values: "NA,-999" or a
                                     # JSON array, each TEXT (every column) or COLUMN=TEXT

Flower starts a new ClientApp process for every message.  The site rebuilds its
:class:`~fits.federation.client.FITSClient` from its file each time and replays the coordinator's
``configure`` message, which it keeps in the run's ``context.state`` (on the site's own
SuperNode; it holds the schema, grids and the site's lifting seed, never a row), so
that every message sees the same continualized data.  The site's policy counts
(queries asked per column) are kept there too, so its limits hold across messages.

Coordinator side (run config, ``fits federate run`` fills it in)::

    output     = "synthetic.csv"   # written atomically when the run succeeds
    rows       = 1000              # synthetic rows
    known      = ""                # path of a table of the first chain columns' values:
                                   # one row per row, the rest drawn given them (rows
                                   # is then the table's; "" = draw rows)
    seed       = 0
    kinds      = ""                # kind overrides, "age:continuous,grade:ordinal" (or
                                   # a JSON object, e.g. '{" age ": "continuous"}')
    order      = ""                # comma-separated chain order ("" = the tables'), or
                                   # a JSON array, e.g. '["x", "y, z"]'
    schema     = ""                # path of a schema JSON file ("" = inferred)
    timeout    = 600.0             # seconds a round may take before the run stops
    batch-size = 0                 # queries per message (0: as large as memory allows)
    min-sites  = 1                 # wait for at least this many sites
    audit      = ""                # path: one JSON line per site reply (what was sent)
    secure     = false             # secure aggregation: the coordinator sees only sums
    task       = "synthesize"      # or "analyze": fit a model across the sites
    analysis   = ""                # task "analyze": the fit's options (JSON, see
                                   # fits.flower_app.analyze); the result JSON -> output
    rules      = true              # detect exact rules between columns, generate by them
    near-linear = true             # with rules: draw near-linear columns as residuals
    design     = ""                # local-linear design: "all", "ordered", "continuous",
                                   # "constant"
                                   # ("" = the synthesizer's default; docs/method.md)
    column-designs = ""            # per column, overriding design: a JSON object, e.g.
                                   # '{"cnt": "constant"}' ("" = none)
    column-models = ""             # per discrete column, "kernel" or "boosting": a JSON
                                   # object, e.g. '{"income": "boosting"}' ("" = none)
    boosting   = ""                # the boosted columns' settings: a JSON object of
                                   # BoostingParams fields, e.g. '{"n_trees": 200}';
                                   # a column's own under its name:
                                   # '{"income": {"learning_rate": 0.1}}'
    smoothing  = ""                # "fixed" or "auto" (per-column smoothing chosen by a
                                   # held-out score; "" = FITSSynthesizer's default)
    tune-relevance = ""            # columns whose kernels get relevance weights learned
                                   # from held-out scores ("cnt,hr" or a JSON array; "*":
                                   # every column; "" = none)
    relevance-budget = 0           # candidates per column of that search (0: what the
                                   # default site policy leaves, FITSSynthesizer's None)
    max-tries  = 0                 # with known: draws per known row that matching its
                                   # later discrete columns may take (0: the library's
                                   # default, DEFAULT_MAX_TRIES; fits federate --max-tries)
    round-cost-bytes = 0           # one message round per column where it adds at most
                                   # this many bytes (FITSSynthesizer round_cost_bytes)
    drop       = ""                # columns every site leaves out of its table before it
                                   # describes it ("uid,notes" or a JSON array; each site
                                   # must have them; "" = none): applied at the sites, so
                                   # their values never leave them
    na-values  = ""                # texts every site reads as missing values in its file
                                   # (fits.io.read_table's na_values): "NA,-999" or a JSON
                                   # array, each TEXT (every column) or COLUMN=TEXT; also
                                   # the known table's

With ``secure = true`` each site keeps the private key of its secure-aggregation key
pair (:mod:`fits.federation.secure`) in its ``context.state`` next to ``configure``; only the
public key is sent.

Analysis sites (``task = "analyze"``: the GLMs under mu-GDP and FedLSA of
:mod:`fits.analysis`) answer the analysis messages in the same fresh process per
message.  What a site must keep between messages stays on its own SuperNode, in
``context.state`` (Flower: "records added by the entity in a given run_id and that will
stay local ... never leave the system it's running from"):

* the requests that set the site up (``setup``, ``moments``, ``glm_configure``,
  ``lsa_setup``, ``lsa_precondition``), replayed in order by every later process, so
  the design, the plan and the FedNewton sample split (drawn from the site's seed at
  ``glm_configure``) are rebuilt exactly;
* the site's state after its last message (``GLMSite.export_state``: the noise
  generator's state, the releases left in its plan, the clipping bound; FedLSA: its
  generator and the rows used), restored before the next message.

So the noise stream continues where it stopped, exactly as in one process, and the
release plan (which stops a server from asking for more releases than the budget
allows) holds across processes.  Deriving each release's noise from the seed and a
round number instead would let a server that repeats a round number get the same noise
twice and cancel it by subtraction.  The site's noise seed is its own: node config
``seed`` (``"ENTROPY"`` or ``"ENTROPY/INDEX"``, how ``fits analyze --flower`` gives each
local site the seed an in-process fit gives it), else fresh entropy drawn at its first
analysis message and kept in its ``context.state``; the coordinator never learns it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, RecordDict
from flwr.app import Message as FlowerMessage
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid

from fits.core.names import parse_column_list
from fits.federation.protocol import (
    ANALYSIS_REPLIES,
    DESIGNS,
    MESSAGE_TYPES,
    Message,
    ProtocolError,
)
from fits.federation.transport import ClientError, Transport

if TYPE_CHECKING:
    from fits.core.kernels import Kernel
    from fits.federation.client import FITSClient
    from fits.federation.policy import SitePolicy

__all__ = [
    "STOPPED",
    "FlowerTransport",
    "RunStopped",
    "RunConfigStopped",
    "OutputIsInputError",
    "check_outputs",
    "file_mark",
    "wait_for_sites",
    "client_app",
    "to_records",
    "from_records",
    "message_type",
    "run_coordinator",
]

#: Prefix of the Flower message types that carry fits messages.
MESSAGE_PREFIX = "query.fits_"
#: Memory budget per site for one message's dense weights (float64 values).
SITE_MEMORY_BUDGET = 2**26


def message_type(fits_type: str) -> str:
    """The Flower message type of a fits message type."""
    return MESSAGE_PREFIX + fits_type


def to_records(message: Message) -> RecordDict:
    """A fits message as a Flower ``RecordDict`` (arrays and config, nothing else)."""
    arrays = ArrayRecord(
        {name: Array(np.ascontiguousarray(a)) for name, a in message.arrays.items()}
    )
    return RecordDict({"arrays": arrays, "config": ConfigRecord(dict(message.config))})


def from_records(fits_type: str, content: RecordDict) -> Message:
    """The fits message in a Flower ``RecordDict`` made by :func:`to_records`."""
    if set(content) != {"arrays", "config"}:
        raise ProtocolError(f"a fits message holds 'arrays' and 'config', got {sorted(content)}")
    arrays = {name: arr.numpy() for name, arr in content.array_records["arrays"].items()}
    config: dict[str, Any] = dict(content.config_records["config"])
    return Message(fits_type, arrays, config)


def _fits_type(flower_type: str) -> str:
    if not flower_type.startswith(MESSAGE_PREFIX):
        raise ProtocolError(f"not a fits message type: {flower_type!r}")
    fits_type = flower_type[len(MESSAGE_PREFIX) :]
    if fits_type not in MESSAGE_TYPES and fits_type not in ANALYSIS_REPLIES:
        raise ProtocolError(f"unknown fits message type {fits_type!r}")
    return fits_type


# ---------------------------------------------------------------------- coordinator side
#: How a fits coordinator's message ends when it stopped a run on purpose (a site
#: failed or refused, or the run config asks what the sites cannot give).
STOPPED = "the run stopped and no output was written"


#: How a line of the ServerApp's log starts that ``fits federate run`` shows while it
#: waits (the sites connecting).  The same text as
#: ``fits.deploy.flower_launch.PROGRESS`` (a test holds them equal).
PROGRESS = "[fits] "
#: Seconds between two "waiting for sites" lines while the count does not change.
WAIT_REPORT_INTERVAL = 30.0


class RunStopped(RuntimeError):
    """The coordinator stopped a run on purpose; the message says why (no traceback
    needed: ``fits federate`` prints the message alone)."""


class RunConfigStopped(RunStopped, ValueError):
    """The run config asks what cannot be done (a value that cannot be read, an output
    that cannot be written): stopped before the sites are waited for.  A ValueError, as
    :func:`read_run_config` raises, and a :class:`RunStopped` (no traceback)."""


class FlowerTransport(Transport):
    """Reaches the sites through a Flower ``Grid``: one Flower message per site and round.

    A round pushes every site's message at once and collects the replies, so the sites
    work in parallel.  The sites' names come back in the setup round; from then on the
    sites are kept in the order of their names, so that a run's seeds and sums do not
    depend on Flower's random node ids.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The ServerApp's grid.
    node_ids : sequence of int
        The SuperNodes taking part.
    timeout : float
        Seconds a round may take; a site that has not answered by then stops the run.
    poll : float
        Seconds between checks for replies (each an HTTP request to the SuperLink,
        which it serves on the same machine; default 0.2 s, against rounds of 3 s or
        more).
    outputs : str
        What the setup requests carry besides the fits message: the salted marks of
        the files the coordinator will write (:func:`output_marks`, config key
        :data:`OUTPUTS_KEY`), so that a site whose table is one of them refuses
        (:func:`check_not_output`); ``""``: nothing.
    """

    def __init__(
        self,
        grid: Grid,
        node_ids: Sequence[int],
        *,
        timeout: float = 600.0,
        poll: float = 0.2,
        validate: bool = True,
        outputs: str = "",
    ) -> None:
        if not node_ids:
            raise ValueError("no SuperNode is connected to the SuperLink")
        self.grid = grid
        self.node_ids = [int(n) for n in node_ids]
        self.timeout = float(timeout)
        self.poll = float(poll)
        self.outputs = str(outputs)
        super().__init__([f"SuperNode {n}" for n in self.node_ids], validate=validate)

    def _who(self, k: int) -> str:
        """A site as errors name it: its name and node id (the id alone before setup)."""
        name, node = self.client_names[k], self.node_ids[k]
        if name == f"SuperNode {node}":
            return f"SuperNode {node} (its site name is not known: no setup reply yet)"
        return f"{name} (SuperNode {node})"

    def _deliver(self, client: int, message: Message) -> Message:
        return self._round({client: message})[client]

    def _deliver_all(self, messages: Sequence[Message]) -> list[Message]:
        replies = self._round(dict(enumerate(messages)))
        out = [replies[k] for k in range(len(messages))]
        if messages and messages[0].type == "setup":
            names = [str(r.config.get("name") or self.client_names[k]) for k, r in enumerate(out)]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ClientError(
                    f"two sites call themselves {dupes}: give each SuperNode its own "
                    "'name' in its node config"
                )
            perm = sorted(range(len(names)), key=names.__getitem__)
            self.node_ids = [self.node_ids[k] for k in perm]
            self.client_names = [names[k] for k in perm]
            out = [out[k] for k in perm]
        return out

    def _deliver_rounds(self, rounds: Sequence[Sequence[Message]]) -> list[list[Message]]:
        """Independent rounds pushed together: each SuperNode finds them all queued at
        the SuperLink and answers them back to back (a SuperNode with nothing queued
        waits 3 s before it asks again, so each separate round costs that wait)."""
        flat = {(r, k): m for r, messages in enumerate(rounds) for k, m in enumerate(messages)}
        replies = self._round(flat)
        return [[replies[(r, k)] for k in range(len(ms))] for r, ms in enumerate(rounds)]

    def _round(self, messages: Mapping[Any, Message]) -> dict[Any, Message]:
        """Push messages, pull the replies; errors name the site.

        ``messages`` maps a key to a message: the key is the site's index, or a pair
        (request, site index) when several requests go out at once.
        """

        def site(key: Any) -> int:
            return int(key[1] if isinstance(key, tuple) else key)

        outgoing = {
            key: FlowerMessage(
                to_records(self._with_outputs(m)),
                dst_node_id=self.node_ids[site(key)],
                message_type=message_type(m.type),
            )
            for key, m in messages.items()
        }
        ids = list(self.grid.push_messages(list(outgoing.values())))
        by_id = dict(zip(ids, outgoing, strict=True))
        waiting = set(ids)
        replies: dict[Any, Message] = {}
        deadline = time.monotonic() + self.timeout
        while waiting:
            for reply in self.grid.pull_messages(list(waiting)):
                mid = reply.metadata.reply_to_message_id
                if mid not in waiting:
                    continue
                waiting.discard(mid)
                k = by_id[mid]
                if reply.has_error():
                    raise ClientError(
                        f"{self._who(site(k))} failed during "
                        f"the {messages[k].type} round: {error_reason(reply.error.reason or '')} "
                        f"(Flower error code {reply.error.code}); {STOPPED}"
                    )
                replies[k] = from_records(messages[k].type, reply.content)
            if waiting and time.monotonic() > deadline:
                late = sorted({self._who(site(by_id[m])) for m in waiting})
                raise ClientError(
                    f"no reply from {late} within {self.timeout:g} s in the "
                    f"{next(iter(messages.values())).type} round; {STOPPED} (raise 'timeout' "
                    "if the sites need longer)"
                )
            if waiting:
                time.sleep(self.poll)
        return replies

    def _with_outputs(self, message: Message) -> Message:
        """A setup request with the marks of the coordinator's output files added
        (:attr:`outputs`); any other message as it is."""
        if message.type != "setup" or not self.outputs:
            return message
        return Message(message.type, message.arrays, {**message.config, OUTPUTS_KEY: self.outputs})


_FLOWER_REASON = re.compile(r"<class '([\w.]+)'>:<(['\"])(.*)\2>", re.DOTALL)


def error_reason(reason: str) -> str:
    """A ClientApp's error as a reader wants it: Flower reports an exception as
    ``<class 'module.Error'>:<'message'>``; this gives ``message`` (and the class name
    when it is not one of fits' own errors, whose messages name the site and the fix)."""
    match = _FLOWER_REASON.fullmatch(reason.strip())
    if match is None:
        return reason
    cls, message = match.group(1), match.group(3)
    return message if cls.startswith("fits.") else f"{cls.rsplit('.', 1)[-1]}: {message}"


def _parse_kinds(text: str) -> dict[str, str]:
    """``"age:continuous,grade:ordinal"`` -> ``{"age": "continuous", "grade": "ordinal"}``;
    or a JSON object column -> kind (what ``fits federate`` sends when a column's name
    has surrounding spaces or a comma, which the first form cannot carry)."""
    if text.strip().startswith("{"):
        from fits.core.schema import KINDS

        return _json_object(text, "kinds", KINDS, '{"age": "continuous"}')
    kinds = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        column, sep, kind = item.rpartition(":")
        if not sep or not column:
            raise ValueError(
                f"run config kinds: {item!r} is not 'column:kind' (e.g. 'age:continuous')"
            )
        kinds[column] = kind
    return kinds


def format_kinds(kinds: Mapping[str, str]) -> str:
    """The run-config text of a column -> kind mapping (inverse of the parser)."""
    bad = [c for c in kinds if "," in c]
    if bad:
        raise ValueError(f"columns {bad} contain ',': give a schema file instead of kinds")
    return ",".join(f"{c}:{k}" for c, k in kinds.items())


def read_run_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The run config (see the module docstring) parsed and checked, as the ServerApp
    reads it; ValueError naming a key whose value cannot be read."""

    def get(key: str, default: Any) -> Any:
        return config.get(key, default)

    return {
        "output": str(get("output", "synthetic.csv")),
        "rows": int(get("rows", 1000)),
        "known": str(get("known", "")),
        "seed": int(get("seed", 0)),
        "kinds": _parse_kinds(str(get("kinds", ""))),
        "order": parse_column_list(str(get("order", "")), "run config order") or None,
        "schema": str(get("schema", "")),
        "timeout": float(get("timeout", 600.0)),
        "batch_size": int(get("batch-size", 0)),
        "min_sites": int(get("min-sites", 1)),
        "audit": str(get("audit", "")),
        "secure": _parse_bool(get("secure", False)),
        "task": _parse_task(get("task", "synthesize")),
        "analysis": str(get("analysis", "")),
        "rules": _parse_bool(get("rules", True), "rules"),
        "near_linear": _parse_bool(get("near-linear", True), "near-linear"),
        "design": _parse_design(get("design", "")),
        "column_designs": _parse_column_designs(get("column-designs", "")),
        "column_models": _parse_column_models(get("column-models", "")),
        "boosting": _parse_boosting(get("boosting", "")),
        "smoothing": _parse_smoothing(get("smoothing", "")),
        # FITSSynthesizer(tune_relevance=, relevance_budget=): "*" or column names
        "tune_relevance": parse_column_list(
            str(get("tune-relevance", "")), "run config tune-relevance"
        ),
        "relevance_budget": _parse_count(get("relevance-budget", 0), "relevance-budget"),
        "max_tries": _parse_count(get("max-tries", 0), "max-tries"),  # 0: the default
        "round_cost_bytes": _parse_count(get("round-cost-bytes", 0), "round-cost-bytes"),
        # applied by each site to its own table (site_drop); read here only to refuse a
        # malformed value before any message goes out
        "drop": parse_column_list(str(get("drop", "")), "run config drop"),
        # each TEXT or COLUMN=TEXT (fits.io.na_value_items); read by every site, and for
        # the known table
        "na_values": read_na_values(get("na-values", ""), "run config na-values"),
    }


def read_na_values(value: Any, key: str) -> list[str | tuple[str, str]]:
    """The ``na_values`` (:func:`fits.io.read_table`) of a run or node config's
    ``na-values`` text (:func:`~fits.core.names.format_column_list` of the
    ``--na-values`` items); ValueError naming ``key``."""
    from fits.io import na_value_items

    return na_value_items(parse_column_list(str(value), key), key)


def _parse_smoothing(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ("", "fixed", "auto"):
        raise ValueError(f"run config smoothing={value!r}: use fixed or auto")
    return text


def _parse_count(value: Any, key: str) -> int:
    """A run-config integer >= 0."""
    try:
        number = int(str(value).strip())
    except ValueError:
        number = -1
    if isinstance(value, bool) or number < 0:
        raise ValueError(f"run config {key!r} must be an integer >= 0, got {value!r}")
    return number


#: What a run does: ``synthesize`` a table, or ``analyze`` (fit a model across the
#: sites, :mod:`fits.analysis`; run config ``analysis`` holds its options as JSON).
TASKS = ("synthesize", "analyze")


def _parse_task(value: Any) -> str:
    task = str(value).strip().lower()
    if task not in TASKS:
        raise ValueError(f"run config task={value!r}: use one of {', '.join(TASKS)}")
    return task


def _json_object(value: Any, key: str, choices: Sequence[str] | None, example: str) -> dict:
    """A run-config JSON object ("" for none); with ``choices``, every value one of them.

    Raises ValueError naming the key, what to write and an example."""
    text = str(value).strip()
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    ok = isinstance(parsed, dict) and (
        choices is None or all(isinstance(v, str) and v in choices for v in parsed.values())
    )
    if not ok:
        what = f"column -> one of {', '.join(choices)}" if choices else "setting -> value"
        raise ValueError(
            f"run config {key}={value!r}: write a JSON object of {what}, e.g. {example}"
        )
    return {str(k): v for k, v in parsed.items()}


def _parse_column_designs(value: Any) -> dict[str, str]:
    """Run config ``column-designs``: "" (none) or a JSON object column -> design."""
    return _json_object(value, "column-designs", DESIGNS, '{"cnt": "constant"}')


def _parse_column_models(value: Any) -> dict[str, str]:
    """Run config ``column-models``: "" (none) or a JSON object column -> model."""
    from fits.federation.coordinator import COLUMN_MODELS

    return _json_object(value, "column-models", COLUMN_MODELS, '{"income": "boosting"}')


def _parse_boosting(value: Any) -> dict[str, Any]:
    """Run config ``boosting``: "" (the defaults) or a JSON object of BoostingParams
    fields (checked when the synthesizer is built)."""
    return _json_object(value, "boosting", None, '{"n_trees": 200, "depth": 5}')


def _parse_design(value: Any) -> str:
    """Run config ``design``: "" (the synthesizer's default) or one of DESIGNS."""
    design = str(value).strip().lower()
    if design and design not in DESIGNS:
        raise ValueError(
            f"run config design={value!r}: use one of {', '.join(DESIGNS)} (or leave it out)"
        )
    return design


def _parse_bool(value: Any, key: str = "secure") -> bool:
    if isinstance(value, str):
        if value.strip().lower() not in ("true", "false", "1", "0", "yes", "no", ""):
            raise ValueError(f"run config {key!r} must be true or false, got {value!r}")
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


#: The coordinator's work once the sites are reached: ``synthesize(transport, cfg)``
#: with the parsed run config; returns where the output was written.
Synthesize = Callable[["FlowerTransport", Mapping[str, Any]], Path]


def run_coordinator(grid: Grid, config: Mapping[str, Any], synthesize: Synthesize) -> Path:
    """A ServerApp's work: wait for the sites, open the transport, run ``synthesize``.

    The synthesis itself (setup, configure, sample, write the table atomically) is
    :func:`fits.flower_app.synthesize`, a level above this layer: the ServerApp
    ``fits.flower_app:server_app`` passes it in.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The ServerApp's grid.
    config : mapping
        The run config (see the module docstring).
    synthesize : callable
        Called as ``synthesize(transport, cfg)`` with the :class:`FlowerTransport` to
        the sites and the parsed run config.

    Returns
    -------
    Path
        Where the synthetic table was written.
    """
    try:
        cfg = read_run_config(config)
        check_outputs(cfg)
    except ValueError as exc:  # before any site is waited for
        raise RunConfigStopped(f"{exc}; {STOPPED}") from None
    nodes = wait_for_sites(grid, max(cfg["min_sites"], 1), cfg["timeout"])
    transport = FlowerTransport(
        grid, sorted(nodes), timeout=cfg["timeout"], outputs=output_marks(cfg)
    )
    audit: list[str] = []
    if cfg["audit"]:
        transport.observers.append(
            lambda k, request, reply: audit.append(
                json.dumps(_describe_reply(transport.client_names[k], reply))
            )
        )
    refused = False  # a site refused: a file the run writes is its table
    try:
        return synthesize(transport, cfg)
    except Exception as exc:
        refused = OUTPUT_IS_INPUT in str(exc)
        if not isinstance(exc, (ValueError, ProtocolError)) or STOPPED in str(exc):
            raise
        # fits refused what the run config asks of these sites (a usage or data error, a
        # site's policy): the message says why and what to change; no traceback to read
        raise RunStopped(f"{exc}; {STOPPED}") from None
    finally:
        if cfg["audit"] and not refused:  # never over the table of the site that refused
            from fits.io import write_text

            write_text("".join(line + "\n" for line in audit), cfg["audit"])


def check_outputs(cfg: Mapping[str, Any]) -> None:
    """The run config's ``output`` and ``audit`` can be written on this machine (the
    coordinator's) and are none of its inputs (``known``, ``schema``): checked before
    the sites are waited for, not after the fit (:func:`fits.io.check_output`).

    Raises
    ------
    ValueError
        Naming the run config key (and ``fits federate run``'s option) and the fix.
    """
    from fits.io import check_output

    inputs = [(f"run config {k} (--{k})", cfg[k]) for k in ("known", "schema") if cfg[k]]
    check_output(cfg["output"], inputs, option="run config output (--out)")
    if cfg["audit"]:
        check_output(cfg["audit"], inputs, option="run config audit (--audit)")


#: Setup config key of the salted marks of the files the coordinator will write
#: (:func:`output_marks`); the site's ClientApp reads it and takes it out of the request.
OUTPUTS_KEY = "fits-outputs"
#: How a site's refusal to answer a run that would write over its table reads (``fits
#: federate run`` exits 2 on it). The same text as ``cli.federate.OUTPUT_IS_INPUT`` (a
#: test holds them equal; that module must not import Flower).
OUTPUT_IS_INPUT = "is this site's own"


class OutputIsInputError(ValueError):
    """A site refuses a run whose output (or audit log) is the site's own table."""


def file_mark(path: str | os.PathLike[str], salt: bytes) -> str | None:
    """A salted SHA-256 of the identity of the file at ``path``: its inode number, size
    and modification time (ns), which a file shares with its symbolic and hard links,
    with itself through a bind mount and, through a network file system, on another
    machine; None when no regular file is there (a file still to be written is no
    site's table).

    The salt is fresh for each run, so a mark says nothing without it; what one site's
    comparison tells the coordinator is one bit: whether a file it would write is that
    site's table, which it could read already if it were."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    identity = f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}".encode()
    return hashlib.sha256(salt + identity).hexdigest()


def output_marks(cfg: Mapping[str, Any]) -> str:
    """The setup config value (:data:`OUTPUTS_KEY`) that lets each site check that the
    files this coordinator will write (run config ``output`` and ``audit``) are not its
    own table: a fresh salt and the :func:`file_mark` of each that exists already, as
    JSON; ``""`` when none exists (then none can be a site's table)."""
    salt = secrets.token_bytes(16)
    marks = {
        key: mark
        for key in ("output", "audit")
        if cfg.get(key) and (mark := file_mark(str(cfg[key]), salt)) is not None
    }
    return json.dumps({"salt": salt.hex(), "marks": marks}) if marks else ""


def check_not_output(marks: str, files: Mapping[str, str | os.PathLike[str]], name: str) -> None:
    """Refuse (:class:`OutputIsInputError`) when one of the site's own ``files``
    (what it is -> its path: the table, the policy file, the audit log) is one of the
    files the coordinator will write, as its setup request's marks
    (:func:`output_marks`) say: a site's files are never written over, and only the
    site knows where they lie.  Nothing when ``marks`` is empty or cannot be read."""
    try:
        sent = json.loads(marks) if marks else {}
        salt = bytes.fromhex(str(sent.get("salt", "")))
        wanted = {str(k): str(v) for k, v in dict(sent.get("marks", {})).items()}
    except (ValueError, TypeError, AttributeError):
        return
    if not wanted or not salt:
        return
    for own, path in files.items():
        mark = file_mark(path, salt) if str(path) else None
        hit = sorted(
            k for k, v in wanted.items() if mark is not None and secrets.compare_digest(v, mark)
        )
        if not hit:
            continue
        what = " and ".join(
            {"output": "output (run config output, fits federate run --out)"}.get(
                k, f"{k} log (run config {k}, fits federate run --{k})"
            )
            for k in hit
        )
        raise OutputIsInputError(
            f"site {name!r}: the run's {what} {OUTPUT_IS_INPUT} {own}; fits never writes "
            "over a site's file, so this site does not take part: run again with another "
            f"--{'out' if 'output' in hit else hit[0]} path"
        )


def wait_for_sites(grid: Grid, wanted: int, timeout: float) -> list[int]:
    """The ids of the connected SuperNodes once ``wanted`` are, waiting at most
    ``timeout`` seconds; a :data:`PROGRESS` line in the ServerApp's log (which ``fits
    federate run`` shows) when the count changes, and every
    :data:`WAIT_REPORT_INTERVAL` seconds while it does not.

    Raises
    ------
    RunStopped
        Fewer sites connected in time: how many, and what to do.
    """
    start = time.monotonic()
    nodes = list(grid.get_node_ids())
    said: tuple[int, float] | None = None
    while len(nodes) < wanted:
        now = time.monotonic()
        if said is None or said[0] != len(nodes) or now - said[1] >= WAIT_REPORT_INTERVAL:
            print(  # noqa: T201 - shows in the ServerApp's log (flwr log, fits federate run)
                f"{PROGRESS}waiting for sites: {len(nodes)} of {wanted} connected "
                f"({now - start:.0f} s of at most {timeout:g} s)",
                flush=True,
            )
            said = (len(nodes), now)
        if now - start > timeout:
            raise RunStopped(
                f"only {len(nodes)} of the {wanted} sites asked for (--sites, run config "
                f"min-sites) connected to the SuperLink within {timeout:g} s "
                "(--round-timeout, run config timeout); start each site's `fits federate "
                "site --superlink HOST:PORT` (its log says 'Connection attempt failed' while "
                "it cannot reach the SuperLink: check the address, the port, and --ca or "
                f"--insecure as the SuperLink was started), or ask for fewer sites; {STOPPED}"
            )
        time.sleep(0.5)
        nodes = list(grid.get_node_ids())
    return nodes


def _describe_reply(site: str, reply: Message) -> dict[str, Any]:
    """What a site sent: message type, each array's shape and dtype, the config keys, bytes."""
    return {
        "site": site,
        "type": reply.type,
        "arrays": {n: [list(a.shape), str(a.dtype)] for n, a in reply.arrays.items()},
        "config": sorted(reply.config),
        "bytes": reply.nbytes(),
    }


# ---------------------------------------------------------------------- site side
def site_kernel(
    node_config: Mapping[str, Any], columns: Sequence[str] | None = None, name: str = "this site"
) -> Kernel:
    """The site's kernel scheme from its node config: ``kernel``, ``bandwidth``,
    ``knn-budget``, and the penalties and relevance weights of
    :data:`~fits.core.kernel_settings.NODE_KEYS` (``ordinal-penalty``,
    ``nominal-penalty``, ``column-penalties``, ``relevance``; absent or ``""``: the
    kernel's defaults).  With ``columns`` (the site's table's headers), the columns they
    name are resolved to them as ``fits synthesize`` resolves its options'
    (:func:`~fits.core.names.match_keys`).

    Raises
    ------
    ValueError
        A value that cannot be read, naming the node config key and what to write; a
        column the site's table does not have (``name``'s table).
    """
    from fits.core.kernel_settings import read_column_penalties, read_penalty, read_relevance
    from fits.core.kernels import GaussianKernel, KNNKernel
    from fits.core.names import match_keys

    kind = str(node_config.get("kernel", "knn")).strip().lower()
    if kind not in ("knn", "fits-k", "gaussian", "fits-g"):
        raise ValueError(f"node config kernel={kind!r}: use 'knn' or 'gaussian'")
    settings: dict[str, Any] = {}
    for key in ("ordinal-penalty", "nominal-penalty"):
        value = read_penalty(node_config.get(key), key)
        if value is not None:
            settings[key.replace("-", "_")] = value
    penalties = read_column_penalties(node_config.get("column-penalties", ""))
    relevance = read_relevance(node_config.get("relevance", ""), columns=columns or ())
    if columns is not None:
        where = f"{name}'s table"
        penalties = match_keys(penalties, columns, "node config column-penalties", where)
        relevance = {
            r: match_keys(w, columns, "node config relevance", where)
            for r, w in match_keys(relevance, columns, "node config relevance", where).items()
        }
    if penalties:
        settings["column_penalties"] = penalties
    if relevance:
        settings["relevance"] = relevance
    if kind in ("knn", "fits-k"):
        budget = _node_number(node_config, "knn-budget", int, "an integer >= 0 (0: the default)")
        return KNNKernel(budget=int(budget) or None, **settings)
    bandwidth = _node_number(node_config, "bandwidth", float, "a number >= 0 (0: the default)")
    return GaussianKernel(bandwidth=float(bandwidth) or None, **settings)


def _node_number(node_config: Mapping[str, Any], key: str, kind: type, what: str) -> float:
    """A node config number >= 0 (absent: 0); ValueError naming the key."""
    value = node_config.get(key, 0)
    try:
        number = kind(value) if not isinstance(value, bool) else -1
    except (TypeError, ValueError):
        number = -1
    if not number >= 0:
        raise ValueError(f"node config {key}={value!r}: write {what}")
    return float(number)


def _site_file(node_config: Mapping[str, Any]) -> tuple[Path, str]:
    """The site's data path and name from its node config."""
    if "data-path" not in node_config:
        raise ValueError(
            "this SuperNode has no 'data-path' in its node config: start it with "
            "--node-config \"data-path='/path/to/site.csv'\""
        )
    path = Path(str(node_config["data-path"]))
    return path, str(node_config.get("name", "")) or path.stem


def site_drop(
    columns: Sequence[str],
    name: str,
    node_config: Mapping[str, Any],
    run_config: Mapping[str, Any] | None = None,
) -> list[str]:
    """The headers of ``columns`` (the site's table) that the site leaves out: those its
    node config's ``drop`` names (the site's own choice, ``fits federate site --drop``)
    and those the run config's ``drop`` names (the run's, ``fits federate run --drop``),
    each name resolved to the site's own header as ``fits synthesize --drop`` resolves
    it (:func:`~fits.core.names.match_columns`).

    Raises
    ------
    ColumnNameError
        A name no header of this table matches (every site must have the column), or
        two headers match.
    """
    from fits.core.names import ColumnNameError, match_columns

    names = parse_column_list(str(node_config.get("drop", "")), "node config drop")
    own = len(names)
    if run_config is not None:
        names += parse_column_list(str(run_config.get("drop", "")), "run config drop")
    if not names:
        return []
    try:
        return list(dict.fromkeys(match_columns(names, columns, "--drop", f"{name}'s table")))
    except ColumnNameError as exc:
        if len(names) == own or "no column" not in str(exc):
            raise
        raise ColumnNameError(  # the run's --drop: say what to do when others have it
            f"{exc}. The run's --drop leaves a column out at every site, so every site "
            "must have it; if only some sites hold it, run without it in --drop and have "
            "each of those sites leave it out itself (fits federate site --drop COLUMN, "
            "node config drop)"
        ) from None


def site_na_values(
    node_config: Mapping[str, Any], run_config: Mapping[str, Any] | None = None
) -> list[str | tuple[str, str]] | None:
    """The texts the site reads as missing values in its file: its node config's
    ``na-values`` (the site's own, ``fits federate site --na-values``) and the run
    config's (the run's, ``fits federate run --na-values``); None for none."""
    texts = read_na_values(node_config.get("na-values", ""), "node config na-values")
    if run_config is not None:
        texts += read_na_values(run_config.get("na-values", ""), "run config na-values")
    return texts or None


def site_table(
    node_config: Mapping[str, Any], run_config: Mapping[str, Any] | None = None
) -> tuple[Any, str]:
    """The site's table as it takes part (its file, its :func:`site_na_values` read as
    missing values, without the :func:`site_drop` columns, which never reach its
    replies) and the site's name."""
    from fits.io import read_table

    path, name = _site_file(node_config)
    frame = read_table(path, na_values=site_na_values(node_config, run_config))
    drop = site_drop([str(c) for c in frame.columns], name, node_config, run_config)
    return (frame.drop(columns=drop) if drop else frame), name


def build_site(
    node_config: Mapping[str, Any], run_config: Mapping[str, Any] | None = None
) -> FITSClient:
    """The site's :class:`~fits.federation.client.FITSClient`, from its node config (and
    the run config's ``drop``)."""
    from fits.federation.client import FITSClient

    frame, name = site_table(node_config, run_config)
    kernel = site_kernel(node_config, [str(c) for c in frame.columns], name)
    return FITSClient(frame, name, kernel, policy=site_policy(node_config))


def site_policy(node_config: Mapping[str, Any]) -> SitePolicy:
    """The site's :class:`~fits.federation.policy.SitePolicy` from node config ``policy``."""
    from fits.federation.policy import SitePolicy

    path = str(node_config.get("policy", ""))
    return SitePolicy.from_json(path) if path else SitePolicy()


_STATE_ARRAYS = "fits_configure_arrays"
_STATE_CONFIG = "fits_configure_config"
_STATE_SECRET = "fits_secure_aggregation_key"
_STATE_POLICY = "fits_site_policy_counts"


#: Configured sites kept between messages by a process that answers several (the warm
#: site process, :mod:`fits.deploy.flower_worker`), by :func:`_site_key`.  A process per
#: message (Flower's default) starts with it empty.  At most :data:`_SITES_KEPT`.
_SITES: dict[tuple[Any, ...], FITSClient] = {}
_SITES_KEPT = 4


def _site_key(context: Context) -> tuple[Any, ...] | None:
    """What a configured site is a function of: the run, the node config, the run
    config's ``drop`` and ``na-values``, the site's file (path, size, modification time), the stored
    ``configure`` request and the secure-aggregation key; None before configure."""
    if _STATE_CONFIG not in context.state.config_records:
        return None
    path, _ = _site_file(context.node_config)
    try:
        stat = path.stat()
    except OSError:
        return None  # build_site names the missing file
    secret = context.state.config_records.get(_STATE_SECRET)
    return (
        context.run_id,
        json.dumps(dict(context.node_config), sort_keys=True, default=str),
        str(context.run_config.get("drop", "")),
        str(context.run_config.get("na-values", "")),
        str(path.resolve()),
        stat.st_size,
        stat.st_mtime_ns,
        context.state.array_records[_STATE_ARRAYS].object_id,
        context.state.config_records[_STATE_CONFIG].object_id,
        None if secret is None else secret.object_id,
    )


def _configured_site(fits_type: str, msg: FlowerMessage, context: Context) -> FITSClient:
    """The site that answers ``msg``: built from its file, with the stored ``configure``
    replayed (a message after configure) or the new one kept; or, in a process that
    answered this site's earlier messages, the site it configured then, when nothing it
    depends on (:func:`_site_key`) changed -- the same state a rebuild gives, without
    reading the file and continualizing again."""
    if fits_type not in ("setup", "rules", "configure"):
        key = _site_key(context)
        if key is not None and key in _SITES:
            return _SITES[key]
    site = build_site(context.node_config, context.run_config)
    if fits_type != "setup" and _STATE_SECRET in context.state.config_records:
        site.resume_secure(bytes.fromhex(str(context.state.config_records[_STATE_SECRET]["key"])))
    if fits_type == "configure":
        context.state[_STATE_ARRAYS] = msg.content.array_records["arrays"]
        context.state[_STATE_CONFIG] = msg.content.config_records["config"]
    elif fits_type not in ("setup", "rules"):  # rule detection comes before configure
        if _STATE_CONFIG not in context.state:
            raise ProtocolError(f"{site.name}: {fits_type} before configure")
        stored = RecordDict(
            {
                "arrays": context.state.array_records[_STATE_ARRAYS],
                "config": context.state.config_records[_STATE_CONFIG],
            }
        )
        site.handle(from_records("configure", stored))  # a replay: not audited
    return site


def _keep_site(site: FITSClient, context: Context) -> None:
    """Keep a configured site for this process's next messages (see :data:`_SITES`)."""
    key = _site_key(context)
    if key is None:
        return
    _SITES.pop(key, None)
    _SITES[key] = site
    while len(_SITES) > _SITES_KEPT:
        del _SITES[next(iter(_SITES))]


def _handle(msg: FlowerMessage, context: Context) -> FlowerMessage:
    fits_type = _fits_type(msg.metadata.message_type)
    if fits_type == "setup":  # the coordinator's output files: never this site's table
        config = msg.content.config_records.get("config")
        if config is not None and OUTPUTS_KEY in config:
            marks = str(config[OUTPUTS_KEY])
            del config[OUTPUTS_KEY]  # not part of the fits message (nor of its replay)
            path, name = _site_file(context.node_config)
            node = context.node_config
            own: dict[str, str | os.PathLike[str]] = {
                "table (node config data-path)": path,
                "policy file (node config policy)": str(node.get("policy", "")),
                "audit log (node config audit)": str(node.get("audit", "")),
            }
            check_not_output(marks, own, name)
    analysis = str(context.run_config.get("task", "")).strip().lower() == "analyze"
    if fits_type in ANALYSIS_REPLIES or (fits_type == "setup" and analysis):
        return _handle_analysis(msg, fits_type, context)
    request = from_records(fits_type, msg.content)
    site = _configured_site(fits_type, msg, context)
    if _STATE_POLICY in context.state.config_records:
        site.restore_policy_state(
            json.loads(str(context.state.config_records[_STATE_POLICY]["counts"]))
        )
    site.audit = str(context.node_config.get("audit", "")) or None
    try:
        reply = site.handle(request)
    finally:  # a refused request still leaves its count and its audit line
        context.state[_STATE_POLICY] = ConfigRecord({"counts": json.dumps(site.policy_state())})
    if fits_type == "setup" and site.secure_private_key is not None:  # stays on this node
        context.state[_STATE_SECRET] = ConfigRecord({"key": site.secure_private_key.hex()})
    if fits_type not in ("setup", "rules"):
        _keep_site(site, context)
    return FlowerMessage(to_records(reply), reply_to=msg)


# ---------------------------------------------------------------------- analysis sites
#: Requests that set up an analysis site, in protocol order.  Each is kept in the
#: site's ``context.state`` (with the site's state just before it) and replayed, in this
#: order, by every later ClientApp process of the run, so that the process holds the
#: same design, configuration and FedNewton split as the site that answered them.
ANALYSIS_SETUP = ("setup", "moments", "glm_configure", "lsa_setup", "lsa_precondition")
_STATE_ANALYSIS = "fits_analysis_site_state"
_STATE_SEED = "fits_analysis_site_seed"


def site_seed(text: str) -> np.random.SeedSequence:
    """A site's noise seed from node config ``seed``: ``"ENTROPY"`` or
    ``"ENTROPY/INDEX"`` (child ``INDEX`` of ``SeedSequence(ENTROPY)``, which is how
    :func:`fits.analysis.glm.make_sites` seeds site ``INDEX`` of an in-process fit)."""
    entropy, sep, index = text.strip().partition("/")
    try:
        if sep:
            return np.random.SeedSequence(int(entropy), spawn_key=(int(index),))
        return np.random.SeedSequence(int(entropy))
    except ValueError:
        raise ValueError(
            f"node config seed={text!r}: write an integer, or ENTROPY/INDEX (e.g. '7/2')"
        ) from None


def _analysis_seed(context: Context) -> np.random.SeedSequence:
    """The site's own seed: node config ``seed``, else fresh entropy drawn at its first
    analysis message and kept in its ``context.state`` (it never leaves the node)."""
    text = str(context.node_config.get("seed", "")).strip()
    if text:
        return site_seed(text)
    if _STATE_SEED not in context.state.config_records:
        entropy = np.random.SeedSequence().entropy
        context.state[_STATE_SEED] = ConfigRecord({"entropy": str(entropy)})
    return np.random.SeedSequence(int(str(context.state.config_records[_STATE_SEED]["entropy"])))


def build_analysis_site(
    node_config: Mapping[str, Any],
    fits_type: str,
    seed: Any,
    run_config: Mapping[str, Any] | None = None,
) -> Any:
    """The analysis site answering ``fits_type``: a :class:`~fits.analysis.lsa.FedLSASite`
    for ``lsa_*`` messages, else a :class:`~fits.analysis.glm.GLMSite` seeded with the
    site's own ``seed`` (both answer ``setup`` and ``moments`` alike); its table without
    the columns it drops (:func:`site_drop`)."""
    frame, name = site_table(node_config, run_config)
    if fits_type.startswith("lsa_"):
        from fits.analysis.lsa import FedLSASite

        return FedLSASite(frame, name)
    from fits.analysis.glm import GLMSite

    return GLMSite(frame, name, seed=seed)


def _keep_request(context: Context, content: RecordDict, fits_type: str, before: Any) -> None:
    """Keep a setting-up request (and the site's state before it) in ``context.state``;
    forget the ones after it in :data:`ANALYSIS_SETUP` (a site set up again restarts
    from that step)."""
    for later in ANALYSIS_SETUP[ANALYSIS_SETUP.index(fits_type) + 1 :]:
        for suffix in ("arrays", "config", "before"):
            key = f"fits_replay_{later}_{suffix}"
            if key in context.state:
                del context.state[key]
    context.state[f"fits_replay_{fits_type}_arrays"] = content.array_records["arrays"]
    context.state[f"fits_replay_{fits_type}_config"] = content.config_records["config"]
    context.state[f"fits_replay_{fits_type}_before"] = ConfigRecord({"json": json.dumps(before)})


def _replay(site: Any, context: Context, fits_type: str) -> None:
    """Replay the kept setting-up requests that come before ``fits_type``."""
    stop = ANALYSIS_SETUP.index(fits_type) if fits_type in ANALYSIS_SETUP else None
    for kept in ANALYSIS_SETUP[:stop]:
        if f"fits_replay_{kept}_config" not in context.state.config_records:
            continue
        stored = RecordDict(
            {
                "arrays": context.state.array_records[f"fits_replay_{kept}_arrays"],
                "config": context.state.config_records[f"fits_replay_{kept}_config"],
            }
        )
        before = json.loads(str(context.state.config_records[f"fits_replay_{kept}_before"]["json"]))
        _restore(site, before)
        site.handle(from_records(kept, stored))


def _handle_analysis(msg: FlowerMessage, fits_type: str, context: Context) -> FlowerMessage:
    """Answer an analysis message (:mod:`fits.analysis`) in a fresh ClientApp process
    (also ``setup`` in a run whose config says ``task = "analyze"``: the analysis site's
    setup, which describes the table as a synthesis site's does).

    The site is rebuilt from its file, replays the requests that set it up, restores
    the state its last message left (:meth:`~fits.analysis.glm.GLMSite.export_state`:
    the noise generator, the releases left, the clipping bound; FedLSA: its generator
    and the rows used), answers, and keeps its new state in ``context.state``, which
    Flower keeps on the site's own SuperNode for the run and never sends anywhere.  So
    a run through Flower draws exactly the noise, splits and rows the in-process run
    draws, and the release plan holds across processes.
    """
    request = from_records(fits_type, msg.content)
    site = build_analysis_site(
        context.node_config, fits_type, _analysis_seed(context), context.run_config
    )
    _replay(site, context, fits_type)
    latest = None
    if _STATE_ANALYSIS in context.state.config_records:
        latest = json.loads(str(context.state.config_records[_STATE_ANALYSIS]["json"]))
        _restore(site, latest)
    reply = site.handle(request)
    if fits_type in ANALYSIS_SETUP:
        _keep_request(context, msg.content, fits_type, latest)
    context.state[_STATE_ANALYSIS] = ConfigRecord({"json": json.dumps(_state_of(site))})
    return FlowerMessage(to_records(reply), reply_to=msg)


def _state_of(site: Any) -> dict[str, Any]:
    """The site's state, tagged with its class (a GLM site's state is not a FedLSA's)."""
    return {"site": type(site).__name__, "state": site.export_state()}


def _restore(site: Any, saved: Mapping[str, Any] | None) -> None:
    if saved and saved.get("site") == type(site).__name__ and saved.get("state"):
        site.restore_state(saved["state"])


client_app = ClientApp()
for _type in (*MESSAGE_TYPES, *ANALYSIS_REPLIES):
    client_app.query(f"fits_{_type}")(_handle)


# ---------------------------------------------------------------------- the Flower app
#: Run-config keys of the app and their defaults (the types Flower checks ``-c`` against).
RUN_CONFIG_DEFAULTS: dict[str, Any] = {
    "output": "synthetic.csv",
    "rows": 1000,
    "known": "",
    "seed": 0,
    "kinds": "",
    "order": "",
    "schema": "",
    "timeout": 600.0,
    "batch-size": 0,
    "min-sites": 1,
    "audit": "",
    "secure": False,
    "task": "synthesize",
    "analysis": "",
    "rules": True,
    "near-linear": True,
    "design": "",
    "column-designs": "",
    "column-models": "",
    "boosting": "",
    "smoothing": "",
    "tune-relevance": "",
    "relevance-budget": 0,
    "max-tries": 0,
    "round-cost-bytes": 0,
    "drop": "",
    "na-values": "",
}


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))


def write_app(directory: str | Path) -> Path:
    """Write the Flower app project (a ``pyproject.toml``) that ``flwr run`` takes.

    The app's code is the installed fits package (``fits.flower_app:server_app`` and
    ``fits.deploy.flower:client_app``); the directory holds only its Flower metadata and run
    config defaults, so it is the same at every site.

    Returns
    -------
    Path
        The directory.
    """
    from fits import __version__

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = "\n".join(f"{k} = {_toml_value(v)}" for k, v in RUN_CONFIG_DEFAULTS.items())
    text = f"""[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "fits-federation"
version = "{__version__}"
description = "FITS federated synthesis (the app's code is the installed fits package)"
license = "MIT"
dependencies = []

[tool.flwr.app]
publisher = "fits"

[tool.flwr.app.components]
serverapp = "fits.flower_app:server_app"
clientapp = "fits.deploy.flower:client_app"

[tool.flwr.app.config]
{config}
"""
    (directory / "pyproject.toml").write_text(text)
    return directory
