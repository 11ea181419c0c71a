"""``fits federate``: run FITS across machines on Flower (needs ``fits[flower]``).

Registered on the ``fits`` app in :mod:`fits.cli.main`:

* ``fits federate superlink``: the coordinator's SuperLink (runs until stopped);
* ``fits federate site``: one site's SuperNode, with its data and kernel;
* ``fits federate run``: submit a synthesis run and wait for the table;
* ``fits federate local``: all of it on this machine, for a first try.

See ``docs/federation.md``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from fits.core.names import format_column_list

from . import end_of_loading
from .errors import echo_warnings
from .errors import fail as _fail
from .helptext import ReflowedHelpGroup
from .options import (
    MAX_TRIES,
    BoostingOpt,
    ColumnDesignOpt,
    ColumnModelOpt,
    ColumnNameError,
    ColumnPenaltyOpt,
    DesignOpt,
    NaValuesOpt,
    NominalPenaltyOpt,
    OrderOpt,
    OrdinalPenaltyOpt,
    RelevanceBudgetOpt,
    RelevanceOpt,
    Secure,
    SmoothingOpt,
    TuneRelevanceOpt,
    check_max_tries,
    check_nominal_penalty,
    check_smoothing,
    column_list,
    match_columns,
    match_keys,
    match_relevance,
    output_file,
    parse_boosting,
    parse_column_designs,
    parse_column_models,
    parse_column_penalties,
    parse_kind,
    parse_na_values,
    parse_order,
    parse_relevance,
    pooled_without_secure,
    read_site_policy,
    repeated_site_files,
    show_columns,
)

__all__ = ["federate"]

federate = typer.Typer(
    cls=ReflowedHelpGroup,
    help="Run FITS across machines on Flower (pip install 'fits\\[flower]').",
    no_args_is_help=True,
    rich_markup_mode="rich",  # as the app's: the \\[ above is Rich's escape
)

Insecure = Annotated[
    bool, typer.Option("--insecure", help="Plain HTTP without TLS (tests, trusted networks).")
]


#: ``fits federate site --connect-timeout``'s default: seconds a site waits for its
#: SuperLink (``FITS_CONNECT_TIMEOUT``).
CONNECT_TIMEOUT = 600.0


def launch_module() -> Any:
    """:mod:`fits.deploy.flower_launch`, or exit 2 saying how to install Flower."""
    return _launch()


def _launch() -> Any:
    try:
        import flwr  # noqa: F401
    except ImportError:
        _fail("Flower is not installed: pip install 'fits[flower]'", 2)
    from fits.deploy import flower_launch

    return flower_launch


def _exec(cmd: list[str], home: Path) -> None:
    """Run a Flower process in the foreground until it ends.

    Ctrl-C, SIGTERM and SIGHUP stop it and the helpers it started (its process group);
    if this process is killed outright, the kernel sends it SIGTERM (parent-death
    signal, Linux).  Its SuperExec is fits's (``home/.fits-bin/flower-superexec``,
    removed when it ends), which reaps the app processes it starts
    (:mod:`fits.deploy.flower_superexec`).
    """
    launch = _launch()
    end_of_loading()  # the stop signals are the foreground process's now, as below
    made = [p for p in (home, *home.parents) if not p.exists()]  # deepest first
    home.mkdir(parents=True, exist_ok=True)
    typer.echo(" ".join(cmd), err=True)
    try:
        proc = subprocess.Popen(
            cmd,
            env=launch.flower_env(home, superexec=True),
            start_new_session=True,
            preexec_fn=launch.die_with_parent(),
        )
    except BaseException:
        _remove_superexec(home)
        _remove_empty(made)
        raise
    code = 0
    # SIGTERM / SIGHUP: stop the group (a second signal does not cut that short), then
    # end by the signal
    with launch.exit_on_signals() as signals:
        try:
            code = proc.wait()
        except KeyboardInterrupt:  # 128 + SIGINT, as every fits command stopped by Ctrl-C
            code = 130
        finally:
            with signals.cleaning():
                launch.stop_process_group(proc)
                _remove_superexec(home)
                _remove_empty(made)
    raise typer.Exit(code)


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders this command made for Flower's state (``--home``, deepest
    first) that Flower left empty: a SuperNode that never reached its SuperLink left
    an empty ``.fits-flower/site`` in the working folder."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (Flower's state), or gone: keep the rest
            return


def _remove_superexec(home: Path) -> None:
    """Remove the ``flower-superexec`` that ``flower_env(home, superexec=True)`` wrote."""
    from fits.deploy.flower_launch import SUPEREXEC_DIR
    from fits.deploy.flower_superexec import remove_shim

    remove_shim(home / SUPEREXEC_DIR)


@federate.command()
def superlink(
    port: Annotated[int, typer.Option("--port", help="Port the sites and runs connect to.")] = 9093,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "0.0.0.0",
    insecure: Insecure = False,
    certificates: Annotated[
        tuple[Path, Path, Path] | None,
        typer.Option("--tls", help="Server certificate, key and CA certificate (PEM)."),
    ] = None,
    home: Annotated[Path, typer.Option("--home", help="Flower's state folder.")] = Path(
        ".fits-flower/superlink"
    ),
) -> None:
    """Start the coordinator's SuperLink (Flower); the synthetic table is written here.

    Sites join it with fits federate site, and fits federate run starts a synthesis on
    it; it runs until stopped (Ctrl-C).

    Example:

      fits federate superlink --port 9093 --tls server.pem server.key ca.pem
    """
    launch = _launch()
    _one_security(insecure, certificates is not None, "--tls")
    try:
        cmd = launch.superlink_command(
            host, port, insecure=insecure, certificates=[str(p) for p in certificates or ()]
        )
    except launch.FederationError as exc:
        _fail(str(exc), 2)
    problem = _port_problem(host, port)
    if problem:
        _fail(
            f"--port {port}: the SuperLink cannot listen on {host}:{port} ({problem}); "
            "stop what uses it or choose another --port",
            2,
        )
    _exec(cmd, home.resolve())


def _one_security(insecure: bool, tls: bool, option: str) -> None:
    """Exit 2 for both ``--insecure`` and TLS files: the connection would be plain HTTP
    (Flower takes ``--insecure`` first) while the command line asks for TLS."""
    if insecure and tls:
        _fail(
            f"{option} and --insecure contradict each other: --insecure means plain HTTP "
            f"without TLS, and {option} would be ignored; give one of them",
            2,
        )


def _port_problem(host: str, port: int) -> str | None:
    """Why a server could not listen on ``host:port`` (in use, no such address), or
    None: a trial bind with ``SO_REUSEADDR``, as Flower's servers bind."""
    import socket

    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, OverflowError) as exc:
        return str(exc)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as trial:
        trial.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            trial.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _check_site_files(paths: list[Path]) -> None:
    """Every site table exists, is a file and a .csv or .parquet table, else a usage
    error (exit 2) naming it."""
    from fits.io import DataFileError, check_suffix

    for path in paths:
        if path.is_dir():
            _fail(
                f"the site table {str(path)!r} is a directory, not a table file; give the file(s)",
                2,
            )
        if not path.is_file():
            _fail(f"the site table {str(path)!r}: no such file", 2)
        try:
            check_suffix(path, "site table")
        except DataFileError as exc:
            _fail(str(exc), 2)


def _kernel_options(
    schemes: list[str],
    nominal_penalty: float | None,
    column_penalty: list[str] | None,
    relevance: list[str] | None,
) -> dict[str, float]:
    """Exit 2 on a ``--kernel`` other than knn or gaussian, a ``--nominal-penalty`` out
    of (0, 1], or a ``--column-penalty`` / ``--relevance`` item that cannot be read;
    returns the column penalties read."""
    for scheme in schemes:
        if scheme not in ("knn", "gaussian"):
            _fail(f"--kernel {scheme!r}: use knn or gaussian", 2)
    problem = check_nominal_penalty(nominal_penalty)
    if problem:
        _fail(problem, 2)
    try:
        column_penalties = parse_column_penalties(column_penalty)
        parse_relevance(relevance)
    except ValueError as exc:
        _fail(str(exc), 2)
    return column_penalties


