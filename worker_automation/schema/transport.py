"""GraphQL transport routes (placeholder until the GraphQL schema is mounted here)."""

from __future__ import annotations

from typing import Any

from starlette.routing import BaseRoute


def graphql_routes(runtime: Any) -> list[BaseRoute]:
    return []
