"""Job pipeline throughput: ours next to raw Celery (the limit) and the peer, in one run.

Variants, round by round, each side's workers running only during its own round:

- ours: ``--jobs`` ``demo.echo`` jobs created through ``POST /api/v1/jobs`` (``--in-flight``
  requests at a time; with ``--batch 1,100`` also 100 per ``POST /api/v1/jobs/batch``) and run
  to CONCLUIDO by a pool worker (``worker-automation worker -Q scan -c 2``, a registered machine
  claiming and reporting through the API);
- raw Celery: the same number of no-op tasks of a bare app built with the service's Celery
  configuration (``bench/raw_celery_app.py``), Redis results, same prefork concurrency;
- the peer (``bench/peer_celery_app.py``): what a Celery user runs for records and a live view,
  the same no-op task with Celery's database result backend on the same PostgreSQL, task events
  on and Flower consuming them (Flower from its own virtualenv, ``--flower``);
- with ``--drain``, also ours, raw Celery and the peer with every job queued first, timing only
  the workers' drain.

    python -m bench.pipeline --jobs 10000 --batch 1,100 --drain
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import redis

from bench.common import (
    REDIS_DB,
    ROOT,
    Api,
    Proc,
    Procs,
    bench_env,
    cpu_seconds,
    fmt,
    free_port,
    machine_busy_seconds,
    median,
    percentile,
    postmaster_of,
    print_facts,
    recreate_database,
    redis_url,
    server_cpu_seconds,
    start_api,
    start_pool_worker,
    table,
    wait_for_quiet,
)
from bench.job_feed import (
    QUEUE,
    TIMEOUT_SECONDS,
    connect,
    dispatch_all,
    job_times,
    last_id,
    purge,
    wait_concluded,
)
from bench.scale import start_profiler, stop_profiler

RAW = "raw Celery"
PEER = "peer: Celery + db results + events + Flower"
RAW_DRAIN = RAW + ", drain"
PEER_DRAIN = PEER + ", drain"
PEER_DATABASE = "wa_bench_pipeline_peer"
# Jobs per request when ``--drain`` queues the jobs before the workers start (not timed).
DRAIN_BATCH = 100


@dataclass
class Round:
    """One measured round of one variant."""

    variant: str
    jobs: int
    # What each variant's figures are compared with: "raw" (live dispatch) or "raw drain".
    mode: str = "live"
    done: int = 0
    dispatch_s: float = 0.0
    total_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    api_cpu_s: float = 0.0
    worker_cpu_s: float = 0.0
    postgres_cpu_s: float = 0.0
    machine_cpu_s: float = 0.0
    errors: int = 0

    @property
    def rate(self) -> float:
        return self.done / self.total_s if self.total_s else 0.0


@contextlib.contextmanager
def server_costs(result: Round) -> Iterator[None]:
    """What the measured part of a round cost PostgreSQL (every backend, the bench's polling
    included) and the whole machine, into ``result``."""
    postmaster = postmaster_of("postgres")
    postgres0, machine0 = server_cpu_seconds(postmaster), machine_busy_seconds()
    try:
        yield
    finally:
        result.postgres_cpu_s = server_cpu_seconds(postmaster) - postgres0
        result.machine_cpu_s = machine_busy_seconds() - machine0


# ---------------------------------------------------------------- our pipeline


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
    drain: bool = False


def run_ours(procs: Procs, ours: Ours, args: argparse.Namespace, profile: str | None) -> Round:
    result = Round(ours.label, args.jobs, "drain" if ours.drain else "live")
    purge(QUEUE)
    api = ours.api
    first = asyncio.run(last_id(ours.database))
    in_flight = args.in_flight if ours.batch == 1 else args.batch_in_flight

    def dispatch() -> tuple[float, float, int]:
        return asyncio.run(dispatch_all(api.url, ours.key, args.jobs, in_flight, ours.batch))

    if ours.drain:  # every job queued before the worker starts: its drain alone is timed
        _, result.dispatch_s, result.errors = dispatch()
    worker = start_pool_worker(procs, api, ours.machine_key, queue=QUEUE, concurrency=args.concurrency)
    kind = "raw" if profile and profile.endswith(".txt") else "speedscope"
    profiler = start_profiler(ours.api.proc.pid, profile, kind) if profile else None
    try:
        with server_costs(result):
            api_cpu0 = cpu_seconds(ours.api.proc.pid, with_children=True)
            worker_cpu0 = cpu_seconds(worker.pid, with_children=True)
            if ours.drain:
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


def run_raw(procs: Procs, args: argparse.Namespace, *, drain: bool = False) -> Round:
    from bench.raw_celery_app import QUEUE as RAW_QUEUE
    from bench.raw_celery_app import TASK_NAME, app

    result = Round(RAW_DRAIN if drain else RAW, args.jobs, "drain" if drain else "live")
    purge(RAW_QUEUE)
    ids = [str(uuid.uuid4()) for _ in range(args.jobs)]
    sent_at = send_tasks(app, TASK_NAME, RAW_QUEUE, ids) if drain else {}
    if drain:
        result.dispatch_s = max(sent_at.values()) - min(sent_at.values())
    env = bench_env(BENCH_RAW_BROKER_URL=redis_url())
    worker = start_celery_worker(procs, "raw-celery", "bench.raw_celery_app", RAW_QUEUE, env, args)
    try:
        wait_ping(app, worker)
        with server_costs(result):
            worker_cpu0 = cpu_seconds(worker.pid, with_children=True)
            started = time.time()
            if not drain:
                sent_at = send_tasks(app, TASK_NAME, RAW_QUEUE, ids)
                result.dispatch_s = max(sent_at.values()) - started
            done_at = wait_results(ids, app.backend.client)
            result.worker_cpu_s = cpu_seconds(worker.pid, with_children=True) - worker_cpu0
    finally:
        worker.stop(timeout=30)
    result.done = len(done_at)
    if done_at:
        result.total_s = max(done_at.values()) - started
        result.latencies_ms = [(done_at[i] - sent_at[i]) * 1000 for i in done_at]
    return result


def send_tasks(app: Any, task_name: str, queue: str, ids: list[str]) -> dict[str, float]:
    """Send one no-op task per id from 4 threads (as a web app's request handlers would, one
    send each); task id -> when it was sent."""
    sent_at: dict[str, float] = {}

    def send(chunk: list[str]) -> None:
        for task_id in chunk:
            sent_at[task_id] = time.time()
            app.send_task(task_name, args=[0], queue=queue, task_id=task_id)

    threads = 4
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(send, [ids[i::threads] for i in range(threads)]))
    return sent_at


def start_celery_worker(
    procs: Procs, name: str, module: str, queue: str, env: dict[str, str], args: argparse.Namespace
) -> Proc:
    return procs.start(
        name,
        [
            sys.executable, "-m", "celery", "-A", module, "worker", "-Q", queue,
            "-c", str(args.concurrency), "-P", "prefork", "-E", "--without-mingle", "--without-gossip",
            "-n", f"{name}-{uuid.uuid4().hex[:6]}@bench", "-l", "WARNING",
        ],
        env,
        cwd=ROOT,
    )  # fmt: skip


def wait_ping(app: Any, worker: Proc) -> None:
    """The worker logs nothing at WARNING when ready: a ping through the broker says it is."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not app.control.ping(timeout=0.5):
        if not worker.alive():
            raise SystemExit(f"{worker.name} exited:\n{worker.output()[-3000:]}")


