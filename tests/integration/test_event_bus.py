"""The event bus against the real Redis and against the embedded one, through real connections."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import pytest
import redis

from worker_automation.broker.embedded import EmbeddedRedis
from worker_automation.broker.events import Event, EventBus, Listener
from worker_automation.domain.errors import Unavailable
from worker_automation.domain.vocabulary import EventKind, QueueChange

# Generous bounds for delivery on a loaded two-core machine; the happy path takes milliseconds.
DELIVERY_TIMEOUT = 5.0


@dataclass
class Backend:
    """Where a test's buses connect, and how to take that Redis away and bring it back."""

    kind: str
    url: str
    prefix: str
    embedded: EmbeddedRedis | None = None


@pytest.fixture(params=["redis", "embedded"])
def backend(request: pytest.FixtureRequest, redis_prefix: str) -> Iterator[Backend]:
    if request.param == "redis":
        yield Backend("redis", str(request.getfixturevalue("redis_url")), redis_prefix)
        return
    embedded = EmbeddedRedis().start()
    current = Backend("embedded", embedded.url, redis_prefix, embedded)
    try:
        yield current
    finally:
        # A test may have replaced the server (outage simulation): stop whichever is running.
        embedded.stop()
        if current.embedded is not None:
            current.embedded.stop()


@pytest.fixture
async def bus(backend: Backend) -> AsyncIterator[EventBus]:
    bus = EventBus(backend.url, backend.prefix)
    await bus.ready()
    try:
        yield bus
    finally:
        await bus.stop()


@pytest.fixture
async def publisher(backend: Backend) -> AsyncIterator[EventBus]:
    """A second bus on the same channel, standing for another process."""
    other = EventBus(backend.url, backend.prefix)
    try:
        yield other
    finally:
        await other.stop()


def job(n: int) -> dict[str, object]:
    return {"id": n, "task_id": f"task-{n}", "status": "AGENDADO", "queue": "scan", "priority": n % 10}


async def take(listener: Listener, count: int) -> list[Event]:
    async with asyncio.timeout(DELIVERY_TIMEOUT):
        return [await anext(listener) for _ in range(count)]


async def test_event_round_trips_through_json() -> None:
    event = Event(kind=EventKind.PROGRESS, job={"id": 1, "progress": 40, "metadata_json": {"a": [1]}})
    assert Event.from_json(event.to_json()) == event
    assert Event.from_json(event.to_json().encode()) == event
    paused = Event(kind=QueueChange.PAUSED, job={"queue": "scan"})
    assert Event.from_json(paused.to_json()) == paused and paused.kind is QueueChange.PAUSED
    with pytest.raises(ValueError):
        Event.from_json('{"kind": "nope", "worker": {}, "at": "x", "id": "y"}')
    with pytest.raises(ValueError):
        Event.from_json("[]")


async def test_event_published_by_one_bus_reaches_listeners_of_another(
    bus: EventBus, publisher: EventBus
) -> None:
    async with bus.listen() as first, bus.listen() as second:
        sent = Event(kind=EventKind.CREATED, job=job(1))
        await publisher.publish(sent)
        assert await take(first, 1) == [sent]
        assert await take(second, 1) == [sent]


async def test_publish_many_keeps_order(bus: EventBus, publisher: EventBus) -> None:
    async with bus.listen() as listener:
        sent = [Event(kind=EventKind.PROGRESS, job=job(n)) for n in range(20)]
        await publisher.publish_many(sent)
        assert await take(listener, 20) == sent


async def test_resync_is_never_published(bus: EventBus) -> None:
    with pytest.raises(ValueError):
        await bus.publish(Event(kind=EventKind.RESYNC, job={}))


async def test_a_thousand_listeners_each_get_every_event(bus: EventBus, publisher: EventBus) -> None:
    listeners = [bus.listen(maxsize=64) for _ in range(1000)]
    sent = [Event(kind=EventKind.PROGRESS, job=job(n)) for n in range(50)]

    async def consume(listener: Listener) -> list[str]:
        return [event.id for event in await take(listener, len(sent))]

    consumers = [asyncio.create_task(consume(listener)) for listener in listeners]
    for event in sent:
        await publisher.publish(event)
    received = await asyncio.gather(*consumers)
    expected = [event.id for event in sent]
    assert all(ids == expected for ids in received)
    assert not any(listener.dropped for listener in listeners)
    assert bus.listener_count == 1000
    for listener in listeners:
        listener.close()
    assert bus.listener_count == 0


