"""What one process of the service holds: settings, database, broker gateway and event bus."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from worker_automation.broker.embedded import EmbeddedRedis
from worker_automation.broker.events import EventBus
from worker_automation.broker.gateway import BrokerGateway
from worker_automation.infra.memory import MemoryReleaser
from worker_automation.models.database import Database
from worker_automation.models.migrate import migrate
from worker_automation.resolvers.automations import CurrentTimeLimits
from worker_automation.settings import Settings

log = logging.getLogger(__name__)
# How long closing waits for the writes still in flight (see :meth:`Services.in_background`).
SETTLE_SECONDS: Final = 5.0


@dataclass
class Services:
    """Built once at start-up (by the app's lifespan or a CLI command) and passed down."""

    settings: Settings
    db: Database
    broker: BrokerGateway
    events: EventBus
    redis_url: str
    embedded_redis: EmbeddedRedis | None = field(default=None)
    # The automations' time limits the task messages carry (admins may change them).
    time_limits: CurrentTimeLimits = field(default_factory=CurrentTimeLimits)
    # Gives memory back after large answers and announcements (one per process: the collection
    # and the trim are the whole process's).
    memory: MemoryReleaser = field(default_factory=MemoryReleaser)
    _background: set[asyncio.Task[Any]] = field(default_factory=set)

    def in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` without waiting for it (a write that must outlive a cancelled caller);
        :meth:`close` waits for it, so its database connection goes back before the pool closes."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            work.close()  # never started: nothing to warn about
            raise
        task = loop.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @classmethod
    async def start(
        cls, settings: Settings, *, migrate_db: bool = True, memory: MemoryReleaser | None = None
    ) -> Services:
        """Migrate the database, bring up the embedded broker when no Redis is configured.
        ``memory``: the process's releaser when it exists before the services (the API's);
        otherwise one is made that lets the database's idle connections go first."""
        if migrate_db:
            await migrate(settings.database_url)
        embedded: EmbeddedRedis | None = None
        redis_url = settings.redis_url
        if redis_url is None:
            embedded = EmbeddedRedis(port=settings.embedded_broker_port)
            embedded.start()
            redis_url = embedded.url
            # Worded so that nobody reads it as a Redis server to install.
            log.info("embedded broker listening on %s:%d (inside this process)", embedded.host, embedded.port)
        db = Database(settings)
        broker = BrokerGateway(settings, redis_url)
        events = EventBus(redis_url, settings.redis_prefix)
        if memory is None:
            memory = MemoryReleaser(first=db.refresh_idle_connections)
        services = cls(settings, db, broker, events, redis_url, embedded, memory=memory)
        await events.start()
        return services

    async def close(self) -> None:
        if self._background:
            await asyncio.wait(set(self._background), timeout=SETTLE_SECONDS)
        await self.events.stop()
        await self.broker.close()
        await self.db.close()
        if self.embedded_redis is not None:
            self.embedded_redis.stop()
