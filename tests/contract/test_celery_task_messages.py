"""The gateway writes task messages itself: the same writes as Celery's producer, in fewer round trips.

Each comparison sends one task through ``app.send_task`` (Celery and kombu's Redis transport) and
the same task through the gateway, then reads both back from Redis: the same list, the same
envelope but for the delivery tag kombu draws for every message, and (task events on) the same
task-sent event on the same channel. This is what ``overrides.task_messages`` relies on: a Celery
or kombu release that writes a task otherwise fails here first (needs Redis).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis
from celery import Celery
from kombu.entity import Exchange, Queue

from tests.integration.celery_probe_tasks import probe_worker
from worker_automation.broker.gateway import BrokerGateway
from worker_automation.broker.queues import priority_keys
from worker_automation.domain.errors import Unavailable
from worker_automation.overrides.task_messages import TaskMessages, TaskSend
from worker_automation.settings import Settings

RESULT_TIMEOUT = 20.0


@pytest.fixture
def queue(redis_prefix: str) -> str:
    return f"{redis_prefix}-scan"


@pytest.fixture(params=[False, True], ids=["events-off", "events-on"])
async def gateway(
    request: pytest.FixtureRequest, queue: str, redis_url: str, redis_prefix: str
) -> AsyncIterator[BrokerGateway]:
    gateway = BrokerGateway(Settings(queues={queue: 1}, task_events=request.param), redis_url)
    gateway.app.conf.control_exchange = redis_prefix
    try:
        yield gateway
    finally:
        await gateway.close()


@pytest.fixture
def raw_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        client.close()


def _waiting(raw_redis: redis.Redis, queue: str) -> dict[str, list[dict[str, Any]]]:
    """Every message waiting in ``queue``, by list, oldest first."""
    found: dict[str, list[dict[str, Any]]] = {}
    for key in priority_keys(queue):
        messages = [json.loads(raw) for raw in reversed(raw_redis.lrange(key, 0, -1))]
        if messages:
            found[key] = messages
    return found


def _sent_events(watcher: redis.client.PubSub, expected: int) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    deadline = time.monotonic() + 5
    while len(events) < expected and time.monotonic() < deadline:
        message = watcher.get_message(timeout=0.2)
        if message is not None:
            events.append((message["channel"].decode(), json.loads(message["data"])))
    assert watcher.get_message(timeout=0.2) is None  # nothing more than expected
    return events


def _without_tag(message: dict[str, Any]) -> dict[str, Any]:
    properties = dict(message["properties"])
    assert isinstance(properties.pop("delivery_tag"), str)
    return {**message, "properties": properties}


def _body(message: dict[str, Any]) -> Any:
    return json.loads(base64.b64decode(message["body"]))


async def test_the_message_is_the_one_celery_writes(
    gateway: BrokerGateway, raw_redis: redis.Redis, queue: str
) -> None:
    events_on = gateway.settings.task_events
    watcher = raw_redis.pubsub(ignore_subscribe_messages=True)
    # Pub/sub channels are shared by every database of a server: kombu puts the database's number
    # before the name, so this test hears its own events and not those of tests on other databases.
    database = raw_redis.connection_pool.connection_kwargs.get("db", 0)
    watcher.subscribe(f"/{database}.celeryev/task.sent")
    assert watcher.get_message(timeout=2) is None  # the subscription is in place
    cases: list[tuple[str, int, list[Any]]] = [
        ("probe.echo", 0, [7]),
        ("probe.echo", 4, [123456]),
        ("probe.record", 9, ["k", "x" * 40]),
    ]
    try:
        for task_name, priority, args in cases:
            # From this thread: Celery's reply-to is the sending thread's id, as the gateway's is.
            with gateway.app.producer_or_acquire() as producer:
                gateway.app.send_task(
                    task_name, args=args, queue=queue, priority=priority, task_id="celery", producer=producer
                )
            await gateway.send(task_name, queue=queue, priority=priority, args=args, task_id="ours")

            waiting = _waiting(raw_redis, queue)
            assert list(waiting) == [priority_keys(queue)[priority]]
            theirs, ours = waiting[priority_keys(queue)[priority]]
            raw_redis.delete(*priority_keys(queue))
            assert theirs["headers"]["id"] == "celery" and ours["headers"]["id"] == "ours"
            for message, task_id in ((theirs, "celery"), (ours, "ours")):
                message["headers"]["id"] = message["headers"]["root_id"] = "id"
                assert message["properties"]["correlation_id"] == task_id
                message["properties"]["correlation_id"] = "id"
            assert _without_tag(ours) == _without_tag(theirs)
            assert _body(ours) == _body(theirs) == [args, {}, _body(theirs)[2]]

            events = _sent_events(watcher, 2 if events_on else 0)
            if events_on:
                (their_channel, their_event), (our_channel, our_event) = events
                assert our_channel == their_channel
                their_fields, our_fields = _body(their_event), _body(our_event)
                assert (their_fields.pop("uuid"), our_fields.pop("uuid")) == ("celery", "ours")
                assert (their_fields.pop("root_id"), our_fields.pop("root_id")) == ("celery", "ours")
                assert our_fields.pop("clock") > their_fields.pop("clock")
                assert abs(our_fields.pop("timestamp") - their_fields.pop("timestamp")) < 10
                assert our_fields == their_fields
                their_event["body"] = our_event["body"] = None
                assert _without_tag(our_event) == _without_tag(their_event)
    finally:
        watcher.close()


async def test_sends_of_one_turn_share_a_round_trip(
    gateway: BrokerGateway, raw_redis: redis.Redis, queue: str
) -> None:
    before = gateway.sender.batches
    ids = await asyncio.gather(
        *(gateway.send("probe.echo", queue=queue, priority=n % 10, args=[n]) for n in range(30))
    )
    outcomes = await gateway.send_many(
        [TaskSend("probe.echo", queue, 3, [100 + n], f"batch-{n}") for n in range(20)]
    )
    assert outcomes == [None] * 20
    assert gateway.sender.batches - before == 2
    waiting = [m for messages in _waiting(raw_redis, queue).values() for m in messages]
    assert sorted(m["headers"]["id"] for m in waiting) == sorted([*ids, *(f"batch-{n}" for n in range(20))])
    assert await gateway.queue_lengths() == {queue: 50}


async def test_a_bad_send_fails_alone(gateway: BrokerGateway, queue: str) -> None:
    good = asyncio.ensure_future(gateway.send("probe.echo", queue=queue, priority=0, args=[1]))
    with pytest.raises(ValueError, match="priority"):
        await gateway.send("probe.echo", queue=queue, priority=10, args=[2])
    await good
    assert await gateway.queue_lengths() == {queue: 1}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_round_trip_fails_as_a_whole_and_a_closed_sender_refuses(queue: str) -> None:
    gateway = BrokerGateway(Settings(queues={queue: 1}), f"redis://127.0.0.1:{_closed_port()}/0")
    try:
        sends = [TaskSend("probe.echo", queue, 0, [n], f"t-{n}") for n in range(3)]
        outcomes = await gateway.send_many(sends)
        assert all(isinstance(outcome, Unavailable) for outcome in outcomes)
    finally:
        await gateway.close()
    with pytest.raises(Unavailable):
        await gateway.send("probe.echo", queue=queue, priority=0, args=[])


def test_a_layout_routed_through_bindings_is_refused(redis_url: str) -> None:
    app = Celery("bound", broker=redis_url)
    app.conf.task_queues = [Queue("fanned", Exchange("jobs", type="fanout"))]  # type: ignore[no-untyped-call]
    with pytest.raises(ValueError, match="fanout exchange"):
        TaskMessages(app, redis_db=0, priority_keys=priority_keys)
    routed = Celery("routed", broker=redis_url)
    routed.conf.task_routes = {"probe.echo": {"queue": "scan", "exchange": "jobs"}}
    with pytest.raises(ValueError, match="task routes"):
        TaskMessages(routed, redis_db=0, priority_keys=priority_keys)


async def test_a_worker_runs_what_the_gateway_sent(
    gateway: BrokerGateway, redis_url: str, queue: str, redis_prefix: str
) -> None:
    outcomes = await gateway.send_many(
        [TaskSend("probe.echo", queue, n, [{"n": n}], f"{redis_prefix}-{n}") for n in (9, 0, 5)]
    )
    assert outcomes == [None, None, None]
    with probe_worker(redis_url, [queue], control_exchange=redis_prefix):
        for n in (9, 0, 5):
            deadline = time.monotonic() + RESULT_TIMEOUT
            result = await gateway.task_result(f"{redis_prefix}-{n}")
            while result is None or result.state != "SUCCESS":
                assert time.monotonic() < deadline, f"task {n} never ran"
                await asyncio.sleep(0.05)
                result = await gateway.task_result(f"{redis_prefix}-{n}")
            assert result.result == {"n": n}
    assert await gateway.queue_lengths() == {queue: 0}


async def test_notices_go_out_first_in_the_same_round_trip(
    gateway: BrokerGateway, raw_redis: redis.Redis, queue: str, redis_prefix: str
) -> None:
    channel = f"{redis_prefix}:events"
    watcher = raw_redis.pubsub(ignore_subscribe_messages=True)
    watcher.subscribe(channel)
    assert watcher.get_message(timeout=2) is None
    try:
        before = gateway.sender.batches
        outcomes = await gateway.send_many(
            [TaskSend("probe.echo", queue, 0, [1], "noticed")], notices=[(channel, "created 1")]
        )
        assert outcomes == [None]
        assert gateway.sender.batches - before == 1
        message = watcher.get_message(timeout=2)
        assert message is not None and message["data"] == b"created 1"
        assert await gateway.queue_lengths() == {queue: 1}
    finally:
        watcher.close()
