"""One running stream per live view, written to every websocket subscriber of it.

The subscribers of a screen send the very same subscription (document, operation, variables).
Served one by one, every event would go through each subscriber's own bus queue, resolver,
generators and Strawberry's per-operation send chain: at 2,000 subscribers that path, not the
socket writes, was most of the ~55 us an event cost per subscriber. Here a view runs the
subscription once, encodes each payload once, and each subscriber's writer only frames it with its
operation id and writes it.

Only root fields whose payloads do not depend on who asks are served this way
(:data:`VIEW_FIELDS`), and each subscriber's own permission is checked before it joins. Anything
else (other fields, documents that do not parse, callers who lack the permission) takes
Strawberry's path unchanged and gets exactly the errors it would get there.

A subscriber stops receiving the moment its socket's permission ends (its ``gate``, see
:mod:`worker_automation.schema.open_sockets`): one attribute read per payload.

A subscriber never slows a view down: what it has not written yet waits in its own backlog. A
snapshot view (queue load, dashboard) keeps only the newest snapshot there, and a joiner gets the
view's latest snapshot at once; an event view replaces the backlog of a subscriber that falls
:data:`~worker_automation.schema.streams.EVENT_QUEUE` events behind with a RESYNC, as Strawberry's
path does when a subscriber's bus queue overflows.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol
from zoneinfo import ZoneInfo

from graphql import ExecutionResult as GraphQLExecutionResult
from graphql import FieldNode, GraphQLError, OperationType
from strawberry import Schema
from strawberry.types.execution import ExecutionResult, PreExecutionError
from strawberry.types.graphql import OperationType as StrawberryOperationType

from worker_automation.broker.events import Event
from worker_automation.domain.errors import DomainError
from worker_automation.domain.json_codec import dumps_text
from worker_automation.domain.vocabulary import EventKind
from worker_automation.overrides.ws_protocol import text_frame
from worker_automation.resolvers.auth import SCOPE_READ, Principal
from worker_automation.schema.context import GraphQLContext
from worker_automation.schema.documents import chosen_operation
from worker_automation.schema.errors import TOO_SLOW_CODE
from worker_automation.schema.streams import EVENT_QUEUE
from worker_automation.schema.types import JobEvent

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ViewKind:
    """How a view's payloads reach a subscriber that cannot keep up."""

    # Snapshots: a joiner gets the latest at once, and only the newest waits for a slow subscriber.
    snapshots: bool
    # Events: the payload root telling a subscriber that fell behind to read the state again.
    resync_root: Callable[[ZoneInfo], object] | None = None


def _resync_event(tz: ZoneInfo) -> JobEvent:
    return JobEvent.from_event(Event(kind=EventKind.RESYNC, job={}), tz)


# The root subscription fields served as live views. Each needs the read scope, and none of their
# payloads depends on the caller.
VIEW_FIELDS: Final = {
    "workerEvents": ViewKind(snapshots=False, resync_root=_resync_event),
    "queueLoad": ViewKind(snapshots=True),
    "dashboard": ViewKind(snapshots=True),
}
TOO_SLOW_MESSAGE: Final = (
    "Assinatura encerrada: o cliente nao acompanhou os eventos e alguns foram descartados; "
    "assine de novo e releia o estado atual."
)


def payload_json(result: ExecutionResult | GraphQLExecutionResult) -> str:
    """The ``payload`` of a pushed result, as both protocols write it."""
    payload: dict[str, Any] = {"data": result.data}
    if result.errors:
        payload["errors"] = [error.formatted for error in result.errors]
    if result.extensions:
        payload["extensions"] = result.extensions
    return dumps_text(payload)


@dataclass(frozen=True)
class ViewKey:
    """What makes two subscriptions the same view."""

    query: str
    operation_name: str | None
    variables: str


@dataclass(frozen=True)
class Admission:
    """A subscription found to be a live view's: which, what kind, and who asked."""

    key: ViewKey
    kind: ViewKind
    principal: Principal


@dataclass(frozen=True)
class Ending:
    """How a subscriber's stream ended: the view completed (no errors), failed (``errors``), or the
    client went away (``gone``) and nothing more can be sent."""

    errors: list[GraphQLError] | None = None
    gone: bool = False