# ---------------------------------------------------------------- the peer


async def peer_results(ids: set[str]) -> dict[str, float]:
    """Task id -> date_done of the peer's tasks stored as SUCCESS, polled until all are there."""
    conn = await connect(PEER_DATABASE)
    try:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            done = int(await conn.fetchval("SELECT count(*) FROM celery_taskmeta WHERE status = 'SUCCESS'"))
            if done >= len(ids):
                break
            await asyncio.sleep(0.25)
        # date_done is written in UTC (Celery's clock) into a column without time zone.
        rows = await conn.fetch(
            "SELECT task_id, extract(epoch FROM date_done AT TIME ZONE 'UTC') AS at "
            "FROM celery_taskmeta WHERE status = 'SUCCESS'"
        )
        return {r["task_id"]: float(r["at"]) for r in rows if r["task_id"] in ids}
    finally:
        await conn.close()


async def clear_peer_results() -> None:
    conn = await connect(PEER_DATABASE)
    try:
        await conn.execute("TRUNCATE celery_taskmeta")
    finally:
        await conn.close()


def run_peer(procs: Procs, args: argparse.Namespace, *, drain: bool = False) -> Round:
    """The peer's round: Flower and the worker started, tasks sent, every result stored (with
    ``drain``, every task sent before the worker starts, Flower already listening)."""
    # Imported here: flower_compare imports this module.
    from bench.flower_compare import start_flower
    from bench.peer_celery_app import QUEUE as PEER_QUEUE
    from bench.peer_celery_app import TASK_NAME, app

    result = Round(PEER_DRAIN if drain else PEER, args.jobs, "drain" if drain else "live")
    purge(PEER_QUEUE)
    app.backend  # noqa: B018 - creates the results table before the first round
    asyncio.run(clear_peer_results())
    ids = [str(uuid.uuid4()) for _ in range(args.jobs)]
    flower = start_flower(procs, Path(args.flower), free_port()).proc
    sent_at = send_tasks(app, TASK_NAME, PEER_QUEUE, ids) if drain else {}
    if drain:
        result.dispatch_s = max(sent_at.values()) - min(sent_at.values())
    env = bench_env(BENCH_PEER_BROKER_URL=redis_url())
    worker = start_celery_worker(procs, "peer-celery", "bench.peer_celery_app", PEER_QUEUE, env, args)
    try:
        wait_ping(app, worker)
        with server_costs(result):
            worker_cpu0 = cpu_seconds(worker.pid, with_children=True)
            flower_cpu0 = cpu_seconds(flower.pid, with_children=True)
            started = time.time()
            if not drain:
                sent_at = send_tasks(app, TASK_NAME, PEER_QUEUE, ids)
                result.dispatch_s = max(sent_at.values()) - started
            done_at = asyncio.run(peer_results(set(ids)))
            result.worker_cpu_s = cpu_seconds(worker.pid, with_children=True) - worker_cpu0
            result.api_cpu_s = cpu_seconds(flower.pid, with_children=True) - flower_cpu0
    finally:
        worker.stop(timeout=30)
        flower.stop(timeout=15)
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
    ratio = f"{r.rate / reference * 100:.0f}%" if reference else "-"
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
        fmt(r.postgres_cpu_s * 1000 / r.done, 2) if r.done else "-",
        fmt(r.machine_cpu_s * 1000 / r.done, 2) if r.done else "-",
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
    "API (peer: Flower) CPU ms/job",
    "worker CPU ms/job",
    "PostgreSQL CPU ms/job",
    "machine CPU ms/job",
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


