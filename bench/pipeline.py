"""Job pipeline throughput: dispatch -> claim -> complete of no-op jobs vs raw Celery no-op tasks.

In one run, alternating: (a) ``--jobs`` ``demo.echo`` jobs created through ``POST /api/v1/jobs``
(``--in-flight`` requests at a time) and run to CONCLUIDO by a pool worker
(``worker-automation worker -Q scan -c 2``, a registered machine claiming and reporting through
the API); (b) the same number of no-op tasks of a bare Celery app built with the service's Celery
configuration (``bench/raw_celery_app.py``), same Redis, same prefork concurrency. Workers are
started before and stopped after each measured round, so only one set consumes at a time.

    python -m bench.pipeline --jobs 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import asyncpg
import redis

from bench.common import (
    REDIS_DB,
    ROOT,
    Api,
    Procs,
    bench_env,
    cpu_seconds,
    fmt,
    median,
    percentile,
    pg_url,
    print_facts,
    recreate_database,
    redis_url,
    start_api,
    start_pool_worker,
    table,
    wait_for_quiet,
)
from bench.scale import start_profiler, stop_profiler
from worker_automation.worker.http import HttpClient

QUEUE = "scan"
AUTOMATION = "demo.echo"
TIMEOUT_SECONDS = 900.0


@dataclass
class Round:
    """One measured round of one variant."""

    variant: str
    jobs: int
    done: int = 0
    dispatch_s: float = 0.0
    total_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    api_cpu_s: float = 0.0
    worker_cpu_s: float = 0.0
    errors: int = 0

    @property
    def rate(self) -> float:
        return self.done / self.total_s if self.total_s else 0.0


def purge(queue: str) -> None:
    """Empty ``queue``'s priority lists in the benchmarks' Redis database (nothing else)."""
    client = redis.Redis.from_url(redis_url())
    try:
        client.delete(queue, *(f"{queue}:{n}" for n in range(1, 10)))
    finally:
        client.close()


# ---------------------------------------------------------------- our pipeline


async def dispatch_all(
    api_url: str, key: str, jobs: int, in_flight: int, batch: int = 1
) -> tuple[float, float, int]:
    """Create ``jobs`` jobs with ``in_flight`` concurrent requests, one job per
    ``POST /api/v1/jobs`` or, with ``batch`` > 1, up to ``batch`` per ``POST /api/v1/jobs/batch``;
    (wall start, seconds, jobs not created).

    Sent with the workers' lean HTTP client, one keep-alive connection per sender: the load
    generator shares the two cores and must not cost more than the API it feeds.
    """
    errors = 0
    remaining = jobs

    async def sender() -> None:
        nonlocal remaining, errors
        client = HttpClient(api_url, {"X-API-Key": key}, timeout=60)
        try:
            while remaining > 0:
                size = min(batch, remaining)
                remaining -= size
                items = [
                    {"automation_type": AUTOMATION, "context": {"n": remaining + i}, "priority": 0}
                    for i in range(size)
                ]
                if batch == 1:
                    response = await client.request("POST", "/api/v1/jobs", json_body=items[0])
                else:
                    response = await client.request("POST", "/api/v1/jobs/batch", json_body={"jobs": items})
                if response.status_code != 201:
                    errors += size
                    if errors <= 3 * size:
                        print(f"dispatch error {response.status_code}: {response.text[:300]}", flush=True)
        finally:
            await client.close()

    started = time.time()
    t0 = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(in_flight)))
    return started, time.perf_counter() - t0, errors


async def wait_concluded(database: str, first_id: int, jobs: int) -> int:
    conn = await asyncpg.connect(pg_url(database))
    try:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        done = 0
        while time.monotonic() < deadline:
            done = int(
                await conn.fetchval(
                    "SELECT count(*) FROM workers WHERE id > $1 AND status = 'CONCLUIDO'", first_id
                )
            )
            if done >= jobs:
                break
            await asyncio.sleep(0.25)
        return done
    finally:
        await conn.close()


async def job_times(database: str, first_id: int) -> list[tuple[datetime, datetime]]:
    conn = await asyncpg.connect(pg_url(database))
    try:
        rows = await conn.fetch(
            "SELECT created_at, data_fim FROM workers WHERE id > $1 AND status = 'CONCLUIDO'", first_id
        )
        return [(r["created_at"], r["data_fim"]) for r in rows]
    finally:
        await conn.close()


async def last_id(database: str) -> int:
    conn = await asyncpg.connect(pg_url(database))
    try:
        return int(await conn.fetchval("SELECT coalesce(max(id), 0) FROM workers"))
    finally:
        await conn.close()


@dataclass
class Ours:
    """An API plus what a pool worker needs, for one variant (working tree or a baseline copy)."""

    label: str
    batch: int
    api: Api
    database: str
    key: str
    machine_key: str
    source: Path | None


def run_ours(procs: Procs, ours: Ours, args: argparse.Namespace, profile: str | None) -> Round:
    result = Round(ours.label, args.jobs)
    purge(QUEUE)
    api = ours.api
    first = asyncio.run(last_id(ours.database))
    in_flight = args.in_flight if ours.batch == 1 else args.batch_in_flight

    def dispatch() -> tuple[float, float, int]:
        return asyncio.run(dispatch_all(api.url, ours.key, args.jobs, in_flight, ours.batch))

    if args.drain:  # every job queued before the worker starts: its drain alone is timed
        _, result.dispatch_s, result.errors = dispatch()
    worker = start_pool_worker(procs, api, ours.machine_key, queue=QUEUE, concurrency=args.concurrency)
    kind = "raw" if profile and profile.endswith(".txt") else "speedscope"
    profiler = start_profiler(ours.api.proc.pid, profile, kind) if profile else None
    try:
        api_cpu0 = cpu_seconds(ours.api.proc.pid, with_children=True)
        worker_cpu0 = cpu_seconds(worker.pid, with_children=True)
        if args.drain:
            started, errors = time.time(), result.errors
        else:
            started, result.dispatch_s, errors = dispatch()
            result.errors = errors
        result.done = asyncio.run(wait_concluded(ours.database, first, args.jobs - errors))
        result.api_cpu_s = cpu_seconds(ours.api.proc.pid, with_children=True) - api_cpu0
        result.worker_cpu_s = cpu_seconds(worker.pid, with_children=True) - worker_cpu0
        times = asyncio.run(job_times(ours.database, first))
    finally:
        stop_profiler(profiler)
        worker.stop(timeout=30)
    if times:
        end = max(t[1] for t in times).timestamp()
        result.total_s = end - started
        result.latencies_ms = [(done - created).total_seconds() * 1000 for created, done in times]
    return result


# ---------------------------------------------------------------- raw Celery


def run_raw(procs: Procs, args: argparse.Namespace) -> Round:
    from bench.raw_celery_app import QUEUE as RAW_QUEUE
    from bench.raw_celery_app import TASK_NAME, app

    result = Round("raw Celery", args.jobs)
    purge(RAW_QUEUE)
    ids = [str(uuid.uuid4()) for _ in range(args.jobs)]
    sent_at: dict[str, float] = {}

    def send(chunk: list[str]) -> None:
        for task_id in chunk:
            sent_at[task_id] = time.time()
            app.send_task(TASK_NAME, args=[0], queue=RAW_QUEUE, task_id=task_id)

    def send_all() -> float:
        """Send every task from 4 threads; the wall time of the sends."""
        t0 = time.perf_counter()
        threads = 4
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(send, [ids[i::threads] for i in range(threads)]))
        return time.perf_counter() - t0

    if args.drain:
        result.dispatch_s = send_all()
    env = bench_env(BENCH_RAW_BROKER_URL=redis_url())
    worker = procs.start(
        "raw-celery",
        [
            sys.executable, "-m", "celery", "-A", "bench.raw_celery_app", "worker", "-Q", RAW_QUEUE,
            "-c", str(args.concurrency), "-P", "prefork", "-E", "--without-mingle", "--without-gossip",
            "-n", f"raw-{uuid.uuid4().hex[:6]}@bench", "-l", "WARNING",
        ],
        env,
        cwd=ROOT,
    )  # fmt: skip
    try:
        # The worker logs nothing at WARNING when ready: a ping through the broker says it is.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not app.control.ping(timeout=0.5):
            if not worker.alive():
                raise SystemExit(f"raw Celery worker exited:\n{worker.output()[-3000:]}")
        worker_cpu0 = cpu_seconds(worker.pid, with_children=True)
        started = time.time()
        if not args.drain:
            result.dispatch_s = send_all()
        done_at = wait_results(ids, app.backend.client)
        result.worker_cpu_s = cpu_seconds(worker.pid, with_children=True) - worker_cpu0
    finally:
        worker.stop(timeout=30)
    result.done = len(done_at)
    if done_at:
        result.total_s = max(done_at.values()) - started
        result.latencies_ms = [(done_at[i] - sent_at[i]) * 1000 for i in done_at]
    return result


def wait_results(ids: list[str], client: redis.Redis) -> dict[str, float]:
    """Poll the result backend until every task has a stored result; task id -> date_done."""
    pending = list(ids)
    done: dict[str, float] = {}
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while pending and time.monotonic() < deadline:
        still: list[str] = []
        for i in range(0, len(pending), 1000):
            chunk = pending[i : i + 1000]
            values = client.mget([f"celery-task-meta-{task_id}" for task_id in chunk])
            for task_id, raw in zip(chunk, values, strict=True):
                if raw is None:
                    still.append(task_id)
                    continue
                meta = json.loads(raw)
                if meta.get("status") != "SUCCESS":
                    still.append(task_id)
                    continue
                done[task_id] = datetime.fromisoformat(meta["date_done"]).timestamp()
        pending = still
        if pending:
            time.sleep(0.25)
    return done


# ---------------------------------------------------------------- report


def row(r: Round, reference: float | None) -> list[str]:
    ratio = f"{r.rate / reference * 100:.0f}%" if reference else "100%"
    return [
        r.variant,
        fmt(r.done),
        fmt(r.dispatch_s, 2),
        fmt(r.total_s, 2),
        fmt(r.rate, 0),
        fmt(percentile(r.latencies_ms, 50), 0),
        fmt(percentile(r.latencies_ms, 99), 0),
        fmt(r.api_cpu_s * 1000 / r.done, 2) if r.done and r.api_cpu_s else "-",
        fmt(r.worker_cpu_s * 1000 / r.done, 2) if r.done else "-",
        str(r.errors),
        ratio,
    ]


HEADERS = [
    "variant",
    "done",
    "send s",
    "total s",
    "per s",
    "latency p50 ms",
    "latency p99 ms",
    "API CPU ms/job",
    "worker CPU ms/job",
    "errors",
    "vs raw",
]


def setup_ours(procs: Procs, label: str, database: str, source: Path | None, workers: int = 1) -> Ours:
    asyncio.run(recreate_database(database))
    api = start_api(procs, database, source=source, name=f"serve-{label}", workers=workers)
    key = api.operator_key(f"bench-{label}")
    machine_key = api.machine_key(f"bench-pool-{label}", queue=QUEUE)
    return Ours(label, 1, api, database, key, machine_key, source)


def batched(ours: Ours, batch: int) -> Ours:
    """The same API and pool machine, jobs created ``batch`` per request."""
    return replace(ours, label=f"{ours.label}, batches of {batch}", batch=batch)


def run(args: argparse.Namespace) -> None:
    if args.wait_quiet:
        wait_for_quiet()
    print_facts()
    procs = Procs("pipeline")
    rounds: list[Round] = []
    try:
        current = setup_ours(procs, "current", args.database, None, args.api_workers)
        variants = [current if size == 1 else batched(current, size) for size in args.batch]
        if args.baseline:
            variants.append(setup_ours(procs, "baseline", f"{args.database}_base", Path(args.baseline)))
        for n in range(args.runs):
            order: list[Ours | None] = [None, *variants]
            if n % 2:
                order.reverse()
            for variant in order:
                if variant is None:
                    rounds.append(run_raw(procs, args))
                else:
                    profile = (
                        args.profile if (args.profile and variant.label == "current" and n == 0) else None
                    )
                    rounds.append(run_ours(procs, variant, args, profile))
                print(
                    f"  run {n + 1}: {rounds[-1].variant}: {rounds[-1].done} in {rounds[-1].total_s:.1f} s",
                    flush=True,
                )
    finally:
        procs.close()
    raw_rate = median([r.rate for r in rounds if r.variant == "raw Celery"])
    print()
    print(
        f"{args.jobs:,} no-op jobs per round, {args.runs} round(s) per variant, "
        f"prefork -c {args.concurrency}, API processes {args.api_workers}, "
        f"{args.in_flight} dispatch requests in flight ({args.batch_in_flight} for batches), "
        f"{'drain of jobs queued first (from the worker start), ' if args.drain else ''}"
        f"Redis db {REDIS_DB}; latency = dispatch -> "
        f"completion (ours: data_fim - created_at; raw: date_done - send)"
    )
    print(table(HEADERS, [row(r, raw_rate) for r in rounds]))
    print()
    summary = []
    for variant in dict.fromkeys(r.variant for r in rounds):
        mine = [r for r in rounds if r.variant == variant]
        rate = median([r.rate for r in mine])
        summary.append(
            [
                variant,
                fmt(rate, 0),
                fmt(median([percentile(r.latencies_ms, 50) for r in mine]), 0),
                fmt(median([percentile(r.latencies_ms, 99) for r in mine]), 0),
                f"{rate / raw_rate * 100:.0f}%" if raw_rate else "-",
            ]
        )
    print("medians over rounds (target: ours >= 50% of raw Celery):")
    print(table(["variant", "per s", "latency p50 ms", "latency p99 ms", "vs raw"], summary))
    if args.profile:
        print(f"API profile (first round of current) written to {args.profile}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="rounds per variant")
    parser.add_argument("--in-flight", type=int, default=16, help="concurrent dispatch requests")
    parser.add_argument(
        "--batch",
        type=lambda text: [int(part) for part in text.split(",")],
        default=[1],
        help="jobs per dispatch request, one variant each (1: POST /api/v1/jobs; more: /jobs/batch)",
    )
    parser.add_argument(
        "--batch-in-flight", type=int, default=2, help="concurrent batch requests (variants with --batch > 1)"
    )
    parser.add_argument("--concurrency", type=int, default=2, help="prefork processes per worker")
    parser.add_argument("--database", default="wa_bench_pipeline", help="created anew")
    parser.add_argument(
        "--api-workers", type=int, default=1, help="API processes of the current tree (serve --workers N)"
    )
    parser.add_argument("--baseline", help="directory with another worker_automation package, run too")
    parser.add_argument(
        "--profile", help="py-spy profile of the API, first round (.txt: collapsed stacks, else speedscope)"
    )
    parser.add_argument(
        "--drain",
        action="store_true",
        help="queue every job first, then start the workers and time their drain alone",
    )
    parser.add_argument("--wait-quiet", action="store_true", help="wait for load average < 1.5 first")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
