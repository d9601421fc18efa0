"""The websocket attacks of a caller with valid keys against one ``serve`` (PostgreSQL + Redis):
RSS of the API process around the memory attack, and how long a revoked key's subscription lives.

1. Memory: a read-only key, ``--jobs`` jobs with 60 KB contexts; then ``--sockets`` sockets (1 and
   4 by default) each send ``--operations`` ``subscribe`` frames of
   ``{ workers(perPage: 100) { items { id context result } } }`` at once and read every answer;
   ``--repeats`` times each. RSS before, the peak (sampled every 20 ms) and after (``--settle``
   seconds after the sockets closed), with what the operations got (data, or the error codes of
   the budgets: the operations limit per socket, RESPONSE_TOO_LARGE for the bytes in flight).
2. Revocation: a key's ``workerEvents`` subscription is open over graphql-transport-ws (and one
   over the legacy graphql-ws); ``worker-automation keys revoke`` runs; the time from the command's
   start, and from its end, to the subscription's close frame (or UNAUTHENTICATED error).

Targets (bench/README.md): peak < 400 MB and after within 10% of before, every repeat; a revoked
key's subscriptions end within 5 s.

    python -m bench.hostile_ws --jobs 130 --operations 100 --sockets 1,4 --repeats 3

``python -m bench.hostile`` runs both after its own attacks, on its server, with these defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from typing import Any

import httpx
from sqlalchemy import make_url
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from bench.common import (
    Api,
    Procs,
    fmt,
    pg_connect,
    print_facts,
    recreate_database,
    rss_mb,
    run,
    run_cli,
    sa_url,
    start_api,
    table,
)
from worker_automation.broker.events import publishing_bus
from worker_automation.models.database import Database
from worker_automation.resolvers.auth import revoke_key
from worker_automation.settings import Settings

DATABASE = "wa_bench_hostile_ws"
CONTEXT_BLOB = 60 * 1000
READ_SCOPE = "worker_automation:read"
PAGE = "{ workers(perPage: 100) { items { id context result } } }"
EVENTS = "subscription { workerEvents { kind worker { id } } }"
TRANSPORT, LEGACY = "graphql-transport-ws", "graphql-ws"


async def create_jobs(url: str, write_key: str, count: int) -> None:
    per_batch = 12  # 12 x 60 KB stays under the 1 MiB body limit
    job = {"automation_type": "demo.echo", "context": {"blob": "y" * CONTEXT_BLOB}}
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        made = 0
        while made < count:
            batch = min(per_batch, count - made)
            answer = await client.post(
                "/api/v1/jobs/batch", json={"jobs": [job] * batch}, headers={"X-API-Key": write_key}
            )
            if answer.status_code != 201:
                raise SystemExit(f"batch refused: {answer.status_code} {answer.text[:300]}")
            made += batch


async def opened(ws_url: str, key: str, protocol: str = TRANSPORT) -> ClientConnection:
    """A socket past ``connection_ack`` (answers of any size are read)."""
    ws = await connect(ws_url, subprotocols=[Subprotocol(protocol)], max_size=None, open_timeout=30)
    await ws.send(json.dumps({"type": "connection_init", "payload": {"X-API-Key": key}}))
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if message["type"] == "connection_ack":
            return ws
        if message["type"] not in ("ka", "ping", "pong"):
            raise SystemExit(f"socket refused: {message}")


async def flood(ws: ClientConnection, operations: int) -> Counter[str]:
    """``operations`` subscribe frames of the big page, then every answer read: what each got."""
    outcomes: Counter[str] = Counter()
    for n in range(operations):
        await ws.send(json.dumps({"type": "subscribe", "id": str(n), "payload": {"query": PAGE}}))
    pending = set(map(str, range(operations)))
    try:
        while pending:
            message = json.loads(await asyncio.wait_for(ws.recv(), 120))
            kind, op_id = message.get("type"), message.get("id")
            if kind == "next":
                errors = message["payload"].get("errors")
                outcomes[errors[0]["extensions"]["code"] if errors else "data"] += 1
            elif kind == "error":
                outcomes[message["payload"][0].get("extensions", {}).get("code", "error")] += 1
                pending.discard(op_id)
            elif kind == "complete":
                pending.discard(op_id)
    except ConnectionClosed as exc:
        outcomes[f"closed {exc.rcvd.code if exc.rcvd else '?'}"] += 1
    return outcomes


class Sampler:
    """The peak RSS of a process, sampled every 20 ms on the event loop's behalf."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, await asyncio.to_thread(rss_mb, self.pid))
            await asyncio.sleep(0.02)

    async def __aenter__(self) -> Sampler:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def memory_attack(api: Api, read_key: str, args: argparse.Namespace) -> list[list[Any]]:
    ws_url = api.url.replace("http", "ws", 1) + "/graphql"
    rows: list[list[Any]] = []
    for sockets in args.sockets:
        for repeat in range(1, args.repeats + 1):
            before = rss_mb(api.proc.pid)
            started = time.perf_counter()
            async with Sampler(api.proc.pid) as sampler:
                conns = [await opened(ws_url, read_key) for _ in range(sockets)]
                results = await asyncio.gather(*(flood(ws, args.operations) for ws in conns))
                for ws in conns:
                    await ws.close()
            took = time.perf_counter() - started
            await asyncio.sleep(args.settle)
            after = rss_mb(api.proc.pid)
            peak = max(sampler.peak, after)
            got = sum(results, Counter())
            verdict = "ok" if peak < 400 and after <= before * 1.10 else "OVER"
            outcome = ", ".join(f"{code} {n}" for code, n in got.most_common())
            rows.append([sockets, repeat, fmt(took), fmt(before), fmt(peak), fmt(after), verdict, outcome])
    return rows