def _check_site(
    frame: Any,
    name: str,
    kernel: str,
    bandwidth: float,
    knn_budget: int,
    settings: dict[str, Any] | None = None,
) -> None:
    """Exit 1 (naming the site and the fix) when this table cannot be a site: too few
    rows for a site or for its kernel, columns fits cannot model -- what its first
    message would otherwise fail on, after the run started.  ``settings``: the kernel's
    penalties and relevance weights (fields of :class:`~fits.core.kernels.Kernel`)."""
    from fits.core.kernels import GaussianKernel, KNNKernel
    from fits.federation.client import FITSClient

    try:
        scheme = (
            KNNKernel(budget=knn_budget or None, **(settings or {}))
            if kernel == "knn"
            else GaussianKernel(bandwidth=bandwidth or None, **(settings or {}))
        )
    except ValueError as exc:  # a setting the command line's checks let through
        _fail(f"{name}'s kernel: {exc}", 2)
    try:
        FITSClient(frame, name, scheme)
    except ValueError as exc:
        _fail(str(exc))


@federate.command()
def site(
    data: Annotated[Path, typer.Option("--data", help="This site's table (CSV or Parquet).")],
    superlink: Annotated[
        str, typer.Option("--superlink", help="host:port of the coordinator's SuperLink.")
    ],
    name: Annotated[str, typer.Option("--name", help="Site name (default: file name).")] = "",
    kernel: Annotated[
        str, typer.Option("--kernel", help="This site's scheme: knn or gaussian.")
    ] = "knn",
    bandwidth: Annotated[
        float,
        typer.Option("--bandwidth", min=0.0, help="gaussian: bandwidth (0: the default)."),
    ] = 0.0,
    knn_budget: Annotated[
        int, typer.Option("--knn-budget", min=0, help="knn: global budget r0 (0: the default).")
    ] = 0,
    port: Annotated[int, typer.Option("--port", help="Local port for Flower's apps.")] = 9094,
    insecure: Insecure = False,
    root_certificates: Annotated[
        Path | None, typer.Option("--ca", help="The SuperLink's CA certificate (PEM).")
    ] = None,
    home: Annotated[Path, typer.Option("--home", help="Flower's state folder.")] = Path(
        ".fits-flower/site"
    ),
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="This site's limits (JSON: max_grid_size, min_effective_rows, "
            'below_floor ("widen" or "abstain"), ...; see docs/privacy.md). Default: the '
            "default policy.",
        ),
    ] = None,
    audit: Annotated[
        Path | None,
        typer.Option(
            "--audit",
            help="Append one JSON line per request: its sizes, what was answered (with "
            "widened kernels where needed), refused or abstained from.",
        ),
    ] = None,
    seed: Annotated[
        str,
        typer.Option(
            "--seed",
            help="This site's noise seed for private model fitting (fits analyze), kept "
            "on this machine. Default: fresh randomness.",
        ),
    ] = "",
    drop: Annotated[
        list[str] | None,
        typer.Option(
            "--drop",
            help="Leave this column of this site's table out (repeat for several), e.g. "
            "an identifier or free text: the site never describes it or answers about "
            "it. Every site must leave out the same columns (or the run drops them: "
            "fits federate run --drop).",
            show_default=False,
        ),
    ] = None,
    ordinal_penalty: OrdinalPenaltyOpt = None,
    nominal_penalty: NominalPenaltyOpt = None,
    column_penalty: ColumnPenaltyOpt = None,
    relevance: RelevanceOpt = None,
    connect_timeout: Annotated[
        float,
        typer.Option(
            "--connect-timeout",
            envvar="FITS_CONNECT_TIMEOUT",
            min=0,
            help="Seconds this site waits for the SuperLink to answer, at start and "
            "whenever the connection is lost, before it stops (exit 1). 0: wait forever.",
        ),
    ] = CONNECT_TIMEOUT,
    na_values: NaValuesOpt = None,
) -> None:
    """Start this site's SuperNode; its rows stay here, only protocol arrays leave.

    --kernel, --bandwidth, --knn-budget, --ordinal-penalty, --nominal-penalty,
    --column-penalty and --relevance set this site's own kernel (each site chooses its
    own; the options are fits synthesize's).

    Example:

      fits federate site --data site-a.csv --name site-a \\
          --superlink coord:9093 --ca ca.pem \\
          --policy policy.json --audit site-a-audit.jsonl
    """
    launch = _launch()
    _one_security(insecure, root_certificates is not None, "--ca")
    column_penalties = _kernel_options([kernel], nominal_penalty, column_penalty, relevance)
    _check_site_files([data])
    missing = parse_na_values(na_values)
    from fits.io import DataFileError, read_table

    try:  # check the table here, before the coordinator asks
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = read_table(data, na_values=missing)
        echo_warnings(caught)  # "note: ...", as every command says them
    except DataFileError as exc:
        _fail(str(exc))
    except ColumnNameError as exc:  # --na-values COLUMN=TEXT of no column of the table
        _fail(str(exc), 2)
    dropped: list[str] = []
    if drop:  # as fits synthesize --drop names them; the SuperNode drops them again
        try:
            dropped = list(
                dict.fromkeys(
                    match_columns(
                        drop,
                        [str(c) for c in frame.columns],
                        "--drop",
                        f"{name or data.stem}'s table",
                    )
                )
            )
        except ColumnNameError as exc:
            _fail(str(exc), 2)
        frame = frame.drop(columns=dropped)
    columns = [str(c) for c in frame.columns]
    try:  # as fits synthesize resolves them, against this site's header
        column_penalties = match_keys(
            column_penalties, columns, "--column-penalty", f"{name or data.stem}'s table"
        )
        relevance_weights = match_relevance(parse_relevance(relevance, columns), columns)
    except ColumnNameError as exc:
        _fail(str(exc), 2)
    settings = kernel_settings(
        ordinal_penalty, column_penalties, relevance_weights, nominal_penalty
    )
    _check_site(frame, name or data.stem, kernel, bandwidth, knn_budget, settings)
    _check_site_floor(len(frame), name or data.stem, data, policy)
    typer.echo(
        f"{name or data.stem}: {len(frame)} rows, {frame.shape[1]} columns"
        + (f" (left out: {show_columns(dropped)})" if dropped else ""),
        err=True,
    )
    try:
        cmd = launch.supernode_command(
            superlink,
            data,
            name=name,
            kernel=kernel,
            bandwidth=bandwidth,
            knn_budget=knn_budget,
            port=port,
            insecure=insecure,
            root_certificates=str(root_certificates) if root_certificates else None,
            policy=policy,
            audit=audit,
            seed=seed,
            drop=dropped,
            max_wait_time=connect_timeout or None,
            na_values=na_values or (),
            **settings,
        )
    except launch.FederationError as exc:
        _fail(str(exc), 2)
    problem = _port_problem("127.0.0.1", port)
    if problem:
        _fail(
            f"--port {port}: the SuperNode's local port 127.0.0.1:{port} is taken "
            f"({problem}); every site on one machine needs its own --port "
            f"(e.g. --port {port + 1})",
            2,
        )
    wait = f"up to {connect_timeout:g} s, --connect-timeout" if connect_timeout else "without end"
    typer.echo(
        f"{name or data.stem}: connecting to the SuperLink at {superlink} (waiting for it "
        f"{wait}). Ctrl-C stops the site",
        err=True,
    )
    try:
        _exec(cmd, home.resolve())
    except typer.Exit as end:
        _site_ended(end.exit_code, name or data.stem, superlink, connect_timeout)
        raise


def _site_ended(code: int, site: str, superlink: str, timeout: float) -> None:
    """Say why a site's SuperNode ended by itself with exit code ``code``, and exit 1:
    its SuperLink took no connection within ``timeout`` seconds (``--connect-timeout``,
    before Flower started: :data:`~fits.deploy.flower_supernode.UNREACHABLE_EXIT`), or
    Flower stopped it (its log above says why; ``Exit Code: 305``: it could not reach
    the SuperLink within that bound).  A site whose SuperLink did not run (or whose
    address was wrong) retried without end, in Flower's log lines alone.  Nothing on a
    stop signal (Ctrl-C: 130) or a clean end."""
    from fits.deploy.flower_supernode import UNREACHABLE_EXIT

    check = (
        "check that it runs (fits federate superlink on the coordinator's machine), that "
        "--superlink names its host and --port, and that no firewall blocks that port"
    )
    if code == UNREACHABLE_EXIT:
        _fail(
            f"{site}: the SuperLink at {superlink} did not answer within {timeout:g} s; "
            f"{check}; or wait longer with --connect-timeout SECONDS (0: wait forever)"
        )
    if code > 0 and code != 130:
        bound = f"within --connect-timeout {timeout:g} s" if timeout else "at all"
        _fail(
            f"{site}: the SuperNode stopped (exit code {code}): see its log above. 'Exit "
            f"Code: 305' there means it could not reach the SuperLink at {superlink} "
            f"{bound}: {check}, and that --ca or --insecure matches the SuperLink's",
            1,
        )


