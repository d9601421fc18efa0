"""What one process of the service holds: settings, database, broker gateway and event bus."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from worker_automation.broker.embedded import EmbeddedRedis
from worker_automation.broker.events import EventBus
from worker_automation.broker.gateway import BrokerGateway
from worker_automation.models.database import Database
from worker_automation.models.migrate import migrate
from worker_automation.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Services:
    """Built once at start-up (by the app's lifespan or a CLI command) and passed down."""

    settings: Settings
    db: Database
    broker: BrokerGateway
    events: EventBus
    redis_url: str
    embedded_redis: EmbeddedRedis | None = field(default=None)

    @classmethod
    async def start(cls, settings: Settings, *, migrate_db: bool = True) -> Services:
        """Migrate the database, bring up the embedded broker when no Redis is configured."""
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
        services = cls(settings, db, broker, events, redis_url, embedded)
        await events.start()
        return services

    async def close(self) -> None:
        await self.events.stop()
        await self.broker.close()
        await self.db.close()
        if self.embedded_redis is not None:
            self.embedded_redis.stop()
