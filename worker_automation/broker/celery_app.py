"""The Celery application shared by the API (producer) and the pool workers (consumers)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from celery import Celery, states
from celery.backends.redis import RedisBackend
from kombu.entity import Queue

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.domain.ranges import PRIORITY_MAX, PRIORITY_MIN
from worker_automation.settings import Settings

# Producers, workers, queue counters and purgers must agree on these or messages land in lists
# that some of them never look at: one list per priority (PRIORITY_MIN to PRIORITY_MAX), named `queue`,
# `queue:1`, `queue:2` and so on.
# A plain dict so it can be handed to kombu as is; treat it as read-only (transport_options() copies).
TRANSPORT_OPTIONS: Final[dict[str, Any]] = {
    "queue_order_strategy": "priority",
    "priority_steps": list(range(PRIORITY_MIN, PRIORITY_MAX + 1)),
    "sep": ":",
}

# A down broker must turn into a quick error for the operator, not a request hanging for seconds.
CONNECT_TIMEOUT_SECONDS: Final = 1.0
SOCKET_TIMEOUT_SECONDS: Final = 2.0

# Longer than the longest job (demo.sleep allows an hour): with late acks, a message still
# unacknowledged after this long is handed to another worker while the first one still runs it.
VISIBILITY_TIMEOUT_SECONDS: Final = 2 * 3600

DEFAULT_APP_NAME: Final = "worker_automation"


class ResultBackend(RedisBackend):  # type: ignore[misc]
    """The Redis result backend, minus the result subscription Celery opens for every sent task.

    Nothing here waits on ``AsyncResult.get()``: states are read from the stored task meta. The
    stock backend subscribes to each sent task's result channel, which costs a round trip per
    send, leaves a channel filling with replies nobody reads, and with Redis down fails with an
    error asking for the whole application to be restarted.
    """

    def on_task_call(self, producer: Any, task_id: str) -> dict[str, Any]:
        return {}


class JobTaskBackend(ResultBackend):
    """The result backend of the job tasks: how a job ended is its row's, recorded by the API from
    the worker's report, so a task's success is not written to Redis again (nor read first, as
    Celery does before every write). Its start, retries and failures are still stored: ``sync-
    orphans`` reads them for open jobs."""

    def mark_as_done(
        self,
        task_id: str,
        result: Any,
        request: Any = None,
        store_result: bool = True,
        state: str = states.SUCCESS,
    ) -> None:
        super().mark_as_done(task_id, result, request=request, store_result=False, state=state)


def transport_options() -> dict[str, Any]:
    """A fresh copy of :data:`TRANSPORT_OPTIONS`, safe to extend with connection options."""
    options = dict(TRANSPORT_OPTIONS)
    options["priority_steps"] = list(TRANSPORT_OPTIONS["priority_steps"])
    return options


def _task_routes() -> dict[str, dict[str, str]]:
    return {a.task_name: {"queue": a.queue} for a in AUTOMATION_REGISTRY.values()}


def make_celery(settings: Settings, broker_url: str, *, name: str = DEFAULT_APP_NAME) -> Celery:
    """Build the Celery app talking to the Redis at ``broker_url`` (broker and results)."""
    broker_options = transport_options()
    broker_options.update(
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        retry_on_timeout=False,
        # Producers give up on the first failed connect; workers pass their own retry policy.
        max_retries=0,
        visibility_timeout=VISIBILITY_TIMEOUT_SECONDS,
    )
    app = Celery(name, broker=broker_url, backend=f"{__name__}:ResultBackend+{broker_url}")
    app.conf.update(
        broker_transport_options=broker_options,
        broker_connection_timeout=CONNECT_TIMEOUT_SECONDS,
        # Workers wait for the broker at start-up and after an outage; producers never retry.
        broker_connection_retry_on_startup=True,
        task_publish_retry=False,
        redis_socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        redis_socket_timeout=SOCKET_TIMEOUT_SECONDS,
        redis_retry_on_timeout=False,
        task_queues=[Queue(queue) for queue in settings.queues],  # type: ignore[no-untyped-call]
        task_routes=_task_routes(),
        task_default_priority=0,
        task_track_started=True,
        task_acks_late=True,
        task_reject_on_worker_lost=False,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_expires=timedelta(days=1),
        worker_send_task_events=settings.task_events,
        task_send_sent_event=settings.task_events,
        enable_utc=True,
    )
    return app
