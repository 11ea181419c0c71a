"""Start Flower's processes for fits and submit runs: what ``fits federate`` does.

Three roles, each a process of Flower's own (``pip install "fits[flower]"``):

* the **SuperLink** (the coordinator's machine): :func:`superlink_command`;
* one **SuperNode per site**, started with the site's data path and kernel in its node
  config: :func:`supernode_command`;
* the **run**, submitted from any machine that reaches the SuperLink:
  :func:`submit_run` writes the app project and a private Flower config, calls
  ``flwr run``, and waits for the run's end with ``flwr ls``.

:class:`LocalFederation` starts a SuperLink and several SuperNodes on 127.0.0.1 (the
tests, the benchmark and ``fits federate local`` use it) and always stops every process
it started:

* on leaving its ``with`` block, normally or by an exception (SIGTERM, then SIGKILL of
  each process group, then any process left with a Flower home under its folder:
  the SuperExecs and the ServerApp / ClientApp processes Flower started);
* when this process gets SIGTERM or SIGHUP (what ``timeout``, schedulers and a closed
  terminal send): the federation installs handlers, in the main thread, that turn the
  signal into ``SystemExit(128 + signal)``, so the cleanup above runs, and then let the
  signal end the process as it would have;
* when this process dies without a chance to clean up (SIGKILL): on Linux every
  process fits starts asks the kernel for a parent-death signal (SIGTERM, through
  ``prctl(PR_SET_PDEATHSIG)``), and Flower's processes stop their own helpers on it.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FederationError",
    "LocalFederation",
    "check_address",
    "check_pem",
    "check_policy_file",
    "die_with_parent",
    "exit_on_signals",
    "StopSignals",
    "read_rounds",
    "remove_stale_workdirs",
    "round_logger",
    "stop_process_group",
    "PORT_TRIES",
    "PortTakenError",
    "RunResult",
    "RunTimeoutError",
    "STOP_GRACE",
    "SUPEREXEC_DIR",
    "staged_file",
    "submit_run",
    "superlink_command",
    "supernode_command",
    "worker_command",
]


class FederationError(RuntimeError):
    """A Flower run failed or could not be started; the message says why."""


class RunTimeoutError(FederationError):
    """A run that did not finish within its time limit, and was stopped.

    Attributes
    ----------
    run_id : int
    timeout : float
        The limit, in seconds.
    """

    def __init__(self, message: str, run_id: int, timeout: float) -> None:
        super().__init__(message)
        self.run_id = int(run_id)
        self.timeout = float(timeout)


#: prctl option: the signal a process gets when the thread that started it dies (Linux).
_PR_SET_PDEATHSIG = 1
#: Signals that stop fits cleanly (SIGINT already raises KeyboardInterrupt).
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that gives the child a parent-death signal (Linux; else None).

    The child runs ``prctl(PR_SET_PDEATHSIG, sig)`` between fork and exec, so the
    kernel sends it ``sig`` when the thread that started it exits -- also when this
    process is killed with SIGKILL and cleans up nothing.  If the parent died before
    the call, the child sends itself ``sig`` at once.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent is already gone
            os.kill(os.getpid(), int(sig))

    return preexec


class StopSignals:
    """What :func:`exit_on_signals` yields: the stop signal received (if any), and
    whether the block is cleaning up (:meth:`cleaning`), when a signal must not
    interrupt it."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._cleaning = 0

    @property
    def is_cleaning(self) -> bool:
        """True inside :meth:`cleaning`."""
        return self._cleaning > 0

    @contextmanager
    def cleaning(self) -> Iterator[None]:
        """Inside this block a stop signal raises nothing: it is recorded and sent again
        when :func:`exit_on_signals` ends, so the clean-up (SIGKILL of what is left,
        removal of the working directory) runs to its end."""
        self._cleaning += 1
        try:
            yield
        finally:
            self._cleaning -= 1


@contextmanager
def exit_on_signals() -> Iterator[StopSignals]:
    """Turn SIGTERM and SIGHUP into ``SystemExit(128 + signal)`` inside the block.

    So ``finally`` clauses and ``with`` blocks run (and stop what they started) when a
    scheduler or ``timeout`` stops this process.  On leaving the block the previous
    handlers come back and a signal that arrived is sent again, so that the process
    then ends as that signal ends it (or the previous handler runs): whoever sent it
    sees the usual outcome.  Inside :meth:`StopSignals.cleaning` of the object it
    yields a signal raises nothing (the clean-up must finish); anywhere else every
    signal raises, also a second one (should the first exception have been lost, the
    process must not run on).  Only the main thread can install handlers; elsewhere
    this does nothing.
    """
    state = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    received = state.received

    def handler(signum: int, frame: object) -> None:
        if not received:
            received.append(signum)
        if state.is_cleaning:  # let the clean-up finish; the signal is sent again after
            return
        raise SystemExit(128 + received[0])

    previous = {sig: signal.signal(sig, handler) for sig in _STOP_SIGNALS}
    try:
        yield state
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if received:
            os.kill(os.getpid(), received[0])


