"""The answer to a request no route of /api/v1 takes: 405 naming the methods its path allows when
the path exists with other methods, 404 otherwise, both in the error envelope (Starlette's
defaults are plain text)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from worker_automation.rest_compat.http import error

MSG_NOT_FOUND = "Rota nao encontrada."
MSG_METHOD = "Metodo {method} nao permitido nesta rota (use {allowed})."


def unmatched(request: Request) -> Response:
    """405 or 404 for ``request`` (see module doc)."""
    literal: set[str] = set()
    templated: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches(request.scope)
            if match is Match.PARTIAL:
                (templated if route.param_convertors else literal).update(route.methods)
    # A literal path (``/sync-orphans``) is that route alone, even though ``/{worker_id}``
    # would match its text: only its own methods are allowed there.
    allowed = literal or templated
    if not allowed:
        return error(MSG_NOT_FOUND, 404)
    methods = ", ".join(sorted(allowed))
    response = error(MSG_METHOD.format(method=request.method, allowed=methods), 405)
    response.headers["Allow"] = methods
    return response
