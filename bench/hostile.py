"""The alias and size attacks of hostile callers against one ``serve`` (PostgreSQL + Redis): RSS
of the API process before, at its peak and after.

A fresh ``worker-automation serve`` on ``wa_bench_hostile``. Then, with a write key and a read-only
key, as an attacker who holds valid keys would:

1. a 10 MB context announced with Content-Length (64 KiB of it sent) and sent chunked (1.06 MiB of
   it sent): both answered 413 before the rest is read;
2. jobs with the largest context allowed (64 KiB each), ``--jobs`` of them;
3. 30 aliases of ``worker(id) { context result }`` on one of them, ``--rounds`` times from
   ``--concurrency`` clients at once (each answer about 2 MB);
4. 30 aliases of ``workers(perPage: 100) { items { context result } }``: refused by the cost limit;
5. the largest list that passes, ``workers(perPage: 100) { items { id context result } }`` (about
   6.5 MB per answer), ``--rounds`` times from ``--concurrency`` clients;
6. two such pages in one query (13 MB): within the cost limit, refused by the answer-size limit
   (``WA_GRAPHQL_MAX_RESPONSE_BYTES``, 8 MiB) as it is built;
7. the fragment fan-out, ``query { ...F0 } fragment F0 on Query { ...F1 ...F1 } ... fragment Fn
   on Query { __typename }`` (2^n spreads from ~40n bytes), for each n of ``--fan-out``, with the
   read-only key and with no key, by POST and by GET: the time to the answer and, measured at the
   same time from another connection, the latency of ``/healthz`` (median and worst). Target
   (bench/README.md, Targets): answered or refused within 100 ms, ``/healthz`` unaffected.

"Before" is read after a few ordinary requests (the process has loaded what any request needs);
RSS is sampled every 20 ms while the attacks run; "after" is read ``--settle`` seconds after the
last answer. Targets (bench/README.md): peak < 400 MB, after within 10% of before.

    python -m bench.hostile --jobs 200 --rounds 20 --concurrency 4
    python -m bench.hostile --fan-out-only
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import threading
import time
from typing import Any

import httpx

from bench import hostile_ws
from bench.common import (
    Procs,
    fmt,
    median,
    print_facts,
    recreate_database,
    rss_mb,
    run,
    run_cli,
    start_api,
    table,
)

DATABASE = "wa_bench_hostile"
CONTEXT_BLOB = 64 * 1024 - 64  # the JSON of {"blob": "..."} stays just under 64 KiB
READ_SCOPE = "worker_automation:read"
FAN_OUT = [10, 14, 18, 22, 26, 30, 34, 40]
# An answer slower than this is reported as such (an API that walks every spread never answers n=30).
FAN_OUT_TIMEOUT = 60.0
_RUNS = itertools.count()


class RssSampler:
    """Samples a process's RSS on a thread until stopped; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def _many(concurrency: int, rounds: int, one: Any) -> list[Any]:
    """``rounds`` calls of ``one()``, ``concurrency`` at a time."""
    results: list[Any] = []
    left = rounds
    while left > 0:
        batch = min(concurrency, left)
        results += await asyncio.gather(*(one() for _ in range(batch)))
        left -= batch
    return results