def _check_site_floor(rows: int, name: str, data: Path, policy: Path | None) -> None:
    """Exit 1 when this site holds fewer rows than its own effective-rows floor
    (``min_effective_rows`` of its ``--policy``, a site-scoped floor): it would abstain
    from every request of every run, which its coordinator learns only as "every site
    abstained" or as a table drawn without it.  Exit 2 for a policy file that cannot be
    read."""
    from fits.federation.policy import SitePolicy

    try:
        rules = read_site_policy(policy) or SitePolicy()
    except ValueError as exc:
        _fail(str(exc), 2)
    floor = float(rules.min_effective_rows)
    if rules.pools_floor or rows >= floor:  # pooled: the floor is for all sites together
        return
    where = f"its --policy {str(policy)!r}" if policy is not None else "the default policy"
    _fail(
        f"{name} ({str(data)!r}) holds {rows} rows, fewer than min_effective_rows = "
        f"{floor:g} of {where}: no answer may rest on fewer rows, so this site would "
        "abstain from every request. Lower min_effective_rows in a --policy file (e.g. "
        '{"min_effective_rows": 2}; see docs/privacy.md), or use a larger table'
    )


def kernel_settings(
    ordinal_penalty: float | None,
    column_penalties: dict[str, float],
    relevance: dict[str, dict[str, float]],
    nominal_penalty: float | None = None,
) -> dict[str, Any]:
    """The given ``--ordinal-penalty``, ``--nominal-penalty``, ``--column-penalty`` and
    ``--relevance`` as fields of :class:`~fits.core.kernels.Kernel` (and keyword
    arguments of :func:`~fits.deploy.flower_launch.supernode_command`); empty when none
    is given."""
    settings: dict[str, Any] = {}
    if ordinal_penalty is not None:
        settings["ordinal_penalty"] = float(ordinal_penalty)
    if nominal_penalty is not None:
        settings["nominal_penalty"] = float(nominal_penalty)
    if column_penalties:
        settings["column_penalties"] = dict(column_penalties)
    if relevance:
        settings["relevance"] = {r: dict(w) for r, w in relevance.items()}
    return settings


def _run_config(
    out: Path,
    rows: int | None,
    seed: int,
    kinds: list[str],
    order: list[str] | None,
    schema: Path | None,
    timeout: float,
    sites: int,
    audit: Path | None,
    secure: bool = False,
    batch_size: int = 0,
    rules: bool = True,
    design: str = "",
    round_cost_bytes: int = 0,
    column_design: list[str] | None = None,
    column_model: list[str] | None = None,
    boosting: list[str] | None = None,
    columns: list[str] | None = None,
    known: Path | None = None,
    drop: list[str] | None = None,
    site_headers: dict[str, list[str]] | None = None,
    smoothing: str = "fixed",
    tune_relevance: list[str] | None = None,
    relevance_budget: int | None = None,
    max_tries: int | None = None,
    near_linear: bool = True,
    na_values: list[str] | None = None,
) -> dict[str, Any]:
    """The run config of these options.  With ``columns`` (the site tables' headers,
    known to ``fits federate local``), the columns the options name are resolved to
    them here (:func:`~fits.core.names.match_columns`), so a bad name is a usage error
    before any process starts; else they go as given, and the coordinator resolves them
    by the same rule to the headers the sites report at setup.

    ``drop`` goes as given (run config ``drop``): each site resolves the names to its
    own headers and leaves those columns out of its table before it describes it
    (:func:`fits.deploy.flower.site_drop`).  With ``site_headers`` (every site's header,
    by site name, ``fits federate local``) they are checked here as ``fits synthesize
    --drop`` checks them, site by site, and ``columns`` are the first site's without
    them."""
    if (rows is None) == (known is None):
        _fail("give either --rows N (rows to draw) or --known FILE (rows to complete)", 2)
    parse_na_values(na_values)  # an item of no text: a usage error here
    problem = check_max_tries(max_tries, known) or check_smoothing(smoothing)
    if problem:
        _fail(problem, 2)
    if known is not None:
        from fits.io import DataFileError, check_suffix, same_file

        try:
            check_suffix(known, "--known table")
        except DataFileError as exc:
            _fail(str(exc), 2)
        if known.resolve() == out.resolve() or same_file(known, out):
            _fail(f"--out {str(out)!r} is the --known table; fits never writes over an input", 2)
    if audit is not None:
        from fits.io import same_file

        if audit.resolve() == out.resolve() or same_file(audit, out):
            _fail(
                f"--audit {str(audit)!r} is the same file as --out {str(out)!r}: the audit "
                "log would replace the synthetic table; choose another path for one of them",
                2,
            )
    if kinds and schema is not None:  # the schema's kinds win: the run ignored --kind
        _fail(
            '--kind cannot be combined with --schema; set the column\'s "kind" in the '
            "schema file instead",
            2,
        )
    order_names = column_list(order, "--order")  # a use of no name: a usage error here
    kind_map: dict[str, str] = {}
    for item in kinds:
        try:
            column, kind = parse_kind(item)
        except ValueError as exc:
            _fail(f"--kind: {exc}", 2)
        kind_map[column] = kind
    try:
        column_designs = parse_column_designs(column_design)
        column_models = parse_column_models(column_model)
        boosting_params = parse_boosting(boosting, column_models)
    except ValueError as exc:
        _fail(str(exc), 2)
    if drop and site_headers:
        from .drop import partial_drop_message

        partial = partial_drop_message(drop, site_headers)
        if partial:
            _fail(partial, 2)
        try:
            left_out = {
                site: match_columns(drop, header, "--drop", f"{site}'s table")
                for site, header in site_headers.items()
            }
        except ColumnNameError as exc:
            _fail(str(exc), 2)
        if columns is not None:
            first = left_out[next(iter(site_headers))]
            columns = [c for c in columns if c not in first]
    if columns is not None:
        try:
            kind_map = match_keys(kind_map, columns, "--kind")
            order_names = parse_order(order, columns) if order else None
            column_designs = match_keys(column_designs, columns, "--column-design")
            column_models = match_keys(
                column_models, columns, "--column-model", is_column=lambda c, _: c != "*"
            )
            boosting_params = match_keys(
                boosting_params, columns, "--boosting", is_column=lambda _, v: isinstance(v, dict)
            )
            if tune_relevance and "*" not in tune_relevance:
                tune_relevance = match_columns(tune_relevance, columns, "--tune-relevance")
        except ColumnNameError as exc:
            _fail(str(exc), 2)
    # "column:kind,..." unless a name has surrounding spaces or a comma (which that text
    # cannot carry): then a JSON object
    plain = all(c == c.strip() and "," not in c for c in kind_map)
    config: dict[str, Any] = {
        "output": str(out.resolve()),
        "rows": rows if rows is not None else 0,  # with known: the known table's rows
        "known": str(known.resolve()) if known is not None else "",
        "seed": seed,
        "kinds": ",".join(f"{c}:{k}" for c, k in kind_map.items())
        if plain
        else json.dumps(kind_map),
        "order": format_column_list(order_names) if order_names else "",
        "schema": str(schema.resolve()) if schema else "",
        "timeout": float(timeout),
        "min-sites": sites,
        "audit": str(audit.resolve()) if audit else "",
        "secure": secure,
        "batch-size": int(batch_size),
        "rules": rules,
        **({} if near_linear else {"near-linear": False}),
        "design": design,
        "column-designs": json.dumps(column_designs) if column_designs else "",
        "column-models": json.dumps(column_models) if column_models else "",
        "boosting": json.dumps(boosting_params) if boosting_params else "",
        "round-cost-bytes": int(round_cost_bytes),
        "drop": format_column_list(drop) if drop else "",
        # the --na-values items, each site reads its file with them (site_na_values)
        "na-values": format_column_list(na_values) if na_values else "",
        "smoothing": "" if smoothing == "fixed" else smoothing,  # "": the default, fixed
        "tune-relevance": _tune_relevance_text(tune_relevance),
        "relevance-budget": int(relevance_budget or 0),  # 0: the default
        "max-tries": int(max_tries or MAX_TRIES) if known is not None else 0,  # 0: unused
    }
    _check_config_ints(config)
    return config


