"""The pandas API: :class:`FITSSynthesizer` (fit on client tables, sample a table).

>>> from fits import FITSSynthesizer
>>> synth = FITSSynthesizer(kernel="knn", seed=0)       # doctest: +SKIP
>>> synth.fit([df_site_a, df_site_b, df_site_c])          # doctest: +SKIP
>>> synthetic = synth.sample(20_000)                      # doctest: +SKIP

``fit`` runs an in-process federation: one :class:`~fits.federation.client.FITSClient`
per table, an :class:`~fits.federation.transport.InProcessTransport`, and a
:class:`~fits.federation.coordinator.Coordinator` that sees only the protocol's messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fits.core.schema import Schema, missing_flag
from fits.deploy.inprocess import KernelSpec, Tables, build_federation, in_process_batch
from fits.federation.client import MIN_CLIENT_ROWS, FITSClient
from fits.federation.coordinator import Coordinator
from fits.federation.transport import Transport

__all__ = ["FITSSynthesizer"]


class FITSSynthesizer:
    """Federated synthesizer for mixed-type tables (FITS).

    Parameters
    ----------
    kernel : {"knn", "gaussian"}, Kernel, or one per client
        The clients' kernel schemes: ``"knn"`` (FITS-K, KNN budget with Epanechnikov
        kernel) or ``"gaussian"`` (FITS-G, fixed bandwidth), a
        :class:`~fits.core.kernels.KNNKernel` / :class:`~fits.core.kernels.GaussianKernel` with
        custom parameters, or a list / dict giving each client its own.
    seed : int, optional
        Root of every random draw (continualization at the clients, sampling at the
        coordinator).  The same seed and data reproduce the output bit for bit.
    kinds : mapping, optional
        Column -> ``"continuous"`` / ``"ordinal"`` / ``"nominal"`` overrides of the
        inferred kinds.
    order : sequence of str, optional
        Chain order; default the tables' column order.
    schema : Schema, optional
        A complete schema (kinds, categories, bounds, order) instead of inference.
    grid_size, ridge, response_bandwidth, discrete_response_bandwidth, monotone
        Passed to :class:`~fits.federation.coordinator.Coordinator`.
    discrete_sampling : {"mass", "grid"}
        How discrete columns are drawn: from category masses estimated at two interior
        points per interval (Corollary 5.4, default), or by inverse-CDF interpolation on
        an aligned grid of about ``grid_size`` points.
    batch_size : int, optional
        Queries per message.  Default: the Gaussian clients' dense weights together stay
        under 2**25 values (256 MiB), at most 8192; a federation of KNN clients takes
        8192.
    min_client_rows : int
        Fewest rows a client may hold (default 2).
    n_jobs : int, optional
        In-process federations: how many clients answer a round at the same time, in
        threads.  Default (None or -1): the number of cores.  The output does not
        depend on it.
    secure_aggregation : bool
        Mask every summed upload so that the coordinator learns only sums over
        clients (:mod:`fits.federation.secure`; at least two clients).  The sums are exact in
        fixed point, so the output agrees with the plain run to rounding (not bit for
        bit) and is itself reproducible from the seed.  Default False.
    mask_neighbours : int, optional
        With ``secure_aggregation``: how many clients on each side (in a cyclic order)
        each client shares masks with; None: all.  Default 1.  See
        :class:`~fits.federation.coordinator.Coordinator`.

    Attributes
    ----------
    schema_ : Schema
        The merged schema after :meth:`fit`.
    client_names_ : list of str
    n_rows_ : list of int
        Rows per client.
    """

    def __init__(
        self,
        kernel: KernelSpec | Sequence[KernelSpec] | Mapping[str, KernelSpec] = "knn",
        *,
        seed: int | None = None,
        kinds: Mapping[str, str] | None = None,
        order: Sequence[str] | None = None,
        schema: Schema | None = None,
        grid_size: int = 300,
        ridge: float = 1e-8,
        response_bandwidth: float = 0.05,
        discrete_response_bandwidth: float = 0.05,
        monotone: str = "isotonic",
        discrete_sampling: str = "mass",
        batch_size: int | None = None,
        min_client_rows: int = MIN_CLIENT_ROWS,
        n_jobs: int | None = None,
        secure_aggregation: bool = False,
        mask_neighbours: int | None = 1,
    ) -> None:
        self.kernel = kernel
        self.seed = seed
        self.kinds = dict(kinds or {})
        self.order = list(order) if order is not None else None
        self.schema = schema
        self.coordinator_options: dict[str, Any] = dict(
            grid_size=grid_size,
            ridge=ridge,
            response_bandwidth=response_bandwidth,
            discrete_response_bandwidth=discrete_response_bandwidth,
            monotone=monotone,
            discrete_sampling=discrete_sampling,
            batch_size=batch_size,
            secure=secure_aggregation,
            mask_neighbours=mask_neighbours,
        )
        self.min_client_rows = min_client_rows
        self.n_jobs = n_jobs
        self._coordinator: Coordinator | None = None

    def fit(self, tables: Tables | Transport) -> FITSSynthesizer:
        """Run the setup round on the clients' tables.

        Parameters
        ----------
        tables : sequence or mapping of DataFrame, or Transport
            One DataFrame per client (a mapping also names the clients), for an
            in-process federation; or a :class:`~fits.federation.transport.Transport` to clients
            elsewhere (for example :class:`fits.deploy.flower.FlowerTransport`), whose sites
            chose their own kernels (``kernel`` is then not used).

        Returns
        -------
        self
        """
        clients: list[FITSClient] = []
        if isinstance(tables, Transport):
            transport = tables
        else:
            clients, transport = build_federation(
                tables, self.kernel, min_rows=self.min_client_rows, n_jobs=self.n_jobs
            )
        coordinator = Coordinator(transport, **self.coordinator_options)
        schema = coordinator.setup(kinds=self.kinds, order=self.order, schema=self.schema)
        root = np.random.SeedSequence(self.seed)
        lift_seq, sample_seq = root.spawn(2)
        coordinator.configure(lift_seq)
        self._coordinator = coordinator
        self._rng = np.random.default_rng(sample_seq)
        self.schema_ = schema
        self.client_names_ = list(transport.client_names)
        self.n_rows_ = list(coordinator.n_rows)
        if clients and coordinator.batch_size is None:
            coordinator.batch_size = in_process_batch(clients, coordinator.memory_budget)
        if isinstance(tables, Transport):
            self._columns = list(schema.names)
        elif isinstance(tables, Mapping):
            self._columns = list(tables[next(iter(tables))].columns)
        else:
            self._columns = list(tables[0].columns)
        return self

    @property
    def coordinator(self) -> Coordinator:
        """The fitted coordinator (raises if :meth:`fit` has not run)."""
        if self._coordinator is None:
            raise RuntimeError("call fit() before sample()")
        return self._coordinator

    @property
    def uploaded_bytes_(self) -> list[int]:
        """Bytes each client has uploaded so far."""
        return list(self.coordinator.transport.uploaded_bytes)

    def sample(
        self,
        num_rows: int,
        *,
        seed: int | None = None,
        progress: bool | Callable[[str, int, int], None] = False,
    ) -> pd.DataFrame:
        """Draw a synthetic table.

        Parameters
        ----------
        num_rows : int
            Number of rows.
        seed : int, optional
            Seed for this draw; default continues the synthesizer's own stream.
        progress : bool or callable
            ``True`` shows a progress bar per chain column; a callable is called as
            ``progress(column, rows_done, rows_total)``.

        Returns
        -------
        DataFrame
            The input's columns, in the input's order and with its dtypes.
        """
        if isinstance(num_rows, bool) or not isinstance(num_rows, (int, np.integer)):
            raise TypeError(f"num_rows must be an integer, got {num_rows!r}")
        if num_rows < 1:
            raise ValueError(f"num_rows must be at least 1, got {num_rows}")
        coord = self.coordinator
        rng = np.random.default_rng(seed) if seed is not None else self._rng
        if progress is True:
            values = _with_progress_bar(coord, int(num_rows), rng)
        else:
            callback = progress if callable(progress) else None
            values = coord.sample(int(num_rows), rng, progress=callback)
        return self._decode(values)

    def _decode(self, values: np.ndarray) -> pd.DataFrame:
        coord = self.coordinator
        order = coord.schema.order
        cols = {}
        for name in self.schema_.names:
            enc = coord.encoders[name]
            col = enc.decode(values[:, order.index(name)]).reset_index(drop=True)
            flag = missing_flag(name)
            if enc.spec.kind == "continuous" and flag in order:
                absent = coord.encoders[flag].ceil(values[:, order.index(flag)]) == 1
                if enc.spec.dtype == "int":
                    col = col.astype("Int64")
                col = col.mask(pd.Series(absent))
            cols[name] = col
        return pd.DataFrame(cols)[[c for c in self._columns if c in cols]]


def _with_progress_bar(coord: Coordinator, n: int, rng: np.random.Generator) -> np.ndarray:
    from rich.progress import Progress

    with Progress(transient=False) as bar:
        tasks: dict[str, Any] = {}

        def callback(column: str, done: int, total: int) -> None:
            if column not in tasks:
                tasks[column] = bar.add_task(f"{column}", total=total)
            bar.update(tasks[column], completed=done)

        return coord.sample(n, rng, progress=callback)
