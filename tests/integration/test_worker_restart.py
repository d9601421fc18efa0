"""A Celery worker that stops on an error nobody asked for starts itself again, in place; one
that is asked to stop stays stopped."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from tests.integration.harness import Stack, clean_env
from worker_automation.worker.restart import RESTART_DELAYS_SECONDS, STEADY_SECONDS, restart_delay

pytestmark = pytest.mark.services

CRASH_ONCE = Path(__file__).with_name("crash_once_worker.py")
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def test_a_worker_that_crashed_starts_again_in_place_and_runs_jobs(stack: Stack) -> None:
    env = clean_env(
        WA_REDIS_URL=stack.redis_url,
        WA_API_URL=stack.api_url,
        WA_WORKER_API_KEY=stack.register_machine(queue="scan"),
        PYTHONPATH=str(PROJECT_ROOT),
    )
    node = f"crash-{stack.port}@test"
    args = [sys.executable, str(CRASH_ONCE), "worker", "-Q", "scan", "-c", "1", "-n", node]
    worker = stack.procs.start("worker-crash-once", args, env, stack.workdir)
    worker.wait_for_output("Unrecoverable error")
    worker.wait_for_output("starting it again in 1 s")
    readies = worker.output().count(" ready.")
    # The started-again worker: the same process (the one the test started, still running).
    worker.wait_for_output(" ready.", count=readies + 1)
    assert worker.alive()
    job_id = stack.dispatch("demo.echo", {"n": 1})
    assert stack.wait_status(job_id, "CONCLUIDO", timeout=30)["status"] == "CONCLUIDO"
    worker.send(signal.SIGTERM)
    assert worker.wait(30) == 0  # a shutdown asked for is not undone
    assert worker.output().count("starting it again") == 1


def test_the_delay_grows_while_it_keeps_failing_and_starts_over_after_a_steady_run() -> None:
    delays = []
    restarts = 0
    for _ in range(len(RESTART_DELAYS_SECONDS) + 2):
        delay, restarts = restart_delay(restarts, ran_seconds=2.0)
        delays.append(delay)
    assert delays == [*RESTART_DELAYS_SECONDS, RESTART_DELAYS_SECONDS[-1], RESTART_DELAYS_SECONDS[-1]]
    assert restart_delay(restarts, ran_seconds=STEADY_SECONDS) == (RESTART_DELAYS_SECONDS[0], 1)
