"""What the commands connect to: the settings, the database, the broker of a running serve."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from worker_automation.domain.errors import DomainError
from worker_automation.settings import Settings

if TYPE_CHECKING:  # the command line starts without the database layer loaded
    from worker_automation.models.database import Database


def iso(value: datetime | None, tz: ZoneInfo) -> str | None:
    """A timestamp as the API shows it (ISO 8601 in the configured zone)."""
    return None if value is None else value.astimezone(tz).isoformat(timespec="seconds")


def json_option(option: str, text: str) -> Any:
    """The value of a JSON option; bad JSON is a usage error (exit 2) before anything is done."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DomainError(f"{option} is not valid JSON: {exc}") from None


def broker_settings() -> Settings | None:
    """Settings that reach the broker: WA_REDIS_URL, or the embedded broker of the ``serve``
    running in this directory; None when there is neither (a command never starts a broker)."""
    from worker_automation.process.embedded_state import running_broker_url

    settings = Settings()
    if settings.redis_url is not None:
        return settings
    url = running_broker_url()
    return None if url is None else settings.model_copy(update={"redis_url": url})


def run_db(fn: Callable[[Database, Settings], Awaitable[int]]) -> int:
    """Migrate the database, run ``fn`` with it and the settings, and close it."""
    from worker_automation.models.database import Database
    from worker_automation.models.migrate import migrate

    async def run() -> int:
        settings = Settings()
        await migrate(settings.database_url)
        db = Database(settings)
        try:
            return await fn(db, settings)
        finally:
            await db.close()

    return asyncio.run(run())
