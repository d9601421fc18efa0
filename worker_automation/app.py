"""The ASGI application: health, metrics, REST compatibility, worker protocol, GraphQL and the console."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from worker_automation.body_limit import BodyLimit
from worker_automation.metrics import Metrics
from worker_automation.runtime import Runtime
from worker_automation.settings import Settings


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def healthz(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    services = await runtime_of(request).services()
    checks = {"database": await services.db.ping(), "broker": await services.broker.ping()}
    down = [name for name, ok in checks.items() if not ok]
    body = {"status": "ready" if not down else "unavailable", "checks": checks, "down": down}
    return JSONResponse(body, status_code=503 if down else 200)


async def metrics(request: Request) -> Response:
    services = await runtime_of(request).services()
    metrics_: Metrics = request.app.state.metrics
    return PlainTextResponse(await metrics_.render(services), media_type=metrics_.content_type)


def create_app(settings: Settings | None = None) -> Starlette:
    """Build the whole service for ``settings`` (read from the environment when omitted)."""
    from worker_automation.console.routes import console_routes
    from worker_automation.rest_compat.routes import rest_routes
    from worker_automation.schema.transport import graphql_routes

    settings = settings or Settings()
    runtime = Runtime(settings)
    routes: list[BaseRoute] = [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics),
        *rest_routes(),
        *graphql_routes(runtime),
        *console_routes(),
    ]
    middleware = [Middleware(BodyLimit, settings=settings)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=runtime.lifespan)
    app.state.runtime = runtime
    app.state.settings = settings
    app.state.metrics = Metrics()
    return app
