"""A Redis-protocol server inside this process, for running with no Redis installed.

Everything else (Celery workers in other processes, redis-py, the event bus) reaches it over TCP
exactly as it would reach a real Redis, so the embedded setup runs the production code paths. It
needs the Lua engine (``fakeredis[lua]``): Celery workers use EVALSHA and die without it.

Its connections sleep until there is something to do: the server is fakeredis' own with a quieter
connection handler (:mod:`worker_automation.overrides.quiet_redis_server`).

Why: docs/decisions/0025-embedded-redis-without-polling.md.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from types import TracebackType
from typing import Final

from worker_automation.overrides.quiet_redis_server import Serving, quiet_server_class

log = logging.getLogger(__name__)
DEFAULT_HOST: Final = "127.0.0.1"
# How often the accept loop checks for shutdown.
POLL_SECONDS: Final = 0.5


class EmbeddedRedis:
    """An in-process Redis on ``host:port`` (port 0 picks a free one), served from a thread."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = 0) -> None:
        self.host = host
        self._requested_port = port
        self._server: Serving | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port actually listened on (only known once started)."""
        if self._server is None:
            raise RuntimeError("the embedded Redis is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``redis://host:port/0`` of the running server."""
        return f"redis://{self.host}:{self.port}/0"

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._server is not None

    def wakeups(self) -> int:
        """How many times the connections' threads have woken up so far (each request and each
        pushed reply counts one): it stays put while every client is idle."""
        if self._server is None:
            return 0
        return self._server.wakeups()

    def start(self) -> EmbeddedRedis:
        """Bind the port and start serving; returns self."""
        if self._server is not None:
            return self
        if importlib.util.find_spec("lupa") is None:
            raise RuntimeError("the embedded Redis needs Lua support: install fakeredis[lua]")
        server = quiet_server_class()((self.host, self._requested_port))
        port = server.server_address[1]
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": POLL_SECONDS},
            name=f"embedded-redis-{port}",
            daemon=True,
        )
        thread.start()
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Stop serving, disconnect every client and release the port."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        # shutdown() ends the accept loop and wakes each connection's thread to finish;
        # server_close() waits for those threads and closes the listening socket.
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
