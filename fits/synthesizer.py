"""The pandas API: :class:`FITSSynthesizer` (fit on client tables, sample a table).

>>> from fits import FITSSynthesizer
>>> synth = FITSSynthesizer(kernel="knn", seed=0)       # doctest: +SKIP
>>> synth.fit([df_site_a, df_site_b, df_site_c])          # doctest: +SKIP
>>> synthetic = synth.sample(20_000)                      # doctest: +SKIP

``fit`` runs an in-process federation: one :class:`~fits.federation.client.FITSClient`
per table, an :class:`~fits.federation.transport.InProcessTransport`, and a
:class:`~fits.federation.coordinator.Coordinator` that sees only the protocol's messages.

A fitted synthesizer is a live handle on its sites: sampling asks them questions.  So
persistence is explicit.  :meth:`FITSSynthesizer.save` (and pickling) keep the
parameters, the merged schema and the seed, never a site's row; a loaded synthesizer
samples again once :meth:`FITSSynthesizer.connect` has reconnected it to its sites:

>>> synth.save("synth.pkl")                               # doctest: +SKIP
>>> again = FITSSynthesizer.load("synth.pkl")             # doctest: +SKIP
>>> again.connect([df_site_a, df_site_b, df_site_c])      # doctest: +SKIP
>>> again.sample(20_000)    # the rows synth.sample(20_000) gives  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import itertools
import os
import pickle
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from fits._dates import duration_text
from fits._exact import affine_tolerance
from fits._json import plain
from fits._matching import MatchError, draw_matching
from fits.core.boosting import BoostingParams, resolve_settings
from fits.core.cdf import COLLINEARITY_THRESHOLD
from fits.core.continualization import Encoder, continualize
from fits.core.kernels import GaussianKernel, Kernel, check_kernel_settings
from fits.core.names import resolve_columns, resolve_keys
from fits.core.rules import (
    affine_values,
    interval_codes,
    residuals,
    sets_every_row,
    shifted_datetimes,
)
from fits.core.schema import (
    ColumnSpec,
    DataNote,
    Rule,
    Schema,
    decimal_values,
    missing_flag,
    na_labels_at,
    point_mass_flag,
    surrogate_ids,
    to_decimals,
)
from fits.core.tuning import DEFAULT_CANDIDATES, Smoothing
from fits.deploy.inprocess import (
    AuditSpec,
    KernelSpec,
    PolicySpec,
    Tables,
    build_federation,
    in_process_batch,
)
from fits.federation.client import MIN_CLIENT_ROWS, FITSClient
from fits.federation.coordinator import BOOSTING_PROGRESS, Coordinator
from fits.federation.transport import InProcessTransport, Transport
from fits.known import (
    check_known_categories,
    check_known_flags,
    check_known_whole,
    known_dates,
    known_row,
    show_value,
)

if TYPE_CHECKING:
    from fits.io import OutputForms

__all__ = ["SAMPLE_CHUNK_ROWS", "FITSSynthesizer", "NotConnectedError", "restore_dtype"]

#: Rows drawn and decoded at a time by :meth:`FITSSynthesizer.sample`,
#: :meth:`~FITSSynthesizer.iter_sample` and :meth:`~FITSSynthesizer.sample_to_file`.
#: It bounds the working memory (about ``SAMPLE_CHUNK_ROWS x columns x 16`` bytes for
#: the uniforms and draws, plus the decoded chunk); the rows do not depend on it.
SAMPLE_CHUNK_ROWS = 65_536

#: Draws per known row that conditional sampling may spend on matching the known
#: discrete columns that are not first in the chain (:mod:`fits._matching`) before it
#: gives up.  The budget is pooled over a block of known rows (a row matched early
#: leaves its draws to the others), so it binds when the block's rows need more than
#: that many draws each on average: for values the synthesizer draws together, given
#: the earlier known columns, in less than about 1% of its rows.
DEFAULT_MAX_TRIES = 100


class SavedByNewerFitsError(ValueError):
    """:meth:`FITSSynthesizer.load` of a file saved by a newer version of fits."""


def _version_key(version: str) -> tuple[int, ...]:
    """``"0.10.2"`` as ``(0, 10, 2)``, for comparing versions (a suffix such as
    ``.dev1`` or ``rc1`` is left out)."""
    key = []
    for part in str(version).split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        key.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(key)


def _restore(cls: type[FITSSynthesizer], version: str) -> FITSSynthesizer:
    """The first step of unpickling a :class:`FITSSynthesizer` (its state follows):
    an empty instance, after refusing one saved by a newer fits, whose state may hold
    what this version cannot read or would misread.

    Raises
    ------
    SavedByNewerFitsError
    """
    from fits import __version__

    if _version_key(version) > _version_key(__version__):
        raise SavedByNewerFitsError(
            f"saved by fits {version}, newer than this fits {__version__}, whose "
            "settings and schema it may not read right: upgrade fits to "
            f"{version} or later (pip install --upgrade fits) to load it, or fit the "
            "synthesizer again with this version"
        )
    return cls.__new__(cls)


#: What a saved synthesizer's pickle may name besides fits' own classes (dataclasses,
#: enums, kernels, the synthesizer) and :func:`_restore`: numpy's arrays and random
#: generators, and plain containers and values (:class:`_SavedUnpickler`).
_SAFE_GLOBALS = frozenset(
    {
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        *(
            (f"numpy.{core}.multiarray", n)
            for core in ("core", "_core")
            for n in ("_reconstruct", "scalar")
        ),
        *((f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")),
        ("numpy.random._pickle", "__bit_generator_ctor"),
        ("numpy.random._pickle", "__generator_ctor"),
        ("numpy.random._pickle", "__randomstate_ctor"),
        ("numpy.random.bit_generator", "SeedSequence"),
        ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
        ("numpy.random._pcg64", "PCG64"),
        ("numpy.random._pcg64", "PCG64DXSM"),
        ("numpy.random._mt19937", "MT19937"),
        ("numpy.random._philox", "Philox"),
        ("numpy.random._sfc64", "SFC64"),
        ("numpy.random._generator", "Generator"),
        ("copyreg", "_reconstructor"),
        ("collections", "OrderedDict"),
        ("_codecs", "encode"),
        ("decimal", "Decimal"),
        *(("datetime", n) for n in ("date", "datetime", "time", "timedelta", "timezone")),
        *(
            ("builtins", n)
            for n in ("set", "frozenset", "complex", "slice", "range", "bytearray", "object")
        ),
    }
)


class _ForeignGlobal(pickle.UnpicklingError):
    """A saved synthesizer's file names a global no saved synthesizer holds."""


