"""The ASGI application: health, metrics, REST compatibility, worker protocol, GraphQL, MCP and the
operator console."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from worker_automation.asgi.body_limit import BodyLimit
from worker_automation.asgi.metrics_export import Exporter
from worker_automation.asgi.request_middleware import RequestObserver
from worker_automation.process.runtime import Runtime
from worker_automation.settings import Settings


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def healthz(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    runtime = runtime_of(request)
    services = await runtime.services()
    checks = {"database": await services.db.ping(), "broker": await services.broker.ping()}
    if runtime.pool_ready is not None:
        # An embedded serve is ready once its pool workers are: a job dispatched then runs.
        checks["workers"] = runtime.pool_ready
    down = [name for name, ok in checks.items() if not ok]
    body = {"status": "ready" if not down else "unavailable", "checks": checks, "down": down}
    return JSONResponse(body, status_code=503 if down else 200)


async def metrics(request: Request) -> Response:
    services = await runtime_of(request).services()
    exporter: Exporter = request.app.state.metrics
    return PlainTextResponse(await exporter.render(services), media_type=exporter.content_type)


def create_app(settings: Settings | None = None) -> Starlette:
    """Build the whole service for ``settings`` (read from the environment when omitted)."""
    from worker_automation.console.routes import console_routes
    from worker_automation.mcp.mount import LazyMcp
    from worker_automation.rest_compat.routes import rest_routes
    from worker_automation.schema.transport import graphql_routes

    settings = settings or Settings()
    runtime = Runtime(settings)
    mcp = LazyMcp(runtime.services)
    routes: list[BaseRoute] = [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics),
        *mcp.routes(),
        *rest_routes(),
        *graphql_routes(runtime),
        *console_routes(),
    ]

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with runtime.lifespan(app), mcp.run():
            yield

    # Outermost: every answer, CORS refusals included, gets its request id and is timed.
    middleware = [Middleware(RequestObserver)]
    if settings.cors_origins:
        # Without origins there is nothing to allow: browsers refuse cross-origin answers that
        # carry no CORS headers, and no request pays for the check.
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=settings.cors_origins,
                allow_methods=["*"],
                allow_headers=["*"],
                expose_headers=["X-Request-ID"],
                max_age=600,
            )
        )
    # Innermost: a body over the limit is refused before it is read.
    middleware.append(Middleware(BodyLimit, settings=settings))
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.runtime = runtime
    app.state.settings = settings
    app.state.metrics = Exporter()
    return app
