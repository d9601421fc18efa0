"""The async engine and session factory, built once per process from the settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from worker_automation.models.folding import SQLITE_FUNCTION, sqlite_fold
from worker_automation.settings import Settings


def _unicode_lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # SQLite's built-in lower() folds ASCII only ("Óptica" stays "Óptica"), so case-insensitive
    # searches would miss accented names that PostgreSQL finds; replace it with Python's.
    dbapi_connection.create_function("lower", 1, _unicode_lower, deterministic=True)
    dbapi_connection.create_function(SQLITE_FUNCTION, 1, sqlite_fold, deterministic=True)
    # WAL lets readers proceed while a writer commits; the busy timeout makes writers queue up
    # instead of failing when the API and the CLI share the file.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_engine(database_url: str) -> AsyncEngine:
    """An engine tuned for the database behind ``database_url``."""
    if database_url.startswith("sqlite"):
        engine = create_async_engine(database_url, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(
        database_url, pool_size=10, max_overflow=20, pool_pre_ping=True, pool_recycle=1800
    )


class Database:
    """Owns the engine and hands out sessions; closed by the app's lifespan."""

    def __init__(self, settings: Settings) -> None:
        self.url = settings.database_url
        self.engine = make_engine(settings.database_url)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session whose transaction commits on success and rolls back on error."""
        async with self.sessions() as session, session.begin():
            yield session

    async def ping(self) -> bool:
        """True when the database answers a trivial query."""
        from sqlalchemy import text

        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            return True
        except Exception:
            return False

    async def close(self) -> None:
        await self.engine.dispose()
