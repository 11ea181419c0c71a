"""Conditional sampling on discrete columns later in the chain, matched by drawing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fits._matching as matching
from fits import FITSSynthesizer
from fits._matching import MatchError, draw_matching


def _table(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    """a first, c continuous, b last: P(b = 1 | a = x) = 0.9, P(b = 1 | a = y) = 0.1,
    so P(a = x | b = 1) = 0.9 where P(a = x) = 0.5; c = 3 b + noise."""
    rng = np.random.default_rng(seed)
    a = rng.choice(["x", "y"], n)
    b = np.where(a == "x", rng.random(n) < 0.9, rng.random(n) < 0.1).astype(int)
    c = rng.normal(size=n) + 3 * b
    return pd.DataFrame({"a": a, "c": c, "b": np.where(b == 1, "one", "zero")})


@pytest.fixture(scope="module")
def synth() -> FITSSynthesizer:
    frame = _table()
    synth = FITSSynthesizer(seed=0).fit([frame.iloc[:2000], frame.iloc[2000:]])
    assert synth.schema_.order == ["a", "c", "b"]
    return synth


def test_a_later_column_is_conditioned_on_through_the_earlier_ones(synth) -> None:
    """Given b alone (last in the chain), a and c follow their conditional given b:
    Bayes' rule flips P(a = x) from 0.5 to 0.9 for b = one and 0.1 for b = zero, and c
    centres near 3 b. Drawing a and c without b's condition would give 0.5 and 1.5."""
    for label, p_x, mean_c in (("one", 0.9, 3.0), ("zero", 0.1, 0.0)):
        out = synth.sample_remaining_columns(pd.DataFrame({"b": [label] * 3000}), seed=1)
        assert (out["b"] == label).all() and len(out) == 3000
        # the fit's own error in P(a = x | b) reaches 0.034 over seeds 0-9 (0.04 before
        # the sites sorted their rows), and 3,000 draws add a standard error of 0.0055
        assert (out["a"] == "x").mean() == pytest.approx(p_x, abs=0.05)
        assert out["c"].mean() == pytest.approx(mean_c, abs=0.2)


def test_the_match_equals_the_synthesizer_s_own_conditional(synth) -> None:
    """The oracle: unconditional draws of the same synthesizer kept where b agrees
    (rejection by hand); the matched draw must have the same distribution of a and c."""
    free = synth.sample(12_000, seed=7)
    kept = free[free["b"] == "one"]
    out = synth.sample_remaining_columns(pd.DataFrame({"b": ["one"] * len(kept)}), seed=8)
    n = len(kept)
    p_free, p_out = (kept["a"] == "x").mean(), (out["a"] == "x").mean()
    se = np.sqrt(2 * p_free * (1 - p_free) / n)
    assert abs(p_out - p_free) < 4 * se
    assert abs(out["c"].mean() - kept["c"].mean()) < 4 * np.sqrt(2 * kept["c"].var() / n)


def test_each_row_gets_its_own_condition_with_a_known_prefix(synth) -> None:
    """Row by row: a given (first in the chain, exact), b matched; the rows agree with
    their own known values, and c follows b given a."""
    known = pd.DataFrame({"a": ["x", "y"] * 500, "b": ["one"] * 500 + ["zero"] * 500})
    known.index = pd.Index([f"r{i}" for i in range(1000)])
    out = synth.sample_remaining_columns(known, seed=3)
    pd.testing.assert_frame_equal(out[["a", "b"]], known)
    assert out["c"].iloc[:500].mean() == pytest.approx(3.0, abs=0.25)
    assert out["c"].iloc[500:].mean() == pytest.approx(0.0, abs=0.25)


