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
it started.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FederationError",
    "LocalFederation",
    "RunResult",
    "submit_run",
    "superlink_command",
    "supernode_command",
]


class FederationError(RuntimeError):
    """A Flower run failed or could not be started; the message says why."""


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


def flower_env(home: str | Path) -> dict[str, str]:
    """Environment for a Flower process: its own FLWR_HOME, no telemetry, no installs.

    Flower starts its helper processes (``flower-superexec``, ``flwr-serverapp``,
    ``flwr-clientapp``) from PATH, so the directory of this Python comes first.
    """
    env = dict(os.environ)
    env["FLWR_HOME"] = str(home)
    env["FLWR_TELEMETRY_ENABLED"] = "0"
    env["FLWR_DISABLE_UPDATE_CHECK"] = "1"
    env["FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION"] = "1"
    env.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.1")  # start a site's work sooner
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


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
        for path in certificates:
            if not Path(path).is_file():
                raise FederationError(f"{path}: no such certificate or key file")
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
) -> list[str]:
    """The ``flower-supernode`` command line for one site.

    The site's data path, name and kernel go into the SuperNode's node config; the
    data never leaves the site.
    """
    path = Path(data).resolve()
    if not path.is_file():
        raise FederationError(f"{path}: no such file (the site's data)")
    node_config = {
        "data-path": str(path),
        "name": name or path.stem,
        "kernel": kernel,
        "bandwidth": float(bandwidth),
        "knn-budget": int(knn_budget),
    }
    parts = []
    for k, v in node_config.items():
        parts.append(f"{k}={json.dumps(v)}" if isinstance(v, str) else f"{k}={v!r}")
    cmd = [
        _flower_bin("flower-supernode"),
        "--superlink",
        superlink,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--node-config",
        " ".join(parts),
    ]
    if insecure:
        cmd.append("--insecure")
    elif root_certificates:
        cmd += ["--root-certificates", str(root_certificates)]
    else:
        raise FederationError("give the site the SuperLink's CA certificate, or --insecure")
    return cmd


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


def _run_config_arg(config: Mapping[str, Any]) -> str:
    parts = []
    for k, v in config.items():
        if isinstance(v, bool):
            parts.append(f"{k}={'true' if v else 'false'}")
        elif isinstance(v, (int, float)):
            parts.append(f"{k}={v!r}")
        else:
            parts.append(f"{k}={json.dumps(str(v))}")
    return " ".join(parts)


