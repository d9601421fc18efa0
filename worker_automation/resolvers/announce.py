"""Publishing state changes once they are committed."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from worker_automation.broker.events import Event, EventBus
from worker_automation.domain.errors import Unavailable
from worker_automation.domain.vocabulary import EventKind, QueueChange
from worker_automation.infra.metrics import count_transitions
from worker_automation.resolvers.job_views import JobView

if TYPE_CHECKING:  # announcing needs only the event bus the services hold
    from worker_automation.resolvers.services import Services

log = logging.getLogger(__name__)
# Events that put a job in a (new) status; progress, reorder and delete leave it where it was.
TRANSITIONS = frozenset(
    {
        EventKind.CREATED,
        EventKind.CLAIMED,
        EventKind.COMPLETED,
        EventKind.FAILED,
        EventKind.CANCELLED,
        EventKind.MOVED,
    }
)


async def announce(services: Services, kind: EventKind, views: Iterable[JobView]) -> None:
    """Publish one event per changed row. The database already holds the change, so a Redis
    outage costs only the live notification (subscribers re-read state when it comes back)."""
    tz = services.settings.tz
    views = list(views)
    if not views:
        return
    if kind in TRANSITIONS:
        count_transitions(views)
    events = [Event(kind, view.as_dict(tz)) for view in views]
    try:
        if len(events) == 1:
            sent = await services.events.publish(events[0])
        else:
            sent = await services.events.publish_many(events)
    except Unavailable:
        log.warning("event bus down: %d %s event(s) not published", len(events), kind.value)
        return
    services.memory.handled(sent)


def announcement(
    services: Services, kind: EventKind, views: Iterable[JobView]
) -> list[tuple[str, str]] | None:
    """The events :func:`announce` would publish, as ``PUBLISH`` arguments for the broker to send
    in the same round trip as the jobs' tasks (before them); None when the event bus is on
    another Redis than the broker, and :func:`announce` must publish them itself."""
    if services.events.redis_url != services.broker.broker_url:
        return None
    views = list(views)
    if kind in TRANSITIONS:
        count_transitions(views)
    tz = services.settings.tz
    encoded = services.events.encoded(Event(kind, view.as_dict(tz)) for view in views)
    services.memory.handled(sum(len(message) for _, message in encoded))
    return encoded


async def announce_queue(events: EventBus | None, change: QueueChange, queue: str) -> None:
    """Publish a queue's pause or resume once committed, so the live views of the queues show it
    at once rather than at the next job event (without a bus at hand, they show it then)."""
    if events is None:
        return
    try:
        await events.publish(Event(change, {"queue": queue}))
    except Unavailable:
        log.warning("event bus down: %s of queue %s not published", change.value, queue)
