"""The process's warning state survives work on worker threads (fits._warnstate).

``warnings.catch_warnings`` saves the process-wide warning state on entry and restores
it on exit, whatever the thread; two threads interleaving such blocks (pandas and
scikit-learn enter them inside ordinary calls) can leave the coordinator's record of
the sites' notes replaced by a list nobody reads.  These tests force that
interleaving, then check that fits puts the state back and that the rounds where the
sites read their tables are answered one site at a time.
"""

from __future__ import annotations

import threading
import time
import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from fits._warnstate import kept_warning_state
from fits.evaluation import utility
from fits.evaluation.utility import fit_logistic
from fits.federation.protocol import Message
from fits.federation.transport import TABLE_ROUNDS, InProcessTransport

WAIT = 5.0  # seconds an event waits before giving up (a serial round never sets it)


class _Interleaving:
    """Two sites whose catch_warnings blocks interleave as threads can: site 0 opens a
    recording block, site 1 opens one inside it, site 0 closes first, site 1 last (so
    site 1 restores the state it saved while site 0's record was open)."""

    def __init__(self) -> None:
        self.a_in, self.b_in, self.a_out = threading.Event(), threading.Event(), threading.Event()

    def site(self, k: int) -> object:
        outer = self

        class Site:
            name = f"site {k}"

            def handle(self, message: Message) -> Message:
                if k == 0:
                    with warnings.catch_warnings(record=True):
                        outer.a_in.set()
                        outer.b_in.wait(WAIT)
                    outer.a_out.set()
                else:
                    outer.a_in.wait(WAIT)
                    with warnings.catch_warnings():
                        outer.b_in.set()
                        outer.a_out.wait(WAIT)
                return Message(message.type, {"x": np.zeros(1)})

        return Site()


def test_interleaved_blocks_on_two_sites_leave_the_coordinators_record_as_it_was() -> None:
    plan = _Interleaving()
    transport = InProcessTransport([plan.site(0), plan.site(1)], validate=False, n_jobs=2)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            transport.broadcast(Message("hessian", {}))
            assert plan.a_out.is_set() and plan.b_in.is_set()  # the interleaving happened
            warnings.warn("a note said after the round", UserWarning, stacklevel=1)
    finally:
        transport.close()
    assert [str(w.message) for w in caught] == ["a note said after the round"]


def test_without_the_guard_the_same_interleaving_loses_the_record() -> None:
    """The oracle for the test above: the interleaving really does lose the record
    when nothing puts the state back (so the test above can fail)."""
    plan = _Interleaving()
    sites = [plan.site(0), plan.site(1)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=s.handle, args=(Message("hessian", {}),)) for s in sites]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        warnings.warn("a note said after the round", UserWarning, stacklevel=1)
        lost = not caught
    assert lost


def test_kept_warning_state_puts_back_filters_and_hooks() -> None:
    before = (warnings.filters, list(warnings.filters), warnings.showwarning)
    with kept_warning_state():
        warnings.simplefilter("error", RuntimeWarning)  # left behind, as a thread might
        warnings.filters = list(warnings.filters)
        warnings.showwarning = lambda *a, **k: None
    assert warnings.filters is before[0]
    assert warnings.filters == before[1]
    assert warnings.showwarning is before[2]
    with pytest.warns(RuntimeWarning, match="still a warning"):
        warnings.warn("still a warning", RuntimeWarning, stacklevel=1)


class _Counting:
    """Sites that count how many of them answer at once."""

    def __init__(self, n: int) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.most: dict[str, int] = {}
        self.barrier = threading.Barrier(n, timeout=WAIT)

    def site(self, k: int) -> object:
        outer = self

        class Site:
            name = f"site {k}"

            def handle(self, message: Message) -> Message:
                with outer.lock:
                    outer.active += 1
                    most = outer.most.get(message.type, 0)
                    outer.most[message.type] = max(most, outer.active)
                if message.type in TABLE_ROUNDS:
                    time.sleep(0.05)  # room for another site to start, were it allowed
                else:
                    outer.barrier.wait()  # every site at once, or a timeout
                with outer.lock:
                    outer.active -= 1
                return Message(message.type, {"x": np.zeros(1)})

        return Site()


def test_table_rounds_are_answered_one_site_at_a_time_and_others_together() -> None:
    plan = _Counting(3)
    transport = InProcessTransport([plan.site(k) for k in range(3)], validate=False, n_jobs=3)
    try:
        for kind in ("setup", "configure", "rules", "moments", "hessian", "cdf"):
            transport.broadcast(Message(kind, {}))
    finally:
        transport.close()
    assert {k: plan.most[k] for k in ("setup", "configure", "rules", "moments")} == dict.fromkeys(
        ("setup", "configure", "rules", "moments"), 1
    )
    assert plan.most["hessian"] == plan.most["cdf"] == 3


def test_fit_logistic_matches_scikit_learn_and_says_nonconvergence_without_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(400, 3)) * [1.0, 10.0, 0.1] + [0.0, 50.0, -2.0]
    y = (rng.random(400) < 1 / (1 + np.exp(-(x @ [1.0, -0.1, 3.0] + 11.0)))).astype(float)
    w = rng.uniform(0.2, 3.0, 400)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # fit_logistic itself says nothing
        params, converged = fit_logistic(x, y, w, C=10.0)
    assert converged
    # oracle: scikit-learn's LogisticRegression on the same standardized columns
    mean = np.average(x, axis=0, weights=w)
    sd = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=w))
    model = LogisticRegression(C=10.0, tol=1e-10, max_iter=10_000)
    model.fit((x - mean) / sd, y.astype(int), sample_weight=w)
    coef = model.coef_[0] / sd
    expected = np.r_[model.intercept_[0] - coef @ mean, coef]
    np.testing.assert_allclose(params, expected, rtol=1e-4, atol=1e-5)

    monkeypatch.setattr(utility, "LOGISTIC_MAX_ITER", 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, converged = fit_logistic(x, y, w, C=10.0)
    assert not converged