async def revocation_delay(api: Api, protocol: str, how: str) -> list[Any]:
    """Seconds from a key's revocation (its start; its end) to the end of its subscription.

    ``how``: ``cli`` runs ``worker-automation keys revoke`` (a process that starts, revokes and
    announces); ``resolver`` calls ``revoke_key`` here with a bus (the change and its notice
    alone); ``silent`` revokes with a bare UPDATE and no notice (the periodic check finds it).
    """
    secret = run_cli(["keys", "create", "--perfil", "funcionario", "--scopes", READ_SCOPE], api.env)
    key_id = await key_id_of(api, secret)
    ws_url = api.url.replace("http", "ws", 1) + "/graphql"
    ws = await opened(ws_url, secret, protocol)
    start_type = "subscribe" if protocol == TRANSPORT else "start"
    await ws.send(json.dumps({"type": start_type, "id": "events", "payload": {"query": EVENTS}}))
    await asyncio.sleep(0.5)  # the subscription is listening

    ended: asyncio.Future[tuple[float, str]] = asyncio.get_running_loop().create_future()

    async def watch() -> None:
        try:
            while True:
                message = json.loads(await ws.recv())
                if message.get("type") in ("error", "complete"):
                    payload = message.get("payload") or {}
                    code = payload.get("extensions", {}).get("code") if isinstance(payload, dict) else None
                    ended.set_result((time.perf_counter(), f"{message['type']} {code or payload}"))
                    return
        except ConnectionClosed as exc:
            if not ended.done():
                ended.set_result((time.perf_counter(), f"close {exc.rcvd.code if exc.rcvd else '?'}"))

    watcher = asyncio.create_task(watch())
    started = time.perf_counter()
    await revoke(api, key_id, how)
    done = time.perf_counter()
    try:
        at, end = await asyncio.wait_for(ended, 30)
        since_start, since_end = fmt(at - started, 2), fmt(at - done, 2)
    except TimeoutError:
        since_start, since_end, end = "> 30", "> 30", "still open"
    watcher.cancel()
    await ws.close()
    return [protocol, how, since_start, since_end, end]


async def revoke(api: Api, key_id: int, how: str) -> None:
    if how == "cli":
        await asyncio.to_thread(run_cli, ["keys", "revoke", str(key_id)], api.env)
        return
    if how == "silent":
        conn = await pg_connect(database_of(api))
        try:
            await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE id = $1", key_id)
        finally:
            await conn.close()
        return
    settings = Settings(database_url=sa_url(database_of(api)), redis_url=api.env["WA_REDIS_URL"])
    db = Database(settings)
    try:
        async with publishing_bus(api.env["WA_REDIS_URL"], api.env["WA_REDIS_PREFIX"]) as events:
            await revoke_key(db, key_id, events)
    finally:
        await db.close()


def database_of(api: Api) -> str:
    """The database ``api`` serves (``bench.hostile`` runs these attacks on its own)."""
    return str(make_url(api.env["WA_DATABASE_URL"]).database)


async def key_id_of(api: Api, secret: str) -> int:
    conn = await pg_connect(database_of(api))
    try:
        return int(await conn.fetchval("SELECT id FROM api_keys WHERE prefix = $1", secret[:10]))
    finally:
        await conn.close()


def options() -> argparse.ArgumentParser:
    """The command line (``bench.hostile`` runs these attacks with its defaults)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=130, help="jobs with a 60 KB context")
    parser.add_argument("--operations", type=int, default=100, help="subscribe frames per socket")
    parser.add_argument("--sockets", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before reading RSS after")
    parser.add_argument(
        "--serve-env",
        action="append",
        default=[],
        metavar="WA_NAME=VALUE",
        help="a setting for the server (say, a budget lifted to see what it bounds); repeatable",
    )
    return parser


def main() -> None:
    args = options().parse_args()
    print_facts()
    run(recreate_database(DATABASE))
    procs = Procs("hostile-ws")
    try:
        api = start_api(procs, DATABASE, extra_env=dict(item.split("=", 1) for item in args.serve_env))
        report(api, args)
    finally:
        procs.close()


def report(api: Api, args: argparse.Namespace) -> None:
    """Both attacks against ``api``, their tables printed (also run by ``bench.hostile``)."""
    write_key = api.operator_key("hostile-ws-writer")
    read_key = run_cli(["keys", "create", "--perfil", "funcionario", "--scopes", READ_SCOPE], api.env)
    run(create_jobs(api.url, write_key, args.jobs))
    rows = run(memory_attack(api, read_key, args))
    print(
        table(
            ["sockets", "repeat", "seconds", "RSS before MB", "peak MB", "after MB", "targets", "answers"],
            rows,
        )
    )
    delays = [
        run(revocation_delay(api, protocol, how))
        for how in ("cli", "resolver", "silent")
        for protocol in (TRANSPORT, LEGACY)
    ]
    print(table(["protocol", "revoked by", "s from its start", "s from its end", "ended by"], delays))


if __name__ == "__main__":
    main()
