"""Every REST route of the service, and the envelope for unknown paths and methods under /api/v1."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Receive, Scope, Send

from worker_automation.rest_compat.documented_routes import documented_routes
from worker_automation.rest_compat.http import error
from worker_automation.rest_compat.jobs import job_routes
from worker_automation.rest_compat.openapi import openapi_routes

API_PREFIX = "/api/v1"
MSG_NOT_FOUND = "Rota nao encontrada."
MSG_METHOD = "Metodo {method} nao permitido nesta rota (use {allowed})."


class ApiFallback:
    """Answers whatever no route of /api/v1 took: 405 when the path exists with other methods,
    404 otherwise, both in the error envelope (Starlette's defaults are plain text)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        literal: set[str] = set()
        templated: set[str] = set()
        for route in request.app.router.routes:
            if isinstance(route, Route) and route.endpoint is not self:
                match, _ = route.matches(scope)
                if match is Match.PARTIAL and route.methods:
                    (templated if route.param_convertors else literal).update(route.methods)
        # A literal path (``/sync-orphans``) is that route alone, even though ``/{worker_id}``
        # would match its text: only its own methods are allowed there.
        allowed = literal or templated
        if allowed:
            methods = ", ".join(sorted(allowed))
            response = error(MSG_METHOD.format(method=request.method, allowed=methods), 405)
            response.headers["Allow"] = methods
        else:
            response = error(MSG_NOT_FOUND, 404)
        await response(scope, receive, send)


def rest_routes() -> list[BaseRoute]:
    """The documented worker-automation API, the worker protocol, the OpenAPI document, then the
    fallback (last: it matches every path under /api/v1)."""
    return [
        *documented_routes(),
        *job_routes(),
        *openapi_routes(),
        Route(f"{API_PREFIX}/{{rest:path}}", ApiFallback(), name="api_fallback"),
    ]
