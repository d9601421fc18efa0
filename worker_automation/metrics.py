"""Prometheus metrics: job counts by status and queue, broker queue lengths, event bus state."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from worker_automation.errors import Unavailable
from worker_automation.resolvers.counts import counters
from worker_automation.services import Services

# Counted where things happen (not refreshed at scrape time), for the life of the process.
_EVENTS = CollectorRegistry()
_RECOVERED = Counter(
    "wa_jobs_recovered", "Jobs the reconciler put right, by the fault it found", ["fault"], registry=_EVENTS
)


def count_recovered(fault: str, n: int = 1) -> None:
    """Count ``n`` jobs recovered from ``fault`` (a small fixed set of names)."""
    _RECOVERED.labels(fault=fault).inc(n)


class Metrics:
    """One registry per app, refreshed from the database and the broker at each scrape."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.jobs = Gauge(
            "worker_automation_jobs",
            "Job rows by status and queue",
            ["status", "queue"],
            registry=self.registry,
        )
        self.broker_queue = Gauge(
            "worker_automation_broker_queue_length",
            "Messages waiting in each broker queue (all priorities)",
            ["queue"],
            registry=self.registry,
        )
        self.broker_up = Gauge(
            "worker_automation_broker_up", "1 when the broker answers", registry=self.registry
        )

    async def render(self, services: Services) -> bytes:
        async with services.db.reader() as session:
            counts = await counters(session)
            self.jobs.clear()
            for (queue, status), count in counts.items():
                self.jobs.labels(status=status, queue=queue).set(count)
        try:
            lengths = await services.broker.queue_lengths()
            self.broker_up.set(1)
            for queue, length in lengths.items():
                self.broker_queue.labels(queue=queue).set(length)
        except Unavailable:
            self.broker_up.set(0)
        return generate_latest(self.registry) + generate_latest(_EVENTS)
