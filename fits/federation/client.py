"""The client side: one data holder's table and everything computed from its rows.

A :class:`FITSClient` answers the coordinator's messages (:mod:`fits.federation.protocol`).  Its
rows never leave it; it uploads only

* in the setup round, its row count and a description of its columns;
* in rule detection, one bit per candidate rule (does it hold in all my rows?), for
  the rules every site confirmed, which value pairs of their columns occur here, and
  for affine candidates, the sums of their columns' centred moments, and on a wide
  table the (scaled) sums of its numeric columns;
* for the first chain column, the sum of smoothed indicators on the grid (eq. 16);
* for each batch of query points, step 1: the kernel-weighted Hessians S_k(x) (eq. 5);
* and step 2: given q(x) from the coordinator, the CDF vectors F_k(z | x) (eqs. 8-9);
* under a pooled effective-rows floor (``SitePolicy.floor_scope="pooled"``, secure
  aggregation only), per query point the masked sums of its kernel weights and of their
  squares at a few widening factors (the ``neff`` round).

It answers within its :class:`~fits.federation.policy.SitePolicy` (grid size, queries per
column, bandwidth floors, M, and the effective-rows floor under which it abstains from a
query) and can keep an audit log: one JSON line per request, with its sizes and what was
answered, refused or abstained from.

The kernel weights come from the client's own scheme (:mod:`fits.core.kernels`) on its own
standardization of the continualized covariates; the local-linear design stays in native
units (Remark 3.2).  Discrete query coordinates are moved to their interval midpoints
(eq. 24) and mismatched categories are penalized (eqs. 25-26).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fits._json import jsonable
from fits._lazy import lazy_module
from fits.core import boosting
from fits.core.cdf import response_scale
from fits.core.continualization import Encoder, canonical_rows, continualize
from fits.core.kernels import (
    GaussianKernel,
    Kernel,
    KNNKernel,
    check_kernel_settings,
    covariate_scale,
    epanechnikov_product,
    resolve_kernel,
    response_cdf_kernel,
)
from fits.core.names import resolve_keys
from fits.core.rules import answer_rules, residuals
from fits.core.schema import (
    ColumnSpec,
    Schema,
    SchemaError,
    check_columns,
    describe_table,
    na_labels_at,
    parse_text_columns,
)
from fits.core.tuning import (
    GAUSSIAN_PAIRS,
    SCORES,
    Smoothing,
    heldout_scores,
    smoothed_kernel,
)
from fits.federation.codec import (
    PRECISIONS,
    encode_block,
    encode_cdf,
    encode_hessian,
    encode_histograms,
)
from fits.federation.policy import PolicyError, SitePolicy
from fits.federation.protocol import (
    WIDENING_LADDER,
    WIDENING_STEPS,
    ConfigValue,
    Message,
    ProtocolError,
    design_covariates,
    design_size,
)
from fits.federation.secure import SecureAggregator

if TYPE_CHECKING:
    from scipy import sparse
    from scipy.spatial import cKDTree
    from sklearn.neighbors import NearestNeighbors
else:  # imported where first used: a site answering setup or marginal never loads them
    sparse = lazy_module("scipy.sparse")

__all__ = ["FITSClient", "MIN_CLIENT_ROWS", "WIDENING_STEPS", "check_columns", "effective_rows"]

#: Fewest rows a client may hold: a one-row client would reveal its row through its sums.
MIN_CLIENT_ROWS = 2
#: Half-width, in response bandwidths, of the band where Phi differs from a step.
_BAND = 9.0
#: The message types whose reply is summed over clients, and the summed arrays.
_SUMMED = {
    "marginal": ("F",),
    "hessian": ("S",),
    "cdf": ("F",),
    "block": ("S", "T"),
    "tune": ("scores", "rows"),
    "neff": ("N",),
    "boost": ("H", "loss"),  # "loss": early stopping's, in a tree's first level only
}
#: Smallest weighted nominal penalty gamma_q^a (the smallest normal float).
_TINY = float(np.finfo(float).tiny)
#: Numbers per block of neighbour-list work (about 2 MB): small enough for the cache.
_BLOCK_VALUES = 1 << 18
#: :meth:`FITSClient._prepared` without a relevance: the prefix as cached.
_ANY = object()
#: Whether widened weights are rescaled to the site's own kernel's mass
#: (:meth:`FITSClient._widening_scale`).
NORMALIZE_WIDENED = True


@dataclass
class _Weights:
    """Kernel weights of one batch of queries: dense (all rows) or on neighbour lists."""

    w: np.ndarray  # (B, m) dense, or (B, c) with idx
    x: np.ndarray  # (B, d) midpoint-substituted queries, native units
    idx: np.ndarray | None = None  # (B, c) neighbour indices for the KNN scheme
    s: np.ndarray | None = None  # (B, p, p) Hessians, if computed with the weights
    #: covariates of the local-linear design U_i = (1, h_i[design] - x[design]), or None
    #: for all d (the paper's design); the weights use every covariate either way
    design: np.ndarray | None = None
    abstained: np.ndarray | None = None  # queries under the effective-rows floor (zeroed)
    widened: np.ndarray | None = None  # queries answered with a widened kernel ...
    widening: np.ndarray | None = None  # ... and its factor t, one per widened query
    groups: list[tuple[np.ndarray, _Weights]] | None = None  # (queries, their weights)

    def take(self, rows: np.ndarray) -> _Weights:
        """The weights of some of the queries (a boolean mask or indices)."""
        return _Weights(
            self.w[rows],
            self.x[rows],
            None if self.idx is None else self.idx[rows],
            None if self.s is None else self.s[rows],
            design=self.design,
        )

    @property
    def covariates(self) -> np.ndarray:
        """The covariate positions in the design (all d when ``design`` is None)."""
        return np.arange(self.x.shape[1]) if self.design is None else self.design

    @property
    def p(self) -> int:
        """Size of the design: 1 + its covariates."""
        return 1 + int(self.covariates.size)

    def scale(self, factor: np.ndarray) -> None:
        """Multiply each query's weights (and Hessian) by a positive factor, in place."""
        self.w *= factor[:, None]
        if self.s is not None:
            self.s *= factor[:, None, None]


@dataclass
class _Prefix:
    """What the client keeps for the covariates of chain column d (its first d columns)."""

    d: int
    hbar: np.ndarray  # (m, d) standardized covariates (times the relevance weights)
    #: the relevance weights hbar and the neighbour indexes were built with (None: 1)
    relevance: bytes | None = None
    rows: np.ndarray | None = None  # rows usable as responses for column d (None: all)
    rows_known: bool = False  # whether ``rows`` has been computed
    kdtree: cKDTree | None = None  # neighbour index over hbar[rows] (KD-tree)
    brute: NearestNeighbors | None = None  # ... or brute-force scan (scikit-learn)
    codes: np.ndarray | None = None  # (m, q) int16 codes of the discrete covariates
    z1: np.ndarray | None = None  # (m, d + 1): a column of ones, then z[:, :d]
    #: (design, a column of ones then z[:, design]) for a reduced design
    z1_design: tuple[tuple[int, ...], np.ndarray] | None = None


@dataclass
class _Cache:
    """Everything a client derives from its rows between messages, one entry per kind.

    The chain is estimated column by column, so each entry holds the latest column's
    data only and is replaced when the coordinator moves on.
    """

    phi: tuple[int, np.ndarray] | None = None  # (j, Phi matrix of column j)
    band: tuple[int, np.ndarray, sparse.csr_matrix] | None = None  # (j, first, band)
    prefix: _Prefix | None = None
    weights: tuple[str, _Weights] | None = None  # (request key, weights of step 1)


