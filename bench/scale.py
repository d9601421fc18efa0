"""Read latency at scale: 32 concurrent clients against a ``serve`` over a million job rows.

Each endpoint is measured on its own: first one client at a time (the service time), then 32
clients in a closed loop (each sends its next request when the last one answered), ``--runs``
times. The API is one uvicorn process, as ``worker-automation serve`` runs it by default;
``--api-workers 1,2`` measures ``serve --workers 2`` side by side with it.

    python -m bench.load_rows --rows 1000000 --database wa_bench_1m   # once
    python -m bench.scale --database wa_bench_1m
    python -m bench.scale --database wa_bench_1m --api-workers 1,2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import (
    Procs,
    bench_env,
    cpu_seconds,
    database_exists,
    fmt,
    free_port,
    machine_busy_seconds,
    median,
    percentile,
    print_facts,
    rss_mb,
    start_api,
    table,
    wait_for_quiet,
    wait_http,
)
from worker_automation.worker.http import ApiTimeout, HttpClient, HttpReply

REST = "/api/v1/worker-automation"
WORKER_FIELDS = "id taskId status automationType displayName clientName queue priority progress"
DASHBOARD_QUERY = (
    "{ dashboard { stats { total byStatus byQueue } "
    "queues { queueName workersCount activeCount pendingCount capacity loadPercent } "
    "summary { totalActive totalPending totalCompletedToday totalErrorsToday } "
    "broker { available queues } "
    f"active {{ {WORKER_FIELDS} dataInicio }} "
    f"queued {{ total pages items {{ {WORKER_FIELDS} createdAt }} }} "
    f"history {{ {WORKER_FIELDS} dataFim mensagemErro }} errors }} }}"
)
QUEUE_LIVE_QUERY = (
    "{ queueLiveStatus { queues { queueName workersCount activeCount pendingCount capacity loadPercent "
    f"activeTasks {{ {WORKER_FIELDS} dataInicio }} pendingTasks {{ {WORKER_FIELDS} createdAt }} }} "
    "summary { totalActive totalPending totalCompletedToday totalErrorsToday } } }"
)
# History over the last 24 hours (the default range), hourly buckets; run times of one automation.
THROUGHPUT_QUERY = "{ throughput(bucketMinutes: 60) { bucketStart completed failed cancelled } }"
DURATIONS_QUERY = '{ durations(automationType: "cnd_federal") { count p50Ms p95Ms p99Ms maxMs } }'
HEALTH_QUERY = (
    '{ automationHealth(automationType: "cnd_federal", days: 30) '
    "{ day completed failed cancelled successRate p50Ms p95Ms } }"
)
# 90 days by day, from the rollups: the since of a run's start (the same text in every request).
THROUGHPUT_90D_QUERY = (
    f'{{ throughput(since: "{(datetime.now(UTC) - timedelta(days=90)).isoformat()}", bucketMinutes: 1440) '
    "{ bucketStart completed failed cancelled } }"
)

# The loaded rows stand for a busy day, not for runs in progress: EXECUTANDO rows have no process
# and AGENDADO rows no message. The reconciler of ``serve`` would set about them (sending
# thousands of tasks, rewriting rows and so the visibility map index-only scans rely on), and
# the database would drift from one sitting to the next; read benchmarks run without it.
READ_ONLY_ENV = {"WA_RECOVERY_SECONDS": "0"}
AGGREGATE_TARGET_MS = 100.0
LIST_TARGET_MS = 50.0


SPREAD_PAGES = 500
LIST_FILTER = '{status: CONCLUIDO, queue: "scan"}'
GRAPHQL_PAGE_QUERY = (
    f"query($page: Int!) {{ workers(filter: {LIST_FILTER}, page: $page, perPage: 20) "
    f"{{ total page pages items {{ {WORKER_FIELDS} createdAt }} }} }}"
)
GRAPHQL_CURSOR_QUERY = (
    f"query($after: String) {{ workers(filter: {LIST_FILTER}, first: 20, after: $after) "
    f"{{ total items {{ {WORKER_FIELDS} createdAt }} pageInfo {{ endCursor hasNextPage }} }} }}"
)

# The job list read other ways than by status and queue: free text that matches a CNPJ inside the
# jobs' context, a week of finish times, sorted by finish time or run time (each client on a page
# of its own), and the queued jobs of the busiest queue with their place in it.
TEXT_QUERY = (
    'query($page: Int!) { workers(filter: {q: "31020671000148"}, page: $page, perPage: 20) '
    f"{{ total items {{ {WORKER_FIELDS} createdAt }} }} }}"
)
FINISHED_WEEK = (
    f'finishedFrom: "{(datetime.now(UTC) - timedelta(days=14)).isoformat()}", '
    f'finishedTo: "{(datetime.now(UTC) - timedelta(days=7)).isoformat()}"'
)
RANGE_QUERY = (
    f"query($page: Int!) {{ workers(filter: {{{FINISHED_WEEK}}}, page: $page, perPage: 20) "
    f"{{ total items {{ {WORKER_FIELDS} dataFim }} }} }}"
)


def ordered_query(field_name: str, direction: str) -> str:
    return (
        f"query($page: Int!) {{ workers(orderBy: {{field: {field_name}, direction: {direction}}}, "
        f"page: $page, perPage: 20) {{ total items {{ {WORKER_FIELDS} dataInicio dataFim }} }} }}"
    )


QUEUE_POSITION_QUERY = (
    'query($page: Int!) { workers(filter: {status: AGENDADO, queue: "certidao"}, page: $page, '
    f"perPage: 20) {{ total items {{ {WORKER_FIELDS} queuePosition waitingReason }} }} }}"
)


@dataclass(frozen=True)
class Endpoint:
    name: str
    path: str
    target_ms: float | None  # None: a row for context, with no target of its own
    graphql: str | None = None
    first_page: int | None = None
    # Pages 1..SPREAD_PAGES spread over the clients: client c asks for pages c+1, c+1+clients, ...
    # so no two requests in flight are alike and every depth is visited.
    spread: bool = False
    # GraphQL by cursor: the page's ``after`` cursor, from ``cursors`` (found once per run).
    by_cursor: bool = False
    # GraphQL as an automatic persisted query: the document's hash alone, the document itself
    # only when the service answers PERSISTED_QUERY_NOT_FOUND (as Apollo's clients and the console).
    persisted: bool = False

    def page_for(self, client: int, sent: int, clients: int) -> int:
        if self.spread:
            return (client + sent * clients) % SPREAD_PAGES + 1
        return (self.first_page or 1) + client

    async def call(
        self,
        conn: HttpClient,
        client: int = 0,
        sent: int = 0,
        clients: int = 1,
        cursors: list[str | None] | None = None,
    ) -> HttpReply:
        """One request. With ``first_page`` or ``spread`` each client asks for a page of its own,
        so no two requests in flight are identical and none can share an answer."""
        paged = self.first_page is not None or self.spread
        page = self.page_for(client, sent, clients)
        if self.graphql is not None:
            body: dict[str, object] = {"query": self.graphql}
            if self.by_cursor:
                body["variables"] = {"after": (cursors or [None])[(page - 1) % len(cursors or [None])]}
            elif paged:
                body["variables"] = {"page": page}
            if self.persisted:
                return await persisted_call(conn, self.path, body)
            return await conn.request("POST", self.path, json_body=body)
        if paged:
            return await conn.request("GET", f"{self.path}&page={page}")
        return await conn.request("GET", self.path)

    def ok(self, reply: HttpReply, *, thorough: bool = False) -> bool:
        """Success, checked on the parsed body when ``thorough``, else on its bytes (cheap)."""
        if reply.status_code != 200:
            return False
        if thorough:
            body = reply.json()
            if self.graphql is not None:
                return not body.get("errors")
            return bool(body.get("status") == ("ok" if self.path == HEALTH else "success"))
        if self.graphql is not None:
            return reply.content.startswith(b'{"data":') and b'"errors":[' not in reply.content
        if self.path == HEALTH:
            return reply.content == b'{"status":"ok"}'
        return reply.content.startswith(b'{"status":"success"')


async def persisted_call(conn: HttpClient, path: str, body: dict[str, object]) -> HttpReply:
    """``body`` sent as its document's hash; with the document too if the service asks for it."""
    query = str(body.pop("query"))
    body["extensions"] = {"persistedQuery": {"version": 1, "sha256Hash": document_hash(query)}}
    reply = await conn.request("POST", path, json_body=body)
    if reply.status_code == 200 and b"PERSISTED_QUERY_NOT_FOUND" in reply.content[:200]:
        reply = await conn.request("POST", path, json_body={**body, "query": query})
    return reply


