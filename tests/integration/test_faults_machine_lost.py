"""A dedicated machine killed mid-run and never started again is noticed (R10), with real processes.

``serve`` on a PostgreSQL and Redis of the test's own and a real ``machine run``. The machine's
open ``jobCreated`` subscription is its presence (``Machine.connected``); SIGKILL closes its
socket, and with nobody acting its running job ends FALHA ``machine_lost`` within the recovery
window, with an audit entry and a count in ``wa_jobs_recovered_total{fault="machine_lost"}``.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from tests.integration.fault_support import PgLedger, assert_gone, configure_serve, process_tree
from tests.integration.harness import Stack, plain_dsn, wait_until

pytestmark = pytest.mark.services

RECOVERY = 6.0
WAIT = 45.0
# The reconciler's pass itself (its inspection of the Celery workers waits up to 1 s here).
PASS_SLACK = 3.0
MACHINES = "{ machines { name connected lastSeenAt } }"


@pytest.fixture
def watched(private_stack: Stack) -> Iterator[tuple[Stack, PgLedger]]:
    configure_serve(private_stack, WA_RECOVERY_SECONDS=str(RECOVERY), WA_INSPECT_TIMEOUT_SECONDS="1")
    private_stack.serve()
    ledger = PgLedger(private_stack.database_url)
    ledger.install()
    yield private_stack, ledger


def _machine(stack: Stack, name: str) -> dict[str, Any]:
    answer = stack.http.post("/graphql", json={"query": MACHINES}, headers=stack.operator_headers)
    assert answer.status_code == 200, answer.text
    [found] = [m for m in answer.json()["data"]["machines"] if m["name"] == name]
    return dict(found)


def _recover_entries(database_url: str, job_id: int) -> list[Any]:
    async def read() -> list[Any]:
        conn = await asyncpg.connect(plain_dsn(database_url))
        try:
            rows = await conn.fetch(
                "SELECT detail FROM audit_log WHERE action = 'recover' AND target = $1", f"worker:{job_id}"
            )
        finally:
            await conn.close()
        return [r["detail"] for r in rows]

    return asyncio.run(read())


def test_a_machine_killed_mid_run_and_left_dead_has_its_run_ended(watched: tuple[Stack, PgLedger]) -> None:
    stack, ledger = watched
    key = stack.register_machine(automation="demo.sleep", name="desktop-01")
    machine = stack.machine("demo.sleep", key=key)
    present = wait_until(lambda: _machine(stack, "desktop-01")["connected"] or None, WAIT, "never connected")
    assert present
    job = stack.dispatch("demo.sleep", {"seconds": 120})
    stack.wait_status(job, "EXECUTANDO", WAIT)
    # Presence survives the window while the machine is there (its row is kept fresh).
    time.sleep(RECOVERY)
    seen = _machine(stack, "desktop-01")
    assert seen["connected"] and seen["lastSeenAt"], seen
    assert stack.db.job(job)["status"] == "EXECUTANDO"

    tree = process_tree(machine.pid)
    machine.send(signal.SIGKILL)
    closed_at = time.monotonic()
    assert_gone(tree, 10.0, "the killed machine")
    wait_until(lambda: not _machine(stack, "desktop-01")["connected"], WAIT, "still connected")

    row = stack.wait_status(job, {"FALHA", "CONCLUIDO", "AGENDADO"}, WAIT)
    elapsed = time.monotonic() - closed_at
    assert row["status"] == "FALHA" and row["mensagem_erro"].startswith("machine_lost: "), row
    assert row["result"]["exc_type"] == "MachineLost", row
    # Within the recovery window of the socket's close (plus the pass that acted).
    assert elapsed <= RECOVERY + PASS_SLACK, f"resolved {elapsed:.1f}s after the machine died"
    assert elapsed >= RECOVERY / 2 - 0.5, f"resolved {elapsed:.1f}s after: no grace to come back"

    [detail] = _recover_entries(stack.database_url, job)
    assert '"fault": "machine_lost"' in detail and '"outcome": "failed"' in detail, detail
    metrics = stack.http.get("/metrics").text
    assert 'wa_jobs_recovered_total{fault="machine_lost"} 1.0' in metrics
    [fate] = [f for f in ledger.fates().values() if f.id == job]
    assert [new for _old, new, _task in fate.changes] == ["AGENDADO", "EXECUTANDO", "FALHA"]
