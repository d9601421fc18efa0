"""API CPU per request of the pipeline's three endpoints, one endpoint at a time.

The pipeline benchmark says how many jobs a second go through; this one says what each of the
three requests of a job costs the API: ``--jobs`` jobs are created (``POST /api/v1/jobs``), then
claimed (``POST /api/v1/jobs/{id}/start``), then reported done (``/complete``), each phase with
``--in-flight`` requests at a time and no worker running, and the API's CPU time is read around
each phase. ``GET /stats`` is measured the same way as a reference read. The automation's
``max_concurrent_jobs`` is raised first, so that every claim succeeds.

    python -m bench.endpoints --jobs 1000
    python -m bench.baseline --commit fd62805 --out /tmp/wa_base
    python -m bench.endpoints --baseline /tmp/wa_base
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    Api,
    Procs,
    cpu_seconds,
    fmt,
    median,
    print_facts,
    recreate_database,
    sa_url,
    start_api,
    table,
    wait_for_quiet,
)
from bench.job_feed import AUTOMATION, QUEUE, purge
from worker_automation.models.database import Database
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.automations import update_settings
from worker_automation.settings import Settings
from worker_automation.worker.http import HttpClient

PHASES = ("dispatch", "claim", "complete", "stats")
# (method, path, JSON body) of the request with number ``i``.
Request = tuple[str, str, dict[str, Any] | None]


@dataclass
class Variant:
    label: str
    api: Api
    database: str
    key: str
    machine_key: str
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    rate: dict[str, list[float]] = field(default_factory=dict)


async def _send_all(
    url: str, headers: dict[str, str], count: int, make: Callable[[int], Request], in_flight: int
) -> list[Any]:
    """Send ``count`` requests, ``in_flight`` at a time; the JSON ``data`` of each answer."""
    pending = list(range(count))
    answers: list[Any] = [None] * count

    async def sender() -> None:
        client = HttpClient(url, headers, timeout=60)
        try:
            while pending:
                number = pending.pop()
                method, path, body = make(number)
                reply = await client.request(method, path, json_body=body)
                if reply.status_code >= 300:
                    raise SystemExit(f"{method} {path}: {reply.status_code} {reply.text[:300]}")
                answers[number] = reply.json().get("data")
        finally:
            await client.close()

    await asyncio.gather(*(sender() for _ in range(in_flight)))
    return answers


def _phase(
    variant: Variant,
    name: str,
    headers: dict[str, str],
    count: int,
    make: Callable[[int], Request],
    in_flight: int,
) -> list[Any]:
    pid = variant.api.proc.pid
    before = cpu_seconds(pid, with_children=True)
    started = time.perf_counter()
    answers = asyncio.run(_send_all(variant.api.url, headers, count, make, in_flight))
    elapsed = time.perf_counter() - started
    variant.cpu_ms.setdefault(name, []).append((cpu_seconds(pid, with_children=True) - before) / count * 1000)
    variant.rate.setdefault(name, []).append(count / elapsed)
    return answers


def measure(variant: Variant, jobs: int, in_flight: int) -> None:
    operator = {"X-API-Key": variant.key}
    machine = {"X-Worker-Api-Key": variant.machine_key}
    created = _phase(
        variant,
        "dispatch",
        operator,
        jobs,
        lambda i: (
            "POST",
            "/api/v1/jobs",
            {"automation_type": AUTOMATION, "context": {"n": i}, "priority": 0},
        ),
        in_flight,
    )
    ids = [int(item["id"]) for item in created]
    _phase(variant, "claim", machine, jobs, lambda i: ("POST", f"/api/v1/jobs/{ids[i]}/start", {}), in_flight)
    _phase(
        variant,
        "complete",
        machine,
        jobs,
        lambda i: ("POST", f"/api/v1/jobs/{ids[i]}/complete", {"result": {"n": i}}),
        in_flight,
    )
    _phase(
        variant,
        "stats",
        operator,
        jobs,
        lambda _i: ("GET", "/api/v1/worker-automation/stats", None),
        in_flight,
    )
    purge(QUEUE)


async def _raise_limit(database: str, limit: int) -> None:
    db = Database(Settings(database_url=sa_url(database)))
    try:
        await update_settings(db, AUTOMATION, actor=Actor("bench"), max_concurrent_jobs=limit)
    finally:
        await db.close()


def setup(procs: Procs, label: str, database: str, source: Path | None, jobs: int) -> Variant:
    asyncio.run(recreate_database(database))
    api = start_api(procs, database, source=source, name=f"serve-{label}")
    key = api.operator_key(f"bench-{label}")
    machine_key = api.machine_key(f"bench-endpoints-{label}", queue=QUEUE)
    # Claims are made --in-flight at a time and never completed before the claim phase ends.
    asyncio.run(_raise_limit(database, min(1000, jobs)))
    return Variant(label, api, database, key, machine_key)


def run(args: argparse.Namespace) -> None:
    if args.wait_quiet:
        wait_for_quiet()
    print_facts()
    procs = Procs("endpoints")
    try:
        variants = [setup(procs, "current", args.database, None, args.jobs)]
        if args.baseline:
            variants.append(setup(procs, "baseline", f"{args.database}_base", Path(args.baseline), args.jobs))
        for n in range(args.runs):
            for variant in variants if n % 2 == 0 else list(reversed(variants)):
                measure(variant, args.jobs, args.in_flight)
                print(f"  run {n + 1}: {variant.label} done", flush=True)
    finally:
        procs.close()
        purge(QUEUE)
    print()
    print(
        f"{args.jobs:,} requests per endpoint and run, {args.in_flight} in flight, {args.runs} run(s), "
        "one API process, no worker running; medians over runs"
    )
    headers = ["endpoint"]
    for variant in variants:
        headers += [f"{variant.label} CPU ms/req", f"{variant.label} req/s"]
    if len(variants) == 2:
        headers.append("CPU after/before")
    rows = []
    for name in PHASES:
        row = [name]
        for variant in variants:
            row += [fmt(median(variant.cpu_ms[name]), 2), fmt(median(variant.rate[name]), 0)]
        if len(variants) == 2:
            before, after = median(variants[1].cpu_ms[name]), median(variants[0].cpu_ms[name])
            row.append(f"{after / before:.2f}" if before else "-")
        rows.append(row)
    print(table(headers, rows))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--jobs", type=int, default=1000, help="requests per endpoint and run (at most 1000: the claim limit)"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--database", default="wa_bench_endpoints", help="created anew")
    parser.add_argument("--baseline", help="directory with another worker_automation package, run too")
    parser.add_argument("--wait-quiet", action="store_true", help="wait for load average < 1.5 first")
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= 1000:
        parser.error("--jobs must be between 1 and 1000 (every claim is held until the phase ends)")
    return args


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
