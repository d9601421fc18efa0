"""Worker processes as users run them: ``machine run`` (sweep at start, ``jobCreated`` live) and
``worker -Q`` pool workers, including a bounded shutdown on SIGTERM, on real PostgreSQL and Redis."""

from __future__ import annotations

import signal
import time

import pytest

from tests.integration.harness import Proc, Stack, wait_until
from worker_automation.worker.pipeline import SHUTDOWN_MESSAGE

pytestmark = pytest.mark.services

RUN_TIMEOUT = 20.0
GRACE = 2.0
# SIGTERM to exit: the grace period, reporting the failure, and the process winding down.
EXIT_LIMIT = 10.0
PENDING_PATH = "/api/v1/jobs/pending"


def wait_running(stack: Stack, job_id: int) -> None:
    """Until the job is EXECUTANDO and has reported progress (the automation really runs)."""
    wait_until(
        lambda: (row := stack.db.job(job_id))["status"] == "EXECUTANDO" and row["progress"] >= 1,
        RUN_TIMEOUT,
        lambda: f"job {job_id} never ran: {stack.db.job(job_id)}",
    )


def terminate(proc: Proc) -> float:
    """SIGTERM ``proc`` and return how long it took to exit (fails past EXIT_LIMIT)."""
    started = time.monotonic()
    proc.send(signal.SIGTERM)
    code = proc.wait(EXIT_LIMIT)
    elapsed = time.monotonic() - started
    assert code is not None, f"{proc.name} still running {EXIT_LIMIT}s after SIGTERM:\n{proc.tail()}"
    return elapsed


def test_machine_started_after_jobs_were_created_sweeps_them(stack: Stack) -> None:
    echoes = [stack.dispatch("demo.echo", {"n": n}) for n in range(3)]
    other = stack.dispatch("demo.sleep", {"seconds": 1})
    stack.machine("demo.echo")
    for n, job_id in enumerate(echoes):
        row = stack.wait_status(job_id, {"CONCLUIDO", "FALHA"}, RUN_TIMEOUT)
        assert row["status"] == "CONCLUIDO"
        assert row["result"] == {"n": n}
    # A machine serves exactly one automation: the other job is not its business.
    assert stack.db.job(other)["status"] == "AGENDADO"


def test_machine_started_before_hears_job_created(stack: Stack) -> None:
    assert stack.serve_proc is not None
    serve = stack.serve_proc
    machine = stack.machine("demo.echo")
    # Subscribed: the websocket was accepted, and the sweep that follows the subscription was
    # made (the first sweep runs before connecting). After it only the event can bring the job:
    # the next periodic sweep is 30 s away. The pause covers the server starting the operation
    # (authenticating the machine, joining the event feed), which nothing outside can observe.
    serve.wait_for_output('"WebSocket /graphql" [accepted]', RUN_TIMEOUT)
    serve.wait_for_output(PENDING_PATH, RUN_TIMEOUT, count=2)
    time.sleep(1.0)
    sweeps_before = serve.output().count(PENDING_PATH)
    job_id = stack.dispatch("demo.echo", {"ao vivo": True})
    row = stack.wait_status(job_id, {"CONCLUIDO", "FALHA"}, 8.0)
    assert row["status"] == "CONCLUIDO", row
    assert row["result"] == {"ao vivo": True}
    log = serve.output()
    claim_at = log.index(f"/api/v1/jobs/{job_id}/start")
    assert log[:claim_at].count(PENDING_PATH) == sweeps_before, "claimed after a sweep, not the event"
    assert machine.alive()


def test_machine_sigterm_waits_the_grace_then_reports_shutdown(stack: Stack) -> None:
    job_id = stack.dispatch("demo.sleep", {"seconds": 30})
    machine = stack.machine("demo.sleep", grace=GRACE)
    wait_running(stack, job_id)
    elapsed = terminate(machine)
    assert elapsed >= GRACE - 0.2, f"exited after {elapsed:.1f}s, before the grace period ended"
    row = stack.db.job(job_id)
    assert row["status"] == "FALHA", row
    assert row["mensagem_erro"] == SHUTDOWN_MESSAGE
    assert row["data_fim"] is not None


def test_machine_sigterm_lets_a_job_finish_within_the_grace(stack: Stack) -> None:
    job_id = stack.dispatch("demo.sleep", {"seconds": 1.5})
    machine = stack.machine("demo.sleep", grace=15.0)
    wait_running(stack, job_id)
    # Well under the 15 s grace: it returns as soon as the job is reported.
    elapsed = terminate(machine)
    assert elapsed < 8.0
    row = stack.db.job(job_id)
    assert row["status"] == "CONCLUIDO", row
    assert row["result"] == {"slept": 1.5}


def test_pool_worker_sigterm_waits_the_grace_then_reports_shutdown(stack: Stack) -> None:
    worker = stack.pool_worker("scan", 1, grace=GRACE)
    job_id = stack.dispatch("demo.sleep", {"seconds": 30})
    wait_running(stack, job_id)
    elapsed = terminate(worker)
    assert elapsed >= GRACE - 0.2, f"exited after {elapsed:.1f}s, before the grace period ended"
    row = stack.db.job(job_id)
    assert row["status"] == "FALHA", row
    assert row["mensagem_erro"] == SHUTDOWN_MESSAGE
