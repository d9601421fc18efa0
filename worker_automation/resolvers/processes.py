"""Which worker processes are up: every Celery pool worker and every dedicated machine.

Pool workers run without task events by default, and then without heartbeats either (nothing
would consume them), so Celery sends no worker events to listen to. What is always there is
``inspect``: a ping, then ``active_queues``, ``stats`` and ``active`` of the workers that
answered. A worker that stops answering is SILENT at first (a busy broker or a slow reply looks
the same) and GONE once it has not answered for :data:`GONE_AFTER_SECONDS`; a failed inspection
(the broker away) makes nobody GONE. With task events on, workers also beat and say when they
stop (``worker_heartbeats``): one that beats is ONLINE, one that said it stopped is GONE.
Dedicated machines send nothing at all: their open ``jobCreated`` subscription is their
presence, kept in their rows (see ``presence``).

An inspection waits its whole timeout when no worker answers, so it is never made per request:
one :class:`ProcessWatch` per API process keeps the last snapshot for :data:`FRESH_SECONDS`, every
caller at the same time shares one inspection, and it polls only while a subscription listens.
Reads that only use the processes to explain something (why a job waits) take the last snapshot
at once and let the next look happen in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from sqlalchemy import select

from worker_automation.broker.inspect import ProcessReplies, inspect_processes
from worker_automation.broker.worker_heartbeats import BEATING_SECONDS, Heard, WorkerHeartbeats
from worker_automation.models import Job, JobStatus, Machine, utcnow
from worker_automation.resolvers.presence import is_connected
from worker_automation.resolvers.services import Services

log = logging.getLogger(__name__)

# How long a snapshot is answered again instead of asking the workers.
FRESH_SECONDS: Final = 3.0
# How often a listened-to watch looks again.
POLL_SECONDS: Final = 5.0
# A pool worker not heard from for this long is GONE (SILENT before).
GONE_AFTER_SECONDS: Final = 30.0
# A GONE pool worker is forgotten after this long.
FORGET_AFTER_SECONDS: Final = 600.0
# The ping of the processes' inspection waits at most this long (the whole wait when none answers).
MAX_INSPECT_SECONDS: Final = 1.0

POOL: Final = "POOL"
MACHINE: Final = "MACHINE"
ONLINE: Final = "ONLINE"
SILENT: Final = "SILENT"
GONE: Final = "GONE"


@dataclass(frozen=True)
class ProcessView:
    """One worker process as the watch last saw it."""

    name: str
    kind: str
    queues: tuple[str, ...]
    concurrency: int | None
    running_job_ids: tuple[int, ...]
    status: str
    last_seen_at: datetime | None
    machine_id: int | None
    # The automation a dedicated machine serves (None for a pool worker).
    automation: str | None = None


@dataclass
class _Heard:
    """A pool worker that answered at some point, with what it said last."""

    queues: tuple[str, ...]
    concurrency: int | None
    task_ids: tuple[str, ...]
    seen: datetime


def _queues_of(replies: Any) -> tuple[str, ...]:
    if not isinstance(replies, list):
        return ()
    return tuple(sorted(str(q["name"]) for q in replies if isinstance(q, dict) and "name" in q))


def _concurrency_of(stats: Any) -> int | None:
    """How many jobs the worker runs at once: its autoscaler's maximum when it has one (a pool
    that starts its processes on demand, as the embedded serve's, has as many processes as it has
    jobs, none when idle), else its pool's size."""
    if not isinstance(stats, dict):
        return None
    scaler, pool = stats.get("autoscaler"), stats.get("pool")
    value = scaler.get("max") if isinstance(scaler, dict) else None
    if value is None and isinstance(pool, dict):
        value = pool.get("max-concurrency")
    return value if isinstance(value, int) and value > 0 else None


def _task_ids_of(active: Any) -> tuple[str, ...]:
    if not isinstance(active, list):
        return ()
    return tuple(str(t["id"]) for t in active if isinstance(t, dict) and t.get("id"))


def pool_status(seen: datetime, now: datetime, answered: bool) -> str:
    """ONLINE when it answered the last inspection, SILENT for a while after, then GONE."""
    if answered:
        return ONLINE
    return GONE if now - seen > timedelta(seconds=GONE_AFTER_SECONDS) else SILENT


