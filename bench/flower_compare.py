"""This service next to Flower 2.x, both watching the same Celery workers.

Flower runs from its own virtualenv (it is not a dependency of the project):

    python3 -m venv /tmp/flowerenv && /tmp/flowerenv/bin/pip install flower "celery[redis]"
    python -m bench.flower_compare --jobs 10000

Flow: one ``serve`` and one pool worker (``worker -Q scan -c 2``, task events on), Flower on the
same broker; ``--jobs`` demo.echo jobs go through the pipeline. Then, side by side: listing the 20
newest tasks, finding one task by id, resident memory of each service, how soon a finished task
shows its final state in each (one job at a time, both polled every few milliseconds), and what
each still knows after a restart (Flower without persistence, the API as it is).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import asyncpg
import httpx

from bench.common import (
    Proc,
    Procs,
    bench_env,
    fmt,
    free_port,
    median,
    percentile,
    pg_url,
    print_facts,
    recreate_database,
    redis_url,
    rss_mb,
    start_api,
    start_pool_worker,
    table,
    wait_for_quiet,
    wait_http,
)
from bench.job_feed import QUEUE, dispatch_all, purge, wait_concluded

REST = "/api/v1/worker-automation"
POLL_INTERVAL = 0.005


@dataclass
class Flower:
    proc: Proc
    url: str


def start_flower(procs: Procs, celery: Path, port: int) -> Flower:
    env = bench_env(FLOWER_UNAUTHENTICATED_API="true")
    proc = procs.start(
        "flower",
        [str(celery), "--broker", redis_url(), "flower", f"--port={port}", "--address=127.0.0.1",
         "--persistent=False", "--logging=warning"],
        env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/healthcheck", proc, timeout=60)
    return Flower(proc, url)


async def timed(client: httpx.AsyncClient, paths: list[str], check: str) -> list[float]:
    """Latency in ms of GET ``paths`` one after the other; fails on a non-200 answer."""
    out = []
    for path in paths:
        t0 = time.perf_counter()
        response = await client.get(path)
        out.append((time.perf_counter() - t0) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{check}: {path} -> {response.status_code} {response.text[:300]}")
    return out


async def lookups(
    api: str, key: str, flower: str, task_ids: list[str], requests: int
) -> dict[str, list[float]]:
    ours = httpx.AsyncClient(base_url=api, headers={"X-API-Key": key}, timeout=60)
    theirs = httpx.AsyncClient(base_url=flower, timeout=60)
    sample = [random.choice(task_ids) for _ in range(requests)]
    try:
        # Warm both (connections, caches) before timing.
        await timed(ours, [f"{REST}/?per_page=20"] * 5, "ours list")
        await timed(theirs, ["/api/tasks?limit=20"] * 5, "flower list")
        return {
            "ours list": await timed(ours, [f"{REST}/?per_page=20"] * requests, "ours list"),
            "flower list": await timed(theirs, ["/api/tasks?limit=20"] * requests, "flower list"),
            "flower list sorted": await timed(
                theirs, ["/api/tasks?limit=20&sort_by=-received"] * requests, "flower list sorted"
            ),
            "ours by id": await timed(ours, [f"{REST}/status/{t}" for t in sample], "ours by id"),
            "flower by id": await timed(theirs, [f"/api/task/info/{t}" for t in sample], "flower by id"),
            # The floor of each stack: a request that reads nothing (no key, no database).
            "ours health": await timed(ours, ["/healthz"] * requests, "ours health"),
            "flower health": await timed(theirs, ["/healthcheck"] * requests, "flower health"),
        }
    finally:
        await ours.aclose()
        await theirs.aclose()


async def freshness(api: str, key: str, flower: str, database: str, samples: int) -> list[dict[str, float]]:
    """One job at a time: dispatch it, then poll both services until each shows SUCCESS.

    Lags are from the moment the job's completion was recorded (``data_fim``, written by the API
    when the worker reports) to the first poll that saw SUCCESS, plus Flower's lag from the
    worker's own task-succeeded timestamp.
    """
    ours = httpx.AsyncClient(base_url=api, headers={"X-API-Key": key}, timeout=60)
    theirs = httpx.AsyncClient(base_url=flower, timeout=60)
    conn = await asyncpg.connect(pg_url(database))
    out = []
    try:
        for _ in range(samples):
            created = await ours.post("/api/v1/jobs", json={"automation_type": "demo.echo", "context": {}})
            task_id = created.json()["data"]["task_id"]
            seen: dict[str, float] = {}
            flower_done: float | None = None
            deadline = time.monotonic() + 60
            while len(seen) < 2 and time.monotonic() < deadline:
                if "ours" not in seen:
                    r = await ours.get(f"{REST}/status/{task_id}")
                    if r.status_code == 200 and r.json()["data"]["state"] == "SUCCESS":
                        seen["ours"] = time.time()
                if "flower" not in seen:
                    r = await theirs.get(f"/api/task/info/{task_id}")
                    if r.status_code == 200 and r.json().get("state") == "SUCCESS":
                        seen["flower"] = time.time()
                        flower_done = r.json().get("succeeded")
                await asyncio.sleep(POLL_INTERVAL)
            data_fim: datetime = await conn.fetchval(
                "SELECT data_fim FROM workers WHERE task_id = $1", task_id
            )
            if len(seen) < 2 or data_fim is None:
                continue
            done = data_fim.timestamp()
            out.append(
                {
                    "ours": (seen["ours"] - done) * 1000,
                    "flower": (seen["flower"] - done) * 1000,
                    "flower_from_event": (seen["flower"] - float(flower_done)) * 1000 if flower_done else 0.0,
                }
            )
    finally:
        await conn.close()
        await ours.aclose()
        await theirs.aclose()
    return out


async def known_counts(api: str, key: str, flower: str) -> tuple[int, int]:
    async with httpx.AsyncClient(timeout=120) as client:
        stats = await client.get(f"{api}{REST}/stats", headers={"X-API-Key": key})
        tasks = await client.get(f"{flower}/api/tasks")
    return int(stats.json()["data"]["total"]), len(tasks.json())


async def task_ids_of(database: str) -> list[str]:
    conn = await asyncpg.connect(pg_url(database))
    try:
        return [
            r["task_id"] for r in await conn.fetch("SELECT task_id FROM workers WHERE task_id IS NOT NULL")
        ]
    finally:
        await conn.close()


def run(args: argparse.Namespace) -> None:
    celery = Path(args.flower_env) / "bin" / "celery"
    if not celery.exists():
        raise SystemExit(f"{celery} not found: python3 -m venv {args.flower_env} && "
                         f"{args.flower_env}/bin/pip install flower 'celery[redis]'")  # fmt: skip
    if args.wait_quiet:
        wait_for_quiet()
    print_facts()
    procs = Procs("flower")
    flower_port = free_port()
    try:
        purge(QUEUE)
        asyncio.run(recreate_database(args.database))
        # Flower learns about tasks only from Celery task events, which are off by default.
        api = start_api(procs, args.database, name="serve", extra_env={"WA_TASK_EVENTS": "true"})
        key = api.operator_key()
        machine_key = api.machine_key("bench-flower-pool", queue=QUEUE)
        flower = start_flower(procs, celery, flower_port)
        worker = start_pool_worker(procs, api, machine_key, queue=QUEUE, concurrency=args.concurrency)
        t0 = time.perf_counter()
        _, dispatch_s, errors = asyncio.run(dispatch_all(api.url, key, args.jobs, args.in_flight))
        done = asyncio.run(wait_concluded(args.database, 0, args.jobs - errors))
        run_s = time.perf_counter() - t0
        print(
            f"  {done} jobs CONCLUIDO in {run_s:.1f} s (dispatch {dispatch_s:.1f} s, {errors} errors)",
            flush=True,
        )
        # Flower hears about the last tasks through events: give it a moment to catch up.
        time.sleep(2)
        task_ids = asyncio.run(task_ids_of(args.database))
        times = asyncio.run(lookups(api.url, key, flower.url, task_ids, args.requests))
        fresh = asyncio.run(freshness(api.url, key, flower.url, args.database, args.fresh))
        rss_api = rss_mb(api.proc.pid)
        rss_flower = rss_mb(flower.proc.pid, with_children=True)
        rss_worker = rss_mb(worker.pid, with_children=True)
        before = asyncio.run(known_counts(api.url, key, flower.url))
        # Restart both: Flower without persistence, the API as any deployment restarts it.
        flower.proc.stop()
        api.proc.stop()
        api = start_api(procs, args.database, port=int(api.url.rsplit(":", 1)[1]), name="serve-restarted")
        flower = start_flower(procs, celery, flower_port)
        time.sleep(1)
        after = asyncio.run(known_counts(api.url, key, flower.url))
    finally:
        procs.close()

    def lat(name: str, p: float) -> str:
        return fmt(percentile(times[name], p), 1)

    print()
    print(
        f"{args.jobs:,} demo.echo jobs through dispatch -> pool worker (-c {args.concurrency}, events on); "
        f"{args.requests} timed requests per lookup (one at a time); {len(fresh)} freshness samples"
    )

    def flower_list(p: float) -> str:
        return f"{lat('flower list', p)} (sorted {lat('flower list sorted', p)})"

    flower_fresh = fmt(median([f["flower"] for f in fresh]), 1)
    flower_event = fmt(median([f["flower_from_event"] for f in fresh]), 1)
    rows = [
        ["list 20 newest, p50 ms", lat("ours list", 50), flower_list(50)],
        ["list 20 newest, p99 ms", lat("ours list", 99), flower_list(99)],
        ["find one task by id, p50 ms", lat("ours by id", 50), lat("flower by id", 50)],
        ["find one task by id, p99 ms", lat("ours by id", 99), lat("flower by id", 99)],
        ["health check (reads nothing), p50 ms", lat("ours health", 50), lat("flower health", 50)],
        ["RSS of the service, MiB", f"{rss_api:.0f} (pool worker {rss_worker:.0f})", f"{rss_flower:.0f}"],
        [
            "final state visible after completion, median ms",
            fmt(median([f["ours"] for f in fresh]), 1),
            f"{flower_fresh} ({flower_event} after its event)",
        ],
        [
            "final state visible after completion, max ms",
            fmt(max((f["ours"] for f in fresh), default=None), 1),
            fmt(max((f["flower"] for f in fresh), default=None), 1),
        ],
        ["tasks known before restart", fmt(before[0]), fmt(before[1])],
        ["tasks known after restart", fmt(after[0]), fmt(after[1])],
    ]
    print(table(["measure", "worker-automation API", "Flower 2.x"], rows))
    print(
        "ours: GET /api/v1/worker-automation/?per_page=20 and /status/<task_id> (database); Flower: "
        "/api/tasks?limit=20 (sorted: &sort_by=-received) and /api/task/info/<id> (memory, from events); "
        "health check: ours /healthz, Flower /healthcheck (context for the rows above, not a target); "
        "freshness polls both in turn every 5 ms plus request time (resolution about 10 ms)"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200, help="timed requests per lookup kind")
    parser.add_argument("--fresh", type=int, default=20, help="freshness samples")
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--database", default="wa_bench_flower", help="created anew")
    parser.add_argument("--flower-env", default="/tmp/flowerenv", help="virtualenv with flower installed")
    parser.add_argument("--wait-quiet", action="store_true", help="wait for load average < 1.5 first")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
