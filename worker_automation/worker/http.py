"""A small HTTP/1.1 client for worker processes: keep-alive connections, JSON in and out.

Every job costs a worker two calls to the API (claim and report), and a general-purpose client
spent more CPU on each than Celery spends on the whole task. Here requests are written by hand
over persistent connections (TLS for ``https://``), responses read by ``Content-Length`` or
chunked encoding. There are no redirects, proxies, cookies or compression: a worker calls one API
it is configured for, nothing else.

Why: docs/decisions/0003-lean-worker-http-client.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode, urlsplit


class ApiUnreachable(ConnectionError):
    """No answer: the connection could not be made or broke before a response was read."""


class ApiTimeout(TimeoutError):
    """The API took longer than the timeout: it may have acted on the request, so it is not sent
    again by itself."""


@dataclass(frozen=True)
class HttpReply:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class _Connection:
    """One keep-alive connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @property
    def open(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
            await self.writer.wait_closed()


# How long a request may wait for its answer before it counts as unanswered (ApiTimeout).
REQUEST_TIMEOUT_SECONDS: Final = 30.0


class HttpClient:
    """Requests to one base URL over keep-alive connections (one per request in flight)."""

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str] | None = None,
        *,
        timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self._host = parts.hostname
        self._tls = parts.scheme == "https"
        self._port = parts.port or (443 if self._tls else 80)
        self._base_path = parts.path
        host_header = parts.netloc.rsplit("@", 1)[-1]
        fixed = {"Host": host_header, "Accept": "application/json", **(headers or {})}
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in fixed.items()).encode("latin-1")
        self._timeout = timeout
        self._idle: list[_Connection] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        on_sent: Callable[[], None] | None = None,
    ) -> HttpReply:
        """Send one request; ApiUnreachable when no response could be read.

        ``on_sent`` is called once the whole request has left this process (before the response
        is read): from then on the API acts on it even if this process ends.
        """
        target = self._base_path + path
        if params:
            target += "?" + urlencode(params)
        body = None if json_body is None else json.dumps(json_body).encode()
        try:
            # A deadline on this task rather than wait_for's task per request (two per job).
            async with asyncio.timeout(self._timeout):
                return await self._exchange(method, target, body, on_sent)
        except TimeoutError:
            raise ApiTimeout(f"no answer from the API in {self._timeout:.0f}s") from None

    async def _exchange(
        self, method: str, target: str, body: bytes | None, on_sent: Callable[[], None] | None
    ) -> HttpReply:
        while self._idle:
            conn = self._idle.pop()
            if not conn.open:
                await conn.close()
                continue
            try:
                return await self._once(conn, method, target, body, on_sent)
            except (ConnectionError, asyncio.IncompleteReadError, OSError) as exc:
                await conn.close()
                if isinstance(exc, ApiUnreachable):
                    raise
                # The server closed this idle connection (its keep-alive timeout) as the request
                # went out: nothing was answered on it, so the request goes on a new connection.
        try:
            conn = await self._connect()
            return await self._once(conn, method, target, body, on_sent)
        except (ConnectionError, asyncio.IncompleteReadError, OSError) as exc:
            raise ApiUnreachable(str(exc) or type(exc).__name__) from None

    async def _connect(self) -> _Connection:
        context = ssl.create_default_context() if self._tls else None
        reader, writer = await asyncio.open_connection(self._host, self._port, ssl=context)
        # drain() then returns only once the whole request has left this process (over TLS, once
        # it has left the TLS layer; the pool's outbox covers what the socket layer still holds).
        writer.transport.set_write_buffer_limits(high=0)
        return _Connection(reader, writer)

    async def _once(
        self,
        conn: _Connection,
        method: str,
        target: str,
        body: bytes | None,
        on_sent: Callable[[], None] | None,
    ) -> HttpReply:
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self._fixed
        if body is not None:
            head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        elif method in ("POST", "PUT", "PATCH"):
            head += b"Content-Length: 0\r\n"
        try:
            conn.writer.write(head + b"\r\n" + (body or b""))
            await conn.writer.drain()
            if on_sent is not None:
                on_sent()
            status, length, chunked, closing = _parse_head(await conn.reader.readuntil(b"\r\n\r\n"))
            if chunked:
                content = await _read_chunked(conn.reader)
            elif length is not None:
                content = await conn.reader.readexactly(length)
            else:
                content, closing = await conn.reader.read(), True
        except BaseException:
            # A half-sent request or half-read response leaves the connection unusable (a
            # timeout lands here too).
            await conn.close()
            raise
        if closing:
            await conn.close()
        else:
            self._idle.append(conn)
        return HttpReply(status, content)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()


def _parse_head(raw: bytes) -> tuple[int, int | None, bool, bool]:
    """Status, Content-Length, chunked, and whether the server closes the connection."""
    lines = raw.split(b"\r\n")
    try:
        status = int(lines[0].split(b" ", 2)[1])
    except (IndexError, ValueError):
        raise ApiUnreachable(f"not an HTTP response: {lines[0][:80]!r}") from None
    length: int | None = None
    chunked = closing = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            closing = b"close" in value.lower()
    return status, length, chunked, closing


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            # Trailers (if any) end with an empty line.
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
