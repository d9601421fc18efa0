"""The documented REST API: its routes, built from the operation table in matching order.

Literal paths come before ``/{worker_id}``, and ``worker_id`` is matched as any segment (not with
an ``int`` convertor) so that ``/abc`` is a 422 naming ``worker_id`` instead of a 404. A literal
path asked with a method it does not take (``GET /sync-orphans``) is a 405 naming its methods, not
a job id that is not a number.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from worker_automation.rest_compat.api_table import OPERATIONS, WA
from worker_automation.rest_compat.http import Handler
from worker_automation.rest_compat.unmatched import unmatched

# The one path whose segment may also be a literal path of its own (``/stats`` is no job id).
_BY_ID = f"{WA}/{{worker_id}}"


def _besides(literals: frozenset[str], route: Handler) -> Handler:
    """``route`` of ``/{worker_id}``, except for a segment that is a literal path of its own."""

    async def run(request: Request) -> Response:
        if request.path_params["worker_id"] in literals:
            return unmatched(request)
        return await route(request)

    run.__name__ = route.__name__
    run.__doc__ = route.__doc__
    return run


def documented_routes() -> list[BaseRoute]:
    """A route per operation of the table, in its order (literal paths first)."""
    segments = frozenset(
        op.path.removeprefix(f"{WA}/")
        for op in OPERATIONS
        if op.path.startswith(WA) and "{worker_id}" not in op.path
    )
    routes: list[BaseRoute] = []
    for op in OPERATIONS:
        if op.path == f"{WA}/":
            # Both spellings of the collection: a slash redirect would lose the method and the body.
            routes.append(Route(WA, op.handler, methods=[op.method], name=f"{op.operation_id}Bare"))
        handler = _besides(segments, op.handler) if op.path == _BY_ID else op.handler
        routes.append(Route(op.path, handler, methods=[op.method], name=op.operation_id))
    return routes
