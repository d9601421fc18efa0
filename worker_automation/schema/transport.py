"""``/graphql`` over HTTP and websockets, and the offline GraphiQL page with its assets.

HTTP requests authenticate with ``X-API-Key`` or ``Authorization: Bearer``; websockets with the
``connection_init`` payload (or the handshake headers) and are refused at connect when the key is
missing or not valid (or the machine is off), before any operation can start. A socket let in is
registered with its key (:mod:`worker_automation.schema.open_sockets`): its budgets, and its end
once that permission ends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Hashable
from datetime import timedelta
from importlib import resources
from typing import Any, cast

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState
from strawberry import Schema
from strawberry.asgi import ASGIWebSocketAdapter, GraphQL
from strawberry.exceptions import ConnectionRejectionError, MissingQueryError
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.http.exceptions import NonJsonMessageReceived, NonTextMessageReceived
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType
from strawberry.types.unset import UNSET, UnsetType

from worker_automation.domain.errors import RETRY_AFTER_SECONDS, DomainError
from worker_automation.domain.json_codec import dumps, dumps_text
from worker_automation.models.database import database_unavailable
from worker_automation.process.runtime import Runtime
from worker_automation.resolvers.auth import (
    MSG_MISSING,
    Principal,
    authenticate,
    hash_secret,
    key_from_headers,
)
from worker_automation.resolvers.machines import MSG_MACHINE_KEY_INVALID, authenticate_machine
from worker_automation.schema import build_schema
from worker_automation.schema.context import MACHINE_KEY_HEADER, GraphQLContext
from worker_automation.schema.errors import DATABASE_DOWN_MESSAGE, UNAVAILABLE_CODE, code_of
from worker_automation.schema.errors import INTERNAL_CODE as INTERNAL
from worker_automation.schema.limits import MAX_DOCUMENT_BYTES, guard_rules
from worker_automation.schema.live_views import LiveViews
from worker_automation.schema.open_sockets import Grant, OpenSockets
from worker_automation.schema.persisted import PersistedDocuments, PersistedQueryError, load_trusted
from worker_automation.schema.response_budget import (
    TOO_LARGE_CODE,
    current_budget,
    response_budget,
    too_large_message,
)
from worker_automation.schema.shared_queries import sharing_key
from worker_automation.schema.ws_handlers import LegacyWSHandler, TransportWSHandler
from worker_automation.settings import Settings

STATIC_DIR = resources.files("worker_automation.schema") / "static"
# Bodies carry variables (a dispatch context can be a few kB) besides the document, whose own
# limit is enforced by the schema; anything past this is refused before it is read.
MAX_BODY_BYTES = 256 * 1024
# graphql-ws (legacy) clients expect keep-alive messages to tell a quiet stream from a dead one.
KEEP_ALIVE_SECONDS = 15.0


def _rejection(message: str, code: str) -> ConnectionRejectionError:
    return ConnectionRejectionError({"message": message, "extensions": {"code": code}})


def _ws_message(text: str) -> dict[str, Any]:
    """A websocket message: a JSON object, else NonJsonMessageReceived (the handlers close the
    socket with 4400)."""
    try:
        decoded = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        raise NonJsonMessageReceived from None
    if not isinstance(decoded, dict):
        raise NonJsonMessageReceived
    return decoded


class WebSocketAdapter(ASGIWebSocketAdapter):
    """Strawberry's websocket adapter reading only JSON objects; anything else (binary, bad JSON,
    a list or a number) ends the reading with the exception the handlers answer with 4400."""

    async def iter_json(self, *, ignore_parsing_errors: bool = False) -> AsyncGenerator[object, None]:
        ws = self.ws
        while ws.application_state != WebSocketState.DISCONNECTED:  # not once closed here
            try:
                text = await ws.receive_text()
            except KeyError:  # a binary frame has no "text"
                raise NonTextMessageReceived from None
            except WebSocketDisconnect:
                return
            yield _ws_message(text)


class GraphQLApp(GraphQL[GraphQLContext, None]):
    """Strawberry's ASGI view with this service's context, websocket auth, live views and
    GraphiQL page."""

    graphql_transport_ws_handler_class = TransportWSHandler
    graphql_ws_handler_class = LegacyWSHandler
    websocket_adapter_class = WebSocketAdapter

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(
            build_schema(runtime.settings),
            graphql_ide="graphiql",
            keep_alive=True,
            keep_alive_interval=KEEP_ALIVE_SECONDS,
            connection_init_wait_timeout=timedelta(seconds=10),
            # The browser origins allowed over HTTP (CORS) may open websockets too; a handshake
            # without an Origin header (not a browser) or from the same origin is always allowed.
            allowed_origins=runtime.settings.cors_origins,
        )
        self.runtime = runtime
        self.max_response_bytes = runtime.settings.graphql_max_response_bytes
        self.max_operations = self.max_subscriptions_per_connection = runtime.settings.ws_max_operations
        self.max_tokens = runtime.settings.max_query_tokens
        self._sockets: OpenSockets | None = None
        runtime.on_stop(self._stop_sockets)
        self.memory = runtime.memory
        self._ide_html = (STATIC_DIR / "graphiql.html").read_text(encoding="utf-8")
        self.live_views = LiveViews(cast(Schema, self.schema))
        self.persisted = _persisted_documents(cast(Schema, self.schema), runtime.settings)

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
            except PersistedQueryError as exc:
                response = _persisted_error(exc)
            except ClientDisconnect:
                return  # the caller left before its body arrived: nobody to answer
            except Exception as exc:
                # Before execution (authentication, say): an outage is the caller's to wait out.
                if not database_unavailable(exc):
                    raise
                response = _http_error(503, DATABASE_DOWN_MESSAGE)
        await response(scope, receive, send)
        self.memory.handled(len(getattr(response, "body", b"")))

    def decode_json(self, data: str | bytes) -> object:
        """A request body: UTF-8 JSON, an object (batches are refused later, by Strawberry)."""
        try:
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            decoded = json.loads(text, parse_constant=_refuse_constant)
        except UnicodeDecodeError:
            raise HTTPException(400, "Corpo da requisicao nao e UTF-8 valido") from None
        except (ValueError, RecursionError):
            raise HTTPException(400, "Corpo da requisicao nao e um JSON valido") from None
        if not isinstance(decoded, dict | list):
            raise HTTPException(400, "Corpo da requisicao deve ser um objeto JSON")
        return decoded

    def should_render_graphql_ide(self, request: Any) -> bool:
        """GraphiQL's page: a GET naming no document (a persisted one included)."""
        return super().should_render_graphql_ide(request) and not _names_document(request)

    async def parse_http_body(self, request: AsyncHTTPRequestAdapter) -> Any:
        """The request, its document looked up when it names a persisted one (by hash or id), or
        PersistedQueryError (see :mod:`worker_automation.schema.persisted`)."""
        data = await super().parse_http_body(request)
        if isinstance(data, GraphQLRequestData):
            document_id = await self._document_id(request) if self.persisted.trusted else None
            query = self.persisted.resolve(data.query, data.extensions, document_id)
            if query is not data.query:
                data.query = query
        return data

    async def _document_id(self, request: AsyncHTTPRequestAdapter) -> str | None:
        """The ``documentId`` of a request (only read with trusted documents on)."""
        if request.method == "GET":
            found: object = request.query_params.get("documentId")
        else:
            body = await request.get_body()
            found = None
            if b"documentId" in body:
                decoded = self.decode_json(body)
                found = decoded.get("documentId") if isinstance(decoded, dict) else None
        if found is not None and not isinstance(found, str):
            raise HTTPException(400, "documentId deve ser um texto")
        return found

    async def execute_single(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: GraphQLContext,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        """One operation over plain HTTP: subscriptions belong to the websocket (a 400 here)."""
        allowed = OperationType.from_http(request_adapter.method) - {OperationType.SUBSCRIPTION}
        if request_adapter.method == "GET" and not self.allow_queries_via_get:
            allowed -= {OperationType.QUERY}
        try:
            return await self.schema.execute(
                request_data.query,
                root_value=root_value,
                variable_values=request_data.variables,
                context_value=context,
                operation_name=request_data.operation_name,
                allowed_operation_types=allowed,
                operation_extensions=request_data.extensions,
            )
        except CannotGetOperationTypeError as exc:
            raise HTTPException(400, exc.as_http_error_reason()) from exc
        except InvalidOperationTypeError as exc:
            raise HTTPException(400, exc.as_http_error_reason(request_adapter.method)) from exc
        except MissingQueryError as exc:
            raise HTTPException(400, "No GraphQL query found in the request") from exc

    def create_response(
        self, response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse], sub_response: Response
    ) -> Response:
        """The answer, unless it passes ``WA_GRAPHQL_MAX_RESPONSE_BYTES``: then one error saying so
        (the JSON values stopped being added at the limit, see ``response_budget``)."""
        budget = current_budget()
        body = None if budget is not None and budget.exceeded else dumps(response_data)
        if body is None or len(body) > self.max_response_bytes:
            error = {
                "message": too_large_message(self.max_response_bytes),
                "extensions": {"code": TOO_LARGE_CODE},
            }
            return JSONResponse({"data": None, "errors": [error]}, status_code=200)
        response = Response(body, status_code=200, media_type="application/json")
        response.headers.raw.extend(sub_response.headers.raw)
        if sub_response.background:
            response.background = sub_response.background
        if sub_response.status_code:
            response.status_code = sub_response.status_code
        return response

    async def _answer(self, request: Request) -> Response:
        """Authenticate the caller, then run the request or join the next run of the same query
        (see ``shared_queries``). Only GraphiQL's page (a GET without a query) needs no key."""
        if request.method != "GET" or _names_document(request):
            refused = await self._authenticate(request)
            if refused is not None:
                return refused
        key = await self._sharing_key(request)
        if key is None:
            return await self._bounded_run(request)
        services = await self.runtime.services()
        return await services.db.shared.run(key, lambda: self._bounded_run(request))

    async def _bounded_run(self, request: Request) -> Response:
        """Run the request with a budget for its answer's size (one per run, shared or not)."""
        with response_budget(self.max_response_bytes) as budget:
            try:
                return await self.run(request)
            finally:
                # Counts data built and then refused for its size as much as data sent.
                self.memory.handled(budget.spent)

    async def _authenticate(self, request: Request) -> Response | None:
        """A 401 unless every key sent is valid and at least one was sent; the operator and the
        machine found are kept for the request. Nothing of the document is read before: a caller without a key
        costs one lookup, whatever it sends."""
        api_key = key_from_headers(request.headers)
        machine_key = request.headers.get(MACHINE_KEY_HEADER, "").strip() or None
        if api_key is None and machine_key is None:
            return _unauthenticated(MSG_MISSING)
        services = await self.runtime.services()
        try:
            if api_key is not None:
                request.state.principal = await authenticate(services.db, api_key)
            if machine_key is not None:
                request.state.machine = await authenticate_machine(services.db, machine_key)
        except DomainError as exc:
            return _unauthenticated(exc.message)
        return None

    async def _sharing_key(self, request: Request) -> Hashable | None:
        """Whether the query of a POST sent with an operator key alone may be shared, and under
        which key; anything else runs on its own."""
        principal: Principal | None = getattr(request.state, "principal", None)
        if request.method != "POST" or principal is None or request.headers.get(MACHINE_KEY_HEADER):
            return None
        services = await self.runtime.services()
        return sharing_key(
            await request.body(), principal, services.settings.max_query_tokens, self._stored_query
        )

    def _stored_query(self, payload: dict[str, Any]) -> str | None:
        """The text a request body names (itself, by hash or by id) if it may run; nothing is
        refused or kept here."""
        query, document_id, extensions = (payload.get(k) for k in ("query", "documentId", "extensions"))
        return self.persisted.stored(
            query if isinstance(query, str) else None,
            extensions if isinstance(extensions, dict) else None,
            document_id if isinstance(document_id, str) else None,
        )

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> GraphQLContext:
        services = await self.runtime.services()
        # Over HTTP the keys were looked up before the document was read: not again.
        checked = request.state if isinstance(request, Request) else None
        return GraphQLContext(
            services,
            request.headers,
            request=request,
            response=response,
            authenticated=getattr(checked, "principal", None),
            authenticated_machine=getattr(checked, "machine", None),
        )

    async def on_ws_connect(self, context: GraphQLContext) -> UnsetType | dict[str, object] | None:
        """Refuse the connection unless every key sent is valid (a machine's: on) and at least one
        was sent; register it with its key (SocketLimitReached when the key holds too many)."""
        api_key, machine_key = context.api_key(), context.machine_key()
        if api_key is None and machine_key is None:
            raise _rejection(MSG_MISSING, "UNAUTHENTICATED")
        grant = Grant()
        try:
            if api_key is not None:
                grant = Grant(principal=await authenticate(context.services.db, api_key))
            if machine_key is not None:
                machine = await authenticate_machine(context.services.db, machine_key)
                grant = Grant(grant.principal, machine, hash_secret(machine_key))
        except DomainError as exc:
            raise _rejection(exc.message, code_of(exc)) from None
        if grant.machine is not None and not grant.machine.is_on:
            raise _rejection(MSG_MACHINE_KEY_INVALID, "UNAUTHENTICATED")
        self.release_socket(context)  # a second connection_init (legacy protocol) replaces the first
        if self._sockets is None:
            self._sockets = OpenSockets(context.services)
        context.socket = self._sockets.open(grant)
        return cast(UnsetType, UNSET)

    async def _stop_sockets(self) -> None:
        # Started again (a test's second client of one app), sockets are registered anew.
        sockets, self._sockets = self._sockets, None
        if sockets is not None:
            await sockets.stop()

    @property
    def sockets(self) -> OpenSockets | None:
        """The authenticated websockets of this process (None before the first)."""
        return self._sockets

    def release_socket(self, context: GraphQLContext) -> None:
        """The socket of ``context`` is gone (or authenticates again)."""
        socket, context.socket = context.socket, None
        if socket is not None and self._sockets is not None:
            self._sockets.close(socket)

    async def render_graphql_ide(self, request: Request) -> Response:
        return HTMLResponse(self._ide_html)

    def encode_json(self, data: object) -> str | bytes:
        """JSON of a websocket message (orjson: pushed payloads are written by the thousand)."""
        return dumps_text(data)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def _names_document(request: Request | AsyncHTTPRequestAdapter) -> bool:
    """Whether a GET names a document to run (by text, hash or id): then it needs a key."""
    params = request.query_params
    return any(params.get(name) is not None for name in ("query", "extensions", "documentId"))


