"""One fault at a time against the distributed set-up (R1-R3): ``serve`` on PostgreSQL and Redis of
the test's own, real ``worker -Q scan`` and ``machine run`` processes, jobs of the demo
automations. After each fault, with no operator action and within the recovery window, every job
ends CONCLUIDO (or FALHA naming the fault when its run had started and its outcome is unknown),
none ran twice (the database ledger of ``fault_support``) and no process is left behind.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.fault_support import (
    PgLedger,
    Verdict,
    assert_gone,
    configure_serve,
    process_tree,
    wait_resolved,
)
from tests.integration.harness import Stack, wait_until
from tests.integration.private_services import PrivatePostgres, PrivateRedis

pytestmark = pytest.mark.services

# The reconciler's window, set low so each fault is over in well under a minute.
RECOVERY = 8.0
# Beyond the window: the reconciler's own period, sending again, the jobs' own run time.
SLACK = 15.0
RUN_TIMEOUT = 30.0
# Longer than a worker's retries of one call (~8 s) three times over: a report and the next claim
# must outlast it by waiting, not by luck.
API_OUTAGE = 25.0
# A process whose parent was killed has this long to be gone (pool children die with it).
ORPHAN_LIMIT = 10.0


@pytest.fixture
def faulty(private_stack: Stack) -> Iterator[tuple[Stack, PgLedger]]:
    """``serve`` with a short recovery window, up, and the ledger recording every job's changes."""
    configure_serve(private_stack, WA_RECOVERY_SECONDS=str(RECOVERY))
    private_stack.serve()
    ledger = PgLedger(private_stack.database_url)
    ledger.install()
    yield private_stack, ledger


def budget(work_seconds: float) -> float:
    """How long after a fault's end every job may take to be resolved."""
    return RECOVERY + SLACK + work_seconds


def statuses(ledger: PgLedger) -> Counter[str]:
    return Counter(f.status for f in ledger.fates().values())


def wait_running(ledger: PgLedger, count: int) -> set[int]:
    """Until ``count`` jobs are EXECUTANDO; their ids."""

    def running() -> set[int] | None:
        ids = {f.id for f in ledger.fates().values() if f.status == "EXECUTANDO"}
        return ids if len(ids) >= count else None

    return wait_until(running, RUN_TIMEOUT, lambda: f"never {count} running: {statuses(ledger)}", 0.1)


def assert_unknown_outcomes(verdict: Verdict, running: set[int]) -> None:
    """Jobs that were running when the fault hit end FALHA naming it, or ran again after being
    queued again (an automation safe to run again); every other job ends CONCLUIDO."""
    for fate in verdict.fates.values():
        if fate.id in running:
            assert fate.status == "CONCLUIDO" or fate.fault_named, fate.describe()
        else:
            assert fate.status == "CONCLUIDO", fate.describe()


def test_redis_restart_without_persistence_loses_no_job(
    faulty: tuple[Stack, PgLedger], private_redis_server: PrivateRedis
) -> None:
    stack, ledger = faulty
    stack.pool_worker("scan", 2)
    ids = [stack.dispatch("demo.sleep", {"seconds": 0.2}) for _ in range(50)]
    # Some ran: the restart then hits queued messages, prefetched ones and running jobs alike.
    wait_until(lambda: statuses(ledger)["CONCLUIDO"] >= 3, RUN_TIMEOUT, "no job ran", 0.1)
    running = {f.id for f in ledger.fates().values() if f.status == "EXECUTANDO"}
    private_redis_server.restart()

    verdict = wait_resolved(ledger, budget(50 * 0.2 / 2), expected=len(ids))
    verdict.assert_clean(jobs=len(ids))
    assert_unknown_outcomes(verdict, running)
    # The restart did lose queued messages: those jobs ran because they were sent again.
    assert sum(f.resends for f in verdict.fates.values()) > 0, "no job needed sending again"


