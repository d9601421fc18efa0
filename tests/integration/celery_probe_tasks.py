"""Trivial Celery tasks and a real worker subprocess for the broker integration tests.

The worker process imports this module with ``celery -A tests.integration.celery_probe_tasks`` and
finds its broker in ``WA_PROBE_BROKER_URL``; the tests start it through :func:`probe_worker`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from tests.services import REDIS_HOST, REDIS_PORT, REDIS_TEST_DB
from worker_automation.broker.celery_app import make_celery
from worker_automation.settings import Settings

BROKER_ENV = "WA_PROBE_BROKER_URL"
# Broadcasts (ping, inspect, revoke) go through this exchange; a test naming its own keeps its
# worker invisible to other tests sharing the Redis database, and theirs invisible to it.
CONTROL_EXCHANGE_ENV = "WA_PROBE_CONTROL_EXCHANGE"
PROJECT_ROOT = Path(__file__).resolve().parents[2]

app = make_celery(
    Settings(), os.environ.get(BROKER_ENV, f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_TEST_DB}"), name="probe"
)
app.conf.control_exchange = os.environ.get(CONTROL_EXCHANGE_ENV, app.conf.control_exchange)


def echo(value: Any) -> Any:
    return value


def sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def fail(message: str) -> None:
    raise ValueError(message)


def record(list_key: str, label: str) -> str:
    """Append ``label`` to a Redis list, so a test can read the order tasks ran in."""
    client = redis.Redis.from_url(app.conf.broker_url)
    try:
        client.rpush(list_key, label)
    finally:
        client.close()
    return label


# Registered by call rather than as decorators so the functions keep their type hints.
for _name, _fn in {
    "probe.echo": echo,
    "probe.sleep": sleep,
    "probe.fail": fail,
    "probe.record": record,
}.items():
    app.task(name=_name)(_fn)


def wait_for_ping(control_app: Celery, hostname: str, deadline_seconds: float = 20.0) -> None:
    """Block until the worker ``hostname`` answers a ping on ``control_app``'s broker."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        replies = control_app.control.ping(destination=[hostname], timeout=0.3)
        if replies:
            return
    raise TimeoutError(f"worker {hostname} did not answer a ping within {deadline_seconds} s")


@contextmanager
def probe_worker(
    broker_url: str, queues: Sequence[str], *, control_exchange: str = "celery", wait: bool = True
) -> Iterator[str]:
    """Run a prefork worker (one child) of this module on ``queues``; yields its hostname."""
    hostname = f"probe-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
    env = dict(os.environ, **{BROKER_ENV: broker_url, CONTROL_EXCHANGE_ENV: control_exchange})
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.integration.celery_probe_tasks",
            "worker",
            "-Q",
            ",".join(queues),
            "-P",
            "prefork",
            "-c",
            "1",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
            "-n",
            hostname,
            "-l",
            "warning",
        ],
        cwd=PROJECT_ROOT,
        env=env,
        # The start-up banner says nothing a test needs; errors still reach stderr.
        stdout=subprocess.DEVNULL,
    )
    control_app = make_celery(Settings(), broker_url, name="probe-control")
    control_app.conf.control_exchange = control_exchange
    try:
        if wait:
            wait_for_ping(control_app, hostname)
        yield hostname
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            # A warm shutdown waits for running tasks with no limit; the test is over anyway.
            process.kill()
            process.wait()
        control_app.close()
