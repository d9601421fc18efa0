"""The body-limit middleware in-process: 413 before a declared oversized body is read, 413 the
moment a chunked body passes the limit, 408 for a body that does not arrive in time, and a client
that leaves mid-body answered by nobody, with no traceback logged."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message

from worker_automation.asgi.body_limit import BodyLimit
from worker_automation.rest_compat.http import guarded, json_body, success
from worker_automation.settings import Settings

LIMIT = 2048


class Sink:
    """What the application received (bytes) and what it was asked to send."""

    def __init__(self) -> None:
        self.received = 0
        self.sent: list[Message] = []


def build(sink: Sink, timeout: float = 5.0) -> Starlette:
    """A small app with the middleware where ``create_app`` puts it (inside Starlette's error
    handler, which would log a traceback for any exception that reached it)."""

    @guarded
    async def echo(request: Request) -> Response:
        body = await json_body(request)
        sink.received += len(json.dumps(body))
        return success("ok", None)

    async def graphql(request: Request) -> Response:
        await request.body()
        return JSONResponse({"data": {}})

    settings = Settings(
        database_url="sqlite+aiosqlite:///:memory:", max_body_bytes=LIMIT, body_read_timeout_seconds=timeout
    )
    routes = [Route("/api/v1/echo", echo, methods=["POST"]), Route("/graphql", graphql, methods=["POST"])]
    return Starlette(routes=routes, middleware=[Middleware(BodyLimit, settings=settings)])


async def call(
    app: Starlette,
    chunks: list[bytes],
    *,
    path: str = "/api/v1/echo",
    declared: int | None = None,
    stall: bool = False,
    leave: bool = False,
) -> tuple[int | None, dict[str, Any], int]:
    """Send ``chunks`` (then wait forever when ``stall``); the status, the body and how many chunks
    the application pulled."""
    headers = [(b"content-type", b"application/json")]
    if declared is not None:
        headers.append((b"content-length", str(declared).encode()))
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers, "query_string": b""}
    pulled = 0
    messages: list[Message] = []

    async def receive() -> Message:
        nonlocal pulled
        if pulled < len(chunks):
            pulled += 1
            more = pulled < len(chunks) or stall or leave
            return {"type": "http.request", "body": chunks[pulled - 1], "more_body": more}
        if stall:
            await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        messages.append(message)

    await app(scope, receive, send)
    status = next((m["status"] for m in messages if m["type"] == "http.response.start"), None)
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return status, json.loads(body) if body else {}, pulled


async def test_declared_oversized_body_is_refused_unread() -> None:
    sink = Sink()
    status, body, pulled = await call(build(sink), [b"x" * 10], declared=LIMIT + 1)
    assert (status, pulled, sink.received) == (413, 0, 0)
    assert body["status"] == "error" and str(LIMIT) in body["message"] and body["data"] is None


async def test_chunked_body_is_cut_at_the_limit() -> None:
    sink = Sink()
    chunks = [b'{"a": "'] + [b"x" * 1000] * 10 + [b'"}']
    status, body, pulled = await call(build(sink), chunks)
    assert status == 413 and body["status"] == "error"
    assert pulled <= 4 and sink.received == 0  # stopped reading right past 2 kB
    status, graphql, _ = await call(build(sink), chunks, path="/graphql")
    assert status == 413 and graphql["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_small_bodies_pass() -> None:
    sink = Sink()
    status, body, _ = await call(build(sink), [b'{"a": ', b"1}"])
    assert status == 200 and body["status"] == "success" and sink.received > 0


async def test_a_body_that_stalls_gets_408() -> None:
    sink = Sink()
    status, body, _ = await call(build(sink, timeout=0.2), [b'{"a": '], stall=True)
    assert status == 408 and body["status"] == "error" and sink.received == 0


async def test_a_client_leaving_mid_body_logs_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    sink = Sink()
    with caplog.at_level(logging.DEBUG):
        unanswered, _, _ = await call(build(sink), [b'{"a": '], path="/graphql", leave=True)
        rest, _, _ = await call(build(sink), [b'{"a": '], path="/api/v1/echo", leave=True)
    # Nobody is left to read an answer (the REST routes still write their envelope).
    assert unanswered is None and rest == 400
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
