"""Inspecting Celery workers: bounded by the timeout, empty and unavailable when nobody answers.

Each test broadcasts on a control exchange of its own, so workers that other tests run on the
same Redis database neither answer here nor hear these broadcasts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tests.integration.celery_probe_tasks import probe_worker
from worker_automation.broker.gateway import BrokerGateway
from worker_automation.settings import Settings

# The contract: a 3 s inspect timeout, and an answer within about half a second more.
TIMEOUT = 3.0
BOUND = 4.5


@pytest.fixture
async def gateway(redis_url: str, redis_prefix: str) -> AsyncIterator[BrokerGateway]:
    gateway = BrokerGateway(Settings(inspect_timeout_seconds=TIMEOUT), redis_url)
    gateway.app.conf.control_exchange = redis_prefix
    try:
        yield gateway
    finally:
        await gateway.close()


async def test_no_worker_answers_within_the_bound(gateway: BrokerGateway) -> None:
    started = time.monotonic()
    # Concurrent callers share one inspection instead of each waiting for its own.
    results = await asyncio.gather(*(gateway.inspect() for _ in range(3)))
    elapsed = time.monotonic() - started

    assert elapsed < BOUND
    for result in results:
        assert result.available is False
        assert result.active == result.reserved == result.scheduled == result.stats == result.ping == {}


async def test_a_running_worker_is_listed_in_every_section(
    gateway: BrokerGateway, redis_url: str, redis_prefix: str
) -> None:
    with probe_worker(redis_url, [f"{redis_prefix}-scan"], control_exchange=redis_prefix) as hostname:
        started = time.monotonic()
        result = await gateway.inspect()
        elapsed = time.monotonic() - started

    assert elapsed < BOUND
    assert result.available is True
    assert result.ping == {hostname: {"ok": "pong"}}
    assert result.active == {hostname: []}
    assert result.reserved == {hostname: []}
    assert result.scheduled == {hostname: []}
    assert result.stats[hostname]["pool"]["max-concurrency"] == 1
