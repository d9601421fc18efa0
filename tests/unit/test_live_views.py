"""A live view's subscribers never hold the view up (a RESYNC stands for what a slow one missed),
and which documents are live views."""

from __future__ import annotations

import asyncio
import json
from typing import cast

import pytest
from strawberry import Schema

from worker_automation.overrides.ws_protocol import text_frame
from worker_automation.resolvers.services import Services
from worker_automation.schema import build_schema
from worker_automation.schema.context import GraphQLContext
from worker_automation.schema.errors import TOO_SLOW_CODE
from worker_automation.schema.live_views import (
    VIEW_FIELDS,
    Ending,
    Frames,
    LiveView,
    LiveViews,
    Subscriber,
    ViewKey,
    view_field,
)


class Socket:
    """The edge of the world: a websocket whose writes hang until the client reads again."""

    def __init__(self) -> None:
        self.written: list[str] = []
        self.reading = asyncio.Event()
        self.reading.set()

    async def send_text(self, text: str) -> None:
        await self.reading.wait()
        self.written.append(text)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_payloads_are_framed_and_written_in_order_then_the_view_completes() -> None:
    socket = Socket()
    subscriber = Subscriber(socket.send_text, '{"id":"1","payload":', "}", snapshots=False)
    writer = asyncio.create_task(subscriber.run())
    for n in range(3):
        subscriber.deliver(f'{{"n":{n}}}')
    subscriber.end(Ending())
    subscriber.deliver('{"n":99}')  # after the end: never written
    assert await asyncio.wait_for(writer, 5) == Ending()
    assert socket.written == [f'{{"id":"1","payload":{{"n":{n}}}}}' for n in range(3)]


async def stuck_writing(first: str, *, snapshots: bool) -> tuple[Socket, Subscriber, asyncio.Task[Ending]]:
    """A subscriber (backlog limit 4) whose client stopped reading while ``first`` was written."""
    socket = Socket()
    socket.reading.clear()
    subscriber = Subscriber(socket.send_text, "", "", snapshots=snapshots, limit=4)
    writer = asyncio.create_task(subscriber.run())
    subscriber.deliver(first)
    await settle()
    return socket, subscriber, writer


async def test_an_event_subscriber_too_far_behind_is_ended_with_an_error() -> None:
    socket, subscriber, writer = await stuck_writing("0", snapshots=False)
    for n in range(1, 5):
        subscriber.deliver(str(n))
    await settle()
    assert not writer.done()  # four waiting: at the limit, not past it
    subscriber.deliver("5")
    socket.reading.set()
    ending = await asyncio.wait_for(writer, 5)
    assert ending.errors is not None and ending.errors[0].extensions == {"code": TOO_SLOW_CODE}
    assert socket.written == ["0"]  # what waited was dropped, not written late


async def test_an_event_subscriber_too_far_behind_gets_a_resync_and_goes_on() -> None:
    socket, subscriber, writer = await stuck_writing("0", snapshots=False)
    subscriber.resync = lambda: "RESYNC"
    for n in range(1, 7):
        subscriber.deliver(str(n))
    socket.reading.set()
    await settle()
    subscriber.deliver("7")
    subscriber.end(Ending())
    assert await asyncio.wait_for(writer, 5) == Ending()
    # "1"-"4" filled the backlog; "5" found it full: dropped for a RESYNC, then the rest as usual.
    assert socket.written == ["0", "RESYNC", "5", "6", "7"]


async def test_the_resync_payload_is_the_views_own_selection(sqlite_services: Services) -> None:
    schema = cast(Schema, build_schema(sqlite_services.settings))
    query = """subscription S($f: WorkerEventFilter) {
      e: workerEvents(filter: $f) { kind change worker { id status } } }"""
    key = ViewKey(query, "S", json.dumps({"f": {"queue": "scan"}}))
    view = LiveView(LiveViews(schema), key, VIEW_FIELDS["workerEvents"], GraphQLContext(sqlite_services))
    payload = view.resync_payload()
    assert payload is not None
    assert json.loads(payload) == {"data": {"e": {"kind": "RESYNC", "change": "RESYNC", "worker": None}}}


