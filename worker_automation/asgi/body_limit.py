"""Request bodies: at most ``WA_MAX_BODY_BYTES``, arriving within ``WA_BODY_READ_TIMEOUT_SECONDS``.

A pure ASGI middleware: a declared ``Content-Length`` over the limit is refused (413) before a
byte of the body is read, and a body without one (chunked) is counted as it arrives and refused
the moment it passes the limit, so a large body is never held whole. A body still arriving after
the deadline (a client trickling bytes to hold a connection) gets 408. In both cases the
application sees the client leave (``http.disconnect``), gives up, and this middleware answers
in the caller's shape: the REST envelope, or a GraphQL error on ``/graphql``.
"""

from __future__ import annotations

import asyncio
import re
from typing import Final

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from worker_automation.domain.json_codec import FastJSONResponse
from worker_automation.settings import Settings

# A completion carries the job's result: its body may exceed the usual limit by what the result
# limit allows, so a result just over that limit reaches the operation, which ends the job FALHA.
COMPLETE_PATH: Final = re.compile(r"^/api/v1/jobs/[^/]+/complete$")
# Room for the rest of a completion's body (task id, keys, quoting) around its result.
COMPLETE_OVERHEAD_BYTES: Final = 64 * 1024
GRAPHQL_PREFIX: Final = "/graphql"
_DISCONNECT: Final[Message] = {"type": "http.disconnect"}


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def refusal(path: str, status_code: int, message: str) -> Response:
    """The answer to a refused body, in the shape the caller of ``path`` reads."""
    if path.startswith(GRAPHQL_PREFIX):
        error = {"message": message, "extensions": {"code": "BAD_USER_INPUT"}}
        return FastJSONResponse({"data": None, "errors": [error]}, status_code=status_code)
    response = FastJSONResponse(
        {"status": "error", "message": message, "data": None}, status_code=status_code
    )
    # The rest of the body was not read: the connection cannot carry another request.
    response.headers["Connection"] = "close"
    return response


class BodyLimit:
    """Bounds the size of request bodies and the time they take to arrive."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.max_bytes = settings.max_body_bytes
        self.max_complete_bytes = max(
            settings.max_body_bytes, settings.max_result_bytes + COMPLETE_OVERHEAD_BYTES
        )
        self.timeout = settings.body_read_timeout_seconds

    def limit_for(self, path: str) -> int:
        return self.max_complete_bytes if COMPLETE_PATH.match(path) else self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        limit = self.limit_for(path)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await refusal(path, 413, _too_large(limit))(scope, receive, send)
            return
        await _Guarded(self, scope, receive, send, limit).run()


def _too_large(limit: int) -> str:
    return f"Corpo da requisicao grande demais (maximo {limit} bytes)."


MSG_TIMEOUT: Final = "Corpo da requisicao nao chegou a tempo."


class _Guarded:
    """One request under the limits: counts the body, watches the clock, owns the refusal."""

    def __init__(self, limit_: BodyLimit, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        self.owner = limit_
        self.scope = scope
        self.receive_ = receive
        self.send_ = send
        self.limit = limit
        self.received = 0
        self.complete = False
        self.refused: Response | None = None
        self.started = False
        self.deadline = asyncio.get_running_loop().time() + limit_.timeout

    async def receive(self) -> Message:
        if self.refused is not None:
            return _DISCONNECT
        if self.complete:
            # The body is in: what is left to hear is the client leaving, whenever it does.
            return await self.receive_()
        try:
            # A deadline on this task (no task of its own per message, unlike wait_for).
            async with asyncio.timeout_at(self.deadline):
                message = await self.receive_()
        except TimeoutError:
            return self._refuse(408, MSG_TIMEOUT)
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                return self._refuse(413, _too_large(self.limit))
            self.complete = not message.get("more_body", False)
        return message

    def _refuse(self, status_code: int, message: str) -> Message:
        path: str = self.scope.get("path", "")
        self.refused = refusal(path, status_code, message)
        return _DISCONNECT

    async def send(self, message: Message) -> None:
        if self.refused is not None and not self.started:
            return  # the application's answer to a body it never got: ours goes instead
        self.started = True
        await self.send_(message)

    async def run(self) -> None:
        try:
            await self.owner.app(self.scope, self.receive, self.send)
        except ClientDisconnect:
            if self.refused is None:
                return  # the client left: nobody to answer, nothing worth a traceback
        if self.refused is not None and not self.started:
            await self.refused(self.scope, self.receive_, self.send_)
