"""A dedicated machine: one automation, hearing jobs live and sweeping pending ones (seed 001).

It needs only ``WA_API_URL`` and ``WA_WORKER_API_KEY``: jobs are heard through the ``jobCreated``
GraphQL subscription and claimed, reported and swept over ``/api/v1/jobs``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from typing import Any

import websockets

from worker_automation.settings import Settings
from worker_automation.worker.client import WorkerApiClient
from worker_automation.worker.contract import AutomationFn
from worker_automation.worker.implementations import load_implementations
from worker_automation.worker.pipeline import SHUTDOWN_MESSAGE, JobPipeline

log = logging.getLogger(__name__)

JOB_CREATED = "subscription JobCreated($automation: String) { jobCreated(automation: $automation) { id } }"
# A safety net, not a heartbeat: picks up work whose live event was missed.
SWEEP_INTERVAL = 30.0
# While jobs wait for the automation's concurrency limit, look again sooner.
DEFERRED_SWEEP_INTERVAL = 2.0


def websocket_url(api_url: str) -> str:
    base = api_url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base[len("https://") :] + "/graphql"
    return "ws://" + base.removeprefix("http://") + "/graphql"


class MachineRunner:
    """Runs jobs of one automation with a local concurrency limit and a bounded shutdown."""

    def __init__(
        self,
        settings: Settings,
        automation: str,
        *,
        concurrency: int = 1,
        implementations: dict[str, AutomationFn] | None = None,
    ) -> None:
        if not settings.worker_api_key:
            raise SystemExit(
                "machine run: WA_WORKER_API_KEY is required (machines register --automation KEY)"
            )
        self.settings = settings
        self.automation = automation
        self.client = WorkerApiClient(settings.api_url, settings.worker_api_key)
        self.pipeline = JobPipeline(self.client, implementations or load_implementations())
        self.slots = asyncio.Semaphore(max(1, concurrency))
        self.stopping = asyncio.Event()
        self.subscribed = asyncio.Event()
        self.wanted: set[int] = set()
        self.executing: dict[int, asyncio.Task[Any]] = {}
        self.deferred: set[int] = set()
        self._sweep_now = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()

    def submit(self, job_id: int) -> None:
        """Try to claim and run ``job_id`` when a local slot is free (duplicates ignored)."""
        if self.stopping.is_set() or job_id in self.wanted:
            return
        self.wanted.add(job_id)
        task = asyncio.create_task(self._attempt(job_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _attempt(self, job_id: int) -> None:
        try:
            async with self.slots:
                if self.stopping.is_set():
                    return
                claim = await self.client.start(job_id)
                if not claim.claimed or claim.job is None:
                    log.info("job %s not claimed: %s", job_id, claim.reason)
                    if claim.reason in ("concurrency_limit", "queue_paused"):
                        self.deferred.add(job_id)
                    return
                self.deferred.discard(job_id)
                run = asyncio.create_task(self.pipeline.execute(claim.job))
                self.executing[job_id] = run
                try:
                    result = await asyncio.shield(run)
                    log.info("job %s %s", job_id, result.outcome.value)
                finally:
                    self.executing.pop(job_id, None)
        except Exception:
            log.exception("job %s: unexpected error in the worker", job_id)
        finally:
            self.wanted.discard(job_id)
            # A slot was freed or a refusal seen: pending work may now be claimable.
            self._sweep_now.set()

    async def sweep(self) -> int:
        """Submit every pending job of the automation (start-up and after missed events)."""
        jobs = await self.client.pending(self.automation)
        for job in jobs:
            self.submit(int(job["id"]))
        return len(jobs)

    async def _sweeper(self) -> None:
        while not self.stopping.is_set():
            interval = DEFERRED_SWEEP_INTERVAL if self.deferred else SWEEP_INTERVAL
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sweep_now.wait(), interval)
            self._sweep_now.clear()
            if self.stopping.is_set():
                return
            if self.deferred or not self.wanted:
                self.deferred.clear()
                try:
                    await self.sweep()
                except Exception as exc:
                    log.warning("sweep failed: %s", exc)

    async def _listen(self) -> None:
        """The jobCreated subscription, reconnecting with backoff; a sweep follows each connect."""
        delay = 0.5
        url = websocket_url(self.settings.api_url)
        while not self.stopping.is_set():
            try:
                async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
                    await ws.send(
                        json.dumps(
                            {
                                "type": "connection_init",
                                "payload": {"X-Worker-Api-Key": self.settings.worker_api_key},
                            }
                        )
                    )
                    ack = json.loads(await ws.recv())
                    if ack.get("type") != "connection_ack":
                        raise ConnectionError(f"subscription refused: {ack}")
                    await ws.send(
                        json.dumps(
                            {
                                "id": "job-created",
                                "type": "subscribe",
                                "payload": {
                                    "query": JOB_CREATED,
                                    "variables": {"automation": self.automation},
                                },
                            }
                        )
                    )
                    self.subscribed.set()
                    delay = 0.5
                    self._sweep_now.set()  # jobs created between the sweep and the subscription
                    async for raw in ws:
                        message = json.loads(raw)
                        kind = message.get("type")
                        if kind == "next":
                            job = ((message.get("payload") or {}).get("data") or {}).get("jobCreated")
                            if job and job.get("id") is not None:
                                self.submit(int(job["id"]))
                        elif kind == "ping":
                            await ws.send(json.dumps({"type": "pong"}))
                        elif kind in ("error", "complete"):
                            raise ConnectionError(f"subscription ended: {message}")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.subscribed.clear()
                if self.stopping.is_set():
                    return
                log.warning("jobCreated subscription lost (%s); reconnecting in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def run(self) -> None:
        """Sweep, subscribe, run jobs until asked to stop, then drain within the grace period."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stopping.set)
        log.info("machine for %s starting (api %s)", self.automation, self.settings.api_url)
        await self.sweep()
        background = [asyncio.create_task(self._listen()), asyncio.create_task(self._sweeper())]
        try:
            await self.stopping.wait()
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await self.drain()
            await self.client.close()

    async def drain(self) -> None:
        """Stop taking work, wait the grace period, then report what still runs as failed."""
        self.stopping.set()
        running = list(self.executing.items())
        if running:
            log.info(
                "waiting up to %.0fs for %d running job(s)",
                self.settings.shutdown_grace_seconds,
                len(running),
            )
            await asyncio.wait([t for _, t in running], timeout=self.settings.shutdown_grace_seconds)
        for job_id, task in list(self.executing.items()):
            if task.done():
                continue
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            try:
                await self.client.fail(job_id, SHUTDOWN_MESSAGE, "WorkerShutdown")
                log.warning("job %s reported failed: shutdown", job_id)
            except Exception as exc:
                log.error("job %s: shutdown failure not reported: %s", job_id, exc)
        pending = [t for t in self._tasks if not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def run_machine(settings: Settings, *, automation: str, concurrency: int = 1) -> int:
    """``worker-automation machine run --automation KEY``."""

    async def main() -> None:
        await MachineRunner(settings, automation, concurrency=concurrency).run()

    asyncio.run(main())
    return 0
