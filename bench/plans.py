"""The plans PostgreSQL ran for each read row of ``bench.scale``, taken from the API itself.

A ``serve`` is started with PostgreSQL's ``auto_explain`` on in each of its connections (ANALYZE,
BUFFERS; loaded by a ``sitecustomize`` this script writes, so the service's own statements run as
they always do: prepared, on the pool they always use, with the plan PostgreSQL keeps for them).
Each row's requests are sent one at a time; every statement they ran is grouped by its text and
printed with its executions, median and worst time, buffers, and the plan of its slowest
execution. With two databases (1M and 10M rows) the rows are printed side by side, so a row that
grows shows the statement and the plan that grew.

    python -m bench.plans --database wa_bench_1m,wa_bench_10m
    python -m bench.plans --database wa_bench_10m --only durations,week --requests 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import Procs, database_exists, median, print_facts, start_api, table
from bench.scale import ENDPOINTS, FLOORS, READ_ONLY_ENV, Endpoint, find_cursors
from worker_automation.worker.http import HttpClient

PLANS_FILE_ENV = "WA_BENCH_PLANS_FILE"
MARK = "-- bench.plans row: "

# Imported by the interpreter of ``serve`` at start-up (it is on its PYTHONPATH). Every new
# database connection loads auto_explain for itself and sends each statement's plan back as a
# notice, which is appended to the plans file as one JSON line.
SITECUSTOMIZE = """
import json, os
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.util import await_only

_OUT = os.environ["WA_BENCH_PLANS_FILE"]
_SETUP = (
    "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; "
    "SET auto_explain.log_buffers = on; SET auto_explain.log_format = json; "
    "SET auto_explain.log_level = notice; SET client_min_messages = notice"
)


def _write(connection, message):
    text = getattr(message, "message", "")
    if "plan:" not in text:
        return
    with open(_OUT, "a") as out:
        out.write(json.dumps({"pid": os.getpid(), "message": text}) + "\\n")


@event.listens_for(Engine, "connect")
def _explain_every_statement(dbapi_connection, record):
    driver = getattr(dbapi_connection, "driver_connection", None)
    if driver is None or not hasattr(driver, "add_log_listener"):
        return
    await_only(driver.execute(_SETUP))
    driver.add_log_listener(_write)
"""


@dataclass
class Statement:
    """Every execution of one statement's text within a row."""

    text: str
    durations_ms: list[float] = field(default_factory=list)
    slowest: dict[str, Any] | None = None
    shared_hit: int = 0
    shared_read: int = 0

    def add(self, duration_ms: float, plan: dict[str, Any]) -> None:
        if not self.durations_ms or duration_ms > max(self.durations_ms):
            self.slowest = plan
        self.durations_ms.append(duration_ms)
        top = plan.get("Plan", {})
        self.shared_hit += int(top.get("Shared Hit Blocks", 0))
        self.shared_read += int(top.get("Shared Read Blocks", 0))


def parse_notice(message: str) -> tuple[float, dict[str, Any]] | None:
    """``duration: 1.234 ms  plan:\\n{json}`` -> (1.234, the plan)."""
    head, _, body = message.partition("plan:")
    try:
        duration = float(head.split("duration:")[1].split("ms")[0])
        return duration, json.loads(body)
    except (IndexError, ValueError):
        return None


def statements_of(lines: list[str]) -> list[Statement]:
    by_text: dict[str, Statement] = {}
    for line in lines:
        parsed = parse_notice(json.loads(line)["message"])
        if parsed is None:
            continue
        duration, plan = parsed
        text = " ".join(str(plan.get("Query Text", "")).split())
        by_text.setdefault(text, Statement(text)).add(duration, plan)
    return sorted(by_text.values(), key=lambda s: -sum(s.durations_ms))


def plan_lines(node: dict[str, Any], depth: int = 0) -> Iterator[str]:
    """One line per plan node: its kind, relation or index, rows, loops, time and buffers."""
    what = node.get("Node Type", "?")
    for key in ("Index Name", "Relation Name"):
        if key in node:
            what += f" {key.split()[0].lower()}={node[key]}"
            break
    if "Strategy" in node and node["Strategy"] != "Plain":
        what += f" ({node['Strategy']})"
    rows = node.get("Actual Rows", "?")
    loops = node.get("Actual Loops", "?")
    total = node.get("Actual Total Time", "?")
    hit, read = node.get("Shared Hit Blocks", 0), node.get("Shared Read Blocks", 0)
    yield f"{'  ' * depth}{what}: rows {rows} x {loops} loops, {total} ms, buffers hit {hit} read {read}"
    for key in ("Index Cond", "Filter", "Recheck Cond"):
        if key in node:
            yield f"{'  ' * depth}  {key.lower()}: {node[key][:160]}"
    if node.get("Rows Removed by Filter"):
        yield f"{'  ' * depth}  removed by filter: {node['Rows Removed by Filter']}"
    for child in node.get("Plans", []):
        yield from plan_lines(child, depth + 1)