async def test_a_snapshot_subscriber_only_ever_waits_for_the_newest_snapshot() -> None:
    socket, subscriber, writer = await stuck_writing("a", snapshots=True)
    for snapshot in "bcdefghij":
        subscriber.deliver(snapshot)
    socket.reading.set()
    await settle()
    subscriber.end(Ending())
    assert await asyncio.wait_for(writer, 5) == Ending()
    assert socket.written == ["a", "j"]


class DirectSocket(Socket):
    """A socket that also takes whole frames at once, until it declines (its buffer is full)."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[bytes] = []
        self.accepting = True

    def write_frame(self, frame: bytes) -> bool:
        if self.accepting:
            self.frames.append(frame)
        return self.accepting


async def test_frames_go_straight_to_the_socket_and_a_declined_one_waits_in_order() -> None:
    socket = DirectSocket()
    subscriber = Subscriber(
        socket.send_text, '{"id":"1","payload":', "}", snapshots=False, write_frame=socket.write_frame
    )
    writer = asyncio.create_task(subscriber.run())
    shared = Frames('{"n":0}')
    subscriber.deliver(shared)
    assert socket.frames == [text_frame(b'{"id":"1","payload":{"n":0}}')]
    assert shared.framed('{"id":"1","payload":', "}") is socket.frames[0]  # built once, shared
    socket.accepting = False
    socket.reading.clear()  # the ordinary send hangs as well
    subscriber.deliver(Frames('{"n":1}'))
    await settle()
    socket.accepting = True
    subscriber.deliver(Frames('{"n":2}'))  # the socket would take it, but {"n":1} is still waiting
    socket.reading.set()
    await settle()
    subscriber.deliver(Frames('{"n":3}'))  # nothing waits any more: straight to the socket again
    subscriber.end(Ending())
    assert await asyncio.wait_for(writer, 5) == Ending()
    assert socket.written == ['{"id":"1","payload":{"n":1}}', '{"id":"1","payload":{"n":2}}']
    assert socket.frames[1:] == [text_frame(b'{"id":"1","payload":{"n":3}}')]


async def test_a_closed_connection_ends_the_subscriber() -> None:
    async def closed(text: str) -> None:
        raise ConnectionResetError

    subscriber = Subscriber(closed, "", "", snapshots=False)
    subscriber.deliver("x")
    assert await asyncio.wait_for(subscriber.run(), 5) == Ending(gone=True)


@pytest.mark.parametrize(
    ("query", "operation", "field"),
    [
        ("subscription { workerEvents { kind } }", None, "workerEvents"),
        (
            "subscription S($f: WorkerEventFilter) { e: workerEvents(filter: $f) { kind } }",
            "S",
            "workerEvents",
        ),
        ("subscription { queueLoad { summary { total } } }", None, "queueLoad"),
        ("subscription A { dashboard { total } } subscription B { queueLoad { total } }", "B", "queueLoad"),
        # Not a view: another field, a root fragment, a directive, a query, an unknown name, bad syntax.
        ('subscription { taskStatus(taskId: "t") { state } }', None, None),
        ("subscription { ...F } fragment F on Subscription { dashboard { total } }", None, None),
        ("subscription($x: Boolean!) { dashboard @include(if: $x) { total } }", None, None),
        ("query { dashboard { total } }", None, None),
        ("subscription A { dashboard { total } }", "B", None),
        ("subscription A { dashboard { total } } subscription B { queueLoad { total } }", None, None),
        ("subscription { workerEvents {", None, None),
    ],
)
def test_which_subscriptions_are_live_views(query: str, operation: str | None, field: str | None) -> None:
    assert view_field(query, operation, max_tokens=2000) == field
