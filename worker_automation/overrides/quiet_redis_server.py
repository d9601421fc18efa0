"""fakeredis' TCP server, with connections that sleep until there is something to do.

fakeredis' own TCP server gives each connection a thread that wakes every 10 ms to look for a
reply pushed without a request (a published message): with the few dozen connections of an
embedded ``serve`` that was a third of a core spent on a service doing nothing (31% of one core
idle, against 0.6% with this server: docs/decisions/0025-embedded-redis-without-polling.md). Here
each connection's thread sleeps in ``select`` on its socket and on a pipe written whenever a reply
is queued for it, so an idle connection costs nothing. A blocking command (BRPOP) already waits on
the server's condition variable, in the same thread, until a write or its timeout. And each
connection sends at once (``TCP_NODELAY``), as Redis' own do: a pipeline's replies, written one by
one, otherwise waited for the client's delayed acknowledgement, and a 200-job burst of the embedded
default took 20 s instead of 3.5 (docs/decisions/0046-embedded-broker-sends-at-once.md).

What it relies on that fakeredis does not document (``tests/contract/test_fakeredis_server.py``
fails when a release changes it): the request handler class of ``fakeredis._tcp_server`` and its
``setup``/``handle``/``finish``, ``current_client`` with ``get_socket``, ``can_read`` and
``read_response``, the ``writer`` that dumps a reply, the ``response_ready`` event a fake socket
sets when it queues a reply, ``fakeredis._typing.RaiseErrorTypes`` and the server's
``_shutdown_event``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable


class Serving(Protocol):
    """What the embedded broker (``broker.embedded.EmbeddedRedis``) uses of its server."""

    server_address: Any

    def serve_forever(self, poll_interval: float = ...) -> None: ...
    def shutdown(self) -> None: ...
    def server_close(self) -> None: ...
    def wakeups(self) -> int: ...


log = logging.getLogger(__name__)
# A fakeredis without the reply event its sockets raise (older releases) is polled this often.
FALLBACK_POLL_SECONDS: Final = 0.01


class _Wakeup(threading.Event):
    """The event fakeredis sets whenever it queues a reply for a connection; setting it also
    writes a byte to the connection's pipe, which ends the handler's ``select``."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def set(self) -> None:
        super().set()
        self.poke()

    def poke(self) -> None:
        # The pipe is non-blocking: when full, a wake-up is already pending. Closed: nobody waits.
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._fd, b"\0")


def quiet_server_class() -> Callable[[tuple[str, int]], Serving]:
    """The quiet server classes, built on first use: a process given a real Redis never loads
    fakeredis."""
    from fakeredis._clients._tcp_server import TCPFakeRequestHandler
    from fakeredis._typing import RaiseErrorTypes

    class QuietHandler(TCPFakeRequestHandler):
        """One connection: sleeps until its client sends or a reply is queued for it."""

        server: QuietServer

        def setup(self) -> None:
            super().setup()
            # As Redis itself does: a reply written in pieces (each of a pipeline's) goes out at
            # once, not held by Nagle's algorithm until the client's delayed acknowledgement.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._wake_r, wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            os.set_blocking(wake_w, False)
            self._wakeup = _Wakeup(wake_w)
            self._wake_w = wake_w
            sock = self.current_client.get_socket()
            self._timeout: float | None = None
            self.woken = 0
            if hasattr(sock, "response_ready"):
                sock.response_ready = self._wakeup
            else:
                self._timeout = FALLBACK_POLL_SECONDS
            self.server.track(self)

        def wake(self) -> None:
            self._wakeup.poke()

        def _reply_pending(self) -> None:
            try:
                response = self.current_client.read_response()
            except RaiseErrorTypes as exc:
                # An error reply, raised as redis-py raises it: sent, and the connection goes on.
                response = exc
            self.writer.dump(response)

        def _wait(self) -> bool:
            """Sleep until the socket or the pipe is readable; True when the socket is."""
            readable, _, _ = select.select([self.connection, self._wake_r], [], [], self._timeout)
            self.woken += 1
            if self._wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self._wake_r, 512):
                        pass
            return self.connection in readable

        def handle(self) -> None:
            stopping = self.server._shutdown_event
            while not stopping.is_set():
                try:
                    if self.current_client.can_read():
                        self._reply_pending()
                        continue
                    # Non-blocking: b"" is "nothing buffered yet" or the peer has gone.
                    data = self.rfile.readline()
                    if data == b"":
                        if not self._wait():
                            continue
                        data = self.rfile.readline()
                        if data == b"":
                            break
                    self.current_client.get_socket().sendall(data)
                except ConnectionError:
                    break
                except Exception as exc:
                    log.debug("embedded broker connection %s: %s", self.client_address, exc)
                    self.writer.dump(exc)
                    break

        def finish(self) -> None:
            self.server.forget(self)
            try:
                super().finish()
            finally:
                for fd in (self._wake_r, self._wake_w):
                    with contextlib.suppress(OSError):
                        os.close(fd)

    from fakeredis import TcpFakeServer

    class QuietServer(TcpFakeServer):
        """fakeredis' TCP server with :class:`QuietHandler` connections."""

        def __init__(self, address: tuple[str, int]) -> None:
            super().__init__(address)
            self.RequestHandlerClass = QuietHandler
            self._handlers: set[Any] = set()
            self._handlers_lock = threading.Lock()
            self._gone_wakeups = 0

        def track(self, handler: Any) -> None:
            with self._handlers_lock:
                self._handlers.add(handler)

        def forget(self, handler: Any) -> None:
            with self._handlers_lock:
                self._handlers.discard(handler)
                self._gone_wakeups += handler.woken

        def wakeups(self) -> int:
            with self._handlers_lock:
                return int(self._gone_wakeups + sum(handler.woken for handler in self._handlers))

        def shutdown(self) -> None:
            super().shutdown()
            # Every connection's thread is asleep in select: woken, it sees the shutdown.
            with self._handlers_lock:
                handlers = list(self._handlers)
            for handler in handlers:
                handler.wake()

    return QuietServer
