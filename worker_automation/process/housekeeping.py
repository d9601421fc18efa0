"""The periodic work of ``serve`` that must run in exactly one place: recovery, time limits, and
whatever else is added to :data:`PERIODIC`.

Several API replicas may run against one PostgreSQL database. Each runs a :class:`Housekeeper`;
only the one holding a session-level advisory lock (on a connection kept for that purpose) does
the work. When that replica dies, its connection closes, PostgreSQL releases the lock and another
replica takes it at its next tick. On SQLite (the embedded mode) there is one ``serve`` per
directory (a file lock), so it always leads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Final

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from worker_automation.infra.cancelling import end_patiently
from worker_automation.resolvers.periodic import Periodic
from worker_automation.resolvers.recovery import reconcile_periodic
from worker_automation.resolvers.retention import retention_periodic
from worker_automation.resolvers.schedule_firing import schedules_periodic
from worker_automation.resolvers.services import Services
from worker_automation.resolvers.time_limits import time_limits_periodic

log = logging.getLogger(__name__)

# Any constant shared by every replica of one database (advisory locks are per database).
LEADER_LOCK_KEY: Final = 0x7761_686B  # "wahk"
# How often a replica that does not lead asks again, and how often due work is looked for.
TICK_SECONDS: Final = 1.0
# How long stopping waits for the periodic work in progress before cancelling it: cancelled in the
# middle of a statement, a connection may never go back to its pool.
STOP_PATIENCE_SECONDS: Final = 10.0


def _periodic() -> tuple[Periodic, ...]:
    return (reconcile_periodic(), retention_periodic(), schedules_periodic(), time_limits_periodic())


class Leadership:
    """Holds (or not) the advisory lock that makes this process the leader."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self._conn: AsyncConnection | None = None

    async def held(self) -> bool:
        """True while this process leads; tries to become the leader when it does not."""
        if self.services.settings.is_sqlite:
            return True
        if self._conn is not None:
            try:
                # Ended at once: a probe left open would keep the session "idle in transaction"
                # for as long as this process leads (monitoring alarms, a server's
                # idle_in_transaction_session_timeout). The lock is the session's, not the
                # transaction's.
                await self._conn.execute(text("SELECT 1"))
                await self._conn.commit()
                return True
            except Exception:
                log.warning("lost the housekeeping lock's connection; another replica may lead now")
                await self.release()
                return False
        try:
            conn = await self.services.db.engine.connect()
        except Exception:
            return False
        try:
            got = bool(await conn.scalar(text("SELECT pg_try_advisory_lock(:key)"), {"key": LEADER_LOCK_KEY}))
            await conn.commit()
        except Exception:
            await conn.close()
            return False
        if not got:
            await conn.close()
            return False
        self._conn = conn
        log.info("this process now runs the periodic housekeeping (recovery and the rest)")
        return True

    async def release(self) -> None:
        """Give the lock up (the connection goes back to the pool without it)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            await conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": LEADER_LOCK_KEY})
            await conn.commit()
            await conn.close()
        except Exception:
            # A broken connection: its session, and the lock with it, is gone or going.
            with contextlib.suppress(Exception):
                await conn.invalidate()
                await conn.close()


class Housekeeper:
    """Runs :data:`PERIODIC` on the leader, each at its own interval, until stopped."""

    def __init__(self, services: Services, periodic: tuple[Periodic, ...] | None = None) -> None:
        self.services = services
        self.periodic = periodic if periodic is not None else _periodic()
        self.leadership = Leadership(services)
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._next_run: dict[str, float] = {}

    def start(self) -> None:
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.create_task(self._loop(), name="housekeeping")

    async def stop(self) -> None:
        """Let the work in progress end (its database connection goes back to the pool), then
        stop; cancelled only if it takes longer than :data:`STOP_PATIENCE_SECONDS`."""
        task, self._task = self._task, None
        self._stopping.set()
        await end_patiently(task, STOP_PATIENCE_SECONDS)
        await self.leadership.release()

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                if await self.leadership.held():
                    await self.run_due()
            except Exception:
                log.exception("housekeeping tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), TICK_SECONDS)

    async def run_due(self) -> None:
        """Run each periodic whose time has come (first ones right away)."""
        now = time.monotonic()
        for periodic in self.periodic:
            if self._stopping.is_set():
                return
            interval = periodic.interval(self.services.settings)
            if interval <= 0 or now < self._next_run.get(periodic.name, 0.0):
                continue
            self._next_run[periodic.name] = now + interval
            try:
                done = await periodic.run(self.services)
            except Exception as exc:
                log.warning("%s failed (tried again in %.0f s): %s", periodic.name, interval, exc)
                continue
            if done:
                log.info("%s: %d done", periodic.name, done)
