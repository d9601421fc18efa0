"""The workers' HTTP client against a scripted server: bodies, keep-alive, closed connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from worker_automation.worker.http import ApiTimeout, ApiUnreachable, HttpClient

Script = Callable[[bytes, int], bytes | None]  # (request head, n-th request on this connection)


@pytest.fixture
async def server() -> AsyncIterator[Callable[[Script], Awaitable[str]]]:
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            count = 0
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next(
                        (
                            int(line.split(b":")[1])
                            for line in head.split(b"\r\n")
                            if line.lower().startswith(b"content-length")
                        ),
                        0,
                    )
                    body = await reader.readexactly(length)
                    count += 1
                    answer = script(head + body, count)
                    if answer is None:
                        break
                    writer.write(answer)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            writer.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(srv)
        port = srv.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/base"

    yield start
    for srv in servers:
        srv.close()


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def test_json_body_headers_and_reuse(server: Callable[[Script], Awaitable[str]]) -> None:
    seen: list[bytes] = []

    def script(request: bytes, n: int) -> bytes:
        seen.append(request)
        return ok(b'{"n": %d}' % n)

    client = HttpClient(await server(script), {"X-Worker-Api-Key": "k"})
    first = await client.request("POST", "/jobs/1/start", json_body={"task_id": "t"})
    second = await client.request("GET", "/jobs/pending", params={"limit": 5})
    assert (first.status_code, first.json(), second.json()) == (200, {"n": 1}, {"n": 2})  # one connection
    assert seen[0].startswith(b"POST /base/jobs/1/start HTTP/1.1\r\n")
    assert b"X-Worker-Api-Key: k\r\n" in seen[0] and seen[0].endswith(b'{"task_id": "t"}')
    assert seen[1].startswith(b"GET /base/jobs/pending?limit=5 HTTP/1.1\r\n")
    await client.close()


async def test_chunked_and_connection_close(server: Callable[[Script], Awaitable[str]]) -> None:
    total = 0
    chunked = b"HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked += b'4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'

    def script(_request: bytes, _n: int) -> bytes:
        nonlocal total
        total += 1
        return chunked if total == 1 else ok(b"{}", b"Connection: close\r\n")

    client = HttpClient(await server(script))
    reply = await client.request("GET", "/x")
    assert (reply.status_code, reply.json()) == (409, {"a": 1})
    assert (await client.request("GET", "/x")).json() == {}
    assert (await client.request("GET", "/x")).json() == {}  # a new connection after the close
    await client.close()


async def test_idle_connection_closed_by_the_server_is_replaced(
    server: Callable[[Script], Awaitable[str]],
) -> None:
    # The server answers once per connection and then closes it, as after a keep-alive timeout.
    client = HttpClient(await server(lambda _r, n: ok(b'"ok"') if n == 1 else None))
    assert (await client.request("GET", "/a")).json() == "ok"
    await asyncio.sleep(0.05)
    assert (await client.request("POST", "/b", json_body={})).json() == "ok"
    await client.close()


async def test_unreachable_and_timeout(server: Callable[[Script], Awaitable[str]]) -> None:
    with pytest.raises(ApiUnreachable):
        await HttpClient("http://127.0.0.1:1").request("GET", "/")

    def never(_request: bytes, _n: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{"  # the rest never comes

    client = HttpClient(await server(never), timeout=0.3)
    with pytest.raises(ApiTimeout):
        await client.request("GET", "/slow")
    await client.close()


async def test_on_sent_is_called_once_the_request_is_out_and_before_its_answer() -> None:
    reading = asyncio.Event()
    received = asyncio.Event()
    release = asyncio.Event()
    body_sizes: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reading.wait()  # nothing is read before the test says so: the request backs up
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        body_sizes.append(len(await reader.readexactly(length)))
        received.set()
        await release.wait()
        writer.write(ok(b'{"ok": true}'))
        await writer.drain()
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    client = HttpClient(f"http://127.0.0.1:{port}")
    sent = asyncio.Event()
    size = 64_000_000  # far more than the kernel's socket buffers hold
    try:
        reply = asyncio.create_task(
            client.request("POST", "/", json_body={"r": "x" * size}, on_sent=sent.set)
        )
        await asyncio.sleep(0.5)
        assert not sent.is_set()  # still in this process: not sent yet
        reading.set()
        await asyncio.wait_for(sent.wait(), 30)
        await asyncio.wait_for(received.wait(), 30)
        assert body_sizes == [len(b'{"r": "') + size + 2]
        assert not reply.done()  # sent, its answer still to come
        release.set()
        assert (await reply).json() == {"ok": True}
    finally:
        await client.close()
        srv.close()


async def test_a_result_the_api_would_refuse_is_reported_as_a_failure(
    server: Callable[[Script], Awaitable[str]],
) -> None:
    from worker_automation.worker.client import WorkerApiClient

    seen: list[bytes] = []

    def script(request: bytes, _n: int) -> bytes:
        seen.append(request)
        return ok(b'{"status": "success", "message": "", "data": {}}')

    client = WorkerApiClient(await server(script), "wmk_x", max_result_bytes=1000)
    try:
        assert await client.complete(7, {"blob": "x" * 2000}, task_id="t-1")
        assert await client.complete(8, {"text": "a\x00b"})
        assert await client.complete(9, {"ok": True})
    finally:
        await client.close()
    paths = [request.split(b" ")[1] for request in seen]
    assert paths == [
        b"/base/api/v1/jobs/7/fail",
        b"/base/api/v1/jobs/8/fail",
        b"/base/api/v1/jobs/9/complete",
    ]
    assert b"ResultRejected" in seen[0] and b"1000" in seen[0] and b"x" * 2000 not in seen[0]
    # The failure belongs to the run that reported it, as its completion would have.
    assert b'"task_id":"t-1"' in seen[0].replace(b" ", b"") and b"task_id" not in seen[1]
