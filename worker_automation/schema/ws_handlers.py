"""Strawberry's two websocket protocol handlers, with live-view subscriptions served by
:mod:`worker_automation.schema.live_views` instead of a stream of their own.

Every other operation, and every message of the protocols, is Strawberry's as is; an operation on
a live view ends with the same ``complete`` / ``error`` messages its own stream would have sent.
"""

from __future__ import annotations

import asyncio
import json
from typing import Protocol, cast

from strawberry.asgi import ASGIWebSocketAdapter
from strawberry.http.async_base_view import AsyncWebSocketAdapter
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.subscriptions.protocols.graphql_ws.types import CompleteMessage, ErrorMessage

from worker_automation.metrics import SUBSCRIBERS
from worker_automation.schema.context import GraphQLContext
from worker_automation.schema.live_views import Admission, Ending, LiveViews, Subscriber
from worker_automation.ws_protocol import frame_writer


class HasLiveViews(Protocol):
    """The view (``GraphQLApp``) the handlers belong to."""

    live_views: LiveViews


def _subscriber(websocket: AsyncWebSocketAdapter, prefix: str, admission: Admission) -> Subscriber:
    """A subscriber writing ``prefix`` + payload + ``}`` to the Starlette websocket underneath
    (straight to its socket when the server's protocol offers it)."""
    ws = cast(ASGIWebSocketAdapter, websocket).ws
    return Subscriber(
        ws.send_text, prefix, "}", snapshots=admission.kind.snapshots, write_frame=frame_writer(ws.scope)
    )


class TransportWSHandler(BaseGraphQLTransportWSHandler[GraphQLContext, None]):
    """graphql-transport-ws."""

    async def run_operation(self, operation: Operation[GraphQLContext, None]) -> None:
        SUBSCRIBERS.inc()
        try:
            await self._run_operation(operation)
        finally:
            SUBSCRIBERS.dec()

    async def _run_operation(self, operation: Operation[GraphQLContext, None]) -> None:
        views = cast(HasLiveViews, self.view).live_views
        admission = await views.admit(
            self.context, operation.query, operation.operation_name, operation.variables
        )
        if admission is None:
            await super().run_operation(operation)
            return
        prefix = f'{{"id":{json.dumps(operation.id)},"type":"next","payload":'
        ending = await views.serve(admission, self.context, _subscriber(self.websocket, prefix, admission))
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

    async def handle_async_results(
        self,
        operation_id: str,
        query: str,
        operation_name: str | None,
        variables: dict[str, object] | None,
    ) -> None:
        views = cast(HasLiveViews, self.view).live_views
        SUBSCRIBERS.inc()
        try:
            admission = await views.admit(self.context, query, operation_name, variables)
            if admission is None:
                await super().handle_async_results(operation_id, query, operation_name, variables)
                return
            prefix = f'{{"type":"data","id":{json.dumps(operation_id)},"payload":'
            ending = await views.serve(
                admission, self.context, _subscriber(self.websocket, prefix, admission)
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
            await self.send_message(CompleteMessage(type="complete", id=operation_id))
        finally:
            SUBSCRIBERS.dec()
            self.subscriptions.pop(operation_id, None)
            self.tasks.pop(operation_id, None)