class _SavedUnpickler(pickle.Unpickler):
    """Reads a saved synthesizer, refusing any other global than those a saved one
    holds (:data:`_SAFE_GLOBALS`, fits' data classes, kernels and synthesizers, and
    :func:`_restore`): a pickle may name any function and call it as it is read
    (``os.system``), so a file from elsewhere must not run code by being loaded."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_GLOBALS or (module, name) == (__name__, "_restore"):
            return super().find_class(module, name)
        if module == "fits" or module.startswith("fits."):
            import dataclasses
            import enum

            obj = super().find_class(module, name)
            if isinstance(obj, type) and (
                dataclasses.is_dataclass(obj)
                or issubclass(obj, enum.Enum | Kernel | FITSSynthesizer)
            ):
                return obj
        raise _ForeignGlobal(f"{module}.{name}")


class NotConnectedError(RuntimeError):
    """A fitted synthesizer was asked to sample while not connected to its sites
    (after :meth:`FITSSynthesizer.load` or unpickling): call
    :meth:`FITSSynthesizer.connect` first."""


class FITSSynthesizer(BaseEstimator):
    """Federated synthesizer for mixed-type tables (FITS).

    A scikit-learn estimator: the constructor stores its arguments as given,
    :meth:`fit` validates them, ``get_params`` / ``set_params`` and
    :func:`sklearn.base.clone` work, and :meth:`sample` before :meth:`fit` raises
    :class:`sklearn.exceptions.NotFittedError`.

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
        Column -> ``"continuous"`` / ``"ordinal"`` / ``"nominal"`` / ``"id"`` overrides of the
        inferred kinds (not with ``schema``, whose kinds are set in it: :meth:`fit` refuses
        both).  Here and in every parameter below that names columns, a name is
        the header it equals, or else the one header equal to it up to surrounding
        whitespace (``"age"`` names a header ``" age "``; :mod:`fits.core.names`),
        resolved at :meth:`fit` against the headers the sites report.
    order : sequence of str, optional
        Chain order; default the tables' column order.
    schema : Schema, optional
        A complete schema (kinds, categories, bounds, order) instead of inference.
    grid_size, ridge, collinearity, response_bandwidth, discrete_response_bandwidth, monotone
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
    site_policy : SitePolicy, or one per client (sequence or mapping by name), optional
        The limits each in-process site enforces on the coordinator's requests
        (:class:`~fits.federation.policy.SitePolicy`).  Default: the default policy
        (grids up to 1000 points, 3 queries per synthetic row and column + 1000,
        response bandwidth at least 0.02 sd, and no answer from fewer than k = 5
        effective rows: a site widens its kernel where its own has fewer).
        ``SitePolicy.unrestricted()`` answers everything, as in the paper.  Sites on
        other machines set their own (``fits federate site --policy``).
    upload_precision : {"fixed16", "float32", "float64"}
        How the sites write their Hessians and CDF vectors on the wire (default
        ``"fixed16"``, about a quarter of the float64 bytes, with the error bounds of
        :mod:`fits.federation.codec`; ``"float64"`` is exact).  Secure aggregation always
        sends exact sums.
    rounds : {"auto", 1, 2}
        Message rounds per chain column (default ``"auto"``, chosen per column by its
        bytes against ``round_cost_bytes``; see
        :class:`~fits.federation.coordinator.Coordinator`).  The output is the same up
        to rounding.
    round_cost_bytes : int
        What a message round costs in bytes (default 0: two rounds, fewer bytes; on a
        network where a round costs a second at 100 Mbit/s, about 10_000_000).
    deduplicate : bool
        Ask each distinct query point once (default True; same output).
    grid_points : int, optional
        Most points of the thinned grid of every continuous column after the first
        (default 64; see :class:`~fits.federation.coordinator.Coordinator`); None: the
        uniform grid of ``grid_size`` points, as in the paper.
    design : {"all", "ordered", "continuous", "constant"}
        The covariates of the local-linear design (eq. 5): every one (``"all"``, the
        paper's), the continuous and ordinal ones (``"ordered"``: local-constant in the
        nominal covariates), the continuous ones only (``"continuous"``: local-linear
        in the continuous covariates, local-constant in the discrete ones) or none
        (``"constant"``: the local-constant, Nadaraya-Watson, fit); the others
        stay in the kernel weights.  Far smaller Hessians on tables with many discrete
        columns.  Default ``"ordered"``: on Adult 2.3x fewer uploaded bytes than
        ``"all"`` and a lower energy distance, on Bike 1.4x fewer at about the same
        (docs/benchmarks.md, "The local-linear design").  See
        :class:`~fits.federation.coordinator.Coordinator` and docs/method.md, "Design".
    column_designs : mapping, optional
        Per chain column, the design of its conditional CDF, overriding ``design``:
        e.g. ``{"cnt": "constant"}`` keeps the default design for every other column and
        fits the target ``cnt`` local-constant (on UCI Bike, with sharper ordinal
        penalties, the boosting model trained on the synthetic table gains R^2; see
        docs/benchmarks.md, "The target's design").  A name not in the chain after its
        first column is an error at :meth:`fit` (identifiers and columns that affine
        rules set are not in the chain: the column after a leading identifier is its
        first).
    column_models : mapping, optional
        Per chain column after the first, how its conditional is estimated:
        ``"kernel"`` (the default, Algorithm 1) or ``"boosting"``: a gradient-boosted
        tree model of the column given the columns before it in the chain, fitted by
        federated histograms (a continuous column through its quantile classes; not
        the paper's method: :mod:`fits.core.boosting`, docs/method.md, "Boosted
        columns", and what the sites reveal: docs/privacy.md).  Meant for a target
        column whose conditional depends on many covariates through thresholds and
        interactions, such as UCI Adult's ``income`` or Bike's ``cnt``
        (docs/benchmarks.md, "Boosted columns").  Costs ``1 + n_trees * depth``
        message rounds, which every boosted column shares.
    boosting : mapping or BoostingParams, optional
        The boosted columns' settings (:class:`~fits.core.boosting.BoostingParams`:
        ``n_trees``, ``depth``, ``learning_rate``, ``l2``, ``min_leaf_rows``, ``bins``,
        ``classes``, and early stopping's ``validation_fraction`` (0, the default: off),
        ``n_iter_no_change`` and ``tol``).  A key naming a boosted column, with a
        mapping of settings as its value, gives that column settings of its own (the
        ones it leaves out are the others'): ``{"n_trees": 100, "income":
        {"learning_rate": 0.1, "depth": 6}}`` (:func:`~fits.core.boosting.resolve_settings`).
    site_audit : path, callable, or a mapping by client name, optional
        Where the in-process sites log every request (JSON lines; see
        :class:`~fits.federation.client.FITSClient`).
    rules : bool
        Detect exact rules between columns at setup -- a discrete column that is a
        function of one or two discrete columns, a continuous column that is the sum of
        two or three others (or an affine function of one), a discrete column that is a
        step function of an earlier continuous one, numbers or datetimes
        (``"interval"``: ``senior`` = "yes" where ``age`` >= 65; missing, too, if its
        missing rows occupy one range of ages of their own), in every row at every site
        -- and generate each such column by its rule, so every synthetic row keeps it
        (:mod:`fits.core.rules`; they are listed in ``schema_.rules``).  A ``schema``
        with a ``rules`` entry brings its own rules (checked at every site).  Default
        True; False draws every column from the chain (and finds no near-linear column
        either).
    near_linear : bool
        With ``rules``, also find at setup the continuous columns near-linear in an
        earlier continuous column (pooled least-squares R^2 >=
        :data:`fits.core.rules.NEAR_LINEAR_R2`, no exact rule) and draw each as its
        residual about the line, in its place in the chain, the line added back and
        the draw truncated so the column stays within its bounds (``"linear"`` rules
        in ``schema_.rules``; docs/method.md, "Near-linear columns"; what the sites
        reveal: docs/privacy.md).  Default True: on Bike it brings the pair's spread
        back and lowers the energy distance 9-17%, with the boosting R^2 of ``cnt`` on
        the synthetic table within a seed's noise of the rule off (docs/benchmarks.md,
        "Near-linear columns: later columns see the column"); False finds none; a
        ``schema``'s own ``"linear"`` rules are used either way (delete them there to
        switch them off).
    smoothing : {"fixed", "auto"} or mapping
        The smoothing of each chain column's conditional CDF (:mod:`fits.core.tuning`):
        ``"fixed"`` (default) uses the sites' kernels as they are for every column (the
        paper); ``"auto"`` chooses, per column, one of ``smoothing_candidates`` (a
        sharpness of the category penalties and a reach of the neighbourhood) by a
        held-out score each site computes on its own rows, of which only per-candidate
        sums leave the site (one ``tune`` round at fit; :meth:`Coordinator.tune`); a
        mapping column -> ``Smoothing`` (or ``{"sharpness": s, "reach": b}``) sets it
        by hand.  The choice is in ``smoothing_``.
    smoothing_candidates : sequence of Smoothing, optional
        The candidates of ``smoothing="auto"`` (default
        :data:`fits.core.tuning.DEFAULT_CANDIDATES`).
    tune_relevance : str or sequence of str, optional
        Columns whose kernels get relevance weights per covariate learned from the
        sites' held-out scores (:meth:`Coordinator.tune_relevance
        <fits.federation.coordinator.Coordinator.tune_relevance>`; not in the paper):
        each covariate's standardized distance and penalty rate in that column's kernel
        is multiplied by a learned weight, so covariates that predict the column well
        count more and the others less.  ``"*"``: every column after the chain's first
        that the kernels draw.  Default None (the kernels' own weights).  Runs after
        ``smoothing``; the weights join the column's entry in ``smoothing_``.
    relevance_budget : int, optional
        Candidates scored per column by ``tune_relevance``: at least 5 (d + 2 for a
        column of d < 3 covariates); a column with more covariates than the budget
        less 2 has them probed in groups.  It counts against the sites'
        ``tuning_candidates`` with ``smoothing="auto"``'s.  Default None: what the
        default site policy leaves, 16 (one pass, one probe per covariate up to 14
        covariates), or 10 after ``smoothing="auto"``'s six candidates.

    Attributes
    ----------
    schema_ : Schema
        The merged schema after :meth:`fit`.
    entropy_ : int
        The root of every random draw: ``seed`` when one was given, else the entropy
        numpy drew for it (so that :meth:`connect` continualizes the sites' rows exactly
        as :meth:`fit` did).
    client_names_ : list of str
    n_rows_ : list of int
        Rows per client.
    site_digests_ : dict of str to str
        Site name -> the SHA-256 (hex) of the description that site sent in the clear
        in the setup round (row count, per column its dtype, minimum and maximum or
        category set, decimals, ...; :func:`~fits.core.schema.description_digest`): a
        hash of what the coordinator received anyway, kept (and saved) so that
        :meth:`connect` can tell a site whose data changed since the fit.
    site_column_digests_ : dict of str to dict of str to str
        Site name -> column -> the SHA-256 (hex) of that column's part of the same
        description, less how pandas stores the column (its dtype: ``float64`` or
        ``double[pyarrow]``, ``int64`` or whole numbers in ``float64``): what
        :meth:`connect` compares, so that the same values in other dtypes connect and a
        changed site is refused naming the columns that changed
        (:func:`~fits.core.schema.column_digests`; a synthesizer saved before them
        compares :attr:`site_digests_`).
    setup_declared_ : dict
        The column declarations the setup round sent the sites (the ``kinds``, or the
        ``schema``'s kinds, given at fit): :meth:`connect` sends them again, so that an
        unchanged site describes its table as it did at fit.
    smoothing_ : dict
        Column -> the :class:`~fits.core.tuning.Smoothing` its conditional CDF uses
        (columns not listed use the sites' kernels as they are).  Kept by :meth:`save`
        and reused by :meth:`connect` (no second tune round).
    tuning_ : dict
        With ``smoothing="auto"``: per tuned column, the candidates, the scores summed
        over the sites, the rows scored and the index of the chosen candidate.
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
        collinearity: float = COLLINEARITY_THRESHOLD,
        response_bandwidth: float = 0.05,
        discrete_response_bandwidth: float = 0.05,
        monotone: str = "isotonic",
        discrete_sampling: str = "mass",
        batch_size: int | None = None,
        min_client_rows: int = MIN_CLIENT_ROWS,
        n_jobs: int | None = None,
        secure_aggregation: bool = False,
        mask_neighbours: int | None = 1,
        site_policy: PolicySpec = None,
        site_audit: AuditSpec = None,
        upload_precision: str = "fixed16",
        rounds: str | int = "auto",
        deduplicate: bool = True,
        grid_points: int | None = 64,
        round_cost_bytes: int = 0,
        rules: bool = True,
        near_linear: bool = True,
        design: str = "ordered",
        column_designs: Mapping[str, str] | None = None,
        column_models: Mapping[str, str] | None = None,
        boosting: Mapping[str, Any] | BoostingParams | None = None,
        smoothing: str | Mapping[str, Any] = "fixed",
        smoothing_candidates: Sequence[Any] | None = None,
        tune_relevance: str | Sequence[str] | None = None,
        relevance_budget: int | None = None,
    ) -> None:
        self.kernel = kernel
        self.seed = seed
        self.kinds = kinds
        self.order = order
        self.schema = schema
        self.grid_size = grid_size
        self.ridge = ridge
        self.collinearity = collinearity
        self.response_bandwidth = response_bandwidth
        self.discrete_response_bandwidth = discrete_response_bandwidth
        self.monotone = monotone
        self.discrete_sampling = discrete_sampling
        self.batch_size = batch_size
        self.min_client_rows = min_client_rows
        self.n_jobs = n_jobs
        self.secure_aggregation = secure_aggregation
        self.mask_neighbours = mask_neighbours
        self.site_policy = site_policy
        self.site_audit = site_audit
        self.upload_precision = upload_precision
        self.rounds = rounds
        self.deduplicate = deduplicate
        self.grid_points = grid_points
        self.round_cost_bytes = round_cost_bytes
        self.rules = rules
        self.near_linear = near_linear
        self.design = design
        self.column_designs = column_designs
        self.column_models = column_models
        self.boosting = boosting
        self.smoothing = smoothing
        self.smoothing_candidates = smoothing_candidates
        self.tune_relevance = tune_relevance
        self.relevance_budget = relevance_budget

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        tables: Tables | Transport,
        *,
        rows: int = 0,
        on_phase: Callable[[str], None] | None = None,
    ) -> FITSSynthesizer:
        """Run the setup and configure rounds on the clients' tables.

        Parameters
        ----------
        tables : sequence or mapping of DataFrame, or Transport
            One DataFrame per client (a mapping also names the clients), for an
            in-process federation; or a :class:`~fits.federation.transport.Transport` to clients
            elsewhere (for example :class:`fits.deploy.flower.FlowerTransport`), whose sites
            chose their own kernels (``kernel`` is then not used).
        rows : int
            Synthetic rows the first :meth:`sample` will draw, if known: declared to the
            sites in the configure round (their policies budget their answers by it),
            which saves the configure round that sampling would otherwise add (one
            message round, seconds on a networked federation).  Default 0: declared when
            sampling.  The output does not depend on it.
        on_phase : callable, optional
            Called as ``on_phase(text)`` when a phase of the fit starts (the setup round,
            each round of rule detection, the configure round, the tune round of
            ``smoothing="auto"``, each column of ``tune_relevance``), ``text`` saying which
            in a few words (:attr:`Coordinator.on_phase
            <fits.federation.coordinator.Coordinator.on_phase>`); for progress on a
            wide table, where the fit takes minutes.  Default None: silent.  The output
            does not depend on it.

        Returns
        -------
        self
        """
        _check_seed("seed", self.seed)
        self._check_settings()
        if self.kinds is not None and not isinstance(self.kinds, Mapping):
            raise TypeError(f"kinds must be a mapping column -> kind, got {self.kinds!r}")
        if self.schema is not None and not isinstance(self.schema, Schema):
            fix = (
                ": read a schema file with Schema.from_json(Path(path).read_text("
                "encoding='utf-8-sig')), or detect one with Schema.detect(tables)"
                if isinstance(self.schema, (str, os.PathLike, Mapping))
                else ""
            )
            raise TypeError(f"schema must be a fits Schema, got {type(self.schema).__name__}{fix}")
        if self.schema is not None and self.kinds:  # the schema's kinds win: say so
            raise ValueError(
                f"kinds cannot be combined with schema: the schema fixes every column's kind, "
                f"so kinds={dict(self.kinds)!r} would be ignored; set the kind in the schema "
                '(its "kind" in the JSON file that Schema.from_json reads), or leave schema '
                "out to have kinds applied to the inferred one"
            )
        smoothing = self._check_smoothing()
        budget = self.relevance_budget  # checked before any round
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1
        ):
            raise ValueError(f"relevance_budget must be an integer >= 1 or None, got {budget!r}")
        if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 0:
            raise ValueError(f"rows must be an integer >= 0, got {rows!r}")
        tables = _site_tables(tables)
        _note_index(tables)
        self._close()
        # a refit that fails leaves no earlier fit behind (sample() then says "not
        # fitted", not "reconnect"), and stops the sites it started
        for name in _FITTED:
            self.__dict__.pop(name, None)
        try:
            return self._fit(tables, smoothing, int(rows), on_phase)
        except BaseException:
            self._close()
            for name in _FITTED:
                self.__dict__.pop(name, None)
            raise

    def _fit(
        self,
        tables: Tables | Transport,
        smoothing: dict[str, Smoothing] | None,
        rows: int,
        on_phase: Callable[[str], None] | None = None,
    ) -> FITSSynthesizer:
        root = np.random.SeedSequence(self.seed)
        coordinator, schema = self._open(
            tables,
            root,
            kinds=self.kinds,
            order=self.order,
            schema=self.schema,
            rows=rows,
            on_phase=on_phase,
        )
        # checked before smoothing="auto"'s tune round, which a refusal would waste
        learn = self._relevance_columns(schema, coordinator)
        if smoothing is None:  # "auto": one tune round, seeded by the third child
            candidates = (
                DEFAULT_CANDIDATES
                if self.smoothing_candidates is None
                else [Smoothing.from_value(c) for c in self.smoothing_candidates]
            )
            coordinator.tune(
                np.random.SeedSequence(root.entropy, spawn_key=(2,)), candidates=candidates
            )
        else:
            smoothing = resolve_keys(smoothing, schema.names, "smoothing")
            unknown = sorted(set(smoothing) - set(coordinator.schema.order[1:]))  # type: ignore[union-attr]
            if unknown:
                self._close()
                raise ValueError(
                    f"smoothing: column(s) {unknown} are not in the schema's chain after its "
                    "first column (the first is drawn from its marginal)"
                )
            weighted = {c: dict(v.relevance) for c, v in smoothing.items() if v.relevance}
            if weighted:  # checked as a kernel's weights are (they multiply the sites')
                try:
                    check_kernel_settings(
                        GaussianKernel(relevance=weighted),
                        schema,
                        engine=coordinator.schema,
                        boosted=[c for c in schema.order if coordinator._boosted(c)],
                    )
                except ValueError as exc:
                    self._close()
                    raise ValueError(f"smoothing: {exc}") from None
            coordinator.smoothing = dict(smoothing)
        if learn:
            coordinator.tune_relevance(
                learn,
                int(np.random.SeedSequence(root.entropy, spawn_key=(3,)).generate_state(1)[0]),
                budget=None if self.relevance_budget is None else int(self.relevance_budget),
            )
        coordinator.on_phase = None  # the fit is done: sampling says nothing through it
        self.smoothing_ = dict(coordinator.smoothing)
        self.tuning_ = dict(coordinator.tuning)
        self.schema_ = schema
        self.entropy_ = int(root.entropy)  # type: ignore[arg-type]
        self.client_names_ = list(coordinator.transport.client_names)
        self.n_rows_ = list(coordinator.n_rows)
        self.site_digests_ = dict(zip(self.client_names_, coordinator.site_digests, strict=True))
        self.site_column_digests_ = dict(
            zip(self.client_names_, coordinator.site_column_digests, strict=True)
        )
        self.setup_declared_ = {c: dict(d) for c, d in coordinator.declared.items()}
        # the sample stream is the second child of the seed's first spawn (the first
        # child lifts the discrete columns, in _open); spawning again from `root` would
        # give other children (SeedSequence counts its spawns), so start afresh
        sample_seq = np.random.SeedSequence(root.entropy).spawn(2)[1]
        self._rng = np.random.default_rng(sample_seq)
        if isinstance(tables, Transport):
            self._columns = list(schema.names)
        elif isinstance(tables, Mapping):
            self._columns = list(tables[next(iter(tables))].columns)
        else:
            self._columns = list(tables[0].columns)
        return self

    def connect(self, tables: Tables | Transport) -> FITSSynthesizer:
        """Reconnect a fitted synthesizer (for example a loaded one) to its sites.

        Runs the setup and configure rounds again with the fitted schema and seed, so
        that every site continualizes its rows exactly as in :meth:`fit`: the loaded
        synthesizer then samples what the original would have, bit for bit, and its
        default random stream continues where it stood when it was saved.

        The setup round sends the sites the column declarations of the fit
        (:attr:`setup_declared_`), and each site's description of its table is checked
        against the one it gave at fit, by its SHA-256 (:attr:`site_digests_`: a hash
        of what the site sent in the clear, kept at fit), column by column
        (:attr:`site_column_digests_`).  A site whose row count, columns, or a
        column's minimum, maximum, category set, decimals or count of missing values,
        differs is refused, naming the columns that differ; the same values in other
        dtypes (``convert_dtypes(dtype_backend="pyarrow")``, whole numbers as ``int64``
        rather than ``float64``) are the same data.  The check sees only that description: an edit
        that keeps every row count, minimum, maximum, category set and the other
        figures the description holds (a value changed within its column's old range,
        rows swapped for others alike in all of these) is not seen, and the
        synthesizer then samples from the changed data.  A synthesizer saved before
        the digests were kept (no :attr:`site_digests_`) connects without this check,
        with a :class:`~fits.core.schema.DataNote` that says so.

        Parameters
        ----------
        tables : sequence or mapping of DataFrame, or Transport
            The same sites as at :meth:`fit` (same names, same row counts, the same
            data), as tables or a transport.

        Returns
        -------
        self

        Raises
        ------
        NotFittedError
            The synthesizer was never fitted.
        ValueError
            The sites are not those it was fitted on (names or row counts differ), or
            a site's data changed since the fit (its setup description differs): fit
            a new synthesizer instead.  The federation is closed first.
        """
        self._check_fitted()
        tables = _site_tables(tables)
        self._close()
        digests: dict[str, str] | None = getattr(self, "site_digests_", None)
        declared: dict[str, dict[str, str]] | None = getattr(self, "setup_declared_", None)
        if digests is None or declared is None:
            warnings.warn(
                "connect(): this synthesizer was saved before fits kept a digest of each "
                "site's setup description, so whether a site's data changed since the fit "
                "cannot be checked; if it did, the synthesizer samples from the changed "
                "data. Fit again (and save) to have connect() check it",
                DataNote,
                stacklevel=2,
            )
            digests, declared = None, None
        by_column: dict[str, dict[str, str]] | None = getattr(self, "site_column_digests_", None)

        def check_sites(coordinator: Coordinator) -> None:
            names, rows = list(coordinator.transport.client_names), list(coordinator.n_rows)
            if names != self.client_names_ or rows != self.n_rows_:
                raise ValueError(
                    "connect() needs the sites this synthesizer was fitted on; fitted on "
                    f"{dict(zip(self.client_names_, self.n_rows_, strict=True))} (site: "
                    f"rows), got {dict(zip(names, rows, strict=True))}. To learn from other "
                    "data, call fit() instead"
                )
            if digests is None:
                return
            if by_column is None:  # saved before the per-column digests: the whole one
                changed = [
                    repr(n)
                    for n, d in zip(names, coordinator.site_digests, strict=True)
                    if digests.get(n) != d
                ]
            else:
                changed = []
                for n, now in zip(names, coordinator.site_column_digests, strict=True):
                    then = by_column.get(n, {})
                    columns = [c for c in then if now.get(c) != then[c]]
                    columns += [c for c in now if c not in then]
                    if columns:
                        changed.append(
                            f"{n!r} (column{'s' if len(columns) > 1 else ''} "
                            f"{', '.join(repr(c) for c in columns)})"
                        )
            if changed:
                which = ", ".join(changed)
                raise ValueError(
                    f"connect(): the data at site{'s' if len(changed) > 1 else ''} {which} "
                    "changed since fit (its setup description differs: a column added or "
                    "missing, or a column's minimum, maximum, category set, decimals or "
                    "missing values; not its dtype alone); to learn from the new data "
                    "call fit() instead"
                )

        root = np.random.SeedSequence(self.entropy_)
        coordinator, _ = self._open(
            tables,
            root,
            kinds=None,
            order=None,
            schema=self.schema_,
            declare=declared,
            check_sites=check_sites,
        )
        coordinator.smoothing = dict(getattr(self, "smoothing_", {}))
        return self

    def _open(
        self,
        tables: Tables | Transport,
        root: np.random.SeedSequence,
        *,
        kinds: Mapping[str, str] | None,
        order: Sequence[str] | None,
        schema: Schema | None,
        rows: int = 0,
        on_phase: Callable[[str], None] | None = None,
        declare: Mapping[str, Mapping[str, str]] | None = None,
        check_sites: Callable[[Coordinator], None] | None = None,
    ) -> tuple[Coordinator, Schema]:
        """Build the federation, run setup and configure; the coordinator is kept
        (``on_phase``: :attr:`Coordinator.on_phase`; ``declare``, ``check_sites``: those
        of :meth:`Coordinator.setup`; a ``check_sites`` that raises closes a federation
        built here)."""
        boosting, column_boosting = self._boosting_params()  # checked before any site
        clients: list[FITSClient] = []
        if isinstance(tables, Transport):
            transport = tables
        else:
            clients, transport = build_federation(
                tables,
                self.kernel,
                min_rows=self.min_client_rows,
                n_jobs=self.n_jobs,
                policy=self.site_policy,
                audit=self.site_audit,
            )
        coordinator = Coordinator(
            transport,
            grid_size=self.grid_size,
            ridge=self.ridge,
            collinearity=self.collinearity,
            response_bandwidth=self.response_bandwidth,
            discrete_response_bandwidth=self.discrete_response_bandwidth,
            monotone=self.monotone,
            discrete_sampling=self.discrete_sampling,
            batch_size=self.batch_size,
            secure=self.secure_aggregation,
            mask_neighbours=self.mask_neighbours,
            precision=self.upload_precision,
            rounds=self.rounds,
            deduplicate=self.deduplicate,
            grid_points=self.grid_points,
            round_cost_bytes=self.round_cost_bytes,
            design=self.design,
            column_designs=self.column_designs,
            column_models=self.column_models,
            boosting=None if self.boosting is None else boosting,
            column_boosting=column_boosting,
            on_phase=on_phase,
        )
        try:
            schema = coordinator.setup(
                kinds=kinds,
                order=order,
                schema=schema,
                rules=bool(self.rules),
                near_linear=bool(self.near_linear),
                declare=declare,
                check_sites=check_sites,
            )
            self._check_kernels(schema, coordinator)  # before the sites continualize
            lift_seq, _ = root.spawn(2)
            coordinator.configure(lift_seq, rows=rows)
        except BaseException:
            if clients and isinstance(transport, InProcessTransport):
                transport.close()  # the sites' threads end with the failed setup
            raise
        if clients and coordinator.batch_size is None:
            coordinator.batch_size = in_process_batch(clients, coordinator.memory_budget)
        self._coordinator: Coordinator | None = coordinator
        self._owns_transport = bool(clients)
        return coordinator, schema

    def _check_kernels(self, schema: Schema, coordinator: Coordinator) -> None:
        """Refuse in-process kernels' ``column_penalties`` and ``relevance`` that would do
        nothing given the merged ``schema`` (:func:`~fits.core.kernels.check_kernel_settings`,
        the check every site also runs at configure).  With one kernel per site, the
        message names the site."""

        given = self.kernel
        names = coordinator.transport.client_names
        if isinstance(given, Mapping):
            kernels = [(str(n), k) for n, k in given.items()]
        elif isinstance(given, Sequence) and not isinstance(given, str):
            kernels = list(zip(names, given, strict=False))
        else:
            kernels = [("", given)]
        boosted = [c for c in schema.order if coordinator._boosted(c)]
        for name, kernel in kernels:
            if not isinstance(kernel, Kernel):
                continue
            try:
                check_kernel_settings(kernel, schema, engine=coordinator.schema, boosted=boosted)
            except ValueError as exc:
                if not name:
                    raise
                raise ValueError(f"{name}'s kernel: {exc}") from None

    def _relevance_columns(self, schema: Schema, coordinator: Coordinator) -> list[str]:
        """``tune_relevance`` checked and resolved to chain columns (``"*"``: every
        column after the first that the kernels draw, none a rule sets)."""
        value = self.tune_relevance
        if value is None:
            return []
        chain = list(coordinator.schema.order)  # type: ignore[union-attr]
        # set by their rule in every row (a sum's, an interval rule's of a source with no
        # missing values): no kernel to weigh
        summed = {r.column for r in schema.rules or [] if sets_every_row(schema, r)}
        drawn = [
            c
            for c in chain[1:]
            if c in schema.names and c not in summed and not coordinator._boosted(c)
        ]
        if isinstance(value, str):
            if value == "*":  # not the columns a function rule draws either (its kernel
                # only serves a combination the rule does not cover)
                ruled = {r.column for r in schema.rules or [] if r.kind not in ("linear", "order")}
                return [c for c in drawn if c not in ruled]
            value = [value]
        if not isinstance(value, Sequence):
            raise TypeError(
                f"tune_relevance must be '*', a column or a list of columns, got {value!r}"
            )
        names = resolve_keys(dict.fromkeys(value), schema.names, "tune_relevance", strict=True)
        wrong = [c for c in names if c not in drawn]
        if wrong:
            raise ValueError(
                f"tune_relevance: {wrong} are not columns the kernels draw given earlier "
                f"ones (the chain's first column, boosted columns, columns a rule sets "
                f"and identifiers have no kernel to weigh); choose among: {', '.join(drawn)}"
            )
        return list(names)

    def _check_settings(self) -> None:
        """The plain settings checked before any site is built: switches that are
        True or False (``bool("no")`` is True), whole numbers, a list for ``order``
        (a string is no chain order) and ``smoothing_candidates`` (checked whether or
        not ``smoothing="auto"`` uses them)."""
        for name in ("secure_aggregation", "deduplicate", "rules", "near_linear"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        from fits.federation.codec import PRECISIONS

        if self.upload_precision not in PRECISIONS:  # the coordinator calls it "precision"
            raise ValueError(
                f"upload_precision must be one of {PRECISIONS}, got {self.upload_precision!r}"
            )
        rows = self.min_client_rows
        if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
            raise ValueError(f"min_client_rows must be a whole number >= 1, got {rows!r}")
        if self.order is not None and (
            isinstance(self.order, (str, bytes)) or not isinstance(self.order, Sequence)
        ):
            raise TypeError(
                f"order must be a list of every column, in the chain's order, got {self.order!r}"
            )
        candidates = self.smoothing_candidates
        if candidates is not None:
            if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Sequence):
                raise TypeError(
                    "smoothing_candidates must be a list of Smoothing (or "
                    f"{{'sharpness': s, 'reach': b}}), got {candidates!r}"
                )
            if not candidates:
                raise ValueError("smoothing_candidates is empty; give at least one, or None")
            try:
                for candidate in candidates:
                    Smoothing.from_value(candidate)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"smoothing_candidates: {exc}") from None

    def _boosting_params(self) -> tuple[BoostingParams, dict[str, BoostingParams]]:
        """``boosting`` as (every boosted column's settings, per column overrides)."""
        return resolve_settings(self.boosting)

    def _check_smoothing(self) -> dict[str, Smoothing] | None:
        """``smoothing`` validated: the fixed choice per column, or None for "auto"."""
        value = self.smoothing
        if isinstance(value, str):
            if value not in ("fixed", "auto"):
                raise ValueError(
                    f"smoothing must be 'fixed', 'auto' or a mapping column -> smoothing, "
                    f"got {value!r}"
                )
            return {} if value == "fixed" else None
        if not isinstance(value, Mapping):
            raise TypeError(f"smoothing must be 'fixed', 'auto' or a mapping, got {value!r}")
        try:
            return {str(c): Smoothing.from_value(v) for c, v in value.items()}
        except (TypeError, ValueError) as exc:
            raise ValueError(f"smoothing: {exc}") from None

    def _close(self) -> None:
        """Stop the worker threads of an in-process federation this object built."""
        coordinator = getattr(self, "_coordinator", None)
        if coordinator is not None and getattr(self, "_owns_transport", False):
            transport = coordinator.transport
            if isinstance(transport, InProcessTransport):
                transport.close()
        self._coordinator = None

    def _check_fitted(self) -> None:
        if not hasattr(self, "schema_"):
            raise NotFittedError(
                "this FITSSynthesizer is not fitted yet: call fit(tables) with one "
                "DataFrame per site (or a Transport to the sites) before sample()"
            )

    @property
    def coordinator(self) -> Coordinator:
        """The live coordinator.

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        NotConnectedError
            After :meth:`load` or unpickling, before :meth:`connect`.
        """
        self._check_fitted()
        coordinator = getattr(self, "_coordinator", None)
        if coordinator is None:
            raise NotConnectedError(
                "this FITSSynthesizer was saved, pickled or copied (copy.copy and "
                "copy.deepcopy pickle it), which keeps its schema, settings and seed but "
                "not its sites: reconnect it with "
                "synth.connect(tables) (the sites' tables, or a Transport to them) "
                "before sample()"
            )
        return coordinator

    # ------------------------------------------------------------------ persistence
    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the live federation: the coordinator, the transport and the
        sites (their rows and continualized data) are dropped; see :meth:`save`."""
        state = dict(super().__getstate__())
        state["_coordinator"] = None
        state["_owns_transport"] = False
        return state

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        """Pickle as ``_restore(cls, fits version)`` then the state: unpickling checks
        the version that saved it (:func:`_restore`) before it reads the state, which
        a newer fits may fill with classes or fields this one does not know."""
        from fits import __version__

        return (_restore, (type(self), __version__), self.__getstate__())

    def __setstate__(self, state: dict[str, Any]) -> None:
        """The saved state; a parameter added to fits after the file was saved takes
        its default (``get_params`` and ``clone`` need every parameter)."""
        super().__setstate__(state)
        signature = inspect.signature(type(self).__init__).parameters
        for name in self._get_param_names():
            if name not in self.__dict__:
                setattr(self, name, signature[name].default)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Save the synthesizer: parameters, fitted schema, seed and random stream.

        No site row is written, nor anything computed from rows at a site (the sites'
        continualized data, the coordinator's estimates) beyond the merged schema and,
        per site, the SHA-256 of its setup description and one of each column's part of
        it (:attr:`site_digests_`, :attr:`site_column_digests_`: hashes of what it sent
        in the clear, for :meth:`connect` to tell changed data): a fitted
        synthesizer is a live handle on its sites, and the saved one must be
        reconnected to them with :meth:`connect` before it samples.  The file is a
        pickle (load only files you trust) and is written atomically.

        Parameters
        ----------
        path : str or path-like
            Where to write, e.g. ``"synth.pkl"`` (a leading ``~`` is the home folder; its
            folder must exist; a symbolic link is written through, the link kept).

        Returns
        -------
        Path

        Raises
        ------
        fits.io.OutputError
            ``path`` is a folder (or ends with a slash), an existing read-only file, an
            existing file that is not a saved synthesizer (a table, a schema: ``save``
            replaces only its own files, and empty ones), or in a folder that does not
            exist or cannot be written.
        """
        from fits.io import OutputError, check_output, output_path, write_bytes

        # "~/m.pkl": the home's, never a folder named "~"; "m.pkl/" (a folder): refused
        path = output_path(path, "save: path")
        check_output(path, option="save: path")
        if not self._replaceable(Path(path)):
            raise OutputError(
                f"save: path {str(path)!r} exists and is not a saved FITSSynthesizer; fits "
                "never writes over other files (a table, a schema). Choose another path, "
                "or remove that file first"
            )
        try:
            blob = pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise TypeError(self._unpicklable(exc)) from exc
        return write_bytes(blob, path)

    def _replaceable(self, path: Path) -> bool:
        """Whether :meth:`save` may write at ``path``: nothing there, an empty file, or a
        synthesizer saved before (its pickle names the class in its first bytes; read,
        never unpickled)."""
        try:
            with open(path, "rb") as fh:
                head = fh.read(256)
        except FileNotFoundError:
            return True
        except OSError:
            return True  # check_output has passed it; the write itself says what fails
        if not head:
            return True
        names = {("fits.synthesizer", "FITSSynthesizer")}
        names.add((type(self).__module__, type(self).__qualname__))
        return head.startswith(b"\x80") and any(
            module.encode() in head and name.encode() in head for module, name in names
        )

    def _unpicklable(self, exc: BaseException) -> str:
        """What :meth:`save` says when pickling fails: the parameter that cannot be
        pickled (a lambda or a local function as ``site_audit``, an open handle), and
        what to give instead."""
        for name, value in self.get_params(deep=False).items():
            try:
                pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                fix = (
                    "a file path or a function defined at the top of a module"
                    if name == "site_audit"
                    else "a value that can be pickled (no lambda, local function or open handle)"
                )
                return (
                    f"save: parameter {name}={value!r} cannot be saved (pickle: {exc}); "
                    f"set it to {fix} (set_params({name}=...)) and save again"
                )
        return f"save: this synthesizer cannot be saved (pickle: {exc})"

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, trusted: bool = False) -> FITSSynthesizer:
        """Load a synthesizer written by :meth:`save` (not yet connected to its sites).

        The file is a pickle, and a pickle can name any function to call as it is
        read.  ``load`` reads only what a saved synthesizer holds (fits' data classes,
        kernels and synthesizers, numpy arrays and generators, plain values) and
        refuses a file that names anything else before calling it; a file from
        elsewhere cannot run code by being loaded.  ``pickle.load`` on the same file
        has no such check.

        Parameters
        ----------
        path : str or path-like
            A leading ``~`` is the home folder.
        trusted : bool
            Read the file with plain ``pickle`` (no check): only for a file you saved
            yourself that ``load`` refuses (one holding a custom kernel class of
            yours, say).

        Returns
        -------
        FITSSynthesizer
            Call :meth:`connect` with its sites before :meth:`sample`.

        Raises
        ------
        ValueError
            ``path`` is no file (missing, or a folder), cannot be read, is not a
            saved synthesizer, or names a function or class a saved synthesizer never
            holds; the message names the path and the fix.
        SavedByNewerFitsError
            A ``ValueError``: the file was saved by a newer version of fits (upgrade
            fits, or fit again with this one).
        """
        path = Path(path).expanduser()
        where = repr(str(path)) + ("" if path.is_absolute() else f" (in {str(Path.cwd())!r})")
        if path.is_dir():
            raise ValueError(
                f"load: {where} is a folder, not a saved FITSSynthesizer; give the file that "
                f"save wrote (save returns its path), e.g. {str(path / 'synth.pkl')!r}"
            )
        try:
            with open(path, "rb") as fh:
                obj = pickle.load(fh) if trusted else _SavedUnpickler(fh).load()
        except FileNotFoundError:
            raise ValueError(
                f"load: no file {where}; give the path that save wrote (save returns it), "
                "or fit and save a synthesizer there first"
            ) from None
        except OSError as exc:  # permissions, a device error
            raise ValueError(
                f"load: {where} cannot be read ({exc.strerror or exc}); make it readable, "
                "or give another saved synthesizer"
            ) from None
        except SavedByNewerFitsError as exc:
            raise SavedByNewerFitsError(f"load: {where}: {exc}") from None
        except _ForeignGlobal as exc:
            raise ValueError(
                f"load: {where} names {exc}, which a saved FITSSynthesizer never holds, so "
                "it was not read (a pickle may run code as it is read); if you saved it "
                "yourself and trust it, load it with FITSSynthesizer.load(path, trusted=True)"
            ) from None
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError) as exc:
            # ValueError: a pickle protocol newer than this Python's, among others
            raise ValueError(f"{path}: not a saved FITSSynthesizer ({exc})") from exc
        if not isinstance(obj, cls):
            raise ValueError(f"{path}: holds a {type(obj).__name__}, not a saved {cls.__name__}")
        return obj

    @property
    def uploaded_bytes_(self) -> list[int]:
        """Bytes each client has uploaded so far."""
        return list(self.coordinator.transport.uploaded_bytes)

    def sample(
        self,
        num_rows: int,
        *,
        seed: int | None = None,
        progress: bool | Callable[[str, int, int], None] | None = False,
    ) -> pd.DataFrame:
        """Draw a synthetic table.

        The rows are drawn in chunks of :data:`SAMPLE_CHUNK_ROWS` (see
        :meth:`iter_sample`), so the working memory beyond the returned table stays
        bounded; the result does not depend on the chunking. For more rows than fit in
        memory use :meth:`sample_to_file` or :meth:`iter_sample`.

        Parameters
        ----------
        num_rows : int
            Number of rows, 0 or more.  0 gives the table of no rows: the input's
            columns, in order, in the dtypes a draw of rows has (as
            :meth:`sample_remaining_columns` of a known table of no rows); no site is
            asked and the random stream does not move.
        seed : int, optional
            Seed for this draw; default continues the synthesizer's own stream.
        progress : bool or callable
            ``True`` shows a progress bar per chain column; a callable is called as
            ``progress(column, rows_done, rows_total)``.

        Returns
        -------
        DataFrame
            The input's columns, in the input's order and with its dtypes.

        Raises
        ------
        TypeError
            ``num_rows`` is not an integer (a float such as ``10.0``, a bool).
        ValueError
            ``num_rows`` is negative, or the table would not fit in memory.
        """
        if (
            isinstance(num_rows, (int, np.integer))
            and not isinstance(num_rows, bool)
            and hasattr(self, "_columns")
        ):
            _check_table_fits(int(num_rows), len(self._columns))
        if not (progress is None or isinstance(progress, bool) or callable(progress)):
            raise TypeError(
                "progress must be True (a progress bar), False, or a callable "
                f"progress(column, rows_done, rows_total), got {progress!r}"
            )
        if progress is True:
            bar, callback = progress_bar()
            with bar:
                chunks = list(self.iter_sample(num_rows, seed=seed, progress=callback))
        else:
            chunks = list(
                self.iter_sample(
                    num_rows, seed=seed, progress=progress if callable(progress) else None
                )
            )
        if len(chunks) == 1:
            return chunks[0]
        return pd.concat(chunks, ignore_index=True)

    def iter_sample(
        self,
        num_rows: int,
        *,
        chunk_rows: int | None = None,
        first_chunk_rows: int | None = None,
        seed: int | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> Iterator[pd.DataFrame]:
        """Draw a synthetic table chunk by chunk, in bounded memory.

        Every synthetic row is a function of the fitted model and its own row of
        uniforms only (Algorithm 2 draws each row's chain independently), and the
        uniforms come row by row from one stream: chunk ``k`` takes the next
        ``rows_k x P`` values of the generator (``numpy.random.Generator.random``
        yields the same numbers whether asked for at once or in pieces). So the rows
        are the same whatever the chunk size: concatenating the chunks gives exactly
        :meth:`sample` with the same seed, and ``--rows N --seed S`` always gives the
        same table. Surrogate values of ``"id"`` columns are numbered across the
        chunks (``start`` and the total are passed to the decoder), so they do not
        depend on the chunks either.

        Parameters
        ----------
        num_rows : int
            Total number of rows, 0 or more (0: one chunk of no rows, in the output's
            dtypes; nothing is drawn).
        chunk_rows : int, optional
            Rows per chunk (default :data:`SAMPLE_CHUNK_ROWS`); bounds the memory, does
            not change the rows.
        first_chunk_rows : int, optional
            A different size for the first chunk (``fits synthesize`` times a small
            first chunk to estimate the whole run); does not change the rows.
        seed : int, optional
            Seed for this draw; default continues the synthesizer's own stream.
        progress : callable, optional
            Called as ``progress(column, rows_done, rows_total)`` over all chunks.

        Yields
        ------
        DataFrame
            Consecutive chunks of the table (the input's columns and dtypes).
        """
        _check_rows(num_rows)
        starts = _chunk_starts(int(num_rows), chunk_rows, first_chunk_rows)
        _check_seed("seed", seed, sequence=True)
        progress = _check_progress(progress)
        coord = self.coordinator
        if num_rows == 0:  # as a known table of no rows: one chunk of none, nothing drawn
            return iter([self._empty()])
        rng = np.random.default_rng(seed) if seed is not None else self._rng
        total = int(num_rows)
        coord.declare_rows(total)  # one configure round for all chunks (the sites' budget)
        return self._chunks(coord, total, starts, rng, progress)

    def _chunks(
        self,
        coord: Coordinator,
        total: int,
        starts: Iterable[int],
        rng: np.random.Generator,
        progress: Callable[[str, int, int], None] | None,
        given: np.ndarray | None = None,
    ) -> Iterator[pd.DataFrame]:
        """The decoded chunks of one draw of ``total`` rows (``given``: the known
        values of conditional sampling, one row per row, cut with the chunks)."""
        for start, stop in itertools.pairwise(itertools.chain(starts, [total])):
            n = stop - start
            callback = None
            if progress is not None:

                def callback(column: str, done: int, _n: int, _start: int = start) -> None:
                    if column == BOOSTING_PROGRESS:  # rounds, not rows
                        progress(column, done, _n)
                    else:
                        progress(column, _start + done, total)

            part = None if given is None else given[start:stop]
            values = coord.sample(n, rng, progress=callback, given=part)
            yield self._decode(values, start=start, total=total)

    def _matched_chunks(
        self,
        coord: Coordinator,
        known: pd.DataFrame,
        starts: Iterable[int],
        rng: np.random.Generator,
        progress: Callable[[str, int, int], None] | None,
        given: np.ndarray | None,
        matched: tuple[list[str], np.ndarray],
        max_tries: int,
    ) -> Iterator[pd.DataFrame]:
        """The decoded chunks of a conditional draw whose later known columns are
        matched by draws (:func:`fits._matching.draw_matching`), cut at ``starts``."""
        total = len(known)
        names, codes = matched
        order = list(coord.schema.order)  # type: ignore[union-attr]
        fixed = 0 if given is None else given.shape[1]
        drawn = order[fixed:]

        def sample(n: int, rows: np.ndarray | None) -> np.ndarray:
            return coord.sample(n, rng, given=rows)

        def codes_of(name: str) -> Callable[[np.ndarray], np.ndarray]:
            j, enc = order.index(name), coord.encoders[name]
            return lambda values: enc.ceil(values[:, j])

        def report(done: int) -> None:
            if progress is not None:
                for column in drawn:
                    progress(column, done, total)

        blocks = draw_matching(
            sample,
            given,
            [codes_of(name) for name in names],
            codes,
            total,
            max_tries=max_tries,
            max_candidates=SAMPLE_CHUNK_ROWS,
            progress=report,
        )
        cuts = itertools.chain(itertools.islice(starts, 1, None), [total])
        held: list[np.ndarray] = []  # drawn rows not yet in a chunk
        have = start = 0
        try:
            for stop in cuts:
                while have < stop:
                    held.append(next(blocks))
                    have += len(held[-1])
                values = np.concatenate(held) if len(held) > 1 else held[0]
                cut = stop - start
                yield self._decode(values[:cut], start=start, total=total)
                rest = values[cut:]
                held = [rest] if len(rest) else []
                start = stop
        except MatchError as exc:
            raise ValueError(_unmatched_message(known, names, exc, max_tries)) from None

    def sample_remaining_columns(
        self,
        known_columns: pd.DataFrame,
        *,
        seed: int | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        max_tries: int = DEFAULT_MAX_TRIES,
    ) -> pd.DataFrame:
        """Draw the other columns given the known values of some, row by row.

        One synthetic row per row of ``known_columns``: its known values as given,
        every later column drawn from the chain's conditionals given them (Algorithm 2
        from the first unknown column on; the same federated estimates :meth:`sample`
        uses, so the rows follow the pooled data's conditional distribution of the
        rest given the known values).  SDV calls this ``sample_remaining_columns``.
        A known table of no rows (its columns checked as any other's) gives the table
        of no rows: the input's columns and dtypes; nothing is drawn, and the
        synthesizer's random stream does not move.

        Known columns that come first in the chain (the first k columns of
        ``schema_.order``, in any column order) are conditioned on directly: their
        values become the query points of the later columns.  A known discrete value is
        placed in its interval with the row's own uniform, as the sites place their
        rows (sec. 4.1).  A known value of a column with missing values may be missing.

        Known **discrete** columns later in the chain are matched by drawing
        (:mod:`fits._matching`): rows are drawn given the known first columns, and each
        known row takes a draw whose values of those columns agree with its own (an
        agreeing draw may complete any row with the same known first values).  The
        result follows the synthesizer's distribution conditioned on every known value,
        exactly, but each row costs about 1 / p draws where p is the share of draws
        that agree (every draw is a pass of the chain at every site), and a combination
        drawn in less than about 1 / ``max_tries`` of them stops the draw with an
        error.  Their values are not sent to the sites as such: the sites see the
        draws' query points, kept and discarded alike (docs/privacy.md).  A known
        continuous column must come first in the chain.
        Fit with ``order=[...]`` to put the columns you condition on first: that is
        exact at no extra cost.  (SDV's ``sample_from_conditions`` is this method with
        the conditions repeated once per row wanted.)

        The rows are drawn in chunks of :data:`SAMPLE_CHUNK_ROWS` (see
        :meth:`iter_sample_remaining_columns`, which also streams them); the result
        does not depend on the chunking.

        Parameters
        ----------
        known_columns : DataFrame
            The known values, one row per synthetic row wanted: any of the
            synthesizer's modelled columns, continuous ones only among the first k of
            the chain.  Their values must be ones the schema allows (a discrete
            column's categories, a continuous column's bounds) and keep the exact
            rules among them.
        seed : int, optional
            Seed for this draw; default continues the synthesizer's own stream.  With
            the same seed, the known first column of a :meth:`sample` draw (a
            continuous one) gives that draw back.
        progress : callable, optional
            Called as ``progress(column, rows_done, rows_total)``.
        max_tries : int, default :data:`DEFAULT_MAX_TRIES`
            Draws per known row that matching the later discrete known columns may
            take, pooled over the rows that ask for the same values given the same
            known prefix (:func:`fits._matching.draw_matching`).

        Returns
        -------
        DataFrame
            The input's columns, in the input's order and with its dtypes; the known
            columns hold the values given, and each row has its known row's index
            label (so the result joins back to ``known_columns``).

        Raises
        ------
        ValueError
            A known continuous column comes after a column not given in the chain;
            the known columns include an identifier or a column an affine rule sets,
            or break a rule; or a block of known rows found no agreeing draw within
            ``max_tries`` draws per row.
        SchemaError
            A known value is not one the schema allows.
        """
        chunks = list(
            self.iter_sample_remaining_columns(
                known_columns, seed=seed, progress=progress, max_tries=max_tries
            )
        )
        if len(chunks) == 1:
            return chunks[0]
        return pd.concat(chunks)  # each row keeps its known row's label

    def iter_sample_remaining_columns(
        self,
        known_columns: pd.DataFrame,
        *,
        chunk_rows: int | None = None,
        first_chunk_rows: int | None = None,
        seed: int | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        max_tries: int = DEFAULT_MAX_TRIES,
    ) -> Iterator[pd.DataFrame]:
        """:meth:`sample_remaining_columns` chunk by chunk, in bounded memory.

        The known table is checked and encoded whole, up front (so a bad value is
        refused before any row is drawn; it is in memory already); the synthetic rows
        are then drawn and decoded a chunk of known rows at a time, as
        :meth:`iter_sample` draws them: each row is a function of its known values and
        its own row of uniforms, which come row by row from one stream.  So the rows
        are the same whatever the chunk size: concatenating the chunks gives exactly
        :meth:`sample_remaining_columns` with the same seed.  Rows matched by drawing
        (known discrete columns after the chain's first) are drawn a block of
        :data:`fits._matching.BLOCK_ROWS` known rows at a time, in a fixed sequence,
        and so do not depend on the chunk size either.  A known column is put in the
        output's dtype when the whole column converts without loss, so every chunk has
        the same dtypes.

        Parameters
        ----------
        known_columns : DataFrame
            The known values (see :meth:`sample_remaining_columns`).
        chunk_rows : int, optional
            Rows per chunk (default :data:`SAMPLE_CHUNK_ROWS`); bounds the memory, does
            not change the rows.
        first_chunk_rows : int, optional
            A different size for the first chunk (``fits synthesize --known`` times a
            small first chunk to estimate the whole run); does not change the rows.
        seed : int, optional
            Seed for this draw; default continues the synthesizer's own stream.
        progress : callable, optional
            Called as ``progress(column, rows_done, rows_total)`` over all chunks.
        max_tries : int, default :data:`DEFAULT_MAX_TRIES`
            As :meth:`sample_remaining_columns`.

        Yields
        ------
        DataFrame
            Consecutive chunks of the table: one row per known row, in order, with
            that row's index label (the input's columns and dtypes; the known columns
            hold the values given).  A
            known table of no rows gives one chunk of no rows.

        Raises
        ------
        ValueError
            As :meth:`sample_remaining_columns`; the known table is checked when this is
            called, before the first chunk is drawn (a block that finds no agreeing
            draw raises while the chunks are drawn).
        SchemaError
            A known value is not one the schema allows.
        """
        self._check_fitted()
        if not isinstance(known_columns, pd.DataFrame):
            raise TypeError(
                "known_columns must be a DataFrame of the first chain columns, got "
                f"{type(known_columns).__name__}"
            )
        if known_columns.shape[1] < 1:
            raise ValueError("known_columns needs at least one column")
        known_columns = _plain_dtypes(known_columns)  # pyarrow-backed columns, as the sites'
        total = int(known_columns.shape[0])
        starts = _chunk_starts(total, chunk_rows, first_chunk_rows)
        _check_seed("seed", seed, sequence=True)
        progress = _check_progress(progress)
        if isinstance(max_tries, bool) or not isinstance(max_tries, (int, np.integer)):
            raise TypeError(f"max_tries must be an integer >= 1, got {max_tries!r}")
        if max_tries < 1:
            raise ValueError(f"max_tries must be an integer >= 1, got {max_tries!r}")
        known, given, matched = self._given(known_columns)
        if total == 0:  # no row to complete: one chunk of none, in the output's dtypes
            empty = self._empty()
            empty.index = known_columns.index
            return iter([empty])
        coord = self.coordinator
        rng = np.random.default_rng(seed) if seed is not None else self._rng
        coord.declare_rows(total)  # one configure round for all chunks (the sites' budget)
        if matched is None:
            chunks = self._chunks(coord, total, starts, rng, progress, given=given)
        else:
            chunks = self._matched_chunks(
                coord, known, starts, rng, progress, given, matched, max_tries
            )
        scales = {name: self.schema_[name].decimal_scale for name in known.columns}
        return _with_known(known, chunks, scales, known_columns.index)

    def _given(
        self, known_columns: pd.DataFrame
    ) -> tuple[pd.DataFrame, np.ndarray | None, tuple[list[str], np.ndarray] | None]:
        """The known table checked (names resolved, columns rules set among them
        added, markers read as missing); the known prefix's values on the engine's scale
        for :meth:`Coordinator.sample`'s ``given`` (discrete: codes; continuous: values;
        None when the chain's first column is not known); and the later known columns
        with their codes, to be matched by draws (None when every known column is in
        the prefix)."""
        coord = self.coordinator
        known = known_columns.reset_index(drop=True)
        # names by the library's one rule (fits.core.names): ' age ' may be named 'age'
        known.columns = resolve_columns(
            [str(c) for c in known.columns], self.schema_.names, "known_columns", "the fit"
        )
        # a file's column of 'NA' alone (read as missing) where the sites hold the label
        known = na_labels_at(known, self.schema_)
        known = self._known_constants(known)
        known = self._fill_by_rules(known)
        prefix, later = self._known_split(known, known_columns.index)
        for name in known.columns:  # the markers the sites read as missing ('?'), alike
            markers = self.schema_[name].markers
            col = known[name]
            if markers and (
                pd.api.types.is_object_dtype(col.dtype) or pd.api.types.is_string_dtype(col.dtype)
            ):
                known[name] = col.mask(col.isin(list(markers)))
        # True / False for a number: not 1.0 / 0.0
        check_known_flags(known, self.schema_, known_columns.index)
        check_known_whole(known, self.schema_, known_columns.index)  # 38.5 for an age
        # a missing value, an unknown category: in known_columns' terms, not a schema's
        check_known_categories(known, self.schema_, known_columns.index)
        # dates (text read as dates) in the form of the output's synthetic rows
        known = known_dates(known, self.schema_, known_columns.index)
        numbers = known
        for name in known.columns:  # Decimal objects as the numbers the sites modelled
            decimal = decimal_values(known[name])
            if decimal is not None:
                numbers = numbers.assign(**{name: decimal[0]})
        plain, numbers = numbers, self._known_residuals(numbers)  # (checks; Y below)
        given = matched = None
        for columns in (prefix, later):
            if not columns:
                continue
            z, codes, _ = continualize(  # discrete: their codes; continuous: their values
                numbers,
                coord.schema,  # type: ignore[arg-type]
                columns,
                np.random.default_rng(0),  # the lifts are redone with the row's uniforms
                client="the known values",
                check_bounds=_check_known_bounds,
            )
            if columns is prefix:
                given = np.where(codes >= 0, codes, z)
                for k, name in enumerate(columns):  # the chain holds a near-linear column
                    if name in self.schema_.near_linear:  # itself, not its residual
                        y = Encoder(self.schema_[name]).to_numeric(
                            plain[name], client="the known values"
                        )
                        given[:, k] = np.where(np.isnan(y), coord._fill(name), y)
            else:
                matched = (later, codes.astype(np.int64))
        return known, given, matched

    def _known_constants(self, known: pd.DataFrame) -> pd.DataFrame:
        """The known table without its ``"constant"`` columns, each checked to hold the
        column's value (or a missing value) in every row: the output writes them so
        (:meth:`_decode`).  Refused: another value, and a constant with missing values
        (its missingness is drawn, not given)."""
        for name in [str(c) for c in known.columns]:
            spec = self.schema_[name] if name in self.schema_.names else None
            if spec is None or spec.kind != "constant":
                continue
            if spec.missing and not spec.all_missing:
                raise ValueError(
                    f"column {name!r} holds one value where it is not missing, and which "
                    "rows are missing is drawn, so it cannot be given; leave it out of "
                    "known_columns (the output holds its value or a missing value)"
                )
            expected = constant_column(spec, known.shape[0])
            given = known[name].astype(object).to_numpy()
            want = expected.astype(object).to_numpy()
            odd = [
                k
                for k, (a, b) in enumerate(zip(given, want, strict=True))
                if not (pd.isna(a) and pd.isna(b)) and (pd.isna(a) or pd.isna(b) or bool(a != b))
            ]
            if odd:
                what = "missing in every row" if spec.all_missing else f"{want[0]!r} in every row"
                raise ValueError(
                    f"column {name!r} is {what} at every site (kind 'constant', not "
                    f"modelled), but known_columns gives {given[odd[0]]!r} in its row "
                    f"{odd[0] + 1} ({len(odd)} row(s) differ); leave "
                    "the column out of known_columns: the output holds its value"
                )
            known = known.drop(columns=[name])
        if known.shape[1] == 0:
            raise ValueError(
                "known_columns gives only constant columns, which the output holds anyway; "
                "give a modelled column, or draw rows with sample(n)"
            )
        return known

    def _known_residuals(self, numbers: pd.DataFrame) -> pd.DataFrame:
        """The known values with each known near-linear column replaced by its residual
        (:func:`fits.core.rules.residuals`, as the sites modelled it), its source being
        known too (:meth:`_known_split`), for the checks of continualizing them on the
        engine's schema (the chain is then given the column itself: :meth:`_given`).
        Refused: a value outside the column's bounds, or a residual outside the rule's
        (farther from the line than every real row: fits draws only within the real
        data's range)."""
        for name, rule in self.schema_.near_linear.items():
            if name not in numbers.columns:
                continue
            spec = self.schema_[name]
            y = Encoder(spec).to_numeric(numbers[name], client="the known values")
            x = Encoder(self.schema_[rule.of[0]]).to_numeric(
                numbers[rule.of[0]], client="the known values"
            )
            _check_known_bounds(spec, y[~np.isnan(y)])
            r = residuals(y, x, float(rule.slope or 0.0), float(rule.intercept or 0.0))
            held = r[~np.isnan(r)]
            lo, hi = float(rule.lower or 0.0), float(rule.upper or 0.0)
            outside = int(np.sum((held < lo) | (held > hi)))
            if outside:
                first = float(held[(held < lo) | (held > hi)][0])
                if _clock(self, name):  # a datetime pair: R + intercept is the duration
                    b = float(rule.intercept or 0.0)
                    lo_t, hi_t, first_t = (duration_text(b + v) for v in (lo, hi, first))
                    told = (
                        f"a duration from {rule.of[0]!r} outside [{lo_t}, {hi_t}]: "
                        f"{first_t} in the first"
                    )
                else:
                    told = f"a residual outside [{lo:.6g}, {hi:.6g}]: {first:.6g} in the first"
                raise ValueError(
                    f"the known values: {outside} row(s) have {name!r} farther from its "
                    f"near-linear rule's line ({rule.describe(clock=_clock(self, name))}) "
                    f"than any real row ({told}); fits draws only "
                    f"within the real data's range: give values of {name!r} closer to the "
                    f"line, or fit with the rule switched off (near_linear=False, "
                    "--no-near-linear, or delete it from the schema's rules)"
                )
            numbers = numbers.assign(**{name: r})
        return numbers

    def _fill_by_rules(self, known: pd.DataFrame) -> pd.DataFrame:
        """The known table with each column a function, sum or interval rule sets from
        known columns added, where it lies among them in the chain (``education-num``
        between ``education`` and a later known column need not be given: its rule
        gives it; nor ``senior`` between ``age`` and a later known column: its interval
        rule gives it from the known ``age``, the cell holding it; a known row without
        ``age``, where the rule says nothing: refused, asking for the column)."""
        schema = self.schema_
        derived = set(schema.derived)
        chain = [c for c in schema.order if schema[c].is_modelled and c not in derived]
        names = {str(c) for c in known.columns}
        if not names or not names <= set(chain):
            return known  # refused, with the reason, by _known_split
        last = max(chain.index(c) for c in names)
        rules = {
            r.column: r for r in schema.rules or [] if r.kind in ("function", "sum", "interval")
        }
        for column in chain[:last]:
            rule = rules.get(column)
            if column in known.columns or rule is None or not set(rule.of) <= set(known.columns):
                continue
            if rule.kind == "sum":
                parts = [pd.to_numeric(known[p], errors="coerce") for p in rule.of]
                values: Any = sum(parts[1:], parts[0])
                if values.isna().any():
                    continue  # a part missing or not a number: refused by the prefix check
            elif rule.kind == "interval":
                source = rule.of[0]
                given = known[source].notna().to_numpy()
                x = _known_source(known[source], schema[source])
                if x is None or np.isnan(x[given]).any():
                    continue  # not a number: refused by the prefix check
                if not given.all():
                    if not schema[source].missing:
                        continue  # missing, as no real row is: refused by the prefix check
                    raise ValueError(
                        f"column {column!r} lies among the known columns and is set by its "
                        f"interval rule from {source!r}, but {int(np.sum(~given))} known "
                        f"row(s) have no {source!r}, where the rule says nothing; give the "
                        "column too"
                    )
                codes = interval_codes(schema, rule, x)
                cats = schema[column].categories or []
                values = [plain(cats[int(c)]) for c in codes]
            else:
                table = rule.lookup()
                keys = zip(*(known[p].map(plain) for p in rule.of), strict=True)
                values = [table.get(tuple(k), _NO_VALUE) for k in keys]
                unmapped = sum(v is _NO_VALUE for v in values)
                if unmapped:
                    raise ValueError(
                        f"column {column!r} lies among the known columns and is set by its "
                        f"rule from {rule.of}, but {unmapped} known row(s) have a "
                        "combination of them that no real row has; give the column too"
                    )
            known = known.assign(**{column: values})
        return known

    def _known_split(
        self, known: pd.DataFrame, index: pd.Index | None = None
    ) -> tuple[list[str], list[str]]:
        """The engine's chain columns the known columns fix exactly (the chain up to the
        last column of the known prefix, with the indicators before each), and the known
        columns after it, matched by draws (:mod:`fits._matching`; discrete only),
        after checking the known columns and that they keep their rules (a refusal
        names a row by its label in ``index``, the user's, default ``known.index``)."""
        schema = self.schema_
        labels = known.index if index is None else index
        names = [str(c) for c in known.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"known_columns names a column twice: {names}")
        unknown = [c for c in names if c not in schema.names]
        if unknown:
            raise ValueError(
                f"known_columns has column(s) {unknown} that the synthesizer does not "
                f"model (its columns: {', '.join(schema.names)}); leave them out"
            )
        derived = set(schema.derived)
        for c in names:
            if not schema[c].is_modelled:
                raise ValueError(
                    f"column {c!r} is an identifier: its output values are fresh "
                    "surrogates, not modelled, so it cannot be given; leave it out"
                )
            if c in derived:
                raise ValueError(
                    f"column {c!r} is set by its affine rule from another column; give "
                    "that column instead and leave this one out"
                )
        for c in names:
            rule = schema.near_linear.get(c)
            if rule is not None and rule.of[0] not in names and _ordered(self, c):
                raise ValueError(
                    f"column {c!r} is drawn as its difference from {rule.of[0]!r} (its "
                    f"order rule {c} >= {rule.of[0]}), so it can be given only with "
                    f"{rule.of[0]!r}: give {rule.of[0]!r} too, or fit without the rule "
                    "(delete it from the schema's rules, or rules=False, --no-rules)"
                )
            if rule is not None and rule.of[0] not in names:
                told = rule.describe(clock=_clock(self, c))
                raise ValueError(
                    f"column {c!r} is drawn as its residual about a line in "
                    f"{rule.of[0]!r} (its near-linear rule {told}), so it can be "
                    f"given only with {rule.of[0]!r}: give {rule.of[0]!r} too, or fit with "
                    "the rule switched off (near_linear=False, --no-near-linear, or delete "
                    "it from the schema's rules)"
                )
        chain = [c for c in schema.order if schema[c].is_modelled and c not in derived]
        if set(chain) <= set(names):
            raise ValueError(
                "known_columns gives every modelled column, so nothing is left to draw "
                "(the output would be the known rows themselves); leave out the columns "
                "to draw"
            )
        k = 0
        while chain[k] in names:
            k += 1
        first, later = chain[:k], [c for c in chain[k:] if c in names]
        encoders = self.coordinator.encoders
        continuous = [c for c in later if not encoders[c].spec.is_discrete]
        if continuous:
            before = chain[: chain.index(continuous[-1])]
            skipped = [c for c in before if c not in names]
            raise ValueError(
                f"known_columns {names} are not the first columns of the chain "
                f"({', '.join(chain)}): the chain draws each column given the ones before "
                f"it, so a continuous column can be given only with every column before "
                f"it, and continuous {continuous} come after {skipped}, not given (a "
                "discrete column can be given anywhere: it is matched by drawing). "
                "Fit with order=[...] listing the known columns first"
            )
        for rule in schema.rules or []:
            if rule.kind not in ("affine", "linear") and {rule.column, *rule.of} <= set(names):
                from fits.evaluation.rules import rule_breaks, rules_kept

                broken = np.flatnonzero(rule_breaks(known, rule))
                if broken.size:
                    kept = float(rules_kept(known, [rule])["kept"].iloc[0])
                    told = (
                        rule.describe()
                        if rule.kind in ("interval", "order")
                        else f"{rule.column} = "
                        f"{'f' if rule.kind == 'function' else 'sum'}({', '.join(rule.of)})"
                    )
                    pos = int(broken[0])
                    shown = ", ".join(
                        f"{c} = {known[c].iloc[pos]}"
                        for c in dict.fromkeys([*rule.of, rule.column])
                    )
                    raise ValueError(
                        f"known_columns break the exact rule {told} "
                        f"in {1.0 - kept:.1%} of their rows (the first: "
                        f"{known_row(labels, pos)}, {shown}); every real row keeps it: give "
                        "values that keep the rule in those rows, or fit without it (delete "
                        "it from the schema's rules, or rules=False; --no-rules)"
                    )
        engine = self.coordinator.schema.order  # type: ignore[union-attr]
        prefix = list(engine[: engine.index(first[-1]) + 1]) if first else []
        return prefix, later

    def sample_to_file(
        self,
        path: str | os.PathLike[str],
        num_rows: int,
        *,
        chunk_rows: int | None = None,
        seed: int | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        overwrite: bool = False,
    ) -> Path:
        """Draw ``num_rows`` rows straight into a CSV or Parquet file, in bounded memory.

        The chunks of :meth:`iter_sample` are streamed to a temporary file beside
        ``path`` (CSV appends; Parquet row groups) that is put at ``path`` only when
        complete (:func:`fits.io.write_stream`); on Linux it has no name until then, so
        not even a killed process leaves a partial file. The table equals
        :meth:`sample` with the same seed; ``num_rows=0`` writes the header alone (a
        Parquet file: every column with its type).  A request of more than
        :data:`fits.io.LARGE_REQUEST_ROWS` rows first estimates the file's size from
        its first rows and is refused when it exceeds the free space, as ``fits
        synthesize`` does.  A leading ``~`` in ``path`` is the home folder; its folder
        must exist (as for ``DataFrame.to_csv``); a symbolic link is written through
        (the file it leads to is replaced, the link kept).

        Parameters
        ----------
        path : str or path-like
            The output file (``.csv`` or ``.parquet``).
        num_rows : int
            Rows to draw.
        chunk_rows, seed, progress
            As in :meth:`iter_sample`.
        overwrite : bool, default False
            Replace a file already at ``path``.  Without it an existing file (one
            holding anything: it may be a table the synthesizer was fitted on, which
            fits cannot tell from here) is refused, as SDV refuses an existing output
            file.

        Returns
        -------
        Path
            ``path`` (with ``~`` expanded).

        Raises
        ------
        fits.io.OutputError
            Before any row is drawn: ``path`` is a folder (or ends with a slash), an
            existing read-only file, an existing file without ``overwrite=True``, or in
            a folder that does not exist or cannot be written.
        fits.io.OutputTooLarge
            Before any row is written: the estimated file exceeds the free space.
        """
        from fits.io import OutputError, check_output, check_suffix, output_path, write_stream

        # "~/s.csv": the home's, never a folder named "~"; "s.csv/" (a folder): refused
        path = output_path(path, "sample_to_file: path")
        check_suffix(path, "output")
        # before any row is drawn: a folder named x.csv, a read-only file, a missing
        # folder or one fits cannot write in (the draw would be lost at the end)
        check_output(path, option="sample_to_file: path")
        if not overwrite and path.is_file() and path.stat().st_size > 0:
            raise OutputError(  # was: replaced without a word, a site's own table too
                f"sample_to_file: {str(path)!r} exists; fits does not replace a file "
                "unless asked (it may be a real table): pass overwrite=True to replace "
                "it, or choose another path"
            )
        _check_rows(num_rows)

        def draw(first: int | None) -> Iterator[pd.DataFrame]:
            return self.iter_sample(
                num_rows, chunk_rows=chunk_rows, first_chunk_rows=first, seed=seed,
                progress=progress,
            )  # fmt: skip

        written, _ = write_stream(
            draw, path, num_rows, request=f"sample_to_file({str(path)!r}, {num_rows})",
            advice="ask for fewer rows, or write to a file system with more free space",
            forms=self.output_forms(),
        )  # fmt: skip
        return written

    def output_forms(self) -> OutputForms:
        """The forms the sites' files wrote the values in, which a synthetic table's
        file writes them in again (:meth:`sample_to_file`, ``fits synthesize``): the
        Parquet decimal type of each ``Decimal`` column, the one date format of columns
        read from text dates, the sites' agreed spelling of booleans (known once a
        coordinator has connected to the sites; a loaded synthesizer writes pandas'
        ``True``/``False``).

        Returns
        -------
        fits.io.OutputForms

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before :meth:`fit`.
        """
        from fits.io import OutputForms

        self._check_fitted()
        coordinator = getattr(self, "coordinator", None)
        return OutputForms(
            decimal_types=self.schema_.decimal_types(),
            date_formats=self.schema_.date_formats(),
            bool_texts=dict(getattr(coordinator, "bool_texts", None) or {}),
        )

    def _empty(self) -> pd.DataFrame:
        """The table of no rows: the input's columns, in order, in the dtypes a draw of
        rows gives them (decoded as a draw is; no site is asked, the random stream does
        not move)."""
        width = len(self.coordinator.schema.order)  # type: ignore[union-attr]
        return self._decode(np.empty((0, width)), total=0)

    def _decode(self, values: np.ndarray, start: int = 0, total: int | None = None) -> pd.DataFrame:
        """The engine's values (chain order) as the input's columns and dtypes.

        Discrete columns map back to their categories, continuous ones are clipped to
        their bounds (and rounded, for whole numbers), missing values come back where
        the indicators say; every column gets the input's pandas dtype back
        (:func:`restore_dtype`).  Columns of kind ``"id"`` get fresh surrogate values,
        numbered from ``start + 1`` (with the digits ``total`` rows need, so that
        chunks of one table agree).
        """
        coord = self.coordinator
        order = coord.schema.order if coord.schema is not None else []
        linear = self.schema_.near_linear
        cols = {}
        for spec in self.schema_.columns:
            name = spec.name
            if spec.kind == "constant":  # its value in every row (or missing), or
                # missing where its drawn indicator says so (a value and missing values)
                flag = missing_flag(name)
                absent = None
                if flag in order and coord.encoders[flag].spec.indicates == name:
                    absent = coord.encoders[flag].ceil(values[:, order.index(flag)]) == 1
                cols[name] = constant_column(spec, values.shape[0], absent)
                continue
            if not spec.is_modelled:  # an identifier: never a real value
                ids = surrogate_ids(values.shape[0], start, total=total)
                # dtype=str: text's dtype however many rows, none included (pandas 3: str)
                cols[name] = pd.Series(ids, name=name, dtype=str)
                continue
            if name not in order:  # set by its affine rule, below
                continue
            enc = coord.encoders[name]
            drawn = values[:, order.index(name)]
            if name in linear:  # the chain holds the column itself, the line plus the
                # drawn residual (Coordinator._line_plus); the engine's spec is the residual's
                enc = Encoder(spec)  # Y's own bounds, decimals and dtype
            col = enc.decode(drawn).reset_index(drop=True)
            col = _exact_point_mass(col, enc.spec, coord, values, order)
            flag = missing_flag(name)
            if enc.spec.kind == "continuous" and spec.missing:  # its indicator is in order
                absent = coord.encoders[flag].ceil(values[:, order.index(flag)]) == 1
                if enc.spec.dtype == "int" and col.dtype != np.float64:  # beyond int64: floats
                    col = col.astype("UInt64" if col.dtype == np.uint64 else "Int64")
                col = col.mask(pd.Series(absent))
            cols[name] = restore_dtype(col, spec)
        for rule in self.schema_.rules or []:
            if rule.kind == "affine" and self.schema_[rule.column].dtype == "datetime":
                col = shifted_datetimes(cols[rule.of[0]], self.schema_, rule)  # a shift
                cols[rule.column] = restore_dtype(col, self.schema_[rule.column])
                continue
            if rule.kind == "affine":  # of the source as written, so it holds as written
                spec = self.schema_[rule.column]
                source = cols[rule.of[0]]
                if isinstance(source.dtype, pd.CategoricalDtype):
                    source = source.astype(object)
                x = pd.to_numeric(source).to_numpy(dtype=float, na_value=np.nan)
                # missing where the source is missing: the rule's check saw just that
                y = affine_values(x, rule.slope, rule.intercept, rule.decimals)  # type: ignore[arg-type]
                _affine_bounds(rule, spec, y, rule.slope * x)
                col = pd.Series(y + 0.0, name=rule.column)  # a zero is 0.0, never -0.0
                if spec.dtype == "int":
                    col = col.round().astype("Int64" if col.isna().any() else np.int64)
                cols[rule.column] = restore_dtype(col, spec)
            if rule.kind == "sum":  # the sum of the parts as written, so it holds exactly
                spec = self.schema_[rule.column]
                summed = np.zeros(values.shape[0])
                for part in rule.of:
                    summed = summed + pd.to_numeric(cols[part]).to_numpy(dtype=float)
                d = _sum_decimals(self.schema_, rule)
                if d is not None:  # 0.1 + 0.2 written as 0.3, as the real totals are
                    summed = np.round(summed, d)
                col = pd.Series(summed + 0.0, name=rule.column)  # 0.0, never -0.0
                if spec.dtype == "int":
                    col = col.astype(np.int64)
                cols[rule.column] = restore_dtype(col, spec)
        return pd.DataFrame(cols)[[c for c in self._columns if c in cols]]


def _known_source(values: pd.Series, spec: ColumnSpec) -> np.ndarray | None:
    """An interval rule's known source as the numbers its rule is written in: a number
    column's numbers (NaN where not one), a datetime column's seconds since 1970 UTC as
    the sites read them (:meth:`Encoder.to_numeric
    <fits.core.continualization.Encoder.to_numeric>`; None where they do not read:
    refused, with the reason, by the later checks)."""
    if spec.dtype != "datetime":
        numbers = pd.to_numeric(values, errors="coerce")
        return np.asarray(numbers.to_numpy(dtype=float, na_value=np.nan), dtype=float)
    try:
        return Encoder(spec).to_numeric(values, client="the known values")
    except (ValueError, TypeError):  # a SchemaError is a ValueError
        return None


def _ordered(synth: FITSSynthesizer, column: str) -> bool:
    """Whether ``column`` is drawn by an ``"order"`` rule (as its difference from its
    source: :meth:`Schema.order_line <fits.core.schema.Schema.order_line>`), not by a
    near-linear one."""
    return any(r.kind == "order" and r.column == column for r in synth.schema_.rules or [])


def _clock(synth: FITSSynthesizer, column: str) -> bool:
    """Whether ``column`` is a datetime column (its near-linear rule: a duration)."""
    return bool(synth.schema_[column].dtype == "datetime")


def _exact_point_mass(
    col: pd.Series, spec: ColumnSpec, coord: Coordinator, values: np.ndarray, order: list[str]
) -> pd.Series:
    """A decoded integer column with its point mass past 2**53 (a Python ``int`` float64
    cannot hold, :attr:`ColumnSpec.point_mass`) put back exactly in the rows its
    indicator puts there: the engine's values are float64, so those rows held the
    nearest float (``2**60`` for ``2**60 + 7``).  Other columns as they are."""
    mass = spec.point_mass
    flag = point_mass_flag(spec.name)
    if (
        mass is None
        or float(mass) == mass
        or col.dtype.kind not in "iu"
        or flag not in coord.encoders
        or coord.encoders[flag].spec.indicates != spec.name
    ):
        return col
    hit = coord.encoders[flag].ceil(values[:, order.index(flag)]) == 1
    out = col.to_numpy(copy=True)
    out[hit] = mass  # within the bounds, so in the column's integer type
    return pd.Series(out, name=col.name)


def _physical_memory() -> int | None:
    """This machine's memory in bytes, or None where the system does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _check_rows(num_rows: object) -> None:
    """A row count: an integer (not a bool) of at least 0."""
    if isinstance(num_rows, bool) or not isinstance(num_rows, (int, np.integer)):
        raise TypeError(f"num_rows must be an integer, got {num_rows!r}")
    if num_rows < 0:
        raise ValueError(f"num_rows must be at least 0, got {num_rows}")


def _chunk_starts(
    total: int, chunk_rows: int | None, first_chunk_rows: int | None
) -> Iterator[int]:
    """The first rows of the chunks of a draw of ``total`` rows, lazily (a list of them
    would take memory in proportion to ``total``: 10**16 rows, 1.5e11 starts, which
    the chunks are there to avoid), after checking the chunk sizes."""
    if chunk_rows is None:
        chunk_rows = SAMPLE_CHUNK_ROWS
    if first_chunk_rows is None:
        first_chunk_rows = chunk_rows
    for name, value in (("chunk_rows", chunk_rows), ("first_chunk_rows", first_chunk_rows)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {value!r}")
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    return itertools.chain([0], range(int(first_chunk_rows), total, int(chunk_rows)))


def _with_known(
    known: pd.DataFrame,
    chunks: Iterable[pd.DataFrame],
    scales: Mapping[str, int | None],
    index: pd.Index,
) -> Iterator[pd.DataFrame]:
    """The chunks of a conditional draw with the known columns as given: in the
    output's dtype where the whole column converts without loss (:func:`_as_output`,
    decided once on the whole column, so that every chunk gets the same dtype;
    ``scales``: each column's :attr:`~fits.core.schema.ColumnSpec.decimal_scale`),
    and each row with its known row's label of ``index`` (the user's table's)."""
    columns: dict[str, pd.Series] = {}
    start = 0
    for frame in chunks:
        if not columns:
            columns = {
                name: _as_output(known[name], frame[name], scales.get(name))
                for name in known.columns
            }
        stop = start + len(frame)
        for name, col in columns.items():
            frame[name] = col.iloc[start:stop].reset_index(drop=True)
        frame.index = index[start:stop]
        start = stop
        yield frame


def _check_table_fits(num_rows: int, n_columns: int) -> None:
    """Refuse, before drawing a row, a :meth:`FITSSynthesizer.sample` whose table could
    not be held in this machine's memory (at least 8 bytes a value): it would draw for
    hours and then fail, where the streaming methods take any number of rows."""
    memory = _physical_memory()
    need = num_rows * max(n_columns, 1) * 8
    if memory is not None and need > memory:
        raise ValueError(
            f"sample({num_rows}) would build a table of at least {need / 2**30:,.0f} GiB "
            f"({num_rows} rows x {n_columns} columns), more than this machine's "
            f"{memory / 2**30:,.0f} GiB of memory; write the rows to a file with "
            "sample_to_file(path, num_rows), or take them chunk by chunk with "
            "iter_sample(num_rows)"
        )


#: What :meth:`FITSSynthesizer.fit` sets (a failed fit leaves none of them).
_FITTED = (
    "schema_",
    "entropy_",
    "client_names_",
    "n_rows_",
    "smoothing_",
    "tuning_",
    "site_digests_",
    "site_column_digests_",
    "setup_declared_",
)


def _site_tables(tables: Any) -> Any:
    """The sites' tables as given, an iterator or generator of tables as a list (it is
    read more than once: the sites, then the output's column order), pyarrow-backed
    columns in pandas' default dtypes (:func:`_plain_dtypes`).  A Series (it
    would be read as a list of sites, one per value) and a mapping whose keys name two
    sites alike (``1`` and ``"1"``) are refused."""
    if isinstance(tables, pd.Series):
        raise TypeError(
            "fit() takes one DataFrame per site, got a Series; a single column: "
            "fit([series_a.to_frame(), series_b.to_frame()])"
        )
    if isinstance(tables, Mapping) and not isinstance(tables, Transport):
        named: dict[str, Any] = {}
        for key in tables:
            first = named.setdefault(str(key), key)
            if first is not key:
                raise ValueError(
                    f"site names {first!r} and {key!r} are both {str(key)!r} as text, the "
                    "name fits gives a site; give every site a distinct name"
                )
    if isinstance(tables, Transport):
        return tables
    if not isinstance(tables, (Mapping, pd.DataFrame, Sequence)) and isinstance(tables, Iterable):
        tables = list(tables)
    return _plain_dtypes(tables)


def _plain_dtypes(tables: Any) -> Any:
    """``tables`` (a DataFrame, a mapping or a sequence of them) with every
    pyarrow-backed column of a type fits does not model as it is in the dtype pandas'
    default backend gives it (:func:`fits.io.from_arrow_dtypes`: Arrow decimals as
    ``Decimal`` objects, dates as ``datetime.date``, dictionaries as categoricals, ...);
    ``tables`` itself when no table has one."""
    from fits.io import from_arrow_dtypes

    def has_arrow(table: Any) -> bool:  # (the cheap look: which convert, from_arrow_dtypes)
        return isinstance(table, pd.DataFrame) and any(
            isinstance(d, pd.ArrowDtype) for d in table.dtypes
        )

    def plain(table: Any) -> Any:
        return from_arrow_dtypes(table) if isinstance(table, pd.DataFrame) else table

    if isinstance(tables, pd.DataFrame):
        return plain(tables)
    if isinstance(tables, Mapping):
        if not any(has_arrow(t) for t in tables.values()):
            return tables
        return {key: plain(table) for key, table in tables.items()}
    if isinstance(tables, Sequence) and not isinstance(tables, (str, bytes)):
        if not any(has_arrow(t) for t in tables):
            return tables
        return [plain(table) for table in tables]
    return tables


def _note_index(tables: Any) -> None:
    """A :class:`DataNote` naming the sites whose DataFrame index holds data (a named
    index, a MultiIndex, dates or text: what ``set_index`` or a time series leaves
    there), which fits does not model: the synthetic table has no such column, and it
    said nothing. An unnamed index of integers (a row number, with gaps after a
    filter) is no data and draws no note."""
    if isinstance(tables, Transport) or isinstance(tables, pd.DataFrame):
        return
    if isinstance(tables, Mapping):
        items = [(str(k), v) for k, v in tables.items()]
    elif isinstance(tables, Sequence):
        items = [(f"client {k}", v) for k, v in enumerate(tables, 1)]
    else:
        return
    found = []
    for name, table in items:
        if not isinstance(table, pd.DataFrame):
            continue
        index = table.index
        names = [n for n in index.names if n is not None]
        if isinstance(index, pd.MultiIndex):
            what = f"a MultiIndex of {index.nlevels} levels"
        elif pd.api.types.is_datetime64_any_dtype(index.dtype):
            what = "dates"
        elif not pd.api.types.is_integer_dtype(index.dtype) and len(index):
            what = {"string": "text", "categorical": "categories"}.get(
                index.inferred_type, f"{index.inferred_type} values"
            )
        elif names:
            what = "integers"
        else:
            continue
        found.append(
            f"{name}: {what}" + (f", named {', '.join(map(repr, names))}" if names else "")
        )
    if found:
        warnings.warn(
            f"the index of the sites' tables holds data ({'; '.join(found)}), which fits "
            "does not model: it models the columns only, so the synthetic table has no "
            "such column. To model it, make it a column before fitting: df.reset_index()",
            DataNote,
            stacklevel=3,
        )


#: A determinant combination a function rule's mapping does not list.
_NO_VALUE = object()


def _check_known_bounds(spec: ColumnSpec, values: np.ndarray) -> None:
    """Known values outside a continuous column's bounds: the conditionals are
    estimated only within them (fits never extrapolates)."""
    lo, hi = spec.bounds
    outside = values[(values < lo) | (values > hi)]
    if outside.size:  # a datetime column's as dates (seconds since 1970 on the scale)
        shown = [show_value(spec, float(v)) for v in (lo, hi, outside[0])]
        raise ValueError(
            f"the known values: {outside.size} value(s) of column {spec.name!r} lie outside "
            f"its range [{shown[0]}, {shown[1]}] (e.g. {shown[2]}); fits draws only within "
            "the real data's range"
        )


def _as_output(given: pd.Series, decoded: pd.Series, scale: int | None = None) -> pd.Series:
    """A known column as given, in the output's dtype where it converts without loss
    (else as given).  A column of ``Decimal`` objects (``scale`` set): ``Decimal``
    objects are kept as given; numbers (a ``--known`` CSV file's floats) become
    ``Decimal`` objects with ``scale`` digits after the point where that keeps every
    value (:func:`~fits.core.schema.to_decimals`)."""
    if scale is not None:
        if decimal_values(given) is not None:
            return given
        if not pd.api.types.is_numeric_dtype(given.dtype) or pd.api.types.is_bool_dtype(
            given.dtype
        ):
            return given
        cast = to_decimals(given, scale)
        back = pd.to_numeric(cast).to_numpy(dtype=float, na_value=np.nan)
        if np.array_equal(back, given.to_numpy(dtype=float, na_value=np.nan), equal_nan=True):
            return cast
        return given
    try:
        cast = given.astype(decoded.dtype)
    except (TypeError, ValueError):
        return given
    same = cast.isna().eq(given.isna()).all()
    if same and (cast.dropna().astype(object) == given.dropna().astype(object)).all():
        return cast
    return given


def _sum_decimals(schema: Schema, rule: Rule) -> int | None:
    """The decimals a sum rule's total is rounded to: the most of the total's and its
    parts' (the exact decimal sum of the parts has no more), or None (no rounding) if
    one of them is kept at full precision.  The rounding moves the float64 sum by less
    than its own error, so the rule's check (:func:`fits._exact.sums_match`) still holds."""
    specs = [schema[rule.column], *(schema[p] for p in rule.of)]
    ds = [0 if sp.dtype == "int" else sp.decimals for sp in specs]
    if any(d is None for d in ds):
        return None
    return max(int(d) for d in ds if d is not None)


def _unmatched_message(
    known: pd.DataFrame, names: Sequence[str], exc: MatchError, max_tries: int
) -> str:
    """What to say when known rows found no matching draw (:class:`MatchError`)."""
    row = known.iloc[exc.row]
    values = ", ".join(f"{name}={_shown(row[name])}" for name in known.columns)
    return (
        f"known column(s) {list(names)} come after a column not given in the chain, so "
        "they are matched by drawing: each known row takes a row drawn (given the known "
        "columns first in the chain) that agrees with it; the known row at position "
        f"{exc.row} ({values})"
        + (f" and {exc.pending - 1} other(s) asking the same" if exc.pending > 1 else "")
        + f" found none in {max_tries} draws per row ({exc.tried:,} draws for "
        + ("it" if exc.pending + exc.completed == 1 else "its kind")
        + f" completed {exc.completed} row(s) of {exc.pending + exc.completed}). "
        "The synthesizer rarely draws "
        "these values together; put the known columns first in the chain to condition "
        "on them exactly (order=[...]; fits synthesize --order), or allow more draws "
        "per row (max_tries)"
    )


def _shown(value: Any) -> str:
    """A known value as a message shows it: a time as its ISO text (``'2011-06-01'``,
    not ``Timestamp('2011-06-01 00:00:00')``), anything else as the repr of its plain
    Python value."""
    if isinstance(value, (pd.Timestamp, np.datetime64)) and not pd.isna(value):
        stamp = pd.Timestamp(value)
        text = stamp.date().isoformat() if stamp == stamp.normalize() else stamp.isoformat()
        return repr(text)
    return repr(plain(value))


def _check_seed(name: str, seed: Any, sequence: bool = False) -> None:
    """``seed`` is None or an integer >= 0 (what :class:`numpy.random.SeedSequence`
    takes; with ``sequence``, also a ``SeedSequence``), else an error naming the
    parameter."""
    if seed is None or (sequence and isinstance(seed, np.random.SeedSequence)):
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name} must be an integer >= 0 or None, got {seed!r}")
    if seed < 0:
        raise ValueError(f"{name} must be an integer >= 0 or None, got {seed!r}")


def _check_progress(progress: Any) -> Callable[[str, int, int], None] | None:
    """The streaming methods' ``progress``: a callable, or None (also for False), else
    an error saying what it takes (a string was taken and silently showed nothing)."""
    if progress is None or progress is False:
        return None
    if isinstance(progress, bool) or not callable(progress):
        raise TypeError(
            "progress must be None or a callable progress(column, rows_done, rows_total) "
            "(a bar: bar, callback = fits.synthesizer.progress_bar(), then "
            f"progress=callback inside `with bar:`), got {progress!r}"
        )
    return progress


def _affine_bounds(rule: Rule, spec: ColumnSpec, y: np.ndarray, ax: np.ndarray) -> None:
    """Warn (values kept, never clipped) if an affine rule's values leave the column's
    bounds by more than the rule's tolerance.  With the source inside its own bounds
    this cannot happen for a rule found in the data (the real extremes of the source
    map to those of the column); a user's rule or edited bounds can make it happen."""
    column = rule.column
    tol = affine_tolerance(y, ax, float(rule.intercept or 0.0), rule.decimals, rule.tolerance)
    lo, hi = spec.bounds
    outside = int(np.sum((y < lo - tol) | (y > hi + tol)))
    if outside:
        warnings.warn(
            f"column {column!r}: {outside} of {y.size} values set by its affine rule lie "
            f"outside the schema's bounds [{spec.lower}, {spec.upper}]; they are kept as "
            "the rule gives them (not clipped). Check the rule and the bounds in the schema",
            stacklevel=3,
        )


#: Numpy dtypes that cannot hold a missing value, and the nullable dtype that can.
_NULLABLE = {
    **{f"int{b}": f"Int{b}" for b in (8, 16, 32, 64)},
    **{f"uint{b}": f"UInt{b}" for b in (8, 16, 32, 64)},
    "bool": "boolean",
}


def constant_column(spec: ColumnSpec, n: int, absent: np.ndarray | None = None) -> pd.Series:
    """The output column of a ``"constant"`` column: its value in each of ``n`` rows
    (missing where ``absent``), or missing in every row (a column with no value), in the
    input's dtype (:func:`restore_dtype`), decoded as a draw of that value would be.

    Parameters
    ----------
    spec : ColumnSpec
        The column's schema entry (kind ``"constant"``).
    n : int
        Rows.
    absent : ndarray of bool, optional
        Rows where the column is missing (its drawn missingness indicator's).

    Returns
    -------
    Series
    """
    name = spec.name
    if spec.all_missing:
        if spec.dtype == "datetime":
            try:
                dtype: Any = pd.api.types.pandas_dtype(spec.pandas_dtype or "datetime64[ns]")
            except TypeError:
                dtype = "datetime64[ns]"
            if getattr(dtype, "kind", None) != "M":
                dtype = "datetime64[ns]"
            return pd.Series(pd.NaT, index=range(n), dtype=dtype, name=name)
        if spec.dtype in ("int", "float"):
            col = pd.Series(np.full(n, np.nan), name=name)
        else:
            col = pd.Series([None] * n, name=name, dtype=object)
        return restore_dtype(col, spec)
    drawn = replace(spec, kind="nominal" if spec.categories is not None else "continuous")
    enc = Encoder(drawn)
    if drawn.is_discrete:
        col = enc.decode(np.full(n, enc.midpoints[0]))
    else:
        col = enc.decode(np.full(n, float(spec.lower)))  # type: ignore[arg-type]
    col = col.reset_index(drop=True)
    if absent is not None:
        if spec.dtype == "int" and col.dtype != np.float64:
            col = col.astype("UInt64" if col.dtype == np.uint64 else "Int64")
        col = col.mask(pd.Series(np.asarray(absent, dtype=bool)))
    return restore_dtype(col, spec)


def restore_dtype(col: pd.Series, spec: ColumnSpec) -> pd.Series:
    """Give a decoded column the input's pandas dtype back.

    * a pandas categorical gets its ``CategoricalDtype`` back: every category of the
      input, unused ones included, in the input's order, ordered or not;
    * whole numbers with missing values become ``Int64`` (not floats);
    * otherwise the input's exact dtype (``spec.pandas_dtype``: ``"Int64"``,
      ``"boolean"``, ``"int32"``, ``"str"``, ...), its nullable counterpart when the
      column has missing values and the dtype cannot hold them (``int32`` ->
      ``Int32``, ``bool`` -> ``boolean``).

    A column of Python ``Decimal`` objects (``spec.decimal_scale``) gets ``Decimal``
    objects back, with that many digits after the point (``Decimal("12.30")``; None
    where missing; :func:`~fits.core.schema.to_decimals`).  Datetimes are left as
    :meth:`~fits.core.continualization.Encoder.decode` made them (time zone and whole
    days restored there), in the input's time unit (``spec.pandas_dtype``'s) where it
    holds every value the schema lets a draw have: a finer one within its range, a
    coarser one (``s``, ``ms``) only where the column's ``resolution`` or whole days
    are at least as coarse (never a synthetic time cut to it).

    Parameters
    ----------
    col : Series
        The decoded column.
    spec : ColumnSpec
        Its schema entry.

    Returns
    -------
    Series
    """
    if spec.dtype == "datetime":
        if spec.pandas_dtype == "object" and spec.date_only:  # datetime.date objects (a
            # Parquet date32 column, written back as one; CSV: dates, no time part)
            dates = col.dt.date.astype(object)
            return dates.where(col.notna(), None).rename(col.name)
        return _time_unit(col, spec)
    if spec.decimal_scale is not None:
        return to_decimals(col, spec.decimal_scale)
    # the schema's flag, not this draw's: every chunk of one table gets the same dtype
    has_missing = spec.missing or bool(col.isna().any())
    if spec.dtype == "category":
        levels = spec.dtype_categories
        if levels is None:
            levels = [c for c in spec.categories or [] if c is not None]
        ordered = (
            spec.dtype_ordered if spec.dtype_categories is not None else spec.kind == "ordinal"
        )
        labels = col.astype(object).where(col.notna(), None).to_numpy(dtype=object)
        dtype = pd.CategoricalDtype(levels, ordered=ordered)
        return pd.Series(pd.Categorical(labels, dtype=dtype), name=col.name)
    target = spec.pandas_dtype
    if target is None:
        if spec.dtype == "int" and has_missing:
            target = "Int64"
        elif spec.dtype == "bool" and has_missing:
            target = "boolean"
        else:
            return col
    if target == "object" or target == str(col.dtype):
        return col
    if has_missing:
        target = _NULLABLE.get(target, target)
    try:
        return col.astype(target)
    except (TypeError, ValueError):  # a dtype pandas cannot convert to: keep the decoded one
        return col


#: Datetime units from the coarsest; a draw holds times as fine as the schema's
#: ``resolution`` (None: microseconds), or whole days (``date_only``).
_TIME_UNITS = ("D", "h", "min", "s", "ms", "us", "ns")


def _time_unit(col: pd.Series, spec: ColumnSpec) -> pd.Series:
    """A decoded datetime column in the time unit of the input's dtype
    (``spec.pandas_dtype``), where that unit holds every value the schema lets a draw
    have (:func:`restore_dtype`); else as decoded."""
    try:
        dtype = pd.api.types.pandas_dtype(spec.pandas_dtype) if spec.pandas_dtype else None
    except TypeError:
        return col
    arrow = isinstance(dtype, pd.ArrowDtype) and dtype.kind == "M"  # timestamp[s][pyarrow]
    if isinstance(dtype, pd.DatetimeTZDtype):
        unit = str(dtype.unit)
    elif isinstance(dtype, np.dtype) and dtype.kind == "M":
        unit = np.datetime_data(dtype)[0]
    elif arrow:
        unit = str(dtype.pyarrow_dtype.unit)  # type: ignore[union-attr]
    else:
        return col
    finest = "D" if spec.date_only else (spec.resolution or "us")
    if unit not in _TIME_UNITS or _TIME_UNITS.index(unit) < _TIME_UNITS.index(finest):
        return col  # the unit would cut the draws' times
    try:
        if arrow:  # the sites' Arrow type, where its time zone is the schema's
            tz = dtype.pyarrow_dtype.tz  # type: ignore[union-attr]
            same = (tz is None) == (spec.tz is None) and str(col.dt.tz) == str(tz or None)
            return col.astype(dtype) if same else col
        if unit == getattr(col.dt, "unit", None):
            return col
        return col.dt.as_unit(unit)
    except (OverflowError, TypeError, ValueError):  # past the unit's range (ns: years
        # 1677-2262), or a cast Arrow refuses as lossy
        return col


def progress_bar(console: Any = None) -> tuple[Any, Callable[[str, int, int], None]]:
    """A rich progress bar with one line per chain column, and the callback that feeds it.

    Parameters
    ----------
    console : rich.console.Console, optional
        Where to draw (default: rich's console on standard output).

    Returns
    -------
    tuple
        The ``rich.progress.Progress`` (use it as a context manager around the
        sampling) and the ``progress(column, rows_done, rows_total)`` callback to pass
        to :meth:`FITSSynthesizer.sample`.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    tasks: dict[str, Any] = {}

    def callback(column: str, done: int, total: int) -> None:
        if column not in tasks:
            tasks[column] = bar.add_task(column, total=total)
        bar.update(tasks[column], completed=done)

    return bar, callback