class FITSClient:
    """One data holder in a FITS federation.

    Parameters
    ----------
    data : DataFrame
        The client's table (the same columns at every client).
    name : str
        How the client is named in messages and errors.
    kernel : {"knn", "gaussian"} or Kernel
        The client's own kernel scheme and parameters.
    min_rows : int
        Refuse to take part with fewer rows than this (default 2).
    policy : SitePolicy, optional
        The limits this site enforces on the coordinator's requests (default
        ``SitePolicy()``: see :mod:`fits.federation.policy`;
        ``SitePolicy.unrestricted()`` answers everything, as in the paper).
    audit : path or callable, optional
        Where to record every request: a file that gets one JSON line per request
        (appended), or a callable given each entry as a dict.  Entries are also kept in
        :attr:`audit_trail`.
    """

    def __init__(
        self,
        data: pd.DataFrame,
        name: str = "client",
        kernel: str | Kernel = "knn",
        *,
        min_rows: int = MIN_CLIENT_ROWS,
        policy: SitePolicy | None = None,
        audit: str | Path | Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if not isinstance(data, pd.DataFrame):
            raise TypeError(f"{name}: expected a pandas DataFrame, got {type(data).__name__}")
        self.name = name
        self.kernel = resolve_kernel(kernel)
        check_columns(data, name)
        self.data = data
        n = data.shape[0]
        if n == 0:
            raise SchemaError(f"{name}: the table is empty; every client needs rows")
        if data.shape[1] == 0:
            raise SchemaError(
                f"{name}: the table has no columns; give every site the same columns, one "
                "row per record (a DataFrame read from a file: check its separator and header)"
            )
        if n < min_rows:
            raise SchemaError(
                f"{name} has {n} row(s); a client needs at least {min_rows} (its uploads "
                "would reveal its rows): merge it with another site or leave it out"
            )
        if isinstance(self.kernel, KNNKernel) and n < self.kernel.min_neighbors:
            raise SchemaError(
                f"{name} has {n} rows, fewer than the KNN minimum c0="
                f"{self.kernel.min_neighbors}; give this client kernel='gaussian' or merge it"
            )
        self._schema: Schema | None = None
        #: The parsed text columns' notes (:func:`parse_text_columns`), set when the
        #: table's text numbers and dates are read: at setup, or at configure in a site
        #: rebuilt from its file after setup (Flower).
        self._notes: dict[str, dict[str, Any]] | None = None
        self._cache = _Cache()
        self._scores = boosting.ScoreCache()  # boost rounds: score only the new trees
        self._site_seed = 0  # configure's; early stopping's held-out rows follow from it
        self._secure: SecureAggregator | None = None
        self._resume_key: bytes | None = None
        if policy is not None and not isinstance(policy, SitePolicy):
            raise TypeError(f"{name}: policy must be a SitePolicy, got {type(policy).__name__}")
        self.policy = policy if policy is not None else SitePolicy()
        self.audit = audit
        #: Every request this site handled, as logged (see :meth:`handle`).
        self.audit_trail: list[dict[str, Any]] = []
        self._audit_lock = threading.Lock()
        self.rows_declared = 0
        #: Query points answered per "type:column" (the policy's budget), and the digest of
        #: the last hessian queries per column (a secure re-ask of them is free).
        self._asked: dict[str, int] = {}
        self._last_queries: dict[str, str] = {}
        self._abstained: np.ndarray | None = None
        self._widened: tuple[np.ndarray, np.ndarray] | None = None
        #: Seconds spent per message type and in the nearest-neighbour search
        #: (``"neighbour_search"``), for benchmarks.
        self.timings: dict[str, float] = defaultdict(float)

    # ------------------------------------------------------------------ dispatch
    def handle(self, message: Message) -> Message:
        """Answer one protocol message (see :mod:`fits.federation.protocol`)."""
        handler = {
            "setup": self._setup,
            "configure": self._configure,
            "rules": self._rules,
            "marginal": self._marginal,
            "hessian": self._hessian,
            "cdf": self._cdf,
            "block": self._block,
            "tune": self._tune,
            "neff": self._neff,
            "boost": self._boost,
        }.get(message.type)
        if handler is None:
            raise ProtocolError(f"{self.name}: unknown message type {message.type!r}")
        if message.type not in ("setup", "configure", "rules") and self._schema is None:
            raise ProtocolError(f"{self.name}: {message.type} before configure")
        start = time.perf_counter()
        entry = _describe_request(self.name, message)
        self._abstained = None
        self._widened = None
        try:
            if message.type in _SUMMED and message.type not in ("tune", "boost"):  # own limits
                self._spend(message)
            precision = message.config.get("precision", "float64")
            if precision not in PRECISIONS:
                raise ProtocolError(
                    f"{self.name}: unknown upload precision {precision!r}; one of {PRECISIONS}"
                )
            reply = handler(message)
        except PolicyError as exc:
            self._log({**entry, "outcome": "refused", "reason": str(exc)})
            raise
        except Exception as exc:  # a bad request or a data problem: logged, then raised
            self._log({**entry, "outcome": "failed", "reason": str(exc)})
            raise
        if message.config.get("secure", False) and message.type in _SUMMED:
            reply = self._masked(message, reply)
        elif message.type in ("hessian", "cdf", "block"):
            reply = _encoded(message, reply)
        elif message.type == "boost":
            precision = str(message.config.get("precision", "float64"))
            arrays = encode_histograms(reply.arrays["H"], precision)
            if "loss" in reply.arrays:  # early stopping's held-out loss: as it is
                arrays["loss"] = reply.arrays["loss"]
            reply = Message(reply.type, arrays, reply.config)
        self.timings[message.type] += time.perf_counter() - start
        entry["outcome"] = "answered"
        floor = (
            f"fewer than k={self.policy.min_effective_rows:g} effective rows "
            "(n_eff = (sum w)^2 / sum w^2) behind these queries"
        )
        if self._widened is not None and self._widened[0].size:
            rows, factors = self._widened
            entry["outcome"] = "answered with widened kernels"
            entry["widened"] = rows.tolist()
            entry["widening"] = [float(f"{t:.6g}") for t in factors]
            entry["reason"] = floor + " under the site's own kernel: widened by these factors"
        if self._abstained is not None and self._abstained.size:
            entry["outcome"] = "answered with abstentions"
            entry["abstained"] = self._abstained.tolist()
            entry["reason"] = floor + (" even when widened" if "widened" in entry else "")
        if "policy" in reply.config:
            entry["policy"] = json.loads(str(reply.config["policy"]))
        entry["reply"] = {n: [list(a.shape), str(a.dtype)] for n, a in reply.arrays.items()}
        entry["reply_bytes"] = reply.nbytes()
        self._log(entry)
        return reply

    # ------------------------------------------------------------------ policy and audit
    def _log(self, entry: dict[str, Any]) -> None:
        """Record one audit entry (in :attr:`audit_trail` and the audit file / callable)."""
        self.audit_trail.append(entry)
        if self.audit is None:
            return
        if callable(self.audit):
            self.audit(entry)
            return
        line = json.dumps(jsonable(entry)) + "\n"
        with self._audit_lock, open(self.audit, "a", encoding="utf-8") as fh:
            fh.write(line)

    def _spend(self, msg: Message) -> None:
        """Count a request's query points against the policy; refuse beyond the budget."""
        column = str(msg.config.get("column", ""))
        if msg.type == "marginal":
            n = 1
        else:
            queries = np.asarray(msg.arrays.get("queries", np.zeros((0, 0))))
            n = int(queries.shape[0]) if queries.ndim else 0
            if msg.type in ("hessian", "block"):
                digest = hashlib.sha256(np.ascontiguousarray(queries).tobytes()).hexdigest()
                if "weight_exponent" in msg.arrays and self._last_queries.get(column) == digest:
                    return  # secure aggregation asks the same points again, scaled
            if msg.type == "neff":
                digest = hashlib.sha256(np.ascontiguousarray(queries).tobytes()).hexdigest()
                again = "weight_exponent" in msg.arrays or int(msg.config.get("ladder_start", 0))
                if again and self._last_queries.get(f"neff|{column}") == digest:
                    return  # the same points again: scaled, or further up the ladder
        key = f"{msg.type}:{column}"
        used = self._asked.get(key, 0)
        budget = self.policy.query_budget(self.rows_declared)
        if used + n > budget:
            limit = self.policy.max_rows
            rows = (  # what the budget counts: the declared rows, or max_rows below them
                f"{self.rows_declared} declared rows"
                if limit is None or self.rows_declared <= limit
                else f"max_rows={limit} (of {self.rows_declared} declared rows)"
            )
            raise PolicyError(
                f"{self.name} refused a {msg.type} request of {n} queries for column "
                f"{column!r}: {used} of its {budget:g} per column are spent (site policy: "
                f"queries_per_row={self.policy.queries_per_row:g} x {rows} + "
                f"extra_queries={self.policy.extra_queries})"
            )
        self._asked[key] = used + n
        if msg.type in ("hessian", "block"):
            self._last_queries[column] = digest
        elif msg.type == "neff":
            self._last_queries[f"neff|{column}"] = digest

    def policy_state(self) -> dict[str, Any]:
        """What the policy has counted so far (a deployment that rebuilds the site for
        every message, such as Flower, keeps it and hands it back with
        :meth:`restore_policy_state`)."""
        return {"asked": dict(self._asked), "last_queries": dict(self._last_queries)}

    def restore_policy_state(self, state: Mapping[str, Any]) -> None:
        """Continue counting from :meth:`policy_state`'s record."""
        self._asked = {str(k): int(v) for k, v in dict(state.get("asked", {})).items()}
        self._last_queries = {
            str(k): str(v) for k, v in dict(state.get("last_queries", {})).items()
        }

    def _floor(self, wts: _Weights, x: np.ndarray, qcodes: np.ndarray, kernel: Kernel) -> None:
        """Enforce the effective-rows floor n_eff >= k on a batch's weights (the policy).

        n_eff = (sum_i w_i)^2 / sum_i w_i^2 (Kish's effective sample size, see
        :func:`effective_rows`).  A query under k gets, with ``below_floor="widen"``, the
        weights of the site's own kernel widened by the smallest factor t of
        :data:`WIDENING_STEPS` that brings them to n_eff >= k (:meth:`_weights` with
        ``widen=t``; kept as a group of queries per factor, see :meth:`_hessian`); a query
        that no factor brings there, or every query under k with ``below_floor=
        "abstain"``, gets no answer: the site contributes zeros for it to both steps,
        since step 2 reuses these weights.  A query with no weight at all contributes
        nothing anyway and is neither widened nor counted as an abstention.
        """
        k = self.policy.min_effective_rows
        if not k > 0 or wts.w.size == 0:
            return
        low = np.flatnonzero((wts.w.max(axis=1) > 0) & ~(effective_rows(wts.w) >= k))
        if not low.size:
            return
        wts.w[low] = 0.0
        if wts.s is not None:
            wts.s[low] = 0.0
        usable = int(self.valid[:, x.shape[1]].sum())  # n_eff <= the rows with weight
        if self.policy.below_floor == "widen" and usable >= k:
            groups, widened, factors = [], [], []
            pending = low
            for t in WIDENING_STEPS:
                wide = self._weights(x[pending], qcodes[pending], kernel, t, wts.design)
                ok = effective_rows(wide.w) >= k
                if ok.any():
                    groups.append((pending[ok], wide.take(ok)))
                    widened.append(pending[ok])
                    factors.append(np.full(int(ok.sum()), t))
                    pending = pending[~ok]
                if not pending.size:
                    break
            if groups:
                wts.groups = groups
                wts.widened = np.concatenate(widened)
                wts.widening = np.concatenate(factors)
                order = np.argsort(wts.widened, kind="stable")
                wts.widened, wts.widening = wts.widened[order], wts.widening[order]
            low = pending
        wts.abstained = low

    # ------------------------------------------------------------------ secure aggregation
    @property
    def secure_private_key(self) -> bytes | None:
        """The raw X25519 private key of secure aggregation (after a secure setup round).

        A deployment that rebuilds the client for every message (Flower) keeps it in the
        site's local state and hands it back with :meth:`resume_secure`; it never leaves
        the site.
        """
        return self._secure.private_key if self._secure is not None else None

    def resume_secure(self, private_key: bytes) -> None:
        """Use this private key (32 raw bytes) for secure aggregation, not a fresh one."""
        self._resume_key = bytes(private_key)
        self._secure = SecureAggregator(self._resume_key)

    def _masked(self, message: Message, reply: Message) -> Message:
        """The reply with its summed array encoded and masked (:mod:`fits.federation.secure`)."""
        if self._secure is None or not self._secure.connected:
            raise ProtocolError(
                f"{self.name}: secure aggregation was asked for, but this client was not "
                "set up and configured with it"
            )
        c = message.config
        arrays = dict(reply.arrays)
        for name in (n for n in _SUMMED[message.type] if n in arrays):
            label = (
                f"{message.type}|{c.get('request', '')}|{c['column']}|{c.get('scheme', '')}|{name}"
            )
            try:
                arrays[name] = self._secure.mask(arrays[name], label)
            except ValueError as exc:  # name the site and the column, not only the value
                raise ValueError(f"{self.name}, column {c['column']!r}: {exc}") from exc
        return Message(reply.type, arrays, reply.config)

    @property
    def n_rows(self) -> int:
        """Number of local rows."""
        return int(self.data.shape[0])

    # ------------------------------------------------------------------ setup round
    def _setup(self, msg: Message) -> Message:
        declared = json.loads(str(msg.config.get("declared", "{}")))
        # the kinds name this table's headers by the one rule of fits.core.names (a
        # header ' age ' as 'age'): the coordinator has not seen the headers yet
        declared = resolve_keys(
            declared, [str(c) for c in self.data.columns], "kinds", f"{self.name}'s table"
        )
        # text that is really numbers or dates is read as such, here at the site
        self.data, notes = parse_text_columns(self.data, declared)
        self._notes = notes
        desc = describe_table(self.data, declared, client=self.name, notes=notes)
        for info in desc["columns"].values():  # an ordered categorical's values present,
            # in its categories' order, not the rows': the description, and so its
            # digest (FITSSynthesizer.connect), is the same for the rows in any order
            if info.get("ordered") and "present" in info and "categories" in info:
                rank = {repr(c): i for i, c in enumerate(info["categories"])}
                info["present"] = sorted(info["present"], key=lambda c: rank.get(repr(c), -1))
        arrays = {"n_rows": np.array([self.n_rows], dtype=np.int64)}
        if msg.config.get("secure", False):
            self._secure = SecureAggregator(self._resume_key)
            arrays["public_key"] = self._secure.public_array()
        return Message(
            "setup",
            arrays,
            {"description": json.dumps(jsonable(desc, finite=False)), "name": self.name},
        )

    def _rules(self, msg: Message) -> Message:
        """Rule detection (:func:`fits.core.rules.answer_rules`): one bit per candidate
        rule (``check``), which value pairs occur here (``map``), or the sums of the
        candidate pairs' centred moments (``moments``) or of its numeric columns
        (``totals``), masked with secure aggregation; or, in the clear, per candidate
        its residual's minimum and maximum (``residuals``), or per value of an interval
        candidate's column its row count and minimum and maximum of the source
        (``ranges``); never a row."""
        schema = Schema.from_json(str(msg.config["schema"]))
        candidates = json.loads(str(msg.config["candidates"]))
        stage = str(msg.config.get("stage", "check"))
        # a deployment that rebuilds the site per message (Flower) has not parsed yet
        data, _ = parse_text_columns(self.data, {c.name: {"kind": c.kind} for c in schema.columns})
        data = na_labels_at(data, schema)  # its column of 'NA' alone, a label elsewhere
        if stage in ("moments", "totals"):  # sums over the rows: in the canonical
            # order, as configure's (the other stages' answers do not depend on it)
            data = canonical_rows(data)
        answer = answer_rules(data, schema, candidates, stage, site=self.name)
        if stage in ("moments", "totals"):  # summed over the sites: masked when secure
            if msg.config.get("secure", False):
                self._connect_secure(msg)
                if self._secure is None or not self._secure.connected:
                    raise ProtocolError(
                        f"{self.name}: secure {stage} were asked for, but this client was "
                        "not set up with secure aggregation"
                    )
                try:
                    answer = self._secure.mask(answer, f"rules|{stage}")
                except ValueError as exc:  # name the site and the stage, not only the value
                    raise ValueError(f"{self.name}, rule detection ({stage}): {exc}") from exc
            return Message("rules", {stage: answer})
        if stage == "residuals":  # per candidate its min and max here, in the clear
            return Message("rules", {"residuals": answer})
        if stage == "ranges":  # per candidate and value its count, min and max X, in the clear
            return Message("rules", {"ranges": answer})
        return Message("rules", {"pairs" if stage == "map" else "holds": answer})

    def _check_bounds(self, spec: ColumnSpec, values: np.ndarray) -> None:
        """Refuse values outside the schema's bounds: they would be clipped silently."""
        lo, hi = spec.bounds
        below, above = int(np.sum(values < lo)), int(np.sum(values > hi))
        if below or above:
            raise SchemaError(
                f"{self.name}: {below + above} of {values.size} values of column "
                f"{spec.name!r} lie outside the schema's bounds [{spec.lower}, {spec.upper}] "
                f"({below} below, {above} above; this site's range is "
                f'[{values.min():g}, {values.max():g}]); widen "lower"/"upper" in the '
                "schema file to cover the data: fits does not clip data"
            )

    def _configure(self, msg: Message) -> Message:
        """Configure round: connect secure aggregation, check the schema, accept (or
        adjust under the policy) the grids, M and the declared rows, continualize the
        rows, standardize them and set the response bandwidths."""
        self._connect_secure(msg)
        schema = Schema.from_json(str(msg.config["schema"]))
        if self._notes is None:  # rebuilt from its file after setup (Flower): parse as
            # setup did, so text numbers and dates with markers read the same
            declared = {c.name: {"kind": c.kind} for c in schema.columns}
            marked = {c.indicates for c in schema.columns if c.indicates is not None}
            for name in json.loads(str(msg.config.get("unmodelled", "[]"))):
                if name not in marked:  # a constant whose missingness is drawn: its
                    # markers ('?') read as missing as at setup, not kept as an id's text
                    declared[name] = {"kind": "id"}
            self.data, self._notes = parse_text_columns(self.data, declared)
        # a column of 'NA' alone here that the federation reads as a label (another
        # site's): the label put back (fits.core.schema.labels_of_na_only)
        self.data = na_labels_at(self.data, schema)
        # the rows in their canonical order, then shuffled by the site's seed, before
        # any draw from them (the lifts, the folds, early stopping's held-out rows) and
        # any sum over them: the same rows in any order answer alike, and no tie is
        # broken by the rows' values (docs/method.md, "Continualization")
        self.data = canonical_rows(self.data, shuffle=int(msg.config["seed"]))
        self._check_schema(schema, msg)
        self._check_kernel(schema, msg)
        grids = self._accept_grids(schema, msg)
        adjusted: list[str] = []
        n_total = self._accept_n_total(msg, adjusted)
        self._accept_rows(msg)
        self._schema = schema
        self.n_total = n_total
        self._residual_rules = json.loads(str(msg.config.get("residuals", "[]")))
        self._continualize(schema, int(msg.config["seed"]))
        self._site_seed = int(msg.config["seed"])  # also picks early stopping's held-out rows
        self._standardize(msg)
        bw_cont, bw_disc = self._response_bandwidths(msg, adjusted)
        self.grids = grids
        self._cache = _Cache()
        self._scores = boosting.ScoreCache()  # boost rounds: score only the new trees
        budget = self.policy.query_budget(self.rows_declared)
        applied = {
            "response_bandwidth": bw_cont,
            "discrete_response_bandwidth": bw_disc,
            "n_total": n_total,
            "rows": self.rows_declared,
            "queries_per_column": None if math.isinf(budget) else int(budget),
            "min_effective_rows": self.policy.min_effective_rows,
            "below_floor": self.policy.below_floor,
            "floor_scope": self.policy.floor_scope,
            "boosting_trees": self.policy.boosting_trees,
            "max_grid_size": self.policy.max_grid_size,
            "adjusted": adjusted,
        }
        return Message(
            "configure",
            {"n_rows": np.array([self.n_rows], dtype=np.int64)},
            {"policy": json.dumps(applied)},
        )

    def _connect_secure(self, msg: Message) -> None:
        """Derive the pairwise mask keys from the relayed public keys, if any."""
        if "secure_keys" not in msg.arrays:
            return
        if self._secure is None:
            raise ProtocolError(
                f"{self.name}: secure aggregation keys arrived, but the setup round "
                "did not ask for secure aggregation"
            )
        neighbours = int(msg.config.get("secure_neighbours", 0)) or None
        self._secure.connect(msg.arrays["secure_keys"], neighbours)

    def _check_schema(self, schema: Schema, msg: Message) -> None:
        """Refuse a schema that does not match this site's columns or its text markers."""
        missing = [
            c.name for c in schema.columns if c.indicates is None and c.name not in self.data
        ]
        if missing:
            raise SchemaError(
                f"{self.name}: column(s) {missing} of the schema are missing here; every "
                "client must hold every column"
            )
        unmodelled = set(json.loads(str(msg.config.get("unmodelled", "[]"))))  # id, constant
        extra = [c for c in self.data.columns if c not in schema.names and c not in unmodelled]
        if extra:
            raise SchemaError(
                f"{self.name}: column(s) {extra} are not in the schema; drop them or add them"
            )
        for name, note in (self._notes or {}).items():
            if name in schema.names and note["n_markers"] and not schema[name].missing:
                named = ", ".join(repr(k) for k in note["markers"])
                raise SchemaError(
                    f"{self.name}: column {name!r} holds text ({named}: {note['n_markers']} "
                    f"value(s)) among its {note['as']}s, read as missing, but the schema "
                    'does not expect missing values; set "missing": true for the column in '
                    "the schema, or fix the values"
                )

    def _check_kernel(self, schema: Schema, msg: Message) -> None:
        """Refuse a run in which this site's own kernel settings would do nothing
        (:func:`~fits.core.kernels.check_kernel_settings`), with what configure tells the
        site: the engine's schema (kinds, chain order, indicators) and the columns not
        drawn (identifiers and the columns affine rules set, in one list).  Which
        columns are boosted or set by a sum rule the site is not told."""
        unmodelled = json.loads(str(msg.config.get("unmodelled", "[]")))
        try:
            check_kernel_settings(self.kernel, schema, unmodelled=unmodelled)
        except ValueError as exc:
            text = str(exc)
            key, option = (
                ("column-penalties", "--column-penalty")
                if text.startswith("column_penalties[")
                else ("relevance", "--relevance")
            )
            raise PolicyError(
                f"{self.name} refused the configuration: its kernel's {text}. This is the "
                f"site's own kernel setting: change it or leave it out there (on Flower, "
                f"its node config {key}, which fits federate site {option} writes) and "
                "run again"
            ) from None

    def _accept_grids(self, schema: Schema, msg: Message) -> dict[str, np.ndarray]:
        """The request's grids, refused if one exceeds the policy's max_grid_size."""
        grids = {
            name[5:]: np.asarray(a, dtype=float)
            for name, a in msg.arrays.items()
            if name.startswith("grid:")
        }
        big = {c: g.size for c, g in grids.items() if g.size > self._grid_limit(schema, c)}
        if big:
            raise PolicyError(
                f"{self.name} refused the configuration: grid(s) {big} exceed its "
                f"{self.policy.max_grid_size} points per column (site policy max_grid_size; "
                "a discrete column may have two per category)"
            )
        return grids

    def _accept_n_total(self, msg: Message, adjusted: list[str]) -> int:
        """M as the site takes it: refused below its own rows, capped by the policy."""
        n_total = int(msg.config["n_total"])
        if n_total < self.n_rows:
            raise PolicyError(
                f"{self.name} refused the configuration: the coordinator says the "
                f"federation holds M={n_total} rows, fewer than this site's own "
                f"{self.n_rows}"
            )
        cap = self.policy.max_federation_ratio * self.n_rows
        if n_total > cap:
            adjusted.append(
                f"M={n_total} taken as {int(cap)} (max_federation_ratio="
                f"{self.policy.max_federation_ratio:g} x {self.n_rows} own rows)"
            )
            n_total = int(cap)
        return n_total

    def _accept_rows(self, msg: Message) -> None:
        """Set :attr:`rows_declared` (the query budget's base); refuse a declaration
        above the policy's ``max_rows`` here, at configure, before any query of those
        rows (a capped budget would refuse the draw's first large request instead,
        naming neither the limit nor the fix)."""
        declared = int(msg.config.get("rows", 0))
        limit = self.policy.max_rows
        if limit is not None and declared > limit:
            raise PolicyError(
                f"{self.name} refused the configuration: the coordinator declared "
                f"{declared} synthetic rows for this run (its draws so far included), more "
                f"than the {limit} this site's policy serves (max_rows = {limit}). Ask for "
                f"at most {limit} rows in all (fits synthesize --rows {limit}), or have "
                f"this site raise max_rows in its policy (its --policy file, e.g. "
                f"'{{\"max_rows\": {declared}}}'; Python: SitePolicy(max_rows={declared}))"
            )
        self.rows_declared = declared

    def _modelled(self, schema: Schema) -> pd.DataFrame:
        """The table the engine models as responses: each column a near-linear rule
        draws as its residual (configure's ``residuals``: column, of, slope, intercept)
        replaced by ``y - (slope x + intercept)`` (:func:`fits.core.rules.residuals`;
        missing where y is), whose bounds the engine's schema gives (docs/method.md,
        "Near-linear columns"; as a covariate the column stays itself:
        :meth:`_continualize`)."""
        data = self.data
        for rule in getattr(self, "_residual_rules", []):
            y, x = str(rule["column"]), str(rule["of"][0])
            values = [self._column_numbers(schema, rule), self._numbers(schema, x)]
            r = residuals(values[0], values[1], float(rule["slope"]), float(rule["intercept"]))
            data = data.assign(**{y: r})
        return data

    def _continualize(self, schema: Schema, seed: int) -> None:
        """The continualized table in chain order (sec. 4.1-4.2), its codes and validity.

        A near-linear column (configure's ``residuals``) is the response of its own
        conditional CDF as its residual R (:attr:`_residual_responses`, continualized
        within the rule's bounds), but every later column's covariate as the column Y
        itself (a missing value: the rule's ``fill``, Y's lower bound, as without the
        rule), so that the later columns' conditionals are those without the rule."""
        specs = schema.ordered()
        self.columns = [s.name for s in specs]
        self.encoders = [Encoder(s) for s in specs]
        self.z, self.codes, self.valid = continualize(  # native units, chain order
            self._modelled(schema),
            schema,
            self.columns,
            np.random.default_rng(seed),
            client=self.name,
            check_bounds=self._check_bounds,
        )
        #: Per chain position of a near-linear column, its residual R (the response of
        #: its conditional CDF); ``z`` holds the column itself there (the covariate)
        self._residual_responses: dict[int, np.ndarray] = {}
        for rule in getattr(self, "_residual_rules", []):
            name = str(rule["column"])
            j = self.columns.index(name)
            y = self._column_numbers(schema, rule)
            self._residual_responses[j] = self.z[:, j].copy()
            fill = float(rule.get("fill", 0.0))
            self.z[:, j] = np.where(np.isnan(y), fill, y)

    def _numbers(self, schema: Schema, name: str) -> np.ndarray:
        """Column ``name`` of this site's table as float64 (NaN where missing), read by
        its spec in ``schema``."""
        return Encoder(schema[name]).to_numeric(self.data[name], client=self.name)

    def _column_numbers(self, schema: Schema, rule: Mapping[str, Any]) -> np.ndarray:
        """A near-linear rule's column Y as numbers: the engine's spec of Y is its
        residual's (float), so a datetime Y (the rule's ``datetime``, ``tz``) is read by
        a datetime spec, as seconds since 1970 UTC like every datetime column."""
        name = str(rule["column"])
        if not rule.get("datetime"):
            return self._numbers(schema, name)
        spec = replace(schema[name], dtype="datetime", tz=rule.get("tz"))
        return Encoder(spec).to_numeric(self.data[name], client=self.name)

    def _response(self, j: int) -> np.ndarray:
        """Column j's values as the response of its conditional CDF: a near-linear
        column's residual, any other column's ``z`` (:meth:`_continualize`)."""
        return self._residual_responses.get(j, self.z[:, j])

    def _standardize(self, msg: Message) -> None:
        """The kernel's standardization (the site's own, or a common one) and centring."""
        z = self.z
        if "scale_mean" in msg.arrays:  # a common scaling, e.g. for the pooled check
            self.loc = np.asarray(msg.arrays["scale_mean"], dtype=float)
            self.scale = np.asarray(msg.arrays["scale_sd"], dtype=float)
        else:
            self.loc = z.mean(axis=0)
            sd = z.std(axis=0)
            for j, enc in enumerate(self.encoders):  # a trimmed sd: one outlier does not
                if not enc.spec.is_discrete:  # take the covariate out of the distances
                    sd[j] = covariate_scale(z[:, j])
            self.scale = np.where(sd > 0, sd, 1.0)  # locally constant column: sd 1
        self.center = z.mean(axis=0)  # numerical centring of the native design

    def _response_bandwidths(self, msg: Message, adjusted: list[str]) -> tuple[float, float]:
        """Set the response bandwidth of every row and column (METHOD.md), each raised to
        the policy's floor; returns the (continuous, discrete) factors applied."""
        bw_cont = float(msg.config.get("response_bandwidth", 0.05))
        bw_disc = float(msg.config.get("discrete_response_bandwidth", 0.05))
        floors = (
            ("response_bandwidth", bw_cont, self.policy.min_response_bandwidth),
            (
                "discrete_response_bandwidth",
                bw_disc,
                self.policy.min_discrete_response_bandwidth,
            ),
        )
        for what, asked, floor in floors:
            if not asked >= floor:
                adjusted.append(f"{what}={asked:g} raised to the site's floor {floor:g}")
        bw_cont = max(bw_cont, self.policy.min_response_bandwidth)
        bw_disc = max(bw_disc, self.policy.min_discrete_response_bandwidth)
        z, valid, codes = self.z, self.valid, self.codes
        self.wz = np.empty(z.shape)
        for j, enc in enumerate(self.encoders):
            if enc.spec.is_discrete:
                self.wz[:, j] = bw_disc * enc.widths[codes[:, j]]
            else:
                self.wz[:, j] = bw_cont * response_scale(self._response(j)[valid[:, j]])
        return bw_cont, bw_disc

    def _grid_limit(self, schema: Schema, column: str) -> int:
        """Most grid points the policy allows for a column: ``max_grid_size``, or two per
        category of a discrete column (the mass grid's), whichever is larger."""
        limit = self.policy.max_grid_size
        if column in schema.names:
            spec = schema[column]
            if spec.is_discrete:
                limit = max(limit, 2 * spec.n_levels)
        return limit

    # ------------------------------------------------------------------ helpers
    def _position(self, msg: Message) -> int:
        column = str(msg.config["column"])
        if column not in self.columns:
            raise ProtocolError(f"{self.name}: unknown column {column!r}")
        return self.columns.index(column)

    def _response_matrix(self, j: int) -> np.ndarray:
        """Phi((z_l - y_i) / w_i) for every local row i and grid point l (cached)."""
        if self._cache.phi is None or self._cache.phi[0] != j:
            grid = self.grids[self.columns[j]]
            y = self._response(j)
            t = (grid[None, :] - y[:, None]) / self.wz[:, j][:, None]
            self._cache.phi = (j, response_cdf_kernel(t))
        return self._cache.phi[1]

    def _response_parts(self, j: int) -> tuple[np.ndarray, sparse.csr_matrix]:
        """Phi((z_l - y_i) / w_i) split as step + band, for neighbour-list step 2 (cached).

        ``Phi(t) = H(t) + (Phi(t) - H(t))`` with H the unit step; the second term is
        below 1e-19 for |t| > 9, so it is kept only on the band |t| <= 9 around each
        y_i (a sparse matrix) and the step part becomes a cumulative sum.  Returns the
        first grid index at or above each y_i and the band matrix.
        """
        if self._cache.band is None or self._cache.band[0] != j:
            grid = self.grids[self.columns[j]]
            y, w = self._response(j), self.wz[:, j]
            first = np.searchsorted(grid, y, side="left")
            lo = np.searchsorted(grid, y - _BAND * w, side="left")
            hi = np.searchsorted(grid, y + _BAND * w, side="right")
            width = int(max(1, (hi - lo).max()))
            cols = lo[:, None] + np.arange(width)[None, :]
            keep = cols < np.minimum(hi, grid.size)[:, None]
            cols_k = np.where(keep, cols, 0)
            t = (grid[cols_k] - y[:, None]) / w[:, None]
            vals = response_cdf_kernel(t) - (cols_k >= first[:, None])
            rows = np.broadcast_to(np.arange(y.size)[:, None], cols.shape)
            band = sparse.csr_matrix(
                (vals[keep], (rows[keep], cols_k[keep])), shape=(y.size, grid.size)
            )
            self._cache.band = (j, first, band)
        return self._cache.band[1], self._cache.band[2]

    def _prepared(self, d: int, relevance: np.ndarray | None | object = _ANY) -> _Prefix:
        """Per-prefix data: standardized covariates, penalties, KD-tree (cached).

        ``relevance`` (the kernel's weights for this response, :meth:`_relevance`)
        multiplies the standardized covariates, and so the neighbour indexes; the
        default takes the prefix as cached (for what does not depend on it)."""
        prefix = self._cache.prefix
        if prefix is None or prefix.d != d:
            prefix = _Prefix(d, (self.z[:, :d] - self.loc[:d]) / self.scale[:d])
            self._cache.prefix = prefix
        if relevance is not _ANY:
            key = None if relevance is None else np.asarray(relevance, dtype=float).tobytes()
            if key != prefix.relevance:  # other weights: other distances, other indexes
                hbar = (self.z[:, :d] - self.loc[:d]) / self.scale[:d]
                prefix.hbar = hbar if relevance is None else hbar * np.asarray(relevance)
                prefix.relevance, prefix.kdtree, prefix.brute = key, None, None
        return prefix

    def _relevance_scale(self, d: int, kernel: Kernel) -> np.ndarray:
        """The standardization of the first d columns with the relevance weights of
        response d folded in: sd / a (infinite where a = 0: that coordinate is 0)."""
        relevance = self._relevance(d, kernel)
        if relevance is None:
            return self.scale[:d]
        with np.errstate(divide="ignore"):
            return self.scale[:d] / relevance

    def _relevance(self, d: int, kernel: Kernel) -> np.ndarray | None:
        """The kernel's relevance weights of the first d engine columns for the
        response d (:meth:`~fits.core.kernels.Kernel.relevance_for`; None: all 1)."""
        if d >= len(self.columns) or not kernel.relevance:
            return None
        indicates = {e.spec.name: e.spec.indicates for e in self.encoders if e.spec.indicates}
        return kernel.relevance_for(self.columns[d], self.columns[:d], indicates)

    def _tree(
        self, d: int, method: str = "kdtree", relevance: np.ndarray | None = None
    ) -> tuple[cKDTree | NearestNeighbors | None, np.ndarray | None]:
        """Neighbour index over the rows usable as responses for column d (cached).

        Returns the index (a ``cKDTree`` or a fitted brute-force ``NearestNeighbors``;
        None if no row is usable) and the rows it holds (None = all).
        """
        prep = self._prepared(d, relevance)
        if not prep.rows_known:
            prep.rows = None if self.valid[:, d].all() else np.flatnonzero(self.valid[:, d])
            prep.rows_known = True
        if prep.rows is not None and not prep.rows.size:
            return None, prep.rows
        if method == "brute":
            if prep.brute is None:
                from sklearn.neighbors import NearestNeighbors  # only when a scan is needed

                points = prep.hbar if prep.rows is None else prep.hbar[prep.rows]
                prep.brute = NearestNeighbors(algorithm="brute").fit(points)
            return prep.brute, prep.rows
        if prep.kdtree is None:
            from scipy.spatial import cKDTree

            points = prep.hbar if prep.rows is None else prep.hbar[prep.rows]
            prep.kdtree = cKDTree(points, leafsize=64, balanced_tree=False)
        return prep.kdtree, prep.rows

    def _substitute(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Midpoint substitution (eq. 24); returns queries and their category codes."""
        x = np.array(queries, dtype=float, copy=True)
        qcodes = np.full(x.shape, -1, dtype=np.int64)
        for j in range(x.shape[1]):
            enc = self.encoders[j]
            if enc.spec.is_discrete:
                qcodes[:, j] = enc.ceil(x[:, j])
                x[:, j] = enc.midpoints[qcodes[:, j]]
        return x, qcodes

    def _scheme(self, msg: Message) -> Kernel:
        return self._kernel_of(str(msg.config.get("scheme", "own")))

    def _kernel_of(self, scheme: str) -> Kernel:
        """The kernel of a request's ``scheme``: ``"own"``, or ``"knn"``, this site's
        KNN kernel (its own, or one with its own penalties and relevance weights)."""
        if scheme == "knn" and not isinstance(self.kernel, KNNKernel):
            k = self.kernel
            return KNNKernel(
                k.ordinal_penalty, k.nominal_penalty, k.column_penalties, relevance=k.relevance
            )
        return self.kernel

    def _smoothed(self, kernel: Kernel, msg: Message, d: int) -> Kernel:
        """The kernel with the request's smoothing (config ``sharpness``, ``reach``: the
        coordinator's per-column choice, :mod:`fits.core.tuning`) applied."""
        try:
            relevance = (
                json.loads(str(msg.config["relevance"])) if "relevance" in msg.config else ()
            )
            smoothing = Smoothing(
                float(msg.config.get("sharpness", 1.0)),
                float(msg.config.get("reach", 1.0)),
                relevance,
            )
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"{self.name}: {exc}") from None
        return self._apply_smoothing(kernel, smoothing, d)

    def _apply_smoothing(self, kernel: Kernel, smoothing: Smoothing, d: int) -> Kernel:
        """``smoothed_kernel`` for response d; relevance weights must name covariates
        (columns before the response, or the columns their indicators stand for)."""
        if smoothing.relevance:
            known = {e.spec.name for e in self.encoders[:d]}
            known |= {e.spec.indicates for e in self.encoders[:d] if e.spec.indicates}
            wrong = [c for c, _ in smoothing.relevance if c not in known]
            if wrong:
                raise ProtocolError(
                    f"{self.name}: relevance weights for {wrong} in the kernel of "
                    f"{self.columns[d]!r}, which are not columns before it"
                )
        discrete = {
            self.encoders[j].spec.name: self.encoders[j].spec.kind
            for j in range(d)
            if self.encoders[j].spec.is_discrete
        }
        return smoothed_kernel(
            kernel, smoothing, discrete, n_total=self.n_total, d=d, response=self.columns[d]
        )

    # ------------------------------------------------------------------ tuning round
    def _tune(self, msg: Message) -> Message:
        """Held-out scores of candidate smoothings (:func:`fits.core.tuning.heldout_scores`).

        Config: ``columns`` and ``scores`` (JSON lists, one score name per column),
        ``candidates`` (JSON list of [sharpness, reach]), ``folds``, ``rows`` (held-out
        rows over the federation: this site scores its share, ``ceil(rows m_k / M)``),
        ``seed`` (this site's fold split), ``mass_offset``, ``ridge``, ``collinearity``;
        optional, per column, ``designs`` (its local-linear design's covariates) and
        ``schemes`` (``"own"`` or ``"knn"``: the scheme its draws ask for, so a
        missingness indicator is scored under the KNN kernel it is drawn with).
        Replies the per-candidate sums ``scores`` (columns x candidates) and the rows
        scored per column; a column with fewer scored rows than the policy's
        effective-rows floor k is abstained from (zeros).  Each column may be scored
        for at most the policy's ``tuning_candidates`` candidates over the run.
        """
        c = msg.config
        try:
            columns = [str(v) for v in json.loads(str(c["columns"]))]
            names = [str(v) for v in json.loads(str(c["scores"]))]
            candidates = [Smoothing.from_value(v) for v in json.loads(str(c["candidates"]))]
            folds = int(c.get("folds", 5))
            rows = int(c["rows"])
            seed = int(c["seed"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"{self.name}: bad tune request ({exc})") from None
        designs = None
        if "designs" in c:  # per column: the covariates of its local-linear design
            try:
                designs = [
                    None if v is None else np.asarray(v, dtype=np.int64)
                    for v in json.loads(str(c["designs"]))
                ]
            except (TypeError, ValueError) as exc:
                raise ProtocolError(f"{self.name}: bad tune designs ({exc})") from None
            if len(designs) != len(columns):
                raise ProtocolError(f"{self.name}: tune needs one design per column")
        schemes = ["own"] * len(columns)
        if "schemes" in c:  # per column: the kernel scheme its draws ask for
            try:
                schemes = [str(v) for v in json.loads(str(c["schemes"]))]
            except (TypeError, ValueError) as exc:
                raise ProtocolError(f"{self.name}: bad tune schemes ({exc})") from None
            if len(schemes) != len(columns) or any(v not in ("own", "knn") for v in schemes):
                raise ProtocolError(f"{self.name}: tune needs one scheme, own or knn, per column")
        if len(names) != len(columns) or any(n not in SCORES for n in names):
            raise ProtocolError(f"{self.name}: tune needs one score of {SCORES} per column")
        if folds < 2 or rows < 1 or not candidates:
            raise ProtocolError(f"{self.name}: tune needs folds >= 2, rows >= 1, candidates")
        limit = self.policy.tuning_candidates
        for column in columns:
            used = self._asked.get(f"tune:{column}", 0)
            if used + len(candidates) > limit:
                raise PolicyError(
                    f"{self.name} refused to score {len(candidates)} smoothings for column "
                    f"{column!r}: {used} of its {limit} per column are spent (site policy "
                    "tuning_candidates)"
                )
        for column in columns:
            key = f"tune:{column}"
            self._asked[key] = self._asked.get(key, 0) + len(candidates)
        rng = np.random.default_rng(seed)
        m = self.n_rows
        perm = rng.permutation(m)
        fold_of = np.empty(m, dtype=np.int64)
        fold_of[perm] = np.arange(m) % folds
        share = math.ceil(rows * m / max(self.n_total, m))
        scores = np.zeros((len(columns), len(candidates)))
        counted = np.zeros(len(columns))
        abstained = 0
        offset = float(c.get("mass_offset", 0.25))
        for k, (column, name) in enumerate(zip(columns, names, strict=True)):
            j = self.columns.index(column) if column in self.columns else -1
            if j < 1:
                raise ProtocolError(f"{self.name}: cannot tune column {column!r}")
            usable = self.valid[:, j]
            order = perm[usable[perm]]
            take = share
            kernel = self._kernel_of(schemes[k])
            if isinstance(kernel, GaussianKernel):  # dense weights: bounded work
                floor = math.ceil(max(self.policy.min_effective_rows, 1))
                take = min(share, max(floor, GAUSSIAN_PAIRS // max(order.size, 1)))
            scored = order[:take]
            if scored.size < max(self.policy.min_effective_rows, 1):
                abstained += 1
                continue
            x, qcodes = self._substitute(self.z[:, :j])
            target = self._response(j) if name == "crps" else self.codes[:, j].astype(float)
            # candidates with the same relevance weights share one neighbour search
            groups: dict[tuple[tuple[str, float], ...], list[int]] = {}
            for ci, cand in enumerate(candidates):
                groups.setdefault(cand.relevance, []).append(ci)
            for relevance, members in groups.items():
                weighted = self._apply_smoothing(kernel, Smoothing(relevance=relevance), j)
                disc = self._discrete_covariates(j, weighted)
                cols = [i for i, _, _ in disc]
                total, n_done = heldout_scores(
                    self.z[:, :j],
                    x,
                    self._response_matrix(j),
                    target,
                    loc=self.loc[:j],
                    scale=self._relevance_scale(j, weighted),
                    codes=self.codes[:, cols],
                    qcodes=qcodes[:, cols],
                    kinds=[kind for _, kind, _ in disc],
                    penalties=[pen for _, _, pen in disc],
                    usable=usable,
                    folds=fold_of,
                    scored=scored,
                    grid=self.grids[column],
                    score=name,
                    mass_offset=offset,
                    kernel=weighted,
                    candidates=[
                        Smoothing(candidates[i].sharpness, candidates[i].reach) for i in members
                    ],
                    n_total=self.n_total,
                    min_neighbours=self.policy.min_effective_rows,
                    ridge=float(c.get("ridge", 1e-8)),
                    collinearity=float(c.get("collinearity", 0.0)),
                    design=None if designs is None else designs[k],
                )
                scores[k, members], counted[k] = total, n_done
        self._abstained = np.arange(abstained) if abstained else None
        reply_config: dict[str, ConfigValue] = {"abstained": abstained} if abstained else {}
        return Message("tune", {"scores": scores, "rows": counted}, reply_config)

    # ------------------------------------------------------------------ kernel weights
    def _weights(
        self,
        x: np.ndarray,
        qcodes: np.ndarray,
        kernel: Kernel,
        widen: float = 1.0,
        design: np.ndarray | None = None,
    ) -> _Weights:
        """The kernel weights of a batch of queries; ``widen`` = t > 1 widens the kernel.

        ``design`` (covariate positions, None: all) is the local-linear design the
        Hessians of neighbour-list weights are summed in (:attr:`_Weights.design`); it
        never changes the weights.

        The widened kernel (the site's answer to a query under its effective-rows floor,
        :meth:`_floor`) reaches further by t in every respect: a Gaussian site's
        bandwidth is t w_x, a KNN site takes ``max(ceil(t c_k), ceil(k))`` neighbours
        (at most its usable rows), and the category penalties of eq. 26 are relaxed to
        gamma^(1/t) and lambda / t, so that the weights tend to equal weights on every
        usable row as t grows.  Each query's widened weights are then multiplied by
        :meth:`_widening_scale`, so that the site's weight in the pooled fit stays what
        its own kernel gives it (n_eff does not change with a factor).
        """
        d = x.shape[1]
        xbar = (x - self.loc[:d]) / self.scale[:d]
        relevance = self._relevance(d, kernel)
        if relevance is not None:  # the kernel's relevance weights (Kernel.relevance)
            xbar = xbar * relevance
        if isinstance(kernel, KNNKernel):
            wts = self._knn_weights(x, xbar, qcodes, kernel, widen, design)
        elif isinstance(kernel, GaussianKernel):
            wts = self._gaussian_weights(x, xbar, qcodes, kernel, widen)
            wts.design = design
        else:
            raise TypeError(f"{self.name}: unsupported kernel {kernel!r}")
        if widen != 1.0 and NORMALIZE_WIDENED:
            wts.scale(self._widening_scale(d, qcodes, kernel, widen, wts))
        return wts

    def _widening_scale(
        self, d: int, qcodes: np.ndarray, kernel: Kernel, widen: float, wts: _Weights
    ) -> np.ndarray:
        """The factor that gives widened weights the total mass of the site's own kernel.

        A kernel's total over its support, as a density estimate normalizes it: t^(-d)
        for the Gaussian bandwidth t w_x in d standardized coordinates, c_k / c for a
        KNN site's c neighbours instead of c_k (its weights sum to about c times a
        constant), and per discrete covariate Z(rho) / Z(rho_t), with Z the penalty
        summed over the column's categories at the query's category:
        ``1 + (L - 1) gamma`` for a nominal column of L categories,
        ``sum_g exp(-lambda |g - g_x|)`` for an ordinal one.  It depends on t, the query
        and the schema only, never on the site's rows.
        """
        b = len(qcodes)
        if isinstance(kernel, KNNKernel):  # c_k (at most the usable rows) over c
            usable = int(self.valid[:, d].sum())
            c_own = min(kernel.neighbors(self.n_rows, self.n_total, d), usable)
            factor = np.full(b, c_own / max(wts.w.shape[1], 1))
        else:  # Gaussian: the bandwidth t w_x in d coordinates (those of weight > 0:
            # along a coordinate of relevance 0 the kernel is flat, its mass unchanged)
            relevance = self._relevance(d, kernel)
            dims = d if relevance is None else int(np.count_nonzero(relevance))
            factor = np.full(b, widen ** (-float(dims)))
        own = self._discrete_covariates(d, kernel)
        wide = self._discrete_covariates(d, kernel, widen)
        for (j, kind, pen), (_, _, pen_t) in zip(own, wide, strict=True):
            levels = self.encoders[j].spec.n_levels
            if kind == "nominal":
                factor *= (1.0 + (levels - 1) * pen) / (1.0 + (levels - 1) * pen_t)
            else:
                gap = np.abs(np.arange(levels)[None, :] - qcodes[:, j][:, None])
                factor *= np.exp(-pen * gap).sum(axis=1) / np.exp(-pen_t * gap).sum(axis=1)
        return factor

    def _discrete_covariates(
        self, d: int, kernel: Kernel, widen: float = 1.0
    ) -> list[tuple[int, str, float]]:
        """(column, kind, penalty) of the discrete covariates, with the kernel's
        relevance weights a for response d (rate times a: lambda_q a, gamma_q^a);
        relaxed by ``widen``."""
        out = []
        relevance = self._relevance(d, kernel)
        for j in range(d):
            spec = self.encoders[j].spec
            if spec.is_discrete:
                pen = kernel.penalty_for(spec.name, spec.kind)
                if relevance is not None:
                    a = float(relevance[j])
                    # gamma_q^a at least the smallest normal float: it underflows to 0
                    # from a of a few hundred, and the rate -log(gamma) must stay finite
                    pen = max(pen**a, _TINY) if spec.kind == "nominal" else pen * a
                if widen != 1.0:
                    pen = pen ** (1.0 / widen) if spec.kind == "nominal" else pen / widen
                out.append((j, spec.kind, pen))
        return out

    def _gaussian_weights(
        self,
        x: np.ndarray,
        xbar: np.ndarray,
        qcodes: np.ndarray,
        kernel: GaussianKernel,
        widen: float = 1.0,
    ) -> _Weights:
        """Dense weights exp(-|xbar - hbar|^2 / 2w^2) * rho, by one matrix product.

        Every term of log w is bilinear in a feature of the query and a feature of the
        row: squared distances, nominal matches (one-hot . one-hot) and ordinal rank
        gaps (|a - b| = |T(a) - T(b)|^2 with the thermometer code T), so
        ``log W = A_x A_h' + row + col``.
        """
        d = x.shape[1]
        w = kernel.bandwidth_for(self.n_total, d) * widen
        hbar = self._prepared(d, self._relevance(d, kernel)).hbar
        ax = [xbar / (w * w)]
        ah = [hbar]
        row = -0.5 * np.einsum("ij,ij->i", xbar, xbar) / (w * w)
        col = -0.5 * np.einsum("ij,ij->i", hbar, hbar) / (w * w)
        for j, kind, pen in self._discrete_covariates(d, kernel, widen):
            levels = self.encoders[j].spec.n_levels
            hc, qc = self.codes[:, j], qcodes[:, j]
            if kind == "nominal":
                if pen == 1.0:
                    continue
                lg = np.log(pen)
                ax.append(-lg * _one_hot(qc, levels))
                ah.append(_one_hot(hc, levels))
                row = row + lg
            else:
                if pen == 0.0:
                    continue
                ax.append(2.0 * pen * _thermometer(qc, levels))
                ah.append(_thermometer(hc, levels))
                row = row - pen * qc
                col = col - pen * hc
        logw = np.hstack(ax) @ np.hstack(ah).T
        logw += row[:, None]
        logw += col[None, :]
        np.exp(logw, out=logw)
        if not self.valid[:, d].all():  # rows missing this response take no part
            logw *= self.valid[:, d][None, :]
        return _Weights(logw, x)

    def _knn_weights(
        self,
        x: np.ndarray,
        xbar: np.ndarray,
        qcodes: np.ndarray,
        kernel: KNNKernel,
        widen: float = 1.0,
        design: np.ndarray | None = None,
    ) -> _Weights:
        """Weights on each query's c_k nearest rows, and the Hessians S_k (eq. 5) with them.

        The neighbour lists are processed in blocks of queries small enough to stay in
        cache (:meth:`_knn_blocks`); the Hessian is summed in the same pass, in the
        design ``design`` (covariate positions; None: all), while the kernel argument
        uses every covariate.
        """
        d = x.shape[1]
        b = len(x)
        p = d + 1 if design is None else 1 + int(design.size)
        method = kernel.search_method(d)
        relevance = self._relevance(d, kernel)
        index, rows = self._tree(d, method, relevance)
        if index is None:  # no usable row here for this column: contribute nothing
            nothing = _Weights(np.zeros((b, 1)), x, np.zeros((b, 1), dtype=np.int64), design=design)
            nothing.s = np.zeros((b, p, p))
            return nothing
        start = time.perf_counter()
        c = kernel.neighbors(self.n_rows, self.n_total, d)
        if widen != 1.0:
            c = max(math.ceil(c * widen - 1e-9), math.ceil(self.policy.min_effective_rows))
        if not hasattr(index, "kneighbors"):  # a cKDTree (else sklearn's brute force)
            c = min(c, index.n)
            dist, idx = index.query(xbar, k=c, eps=kernel.search_eps, workers=kernel.n_jobs)
        else:
            c = min(c, index.n_samples_fit_)
            dist, idx = index.kneighbors(xbar, n_neighbors=c)
        self.timings["neighbour_search"] += time.perf_counter() - start
        dist = dist.reshape(b, c)
        idx = idx.reshape(b, c)
        if rows is not None:
            idx = rows[idx]
        r = np.maximum(dist[:, -1], 1e-12)  # all neighbours on the query: equal weights
        # the kernel argument is the design's difference h_i - x on the standardized
        # scale, over eta r: (h_i - x) * factor with one factor per query and covariate
        inverse = 1.0 / self.scale[:d] if relevance is None else relevance / self.scale[:d]
        factor = inverse[None, :] / (kernel.eta * r)[:, None]
        disc = self._discrete_covariates(d, kernel, widen)
        prep = self._prepared(d, relevance)
        if disc:
            cols = [j for j, _, _ in disc]
            if prep.codes is None:
                prep.codes = np.ascontiguousarray(self.codes[:, cols], dtype=np.int16)
            codes = prep.codes
            nominal = np.array([kind == "nominal" for _, kind, _ in disc])
            rate = np.array([pen if kind == "ordinal" else -np.log(pen) for _, kind, pen in disc])
            ordinal_rate = np.where(nominal, 0.0, rate)
            nominal_rate = np.where(nominal, rate, 0.0)
            qc = qcodes[:, cols].astype(np.int16)
        wts = _Weights(np.empty((b, c)), x, idx)
        s = np.empty((b, p, p))
        ucols = None if design is None else np.concatenate([[0], design + 1])
        for lo, hi, u in self._knn_blocks(wts):
            arg = u[:, :, 1:] * factor[lo:hi, None, :]
            w = epanechnikov_product(arg, overwrite_input=True)
            if disc:  # category penalty rho (eq. 26): exp(-sum_q rate_q gap_q)
                gap = np.take(codes, idx[lo:hi], axis=0)
                gap -= qc[lo:hi, None, :]
                np.abs(gap, out=gap)
                penalty = gap @ ordinal_rate
                penalty += (gap != 0) @ nominal_rate
                np.negative(penalty, out=penalty)
                w *= np.exp(penalty, out=penalty)
            wts.w[lo:hi] = w
            if ucols is not None:  # the design's columns of U (the kernel took them all)
                u = np.take(u, ucols, axis=2)
            u_w = u * w[:, :, None]
            np.matmul(u_w.transpose(0, 2, 1), u, out=s[lo:hi])
        wts.s = s
        wts.design = design
        return wts

    def _knn_blocks(
        self, wts: _Weights, design: bool = False
    ) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield ``(lo, hi, U)``: the differences U_i = (1, h_i - x) of queries lo..hi-1.

        U has shape (hi - lo, c, d + 1), native units; with ``design``, only the
        columns of the weights' design (:attr:`_Weights.design`): (hi - lo, c, p).
        Blocks hold about ``_BLOCK_VALUES`` numbers, so the temporaries of the kernel
        and of both steps stay in cache (2-3x faster than one pass over a whole batch).
        """
        if wts.idx is None:
            raise TypeError("neighbour-list blocks need weights on neighbour lists")
        b, c = wts.idx.shape
        d = wts.x.shape[1]
        prep = self._prepared(d)
        if design and wts.design is not None:
            key = tuple(int(j) for j in wts.design)
            if prep.z1_design is None or prep.z1_design[0] != key:
                z1 = np.hstack([np.ones((self.n_rows, 1)), self.z[:, wts.design]])
                prep.z1_design = (key, z1)
            z1 = prep.z1_design[1]
            x1 = np.hstack([np.zeros((b, 1)), wts.x[:, wts.design]])
        else:
            if prep.z1 is None:  # (1, h): the gather then gives U with its column of ones
                prep.z1 = np.hstack([np.ones((self.n_rows, 1)), self.z[:, :d]])
            z1 = prep.z1
            x1 = np.hstack([np.zeros((b, 1)), wts.x])
        step = int(np.clip(_BLOCK_VALUES // (c * z1.shape[1]), 1, max(b, 1)))
        for lo in range(0, b, step):
            hi = min(b, lo + step)
            u = np.take(z1, wts.idx[lo:hi], axis=0)  # faster than z1[idx]
            u -= x1[lo:hi, None, :]
            yield lo, hi, u

    def _weights_for(self, msg: Message) -> _Weights:
        """Weights for a request's queries, reused between step 1 and step 2."""
        request = str(msg.config.get("request", ""))
        key = f"{request}|{msg.config['column']}|{msg.config.get('scheme', 'own')}"
        cached = self._cache.weights
        if request and cached is not None and cached[0] == key:
            return cached[1]
        x, qcodes, kernel, design = self._request_kernel(msg)
        weights = self._weights(x, qcodes, kernel, design=design)
        if self.policy.pools_floor:
            self._widen_as_asked(weights, x, qcodes, kernel, self._asked_widening(msg, len(x)))
        else:
            self._floor(weights, x, qcodes, kernel)
        e = self._weight_exponent(msg, len(x))
        if e is not None:  # secure aggregation: a common 2^e per query
            everything = np.arange(len(x))
            for rows, part in [(everything, weights), *(weights.groups or [])]:
                part.w = np.ldexp(part.w, e[rows][:, None])
                if part.s is not None:
                    part.s = np.ldexp(part.s, e[rows][:, None, None])
        if request:
            self._cache.weights = (key, weights)
        return weights

    def _request_kernel(self, msg: Message) -> tuple[np.ndarray, np.ndarray, Kernel, Any]:
        """A weight request's substituted queries, their category codes, the kernel (with
        the request's smoothing) and the local-linear design's covariates.

        Under a pooled floor (:attr:`SitePolicy.pools_floor`) a request without secure
        aggregation is refused: the floor then holds only for the sum over sites.
        """
        if self.policy.pools_floor and not msg.config.get("secure", False):
            raise PolicyError(
                f"{self.name} refused a plain {msg.type} request: its policy pools the "
                "effective-rows floor over the sites (floor_scope='pooled'), which holds "
                "only when the coordinator sees nothing but the sum; run with secure "
                "aggregation, or give the site floor_scope='site'"
            )
        queries = np.asarray(msg.arrays["queries"], dtype=float)
        d = self._position(msg)
        if queries.ndim != 2 or queries.shape[1] != d:
            raise ProtocolError(
                f"{self.name}: queries for column {self.columns[d]!r} need {d} columns, "
                f"got shape {queries.shape}"
            )
        design = design_covariates(msg.config, d)
        x, qcodes = self._substitute(queries)
        kernel = self._smoothed(self._scheme(msg), msg, d)
        return x, qcodes, kernel, design

    def _weight_exponent(
        self, msg: Message, b: int, shape: tuple[int, ...] = ()
    ) -> np.ndarray | None:
        """A secure request's ``weight_exponent``, checked (int32), or None: one integer
        per query, or ``(b, *shape)`` of them (a neff request: one per query and factor)."""
        if "weight_exponent" not in msg.arrays:
            return None
        exponent = np.asarray(msg.arrays["weight_exponent"])
        if exponent.shape != (b, *shape) or exponent.dtype.kind not in "iu":
            each = "per query" if not shape else "per query and factor"
            raise ProtocolError(
                f"{self.name}: weight_exponent needs one integer {each}, shape "
                f"{(b, *shape)}; got {exponent.dtype} {exponent.shape}"
            )
        return exponent.astype(np.int32)  # ldexp, not a factor: 2^1100 is no float

    # ------------------------------------------------------------------ pooled floor
    def _asked_widening(self, msg: Message, b: int) -> np.ndarray:
        """The request's per-query widening factors (``widen``), checked: each 0 (no
        answer), 1 (the site's own kernel) or one of :data:`WIDENING_STEPS`."""
        if "widen" not in msg.arrays:
            raise PolicyError(
                f"{self.name} refused a {msg.type} request without widening factors: its "
                "policy pools the effective-rows floor (floor_scope='pooled'), so every "
                "request carrying kernel weights needs the coordinator's factors from a "
                "neff round"
            )
        t = np.asarray(msg.arrays["widen"], dtype=float).reshape(-1)
        allowed = np.array((0.0, *WIDENING_LADDER))
        near = np.abs(t[:, None] - allowed[None, :]) <= 1e-9 * allowed[None, :]
        if np.shape(msg.arrays["widen"]) != (b,) or not near.any(axis=1).all():
            bad = t[~near.any(axis=1)][:3].tolist()
            raise ProtocolError(
                f"{self.name}: widen needs one factor per query ({b}), each 0, 1 or a power "
                f"of sqrt(2) up to 1024; got shape {np.shape(msg.arrays['widen'])}"
                + (f" and factors such as {bad}" if bad else "")
            )
        return allowed[np.argmax(near, axis=1)]

    def _widen_as_asked(
        self, wts: _Weights, x: np.ndarray, qcodes: np.ndarray, kernel: Kernel, t: np.ndarray
    ) -> None:
        """Apply the coordinator's common widening factors (pooled floor) to a batch.

        A query with factor t > 1 gets the weights of the site's own kernel widened by
        t (:meth:`_weights`, exactly as :meth:`_floor` widens); a factor of 0 means that
        no factor brought the pooled n_eff to k: the site contributes zeros for it.
        """
        zero = np.flatnonzero(t == 0.0)
        wide = np.flatnonzero(t > 1.0)
        for rows in (zero, wide):
            wts.w[rows] = 0.0
            if wts.s is not None:
                wts.s[rows] = 0.0
        groups = []
        for factor in np.unique(t[wide]):
            rows = wide[t[wide] == factor]
            groups.append((rows, self._weights(x[rows], qcodes[rows], kernel, factor, wts.design)))
        wts.groups = groups or None
        wts.widened, wts.widening = wide, t[wide]
        wts.abstained = zero

    def _neff(self, msg: Message) -> Message:
        """The pooled floor's round: per query, sum w and sum w^2 at widening factors.

        ``N[b, j] = (sum_i w_i, sum_i w_i^2)`` for query b under the site's own kernel
        widened by ``WIDENING_LADDER[ladder_start + j]`` (:meth:`_weights`, the weights
        its hessian answer would use), for ``j < ladder_steps``; zeros for queries the
        optional ``pending`` mask leaves out.  With secure aggregation the weights of
        query b at factor j are scaled by 2^weight_exponent[b, j] (n_eff does not change
        with a scale; it keeps tiny sums above the fixed point's resolution).  Summed
        over the sites (masked), these give the pooled n_eff = (sum w)^2 / sum w^2 at
        each factor, from which the coordinator picks each query's factor.  Answered
        only under ``floor_scope="pooled"``.
        """
        if not self.policy.pools_floor:
            raise PolicyError(
                f"{self.name} refused a neff request: its policy does not pool the "
                "effective-rows floor (floor_scope='site')"
            )
        x, qcodes, kernel, design = self._request_kernel(msg)
        b = len(x)
        start = int(msg.config.get("ladder_start", 0))
        steps = int(msg.config.get("ladder_steps", 1))
        if not (0 <= start and steps >= 1 and start + steps <= len(WIDENING_LADDER)):
            raise ProtocolError(
                f"{self.name}: a neff ladder must lie within the {len(WIDENING_LADDER)} "
                f"factors; got start {start}, steps {steps}"
            )
        pending = np.asarray(msg.arrays.get("pending", np.ones(b, dtype=np.uint8)))
        if pending.shape != (b,):
            raise ProtocolError(f"{self.name}: pending needs one flag per query")
        rows = np.flatnonzero(pending)
        e = self._weight_exponent(msg, b, (steps,))
        out = np.zeros((b, steps, 2))
        for j in range(steps):
            wts = self._weights(x[rows], qcodes[rows], kernel, WIDENING_LADDER[start + j], design)
            w = wts.w if e is None else np.ldexp(wts.w, e[rows, j][:, None])
            out[rows, j, 0] = w.sum(axis=1)
            out[rows, j, 1] = np.einsum("ij,ij->i", w, w)
        return Message("neff", {"N": out})

    # ------------------------------------------------------------------ the two steps
    def _hessian(self, msg: Message) -> Message:
        """Step 1: S_k(x) = sum_i w_i U_i U_i' with U_i = (1, h_i - x) (eq. 5).

        With a request ``design`` (:func:`~fits.federation.protocol.design_covariates`),
        U_i = (1, h_i[design] - x[design]): the local-linear fit in those covariates
        only, local-constant in the others (docs/method.md, "Design").

        Queries answered with a widened kernel (:meth:`_floor`) get their Hessians from
        their widened weights, group by group.
        """
        wts = self._weights_for(msg)
        d = self._position(msg)
        s = self._hessians(wts, d)
        for rows, part in wts.groups or ():
            s[rows] = self._hessians(part, d)
        return Message("hessian", {"S": s}, self._floor_report(wts))

    def _hessians(self, wts: _Weights, d: int) -> np.ndarray:
        """The packed upper triangles of S_k(x) (eq. 5), one row per query."""
        b, p = wts.x.shape[0], wts.p
        iu = np.triu_indices(p)
        if wts.idx is None:  # dense: raw moments by matrix products, then shift to x
            hc, xc = self._centred(wts)
            m0 = wts.w.sum(axis=1)
            m1 = wts.w @ hc
            ia, ib = np.triu_indices(p - 1)
            m2p = wts.w @ (hc[:, ia] * hc[:, ib])
            m2 = np.empty((b, p - 1, p - 1))
            m2[:, ia, ib] = m2p
            m2[:, ib, ia] = m2p
            s = np.empty((b, p, p))
            s[:, 0, 0] = m0
            s1 = m1 - m0[:, None] * xc
            s[:, 0, 1:] = s1
            s[:, 1:, 0] = s1
            s[:, 1:, 1:] = (
                m2
                - m1[:, :, None] * xc[:, None, :]
                - xc[:, :, None] * m1[:, None, :]
                + m0[:, None, None] * xc[:, :, None] * xc[:, None, :]
            )
            # sum_i w_i (h_ij - x_j)^2 >= 0 exactly; the shift from raw moments can leave
            # a rounding error below 0 where every weighted row sits at x_j (a point
            # mass), which would make the fixed16 codec's sqrt(S_jj S_kk) NaN
            k = np.arange(1, p)
            s[:, k, k] = np.maximum(s[:, k, k], 0.0)
        else:  # neighbour lists: summed with the weights (see _knn_weights)
            if wts.s is None:
                raise TypeError("weights on neighbour lists come with their Hessians")
            s = wts.s
        return s[:, iu[0], iu[1]]

    def _centred(self, wts: _Weights) -> tuple[np.ndarray, np.ndarray]:
        """Dense weights: the rows' and the queries' design covariates, centred."""
        cov = wts.covariates
        return self.z[:, cov] - self.center[cov], wts.x[:, cov] - self.center[cov]

    def _floor_report(self, wts: _Weights) -> dict[str, ConfigValue]:
        """The reply config that says for how many queries this site widened its kernel
        and from how many it abstained (the effective-rows floor)."""
        self._abstained = wts.abstained
        out: dict[str, ConfigValue] = {}
        if wts.widened is not None and wts.widening is not None and wts.widened.size:
            self._widened = (wts.widened, wts.widening)
            out["widened"] = int(wts.widened.size)
        if wts.abstained is not None and wts.abstained.size:
            out["abstained"] = int(wts.abstained.size)
        return out

    def _cdf(self, msg: Message) -> Message:
        """Step 2: alpha_i = w_i q'U_i (eq. 8) and F_k(z) = sum_i alpha_i K(...) (eq. 9).

        Queries answered with a widened kernel use their widened weights, as in step 1.
        """
        wts = self._weights_for(msg)
        self._cache.weights = None  # step 2 closes the request
        d = self._position(msg)
        q = np.asarray(msg.arrays["q"], dtype=float)
        if q.shape != (wts.x.shape[0], wts.p):
            raise ProtocolError(
                f"{self.name}: q has shape {q.shape}, expected ({len(wts.x)}, {wts.p})"
            )
        f = self._cdfs(wts, q, d)
        for rows, part in wts.groups or ():
            f[rows] = self._cdfs(part, q[rows], d)
        return Message("cdf", {"F": np.ascontiguousarray(f)}, self._floor_report(wts))

    def _cdfs(self, wts: _Weights, q: np.ndarray, d: int) -> np.ndarray:
        """F_k(z | x) of eq. 9 on the grid for every query of ``wts``: shape (B, L)."""
        if wts.idx is None:
            hc, xc = self._centred(wts)
            a = q[:, 0] - np.einsum("ij,ij->i", q[:, 1:], xc)
            alpha = q[:, 1:] @ hc.T
            alpha += a[:, None]
            alpha *= wts.w
        else:
            b, c = wts.idx.shape
            alpha = np.empty((b, c))
            for lo, hi, u in self._knn_blocks(wts, design=True):
                np.matmul(u, q[lo:hi, :, None], out=alpha[lo:hi, :, None])
            alpha *= wts.w
        return self._phi_sums(wts, d, alpha)

    def _phi_sums(self, wts: _Weights, d: int, alpha: np.ndarray) -> np.ndarray:
        """sum_i alpha_bi Phi((z_l - y_i) / w_i) for every query b and grid point l (eq. 9).

        ``alpha`` holds one coefficient per row (dense weights) or per neighbour.
        """
        if wts.idx is None:
            return alpha @ self._response_matrix(d)
        b, c = wts.idx.shape
        first, band = self._response_parts(d)
        size = self.grids[self.columns[d]].size + 1
        flat = (np.arange(b)[:, None] * size + first[wts.idx]).ravel()
        steps = np.bincount(flat, weights=alpha.ravel(), minlength=b * size)
        f = np.cumsum(steps.reshape(b, size), axis=1)[:, :-1]
        mat = sparse.csr_matrix(
            (alpha.ravel(), wts.idx.ravel(), np.arange(0, b * c + 1, c)),
            shape=(b, self.n_rows),
        )
        f += (mat @ band).toarray()
        return f

    def _block(self, msg: Message) -> Message:
        """One round: S_k(x) (eq. 5) and the response block T_k(x), (d + 1) x L with
        T_jl = sum_i w_i U_ij Phi((z_l - y_i) / w_i), U_i = (1, h_i - x).

        The coordinator sums both over sites and forms F(z_l | x) = e1' S^-1 T_l itself:
        eqs. 7-10 with the sums taken before the solve instead of after it (the same
        number, since q' sum_k T_k = sum_k q' T_k).
        """
        wts = self._weights_for(msg)
        self._cache.weights = None  # one message closes the request
        d = self._position(msg)
        s, block = self._blocks(wts, d)
        for rows, part in wts.groups or ():  # widened kernels (the floor), as in _hessian
            s[rows], block[rows] = self._blocks(part, d)
        return Message("block", {"S": s, "T": block}, self._floor_report(wts))

    def _blocks(self, wts: _Weights, d: int) -> tuple[np.ndarray, np.ndarray]:
        """The packed S_k(x) and the response blocks T_k(x) of every query of ``wts``."""
        s = self._hessians(wts, d)
        b, p = wts.x.shape[0], wts.p
        block = np.empty((b, p, self.grids[self.columns[d]].size))
        if wts.idx is None:
            hc, xc = self._centred(wts)
            block[:, 0] = self._phi_sums(wts, d, wts.w)
            for j in range(p - 1):  # (h_ij - x_j) = (hc_ij - xc_bj)
                block[:, j + 1] = self._phi_sums(wts, d, wts.w * hc[:, j][None, :])
                block[:, j + 1] -= xc[:, j][:, None] * block[:, 0]
        else:
            c = wts.idx.shape[1]
            u_w = np.empty((b, c, p))
            for lo, hi, u in self._knn_blocks(wts, design=True):
                np.multiply(u, wts.w[lo:hi, :, None], out=u_w[lo:hi])
            for j in range(p):
                block[:, j] = self._phi_sums(wts, d, np.ascontiguousarray(u_w[:, :, j]))
        return s, block

    def _boost(self, msg: Message) -> Message:
        """One level of a boosted column's next tree (:mod:`fits.core.boosting`): per node
        of the level and bin of every earlier chain column, the sums over this site's
        rows of the gradients and Hessians of the model so far, and the row count.

        The floor: every bin reported holds 0 or at least k of this site's rows
        (:func:`~fits.core.boosting.coarsen`), and a node holding fewer than k of them is
        reported as zeros (counted in ``abstained``), whatever the floor's scope."""
        j = self._position(msg)
        spec = self.encoders[j].spec
        edges, n_bins, model, feature, left, level, outputs = _boost_request(
            msg, j, self.policy.boosting_trees, self.name
        )
        rows = np.arange(self.n_rows)
        if spec.is_discrete:
            levels = spec.n_levels
        else:  # a continuous column: its quantile classes, over the rows holding a value
            classes = np.asarray(msg.arrays.get("response_edges", np.zeros(0)), dtype=float)
            if classes.size < 1 or np.any(np.diff(classes) <= 0):
                raise ProtocolError(
                    f"{self.name}: a boost request for continuous column {spec.name!r} needs "
                    "increasing response_edges (its classes)"
                )
            rows = np.flatnonzero(self.valid[:, j])
            levels = classes.size + 1
        thresholds = _thresholds(msg, spec, levels, self.name)
        cumulative = not spec.is_discrete and thresholds is None
        if thresholds is not None:  # location-scale: two scores (f, s)
            want = 2
        else:
            want = levels - 1 if cumulative else boosting.discrete_outputs(levels)
        if outputs != want:
            raise ProtocolError(
                f"{self.name}: column {spec.name!r} has {levels} classes; a boost request "
                f"for it needs outputs={want}, got {outputs}"
            )

        def classes_of(r: np.ndarray) -> np.ndarray:
            if spec.is_discrete:
                return self.codes[r, j]
            return np.searchsorted(classes, self._response(j)[r], side="left")

        key: Hashable = j
        arrays: dict[str, np.ndarray] = {}
        validation = _validation_request(msg, self.name)
        k = self.policy.min_effective_rows
        if validation is not None:  # early stopping: these rows score, the others fit
            fraction, seed = validation
            mask = boosting.held_out(self.n_rows, fraction, [seed, self._site_seed])
            held, rows = rows[mask[rows]], rows[~mask[rows]]
            key = (j, fraction, seed)
            if level == 0:
                _, f_held = self._scores.scores((*key, "held"), model, lambda: self.z[held, :j])
                loss = boosting.log_loss(f_held, classes_of(held), cumulative, thresholds).sum()
                enough = held.size > 0 and held.size >= k
                arrays["loss"] = np.array([loss, held.size], dtype=float) * enough
        codes, f = self._scores.scores(key, model, lambda: self.z[rows, :j])
        g, h = boosting.gradients(f, classes_of(rows), cumulative, thresholds)
        node = boosting.node_of(codes, feature, left, level)
        hist = boosting.histograms(codes, node, 2**level, n_bins, g, h)
        hist, dropped = boosting.coarsen(hist, n_bins, k)
        if dropped.size:
            self._abstained = dropped
        return Message(
            "boost", {"H": hist, **arrays}, {"abstained": int(dropped.size)} if dropped.size else {}
        )

    def _marginal(self, msg: Message) -> Message:
        """First column: sum_i K((z - y_i) / w_z) on the grid (eq. 16, unnormalized).

        The floor: a site abstains when fewer than k of its rows hold the column; under
        a pooled floor, when fewer than k of the federation's rows do (config
        ``present``, from the setup round's counts)."""
        j = self._position(msg)
        phi = self._response_matrix(j)
        rows = int(self.valid[:, j].sum())
        if self.policy.pools_floor:  # the floor holds for the sum: the federation's rows
            if not msg.config.get("secure", False):
                raise PolicyError(
                    f"{self.name} refused a plain marginal request: its policy pools the "
                    "effective-rows floor over the sites (floor_scope='pooled'), which "
                    "holds only under secure aggregation"
                )
            present = int(msg.config.get("present", -1))  # the federation's, by setup
            if not rows <= present <= self.n_total:
                raise ProtocolError(
                    f"{self.name}: a marginal request under a pooled floor needs config "
                    f"'present', the federation's rows holding the column, between this "
                    f"site's {rows} and M = {self.n_total}; got {present}"
                )
            rows = present
        if rows < self.policy.min_effective_rows:  # n_eff of equal weights: the row count
            self._abstained = np.zeros(1, dtype=np.int64)
            return Message("marginal", {"F": np.zeros(phi.shape[1])}, {"abstained": 1})
        return Message("marginal", {"F": phi[self.valid[:, j]].sum(axis=0)})


def _validation_request(msg: Message, site: str) -> tuple[float, int] | None:
    """A boost request's early stopping, checked: (validation fraction, seed) or None."""
    if "validation" not in msg.config:
        return None
    fraction, seed = msg.config["validation"], msg.config.get("validation_seed")
    if not (
        isinstance(fraction, int | float)
        and not isinstance(fraction, bool)
        and 0 < fraction <= boosting.MAX_VALIDATION_FRACTION
        and isinstance(seed, int)
        and not isinstance(seed, bool)
        and seed >= 0
    ):
        raise ProtocolError(
            f"{site}: a boost request's early stopping needs 0 < validation <= "
            f"{boosting.MAX_VALIDATION_FRACTION} and a validation_seed >= 0, got "
            f"{fraction!r} and {seed!r}"
        )
    return float(fraction), int(seed)


def _boost_request(msg: Message, d: int, trees_allowed: int, site: str) -> tuple:
    """The parts of a boost request, checked: (edges, n_bins, model, current tree's
    feature and left masks, level, outputs)."""
    c, a = msg.config, msg.arrays
    depth, level, outputs = int(c["depth"]), int(c["level"]), int(c["outputs"])
    counts = np.asarray(a["edge_counts"], dtype=np.int64)
    flat = np.asarray(a["edges"], dtype=float)
    if not 1 <= depth <= boosting.MAX_DEPTH or not 0 <= level < depth:
        raise ProtocolError(
            f"{site}: a boost request needs 1 <= depth <= {boosting.MAX_DEPTH} and "
            f"0 <= level < depth, got depth {depth}, level {level}"
        )
    if counts.shape != (d,) or np.any(counts < 0) or counts.sum() != flat.size:
        raise ProtocolError(
            f"{site}: a boost request's edge_counts must give each of the {d} covariates "
            f"its number of edges, summing to the {flat.size} edges sent"
        )
    edges = np.split(flat, np.cumsum(counts)[:-1]) if d else []
    if any(not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0) for e in edges):
        raise ProtocolError(f"{site}: a boost request's bin edges must be finite and increasing")
    n_bins = counts + 1
    max_bins = int(n_bins.max()) if d else 1
    value = np.asarray(a["value"], dtype=float)
    n_trees = value.shape[0]
    inner = 2**depth - 1
    feature = np.asarray(a["feature"], dtype=np.int64)
    packed = np.asarray(a["left"], dtype=np.uint8)
    shapes_ok = (
        value.shape == (n_trees, 2**depth, outputs)
        and feature.shape == (n_trees + 1, inner)
        and packed.shape == (n_trees + 1, inner, (max_bins + 7) // 8)
        and np.asarray(a["init"]).shape == (outputs,)
    )
    if not shapes_ok:
        raise ProtocolError(f"{site}: a boost request's arrays do not fit its depth and outputs")
    if np.any(feature < -1) or np.any(feature >= d) or not np.all(np.isfinite(value)):
        raise ProtocolError(f"{site}: a boost request's trees are malformed")
    values = boosting.reply_values(level, int(n_bins.sum()), outputs)
    if outputs > boosting.MAX_OUTPUTS or values > boosting.MAX_REPLY_VALUES:
        raise ProtocolError(
            f"{site}: a boost request would need a reply of {values:,} values for "
            f"{outputs} outputs (at most {boosting.MAX_REPLY_VALUES:,} values and "
            f"{boosting.MAX_OUTPUTS} outputs)"
        )
    if n_trees + 1 > trees_allowed:
        raise PolicyError(
            f"{site} refused a boost request for column {c['column']!r}: tree {n_trees + 1} "
            f"exceeds its {trees_allowed} per column (site policy boosting_trees)"
        )
    left = np.unpackbits(packed, axis=-1, count=max_bins)
    model = boosting.BoostedModel(
        np.asarray(a["init"], dtype=float), feature[:n_trees], left[:n_trees], value, edges
    )
    return edges, n_bins, model, feature[n_trees], left[n_trees], level, outputs


def _thresholds(msg: Message, spec: ColumnSpec, levels: int, site: str) -> np.ndarray | None:
    """A boost request's location-scale thresholds (:func:`fits.core.boosting.location_scale_cdf`),
    checked: one per class boundary of a continuous column, finite and nondecreasing; None
    when the request has none (the other models)."""
    if "thresholds" not in msg.arrays:
        return None
    theta = np.asarray(msg.arrays["thresholds"], dtype=float)
    ok = (
        not spec.is_discrete
        and theta.shape == (levels - 1,)
        and bool(np.all(np.isfinite(theta)))
        and bool(np.all(np.diff(theta) >= 0))
    )
    if not ok:
        raise ProtocolError(
            f"{site}: a boost request's thresholds for column {spec.name!r} must be "
            f"{levels - 1} finite nondecreasing values (a continuous column's location-scale "
            "model)"
        )
    return theta


def _encoded(message: Message, reply: Message) -> Message:
    """A hessian, cdf or block reply in the precision the request asks for
    (:mod:`fits.federation.codec`; float64 sends the arrays as they are)."""
    precision = str(message.config.get("precision", "float64"))
    if precision == "float64":
        return reply
    p = design_size(message)
    if message.type == "hessian":
        arrays = encode_hessian(reply.arrays["S"], p, precision)
    elif message.type == "cdf":
        arrays = encode_cdf(reply.arrays["F"], precision)
    else:
        arrays = encode_block(reply.arrays["S"], reply.arrays["T"], p, precision)
    return Message(reply.type, arrays, reply.config)


def effective_rows(w: np.ndarray) -> np.ndarray:
    """Kish's effective number of rows of each row of weights: (sum w)^2 / sum w^2.

    Rows whose largest weight is below 1e-100 are rescaled by it first, so that the
    squares do not underflow (n_eff does not change with a common factor); a row of
    zeros has n_eff 0.
    """
    w = np.asarray(w, dtype=float)
    top = w.max(axis=1) if w.shape[1] else np.zeros(len(w))
    ok = top > 0
    s1 = w.sum(axis=1)
    s2 = np.einsum("ij,ij->i", w, w)
    tiny = np.flatnonzero(ok & (top < 1e-100))
    if tiny.size:
        v = w[tiny] / top[tiny, None]
        s1[tiny] = v.sum(axis=1)
        s2[tiny] = np.einsum("ij,ij->i", v, v)
    n_eff = np.zeros(len(w))
    np.divide(s1 * s1, s2, out=n_eff, where=ok)
    return n_eff


def _one_hot(codes: np.ndarray, levels: int) -> np.ndarray:
    out = np.zeros((codes.shape[0], levels))
    out[np.arange(codes.shape[0]), codes] = 1.0
    return out


def _thermometer(codes: np.ndarray, levels: int) -> np.ndarray:
    """T(r)_t = 1{r > t}, t = 0..L-2, so that |T(a) - T(b)|^2 = |a - b|."""
    return (codes[:, None] > np.arange(levels - 1)[None, :]).astype(float)


def _describe_request(site: str, message: Message) -> dict[str, Any]:
    """The audit entry of a request: when, what, its sizes (never its values)."""
    config = message.config
    entry: dict[str, Any] = {
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
        "site": site,
        "type": message.type,
    }
    logged = ("column", "request", "scheme", "sharpness", "reach", "stage", "level", "depth")
    for key in (*logged, "validation"):  # validation: a boost request's held-out share
        if key in config:
            entry[key] = config[key]
    if "queries" in message.arrays:
        entry["queries"] = int(np.shape(message.arrays["queries"])[0])
    entry["arrays"] = {
        n: [list(np.shape(a)), str(np.asarray(a).dtype)] for n, a in message.arrays.items()
    }
    entry["bytes"] = message.nbytes()
    for key in ("n_total", "rows", "response_bandwidth", "discrete_response_bandwidth"):
        if message.type == "configure" and key in config:
            entry[key] = config[key]
    return entry
