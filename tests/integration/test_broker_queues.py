"""Sending through the gateway lands in one Redis list per priority; counting and purging see them all.

The queues are named after the test's own prefix: the Redis database is shared, and a worker of
another test consuming a queue called ``scan`` must not take these messages.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
import redis

from tests.integration.celery_probe_tasks import probe_worker
from worker_automation.broker.celery_app import JobTaskBackend, ResultBackend, make_celery
from worker_automation.broker.gateway import BrokerGateway, CeleryTaskResult
from worker_automation.broker.queues import Purged, priority_keys
from worker_automation.domain.errors import Unavailable
from worker_automation.settings import Settings
from worker_automation.worker.pool import PoolTaskBackend

RESULT_TIMEOUT = 20.0


@dataclass(frozen=True)
class Queues:
    """This test's two queues."""

    main: str
    other: str


@pytest.fixture
def queues(redis_prefix: str) -> Queues:
    return Queues(main=f"{redis_prefix}-scan", other=f"{redis_prefix}-scraping")


@pytest.fixture
def settings(queues: Queues) -> Settings:
    # Task events on: the sends below are checked for their task-sent events.
    return Settings(queues={queues.main: 1, queues.other: 2}, task_events=True)


@pytest.fixture
async def gateway(settings: Settings, redis_url: str, redis_prefix: str) -> AsyncIterator[BrokerGateway]:
    gateway = BrokerGateway(settings, redis_url)
    gateway.app.conf.control_exchange = redis_prefix
    try:
        yield gateway
    finally:
        await gateway.close()


@pytest.fixture
def raw_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        yield client
    finally:
        client.close()


async def wait_for_state(gateway: BrokerGateway, task_id: str, state: str) -> CeleryTaskResult:
    deadline = time.monotonic() + RESULT_TIMEOUT
    while time.monotonic() < deadline:
        result = await gateway.task_result(task_id)
        if result is not None and result.state == state:
            return result
        await asyncio.sleep(0.05)
    raise TimeoutError(f"task {task_id} never reached {state}")


def test_priority_keys_follow_the_transport_layout() -> None:
    assert priority_keys("scraping") == ["scraping"] + [f"scraping:{n}" for n in range(1, 10)]


async def test_every_priority_has_its_list_and_is_counted(
    gateway: BrokerGateway, raw_redis: redis.Redis, queues: Queues
) -> None:
    ids = [await gateway.send("probe.echo", queue=queues.main, priority=p, args=[p]) for p in range(10)]
    await gateway.send("probe.echo", queue=queues.other, priority=3, args=[1])
    await gateway.send("probe.echo", queue=queues.other, priority=3, args=[2])

    assert len(set(ids)) == 10
    for key in priority_keys(queues.main):
        assert raw_redis.llen(key) == 1, key
    assert raw_redis.llen(f"{queues.other}:3") == 2
    assert await gateway.queue_lengths() == {queues.main: 10, queues.other: 2}


async def test_send_keeps_a_given_task_id(gateway: BrokerGateway, queues: Queues) -> None:
    sent = await gateway.send("probe.echo", queue=queues.main, priority=0, args=[], task_id="fixed-id")
    assert sent == "fixed-id"


async def test_concurrent_sends_share_round_trips_and_each_keeps_its_sent_event(
    gateway: BrokerGateway, redis_url: str, raw_redis: redis.Redis, queues: Queues
) -> None:
    watcher = redis.Redis.from_url(redis_url, decode_responses=True).pubsub(ignore_subscribe_messages=True)
    watcher.psubscribe("*celeryev/task.sent")
    assert watcher.get_message(timeout=2) is None  # the subscription is in place

    ids = await asyncio.gather(
        *(gateway.send("probe.echo", queue=queues.main, priority=0, args=[n]) for n in range(40))
    )

    messages = [json.loads(raw) for raw in raw_redis.lrange(queues.main, 0, -1)]
    assert sorted(m["headers"]["id"] for m in messages) == sorted(ids)
    assert {m["headers"]["task"] for m in messages} == {"probe.echo"}
    args = sorted(json.loads(base64.b64decode(m["body"]))[0][0] for m in messages)
    assert args == list(range(40))
    sent: set[str] = set()
    deadline = time.monotonic() + 5
    while len(sent) < 40 and time.monotonic() < deadline:
        message = watcher.get_message(timeout=0.5)
        if message is not None:
            event = json.loads(base64.b64decode(json.loads(message["data"])["body"]))
            if event["uuid"] in ids:
                assert event["type"] == "task-sent" and event["queue"] == queues.main
                sent.add(event["uuid"])
    watcher.close()
    assert sent == set(ids)
    # Sends waiting together went out together, each group in one pipeline.
    assert gateway.sender.batches < 40


async def test_purge_deletes_every_list_of_the_queue_only(
    gateway: BrokerGateway, raw_redis: redis.Redis, queues: Queues
) -> None:
    sent = [await gateway.send("probe.echo", queue=queues.other, priority=p, args=[]) for p in (0, 0, 4, 9)]
    await gateway.send("probe.echo", queue=queues.main, priority=0, args=[])
    raw_redis.rpush(queues.other, b"not a task message")

    purged = await gateway.purge(queues.other)
    assert purged == Purged(lists_deleted=3, task_ids=frozenset(sent))
    assert not any(raw_redis.exists(key) for key in priority_keys(queues.other))
    assert await gateway.queue_lengths() == {queues.main: 1, queues.other: 0}
    assert await gateway.purge(queues.other) == Purged(0, frozenset())