@functools.cache
def document_hash(query: str) -> str:
    return hashlib.sha256(query.encode()).hexdigest()


SCAN_DONE = f"{REST}/?status=CONCLUIDO&queue=scan"
HEALTH = "/healthz"
# What a request costs before it reads anything: the HTTP stack alone, then the GraphQL
# endpoint's own floor (parse and validation are cached; the view, the extensions and the
# executor remain). Context for the rows below them, no target.
FLOORS = (
    Endpoint("floor: health check (reads nothing)", HEALTH, None),
    Endpoint("floor: GraphQL { __typename } (reads nothing)", "/graphql", None, "{ __typename }"),
)
ENDPOINTS = (
    *FLOORS,
    Endpoint("REST /stats", f"{REST}/stats", AGGREGATE_TARGET_MS),
    Endpoint("REST /dashboard", f"{REST}/dashboard", AGGREGATE_TARGET_MS),
    Endpoint("REST /queue-live-status", f"{REST}/queue-live-status", AGGREGATE_TARGET_MS),
    Endpoint("GraphQL dashboard", "/graphql", AGGREGATE_TARGET_MS, DASHBOARD_QUERY),
    Endpoint("GraphQL queueLiveStatus", "/graphql", AGGREGATE_TARGET_MS, QUEUE_LIVE_QUERY),
    Endpoint("GraphQL throughput", "/graphql", AGGREGATE_TARGET_MS, THROUGHPUT_QUERY),
    Endpoint("GraphQL durations", "/graphql", AGGREGATE_TARGET_MS, DURATIONS_QUERY),
    Endpoint("GraphQL automationHealth 30 d", "/graphql", AGGREGATE_TARGET_MS, HEALTH_QUERY),
    Endpoint("GraphQL throughput 90 d by day", "/graphql", AGGREGATE_TARGET_MS, THROUGHPUT_90D_QUERY),
    Endpoint("GraphQL workers q over context p1-32", "/graphql", LIST_TARGET_MS, TEXT_QUERY, first_page=1),
    Endpoint(
        "GraphQL workers finished in a week p1-32", "/graphql", LIST_TARGET_MS, RANGE_QUERY, first_page=1
    ),
    *(
        Endpoint(
            f"GraphQL workers by {name} {direction} p1-32",
            "/graphql",
            LIST_TARGET_MS,
            ordered_query(name, direction),
            first_page=1,
        )
        for name in ("FINISHED_AT", "DURATION")
        for direction in ("DESC", "ASC")
    ),
    Endpoint(
        "GraphQL workers queuePosition AGENDADO p1-32",
        "/graphql",
        LIST_TARGET_MS,
        QUEUE_POSITION_QUERY,
        first_page=1,
    ),
    Endpoint("REST list CONCLUIDO+scan p1", f"{REST}/?status=CONCLUIDO&queue=scan&page=1", LIST_TARGET_MS),
    Endpoint(
        "REST list CONCLUIDO+scan p500", f"{REST}/?status=CONCLUIDO&queue=scan&page=500", LIST_TARGET_MS
    ),
    # Every client on a page of its own (1-32, then 469-500): nothing for requests to share.
    Endpoint("REST list p1-32, one per client", SCAN_DONE, LIST_TARGET_MS, first_page=1),
    Endpoint("REST list p469-500, one per client", SCAN_DONE, LIST_TARGET_MS, first_page=469),
    # Pages 1-500 spread over the clients, no two requests alike: offset pages (REST, GraphQL)
    # and the same depths by cursor (GraphQL first/after).
    Endpoint("REST list p1-500 spread", SCAN_DONE, LIST_TARGET_MS, spread=True),
    Endpoint("GraphQL workers p1-500 spread", "/graphql", LIST_TARGET_MS, GRAPHQL_PAGE_QUERY, spread=True),
    Endpoint(
        "GraphQL workers cursor p1-500 spread",
        "/graphql",
        LIST_TARGET_MS,
        GRAPHQL_CURSOR_QUERY,
        spread=True,
        by_cursor=True,
    ),
    # The same page of its own per client, with the document in every body and as an automatic
    # persisted query (its hash alone), side by side.
    Endpoint(
        "GraphQL workers p1-32, one per client", "/graphql", LIST_TARGET_MS, GRAPHQL_PAGE_QUERY, first_page=1
    ),
    Endpoint(
        "GraphQL workers p1-32, one per client, APQ hash",
        "/graphql",
        LIST_TARGET_MS,
        GRAPHQL_PAGE_QUERY,
        first_page=1,
        persisted=True,
    ),
)