def _tune_relevance_text(names: list[str] | None) -> str:
    """``--tune-relevance`` as run config text (``""``: none; ``"*"``: every column)."""
    if not names:
        return ""
    return "*" if "*" in names else format_column_list(names)


Out = Annotated[
    Path,
    typer.Option(
        "--out",
        "-o",
        help="Synthetic table (.csv or .parquet), written atomically.",
        parser=output_file("--out"),
    ),
]
Rows = Annotated[
    int | None,
    typer.Option("--rows", "-n", min=0, help="Synthetic rows (or --known; 0: the header alone)."),
]
Known = Annotated[
    Path | None,
    typer.Option(
        "--known",
        help="Instead of --rows: a table of values of the chain's first column(s) (on "
        "the coordinator's machine); one synthetic row per row, the other columns drawn "
        "given them (conditional sampling; the values are sent to the sites as query points). "
        "A table of no rows gives the header alone. fits federate local checks its header "
        "against the site tables' before any process starts; its values are checked after "
        "the fit.",
    ),
]
MaxTries = Annotated[
    int | None,
    typer.Option(
        "--max-tries",
        min=1,
        help="With --known: draws per known row that matching its discrete columns "
        "later in the chain may take (pooled over blocks of 8,192 rows) before the run "
        f"stops saying which values are rare (fits synthesize's; default: {MAX_TRIES}).",
        show_default=False,
    ),
]
Seed = Annotated[int, typer.Option("--seed", help="Seed of every random draw.")]
Kinds = Annotated[
    list[str],
    typer.Option("--kind", help="COLUMN=KIND (or COLUMN:KIND) override (repeatable)."),
]
SchemaOpt = Annotated[Path | None, typer.Option("--schema", help="Schema JSON file.")]
Timeout = Annotated[float, typer.Option("--round-timeout", help="Seconds a round may take.")]
Audit = Annotated[
    Path | None,
    typer.Option(
        "--audit",
        help="Write what each site sent (JSON lines: shapes, no values).",
        parser=output_file("--audit"),
    ),
]
PolicyFile = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="Every site's limits (a site policy JSON file: max_grid_size, "
        "min_effective_rows, ...; see docs/privacy.md). Default: the default policy.",
    ),
]
BatchSize = Annotated[
    int,
    typer.Option(
        "--batch-size",
        min=0,
        help="Queries per message and site (0: as many as 2**26 dense weights per site "
        "allow). Fewer, larger messages mean fewer rounds; the table does not change "
        "(beyond rounding).",
    ),
]
RoundCost = Annotated[
    int,
    typer.Option(
        "--round-cost-bytes",
        min=0,
        help="Take one message round for a chain column instead of two where that adds "
        "at most this many upload bytes per batch (all sites). A Flower round costs "
        "seconds, so e.g. 40000000 (what 100 Mbit/s carry in 3 s) saves rounds; 0 "
        "(default): two rounds everywhere, the fewest bytes. The table changes only by "
        "rounding.",
    ),
]
DropOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--drop",
        help="Leave this column out (repeat for several), e.g. an identifier or free "
        "text. Every site leaves it out of its table before it describes it, so its "
        "values never leave the site; every site must have it.",
        show_default=False,
    ),
]
NoRules = Annotated[
    bool,
    typer.Option(
        "--no-rules",
        help="Do not detect exact rules between columns (every column drawn by the chain).",
    ),
]
NearLinear = Annotated[
    bool,
    typer.Option(
        "--near-linear/--no-near-linear",
        help="Look for near-linear columns and draw each as its residual about the line "
        "in an earlier column (on by default; --no-near-linear: run config near-linear = "
        "false).",
    ),
]


#: ``--run-timeout``'s default (``FITS_RUN_TIMEOUT``): seconds a whole run may take.
RUN_TIMEOUT = 3600.0
RunTimeout = Annotated[
    float,
    typer.Option(
        "--run-timeout",
        envvar="FITS_RUN_TIMEOUT",
        min=1,
        help="Seconds the whole run may take; then it is stopped (no output).",
    ),
]
Quiet = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="No estimate of a large request's time and size before the run starts.",
    ),
]
#: The largest whole number a Flower run config carries (a signed 64-bit integer).
MAX_CONFIG_INT = 2**63 - 1
#: Run config keys of whole numbers, and the options that set them.
_INT_OPTIONS = {
    "rows": "--rows",
    "seed": "--seed",
    "min-sites": "--sites",
    "batch-size": "--batch-size",
    "round-cost-bytes": "--round-cost-bytes",
    "relevance-budget": "--relevance-budget",
    "max-tries": "--max-tries",
}


def _check_config_ints(config: dict[str, Any]) -> None:
    """Exit 2 for an option whose whole number a Flower run config cannot carry (beyond
    a signed 64-bit integer): Flower refused it only once the run was submitted, with
    its own "Value out of range"."""
    for key, option in _INT_OPTIONS.items():
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            continue
        if -MAX_CONFIG_INT - 1 <= value <= MAX_CONFIG_INT:
            continue
        if key == "rows":
            _fail(
                f"--rows {value}: more rows than a run can be asked for (at most "
                f"{MAX_CONFIG_INT:,}), and far more than any disk holds; ask for fewer rows",
                2,
            )
        _fail(
            f"{option} {value}: too large for a Flower run config, which carries whole "
            f"numbers from {-MAX_CONFIG_INT - 1:,} to {MAX_CONFIG_INT:,}; give a smaller value",
            2,
        )


#: What a fits coordinator says when it stopped a run on purpose (a site failed or
#: refused, or the run config asks what the sites cannot give): the message says why,
#: so the log adds nothing. The same text as ``fits.deploy.flower.STOPPED`` (a test
#: holds them equal; this module must not import Flower).
STOPPED = "the run stopped and no output was written"
#: What a site says when it refused a run whose --out (or --audit) is its own table
#: (or its policy file or audit log)
#: (the coordinator cannot see the sites' paths; each site compares salted marks of
#: the files). The same text as ``fits.deploy.flower.OUTPUT_IS_INPUT`` (a test holds
#: them equal).
OUTPUT_IS_INPUT = "is this site's own"


def report_failure(result: Any) -> None:
    """Exit 1 with why a Flower run failed (and the end of its log when it was not
    fits' coordinator that stopped it on purpose); exit 2 when a site refused because
    the run's --out or --audit is its own table (a usage error)."""
    details = str(result.details)
    if STOPPED in details:
        details = details.removeprefix("ServerApp failed with exception: ")
    else:  # an unexpected failure: show the end of the run's log
        typer.echo(result.log[-4000:], err=True)
    _fail(f"run {result.run_id} {result.status}: {details}", 2 if OUTPUT_IS_INPUT in details else 1)


def _report(result: Any, out: Path, staging: Path | None = None) -> None:
    if staging is not None:  # the run wrote to the staging file: messages name --out
        for field in ("details", "log"):
            text = getattr(result, field, None)
            if isinstance(text, str) and str(staging) in text:
                result = _replace_field(result, field, text.replace(str(staging), str(out)))
    if not result.ok:
        report_failure(result)
    summary = next(
        (json.loads(line) for line in result.log.splitlines() if line.startswith('{"output"')),
        None,
    )
    typer.echo(f"run {result.run_id} finished in {result.seconds:.1f} s")
    for note in (summary or {}).get("notes", []):  # what the fit inferred (DataNote)
        typer.echo(f"note: {note}", err=True)
    if summary:
        sites = summary["sites"]
        told = (
            ", ".join(f"{name} ({rows:,} rows)" for name, rows in sites.items())
            if isinstance(sites, dict)
            else sites
        )
        typer.echo(f"sites: {told}")  # as fits synthesize says them (it printed a dict)
    typer.echo(f"synthetic table: {out} (on the SuperLink's machine)")


