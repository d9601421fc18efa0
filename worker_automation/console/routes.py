"""Routes of the operator console: its static files under ``/console/`` and ``/`` sending there.

The files ship inside the package (``static/``, vendored libraries included), so the console works
with no internet access. They are compressed on the fly for browsers that accept gzip; only this
mount is wrapped, so the API's responses stay exactly as they were.
"""

from __future__ import annotations

from pathlib import Path

from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

STATIC_DIR = Path(__file__).with_name("static")
CONSOLE_PATH = "/console/"
# Revalidated on every load (cheap: ETag / 304), so a new version is never mixed with an old one.
EXTRA_HEADERS = [(b"cache-control", b"no-cache"), (b"x-content-type-options", b"nosniff")]


class ConsoleFiles(StaticFiles):
    """Static files that a browser revalidates before use, so an upgrade is seen at once."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_cache_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), *EXTRA_HEADERS]
                message = {**message, "headers": headers}
            await send(message)

        await super().__call__(scope, receive, send_with_cache_policy)


async def to_console(_request: Request) -> Response:
    return RedirectResponse(CONSOLE_PATH, status_code=307)


def console_routes() -> list[BaseRoute]:
    """``/`` redirecting to the console, and the console's files."""
    files = ConsoleFiles(directory=STATIC_DIR, html=True)
    return [
        Route("/", to_console, methods=["GET", "HEAD"]),
        Mount(CONSOLE_PATH.rstrip("/"), app=GZipMiddleware(files, minimum_size=512), name="console"),
    ]