async def find_cursors(conn: HttpClient, pages: int = SPREAD_PAGES) -> list[str | None]:
    """The ``after`` cursor of each page 1..``pages`` of the cursor endpoints' list (None for the
    first), found by walking it once; empty when the API has no cursor pagination."""
    cursors: list[str | None] = [None]
    while len(cursors) < pages:
        body = {"query": GRAPHQL_CURSOR_QUERY, "variables": {"after": cursors[-1]}}
        reply = (await conn.request("POST", "/graphql", json_body=body)).json()
        if reply.get("errors"):
            return []
        info = reply["data"]["workers"]["pageInfo"]
        if not info["hasNextPage"]:
            break
        cursors.append(info["endCursor"])
    return cursors


@dataclass
class Sample:
    """One closed-loop run of one endpoint."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    machine_cpu_s: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0


async def closed_loop(
    connect: Callable[[], HttpClient],
    endpoint: Endpoint,
    requests: int,
    concurrency: int,
    cursors: list[str | None] | None = None,
    stride: int | None = None,
) -> Sample:
    """``concurrency`` clients, each on its own keep-alive connection, ``requests`` in all
    (spread pages step by ``stride``, the loaded run's client count, at any concurrency)."""
    sample = Sample()
    remaining = requests
    conns = [connect() for _ in range(concurrency)]

    async def one_client(index: int, conn: HttpClient) -> None:
        nonlocal remaining
        sent = 0
        while remaining > 0:
            remaining -= 1
            t0 = time.perf_counter()
            reply: HttpReply | None
            try:
                reply = await endpoint.call(conn, index, sent, stride or concurrency, cursors)
            except ApiTimeout:
                # Not answered within the client's timeout: an error of the row, not the end of
                # the run (the connection is replaced for the next request).
                reply = None
                await conn.close()
                conn = connect()
                conns[index] = conn
            sent += 1
            elapsed = (time.perf_counter() - t0) * 1000
            if reply is not None and endpoint.ok(reply):
                sample.latencies_ms.append(elapsed)
            else:
                sample.errors += 1

    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(one_client(i, c) for i, c in enumerate(conns)))
        sample.seconds = time.perf_counter() - t0
    finally:
        for conn in conns:
            await conn.close()
    return sample


