"""The app served by uvicorn inside the test process, and GraphQL clients of both websocket protocols."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from gql import Client, GraphQLRequest
from gql.transport.websockets import WebsocketsTransport
from starlette.routing import WebSocketRoute
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from worker_automation.asgi.app import create_app
from worker_automation.overrides.ws_protocol import FramedWebSocketProtocol
from worker_automation.resolvers.auth import SCOPE_READ, SCOPE_WRITE, create_key
from worker_automation.resolvers.services import Services
from worker_automation.schema.live_views import LiveViews
from worker_automation.schema.transport import GraphQLApp
from worker_automation.settings import Settings

STEP_TIMEOUT = 15.0
KEY_KINDS = {
    "admin": ("administrador", [SCOPE_READ, SCOPE_WRITE]),
    "funcionario": ("funcionario", [SCOPE_READ, SCOPE_WRITE]),
    "reader": ("funcionario", [SCOPE_READ]),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    """One app instance listening on a local port."""

    port: int
    services: Services
    live_views: LiveViews
    keys: dict[str, str] = field(default_factory=dict)
    graphql: GraphQLApp | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/graphql"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/graphql"

    async def post(
        self, query: str, variables: dict[str, Any] | None = None, key: str | None = "admin"
    ) -> Any:
        headers = {"X-API-Key": self.keys.get(key, key)} if key else {}
        async with httpx.AsyncClient(timeout=STEP_TIMEOUT) as client:
            response = await client.post(
                self.url, json={"query": query, "variables": variables}, headers=headers
            )
        assert response.status_code == 200, response.text
        return response.json()

    async def dispatch(self, automation: str = "demo.echo", **fields: Any) -> dict[str, Any]:
        body = await self.post(
            "mutation($i: DispatchInput!) { dispatchAutomation(input: $i) { id taskId status } }",
            {"i": {"automationType": automation, **fields}},
        )
        assert "errors" not in body, body
        job: dict[str, Any] = body["data"]["dispatchAutomation"]
        return job

    async def wait_view_subscribers(self, count: int) -> None:
        """Until ``count`` subscriptions read a live view of this process."""
        for _ in range(int(STEP_TIMEOUT / 0.02)):
            if self.live_views.subscriber_count >= count:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"{self.live_views.subscriber_count} view subscribers, expected {count}")

    async def wait_listeners(self, count: int) -> None:
        """Until ``count`` subscriptions of this process listen to the bus."""
        for _ in range(int(STEP_TIMEOUT / 0.02)):
            if self.services.events.listener_count >= count:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"{self.services.events.listener_count} listeners, expected {count}")


@asynccontextmanager
async def serve(settings: Settings, *, make_keys: bool = True) -> AsyncIterator[Served]:
    """``create_app(settings)`` under uvicorn on a free port, lifespan included."""
    app = create_app(settings)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
            # As ``serve`` runs: live views write their frames straight to the sockets.
            ws=FramedWebSocketProtocol,
            ws_per_message_deflate=False,
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(int(30 / 0.02)):
            if server.started or task.done():
                break
            await asyncio.sleep(0.02)
        assert server.started, "uvicorn did not start"
        services = await app.state.runtime.services()
        graphql = next(r.app for r in app.routes if isinstance(r, WebSocketRoute) and r.path == "/graphql")
        assert isinstance(graphql, GraphQLApp)
        served = Served(port, services, graphql.live_views, graphql=graphql)
        if make_keys:
            for name, (perfil, scopes) in KEY_KINDS.items():
                created = await create_key(services.db, name=name, perfil=perfil, scopes=scopes)
                served.keys[name] = created.secret
        await services.events.ready()
        yield served
    finally:
        server.should_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 15)


class GqlSubscription:
    """A subscription of the ``gql`` client over graphql-transport-ws, read result by result."""

    def __init__(
        self, url: str, init_payload: dict[str, Any], query: str, variables: dict[str, Any] | None = None
    ):
        self._transport = WebsocketsTransport(
            url=url, init_payload=init_payload, subprotocols=[WebsocketsTransport.GRAPHQLWS_SUBPROTOCOL]
        )
        self._query = query
        self._variables = variables
        self._results: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> GqlSubscription:
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        try:
            async with Client(transport=self._transport) as session:
                request = GraphQLRequest(self._query, variable_values=self._variables)
                async for result in session.subscribe(request):
                    await self._results.put(result)
        except Exception as exc:  # handed to the reader, who asserts on it
            await self._results.put(exc)

    async def next(self, within: float = STEP_TIMEOUT) -> Any:
        item = await asyncio.wait_for(self._results.get(), within)
        if isinstance(item, Exception):
            raise item
        return item

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


class RawClient:
    """A raw websocket GraphQL client on ``websockets``, message by message."""

    protocol = ""
    # Messages that only keep the connection alive, skipped by ``receive``.
    keep_alive: frozenset[str] = frozenset()

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection

    @classmethod
    @asynccontextmanager
    async def open(cls, url: str, payload: dict[str, Any]) -> AsyncIterator[ClientConnection]:
        async with connect(url, subprotocols=[Subprotocol(cls.protocol)]) as connection:
            assert connection.subprotocol == cls.protocol
            await connection.send(json.dumps({"type": "connection_init", "payload": payload}))
            yield connection

    async def send(self, message: dict[str, Any]) -> None:
        await self.connection.send(json.dumps(message))

    async def receive(self, within: float = STEP_TIMEOUT) -> dict[str, Any]:
        """The next message other than keep-alive."""
        while True:
            message: dict[str, Any] = json.loads(await asyncio.wait_for(self.connection.recv(), within))
            if message.get("type") not in self.keep_alive:
                return message


class LegacyClient(RawClient):
    """``graphql-ws`` (subscriptions-transport-ws); the caller reads the ``connection_ack``."""

    protocol = "graphql-ws"
    keep_alive = frozenset({"ka"})

    @classmethod
    @asynccontextmanager
    async def connect(cls, url: str, payload: dict[str, Any]) -> AsyncIterator[LegacyClient]:
        async with cls.open(url, payload) as connection:
            yield cls(connection)

    async def start(self, op_id: str, query: str, variables: dict[str, Any] | None = None) -> None:
        await self.send({"type": "start", "id": op_id, "payload": {"query": query, "variables": variables}})


class TransportClient(RawClient):
    """``graphql-transport-ws``, acknowledged before it is handed over."""

    protocol = "graphql-transport-ws"
    keep_alive = frozenset({"ping", "pong"})

    @classmethod
    @asynccontextmanager
    async def connect(cls, url: str, payload: dict[str, Any]) -> AsyncIterator[TransportClient]:
        async with cls.open(url, payload) as connection:
            client = cls(connection)
            ack = await client.receive()
            assert ack["type"] == "connection_ack", ack
            yield client

    async def subscribe(self, op_id: str, query: str, variables: dict[str, Any] | None = None) -> None:
        payload = {"query": query, "variables": variables}
        await self.send({"type": "subscribe", "id": op_id, "payload": payload})