def test_the_rows_do_not_depend_on_the_chunks(synth, monkeypatch) -> None:
    """Blocks of known rows are matched in a fixed sequence; the chunks are cut from
    them. Small blocks, so that the chunk cuts cross block boundaries."""
    monkeypatch.setattr(matching, "BLOCK_ROWS", 64)
    known = pd.DataFrame({"b": np.where(np.arange(300) % 3 == 0, "one", "zero")})
    whole = synth.sample_remaining_columns(known, seed=4)
    chunks = list(
        synth.iter_sample_remaining_columns(known, seed=4, chunk_rows=37, first_chunk_rows=5)
    )
    assert [len(c) for c in chunks] == [5, *[37] * 7, 36]
    pd.testing.assert_frame_equal(pd.concat(chunks), whole)
    pd.testing.assert_frame_equal(synth.sample_remaining_columns(known, seed=4), whole)
    assert not synth.sample_remaining_columns(known, seed=5).equals(whole)


def test_a_missing_value_is_a_category_to_match() -> None:
    frame = _table(3000, 1)
    frame.loc[frame.index[::9], "b"] = np.nan
    synth = FITSSynthesizer(seed=0).fit([frame.iloc[:1500], frame.iloc[1500:]])
    known = pd.DataFrame({"b": [np.nan] * 50 + ["one"] * 50}, dtype=object)
    out = synth.sample_remaining_columns(known, seed=0)
    assert out["b"].isna().tolist() == [True] * 50 + [False] * 50
    assert (out["b"].iloc[50:] == "one").all()


def test_a_rare_combination_stops_with_what_to_do(synth) -> None:
    """a = y and b = one together in about 5% of the draws: one draw per row finds few."""
    known = pd.DataFrame({"a": ["y"] * 200, "b": ["one"] * 200})
    with pytest.raises(ValueError, match="come after a column not given") as info:
        synth.sample_remaining_columns(known, seed=0, max_tries=1)
    message = str(info.value)
    assert "(a='y', b='one')" in message and "in 1 draws per row" in message
    assert "order=[...]" in message and "max_tries" in message
    out = synth.sample_remaining_columns(known, seed=0)  # the default allows 100
    assert ((out["a"] == "y") & (out["b"] == "one")).all()


def test_draw_matching_takes_each_row_s_first_agreeing_draw() -> None:
    """An oracle by hand: draws numbered in the order they are made (value = draw
    number, code = number mod 5), each row's condition a code; every row must get the
    first draw made for it that agrees, and the pending rows must keep their draws'
    order."""
    drawn: list[np.ndarray] = []

    def sample(n: int, given: np.ndarray | None) -> np.ndarray:
        start = sum(len(d) for d in drawn)
        values = np.arange(start, start + n, dtype=float)[:, None]
        drawn.append(np.column_stack([values, given]))
        return values

    codes = np.array([[0], [3], [4], [1], [2], [0]])
    given = np.arange(6, dtype=float)[:, None]  # which row each draw was for
    blocks = list(
        draw_matching(
            sample,
            given,
            [lambda v: v[:, 0].astype(int) % 5],
            codes,
            6,
            max_tries=50,
            max_candidates=7,
        )
    )
    got = np.concatenate(blocks)[:, 0].astype(int)
    log = np.concatenate(drawn)
    for row in range(6):
        mine = log[log[:, 1] == row, 0].astype(int)
        assert got[row] == mine[mine % 5 == codes[row, 0]][0]
    assert max(len(d) for d in drawn) <= 7


def test_draw_matching_gives_up_after_its_budget() -> None:
    def sample(n: int, given: np.ndarray | None) -> np.ndarray:
        return np.zeros((n, 1))

    with pytest.raises(MatchError) as info:
        list(
            draw_matching(
                sample,
                None,
                [lambda v: v[:, 0].astype(int)],
                np.array([[0], [1], [1]]),
                3,
                max_tries=4,
                max_candidates=100,
            )
        )
    # rows 1 and 2 ask the same: one group, budget 4 x 2. Try 1: a copy per row, all 3
    # agreeing with some pending row (code 0: row 0's); try 2: a copy each for rows 1
    # and 2, none agreeing (rate 1/4); try 3: min(ceil(1.2 x 4), 4) = 4 each: 2 + 2 + 8
    assert (info.value.row, info.value.pending) == (1, 2)
    assert info.value.tried == 12 and info.value.completed == 0


