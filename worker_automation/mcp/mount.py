"""``/mcp`` on ``serve``, its server built by the first request with a valid key that reaches it.

The MCP SDK and what it brings take about 24 MiB in every API process, and most deployments never
call ``/mcp``. The route exists from the start; the first request builds the server
(:class:`worker_automation.mcp.server.HttpMcp`) and starts its session manager, which then runs
until the app stops.

Why: docs/decisions/0014-modules-loaded-when-needed.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from worker_automation.domain.errors import Unauthenticated
from worker_automation.resolvers.auth import MSG_MISSING, authenticate, key_from_headers
from worker_automation.rest_compat.http import guarded

if TYPE_CHECKING:
    from worker_automation.mcp.server import ServicesSource

MSG_STOPPING = "O servico esta encerrando."
# What the key check answers when the request may go on to the server.
_LET_IN: Final = Response(status_code=204)


class LazyMcp:
    """The ``/mcp`` route; :meth:`run` is entered around the app's lifespan."""

    def __init__(self, services_source: ServicesSource) -> None:
        self._services_source = services_source
        self._app: ASGIApp | None = None
        self._running = AsyncExitStack()
        self._lock: asyncio.Lock | None = None
        self._stopped = False
        self._check_key = guarded(self._let_in)

    def routes(self) -> list[BaseRoute]:
        return [Route("/mcp", self, name="mcp")]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._stopped:
            refused = await self._check_key(Request(scope, receive))
            if refused is not _LET_IN:
                await refused(scope, receive, send)
                return
        app = self._app or await self._start()
        if app is None:
            await JSONResponse({"detail": MSG_STOPPING}, status_code=503)(scope, receive, send)
            return
        await app(scope, receive, send)

    async def _let_in(self, request: Request) -> Response:
        """A request without a key, or with one that is unknown or revoked, is answered 401 here,
        as REST and GraphQL answer it, before the server is built or reached: an anonymous caller
        never makes a process load the SDK. Each tool still checks the key's scopes."""
        raw_key = key_from_headers(request.headers)
        if raw_key is None:
            raise Unauthenticated(MSG_MISSING)
        services = await self._services_source()
        await authenticate(services.db, raw_key)
        return _LET_IN

    async def _start(self) -> ASGIApp | None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._app is None and not self._stopped:
                from worker_automation.mcp.server import HttpMcp

                server = HttpMcp(self._services_source)
                await self._running.enter_async_context(server.run())
                self._app = server.app()
            return self._app

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Serve; on the way out stop the session manager if a request started it."""
        try:
            yield
        finally:
            self._stopped = True
            self._app = None
            await self._running.aclose()
