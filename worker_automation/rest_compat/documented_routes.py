"""The documented REST API ``/api/v1/worker-automation``: its routes, in matching order.

Literal paths come before ``/{worker_id}``, and ``worker_id`` is matched as any segment (not with
an ``int`` convertor) so that ``/abc`` is a 422 naming ``worker_id`` instead of a 404. A literal
path asked with a method it does not take (``GET /sync-orphans``) is a 405 naming its methods, not
a job id that is not a number.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from worker_automation.rest_compat import reads, writes
from worker_automation.rest_compat.http import Handler
from worker_automation.rest_compat.unmatched import unmatched

PREFIX = "/api/v1/worker-automation"


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
    """Every route of the documented API, literal paths first."""
    literal = _literal_routes()
    segments = frozenset(r.path.removeprefix(f"{PREFIX}/") for r in literal if isinstance(r, Route))
    return [
        *literal,
        Route(
            f"{PREFIX}/{{worker_id}}", _besides(segments, reads.job_route), methods=["GET"], name="wa_worker"
        ),
        Route(f"{PREFIX}/{{worker_id}}/cancel", writes.cancel_route, methods=["POST"], name="wa_cancel"),
        Route(f"{PREFIX}/{{worker_id}}/retry", writes.retry_route, methods=["POST"], name="wa_retry"),
        Route(f"{PREFIX}/{{worker_id}}/move", writes.move_route, methods=["POST"], name="wa_move"),
        Route(f"{PREFIX}/{{worker_id}}/reorder", writes.reorder_route, methods=["POST"], name="wa_reorder"),
    ]


def _literal_routes() -> list[BaseRoute]:
    return [
        # Both spellings of the collection: a slash redirect would lose the method and the body.
        Route(PREFIX, reads.list_route, methods=["GET"], name="wa_list_bare"),
        Route(f"{PREFIX}/", reads.list_route, methods=["GET"], name="wa_list"),
        Route(f"{PREFIX}/stats", reads.stats_route, methods=["GET"], name="wa_stats"),
        Route(f"{PREFIX}/active", reads.active_route, methods=["GET"], name="wa_active"),
        Route(f"{PREFIX}/queued", reads.queued_route, methods=["GET"], name="wa_queued"),
        Route(f"{PREFIX}/search-automations", reads.search_route, methods=["GET"], name="wa_search"),
        Route(f"{PREFIX}/queue-live-status", reads.queue_live_route, methods=["GET"], name="wa_queue_live"),
        Route(f"{PREFIX}/broker-status", reads.broker_status_route, methods=["GET"], name="wa_broker"),
        Route(f"{PREFIX}/workers-inspect", reads.workers_inspect_route, methods=["GET"], name="wa_inspect"),
        Route(f"{PREFIX}/status/{{task_id}}", reads.task_status_route, methods=["GET"], name="wa_task"),
        Route(f"{PREFIX}/dashboard", reads.dashboard_route, methods=["GET"], name="wa_dashboard"),
        Route(f"{PREFIX}/clear-queue", writes.clear_queue_route, methods=["POST"], name="wa_clear"),
        Route(
            f"{PREFIX}/broker/purge-queue/{{queue_name}}",
            writes.purge_queue_route,
            methods=["POST"],
            name="wa_purge",
        ),
        Route(
            f"{PREFIX}/cleanup-no-client",
            writes.cleanup_no_client_route,
            methods=["DELETE"],
            name="wa_cleanup",
        ),
        Route(f"{PREFIX}/sync-orphans", writes.sync_orphans_route, methods=["POST"], name="wa_sync"),
    ]