Variant = Ours | str  # ours, or RAW / PEER / RAW_DRAIN / PEER_DRAIN


_PROFILED: list[str] = []  # the variant profiled, once per run


def run_variant(procs: Procs, variant: Variant, args: argparse.Namespace, first_round: bool) -> Round:
    if variant == RAW:
        return run_raw(procs, args)
    if variant == RAW_DRAIN:
        return run_raw(procs, args, drain=True)
    if variant == PEER:
        return run_peer(procs, args)
    if variant == PEER_DRAIN:
        return run_peer(procs, args, drain=True)
    assert isinstance(variant, Ours)
    # The first round of the working tree's first variant is profiled (with --batch 100 alone,
    # the batched one).
    profile = None
    if args.profile and variant.label.startswith("current") and first_round and not _PROFILED:
        profile = args.profile
        _PROFILED.append(variant.label)
    return run_ours(procs, variant, args, profile)


def variants_of(procs: Procs, args: argparse.Namespace) -> list[Variant]:
    current = setup_ours(procs, "current", args.database, None, args.api_workers)
    variants: list[Variant] = [RAW]
    if not args.no_peer:
        if not Path(args.flower).exists():
            raise SystemExit(f"{args.flower} not found: see bench/README.md (Flower in its own virtualenv)")
        asyncio.run(recreate_database(PEER_DATABASE))
        variants.append(PEER)
    # The baseline runs the same rounds as the working tree (each batch size, and the drain).
    ours = [current]
    if args.baseline:
        ours.append(setup_ours(procs, "baseline", f"{args.database}_base", Path(args.baseline)))
    variants += [side if size == 1 else batched(side, size) for size in args.batch for side in ours]
    if args.drain:
        variants.append(RAW_DRAIN)
        if not args.no_peer:
            variants.append(PEER_DRAIN)
        variants += [
            replace(side, label=f"{side.label}, drain", batch=DRAIN_BATCH, drain=True) for side in ours
        ]
    return variants