def machine_status(connected_since: datetime | None, last_seen_at: datetime | None, connected: bool) -> str:
    """ONLINE while its subscription is open; SILENT when the row says open but went stale (its
    API process died, the machine may be reconnecting); GONE once its subscription closed."""
    if connected:
        return ONLINE
    return SILENT if connected_since is not None and last_seen_at is not None else GONE


class ProcessWatch:
    """The processes one API process knows of, kept fresh while somebody looks."""

    def __init__(self) -> None:
        self._heard: dict[str, _Heard] = {}
        self._snapshot: list[ProcessView] | None = None
        self._taken: float = 0.0
        self._lock = asyncio.Lock()
        self._listeners: set[asyncio.Queue[list[ProcessView]]] = set()
        self._poller: asyncio.Task[None] | None = None
        self._heartbeats: WorkerHeartbeats | None = None

    async def snapshot(self, services: Services) -> list[ProcessView]:
        """Every known process, at most :data:`FRESH_SECONDS` old."""
        loop = asyncio.get_running_loop()
        async with self._lock:
            if self._snapshot is None or loop.time() - self._taken > FRESH_SECONDS:
                self._snapshot = await self._look(services)
                self._taken = loop.time()
            return self._snapshot

    async def recent(self, services: Services) -> list[ProcessView]:
        """The last snapshot at once, however old, looking again in the background once it is
        older than :data:`FRESH_SECONDS`: for reads that must not wait out an inspection (a page
        of queued jobs and their waiting reasons). Only the first look is waited for."""
        if self._snapshot is None:
            return await self.snapshot(services)
        stale = asyncio.get_running_loop().time() - self._taken > FRESH_SECONDS
        if stale and not self._lock.locked():
            services.in_background(self._look_again(services))
        return self._snapshot

    async def _look_again(self, services: Services) -> None:
        try:
            await self.snapshot(services)
        except Exception as exc:
            log.info("processes not read: %s", exc)

    async def changes(self, services: Services) -> AsyncIterator[list[ProcessView]]:
        """The processes now, then again each time one appears, changes or goes."""
        queue: asyncio.Queue[list[ProcessView]] = asyncio.Queue(maxsize=1)
        self._listeners.add(queue)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll(services))
        try:
            last = await self.snapshot(services)
            yield last
            while True:
                current = await queue.get()
                if current != last:
                    last = current
                    yield current
        finally:
            self._listeners.discard(queue)
            if not self._listeners and self._poller is not None:
                self._poller.cancel()
                self._poller = None

    async def _poll(self, services: Services) -> None:
        while self._listeners:
            await asyncio.sleep(POLL_SECONDS)
            try:
                current = await self.snapshot(services)
            except Exception as exc:
                log.info("processes not read: %s", exc)
                continue
            for queue in list(self._listeners):
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
                queue.put_nowait(current)

    async def _look(self, services: Services) -> list[ProcessView]:
        timeout = min(services.settings.inspect_timeout_seconds, MAX_INSPECT_SECONDS)
        inspected = await asyncio.to_thread(inspect_processes, services.broker.app, timeout)
        now = utcnow()
        self._remember(inspected, now)
        return await _views(services, self._heard, inspected, now, self._beats(services, now))

    def _beats(self, services: Services, now: datetime) -> dict[str, bool]:
        """With task events on, Celery's worker events: which workers beat now (True) or said
        they went (False)."""
        if not services.settings.task_events:
            return {}
        if self._heartbeats is None:
            self._heartbeats = WorkerHeartbeats(services.broker.app)
        beats: dict[str, bool] = {}
        for host, heard in self._heartbeats.heard().items():
            beating = _beating(heard, now)
            if beating:
                known = self._heard.get(host)
                if known is None:
                    self._heard[host] = _Heard((), None, (), heard.at)
                elif heard.at > known.seen:
                    known.seen = heard.at
            if beating or heard.offline:
                beats[host] = beating
        return beats

    def _remember(self, inspected: ProcessReplies, now: datetime) -> None:
        for host in inspected.ping:
            self._heard[host] = _Heard(
                queues=_queues_of(inspected.active_queues.get(host)),
                concurrency=_concurrency_of(inspected.stats.get(host)),
                task_ids=_task_ids_of(inspected.active.get(host)),
                seen=now,
            )
        forget = timedelta(seconds=FORGET_AFTER_SECONDS)
        for host in [h for h, heard in self._heard.items() if now - heard.seen > forget]:
            del self._heard[host]


