"""Conditional sampling on discrete columns that are not first in the chain.

The chain (Algorithm 2 of the FITS paper) draws column j given columns 1..j-1, so it can
condition exactly only on a prefix: known values of the first columns become the
query points of the later ones (``FITSSynthesizer.sample_remaining_columns``).  A known
value of a later *discrete* column is met here by rejection: rows are drawn from the
chain given the known prefix, and a known row takes a draw whose later known columns
agree with it.  Accepted draws follow the synthesizer's joint distribution
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
depend on how the output is chunked.  Known rows with the same known prefix and the same
known later values form a group: their draws come from one distribution, so an agreeing
draw made for one row may complete any row of its group (the k-th agreeing draw of a try
completes the group's k-th pending row), and a thousand rows asking for ``income = >50K``
cost about 1,000 / p draws, not more.  Each try draws ``copies`` candidates per pending
row: 1 at first and after a try whose candidates all agreed, else :data:`COPIES` / p
with p the last try's share of agreeing candidates, capped so that one try holds at most
``max_candidates`` rows in memory.  A block's first try takes p from the previous
block's first try (every row pending in both), not from its last try: that one's
candidates were for the rows left, of the rarest values, and with values asked as often
as they are drawn (p near 1 at the start of a block, 1/2 at its end) every other block
drew 3 copies per row, about 2 draws per known row where 1 does.  The budget is a
group's: a block gives up, with an error naming the first row of the group, once a
group has drawn ``max_tries`` candidates per row of it (a try may take it past that by
its last copies) and still has rows pending, so one impossible row stops the run after
about ``max_tries`` draws, not after its block's whole budget (8,192 rows' worth, hours
of draws).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

__all__ = ["BLOCK_ROWS", "MatchError", "draw_matching"]

#: Known rows matched together (the unit of the fixed draw sequence).  Equal to
#: :data:`fits.io.ESTIMATE_ROWS`, so that ``fits synthesize --known``'s timed first piece
#: is one block.
BLOCK_ROWS = 8_192


#: Candidates drawn per pending row and try: COPIES / p, with p the last try's share of
#: agreeing candidates, so that a try is expected to match every pending row with a
#: margin of 20% (more copies: fewer tries, more draws past the last match).
COPIES = 1.2


class MatchError(ValueError):
    """Known rows that the draws did not match within the budget of tries.

    Attributes
    ----------
    row : int
        Position (0-based, in the known table) of the first row of the group that ran
        out of tries.
    pending : int
        How many rows of that group (known rows asking for the same values given the
        same prefix) were left unmatched.
    tried, completed : int
        Candidates drawn for that group, and rows of the group they completed.
    """

    def __init__(self, row: int, pending: int, tried: int, completed: int) -> None:
        self.row, self.pending, self.tried, self.completed = row, pending, tried, completed
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
        Candidates per known row a group of rows asking for the same values (given the
        same prefix) may draw before it gives up.
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
        A group's rows still unmatched after ``max_tries`` candidates per row of it.
    """
    done = 0
    # the share of a block's first try's candidates that some row of it could take: the
    # next block's first try starts from it (every row pending, as there), not from the
    # last try's share (the rows of the rarest values, left to the end)
    opening = 1.0
    for start in range(0, total, BLOCK_ROWS):
        stop = min(total, start + BLOCK_ROWS)
        rate = opening  # the last try's share of candidates accepted: sets the copies
        start_try = True
        pending = np.arange(start, stop)
        keys = _keys(given, codes[start:stop], np.arange(start, stop))  # prefix and codes
        # the block's groups of rows that want the same values given the same prefix,
        # each with its budget of tries and the candidates drawn for its rows so far
        row_group = np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1)
        size = np.bincount(row_group)
        tried = np.zeros(size.size, dtype=np.int64)
        out: np.ndarray | None = None
        while pending.size:
            copies = 1 if rate >= 1.0 else int(min(np.ceil(COPIES / rate), max_tries))
            copies = min(copies, max_candidates)
            take = min(pending.size, max(1, max_candidates // copies))
            candidates = np.repeat(pending[:take], copies)
            tried += copies * np.bincount(row_group[pending[:take] - start], minlength=size.size)
            values = sample(candidates.size, None if given is None else given[candidates])
            drawn = np.column_stack([codes_of(values) for codes_of in matched])
            # one numbering of the rows' (prefix, codes) and the draws' (prefix, drawn codes)
            both = np.vstack([keys[pending - start], _keys(given, drawn, candidates)])
            group = np.unique(both, axis=0, return_inverse=True)[1].reshape(-1)
            wanted, offered = group[: pending.size], group[pending.size :]
            ok = np.isin(offered, wanted)  # a draw some pending row can take
            if out is None:
                out = np.empty((stop - start, values.shape[1]))
            filled, used = _assign(wanted, offered[ok])
            out[pending[filled] - start] = values[np.flatnonzero(ok)[used]]
            keep = np.ones(pending.size, dtype=bool)
            keep[filled] = False
            pending = pending[keep]
            spent = row_group[pending - start]
            out_of_tries = tried[spent] >= max_tries * size[spent]
            if out_of_tries.any():
                first = int(pending[np.argmax(out_of_tries)])
                group = row_group[first - start]
                left = int(np.count_nonzero(spent == group))
                raise MatchError(first, left, int(tried[group]), int(size[group]) - left)
            # a try with no match: four times the copies next; else the observed share
            rate = max(ok.mean() if ok.any() else rate / 4.0, 1.0 / max_tries)
            if start_try:
                opening, start_try = rate, False
            done += int(filled.size)
            if progress is not None:
                progress(done)
        assert out is not None  # a block has at least one row, so one try ran
        yield out


def _keys(given: np.ndarray | None, codes: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per row: its known prefix (the row of ``given`` at ``rows``) and ``codes``, one
    row of floats (codes are small integers, exact as floats).  Rows with equal keys
    draw from one distribution and want the same codes: an agreeing draw made for one
    may complete another."""
    codes = np.asarray(codes, dtype=float)
    keys = codes if given is None else np.column_stack([given[rows], codes])
    return np.where(np.isnan(keys), -np.inf, keys)  # equal to itself in np.unique


def _assign(pending: np.ndarray, agreeing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which pending rows the agreeing draws complete: within each group, the k-th
    agreeing draw (in the order drawn) completes the group's k-th pending row (in the
    pending order), while both last.  ``pending`` and ``agreeing`` are group numbers;
    returns the positions in ``pending`` completed and in ``agreeing`` used, paired."""
    by_row = np.argsort(pending, kind="stable")
    by_draw = np.argsort(agreeing, kind="stable")
    rows_sorted, draws_sorted = pending[by_row], agreeing[by_draw]
    # a draw's rank within its group: its position minus the group's first position
    draw_rank = np.arange(draws_sorted.size) - np.searchsorted(draws_sorted, draws_sorted)
    # the draw of rank r in group g completes the row of rank r in g, if the group has one
    first_row = np.searchsorted(rows_sorted, draws_sorted)
    n_rows = np.searchsorted(rows_sorted, draws_sorted, side="right") - first_row
    use = draw_rank < n_rows
    filled = by_row[first_row[use] + draw_rank[use]]
    return filled, by_draw[use]
