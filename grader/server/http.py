"""The server's connections (uvicorn's h11 protocol, guarded): slow or idle clients cannot close the server.

uvicorn counts every open connection against `limit_concurrency` and has no deadline for a request's headers: 300
connections that each sent half a request line made every student's request answer 503 until they closed. Here,
instead:

* a request's headers must arrive within HEADER_S of the connection (or of the previous response on a kept-alive
  connection): a connection that has not sent them by then is closed;
* one address holds at most PER_ADDRESS connections at once: past it, a new connection is closed at once;
* no server-wide connection limit (uvicorn's asyncio loop holds thousands of idle connections).

A request body's own deadline and the bytes in flight are the app's (grader/server/app.py).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_S = 10.0
"""Seconds a connection has to send a request's headers."""
PER_ADDRESS = 32
"""Connections one client address may hold at once (a class behind one NAT: each student's `submit` holds one)."""


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for headers and a cap of connections per address."""

    open_by_address: Counter = Counter()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._address = self.client[0] if self.client else ""
        GuardedH11Protocol.open_by_address[self._address] += 1
        if GuardedH11Protocol.open_by_address[self._address] > PER_ADDRESS:
            transport.close()
            return
        self._headers_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        address = getattr(self, "_address", None)
        if address is not None:
            GuardedH11Protocol.open_by_address[address] -= 1
            if GuardedH11Protocol.open_by_address[address] <= 0:
                del GuardedH11Protocol.open_by_address[address]
            self._address = None
        deadline = getattr(self, "_deadline", None)
        if deadline is not None:
            deadline.cancel()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._headers_deadline()  # the next request's headers, on a kept-alive connection

    def _headers_deadline(self) -> None:
        deadline = getattr(self, "_deadline", None)
        if deadline is not None:
            deadline.cancel()
        self._deadline = self.loop.call_later(HEADER_S, self._no_request)

    def _no_request(self) -> None:
        """No request's headers since the connection or the last response: closed."""
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            self.transport.close()
