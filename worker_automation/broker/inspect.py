"""Asking the Celery workers what they are doing, within one timeout in total.

Each inspect broadcast waits its whole timeout unless told how many replies to expect, and with
no worker online it has to wait the whole timeout to learn that. So a ping goes out first (the one
wait that cannot be avoided), then the other sections are asked at once, in threads, of
exactly the workers that answered and with a reply limit, which returns as soon as they have all
replied.

The ping holds one broker connection during the long wait instead of five, and sends a single
broadcast when nobody listens. Why, with the timings: docs/decisions/0026-inspect-asks-a-ping-first.md.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

from celery import Celery

from worker_automation.domain.shapes import Doc

logger = logging.getLogger(__name__)

TARGETED_SECTIONS: Final = ("active", "reserved", "scheduled", "stats")
# What the process list asks besides: the queues each worker consumes.
PROCESS_SECTIONS: Final = (*TARGETED_SECTIONS, "active_queues")

# Upper bound of each follow-up: replies take milliseconds, so this only matters when a worker
# vanishes between the ping and the follow-ups.
FOLLOW_UP_TIMEOUT_SECONDS: Final = 0.5
QUICK_FAILURE_SECONDS: Final = 0.5


@dataclass(frozen=True)
class InspectResult:
    """What the workers answered, per section keyed by worker hostname; empty when none did."""

    active: Annotated[dict[str, Any], Doc("Tasks running, per worker.")] = field(default_factory=dict)
    reserved: Annotated[dict[str, Any], Doc("Tasks prefetched, per worker.")] = field(default_factory=dict)
    scheduled: Annotated[dict[str, Any], Doc("Tasks with an ETA, per worker.")] = field(default_factory=dict)
    stats: Annotated[dict[str, Any], Doc("Worker statistics, per worker.")] = field(default_factory=dict)
    ping: Annotated[dict[str, Any], Doc("Ping replies, per worker.")] = field(default_factory=dict)
    available: Annotated[bool, Doc("False when no worker (or no broker) answered.")] = False


@dataclass(frozen=True)
class ProcessReplies(InspectResult):
    """The documented sections and the queues each worker consumes (for the process list; the
    documented inspect answer keeps its own shape)."""

    active_queues: Annotated[dict[str, Any], Doc("Queues consumed, per worker.")] = field(
        default_factory=dict
    )


def _ask(app: Celery, section: str, timeout: float, destination: list[str] | None = None) -> dict[str, Any]:
    inspector = app.control.inspect(
        timeout=timeout,
        destination=destination,
        limit=len(destination) if destination else None,
    )
    replies: dict[str, Any] | None = getattr(inspector, section)()
    return dict(replies or {})


def _inspect(app: Celery, timeout: float, wanted: tuple[str, ...]) -> ProcessReplies:
    ping = _ask(app, "ping", timeout)
    if not ping:
        return ProcessReplies()
    hosts = sorted(ping)
    follow_up = min(timeout, FOLLOW_UP_TIMEOUT_SECONDS)
    with ThreadPoolExecutor(max_workers=len(wanted), thread_name_prefix="inspect") as pool:
        futures = {s: pool.submit(_ask, app, s, follow_up, hosts) for s in wanted}
        sections = {section: future.result() for section, future in futures.items()}
    return ProcessReplies(**sections, ping=ping, available=True)


def inspect_workers(app: Celery, timeout: float) -> InspectResult:
    """Ping, then ask active/reserved/scheduled/stats of the workers that answered (the documented
    inspect answer)."""
    replies = _replies(app, timeout, TARGETED_SECTIONS)
    return InspectResult(
        active=replies.active,
        reserved=replies.reserved,
        scheduled=replies.scheduled,
        stats=replies.stats,
        ping=replies.ping,
        available=replies.available,
    )


def inspect_processes(app: Celery, timeout: float) -> ProcessReplies:
    """As :func:`inspect_workers`, with the queues each worker consumes."""
    return _replies(app, timeout, PROCESS_SECTIONS)


def _replies(app: Celery, timeout: float, wanted: tuple[str, ...]) -> ProcessReplies:
    """Ping, then ask ``wanted`` of the workers that answered.

    Blocking (run it in a thread from async code); returns within about ``timeout`` + 0.5 s. A
    broker that cannot be reached gives an empty, unavailable result rather than an exception.
    """
    started = time.monotonic()
    try:
        return _inspect(app, timeout, wanted)
    except Exception as exc:
        failure: Exception = exc
    # After a Redis restart the first broadcast fails at once on a pooled connection the server
    # closed, and a second one on a fresh connection works. A slow failure is not worth repeating.
    if time.monotonic() - started < QUICK_FAILURE_SECONDS:
        try:
            return _inspect(app, timeout, wanted)
        except Exception as exc:
            failure = exc
    # The broker is down or unreachable: callers show "no workers", not an error page.
    logger.warning("celery inspect failed: %s", failure)
    return ProcessReplies()
