"""An in-process synthesis federation: every site a
:class:`~fits.federation.client.FITSClient` in this process, reached through a
:class:`~fits.federation.transport.InProcessTransport`.

The coordinator still sees only messages; the transport answers a round's messages
in parallel threads, one per site, as separate machines would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fits.core.kernels import Kernel, KNNKernel
from fits.federation.client import MIN_CLIENT_ROWS, FITSClient
from fits.federation.coordinator import MAX_BATCH
from fits.federation.policy import SitePolicy
from fits.federation.transport import InProcessTransport

__all__ = [
    "AuditSpec",
    "KernelSpec",
    "PolicySpec",
    "Tables",
    "build_federation",
    "in_process_batch",
]


KernelSpec = str | Kernel


Tables = Sequence[pd.DataFrame] | Mapping[str, pd.DataFrame]

#: One policy for every site, one per site (in order), or a mapping by site name.
PolicySpec = SitePolicy | Sequence[SitePolicy | None] | Mapping[str, SitePolicy] | None

#: Audit destination: one file or callable for every site, or a mapping by site name.
AuditSpec = str | Path | Callable[[dict[str, Any]], None] | Mapping[str, Any] | None


def _per_site(
    value: object, names: list[str], what: str, single: type | tuple, expected: str
) -> list:
    """One value per site from a single value, a sequence or a mapping by name
    (``expected``: what the parameter may be, for the error that refuses another)."""
    if value is None or isinstance(value, single) or callable(value):
        return [value] * len(names)
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(f"{what} given for unknown sites {unknown}; sites: {names}")
        return [value.get(n) for n in names]
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(
            f"{expected}, or one per site (a list in the sites' order, or a mapping by "
            f"site name), got {value!r}"
        )
    values = list(value)
    if len(values) != len(names):
        raise ValueError(f"got {len(values)} {what} for {len(names)} sites")
    return values


def _client_kernels(
    kernel: KernelSpec | Sequence[KernelSpec] | Mapping[str, KernelSpec], names: list[str]
) -> list[KernelSpec]:
    if isinstance(kernel, (str, Kernel)):
        return [kernel] * len(names)
    if isinstance(kernel, Mapping):
        unknown = sorted(set(kernel) - set(names))
        if unknown:
            raise ValueError(f"kernels given for unknown clients {unknown}; clients: {names}")
        return [kernel.get(n, "knn") for n in names]
    if not isinstance(kernel, Sequence):
        raise TypeError(
            "kernel must be 'knn', 'gaussian', a KNNKernel / GaussianKernel, or one per "
            f"site (a list in the sites' order, or a mapping by site name), got {kernel!r}"
        )
    kernels = list(kernel)
    if len(kernels) != len(names):
        raise ValueError(f"got {len(kernels)} kernels for {len(names)} clients")
    return kernels


def build_federation(
    tables: Tables,
    kernel: KernelSpec | Sequence[KernelSpec] | Mapping[str, KernelSpec] = "knn",
    *,
    min_rows: int = MIN_CLIENT_ROWS,
    n_jobs: int | None = None,
    policy: PolicySpec = None,
    audit: AuditSpec = None,
) -> tuple[list[FITSClient], InProcessTransport]:
    """One client per table and an in-process transport to them.

    Parameters
    ----------
    tables : sequence or mapping of DataFrame
        One table per client; a mapping names the clients, else they are
        ``client 1``, ``client 2``, ...
    kernel : str, Kernel, or one per client (sequence or mapping by name)
        Each client's kernel scheme.
    min_rows : int
        Fewest rows a client may hold.
    n_jobs : int, optional
        Clients answering a round at the same time (threads); default the number of
        cores.  See :class:`~fits.federation.transport.InProcessTransport`.
    policy : SitePolicy, or one per site (sequence or mapping by name), optional
        Each site's limits (:class:`~fits.federation.policy.SitePolicy`; None: the
        default policy).
    audit : path or callable, or a mapping by site name, optional
        Where each site logs its requests (see :class:`FITSClient`); one file may
        take every site's lines (each names its site).
    """
    if isinstance(tables, pd.DataFrame):
        raise TypeError(
            "fit() takes one DataFrame per client, e.g. fit([df_a, df_b]); to try "
            "federation on one table, split it first (fits.datasets.federated_split)"
        )
    if isinstance(tables, Mapping):
        names = [str(n) for n in tables]
        frames = list(tables.values())
    else:
        if isinstance(tables, (str, bytes)) or not isinstance(tables, Sequence):
            raise TypeError(
                "fit() takes one DataFrame per site, as a list (fit([df_a, df_b])) or a "
                f"mapping by site name (fit({{'a': df_a, 'b': df_b}})), got "
                f"{type(tables).__name__}"
            )
        frames = list(tables)
        names = [f"client {k + 1}" for k in range(len(frames))]
    if not frames:
        raise ValueError("fit() needs at least one client table")
    _check_distinct_tables(frames, names)
    kernels = _client_kernels(kernel, names)
    policies = _per_site(
        policy, names, "site policies", SitePolicy, "site_policy must be a SitePolicy or None"
    )
    audits = _per_site(
        audit,
        names,
        "audit logs",
        (str, Path),
        "site_audit must be a file path, a callable or None",
    )
    clients = [
        FITSClient(f, n, k, min_rows=min_rows, policy=p, audit=a)
        for f, n, k, p, a in zip(frames, names, kernels, policies, audits, strict=True)
    ]
    return clients, InProcessTransport(clients, n_jobs=n_jobs)


def _check_distinct_tables(frames: Sequence[Any], names: Sequence[str]) -> None:
    """Refuse one DataFrame object given for two sites: its rows would count twice, as
    two sites holding copies of them (the command line refuses one file given twice)."""
    seen: dict[int, str] = {}
    for frame, name in zip(frames, names, strict=True):
        first = seen.setdefault(id(frame), name)
        if first != name:
            raise ValueError(
                f"sites {first!r} and {name!r} are the same table (one DataFrame object "
                "given twice); its rows would count twice. Give each site its own table, "
                "or split one table with fits.datasets.federated_split"
            )


def in_process_batch(clients: Sequence[FITSClient], memory_budget: int) -> int:
    """Queries per message when every client lives in this process.

    Only fixed-bandwidth (Gaussian) clients hold a dense weight per query and row
    between the two steps; KNN clients hold c_k weights per query.  So the budget is
    shared by the Gaussian clients' rows alone, and a federation of KNN clients takes
    the largest batch (8192: on Adult, FITS-K ran in 79 s with it against 88 s at the
    all-rows rule's 927, peak memory 800 MB; docs/benchmarks.md).
    """
    dense_rows = sum(c.n_rows for c in clients if not isinstance(c.kernel, KNNKernel))
    return int(np.clip(memory_budget // max(dense_rows, 1), 64, MAX_BATCH))
