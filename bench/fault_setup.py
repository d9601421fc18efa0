"""What the fault rows of ``bench.faults`` and its soak share.

The benchmark's own PostgreSQL cluster and ``redis-server`` (:class:`Bench`), a fresh set-up of
``serve`` for each row, a dispatcher that counts the answers it got during an outage, killing a
process the way the kernel's OOM killer would, and a row judged from the status ledger once
every job is resolved.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.common import fmt
from tests.integration.fault_support import (
    Ledger,
    PgLedger,
    Verdict,
    configure_serve,
    process_tree,
    wait_gone,
    wait_resolved,
)
from tests.integration.harness import Proc, Processes, Stack
from tests.integration.private_services import PrivatePostgres, PrivateRedis

POOL_CONCURRENCY = 2
PG_OUTAGE_SECONDS = 10.0
API_OUTAGE_SECONDS = 15.0


@dataclass
class Row:
    fault: str
    verdict: Verdict
    jobs: int
    orphans: int
    resolved: bool
    open_at_fault: int = 0
    note: str = ""

    def cells(self) -> list[Any]:
        v = self.verdict
        lost = len(v.lost) + len(v.cancelled) + len(v.failed_unstarted)
        seconds = fmt(v.seconds) if self.resolved else f"> {v.seconds:.0f}"
        failed = sum(1 for f in v.fates.values() if f.status == "FALHA" and f.starts > 0)
        return [self.fault, self.jobs, self.open_at_fault, v.count("CONCLUIDO"), failed, lost,
                len(v.stuck), len(v.duplicated), self.orphans, seconds]  # fmt: skip


HEADERS = ["fault", "jobs", "open at fault", "concluded", "failed (fault named)", "lost", "stuck",
           "duplicated", "orphan processes", "seconds after fault"]  # fmt: skip


class Dispatcher:
    """Creates jobs through the REST API; failures during an outage are counted, not raised."""

    def __init__(self, api_url: str, key: str) -> None:
        self.http = httpx.Client(base_url=api_url, timeout=10.0, headers={"X-API-Key": key})
        self.answers: dict[str, int] = {}

    def send(self, automation: str, context: dict[str, Any]) -> int | None:
        body = {"automation_type": automation, "cliente_id": None, "context": context, "priority": 0}
        try:
            response = self.http.post("/api/v1/jobs", json=body)
        except httpx.HTTPError as exc:
            answer = type(exc).__name__
        else:
            answer = str(response.status_code)
            if response.status_code == 201:
                self.answers[answer] = self.answers.get(answer, 0) + 1
                return int(response.json()["data"]["id"])
        self.answers[answer] = self.answers.get(answer, 0) + 1
        return None

    def close(self) -> None:
        self.http.close()


def kill_tree(proc: Proc) -> list[int]:
    """SIGKILL ``proc`` alone (as the kernel's OOM killer or ``kill -9`` would); its tree before."""
    tree = process_tree(proc.pid)
    proc.send(signal.SIGKILL)
    proc.wait(10)
    return tree


def orphans_of(tree: list[int]) -> int:
    """How many of ``tree`` outlived the kill by 10 s (killed now, so none keeps running)."""
    left = wait_gone(tree, 10.0)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(left)


class Bench:
    """The private services and the per-row set-ups."""

    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        self.root = root
        self.pg = PrivatePostgres().start()
        self.redis = PrivateRedis(root / "redis").start()
        self.rows = 0

    def close(self) -> None:
        self.redis.stop()
        self.pg.destroy()

    @contextlib.contextmanager
    def stack(self) -> Iterator[tuple[Stack, PgLedger, Dispatcher]]:
        self.rows += 1
        self.pg.start()
        self.redis.start()
        self.redis.flushall()
        workdir = self.root / f"row{self.rows}"
        (workdir / "work").mkdir(parents=True)
        procs = Processes(workdir / "logs")
        procs.directory.mkdir()
        database_url = self.pg.create_database(f"wa_bench_faults_{uuid.uuid4().hex[:8]}")
        stack = Stack(procs, database_url=database_url, redis_url=self.redis.url(),
                      redis_prefix=f"wa-faults-{self.rows}", workdir=workdir / "work")  # fmt: skip
        configure_serve(stack, WA_RECOVERY_SECONDS=str(self.args.recovery_seconds))
        dispatcher: Dispatcher | None = None
        try:
            stack.serve()
            ledger = PgLedger(database_url)
            ledger.install()
            dispatcher = Dispatcher(stack.api_url, stack.operator_headers["X-API-Key"])
            yield stack, ledger, dispatcher
        finally:
            if dispatcher is not None:
                dispatcher.close()
            procs.close()
            stack.close()

    def judge(
        self,
        fault: str,
        ledger: Ledger,
        jobs: int | None,
        orphans: int = 0,
        fault_end: float | None = None,
        open_at_fault: int = 0,
    ) -> Row:
        """Wait for every job to be resolved; seconds count from ``fault_end`` (default: now)."""
        start = time.monotonic() if fault_end is None else fault_end
        timeout = self.args.recovery_seconds + self.args.drain_seconds
        verdict = wait_resolved(ledger, timeout, expected=jobs)
        verdict.seconds = time.monotonic() - start
        resolved = bool(verdict.fates) and all(f.resolved for f in verdict.fates.values())
        return Row(fault, verdict, len(verdict.fates), orphans, resolved, open_at_fault)
