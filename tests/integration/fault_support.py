"""What fault tests and the fault benchmark observe: every status change of every job, and the
verdict on each job once a fault is over (resolved, lost, stuck, run twice).

A trigger added to the test's own database writes each change of ``workers.status`` to a table
of its own (``wa_fault_ledger``), with the run's task id and retry count. It sees what the service
wrote, whichever process wrote it, including runs whose answer never reached anybody (a claim
committed just before the API was killed): logs can lose such lines, the database cannot. A job
ran twice when it was started (moved to EXECUTANDO) more often than it was sent back to the queue
(EXECUTANDO -> AGENDADO, the re-queue of an automation that is safe to run again) plus one, or
was concluded more than once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import asyncpg

from tests.integration.harness import Stack, descendants, is_running, plain_dsn

RESOLVED = frozenset({"CONCLUIDO", "FALHA", "CANCELADO"})
# Words a failure caused by a fault carries in its message (a reason naming the fault, R2).
FAULT_MARKERS = ("worker_lost", "WorkerLost", "machine_lost", "terminou inesperadamente", "shutdown", "serve")
POLL = 0.25

_PG_LEDGER = """
CREATE TABLE IF NOT EXISTS wa_fault_ledger (
    n bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    old_status text,
    status text NOT NULL,
    old_task_id text,
    task_id text,
    retry_count integer,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE OR REPLACE FUNCTION wa_fault_ledger_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO wa_fault_ledger (job_id, old_status, status, old_task_id, task_id, retry_count)
        VALUES (NEW.id, NULL, NEW.status::text, NULL, NEW.task_id, NEW.retry_count);
    ELSIF NEW.status IS DISTINCT FROM OLD.status OR NEW.task_id IS DISTINCT FROM OLD.task_id THEN
        INSERT INTO wa_fault_ledger (job_id, old_status, status, old_task_id, task_id, retry_count)
        VALUES (NEW.id, OLD.status::text, NEW.status::text, OLD.task_id, NEW.task_id, NEW.retry_count);
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS wa_fault_ledger_note ON workers;
CREATE TRIGGER wa_fault_ledger_note AFTER INSERT OR UPDATE ON workers
    FOR EACH ROW EXECUTE FUNCTION wa_fault_ledger_note();
"""

_SQLITE_LEDGER = """
CREATE TABLE IF NOT EXISTS wa_fault_ledger (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL,
    old_status TEXT,
    status TEXT NOT NULL,
    old_task_id TEXT,
    task_id TEXT,
    retry_count INTEGER,
    at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE TRIGGER IF NOT EXISTS wa_fault_ledger_insert AFTER INSERT ON workers BEGIN
    INSERT INTO wa_fault_ledger (job_id, old_status, status, task_id, retry_count)
    VALUES (NEW.id, NULL, NEW.status, NEW.task_id, NEW.retry_count);
END;
CREATE TRIGGER IF NOT EXISTS wa_fault_ledger_update AFTER UPDATE OF status, task_id ON workers
    WHEN NEW.status IS NOT OLD.status OR NEW.task_id IS NOT OLD.task_id BEGIN
    INSERT INTO wa_fault_ledger (job_id, old_status, status, old_task_id, task_id, retry_count)
    VALUES (NEW.id, OLD.status, NEW.status, OLD.task_id, NEW.task_id, NEW.retry_count);
END;
"""

_JOBS = "SELECT id, status, mensagem_erro, retry_count, automation_type FROM workers"
_CHANGES = "SELECT job_id, old_status, status, old_task_id FROM wa_fault_ledger ORDER BY n"


@dataclass
class JobFate:
    """One job as the fault left it: its row now and every status change it went through."""

    id: int
    automation: str
    status: str
    error: str | None
    retry_count: int
    # (old status, new status, old task id) of every change of status or task id.
    changes: list[tuple[str | None, str, str | None]] = field(default_factory=list)

    @property
    def starts(self) -> int:
        return sum(1 for _old, new, _task in self.changes if new == "EXECUTANDO")

    @property
    def requeues(self) -> int:
        return sum(1 for old, new, _task in self.changes if old == "EXECUTANDO" and new == "AGENDADO")

    @property
    def resends(self) -> int:
        """Times a queued job was sent again under a new task id (its message was lost)."""
        return sum(1 for old, new, task in self.changes if old == new == "AGENDADO" and task is not None)

    @property
    def resolved(self) -> bool:
        return self.status in RESOLVED

    @property
    def duplicated(self) -> bool:
        concluded = sum(1 for _old, new, _task in self.changes if new == "CONCLUIDO")
        return self.starts > self.requeues + 1 or concluded > 1

    @property
    def fault_named(self) -> bool:
        """A FALHA whose message names the fault (the demo automations used here never fail)."""
        return self.status != "FALHA" or any(m in (self.error or "") for m in FAULT_MARKERS)

    def describe(self) -> str:
        path = " -> ".join(new for _old, new, _task in self.changes)
        head = f"job {self.id} {self.automation} {self.status} {self.error!r}"
        return f"{head} retries={self.retry_count} [{path}]"


class Ledger(Protocol):
    def install(self) -> None: ...

    def fates(self) -> dict[int, JobFate]: ...


def _fates(jobs: Iterable[Any], changes: Iterable[Any]) -> dict[int, JobFate]:
    found = {int(r[0]): JobFate(int(r[0]), str(r[4]), str(r[1]), r[2], int(r[3] or 0)) for r in jobs}
    for job_id, old, new, old_task in changes:
        fate = found.get(int(job_id))
        if fate is not None:
            fate.changes.append((old, new, old_task))
    return found


class PgLedger:
    """The ledger in a PostgreSQL database; each read opens its own connection, so reads work
    again as soon as a stopped server is back."""

    def __init__(self, database_url: str) -> None:
        self.dsn = plain_dsn(database_url)

    async def _run(self, sql: str | None) -> dict[int, JobFate]:
        conn = await asyncpg.connect(self.dsn, timeout=5)
        try:
            if sql is not None:
                await conn.execute(sql)
                return {}
            return _fates(await conn.fetch(_JOBS), await conn.fetch(_CHANGES))
        finally:
            await conn.close()

    def install(self) -> None:
        asyncio.run(self._run(_PG_LEDGER))

    def fates(self) -> dict[int, JobFate]:
        return asyncio.run(self._run(None))


class SqliteLedger:
    """The ledger in the SQLite file of an embedded ``serve``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def install(self) -> None:
        with contextlib.closing(self._connect()) as conn:
            conn.executescript(_SQLITE_LEDGER)
            conn.commit()

    def fates(self) -> dict[int, JobFate]:
        with contextlib.closing(self._connect()) as conn:
            return _fates(conn.execute(_JOBS).fetchall(), conn.execute(_CHANGES).fetchall())


@dataclass
class Verdict:
    """Counts over every job of the database once the fault is over."""

    fates: dict[int, JobFate]
    seconds: float

    @property
    def lost(self) -> list[JobFate]:
        """Never ran and never will by itself: still AGENDADO at the end."""
        return [f for f in self.fates.values() if f.status == "AGENDADO"]

    @property
    def stuck(self) -> list[JobFate]:
        return [f for f in self.fates.values() if f.status == "EXECUTANDO"]

    @property
    def duplicated(self) -> list[JobFate]:
        return [f for f in self.fates.values() if f.duplicated]

    @property
    def unnamed_failures(self) -> list[JobFate]:
        return [f for f in self.fates.values() if not f.fault_named]

    @property
    def failed_unstarted(self) -> list[JobFate]:
        """Ended FALHA without ever running: a run that never started must be sent again (R2)."""
        return [f for f in self.fates.values() if f.status == "FALHA" and f.starts == 0]

    @property
    def cancelled(self) -> list[JobFate]:
        """Nobody cancels in these runs: a cancelled job was given up on by the service."""
        return [f for f in self.fates.values() if f.status == "CANCELADO"]

    def count(self, status: str) -> int:
        return sum(1 for f in self.fates.values() if f.status == status)

    def problems(self) -> str:
        lines = []
        for label, fates in (
            ("lost", self.lost),
            ("stuck", self.stuck),
            ("run twice", self.duplicated),
            ("failed without naming the fault", self.unnamed_failures),
            ("failed without ever running", self.failed_unstarted),
            ("cancelled", self.cancelled),
        ):
            lines += [f"{label}: {fate.describe()}" for fate in fates[:10]]
        return "\n".join(lines)

    def assert_clean(self, jobs: int | None = None) -> None:
        """Every job resolved, CONCLUIDO or FALHA naming the fault, none run twice."""
        if jobs is not None:
            assert len(self.fates) == jobs, f"{len(self.fates)} jobs in the database, {jobs} created"
        assert not self.problems(), f"after {self.seconds:.1f}s:\n{self.problems()}"


def wait_resolved(ledger: Ledger, timeout: float, *, expected: int | None = None) -> Verdict:
    """Poll until every job of the database is resolved (and ``expected`` jobs exist); the verdict
    then, or the verdict at the deadline. ``seconds`` counts from the call."""
    started = time.monotonic()
    deadline = started + timeout
    fates: dict[int, JobFate] = {}
    while True:
        with contextlib.suppress(OSError, asyncpg.PostgresError, sqlite3.Error, asyncio.TimeoutError):
            fates = ledger.fates()
            enough = expected is None or len(fates) >= expected
            if enough and all(f.resolved for f in fates.values()):
                break
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL)
    return Verdict(fates, time.monotonic() - started)


def wait_gone(pids: Iterable[int], timeout: float) -> list[int]:
    """The processes among ``pids`` still running after ``timeout`` seconds (empty: all gone)."""
    left = list(pids)
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [pid for pid in left if is_running(pid)]
    return left


def assert_gone(pids: Iterable[int], timeout: float, what: str) -> None:
    """Every process of ``pids`` ends within ``timeout``; any left is killed (an orphan is no child
    of the test, and its group's kill at teardown would miss it), then the test fails."""
    left = wait_gone(pids, timeout)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of {what} still running {timeout}s after it was killed: {left}"


def configure_serve(stack: Stack, **values: str) -> None:
    """Settings for the ``serve`` of ``stack`` (``WA_RECOVERY_SECONDS``, say), before it starts;
    workers and machines never see them."""
    stack.serve_env.update(values)


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live process below it."""
    return [pid, *descendants(pid)]