def test_postgres_down_during_dispatch(faulty: tuple[Stack, PgLedger], private_pg: PrivatePostgres) -> None:
    stack, ledger = faulty
    stack.pool_worker("scan", 2)
    headers = stack.operator_headers
    answers: Counter[int | str] = Counter()
    created: list[int] = []
    stop = threading.Event()

    def dispatch_until_stopped() -> None:
        # Faster than two processes drain 0.3 s jobs: the outage meets claims and reports too.
        with httpx.Client(base_url=stack.api_url, timeout=5.0) as http:
            n = 0
            while not stop.is_set():
                n += 1
                body = {"automation_type": "demo.sleep", "context": {"seconds": 0.3}, "priority": 0}
                try:
                    response = http.post("/api/v1/jobs", json=body, headers=headers)
                except httpx.HTTPError as exc:
                    answers[type(exc).__name__] += 1
                else:
                    answers[response.status_code] += 1
                    if response.status_code == 201:
                        created.append(int(response.json()["data"]["id"]))
                    elif response.status_code == 503 and not response.headers.get("retry-after"):
                        answers["503 without Retry-After"] += 1
                time.sleep(0.1)

    sender = threading.Thread(target=dispatch_until_stopped, daemon=True)
    sender.start()
    try:
        wait_until(lambda: len(created) >= 20, RUN_TIMEOUT, "no job created before the outage", 0.1)
        open_at_stop = {f.id for f in ledger.fates().values() if not f.resolved}
        private_pg.stop()
        time.sleep(10.0)
        private_pg.start()
        time.sleep(2.0)
    finally:
        stop.set()
        sender.join(RUN_TIMEOUT)

    # An outage answers 503 with Retry-After, never 500 (R8); the jobs refused then were simply
    # not created.
    assert answers[500] == 0 and answers["503 without Retry-After"] == 0, answers
    assert answers[503] > 0, f"no request met the outage: {answers}"
    assert len(open_at_stop) >= 5, f"the outage met no work in progress: {open_at_stop}"
    verdict = wait_resolved(ledger, budget(len(created) * 0.3 / 2), expected=len(created))
    # Every job the database holds is judged, including any whose 201 was lost in the outage.
    assert set(created) <= set(verdict.fates), answers
    verdict.assert_clean()
    # Only a run the outage caught between its claim and its answer may be of unknown outcome.
    assert_unknown_outcomes(verdict, open_at_stop)


def test_api_killed_while_jobs_run(faulty: tuple[Stack, PgLedger]) -> None:
    stack, ledger = faulty
    stack.pool_worker("scan", 2)
    # Short runs: during the outage the workers are mostly claiming their next job.
    ids = [stack.dispatch("demo.sleep", {"seconds": 0.3}) for _ in range(40)]
    wait_until(lambda: statuses(ledger)["CONCLUIDO"] >= 5, RUN_TIMEOUT, "no job ran", 0.1)
    serve = stack.serve_proc
    assert serve is not None
    tree = process_tree(serve.pid)
    serve.send(signal.SIGKILL)
    assert serve.wait(10) is not None
    assert_gone(tree, ORPHAN_LIMIT, "the killed API")
    time.sleep(API_OUTAGE)
    stack.serve()

    verdict = wait_resolved(ledger, budget(40 * 0.3 / 2), expected=len(ids))
    verdict.assert_clean(jobs=len(ids))
    # The workers kept their tasks and their completions while the API was away (R3): nothing
    # failed, and no job had to be sent again because a worker dropped its message. (A claim the
    # kill left unanswered is a run that never started: R2 wants it run, not failed.)
    failed = [f.describe() for f in verdict.fates.values() if f.status != "CONCLUIDO"]
    assert not failed, failed
    dropped = [f.describe() for f in verdict.fates.values() if f.resends]
    assert not dropped, dropped


def test_worker_main_process_killed_while_running(faulty: tuple[Stack, PgLedger]) -> None:
    stack, ledger = faulty
    key = stack.register_machine(queue="scan")
    name = f"killed-scan-{stack.port}@test"
    worker = stack.pool_worker("scan", 2, key=key, name=name)
    ids = [stack.dispatch("demo.sleep", {"seconds": 3}) for _ in range(8)]
    running = wait_running(ledger, 2)
    tree = process_tree(worker.pid)
    assert len(tree) >= 3, f"no pool children: {tree}"
    worker.send(signal.SIGKILL)
    # Pool children die with their parent: none keeps running a job nobody will report.
    assert_gone(tree, ORPHAN_LIMIT, "the killed worker")
    # As a supervisor would: the same worker started again.
    stack.pool_worker("scan", 2, key=key, name=name)

    verdict = wait_resolved(ledger, budget(8 * 3.0 / 2), expected=len(ids))
    verdict.assert_clean(jobs=len(ids))
    assert_unknown_outcomes(verdict, running)


def test_dedicated_machine_killed_while_running(faulty: tuple[Stack, PgLedger]) -> None:
    stack, ledger = faulty
    key = stack.register_machine(automation="demo.sleep")
    machine = stack.machine("demo.sleep", key=key)
    ids = [stack.dispatch("demo.sleep", {"seconds": 2}) for _ in range(4)]
    running = wait_running(ledger, 1)
    tree = process_tree(machine.pid)
    machine.send(signal.SIGKILL)
    assert_gone(tree, ORPHAN_LIMIT, "the killed machine")
    stack.machine("demo.sleep", key=key)

    verdict = wait_resolved(ledger, budget(4 * 2.0), expected=len(ids))
    verdict.assert_clean(jobs=len(ids))
    assert_unknown_outcomes(verdict, running)