def _beating(heard: Heard, now: datetime) -> bool:
    return not heard.offline and now - heard.at <= timedelta(seconds=BEATING_SECONDS)


async def _views(
    services: Services,
    heard: dict[str, _Heard],
    inspected: ProcessReplies,
    now: datetime,
    beats: dict[str, bool],
) -> list[ProcessView]:
    task_ids = sorted({t for h in heard.values() for t in h.task_ids})
    settings = services.settings
    running = select(Job.id, Job.task_id, Job.machine_id).where(Job.status == JobStatus.EXECUTANDO.value)
    async with services.db.reader() as session:
        machines = (
            await session.execute(
                select(
                    Machine.id,
                    Machine.name,
                    Machine.automation,
                    Machine.queue,
                    Machine.connected_since,
                    Machine.last_seen_at,
                ).order_by(Machine.name)
            )
        ).all()
        runs = (await session.execute(running)).all()
    wanted = set(task_ids)
    by_task = {task_id: job_id for job_id, task_id, _ in runs if task_id in wanted}
    by_machine: dict[int, list[int]] = {}
    for job_id, _, machine_id in runs:
        if machine_id is not None:
            by_machine.setdefault(machine_id, []).append(job_id)
    queue_machine = {queue: mid for mid, _, automation, queue, *_ in machines if automation is None and queue}
    views: list[ProcessView] = []
    for host in sorted(heard):
        h = heard[host]
        # A failed inspection is no evidence that a worker went: it stays SILENT.
        answered = host in inspected.ping or beats.get(host) is True
        status = pool_status(h.seen, now, answered)
        if beats.get(host) is False and host not in inspected.ping:
            status = GONE  # it said so itself (worker-offline)
        elif status == GONE and not inspected.available:
            status = SILENT
        ids = [by_task[t] for t in h.task_ids if t in by_task] if answered else []
        views.append(
            ProcessView(
                name=host,
                kind=POOL,
                queues=h.queues,
                concurrency=h.concurrency,
                running_job_ids=tuple(sorted(ids)),
                status=status,
                last_seen_at=h.seen,
                machine_id=next((queue_machine[q] for q in h.queues if q in queue_machine), None),
            )
        )
    queue_of = _queue_of_automation()
    for mid, name, automation, _queue, since, seen in machines:
        if automation is None or seen is None:
            continue  # not a dedicated machine, or one that never held a subscription
        connected = is_connected(since, seen, settings, now)
        views.append(
            ProcessView(
                name=name,
                kind=MACHINE,
                queues=tuple(q for q in (queue_of.get(automation),) if q),
                concurrency=None,
                running_job_ids=tuple(sorted(by_machine.get(mid, []))),
                status=machine_status(since, seen, connected),
                last_seen_at=now if connected else seen,
                machine_id=mid,
                automation=automation,
            )
        )
    return views


def _queue_of_automation() -> dict[str, str]:
    from worker_automation.catalog.registry import AUTOMATION_REGISTRY

    return {key: a.queue for key, a in AUTOMATION_REGISTRY.items()}


def online_consumers(processes: Iterable[ProcessView]) -> tuple[set[str], set[str]]:
    """The queues an ONLINE pool worker consumes and the automations an ONLINE machine serves."""
    queues: set[str] = set()
    machines: set[str] = set()
    for p in processes:
        if p.status != ONLINE:
            continue
        if p.kind == POOL:
            queues.update(p.queues)
        elif p.automation is not None:
            machines.add(p.automation)
    return queues, machines


@dataclass
class _Watches:
    by_services: dict[int, tuple[weakref.ref[Services], ProcessWatch]] = field(default_factory=dict)


_WATCHES = _Watches()


def watch_of(services: Services) -> ProcessWatch:
    """The one watch of this process's services."""
    key = id(services)
    found = _WATCHES.by_services.get(key)
    if found is not None and found[0]() is services:
        return found[1]
    watch = ProcessWatch()
    _WATCHES.by_services[key] = (weakref.ref(services), watch)
    return watch


async def list_processes(services: Services) -> list[ProcessView]:
    """Every worker process known now (shared with every caller for a few seconds)."""
    return await watch_of(services).snapshot(services)


async def recent_processes(services: Services) -> list[ProcessView]:
    """The worker processes as last seen, without waiting for a new look (see
    :meth:`ProcessWatch.recent`)."""
    return await watch_of(services).recent(services)