def submit_run(
    superlink: str,
    run_config: Mapping[str, Any],
    *,
    insecure: bool = False,
    root_certificates: str | None = None,
    timeout: float = 3600.0,
    poll: float = 0.5,
    progress: Any = None,
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
        Called with the run's status text while waiting.
    """
    from fits.deploy.flower import RUN_CONFIG_DEFAULTS, write_app

    unknown = sorted(set(run_config) - set(RUN_CONFIG_DEFAULTS))
    if unknown:
        raise FederationError(f"unknown run config {unknown}; known: {list(RUN_CONFIG_DEFAULTS)}")
    with tempfile.TemporaryDirectory(prefix="fits-flwr-") as tmp:
        home = Path(tmp) / "home"
        _write_flower_config(home, superlink, insecure, root_certificates)
        app = write_app(Path(tmp) / "app")
        env = flower_env(home)
        flwr = _flower_bin("flwr")
        start = time.monotonic()
        cmd = [flwr, "run", str(app), "fits", "--format", "json"]
        cmd += ["--run-config", _run_config_arg(run_config)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
        try:
            submitted = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise FederationError(
                f"flwr run failed: {(done.stdout + done.stderr).strip()[-2000:]}"
            ) from None
        if not submitted.get("success"):
            raise FederationError(
                f"the SuperLink at {superlink} refused the run: "
                f"{submitted.get('error-message', submitted)}"
            )
        run_id = int(submitted["run-id"])
        status, details = "pending", ""
        while True:
            listed = subprocess.run(
                [flwr, "ls", "fits", "--run-id", str(run_id), "--format", "json"],
                env=env,
                capture_output=True,
                text=True,
                cwd=tmp,
            )
            try:
                run = json.loads(listed.stdout)["runs"][0]
                status, details = str(run["status"]), str(run.get("status-details", ""))
            except (json.JSONDecodeError, KeyError, IndexError):
                status = "unknown"
            if progress is not None:
                progress(status)
            if status.startswith("finished"):
                break
            if time.monotonic() - start > timeout:
                subprocess.run(
                    [flwr, "stop", str(run_id), "fits"],
                    env=env,
                    capture_output=True,
                    text=True,
                    cwd=tmp,
                )
                raise FederationError(f"run {run_id} did not finish within {timeout:g} s")
            time.sleep(poll)
        seconds = time.monotonic() - start
        log = subprocess.run(
            [flwr, "log", str(run_id), "fits", "--show"],
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp,
        ).stdout
        return RunResult(run_id, status, details, seconds, log)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise FederationError(f"{what} exited with code {proc.returncode} at start")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise FederationError(f"{what} did not open port {port} within {timeout:g} s")


class LocalFederation:
    """A SuperLink and one SuperNode per site on 127.0.0.1 (insecure), as subprocesses.

    Use it as a context manager; leaving it stops every process it started (SIGTERM,
    then SIGKILL), also after an error.

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
    """

    def __init__(
        self,
        sites: Mapping[str, str | Path],
        *,
        kernels: Mapping[str, str] | None = None,
        workdir: str | Path | None = None,
        tls: bool = False,
    ) -> None:
        if not sites:
            raise FederationError("a federation needs at least one site")
        self.sites = {str(k): Path(v) for k, v in sites.items()}
        self.kernels = dict(kernels or {})
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="fits-local-")
        self.workdir = Path(workdir) if workdir else Path(self._tmp.name)  # type: ignore[union-attr]
        self.port = 0
        self.processes: dict[str, subprocess.Popen] = {}
        self.tls = tls
        self.certificates: tuple[Path, Path, Path] | None = None

    @property
    def superlink(self) -> str:
        """The SuperLink's address."""
        return f"127.0.0.1:{self.port}"

    def _spawn(self, role: str, cmd: list[str]) -> subprocess.Popen:
        home = self.workdir / role
        home.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / f"{role}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            cmd,
            env=flower_env(home),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            start_new_session=True,
        )
        log.close()
        self.processes[role] = proc
        return proc

    def start(self, timeout: float = 60.0) -> LocalFederation:
        """Start the SuperLink, wait for its port, then start the SuperNodes."""
        try:
            self.port = _free_port()
            if self.tls:
                self.certificates = make_test_certificates(self.workdir / "certificates")
            link = self._spawn(
                "superlink",
                superlink_command(
                    port=self.port,
                    insecure=not self.tls,
                    certificates=[str(p) for p in self.certificates or ()],
                ),
            )
            _wait_port(self.port, link, timeout, "the SuperLink")
            for name, path in self.sites.items():
                self.start_site(name, path)
        except BaseException:
            self.stop()
            raise
        return self

    def start_site(self, name: str, path: str | Path) -> subprocess.Popen:
        """Start (or restart) one site's SuperNode."""
        cmd = supernode_command(
            self.superlink,
            path,
            name=name,
            kernel=self.kernels.get(name, "knn"),
            port=_free_port(),
            insecure=not self.tls,
            root_certificates=str(self.certificates[2]) if self.certificates else None,
        )
        return self._spawn(f"site-{name}", cmd)

    def kill_site(self, name: str) -> None:
        """Stop one site's SuperNode at once (SIGKILL of its process group)."""
        proc = self.processes.pop(f"site-{name}")
        _kill_group(proc, signal.SIGKILL)
        proc.wait(timeout=10)

    def log(self, role: str) -> str:
        """A process's log so far (``superlink`` or ``site-<name>``)."""
        path = self.workdir / f"{role}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def run(self, run_config: Mapping[str, Any], *, timeout: float = 600.0) -> RunResult:
        """Submit a run (``min-sites`` defaults to every site) and wait for its end."""
        config = {"min-sites": len(self.sites), **run_config}
        ca = str(self.certificates[2]) if self.certificates else None
        return submit_run(
            self.superlink, config, insecure=not self.tls, root_certificates=ca, timeout=timeout
        )

    def stop(self) -> None:
        """Stop every process this federation started (SuperNodes first)."""
        roles = sorted(self.processes, key=lambda r: r == "superlink")
        for role in roles:
            _kill_group(self.processes[role], signal.SIGTERM)
        deadline = time.monotonic() + 15
        for role in roles:
            proc = self.processes[role]
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                _kill_group(proc, signal.SIGKILL)
                proc.wait(timeout=10)
        self.processes.clear()
        _kill_leftovers(self.workdir)

    def __enter__(self) -> LocalFederation:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    """Signal a process and the helpers it started in its session."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


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
