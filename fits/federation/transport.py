"""How the coordinator reaches the clients.

The coordinator only ever calls :meth:`Transport.send` (or :meth:`Transport.exchange`)
with a :class:`~fits.federation.protocol.Message` and gets a message back; it never
holds a client object or a row.  An in-process federation
(:class:`InProcessTransport`) and a networked one are
interchangeable.  Every transport counts the bytes each client uploads and checks each
reply against the protocol (:func:`fits.federation.protocol.check_reply`).
"""

from __future__ import annotations

import numbers
import os
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from fits._warnstate import kept_warning_state
from fits.federation.protocol import Message, check_reply

__all__ = ["ClientError", "InProcessTransport", "Transport"]

#: Message types whose answer reads a site's table with pandas (the setup and
#: configure rounds, the rule checks, the analysis design's ``moments``).
#: :class:`InProcessTransport` answers them one site after another; see
#: :meth:`InProcessTransport._deliver_all` for why.
TABLE_ROUNDS = frozenset({"setup", "configure", "rules", "moments"})


class ClientError(RuntimeError):
    """A client failed to answer; the message names the client."""


class Transport(ABC):
    """Message channel between the coordinator and K clients.

    Subclasses implement :meth:`_deliver`; this base class validates replies and keeps
    the upload counters.
    """

    def __init__(self, client_names: Sequence[str], *, validate: bool = True) -> None:
        self.client_names = list(client_names)
        self.validate = validate
        self.uploaded_bytes = [0] * len(self.client_names)
        self.downloaded_bytes = [0] * len(self.client_names)
        self.observers: list[Callable[[int, Message, Message], None]] = []
        #: Wall seconds spent waiting for replies, by message type.
        self.seconds: dict[str, float] = defaultdict(float)

    @property
    def n_clients(self) -> int:
        """Number of clients."""
        return len(self.client_names)

    @abstractmethod
    def _deliver(self, client: int, message: Message) -> Message:
        """Send one message to one client and return its reply."""

    def _deliver_all(self, messages: Sequence[Message]) -> list[Message]:
        """Send message ``k`` to client ``k`` for every client; replies in client order.

        The default delivers one after another; a networked transport overrides this
        so that the clients work on a round at the same time.
        """
        return [self._deliver(k, m) for k, m in enumerate(messages)]

    def _record(self, client: int, message: Message, reply: Message) -> None:
        if self.validate:
            check_reply(message, reply)
        self.downloaded_bytes[client] += message.nbytes()
        self.uploaded_bytes[client] += reply.nbytes()
        for observer in self.observers:
            observer(client, message, reply)

    def send(self, client: int, message: Message) -> Message:
        """Send ``message`` to client number ``client``; return its checked reply."""
        start = time.perf_counter()
        reply = self._deliver(client, message)
        self.seconds[message.type] += time.perf_counter() - start
        self._record(client, message, reply)
        return reply

    def exchange(self, messages: Sequence[Message]) -> list[Message]:
        """One round: message ``k`` goes to client ``k``; checked replies in client order.

        All messages of a round must be of one type.
        """
        if len(messages) != self.n_clients:
            raise ValueError(f"a round needs {self.n_clients} messages, got {len(messages)}")
        if len({m.type for m in messages}) > 1:
            raise ValueError("all messages of a round must be of one type")
        start = time.perf_counter()
        replies = self._deliver_all(messages)
        self.seconds[messages[0].type] += time.perf_counter() - start
        for k, (message, reply) in enumerate(zip(messages, replies, strict=True)):
            self._record(k, message, reply)
        return replies

    def broadcast(self, message: Message) -> list[Message]:
        """Send the same message to every client in one round; replies in client order."""
        return self.exchange([message] * self.n_clients)

    def _deliver_rounds(self, rounds: Sequence[Sequence[Message]]) -> list[list[Message]]:
        """Several independent rounds; the replies of each in client order.

        The default runs them one after another; a networked transport overrides this to
        send them all at once, so that they cost one round trip instead of one each.
        """
        return [self._deliver_all(messages) for messages in rounds]

    def broadcast_many(self, messages: Sequence[Message]) -> list[list[Message]]:
        """Several requests that do not depend on each other's replies, each sent to every
        client: as :meth:`broadcast` for each, in order, but a networked transport may
        send them together (one round trip; every site still answers them one by one,
        in the order given).  Returns, per request, the checked replies in client order.
        """
        rounds = [[m] * self.n_clients for m in messages]
        start = time.perf_counter()
        replies = self._deliver_rounds(rounds) if rounds else []
        if rounds:  # the wait, shared out evenly between the requests
            share = (time.perf_counter() - start) / len(rounds)
            for m in messages:
                self.seconds[m.type] += share
        for messages_, replies_ in zip(rounds, replies, strict=True):
            for k, (message, reply) in enumerate(zip(messages_, replies_, strict=True)):
                self._record(k, message, reply)
        return replies


class InProcessTransport(Transport):
    """All clients live in this process; messages are passed as objects.

    Parameters
    ----------
    clients : sequence of objects with ``name`` and ``handle(Message) -> Message``
        Usually :class:`fits.federation.client.FITSClient` instances.
    validate : bool
        Check every reply against the protocol (default True).
    n_jobs : int, optional
        Clients that work on a round at the same time, in threads (numpy releases the
        GIL in its heavy loops), as the sites of a real federation would.  Default:
        the number of cores, at most the number of clients; 1 answers one client after
        another.  The replies, and so the synthetic table, do not depend on it.
    """

    def __init__(
        self, clients: Sequence, *, validate: bool = True, n_jobs: int | None = None
    ) -> None:
        super().__init__([c.name for c in clients], validate=validate)
        self._clients = list(clients)
        if n_jobs is not None and (
            isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral)
        ):
            raise TypeError(f"n_jobs must be a whole number of threads, -1 or None, got {n_jobs!r}")
        if n_jobs is None or n_jobs == -1:
            n_jobs = os.cpu_count() or 1
        elif n_jobs < 1:
            raise ValueError(f"n_jobs must be a positive number of threads or -1, got {n_jobs}")
        self.n_jobs = max(1, min(int(n_jobs), len(self._clients)))
        self._pool: ThreadPoolExecutor | None = None

    def _deliver(self, client: int, message: Message) -> Message:
        return self._clients[client].handle(message)

    def _deliver_all(self, messages: Sequence[Message]) -> list[Message]:
        """One round on the worker threads; replies in client order.

        The warning state of the process is one for all threads (see
        :mod:`fits._warnstate`): pandas' and scikit-learn's own ``catch_warnings``
        blocks, entered by two sites at once, can leave it changed, the coordinator's
        record of the sites' notes lost.  Hence, two rules:

        - rounds that read the table with pandas (:data:`TABLE_ROUNDS`: where pandas
          records warnings, and where the sites' data notes are said) are answered one
          site after another, as with ``n_jobs=1``;
        - after any other round, the warning state is put back as it was before the
          round (:func:`~fits._warnstate.kept_warning_state`).
        """
        if self.n_jobs == 1 or messages[0].type in TABLE_ROUNDS:
            return super()._deliver_all(messages)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.n_jobs, thread_name_prefix="fits-client")
        with kept_warning_state():
            futures = [self._pool.submit(self._deliver, k, m) for k, m in enumerate(messages)]
            for f in futures:  # every thread done before the state is put back
                f.exception()
        return [f.result() for f in futures]  # the first failing client, in client order

    def close(self) -> None:
        """Stop the worker threads (they also stop when the transport is collected)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
