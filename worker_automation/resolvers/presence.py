"""A dedicated machine's presence: its open ``jobCreated`` subscription.

Machines send no "alive" signal of their own (their status is on/off, set through the API), and
none is added: a machine that runs holds its ``jobCreated`` subscription open, and reopens it
with backoff when it drops. So the subscription is its presence. Presence is kept in the
machine's row, where every API replica sees it: ``connected_since`` set when a subscription
opens and cleared when it closes, ``last_seen_at`` the last moment it was known open. The
process holding a subscription refreshes ``last_seen_at`` every :func:`refresh_interval`, so a
replica that dies (and cannot clear what it set) leaves a row that goes stale: a machine is
connected while ``connected_since`` is set and ``last_seen_at`` is recent (:func:`stale_after`).

A machine that is gone (killed, its host down) leaves its runs EXECUTANDO with nobody to report
them. Once its presence has ended for :func:`absence_grace` (as the reconciler saw it, so an API
that was itself away does not count the machines it could not see), its runs claimed while it
was present end ``machine_lost`` (see ``recovery``). Runs of a machine that never subscribed, or
claimed after its subscription ended, keep the rule of machines without one: the machine reports
them at its next start. A machine turned off loses its subscription but not its runs: it may
still be running them, and reports them as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import bindparam, func, or_, select, update

from worker_automation.models import Job, JobStatus, Machine, MachineStatus, utcnow
from worker_automation.resolvers.machines import MachineView
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings

log = logging.getLogger(__name__)

# Bounds of the refresh period (the recovery window sets it in between).
MIN_REFRESH_SECONDS: Final = 1.0
MAX_REFRESH_SECONDS: Final = 10.0
# A refresh that failed (the database away) is tried again this soon.
RETRY_SECONDS: Final = 1.0

_OPEN = (
    update(Machine)
    .where(Machine.id == bindparam("machine"))
    .values(connected_since=bindparam("since"), last_seen_at=bindparam("now"))
)
# Keeps the row fresh; sets it connected again if a newer subscription of the same machine closed
# (and cleared it) while this one stays open.
_REFRESH = (
    update(Machine)
    .where(Machine.id == bindparam("machine"))
    .values(
        connected_since=func.coalesce(Machine.connected_since, bindparam("since")),
        last_seen_at=bindparam("now"),
    )
)
# Only the subscription that set the row clears it: an older one closing after a reconnect
# leaves the newer one's presence alone.
_CLOSE = (
    update(Machine)
    .where(Machine.id == bindparam("machine"), Machine.connected_since == bindparam("since"))
    .values(connected_since=None, last_seen_at=bindparam("now"))
)


def refresh_interval(settings: Settings) -> float:
    """How often the process holding a subscription marks its machine as still there."""
    window = settings.recovery_seconds / 4 if settings.recovery_seconds > 0 else MAX_REFRESH_SECONDS
    return max(MIN_REFRESH_SECONDS, min(MAX_REFRESH_SECONDS, window))


def stale_after(settings: Settings) -> float:
    """A presence not refreshed for this long is over (its API process died)."""
    return 3 * refresh_interval(settings)


def absence_grace(settings: Settings) -> float:
    """How long a machine may be away (reconnecting) before its runs are taken as lost; with the
    reconciler's passes a quarter of the window apart, they end within the recovery window."""
    return settings.recovery_seconds / 2


def is_connected(
    connected_since: datetime | None, last_seen_at: datetime | None, settings: Settings, now: datetime
) -> bool:
    """Whether a machine's row says it holds a ``jobCreated`` subscription open now."""
    if connected_since is None or last_seen_at is None:
        return False
    return now - last_seen_at <= timedelta(seconds=stale_after(settings))