class Frames:
    """One payload's websocket frames, built once per distinct operation prefix (nearly always
    one) and shared by every subscriber of the view."""

    def __init__(self, payload: str) -> None:
        self.payload = payload
        self._built: dict[tuple[str, str], bytes] = {}

    def framed(self, prefix: str, suffix: str) -> bytes:
        key = (prefix, suffix)
        frame = self._built.get(key)
        if frame is None:
            frame = self._built[key] = text_frame((prefix + self.payload + suffix).encode())
        return frame


class Gate(Protocol):
    """What a subscriber reads before each payload: whether its socket's permission ended."""

    @property
    def ended(self) -> bool: ...


class Subscriber:
    """One websocket operation reading a view: its framing, its backlog and its writer.

    While nothing waits in its backlog, a payload goes straight to the socket as a frame shared
    with the view's other subscribers (``write_frame``, see :mod:`worker_automation.overrides.ws_protocol`);
    otherwise, or when the socket declines it, it waits in the backlog for the writer's send.
    """

    def __init__(
        self,
        send_text: Callable[[str], Awaitable[None]],
        prefix: str,
        suffix: str,
        *,
        snapshots: bool,
        limit: int = EVENT_QUEUE,
        write_frame: Callable[[bytes], bool] | None = None,
        gate: Gate | None = None,
    ) -> None:
        self._send_text = send_text
        self._gate = gate
        self._write_frame = write_frame
        self._prefix = prefix
        self._suffix = suffix
        self._snapshots = snapshots
        self._limit = limit
        self._backlog: deque[str] = deque()
        self._wake: asyncio.Future[None] | None = None
        # True while the writer sends from the backlog: a direct write then would overtake it.
        self._sending = False
        self._ending: Ending | None = None
        # Set by an event view on join: its RESYNC payload (None when it cannot build one).
        self.resync: Callable[[], str | None] | None = None

    def deliver(self, payload: str | Frames) -> None:
        """Write one payload now, or queue it for the writer; never waits."""
        if self._ending is not None or (self._gate is not None and self._gate.ended):
            return
        if (
            self._write_frame is not None
            and not self._backlog
            and not self._sending
            and isinstance(payload, Frames)
            and self._write_frame(payload.framed(self._prefix, self._suffix))
        ):
            return
        if isinstance(payload, Frames):
            payload = payload.payload
        if self._snapshots:
            self._backlog.clear()
        elif len(self._backlog) >= self._limit:
            # Too far behind: what waits is dropped and, as on Strawberry's path, a RESYNC tells
            # the client to read the state again; the events after it follow as usual.
            self._backlog.clear()
            resync = self.resync() if self.resync is not None else None
            if resync is None:
                too_slow = GraphQLError(TOO_SLOW_MESSAGE, extensions={"code": TOO_SLOW_CODE})
                self.end(Ending(errors=[too_slow]))
                return
            self._backlog.append(self._prefix + resync + self._suffix)
        self._backlog.append(self._prefix + payload + self._suffix)
        self._poke()

    def end(self, ending: Ending) -> None:
        """Stop once what is queued has been written (an error drops what is queued)."""
        if self._ending is None:
            self._ending = ending
            self._poke()

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def run(self) -> Ending:
        """Write what the view delivers until it ends."""
        loop = asyncio.get_running_loop()
        backlog = self._backlog
        while True:
            self._sending = True
            while backlog:
                if self._gate is not None and self._gate.ended:
                    return Ending(gone=True)  # the socket is being closed: nothing more leaves
                try:
                    await self._send_text(backlog.popleft())
                except Exception:  # the connection is gone; its handler tidies up
                    return Ending(gone=True)
            self._sending = False
            if self._ending is not None:
                return self._ending
            self._wake = loop.create_future()
            await self._wake
            self._wake = None