@dataclass
class Result:
    endpoint: Endpoint
    single: list[Sample] = field(default_factory=list)
    loaded: list[Sample] = field(default_factory=list)

    def row(self) -> list[str]:
        single = [x for s in self.single for x in s.latencies_ms]
        p50s = [percentile(s.latencies_ms, 50) for s in self.loaded]
        p99s = [percentile(s.latencies_ms, 99) for s in self.loaded]
        rates = [s.rate for s in self.loaded]
        answered = max(1, sum(len(s.latencies_ms) for s in self.loaded))
        cpu = sum(s.server_cpu_s for s in self.loaded) / answered
        client_cpu = sum(s.client_cpu_s for s in self.loaded) / answered
        machine_cpu = sum(s.machine_cpu_s for s in self.loaded) / answered
        errors = sum(s.errors for s in self.loaded + self.single)
        p99 = median(p99s)
        target = self.endpoint.target_ms
        verdict = "-" if target is None else "yes" if p99 < target else "NO"
        if not self.loaded:
            verdict = "not offered"
        return [
            self.endpoint.name,
            fmt(percentile(single, 50)),
            fmt(percentile(single, 99)),
            fmt(median(p50s)),
            fmt(p99),
            fmt(max(p99s) if p99s else None),
            fmt(median(rates), 0),
            fmt(cpu * 1000, 2),
            fmt(client_cpu * 1000, 2),
            fmt(machine_cpu * 1000, 2),
            str(errors),
            "-" if target is None else f"< {target:.0f}",
            verdict,
        ]


HEADERS = [
    "endpoint",
    "c1 p50",
    "c1 p99",
    "c32 p50",
    "c32 p99",
    "c32 worst p99",
    "req/s",
    "server CPU ms/req",
    "client CPU ms/req",
    "machine CPU ms/req",
    "errors",
    "target p99",
    "meets",
]


@dataclass(frozen=True)
class Target:
    """One running API to measure."""

    label: str
    url: str
    key: str
    pid: int | None
    source: str = "working tree"