@dataclass
class Presence:
    """One open ``jobCreated`` subscription of a machine, kept in its row until :meth:`close`."""

    services: Services
    machine_id: int
    since: datetime = field(default_factory=utcnow)
    _refresher: asyncio.Task[None] | None = None

    async def _write(self, statement: object) -> None:
        params = {"machine": self.machine_id, "since": self.since, "now": utcnow()}
        async with self.services.db.connection() as conn:
            await conn.execute(statement, params)  # type: ignore[call-overload]

    async def _refresh(self) -> None:
        interval = refresh_interval(self.services.settings)
        while True:
            try:
                await self._write(_REFRESH)
                delay = interval
            except Exception as exc:
                log.info("presence of machine %s not refreshed: %s", self.machine_id, exc)
                delay = RETRY_SECONDS
            await asyncio.sleep(delay)

    def close(self) -> None:
        """The subscription ended: stop refreshing and clear the row (in the background, so a
        subscription cancelled with its socket still records when its machine left)."""
        if self._refresher is not None:
            self._refresher.cancel()
        try:
            self.services.in_background(self._release())
        except RuntimeError:
            return  # finalised outside a loop (the process ending): the row goes stale by itself

    async def _release(self) -> None:
        try:
            await self._write(_CLOSE)
        except Exception as exc:
            # The row goes stale by itself instead (nothing refreshes it any more).
            log.info("presence of machine %s not cleared: %s", self.machine_id, exc)


async def machine_present(services: Services, machine: MachineView) -> Presence:
    """Record that ``machine`` holds a ``jobCreated`` subscription open, until the returned
    presence is closed (a database that does not answer now is tried again by the refresher)."""
    presence = Presence(services, machine.id)
    with contextlib.suppress(Exception):
        await presence._write(_OPEN)
    presence._refresher = asyncio.get_running_loop().create_task(presence._refresh())
    return presence


# (job id, task id, machine id) of a run held by a machine that is gone.
LostRun = tuple[int, str | None, int]


class Absences:
    """What the reconciler saw of machines that went away. An absence counts from when the
    machine was last seen, or from this reconciler's first look if that is later (an API that
    was itself away cannot tell the machines that left from those that will reconnect now); and
    a machine is taken as gone only when two looks in a row found it away (a presence that went
    stale while the database was down is refreshed within a second of its return)."""

    def __init__(self) -> None:
        self._seeing_since: datetime | None = None
        self._away: set[tuple[int, datetime]] = set()

    async def lost_runs(self, services: Services, *, watched: bool = True) -> list[LostRun]:
        """The runs of machines away for longer than :func:`absence_grace`, claimed while they
        were present; ``watched``: counted from this reconciler's first look at the latest
        (a manual run, which looks twice seconds apart, goes by the rows alone)."""
        settings = services.settings
        grace = absence_grace(settings)
        if grace <= 0:
            return []
        now = utcnow()
        stale = timedelta(seconds=stale_after(settings))
        query = (
            select(Job.id, Job.task_id, Job.data_inicio, Machine.id, Machine.last_seen_at)
            .join(Machine, Machine.id == Job.machine_id)
            .where(
                Job.status == JobStatus.EXECUTANDO.value,
                Machine.automation.is_not(None),
                Machine.status == MachineStatus.LIGADO.value,
                Machine.last_seen_at.is_not(None),
                or_(Machine.connected_since.is_(None), Machine.last_seen_at < now - stale),
            )
            .order_by(Job.id)
        )
        async with services.db.reader() as session:
            rows: list[tuple[int, str | None, datetime | None, int, datetime]] = [
                tuple(row)  # type: ignore[misc]
                for row in (await session.execute(query)).all()
            ]
        if self._seeing_since is None:
            self._seeing_since = now
        away_before, self._away = self._away, {(machine_id, seen) for *_, machine_id, seen in rows}
        lost: list[LostRun] = []
        for job_id, task_id, started, machine_id, seen in rows:
            since = max(seen, self._seeing_since) if watched else seen
            if (now - since).total_seconds() < grace or (machine_id, seen) not in away_before:
                continue
            # A run claimed after the machine's presence ended is one it runs without a
            # subscription: it reports that one itself, at its next start.
            if started is not None and started > seen + stale:
                continue
            lost.append((job_id, task_id, machine_id))
        return lost
