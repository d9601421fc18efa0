"""Every REST route of the service, and the envelope for unknown paths and methods under /api/v1."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from worker_automation.rest_compat.documented_routes import documented_routes
from worker_automation.rest_compat.openapi import openapi_routes
from worker_automation.rest_compat.unmatched import unmatched

API_PREFIX = "/api/v1"


class ApiFallback:
    """Answers whatever no route of /api/v1 took (see :mod:`~worker_automation.rest_compat.unmatched`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await unmatched(Request(scope, receive))(scope, receive, send)


def rest_routes() -> list[BaseRoute]:
    """The documented API (the worker-automation routes, then the worker protocol), the OpenAPI
    document, then the fallback (last: it matches every path under /api/v1)."""
    return [
        *documented_routes(),
        *openapi_routes(),
        Route(f"{API_PREFIX}/{{rest:path}}", ApiFallback(), name="api_fallback"),
    ]
