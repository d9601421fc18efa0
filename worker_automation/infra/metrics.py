"""Prometheus metric families of the service and the small functions that count into them.

Counted where things happen (job transitions when they are announced, claim refusals when they
are made and the wait a claim ends, HTTP requests in the request middleware, recoveries in the
reconciler, automatic retries where a failed run is queued again, time limits where a run's
failure is taken) and exported by
:mod:`worker_automation.asgi.metrics_export`. With ``serve --workers N`` every process writes its
values to the shared multiprocess directory that ``serve`` sets up, and a scrape of any process
adds them all up. Labels take values from closed sets only (automations, queues, statuses,
refusal reasons, route templates), so the number of series stays bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from prometheus_client import Counter, Gauge, Histogram

# Terminal transitions end a run: its duration is observed then.
FINISHED: Final = frozenset({"CONCLUIDO", "FALHA"})

JOB_TRANSITIONS: Final = Counter(
    "wa_job_transitions",
    "Job state changes, by automation, queue and the status entered",
    ["automation", "queue", "status"],
)
JOB_DURATION: Final = Histogram(
    "wa_job_duration_seconds",
    "Run time of finished jobs (claim to completion or failure), by automation",
    ["automation"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200),
)
# From a job's creation to the claim that starts its run: how long work waits for a process.
JOB_WAIT: Final = Histogram(
    "wa_job_wait_seconds",
    "Time from a job's creation to the claim that started its run, by queue",
    ["queue"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400),
)
# Automatic retries only (a failed run with attempts left queued again by the service); an
# operator's retry (retryWorker, retryWorkers) is an action of its own and is not counted here.
RETRIES: Final = Counter(
    "wa_retries",
    "Automatic retries: failed runs queued again because their automation has attempts left",
    ["automation"],
)
# Runs ended by their automation's time limit, whoever ended them (the pool worker, the machine or
# the leader's check).
TIMEOUTS: Final = Counter(
    "wa_timeouts",
    "Runs ended FALHA by their automation's time limit, by automation",
    ["automation"],
)
CLAIMS_REFUSED: Final = Counter("wa_claims_refused", "Claims refused, by machine-readable reason", ["reason"])
JOBS_RECOVERED: Final = Counter(
    "wa_jobs_recovered", "Jobs the reconciler resolved after a fault, by fault", ["fault"]
)
SUBSCRIBERS: Final = Gauge(
    "wa_subscribers",
    "GraphQL subscriptions running on websockets, all API processes",
    multiprocess_mode="livesum",
)
HTTP_DURATION: Final = Histogram(
    "wa_http_request_duration_seconds",
    "HTTP request latency, by route template, method and status code",
    ["route", "method", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


class JobLike(Protocol):
    """What a transition is counted from (a job view)."""

    @property
    def automation_type(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def data_inicio(self) -> datetime | None: ...
    @property
    def data_fim(self) -> datetime | None: ...


# Labelled children, looked up on every transition (a claim's hot path): the label values come
# from closed sets, so these stay small.
_transitions: dict[tuple[str, str, str], Any] = {}
_durations: dict[str, Any] = {}


def count_transitions(jobs: Iterable[JobLike]) -> None:
    """Count each job's entry into its current status; observe the run time of finished ones."""
    for job in jobs:
        key = (job.automation_type, job.queue, job.status)
        series = _transitions.get(key)
        if series is None:
            series = _transitions.setdefault(key, JOB_TRANSITIONS.labels(*key))
        series.inc()
        start = job.data_inicio
        if job.status in FINISHED and start is not None:
            now = datetime.now(UTC)
            end = job.data_fim or (now if start.tzinfo is not None else now.replace(tzinfo=None))
            automation = job.automation_type
            duration = _durations.get(automation)
            if duration is None:
                duration = _durations.setdefault(automation, JOB_DURATION.labels(automation))
            duration.observe(max(0.0, (end - start).total_seconds()))


class Claimed(Protocol):
    """What a claim's wait is observed from (a job view)."""

    @property
    def queue(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def data_inicio(self) -> datetime | None: ...


_waits: dict[str, Any] = {}


def observe_wait(job: Claimed) -> None:
    """A claim started ``job``'s run: observe how long it waited since it was created."""
    started = job.data_inicio
    if started is None:
        return
    series = _waits.get(job.queue)
    if series is None:
        series = _waits.setdefault(job.queue, JOB_WAIT.labels(job.queue))
    series.observe(max(0.0, (started - job.created_at).total_seconds()))


def count_retry(automation: str) -> None:
    """A failed run of ``automation`` was queued again by itself (attempts left): not for an
    operator's retry."""
    RETRIES.labels(automation).inc()


def count_timeout(automation: str) -> None:
    """A run of ``automation`` ended FALHA at its time limit."""
    TIMEOUTS.labels(automation).inc()


def count_refused(reason: str) -> None:
    """A claim was refused for ``reason``."""
    CLAIMS_REFUSED.labels(reason).inc()


def count_recovered(fault: str, n: int = 1) -> None:
    """``n`` jobs were resolved by the reconciler after ``fault`` (``worker_lost``, ...)."""
    if n > 0:
        JOBS_RECOVERED.labels(fault).inc(n)