async def measure(targets: list[Target], args: argparse.Namespace) -> dict[str, list[Result]]:
    """Every endpoint on every target; targets alternate per endpoint (and swap order every run).

    Each phase opens its own connections (one per client), after a warm-up of the server:
    connections left idle while the other target is measured would hit the keep-alive timeout.
    """
    endpoints = FLOORS if args.strawberry_floor else ENDPOINTS
    chosen = [e for e in endpoints if not args.only or any(o.lower() in e.name.lower() for o in args.only)]
    results = {t.label: [Result(e) for e in chosen] for t in targets}

    def connector(target: Target) -> Callable[[], HttpClient]:
        return lambda: HttpClient(target.url, {"X-API-Key": target.key})

    cursors: dict[str, list[str | None]] = {}
    for target in targets:
        conn = connector(target)()
        try:
            if any(e.by_cursor for e in chosen):
                # Each API's own walk: a package without cursor pagination finds none and its
                # cursor rows are left out.
                cursors[target.label] = await find_cursors(conn)
            for endpoint in chosen:
                if endpoint.by_cursor and not cursors[target.label]:
                    continue
                first = await endpoint.call(conn, cursors=cursors.get(target.label))
                if not endpoint.ok(first, thorough=True):
                    detail = f"{first.status_code} {first.content[:500]!r}"
                    raise SystemExit(f"{target.label} {endpoint.name}: {detail}")
        finally:
            await conn.close()
    for run in range(args.runs):
        order = targets if run % 2 == 0 else list(reversed(targets))
        for index in range(len(chosen)):
            for target in order:
                result = results[target.label][index]
                found = cursors.get(target.label)
                if result.endpoint.by_cursor and not found:
                    continue
                if args.verbose:
                    print(f"  run {run + 1} {target.label} {result.endpoint.name}", flush=True)
                connect = connector(target)
                clients = args.concurrency
                await closed_loop(connect, result.endpoint, args.warmup, clients, found)
                result.single.append(
                    await closed_loop(connect, result.endpoint, args.single, 1, found, clients)
                )
                cpu0 = cpu_seconds(target.pid, with_children=True) if target.pid else 0.0
                client0 = time.process_time()
                machine0 = machine_busy_seconds()
                sample = await closed_loop(connect, result.endpoint, args.requests, clients, found)
                sample.machine_cpu_s = machine_busy_seconds() - machine0
                if target.pid:
                    sample.server_cpu_s = cpu_seconds(target.pid, with_children=True) - cpu0
                sample.client_cpu_s = time.process_time() - client0
                result.loaded.append(sample)
    return results


def comparison(baseline: list[Result], current: list[Result]) -> str:
    rows = []
    for before, after in zip(baseline, current, strict=True):
        p99_before = median([percentile(s.latencies_ms, 99) for s in before.loaded])
        p99_after = median([percentile(s.latencies_ms, 99) for s in after.loaded])
        rate_before = median([s.rate for s in before.loaded])
        rate_after = median([s.rate for s in after.loaded])
        rows.append(
            [
                before.endpoint.name,
                fmt(p99_before),
                fmt(p99_after),
                f"{p99_after / p99_before:.2f}" if p99_before == p99_before else "-",
                fmt(rate_before, 0),
                fmt(rate_after, 0),
                f"{rate_after / rate_before:.2f}" if rate_before == rate_before and rate_before else "-",
            ]
        )
    headers = [
        "endpoint",
        "before p99",
        "after p99",
        "p99 ratio",
        "before req/s",
        "after req/s",
        "req/s ratio",
    ]
    return table(headers, rows)


