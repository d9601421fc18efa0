"""Claim contention: 64 machines racing for 10,000 queued jobs of one automation.

Each claimer is a registered machine with its own ``X-Worker-Api-Key``; all of them pick jobs at
random from the same small window of open jobs, so several often try the same job at once, and
the automation's ``max_concurrent_jobs`` (8) refuses most attempts. A claimer completes what it
claims at once. A separate connection samples the number of EXECUTANDO rows of the automation
without pause. The run prints throughput and then the checks: every job claimed by exactly one
machine, the limit never exceeded, every job CONCLUIDO.

    python -m bench.claims --jobs 10000 --claimers 64 --limit 8
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg
import httpx

from bench.common import (
    Procs,
    fmt,
    median,
    percentile,
    pg_url,
    print_facts,
    recreate_database,
    start_api,
    table,
    wait_for_quiet,
)
from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.models.database import Database
from worker_automation.resolvers.audit import CLI_ACTOR, Actor
from worker_automation.resolvers.automations import update_settings
from worker_automation.resolvers.machines import register_machine
from worker_automation.settings import Settings

AUTOMATION = "situacao_cadastral_cnpj"
WINDOW = 64  # open jobs the claimers choose from at random
REFUSAL_BACKOFF = (0.002, 0.010)  # seconds a claimer waits after a refusal
SAMPLE_PAUSE = 0.001


@dataclass
class Shared:
    """What the claimers share: the open jobs and every outcome."""

    pending: list[int]
    window: list[int] = field(default_factory=list)
    wins: list[tuple[int, int]] = field(default_factory=list)  # (job id, machine id) of 200 claims
    completes: int = 0
    complete_errors: int = 0
    refusals: Counter[str] = field(default_factory=Counter)
    claim_ms: list[float] = field(default_factory=list)
    attempts: int = 0
    remaining: int = 0

    def refill(self) -> None:
        while len(self.window) < WINDOW and self.pending:
            self.window.append(self.pending.pop())

    def pick(self) -> int | None:
        self.refill()
        return random.choice(self.window) if self.window else None

    def taken(self, job_id: int) -> None:
        if job_id in self.window:
            self.window.remove(job_id)


async def claimer(base_url: str, key: str, machine_id: int, shared: Shared, stop: asyncio.Event) -> None:
    headers = {"X-Worker-Api-Key": key}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as client:
        while shared.remaining > 0 and not stop.is_set():
            job_id = shared.pick()
            if job_id is None:
                await asyncio.sleep(0.01)
                continue
            shared.attempts += 1
            t0 = time.perf_counter()
            response = await client.post(f"/api/v1/jobs/{job_id}/start", json={})
            elapsed = (time.perf_counter() - t0) * 1000
            if response.status_code == 200:
                shared.claim_ms.append(elapsed)
                shared.wins.append((job_id, machine_id))
                shared.taken(job_id)
                done = await client.post(f"/api/v1/jobs/{job_id}/complete", json={"result": {"ok": True}})
                if done.status_code == 200:
                    shared.completes += 1
                    shared.remaining -= 1
                else:
                    shared.complete_errors += 1
                continue
            reason = "http_" + str(response.status_code)
            if response.status_code == 409:
                reason = (response.json().get("data") or {}).get("reason", "conflict")
            shared.refusals[reason] += 1
            if reason in ("already_claimed", "not_claimable"):
                shared.taken(job_id)
            await asyncio.sleep(random.uniform(*REFUSAL_BACKOFF))


async def sample_running(database: str, stop: asyncio.Event) -> tuple[int, int]:
    """Count EXECUTANDO rows of the automation as often as possible; (max seen, samples)."""
    conn = await asyncpg.connect(pg_url(database))
    highest = samples = 0
    try:
        statement = await conn.prepare(
            "SELECT count(*) FROM workers WHERE automation_type = $1 AND status = 'EXECUTANDO'"
        )
        while not stop.is_set():
            value = int(await statement.fetchval(AUTOMATION))
            highest = max(highest, value)
            samples += 1
            # A short pause keeps the sampler from taking a whole core from the system it watches;
            # a claim holds its row EXECUTANDO for longer than this, so an excess would be seen.
            await asyncio.sleep(SAMPLE_PAUSE)
    finally:
        await conn.close()
    return highest, samples


async def insert_jobs(database: str, jobs: int) -> list[int]:
    """``jobs`` AGENDADO rows of the automation (the count triggers fire as for any insert)."""
    automation = AUTOMATION_REGISTRY[AUTOMATION]
    now = datetime.now(UTC)
    records = [
        (str(uuid.uuid4()), "AGENDADO", AUTOMATION, automation.queue, 0, 0, 0, '{"cnpj": "11222333000181"}',
         now, now)
        for _ in range(jobs)
    ]  # fmt: skip
    conn = await asyncpg.connect(pg_url(database))
    try:
        first = int(await conn.fetchval("SELECT coalesce(max(id), 0) FROM workers"))
        await conn.copy_records_to_table(
            "workers",
            records=records,
            columns=["task_id", "status", "automation_type", "queue", "priority", "retry_count", "progress",
                     "context", "created_at", "updated_at"],
        )  # fmt: skip
        rows = await conn.fetch("SELECT id FROM workers WHERE id > $1 ORDER BY id", first)
        return [r["id"] for r in rows]
    finally:
        await conn.close()


async def verify(database: str, ids: list[int], wins: list[tuple[int, int]]) -> dict[str, str]:
    conn = await asyncpg.connect(pg_url(database))
    try:
        rows = await conn.fetch("SELECT id, status, machine_id FROM workers WHERE id = ANY($1::int[])", ids)
    finally:
        await conn.close()
    per_job = Counter(job for job, _ in wins)
    doubles = sum(1 for n in per_job.values() if n > 1)
    winner = dict(wins)
    concluded = sum(1 for r in rows if r["status"] == "CONCLUIDO")
    holder_mismatch = sum(1 for r in rows if r["id"] in winner and r["machine_id"] != winner[r["id"]])
    unclaimed = len(set(ids) - set(per_job))
    return {
        "double_claims": str(doubles),
        "claimed_once": f"{sum(1 for n in per_job.values() if n == 1)}/{len(ids)}",
        "unclaimed": str(unclaimed),
        "holder_mismatch": str(holder_mismatch),
        "concluded": f"{concluded}/{len(ids)}",
    }


@dataclass
class RoundResult:
    seconds: float
    shared: Shared
    max_running: int
    samples: int
    checks: dict[str, str]

    @property
    def claims_per_s(self) -> float:
        return len(self.shared.wins) / self.seconds


async def one_round(
    database: str, base_url: str, machines: list[tuple[int, str]], args: argparse.Namespace
) -> RoundResult:
    ids = await insert_jobs(database, args.jobs)
    shared = Shared(pending=list(reversed(ids)), remaining=len(ids))
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_running(database, stop))
    t0 = time.perf_counter()
    claimers = [asyncio.create_task(claimer(base_url, key, mid, shared, stop)) for mid, key in machines]
    try:
        await asyncio.wait_for(asyncio.gather(*claimers), timeout=args.timeout)
    except TimeoutError:
        print(f"timed out after {args.timeout:.0f}s with {shared.remaining} jobs left", flush=True)
    seconds = time.perf_counter() - t0
    stop.set()
    for task in claimers:
        task.cancel()
    await asyncio.gather(*claimers, return_exceptions=True)
    max_running, samples = await sampler
    checks = await verify(database, ids, shared.wins)
    return RoundResult(seconds, shared, max_running, samples, checks)


async def prepare(database: str, claimers: int, limit: int) -> list[tuple[int, str]]:
    settings = Settings(database_url=pg_url(database))
    db = Database(settings)
    try:
        await update_settings(db, AUTOMATION, actor=Actor("bench"), max_concurrent_jobs=limit)
        machines = []
        for i in range(claimers):
            created = await register_machine(
                db, CLI_ACTOR, settings.queues, name=f"bench-claimer-{i:02d}", automation=AUTOMATION
            )
            machines.append((created.machine.id, created.api_key))
        return machines
    finally:
        await db.close()


def run(args: argparse.Namespace) -> None:
    if args.wait_quiet:
        wait_for_quiet()
    print_facts()
    procs = Procs("claims")
    results: list[RoundResult] = []
    try:
        asyncio.run(recreate_database(args.database))
        api = start_api(procs, args.database)
        machines = asyncio.run(prepare(args.database, args.claimers, args.limit))
        for n in range(args.runs):
            result = asyncio.run(one_round(args.database, api.url, machines, args))
            results.append(result)
            print(f"  round {n + 1}: {len(result.shared.wins)} claims in {result.seconds:.1f} s", flush=True)
    finally:
        procs.close()
    print()
    print(
        f"{args.jobs:,} AGENDADO jobs of {AUTOMATION} per round, {args.claimers} machines claiming at once "
        f"(random picks among the {WINDOW} oldest open jobs), max_concurrent_jobs={args.limit}; "
        "one uvicorn process"
    )
    rows = []
    for n, r in enumerate(results, 1):
        s = r.shared
        rows.append(
            [
                str(n),
                fmt(len(s.wins)),
                fmt(r.seconds, 1),
                fmt(r.claims_per_s, 0),
                fmt(s.attempts / r.seconds, 0),
                fmt(percentile(s.claim_ms, 50), 1),
                fmt(percentile(s.claim_ms, 99), 1),
                fmt(s.refusals.get("already_claimed", 0)),
                fmt(s.refusals.get("concurrency_limit", 0)),
                fmt(
                    sum(v for k, v in s.refusals.items() if k not in ("already_claimed", "concurrency_limit"))
                ),
            ]
        )
    rows.append(
        [
            "median",
            "",
            fmt(median([r.seconds for r in results]), 1),
            fmt(median([r.claims_per_s for r in results]), 0),
            fmt(median([r.shared.attempts / r.seconds for r in results]), 0),
            fmt(median([percentile(r.shared.claim_ms, 50) for r in results]), 1),
            fmt(median([percentile(r.shared.claim_ms, 99) for r in results]), 1),
            "",
            "",
            "",
        ]
    )
    print(
        table(
            ["round", "claims", "seconds", "claims/s", "attempts/s", "claim p50 ms", "claim p99 ms",
             "already_claimed", "concurrency_limit", "other refusals"],
            rows,
        )
    )  # fmt: skip
    for n, r in enumerate(results, 1):
        reasons = ", ".join(f"{k} {v:,}" for k, v in r.shared.refusals.most_common())
        print(f"round {n} refusals: {reasons}")
    print()
    print("checks:")
    check_rows = []
    for n, r in enumerate(results, 1):
        c = r.checks
        ok = (
            c["double_claims"] == "0"
            and r.max_running <= args.limit
            and c["concluded"] == f"{args.jobs}/{args.jobs}"
            and c["unclaimed"] == "0"
            and c["holder_mismatch"] == "0"
        )
        check_rows.append(
            [
                str(n),
                c["double_claims"],
                c["claimed_once"],
                c["holder_mismatch"],
                f"{r.max_running} (limit {args.limit}, {r.samples:,} samples)",
                c["concluded"],
                str(r.shared.complete_errors),
                "PASS" if ok else "FAIL",
            ]
        )
    print(
        table(
            ["round", "double claims", "claimed exactly once", "row holder != winner",
             "max EXECUTANDO seen", "CONCLUIDO", "complete errors", "verdict"],
            check_rows,
        )
    )  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--claimers", type=int, default=64)
    parser.add_argument("--limit", type=int, default=8, help="max_concurrent_jobs of the automation")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per round at most")
    parser.add_argument("--database", default="wa_bench_claims", help="created anew")
    parser.add_argument("--wait-quiet", action="store_true", help="wait for load average < 1.5 first")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
