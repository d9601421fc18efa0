"""Strawberry's two websocket protocol handlers, with this service's budgets and permission rule,
and live-view subscriptions served by :mod:`worker_automation.schema.live_views` instead of a
stream of their own.

What they add to Strawberry's handlers:

- a message that is not a protocol message (not a JSON object, no type, an operation without a
  string id or query) closes the socket with 4400 and one short log line, not a traceback;
- at most ``WA_WS_MAX_OPERATIONS`` operations in flight per socket: one more gets an error
  naming the limit, the socket stays open;
- a query or mutation (graphql-transport-ws; the legacy protocol carries subscriptions only) runs
  with an answer budget charged to its socket and its key
  (:mod:`worker_automation.schema.open_sockets`), in its key's line, and an answer past what is
  left is sent as one RESPONSE_TOO_LARGE error, as over HTTP;
- nothing is delivered once the socket's permission ended, and the socket is closed (4403; the
  legacy protocol first gets an UNAUTHENTICATED error per operation);
- a client that leaves while an operation runs ends that operation without a traceback.

Every other message of the protocols is Strawberry's as is; an operation on a live view ends with
the same ``complete`` / ``error`` messages its own stream would have sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Collection
from contextlib import suppress
from typing import Any, Final, Protocol, cast

from graphql import GraphQLFormattedError, OperationType
from starlette.websockets import WebSocketDisconnect, WebSocketState
from strawberry.asgi import ASGIWebSocketAdapter
from strawberry.http.async_base_view import AsyncWebSocketAdapter
from strawberry.http.exceptions import NonJsonMessageReceived, NonTextMessageReceived, WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    ErrorMessage as TransportError,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    Message,
    SubscribeMessage,
)
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.subscriptions.protocols.graphql_ws.types import (
    CompleteMessage,
    ConnectionErrorMessage,
    ErrorMessage,
    OperationMessage,
    StartMessage,
)

from worker_automation.infra.memory import MemoryReleaser
from worker_automation.infra.metrics import SUBSCRIBERS
from worker_automation.overrides.ws_protocol import frame_writer
from worker_automation.schema.context import GraphQLContext
from worker_automation.schema.documents import chosen_operation
from worker_automation.schema.live_views import Admission, Ending, LiveViews, Subscriber
from worker_automation.schema.open_sockets import SocketLimitReached
from worker_automation.schema.response_budget import TOO_LARGE_CODE, current_budget, response_budget

logger = logging.getLogger(__name__)

TOO_MANY_OPERATIONS_CODE: Final = "TOO_MANY_OPERATIONS"
TOO_MANY_SOCKETS_CODE: Final = "TOO_MANY_SOCKETS"
PERMISSION_ENDED_CODE: Final = "UNAUTHENTICATED"
PERMISSION_ENDED_MESSAGE: Final = (
    "A permissao desta conexao terminou (chave revogada ou alterada, maquina desligada ou com chave "
    "nova): conecte de novo."
)
# Close codes: the message was not the protocol's; the permission ended; too many sockets per key.
MALFORMED_CLOSE: Final = 4400
PERMISSION_CLOSE: Final = 4403
SOCKET_LIMIT_CLOSE: Final = 4429
# The close reason (at most 123 bytes on the wire).
PERMISSION_CLOSE_REASON: Final = "Forbidden: UNAUTHENTICATED, the key's permission ended"
# What a send to a client that already left raises, from Strawberry, Starlette or uvicorn (whose
# send after a close is a RuntimeError, see ``_gone``).
GONE: Final = (WebSocketDisconnected, WebSocketDisconnect, OSError, RuntimeError)


class SocketView(Protocol):
    """What the handlers read off their view (``GraphQLApp``)."""

    live_views: LiveViews
    memory: MemoryReleaser
    max_response_bytes: int
    max_operations: int
    max_tokens: int

    def release_socket(self, context: GraphQLContext) -> None: ...


def malformed(message: object) -> str | None:
    """Why ``message`` is no message of either protocol (None when it is one)."""
    if not isinstance(message, dict):
        return "WebSocket message must be a JSON object"
    kind = message.get("type")
    if not isinstance(kind, str):
        return "WebSocket message must have a string type"
    if kind in ("subscribe", "start", "complete", "stop") and not isinstance(message.get("id"), str):
        return "Operation id must be a string"
    if kind in ("subscribe", "start"):
        payload = message.get("payload")
        if not isinstance(payload, dict) or not isinstance(payload.get("query"), str):
            return "Operation payload must hold a query string"
    # (Variables and an operation name of the wrong type are answered by Strawberry as errors.)
    return None


def over_limit(view: SocketView, operation_id: str, running: Collection[str]) -> GraphQLFormattedError | None:
    """The error for one operation more than ``WA_WS_MAX_OPERATIONS`` (None while there is room;
    an id already running is the protocol's own case)."""
    limit = view.max_operations
    if operation_id in running or len(running) < limit:
        return None
    return {
        "message": f"Operacoes demais em andamento nesta conexao (maximo {limit}, WA_WS_MAX_OPERATIONS).",
        "extensions": {"code": TOO_MANY_OPERATIONS_CODE},
    }


def subscriptions_only() -> GraphQLFormattedError:
    return {
        "message": "graphql-ws leva apenas subscriptions: envie queries e mutations por HTTP ou "
        "graphql-transport-ws.",
        "extensions": {"code": "BAD_USER_INPUT"},
    }


def permission_ended() -> GraphQLFormattedError:
    return {"message": PERMISSION_ENDED_MESSAGE, "extensions": {"code": PERMISSION_ENDED_CODE}}


def outgoing(context: GraphQLContext, message: Any, result_type: str) -> Any | None:
    """``message`` as it may leave: None for a result once the socket's permission ended; a
    single error in place of an answer that passed its budget (its JSON stopped growing there)."""
    if message.get("type") != result_type:
        return message
    if context.socket is not None and context.socket.ended:
        return None
    budget = current_budget()
    if budget is not None and budget.exceeded:
        error = {"message": budget.message, "extensions": {"code": TOO_LARGE_CODE}}
        return {**message, "payload": {"data": None, "errors": [error]}}
    return message


async def run_bounded(
    view: SocketView,
    context: GraphQLContext,
    query: str,
    operation_name: str | None,
    run: Callable[[], Awaitable[None]],
) -> None:
    """``run()`` an operation of an authenticated socket: a query or mutation in its key's line,
    with an answer budget charged to the socket and the key until its answer has been sent.
    Subscriptions run as they are: their payloads are one event or one view each."""
    socket = context.socket
    operation = None if socket is None else chosen_operation(query, operation_name, view.max_tokens)
    if socket is None or operation is None or operation.operation is OperationType.SUBSCRIPTION:
        await run()
        return
    with response_budget(view.max_response_bytes, socket.budgets) as budget:
        async with socket.gate:
            await run()
    view.memory.handled(budget.spent)


def _subscriber(
    websocket: AsyncWebSocketAdapter, context: GraphQLContext, prefix: str, admission: Admission
) -> Subscriber:
    """A subscriber writing ``prefix`` + payload + ``}`` to the Starlette websocket underneath
    (straight to its socket when the server's protocol offers it)."""
    ws = cast(ASGIWebSocketAdapter, websocket).ws
    return Subscriber(
        ws.send_text,
        prefix,
        "}",
        snapshots=admission.kind.snapshots,
        write_frame=frame_writer(ws.scope),
        gate=context.socket,
    )


def _gone(websocket: AsyncWebSocketAdapter, error: BaseException) -> bool:
    """Whether ``error`` only says the client already left (or the socket was closed here)."""
    if isinstance(error, RuntimeError):
        ws = cast(ASGIWebSocketAdapter, websocket).ws
        return WebSocketState.DISCONNECTED in (ws.application_state, ws.client_state)
    return isinstance(error, GONE)


async def _close(websocket: AsyncWebSocketAdapter, code: int, reason: str) -> None:
    """Close, unless the client already left."""
    with suppress(*GONE):
        await websocket.close(code=code, reason=reason)


async def _refuse_malformed(websocket: AsyncWebSocketAdapter, reason: str) -> None:
    logger.info("websocket closed (%d): %s", MALFORMED_CLOSE, reason)
    await _close(websocket, MALFORMED_CLOSE, reason)


async def _admitted(websocket: AsyncWebSocketAdapter, message: object) -> bool:
    """Whether ``message`` is a protocol message; the socket is closed (4400) when it is not."""
    reason = malformed(message)
    if reason is not None:
        await _refuse_malformed(websocket, reason)
    return reason is None


async def _let_in(
    init: Awaitable[None],
    context: GraphQLContext,
    refuse: Callable[[str], Awaitable[None]],
    on_end: Callable[[], Awaitable[None]],
) -> None:
    """Run Strawberry's ``connection_init`` handling; a key past its socket limit is refused with
    ``refuse``, a socket let in is closed with ``on_end`` once its permission ends."""
    try:
        await init
    except SocketLimitReached as exc:
        await refuse(exc.message)
        return
    if context.socket is not None:
        context.socket.on_end(on_end)


class TransportWSHandler(BaseGraphQLTransportWSHandler[GraphQLContext, None]):
    """graphql-transport-ws."""

    @property
    def _view(self) -> SocketView:
        return cast(SocketView, self.view)

    async def handle(self) -> None:
        try:
            await super().handle()
        finally:
            self._view.release_socket(self.context)

    async def handle_message(self, message: Message) -> None:
        if await _admitted(self.websocket, message):
            await super().handle_message(message)

    async def handle_invalid_message(self, error_message: str) -> None:
        await _refuse_malformed(self.websocket, error_message)

    async def handle_connection_init(self, message: Any) -> None:
        init = super().handle_connection_init(message)
        await _let_in(init, self.context, self._refuse_socket, self._permission_ended)

    async def _refuse_socket(self, reason: str) -> None:
        await _close(self.websocket, SOCKET_LIMIT_CLOSE, reason)

    async def _permission_ended(self) -> None:
        await _close(self.websocket, PERMISSION_CLOSE, PERMISSION_CLOSE_REASON)

    async def send_message(self, message: Message) -> None:
        leaving = outgoing(self.context, message, "next")
        if leaving is not None:
            await super().send_message(leaving)

    async def handle_subscribe(self, message: SubscribeMessage) -> None:
        operation_id = message["id"]
        refused = self.connection_acknowledged and over_limit(self._view, operation_id, self.operations)
        if refused:
            await self.send_message(TransportError(id=operation_id, type="error", payload=[refused]))
        else:
            await super().handle_subscribe(message)

    async def handle_task_exception(self, error: Exception) -> None:
        if not _gone(self.websocket, error):  # the client left mid-operation: nothing to report
            await super().handle_task_exception(error)

    async def run_operation(self, operation: Operation[GraphQLContext, None]) -> None:
        SUBSCRIBERS.inc()
        try:
            await run_bounded(
                self._view,
                self.context,
                operation.query,
                operation.operation_name,
                lambda: self._run_operation(operation),
            )
        finally:
            SUBSCRIBERS.dec()

    async def _run_operation(self, operation: Operation[GraphQLContext, None]) -> None:
        views = self._view.live_views
        admission = await views.admit(
            self.context, operation.query, operation.operation_name, operation.variables
        )
        if admission is None:
            await super().run_operation(operation)
            return
        prefix = f'{{"id":{json.dumps(operation.id)},"type":"next","payload":'
        subscriber = _subscriber(self.websocket, self.context, prefix, admission)
        ending = await views.serve(admission, self.context, subscriber)
        await _finish_transport(operation, ending)


async def _finish_transport(operation: Operation[GraphQLContext, None], ending: Ending) -> None:
    if ending.gone:
        operations = operation.handler.operations
        if operations.get(operation.id) is operation:
            del operations[operation.id]
    elif ending.errors:
        await operation.send_initial_errors(ending.errors)
    else:
        await operation.send_operation_message({"id": operation.id, "type": "complete"})


class LegacyWSHandler(BaseGraphQLWSHandler[GraphQLContext, None]):
    """graphql-ws (subscriptions-transport-ws)."""

    @property
    def _view(self) -> SocketView:
        return cast(SocketView, self.view)

    async def handle(self) -> None:
        # Strawberry's loop, with a frame that is not a JSON object (binary included) closing the
        # socket with 4400 instead of being skipped, or of ending it with a traceback.
        try:
            try:
                async for message in self.websocket.iter_json():
                    await self.handle_message(cast(OperationMessage, message))
            except (NonTextMessageReceived, NonJsonMessageReceived):
                await _refuse_malformed(self.websocket, "WebSocket message must be a JSON object")
        except WebSocketDisconnected:
            pass
        finally:
            if self.keep_alive_task:
                self.keep_alive_task.cancel()
                with suppress(BaseException):
                    await self.keep_alive_task
            await self.cleanup()
            self._view.release_socket(self.context)

    async def handle_message(self, message: OperationMessage) -> None:
        if await _admitted(self.websocket, message):
            await super().handle_message(message)

    async def handle_connection_init(self, message: Any) -> None:
        init = super().handle_connection_init(message)
        await _let_in(init, self.context, self._refuse_socket, self._permission_ended)

    async def _refuse_socket(self, reason: str) -> None:
        error: dict[str, object] = {"message": reason, "extensions": {"code": TOO_MANY_SOCKETS_CODE}}
        with suppress(*GONE):
            await self.send_message(ConnectionErrorMessage(type="connection_error", payload=error))
        await _close(self.websocket, SOCKET_LIMIT_CLOSE, reason)

    async def _permission_ended(self) -> None:
        for operation_id in list(self.tasks):
            with suppress(*GONE):
                await super().send_message(
                    ErrorMessage(type="error", id=operation_id, payload=permission_ended())
                )
        await _close(self.websocket, PERMISSION_CLOSE, PERMISSION_CLOSE_REASON)

    async def handle_start(self, message: StartMessage) -> None:
        operation_id = message["id"]
        refused = self.connection_acknowledged and over_limit(self._view, operation_id, self.tasks)
        if refused:
            await self.send_message(ErrorMessage(type="error", id=operation_id, payload=refused))
        else:
            await super().handle_start(message)

    async def send_message(self, message: OperationMessage) -> None:
        leaving = outgoing(self.context, message, "data")
        if leaving is not None:
            await super().send_message(leaving)

    async def handle_async_results(
        self,
        operation_id: str,
        query: str,
        operation_name: str | None,
        variables: dict[str, object] | None,
    ) -> None:
        SUBSCRIBERS.inc()
        try:
            # Strawberry would refuse a query or mutation here with a traceback in the log.
            operation = chosen_operation(query, operation_name, self._view.max_tokens)
            if operation is not None and operation.operation is not OperationType.SUBSCRIPTION:
                await self.send_message(
                    ErrorMessage(type="error", id=operation_id, payload=subscriptions_only())
                )
            else:
                await self._results(operation_id, query, operation_name, variables)
        except GONE as error:
            if not _gone(self.websocket, error):
                raise
        finally:
            SUBSCRIBERS.dec()
            self.subscriptions.pop(operation_id, None)
            self.tasks.pop(operation_id, None)

    async def _results(
        self,
        operation_id: str,
        query: str,
        operation_name: str | None,
        variables: dict[str, object] | None,
    ) -> None:
        views = self._view.live_views
        try:
            admission = await views.admit(self.context, query, operation_name, variables)
            if admission is None:
                await super().handle_async_results(operation_id, query, operation_name, variables)
                return
            prefix = f'{{"type":"data","id":{json.dumps(operation_id)},"payload":'
            ending = await views.serve(
                admission, self.context, _subscriber(self.websocket, self.context, prefix, admission)
            )
            if ending.gone:
                return
            if ending.errors:
                error = ending.errors[0].formatted
                await self.send_message(ErrorMessage(type="error", id=operation_id, payload=error))
            else:
                await self.send_message(CompleteMessage(type="complete", id=operation_id))
        except asyncio.CancelledError:
            # As Strawberry's own stream does when the client stops it.
            with suppress(*GONE):
                await self.send_message(CompleteMessage(type="complete", id=operation_id))