def test_one_impossible_row_stops_after_its_own_budget_not_its_block_s() -> None:
    """A known row no draw can match among 2,000 that match at once: the run stops after
    about max_tries draws for that row (the budget was its block's, 100 x 2,000 draws,
    8 minutes in a 20,000-row file), naming that row."""
    rng = np.random.default_rng(0)
    count = [0]

    def sample(n: int, given: np.ndarray | None) -> np.ndarray:
        count[0] += n
        return rng.integers(0, 2, size=(n, 1)).astype(float)

    codes = rng.integers(0, 2, size=(2_000, 1))
    codes[700] = 2  # never drawn
    with pytest.raises(MatchError) as info:
        list(
            draw_matching(
                sample,
                None,
                [lambda v: v[:, 0].astype(int)],
                codes,
                2_000,
                max_tries=100,
                max_candidates=100_000,
            )
        )
    assert (info.value.row, info.value.pending, info.value.completed) == (700, 1, 0)
    assert 100 <= info.value.tried < 200
    assert count[0] < 10_000


def test_fits_synthesize_known_takes_a_later_discrete_column(tmp_path) -> None:
    """fits synthesize --known with the chain's last column only: matched by drawing,
    written as any --known output (one row per known row, its value kept; it was
    refused for not being the chain's first column)."""
    from typer.testing import CliRunner

    from fits.cli.main import app

    frame = _table(1200, 2)
    sites = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:600].to_csv(sites[0], index=False)
    frame.iloc[600:].to_csv(sites[1], index=False)
    known = tmp_path / "known.csv"
    pd.DataFrame({"b": ["one"] * 40 + ["zero"] * 40}).to_csv(known, index=False)
    out = tmp_path / "out.csv"
    res = CliRunner().invoke(app, ["synthesize", *map(str, sites), "--known", str(known),
                                   "--out", str(out), "--seed", "1"])  # fmt: skip
    assert res.exit_code == 0, res.output
    got = pd.read_csv(out)
    assert list(got.columns) == ["a", "c", "b"]
    assert got["b"].tolist() == ["one"] * 40 + ["zero"] * 40
    assert got["c"].iloc[:40].mean() > got["c"].iloc[40:].mean() + 1.5
    # a rare combination with one draw per row: a data error with the fix, no output
    pd.DataFrame({"a": ["y"] * 200, "b": ["one"] * 200}).to_csv(known, index=False)
    out.unlink()
    res = CliRunner().invoke(app, ["synthesize", *map(str, sites), "--known", str(known),
                                   "--out", str(out), "--max-tries", "1"])  # fmt: skip
    assert res.exit_code == 1, res.output
    assert "--known" in res.output and "in 1 draws per row" in res.output
    assert "(--order a,b,c)" in res.output and not out.exists()  # the order to give
    res = CliRunner().invoke(app, ["synthesize", *map(str, sites), "--rows", "5",
                                   "--out", str(out), "--max-tries", "3"])  # fmt: skip
    assert res.exit_code == 2 and "--max-tries is for --known" in res.output


def test_the_command_line_default_is_the_library_s() -> None:
    from fits.cli.main import MAX_TRIES
    from fits.synthesizer import DEFAULT_MAX_TRIES

    assert MAX_TRIES == DEFAULT_MAX_TRIES