async def test_stuck_listener_is_dropped_without_delaying_the_others(
    bus: EventBus, publisher: EventBus
) -> None:
    stuck = bus.listen(maxsize=3)
    async with bus.listen() as healthy:
        sent = [Event(kind=EventKind.PROGRESS, job=job(n)) for n in range(50)]
        started = time.monotonic()
        await publisher.publish_many(sent)
        assert await take(healthy, 50) == sent
        assert time.monotonic() - started < DELIVERY_TIMEOUT
    assert stuck.dropped
    assert bus.listener_count == 0
    # What it had queued is still readable, then its iteration ends.
    leftovers = [event async for event in stuck]
    assert leftovers == sent[:3]


async def test_stop_ends_every_listener(backend: Backend) -> None:
    bus = EventBus(backend.url, backend.prefix)
    listener = bus.listen()
    await bus.ready()
    await bus.stop()
    assert [event async for event in listener] == []
    assert listener.closed and not listener.dropped


async def test_publish_fails_fast_when_redis_is_down() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bus = EventBus(f"redis://127.0.0.1:{port}/0", "wa-test-down")
    started = time.monotonic()
    with pytest.raises(Unavailable):
        await bus.publish(Event(kind=EventKind.CREATED, job=job(1)))
    with pytest.raises(Unavailable):
        await bus.publish_many([Event(kind=EventKind.CREATED, job=job(2))])
    # Callers whose events went in one failed round trip each get the failure.
    at_once = await asyncio.gather(
        *(bus.publish(Event(kind=EventKind.CREATED, job=job(n))) for n in range(3, 8)), return_exceptions=True
    )
    assert [type(outcome) for outcome in at_once] == [Unavailable] * 5
    assert time.monotonic() - started < 2.0
    await bus.stop()


def kill_subscription(url: str, client_name: str) -> int:
    """Drop this bus's pub/sub connection only (other clients of the shared server stay up)."""
    admin = redis.Redis.from_url(url)
    try:
        killed = 0
        for client in admin.client_list(_type="pubsub"):
            if client.get("name") == client_name:
                admin.client_kill_filter(_id=client["id"])
                killed += 1
        return killed
    finally:
        admin.close()


async def wait_until(condition: Callable[[], bool], limit: float = DELIVERY_TIMEOUT) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.02)


async def test_bus_resubscribes_after_an_outage_and_asks_for_a_resync(
    backend: Backend, bus: EventBus, publisher: EventBus
) -> None:
    async with bus.listen() as listener:
        before = Event(kind=EventKind.CREATED, job=job(1))
        await publisher.publish(before)
        assert await take(listener, 1) == [before]

        if backend.embedded is not None:
            # The whole server goes away and comes back on the same port, empty.
            port = backend.embedded.port
            backend.embedded.stop()
            await wait_until(lambda: not bus.is_live)
            restarted = EmbeddedRedis(port=port).start()
            backend.embedded = restarted
        else:
            assert kill_subscription(backend.url, bus.channel) == 1

        [resync] = await take(listener, 1)
        assert resync.kind is EventKind.RESYNC and resync.job == {}
        await bus.ready()
        assert bus.reconnects == 1

        after = Event(kind=EventKind.COMPLETED, job=job(2))
        await publisher.publish(after)
        assert await take(listener, 1) == [after]
        assert not listener.dropped


async def test_one_subscription_serves_every_listener(redis_url: str, redis_prefix: str) -> None:
    bus = EventBus(redis_url, redis_prefix)
    listeners = [bus.listen() for _ in range(200)]
    await bus.ready()
    admin = redis.Redis.from_url(redis_url)
    try:
        subscribed = [c for c in admin.client_list(_type="pubsub") if c.get("name") == bus.channel]
        assert len(subscribed) == 1
    finally:
        admin.close()
        for listener in listeners:
            listener.close()
        await bus.stop()