async def partial_upload(url: str, key: str, length: int, *, chunked: bool) -> int:
    """Start a body of ``length`` bytes (declared, or chunked without a length), send a little over
    1 MiB of it, and read the answer: the status the server gives before the rest is read (a client
    that waits for it, as one sending ``Expect: 100-continue`` would, never sends the rest)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
    head = (
        f"POST /api/v1/jobs HTTP/1.1\r\nHost: {host}\r\nX-API-Key: {key}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    )
    writer.write(head.encode())
    piece = b"{" + b" " * (64 * 1024 - 1)
    for _ in range(17 if chunked else 1):
        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), timeout=30)
    writer.close()
    return int(status_line.split()[1])


async def attack(url: str, write_key: str, read_key: str, args: argparse.Namespace) -> list[list[Any]]:
    rows: list[list[Any]] = []
    writer = {"X-API-Key": write_key}
    reader = {"X-API-Key": read_key}
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:

        async def graphql(query: str) -> tuple[int, int, str]:
            answer = await client.post("/graphql", json={"query": query}, headers=reader)
            body = answer.json()
            code = (
                (body.get("errors") or [{}])[0].get("extensions", {}).get("code", "")
                if body.get("errors")
                else ""
            )
            return answer.status_code, len(answer.content), code or "data"

        big = json.dumps({"automation_type": "demo.echo", "context": {"blob": "x" * 10_000_000}}).encode()
        declared = await partial_upload(url, write_key, len(big), chunked=False)
        streamed = await partial_upload(url, write_key, len(big), chunked=True)
        rows.append(["10 MB context, Content-Length", 1, declared, "", "answered after 64 KiB sent"])
        rows.append(["10 MB context, chunked", 1, streamed, "", "answered after 1.06 MiB sent"])

        too_big = await client.post(
            "/api/v1/jobs",
            json={"automation_type": "demo.echo", "context": {"blob": "x" * (65 * 1024)}},
            headers=writer,
        )
        rows.append(["65 KiB context", 1, too_big.status_code, len(too_big.content), ""])

        per_batch = 12  # 12 x 64 KiB stays under the 1 MiB body limit
        created: list[int] = []
        while len(created) < args.jobs:
            count = min(per_batch, args.jobs - len(created))
            job = {"automation_type": "demo.echo", "context": {"blob": "y" * CONTEXT_BLOB}}
            answer = await client.post("/api/v1/jobs/batch", json={"jobs": [job] * count}, headers=writer)
            if answer.status_code not in (201, 503):
                raise SystemExit(f"batch refused: {answer.status_code} {answer.text[:300]}")
            created += [item["id"] for item in answer.json()["data"]] if answer.status_code == 201 else []
        rows.append([f"64 KiB contexts ({len(created)} jobs)", len(created) // per_batch + 1, 201, "", ""])

        target = created[0]
        aliases = " ".join(f"a{i}: worker(id: {target}) {{ context result }}" for i in range(30))
        answers = await _many(args.concurrency, args.rounds, lambda: graphql(f"{{ {aliases} }}"))
        rows.append(["30 aliases of worker { context result }", len(answers), *answers[-1]])

        page_aliases = " ".join(
            f"a{i}: workers(perPage: 100) {{ items {{ context result }} }}" for i in range(30)
        )
        answers = await _many(args.concurrency, args.rounds, lambda: graphql(f"{{ {page_aliases} }}"))
        rows.append(["30 aliases of workers(perPage: 100)", len(answers), *answers[-1]])

        page = "{ workers(perPage: 100) { items { id context result } } }"
        answers = await _many(args.concurrency, args.rounds, lambda: graphql(page))
        rows.append(["workers(perPage: 100) { context result }", len(answers), *answers[-1]])

        two_pages = (
            "{ a: workers(perPage: 100) { items { id context } } "
            "b: workers(page: 2, perPage: 100) { items { id context } } }"
        )
        answers = await _many(args.concurrency, args.rounds, lambda: graphql(two_pages))
        rows.append(["2 pages of 100 with context (over 8 MiB)", len(answers), *answers[-1]])

        purged = await client.post(
            "/api/v1/worker-automation/broker/purge-queue/scan?confirm=true", headers=writer
        )
        if purged.status_code != 200:
            print(f"purge of queue scan: {purged.status_code} {purged.text[:200]}")
    return rows


def fan_out_document(n: int) -> str:
    """``n`` fragments, each spreading the next twice; a name of its own per run defeats caches."""
    tag = f"R{next(_RUNS)}_"
    chain = " ".join(f"fragment {tag}F{i} on Query {{ ...{tag}F{i + 1} ...{tag}F{i + 1} }}" for i in range(n))
    return f"query {{ ...{tag}F0 }} {chain} fragment {tag}F{n} on Query {{ __typename }}"


async def health_during(url: str, done: asyncio.Event) -> list[float]:
    """``/healthz`` latencies (ms), one request after another, until ``done`` (at least one)."""
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=FAN_OUT_TIMEOUT * 2) as client:
        while not latencies or not done.is_set():
            started = time.perf_counter()
            await client.get("/healthz")
            latencies.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.01)
    return latencies


async def fan_out_attack(url: str, read_key: str, sizes: list[int]) -> list[list[Any]]:
    """Rows of the fan-out attack: per n, key and method, the answer time and ``/healthz``."""
    rows: list[list[Any]] = []
    async with httpx.AsyncClient(base_url=url, timeout=FAN_OUT_TIMEOUT) as client:
        for n in sizes:
            for keyed in (True, False):
                headers = {"X-API-Key": read_key} if keyed else {}
                for method in ("POST", "GET"):
                    document = fan_out_document(n)
                    done = asyncio.Event()
                    health = asyncio.create_task(health_during(url, done))
                    await asyncio.sleep(0.02)  # the first /healthz is on its way
                    started = time.perf_counter()
                    try:
                        if method == "POST":
                            answer = await client.post("/graphql", json={"query": document}, headers=headers)
                        else:
                            answer = await client.get("/graphql", params={"query": document}, headers=headers)
                        status: Any = answer.status_code
                        errors = answer.json().get("errors") or [{}]
                        outcome = errors[0].get("extensions", {}).get("code", "") or "data"
                    except httpx.TimeoutException:
                        status, outcome = "timeout", f"no answer in {FAN_OUT_TIMEOUT:.0f} s"
                    elapsed = (time.perf_counter() - started) * 1000
                    done.set()
                    latencies = await health
                    rows.append(
                        [
                            n,
                            len(document),
                            "read key" if keyed else "none",
                            method,
                            status,
                            outcome,
                            fmt(elapsed),
                            fmt(median(latencies)),
                            fmt(max(latencies)),
                        ]
                    )
    return rows


def print_fan_out(url: str, read_key: str, sizes: list[int]) -> None:
    rows = run(fan_out_attack(url, read_key, sizes))
    headers = [
        "n",
        "bytes",
        "key",
        "method",
        "status",
        "answer",
        "answer ms",
        "healthz p50 ms",
        "healthz max ms",
    ]
    print(table(headers, rows))


def warm_up(url: str, write_key: str, read_key: str, concurrency: int) -> None:
    """Ordinary requests of each kind the attacks send, ``concurrency`` at a time (so the process
    has its connections and caches for that much traffic before "before" is read)."""

    async def ordinary() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:

            async def one(n: int) -> None:
                await client.post(
                    "/api/v1/jobs",
                    json={"automation_type": "demo.echo", "context": {"n": n}},
                    headers={"X-API-Key": write_key},
                )
                await client.post(
                    "/graphql",
                    json={
                        "query": "{ workers(perPage: 5) { items { id context result } } "
                        f"w{n}: stats {{ total }} }}"
                    },
                    headers={"X-API-Key": read_key},
                )
                await client.get(
                    f"/api/v1/worker-automation/?per_page=5&page={n}", headers={"X-API-Key": read_key}
                )

            for round_ in range(3):
                await asyncio.gather(*(one(round_ * concurrency + i) for i in range(concurrency)))

    run(ordinary())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200, help="jobs with a 64 KiB context")
    parser.add_argument("--rounds", type=int, default=20, help="requests per attack")
    parser.add_argument("--concurrency", type=int, default=4, help="requests of an attack at once")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before reading RSS after")
    parser.add_argument(
        "--fan-out", type=int, nargs="+", default=FAN_OUT, help="fragment counts of the fan-out attack"
    )
    parser.add_argument("--fan-out-only", action="store_true", help="run only the fan-out attack")
    args = parser.parse_args()
    print_facts()
    run(recreate_database(DATABASE))
    procs = Procs("hostile")
    try:
        api = start_api(procs, DATABASE)
        write_key = api.operator_key("hostile-writer")
        read_key = run_cli(["keys", "create", "--perfil", "administrador", "--scopes", READ_SCOPE], api.env)
        warm_up(api.url, write_key, read_key, args.concurrency)
        if args.fan_out_only:
            print_fan_out(api.url, read_key, args.fan_out)
            return
        before = rss_mb(api.proc.pid)
        with RssSampler(api.proc.pid) as sampler:
            rows = run(attack(api.url, write_key, read_key, args))
        time.sleep(args.settle)
        after = rss_mb(api.proc.pid)
        peak = max(sampler.peak, after)
        print(table(["attack", "requests", "status", "bytes (last)", "answer (last)"], rows))
        verdict_peak = "ok" if peak < 400 else "OVER"
        verdict_after = "ok" if after <= before * 1.10 else "OVER"
        print(
            table(
                ["RSS before MB", "peak MB", "after MB", "peak < 400 MB", "after within 10%"],
                [[fmt(before), fmt(peak), fmt(after), verdict_peak, verdict_after]],
            )
        )
        print_fan_out(api.url, read_key, args.fan_out)
        # The websocket attacks (memory, revocation) on the same server.
        hostile_ws.report(api, hostile_ws.options().parse_args([]))
    finally:
        procs.close()


if __name__ == "__main__":
    main()