async def cursors_of(url: str, key: str, endpoint: Endpoint) -> list[str | None] | None:
    """The cursor endpoint's ``after`` cursors (found by walking its pages, before the row)."""
    if not endpoint.by_cursor:
        return None
    conn = HttpClient(url, {"X-API-Key": key})
    try:
        return await find_cursors(conn)
    finally:
        await conn.close()


async def send_row(
    url: str, key: str, endpoint: Endpoint, requests: int, cursors: list[str | None] | None
) -> int:
    """``requests`` of the row, one at a time, each client's page in turn; the failures."""
    conn = HttpClient(url, {"X-API-Key": key})
    failures = 0
    try:
        for n in range(requests):
            reply = await endpoint.call(conn, client=n, sent=0, clients=requests, cursors=cursors)
            failures += not endpoint.ok(reply, thorough=True)
    finally:
        await conn.close()
    return failures


def chosen(only: list[str]) -> list[Endpoint]:
    rows = [e for e in ENDPOINTS if e not in FLOORS]
    if not only:
        return rows
    return [e for e in rows if any(word.lower() in e.name.lower() for word in only)]


def measure(database: str, rows: list[Endpoint], requests: int) -> dict[str, list[Statement]]:
    """Each row's statements on ``database``."""
    with tempfile.TemporaryDirectory(prefix="wa-plans-") as folder:
        site = Path(folder) / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        plans = Path(folder) / "plans.jsonl"
        plans.touch()
        procs = Procs("plans")
        env = {**READ_ONLY_ENV, "PYTHONPATH": str(site), PLANS_FILE_ENV: str(plans)}
        try:
            api = start_api(procs, database, name=f"serve-{database}", extra_env=env)
            key = api.operator_key()
            found: dict[str, list[Statement]] = {}
            for endpoint in rows:
                # Once untimed (first plans, caches), then the row's requests.
                cursors = asyncio.run(cursors_of(api.url, key, endpoint))
                asyncio.run(send_row(api.url, key, endpoint, 1, cursors))
                start = plans.stat().st_size
                failures = asyncio.run(send_row(api.url, key, endpoint, requests, cursors))
                with plans.open() as read:
                    read.seek(start)
                    found[endpoint.name] = statements_of(read.readlines())
                if failures:
                    print(f"{database}: {endpoint.name}: {failures} of {requests} requests failed")
            return found
        finally:
            procs.close()


def short(text: str, width: int = 110) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def report(databases: list[str], found: dict[str, dict[str, list[Statement]]], rows: list[Endpoint]) -> None:
    for endpoint in rows:
        print()
        print(f"## {endpoint.name}")
        per_db = {db: found[db].get(endpoint.name, []) for db in databases}
        texts: list[str] = []
        for statements in per_db.values():
            texts += [s.text for s in statements if s.text not in texts]
        body = []
        for n, text in enumerate(texts, 1):
            line = [str(n)]
            for db in databases:
                s = next((s for s in per_db[db] if s.text == text), None)
                if s is None:
                    line += ["-", "-", "-"]
                    continue
                line += [
                    str(len(s.durations_ms)),
                    f"{median(s.durations_ms):.2f} / {max(s.durations_ms):.2f}",
                    f"{s.shared_hit // len(s.durations_ms)} / {s.shared_read // len(s.durations_ms)}",
                ]
            body.append(line)
        headers = ["#"]
        for db in databases:
            headers += [f"{db} runs", "ms p50 / max", "hit / read per run"]
        print(table(headers, body))
        for n, text in enumerate(texts, 1):
            print(f"{n}. {short(text)}")
            for db in databases:
                s = next((s for s in per_db[db] if s.text == text), None)
                if s is not None and s.slowest is not None:
                    print(f"   {db}, slowest of {len(s.durations_ms)}:")
                    for node in plan_lines(s.slowest.get("Plan", {}), 2):
                        print(f"   {node}")


def run(args: argparse.Namespace) -> None:
    print_facts()
    rows = chosen(args.only)
    if not rows:
        raise SystemExit(f"no row matches {args.only}")
    found: dict[str, dict[str, list[Statement]]] = {}
    for database in args.database:
        if not asyncio.run(database_exists(database)):
            raise SystemExit(f"{database} does not exist: run python -m bench.load_rows first")
        found[database] = measure(database, rows, args.requests)
    print()
    print(
        f"{', '.join(args.database)}: {args.requests} requests per row, one at a time, after one untimed; "
        "every statement they ran, its executions, median and worst time (auto_explain, ANALYZE), "
        "shared buffers per execution, and the plan of its slowest execution"
    )
    report(args.database, found, rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--database",
        type=lambda v: [d for d in v.split(",") if d],
        default=["wa_bench_1m", "wa_bench_10m"],
        help="databases loaded by bench.load_rows, side by side (comma-separated)",
    )
    parser.add_argument("--requests", type=int, default=5, help="requests per row, one at a time")
    parser.add_argument(
        "--only",
        type=lambda v: [w for w in v.split(",") if w],
        default=[],
        help="rows whose name contains one of these words (comma-separated)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    run(parse_args(argv))


if __name__ == "__main__":
    main()