@federate.command()
def run(
    superlink: Annotated[str, typer.Option("--superlink", help="host:port of the SuperLink.")],
    out: Out,
    rows: Rows = None,
    known: Known = None,
    max_tries: MaxTries = None,
    seed: Seed = 0,
    kind: Kinds = [],  # noqa: B006 - typer needs a list default
    order: OrderOpt = None,
    schema: SchemaOpt = None,
    sites: Annotated[
        int, typer.Option("--sites", min=1, help="Wait until this many sites are connected.")
    ] = 1,
    round_timeout: Timeout = 600.0,
    audit: Audit = None,
    secure_aggregation: Secure = False,
    batch_size: BatchSize = 0,
    no_rules: NoRules = False,
    near_linear: NearLinear = True,
    design: DesignOpt = None,
    column_design: ColumnDesignOpt = None,
    column_model: ColumnModelOpt = None,
    boosting: BoostingOpt = None,
    round_cost_bytes: RoundCost = 0,
    drop: DropOpt = None,
    smoothing: SmoothingOpt = "fixed",
    tune_relevance: TuneRelevanceOpt = None,
    relevance_budget: RelevanceBudgetOpt = None,
    na_values: NaValuesOpt = None,
    insecure: Insecure = False,
    root_certificates: Annotated[
        Path | None, typer.Option("--ca", help="The SuperLink's CA certificate (PEM).")
    ] = None,
    run_timeout: RunTimeout = RUN_TIMEOUT,
) -> None:
    """Synthesize on a running federation and wait until the table is written.

    The table is written by the coordinator (the SuperLink's machine) at --out.

    Example:

      fits federate run --superlink coord:9093 --ca ca.pem --sites 3 \\
          --rows 20000 --out /data/synthetic.csv
    """
    launch = _launch()
    _one_security(insecure, root_certificates is not None, "--ca")
    from fits.io import DataFileError, check_suffix

    if not round_timeout > 0:  # else every wait ends at once: "0 of N sites connected"
        _fail(f"--round-timeout {round_timeout:g}: give the seconds a round may take (> 0)", 2)
    try:  # the output's type, known here though the file is written on the SuperLink's machine
        check_suffix(out, "output")
        launch.check_address(superlink)
        if root_certificates is not None and not insecure:
            launch.check_pem(root_certificates, "--ca")
    except (DataFileError, launch.FederationError) as exc:
        _fail(str(exc), 2)
    config = _run_config(
        out,
        rows,
        seed,
        kind,
        order,
        schema,
        round_timeout,
        sites,
        audit,
        secure_aggregation,
        batch_size,
        not no_rules,
        design.value if design is not None else "",
        round_cost_bytes,
        column_design,
        column_model,
        boosting,
        near_linear=near_linear,
        known=known,
        drop=drop,
        smoothing=smoothing,
        tune_relevance=tune_relevance,
        relevance_budget=relevance_budget,
        max_tries=max_tries,
        na_values=na_values,
    )
    try:  # SIGTERM / SIGHUP as Ctrl-C: the run is stopped at the SuperLink (flwr stop)
        with launch.exit_on_signals():
            result = launch.submit_run(
                superlink,
                config,
                insecure=insecure,
                root_certificates=str(root_certificates) if root_certificates else None,
                timeout=run_timeout,
                progress=lambda status: typer.echo(f"  {status}", err=True),
            )
    except launch.FederationError as exc:
        _fail(str(exc))
    _report(result, Path(config["output"]))  # the absolute path the coordinator wrote


def _header(path: Path) -> list[str]:
    """The column names of a site table (exit 1 for a file that cannot be read)."""
    import warnings

    from fits.io import DataFileError, read_columns

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # notes on reading it: the site says them
            return read_columns(path)  # its header alone
    except DataFileError as exc:
        _fail(str(exc))
        raise  # pragma: no cover - _fail exits


def table_has_rows(path: Path) -> bool:
    """Whether the table ``path`` holds a row after its header, read cheaply: a Parquet
    file's metadata, a CSV file up to its first line of data after the header (blank
    lines hold no row, as :func:`fits.io.read_table` reads them).  A file that cannot be
    read so counts as holding rows (its site then says what is wrong)."""
    import csv

    try:
        if path.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            return bool(pq.ParquetFile(path).metadata.num_rows > 0)
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
            for record in csv.reader(fh):  # the header: one record, maybe over lines
                if any(field.strip() for field in record):
                    break
            else:
                return False
            return any(line.strip() for line in fh)  # stops at the first row
    except (OSError, csv.Error, ValueError):
        return True
    except Exception:  # noqa: BLE001 - pyarrow's errors: the site reports them
        return True


def count_rows(path: Path, most: int) -> int:
    """The rows of the table ``path`` as :func:`fits.io.read_table` reads them, counted
    up to ``most`` at most (:func:`fits.io.count_rows`: a Parquet file's metadata, a CSV
    file's records; a blank line between the values of a one-column table is a row).
    A file that cannot be read so counts as ``most`` rows (its site then says what is
    wrong)."""
    from fits.io import count_rows as rows_of

    try:
        return rows_of(path, most)
    except Exception:  # noqa: BLE001 - the site reads the file itself and reports it
        return most


def _check_row_floor(sites: dict[str, Path], policy: Path | None, secure: bool = False) -> None:
    """Exit 1 when every site would abstain from every column under its effective-rows
    floor k (``min_effective_rows`` of ``policy``, else the default policy's): each site
    holds fewer than k rows (a pooled floor: the sites together), so a site never
    answers, and the run said "every site abstained from its marginal" only after
    starting Flower (about 40 s).  With ``secure`` (secure aggregation), also when only
    one site can answer, with ``fits synthesize``'s message
    (:func:`~fits.federation.coordinator.secure_sites_error`; the run's configure round
    said so after starting Flower).  Only the first k rows of each file are counted
    (every row of each, to name them, where the secure check fails)."""
    import math

    from fits.federation.policy import SitePolicy

    rules = SitePolicy.from_json(policy) if policy is not None else SitePolicy()
    floor = float(rules.min_effective_rows)
    if floor <= 1:  # every site holds a row (check_site_tables)
        return
    most = math.ceil(floor)
    counts = {name: count_rows(path, most) for name, path in sites.items()}
    if rules.pools_floor:
        few = sum(counts.values()) < floor
    else:
        few = all(n < floor for n in counts.values())
    if not few:
        if secure and not rules.pools_floor:
            from fits.federation.coordinator import secure_sites_error

            able = [n >= floor for n in counts.values()]
            if sum(able) == 1:
                rows = [count_rows(path, 2**62) for path in sites.values()]
                error = secure_sites_error(list(sites), rows, [floor] * len(sites), False)
                if error is not None:
                    _fail(str(error))
        return
    held = ", ".join(f"{name!r} ({str(sites[name])!r}): {n}" for name, n in counts.items())
    whose = "together" if rules.pools_floor else "each"
    _fail(
        f"the sites hold too few rows: {held}; under the sites' policy no answer rests on "
        f"fewer than min_effective_rows = {floor:g} rows, and the sites {whose} hold fewer, "
        "so every site would abstain from every column and nothing could be drawn. Add "
        "rows, or let the sites lower min_effective_rows (a --policy file, e.g. "
        '{"min_effective_rows": 2}; see docs/privacy.md)'
    )


def check_site_tables(
    sites: dict[str, Path],
    drop: list[str] | None = None,
    policy: Path | None = None,
    secure: bool = False,
) -> None:
    """Exit 1 before any Flower process starts when a site's table could not take part:
    a file no site could read (empty, not a table: :func:`fits.io.read_columns`'s
    error), a header with no rows, or columns that differ from the first site's (after
    ``--drop``), each with the message ``fits synthesize`` gives, naming the file(s)
    and the columns; and sites too small for any answer under ``policy`` (a site policy
    file; default: the default policy; with ``secure``, only one site able to answer),
    see :func:`_check_row_floor`.  Only the
    headers and the first rows of data are read.  The run said the same only once the
    SuperLink and the SuperNodes were up (about 20 s)."""
    from fits.core.schema import files_columns_differ

    headers: dict[str, list[str]] = {}
    for name, path in sites.items():
        header = _header(path)
        if not table_has_rows(path):
            _fail(
                f"{path}: the table has a header but no rows; every site needs at least "
                f"one row (site {name!r})"
            )
        gone: list[str] = []
        if drop:
            try:
                gone = match_columns(drop, header, "--drop", f"{name}'s table")
            except ColumnNameError as exc:  # refused with the other --drop checks
                _fail(str(exc), 2)
        headers[name] = [c for c in header if c not in gone]
    first, *others = sites
    head = (repr(str(sites[first])), first, headers[first])
    for name in others:
        said = files_columns_differ(head, (repr(str(sites[name])), name, headers[name]))
        if said is not None:
            _fail(said)
    _check_row_floor(sites, policy, secure)