def _persisted_documents(schema: Schema, settings: Settings) -> PersistedDocuments:
    """The persisted documents of ``schema``; with a trusted-documents manifest, every one of its
    documents validated now (BadInput naming the first that fails: the service does not start)."""
    path = settings.graphql_trusted_documents
    trusted = None
    if path is not None:
        trusted = load_trusted(path, schema.as_str(), guard_rules(settings), settings.max_query_tokens)
    return PersistedDocuments(trusted, settings.max_query_tokens, MAX_DOCUMENT_BYTES)


def check_trusted_documents(settings: Settings) -> None:
    """Validate the trusted-documents manifest of ``settings`` as each API process will at start
    (BadInput naming the first document that fails): ``serve --workers`` asks once, before it
    starts processes that would each fail with it."""
    if settings.graphql_trusted_documents is not None:
        _persisted_documents(build_schema(settings), settings)


def _persisted_error(exc: PersistedQueryError) -> Response:
    """Apollo's answer shape: ``PERSISTED_QUERY_NOT_FOUND`` is a 200 its clients retry on."""
    error = {"message": exc.message, "extensions": {"code": exc.code}}
    return JSONResponse({"errors": [error]}, status_code=exc.status)


def _unauthenticated(message: str) -> Response:
    """A request without a valid key, refused before its document is read."""
    error = {"message": message, "extensions": {"code": "UNAUTHENTICATED"}}
    return JSONResponse({"errors": [error]}, status_code=401, headers={"WWW-Authenticate": "Bearer"})


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
