"""The outermost ASGI layer: a request id for every HTTP request and websocket, and its latency.

The id is the caller's ``X-Request-ID`` when it is a sane token (letters, digits, ``-_.:``, at
most 64 characters), otherwise a new one; it is echoed in the response and set in
:data:`worker_automation.infra.logs.REQUEST_ID`, so every log line of the request carries it. Latency
is observed under the matched route's template (``/api/v1/jobs/{job_id}/progress``), never the
raw path, so the number of series stays bounded whatever paths clients send.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from worker_automation.infra.logs import REQUEST_ID
from worker_automation.infra.metrics import HTTP_DURATION

HEADER: Final = b"x-request-id"
UNMATCHED_ROUTE: Final = "unmatched"
METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def request_id_from(scope: Scope) -> str:
    """The caller's id when acceptable, else a fresh one."""
    for name, value in scope.get("headers", ()):
        if name == HEADER:
            candidate = str(value.decode("latin-1")).strip()
            if _SANE_ID.match(candidate):
                return candidate
            break
    return os.urandom(16).hex()


def route_of(scope: Scope) -> str:
    path = getattr(scope.get("route"), "path", None)
    return str(path) if path else UNMATCHED_ROUTE


class RequestObserver:
    """Request id and latency for the app it wraps (see module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # The histogram's children by label values: a few dozen routes, looked up per request.
        self._series: dict[tuple[str, str, int], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        request_id = request_id_from(scope)
        token = REQUEST_ID.set(request_id)
        try:
            if scope["type"] == "websocket":
                await self.app(scope, receive, send)
                return
            await self._http(scope, receive, send, request_id)
        finally:
            REQUEST_ID.reset(token)

    async def _http(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> None:
        status = 500
        encoded = request_id.encode("latin-1")

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != HEADER]
                headers.append((HEADER, encoded))
                message = {**message, "headers": headers}
            await send(message)

        started = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            method = scope["method"] if scope["method"] in METHODS else "other"
            HTTP_DURATION.labels(route_of(scope), method, str(status)).observe(time.perf_counter() - started)