def check_site_setup(sites: dict[str, Path], config: dict) -> None:
    """Exit 1 before any Flower process starts when the run's setup round would refuse
    the sites' tables: each table described as its site describes it (its file, less
    the run's ``drop``, text read as numbers or dates as there,
    :func:`~fits.core.schema.describe_table`) and the descriptions merged as the
    coordinator merges them (:func:`~fits.core.schema.merge_descriptions`, with the
    run's kinds and order): a column numeric at one site and text at another, a kind
    its values cannot take.  The run said the same after starting Flower (a minute or
    more).  One table is held at a time.  With a schema file the sites check their
    tables against it at configure, and nothing is checked here."""
    import warnings

    from fits.core.names import ColumnNameError, parse_column_list, resolve_columns, resolve_keys
    from fits.core.schema import (
        DeclaredKindError,
        IdentifierColumnError,
        describe_table,
        labels_of_na_only,
        merge_descriptions,
        parse_text_columns,
    )
    from fits.io import DataFileError, read_table

    if config.get("schema"):
        return
    kinds = {c: str(k) for c, k in _run_kinds(str(config.get("kinds", ""))).items()}
    order = parse_column_list(str(config.get("order", "")), "run config order") or None
    names = sorted(sites)  # the coordinator's order: by name
    descriptions = []
    reading: list[warnings.WarningMessage] = []  # how a file was read: said here, once
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # notes on the tables: the run says them
            for name in names:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    frame = read_table(sites[name])
                reading += caught
                gone = _run_drop([str(c) for c in frame.columns], name, config)
                if gone:
                    frame = frame.drop(columns=gone)
                header = [str(c) for c in frame.columns]
                declared = resolve_keys(
                    {c: {"kind": k} for c, k in kinds.items()}, header, "kinds", f"{name}'s table"
                )
                parsed, notes = parse_text_columns(frame, declared)
                del frame
                descriptions.append(describe_table(parsed, declared, client=name, notes=notes))
                del parsed
            headers = [str(c) for c in descriptions[0]["order"]]
            descriptions, _ = labels_of_na_only(descriptions, names)  # as the run's setup
            merge_descriptions(
                descriptions,
                names,
                kinds=resolve_keys(kinds, headers, "kinds"),
                order=resolve_columns(order, headers, "order") if order else None,
            )
    except (IdentifierColumnError, DeclaredKindError, ColumnNameError) as exc:
        echo_warnings(reading)
        _fail(str(exc), 2)  # the user must decide (a column to drop or declare): as synthesize
    except (DataFileError, ValueError) as exc:  # SchemaError: a ValueError
        echo_warnings(reading)
        _fail(str(exc))
    echo_warnings(reading)  # the run's notes are the fit's; a site's reading is not among them


def _run_kinds(text: str) -> dict[str, str]:
    """Run config ``kinds`` as :func:`_run_config` writes it (``"age:continuous"`` or a
    JSON object), without importing Flower."""
    if text.strip().startswith("{"):
        return {str(c): str(k) for c, k in json.loads(text).items()}
    return {c: k for c, _, k in (t.strip().rpartition(":") for t in text.split(",") if t.strip())}


def _run_drop(columns: list[str], name: str, config: dict) -> list[str]:
    """The headers of ``columns`` that the run config's ``drop`` leaves out at site
    ``name`` (as :func:`fits.deploy.flower.site_drop` resolves them)."""
    from fits.core.names import parse_column_list

    names = parse_column_list(str(config.get("drop", "")), "run config drop")
    if not names:
        return []
    return list(dict.fromkeys(match_columns(names, columns, "--drop", f"{name}'s table")))


def remove_temporary_outputs(out: Path, since: float) -> None:
    """Remove the hidden temporary files (``.<name>.*.tmp``, :func:`fits.io.write_table`'s
    pattern) beside ``out`` created since ``since``: what a stopped writer left."""
    for path in out.parent.glob(f".{out.name}.*.tmp"):
        try:
            if path.stat().st_mtime >= since - 1.0:
                path.unlink()
        except OSError:
            continue


#: ``fits federate local --secure-aggregation`` with one site: ``fits synthesize``'s
#: refusal (:func:`fits.cli.main.synthesize`, which also offers --simulate-clients).
SECURE_ONE_SITE = (
    "--secure-aggregation needs at least two sites (with one, the sum is that site's own "
    "upload): give more site files"
)

#: Infix of the file a ``fits federate local`` run writes its table to before the
#: command puts it in place as ``--out`` (:func:`staging_path`).
STAGING_INFIX = ".fits-local-"


def staging_path(out: Path) -> Path:
    """Where the ServerApp of ``fits federate local`` writes the table: a hidden file
    beside ``out`` (``.<name>.fits-local-<pid><suffix>``, same folder, so the rename
    into place is atomic). The command moves it to ``out`` only once the run, the
    stop of its processes and the release check are done, so a stop signal at any
    point leaves no output and an existing ``out`` untouched, as ``fits synthesize``
    does. Staging files beside ``out`` of processes that no longer run (killed
    outright) are removed here; the command also records its staging file
    (:func:`fits.deploy.flower_launch.staged_file`), so that any later federation or
    run of this user removes it, wherever it lies, once this process is dead."""
    out = out.resolve()
    for old in out.parent.glob(f".{out.name}{STAGING_INFIX}*{out.suffix}"):
        pid = old.name.removeprefix(f".{out.name}{STAGING_INFIX}").removesuffix(out.suffix)
        if pid.isdigit() and not _running(int(pid)):
            old.unlink(missing_ok=True)
    return out.with_name(f".{out.name}{STAGING_INFIX}{os.getpid()}{out.suffix}")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _replace_field(result: Any, field: str, value: str) -> Any:
    """``result`` (a :class:`~fits.deploy.flower_launch.RunResult` or a stand-in) with
    ``field`` set to ``value``."""
    import dataclasses

    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return dataclasses.replace(result, **{field: value})
    setattr(result, field, value)
    return result


def run_local_federation(
    launch: Any,
    sites: dict[str, Path],
    config: dict,
    progress: Callable[[str], None] | None = None,
    *,
    run_timeout: float | None = None,
    allow_more: str = "FITS_RUN_TIMEOUT=SECONDS",
    **options: Any,
) -> Any:
    """Start a :class:`~fits.deploy.flower_launch.LocalFederation` of ``sites`` (with
    ``options``), run ``config`` on it and stop it; a launch error ends the command
    (exit 1).  The run's time limit is ``run_timeout`` seconds (None:
    ``FITS_RUN_TIMEOUT``, default :data:`RUN_TIMEOUT`); a run stopped at it says that
    ``allow_more`` (the calling command's way to raise it) allows more.  ``progress``
    gets the run's progress lines (``LocalFederation.run``)."""
    if run_timeout is None:
        run_timeout = float(os.environ.get("FITS_RUN_TIMEOUT", RUN_TIMEOUT))
    late = getattr(launch, "RunTimeoutError", ())
    try:
        with launch.LocalFederation(sites, **options) as fed:
            typer.echo(f"SuperLink at {fed.superlink}; sites {', '.join(sites)}", err=True)
            return fed.run(config, timeout=run_timeout, progress=progress)
    except launch.FederationError as exc:
        if isinstance(exc, late):  # name the option of the command that is running
            _fail(
                f"run {exc.run_id} did not finish within {exc.timeout:g} s, its time "
                f"limit, and was stopped ({allow_more} allows more)"
            )
        _fail(str(exc))


@contextlib.contextmanager
def _fit_in_process(
    sites: dict[str, Path],
    kernels: dict[str, str],
    settings: dict[str, Any],
    config: dict,
    policy: Path | None = None,
) -> Iterator[Any]:
    """The run's synthesizer fitted here, in process, on the site tables (read as the
    sites read them, less the run's ``drop``), with the run config's options and every
    site's kernel (``kernels`` by site name, ``settings`` for all); its in-process
    sites' threads are stopped on leaving the block.  What the fit raises propagates
    (a ValueError in the words of :class:`~fits.FITSSynthesizer`); its warnings are
    not shown (the run gives them).  ``policy``: every site's policy file (read
    already, so a usage error is no longer possible here)."""
    import warnings

    from fits import FITSSynthesizer
    from fits.core.kernels import GaussianKernel, KNNKernel
    from fits.deploy.flower import read_run_config, site_drop, site_na_values
    from fits.flower_app import read_schema
    from fits.io import read_table

    synth: Any = None
    try:
        cfg = read_run_config(config)
        tables = {}
        for name, path in sorted(sites.items()):  # the coordinator's order: by name
            frame = read_table(path, na_values=site_na_values({}, config))
            gone = site_drop([str(c) for c in frame.columns], name, {}, config)
            tables[name] = frame.drop(columns=gone) if gone else frame
        schemes: dict[str, Any] = {
            n: (GaussianKernel if kernels.get(n) == "gaussian" else KNNKernel)(**settings)
            for n in tables
        }
        # one kernel for all (the sites' settings are the same): messages name no site
        first = next(iter(schemes.values()), None)
        same = all(k == first for k in schemes.values())
        kernel = first if same and first is not None else schemes
        synth = FITSSynthesizer(
            kernel,
            seed=cfg["seed"],
            kinds=cfg["kinds"],
            order=cfg["order"],
            schema=read_schema(cfg["schema"]) if cfg["schema"] else None,
            rules=cfg["rules"],
            near_linear=cfg.get("near_linear", False),
            **({"design": cfg["design"]} if cfg["design"] else {}),
            column_designs=cfg["column_designs"] or None,
            column_models=cfg["column_models"] or None,
            boosting=cfg["boosting"] or None,
            secure_aggregation=cfg["secure"],
            site_policy=read_site_policy(policy),
        )  # smoothing "fixed": a tune round would check nothing more, nor take a row
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # notes on the tables: the run says them
            synth.fit(tables)
        yield synth
    finally:
        if synth is not None and hasattr(synth, "schema_"):
            synth.coordinator.transport.close()  # the in-process sites' threads


