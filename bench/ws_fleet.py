"""Websocket subscribers of the subscriptions benchmark, in this process or spread over several.

Ten thousand subscribers read ~10,000 messages per event: in one client process that reading alone
(~20 us each) is ~200 ms of one core, and the last subscriber's latency would be mostly the load
generator's. A :class:`Fleet` holds the subscribers either here (one process, as before) or in
``--client-procs`` child processes started from this module, each opening its share and answering
a few line commands on stdin/stdout (JSON, one per line):

- ``{"cmd": "wait", "n": N, "within": S}`` -> ``{"delivered": bool}``: event N reached all of them;
- ``{"cmd": "mark"}`` -> ``{}``: the clients' CPU is counted from now;
- ``{"cmd": "report", "events": M}`` -> ``{"latencies": [...], "cpu": seconds}``: milliseconds from
  send to arrival of events 0..M-1, and the process's CPU since the mark;
- ``{"cmd": "quit"}``.

The send stamp is the publisher's ``time.time()`` and the arrival the client's: one machine, one
clock. The open-files limit is raised to its hard limit in every client process.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from typing import Any

from bench.ws_client import WsClient

CONNECT_CONCURRENCY = 100
CONNECT_ATTEMPTS = 3


def raise_open_files() -> int:
    """The soft open-files limit raised to the hard one (a socket per subscriber); the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Subscriber:
    """One websocket client; ``latencies`` maps event number -> seconds from send to arrival."""

    def __init__(self) -> None:
        self.latencies: dict[int, float] = {}
        self.resyncs = 0
        self.acked: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.connection: WsClient | None = None

    def on_message(self, raw: bytes, arrived: float) -> None:
        message = json.loads(raw)
        kind = message.get("type")
        if kind == "next":
            meta = message["payload"]["data"]["workerEvents"]["worker"]["metadataJson"]
            if meta is None:  # a RESYNC: nothing to time
                self.resyncs += 1
                return
            self.latencies[int(meta["n"])] = arrived - float(meta["sent"])
        elif not self.acked.done():
            self.acked.set_result(message)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


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
    try:
        ack = await asyncio.wait_for(subscriber.acked, 60)
    except TimeoutError:
        connection.close()
        raise TimeoutError("no connection_ack in 60 s") from None
    if ack.get("type") != "connection_ack":
        raise SystemExit(f"connection refused: {ack}")
    connection.send_text(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
    return subscriber


async def open_subscribers(
    ws_url: str, key: str, compression: str | None, queries: list[str]
) -> list[Subscriber]:
    """One subscriber per query (in order), at most CONNECT_CONCURRENCY opening at once. A
    connection that fails to open is tried again (a few times): with thousands opening on a busy
    machine, a SYN can be dropped by a full accept queue and its retry come seconds later."""
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

    async def one(query: str) -> Subscriber:
        async with gate:
            for attempt in range(CONNECT_ATTEMPTS):
                try:
                    return await subscribe(ws_url, key, compression, query)
                except (OSError, TimeoutError) as exc:
                    print(
                        f"subscriber not opened (attempt {attempt + 1}): {exc!r}", file=sys.stderr, flush=True
                    )
                    if attempt == CONNECT_ATTEMPTS - 1:
                        raise
            raise AssertionError("unreachable")

    return list(await asyncio.gather(*(one(query) for query in queries)))


async def wait_delivered(subscribers: list[Subscriber], n: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if all(n in s.latencies for s in subscribers):
            return True
        await asyncio.sleep(0.05)
    return False


def latencies_ms(subscribers: list[Subscriber], events: int) -> list[float]:
    return [s.latencies[n] * 1000 for s in subscribers for n in range(events) if n in s.latencies]


class Fleet:
    """The subscribers of one run: here when ``processes`` is 0, else spread over child processes."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self.local: list[Subscriber] = []
        self._children: list[asyncio.subprocess.Process] = []
        self._cpu_start = 0.0

    async def open(self, ws_url: str, key: str, compression: str | None, queries: list[str]) -> None:
        if not self.processes:
            self.local = await open_subscribers(ws_url, key, compression, queries)
            return
        shares = [queries[i :: self.processes] for i in range(self.processes)]
        for share in shares:
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.ws_fleet",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 26,
            )  # fmt: skip
            self._children.append(child)
            setup = {"ws_url": ws_url, "key": key, "compression": compression, "queries": share}
            await self._send(child, setup)
        for child in self._children:
            answer = await self._read(child)
            if "error" in answer:
                raise SystemExit(f"client process failed: {answer['error']}")

    async def wait_delivered(self, n: int, within: float) -> bool:
        if not self.processes:
            return await wait_delivered(self.local, n, within)
        answers = await self._ask_all({"cmd": "wait", "n": n, "within": within})
        return all(answer["delivered"] for answer in answers)

    async def mark(self) -> None:
        """Count the clients' CPU from now."""
        self._cpu_start = time.process_time()
        if self.processes:
            await self._ask_all({"cmd": "mark"})

    async def results(self, events: int) -> tuple[list[float], float]:
        """Latencies (ms) of events 0..events-1 over every subscriber, and the clients' CPU seconds
        since :meth:`mark`."""
        if not self.processes:
            return latencies_ms(self.local, events), time.process_time() - self._cpu_start
        answers = await self._ask_all({"cmd": "report", "events": events})
        latencies = [value for answer in answers for value in answer["latencies"]]
        return latencies, sum(answer["cpu"] for answer in answers)

    async def close(self) -> None:
        for subscriber in self.local:
            subscriber.close()
        for child in self._children:
            if child.returncode is None:
                try:
                    await self._send(child, {"cmd": "quit"})
                    await asyncio.wait_for(child.wait(), 30)
                except (TimeoutError, ConnectionError):
                    child.kill()
                    await child.wait()

    async def _ask_all(self, command: dict[str, Any]) -> list[dict[str, Any]]:
        for child in self._children:
            await self._send(child, command)
        return [await self._read(child) for child in self._children]

    @staticmethod
    async def _send(child: asyncio.subprocess.Process, message: dict[str, Any]) -> None:
        assert child.stdin is not None
        child.stdin.write(json.dumps(message).encode() + b"\n")
        await child.stdin.drain()

    @staticmethod
    async def _read(child: asyncio.subprocess.Process) -> dict[str, Any]:
        assert child.stdout is not None
        line = await child.stdout.readline()
        if not line:
            raise SystemExit(f"client process {child.pid} exited ({await child.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer


async def serve_commands() -> None:
    """A child process: open the subscribers named on the first line, then answer commands."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    cpu_start = time.process_time()

    def answer(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    setup = json.loads(await reader.readline())
    try:
        subscribers = await open_subscribers(
            setup["ws_url"], setup["key"], setup["compression"], setup["queries"]
        )
    except (OSError, TimeoutError, SystemExit) as exc:
        answer({"error": repr(exc)})
        return
    answer({"opened": len(subscribers)})
    try:
        while line := await reader.readline():
            command = json.loads(line)
            if command["cmd"] == "wait":
                answer({"delivered": await wait_delivered(subscribers, command["n"], command["within"])})
            elif command["cmd"] == "mark":
                cpu_start = time.process_time()
                answer({})
            elif command["cmd"] == "report":
                latencies = latencies_ms(subscribers, command["events"])
                answer({"latencies": latencies, "cpu": time.process_time() - cpu_start})
            else:
                break
    finally:
        for subscriber in subscribers:
            subscriber.close()


if __name__ == "__main__":
    raise_open_files()
    asyncio.run(serve_commands())