class LiveView:
    """One subscription run once, its payloads delivered to every subscriber that joined it."""

    def __init__(self, views: LiveViews, key: ViewKey, kind: ViewKind, context: GraphQLContext) -> None:
        self._views = views
        self.key = key
        self._kind = kind
        # The view outlives the subscriber that started it: a context of its own (see serve).
        self._context = context
        self.subscribers: set[Subscriber] = set()
        self._latest: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self, schema: Schema) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(schema))

    def join(self, subscriber: Subscriber) -> None:
        self.subscribers.add(subscriber)
        if self._kind.resync_root is not None:
            subscriber.resync = self.resync_payload
        if self._kind.snapshots and self._latest is not None:
            subscriber.deliver(self._latest)

    def leave(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)
        if not self.subscribers:
            self._views.forget(self)
            if self._task is not None:
                self._task.cancel()

    def resync_payload(self) -> str | None:
        """What this view pushes for a RESYNC event: its selection run on that event alone."""
        root, context = self._kind.resync_root, self._context
        if root is None:
            return None
        key = self.key
        # In a copy of the caller's context: the operation's extensions open a scope of their own.
        result = contextvars.copy_context().run(
            self._views.schema.execute_sync,
            key.query,
            variable_values=json.loads(key.variables),
            context_value=context,
            root_value=root(context.tz),
            operation_name=key.operation_name,
            allowed_operation_types=(StrawberryOperationType.SUBSCRIPTION,),
        )
        if result.errors:
            logger.warning("live view without a RESYNC payload: %s", key.query)
            return None
        return payload_json(result)

    def _end_all(self, ending: Ending) -> None:
        self._views.forget(self)
        for subscriber in self.subscribers:
            subscriber.end(ending)

    async def _run(self, schema: Schema) -> None:
        key = self.key
        ending = Ending()
        try:
            source = await schema.subscribe(
                key.query,
                variable_values=json.loads(key.variables),
                context_value=self._context,
                operation_name=key.operation_name,
            )
            try:
                async for result in source:
                    if isinstance(result, PreExecutionError):
                        ending = Ending(errors=list(result.errors or []))
                        break
                    frames = Frames(payload_json(result))
                    if self._kind.snapshots:
                        self._latest = frames.payload
                    for subscriber in self.subscribers:
                        subscriber.deliver(frames)
            finally:
                # Whoever subscribes from here on starts a view of its own.
                self._views.forget(self)
                await source.aclose()
        except Exception:
            # Strawberry's own path logs the failure of a stream and completes the operation.
            logger.exception("live view failed: %s", key.query)
        finally:
            # However the view ends (cancelled included), nobody is left waiting on it.
            self._end_all(ending)


class LiveViews:
    """The live views of one schema in this process, by :class:`ViewKey`."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self._views: dict[ViewKey, LiveView] = {}

    @property
    def subscriber_count(self) -> int:
        """Subscribers reading a live view now."""
        return sum(len(view.subscribers) for view in self._views.values())

    def __len__(self) -> int:
        return len(self._views)

    def forget(self, view: LiveView) -> None:
        if self._views.get(view.key) is view:
            del self._views[view.key]

    async def admit(
        self,
        context: GraphQLContext,
        query: str,
        operation_name: str | None,
        variables: dict[str, Any] | None,
    ) -> Admission | None:
        """The live view a subscription may read, or None when it must take Strawberry's path
        (which then answers it, errors included, exactly as for any other subscription)."""
        if not isinstance(query, str) or not (operation_name is None or isinstance(operation_name, str)):
            return None
        if variables is not None and not isinstance(variables, dict):
            return None
        field = view_field(query, operation_name, context.services.settings.max_query_tokens)
        if field is None:
            return None
        try:
            principal = await context.principal()
            principal.require(SCOPE_READ)
            variables_key = json.dumps(variables or {}, sort_keys=True)
        except DomainError:
            return None
        except Exception:
            logger.warning("live view not joined; the subscription runs on its own", exc_info=True)
            return None
        return Admission(ViewKey(query, operation_name, variables_key), VIEW_FIELDS[field], principal)

    async def serve(self, admission: Admission, context: GraphQLContext, subscriber: Subscriber) -> Ending:
        """Run ``subscriber`` on its view (started for it if none runs) until the view ends or the
        subscriber falls behind; cancelling the caller leaves the view."""
        key = admission.key
        view = self._views.get(key)
        if view is None:
            # Authenticated as the subscriber that starts it: payloads do not depend on the caller
            # (see VIEW_FIELDS).
            own = GraphQLContext(context.services, authenticated=admission.principal)
            view = self._views[key] = LiveView(self, key, admission.kind, own)
            view.start(self.schema)
        view.join(subscriber)
        try:
            return await subscriber.run()
        finally:
            view.leave(subscriber)


def view_field(query: str, operation_name: str | None, max_tokens: int) -> str | None:
    """The root field of a one-field subscription on a :data:`VIEW_FIELDS` field, else None."""
    operation = chosen_operation(query, operation_name, max_tokens)
    if operation is None or operation.operation is not OperationType.SUBSCRIPTION:
        return None
    selections = operation.selection_set.selections
    if len(selections) != 1 or not isinstance(selections[0], FieldNode) or selections[0].directives:
        return None
    name = selections[0].name.value
    return name if name in VIEW_FIELDS else None
