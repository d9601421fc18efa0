"""A run that ends while the database is down keeps its outcome (R9), with real processes.

``serve`` on a PostgreSQL and Redis of the test's own and a real ``worker -Q scan``. The run ends
during the outage, so its completion waits in the machine's outbox; the processes keeping it are
then stopped (SIGSTOP), which makes the race of the outbox against the reconciler deterministic:
nothing is delivered until the test lets it go. While the worker's main process answers, the
reconciler sees the kept report and leaves the run alone however long it waits; once the worker
is silent too, the reconciler ends the run ``worker_lost``, and the completion delivered after
that replaces it (``late_report``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator

import asyncpg
import pytest

from tests.integration.fault_support import JobFate, PgLedger, configure_serve
from tests.integration.harness import Stack, descendants, plain_dsn, wait_until
from tests.integration.private_services import PrivatePostgres
from worker_automation.worker.owners import machine_directory

pytestmark = pytest.mark.services

RECOVERY = 6.0
# Longer than the run, the outage's start and the reconciler's two looks with their inspections.
WAIT = 60.0


@pytest.fixture
def late(private_stack: Stack) -> Iterator[tuple[Stack, PgLedger]]:
    configure_serve(private_stack, WA_RECOVERY_SECONDS=str(RECOVERY), WA_INSPECT_TIMEOUT_SECONDS="1")
    private_stack.serve()
    ledger = PgLedger(private_stack.database_url)
    ledger.install()
    yield private_stack, ledger


def _fate(ledger: PgLedger, job_id: int) -> JobFate | None:
    try:
        return ledger.fates().get(job_id)
    except (TimeoutError, OSError, asyncpg.PostgresError):
        return None  # the database is not back yet


def _status(ledger: PgLedger, job_id: int, status: str) -> JobFate | None:
    fate = _fate(ledger, job_id)
    return fate if fate is not None and fate.status == status else None


def _late_reports(database_url: str, job_id: int) -> list[dict[str, object]]:
    async def read() -> list[dict[str, object]]:
        conn = await asyncpg.connect(plain_dsn(database_url))
        try:
            rows = await conn.fetch(
                "SELECT actor, result FROM audit_log WHERE action = 'late_report' AND target = $1",
                f"worker:{job_id}",
            )
        finally:
            await conn.close()
        return [dict(r) for r in rows]

    return asyncio.run(read())


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        os.kill(pid, sig)


def test_a_completion_kept_during_a_database_outage_is_the_recorded_outcome(
    late: tuple[Stack, PgLedger], private_pg: PrivatePostgres
) -> None:
    stack, ledger = late
    key = stack.register_machine(queue="scan")
    worker = stack.pool_worker("scan", 1, key=key)
    job = stack.dispatch("demo.sleep", {"seconds": 3})
    wait_until(lambda: _status(ledger, job, "EXECUTANDO"), WAIT, "the job never ran", 0.1)
    outbox = machine_directory("outbox", key)

    # The run ends while the database is down: its completion is kept in the outbox.
    private_pg.stop()
    stopped: list[int] = []
    try:
        wait_until(lambda: list(outbox.glob(f"*-{job}.json")), WAIT, "completion never kept", 0.05)
        # The pool process keeping it stops where it is: nothing is delivered until it is let go.
        stopped = descendants(worker.pid)
        assert stopped, "no pool process"
        _signal(stopped, signal.SIGSTOP)
    finally:
        private_pg.start()

    try:
        # The reconciler's window passes three times over; the worker's main process answers and
        # tells of the kept report, so the run is left alone.
        time.sleep(3 * RECOVERY)
        fate = wait_until(lambda: _fate(ledger, job), WAIT, "database not back")
        assert fate.status == "EXECUTANDO", fate.describe()

        # Now the worker is silent too: after the window the reconciler ends the run as lost.
        _signal([worker.pid], signal.SIGSTOP)
        stopped.append(worker.pid)
        lost = wait_until(
            lambda: _status(ledger, job, "FALHA"), WAIT, lambda: f"not ended: {_fate(ledger, job)}"
        )
        assert "worker_lost" in (lost.error or ""), lost.describe()
    finally:
        _signal(stopped, signal.SIGCONT)

    # Let go, the outbox delivers the completion of that same run: it is the recorded outcome.
    done = wait_until(
        lambda: _status(ledger, job, "CONCLUIDO"),
        WAIT,
        lambda: f"late completion refused: {_fate(ledger, job)}",
    )
    assert [new for _old, new, _task in done.changes] == ["AGENDADO", "EXECUTANDO", "FALHA", "CONCLUIDO"]
    assert _late_reports(stack.database_url, job) == [{"actor": "machine:test-machine-1", "result": "ok"}]
    assert not list(outbox.glob(f"*-{job}.json")), "the answered report is still kept"
