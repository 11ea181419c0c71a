"""A site's warm ClientApp process: every message of its SuperNode answered in one process.

Flower 1.42 answers each message to a site with a new ``flwr-clientapp`` process (the
SuperNode's default ``--isolation subprocess``: its ``flower-superexec`` starts one per
message, and the process exits after its one reply; ``flwr.supernode.runtime.
run_clientapp``).  Before the app answers, that process spends about 1.4 s of CPU
importing Flower (FastAPI, SQLAlchemy, Alembic, gRPC, ...) and then fits' own imports
(pandas) -- with ten sites on two cores, ten such processes per round set the pace of a
networked synthesis (docs/benchmarks.md, "Flower rounds on Adult").

Flower also runs a SuperNode with ``--isolation process``: it then starts no SuperExec
and serves its Runtime API (``--host``/``--port``) to a task executor started apart.
:func:`serve` is such an executor for fits.  One long-lived process per site

1. asks the SuperNode's Runtime API for a ClientApp task (``AcquireTask``, as
   ``flower-superexec`` does), and
2. answers it in this process exactly as ``flwr-clientapp`` does: pulls the message, the
   run's context and the app bundle (``PullTaskInput``, ``PullMessages``), loads the
   ClientApp the bundle names (Flower's own loader; cached per bundle hash), calls it,
   pushes the reply and the updated context (``PushMessages``, ``PushTaskOutput``),
   sending task heartbeats meanwhile; a ClientApp's exception becomes the error reply
   Flower's process would send.

So the ClientApp sees the same message and the same ``context`` (node config, run
config and ``context.state``, which Flower keeps on the SuperNode) as in a fresh process,
and fits' handler (:func:`fits.deploy.flower.client_app`) rebuilds its site from the file
and the stored ``configure`` for every message as before: the replies, and the
synthetic table, are the same bit for bit (tested).  What is saved is only the start-up
of a process per message.  Tasks are answered one at a time (the SuperNode hands out one
message at a time anyway).

The process ends when its SuperNode ends (``--parent-pid``: checked every 0.2 s, as
Flower's own helpers do), on SIGTERM / SIGINT, or when the Runtime API stays
unreachable.  The functions of Flower it calls (``pull_task_input``, ``push_message``,
``push_task_output`` of ``flwr.supernode.runtime.run_clientapp``, the Runtime API client)
are those of the Flower version fits pins (``flwr>=1.42,<1.43``).

Run it as ``python -m fits.deploy.flower_worker --runtime-api-address HOST:PORT
--insecure [--parent-pid PID]``; :class:`fits.deploy.flower_launch.LocalFederation`
(``warm=True``, its default) starts one per site.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

__all__ = ["answer_task", "serve", "main"]

#: Seconds between two ``AcquireTask`` calls while the site has no task (after a task the
#: next is asked at once).  Each call is an HTTP request that costs CPU in this process and
#: in the SuperNode; a Flower round costs 3 s or more anyway (the SuperNode's own wait).
TASK_POLL = 0.2


def _runtime_client(address: str, insecure: bool, certificates: bytes | None, *extra: Any) -> Any:
    from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supercore.runtime.tracing import RuntimeTracingInterceptor

    return RuntimeHttpClient.from_server_address(
        server_address=address,
        insecure=insecure,
        root_certificates=certificates,
        interceptors=[
            RuntimeTracingInterceptor(),
            RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
            *extra,
        ],
        retry_invoker=make_simple_http_retry_invoker(),
    )


_APPS: dict[str, Any] = {}


def _client_app(run: Any, fab: Any) -> Any:
    """The ClientApp the run's app bundle names, loaded as ``flwr-clientapp`` loads it
    (installed under FLWR_HOME, then imported); once per bundle hash."""
    if fab.hash_str not in _APPS:
        from flwr.cli.install import install_from_fab
        from flwr.clientapp.utils import get_load_client_app_fn

        install_from_fab(fab.content, skip_prompt=True)
        load = get_load_client_app_fn(default_app_ref="", app_path=None, multi_app=True)
        _APPS[fab.hash_str] = load(run.fab_id, run.fab_version, fab.hash_str)
    return _APPS[fab.hash_str]


def answer_task(
    address: str, token: str, *, insecure: bool = True, certificates: bytes | None = None
) -> str:
    """Answer one ClientApp task (the work of one ``flwr-clientapp`` process).

    Returns
    -------
    str
        Flower's sub-status of the task: ``"completed"`` or ``"failed"``.
    """
    from flwr.app import Message
    from flwr.app.error import Error
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
    from flwr.supercore.interceptors import RuntimeTokenHttpInterceptor
    from flwr.supernode.runtime.run_clientapp import (
        pull_task_input,
        push_message,
        push_task_output,
    )

    client = _runtime_client(address, insecure, certificates, RuntimeTokenHttpInterceptor(token))
    heartbeat = HeartbeatSender(make_task_heartbeat_fn_http(client))
    message = reply = context = None
    sub_status, details = SubStatus.FAILED, "ClientApp task failed due to unknown reason"
    stopping = False  # SIGTERM / SIGINT: leave at once (the SuperNode may be gone)
    try:
        heartbeat.start()
        message, context, run, fab = pull_task_input(client)
        reply = _client_app(run, fab)(message=message, context=context)
        sub_status, details = SubStatus.COMPLETED, ""
    except Exception as ex:  # noqa: BLE001 - reported to the coordinator as Flower does
        # Flower's format, "<class 'module.Error'>:<'message'>" (fits.deploy.flower
        # error_reason reads it back)
        details = str(type(ex)) + ":<'" + str(ex) + "'>"
        print(f"ClientApp raised an exception: {details}", file=sys.stderr, flush=True)  # noqa: T201
        if message is not None:
            reply = Message(
                Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=details),
                reply_to=message,
            )
    except BaseException:
        stopping = True
        raise
    finally:
        try:
            if not stopping:
                try:
                    if reply is not None and context is not None:
                        push_message(client, reply, context)
                finally:
                    push_task_output(
                        client=client, context=context, sub_status=sub_status, details=details
                    )
        finally:
            if heartbeat.is_running:
                heartbeat.stop()
            client.close()
    return str(sub_status)


def serve(
    address: str,
    *,
    insecure: bool = True,
    certificates: bytes | None = None,
    parent_pid: int | None = None,
    poll: float = TASK_POLL,
    max_tasks: int | None = None,
) -> int:
    """Acquire and answer the SuperNode's ClientApp tasks until stopped.

    Parameters
    ----------
    address : str
        ``host:port`` of the SuperNode's Runtime API (its ``--host``/``--port``).
    insecure : bool
        Plain HTTP to the Runtime API (loopback); else ``certificates``.
    certificates : bytes, optional
        PEM root certificates of the Runtime API server.
    parent_pid : int, optional
        Stop when this process (the SuperNode) ends.
    poll : float
        Seconds between task requests while there is none.
    max_tasks : int, optional
        Stop after this many tasks (tests).

    Returns
    -------
    int
        The number of tasks answered.
    """
    from flwr.proto.runtime_pb2 import AcquireTaskRequest  # pylint: disable=E0611
    from flwr.supercore.app_utils import start_parent_process_monitor
    from flwr.supercore.constant import TaskType

    if parent_pid is not None:
        start_parent_process_monitor(parent_pid)  # SIGINT to this process when it ends
    client = _runtime_client(address, insecure, certificates)
    done = 0
    try:
        while max_tasks is None or done < max_tasks:
            res = client.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP]))
            if res.HasField("task") and res.token:
                try:
                    answer_task(address, res.token, insecure=insecure, certificates=certificates)
                except Exception as exc:  # noqa: BLE001 - e.g. the run was stopped meanwhile
                    # the SuperNode learns nothing more of this task (Flower's process
                    # would have died the same way); the next task is served as usual
                    print(f"task not answered: {exc!r}", file=sys.stderr, flush=True)  # noqa: T201
                done += 1
            else:
                time.sleep(poll)
    finally:
        client.close()
    return done


def main(argv: list[str] | None = None) -> int:
    """``python -m fits.deploy.flower_worker``: :func:`serve` from the command line."""
    ap = argparse.ArgumentParser(prog="python -m fits.deploy.flower_worker", description=__doc__)
    ap.add_argument("--runtime-api-address", required=True, help="the SuperNode's host:port")
    ap.add_argument("--insecure", action="store_true", help="plain HTTP (loopback)")
    ap.add_argument("--root-certificates", default=None, help="PEM file of the Runtime API CA")
    ap.add_argument("--parent-pid", type=int, default=None, help="stop when this process ends")
    args = ap.parse_args(argv)
    if not args.insecure and not args.root_certificates:
        ap.error("give --root-certificates, or --insecure for the loopback")
    certificates = None
    if args.root_certificates:
        with open(args.root_certificates, "rb") as f:
            certificates = f.read()

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        serve(
            args.runtime_api_address,
            insecure=args.insecure,
            certificates=certificates,
            parent_pid=args.parent_pid,
        )
    except KeyboardInterrupt:  # the parent-process monitor's SIGINT
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
