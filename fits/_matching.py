"""Conditional sampling on discrete columns that are not first in the chain.

The chain (Algorithm 2 of the FITS paper) draws column j given columns 1..j-1, so it can
condition exactly only on a prefix: known values of the first columns become the
query points of the later ones (``FITSSynthesizer.sample_remaining_columns``).  A known
value of a later *discrete* column is met here by rejection: rows are drawn from the
chain given the known prefix, and a known row takes the first draw whose later known
columns agree with it.  Accepted draws follow the synthesizer's joint distribution
conditioned on every known value, exactly: rejection sampling needs no model of the
acceptance probability, only independent draws (not in the paper; SDV conditions the
same way).  A continuous column has probability zero of agreeing, so it must be first.

The known values of the matched columns never leave the coordinator: the sites see the
draws' query points only, as in any draw.  The cost is in draws: a known combination
the synthesizer draws in a share p of the rows costs about 1 / p draws per row, each a
full pass of the chain's later columns at every site (so the sites' query budget is
declared again as needed, one configure round each time).

Choices of ours: the known rows are matched in blocks of :data:`BLOCK_ROWS` rows, each
block's tries drawn from one random stream in a fixed sequence, so that the rows do not
depend on how the output is chunked; each try draws ``copies`` candidates for every
pending row (1 at first and after a try whose candidates all agreed, else about
1.5 / p with p the last try's share of agreeing candidates, capped so that one try holds
at most ``max_candidates`` rows in memory); and a block gives up, with an error
naming the rarest combination left, after ``max_tries`` candidates per row of the block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

__all__ = ["BLOCK_ROWS", "MatchError", "draw_matching"]

#: Known rows matched together (the unit of the fixed draw sequence).  Equal to
#: :data:`fits.io.ESTIMATE_ROWS`, so that ``fits synthesize --known``'s timed first piece
#: is one block.
BLOCK_ROWS = 8_192


class MatchError(ValueError):
    """Known rows that the draws did not match within the budget of tries.

    Attributes
    ----------
    row : int
        Position (0-based, in the known table) of the first row left unmatched.
    pending : int
        How many rows of its block were left unmatched.
    tried, accepted : int
        Candidates drawn and accepted in that block.
    """

    def __init__(self, row: int, pending: int, tried: int, accepted: int) -> None:
        self.row, self.pending, self.tried, self.accepted = row, pending, tried, accepted
        super().__init__(f"{pending} known row(s) unmatched after {tried} draws")


def draw_matching(
    sample: Callable[[int, np.ndarray | None], np.ndarray],
    given: np.ndarray | None,
    matched: Sequence[Callable[[np.ndarray], np.ndarray]],
    codes: np.ndarray,
    total: int,
    *,
    max_tries: int,
    max_candidates: int,
    progress: Callable[[int], None] | None = None,
) -> Iterator[np.ndarray]:
    """Blocks of engine values (chain order), one row per known row, in order, each row
    the first draw that agrees with its row of ``codes``.

    Parameters
    ----------
    sample : callable
        ``sample(n, given_rows)``: n draws of the chain on the engine's scale, given the
        known prefix's values ``given_rows`` (n rows, or None); each call takes its
        uniforms from one random stream, in order.
    given : ndarray of shape (total, m), optional
        The known prefix's engine values per known row (None: no known prefix).
    matched : sequence of callables
        One per matched column: the codes of that column in an array of draws.
    codes : ndarray of shape (total, len(matched))
        The known codes of the matched columns.
    total : int
        Known rows.
    max_tries : int
        Candidates per known row a block may draw before it gives up.
    max_candidates : int
        Most candidates one try draws (bounds the memory).
    progress : callable, optional
        Called with the known rows matched so far, after every try.

    Yields
    ------
    ndarray
        The matched draws of consecutive blocks of :data:`BLOCK_ROWS` known rows.

    Raises
    ------
    MatchError
        A block's rows still unmatched after ``max_tries`` candidates per row.
    """
    done = 0
    rate = 1.0  # the last try's share of candidates accepted: sets the copies (1 at 1)
    for start in range(0, total, BLOCK_ROWS):
        stop = min(total, start + BLOCK_ROWS)
        pending = np.arange(start, stop)
        out: np.ndarray | None = None
        budget = max_tries * (stop - start)
        tried = accepted = 0
        while pending.size:
            left = budget - tried
            if left < 1:
                raise MatchError(int(pending[0]), int(pending.size), tried, accepted)
            copies = 1 if rate >= 1.0 else int(min(np.ceil(1.5 / rate), max_tries, left))
            copies = min(copies, max_candidates)
            take = min(pending.size, max(1, max_candidates // copies), left // copies)
            rows = pending[:take]
            candidates = np.repeat(rows, copies)
            values = sample(candidates.size, None if given is None else given[candidates])
            ok = np.ones(candidates.size, dtype=bool)
            for k, codes_of in enumerate(matched):
                ok &= codes_of(values) == codes[candidates, k]
            if out is None:
                out = np.empty((stop - start, values.shape[1]))
            hits = ok.reshape(take, copies)
            hit = hits.any(axis=1)
            first = hits.argmax(axis=1)
            out[rows[hit] - start] = values.reshape(take, copies, -1)[hit, first[hit]]
            pending = np.concatenate([rows[~hit], pending[take:]])
            tried += candidates.size
            accepted += int(ok.sum())
            # a try with no match: four times the copies next; else the observed share
            rate = max(ok.mean() if ok.any() else rate / 4.0, 1.0 / max_tries)
            done += int(hit.sum())
            if progress is not None:
                progress(done)
        assert out is not None  # a block has at least one row, so one try ran
        yield out
