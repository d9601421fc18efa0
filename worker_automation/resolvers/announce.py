"""Publishing state changes once they are committed."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from worker_automation.broker.events import Event, EventKind
from worker_automation.errors import Unavailable
from worker_automation.resolvers.views import WorkerView
from worker_automation.services import Services

log = logging.getLogger(__name__)


async def announce(services: Services, kind: EventKind, views: Iterable[WorkerView]) -> None:
    """Publish one event per changed row. The database already holds the change, so a Redis
    outage costs only the live notification (subscribers re-read state when it comes back)."""
    tz = services.settings.tz
    events = [Event(kind, view.as_dict(tz)) for view in views]
    if not events:
        return
    try:
        if len(events) == 1:
            await services.events.publish(events[0])
        else:
            await services.events.publish_many(events)
    except Unavailable:
        log.warning("event bus down: %d %s event(s) not published", len(events), kind.value)
