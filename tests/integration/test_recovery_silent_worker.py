"""A Celery worker that stops answering is not taken for dead at once: its runs are left alone
while it has been silent for less than the recovery window, and decided after that."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

import pytest

from tests.integration.harness import Stack, descendants
from tests.support.settings import MakeSettings
from worker_automation.resolvers.lost_runs import LOST_RUN_MESSAGE
from worker_automation.resolvers.recovery import Reconciler
from worker_automation.resolvers.services import Services

pytestmark = pytest.mark.services
WINDOW = 8.0  # WA_RECOVERY_SECONDS of the reconciler under test (its settle age is 2 s)


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


async def test_a_silent_worker_keeps_its_runs_until_the_window_passes(
    stack: Stack, pg_database_url: str, redis_url: str, make_settings: MakeSettings
) -> None:
    worker = stack.pool_worker("scan", 1)
    job_id = stack.dispatch("demo.sleep", {"seconds": 120})
    await asyncio.to_thread(stack.wait_status, job_id, "EXECUTANDO", 30.0)
    services = await Services.start(
        make_settings(pg_database_url, redis_url, recovery_seconds=WINDOW), migrate_db=False
    )
    reconciler = Reconciler()
    group = [worker.pid, *descendants(worker.pid)]
    try:
        seen = await reconciler.run_pass(services)
        assert seen.broker_checked and seen.total == 0 and seen.suspects == 0

        # The worker and its pool process stop (no answer to inspect, no progress report).
        _signal_all(group, signal.SIGSTOP)
        stopped_at = time.monotonic()
        await asyncio.sleep(3.0)
        for _ in range(2):
            quiet = await reconciler.run_pass(services)
            assert quiet.total == 0 and quiet.suspects == 0, "a silent worker is not a dead one"
        assert (await asyncio.to_thread(stack.db.job, job_id))["status"] == "EXECUTANDO"

        # Silent for longer than the window: gone, and its run is decided in two looks.
        await asyncio.sleep(max(0.0, WINDOW - (time.monotonic() - stopped_at)) + 0.5)
        first = await reconciler.run_pass(services)
        assert first.total == 0 and first.suspects == 1
        second = await reconciler.run_pass(services)
        assert second.failed == 1 and second.job_ids == [job_id]
        row = await asyncio.to_thread(stack.db.job, job_id)
        assert row["status"] == "FALHA" and row["mensagem_erro"] == LOST_RUN_MESSAGE
    finally:
        _signal_all(group, signal.SIGKILL)
        _signal_all(group, signal.SIGCONT)
        await services.close()
