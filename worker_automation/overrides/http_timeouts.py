"""uvicorn's HTTP protocols with a deadline for request headers.

uvicorn closes a connection left idle after a response (``timeout_keep_alive``) but waits forever
for the headers of a request that has begun to arrive, or for the first bytes of a new
connection: a client trickling a byte at a time holds a connection and its buffers as long as it
likes. These subclasses close a connection whose request headers are not complete within
:data:`HEADERS_TIMEOUT_SECONDS`; the body has its own deadline (see :mod:`body_limit`).

Kept because uvicorn has no public way to do it: its settings bound idle keep-alive connections
(``timeout_keep_alive``) and header size (``h11_max_incomplete_event_size``) but set no deadline
for headers. What it buys is not speed: without it a client sending a byte every few seconds
holds a connection for as long as it likes; with it, 10 s. What it relies on (uvicorn's protocol
classes, their hooks and ``cycle.response_complete``) is checked by
``tests/contract/test_uvicorn_protocols.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADERS_TIMEOUT_SECONDS: Final = 10.0


class _HeaderDeadline(asyncio.Protocol):
    """Arms a timer while the connection waits for a request's headers.

    Listed before uvicorn's protocol class, so that its hooks wrap that class's own.
    """

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any
    _headers_timer: asyncio.TimerHandle | None = None

    def _waiting_for_headers(self) -> bool:
        # A websocket upgrade hands the transport to the websocket protocol: from then on no
        # request headers are awaited on it, and the connection lives as long as its socket does.
        handler: object = self.transport.get_protocol()
        if handler is not self:
            return False
        return self.cycle is None or bool(self.cycle.response_complete)

    def _arm(self) -> None:
        if self._headers_timer is None:
            self._headers_timer = self.loop.call_later(HEADERS_TIMEOUT_SECONDS, self._expired)

    def _disarm(self) -> None:
        if self._headers_timer is not None:
            self._headers_timer.cancel()
            self._headers_timer = None

    def _expired(self) -> None:
        self._headers_timer = None
        if self._waiting_for_headers() and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_headers():
            self._arm()
        super().data_received(data)
        if not self._waiting_for_headers():
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


class H11WithDeadline(_HeaderDeadline, H11Protocol):
    """uvicorn's h11 protocol with a headers deadline."""


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is optional: h11 then
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

if HttpToolsProtocol is not None:

    class HttpToolsWithDeadline(_HeaderDeadline, HttpToolsProtocol):
        """uvicorn's httptools protocol with a headers deadline."""


def http_protocol() -> type[asyncio.Protocol]:
    """The protocol uvicorn would pick ("auto": httptools when installed), with the deadline."""
    if HttpToolsProtocol is not None:
        return HttpToolsWithDeadline
    return H11WithDeadline


def server_options() -> dict[str, Any]:
    """uvicorn options bounding what a slow or oversized request can hold."""
    return {
        "http": http_protocol(),
        # Idle connections after a response are closed after this (uvicorn's default, said here).
        "timeout_keep_alive": 5,
        # Largest request line plus headers h11 buffers (when h11 is the protocol in use).
        "h11_max_incomplete_event_size": 16 * 1024,
    }
