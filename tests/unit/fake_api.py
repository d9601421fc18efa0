"""A scripted worker-protocol API on a local socket, for the workers' HTTP client to talk to.

It answers ``/api/v1/jobs/{id}/start|complete|fail|lost`` the way the real API does (the seed's
envelope, 409 with a reason for refusals), records every request, and can be switched to answer
503 or to drop connections without answering, as an API whose database is down or which is
restarting would.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

ROUTE = re.compile(rb"^POST /api/v1/jobs/(\d+)/(start|complete|fail|lost) ")


@dataclass
class FakeApi:
    """State of the fake API: ``mode`` is "up", "503" or "down" (connections dropped)."""

    automation: str = "demo.test"
    mode: str = "up"
    refusals: dict[int, str] = field(default_factory=dict)
    lost_answer: int = 200
    # The job's status a 409 to a lost report names ("AGENDADO": nobody's claim has landed yet).
    lost_status: str | None = None
    # Take the next claim, then drop the connection instead of answering (an API killed mid-way).
    drop_next_claim: bool = False
    # Answer the next claim, then answer 503 until the test sets ``mode`` back (its database went).
    down_after_next_claim: bool = False
    # While set, claims reach the API and wait for it before they are answered (a claim in flight).
    claim_gate: asyncio.Event | None = None
    claims_waiting: int = 0
    calls: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    unanswered: int = 0
    url: str = ""

    def kinds(self) -> list[tuple[str, int]]:
        return [(kind, job) for kind, job, _ in self.calls]

    def answer(self, head: bytes, body: bytes) -> bytes | None:
        reply = self._answer(head, body)
        if self.down_after_next_claim and b"/start " in head:
            self.down_after_next_claim = False
            self.mode = "503"
        return reply

    def _answer(self, head: bytes, body: bytes) -> bytes | None:
        if self.mode == "down":
            self.unanswered += 1
            return None
        if self.mode == "503":
            self.unanswered += 1
            return _reply(503, {"success": False, "message": "Servico indisponivel", "data": None})
        found = ROUTE.match(head)
        if found is None:
            return _reply(404, {"success": False, "message": "not found", "data": None})
        job_id, kind = int(found.group(1)), found.group(2).decode()
        payload = json.loads(body or b"{}")
        self.calls.append((kind, job_id, payload))
        if kind == "start":
            if self.drop_next_claim:
                self.drop_next_claim = False
                self.refusals[job_id] = "already_claimed"
                return None
            reason = self.refusals.get(job_id)
            if reason is not None:
                return _reply(409, {"success": False, "message": reason, "data": {"reason": reason}})
            job = {"id": job_id, "automation_type": self.automation, "context": {}}
            job["task_id"] = payload.get("task_id")
            return _reply(200, {"success": True, "message": "ok", "data": job})
        if kind == "lost":
            data = {"status": self.lost_status, "reason": "not_holder"} if self.lost_status else {}
            return _reply(self.lost_answer, {"success": self.lost_answer < 400, "message": "", "data": data})
        return _reply(200, {"success": True, "message": "ok", "data": {"id": job_id}})


def _reply(status: int, body: dict[str, Any]) -> bytes:
    content = json.dumps(body).encode()
    return b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        status,
        len(content),
        content,
    )


@asynccontextmanager
async def fake_api(port: int = 0, **options: Any) -> AsyncIterator[FakeApi]:
    """A running :class:`FakeApi` (``url`` set) on ``port`` (any free one when 0) for the
    duration of the block."""
    api = FakeApi(**options)
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                if api.claim_gate is not None and b"/start " in head:
                    api.claims_waiting += 1
                    await api.claim_gate.wait()
                answer = api.answer(head, body)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            handlers.discard(task)
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    api.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield api
    finally:
        server.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()
