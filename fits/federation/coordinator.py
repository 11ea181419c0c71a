"""The coordinator (the paper's central server): Algorithms 1 and 2.

The coordinator holds no rows.  Through a :class:`~fits.federation.transport.Transport` it

1. runs the setup round and merges the clients' descriptions into the schema;
2. broadcasts the schema, the total row count M, the grids and each client's seed;
3. estimates conditional CDFs with the two-step aggregation (Algorithm 1): sum the
   clients' S_k(x), solve ``q = (S + ridge)^-1 e1``, broadcast q, sum the clients'
   F_k(z | x) and post-process (clip to [0, 1], make monotone, end at 1);
4. generates synthetic rows column by column with the chain rule and inverse-CDF
   sampling by linear interpolation on the grid (Algorithm 2), for all rows of a column
   at once in memory-bounded chunks.
"""

from __future__ import annotations

import itertools
import json
import shlex
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy.interpolate import PchipInterpolator

from fits.core.boosting import (
    MAX_OUTPUTS,
    MAX_REPLY_VALUES,
    MAX_VALIDATION_FRACTION,
    BoostedModel,
    BoostingParams,
    TreeGrower,
    cdf_from_classes,
    class_levels,
    discrete_outputs,
    held_out_count,
    quantile_edges,
    reply_values,
    thresholds_of,
    values_from_classes,
)
from fits.core.cdf import (
    COLLINEARITY_THRESHOLD,
    DISCRETE_SAMPLING,
    MONOTONE_METHODS,
    default_grid,
    inverse_cdf,
    inverse_masses,
    mass_grid,
    masses_from_cdf,
    one_blas_thread,
    postprocess_cdf,
    refine_grid,
    reflected,
    solve_guarded,
    thin_grid,
    truncated_inverse_cdf,
)
from fits.core.continualization import Encoder
from fits.core.names import resolve_columns, resolve_keys
from fits.core.rules import (
    dependent_codes,
    detect_rules,
    interval_codes,
    map_size,
    moments_size,
    order_point_masses,
    ranges_size,
    residuals,
    sets_every_row,
    verify_rules,
)
from fits.core.schema import (
    RESOLUTIONS,
    ColumnSpec,
    DataNote,
    Rule,
    Schema,
    SchemaError,
    SparseColumnError,
    agreed_bool_texts,
    check_constants,
    check_spans,
    coarser_than_sites,
    column_digests,
    description_digest,
    labels_of_na_only,
    merge_descriptions,
    missing_flag,
    point_mass_flag,
)
from fits.core.tuning import (
    DEFAULT_CANDIDATES,
    DEFAULT_FOLDS,
    DEFAULT_TUNING_ROWS,
    RELEVANCE_STEPS,
    Smoothing,
    relevance_groups,
    relevance_probes,
    relevance_steps,
    score_for,
)
from fits.federation.codec import (
    PRECISIONS,
    decode_block,
    decode_cdf,
    decode_hessian,
    decode_histograms,
)
from fits.federation.policy import (
    DEFAULT_MIN_EFFECTIVE_ROWS,
    PolicyError,
    SitePolicy,
    pooled_floor_shortfall,
)
from fits.federation.protocol import (
    DESIGNS,
    WIDENING_LADDER,
    ConfigValue,
    Message,
    ProtocolError,
)
from fits.federation.secure import unmask_sum
from fits.federation.transport import ClientError, Transport

__all__ = [
    "ALL_COLUMNS",
    "COLUMN_MODELS",
    "Coordinator",
    "FallbackNote",
    "MAX_BATCH",
    "MISSING_INDICATOR_SCHEME",
    "ROUNDS",
    "SecureAggregationError",
    "fallback_message",
    "secure_sites_error",
]

#: The kernel scheme every site weighs its rows with for a missingness indicator's
#: conditional (``"<column> (missing)"``): the KNN scheme of eqs. 12-13, whatever the
#: site's own (:meth:`Coordinator.scheme`).
MISSING_INDICATOR_SCHEME = "knn"
#: Total kernel weight at or below which a query is "far from all data" (degenerate).
DEGENERATE_WEIGHT = 1e-250
#: Secure aggregation: a summed weight below this is re-asked with scaled weights.
_SECURE_MIN_WEIGHT = 2.0**-40
#: Pooled floor: the factors (start, count in the ladder) of each ``neff`` round: 1,
#: sqrt(2), 2; then the next three; then all the rest (few queries get that far).
_LADDER_STAGES = ((0, 3), (3, 3), (6, len(WIDENING_LADDER) - 6))
#: ... up to weights scaled by this power of two (2^-1100 is below every float64).
_SECURE_MAX_EXPONENT = 1100


class SecureAggregationError(ProtocolError):
    """Secure aggregation that would hide nothing: fewer than two sites can contribute
    to the masked sums at all, so every sum the coordinator unmasks is one site's own
    upload.  Raised by :meth:`Coordinator.configure` (with the sites' row counts and
    floors k of their configure replies, before any statistic is asked) when, under the
    sites' own floors (``floor_scope="site"``), only one site holds at least its k rows
    and every other site would abstain from every answer.  (With one site the
    coordinator refuses secure aggregation at once, a ``ValueError``.)

    Attributes
    ----------
    rows : dict of str to int
        Per site, its rows.
    floors : dict of str to float
        Per site, its k (``min_effective_rows``).
    """

    def __init__(self, message: str, rows: Mapping[str, int], floors: Mapping[str, float]):
        super().__init__(message)
        self.rows = dict(rows)
        self.floors = dict(floors)


def secure_sites_error(
    names: Sequence[str], n_rows: Sequence[int], floors: Sequence[float], pooled: bool
) -> SecureAggregationError | None:
    """The :class:`SecureAggregationError` of sites of which only one can answer, else
    None (:meth:`Coordinator._check_secure_sites`; ``fits federate local`` asks it
    before starting Flower).  A site can answer when it holds rows and, under its own
    floor (``pooled`` False), at least its k (``floors``) of them; none able to answer
    is another error (every site would abstain), not this one."""
    answers = [m > 0 and (pooled or m >= k) for m, k in zip(n_rows, floors, strict=True)]
    if sum(answers) >= 2 or not any(answers):
        return None
    sites = list(zip(names, n_rows, floors, answers, strict=True))
    (only,) = [(n, m, k) for n, m, k, a in sites if a]
    out = [(n, m, k) for n, m, k, a in sites if not a]
    one = len(out) == 1
    lower = max(m for _, m, _ in out)  # a floor at which one of them would answer
    listed = ", ".join(f"{n!r} ({m} rows; k = {k:g})" for n, m, k in out)
    small = (
        f"site {listed} holds fewer rows than its policy's floor k (min_effective_rows), "
        "so it abstains"
        if one
        else f"sites {listed} hold fewer rows than their policy's floor k "
        "(min_effective_rows), so they abstain"
    )
    return SecureAggregationError(
        f"secure aggregation needs at least two sites that answer, and only "
        f"{only[0]!r} ({only[1]} rows; k = {only[2]:g}) can: {small} from every answer, "
        "and every masked sum the coordinator unmasks would be the upload of "
        f"{only[0]!r} alone: secure aggregation would hide nothing. Add a site that "
        f"holds at least its k rows; let the small {'site' if one else 'sites'} lower "
        "min_effective_rows where policy allows (a --policy file of fits synthesize and "
        f"fits federate site, e.g. '{{\"min_effective_rows\": {lower}}}'; Python: "
        f"site_policy=SitePolicy(min_effective_rows={lower})) or give every site a "
        'pooled floor (\'{"floor_scope": "pooled"}\': a site under k then takes '
        'part, masked; docs/privacy.md, "Pooled floor"); or run without secure '
        "aggregation (leave out --secure-aggregation; Python: secure_aggregation=False)",
        dict(zip(names, n_rows, strict=True)),
        dict(zip(names, floors, strict=True)),
    )


ProgressCallback = Callable[[str, int, int], None]
#: A callback told, in a few words, which phase of the fit starts (:attr:`Coordinator.on_phase`).
PhaseCallback = Callable[[str], None]
#: The name progress callbacks get for the boosted columns' fit (rounds done, rounds).
BOOSTING_PROGRESS = "boosted models (rounds)"


def _refined(grid: np.ndarray, per: int) -> np.ndarray:
    """``grid`` with ``per`` equally spaced points in every interval (its own included)."""
    steps = np.arange(per) / per
    inner = grid[:-1, None] + np.diff(grid)[:, None] * steps[None, :]
    return np.append(inner.ravel(), grid[-1])


#: Most queries per message by default (the coordinator holds B x G sums).
MAX_BATCH = 8192
#: Bytes a value takes on the wire at each precision (fixed16: the int16 values).
_VALUE_BYTES = {"float64": 8, "float32": 4, "fixed16": 2}
#: Points per interval of a thinned grid where draws evaluate the interpolated CDF.
REFINE = 8
#: Most rounds that split the heavy cells of continuous columns' grids (refine_grid).
ADAPT_ROUNDS = 3
#: Rounds per chain column: "auto" (chosen per column), 1 or 2.
ROUNDS = ("auto", 1, 2)
#: How a chain column's conditional is estimated: the kernel of Algorithm 1 (the paper),
#: or a federated boosted tree model (:mod:`fits.core.boosting`).
COLUMN_MODELS = ("kernel", "boosting")
#: The ``column_models`` key that stands for every column after the chain's first.
ALL_COLUMNS = "*"


def _per_column(what: str, given: Mapping[str, str] | None, choices: tuple[str, ...]) -> dict:
    """``given`` (column -> one of ``choices``) as a dict, with errors that say what to
    write."""
    if given is None:
        return {}
    example = f"e.g. {{'income': {choices[-1]!r}}}"
    if not isinstance(given, Mapping):
        raise TypeError(
            f"{what} must be a mapping of column names to one of {choices} ({example}), "
            f"got {type(given).__name__}"
        )
    for name, value in given.items():
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"{what}[{name!r}] must be one of {choices}, got {value!r}")
    return dict(given)