def _flower_bin(name: str) -> str:
    """A Flower executable next to this Python (where ``fits[flower]`` put it)."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise FederationError(
            f'Flower\'s {name!r} command is not installed: pip install "fits[flower]"'
        )
    return found


#: Folder, in a Flower home, of fits's ``flower-superexec``
#: (:func:`fits.deploy.flower_superexec.write_shim`; ``flower_env(superexec=True)``).
SUPEREXEC_DIR = ".fits-bin"


def flower_env(home: str | Path, *, superexec: bool = False) -> dict[str, str]:
    """Environment for a Flower process: its own FLWR_HOME, no telemetry, no installs.

    Flower starts its helper processes (``flower-superexec``, ``flwr-serverapp``,
    ``flwr-clientapp``) from PATH, so the directory of this Python comes first.

    ``superexec=True`` (a SuperLink's or SuperNode's environment) writes fits's
    ``flower-superexec`` into ``home/.fits-bin`` (:data:`SUPEREXEC_DIR`) and puts that
    folder first: the SuperExec the process starts is Flower's, reaping the ServerApp
    and ClientApp processes it starts (:mod:`fits.deploy.flower_superexec`; Flower
    1.42's left each ended one a zombie until its next start of one).
    """
    env = dict(os.environ)
    env["FLWR_HOME"] = str(home)
    env["FLWR_TELEMETRY_ENABLED"] = "0"
    env["FLWR_DISABLE_UPDATE_CHECK"] = "1"
    env["FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION"] = "1"
    env.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.1")  # start a site's work sooner
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    if superexec:
        from fits.deploy.flower_superexec import write_shim

        folder = write_shim(Path(home) / SUPEREXEC_DIR)
        if folder is not None:
            env["PATH"] = str(folder) + os.pathsep + env["PATH"]
    return env


def check_address(address: str, option: str = "--superlink") -> None:
    """Refuse a SuperLink address Flower cannot use: it needs ``host:port`` (``[::1]:port``
    for IPv6), a port from 1 to 65535, no URL prefix.  Flower's own check comes only
    after its processes started (exit 1, or a SuperNode retrying a host that is no host).

    Raises
    ------
    FederationError
        Naming the option, the address and what to write.
    """
    text = address.strip()
    host, colon, port = text.rpartition(":")
    problem = ""
    if "://" in text:
        problem = "write it without a URL prefix"
    elif not colon or not host or host in ("[", "[]"):
        problem = "write it as host:port"
    elif not port.isdigit() or not 1 <= int(port) <= 65535:
        problem = "its port must be a number from 1 to 65535"
    elif ":" in host and not (host.startswith("[") and host.endswith("]")):
        problem = "write an IPv6 address in brackets, as [::1]:9093"
    if problem:
        raise FederationError(
            f"{option} {address!r}: {problem} (e.g. coordinator.example.org:9093, the "
            "host and the --port of `fits federate superlink`)"
        )


def check_pem(path: str | Path, option: str, what: str = "certificate") -> None:
    """Refuse a TLS file that is missing, a folder, unreadable or not PEM: Flower reads
    it only after its processes started, where a CA file that is no certificate stopped
    the SuperNode with a traceback and left it hanging.  ``what``: ``"certificate"``
    (one or more PEM certificates) or ``"key"`` (a PEM private key).

    Raises
    ------
    FederationError
        Naming the option, the file and what it must hold.
    """
    shown = f"{option} {str(path)!r}"
    file = Path(path)
    if file.is_dir():
        raise FederationError(f"{shown} is a folder; give the {what} file (PEM)")
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise FederationError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    if what == "key":
        ok = b"-----BEGIN" in data and b"PRIVATE KEY-----" in data
    else:
        from cryptography import x509

        try:
            ok = bool(x509.load_pem_x509_certificates(data))
        except ValueError:
            ok = False
    if not ok:
        kind = "a private key" if what == "key" else "a certificate"
        raise FederationError(
            f"{shown} is not {kind} in PEM form (text starting with "
            f"'-----BEGIN {'PRIVATE KEY' if what == 'key' else 'CERTIFICATE'}-----'); "
            "give the PEM file"
            + (
                " (a DER file converts with `openssl x509 -inform der -in FILE -out FILE.pem`)"
                if what != "key"
                else ""
            )
        )


def superlink_command(
    host: str = "127.0.0.1",
    port: int = 9093,
    *,
    insecure: bool = False,
    certificates: Sequence[str] = (),
) -> list[str]:
    """The ``flower-superlink`` command line for the coordinator's machine.

    ``certificates`` are ``(certfile, keyfile, ca_certfile)`` for TLS; without them
    ``insecure=True`` is required.
    """
    cmd = [_flower_bin("flower-superlink"), "--host", host, "--port", str(port)]
    cmd.append("--disable-runtime-dependency-installation")
    if insecure:
        cmd.append("--insecure")
    elif len(certificates) == 3:
        for path, what in zip(certificates, ("certificate", "key", "certificate"), strict=True):
            check_pem(path, "--tls", what)
        for flag, path in zip(
            ("--ssl-certfile", "--ssl-keyfile", "--ssl-ca-certfile"), certificates, strict=True
        ):
            cmd += [flag, str(path)]
    else:
        raise FederationError("give the SuperLink TLS certificates, or choose --insecure")
    return cmd


def supernode_command(
    superlink: str,
    data: str | Path,
    *,
    name: str = "",
    kernel: str = "knn",
    bandwidth: float = 0.0,
    knn_budget: int = 0,
    port: int = 9094,
    insecure: bool = False,
    root_certificates: str | None = None,
    policy: str | Path | None = None,
    audit: str | Path | None = None,
    seed: str = "",
    isolation: str = "subprocess",
    drop: Sequence[str] = (),
    ordinal_penalty: float | None = None,
    nominal_penalty: float | None = None,
    column_penalties: Mapping[str, float] | None = None,
    relevance: Mapping[str, Mapping[str, float]] | None = None,
    max_wait_time: float | None = None,
    na_values: Sequence[str] = (),
) -> list[str]:
    """The ``flower-supernode`` command line for one site: Flower's SuperNode, started
    through :mod:`fits.deploy.flower_supernode` (which shortens its fixed 3 s wait for
    work; the arguments are ``flower-supernode``'s).

    ``isolation="subprocess"`` (Flower's default): the SuperNode starts a new ClientApp
    process per message.  ``"process"``: it serves its Runtime API on ``port`` to a
    task executor started apart -- fits' warm site process
    (:mod:`fits.deploy.flower_worker`, :func:`worker_command`).

    The site's data path, name, kernel, policy file, audit file, noise seed (for
    private model fitting; ``""``: the site draws its own) and the columns it leaves out
    of its table (``drop``, resolved by the site as ``fits synthesize --drop`` resolves
    them), and the texts it reads as missing values (``na_values``, ``--na-values``
    items: TEXT or COLUMN=TEXT) go into the SuperNode's node config; the data never
    leaves the site.  So do
    the kernel's penalties and relevance weights, when given (node config
    ``ordinal-penalty``, ``nominal-penalty``, ``column-penalties``, ``relevance``:
    :mod:`fits.core.kernel_settings`; None or empty: the kernel's defaults).  A policy
    file and the kernel's settings are checked here
    (:meth:`fits.federation.policy.SitePolicy.from_json`,
    :func:`fits.deploy.flower.site_kernel`), before the site starts.

    ``max_wait_time``: seconds the SuperNode waits for its SuperLink: first for its port
    to take a connection, before Flower starts (exit
    :data:`~fits.deploy.flower_supernode.UNREACHABLE_EXIT` after that long), then, as
    Flower's ``--max-wait-time``, whenever a request cannot reach it (exit 1); None:
    without end (Flower's default).
    """
    path = Path(data).resolve()
    if not path.is_file():
        raise FederationError(f"{path}: no such file (the site's data)")
    check_address(superlink)
    if root_certificates and not insecure:
        check_pem(root_certificates, "--ca")
    node_config = {
        "data-path": str(path),
        "name": name or path.stem,
        "kernel": kernel,
        "bandwidth": float(bandwidth),
        "knn-budget": int(knn_budget),
    }
    if policy:
        check_policy_file(policy)
        node_config["policy"] = str(Path(policy).resolve())
    if seed:
        from fits.deploy.flower import site_seed

        try:
            site_seed(seed)
        except ValueError as exc:
            raise FederationError(str(exc)) from None
        node_config["seed"] = str(seed)
    if audit:
        audit_path = Path(audit).resolve()
        if not audit_path.parent.is_dir():
            raise FederationError(f"{audit_path.parent}: no such folder (for the audit log)")
        _check_audit_path(audit_path, {"the site's data": path, "the site policy": policy})
        node_config["audit"] = str(audit_path)
    if drop:
        from fits.core.names import format_column_list

        node_config["drop"] = format_column_list(drop)
    if na_values:
        from fits.core.names import format_column_list

        node_config["na-values"] = format_column_list(na_values)
    _add_kernel_settings(node_config, ordinal_penalty, nominal_penalty, column_penalties, relevance)
    parts = []
    for k, v in node_config.items():
        check_node_config_text(k, v)
        if isinstance(v, str) and '"' in v and "'" not in v and v.isprintable():
            # Flower reads key="..." up to the first '"': a TOML literal string instead
            parts.append(f"{k}='{v}'")
        else:
            parts.append(f"{k}={json.dumps(v)}" if isinstance(v, str) else f"{k}={v!r}")
    _flower_bin("flower-supernode")  # installed, or a clear error
    cmd = [
        _flower_bin("fits-flower-supernode"),  # Flower's SuperNode, a shorter idle poll
        "--superlink",
        superlink,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--node-config",
        " ".join(parts),
    ]
    if isolation not in ("subprocess", "process"):
        raise FederationError(f"isolation must be 'subprocess' or 'process', got {isolation!r}")
    if isolation == "process":
        cmd += ["--isolation", "process"]
    if max_wait_time is not None:
        if not max_wait_time > 0:
            raise FederationError(
                f"max_wait_time {max_wait_time!r}: give the seconds (> 0), or None to wait "
                "without end"
            )
        cmd += ["--max-wait-time", f"{float(max_wait_time):g}"]
    if insecure:
        cmd.append("--insecure")
    elif root_certificates:
        cmd += ["--root-certificates", str(root_certificates)]
    else:
        raise FederationError("give the site the SuperLink's CA certificate, or --insecure")
    return cmd


def _check_audit_path(audit: Path, inputs: Mapping[str, str | Path | None]) -> None:
    """Refuse an audit log (appended to as the site answers) that is a folder or one of
    the site's inputs: appending to the data file would change the site's table."""
    from fits.io import same_file

    if audit.is_dir():
        raise FederationError(
            f"--audit {str(audit)!r} is a folder; give a file name inside it "
            "(e.g. site-audit.jsonl)"
        )
    for label, source in inputs.items():
        if source and (audit == Path(source).resolve() or same_file(audit, source)):
            raise FederationError(
                f"--audit {str(audit)!r} is {label}: the audit log is appended to and would "
                "change it; choose another file (e.g. site-audit.jsonl)"
            )


def check_node_config_text(key: str, value: Any) -> None:
    """Refuse a node config text Flower's ``--node-config`` cannot carry: one holding both
    quote characters (Flower reads a quoted value up to its first closing quote, so the
    SuperNode could not parse its own command line, exited at start, and the run waited
    for that site until its round timeout, ten minutes by default).

    Raises
    ------
    FederationError
        Naming the key and the value, and saying to rename.
    """
    if isinstance(value, str) and '"' in value and "'" in value:
        raise FederationError(
            f"{key} {value!r} holds both ' and \", which a Flower SuperNode's node config "
            "cannot carry; rename the file, folder or column so that it holds at most one "
            "kind of quote"
        )


def _add_kernel_settings(
    node_config: dict[str, Any],
    ordinal_penalty: float | None,
    nominal_penalty: float | None,
    column_penalties: Mapping[str, float] | None,
    relevance: Mapping[str, Mapping[str, float]] | None,
) -> None:
    """Put the kernel's penalties and relevance weights that are given into
    ``node_config``, checked as the site reads them (:class:`FederationError`)."""
    if ordinal_penalty is None and nominal_penalty is None and not column_penalties:
        if not relevance:
            return
    from fits.core.kernel_settings import format_column_penalties, format_relevance
    from fits.deploy.flower import site_kernel

    if ordinal_penalty is not None:
        node_config["ordinal-penalty"] = float(ordinal_penalty)
    if nominal_penalty is not None:
        node_config["nominal-penalty"] = float(nominal_penalty)
    if column_penalties:
        node_config["column-penalties"] = format_column_penalties(column_penalties)
    if relevance:
        node_config["relevance"] = format_relevance(relevance)
    try:
        site_kernel(node_config)
    except ValueError as exc:
        raise FederationError(str(exc)) from None


def worker_command(port: int, parent_pid: int | None = None) -> list[str]:
    """The command line of a site's warm ClientApp process
    (:mod:`fits.deploy.flower_worker`) for a SuperNode started with
    ``isolation="process"`` whose Runtime API listens on 127.0.0.1:``port``."""
    cmd = [sys.executable, "-m", "fits.deploy.flower_worker"]
    cmd += ["--runtime-api-address", f"127.0.0.1:{port}", "--insecure"]
    if parent_pid is not None:
        cmd += ["--parent-pid", str(parent_pid)]
    return cmd


def check_policy_file(path: str | Path) -> None:
    """Raise :class:`FederationError` (naming the file and the field) unless ``path`` is
    a readable site policy (:meth:`fits.federation.policy.SitePolicy.from_json`)."""
    from fits.federation.policy import SitePolicy

    try:
        SitePolicy.from_json(path)
    except ValueError as exc:
        raise FederationError(str(exc)) from None


@dataclass
class RunResult:
    """How a Flower run ended."""

    run_id: int
    status: str
    details: str
    seconds: float
    log: str

    @property
    def ok(self) -> bool:
        """True when the run completed."""
        return self.status == "finished:completed"


def _write_flower_config(home: Path, superlink: str, insecure: bool, ca: str | None) -> None:
    lines = ["[superlink]", 'default = "fits"', "", "[superlink.fits]"]
    lines.append(f"address = {json.dumps(superlink)}")
    if insecure:
        lines.append("insecure = true")
    elif ca:
        lines.append(f"root-certificates = {json.dumps(str(Path(ca).resolve()))}")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")


def _run_config_toml(config: Mapping[str, Any]) -> str:
    """The run config as a TOML file's text (``flwr run --run-config FILE.toml``).

    A file rather than ``key=value`` pairs on the command line: Flower's parser of those
    pairs cannot hold a string with a quote in it (an analysis's options are JSON).
    JSON's string escapes are a subset of TOML's basic strings, so ``json.dumps`` writes
    each string."""
    lines = []
    for k, v in config.items():
        if isinstance(v, bool):
            value = "true" if v else "false"
        elif isinstance(v, (int, float)):
            value = repr(v)
        else:
            value = json.dumps(str(v))
        lines.append(f"{k} = {value}")
    return "\n".join(lines) + "\n"


def submit_run(
    superlink: str,
    run_config: Mapping[str, Any],
    *,
    insecure: bool = False,
    root_certificates: str | None = None,
    timeout: float = 3600.0,
    poll: float = 0.5,
    progress: Any = None,
    watch: Callable[[], None] | None = None,
    stop_on_interrupt: bool = True,
) -> RunResult:
    """Submit the fits app to a SuperLink and wait until the run ends.

    Parameters
    ----------
    superlink : str
        ``host:port`` of the SuperLink.
    run_config : mapping
        Keys of :data:`fits.deploy.flower.RUN_CONFIG_DEFAULTS` (``output``, ``rows``, ...).
    insecure, root_certificates
        How to reach the SuperLink (plain HTTP, or TLS with this CA certificate).
    timeout : float
        Seconds to wait for the run before stopping it.
    progress : callable, optional
        Called with the run's status text while waiting, and with the :data:`PROGRESS`
        lines of the ServerApp's log (without the prefix): the sites connecting, an
        analysis's fitting rounds (:func:`read_rounds`).
    watch : callable, optional
        Called about once a second while the run goes on; a :class:`FederationError` it
        raises stops the run (``flwr stop``) and ends the wait with that error
        (:meth:`LocalFederation.run`: a site's process that ended).
    stop_on_interrupt : bool, default True
        On Ctrl-C or a stop signal, ask the SuperLink to stop the run (``flwr stop``,
        a Python process that takes a second or more, far more on a loaded machine)
        before raising.  :meth:`LocalFederation.submit` passes False: it kills its own
        SuperLink at once after, which ends the run, so the request only delayed the
        user's exit (a CI run measured 21 s from SIGTERM to exit, against a bound of
        about ``STOP_GRACE + KILL_WAIT`` = 7 s for the stop itself).
    """
    from fits.deploy.flower import RUN_CONFIG_DEFAULTS, write_app

    unknown = sorted(set(run_config) - set(RUN_CONFIG_DEFAULTS))
    if unknown:
        raise FederationError(f"unknown run config {unknown}; known: {list(RUN_CONFIG_DEFAULTS)}")
    check_address(superlink)
    if root_certificates and not insecure:
        check_pem(root_certificates, "--ca")
    remove_stale_workdirs()
    with tempfile.TemporaryDirectory(prefix=RUN_WORKDIR_PREFIX) as tmp:
        # its owner, so that the next federation removes it if this process is killed
        (Path(tmp) / OWNER_FILE).write_text(_process_identity(os.getpid()))
        home = Path(tmp) / "home"
        _write_flower_config(home, superlink, insecure, root_certificates)
        app = write_app(Path(tmp) / "app")
        env = flower_env(home)
        flwr = _flower_bin("flwr")
        start = time.monotonic()
        cmd = [flwr, "run", str(app), "fits", "--format", "json"]
        (Path(tmp) / "run-config.toml").write_text(_run_config_toml(run_config))
        cmd += ["--run-config", str(Path(tmp) / "run-config.toml")]
        done = _flwr_process(flwr, cmd[1:], env, Path(tmp))
        try:
            submitted = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise FederationError(
                f"flwr run failed: {(done.stdout + done.stderr).strip()[-2000:]}"
            ) from None
        if not submitted.get("success"):
            reason = str(submitted.get("error-message", submitted)).strip()
            if "unavailable" in reason.lower():  # nothing answered at that address
                raise FederationError(
                    f"cannot reach the SuperLink at {superlink}: check that `fits federate "
                    "superlink` runs there, the host and port, and TLS (--ca) or --insecure "
                    f"as the SuperLink was started (Flower: {' '.join(reason.split())})"
                )
            raise FederationError(f"the SuperLink at {superlink} refused the run: {reason}")
        run_id = int(submitted["run-id"])
        if progress is not None:
            progress("submitted")
        log, status, details = _follow_run(
            flwr,
            run_id,
            env,
            Path(tmp),
            start,
            timeout,
            poll=poll,
            progress=progress,
            watch=watch,
            stop_on_interrupt=stop_on_interrupt,
        )
        seconds = time.monotonic() - start
        return RunResult(run_id, status, details, seconds, log)


#: Seconds a ``flwr`` command (``run``, ``ls``, ``stop``) may take: each takes a second
#: or two (a Python process that asks the SuperLink once); one that has not ended by
#: then waits on a SuperLink that does not answer, and is killed.
FLWR_COMMAND_TIMEOUT = 120.0


def _flwr(flwr: str, args: Sequence[str], env: Mapping[str, str], cwd: Path) -> str:
    """``flwr ARGS`` to its end (:func:`_flwr_process`); its standard output."""
    return _flwr_process(flwr, args, env, cwd).stdout


def _flwr_process(
    flwr: str, args: Sequence[str], env: Mapping[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """``flwr ARGS`` to its end, at most :data:`FLWR_COMMAND_TIMEOUT` seconds.

    Raises
    ------
    FederationError
        It did not end in time (it is killed).
    """
    try:
        return subprocess.run(
            [flwr, *args],
            env=dict(env),
            capture_output=True,
            text=True,
            cwd=cwd,
            preexec_fn=die_with_parent(),
            timeout=FLWR_COMMAND_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise FederationError(
            f"`flwr {args[0] if args else ''}` did not end within {FLWR_COMMAND_TIMEOUT:g} s "
            "(the SuperLink does not answer: check that it runs and is not overloaded); "
            "it was stopped"
        ) from None


def _stop_run(flwr: str, run_id: int, env: Mapping[str, str], cwd: Path) -> None:
    """``flwr stop RUN``, best effort: a SuperLink that does not answer leaves the run to
    its own end (the caller is raising its own error)."""
    try:
        _flwr(flwr, ["stop", str(run_id), "fits"], env, cwd)
    except FederationError:
        pass


def _run_status(flwr: str, run_id: int, env: Mapping[str, str], cwd: Path) -> tuple[str, str]:
    """The run's status and its details (``flwr ls``); ``"unknown"`` if it cannot be read."""
    listed = _flwr(flwr, ["ls", "fits", "--run-id", str(run_id), "--format", "json"], env, cwd)
    try:
        run = json.loads(listed)["runs"][0]
        return str(run["status"]), str(run.get("status-details", ""))
    except (json.JSONDecodeError, KeyError, IndexError, TypeError):
        return "unknown", ""


def _follow_run(
    flwr: str,
    run_id: int,
    env: Mapping[str, str],
    cwd: Path,
    start: float,
    timeout: float,
    *,
    poll: float = 0.5,
    progress: Any = None,
    watch: Callable[[], None] | None = None,
    stop_on_interrupt: bool = True,
) -> tuple[str, str, str]:
    """Wait for a run's end; its log, status and status details.

    One ``flwr log RUN --stream`` process follows the run: the SuperLink streams the
    ServerApp's log and ends the stream when the run finishes (Flower's ``StreamLogs``).
    Each ``flwr`` command is a Python process that takes about a second of CPU to start,
    so asking ``flwr ls`` every ``poll`` seconds instead, as fits did, kept most of a core
    busy for the whole run (measured; docs/benchmarks.md).  ``flwr ls`` is then asked
    once for the final status; a stream that ends before the run does (the connection
    dropped) is started again.  ``timeout`` seconds after ``start`` (a
    :func:`time.monotonic` time) the run is stopped (``flwr stop``) and
    :class:`RunTimeoutError` (a :class:`FederationError`) raised; when ``watch``
    (called about once a second while the stream runs) raises a
    :class:`FederationError`, the run is stopped and that error raised.  About once a
    second the log's new :data:`PROGRESS` lines (the ServerApp waiting for its sites)
    go to ``progress``.
    On Ctrl-C or a stop signal the run is stopped too, unless ``stop_on_interrupt`` is
    False (the caller ends the SuperLink itself).
    """
    deadline = start + timeout
    late = (
        f"run {run_id} did not finish within {timeout:g} s, its time limit, and was "
        "stopped (fits federate run/local --run-timeout SECONDS, or "
        "FITS_RUN_TIMEOUT=SECONDS, allows more)"
    )
    log_path = cwd / f"run-{run_id}.log"
    status, details = "pending", ""
    shown = [0]  # the log's PROGRESS lines shown so far (each stream writes them again)

    def relay() -> None:
        if progress is None:
            return
        try:
            lines = [
                line[len(PROGRESS) :].strip()
                for line in log_path.read_text(errors="replace").splitlines()
                if line.startswith(PROGRESS)
            ]
        except OSError:
            return
        for line in lines[shown[0] :]:
            progress(line)
        shown[0] = max(shown[0], len(lines))

    while True:
        with open(log_path, "w") as sink:  # the whole log again on each stream
            stream = subprocess.Popen(
                [flwr, "log", str(run_id), "fits", "--stream"],
                env=dict(env),
                stdout=sink,
                stderr=subprocess.DEVNULL,
                cwd=cwd,
                preexec_fn=die_with_parent(),
            )
        if progress is not None:
            progress("running")
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    stream.wait(timeout=max(min(left, WATCH_INTERVAL), 0.0))
                    break
                except subprocess.TimeoutExpired:
                    if left <= WATCH_INTERVAL:
                        raise
                relay()
                if watch is not None:
                    try:
                        watch()
                    except FederationError:
                        _stop_run(flwr, run_id, env, cwd)
                        raise
        except subprocess.TimeoutExpired:
            stream.kill()
            _wait_all([stream], time.monotonic() + KILL_WAIT)
            _stop_run(flwr, run_id, env, cwd)
            raise RunTimeoutError(late, run_id, timeout) from None
        except (KeyboardInterrupt, SystemExit):
            # Ctrl-C, SIGTERM (exit_on_signals): the run would go on at the SuperLink,
            # waiting for its sites and then writing its output, with nobody watching
            stream.kill()
            _wait_all([stream], time.monotonic() + KILL_WAIT)
            if stop_on_interrupt:
                if progress is not None:
                    progress(f"stopping run {run_id} at the SuperLink (flwr stop)")
                _stop_run(flwr, run_id, env, cwd)
            raise
        finally:  # Ctrl-C, SIGTERM: the stream must not outlive its Flower home
            if stream.poll() is None:
                stream.kill()
                _wait_all([stream], time.monotonic() + KILL_WAIT)
        relay()  # the lines written since the last look (an analysis's last round)
        for _ in range(20):  # the stream ends as the status turns "finished"
            status, details = _run_status(flwr, run_id, env, cwd)
            if status.startswith("finished"):
                if progress is not None:
                    progress(status)
                return log_path.read_text(errors="replace"), status, details
            if status != "unknown" or time.monotonic() > deadline:
                break
            time.sleep(poll)
        if time.monotonic() > deadline:
            _stop_run(flwr, run_id, env, cwd)
            raise RunTimeoutError(late, run_id, timeout)
        time.sleep(poll)


#: How a line of the ServerApp's log starts that :func:`submit_run` passes to its
#: ``progress`` (without it): ``fits.deploy.flower.PROGRESS`` (this module must not
#: import Flower; a test holds them equal).
PROGRESS = "[fits] "

#: Seconds between two looks at a :class:`LocalFederation`'s processes while its run goes
#: on (``watch`` of :func:`submit_run`).
WATCH_INTERVAL = 1.0

#: What a :data:`PROGRESS` line of an analysis's fitting rounds says after the prefix:
#: ``rounds DONE/TOTAL`` (:func:`round_logger` writes them in the coordinator's log,
#: :func:`read_rounds` reads what :func:`submit_run` passes to its ``progress``).
ROUNDS = "rounds "
#: Seconds between two rounds lines in the ServerApp's log (the launcher looks at the
#: log once per :data:`WATCH_INTERVAL`); the first round's line and the last's are
#: always written.
ROUNDS_LOG_INTERVAL = 1.0


def round_logger(
    write: Callable[[str], None] | None = None, interval: float = ROUNDS_LOG_INTERVAL
) -> Callable[[int, int], None]:
    """The ``on_round(done, total)`` of an analysis's coordinator on Flower
    (:func:`fits.analysis.run.run_analysis`): a :data:`PROGRESS` line ``rounds
    DONE/TOTAL`` in the ServerApp's log (``write``, default: print it and flush), which
    ``fits analyze --flower`` draws as the progress bar of an in-process fit.

    The engine reports every round; a line is written for the first report, the last
    (``done == total``) and at most one per ``interval`` seconds in between, so that a
    fit of thousands of rounds does not fill the log.  Only the coordinator writes
    them: the sites never learn the rounds' count from it.
    """

    def emit(line: str) -> None:
        print(line, flush=True)  # noqa: T201 - the ServerApp's log (flwr log)

    out = write if write is not None else emit
    last = [-float("inf")]

    def on_round(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < interval:
            return
        last[0] = now
        out(f"{PROGRESS}{ROUNDS}{int(done)}/{int(total)}")

    return on_round


def read_rounds(line: str) -> tuple[int, int] | None:
    """``(done, total)`` of a rounds line as :func:`submit_run` passes it to its
    ``progress`` (``rounds 5/40``, the :data:`PROGRESS` prefix removed); None for any
    other line (a status, the sites connecting)."""
    if not line.startswith(ROUNDS):
        return None
    done, _, total = line[len(ROUNDS) :].partition("/")
    try:
        return int(done), int(total)
    except ValueError:
        return None


def _free_port() -> int:
    """A port of 127.0.0.1 free now (bound to port 0 and released): another process
    may take it before the process it is meant for binds it (:data:`PORT_TRIES`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: How many ports :class:`LocalFederation` tries for its SuperLink, and for each
#: SuperNode's local port: a free port is found by binding port 0 and releasing it, and
#: another process may take it before the SuperLink (or SuperNode) binds it (it then
#: exits, "address already in use"); it is started again on a new port.
PORT_TRIES = 5


class PortTakenError(FederationError):
    """Another process took the port chosen for a process of a :class:`LocalFederation`
    before it could listen there."""


#: What a Flower server (uvicorn) writes when its port is taken.
_IN_USE = ("address already in use", "[errno 98]", "[errno 48]")


def _listening_sockets(port: int) -> set[str] | None:
    """The inodes of the sockets listening on TCP ``port`` (Linux ``/proc/net/tcp`` and
    ``tcp6``); None where that cannot be read."""
    found: set[str] | None = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        found = found or set()
        for line in lines:
            fields = line.split()
            # sl, local address (hex ip:port), remote, state (0A: LISTEN), ..., inode
            if len(fields) > 9 and fields[3] == "0A":
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(fields[9])
    return found


def _group_sockets(pgid: int) -> set[str]:
    """The inodes of the sockets open in the processes of group ``pgid`` (Linux)."""
    inodes: set[str] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            for fd in (entry / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes.add(link[len("socket:[") : -1])
        except OSError:  # ended meanwhile, or not ours to read
            continue
    return inodes


def _listener(port: int, proc: subprocess.Popen) -> str | None:
    """Who listens on TCP ``port``: ``"mine"`` (``proc``, the leader of its own process
    group, or a process of its group), ``"other"`` (another process only), ``""``
    (nobody), or None where that cannot be read (not Linux)."""
    listening = _listening_sockets(port)
    if listening is None:
        return None
    if not listening:
        return ""
    return "mine" if listening & _group_sockets(proc.pid) else "other"


def _wait_port(
    port: int,
    proc: subprocess.Popen,
    timeout: float,
    what: str,
    log: Callable[[], str] = lambda: "",
) -> None:
    """Wait until ``proc`` listens on 127.0.0.1:``port``.

    On Linux the port is ``proc``'s when its process group holds the listening socket
    (``/proc``): another process that took the port meanwhile also takes connections
    there, and is never probed (a listener that accepts nothing would fill its queue,
    and a connection would then wait for minutes).  Elsewhere the port is taken to be
    ``proc``'s once it takes a connection.

    Raises
    ------
    PortTakenError
        Another process listens on ``port``, or ``proc`` exited saying its address is in
        use (its ``log``).
    FederationError
        ``proc`` exited otherwise, or did not listen within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    other = False  # another process listens there
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log().lower()
            if other or any(words in text for words in _IN_USE):
                raise PortTakenError(f"{what} could not listen on port {port}: it is in use")
            tail = "\n".join(log().strip().splitlines()[-6:])
            raise FederationError(
                f"{what} exited with code {proc.returncode} at start"
                + (f"; its log ends:\n{tail}" if tail else "")
            )
        who = _listener(port, proc)
        if who == "mine":
            return
        if who is None:  # cannot tell whose: a connection says it listens
            with socket.socket() as s:
                s.settimeout(1.0)
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
        other = other or who == "other"  # proc exits, "address already in use"
        time.sleep(0.05)
    if other:
        raise PortTakenError(f"{what} could not listen on port {port}: it is in use")
    raise FederationError(f"{what} did not open port {port} within {timeout:g} s")


#: The kernel settings :class:`LocalFederation` gives every site (``kernel_settings``).
KERNEL_SETTINGS = ("ordinal_penalty", "nominal_penalty", "column_penalties", "relevance")


class LocalFederation:
    """A SuperLink and one SuperNode per site on 127.0.0.1 (insecure), as subprocesses.

    Use it as a context manager; leaving it stops every process it started (SIGTERM,
    then SIGKILL), also after an error, and inside it SIGTERM / SIGHUP of this process
    leave it the same way (:func:`exit_on_signals`, main thread only).  Every process
    it starts gets a parent-death signal (:func:`die_with_parent`), for a SIGKILL.

    Parameters
    ----------
    sites : mapping of str to path
        Site name -> data file.
    kernels : mapping of str to str, optional
        Site name -> ``"knn"`` / ``"gaussian"`` (default ``"knn"``).
    workdir : path, optional
        Where the processes keep their Flower homes and logs (default a temporary
        directory, removed on exit).
    tls : bool
        Serve over HTTPS with a throw-away certificate authority made for 127.0.0.1
        (:func:`make_test_certificates`) instead of plain HTTP.
    seeds : mapping of str to str, optional
        Site name -> the site's own noise seed for model fitting (node config ``seed``,
        ``"ENTROPY"`` or ``"ENTROPY/INDEX"``; default: each site draws its own).
    policy : path, or mapping of site name to path, optional
        The site policy file (JSON, :class:`~fits.federation.policy.SitePolicy`) of
        every site, or of each site by name (a site left out keeps the default
        policy).  Each file is checked before any process starts.
    kernel_settings : mapping, optional
        Every site's kernel penalties and relevance weights: keyword arguments of
        :func:`supernode_command` (``ordinal_penalty``, ``nominal_penalty``,
        ``column_penalties``, ``relevance``), checked before any process starts.
    """

    def __init__(
        self,
        sites: Mapping[str, str | Path],
        *,
        kernels: Mapping[str, str] | None = None,
        workdir: str | Path | None = None,
        tls: bool = False,
        policy: str | Path | Mapping[str, str | Path] | None = None,
        seeds: Mapping[str, str] | None = None,
        warm: bool = True,
        kernel_settings: Mapping[str, Any] | None = None,
    ) -> None:
        if not sites:
            raise FederationError("a federation needs at least one site")
        self.kernel_settings = dict(kernel_settings or {})
        unknown = sorted(set(self.kernel_settings) - set(KERNEL_SETTINGS))
        if unknown:
            raise FederationError(f"unknown kernel settings {unknown}; known: {KERNEL_SETTINGS}")
        _add_kernel_settings({}, **{**dict.fromkeys(KERNEL_SETTINGS), **self.kernel_settings})
        self.sites = {str(k): Path(v) for k, v in sites.items()}
        self.kernels = dict(kernels or {})
        self.seeds = {str(k): str(v) for k, v in (seeds or {}).items()}
        if policy is None or isinstance(policy, Mapping):
            self.policies = {str(k): Path(v) for k, v in (policy or {}).items()}
            unknown = sorted(set(self.policies) - set(self.sites))
            if unknown:
                raise FederationError(f"policies for unknown sites {unknown}")
        else:
            self.policies = dict.fromkeys(self.sites, Path(policy))
        for path in dict.fromkeys(self.policies.values()):
            check_policy_file(path)
        if workdir is None:
            remove_stale_workdirs()
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix=WORKDIR_PREFIX)
        self.workdir = Path(workdir) if workdir else Path(self._tmp.name)  # type: ignore[union-attr]
        if self._tmp is not None:
            (self.workdir / OWNER_FILE).write_text(_process_identity(os.getpid()))
        self.port = 0
        #: Site name -> the local port of its SuperNode (its ClientApp process's).
        self.site_ports: dict[str, int] = {}
        self.processes: dict[str, subprocess.Popen] = {}
        self.tls = tls
        self.warm = bool(warm)
        self.certificates: tuple[Path, Path, Path] | None = None
        self._stop_signals = StopSignals()  # exit_on_signals' own inside a `with` block

    @property
    def superlink(self) -> str:
        """The SuperLink's address."""
        return f"127.0.0.1:{self.port}"

    def _spawn(self, role: str, cmd: list[str], home: Path | None = None) -> subprocess.Popen:
        home = home or self.workdir / role
        home.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / f"{role}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            cmd,
            env=flower_env(home, superexec=True),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            start_new_session=True,  # its own process group, stopped as a whole
            preexec_fn=die_with_parent(),  # and SIGTERM if fits dies without cleaning up
        )
        log.close()
        self.processes[role] = proc
        return proc

    def start(self, timeout: float = 60.0) -> LocalFederation:
        """Start the SuperLink, wait for its port, then start the SuperNodes."""
        try:
            if self.tls:
                self.certificates = make_test_certificates(self.workdir / "certificates")
            self._start_superlink(timeout)
            for name, path in self.sites.items():  # every SuperNode starts at once
                self._spawn_supernode(name, path)
            for name, path in self.sites.items():
                self._await_supernode(name, path, timeout)
                self._spawn_worker(name)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_superlink(self, timeout: float) -> None:
        """Start the SuperLink on a free port and wait until it listens there; on a port
        another process took meanwhile (:func:`_free_port`), again on a new one, at most
        :data:`PORT_TRIES` times."""
        taken: list[int] = []
        for _ in range(PORT_TRIES):
            self.port = _free_port()
            cmd = superlink_command(
                port=self.port,
                insecure=not self.tls,
                certificates=[str(p) for p in self.certificates or ()],
            )
            link = self._spawn("superlink", cmd)
            try:
                _wait_port(self.port, link, timeout, "the SuperLink", lambda: self.log("superlink"))
                return
            except PortTakenError:
                taken.append(self.port)
                proc = self.processes.pop("superlink")
                _kill_group(proc, signal.SIGKILL)
                _wait_all([proc], time.monotonic() + KILL_WAIT)
                _kill_leftovers(self.workdir / "superlink")
        raise FederationError(
            f"the SuperLink could not listen on 127.0.0.1: each of the {len(taken)} free "
            f"ports chosen for it ({', '.join(map(str, taken))}) was taken by another "
            "process before it started; try again (another program on this machine is "
            "taking new ports quickly)"
        )

    def start_site(self, name: str, path: str | Path, timeout: float = 60.0) -> subprocess.Popen:
        """Start (or restart) one site's SuperNode, wait until it listens on its local
        port (:meth:`_await_supernode`), then, ``warm``, start its ClientApp process."""
        self._spawn_supernode(name, path)
        self._await_supernode(name, path, timeout)
        self._spawn_worker(name)
        return self.processes[f"site-{name}"]

    def _spawn_supernode(self, name: str, path: str | Path) -> subprocess.Popen:
        """Start one site's SuperNode on a free local port (its Runtime API's)."""
        port = self.site_ports[name] = _free_port()
        cmd = supernode_command(
            self.superlink,
            path,
            name=name,
            kernel=self.kernels.get(name, "knn"),
            port=port,
            isolation="process" if self.warm else "subprocess",
            policy=self.policies.get(name),
            seed=self.seeds.get(name, ""),
            insecure=not self.tls,
            root_certificates=str(self.certificates[2]) if self.certificates else None,
            **self.kernel_settings,
        )
        return self._spawn(f"site-{name}", cmd)

    def _spawn_worker(self, name: str) -> None:
        """``warm``: start the site's ClientApp process, for its SuperNode's port."""
        if self.warm:  # same Flower home: the app bundle is installed where it looks
            node = self.processes[f"site-{name}"]
            home = self.workdir / f"site-{name}"
            self._spawn(f"worker-{name}", worker_command(self.site_ports[name], node.pid), home)

    def _await_supernode(self, name: str, path: str | Path, timeout: float) -> None:
        """Wait until the site's SuperNode listens on its local port; on a port another
        process took meanwhile (:func:`_free_port`, as for the SuperLink), start it again
        on a new one, at most :data:`PORT_TRIES` times.  The SuperNode exited at start
        ("address already in use") and the run stopped saying to run again."""
        role = f"site-{name}"
        taken: list[int] = []
        while True:
            port = self.site_ports[name]
            try:
                _wait_port(
                    port,
                    self.processes[role],
                    timeout,
                    f"the SuperNode of site {name!r}",
                    lambda: self.log(role),
                )
                return
            except PortTakenError:
                taken.append(port)
                proc = self.processes.pop(role)
                _kill_group(proc, signal.SIGKILL)
                _wait_all([proc], time.monotonic() + KILL_WAIT)
                _kill_leftovers(self.workdir / role)
            if len(taken) >= PORT_TRIES:
                raise FederationError(
                    f"the SuperNode of site {name!r} could not listen on 127.0.0.1: each "
                    f"of the {len(taken)} free ports chosen for it "
                    f"({', '.join(map(str, taken))}) was taken by another process before "
                    "it started; try again (another program on this machine is taking new "
                    "ports quickly)"
                )
            self._spawn_supernode(name, path)

    def kill_site(self, name: str) -> None:
        """Stop one site's SuperNode at once (SIGKILL of its process group)."""
        for role in (f"site-{name}", f"worker-{name}"):
            proc = self.processes.pop(role, None)
            if proc is not None:
                _kill_group(proc, signal.SIGKILL)
                proc.wait(timeout=10)

    def log(self, role: str) -> str:
        """A process's log so far (``superlink`` or ``site-<name>``)."""
        path = self.workdir / f"{role}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def run(
        self,
        run_config: Mapping[str, Any],
        *,
        timeout: float = 600.0,
        progress: Callable[[str], None] | None = None,
    ) -> RunResult:
        """Submit a run (``min-sites`` defaults to every site) and wait for its end;
        ``progress`` as :func:`submit_run`'s."""
        config = {"min-sites": len(self.sites), **run_config}
        ca = str(self.certificates[2]) if self.certificates else None
        return submit_run(
            self.superlink,
            config,
            insecure=not self.tls,
            root_certificates=ca,
            timeout=timeout,
            progress=progress,
            watch=self.check_processes,
            stop_on_interrupt=False,  # stop() kills the SuperLink, which ends the run
        )

    def check_processes(self) -> None:
        """Raise :class:`FederationError` if a process of this federation has ended: a
        site's SuperNode (or its ClientApp process) that exited at start (a node config
        it cannot read, a port taken) or during the run left the run waiting for that
        site until its round timeout (ten minutes by default), then ended it with "only 1
        of the 2 sites asked for connected", naming neither the site nor the cause.
        The error names the site, the exit code and the end of its log."""
        for role, proc in list(self.processes.items()):
            code = proc.poll()
            if code is None:
                continue
            what = "the SuperLink" if role == "superlink" else (
                ("the SuperNode" if role.startswith("site-") else "the ClientApp process")
                + f" of site {role.split('-', 1)[1]!r}"
            )  # fmt: skip
            log = self.log(role)
            tail = "\n".join(log.strip().splitlines()[-6:])
            name = role.split("-", 1)[1]
            if role.startswith("site-") and any(w in log.lower() for w in _IN_USE):
                # its local port, free when chosen (_free_port), was taken meanwhile
                raise FederationError(
                    f"{what} stopped at start: another process took its local port "
                    f"127.0.0.1:{self.site_ports.get(name, '?')} as it started; run again "
                    "(each run chooses new free ports)"
                )
            raise FederationError(
                f"{what} stopped (exit code {code}) before the run ended"
                + (f"; its log ends:\n{tail}" if tail else "")
            )

    def stop(self) -> None:
        """Stop every process this federation started (SuperNodes first): SIGTERM, and
        SIGKILL for what is left after :data:`STOP_GRACE` seconds; at most about
        ``STOP_GRACE + KILL_WAIT`` seconds in all, and a stop signal meanwhile does not
        cut it short (:meth:`StopSignals.cleaning`)."""
        with self._stop_signals.cleaning():
            roles = sorted(self.processes, key=lambda r: r == "superlink")
            procs = [self.processes[role] for role in roles]
            for proc in procs:
                _kill_group(proc, signal.SIGTERM)
            _wait_all(procs, time.monotonic() + STOP_GRACE)
            for proc in procs:  # every group at once: no process waits on another's end
                _kill_group(proc, signal.SIGKILL)
            _wait_all(procs, time.monotonic() + KILL_WAIT)
            self.processes.clear()
            _kill_leftovers(self.workdir)

    def __enter__(self) -> LocalFederation:
        self._signals = exit_on_signals()
        self._stop_signals = self._signals.__enter__()
        try:
            return self.start()
        except BaseException:
            self._signals.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            with self._stop_signals.cleaning():
                self.stop()
                if self._tmp is not None:
                    self._tmp.cleanup()
        finally:
            self._signals.__exit__(None, None, None)


def _wait_all(procs: Sequence[subprocess.Popen], deadline: float) -> None:
    """Wait for ``procs`` to end until ``deadline`` (a :func:`time.monotonic` time), at
    most; never raises for one still running."""
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            pass


def stop_process_group(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """Stop a process started in its own session and its group: SIGTERM, then SIGKILL."""
    _kill_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _kill_group(proc, signal.SIGKILL)
        proc.wait(timeout=10)
    try:  # helpers left in the group after its leader ended
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    """Signal a process and the helpers it started in its session."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


#: Seconds a :class:`LocalFederation`'s processes get to end after SIGTERM before
#: SIGKILL.  After a finished run they end in about 1.5 s; during a run (a stop on
#: Ctrl-C or a timeout) the SuperLink's group did not end on SIGTERM within 60 s
#: (flwr 1.42, measured), so a longer grace only delayed the user's exit.  Their state
#: is the federation's temporary directory, removed after them.
STOP_GRACE = 5.0
#: Seconds :meth:`LocalFederation.stop` waits for its processes after SIGKILL (they end
#: at once; a process the kernel has not reaped by then is left, never waited on longer).
KILL_WAIT = 2.0

#: Prefix of the temporary working directory of a :class:`LocalFederation`.
WORKDIR_PREFIX = "fits-local-"
#: Prefix of the temporary directory of :func:`submit_run` (the app, a Flower home for
#: ``flwr``, the run's config and log).
RUN_WORKDIR_PREFIX = "fits-flwr-"
#: File in that directory naming the process that owns it (pid and start time).
OWNER_FILE = "owner"
#: File in such a directory naming (one absolute path a line) files its owner writes
#: outside it: the staged table of ``fits federate local``, beside ``--out``
#: (:func:`staged_file`).  When the owner is dead they go with the directory.
STAGED_FILE = "staged"


def _process_identity(pid: int) -> str:
    """``"PID START"``: the pid and its start time in clock ticks since boot (Linux
    ``/proc/PID/stat`` field 22; ``"?"`` elsewhere), so a reused pid is not mistaken
    for the owner."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        start = text.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        start = "?"
    return f"{pid} {start}"


def remove_stale_workdirs(root: str | Path | None = None) -> list[Path]:
    """Remove the temporary working directories of federations whose owner is dead.

    A :class:`LocalFederation` removes its directory when it stops; a process killed
    with SIGKILL cannot, and its SuperLink and SuperNodes die with it (parent-death
    signal) but leave their Flower homes and logs behind (and :func:`submit_run` its
    folder, :data:`RUN_WORKDIR_PREFIX`).  Each directory names its
    owner (:data:`OWNER_FILE`: pid and start time); the next federation or run started on the
    machine removes every such directory of this user whose owner no longer runs, after
    killing any process still using it, and with it the files outside it that its
    :data:`STAGED_FILE` names (:func:`staged_file`: the staged table of a killed
    ``fits federate local`` beside its ``--out``, and its writer's hidden temporary
    files), unless a running owner names the same file.  Directories without an owner
    file (or of another user) are left alone.

    Returns
    -------
    list of Path
        The directories removed.
    """
    base = Path(root) if root is not None else Path(tempfile.gettempdir())
    removed = []
    folders = [*base.glob(f"{WORKDIR_PREFIX}*"), *base.glob(f"{RUN_WORKDIR_PREFIX}*")]
    dead: list[Path] = []
    kept: set[str] = set()  # what live owners stage: never removed
    for folder in folders:
        try:
            if folder.is_symlink() or folder.stat().st_uid != os.getuid():
                continue
            owner = (folder / OWNER_FILE).read_text().split()
            pid = int(owner[0])
        except (OSError, ValueError, IndexError):
            continue
        if _process_identity(pid).split() == owner:  # its owner still runs
            kept.update(_staged(folder))
        else:
            dead.append(folder)
    for folder in dead:
        _kill_leftovers(folder)
        for path in _staged(folder):  # what the dead owner staged outside it
            if path not in kept:
                _remove_staged(Path(path))
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _staged(folder: Path) -> list[str]:
    """The files a working directory's owner stages outside it (:data:`STAGED_FILE`)."""
    try:
        lines = (folder / STAGED_FILE).read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if line and Path(line).is_absolute()]


def _remove_staged(path: Path) -> None:
    """Remove a staged file of a dead owner and the hidden temporary files its writer
    left beside it (``.<name>.*.tmp``, :func:`fits.io.write_stream`'s where the file
    system has no unnamed files); only plain files of this user, never a link."""
    candidates = [path]
    try:
        candidates += list(path.parent.glob(f".{path.name}.*.tmp"))
    except OSError:
        pass
    for candidate in candidates:
        try:
            info = candidate.lstat()
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            continue
        try:
            candidate.unlink()
        except OSError:
            continue


@contextmanager
def staged_file(path: str | Path) -> Iterator[Path]:
    """Record ``path`` (absolute) as a file this process stages outside any working
    directory while the block runs: ``fits federate local`` has its ServerApp write the
    table to a hidden file beside ``--out`` and puts it in place only at the end.

    A process killed outright (SIGKILL, the OOM killer) leaves that file, a complete
    table that never passed the release check.  So the record is a working directory
    of this process (:data:`WORKDIR_PREFIX`, its :data:`OWNER_FILE`) whose
    :data:`STAGED_FILE` names the file: the next federation or run of this user
    (:func:`remove_stale_workdirs`) removes it, with the directory, once this process no
    longer runs.  On leaving the block the directory is removed; the file itself is
    the caller's to remove or rename.
    """
    path = Path(path).absolute()
    remove_stale_workdirs()
    with tempfile.TemporaryDirectory(prefix=WORKDIR_PREFIX) as tmp:
        (Path(tmp) / STAGED_FILE).write_text(f"{path}\n")
        (Path(tmp) / OWNER_FILE).write_text(_process_identity(os.getpid()))
        yield path


def _kill_leftovers(workdir: Path) -> None:
    """SIGKILL any process still running with a Flower home under ``workdir``.

    Flower's SuperLink starts its SuperExec in a session of its own; it stops it on
    SIGTERM, but this makes sure nothing outlives the federation (Linux only).
    """
    marker = f"FLWR_HOME={workdir}".encode()
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(v.startswith(marker) for v in environ.split(b"\0")):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def make_test_certificates(folder: str | Path) -> tuple[Path, Path, Path]:
    """A throw-away CA and a server certificate for 127.0.0.1 / localhost (for tests).

    Returns ``(server certificate, server key, CA certificate)`` as PEM files.  Real
    deployments use certificates from their own CA.
    """
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=2))

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("fits test CA"))
        .issuer_name(name("fits test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(san, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = (folder / "server.pem", folder / "server.key", folder / "ca.pem")
    paths[0].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    paths[1].chmod(0o600)
    paths[2].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return paths
