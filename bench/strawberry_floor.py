"""Strawberry on its own: the GraphQL floor our endpoint is measured against.

A Starlette app with ``/healthz`` and ``/graphql`` (Strawberry's ASGI view over a one-field
schema), nothing of worker_automation in it, served by uvicorn as ``serve`` is. ``bench.scale
--strawberry-floor`` starts it twice, as shipped and with Strawberry's parse and validation
caches, and asks the three APIs the same ``{ __typename }``: what a GraphQL request costs before
it reads anything, and how much of that is ours (middleware, authentication, limits, sharing).

    uvicorn --factory bench.strawberry_floor:shipped      # or :cached
"""

from __future__ import annotations

from collections.abc import Callable

import strawberry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from strawberry.asgi import GraphQL
from strawberry.extensions import ParserCache, SchemaExtension, ValidationCache

# An extension as Strawberry takes it: a class, or a factory called for every request.
Extension = type[SchemaExtension] | Callable[[], SchemaExtension]


@strawberry.type
class Query:
    @strawberry.field
    def version(self) -> str:
        return "floor"


async def healthz(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def _app(extensions: list[Extension]) -> Starlette:
    schema = strawberry.Schema(query=Query, extensions=extensions)
    return Starlette(
        routes=[Route("/healthz", healthz), Route("/graphql", GraphQL(schema, graphql_ide=None))]
    )


def shipped() -> Starlette:
    """Strawberry as installed: every request parses and validates its document."""
    return _app([])


def cached() -> Starlette:
    """With the parse and validation caches Strawberry offers (as our endpoint has its own).

    Passed as factories, as Strawberry asks: each request gets its extensions anew, and the
    caches themselves live at module level, shared by every request."""
    return _app([lambda: ParserCache(maxsize=256), lambda: ValidationCache(maxsize=256)])