def _check_kernel_settings(
    sites: dict[str, Path],
    kernels: dict[str, str],
    settings: dict[str, Any],
    config: dict,
    then: Callable[[Any], None] | None = None,
    policy: Path | None = None,
) -> None:
    """Exit 2 with ``fits synthesize``'s message when it would refuse the sites' kernel
    settings (``--column-penalty`` of a column that is not discrete or out of its
    kind's range, ``--relevance`` weights that would do nothing: see
    :func:`~fits.core.kernels.check_kernel_settings`).  Those checks need the merged
    schema (kinds, chain order, rules, boosted columns), so the sites' tables are set up
    here in process, with the run's options, before any process starts
    (:func:`_fit_in_process`; each site runs them again at configure, but knows neither
    the boosted columns nor the rules).  Any other problem is left to the run, which
    reports it as ``fits synthesize`` would.  ``then(synth)``, if given, is called
    with the fitted synthesizer (the estimate of a large request, :func:`_estimate`);
    where the fit fails it is not called."""
    fitted: list[Any] = []
    try:
        with _fit_in_process(sites, kernels, settings, config, policy) as synth:
            fitted.append(synth)
            if then is not None:
                then(synth)
    except typer.Exit:  # then's own refusal
        raise
    except ValueError as exc:
        if fitted:  # what then's draw raised: the run reports it
            return
        # "<site>'s kernel: " first where the sites' kernels differ (KNN and Gaussian)
        site, _, text = str(exc).partition("'s kernel: ")
        site = f"{site}'s kernel: " if site in sites else ""
        text = text if site else str(exc)
        if text.startswith("column_penalties["):
            _fail(f"{site}--column-penalty {text.removeprefix('column_penalties')}", 2)
        if text.startswith("relevance["):
            _fail(f"{site}--relevance {text.removeprefix('relevance')}", 2)
    except Exception:  # noqa: BLE001, S110 - the run reports it, with the sites' words
        pass


def _estimate(rows: int, out: Path, run_timeout: float, quiet: bool) -> Callable[[Any], None]:
    """What :func:`_check_kernel_settings` calls with the synthesizer fitted in process
    for a request of more than :data:`fits.io.LARGE_REQUEST_ROWS` rows: ``fits
    synthesize``'s estimate (:func:`fits.cli.main._write_stream` around
    :func:`fits.io.write_stream`), before any process starts.  The first
    :data:`fits.io.ESTIMATE_ROWS` rows are drawn and timed; a table that would not fit
    in the free space of ``out``'s file system is refused with ``fits synthesize``'s
    message (exit 2); else the estimated time and size are printed on stderr (unless
    ``quiet``), the time as that of the draw here (Flower's message rounds add to it),
    with a warning when that alone exceeds ``run_timeout`` (``--run-timeout``), which
    would stop the run with no output.  (The ServerApp estimates the size again from
    its own first rows, and stops a run whose table the disk cannot hold.)"""
    import shutil
    import warnings

    from fits import io as fits_io
    from fits.federation.coordinator import BOOSTING_PROGRESS

    from .main import _human_seconds

    def estimate(synth: Any) -> None:
        one_off = [0.0]  # when the boosted columns' models (fitted once) were done

        def timed(column: str, done: int, total: int) -> None:
            if column == BOOSTING_PROGRESS:
                one_off[0] = time.perf_counter()

        sample_rows = fits_io.ESTIMATE_ROWS
        asked = time.perf_counter()
        chunks = synth.iter_sample(rows, first_chunk_rows=sample_rows, progress=timed)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # notes on the draw: the run gives them
                first = next(chunks)
        finally:
            chunks.close()
        came = time.perf_counter()
        fitted = max(one_off[0], asked)  # the boost rounds are not paid again per chunk
        seconds = (fitted - asked) + (came - fitted) * rows / sample_rows
        size = fits_io.encoded_size(first, out.suffix.lower()) * rows / sample_rows
        free = shutil.disk_usage(fits_io.through_links(out).parent).free
        if size > free:  # fits.io.write_stream's refusal, before any process starts
            _fail(
                f"--rows {rows}: the output would take about {fits_io.human_bytes(size)} "
                f"(estimated from the first {sample_rows} rows) but the file system of "
                f"--out {str(out)!r} has {fits_io.human_bytes(free)} free; ask for fewer "
                "rows or write elsewhere",
                2,
            )
        if not quiet:
            typer.echo(
                f"{rows:,} rows: estimated {_human_seconds(seconds)} and "
                f"{fits_io.human_bytes(size)} (from the first {sample_rows:,} rows, drawn "
                "in this process: Flower's message rounds add to the time; "
                f"{fits_io.human_bytes(free)} free)",
                err=True,
            )
        if seconds > run_timeout:
            typer.echo(
                f"warning: drawing {rows:,} rows may take longer than the run's time limit, "
                f"--run-timeout {run_timeout:g} s, which stops it with no output; allow "
                "more with --run-timeout SECONDS (or FITS_RUN_TIMEOUT=SECONDS)",
                err=True,
            )

    return estimate


