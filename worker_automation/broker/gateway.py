"""The asynchronous face of the broker: send, revoke, count, purge, inspect, read results."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import redis.exceptions
from kombu.exceptions import OperationalError
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from worker_automation.broker import queues
from worker_automation.broker.celery_app import CONNECT_TIMEOUT_SECONDS, SOCKET_TIMEOUT_SECONDS, make_celery
from worker_automation.broker.inspect import InspectResult, inspect_workers
from worker_automation.broker.task_sender import TaskSend, TaskSender
from worker_automation.catalog.registry import celery_time_limits
from worker_automation.domain.errors import Unavailable
from worker_automation.overrides.task_messages import TaskMessages
from worker_automation.settings import Settings

logger = logging.getLogger(__name__)

T = TypeVar("T")

UNAVAILABLE_MESSAGE: Final = "Broker indisponivel"
TASK_META_PREFIX: Final = "celery-task-meta-"

# Revokes and inspections: below Celery's producer pool (10 connections), so a burst queues here.
EXECUTOR_THREADS: Final = 8

# What "Redis is down or unreachable" looks like through kombu, redis-py and the socket layer.
BROKER_ERRORS: Final = (
    OperationalError,  # kombu's, and the task sender's once closed
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    OSError,
)


@dataclass(frozen=True)
class CeleryTaskResult:
    """A task's state as stored by the Celery result backend.

    ``result`` is the stored value as is (for FAILURE and REVOKED, Celery's exception record);
    ``exc_type`` and ``exc_message`` are lifted out of it for those states.
    """

    task_id: str
    state: str
    result: Any
    traceback: str | None
    exc_type: str | None
    exc_message: str | None
    date_done: str | None


def _exception_message(raw: Any) -> str | None:
    # Celery stores the exception's args: one message is the common case, keep the rest readable.
    if raw is None:
        return None
    if isinstance(raw, list | tuple):
        return str(raw[0]) if len(raw) == 1 else ", ".join(str(part) for part in raw)
    return str(raw)


def parse_task_meta(task_id: str, raw: bytes | str) -> CeleryTaskResult | None:
    """Decode a ``celery-task-meta-<id>`` value; None for PENDING or anything unreadable."""
    try:
        meta = json.loads(raw)
    except ValueError:
        logger.warning("unreadable result meta for task %s", task_id)
        return None
    if not isinstance(meta, dict):
        return None
    state = str(meta.get("status") or "PENDING")
    if state == "PENDING":
        return None
    result = meta.get("result")
    exc_type: str | None = None
    exc_message: str | None = None
    if isinstance(result, dict) and "exc_type" in result:
        exc_type = str(result["exc_type"])
        exc_message = _exception_message(result.get("exc_message"))
    traceback = meta.get("traceback")
    date_done = meta.get("date_done")
    return CeleryTaskResult(
        task_id=task_id,
        state=state,
        result=result,
        traceback=str(traceback) if traceback else None,
        exc_type=exc_type,
        exc_message=exc_message,
        date_done=str(date_done) if date_done else None,
    )


class BrokerGateway:
    """One per process: owns the Celery app (producer side) and an asyncio Redis client.

    Every call either succeeds or raises :class:`Unavailable` within about two seconds when Redis
    is down; nothing here waits for the broker to come back.
    """

    def __init__(self, settings: Settings, broker_url: str) -> None:
        self.settings = settings
        self.broker_url = broker_url
        self.app = make_celery(settings, broker_url)
        # One immediate retry reconnects a pooled connection Redis dropped (restart, CLIENT KILL);
        # more retries or a backoff would only delay the error when Redis is really gone. Not after
        # a timeout: that doubles the wait for a silent server, and a task message whose reply was
        # late may well be in its list already.
        self.redis: Redis = Redis.from_url(
            broker_url,
            socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
        )
        # Task messages go out with this client, on the loop (see task_sender).
        db = int(self.redis.connection_pool.connection_kwargs.get("db", 0))
        self.sender = TaskSender(
            self.redis,
            TaskMessages(
                self.app, redis_db=db, priority_keys=queues.priority_keys, time_limits=celery_time_limits
            ),
        )
        # Celery's other blocking calls (revoke, inspect) get threads of their own so they never
        # queue behind unrelated work in the loop's default executor.
        self._executor = ThreadPoolExecutor(max_workers=EXECUTOR_THREADS, thread_name_prefix="broker")
        self._inspecting: asyncio.Future[InspectResult] | None = None

    async def _in_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    async def send(
        self,
        task_name: str,
        *,
        queue: str,
        priority: int,
        args: list[Any],
        task_id: str | None = None,
    ) -> str:
        """Publish ``task_name`` on ``queue`` (0 runs first, 9 last); returns the task id."""
        task_id = task_id or str(uuid.uuid4())
        try:
            await self.sender.send(TaskSend(task_name, queue, priority, args, task_id))
        except BROKER_ERRORS as exc:
            raise Unavailable(UNAVAILABLE_MESSAGE) from exc
        return task_id

    async def send_many(
        self, sends: list[TaskSend], *, notices: Sequence[tuple[str, str | bytes]] = ()
    ) -> list[Unavailable | None]:
        """Publish every send in one round trip; per send, None or the :class:`Unavailable` that
        says it was not sent (a round trip succeeds or fails as a whole). ``notices``: (channel,
        message) pairs published in the same round trip, before the tasks."""
        try:
            await self.sender.send_many(sends, notices=notices)
        except BROKER_ERRORS:
            return [Unavailable(UNAVAILABLE_MESSAGE) for _ in sends]
        return [None] * len(sends)

    async def revoke(self, task_id: str, *, terminate: bool) -> None:
        """Tell every worker to skip ``task_id``; with ``terminate`` also kill it if running."""
        try:
            await self._in_thread(self.app.control.revoke, task_id, terminate=terminate)
        except BROKER_ERRORS as exc:
            raise Unavailable(UNAVAILABLE_MESSAGE) from exc

    async def queue_lengths(self) -> dict[str, int]:
        """Waiting messages per configured queue, every priority list counted."""
        try:
            return await queues.queue_lengths(self.redis, self.settings.queues)
        except BROKER_ERRORS as exc:
            raise Unavailable(UNAVAILABLE_MESSAGE) from exc

    async def priority_lengths(self) -> dict[str, list[int]]:
        """Waiting messages per configured queue and priority (list index = priority)."""
        try:
            return await queues.priority_lengths(self.redis, self.settings.queues)
        except BROKER_ERRORS as exc:
            raise Unavailable(UNAVAILABLE_MESSAGE) from exc

    async def waiting_task_ids(self) -> set[str]:
        """The task ids of every message waiting in the configured queues."""
        try:
            return await queues.waiting_task_ids(self.redis, self.settings.queues)
        except BROKER_ERRORS as exc:
            raise Unavailable(UNAVAILABLE_MESSAGE) from exc

    async def purge(self, queue: str) -> queues.Purged:
        """Delete every priority list of ``queue`` (the caller vets the name)."""
        try:
            return await queues.purge_queue(self.redis, queue)
        except BROKER_ERRORS as exc:
            raise Unavailable(UNAVAILABLE_MESSAGE) from exc

    async def inspect(self) -> InspectResult:
        """The workers' own view (never raises; unavailable and empty when nobody answers).

        Callers arriving while an inspection runs share its answer: each one costs seconds of
        waiting and broker connections, and dashboards ask for it all at once.
        """
        if self._inspecting is None or self._inspecting.done():
            self._inspecting = asyncio.ensure_future(
                self._in_thread(inspect_workers, self.app, self.settings.inspect_timeout_seconds)
            )
        # Shielded: one caller giving up must not cancel the answer the others wait for.
        return await asyncio.shield(self._inspecting)

    async def task_result(self, task_id: str) -> CeleryTaskResult | None:
        """What the result backend knows of ``task_id``; None when it knows nothing (PENDING)."""
        try:
            raw: bytes | str | None = await self.redis.get(TASK_META_PREFIX + task_id)
        except BROKER_ERRORS as exc:
            raise Unavailable(UNAVAILABLE_MESSAGE) from exc
        return None if raw is None else parse_task_meta(task_id, raw)

    async def ping(self) -> bool:
        """True when Redis answers a PING now."""
        try:
            return bool(await asyncio.wait_for(self.redis.ping(), timeout=SOCKET_TIMEOUT_SECONDS))
        except (*BROKER_ERRORS, TimeoutError):
            return False

    async def revoke_many(self, task_ids: list[str], *, terminate: bool) -> None:
        """:meth:`revoke` for many tasks in one broadcast (bulk actions)."""
        if not task_ids:
            return
        try:
            await self._in_thread(self.app.control.revoke, list(task_ids), terminate=terminate)
        except BROKER_ERRORS as exc:
            raise Unavailable(UNAVAILABLE_MESSAGE) from exc

    async def close(self) -> None:
        """Finish the sends under way, then release the Redis client, Celery's pools and the threads."""
        await self.sender.close()
        await self.redis.aclose()
        await self._in_thread(self.app.close)
        self._executor.shutdown(wait=False)
