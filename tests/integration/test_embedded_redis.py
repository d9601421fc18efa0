"""The embedded Redis carries the whole broker layer: a real worker process, results, revoke, events."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from tests.integration.celery_probe_tasks import probe_worker
from worker_automation.broker.embedded import EmbeddedRedis
from worker_automation.broker.events import Event, EventBus
from worker_automation.broker.gateway import BrokerGateway, CeleryTaskResult
from worker_automation.domain.vocabulary import EventKind
from worker_automation.settings import Settings

RESULT_TIMEOUT = 20.0


@pytest.fixture
def embedded() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture
async def gateway(embedded: EmbeddedRedis) -> AsyncIterator[BrokerGateway]:
    gateway = BrokerGateway(Settings(inspect_timeout_seconds=1.0), embedded.url)
    try:
        yield gateway
    finally:
        await gateway.close()


async def wait_for_state(gateway: BrokerGateway, task_id: str, state: str) -> CeleryTaskResult:
    deadline = time.monotonic() + RESULT_TIMEOUT
    while time.monotonic() < deadline:
        result = await gateway.task_result(task_id)
        if result is not None and result.state == state:
            return result
        await asyncio.sleep(0.05)
    raise TimeoutError(f"task {task_id} never reached {state}")


def test_serves_redis_on_a_free_port_and_releases_it() -> None:
    server = EmbeddedRedis().start()
    port = server.port
    assert server.url == f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(server.url)
    assert client.ping()
    client.rpush("scan:3", b"x")
    assert client.llen("scan:3") == 1
    client.close()
    server.stop()
    assert not server.running
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
        pass
    # The same port can be served again straight away.
    again = EmbeddedRedis(port=port).start()
    try:
        assert again.port == port
    finally:
        again.stop()


async def test_gateway_bus_and_a_real_worker(embedded: EmbeddedRedis, gateway: BrokerGateway) -> None:
    bus = EventBus(embedded.url, "wa-embedded")
    await bus.ready()
    try:
        async with bus.listen() as listener:
            echo_id = await gateway.send("probe.echo", queue="scan", priority=2, args=["ola"])
            assert (await gateway.queue_lengths())["scan"] == 1
            await bus.publish(Event(kind=EventKind.CREATED, job={"task_id": echo_id}))
            async with asyncio.timeout(5.0):
                created = await anext(listener)
            assert created.kind is EventKind.CREATED and created.job == {"task_id": echo_id}

            with probe_worker(embedded.url, ["scan"]) as hostname:
                assert (await wait_for_state(gateway, echo_id, "SUCCESS")).result == "ola"
                inspected = await gateway.inspect()
                assert inspected.available and hostname in inspected.ping

                # A running task is really stopped, and the worker lives on to run the next one.
                sleep_id = await gateway.send("probe.sleep", queue="scan", priority=0, args=[60])
                await wait_for_state(gateway, sleep_id, "STARTED")
                started = time.monotonic()
                await gateway.revoke(sleep_id, terminate=True)
                revoked = await wait_for_state(gateway, sleep_id, "REVOKED")
                assert time.monotonic() - started < 5.0
                assert revoked.exc_type == "TaskRevokedError"

                after_id = await gateway.send("probe.echo", queue="scan", priority=0, args=[2])
                assert (await wait_for_state(gateway, after_id, "SUCCESS")).result == 2
    finally:
        await bus.stop()
    assert (await gateway.purge("scan")).lists_deleted == 0


def settled_wakeups(embedded: EmbeddedRedis) -> int:
    """The wake-up count once the last replies' own wake-ups (at most one each) are spent."""
    deadline = time.monotonic() + 5.0
    count = embedded.wakeups()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = embedded.wakeups()
        if now == count:
            return now
        count = now
    raise AssertionError("the embedded Redis never went quiet")


def test_idle_connections_cost_no_wakeups(embedded: EmbeddedRedis) -> None:
    """Connections that send nothing leave their threads asleep; a published message wakes only
    its subscriber's, and an idle blocking pop waits without waking until its timeout."""
    quiet = [redis.Redis.from_url(embedded.url) for _ in range(5)]
    subscriber = redis.Redis.from_url(embedded.url).pubsub()
    try:
        for client in quiet:
            assert client.ping()
        subscriber.subscribe("wa-idle")
        assert subscriber.get_message(timeout=5.0) is not None  # the subscribe confirmation

        before = settled_wakeups(embedded)
        time.sleep(0.5)
        assert embedded.wakeups() == before

        publisher = quiet[0]
        assert publisher.publish("wa-idle", b"hello") == 1
        message = subscriber.get_message(timeout=5.0)
        assert message is not None and message["data"] == b"hello"

        # A BRPOP parked in the server is one request, however long it waits.
        before = settled_wakeups(embedded)
        assert quiet[1].brpop(["wa-idle-list"], timeout=1) is None
        assert embedded.wakeups() - before <= 2
    finally:
        subscriber.close()
        for client in quiet:
            client.close()


def _accepted_sockets(port: int) -> list[socket.socket]:
    """This process's sockets accepted on ``port`` (the embedded server runs in it), duplicated."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            candidate = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            if candidate.family == socket.AF_INET and candidate.getsockname()[1] == port:
                candidate.getpeername()  # the listening socket has no peer
                found.append(candidate)
                continue
        except OSError:
            pass
        candidate.close()
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to find the server's sockets")
def test_replies_go_out_at_once(embedded: EmbeddedRedis) -> None:
    """Every connection sends without Nagle's delay, as Redis' own do. Without it, a reply written
    in pieces (a pipeline's, one per command) waited for the client's delayed acknowledgement,
    about 40 ms on Linux: a Celery worker took 86 ms per task through the embedded broker."""
    clients = [redis.Redis.from_url(embedded.url) for _ in range(2)]
    try:
        for client in clients:
            assert client.ping()
        accepted = _accepted_sockets(embedded.port)
        try:
            assert len(accepted) == len(clients)
            for sock in accepted:
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        finally:
            for sock in accepted:
                sock.close()
        pipe = clients[0].pipeline()
        pipe.rpush("wa-nodelay", b"a", b"b")
        pipe.lpop("wa-nodelay")
        pipe.lpop("wa-nodelay")
        assert pipe.execute() == [2, b"a", b"b"]
    finally:
        for client in clients:
            client.close()