@federate.command()
def local(
    data: Annotated[list[Path], typer.Argument(help="One table per site (CSV or Parquet).")],
    out: Out,
    rows: Rows = None,
    known: Known = None,
    max_tries: MaxTries = None,
    kernel: Annotated[
        list[str],
        typer.Option("--kernel", help="Scheme per site, in order (knn or gaussian)."),
    ] = [],  # noqa: B006
    seed: Seed = 0,
    kind: Kinds = [],  # noqa: B006
    order: OrderOpt = None,
    schema: SchemaOpt = None,
    round_timeout: Timeout = 600.0,
    audit: Audit = None,
    secure_aggregation: Secure = False,
    policy: PolicyFile = None,
    batch_size: BatchSize = 0,
    no_rules: NoRules = False,
    near_linear: NearLinear = True,
    design: DesignOpt = None,
    column_design: ColumnDesignOpt = None,
    column_model: ColumnModelOpt = None,
    boosting: BoostingOpt = None,
    round_cost_bytes: RoundCost = 0,
    drop: DropOpt = None,
    smoothing: SmoothingOpt = "fixed",
    tune_relevance: TuneRelevanceOpt = None,
    relevance_budget: RelevanceBudgetOpt = None,
    ordinal_penalty: OrdinalPenaltyOpt = None,
    nominal_penalty: NominalPenaltyOpt = None,
    column_penalty: ColumnPenaltyOpt = None,
    relevance: RelevanceOpt = None,
    na_values: NaValuesOpt = None,
    process_per_message: Annotated[
        bool,
        typer.Option(
            "--process-per-message",
            help="Answer each message in a new ClientApp process (Flower's default) "
            "instead of one warm process per site. Slower; the same table.",
        ),
    ] = False,
    run_timeout: RunTimeout = RUN_TIMEOUT,
    quiet: Quiet = False,
) -> None:
    """Try a real federation on this machine: a SuperLink and one SuperNode per file.

    Every process runs on 127.0.0.1 without TLS and is stopped at the end. Each site
    answers its messages in one long-lived worker process unless
    --process-per-message. With --policy every site enforces the limits of that file; a
    site that refuses a request stops the run, and the error names the site and the
    limit. --ordinal-penalty, --nominal-penalty, --column-penalty and --relevance set
    every site's kernel, as fits synthesize does; the table equals fits synthesize's
    with the files in name order.

    For more than 100,000 --rows it first fits here and draws the first 8,192 rows, as
    fits synthesize does: it prints the estimated time and size (not with --quiet),
    refuses a table the disk cannot hold (exit 2), and warns when the draw alone may
    outlast --run-timeout (default 3600 s), which stops the run with no output.

    Afterwards it prints, as fits synthesize does, the exact-copy rate and the
    distance-to-closest-record check of the table against the site files, with a
    warning when the table copies real rows.

    Example:

      fits federate local a.csv b.csv c.csv \\
          --kernel knn --kernel gaussian --kernel knn \\
          --rows 5000 --out synthetic.csv
    """
    from fits.deploy import flower_launch  # runs without Flower: the argument checks

    if kernel and len(kernel) != len(data):
        _fail(f"give one --kernel per site ({len(data)}), or none", 2)
    column_penalties = _kernel_options(kernel, nominal_penalty, column_penalty, relevance)
    weighted = (
        ordinal_penalty is not None
        or nominal_penalty is not None
        or bool(column_penalties)
        or bool(relevance)
    )
    _check_site_files(data)
    repeated = repeated_site_files(data)
    if repeated is not None:
        _fail(repeated, 2)
    if secure_aggregation and len(data) < 2:  # fits synthesize's refusal (its wording)
        _fail(SECURE_ONE_SITE, 2)
    names = [p.stem for p in data]
    for k, path in enumerate(data):
        if names.index(path.stem) != k:
            first = data[names.index(path.stem)]
            _fail(
                f"site tables {str(first)!r} and {str(path)!r} would both be site "
                f"{path.stem!r} (a site is named after its file); rename one",
                2,
            )
    for path in data:  # what each site's SuperNode is given in its node config
        try:
            flower_launch.check_node_config_text("the site table", str(path.resolve()))
        except flower_launch.FederationError as exc:
            _fail(str(exc), 2)
    inputs = [("the site table", p) for p in data]
    if known is not None:
        inputs.append(("--known", known))
    if schema is not None:
        inputs.append(("--schema", schema))
    if policy is not None:
        inputs.append(("--policy", policy))
    for label, path in inputs:
        if path.is_dir():
            _fail(f"{label} {str(path)!r} is a directory, not a file", 2)
        if not path.is_file():
            _fail(f"{label} {str(path)!r}: no such file", 2)
    from fits.io import DataFileError, OutputError, check_output, check_suffix

    try:
        check_output(out, inputs)
        check_suffix(out, "output")
        if audit is not None:
            check_output(audit, inputs, option="--audit")
    except (OutputError, DataFileError) as exc:
        _fail(str(exc), 2)
    if policy is not None:
        try:
            site_policy = read_site_policy(policy)
        except ValueError as exc:
            _fail(str(exc), 2)
        problem = pooled_without_secure(site_policy, secure_aggregation)
        if problem:
            _fail(problem, 2)
    if schema is not None:  # as fits synthesize reads it, before any process starts
        try:
            from fits.core.schema import Schema

            Schema.from_json(schema.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError) as exc:
            _fail(f"{schema}: not a usable schema file ({exc}); write one with `fits schema`")
    columns = None
    if kind or order or column_design or column_model or boosting or weighted or tune_relevance:
        columns = _header(data[0])  # the columns these options name
    # --drop: every site's header, checked as fits synthesize checks it (the sites drop
    # the columns from their own tables: run config drop)
    site_headers = {n: _header(p) for n, p in zip(names, data, strict=True)} if drop else None
    config = _run_config(
        out,
        rows,
        seed,
        kind,
        order,
        schema,
        round_timeout,
        len(data),
        audit,
        secure_aggregation,
        batch_size,
        not no_rules,
        design.value if design is not None else "",
        round_cost_bytes,
        column_design,
        column_model,
        boosting,
        near_linear=near_linear,
        columns=columns,
        known=known,
        drop=drop,
        site_headers=site_headers,
        smoothing=smoothing,
        tune_relevance=tune_relevance,
        relevance_budget=relevance_budget,
        max_tries=max_tries,
        na_values=na_values,
    )
    settings: dict[str, Any] = {}
    if weighted:  # named as fits synthesize names them: the headers left after --drop
        assert columns is not None
        if drop:
            gone = set(match_columns(drop, columns, "--drop"))
            columns = [c for c in columns if c not in gone]
        try:
            column_penalties = match_keys(column_penalties, columns, "--column-penalty")
            relevance_weights = match_relevance(parse_relevance(relevance, columns), columns)
        except ColumnNameError as exc:
            _fail(str(exc), 2)
        settings = kernel_settings(
            ordinal_penalty, column_penalties, relevance_weights, nominal_penalty
        )
    if schema is not None:  # its columns against the sites' (after --drop), as fits
        # synthesize checks them before its fit: the run's setup said so after ~48 s
        from fits.core.schema import Schema

        from .main import _check_schema_columns

        header = _header(data[0])
        gone = set(match_columns(drop, header, "--drop")) if drop else set()
        _check_schema_columns(
            schema,
            Schema.from_json(schema.read_text(encoding="utf-8-sig")),  # read above
            [c for c in header if c not in gone],
            names[0],
            bool(drop),
        )
    if known is not None:  # read, and its header checked, before any process starts
        from .known import check_known_for_sites

        check_known_for_sites(
            known,
            _header(data[0]),
            drop=drop or [],
            kinds=kind,
            schema=schema,
        )
    launch = _launch()  # every usage error above is reported with or without Flower
    # a file no site could read (empty, no table, a header alone) or sites whose columns
    # differ stop the command now: the run's setup round said so only after ~20 s of
    # starting Flower
    check_site_tables(dict(zip(names, data, strict=True)), drop, policy, secure_aggregation)
    check_site_setup(dict(zip(names, data, strict=True)), config)
    kernels = dict(zip(names, kernel, strict=True)) if kernel else {}
    from fits.cli.errors import interruptible
    from fits.io import LARGE_REQUEST_ROWS

    # a large request: fits synthesize's estimate of its time and size (and its refusal
    # of a table the disk cannot hold), from a fit here and its first rows
    large = known is None and rows is not None and rows > LARGE_REQUEST_ROWS
    if settings or large:
        if large and not quiet:
            typer.echo(
                f"--rows {rows:,}: estimating the run's time and size (a fit in this "
                "process and its first rows) ...",
                err=True,
            )
        with interruptible("nothing was started or written"):
            _check_kernel_settings(
                dict(zip(names, data, strict=True)),
                kernels,
                settings,
                config,
                then=_estimate(rows, out, run_timeout, quiet) if large and rows else None,
                policy=policy,
            )

    # a stop signal unwinds through LocalFederation.__exit__, which stops the SuperLink
    # and the SuperNodes it started; the ServerApp, stopped mid-write, cannot remove its
    # temporary output file, so this command removes it (only this run's, by name and age).
    # The ServerApp writes to a staging file, put in place as --out only at the very end:
    # a signal after the ServerApp wrote it (while the processes stop, or during the
    # release check) left --out written, or replaced, under "no output was written"
    from .release import check_local_run  # fits synthesize's check: the tables are here

    staging = staging_path(out)
    config["output"] = str(staging)
    started = time.time()
    # the staging file is recorded in a working directory of this process for as long
    # as it may exist: killed outright (SIGKILL), this process leaves it (a complete
    # table that never passed the release check), and the next federation or run of
    # this user removes it with that directory (flower_launch.remove_stale_workdirs)
    with flower_launch.staged_file(staging):
        try:
            with interruptible("the local federation was stopped; no output was written"):
                result = run_local_federation(
                    launch,
                    dict(zip(names, data, strict=True)),
                    config,
                    run_timeout=run_timeout,
                    allow_more="--run-timeout SECONDS, or FITS_RUN_TIMEOUT=SECONDS,",
                    kernels=kernels,
                    policy=policy,
                    warm=not process_per_message,
                    kernel_settings=settings,
                )
                _report(result, out, staging)
                if not staging.is_file():
                    _fail(f"run {result.run_id} finished, but wrote no table (to {str(out)!r})")
                check_local_run(dict(zip(names, data, strict=True)), config)
                from fits.io import through_links

                try:  # through a symbolic link: the file it leads to (as fits synthesize)
                    os.replace(staging, through_links(out))
                except OSError as exc:
                    _fail(f"cannot put the table in place as --out {str(out)!r}: {exc}")
        finally:
            remove_temporary_outputs(staging, started)
            staging.unlink(missing_ok=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(federate())