async def test_worker_runs_priority_zero_first_and_results_are_readable(
    gateway: BrokerGateway, redis_url: str, raw_redis: redis.Redis, queues: Queues, redis_prefix: str
) -> None:
    order_key = f"{redis_prefix}:order"
    # Queued before any worker exists, the low-priority tasks first.
    for n in range(3):
        await gateway.send("probe.record", queue=queues.main, priority=9, args=[order_key, f"late-{n}"])
    for n in range(3):
        await gateway.send("probe.record", queue=queues.main, priority=0, args=[order_key, f"early-{n}"])
    echo_id = await gateway.send("probe.echo", queue=queues.main, priority=5, args=[{"ok": True}])
    fail_id = await gateway.send("probe.fail", queue=queues.main, priority=5, args=["certidao recusada"])
    assert await gateway.task_result(echo_id) is None

    with probe_worker(redis_url, [queues.main], control_exchange=redis_prefix):
        echoed = await wait_for_state(gateway, echo_id, "SUCCESS")
        failed = await wait_for_state(gateway, fail_id, "FAILURE")
        for _ in range(int(RESULT_TIMEOUT / 0.05)):
            if raw_redis.llen(order_key) == 6:
                break
            await asyncio.sleep(0.05)

    assert raw_redis.lrange(order_key, 0, -1) == [
        "early-0",
        "early-1",
        "early-2",
        "late-0",
        "late-1",
        "late-2",
    ]
    assert echoed.result == {"ok": True}
    assert echoed.exc_type is None and echoed.date_done
    assert failed.exc_type == "ValueError"
    assert failed.exc_message == "certidao recusada"
    assert failed.traceback and "ValueError" in failed.traceback
    assert await gateway.queue_lengths() == {queues.main: 0, queues.other: 0}


async def test_unknown_task_has_no_result(gateway: BrokerGateway) -> None:
    assert await gateway.task_result("no-such-task") is None
    assert await gateway.ping() is True


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_everything_fails_fast_when_redis_is_down(settings: Settings, queues: Queues) -> None:
    gateway = BrokerGateway(settings, f"redis://127.0.0.1:{closed_port()}/0")
    try:
        started = time.monotonic()
        with pytest.raises(Unavailable, match="Broker indisponivel"):
            await gateway.send("probe.echo", queue=queues.main, priority=0, args=[])
        with pytest.raises(Unavailable):
            await gateway.revoke("some-task", terminate=True)
        with pytest.raises(Unavailable):
            await gateway.queue_lengths()
        with pytest.raises(Unavailable):
            await gateway.purge(queues.main)
        with pytest.raises(Unavailable):
            await gateway.task_result("some-task")
        assert await gateway.ping() is False
        inspected = await gateway.inspect()
        assert not inspected.available and inspected.ping == {}
        assert time.monotonic() - started < 2.0
    finally:
        await gateway.close()


async def test_send_gives_up_on_a_silent_server_within_two_seconds(
    settings: Settings, queues: Queues
) -> None:
    # Accepts connections (the kernel does) but never answers: the worst kind of "down".
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        gateway = BrokerGateway(settings, f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
        try:
            started = time.monotonic()
            with pytest.raises(Unavailable):
                await gateway.send("probe.echo", queue=queues.main, priority=0, args=[])
            assert time.monotonic() - started < 2.5
        finally:
            await gateway.close()


def test_a_job_task_keeps_its_start_in_the_result_backend_but_not_its_success(redis_url: str) -> None:
    # The job row records how a job ended: writing the task's success to Redis as well only cost
    # each job a read and a write. Its start stays there (sync-orphans reads it for open jobs).
    app = make_celery(Settings(), redis_url)
    jobs, plain = JobTaskBackend(app=app, url=redis_url), ResultBackend(app=app, url=redis_url)
    for backend, task_id in ((jobs, "job-task"), (plain, "other-task")):
        backend.mark_as_started(task_id, pid=1)
        backend.mark_as_done(task_id, {"outcome": "completed"})
    assert jobs.get_task_meta("job-task")["status"] == "STARTED"
    assert plain.get_task_meta("other-task")["status"] == "SUCCESS"
    jobs.mark_as_retry("job-task", RuntimeError("limite"))
    assert jobs.get_task_meta("job-task")["status"] == "RETRY"


def test_a_pool_process_writes_a_job_task_state_without_reading_it_first(redis_url: str) -> None:
    # Celery reads a task's stored state before each write, to keep a stored SUCCESS; a job task
    # never has one, so the pool's backend writes straight away (one Redis round trip less a job).
    # A SUCCESS put there by hand shows it: the stock backend would keep it, this one overwrites it.
    app = make_celery(Settings(), redis_url)
    backend, stock = PoolTaskBackend(app=app, url=redis_url), JobTaskBackend(app=app, url=redis_url)
    for task_id in ("pool-task", "stock-task"):
        ResultBackend(app=app, url=redis_url).mark_as_done(task_id, {"outcome": "completed"})
    backend.mark_as_started("pool-task", pid=1)
    stock.mark_as_started("stock-task", pid=1)
    assert backend.get_task_meta("pool-task")["status"] == "STARTED"
    assert stock.get_task_meta("stock-task")["status"] == "SUCCESS"
    backend.mark_as_done("pool-task", {"outcome": "completed"})
    assert backend.get_task_meta("pool-task")["status"] == "STARTED"
    backend.mark_as_retry("pool-task", RuntimeError("limite"))
    assert backend.get_task_meta("pool-task")["status"] == "RETRY"
    backend.mark_as_failure("pool-task", RuntimeError("falhou"))
    stored = backend.get_task_meta("pool-task")
    assert (stored["status"], stored["task_id"]) == ("FAILURE", "pool-task")
