"""The API's listener of Celery's worker events: one subscription for as long as it listens.

Pub/sub keeps nothing. A listener that subscribes again after each quiet second loses what is
published in between, and a ``worker-offline`` lost so leaves a stopped worker SILENT for half a
minute instead of GONE. The broker is a ``redis-server`` of this module's own, so the only
subscriber on it is the listener, and a test may restart it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from celery import Celery

from tests.integration.private_services import PrivateRedis
from worker_automation.broker.celery_app import make_celery
from worker_automation.broker.worker_heartbeats import WAKE_SECONDS, WorkerHeartbeats
from worker_automation.settings import Settings


@pytest.fixture
def broker(private_redis_server: PrivateRedis) -> PrivateRedis:
    private_redis_server.start()
    private_redis_server.flushall()
    return private_redis_server


@pytest.fixture
def app(broker: PrivateRedis) -> Iterator[Celery]:
    url = broker.url()
    built = make_celery(Settings(database_url="sqlite+aiosqlite://", redis_url=url), url)
    try:
        yield built
    finally:
        built.close()


def _listener_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "worker-events" and t.is_alive()}


@pytest.fixture
def listener(app: Celery) -> Iterator[WorkerHeartbeats]:
    others = _listener_threads()  # another test's listeners in this process, if any
    listening = WorkerHeartbeats(app)
    try:
        yield listening
    finally:
        listening.stop(timeout=10 * WAKE_SECONDS)
    assert _listener_threads() <= others


def _send(app: Celery, host: str, kind: str = "worker-heartbeat") -> None:
    with app.connection_for_write() as connection:
        dispatcher = app.events.Dispatcher(connection, hostname=host, enabled=True)
        try:
            dispatcher.send(kind)
        finally:
            dispatcher.close()


def _until_heard(app: Celery, listener: WorkerHeartbeats, seconds: float) -> None:
    """Beats of a probe until the listener hears one: it is subscribed."""
    probe = f"probe-{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + seconds
    while probe not in listener.heard():
        assert time.monotonic() < deadline, "the listener never heard an event"
        _send(app, probe)
        time.sleep(0.1)


def _subscribers(broker: PrivateRedis) -> set[str]:
    client = redis.Redis.from_url(broker.url())
    try:
        return {str(c["id"]) for c in client.client_list() if int(c["sub"]) or int(c["psub"])}
    finally:
        client.close()


def test_one_subscription_across_quiet_seconds(
    app: Celery, listener: WorkerHeartbeats, broker: PrivateRedis
) -> None:
    _until_heard(app, listener, 10)
    first = _subscribers(broker)
    assert len(first) == 1
    # Quiet for several of the listener's waits: no new connection, no new subscription.
    for _ in range(4):
        time.sleep(WAKE_SECONDS)
        assert _subscribers(broker) == first

    # An event after each quiet second is heard, offline ones included.
    sent = {f"quiet-{n}": "worker-offline" if n % 2 else "worker-heartbeat" for n in range(3)}
    for host, kind in sent.items():
        time.sleep(1.05 * WAKE_SECONDS)
        _send(app, host, kind)
    deadline = time.monotonic() + 5
    while not set(sent) <= set(listener.heard()):
        assert time.monotonic() < deadline, f"heard {sorted(set(listener.heard()) & set(sent))}"
        time.sleep(0.05)
    heard = listener.heard()
    assert {h: heard[h].offline for h in sent} == {h: k == "worker-offline" for h, k in sent.items()}


def test_the_listener_subscribes_again_after_the_broker_restarts(
    app: Celery, listener: WorkerHeartbeats, broker: PrivateRedis
) -> None:
    _until_heard(app, listener, 10)
    broker.restart()
    _until_heard(app, listener, 30)
    assert len(_subscribers(broker)) == 1


def test_stop_ends_the_listener_at_once(app: Celery, listener: WorkerHeartbeats) -> None:
    others = _listener_threads()
    _until_heard(app, listener, 10)
    mine = _listener_threads() - others
    assert len(mine) == 1
    started = time.monotonic()
    listener.stop(timeout=10 * WAKE_SECONDS)
    assert time.monotonic() - started < 3 * WAKE_SECONDS
    assert not mine & _listener_threads()
