"""What the commands connect to: the settings, the database, the broker of a running serve."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from worker_automation.domain.errors import DomainError
from worker_automation.settings import Settings

if TYPE_CHECKING:  # the command line starts without the database layer loaded
    from worker_automation.models.database import Database


def iso(value: datetime | None, tz: ZoneInfo) -> str | None:
    """A timestamp as the API shows it (ISO 8601 in the configured zone)."""
    return None if value is None else value.astimezone(tz).isoformat(timespec="seconds")


def print_table(rows: Sequence[Sequence[str]]) -> None:
    """``rows`` (a header first) as aligned columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


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


def new_database_file(settings: Settings) -> Path | None:
    """The SQLite file ``settings`` name when it does not exist yet (a command is about to
    create it); None for PostgreSQL, an in-memory database or a file that exists."""
    if not settings.is_sqlite:
        return None
    from sqlalchemy import make_url

    name = make_url(settings.database_url).database
    if not name or name == ":memory:":
        return None
    path = Path(name)
    return None if path.exists() else path


def run_db(fn: Callable[[Database, Settings], Awaitable[int]]) -> int:
    """Migrate the database, run ``fn`` with it and the settings, and close it. When that
    created a new SQLite file and the command succeeded, says so on stderr: a command run outside
    the directory of the ``serve`` it meant would otherwise work, quietly, on a database nobody
    serves. (A refused command prints its error alone.)"""
    from worker_automation.models.database import Database
    from worker_automation.models.migrate import migrate

    async def run() -> int:
        settings = Settings()
        created = new_database_file(settings)
        await migrate(settings.database_url)
        db = Database(settings)
        try:
            code = await fn(db, settings)
        finally:
            await db.close()
        if created is not None and code == 0:
            print(
                f"note: there was no database here; created {created}. A serve started elsewhere "
                "keeps its own: run commands in its directory, or set WA_DATABASE_URL",
                file=sys.stderr,
            )
        return code

    return asyncio.run(run())