def start_profiler(pid: int, out: str, fmt_: str) -> subprocess.Popen[bytes]:
    """py-spy sampling the API process until it is sent SIGINT."""
    spy = str(Path(sys.executable).with_name("py-spy"))
    profiler = subprocess.Popen(
        [spy, "record", "-p", str(pid), "-o", out, "-f", fmt_, "-r", "200"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    return profiler


def stop_profiler(profiler: subprocess.Popen[bytes] | None) -> None:
    if profiler is None:
        return
    profiler.send_signal(signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        profiler.wait(60)


def start_strawberry(procs: Procs, variant: str) -> Target:
    """Strawberry alone (``bench.strawberry_floor``), served by uvicorn as ``serve`` serves ours."""
    port = free_port()
    proc = procs.start(
        f"strawberry-{variant}",
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            f"bench.strawberry_floor:{variant}",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        bench_env(),
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}{HEALTH}", proc)
    label = "Strawberry alone" + (", parse and validation caches" if variant == "cached" else ", as shipped")
    return Target(label, url, "", proc.pid, source="bench/strawberry_floor.py")


def run(args: argparse.Namespace) -> None:
    if args.wait_quiet:
        wait_for_quiet()
    print_facts()
    procs = Procs("scale")
    profiler: subprocess.Popen[bytes] | None = None
    targets: list[Target] = []
    try:
        if args.url:
            targets.append(Target("current", args.url, args.key, args.pid))
        else:
            if not asyncio.run(database_exists(args.database)):
                raise SystemExit(f"{args.database} does not exist: run python -m bench.load_rows first")
            if args.baseline:
                base = start_api(
                    procs,
                    args.database,
                    source=Path(args.baseline),
                    name="serve-baseline",
                    extra_env=READ_ONLY_ENV,
                )
                targets.append(
                    Target("baseline", base.url, base.operator_key(), base.proc.pid, args.baseline)
                )
            for workers in args.api_workers:
                label = "current" if len(args.api_workers) == 1 else f"current, serve --workers {workers}"
                api = start_api(
                    procs, args.database, workers=workers, name=f"serve-w{workers}", extra_env=READ_ONLY_ENV
                )
                targets.append(Target(label, api.url, api.operator_key(), api.proc.pid))
        current = targets[-1]
        if args.strawberry_floor:
            targets += [start_strawberry(procs, variant) for variant in ("shipped", "cached")]
        if args.profile and current.pid:
            profiler = start_profiler(current.pid, args.profile, args.profile_format)
        rss_before = {t.label: rss_mb(t.pid, with_children=True) if t.pid else 0.0 for t in targets}
        t0 = time.perf_counter()
        results = asyncio.run(measure(targets, args))
        wall = time.perf_counter() - t0
        rss_after = {t.label: rss_mb(t.pid, with_children=True) if t.pid else 0.0 for t in targets}
    finally:
        stop_profiler(profiler)
        procs.close()
    print()
    print(
        f"{args.database}: {args.runs} runs x {args.requests} requests per endpoint at concurrency "
        f"{args.concurrency} (closed loop), {args.single} at concurrency 1; latencies in ms "
        f"(c32 p50/p99 = median over runs); API processes: {', '.join(map(str, args.api_workers))}"
    )
    for target in targets:
        print()
        if len(targets) > 1:
            print(f"{target.label} ({target.source}):")
        print(table(HEADERS, [r.row() for r in results[target.label]]))
        before, after = rss_before[target.label], rss_after[target.label]
        print(f"API RSS {before:.0f} -> {after:.0f} MiB (all its processes)")
    first = targets[0].label
    for target in targets[1:]:
        print()
        print(f"side by side (same run, alternating): before = {first}, after = {target.label}")
        print(comparison(results[first], results[target.label]))
    print(f"wall {wall:.0f} s")
    if args.profile:
        print(f"profile written to {args.profile}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", default="wa_bench_1m")
    parser.add_argument("--requests", type=int, default=1000, help="per endpoint and run, at concurrency")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--single", type=int, default=50, help="requests per endpoint and run, one at a time")
    parser.add_argument("--warmup", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--api-workers",
        type=lambda v: [int(n) for n in v.split(",")],
        default=[1],
        help="API processes (serve --workers N); a list (1,2) starts one API per value, side by side",
    )
    parser.add_argument("--only", nargs="*", help="endpoints whose name contains one of these")
    parser.add_argument("--wait-quiet", action="store_true", help="wait for load average < 1.5 first")
    parser.add_argument("--profile", help="py-spy output file for the API process during the run")
    parser.add_argument("--profile-format", default="speedscope", choices=("speedscope", "flamegraph", "raw"))
    parser.add_argument(
        "--baseline", help="directory with another worker_automation package to measure side by side"
    )
    parser.add_argument(
        "--strawberry-floor",
        action="store_true",
        help="the floor rows only, side by side with Strawberry alone (bench.strawberry_floor)",
    )
    parser.add_argument("--url", help="measure an already running API instead of starting one")
    parser.add_argument("--key", help="operator key for --url")
    parser.add_argument("--pid", type=int, help="pid of the --url API process (CPU and RSS)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
