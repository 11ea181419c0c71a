"""What a site agrees to answer: its policy, enforced by the site itself.

A coordinator chooses the grids, the response bandwidth, the federation size M (which
sets the Gaussian bandwidth and the KNN budget, eqs. 11-12) and the query points.  Left
to it, a curious coordinator could read rows back: a response bandwidth of 1e-7 sd and
a fine grid turn one marginal request into the list of a site's values, and a lie about
M shrinks every kernel towards single rows.  A :class:`SitePolicy` is the site's own
answer to that; :class:`~fits.federation.client.FITSClient` enforces it on every
request, and its audit log records what it answered, refused or abstained from.

The limits (defaults in brackets; an honest coordinator with default settings meets all
of them, see ``docs/privacy.md``):

* **grid size** [1000 points per column, or two per category of a discrete column if
  that is more: the mass grid's]: a configure message with a larger grid is refused.
  The coordinator's default is 300.
* **queries per column** [3 per declared synthetic row + 1000]: the coordinator
  declares the rows it will draw (config ``rows`` of the configure message); each
  column may then be asked at most ``queries_per_row * rows + extra_queries`` query
  points per message type (hessian, cdf, marginal), over the site's whole life in the
  run.  Three per row covers an honest run's worst case: the site's own kernel, the
  KNN fallback and the local-constant fallback each ask a row at most once.  A secure
  aggregation re-ask of the same points with scaled weights (``weight_exponent``) is
  not counted.  ``max_rows`` is the most rows the coordinator may declare: a configure
  message that declares more (the run's draws so far included) is refused, naming the
  limit, before any query of those rows.
* **response bandwidth floor** [0.02 sd for a continuous response, none for a discrete
  one]: the site smooths its responses with at least this bandwidth whatever the
  coordinator asks (default 0.05); a discrete response's bandwidth hides only the
  random lift inside a category, whose counts the masses reveal anyway.
* **federation size** [M between the site's own rows and 1000 times them]: an M below
  the site's own row count is a lie and is refused; above the ratio the site computes
  its kernels as if M were ``max_federation_ratio * n_k``.  This floors the Gaussian
  bandwidth M^(-1/(d+4)) at the value the site computes from its own row count.
* **effective rows** [k = 5, ``below_floor="widen"``]: no answer rests on fewer
  than k rows' worth of weight.  A query whose kernel weights w (after the category
  penalties) have ``n_eff = (sum w)^2 / sum w^2 < k`` is answered with the site's own
  kernel **widened** by the smallest factor t in sqrt(2), 2, 2 sqrt(2), ..., 1024 that
  brings n_eff to k (a Gaussian site's bandwidth times t, a KNN site's neighbours
  ``max(ceil(t c_k), ceil(k))``, the category penalties relaxed to gamma^(1/t) and
  lambda / t; the widened weights are rescaled to the mass of the site's own kernel,
  see :meth:`~fits.federation.client.FITSClient._weights`).  The site says so in its
  reply (config ``widened``, a count) and logs which queries and by what factor.  A
  query that no factor brings to k (a site with fewer than k usable rows), or every
  query under k with ``below_floor="abstain"``, gets no answer: the site contributes
  zeros for it in both steps, says so (config ``abstained``) and logs it.  A marginal
  is abstained from when fewer than k rows hold the column.  Whatever the bandwidths,
  M or the scaling make of the weights, every answer has n_eff >= k.
* **floor scope** [``floor_scope="site"``]: the floor above holds for each site's own
  answer.  With ``"pooled"`` it holds for the *sum over the sites* instead, which is all
  the coordinator sees under secure aggregation: before each step-1 request the
  coordinator asks a ``neff`` round (the masked sums of w and w^2 per query, at the
  widening factors 1, sqrt(2), 2, ...), picks per query the smallest common factor t
  whose pooled n_eff = (sum over sites and rows of w)^2 / (sum of w^2) reaches k, and
  every site answers that query with its own kernel widened by that t (0: no factor
  reaches k, every site contributes zeros).  The site then requires secure aggregation
  on every request that carries its rows' weights (it refuses a plain one) and takes
  the factors from the request: the floor's meaning rests on an honest-but-curious
  coordinator, the threat model of secure aggregation itself, instead of on the site
  alone.  Sharp kernels keep their sharpness where the sites together hold k rows'
  worth of weight near a query (docs/privacy.md, "Pooled floor").
* **tuning** [16 candidate smoothings per column]: the ``tune`` round
  (:mod:`fits.core.tuning`) asks for per-candidate sums of held-out scores over the
  site's rows; the site scores at most this many candidates per column over the run,
  abstains from a column where it would score fewer than k rows, and its KNN
  estimators take at least k neighbours.  0 refuses every tune request.
* **boosting** [200 trees per column]: a boosted column (``boost`` rounds,
  :mod:`fits.core.boosting`) asks for per-(node, bin) sums of the boosting gradients
  over the site's rows; the site grows at most this many trees per column, reports
  every bin with 0 or at least k of its rows (it merges short bins with their
  neighbours) and nothing for a node holding fewer than k of its rows, whatever
  ``floor_scope`` says.  0 refuses every boost request.

Refusals raise :class:`PolicyError` at the site; over Flower the error travels back as
the reply's error reason, in process it reaches the caller; either way the run stops
and no output is written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from fits.federation.protocol import ProtocolError

__all__ = [
    "BELOW_FLOOR",
    "DEFAULT_BELOW_FLOOR",
    "DEFAULT_MIN_EFFECTIVE_ROWS",
    "FLOOR_SCOPES",
    "PolicyError",
    "SitePolicy",
    "pooled_floor_shortfall",
]

#: Default k of the effective-rows floor n_eff >= k.
DEFAULT_MIN_EFFECTIVE_ROWS = 5.0
#: What a site does with a query under its floor: widen its own kernel, or abstain.
BELOW_FLOOR = ("widen", "abstain")
#: Default of :attr:`SitePolicy.below_floor`.
DEFAULT_BELOW_FLOOR = "widen"
#: Where the effective-rows floor holds: each site's own answer, or the sum over sites
#: (with secure aggregation only).
FLOOR_SCOPES = ("site", "pooled")


class PolicyError(ProtocolError):
    """A site refused a request under its :class:`SitePolicy`; the message says why."""


@dataclass(frozen=True)
class SitePolicy:
    """The limits a site enforces on the coordinator's requests.

    Parameters
    ----------
    max_grid_size : int
        Most grid points per column (default 1000).
    queries_per_row : float
        Query points per column and message type allowed per synthetic row the
        coordinator declares (default 3).
    extra_queries : int
        Query points per column and message type allowed on top (default 1000).
    max_rows : int, optional
        Most synthetic rows the site serves over the run: a configure message declaring
        more is refused (:class:`PolicyError`, naming the limit and the fixes).  Default
        None (what the coordinator declares).
    min_effective_rows : float
        k: no answer rests on weights with n_eff < k (default 5; 0 turns the floor
        off).
    below_floor : {"widen", "abstain"}
        What the site does with a query under k: answer it with its own kernel widened
        until n_eff >= k (default), or abstain from it (contribute zeros).
    floor_scope : {"site", "pooled"}
        Whether the floor holds for this site's own answer (default) or for the sum
        over the sites that secure aggregation reveals, with a common widening factor
        per query chosen by the coordinator from the pooled n_eff (``"pooled"``: the
        site then refuses requests without secure aggregation; see the module notes).
    min_response_bandwidth : float
        Floor of a continuous response's bandwidth, in units of the site's own scale
        of that column, min(sd, IQR / 1.349) (:func:`fits.core.cdf.response_scale`;
        default 0.02).
    min_discrete_response_bandwidth : float
        Floor of a discrete response's bandwidth, in interval widths (default 0).
    max_federation_ratio : float
        Largest M / n_k the site takes for its kernels (default 1000).
    tuning_candidates : int
        Most candidate smoothings the site scores per column over the run (the ``tune``
        round, :mod:`fits.core.tuning`; default 16; 0 refuses to take part).
    boosting_trees : int
        Most trees of a boosted column the site grows histograms for, per column
        (``boost`` rounds, :mod:`fits.core.boosting`; default 200; 0 refuses boosted
        columns).
    """

    max_grid_size: int = 1000
    queries_per_row: float = 3.0
    extra_queries: int = 1000
    max_rows: int | None = None
    min_effective_rows: float = DEFAULT_MIN_EFFECTIVE_ROWS
    below_floor: str = DEFAULT_BELOW_FLOOR
    floor_scope: str = "site"
    min_response_bandwidth: float = 0.02
    min_discrete_response_bandwidth: float = 0.0
    max_federation_ratio: float = 1000.0
    tuning_candidates: int = 16
    boosting_trees: int = 200

    def __post_init__(self) -> None:
        checks = [
            ("max_grid_size", self.max_grid_size >= 3, "at least 3"),
            ("queries_per_row", self.queries_per_row >= 0, ">= 0"),
            ("extra_queries", self.extra_queries >= 0, ">= 0"),
            ("max_rows", self.max_rows is None or self.max_rows >= 0, ">= 0 or null"),
            ("min_effective_rows", self.min_effective_rows >= 0, ">= 0"),
            ("below_floor", self.below_floor in BELOW_FLOOR, f"one of {BELOW_FLOOR}"),
            ("floor_scope", self.floor_scope in FLOOR_SCOPES, f"one of {FLOOR_SCOPES}"),
            ("min_response_bandwidth", self.min_response_bandwidth >= 0, ">= 0"),
            (
                "min_discrete_response_bandwidth",
                self.min_discrete_response_bandwidth >= 0,
                ">= 0",
            ),
            ("max_federation_ratio", self.max_federation_ratio >= 1, ">= 1"),
            ("tuning_candidates", self.tuning_candidates >= 0, ">= 0"),
            ("boosting_trees", self.boosting_trees >= 0, ">= 0"),
        ]
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"site policy: {name} must be {rule}, got {getattr(self, name)!r}")

    @property
    def pools_floor(self) -> bool:
        """Whether the effective-rows floor holds for the sum over the sites (a floor
        with ``floor_scope="pooled"`` and k > 0), which needs secure aggregation."""
        return self.floor_scope == "pooled" and self.min_effective_rows > 0

    @classmethod
    def unrestricted(cls) -> SitePolicy:
        """No limits: the site of the paper, which answers whatever it is asked."""
        return cls(
            max_grid_size=2**62,
            queries_per_row=math.inf,
            extra_queries=2**62,
            min_effective_rows=0.0,
            min_response_bandwidth=0.0,
            max_federation_ratio=math.inf,
            tuning_candidates=2**62,
            boosting_trees=2**62,
        )

    def query_budget(self, declared_rows: int) -> float:
        """Query points allowed per column and message type for ``declared_rows`` rows."""
        rows = max(int(declared_rows), 0)
        if self.max_rows is not None:
            rows = min(rows, self.max_rows)
        if math.isinf(self.queries_per_row):
            return math.inf
        return math.ceil(self.queries_per_row * rows) + self.extra_queries

    def to_dict(self) -> dict[str, Any]:
        """The policy as plain values (infinite limits as None)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and math.isinf(value):
                out[key] = None
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], *, source: str = "site policy") -> SitePolicy:
        """A policy from a mapping of field -> value (missing fields keep their default).

        Raises ValueError naming ``source`` and the field for an unknown field or a bad
        value.
        """
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(
                f"{source}: unknown field(s) {unknown}; the fields are {sorted(known)}"
            )
        parsed: dict[str, Any] = {}
        for key, value in values.items():
            if value is None:
                if key == "max_rows":
                    parsed[key] = None
                elif key in _INFINITE_OK:
                    parsed[key] = math.inf
                else:
                    raise ValueError(f"{source}: {key} cannot be null")
                continue
            if key in ("below_floor", "floor_scope"):
                if not isinstance(value, str):
                    raise ValueError(f"{source}: {key} must be a string, got {value!r}")
                parsed[key] = value
                continue
            integer = key in (
                "max_grid_size",
                "extra_queries",
                "max_rows",
                "tuning_candidates",
                "boosting_trees",
            )
            if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
                kind = "an integer" if integer else "a number"
                raise ValueError(f"{source}: {key} must be {kind}, got {value!r}")
            parsed[key] = value
        try:
            return cls(**parsed)
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None

    @classmethod
    def from_json(cls, path: str | Path) -> SitePolicy:
        """Read a policy from a JSON file (an object of field -> value)."""
        path = Path(path)
        twice: list[str] = []

        def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
            keys = [k for k, _ in items]
            twice.extend(k for k in dict.fromkeys(keys) if keys.count(k) > 1)
            return dict(items)

        try:  # utf-8-sig: a byte-order mark (as some editors write) is no error
            values = json.loads(path.read_text(encoding="utf-8-sig"), object_pairs_hook=pairs)
        except OSError as exc:
            raise ValueError(f"{path}: cannot read the site policy ({exc.strerror})") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: the site policy is not valid JSON ({exc})") from None
        if twice:  # JSON would keep the last silently: {"k": 5, "k": 0} turns the floor off
            raise ValueError(
                f"{path}: the site policy names field(s) {sorted(set(twice))} more than once; "
                "give each field once"
            )
        if not isinstance(values, dict):
            raise ValueError(f"{path}: the site policy must be a JSON object of field: value")
        return cls.from_dict(values, source=str(path))


def pooled_floor_shortfall(total: int, k: float, what: str = "rows") -> str:
    """Why a pooled floor cannot be met, in the words every message about it uses: the
    sites *together* hold ``total`` (fewer than ``k``), not "none holds as many", since
    under ``floor_scope="pooled"`` only the sum over the sites counts.  ``what``: what
    they hold (``"rows"``, ``"rows with a value of it"``)."""
    return (
        f"the sites together hold {int(total)} {what}, fewer than the pooled floor "
        f"k = {float(k):g} (floor_scope='pooled')"
    )


#: Fields whose null in a JSON policy means "no limit".
_INFINITE_OK = {"queries_per_row", "max_federation_ratio"}
