"""A dedicated machine: one automation, hearing jobs live and sweeping pending ones.

It needs only ``WA_API_URL`` and ``WA_WORKER_API_KEY``: jobs are heard through the ``jobCreated``
GraphQL subscription and claimed, reported and swept over ``/api/v1/jobs``.

Cut off from the API (restarting, its database down, the network), it keeps what it has: claims
wait with capped backoff, reports of jobs' ends wait in the outbox, and the subscription is
opened again with capped backoff, each new connection followed by a sweep (events published
while it was away are lost, the rows are not). At start it sends what a previous process of the
same machine left unreported and reports the jobs that process held as ``worker_lost``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from typing import Any

import websockets

from worker_automation.domain.vocabulary import Refusal
from worker_automation.infra.cancelling import cancel_and_wait
from worker_automation.settings import Settings
from worker_automation.worker.client import WorkerApiClient
from worker_automation.worker.contract import AutomationFn
from worker_automation.worker.held import HeldJobs
from worker_automation.worker.implementations import load_implementations
from worker_automation.worker.outbox import Outbox
from worker_automation.worker.patience import Stopped, delays, sleep_unless
from worker_automation.worker.pipeline import SHUTDOWN_MESSAGE, JobPipeline

log = logging.getLogger(__name__)

JOB_CREATED = "subscription JobCreated($automation: String) { jobCreated(automation: $automation) { id } }"
# The runs of this machine the API ends (cancel, move, time limit): stopped here at once.
RUNS_ENDED = "subscription RunsEnded($running: [Int!]) { runsEnded(running: $running) { id taskId status } }"
# A safety net, not a heartbeat: picks up work whose live event was missed.
SWEEP_INTERVAL = 30.0
# While jobs wait for the automation's concurrency limit, look again sooner.
DEFERRED_SWEEP_INTERVAL = 2.0
# Refusals that end by themselves soon (a slot frees up, the queue is resumed): looked at again
# at the shorter interval. Others (machine off, dev mode) wait for the periodic sweep.
DEFERRED_REFUSALS = frozenset({Refusal.CONCURRENCY_LIMIT, Refusal.QUEUE_PAUSED})
# The longest wait before the subscription is opened again. The subscription is the machine's
# presence: an API back from an outage takes the machine's runs as lost once it has been away for
# the absence grace (half the recovery window: 30 s by default), so the machine must be back well
# within it, however long the outage was.
RECONNECT_CAP_SECONDS = 5.0


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
        self.client = WorkerApiClient(
            settings.api_url, settings.worker_api_key, max_result_bytes=settings.max_result_bytes
        )
        self.stopping = asyncio.Event()
        self.pipeline = JobPipeline(
            self.client,
            implementations or load_implementations(),
            outbox=Outbox.for_machine(settings.worker_api_key),
            held=HeldJobs.for_machine(settings.worker_api_key),
            stopping=self.stopping,
            answer_in_background=False,
            own_time_limits=True,
        )
        self.slots = asyncio.Semaphore(max(1, concurrency))
        self.subscribed = asyncio.Event()
        self.wanted: set[int] = set()
        self.executing: dict[int, asyncio.Task[Any]] = {}
        self.task_ids: dict[int, str | None] = {}
        self.taken_away: dict[int, asyncio.Event] = {}
        # Whether the API tells this machine of the runs it ends (an older one does not).
        self._hears_ends = True
        self.deferred: set[int] = set()
        self._sweep_now = asyncio.Event()
        # A sweep that must happen whatever else is going on: at start and after a reconnect.
        self._sweep_due = True
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
                claim = await self.pipeline.claim(job_id)
                if not claim.claimed or claim.job is None:
                    log.info("job %s not claimed: %s", job_id, claim.reason)
                    if claim.reason in DEFERRED_REFUSALS:
                        self.deferred.add(job_id)
                    return
                self.deferred.discard(job_id)
                if self.stopping.is_set():
                    # Answered as this process stops (see drain): it does not start here.
                    await self.pipeline.hand_back(claim.job)
                    return
                taken_away = asyncio.Event()
                run = asyncio.create_task(self.pipeline.execute(claim.job, taken_away))
                self.executing[job_id] = run
                self.task_ids[job_id] = claim.job.get("task_id")
                self.taken_away[job_id] = taken_away
                try:
                    result = await asyncio.shield(run)
                    log.info("job %s %s", job_id, result.outcome.value)
                finally:
                    self.executing.pop(job_id, None)
                    self.task_ids.pop(job_id, None)
                    self.taken_away.pop(job_id, None)
        except Stopped:
            log.info("job %s: stopped before the API answered its claim", job_id)
        except Exception:
            log.exception("job %s: unexpected error in the worker", job_id)
        finally:
            self.wanted.discard(job_id)
            # A slot was freed or a refusal seen: pending work may now be claimable.
            self._sweep_now.set()

    def run_ended(self, job: dict[str, Any]) -> bool:
        """The API says how job ``job`` now stands (a runsEnded event): a run of it held here that
        is no longer the job's running one is stopped. Whether one was."""
        job_id = int(job["id"])
        stop = self.taken_away.get(job_id)
        if stop is None:
            return False
        status = job.get("status")
        still_this_run = status == "EXECUTANDO" and job.get("taskId") == self.task_ids.get(job_id)
        if status == "CONCLUIDO" or still_this_run:
            return False  # completed (only its run reports that), or still this run
        if not stop.is_set():
            # Also heard as this machine's own failure report is recorded, when it is harmless.
            log.info("job %s: the API has it %s; its run here stops", job_id, status)
            stop.set()
        return True

    async def sweep(self) -> int:
        """Submit every pending job of the automation (start-up and after missed events)."""
        jobs = await self.client.pending(self.automation)
        for job in jobs:
            self.submit(int(job["id"]))
        return len(jobs)

    async def _sweeper(self) -> None:
        """Sweeps at start, after each reconnect, while refused jobs wait, and every
        SWEEP_INTERVAL; a sweep that gets no answer is tried again with capped backoff."""
        waits = delays()
        while not self.stopping.is_set():
            if self._sweep_due or self.deferred or not self.wanted:
                due, self._sweep_due = self._sweep_due, False
                self.deferred.clear()
                try:
                    await self.sweep()
                except Exception as exc:
                    self._sweep_due = self._sweep_due or due
                    delay = next(waits)
                    log.warning("sweep failed (%s); again in %.1fs", exc, delay)
                    if not await sleep_unless(self.stopping, delay):
                        return
                    continue
                waits = delays()
            interval = DEFERRED_SWEEP_INTERVAL if self.deferred else SWEEP_INTERVAL
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sweep_now.wait(), interval)
            self._sweep_now.clear()

    async def _listen(self) -> None:
        """The jobCreated subscription, reconnecting with backoff; a sweep follows each connect."""
        waits = delays(cap=RECONNECT_CAP_SECONDS)
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
                    if self._hears_ends:
                        # With the runs held here: those the API ended meanwhile come first.
                        running = {"running": sorted(self.taken_away)}
                        payload = {"query": RUNS_ENDED, "variables": running}
                        subscribe = {"id": "runs-ended", "type": "subscribe", "payload": payload}
                        await ws.send(json.dumps(subscribe))
                    self.subscribed.set()
                    waits = delays(cap=RECONNECT_CAP_SECONDS)
                    # Jobs created while it was not subscribed (before, or cut off) are swept.
                    self._sweep_due = True
                    self._sweep_now.set()
                    async for raw in ws:
                        message = json.loads(raw)
                        kind = message.get("type")
                        data = (message.get("payload") or {}).get("data") if kind == "next" else None
                        if message.get("id") == "runs-ended" and kind in ("next", "error"):
                            if kind == "error":
                                # An API that does not tell the ends of runs: they are learnt
                                # at the run's next report instead.
                                log.warning("the API does not tell runs' ends: %s", message.get("payload"))
                                self._hears_ends = False
                            elif data and (job := data.get("runsEnded")) and job.get("id") is not None:
                                self.run_ended(job)
                        elif kind == "next":
                            job = (data or {}).get("jobCreated")
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
                delay = next(waits)
                log.warning("jobCreated subscription lost (%s); reconnecting in %.1fs", exc, delay)
                if not await sleep_unless(self.stopping, delay):
                    return

    async def run(self) -> None:
        """Sweep, subscribe, run jobs until asked to stop, then drain within the grace period."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stopping.set)
        log.info("machine for %s starting (api %s)", self.automation, self.settings.api_url)
        background = [
            asyncio.create_task(self._recover()),
            asyncio.create_task(self._listen()),
            asyncio.create_task(self._sweeper()),
        ]
        try:
            await self.stopping.wait()
        finally:
            await cancel_and_wait(*background)
            await self.drain()
            await self.pipeline.close()
            await self.client.close()

    async def _recover(self) -> None:
        """What a previous process of this machine left: its unanswered reports are sent, the
        jobs it held reported lost (kept and tried again while the API does not answer)."""
        try:
            sent, reported = await self.pipeline.recover_left_behind()
        except Exception as exc:
            log.error("reports and jobs left behind not sent: %s", exc)
            return
        if sent or reported:
            log.info("left behind: %d report(s) sent, %d job(s) reported lost", sent, reported)

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
            outbox = self.pipeline.reports.outbox
            if outbox is not None and outbox.holds(job_id):
                # Its end is kept, waiting for the API: the next process sends it.
                continue
            with contextlib.suppress(BaseException):
                await task
            try:
                await self.pipeline.report_failure(
                    job_id, SHUTDOWN_MESSAGE, "WorkerShutdown", None, self.task_ids.get(job_id)
                )
                log.warning("job %s reported failed: shutdown", job_id)
            except Exception as exc:
                log.error("job %s: shutdown failure not reported: %s", job_id, exc)
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            # Claims on their way are waited for, within the grace, not cut off: one cut off may
            # still go through, leaving its job EXECUTANDO with nothing running it. Each one
            # answered now hands its job back (see _attempt); the others end at once.
            await asyncio.wait(pending, timeout=self.settings.shutdown_grace_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def run_machine(settings: Settings, *, automation: str, concurrency: int = 1) -> int:
    """``worker-automation machine run --automation KEY``."""

    async def main() -> None:
        await MachineRunner(settings, automation, concurrency=concurrency).run()

    asyncio.run(main())
    return 0