class Coordinator:
    """Drives a FITS federation through a transport; never touches a row.

    Parameters
    ----------
    transport : Transport
        The channel to the clients.
    grid_size : int
        G, points per grid (default 300, sec. 6.1.2).
    ridge : float
        Relative ridge of eq. 7 (default 1e-8, times diag(S)); 0 for none.
    collinearity : float
        Threshold of the collinearity guard of eq. 7 (default
        :data:`~fits.core.cdf.COLLINEARITY_THRESHOLD`): a query whose local correlation
        matrix of the covariates (from S alone) has an eigenvalue at or below
        ``collinearity`` times its largest gets the local-linear fit of the design
        reduced to the other principal directions (:func:`~fits.core.cdf.solve_first_row`).
        0 turns the guard off.  Counted in ``guarded``.
    response_bandwidth : float
        w_z of a continuous response, in units of each client's sd (default 0.05).
    discrete_response_bandwidth : float
        w_z of a discrete response, in units of the interval width (default 0.05).
    monotone : {"isotonic", "rearrange"}
        How post-processing makes CDFs monotone.
    discrete_sampling : {"mass", "grid"}
        ``"mass"`` (default): a discrete column's grid is two interior points per
        interval, ``offset = min(0.25, 4 * discrete_response_bandwidth)`` of its width
        in from each end; its conditional category masses come from the differences of
        F there (Corollary 5.4) and a category is drawn from them.  ``"grid"``: inverse
        interpolation on an aligned grid of about ``grid_size`` points (eq. 17).
    batch_size : int, optional
        Queries per message; default chosen so that the clients' dense weight matrices
        together stay under ``memory_budget`` float64 values.
    memory_budget : int
        See ``batch_size`` (default 2**25 values, 256 MiB).
    secure : bool
        Secure aggregation (:mod:`fits.federation.secure`): the clients mask every upload that is
        summed, so this coordinator learns only the sums over clients.  Needs at least
        two clients, and (checked at :meth:`configure`) at least two that can answer
        under their policies' floors (:class:`SecureAggregationError`).  Default False.
    mask_neighbours : int, optional
        With ``secure``: each client shares masks with the clients up to this many
        places away in the cyclic order (2 * mask_neighbours peers); None: with every
        other client.  Default 1 (two peers each): the coordinator would have to
        collude with both of a client's peers to see its uploads.  Each peer costs one
        pseudo-random stream the size of the client's upload.
    precision : {"fixed16", "float32", "float64"}
        How the sites write their Hessians and CDF vectors on the wire
        (:mod:`fits.federation.codec`, which states each one's error bound).  Default
        ``"float64"``: exact, as the paper's estimator (``FITSSynthesizer`` asks for
        ``"fixed16"``: Hessians as float32 diagonals and 16-bit correlations, CDF vectors
        as 16-bit fixed point with one float32 scale per query).  Secure aggregation
        always sends its own exact fixed point.
    rounds : {"auto", 1, 2}
        Message rounds per batch of queries.  2: Algorithm 1 as written (Hessians, then
        CDF vectors given q).  1: each site sends its Hessians and its (d + 1) x L
        response blocks in one message and the coordinator solves (``block``
        messages; the same estimate up to rounding).  ``"auto"`` (default): per column
        and batch, one round where the bytes it adds are at most ``round_cost_bytes``
        (:meth:`one_round`; docs/benchmarks.md, "Bytes").
    adaptive_grids : bool
        Split the heavy cells of continuous columns' default grids before any other
        use of them (:func:`~fits.core.cdf.refine_grid`; docs/method.md, "Grids that
        follow the data"), so that one outlier or a long tail does not leave the bulk
        of a column in one cell.  Default True; False keeps METHOD.md's equally spaced
        grids (the paper's).
    round_cost_bytes : int
        What one message round costs, in bytes: what the link carries in a round's
        latency.  Default 0 (in process a round costs no latency, so ``"auto"`` always
        takes the two rounds, which upload less).  It is a parameter of the run, not of
        the transport, so that in-process and Flower runs of the same parameters give
        the same table.
    grid_points : int, optional
        Thinned grids (fits' choice for communication-efficient grids, which the paper
        leaves open): every continuous column after the first is evaluated on at most
        ``grid_points`` points of its :func:`default_grid`, those where linear
        interpolation of its federated smoothed marginal (eq. 16, asked once per column
        on the default grid) errs most (:func:`~fits.core.cdf.thin_grid`, greedy), with
        the grid points just outside its lower and upper bounds; so the points sit where
        the column's CDF bends and none where it is flat.  Draws interpolate the
        conditional CDF between them monotonically (PCHIP, Fritsch-Carlson), evaluated on
        :data:`REFINE` points per interval, then invert it linearly (eq. 17).  None
        (default): the default grid of ``grid_size`` points.
    deduplicate : bool
        Send each distinct query point once per column (after the midpoint substitution
        of discrete covariates, eq. 24, which the sites apply anyway) and reuse its
        answer for every row that asks it (default True; the output does not change).
    design : {"all", "ordered", "continuous", "constant"}
        The covariates of the local-linear design U_i of eq. 5.  ``"all"`` (default):
        every covariate, U_i = (1, h_i - x), as in the paper.  ``"continuous"``: the
        continuous covariates only, U_i = (1, h^c_i - x^c), so the fit is local-linear
        in the continuous directions and local-constant in the discrete ones (the
        mixed-data local-linear estimator of Li and Racine); every covariate still
        enters the kernel weights (eqs. 24-26).  "Discrete" is the schema's kind: the
        nominal and ordinal columns and the missing / point-mass indicators, whatever
        their continualized values.  ``"ordered"``: the continuous and the ordinal
        covariates (local-constant in the nominal ones and the indicators only).  The
        Hessians then hold (1 + c)(2 + c)/2 values per query instead of
        (d + 1)(d + 2)/2, c the covariates kept (docs/method.md, "The local-linear
        design"; docs/benchmarks.md, "Bytes").  ``"constant"``: no covariate, U_i = 1,
        the local-constant (Nadaraya-Watson) form of eq. 5 with the same weights, i.e.
        a weighted empirical CDF of the smoothed responses (one Hessian value per query).
    column_designs : mapping, optional
        Per chain column, a design of ``DESIGNS`` for that column's conditional CDF,
        overriding ``design`` (e.g. ``{"cnt": "constant"}``).  Names that are not in
        the chain after its first column are refused at :meth:`setup`.
    column_models : mapping, optional
        Per chain column, how its conditional is estimated: ``"kernel"`` (default:
        Algorithm 1) or ``"boosting"``: a gradient-boosted tree model of the column's
        category given the chain columns before it, fitted by federated histograms
        (``boost`` rounds, :mod:`fits.core.boosting`; not the paper's method), from whose
        class probabilities the column is drawn (a continuous column: through its
        quantile classes).  Only columns after the first (discrete ones drawn by mass);
        checked at :meth:`setup`.  The key ``"*"`` (:data:`ALL_COLUMNS`) sets every
        column after the chain's first (a named column overrides it): ``{"*":
        "boosting"}`` draws the whole chain but its first column from boosted models.
    boosting : BoostingParams, optional
        The boosted columns' settings (default ``BoostingParams()``: 100 trees of depth
        5, learning rate 0.3, at most 128 bins per continuous covariate, 64 classes of
        a continuous column).
    column_boosting : mapping, optional
        Per boosted column, settings of its own overriding ``boosting`` for it (e.g.
        ``{"income": BoostingParams(learning_rate=0.1, depth=6)}``); a name that is not
        a boosted column is refused at :meth:`setup`.
    on_phase : callable, optional
        Called as ``on_phase(text)`` when a phase of the fit starts, ``text`` saying
        which in a few words: the setup round, each round of rule detection (with its
        candidates), the configure round, :meth:`tune`'s round and each column of
        :meth:`tune_relevance`.  For progress on the command line; default None: silent.
        Also the attribute :attr:`on_phase`.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        grid_size: int = 300,
        ridge: float = 1e-8,
        collinearity: float = COLLINEARITY_THRESHOLD,
        response_bandwidth: float = 0.05,
        discrete_response_bandwidth: float = 0.05,
        monotone: str = "isotonic",
        discrete_sampling: str = "mass",
        batch_size: int | None = None,
        memory_budget: int = 2**25,
        secure: bool = False,
        mask_neighbours: int | None = 1,
        precision: str = "float64",
        rounds: str | int = "auto",
        deduplicate: bool = True,
        grid_points: int | None = None,
        adaptive_grids: bool = True,
        round_cost_bytes: int = 0,
        design: str = "all",
        column_designs: Mapping[str, str] | None = None,
        column_models: Mapping[str, str] | None = None,
        boosting: BoostingParams | None = None,
        column_boosting: Mapping[str, BoostingParams] | None = None,
        on_phase: PhaseCallback | None = None,
    ) -> None:
        for key, value, least in (
            ("grid_size", grid_size, 3),
            ("grid_points", grid_points, 3),
            ("batch_size", batch_size, 1),
        ):
            if value is None and key != "grid_size":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{key} must be a whole number, got {value!r}")
            if value < least:
                raise ValueError(
                    f"{key} must be at least {least}"
                    + (" (or None)" if key != "grid_size" else "")
                    + f", got {value!r}"
                )
        for key, number in (  # real numbers: a string, NaN or infinity is refused here
            ("ridge", ridge),
            ("collinearity", collinearity),
            ("response_bandwidth", response_bandwidth),
            ("discrete_response_bandwidth", discrete_response_bandwidth),
        ):
            if isinstance(number, bool) or not (
                isinstance(number, (int, float, np.integer, np.floating)) and np.isfinite(number)
            ):
                raise TypeError(f"{key} must be a finite number, got {number!r}")
        if ridge < 0:
            raise ValueError(f"ridge must be >= 0, got {ridge!r}")
        if not 0 <= collinearity < 1:
            raise ValueError(f"collinearity must be in [0, 1), got {collinearity!r}")
        if not (response_bandwidth > 0 and discrete_response_bandwidth > 0):
            raise ValueError(
                "response bandwidths must be > 0, got response_bandwidth="
                f"{response_bandwidth!r}, discrete_response_bandwidth="
                f"{discrete_response_bandwidth!r}"
            )
        for key, switch in (("secure", secure), ("deduplicate", deduplicate)):
            if not isinstance(switch, (bool, np.bool_)):
                raise TypeError(f"{key} must be True or False, got {switch!r}")
        for key, value in (
            ("mask_neighbours", mask_neighbours),
            ("round_cost_bytes", round_cost_bytes),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, np.integer))
            ):
                raise TypeError(f"{key} must be a whole number, got {value!r}")
        if monotone not in MONOTONE_METHODS:
            raise ValueError(f"monotone must be one of {MONOTONE_METHODS}")
        if discrete_sampling not in DISCRETE_SAMPLING:
            raise ValueError(f"discrete_sampling must be one of {DISCRETE_SAMPLING}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if rounds not in ROUNDS:
            raise ValueError(f"rounds must be one of {ROUNDS}, got {rounds!r}")
        if design not in DESIGNS:
            raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
        self.design = design
        self.column_designs = _per_column("column_designs", column_designs, DESIGNS)
        self.column_models = _per_column("column_models", column_models, COLUMN_MODELS)
        #: Whether boosting settings were given (a warning if no column is boosted).
        self._boosting_given = boosting is not None or bool(column_boosting)
        self.boosting = boosting or BoostingParams()
        self.column_boosting = dict(column_boosting or {})
        for name, params in self.column_boosting.items():
            if not isinstance(params, BoostingParams):
                raise TypeError(
                    f"column_boosting[{name!r}] must be a BoostingParams, got "
                    f"{type(params).__name__}"
                )
        #: The fitted boosted models, per column (:meth:`boosted_model`).
        self.models: dict[str, BoostedModel] = {}
        #: Early stopping's pooled held-out loss per row after 0, 1, ... trees, per column.
        self.boosting_losses: dict[str, list[float]] = {}
        self._validation_seed = 0  # configure's
        #: (site, node) histograms of boosted columns the sites withheld under their floor.
        self.nodes_withheld = 0
        #: column_models resolved at setup (ALL_COLUMNS expanded), per chain column
        self._column_model: dict[str, str] = {}
        self.precision = precision
        self.rounds = rounds
        self.deduplicate = bool(deduplicate)
        if round_cost_bytes < 0:
            raise ValueError(f"round_cost_bytes must be >= 0, got {round_cost_bytes!r}")
        self.round_cost_bytes = int(round_cost_bytes)
        self.grid_points = grid_points
        self.adaptive_grids = bool(adaptive_grids)
        #: Columns on thinned grids: the points draws interpolate to (see grid_points).
        self.fine_grids: dict[str, np.ndarray] = {}
        self.transport = transport
        self.grid_size = grid_size
        self.ridge = ridge
        self.collinearity = collinearity
        self.response_bandwidth = response_bandwidth
        self.discrete_response_bandwidth = discrete_response_bandwidth
        self.monotone = monotone
        self.discrete_sampling = discrete_sampling
        #: Where the two interior points of each interval sit (mass sampling).
        self.mass_offset = min(0.25, 4.0 * discrete_response_bandwidth)
        self.batch_size = batch_size
        self.memory_budget = memory_budget
        self.secure = bool(secure)
        if self.secure and transport.n_clients < 2:
            raise ValueError(
                "secure aggregation needs at least two clients: with one, the sum is "
                "that client's own upload"
            )
        if mask_neighbours is not None and mask_neighbours < 1:
            raise ValueError("mask_neighbours must be at least 1 (or None: every client)")
        self.mask_neighbours = mask_neighbours
        self._public_keys: np.ndarray | None = None
        #: Told which phase of the fit starts (see the parameter); None: silent.
        self.on_phase: PhaseCallback | None = on_phase
        self.schema: Schema | None = None
        self.n_rows: list[int] = []
        #: Per site (in ``transport.client_names``' order) the SHA-256 of its setup
        #: description (:func:`~fits.core.schema.description_digest`): a hash of what it
        #: sent in the clear, kept so that a reconnected synthesizer can tell changed data
        self.site_digests: list[str] = []
        #: Per site, per column, the SHA-256 of that column's part of its setup
        #: description less how pandas stores it (:func:`~fits.core.schema.
        #: column_digests`): the same values in another dtype connect, a change is named
        self.site_column_digests: list[dict[str, str]] = []
        #: The columns of booleans every site's file spells one way (``true``/``false``),
        #: with that spelling (:func:`~fits.core.schema.agreed_bool_texts`): how a CSV
        #: output writes them
        self.bool_texts: dict[str, tuple[str, str]] = {}
        #: The column declarations the setup round sent the sites (``{column: {"kind":
        #: kind}}``): what their descriptions were made under
        self.declared: dict[str, dict[str, str]] = {}
        self.grids: dict[str, np.ndarray] = {}
        self.fallbacks = 0  # queries that needed the degenerate-query fallback
        #: Per near-linear column, the synthetic rows whose conditional CDF of the
        #: residual had no mass where Y stays within its bounds: [drawn from the
        #: residual's marginal, drawn uniformly] (:meth:`_truncated`), summed over draws.
        self.truncation_fallbacks: dict[str, list[int]] = {}
        self.guarded = 0  # queries whose design the collinearity guard reduced
        #: Candidates sent to every site per rule-detection stage (``check``: one bit
        #: each from every site), summed over the fit's rounds.
        self.rule_candidates: dict[str, int] = {}
        #: (site, query) answers the sites abstained from under their policies.
        self.abstained = 0
        #: (site, query) answers the sites gave with a kernel widened to their floor.
        self.widened = 0
        self.declared_rows = 0
        self.site_policies: list[dict] = []
        self._configure_messages: list[Message] = []
        self._asked: dict[str, int] = {}
        self._requests = itertools.count()
        #: k of the sites' pooled effective-rows floor (None: each site floors its own)
        self._pooled_k: float | None = None
        self._marginals: dict[str, np.ndarray] = {}
        #: The smoothing of each chain column's conditional CDF (:meth:`tune`, or set by
        #: hand); a column not in it uses the sites' own kernels (sharpness = reach = 1).
        self.smoothing: dict[str, Smoothing] = {}
        #: What :meth:`tune` measured: per column the candidates, the summed scores,
        #: the rows scored and the chosen candidate's index.
        self.tuning: dict[str, dict] = {}
        #: Take the local-constant fallback of a one-round column from its block's sums
        #: instead of another round (:meth:`_local_constant`; False: always a round).
        self.reuse_blocks = True
        self._last_block: tuple | None = None

    def _phase(self, text: str) -> None:
        """Tell :attr:`on_phase` (if any) that the phase ``text`` starts."""
        if self.on_phase is not None:
            self.on_phase(text)

    # ---------------------------------------------------------------- setup round
    @property
    def n_total(self) -> int:
        """M, the number of rows in the federation."""
        return int(sum(self.n_rows))

    def setup(
        self,
        *,
        kinds: Mapping[str, str] | None = None,
        order: Sequence[str] | None = None,
        schema: Schema | None = None,
        rules: bool = True,
        near_linear: bool = True,
        declare: Mapping[str, Mapping[str, str]] | None = None,
        check_sites: Callable[[Coordinator], None] | None = None,
    ) -> Schema:
        """Setup round: collect counts and descriptions, merge them into the schema.

        With a user ``schema`` the descriptions are not merged; the clients check their
        data against it when configured.  Returns the user-facing schema; the engine
        draws ``self.schema``, which adds a missingness indicator before each continuous
        column with missing values.

        With ``rules`` (default) exact rules between columns are then detected with
        ``rules`` messages (:mod:`fits.core.rules`) and put in the schema's ``rules``;
        a user schema's own ``rules`` (when it has a ``rules`` entry) are checked at
        every site instead.  ``rules=False`` sets no rule.  With ``near_linear`` (and
        ``rules``) detection also finds the near-linear columns, drawn as residuals
        (``"linear"`` rules, :func:`~fits.core.rules.detect_near_linear`; never a
        column ``column_models`` boosts; default); ``near_linear=False`` finds none
        (a user schema's own ``"linear"`` rules are kept either way).

        ``declare`` sends the sites these column declarations (``{column: {"kind":
        kind}}``) in place of those of ``kinds`` or ``schema``: a reconnecting
        synthesizer sends those of its fit (:attr:`declared`), so that each site
        describes an unchanged table exactly as it did then.  ``check_sites`` is called
        with this coordinator as soon as the sites' answers are in (:attr:`n_rows`,
        :attr:`site_digests` and ``transport.client_names`` set), before any other
        round: it raises to stop the setup (the sites are not those expected).
        """
        declared = {c: {"kind": k} for c, k in (kinds or {}).items()}
        if schema is not None:
            unbounded = [
                c.name
                for c in schema.columns
                if c.kind == "continuous" and (c.lower is None or c.upper is None)
            ]
            if unbounded:  # the grid of a continuous column spans its bounds
                raise SchemaError(
                    f"the schema gives continuous column(s) {unbounded} no "
                    '"lower" or "upper" bound; a continuous column needs both (the range '
                    "its synthetic values are drawn in): set them to cover every site's "
                    "values, or detect the schema again (Schema.detect, fits schema)"
                )
            declared = {c.name: {"kind": c.kind} for c in schema.columns}
        if declare is not None:
            declared = {str(c): {"kind": str(d["kind"])} for c, d in declare.items()}
        self.declared = declared
        self._phase(f"setup round: {self.transport.n_clients} site(s) describe their tables")
        msg = Message("setup", config={"declared": json.dumps(declared), **self._secure_flag()})
        replies = self.transport.broadcast(msg)
        self.n_rows = [int(r.arrays["n_rows"][0]) for r in replies]
        if self.secure:  # relayed to every client in the configure round
            self._public_keys = np.stack([r.arrays["public_key"] for r in replies])
        descriptions = [json.loads(str(r.config["description"])) for r in replies]
        # in the clear in every mode (secure aggregation masks later rounds' sums, and
        # the public keys are arrays beside the description): a hash of each answer
        self.site_digests = [description_digest(d) for d in descriptions]
        self.site_column_digests = [column_digests(d) for d in descriptions]
        self.bool_texts = agreed_bool_texts(descriptions)
        # a site's column of 'NA' alone, where another site holds 'NA' as a label
        descriptions, relabelled = labels_of_na_only(descriptions, self.transport.client_names)
        for note in relabelled:
            warnings.warn(note, DataNote, stacklevel=3)
        if check_sites is not None:
            check_sites(self)
        #: Rows holding each column over the federation (the setup descriptions' counts)
        sites = list(zip(descriptions, self.n_rows, strict=True))
        self._present = {  # rows less missing ones (a datetime's has no n_present)
            str(c): sum(n - int(d["columns"].get(c, {}).get("n_missing", 0)) for d, n in sites)
            for c in descriptions[0]["columns"]
        }
        #: What each site said of each column at setup (its counts: rows holding a value,
        #: the count at its most frequent value), for :meth:`_check_present`
        self._site_columns: list[dict[str, dict]] = [dict(d["columns"]) for d in descriptions]
        # names the user gave resolved to the sites' headers (fits.core.names: ' age '
        # may be named 'age'); an unknown name is kept, for the schema's own message
        headers = [str(c) for c in descriptions[0]["order"]] if schema is None else schema.names
        if order is not None:
            order = resolve_columns(order, headers, "order")
        if schema is None:
            schema = merge_descriptions(
                descriptions,
                self.transport.client_names,
                kinds=resolve_keys(kinds or {}, headers, "kinds"),
                order=order,
            )
        else:
            check_constants(schema, descriptions, self.transport.client_names)
            for note in coarser_than_sites(schema, descriptions, self.transport.client_names):
                warnings.warn(note, DataNote, stacklevel=3)
            if order is not None:
                schema = Schema(schema.columns, list(order), schema.rules)
        check_spans(schema)
        if not rules:
            schema = Schema(schema.columns, schema.order, [])
        elif schema.rules is not None:
            self._phase(f"rule check: the schema's {len(schema.rules)} rule(s) at every site")
            verify_rules(schema, self._rules_round(schema), self.transport.client_names)
        else:
            self._phase(f"rule detection over {len(schema.names)} columns")
            found = detect_rules(
                schema,
                self._rules_round(schema),
                self.transport.client_names,
                self.n_total,
                descriptions,
                near_linear=bool(near_linear),
                exclude=self._boosted_names(schema.names),
            )
            schema = Schema(schema.columns, schema.order, found)
        self.user_schema = schema
        self._resolve_column_names(schema.names)
        ids = {c.name for c in schema.columns if c.kind == "id"}  # refused below, as such
        unknown = sorted(set(self.column_designs) - set(schema.order[1:]) - ids)
        if unknown:
            raise ValueError(
                f"column_designs names {unknown}, which are not in the chain after its "
                f"first column ({schema.order[0]!r} is drawn from its marginal); chain: "
                f"{', '.join(schema.order)}"
            )
        masses: set[str] = set()
        if rules and any(r.kind == "order" for r in schema.rules or []):
            # which order differences have a point mass at 0 (stays of 0 days)
            masses = order_point_masses(
                schema, self._rules_round(schema), self.transport.client_names
            )
        self.schema = schema.expanded(masses)  # with missingness indicators in the chain
        self._check_column_models()
        return schema

    def _boosted_names(self, headers: Sequence[str]) -> set[str]:
        """The columns ``column_models`` boosts (before :meth:`_check_column_models`
        resolves it): not drawn as a near-linear residual."""
        models = resolve_keys(
            self.column_models, headers, "column_models", is_column=lambda c, _: c != ALL_COLUMNS
        )
        boosted = set(headers) if models.get(ALL_COLUMNS) == "boosting" else set()
        boosted |= {c for c, m in models.items() if m == "boosting"}
        return boosted - {c for c, m in models.items() if c != ALL_COLUMNS and m != "boosting"}

    def _resolve_column_names(self, headers: Sequence[str]) -> None:
        """``column_designs``, ``column_models`` and ``column_boosting`` keyed by the
        headers they name (:func:`fits.core.names.resolve_keys`; ``'*'`` and unknown
        names are kept, for the checks that follow)."""
        self.column_designs = resolve_keys(self.column_designs, headers, "column_designs")
        self.column_models = resolve_keys(
            self.column_models, headers, "column_models", is_column=lambda c, _: c != ALL_COLUMNS
        )
        self.column_boosting = resolve_keys(self.column_boosting, headers, "boosting")

    def _check_column_models(self) -> None:
        """Resolve ``column_models`` ("*": every column of the user's chain after its
        first; a named column overrides it) and refuse what cannot be boosted: a column
        not in the chain after its first column, a nominal column with more categories
        than a model has outputs, a column whose sites' replies would be too large, and
        settings of their own for a column that is not boosted.  Warn where a setting
        has no effect.  Refuse a ``column_designs`` entry for a column the chain does not
        draw with covariates (the chain's first once identifiers and columns that affine
        rules set are left out, or one of those), where it would have no effect."""
        assert self.schema is not None
        order = self.schema.order
        for name, design in self.column_designs.items():
            # e.g. first once an identifier left the chain
            why = self._not_boostable(name, boosting=False)
            if why:
                raise ValueError(f"column_designs[{name!r}] = {design!r}: {name!r} {why}")
        resolved: dict[str, str] = {}
        if ALL_COLUMNS in self.column_models:
            for name in self.user_schema.order:
                if name in order and not self._drawn_first(name):  # nor an affine rule's
                    resolved[name] = self.column_models[ALL_COLUMNS]
        resolved.update({c: m for c, m in self.column_models.items() if c != ALL_COLUMNS})
        self._column_model = resolved
        boosted = [c for c in order if resolved.get(c) == "boosting"]
        boosted += sorted({c for c, m in resolved.items() if m == "boosting"} - set(order))
        for name in sorted(set(self.column_boosting) - set(boosted)):
            why = self._not_boostable(name) or (
                "is not boosted (column_models); boost it, or drop its settings"
            )
            raise ValueError(f"boosting: settings of their own for {name!r}, which {why}")
        if self._boosting_given and not boosted:
            warnings.warn(
                "boosting settings are given but no column is boosted (column_models), so "
                "they have no effect",
                UserWarning,
                stacklevel=3,
            )
        continuous = [c for c in boosted if c in order and not self.schema[c].is_discrete]
        for name, own in self.column_boosting.items():  # a continuous column's settings
            if name in order and self.schema[name].is_discrete:
                moot = [
                    f
                    for f in ("classes", "continuous")
                    if getattr(own, f) != getattr(self.boosting, f)
                ]
                if moot:
                    warnings.warn(
                        f"boosting[{name!r}]: {', '.join(moot)} set for a discrete column, "
                        "whose model has one output per category; no effect",
                        UserWarning,
                        stacklevel=3,
                    )
        if boosted and not continuous and self._boosting_given:
            moot = [
                f
                for f in ("classes", "continuous")
                if getattr(self.boosting, f) != getattr(BoostingParams(), f)
            ]
            if moot:
                warnings.warn(
                    f"boosting: {', '.join(moot)} set, but every boosted column is discrete "
                    "(one output per category); no effect",
                    UserWarning,
                    stacklevel=3,
                )
        ruled = {r.column: r for r in self.user_schema.rules or []}
        for name in boosted:
            problem = self._not_boostable(name)
            spec = self.schema[name] if problem is None else None
            if spec is not None and spec.is_discrete and self.discrete_sampling != "mass":
                problem = 'needs discrete_sampling="mass"'
            if spec is not None and problem is None:
                problem = self._oversized(name)
            if problem:
                raise ValueError(f"column_models[{name!r}] = 'boosting': {name!r} {problem}")
            if name in self.column_designs:
                raise ValueError(
                    f"column_designs[{name!r}] = {self.column_designs[name]!r}: {name!r} is "
                    "boosted (column_models), and a design sets the kernel's local fit; "
                    "drop one of the two"
                )
            if name in ruled and name in self.column_models:  # named, not through "*"
                fallback = (
                    " (its boosted model is fitted only should a drawn row hold a "
                    "combination the rule does not cover)"
                    if ruled[name].kind == "function"
                    else ""
                )
                warnings.warn(
                    f"column_models[{name!r}] = 'boosting': {name!r} is set by the schema's "
                    f"rule {ruled[name].describe()}, so the rule draws it{fallback}; to draw "
                    "it from its boosted model, switch the rules off (rules=False, "
                    "--no-rules) or drop the rule from the schema",
                    UserWarning,
                    stacklevel=3,
                )
        self.models.clear()

    def _not_boostable(self, name: str, *, boosting: bool = True) -> str | None:
        """Why ``name`` cannot be boosted (a clause after its name), or None; with
        ``boosting=False``, why it takes no design of its own (``column_designs``): a
        near-linear column does (its residual's conditional CDF is a local-linear fit
        like any other), a boosted model of it does not exist."""
        assert self.schema is not None
        order = self.schema.order
        rule = next((r for r in self.user_schema.rules or [] if r.column == name), None)
        if boosting and rule is not None and rule.kind in ("linear", "order"):
            return (
                f"is drawn as the residual of its "
                f"{'near-linear' if rule.kind == 'linear' else 'order'} rule {rule.describe()}; to "
                "boost it, drop the rule from the schema's rules (detection never proposes "
                "one for a boosted column)"
            )
        if rule is not None and rule.kind == "affine":
            return (
                f"is set by the schema's rule {rule.describe()} and not drawn; to model it, "
                "switch the rules off (rules=False, --no-rules) or drop the rule from the "
                "schema"
            )
        if name in order and self._drawn_first(name):
            return (
                "is the chain's first column, drawn from its marginal with no covariates; "
                "move it later in the chain (order=..., --order)"
            )
        if name in self.user_schema.names and self.user_schema[name].kind == "id":
            return (
                "is an identifier: it gets fresh surrogate values and is not modelled; "
                "drop its setting, or declare it another kind"
            )
        if name not in order:
            return f"is not a column the chain draws (chain: {', '.join(order)})"
        return None

    def _drawn_first(self, name: str) -> bool:
        """Whether chain column ``name`` is drawn first: before it in the engine's chain
        come at most its own indicators (missing, at its point mass), which say only
        whether it has a value, not which."""
        assert self.schema is not None
        before = self.schema.order[: self.schema.order.index(name)]
        return all(self.schema[c].indicates == name for c in before)  # not by their names

    def _oversized(self, column: str) -> str | None:
        """Whether a boosted column's model is too large for a site's reply, judged at
        setup from the schema: every continuous covariate at its most ``bins`` bins and
        a continuous column at its most ``classes`` classes (:meth:`_grower` checks the
        bins actually found, which may be fewer)."""
        assert self.schema is not None
        order = self.schema.order
        params = self.boosting_params(column)
        spec = self.schema[column]
        bins = sum(
            self.schema[c].n_levels if self.schema[c].is_discrete else params.bins
            for c in order[: order.index(column)]
        )
        if spec.is_discrete and spec.n_levels > MAX_OUTPUTS:
            return (
                f"has {spec.n_levels} categories, and a boosted model has at most "
                f"{MAX_OUTPUTS} outputs (one per category); keep the kernel for this column "
                f"({{{column!r}: 'kernel'}} in column_models; --column-model {column}=kernel)"
            )
        if spec.is_discrete:
            k = discrete_outputs(spec.n_levels)
        else:  # (f, s) of the location-scale model, else one logit per class boundary
            k = 2 if params.continuous == "location-scale" else params.classes - 1
        reply = reply_values(params.depth - 1, bins, k)
        if k > MAX_OUTPUTS or reply > MAX_REPLY_VALUES:
            lower = "depth or bins" if spec.is_discrete else "depth, bins or classes"
            if not spec.is_discrete and params.continuous == "cumulative":
                lower += " (or set continuous='location-scale')"
            return (
                f"would need replies of up to {reply:,} values from each site (at most "
                f"{MAX_REPLY_VALUES:,}): {k} model outputs over up to {bins} covariate bins "
                f"at depth {params.depth}; lower its boosting {lower}, or keep the kernel "
                f"({{{column!r}: 'kernel'}} in column_models; --column-model {column}=kernel)"
            )
        return None

    def _rules_round(self, schema: Schema) -> Callable[[str, list[dict]], list[np.ndarray]]:
        """The ``ask`` of :func:`~fits.core.rules.detect_rules`: a ``rules`` message."""
        text = schema.without_rules().to_json()

        def ask(stage: str, candidates: list[dict]) -> list[np.ndarray]:
            self._phase(f"rule detection: {stage} round ({len(candidates):,} candidates)")
            self.rule_candidates[stage] = self.rule_candidates.get(stage, 0) + len(candidates)
            config: dict[str, ConfigValue] = {
                "stage": stage,
                "schema": text,
                "candidates": json.dumps(candidates),
            }
            arrays: dict[str, np.ndarray] = {}
            if stage == "map":
                config["size"] = map_size(schema, candidates)
            if stage == "ranges":
                config["size"] = ranges_size(schema, candidates)
            summed = stage in ("moments", "totals")
            if summed:  # summed over the sites: masked with secure aggregation
                config["size"] = moments_size(candidates) if stage == "moments" else len(candidates)
                if self.secure and self._public_keys is not None:
                    config.update(secure=True, secure_neighbours=self.mask_neighbours or 0)
                    arrays["secure_keys"] = self._public_keys
            replies = self.transport.broadcast(Message("rules", arrays, config))
            if summed:
                if self.secure:  # only the sum over the sites is learnt
                    return [unmask_sum([r.arrays[stage] for r in replies])]
                return [r.arrays[stage] for r in replies]
            if stage == "residuals":  # each site's min and max residual, in the clear
                return [r.arrays["residuals"] for r in replies]
            if stage == "ranges":  # per value its count, min and max X, in the clear
                return [r.arrays["ranges"] for r in replies]
            return [r.arrays["pairs" if stage == "map" else "holds"] for r in replies]

        return ask

    @property
    def _configured(self) -> bool:
        """Whether :meth:`configure` has run: every column of the schema has its grid
        (a schema of no column, every column an identifier or a constant, needs none)."""
        return self.schema is not None and len(self.grids) == len(self.schema.columns)

    def configure(
        self,
        seed: int | np.random.SeedSequence | None = None,
        *,
        scaling: tuple[np.ndarray, np.ndarray] | None = None,
        grids: Mapping[str, np.ndarray] | None = None,
        rows: int = 0,
    ) -> None:
        """Broadcast schema, M, grids, the declared rows and per-client lifting seeds.

        Parameters
        ----------
        seed : int or SeedSequence, optional
            Root of the clients' continualization seeds.
        scaling : (loc, scale), optional
            One common standardization for every client (arrays over the chain
            columns), instead of each client's own; used to check the federated
            estimate against a pooled one.
        grids : mapping, optional
            Grids to use instead of :func:`default_grid` for some columns.
        rows : int
            Synthetic rows (query points per column) this run will ask for, declared
            to the sites, whose policies budget their answers by it
            (:class:`~fits.federation.policy.SitePolicy`).  :meth:`sample` and
            :meth:`conditional_cdf` declare more, with another configure round, when
            they need more.
        """
        if self.schema is None:
            raise RuntimeError("run setup() before configure()")
        self._phase(f"configure round: {len(self.schema.order)} chain columns")
        seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        encoders = {s.name: Encoder(s) for s in self.schema.columns}
        self.encoders = encoders
        self.grids = {
            name: mass_grid(enc, self.mass_offset)
            if self._by_mass(name)
            else default_grid(
                enc, self.grid_size, self.response_bandwidth, self.discrete_response_bandwidth
            )
            for name, enc in encoders.items()
        }
        for name, g in (grids or {}).items():
            g = np.asarray(g, dtype=float)
            if g.ndim != 1 or g.size < 2 or np.any(np.diff(g) <= 0):
                raise ValueError(f"grid for {name!r} must be a strictly increasing 1-D array")
            self.grids[name] = g
        arrays = {f"grid:{name}": g for name, g in self.grids.items()}
        if scaling is not None:
            arrays["scale_mean"] = np.asarray(scaling[0], dtype=float)
            arrays["scale_sd"] = np.asarray(scaling[1], dtype=float)
        if self.secure and self._public_keys is not None:
            arrays["secure_keys"] = self._public_keys
        children = seq.spawn(self.transport.n_clients)
        # early stopping's held-out rows (boosted columns): each site's follow from this
        # and its own lifting seed (a function of the root, which stays unchanged)
        self._validation_seed = int(seq.generate_state(1, np.uint32)[0])
        config: dict[str, ConfigValue] = {
            **({"secure_neighbours": self.mask_neighbours or 0} if self.secure else {}),
            "schema": self.schema.without_rules().to_json(),  # the sites need no rule
            # "id" and "constant" columns and the columns affine rules set: in the
            # tables, not drawn
            "unmodelled": json.dumps(self._not_drawn()),
            **self._residual_config(),
            "n_total": self.n_total,
            "response_bandwidth": self.response_bandwidth,
            "discrete_response_bandwidth": self.discrete_response_bandwidth,
        }
        messages = []
        for child in children:
            lift_seed = int(child.generate_state(1, np.uint64)[0] >> np.uint64(1))
            messages.append(Message("configure", arrays, {**config, "seed": lift_seed}))
        self._configure_messages = messages
        self._asked = {}
        self._declare(int(rows))
        self._marginals.clear()
        self.fine_grids = {}
        if self.adaptive_grids:
            self._adapted_grids(set(grids or {}), int(rows))
        if self.grid_points is not None:
            self._thinned_grids(set(grids or {}), int(rows))

    def _adapted_grids(self, given: set[str], rows: int) -> None:
        """Split the heavy cells of the continuous columns' grids (:func:`refine_grid`),
        at most :data:`ADAPT_ROUNDS` times: each round asks the marginals of the columns
        whose grids changed (one request), and sends the new grids in another configure
        round.  A column whose marginal fills its grid's cells evenly costs one marginal
        request, which grid thinning would have asked anyway."""
        assert self.schema is not None
        limit = self._adapted_grid_limit()
        targets = [
            c
            for c in self.schema.order
            if c not in given
            and not self.encoders[c].spec.is_discrete
            and not self._by_mass(c)
            and not self._boosted(c)
        ]
        first = self.schema.order[:1]  # sampling needs it: asked in the same round
        for _ in range(ADAPT_ROUNDS):
            if not targets:
                return
            self._prefetch_marginals([*targets, *first])
            first = []
            new = {}
            for column in targets:
                grid = refine_grid(
                    self.grids[column], self._marginals[column], self.grid_size, limit
                )
                if grid is not None:
                    new[column] = grid
            if not new:
                return
            self.grids.update(new)
            self._configure_messages = [
                Message(m.type, {**m.arrays, **{f"grid:{c}": g for c, g in new.items()}}, m.config)
                for m in self._configure_messages
            ]
            self._declare(rows)
            for column in new:
                self._marginals.pop(column, None)
            targets = list(new)

    def _adapted_grid_limit(self) -> int:
        """Most points an adapted grid may hold: twice ``grid_size``, within the sites'
        policies' ``max_grid_size``."""
        limits = [int(p["max_grid_size"]) for p in self.site_policies if "max_grid_size" in p]
        return min([2 * self.grid_size, *limits])

    def _residual_config(self) -> dict[str, ConfigValue]:
        """Configure's ``residuals``: the near-linear rules (column, of, slope,
        intercept) whose columns the sites model as residuals -- the response of the
        column's own conditional CDF; later columns see the column itself, a missing
        value as ``fill``, its lower bound (as without the rule) -- absent when none."""
        assert self.schema is not None
        linear = self.schema.near_linear
        if not linear:
            return {}
        return {
            "residuals": json.dumps(
                [
                    {
                        "column": r.column,
                        "of": r.of,
                        "slope": r.slope,
                        "intercept": r.intercept,
                        "fill": self._fill(r.column),
                        **self._clock(r.column),
                    }
                    for r in linear.values()
                ]
            )
        }

    def _clock(self, column: str) -> dict[str, ConfigValue]:
        """A near-linear datetime column's clock for configure's ``residuals``
        (``datetime``: True, ``tz``): the engine's spec of the column is its residual's
        (float seconds), so the sites need it to read the column as seconds since 1970
        UTC, as every datetime column is read; empty for numbers."""
        user = getattr(self, "user_schema", self.schema)
        assert user is not None
        spec = user[column]
        if spec.dtype != "datetime":
            return {}
        return {"datetime": True, **({"tz": str(spec.tz)} if spec.tz is not None else {})}

    def _fill(self, column: str) -> float:
        """A missing value's place in a continuous chain column (its lower bound; a
        near-linear column's: its own, not its residual's)."""
        assert self.schema is not None
        user = getattr(self, "user_schema", self.schema)
        spec = user[column] if column in self.schema.near_linear else self.schema[column]
        return float(spec.lower or 0.0)

    def _not_drawn(self) -> list[str]:
        """The tables' columns the engine does not draw: "id" and "constant" columns
        (a constant's missingness indicator may be drawn) and the columns
        affine rules set (:attr:`Schema.derived`)."""
        user = getattr(self, "user_schema", self.schema)
        assert user is not None
        return [*user.unmodelled, *user.derived]

    def _thinned_grids(self, given: set[str], rows: int) -> None:
        """Replace the grids of the continuous columns after the first by thinned grids
        (see ``grid_points``) and send them to the sites in another configure round."""
        assert self.schema is not None
        assert self.grid_points is not None
        targets = [
            c
            for c in self.schema.order[1:]
            if c not in given and not self.encoders[c].spec.is_discrete
        ]
        if not targets:
            return
        # one marginal per target on its default grid, and the first column's (its grid
        # stays, so its marginal, which sampling needs, is kept): independent requests,
        # sent together (one round trip on a network instead of one per column)
        first = self.schema.order[0]
        self._prefetch_marginals([*targets, first])
        new = {}
        for column in targets:
            grid = self.grids[column]
            cdf = self.marginal_cdf(column)  # fetched above, on the default grid
            # the points just outside the data's bounds, so that no mass is interpolated
            # far into the padding beyond them (where draws would be clipped to a bound)
            spec = self.encoders[column].spec
            outside = []
            if spec.lower is not None:
                outside.append(int(np.searchsorted(grid, float(spec.lower))) - 1)
            if spec.upper is not None:
                outside.append(int(np.searchsorted(grid, float(spec.upper), side="right")))
            new[column] = grid[thin_grid(grid, cdf, self.grid_points, tuple(outside))]
            self.fine_grids[column] = _refined(new[column], REFINE)
        self.grids.update(new)
        self._configure_messages = [
            Message(
                m.type,
                {**m.arrays, **{f"grid:{c}": g for c, g in new.items()}},
                m.config,
            )
            for m in self._configure_messages
        ]
        kept = {c: m for c, m in self._marginals.items() if c in (first, f"masses:{first}")}
        self._declare(rows)
        self._marginals.clear()
        self._marginals.update(kept)

    def _draw(self, column: str, cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Inverse-CDF draws (eq. 17) from CDFs on the column's grid; on a thinned grid,
        from their monotone (PCHIP) interpolation on the refined grid.  A continuous
        column's draw beyond a bound is reflected back in (docs/method.md, "Draws within
        the bounds"): ``lo + (lo - v)`` below ``lo``, ``hi - (v - hi)`` above ``hi``, the
        boundary reflection of kernel smoothing, so the smoothed mass beyond a bound
        stays near it instead of piling on it; what a reflection would carry past the
        other bound (a range narrower than the smoothing) is clipped to it."""
        v = inverse_cdf(*self._drawn_cdf(column, cdf), u)
        spec = self.encoders[column].spec
        if spec.is_discrete or spec.lower is None or spec.upper is None:
            return v
        return reflected(v, float(spec.lower), float(spec.upper))

    def _drawn_cdf(self, column: str, cdf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The CDFs draws invert, and their grid: on a thinned grid, the monotone
        (PCHIP) interpolation on the refined grid."""
        grid = self.grids[column]
        fine = self.fine_grids.get(column)
        if fine is None:
            return cdf, grid
        smooth = PchipInterpolator(grid, cdf, axis=1)(fine)
        np.clip(smooth, 0.0, 1.0, out=smooth)
        np.maximum.accumulate(smooth, axis=1, out=smooth)  # rounding only: PCHIP is monotone
        return smooth, fine

    def _truncated(self, column: str, cdf: np.ndarray, u: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Draws of a near-linear column's residual R (docs/method.md, "Near-linear
        columns") that keep ``Y = slope x + intercept + R`` within Y's bounds and R
        within its own (the rule's ``lower``, ``upper``: the real residuals' range): R
        is drawn from the row's CDF truncated to the intersection of ``[Y_lower -
        (slope x + intercept), Y_upper - (slope x + intercept)]`` and ``[lower, upper]``
        (:func:`~fits.core.cdf.truncated_inverse_cdf`), x the source's value as
        written (:meth:`_source_written`).  Where the two intervals do not meet (x near
        an end of its range, where the line leaves Y's range), Y's bounds win: R is the
        point of Y's interval nearest R's bounds.  A row whose CDF has no mass in the
        interval is drawn from R's marginal CDF truncated alike; where that has none
        either, uniformly on the interval.  Such rows are counted in
        :attr:`truncation_fallbacks` (per column: marginal, uniform).  A pair of
        datetime columns with a ``step`` (every real duration a whole number of days,
        say) then has its duration, intercept + R, rounded to the nearest whole
        multiple of the step within the interval (:func:`_durations_on_step`); its R
        is drawn within half a step beyond the rule's bounds, so that the shortest
        and longest durations take the whole of their step's mass, as the others do
        (truncated to the bounds themselves, they would take half)."""
        assert self.schema is not None
        rule = self.schema.near_linear[column]
        y_lo, y_hi = self.user_schema[column].bounds
        x = self._source_written(rule, x)
        slope, intercept = float(rule.slope or 0.0), float(rule.intercept or 0.0)
        lo_y = residuals(np.full(x.shape, y_lo), x, slope, intercept)
        hi_y = residuals(np.full(x.shape, y_hi), x, slope, intercept)
        r_lo, r_hi = float(rule.lower or 0.0), float(rule.upper or 0.0)
        if rule.step is not None:  # each duration k step takes [k - 1/2, k + 1/2) steps
            r_lo, r_hi = r_lo - 0.5 * float(rule.step), r_hi + 0.5 * float(rule.step)
        if self.schema[column].point_mass is not None:  # an order rule's D: its rows at
            # D = 0 are its indicator's; the others take at least half of Y's unit, so
            # that Y's rounding does not write them at D = 0 too
            r_lo = max(r_lo, 0.5 * _unit(self.user_schema[column], rule.step))
        lo, hi = np.maximum(lo_y, r_lo), np.minimum(hi_y, r_hi)
        apart = lo > hi  # Y's interval wholly below or above R's bounds: its nearest end
        nearest = np.where(hi_y < r_lo, hi_y, lo_y)
        lo, hi = np.where(apart, nearest, lo), np.where(apart, nearest, hi)
        r, empty = truncated_inverse_cdf(*self._drawn_cdf(column, cdf), u, lo, hi)
        if empty.any():
            marginal = self.marginal_cdf(column).reshape(1, -1)
            rows = int(empty.sum())
            f, g = self._drawn_cdf(column, np.broadcast_to(marginal, (rows, marginal.shape[1])))
            lo_e, hi_e = lo[empty], hi[empty]
            r_e, none = truncated_inverse_cdf(f, g, u[empty], lo_e, hi_e)
            r[empty] = np.where(none, lo_e + u[empty] * (hi_e - lo_e), r_e)
            counts = self.truncation_fallbacks.setdefault(column, [0, 0])
            counts[0] += rows - int(none.sum())
            counts[1] += int(none.sum())
        if rule.step is not None:  # two datetimes whose real durations share a unit
            r = _durations_on_step(r, intercept, float(rule.step), lo, hi)
        return r

    def _line_plus(self, column: str, x: np.ndarray, r: np.ndarray) -> np.ndarray:
        """A near-linear column's chain value from its drawn residual ``r``: the line
        at the source's value as written (:meth:`_source_written`), plus ``r`` -- the
        column's output value before its own rounding (:meth:`FITSSynthesizer._decode
        <fits.synthesizer.FITSSynthesizer>` clips it to its bounds, which
        :meth:`_truncated` keeps it in), and what every later column's query holds."""
        assert self.schema is not None
        rule = self.schema.near_linear[column]
        x = self._source_written(rule, x)
        return float(rule.slope or 0.0) * x + float(rule.intercept or 0.0) + r

    def _source_written(self, rule: Rule, x: np.ndarray) -> np.ndarray:
        """A near-linear or interval rule's source X at its chain values ``x`` as the
        output writes it (clipped to its bounds, rounded to its decimals, whole numbers
        or datetime unit: :meth:`Encoder.written
        <fits.core.continualization.Encoder.written>`), so that the written pair's
        residual is the drawn R up to Y's own rounding: with X taken unrounded, X's
        rounding would move the written residual by up to slope times half X's step
        beyond the real residuals' range (a whole day for two date columns); and an
        interval rule's value is that of the written X's cell (a chain value 64.6 of a
        whole-number age is written 65)."""
        return Encoder(self.user_schema[rule.of[0]]).written(x)

    def _declare(self, rows: int) -> None:
        """(Re)send the configure messages with ``rows`` declared; keep the sites' replies."""
        messages = [
            Message(m.type, m.arrays, {**m.config, "rows": int(rows)})
            for m in self._configure_messages
        ]
        replies = self.transport.exchange(messages)
        self.declared_rows = int(rows)
        #: What each site applies under its policy (bandwidths, M, query budget, changes).
        self.site_policies = [
            json.loads(str(r.config["policy"])) if "policy" in r.config else {} for r in replies
        ]
        self._pooled_k = self._pooled_floor(self.site_policies)
        self._check_secure_sites()
        self._check_present()
        self._check_boosting_trees()
        self._check_held_out()

    def _usable_rows(self, column: str) -> list[int]:
        """Per site, at most how many of its rows a continuous ``column``'s requests rest
        on: those holding a value, less those at the column's point mass where the site
        reported that value as its most frequent one (setup's counts; no new ones)."""
        assert self.schema is not None
        spec = self.schema[column]
        out = []
        for info, n in zip(getattr(self, "_site_columns", []), self.n_rows, strict=True):
            d = info.get(column, {})
            held = n - int(d.get("n_missing", 0))
            top = d.get("top_value")
            mass = spec.point_mass if column not in self.schema.near_linear else None
            if mass is not None and top is not None and top == mass:  # (an order
                # rule's difference at 0: not the column's own top value)
                held -= int(d.get("top_count", 0))
            out.append(max(held, 0))
        return out

    def _check_present(self) -> None:
        """Refuse, at configure, a continuous chain column that no site holds enough
        values of to answer for under its policy's floor k (``min_effective_rows``): a
        site with fewer than k rows holding a value abstains from every request on it
        (marginal, CDF, tuning), so the first draw of it would fail, deep in sampling.
        Judged from what the sites already sent: their rows and missing counts per column
        at setup, their k at configure (under a pooled floor, against the sum)."""
        assert self.schema is not None
        if len(getattr(self, "_site_columns", [])) != len(self.n_rows):
            return  # no setup descriptions (a coordinator set up by hand)
        names = self.transport.client_names
        floors = [float(p.get("min_effective_rows", 0) or 0) for p in self.site_policies]
        fix = (
            "let the sites lower min_effective_rows (a --policy file of fits synthesize and "
            "fits federate site, e.g. '{\"min_effective_rows\": 2}'; Python: "
            "site_policy=SitePolicy(min_effective_rows=2))"
        )
        pooled_k = self._pooled_k
        site_floor = (
            "its policy's floor (min_effective_rows "
            + ", ".join(f"{n}: {k:g}" for n, k in zip(names, floors, strict=True))
            + ")"
        )

        def short(held: Sequence[int], what: str, none: str) -> str:
            """Why no answer can be given: under a pooled floor the sites together hold
            too few (:func:`~fits.federation.policy.pooled_floor_shortfall`), under the
            sites' own floors none holds as many as its k."""
            if pooled_k is not None:
                return pooled_floor_shortfall(sum(held), pooled_k, what)
            return f"{none} holds as many as {site_floor}"

        if pooled_k is not None:
            small = self.n_total < pooled_k
        else:
            small = all(n < k for n, k in zip(self.n_rows, floors, strict=True))
        if small:  # every column alike: say so once, not of the first continuous column
            rows = ", ".join(f"{n}: {m}" for n, m in zip(names, self.n_rows, strict=True))
            raise SchemaError(
                f"the sites hold {rows} rows, and {short(self.n_rows, 'rows', 'none')}, so "
                f"every site would abstain from every request and nothing can be drawn; "
                f"add rows, or {fix}"
            )
        few = [
            f"{n!r} ({m} rows; k = {k:g})"
            for n, m, k in zip(names, self.n_rows, floors, strict=True)
            if m < k
        ]
        if few and pooled_k is None and not getattr(self, "_told_few", False):
            self._told_few = True  # once per fit, not at every configure round
            warnings.warn(
                f"site(s) {', '.join(few)} hold fewer rows than their policy's floor "
                "(min_effective_rows), so they abstain from every answer: their rows take "
                "no part in the estimates the synthetic rows are drawn from. Merge such a "
                "site's table with another's, "
                f"or {fix}",
                DataNote,
                stacklevel=4,
            )
        for column in self.schema.order:
            spec = self.schema[column]
            if spec.kind != "continuous":  # a discrete column's missing rows are a level
                continue
            held = self._usable_rows(column)
            if pooled_k is not None:
                if sum(held) >= pooled_k:
                    continue
            elif any(h > 0 and h >= k for h, k in zip(held, floors, strict=True)):
                continue
            counts = ", ".join(f"{n}: {h}" for n, h in zip(names, held, strict=True))
            quoted = shlex.quote(column)
            raise SparseColumnError(
                f"column {column!r} holds too few values to be drawn: the sites hold "
                f"{counts} rows with a value of it"
                + (" (not counting its point mass)" if spec.point_mass is not None else "")
                + f", and {short(held, 'rows with a value of it', 'no site')}, so every site "
                "would abstain from every request on it. Drop the column (fits synthesize and fits "
                f"federate: --drop {quoted}; Python: drop it from the tables), {fix}, or "
                "add rows that hold it",
                column,
                dict(zip(names, held, strict=True)),
                dict(zip(names, floors, strict=True)),
            )

    def _check_secure_sites(self) -> None:
        """Refuse, at configure, secure aggregation that would hide nothing: fewer than
        two sites can contribute to the masked sums at all.  Under the sites' own floors
        a site with fewer rows than its k (``min_effective_rows``) abstains from every
        answer (it sends zeros), so with one site left every sum the coordinator unmasks
        is that site's own upload, as with one site (which :class:`Coordinator` refuses
        at once).  Under a pooled floor every site with rows takes part in every masked
        sum (its part widened by the common factor), so only sites of no rows are out.
        Judged from the setup round's row counts and the floors of the configure
        replies, before any statistic is asked; none able to answer is
        :meth:`_check_present`'s error (every site would abstain).  Sites that answer
        some queries and abstain from others (sparse regions, ``below_floor="abstain"``,
        a column few of a site's rows hold) are not judged here (docs/privacy.md)."""
        if not self.secure:
            return
        floors = [float(p.get("min_effective_rows", 0) or 0) for p in self.site_policies]
        error = secure_sites_error(
            self.transport.client_names, self.n_rows, floors, self._pooled_k is not None
        )
        if error is not None:
            raise error

    def _check_held_out(self) -> None:
        """Refuse, before any boost round, early stopping that no site could score: each
        would hold out fewer rows than its policy's floor k (``min_effective_rows``,
        reported at configure).  Judged from the sites' row counts; a continuous
        column's rows holding a value can be fewer, which the fit then reports."""
        floors = [float(p.get("min_effective_rows", 0) or 0) for p in self.site_policies]
        for column in (c for c, m in self._column_model.items() if m == "boosting"):
            fraction = self.boosting_params(column).validation_fraction
            if fraction <= 0:
                continue
            held = [held_out_count(n, fraction) for n in self.n_rows]
            if any(h > 0 and h >= k for h, k in zip(held, floors, strict=True)):
                continue
            raise ValueError(
                f"boosting: column {column!r}: early stopping (validation_fraction="
                f"{fraction:g}) would hold out {held} rows at the sites, and none holds out "
                f"as many as its policy's floor (min_effective_rows "
                f"{', '.join(f'{k:g}' for k in sorted(set(floors)))}), "
                "so no site could score the trees; raise validation_fraction (at most "
                f"{MAX_VALIDATION_FRACTION:g}), or set it to 0 for this column "
                f"(--boosting {column}:validation_fraction=0)"
            )

    def _check_boosting_trees(self) -> None:
        """Refuse, before any boost round, a boosted column with more trees than a site's
        policy allows (``boosting_trees``, which the sites report at configure)."""
        limits = {
            name: int(p["boosting_trees"])
            for name, p in zip(self.transport.client_names, self.site_policies, strict=True)
            if p.get("boosting_trees") is not None
        }
        if not limits:  # sites that do not say: they refuse the tree over their limit
            return
        allowed = min(limits.values())
        for column in (c for c, m in self._column_model.items() if m == "boosting"):
            n_trees = self.boosting_params(column).n_trees
            if n_trees > allowed:
                strict = sorted(n for n, t in limits.items() if t < n_trees)
                if allowed == 0:
                    raise ValueError(
                        f"boosting: column {column!r} is boosted, but site(s) "
                        f"{strict} refuse every boost request (their policy's "
                        "boosting_trees is 0); keep the kernel for it (column_models)"
                    )
                raise ValueError(
                    f"boosting: column {column!r} asks for {n_trees} trees, but the policy "
                    f"of site(s) {strict} allows at most {allowed} per column "
                    f"(boosting_trees); lower n_trees to {allowed} (--boosting "
                    f"n_trees={allowed}), or have those sites raise boosting_trees in "
                    "their policy (SitePolicy, the --policy file)"
                )

    def _pooled_floor(self, policies: list[dict]) -> float | None:
        """The k of the sites' pooled effective-rows floor, or None if they pool none.

        Raises ValueError if some sites pool their floor and others do not (the pooled
        n_eff needs every site's weights), or if they pool it without secure aggregation
        (they would refuse every request).
        """
        names = self.transport.client_names
        pooled = [
            p.get("floor_scope") == "pooled" and float(p.get("min_effective_rows") or 0) > 0
            for p in policies
        ]
        if not any(pooled):
            return None
        if not all(pooled):
            mine = [n for n, p in zip(names, pooled, strict=True) if p]
            theirs = [n for n, p in zip(names, pooled, strict=True) if not p]
            raise ValueError(
                f"sites {mine} pool their effective-rows floor over the sites "
                f"(floor_scope='pooled') but {theirs} do not: the pooled n_eff needs every "
                "site's weights; give every site the same floor_scope"
            )
        if not self.secure:
            raise ValueError(
                f"sites {names} pool their effective-rows floor (floor_scope='pooled'), "
                "which they answer only under secure aggregation: run with "
                "secure_aggregation=True (--secure-aggregation), or give the sites "
                "floor_scope='site'"
            )
        return max(float(p["min_effective_rows"]) for p in policies)

    def declare_rows(self, rows: int) -> None:
        """Declare to the sites, ahead, that ``rows`` more synthetic rows will be drawn.

        One configure round (none if enough rows are declared already), so that drawing
        them in chunks (:meth:`sample` per chunk) needs no round per chunk.
        """
        need = max(self._asked.values(), default=0) + int(rows)
        if need > self.declared_rows:
            self._declare(need)

    def _ask(self, columns: Sequence[str], n: int) -> None:
        """Count n query points for each column; declare more rows first if needed.

        A site's budget covers every fallback round of an honest run (see
        :class:`~fits.federation.policy.SitePolicy`), so the rows asked per column are
        what is declared.
        """
        need = {c: self._asked.get(c, 0) + int(n) for c in columns}
        if need and max(need.values()) > self.declared_rows:
            self._declare(max(need.values()))
        self._asked.update(need)

    def _count_abstentions(self, replies: list[Message]) -> None:
        self.abstained += sum(int(r.config.get("abstained", 0)) for r in replies)
        self.widened += sum(int(r.config.get("widened", 0)) for r in replies)

    # ---------------------------------------------------------------- smoothing
    def tune(
        self,
        seed: int | np.random.SeedSequence | None = None,
        *,
        candidates: Sequence[Smoothing] = DEFAULT_CANDIDATES,
        columns: Sequence[str] | None = None,
        folds: int = DEFAULT_FOLDS,
        rows: int = DEFAULT_TUNING_ROWS,
    ) -> dict[str, Smoothing]:
        """Choose each chain column's smoothing by a federated held-out score.

        One ``tune`` round (:mod:`fits.core.tuning`): every site scores every candidate
        on up to its share of ``rows`` held-out rows per column (K-fold, its own split
        from its child of ``seed``) and uploads only the per-candidate sums; the
        coordinator takes, per column, the candidate with the smallest sum over the
        sites (ties: the earlier candidate) and uses it for every later request of that
        column (:attr:`smoothing`).  Columns generated entirely by a sum or an
        interval rule (:func:`~fits.core.rules.sets_every_row`) and the first chain
        column (a marginal) are not tuned.

        Parameters
        ----------
        seed : int or SeedSequence, optional
            Root of the sites' fold splits.
        candidates : sequence of Smoothing
            The candidate smoothings (default :data:`~fits.core.tuning.DEFAULT_CANDIDATES`;
            put the default smoothing first, so that it wins ties).
        columns : sequence of str, optional
            The columns to tune (default: every chain column after the first).
        folds : int
            K of the held-out split (default 5).
        rows : int
            Held-out rows scored per column over the federation (default 4000).

        Returns
        -------
        dict
            Column -> the chosen :class:`~fits.core.tuning.Smoothing` (also merged into
            :attr:`smoothing`; the scores are in :attr:`tuning`).
        """
        if self.schema is None or not self._configured:
            raise RuntimeError("run setup() and configure() before tune()")
        cands = [Smoothing.from_value(c) for c in candidates]
        if not cands:
            raise ValueError("tune() needs at least one candidate smoothing")
        if folds < 2:
            raise ValueError(f"folds must be at least 2, got {folds!r}")
        if rows < 1:
            raise ValueError(f"rows must be at least 1, got {rows!r}")
        order = self.schema.order
        # columns their rule sets in every row (a sum's, an interval rule's of a source
        # with no missing values): no kernel
        summed = {r.column for r in self.schema.rules or [] if sets_every_row(self.schema, r)}
        if columns is None:
            columns = [c for c in order[1:] if c not in summed]
        else:
            columns = [str(c) for c in columns]
            bad = [c for c in columns if c not in order[1:]]
            if bad:
                raise ValueError(f"cannot tune {bad}: not chain columns after the first")
        if not columns:
            return {}
        seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        self._phase(
            f"smoothing: one tune round ({len(columns)} column(s), {len(cands)} candidates)"
        )
        names = [score_for(self.encoders[c].spec.kind, self._by_mass(c)) for c in columns]
        config: dict[str, ConfigValue] = {
            "column": "*",
            "request": f"t{next(self._requests)}",  # masks are never reused (secure)
            "columns": json.dumps(list(columns)),
            "scores": json.dumps(names),
            "candidates": json.dumps(
                [
                    [c.sharpness, c.reach, dict(c.relevance)]
                    if c.relevance
                    else [c.sharpness, c.reach]
                    for c in cands
                ]
            ),
            "folds": int(folds),
            "rows": int(rows),
            "mass_offset": float(self.mass_offset),
            "ridge": float(self.ridge),
            "collinearity": float(self.collinearity),
            **self._secure_flag(),
        }
        designs = [self.design_covariates(c) for c in columns]
        if any(d.size != order.index(c) for d, c in zip(designs, columns, strict=True)):
            config["designs"] = json.dumps([[int(j) for j in d] for d in designs])
        schemes = [self.scheme(c) for c in columns]
        if any(v != "own" for v in schemes):  # a missingness indicator's: "knn"
            config["schemes"] = json.dumps(schemes)
        messages = [
            Message("tune", config={**config, "seed": int(child.generate_state(1)[0])})
            for child in seq.spawn(self.transport.n_clients)
        ]
        replies = self.transport.exchange(messages)
        self.abstained += sum(int(r.config.get("abstained", 0)) for r in replies)
        scores = self._total(replies, "scores")
        counted = self._total(replies, "rows")
        chosen = {}
        for k, column in enumerate(columns):
            best = int(np.argmin(scores[k])) if counted[k] > 0 else 0
            chosen[column] = cands[best]
            self.tuning[column] = {
                "candidates": [c.to_dict() for c in cands],
                "scores": [float(v) for v in scores[k]],
                "rows": int(round(counted[k])),
                "chosen": best,
                "score": names[k],
            }
        self.smoothing.update(chosen)
        return chosen

    def relevance_covariates(self, column: str) -> list[str]:
        """The covariates whose relevance weights :meth:`tune_relevance` learns for
        ``column``: the columns before it in the chain, each indicator counted as the
        column it stands for (its weight follows that column's), except ``column``'s
        own indicators (constant on the rows its conditional is fitted on)."""
        if self.schema is None:
            raise RuntimeError("run setup() before relevance_covariates()")
        order = self.schema.order
        out: list[str] = []
        for name in order[: order.index(column)]:
            spec = self.encoders[name].spec if name in self.encoders else self.schema[name]
            base = spec.indicates or name
            if base != column and base not in out:
                out.append(base)
        return out

    def tune_relevance(
        self,
        columns: Sequence[str],
        seed: int | None = None,
        *,
        budget: int | None = None,
        folds: int = DEFAULT_FOLDS,
        rows: int = DEFAULT_TUNING_ROWS,
    ) -> dict[str, Smoothing]:
        """Learn relevance weights per covariate for each of ``columns`` from the sites'
        held-out scores (``tune`` rounds; not in the paper).

        The kernel of a column's conditional CDF weighs every covariate alike after
        standardization (eqs. 11-13, 26); a relevance weight a_i multiplies covariate
        i's standardized coordinate and its penalty rate
        (:attr:`fits.core.kernels.Kernel.relevance`).  This search chooses the weights
        as :meth:`tune` chooses a smoothing: every candidate is scored by every site on
        its own held-out rows (:func:`fits.core.tuning.heldout_scores`), and only the
        per-candidate sums leave a site.  Each column is searched in passes of two
        ``tune`` rounds, all on the same held-out rows (the same ``seed``), starting
        from the column's current smoothing (:attr:`smoothing`; sharpness and reach
        are kept):

        1. probes (:func:`~fits.core.tuning.relevance_probes`): the start, and the
           start with one covariate's weight doubled, per covariate (d + 1
           candidates for d covariates; where the budget cannot hold d + 2, the
           covariates in budget - 4 contiguous groups, each group's weights doubled
           and moved together, :func:`~fits.core.tuning.relevance_groups`);
        2. steps (:func:`~fits.core.tuning.relevance_steps`): weights moved along the
           probes' paired differences of the summed score (their signed square
           roots, normalized), so the most telling covariate moves by 2, 4 and 16
           times and the others less (up to three candidates, as many as the budget
           leaves).

        A further pass starts from the best candidate so far while the budget holds
        another one.  The column takes the candidate with the smallest summed score
        over everything scored (ties: the earlier, so the start wins a tie).  These
        choices (a forward difference of one log2 unit; a normalized step in log
        weights; three step lengths) are fits' own.

        Parameters
        ----------
        columns : sequence of str
            Chain columns after the first, drawn by the kernels (not boosted, not set
            by a sum rule).
        seed : int, optional
            The sites' fold splits (one for every round of the search).
        budget : int, optional
            Candidates scored per column over the whole search (at least 5, or
            d + 2 for d < 3 covariates).  The sites' policy must allow it
            (``SitePolicy.tuning_candidates``, 16 by default, shared with
            :meth:`tune`).  Default None: the default policy's cap less the
            candidates :meth:`tune` already scored for the column (16, or 10 after
            ``smoothing="auto"``'s six).
        folds, rows : int
            As :meth:`tune`.

        Returns
        -------
        dict
            Column -> the chosen :class:`~fits.core.tuning.Smoothing` (also in
            :attr:`smoothing`; the candidates and their scores in :attr:`tuning`).
        """
        if self.schema is None or not self._configured:
            raise RuntimeError("run setup() and configure() before tune_relevance()")
        order = self.schema.order
        # columns their rule sets in every row (a sum's, an interval rule's of a source
        # with no missing values): no kernel
        summed = {r.column for r in self.schema.rules or [] if sets_every_row(self.schema, r)}
        base_seed = int(np.random.SeedSequence(seed).generate_state(1)[0])
        chosen: dict[str, Smoothing] = {}
        for k, column in enumerate(columns):
            if column not in order[1:] or column in summed or self._boosted(column):
                raise ValueError(
                    f"cannot learn relevance weights for {column!r}: it is not a chain "
                    "column after the first that the kernels draw"
                )
            covariates = self.relevance_covariates(column)
            # the candidates the sites scored for this column before the search (those of
            # smoothing="auto"): they count against the same tuning_candidates
            before = len(self.tuning.get(column, {}).get("candidates", ()))
            allowed = SitePolicy().tuning_candidates - before if budget is None else budget
            try:
                groups = relevance_groups(covariates, int(allowed))
            except ValueError as exc:
                raise ValueError(
                    f"learning relevance weights for {column!r}: {exc}; raise the budget "
                    "(and the sites' tuning_candidates), or set the weights by hand"
                ) from None
            self._phase(
                f"relevance weights: {column!r} ({k + 1} of {len(columns)}; "
                f"{len(covariates)} covariate{'s' if len(covariates) != 1 else ''}, up to "
                f"{int(allowed)} candidates)"
            )
            start = self.smoothing.get(column, Smoothing())
            spend = (int(allowed), before)
            scored: list[Smoothing] = []
            scores: list[float] = []
            counted = 0
            best = start
            left = int(allowed)
            while left >= len(groups) + 2:
                probes = relevance_probes(best, groups)
                if scored and best in scored:  # the start of this pass is scored already
                    probes = probes[1:]
                found = self._relevance_round(column, probes, base_seed, folds, rows, spend)
                if found is None:
                    break  # no site scored a row: keep the start
                scored += probes
                scores += list(found[0])
                counted = found[1]
                left -= len(probes)
                base_score = scores[scored.index(best)]
                probe_scores = [scores[scored.index(p)] for p in probes[-len(groups) :]]
                steps = relevance_steps(
                    best, groups, base_score, probe_scores, RELEVANCE_STEPS[:left]
                )
                steps = [c for c in steps if c not in scored]
                if steps:
                    found = self._relevance_round(column, steps, base_seed, folds, rows, spend)
                    if found is None:
                        break
                    scored += steps
                    scores += list(found[0])
                    left -= len(steps)
                winner = scored[int(np.argmin(scores))]
                if winner == best:
                    break  # no candidate of this pass beat its start
                best = winner
            if not scored:
                continue
            index = int(np.argmin(scores))
            chosen[column] = scored[index]
            self.tuning[column] = {
                "candidates": [c.to_dict() for c in scored],
                "scores": [float(v) for v in scores],
                "rows": int(counted),
                "chosen": index,
                "score": score_for(self.encoders[column].spec.kind, self._by_mass(column)),
                "search": "relevance",
            }
        self.smoothing.update(chosen)
        return chosen

    def _relevance_round(
        self,
        column: str,
        candidates: list[Smoothing],
        seed: int,
        folds: int,
        rows: int,
        spend: tuple[int, int] = (0, 0),
    ) -> tuple[np.ndarray, int] | None:
        """One ``tune`` round of :meth:`tune_relevance`: the summed scores of
        ``candidates`` for ``column`` and the rows scored (None if no site scored any).
        ``spend``: the search's budget and the candidates scored before it, for the
        message of a site that refuses by its ``tuning_candidates``."""
        kept = dict(self.smoothing)
        record = self.tuning.get(column)
        phase, self.on_phase = self.on_phase, None  # the search said its column's phase
        try:
            self.tune(seed, candidates=candidates, columns=[column], folds=folds, rows=rows)
            result = self.tuning[column]
        except (PolicyError, ClientError) as exc:
            if "tuning_candidates" not in str(exc):
                raise
            budget, before = spend
            after = f", after the {before} of smoothing='auto'," if before else ""
            room = SitePolicy().tuning_candidates - before
            lower = (
                f"lower relevance_budget (--relevance-budget; at least 5, at most {room} "
                "with the default policy), "
                if room >= 5
                else ""
            )
            raise type(exc)(
                f"{exc}. The relevance search of {column!r} asks each site for up to "
                f"{budget} candidates{after} counted against the sites' tuning_candidates: "
                f"{lower}have the sites raise tuning_candidates (SitePolicy("
                'tuning_candidates=...), a policy file\'s "tuning_candidates") or leave '
                f"{column!r} out of tune_relevance"
            ) from None
        finally:
            self.on_phase = phase
            self.smoothing = kept  # tune() sets the column's choice: undone here
            if record is None:
                self.tuning.pop(column, None)
            else:
                self.tuning[column] = record
        if not result["rows"]:
            return None
        return np.asarray(result["scores"], dtype=float), int(result["rows"])

    def _smoothing_config(self, column: str) -> dict[str, ConfigValue]:
        """The request config that carries a column's smoothing (empty for the default)."""
        chosen = self.smoothing.get(column)
        if chosen is None or chosen.is_default:
            return {}
        config: dict[str, ConfigValue] = {
            "sharpness": float(chosen.sharpness),
            "reach": float(chosen.reach),
        }
        if chosen.relevance:
            config["relevance"] = json.dumps(dict(chosen.relevance))
        return config

    # ---------------------------------------------------------------- estimation
    def _batch(self) -> int:
        if self.batch_size:
            return int(self.batch_size)
        return int(np.clip(self.memory_budget // max(self.n_total, 1), 64, MAX_BATCH))

    def _secure_flag(self) -> dict[str, bool]:
        """The request config that asks for masked uploads (empty without)."""
        return {"secure": True} if self.secure else {}

    def _total(self, replies: list[Message], name: str) -> np.ndarray:
        """Sum of the clients' ``name`` arrays: plain, or unmasked (secure aggregation)."""
        if self.secure:
            return unmask_sum([r.arrays[name] for r in replies])
        total = np.zeros(replies[0].arrays[name].shape)
        for r in replies:  # in client order
            total += r.arrays[name]
        return total

    def _wire_precision(self) -> str:
        """The precision the sites are asked for (secure aggregation: always exact)."""
        return "float64" if self.secure else self.precision

    def _summed(self, replies: list[Message], kind: str, p: int) -> tuple[np.ndarray, ...]:
        """Sums over the sites of a hessian (S), cdf (F) or block (S, T) reply's values,
        each site's reply decoded first (:mod:`fits.federation.codec`)."""
        names = {"hessian": ("S",), "cdf": ("F",), "block": ("S", "T")}[kind]
        if self.secure:
            return tuple(unmask_sum([r.arrays[n] for r in replies]) for n in names)
        precision = self.precision
        total: list[np.ndarray] = []
        for r in replies:  # in client order
            if kind == "hessian":
                parts: tuple[np.ndarray, ...] = (decode_hessian(r.arrays, p, precision),)
            elif kind == "cdf":
                parts = (decode_cdf(r.arrays, precision),)
            else:
                parts = decode_block(r.arrays, p, precision)
            total = list(parts) if not total else [t + x for t, x in zip(total, parts, strict=True)]
        return tuple(total)

    def one_round(self, column: str, queries: int = 1) -> bool:
        """Whether a batch of ``queries`` points of ``column`` takes one message round.

        With ``rounds="auto"``: when the bytes the one round adds over the two, the
        response block's d extra rows for every site (``queries * K * d * L`` values at
        the wire precision), are at most ``round_cost_bytes`` (default 0: two rounds,
        which always upload less).
        """
        if self.rounds != "auto":
            return self.rounds == 1
        if self.schema is None:
            raise RuntimeError("run setup() first")
        d = self.design_size(column) - 1
        value = 32 if self.secure else _VALUE_BYTES[self.precision]  # secure: 4 limbs
        extra = queries * self.transport.n_clients * d * self.grids[column].size * value
        return extra <= self.round_cost_bytes

    def design_covariates(self, column: str) -> np.ndarray:
        """Positions of the covariates in ``column``'s local-linear design (see
        ``design`` and ``column_designs``): all the columns before it, the ordered ones
        (continuous and ordinal), the continuous ones among them, or none."""
        if self.schema is None:
            raise RuntimeError("run setup() first")
        before = self.schema.order[: self.schema.order.index(column)]
        design = self.column_designs.get(column, self.design)
        if design == "all":
            return np.arange(len(before))
        if design == "constant":
            return np.zeros(0, dtype=np.int64)
        dropped = ("nominal",) if design == "ordered" else ("nominal", "ordinal")
        kept = [k for k, name in enumerate(before) if self.schema[name].kind not in dropped]
        return np.array(kept, dtype=np.int64)

    def design_size(self, column: str) -> int:
        """p, the size of ``column``'s local-linear design: 1 + its covariates."""
        return 1 + int(self.design_covariates(column).size)

    def _design_config(self, column: str, d: int) -> dict[str, ConfigValue]:
        """The request config that names the design; empty when it is every covariate
        (the paper's design, so its messages are those of the paper)."""
        cols = self.design_covariates(column)
        if cols.size == d:
            return {}
        return {"design": ",".join(str(int(j)) for j in cols)}

    @staticmethod
    def _rescale(s00: np.ndarray, exponent: np.ndarray) -> np.ndarray | None:
        """Secure aggregation: new weight exponents for queries with too little weight.

        The fixed-point sums resolve 2^-96 absolutely, while the local-linear fit only
        needs S up to a common factor per query.  A query whose summed weight S_00 is
        below 2^-40 is asked again with every client's weights times 2^exponent (exact,
        a power of two, and cancelling in q'U), chosen to bring S_00 to [1, 2); a sum
        that rounded to 0 is raised by 2^90 per try.  None when no query needs it.
        """
        small = (s00 < _SECURE_MIN_WEIGHT) & (exponent < _SECURE_MAX_EXPONENT)
        if not small.any():
            return None
        exponent = exponent.copy()
        tiny = s00[small]
        step = np.where(tiny > 0, -np.floor(np.log2(np.maximum(tiny, 1e-300))), 90)
        exponent[small] += step.astype(np.int64)
        return exponent

    def _marginal_request(self, column: str) -> Message:
        """A marginal request; under a pooled floor it says how many of the federation's
        rows hold the column (from the setup round), which the sites' floor counts."""
        grid = self.grids[column]
        config: dict[str, ConfigValue] = {
            "column": column,
            "grid_size": grid.size,
            **self._secure_flag(),
        }
        if self._pooled_k:  # a continuous column with missing values: its rows only
            spec = self.schema[column] if self.schema is not None else None
            held = spec is not None and spec.kind == "continuous" and spec.missing
            config["present"] = int(self._present[column]) if held else self.n_total
        return Message("marginal", config=config)

    def _prefetch_marginals(self, columns: Sequence[str]) -> None:
        """The marginal CDFs (eq. 16) of several columns with one
        :meth:`~fits.federation.transport.Transport.broadcast_many`: the same requests
        and values as :meth:`marginal_cdf` (:meth:`marginal_masses` for a discrete column
        sampled by mass) for each in turn."""

        def key(column: str) -> str:
            return f"masses:{column}" if self._by_mass(column) else column

        columns = [c for c in dict.fromkeys(columns) if key(c) not in self._marginals]
        answers = self.transport.broadcast_many([self._marginal_request(c) for c in columns])
        for column, replies in zip(columns, answers, strict=True):
            total = self._marginal_total(column, replies)
            if self._by_mass(column):
                self._marginal_masses_from(column, total)
            else:
                self._marginal_cdf_from(column, total)

    def _marginal_sum(self, column: str) -> np.ndarray:
        """Eq. 16: the clients' sums of smoothed indicators on the grid, over M."""
        return self._marginal_total(
            column, self.transport.broadcast(self._marginal_request(column))
        )

    def _marginal_total(self, column: str, replies: list[Message]) -> np.ndarray:
        self._count_abstentions(replies)
        if all(int(r.config.get("abstained", 0)) for r in replies):
            raise ProtocolError(
                f"column {column!r}: every site abstained from its marginal under its "
                "policy (each holds fewer rows of it than its min_effective_rows, default "
                f"{DEFAULT_MIN_EFFECTIVE_ROWS:g}), so nothing can be drawn; add rows, or let "
                "the sites lower "
                "min_effective_rows (SitePolicy; fits federate site --policy)"
            )
        return self._total(replies, "F")[None, :] / self.n_total

    def marginal_cdf(self, column: str) -> np.ndarray:
        """The smoothed marginal CDF of a column on its grid (eq. 16), post-processed."""
        if column not in self._marginals:
            self._marginal_cdf_from(column, self._marginal_sum(column))
        return self._marginals[column]

    def _marginal_cdf_from(self, column: str, total: np.ndarray) -> None:
        cdf, bad = postprocess_cdf(total, self.monotone)
        if bad[0]:
            raise RuntimeError(f"column {column!r}: the marginal CDF has no mass")
        self._marginals[column] = cdf[0]

    def _two_step(
        self, column: str, x: np.ndarray, scheme: str, *, local_constant: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Algorithm 1 for one batch: raw F and a mask of degenerate queries.

        ``local_constant=True`` broadcasts ``q = e1 / S_00`` instead of eq. 7, so that
        ``alpha_i = w_i / sum(w)``: the local-constant (Nadaraya-Watson) fit with the same
        weights, a conditional fallback that is always a proper CDF.
        """
        b, d = x.shape
        p = self.design_size(column)
        grid = self.grids[column]
        one = self.one_round(column, b)
        precision = self._wire_precision()
        exponent = np.zeros(b, dtype=np.int64)  # weights scaled by 2^exponent (secure)
        base: dict[str, ConfigValue] = {
            "column": column,
            "scheme": scheme,
            **self._design_config(column, d),
            **self._smoothing_config(column),
            **self._secure_flag(),
            **({"precision": precision} if precision != "float64" else {}),
        }
        widen = self._pooled_widening(x, base) if self._pooled_k else None
        while True:
            config: dict[str, ConfigValue] = {**base, "request": f"r{next(self._requests)}"}
            arrays = {"queries": x}
            if widen is not None:
                arrays["widen"] = widen
            if exponent.any():
                arrays["weight_exponent"] = exponent
            if one:
                step1 = Message("block", arrays, {**config, "grid_size": grid.size})
            else:
                step1 = Message("hessian", arrays, config)
            replies = self.transport.broadcast(step1)
            sums = self._summed(replies, step1.type, p)
            packed = sums[0]
            s00 = packed[:, 0] if widen is None else np.where(widen > 0, packed[:, 0], 1.0)
            rescale = self._rescale(s00, exponent) if self.secure else None  # 0: no answer
            if rescale is None:
                self._count_abstentions(replies)
                break
            exponent = rescale
        s = np.empty((b, p, p))
        iu = np.triu_indices(p)
        s[:, iu[0], iu[1]] = packed
        s[:, iu[1], iu[0]] = packed
        if one and not local_constant and not self.secure:
            # kept for the local-constant fallback of some of these queries
            # (_local_constant): the block already holds what that round would return
            self._last_block = (self._block_key(column, scheme), x, s, sums[1])
        if local_constant:
            q = np.zeros((b, p))
            np.divide(1.0, s[:, 0, 0], out=q[:, 0], where=s[:, 0, 0] > 0)
        else:
            with one_blas_thread():  # the sites wait: no other thread computes
                q, rows = solve_guarded(s, self.ridge, self.collinearity)
            self.guarded += len(rows)
        total_weight = np.ldexp(s[:, 0, 0], -exponent)  # S_00 before any scaling
        degenerate = ~(total_weight > DEGENERATE_WEIGHT) | ~np.all(np.isfinite(q), axis=1)
        q[degenerate] = 0.0
        if one:  # F(z_l | x) = q' T_l, the sum over sites taken before the solve
            return np.einsum("bp,bpl->bl", q, sums[1]), degenerate
        step2 = Message("cdf", {**arrays, "q": q}, {**config, "grid_size": grid.size})
        (f,) = self._summed(self.transport.broadcast(step2), "cdf", p)
        return f, degenerate

    def _pooled_widening(self, x: np.ndarray, base: dict[str, ConfigValue]) -> np.ndarray:
        """Each query's common widening factor under the sites' pooled floor.

        ``neff`` rounds ask every site for the sums of its weights and of their squares
        at the factors 1, sqrt(2), 2, ... (:data:`WIDENING_LADDER`: three in the first
        round, the next three in the second, all the rest in the third; each round only
        for the queries still below k); summed over the sites (masked: the coordinator
        sees only the sums), they give the pooled n_eff = (sum w)^2 / sum w^2 at each
        factor.  A query gets the smallest factor with pooled n_eff >= k, or 0 (every
        site contributes zeros) if none reaches k.  Where the sums are tiny they are
        asked again at a common scale 2^exponent per query and factor (n_eff does not
        change with it), as in the hessian round.
        """
        k = float(self._pooled_k or 0.0)
        b = len(x)
        factor = np.zeros(b)
        pending = np.ones(b, dtype=bool)
        for start, steps in _LADDER_STAGES:
            exponent = np.zeros((b, steps), dtype=np.int64)  # one per query and factor
            sums = np.zeros((b, steps, 2))
            ask = pending.copy()  # re-asked: only the queries whose scale changed
            while True:
                arrays = {"queries": x, "pending": ask.astype(np.uint8)}
                if exponent.any():
                    arrays["weight_exponent"] = exponent
                request = {"request": f"n{next(self._requests)}"}
                ladder = {"ladder_start": start, "ladder_steps": steps}
                msg = Message("neff", arrays, {**base, **request, **ladder})
                sums[ask] = self._total(self.transport.broadcast(msg), "N")[ask]
                mass = np.where(ask[:, None], sums[..., 0], 1.0).ravel()
                rescale = self._rescale(mass, exponent.ravel())
                if rescale is None:
                    break
                ask = (rescale.reshape(b, steps) != exponent).any(axis=1)
                exponent = rescale.reshape(b, steps)
            total, squares = sums[..., 0], sums[..., 1]
            neff = np.divide(total * total, squares, out=np.zeros_like(total), where=squares > 0)
            for j in range(steps):
                ok = pending & (neff[:, j] >= k)
                factor[ok] = WIDENING_LADDER[start + j]
                pending &= ~ok
            if not pending.any():
                break
        return factor

    def _by_mass(self, column: str) -> bool:
        return self.discrete_sampling == "mass" and self.encoders[column].spec.is_discrete

    def scheme(self, column: str) -> str:
        """The kernel scheme the sites are asked to weigh their rows with for
        ``column``'s conditional: ``"own"`` (each site's own kernel, sec. 3.2), or, for
        a missingness indicator ``"<column> (missing)"`` (:meth:`Schema.expanded`),
        :data:`MISSING_INDICATOR_SCHEME`: the KNN scheme (eqs. 12-13; a KNN site's own
        kernel, a Gaussian site's KNN kernel with its own penalties and relevance
        weights, as in the degenerate-query fallback).

        fits' choice; the paper drops incomplete rows (sec. 6.3.1) and has no
        indicator.  Why: the indicator is drawn by its category masses (Corollary 5.4),
        ``p_l`` from the local-linear fit, clipped at 0 and normalized
        (:func:`~fits.core.cdf.masses_from_cdf`).  The fit's weights alpha_i (eq. 4)
        can be negative, so ``p_l`` is a nearly unbiased but noisy estimate that falls
        below 0 at some queries, and clipping a noisy estimate of a small share at 0
        raises its mean by about E[max(0, -p_l)].  With the fixed Gaussian bandwidth
        M^(-1/(d+4)) (sec. 6.1.2) the noise grows with the covariates: about 20-50
        effective rows for d + 1 coefficients at d = 8-13 on a few thousand rows, and
        the synthetic missing share drifted from 11.0% to 13.8% (FITS-G, 12
        covariates before the indicator; docs/benchmarks.md, "Missing shares with many
        covariates").  The KNN scheme keeps c_k neighbours per site at any d, and its
        share stayed within sampling noise (11.2%).  The local-linear slopes are kept,
        so missingness that depends on a covariate keeps that dependence (a
        local-constant fit instead flattened it: 29.8% missing in the top third of the
        covariate became 25.5-26.7%).  A federation of KNN sites draws exactly what it
        drew before; a point-mass indicator and every other column keep ``"own"``.
        The tune round (:meth:`tune`) scores each column under its scheme."""
        spec = self.schema[column] if self.schema is not None else None
        if spec is not None and spec.indicates is not None and spec.indicator == "missing":
            return MISSING_INDICATOR_SCHEME
        return "own"

    def _raw_batch(self, column: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw F for a batch, with the KNN fallback for degenerate queries."""
        f, degenerate = self._two_step(column, x, self.scheme(column))
        if np.any(degenerate):
            # far from every row under the clients' own kernels: ask for KNN weights,
            # which always find neighbours (documented fallback)
            self.fallbacks += int(degenerate.sum())
            f_knn, still = self._two_step(column, x[degenerate], "knn")
            f[degenerate] = f_knn
            degenerate[np.flatnonzero(degenerate)[~still]] = False
        return f, degenerate

    def _block_key(self, column: str, scheme: str) -> tuple:
        """What a block round's weights depend on besides its queries."""
        return (column, scheme, tuple(sorted(self._smoothing_config(column).items())))

    def _local_constant(
        self, column: str, x: np.ndarray, scheme: str, rows: np.ndarray | None = None
    ) -> np.ndarray:
        """Raw F of the local-constant fit (see :meth:`_two_step`); 0 rows if none.

        ``x`` holds ``rows`` of the batch last asked in one ``block`` round for this
        column and scheme (one round per column; not with secure aggregation): then no
        round is sent.  The block's sums already hold what the sites would send for these
        queries again -- each query's weights, and its encoding on the wire, depend on
        that query alone -- so F = q'T with q = e1 / S_00 comes from them, the same
        arithmetic as the round's (tested against the round).
        """
        last = getattr(self, "_last_block", None)
        if (
            self.reuse_blocks
            and rows is not None
            and last is not None
            and last[0] == self._block_key(column, scheme)
            and last[1].shape[0] > int(np.max(rows, initial=-1))
            and np.array_equal(last[1][rows], x)
        ):
            s, t = last[2][rows], last[3][rows]
            q = np.zeros((len(rows), s.shape[1]))
            np.divide(1.0, s[:, 0, 0], out=q[:, 0], where=s[:, 0, 0] > 0)
            degenerate = ~(s[:, 0, 0] > DEGENERATE_WEIGHT) | ~np.all(np.isfinite(q), axis=1)
            q[degenerate] = 0.0
            f = np.einsum("bp,bpl->bl", q, t)
        else:
            f, degenerate = self._two_step(column, x, scheme, local_constant=True)
        f[degenerate] = 0.0
        return f

    def _with_fallbacks(
        self,
        column: str,
        x: np.ndarray,
        f: np.ndarray,
        degenerate: np.ndarray,
        convert: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
        marginal: Callable[[str], np.ndarray],
    ) -> np.ndarray:
        """Convert raw F (to CDFs or masses); rows with no usable mass fall back to the
        local-constant fit with the same weights, and then to the marginal."""
        out, bad = convert(f)
        bad |= degenerate
        if np.any(bad):
            self.fallbacks += int(bad.sum())
            scheme = self.scheme(column) if not np.any(degenerate[bad]) else "knn"
            rows = np.flatnonzero(bad)
            out[bad], still = convert(self._local_constant(column, x[bad], scheme, rows))
            if np.any(still):  # nothing local at all: the marginal
                out[np.flatnonzero(bad)[still]] = marginal(column)
        return out

    def _estimate_batch(self, column: str, x: np.ndarray, postprocess: bool) -> np.ndarray:
        f, degenerate = self._raw_batch(column, x)
        if not postprocess:
            return f
        return self._with_fallbacks(
            column,
            x,
            f,
            degenerate,
            lambda g: postprocess_cdf(g, self.monotone),
            self.marginal_cdf,
        )

    def _masses_batch(self, column: str, x: np.ndarray) -> np.ndarray:
        f, degenerate = self._raw_batch(column, x)
        return self._with_fallbacks(
            column,
            x,
            f,
            degenerate,
            lambda g: masses_from_cdf(g, self.mass_offset),
            self.marginal_masses,
        )

    def marginal_masses(self, column: str) -> np.ndarray:
        """Marginal category masses of a discrete column (mass sampling, eq. 16)."""
        key = f"masses:{column}"
        if key not in self._marginals:
            self._marginal_masses_from(column, self._marginal_sum(column))
        return self._marginals[key]

    def _marginal_masses_from(self, column: str, total: np.ndarray) -> None:
        p, bad = masses_from_cdf(total, self.mass_offset)
        if bad[0]:
            raise RuntimeError(f"column {column!r}: the marginal has no mass")
        self._marginals[f"masses:{column}"] = p[0]

    # ---------------------------------------------------------------- boosted columns
    def _boosted(self, column: str) -> bool:
        return self._column_model.get(column) == "boosting"

    def boosting_params(self, column: str) -> BoostingParams:
        """A boosted column's settings: its own (``column_boosting``) or ``boosting``."""
        return self.column_boosting.get(column, self.boosting)

    def boosted_model(self, column: str) -> BoostedModel:
        """The boosted tree model of ``column`` (``column_models``), fitted on first use
        (:meth:`fit_boosted`)."""
        if not self._boosted(column):
            raise ValueError(f"{column!r} is not boosted (column_models)")
        if column not in self.models:
            self.fit_boosted([column])
        return self.models[column]

    def fit_boosted(
        self, columns: Sequence[str] | None = None, *, progress: ProgressCallback | None = None
    ) -> None:
        """Fit the boosted columns' models (default: every boosted column not yet fitted).

        ``1 + n_trees * depth`` ``boost`` rounds (:class:`fits.core.boosting.TreeGrower`):
        one at the zero scores, whose pooled gradient sums give the class counts and so
        the start scores, then one per level of every tree.  The columns' models do not
        depend on each other, so their requests of the same round travel together
        (:meth:`~fits.federation.transport.Transport.broadcast_many`: one round trip
        over a network for all of them); with settings of their own
        (``column_boosting``) a column whose model is complete drops out of the later
        rounds, and the fit takes the most rounds of any column.  Continuous covariates
        are binned at quantiles of their federated marginal CDFs (one marginal round for
        those not yet fetched); discrete ones by category.
        ``progress(BOOSTING_PROGRESS, rounds_done, rounds)`` is called after each round.
        By default a column that a rule of the schema sets is left out:
        :meth:`boosted_model` fits it on first use, should a drawn row hold
        a combination the rule does not cover.
        """
        if self.schema is None or not self._configured:
            raise RuntimeError("run setup() and configure() first")
        order = self.schema.order
        ruled = {r.column for r in self.schema.rules or []}  # drawn by rule: fitted if needed
        wanted = (
            [c for c in order if self._boosted(c) and c not in ruled]
            if columns is None
            else list(columns)
        )
        unboosted = [c for c in wanted if not self._boosted(c)]
        if unboosted:
            raise ValueError(f"{unboosted} are not boosted columns (column_models)")
        pending = [c for c in wanted if c not in self.models]
        if not pending:
            return
        needed = [
            c
            for column in pending
            for c in [*order[: order.index(column)], column]
            if not self.encoders[c].spec.is_discrete
        ]
        self._prefetch_marginals(needed)
        growers = {column: self._grower(column) for column in pending}
        rounds = max(g.rounds for g in growers.values())
        for done in range(1, rounds + 1):
            active = [c for c in pending if not growers[c].done]
            requests = [self._boost_message(c, *growers[c].request()) for c in active]
            answers = self.transport.broadcast_many(requests)
            for column, message, replies in zip(active, requests, answers, strict=True):
                hist = self._boost_total(message, replies)
                held = self._total(replies, "loss") if "loss" in replies[0].arrays else None
                grower = growers[column]
                if not grower.started and hist[0, : grower.n_bins[0], -1].sum() <= 0:
                    raise ProtocolError(
                        f"column {column!r}: every site withheld its boosting histograms "
                        "under its policy (each holds fewer rows than its "
                        f"min_effective_rows, default {DEFAULT_MIN_EFFECTIVE_ROWS:g}), so the "
                        "model has nothing to fit; keep the kernel for this column, or add rows"
                    )
                try:
                    grower.absorb(hist, held)
                except ValueError as exc:
                    raise ValueError(f"boosting: column {column!r}: {exc}") from None
            finished = all(g.done for g in growers.values())
            if progress:  # early stopping: the fit ends before its most rounds
                progress(BOOSTING_PROGRESS, done, done if finished else rounds)
            if finished:
                break
        for column, grower in growers.items():
            self.models[column] = grower.model
            self.boosting_losses[column] = list(grower.losses)

    def _covariate_edges(self, column: str, bins: int) -> np.ndarray:
        """A continuous covariate's bin edges for boosting: the quantiles of its
        marginal; a near-linear column's (whose marginal the sites give of its residual,
        while its covariate values are its own): its source's edges mapped by the
        line, the column being that line within the rule's R^2 >= 0.95."""
        assert self.schema is not None
        rule = self.schema.near_linear.get(column)
        if rule is None:
            return quantile_edges(self.grids[column], self.marginal_cdf(column).ravel(), bins)
        x = self._covariate_edges(rule.of[0], bins)
        return np.unique(float(rule.slope or 0.0) * x + float(rule.intercept or 0.0))

    def _grower(self, column: str) -> TreeGrower:
        """A boosted column's bins, classes and checks: its :class:`TreeGrower`."""
        order = self.schema.order if self.schema is not None else []
        covariates = order[: order.index(column)]
        specs = [self.encoders[c].spec for c in covariates]
        params = self.boosting_params(column)
        edges = [
            self.encoders[c].boundaries[1:-1].astype(float)
            if sp.is_discrete
            else self._covariate_edges(c, params.bins)
            for c, sp in zip(covariates, specs, strict=True)
        ]
        n_bins = np.array([e.size + 1 for e in edges], dtype=np.int64)
        nominal = np.array([sp.kind == "nominal" for sp in specs], dtype=bool)
        response_edges = thresholds = None
        if not self.encoders[column].spec.is_discrete:  # quantile classes of its marginal
            cdf = self.marginal_cdf(column).ravel()
            response_edges = quantile_edges(self.grids[column], cdf, params.classes)
            levels = response_edges.size + 1
            k = response_edges.size  # cumulative logits of P(class <= c)
            if params.continuous == "location-scale" and k >= 1:  # two scores (f, s)
                thresholds = thresholds_of(class_levels(response_edges, self.grids[column], cdf))
                k = 2
            if response_edges.size < 1:
                raise ValueError(
                    f"column_models[{column!r}] = 'boosting': its marginal has a single "
                    "quantile class (constant?), so there is nothing to model; keep the kernel"
                )
        else:
            levels = self.encoders[column].spec.n_levels
            k = discrete_outputs(levels)
        reply = reply_values(params.depth - 1, int(n_bins.sum()), k)
        if k > MAX_OUTPUTS or reply > MAX_REPLY_VALUES:
            raise ValueError(
                f"column_models[{column!r}] = 'boosting': {levels} classes over "
                f"{int(n_bins.sum())} covariate bins make a site's reply {reply:,} values "
                f"(at most {MAX_REPLY_VALUES:,}; at most {MAX_OUTPUTS} classes); lower "
                "boosting depth, bins or classes, or keep the kernel for this column"
            )
        return TreeGrower(edges, nominal, k, params, response_edges, thresholds)

    def _boost_message(
        self, column: str, model: BoostedModel, feature: np.ndarray, left: np.ndarray, level: int
    ) -> Message:
        """The ``boost`` request of one level of ``column``'s next tree."""
        arrays = {
            "edges": np.concatenate([np.zeros(0), *model.edges]),
            "edge_counts": np.array([e.size for e in model.edges], dtype=np.int64),
            "init": np.asarray(model.init, dtype=float),
            "feature": np.concatenate([model.feature, feature[None]]),
            "left": np.packbits(np.concatenate([model.left, left[None]]), axis=-1),
            "value": model.value,
        }
        if model.response_edges is not None:
            arrays["response_edges"] = model.response_edges
        if model.thresholds is not None:
            arrays["thresholds"] = model.thresholds
        params = self.boosting_params(column)
        config: dict[str, ConfigValue] = {
            "column": column,
            "request": next(self._requests),
            "depth": params.depth,
            "level": level,
            "outputs": int(model.init.size),
            **self._secure_flag(),
        }
        if params.early_stopping:
            config["validation"] = params.validation_fraction
            config["validation_seed"] = self._validation_seed
        precision = self._wire_precision()
        if precision != "float64":
            config["precision"] = precision
        return Message("boost", arrays, config)

    def _boost_total(self, message: Message, replies: list[Message]) -> np.ndarray:
        """The pooled histograms of one ``boost`` round."""
        self.nodes_withheld += sum(int(r.config.get("abstained", 0)) for r in replies)
        if self.secure:
            return self._total(replies, "H")
        c, a = message.config, message.arrays
        outputs = int(c["outputs"])
        width = int(a["edge_counts"].sum()) + a["edge_counts"].size
        shape = (2 ** int(c["level"]), width, 2 * outputs + 1)
        precision = str(c.get("precision", "float64"))
        total = np.zeros(shape)
        for r in replies:  # in client order
            total += decode_histograms(r.arrays, precision, shape)
        return total

    def _boosted_masses(self, column: str, x: np.ndarray) -> np.ndarray:
        """Class probabilities (B, L) of a boosted column at query points (B, j)."""
        return self.boosted_model(column).probabilities(x)

    def _boosted_draw(self, column: str, p: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Values of a boosted continuous column from class probabilities (rows of p)."""
        model = self.boosted_model(column)
        assert model.response_edges is not None
        cdf = self.marginal_cdf(column).ravel()
        out = values_from_classes(p, u, model.response_edges, self.grids[column], cdf)
        spec = self.encoders[column].spec  # the data's bounds, as every draw (eq. 17)
        lo, hi = spec.bounds
        return np.clip(out, lo, hi)

    def conditional_masses(self, column: str, queries: np.ndarray) -> np.ndarray:
        """Conditional category masses of a discrete column (Corollary 5.4).

        Needs ``discrete_sampling="mass"`` (the column's grid holds two interior points
        per interval).  Returns an array (B, L) of masses summing to 1 per row.
        """
        if not self._by_mass(column):
            raise ValueError(f"{column!r} is not a discrete column sampled by mass")
        x = self._queries(column, queries)
        if self._boosted(column):
            return self._boosted_masses(column, x)
        self._ask([column], x.shape[0])
        width = self.encoders[column].spec.n_levels
        return self._by_distinct(x, width, lambda xs: self._masses_batch(column, xs))

    def _distinct(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct query points of ``x`` and, per row, the index of its own.

        Discrete coordinates are moved to their interval midpoints first (eq. 24), as
        every site does on arrival, so rows that differ only within a category's
        interval ask the same question.  Without ``deduplicate``, or with no repeat,
        ``x`` itself and 0..n-1.
        """
        identity = np.arange(x.shape[0])
        if not self.deduplicate or x.shape[0] < 2:
            return x, identity
        assert self.schema is not None
        keys = np.array(x, dtype=float, copy=True)
        for k, name in enumerate(self.schema.order[: x.shape[1]]):
            enc = self.encoders[name]
            if enc.spec.is_discrete:
                keys[:, k] = enc.midpoints[enc.ceil(keys[:, k])]
        distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
        if distinct.shape[0] == x.shape[0]:
            return x, identity
        return distinct, inverse.ravel()

    def _by_distinct(
        self, x: np.ndarray, width: int, estimate: Callable[[np.ndarray], np.ndarray]
    ) -> np.ndarray:
        """``estimate`` of every row of ``x`` in batches, each distinct point asked once."""
        distinct, inverse = self._distinct(x)
        step = self._batch()
        found = np.empty((distinct.shape[0], width))
        for start in range(0, distinct.shape[0], step):
            found[start : start + step] = estimate(distinct[start : start + step])
        return found if distinct is x else found[inverse]

    def _queries(self, column: str, queries: np.ndarray) -> np.ndarray:
        if self.schema is None or not self._configured:
            raise RuntimeError("run setup() and configure() first")
        j = self.schema.order.index(column)
        x = np.atleast_2d(np.asarray(queries, dtype=float))
        if j == 0:
            raise ValueError(f"{column!r} is first in the chain; use marginal_cdf()")
        if x.shape[1] != j:
            raise ValueError(f"queries for {column!r} need {j} columns, got {x.shape[1]}")
        return x

    def conditional_cdf(
        self, column: str, queries: np.ndarray, *, postprocess: bool = True
    ) -> np.ndarray:
        """Federated conditional CDF of ``column`` given the columns before it in the chain.

        Parameters
        ----------
        column : str
            The response column.
        queries : ndarray of shape (B, d)
            Query points on the continualized scale, one column per chain column before
            ``column`` (discrete coordinates are moved to interval midpoints by the
            clients).
        postprocess : bool
            Apply M_cdf (default) or return the raw sums of eq. 10.

        Returns
        -------
        ndarray of shape (B, L)
            CDF values on ``self.grids[column]``.
        """
        x = self._queries(column, queries)
        if self._boosted(column):
            model = self.boosted_model(column)
            if model.response_edges is None:
                raise ValueError(f"{column!r} is discrete and boosted: use conditional_masses()")
            cdf = self.marginal_cdf(column).ravel()
            p = model.probabilities(x)
            return cdf_from_classes(p, model.response_edges, self.grids[column], cdf)
        self._ask([column], x.shape[0])
        width = self.grids[column].size
        return self._by_distinct(x, width, lambda xs: self._estimate_batch(column, xs, postprocess))

    # ---------------------------------------------------------------- generation
    def _by_rule(self, column: str, out: np.ndarray, order: Sequence[str]) -> np.ndarray:
        """Set ``column`` by its rule (:attr:`Schema.rules`) where the rule gives it.

        A function rule's column gets the midpoint of the interval of the value its
        determinants map to (they come before it in the chain, so they are drawn);
        rows whose combination no real row has are left to the chain.  A sum rule's
        column gets the sum of its parts' values (a discrete part: its category's
        value) in every row.  An interval rule's column gets, in every row holding its
        source (the rest, where the source's indicator says missing, are left to the
        chain), the midpoint of the continualized interval of the value whose cell holds
        its source as written
        (:meth:`_source_written`: clipped and rounded as the output writes it, so the
        written table keeps the rule in every row;
        :func:`~fits.core.rules.interval_codes`).  (An affine rule's column is not in
        the chain: :meth:`Schema.expanded`.)  Returns the mask of rows set.
        """
        n = out.shape[0]
        rule = {r.column: r for r in (self.schema.rules or [])}.get(column)  # type: ignore[union-attr]
        if rule is None or rule.kind == "linear":  # a near-linear column: drawn (_truncated)
            return np.zeros(n, dtype=bool)
        j = order.index(column)
        if rule.kind == "interval":
            source = rule.of[0]
            held = np.ones(n, dtype=bool)  # rows holding the source: where X is missing
            flag = missing_flag(source)  # the rule says nothing, and the chain draws Y
            if flag in self.encoders and self.encoders[flag].spec.indicates == source:
                held = self.encoders[flag].ceil(out[:, order.index(flag)]) == 0
            x = self._source_written(rule, out[held, order.index(source)])
            codes = interval_codes(self.schema, rule, x)  # type: ignore[arg-type]
            out[held, j] = self.encoders[column].midpoints[codes]
            return held
        parts = [(self.encoders[a], out[:, order.index(a)]) for a in rule.of]
        if rule.kind == "sum":
            total = np.zeros(n)
            for enc, y in parts:
                if enc.spec.is_discrete:
                    levels = np.asarray([float(v) for v in enc.spec.categories or []])
                    total = total + levels[enc.ceil(y)]
                else:
                    total = total + y
            out[:, j] = total
            return np.ones(n, dtype=bool)
        codes = dependent_codes(self.schema, rule, [enc.ceil(y) for enc, y in parts])  # type: ignore[arg-type]
        ruled = codes >= 0
        out[ruled, j] = self.encoders[column].midpoints[codes[ruled]]
        return ruled

    def _seen_combinations(
        self, column: str, p: np.ndarray, rows: np.ndarray, order: Sequence[str]
    ) -> np.ndarray:
        """Masses (B, L) of the last determinant (in the chain) of a two-column function rule,
        restricted to the combinations some real row has.

        Smoothing leaks a little mass onto combinations no real row has (Bike: a holiday
        on a Sunday), where the rule says nothing.  Given the determinants drawn before
        it, a category that would complete such a combination gets mass 0 and the rest
        is renormalized (a row with no allowed category keeps its masses), so every
        row's combination is in the rule's mapping and the ruled column is a function of
        its determinants in every synthetic row.  ``rows`` holds the earlier chain
        columns of the B query points (at least those before ``column``).
        """
        pos = {c: i for i, c in enumerate(order)}
        for rule in self.schema.rules or []:  # type: ignore[union-attr]
            if rule.kind != "function" or len(rule.of) < 2:
                continue
            if max(rule.of, key=lambda c: pos[c]) != column:
                continue
            k = rule.of.index(column)
            codes = [
                self.encoders[a].ceil(rows[:, pos[a]]) if a != column else None for a in rule.of
            ]
            allowed = np.empty(p.shape, dtype=bool)
            for c in range(p.shape[1]):
                codes[k] = np.full(p.shape[0], c)
                allowed[:, c] = dependent_codes(self.schema, rule, codes) >= 0  # type: ignore[arg-type]
            kept = np.where(allowed, p, 0.0)
            total = kept.sum(axis=1)
            ok = total > 0
            p = p.copy()
            p[ok] = kept[ok] / total[ok, None]
        return p

    def sample(
        self,
        n: int,
        rng: np.random.Generator,
        *,
        progress: ProgressCallback | None = None,
        given: np.ndarray | None = None,
    ) -> np.ndarray:
        """Algorithm 2: draw ``n`` rows on the continualized scale, in chain order.

        Parameters
        ----------
        n : int
            Number of synthetic rows.
        rng : Generator
            Source of every uniform draw (all drawn up front, so results do not depend
            on the batch size).
        progress : callable, optional
            Called as ``progress(column, rows_done, rows_total)``.
        given : ndarray of shape (n, m), optional
            Conditional sampling: the values of the first m chain columns, which are
            not drawn; the rest are drawn from the chain's conditionals given them
            (Algorithm 2 from column m on).  Discrete columns and indicators hold
            their category codes, lifted into their intervals with the row's own
            uniform of that column (as the sites lift their rows, sec. 4.1);
            continuous columns hold their values (a missing one: the lower bound, with
            its indicator 1).  With a continuous first column, ``given`` of a draw's
            own first column gives that draw back.

        Returns
        -------
        ndarray of shape (n, P)
            Synthetic values, columns in ``schema.order``.
        """
        if self.schema is None or not self._configured:
            raise RuntimeError("run setup() and configure() first")
        if n < 1:
            raise ValueError("the number of rows to sample must be at least 1")
        order = self.schema.order
        self._ask(order[1:], n)  # one configure round at most, before the first column
        self.fit_boosted(progress=progress)  # the boosted columns' models, all together
        u = rng.random((n, len(order)))
        out = np.empty((n, len(order)))
        given = np.empty((n, 0)) if given is None else np.asarray(given, dtype=float)
        fixed = int(given.shape[1])
        if given.ndim != 2 or given.shape[0] != n or fixed > len(order):
            raise ValueError(
                f"given must have {n} rows and at most {len(order)} columns, got {given.shape}"
            )
        step = self._batch()
        before = {c: tuple(v) for c, v in self.truncation_fallbacks.items()}
        for j, column in enumerate(order):
            if j < fixed:  # a given column: lifted if discrete, as it is if continuous
                enc = self.encoders[column]
                if enc.spec.is_discrete:
                    out[:, j] = enc.lift_at(given[:, j].astype(np.int64), u[:, j])
                else:
                    out[:, j] = given[:, j]
                if progress:
                    progress(column, n, n)
                continue
            grid = self.grids[column]
            by_mass = self._by_mass(column)
            bounds = self.encoders[column].boundaries
            if j == 0:
                if by_mass:
                    p = np.broadcast_to(self.marginal_masses(column), (n, grid.size // 2))
                    out[:, 0] = inverse_masses(p, bounds, u[:, 0])
                else:
                    cdf = np.broadcast_to(self.marginal_cdf(column), (n, grid.size))
                    out[:, 0] = self._draw(column, cdf, u[:, 0])
                if progress:
                    progress(column, n, n)
                continue
            spec = self.encoders[column].spec
            rule = self.schema.near_linear.get(column)  # drawn as its residual, truncated
            linear = None if rule is None else order.index(rule.of[0])
            absent = self._by_rule(column, out, order)  # rows the column's rule sets
            # rows whose indicators (drawn just before) say "missing" take the fill,
            # rows at the point mass take its value; the rest are drawn
            for flag, value in (
                (missing_flag(column), spec.lower if rule is None else self._fill(column)),
                (point_mass_flag(column), spec.point_mass),
            ):
                if flag in self.encoders and self.encoders[flag].spec.indicates == column:
                    pos = order.index(flag)  # (not a user's column of that name)
                    hit = ~absent & (self.encoders[flag].ceil(out[:, pos]) == 1)
                    if rule is not None and flag == point_mass_flag(column):
                        # an order rule's D = 0: Y = X as written, where X is within
                        # Y's bounds (below them, D = 0 cannot be: drawn, truncated)
                        x = self._source_written(rule, out[:, linear])
                        hit &= x >= float(self.user_schema[column].bounds[0])
                        out[hit, j] = x[hit]
                    else:
                        out[hit, j] = value
                    absent |= hit
            rows = np.flatnonzero(~absent)
            if not rows.size and progress:
                progress(column, n, n)
            distinct, inverse = self._distinct(out[rows, :j])
            # rows grouped by their distinct query; each batch of distinct queries is
            # asked once, then the rows that share them draw (each with its own u)
            grouped = np.argsort(inverse, kind="stable")
            rows, inverse = rows[grouped], inverse[grouped]
            for start in range(0, distinct.shape[0], step):
                stop = min(start + step, distinct.shape[0])
                if by_mass:
                    if self._boosted(column):
                        est = self._boosted_masses(column, distinct[start:stop])
                    else:
                        est = self._masses_batch(column, distinct[start:stop])
                    est = self._seen_combinations(column, est, distinct[start:stop], order)
                elif self._boosted(column):
                    est = self._boosted_masses(column, distinct[start:stop])
                else:
                    est = self._estimate_batch(column, distinct[start:stop], True)
                lo, hi = np.searchsorted(inverse, [start, stop])
                for first in range(lo, hi, step):
                    part = slice(first, min(first + step, hi))
                    r, e = rows[part], est[inverse[part] - start]
                    if by_mass:
                        out[r, j] = inverse_masses(e, bounds, u[r, j])
                    elif self._boosted(column):
                        out[r, j] = self._boosted_draw(column, e, u[r, j])
                    elif linear is not None:  # R drawn; later columns see Y = line + R
                        out[r, j] = self._line_plus(
                            column,
                            out[r, linear],
                            self._truncated(column, e, u[r, j], out[r, linear]),
                        )
                    else:
                        out[r, j] = self._draw(column, e, u[r, j])
                    if progress:
                        progress(column, int(absent.sum()) + part.stop, n)
        self._note_fallbacks(before)
        return out

    def _note_fallbacks(self, before: Mapping[str, Sequence[int]]) -> None:
        """A :class:`FallbackNote` per near-linear column some of whose rows this draw
        took from a fallback (:meth:`_truncated`)."""
        for column, (marginal, uniform) in self.truncation_fallbacks.items():
            m = marginal - before.get(column, (0, 0))[0]
            k = uniform - before.get(column, (0, 0))[1]
            if m or k:
                warnings.warn(fallback_message(column, m, k), FallbackNote, stacklevel=3)


class FallbackNote(DataNote):
    """Rows of a near-linear column one draw (one :meth:`Coordinator.sample` call) took
    from a fallback; ``fits synthesize`` prints one note per column over all its
    chunks instead (:func:`fallback_message` of the summed counts)."""


def fallback_message(column: str, marginal: int, uniform: int) -> str:
    """The text of a :class:`FallbackNote`.

    Parameters
    ----------
    column : str
        The near-linear column.
    marginal, uniform : int
        Rows drawn from the residual's marginal, and uniformly within the bounds.

    Returns
    -------
    str
        One sentence naming the column and the counts.
    """
    return (
        f"column {column!r} (drawn as its near-linear residual): {marginal + uniform} "
        "synthetic row(s) had no conditional mass of the residual where the column stays "
        f"within its bounds; {marginal} drawn from the residual's marginal there, "
        f"{uniform} uniformly within the bounds"
    )


def _unit(spec: ColumnSpec, step: float | None) -> float:
    """The unit of a column's written values in the engine's numbers: a duration pair's
    ``step``, 1 for whole numbers, ``10**-decimals``, a datetime's days or time unit in
    seconds (a microsecond where it has none); 0 for numbers not rounded."""
    if step is not None:
        return float(step)
    if spec.dtype == "datetime":
        if spec.date_only:
            return 86_400.0
        return RESOLUTIONS.get(spec.resolution or "", 1) / 1e6
    if spec.dtype == "int":
        return 1.0
    return 0.0 if spec.decimals is None else 10.0 ** -int(spec.decimals)


def _durations_on_step(
    r: np.ndarray, intercept: float, step: float, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Residuals ``r`` of a datetime pair moved so that each duration ``intercept + r``
    is the nearest whole multiple of ``step`` (seconds) within ``[intercept + lo,
    intercept + hi]`` (the row's truncation interval); a row whose interval holds no
    multiple keeps its ``r``.  The rule's own bounds are multiples (the shortest and
    longest real durations: :func:`fits.core.rules.detect_near_linear`), so only an
    interval cut by the column's own bounds can hold none.  Rounding a continuous draw
    to the step's grid moves each value by at most half a step, as a column's own
    rounding to its decimals does (docs/method.md, "Near-linear columns")."""
    eps = 1e-9  # float noise of bounds that are multiples already
    first = np.ceil((intercept + lo) / step - eps) * step
    last = np.floor((intercept + hi) / step + eps) * step
    on = np.clip(np.round((intercept + r) / step) * step, first, last) - intercept
    return np.where(first <= last, on, r)