def test_draws_complete_any_row_with_the_same_prefix_that_wants_their_values() -> None:
    """Draws given one known prefix come from one distribution: a draw completes a
    pending row with that prefix that wants its values, whichever row it was drawn
    for; the k-th such draw of a try the k-th such row, each draw used once.  Draw
    numbers as values; codes: number mod 4."""
    drawn: list[int] = []

    def sample(n: int, given: np.ndarray | None) -> np.ndarray:
        start = sum(drawn)
        drawn.append(n)
        return np.arange(start, start + n, dtype=float)[:, None]

    codes = np.array([[0]] * 6 + [[1]] * 2)  # six rows want code 0, two want code 1
    got = np.concatenate(
        list(
            draw_matching(
                sample,
                None,
                [lambda v: v[:, 0].astype(int) % 4],
                codes,
                8,
                max_tries=50,
                max_candidates=1000,
            )
        )
    )[:, 0].astype(int)
    assert (got % 4 == codes[:, 0]).all() and len(set(got)) == 8
    # the first try, one draw per row (0..7): 0 and 4 complete the first two rows that
    # want 0, and 1 and 5 (drawn for rows that want 0) both rows that want 1
    assert got[:2].tolist() == [0, 4] and got[6:].tolist() == [1, 5]
    # then 4 rows pending, 4 of 8 draws were taken: 1.2 / 0.5 -> 3 copies each
    assert drawn[:2] == [8, 12] and got[2:6].tolist() == [8, 12, 16, 20]
    filled, used = matching._assign(np.array([2, 0, 2, 1]), np.array([2, 2, 2, 0]))
    assert filled.tolist() == [1, 0, 2] and used.tolist() == [3, 0, 1]


def test_rows_with_another_prefix_do_not_share_draws() -> None:
    """A draw made given one prefix never completes a row with another prefix."""
    drawn: list[np.ndarray] = []

    def sample(n: int, given: np.ndarray | None) -> np.ndarray:
        assert given is not None
        drawn.append(given[:, 0].copy())
        return np.column_stack([given[:, 0] * 10 + np.arange(n) % 2])

    given = np.array([[1.0], [2.0], [2.0]])
    codes = np.array([[1], [0], [1]])
    got = np.concatenate(
        list(
            draw_matching(
                sample, given, [lambda v: v[:, 0].astype(int) % 2], codes, 3,
                max_tries=20, max_candidates=100,
            )
        )
    )[:, 0]  # fmt: skip
    assert (got // 10 == given[:, 0]).all() and (got % 2 == codes[:, 0]).all()


def test_the_unmatched_message_shows_a_known_date_as_a_date() -> None:
    """A known time in the refusal is its ISO text, not pandas' Timestamp('...') repr."""
    from fits.synthesizer import _unmatched_message

    known = pd.DataFrame({"day": pd.to_datetime(["2011-06-01", "2011-06-02"]), "g": ["a", "b"]})
    message = _unmatched_message(known, ["g"], MatchError(1, 1, 100, 0), 100)
    assert "(day='2011-06-02', g='b')" in message and "Timestamp" not in message


def test_a_block_s_first_try_starts_from_the_last_block_s_first_try(monkeypatch) -> None:
    """Known values asked as often as they are drawn: about one draw per row.  A block's
    first try took its copies from the previous block's last try, whose candidates were
    for the rarest value left (share about 1/2 here): 3 copies per row in every other
    block, about 2 draws per known row instead of 1 (half the time of a large file)."""
    monkeypatch.setattr(matching, "BLOCK_ROWS", 512)
    rng = np.random.default_rng(0)
    tries: list[int] = []

    def sample(n: int, given: np.ndarray | None) -> np.ndarray:
        tries.append(n)
        return rng.integers(0, 2, size=(n, 1)).astype(float)

    total = 10 * 512
    codes = rng.integers(0, 2, size=(total, 1))
    blocks = draw_matching(
        sample, None, [lambda v: v[:, 0].astype(int)], codes, total,
        max_tries=100, max_candidates=65_536,
    )  # fmt: skip
    assert sum(len(b) for b in blocks) == total
    assert [n for n in tries if n >= 256] == [512] * 10  # one copy per row, each block
    assert sum(tries) < 1.2 * total
