"""``/graphql`` over HTTP and websockets, and the offline GraphiQL page with its assets.

HTTP requests authenticate with ``X-API-Key`` or ``Authorization: Bearer``; websockets with the
``connection_init`` payload (or the handshake headers) and are refused at connect when the key is
missing or not valid, before any operation can start.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Hashable
from datetime import timedelta
from importlib import resources
from typing import cast

from cross_web import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry import Schema
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.types.unset import UNSET, UnsetType

from worker_automation.errors import RETRY_AFTER_SECONDS, DomainError
from worker_automation.json_codec import dumps_text
from worker_automation.models.database import database_unavailable
from worker_automation.resolvers.auth import MSG_MISSING, authenticate, key_from_headers
from worker_automation.resolvers.machines import authenticate_machine
from worker_automation.runtime import Runtime
from worker_automation.schema import build_schema
from worker_automation.schema.context import GraphQLContext
from worker_automation.schema.errors import DATABASE_DOWN_MESSAGE, UNAVAILABLE_CODE, code_of
from worker_automation.schema.errors import INTERNAL_CODE as INTERNAL
from worker_automation.schema.live_views import LiveViews
from worker_automation.schema.shared_queries import sharing_key
from worker_automation.schema.ws_handlers import LegacyWSHandler, TransportWSHandler

STATIC_DIR = resources.files("worker_automation.schema") / "static"
# Bodies carry variables (a dispatch context can be a few kB) besides the document, whose own
# limit is enforced by the schema; anything past this is refused before it is read.
MAX_BODY_BYTES = 256 * 1024
# Messages that push a result: "next" (graphql-transport-ws) and "data" (graphql-ws).
PUSH_TYPES = frozenset({"next", "data"})
# graphql-ws (legacy) clients expect keep-alive messages to tell a quiet stream from a dead one.
KEEP_ALIVE_SECONDS = 15.0


def _rejection(message: str, code: str) -> ConnectionRejectionError:
    return ConnectionRejectionError({"message": message, "extensions": {"code": code}})


class GraphQLApp(GraphQL[GraphQLContext, None]):
    """Strawberry's ASGI view with this service's context, websocket auth, live views and
    GraphiQL page."""

    graphql_transport_ws_handler_class = TransportWSHandler
    graphql_ws_handler_class = LegacyWSHandler

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(
            build_schema(runtime.settings),
            graphql_ide="graphiql",
            keep_alive=True,
            keep_alive_interval=KEEP_ALIVE_SECONDS,
            connection_init_wait_timeout=timedelta(seconds=10),
        )
        self.runtime = runtime
        self._ide_html = (STATIC_DIR / "graphiql.html").read_text(encoding="utf-8")
        self._encoded = RecentEncodings()
        self.live_views = LiveViews(cast(Schema, self.schema))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        response: Response
        if _declared_length(scope) > MAX_BODY_BYTES:
            response = _http_error(413, f"Requisicao grande demais (maximo {MAX_BODY_BYTES} bytes).")
        else:
            try:
                response = await self._answer(Request(scope, receive))
            except HTTPException as exc:
                # Strawberry answers these in plain text; clients (GraphiQL included) expect JSON.
                response = _http_error(exc.status_code, exc.reason)
            except Exception as exc:
                # Before execution (authentication, say): an outage is the caller's to wait out.
                if not database_unavailable(exc):
                    raise
                response = _http_error(503, DATABASE_DOWN_MESSAGE)
        await response(scope, receive, send)

    async def _answer(self, request: Request) -> Response:
        """Run the request, or join the next run of the same query (see ``shared_queries``)."""
        key = await self._sharing_key(request)
        if key is None:
            return await self.run(request)
        services = await self.runtime.services()
        return await services.db.shared.run(key, lambda: self.run(request))

    async def _sharing_key(self, request: Request) -> Hashable | None:
        """Authenticate a POST sent with an operator key (once for the whole request) and tell
        whether its query may be shared; anything else runs on its own and fails there if it must."""
        if request.method != "POST" or request.headers.get("x-worker-api-key"):
            return None
        raw_key = key_from_headers(request.headers)
        if raw_key is None:
            return None
        services = await self.runtime.services()
        try:
            principal = await authenticate(services.db, raw_key)
        except DomainError:
            return None
        request.state.principal = principal
        return sharing_key(await request.body(), principal)

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> GraphQLContext:
        services = await self.runtime.services()
        authenticated = getattr(request.state, "principal", None) if isinstance(request, Request) else None
        return GraphQLContext(
            services, request.headers, request=request, response=response, authenticated=authenticated
        )

    async def on_ws_connect(self, context: GraphQLContext) -> UnsetType | dict[str, object] | None:
        """Refuse the connection unless every key sent is valid and at least one was sent."""
        api_key, machine_key = context.api_key(), context.machine_key()
        if api_key is None and machine_key is None:
            raise _rejection(MSG_MISSING, "UNAUTHENTICATED")
        try:
            if api_key is not None:
                await authenticate(context.services.db, api_key)
            if machine_key is not None:
                await authenticate_machine(context.services.db, machine_key)
        except DomainError as exc:
            raise _rejection(exc.message, code_of(exc)) from None
        return cast(UnsetType, UNSET)

    async def render_graphql_ide(self, request: Request) -> Response:
        return HTMLResponse(self._ide_html)

    def encode_json(self, data: object) -> str | bytes:
        """JSON of a message; the data of a pushed payload is encoded once for every subscriber
        that receives the very same result (see :mod:`worker_automation.schema.sharing`)."""
        if isinstance(data, dict) and len(data) == 3 and data.get("type") in PUSH_TYPES:
            payload = data.get("payload")
            if isinstance(payload, dict) and len(payload) == 1 and "data" in payload:
                body = self._encoded.get(payload["data"])
                message_id = json.dumps(data.get("id"))
                return f'{{"id":{message_id},"type":"{data["type"]}","payload":{{"data":{body}}}}}'
        return dumps_text(data)


class RecentEncodings:
    """JSON of the last few payload data objects, by identity (the objects are kept alive here,
    so an identity is never mistaken for a newer object's)."""

    def __init__(self, keep: int = 64) -> None:
        self._keep = keep
        self._items: OrderedDict[int, tuple[object, str]] = OrderedDict()

    def get(self, value: object) -> str:
        found = self._items.get(id(value))
        if found is not None and found[0] is value:
            return found[1]
        encoded = dumps_text(value)
        self._items[id(value)] = (value, encoded)
        if len(self._items) > self._keep:
            self._items.popitem(last=False)
        return encoded


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def _http_error(status_code: int, message: str) -> Response:
    """A request refused before execution, in the GraphQL response shape."""
    code = "BAD_USER_INPUT" if status_code < 500 else UNAVAILABLE_CODE if status_code == 503 else INTERNAL
    error = {"message": message, "extensions": {"code": code}}
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status_code == 503 else None
    return JSONResponse({"data": None, "errors": [error]}, status_code=status_code, headers=headers)


def graphql_routes(runtime: Runtime) -> list[BaseRoute]:
    """``/graphql`` (GET for GraphiQL and queries, POST, websocket) and ``/graphql/static``."""
    app = GraphQLApp(runtime)
    return [
        Mount("/graphql/static", app=StaticFiles(directory=str(STATIC_DIR)), name="graphql-static"),
        Route("/graphql", app, methods=["GET", "POST"], name="graphql"),
        WebSocketRoute("/graphql", app, name="graphql-ws"),
    ]
