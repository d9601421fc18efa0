"""Websocket subscribers of ``workerEvents``: delivery latency and memory of the API processes.

For each N, a fresh ``worker-automation serve`` (PostgreSQL + Redis; ``--api-workers 2`` runs
``serve --workers 2``, processes sharing one port) gets N graphql-transport-ws subscribers, opened
by this process or spread over ``--client-procs`` processes (``bench/ws_fleet.py``); then M job
events are published on the event bus, one every ``--interval`` seconds, each stamped with its
send time. Every subscriber records when each event reached it (the time its bytes arrived).
Printed per N: p50 / p99 / max event-to-client latency, events delivered, how the subscribers
fell to the API processes, server RSS (idle with N subscribers, and after the events; every API
process summed), and CPU per subscriber per event of the server (every API process) and of the
clients. The open-files limit is raised to its hard limit (the servers inherit it).

    python -m bench.subscriptions --subscribers 100,1000,2000 --events 30 --interval 0.5
    python -m bench.subscriptions --subscribers 2000 --compression none
    python -m bench.subscriptions --subscribers 2000 --baseline /tmp/wa_base   # before/after
    python -m bench.subscriptions --subscribers 2000 --views 1,20,2000          # distinct documents
    python -m bench.subscriptions --subscribers 10000 --api-workers 2 --client-procs 2 --events 20

The subscribers share the machine with the server (two cores here), so the latencies include the
clients' own time to read their sockets; they are ``bench/ws_client.py`` connections, which read
frames in the protocol callback at a fraction of a general client's cost.

Subscribers that send the same document share one live view of the server; ``--views V`` spreads
them over V documents that differ only by a comment (subscriber i gets document i mod V), so
V = N shows the cost when no two subscribers ask the same thing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import (
    Procs,
    cpu_seconds,
    flush_bench_redis,
    fmt,
    percentile,
    print_facts,
    recreate_database,
    redis_url,
    rss_mb,
    start_api,
    table,
)
from bench.ws_fleet import Fleet, raise_open_files
from tests.integration.harness import descendants
from worker_automation.broker.events import Event, EventBus
from worker_automation.domain.vocabulary import EventKind

DATABASE = "wa_bench_subscriptions"
PREFIX = "wa_bench"
QUERY = """subscription { workerEvents { kind worker {
  id taskId status queue automationType priority progress displayName clientName metadataJson updatedAt
} } }"""


def document(view: int) -> str:
    """The subscription of view number ``view``: the same fields, a document of its own."""
    return QUERY if view == 0 else f"{QUERY}\n# view {view}"


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


def connections_per_process(pid: int, port: int) -> list[int]:
    """Established connections to ``port`` held by each API process (``pid`` and its children)."""
    established = set()
    for table_path in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table_path).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    established.add(int(fields[9]))
    counts = [len(socket_inodes(one) & established) for one in [pid, *descendants(pid)]]
    return [count for count in counts if count] or [0]


def job_event(n: int) -> Event:
    """A realistic event: the row of a running demo job, stamped with its number and send time."""
    now = time.time()
    return Event(
        kind=EventKind.PROGRESS,
        job={
            "id": 1_000_000 + n, "task_id": str(uuid.uuid4()), "cliente_id": 1024, "usuario_id": 42,
            "path_file": None, "status": "EXECUTANDO", "data_inicio": "2026-07-08T09:15:00-03:00",
            "data_fim": None, "mensagem_erro": None, "automation_type": "demo.sleep", "queue": "scan",
            "priority": 0, "retry_count": 0, "progress": n % 100, "metadata_json": {"n": n, "sent": now},
            "display_name": "Demonstração: Aguardar", "client_name": "Comércio de Alimentos Ltda",
            "context": {"seconds": 30}, "result": None, "created_at": "2026-07-08T09:14:58-03:00",
            "updated_at": "2026-07-08T09:15:00-03:00", "machine_id": None,
        },
    )  # fmt: skip


async def run_one(
    count: int,
    events: int,
    interval: float,
    compression: str | None,
    source: Path | None = None,
    views: int = 1,
    api_workers: int = 1,
    client_procs: int = 0,
) -> dict[str, Any]:
    await recreate_database(DATABASE)
    flush_bench_redis()
    procs = Procs(f"subs{count}")
    bus = EventBus(redis_url(), PREFIX)
    fleet = Fleet(client_procs)
    try:
        # Every subscriber uses one key here, where a real fleet of consoles uses one each: the
        # per-key socket budget is raised to the count (the per-socket budgets stay as shipped).
        sockets = {"WA_WS_MAX_SOCKETS_PER_KEY": str(max(count, 50))}
        api = start_api(procs, DATABASE, source=source, workers=api_workers, extra_env=sockets)
        key = api.operator_key()
        ws_url = api.url.replace("http://", "ws://") + "/graphql"
        started = time.monotonic()
        await fleet.open(ws_url, key, compression, [document(i % views) for i in range(count)])
        connect_seconds = time.monotonic() - started
        # A warm-up event proves every subscription is live before anything is timed.
        for attempt in range(50):
            await bus.publish(job_event(-1 - attempt))
            if await fleet.wait_delivered(-1 - attempt, 5.0):
                break
        else:
            raise SystemExit("subscribers never all became live")
        spread = connections_per_process(api.proc.pid, int(api.url.rsplit(":", 1)[1]))
        # RSS and CPU of every API process: with --workers, uvicorn's parent and its children.
        rss_idle = rss_mb(api.proc.pid, with_children=True)
        cpu_before = cpu_seconds(api.proc.pid, with_children=True)
        await fleet.mark()
        for n in range(events):
            await bus.publish(job_event(n))
            await asyncio.sleep(interval)
        await fleet.wait_delivered(events - 1, 30.0)
        await asyncio.sleep(1.0)
        cpu_used = cpu_seconds(api.proc.pid, with_children=True) - cpu_before
        latencies, client_used = await fleet.results(events)
        rss_after = rss_mb(api.proc.pid, with_children=True)
        return {
            "subscribers": count,
            "views": min(views, count),
            "api_processes": api_workers,
            "per_process": "/".join(str(c) for c in spread),
            "client_processes": max(1, client_procs),
            "compression": compression or "none",
            "connect_s": connect_seconds,
            "delivered": f"{len(latencies)}/{count * events}",
            "p50_ms": percentile(latencies, 50),
            "p99_ms": percentile(latencies, 99),
            "max_ms": max(latencies) if latencies else float("nan"),
            "rss_idle_mb": rss_idle,
            "rss_after_mb": rss_after,
            "cpu_us_per_delivery": cpu_used / max(1, len(latencies)) * 1e6,
            "client_cpu_us_per_delivery": client_used / max(1, len(latencies)) * 1e6,
        }
    finally:
        await fleet.close()
        await bus.stop()
        procs.close()


async def main_async(
    counts: list[int],
    events: int,
    interval: float,
    compression: str | None,
    baseline: Path | None,
    views: list[int],
    api_workers: list[int],
    client_procs: int,
) -> None:
    print_facts()
    print(f"open files limit: {raise_open_files()}", flush=True)
    variants: list[tuple[str, Path | None]] = [("current", None)]
    if baseline is not None:
        variants.insert(0, ("baseline", baseline))
    rows = []
    for count, spread, workers, (label, source) in itertools.product(counts, views, api_workers, variants):
        # With a baseline, both variants run for each N, V and API processes, one after the other.
        result = await run_one(count, events, interval, compression, source, spread, workers, client_procs)
        print(label, json.dumps(result), flush=True)
        rows.append(
            [
                label,
                fmt(result["subscribers"]),
                fmt(result["views"]),
                fmt(result["api_processes"]),
                result["per_process"],
                fmt(result["client_processes"]),
                result["compression"],
                result["delivered"],
                fmt(result["p50_ms"]),
                fmt(result["p99_ms"]),
                fmt(result["max_ms"]),
                fmt(result["rss_idle_mb"]),
                fmt(result["rss_after_mb"]),
                fmt(result["cpu_us_per_delivery"], 0),
                fmt(result["client_cpu_us_per_delivery"], 0),
                fmt(result["connect_s"]),
            ]
        )
    headers = [
        "variant", "subscribers", "views", "API procs", "subscribers per API proc", "client procs",
        "compression", "delivered", "p50 ms", "p99 ms", "max ms",
        "RSS idle MiB", "RSS after MiB", "server CPU us/delivery", "client CPU us/delivery", "connect s",
    ]  # fmt: skip
    print(table(headers, rows))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--subscribers", default="100,1000,2000", help="comma-separated values of N")
    parser.add_argument("--events", type=int, default=30, help="events published per N (M)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between events")
    parser.add_argument(
        "--compression",
        choices=["deflate", "none"],
        default="deflate",
        help="what the clients offer: browsers offer permessage-deflate (the default here)",
    )
    parser.add_argument("--baseline", help="directory with another worker_automation package, run too")
    parser.add_argument("--views", default="1", help="comma-separated numbers of distinct documents")
    parser.add_argument(
        "--api-workers", default="1", help="comma-separated API processes (serve --workers N) on one port"
    )
    parser.add_argument(
        "--client-procs",
        type=int,
        default=0,
        help="client processes the subscribers are spread over (0: all in this process)",
    )
    args = parser.parse_args()
    counts = [int(c) for c in args.subscribers.split(",") if c.strip()]
    compression = None if args.compression == "none" else args.compression
    baseline = Path(args.baseline) if args.baseline else None
    views = [int(v) for v in args.views.split(",") if v.strip()]
    api_workers = [int(w) for w in args.api_workers.split(",") if w.strip()]
    asyncio.run(
        main_async(
            counts, args.events, args.interval, compression, baseline, views, api_workers, args.client_procs
        )
    )


if __name__ == "__main__":
    main()
