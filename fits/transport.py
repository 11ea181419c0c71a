"""How the coordinator reaches the clients.

The coordinator only ever calls :meth:`Transport.send` with a :class:`~fits.protocol.Message`
and gets a message back; it never holds a client object or a row.  An in-process
federation (:class:`InProcessTransport`) and a networked one are interchangeable.  Every
transport counts the bytes each client uploads and checks each reply against the
protocol (:func:`fits.protocol.check_reply`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Sequence

from fits.protocol import Message, check_reply

__all__ = ["Transport", "InProcessTransport", "ClientError"]


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
        #: Wall seconds spent waiting for replies, by message kind.
        self.seconds: dict[str, float] = defaultdict(float)

    @property
    def n_clients(self) -> int:
        """Number of clients."""
        return len(self.client_names)

    @abstractmethod
    def _deliver(self, client: int, message: Message) -> Message:
        """Send one message to one client and return its reply."""

    def send(self, client: int, message: Message) -> Message:
        """Send ``message`` to client number ``client``; return its checked reply."""
        start = time.perf_counter()
        reply = self._deliver(client, message)
        self.seconds[message.kind] += time.perf_counter() - start
        if self.validate:
            check_reply(message, reply)
        self.downloaded_bytes[client] += message.nbytes()
        self.uploaded_bytes[client] += reply.nbytes()
        for observer in self.observers:
            observer(client, message, reply)
        return reply

    def broadcast(self, message: Message) -> list[Message]:
        """Send the same message to every client; replies in client order."""
        return [self.send(k, message) for k in range(self.n_clients)]


class InProcessTransport(Transport):
    """All clients live in this process; messages are passed as objects.

    Parameters
    ----------
    clients : sequence of objects with ``name`` and ``handle(Message) -> Message``
        Usually :class:`fits.client.FITSClient` instances.
    validate : bool
        Check every reply against the protocol (default True).
    """

    def __init__(self, clients: Sequence, *, validate: bool = True) -> None:
        super().__init__([c.name for c in clients], validate=validate)
        self._clients = list(clients)

    def _deliver(self, client: int, message: Message) -> Message:
        return self._clients[client].handle(message)