def run(args: argparse.Namespace) -> None:
    if args.wait_quiet:
        wait_for_quiet()
    print_facts()
    procs = Procs("pipeline")
    rounds: list[Round] = []
    try:
        variants = variants_of(procs, args)
        for n in range(args.runs):
            order = variants if n % 2 == 0 else list(reversed(variants))
            for variant in order:
                rounds.append(run_variant(procs, variant, args, n == 0))
                print(
                    f"  run {n + 1}: {rounds[-1].variant}: {rounds[-1].done} in {rounds[-1].total_s:.1f} s",
                    flush=True,
                )
    finally:
        procs.close()
    report(rounds, args)


def report(rounds: list[Round], args: argparse.Namespace) -> None:
    def rate_of(variant: str) -> float:
        return median([r.rate for r in rounds if r.variant == variant])

    raw = {"live": rate_of(RAW), "drain": rate_of(RAW_DRAIN)}
    peer = {"live": rate_of(PEER), "drain": rate_of(PEER_DRAIN)}
    print()
    print(
        f"{args.jobs:,} no-op jobs per round, {args.runs} round(s) per variant, "
        f"prefork -c {args.concurrency}, API processes {args.api_workers}, "
        f"{args.in_flight} dispatch requests in flight ({args.batch_in_flight} for batches), "
        f"drain rounds timed from the worker start, Redis db {REDIS_DB}; latency = dispatch -> "
        f"completion (ours: data_fim - created_at; raw and peer: date_done - send); "
        f"the peer's API column is Flower's CPU"
    )
    print(table(HEADERS, [row(r, raw[r.mode]) for r in rounds]))
    print()
    summary = []
    for variant in dict.fromkeys(r.variant for r in rounds):
        mine = [r for r in rounds if r.variant == variant]
        rate = median([r.rate for r in mine])
        reference = raw[mine[0].mode]
        peers = peer[mine[0].mode]
        ours = variant not in (RAW, RAW_DRAIN, PEER, PEER_DRAIN)
        summary.append(
            [
                variant,
                fmt(rate, 0),
                fmt(median([percentile(r.latencies_ms, 50) for r in mine]), 0),
                fmt(median([percentile(r.latencies_ms, 99) for r in mine]), 0),
                f"{rate / reference:.2f}x" if reference == reference and reference else "-",
                f"{rate / peers:.2f}x" if ours and peers == peers and peers else "-",
                fmt(median([r.postgres_cpu_s * 1000 / r.done for r in mine if r.done]), 2),
                fmt(median([r.machine_cpu_s * 1000 / r.done for r in mine if r.done]), 2),
            ]
        )
    print(
        "medians over rounds (targets: ours one job per request >= 1.0x the peer; "
        "batched and drain >= 0.5x raw Celery; drain rounds compare with raw Celery's and the "
        "peer's drain):"
    )
    columns = ["variant", "per s", "latency p50 ms", "latency p99 ms", "vs raw", "vs peer"]
    print(table([*columns, "PostgreSQL CPU ms/job", "machine CPU ms/job"], summary))
    if args.profile:
        print(f"API profile (first round of the first variant of current) written to {args.profile}")


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
        help="also rounds of ours, raw Celery and the peer with every job queued first, timing the drain",
    )
    parser.add_argument(
        "--flower",
        default="/tmp/flowerenv/bin/celery",
        help="the celery command of a virtualenv with Flower (the peer's live view)",
    )
    parser.add_argument("--no-peer", action="store_true", help="leave the peer's rounds out")
    parser.add_argument("--wait-quiet", action="store_true", help="wait for load average < 1.5 first")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
