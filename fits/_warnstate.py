"""Keep the process's warning state across work done on worker threads.

Python's warning filters and its ``showwarning`` hook are one state for the whole
process (before Python 3.14's context-aware warnings), and
:class:`warnings.catch_warnings` saves it on entry and puts it back on exit, in
whatever thread it runs.  pandas and scikit-learn enter such blocks inside ordinary
calls (pandas 3 records warnings around every alignment of two Series; scikit-learn's
input check turns ``ComplexWarning`` into an error), so two threads working at once
can interleave them: the block that exits last restores a state saved while the other
was open, and from then on the warnings of the whole process can go to a list nobody
reads, or be filtered away, or raised.

fits' rule: worker threads never change the warning state on purpose (no
``catch_warnings`` in code that runs on them), and the thread that starts them wraps
their work in :func:`kept_warning_state`, which puts the state back once they are done.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["kept_warning_state"]


@contextmanager
def kept_warning_state() -> Iterator[None]:
    """Put the warning state back, where the block changed it, when the block ends.

    For the thread that hands work to worker threads and waits for all of them inside
    the block: nothing in the process meant to change the state meanwhile, so what
    changed is an interleaving of the workers' ``catch_warnings`` blocks.  The state
    is the one :class:`warnings.catch_warnings` saves: the filter list (the object and
    its entries) and the two display hooks.
    """
    filters, entries = warnings.filters, list(warnings.filters)
    show, impl = warnings.showwarning, getattr(warnings, "_showwarnmsg_impl", None)
    try:
        yield
    finally:
        if not (
            warnings.filters is filters
            and warnings.filters == entries
            and warnings.showwarning is show
            and getattr(warnings, "_showwarnmsg_impl", None) is impl
        ):
            filters[:] = entries  # type: ignore[index]  # a list (typeshed: Sequence)
            warnings.filters = filters
            warnings.showwarning = show
            if impl is not None:
                warnings._showwarnmsg_impl = impl  # type: ignore[attr-defined]
            mutated = getattr(warnings, "_filters_mutated", None)  # drop cached lookups
            if mutated is not None:
                mutated()
