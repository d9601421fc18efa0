"""Websocket subscribers of ``workerEvents`` on one API process: delivery latency and memory.

For each N, a fresh ``worker-automation serve`` (PostgreSQL + Redis) gets N graphql-transport-ws
subscribers, opened by this process; then M job events are published on the event bus, one every
``--interval`` seconds, each stamped with its send time. Every subscriber records when each event
reached it (the time its bytes arrived). Printed per N: p50 / p99 / max event-to-client latency,
events delivered, server RSS (idle with N subscribers, and after the events), and CPU per
subscriber per event of the server and of the clients.

    python -m bench.subscriptions --subscribers 100,1000,2000 --events 30 --interval 0.5
    python -m bench.subscriptions --subscribers 2000 --compression none
    python -m bench.subscriptions --subscribers 2000 --baseline /tmp/wa_base   # before/after
    python -m bench.subscriptions --subscribers 2000 --views 1,20,2000          # distinct documents

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
import itertools
import json
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
from bench.ws_client import WsClient
from worker_automation.broker.events import Event, EventBus
from worker_automation.vocabulary import EventKind

DATABASE = "wa_bench_subscriptions"
PREFIX = "wa_bench"
QUERY = """subscription { workerEvents { kind worker {
  id taskId status queue automationType priority progress displayName clientName metadataJson updatedAt
} } }"""
CONNECT_CONCURRENCY = 100


class Subscriber:
    """One websocket client; ``latencies`` maps event number -> seconds from send to arrival."""

    def __init__(self) -> None:
        self.latencies: dict[int, float] = {}
        self.acked: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.connection: WsClient | None = None

    def on_message(self, raw: bytes, arrived: float) -> None:
        message = json.loads(raw)
        kind = message.get("type")
        if kind == "next":
            meta = message["payload"]["data"]["workerEvents"]["worker"]["metadataJson"]
            self.latencies[int(meta["n"])] = arrived - float(meta["sent"])
        elif not self.acked.done():
            self.acked.set_result(message)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


def document(view: int) -> str:
    """The subscription of view number ``view``: the same fields, a document of its own."""
    return QUERY if view == 0 else f"{QUERY}\n# view {view}"


async def subscribe(ws_url: str, key: str, compression: str | None, query: str) -> Subscriber:
    subscriber = Subscriber()
    async with asyncio.timeout(60):
        connection = subscriber.connection = await WsClient.connect(
            ws_url,
            subscriber.on_message,
            subprotocol="graphql-transport-ws",
            deflate=compression == "deflate",
        )
    connection.send_text(json.dumps({"type": "connection_init", "payload": {"X-API-Key": key}}))
    ack = await asyncio.wait_for(subscriber.acked, 60)
    if ack.get("type") != "connection_ack":
        raise SystemExit(f"connection refused: {ack}")
    connection.send_text(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
    return subscriber


async def open_subscribers(
    ws_url: str, key: str, count: int, compression: str | None, views: int
) -> list[Subscriber]:
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

    async def one(i: int) -> Subscriber:
        async with gate:
            return await subscribe(ws_url, key, compression, document(i % views))

    return list(await asyncio.gather(*(one(i) for i in range(count))))


def job_event(n: int) -> Event:
    """A realistic event: the row of a running demo job, stamped with its number and send time."""
    now = time.time()
    return Event(
        kind=EventKind.PROGRESS,
        worker={
            "id": 1_000_000 + n, "task_id": str(uuid.uuid4()), "cliente_id": 1024, "usuario_id": 42,
            "path_file": None, "status": "EXECUTANDO", "data_inicio": "2026-07-08T09:15:00-03:00",
            "data_fim": None, "mensagem_erro": None, "automation_type": "demo.sleep", "queue": "scan",
            "priority": 0, "retry_count": 0, "progress": n % 100, "metadata_json": {"n": n, "sent": now},
            "display_name": "Demonstração: Aguardar", "client_name": "Comércio de Alimentos Ltda",
            "context": {"seconds": 30}, "result": None, "created_at": "2026-07-08T09:14:58-03:00",
            "updated_at": "2026-07-08T09:15:00-03:00", "machine_id": None,
        },
    )  # fmt: skip


async def wait_delivered(subscribers: list[Subscriber], n: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if all(n in s.latencies for s in subscribers):
            return True
        await asyncio.sleep(0.05)
    return False


async def run_one(
    count: int,
    events: int,
    interval: float,
    compression: str | None,
    source: Path | None = None,
    views: int = 1,
) -> dict[str, Any]:
    await recreate_database(DATABASE)
    flush_bench_redis()
    procs = Procs(f"subs{count}")
    bus = EventBus(redis_url(), PREFIX)
    subscribers: list[Subscriber] = []
    try:
        api = start_api(procs, DATABASE, source=source)
        key = api.operator_key()
        ws_url = api.url.replace("http://", "ws://") + "/graphql"
        started = time.monotonic()
        subscribers = await open_subscribers(ws_url, key, count, compression, views)
        connect_seconds = time.monotonic() - started
        # A warm-up event proves every subscription is live before anything is timed.
        for attempt in range(50):
            await bus.publish(job_event(-1 - attempt))
            if await wait_delivered(subscribers, -1 - attempt, 2.0):
                break
        else:
            raise SystemExit("subscribers never all became live")
        rss_idle = rss_mb(api.proc.pid)
        cpu_before = cpu_seconds(api.proc.pid)
        client_before = time.process_time()
        for n in range(events):
            await bus.publish(job_event(n))
            await asyncio.sleep(interval)
        await wait_delivered(subscribers, events - 1, 30.0)
        await asyncio.sleep(1.0)
        cpu_used = cpu_seconds(api.proc.pid) - cpu_before
        client_used = time.process_time() - client_before
        rss_after = rss_mb(api.proc.pid)
        latencies = [s.latencies[n] * 1000 for s in subscribers for n in range(events) if n in s.latencies]
        return {
            "subscribers": count,
            "views": min(views, count),
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
        for subscriber in subscribers:
            subscriber.close()
        await bus.stop()
        procs.close()


async def main_async(
    counts: list[int],
    events: int,
    interval: float,
    compression: str | None,
    baseline: Path | None,
    views: list[int],
) -> None:
    print_facts()
    variants: list[tuple[str, Path | None]] = [("current", None)]
    if baseline is not None:
        variants.insert(0, ("baseline", baseline))
    rows = []
    for count, spread, (label, source) in itertools.product(counts, views, variants):
        # With a baseline, both variants run for each N and V, one after the other.
        result = await run_one(count, events, interval, compression, source, spread)
        print(label, json.dumps(result), flush=True)
        rows.append(
            [
                label,
                fmt(result["subscribers"]),
                fmt(result["views"]),
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
        "variant", "subscribers", "views", "compression", "delivered", "p50 ms", "p99 ms", "max ms",
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
    args = parser.parse_args()
    counts = [int(c) for c in args.subscribers.split(",") if c.strip()]
    compression = None if args.compression == "none" else args.compression
    baseline = Path(args.baseline) if args.baseline else None
    views = [int(v) for v in args.views.split(",") if v.strip()]
    asyncio.run(main_async(counts, args.events, args.interval, compression, baseline, views))


if __name__ == "__main__":
    main()
