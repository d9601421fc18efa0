"""Fixtures shared by every test: fresh databases, an owned Redis database, settings."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis

from tests.services import (
    PG_HOST,
    PG_PORT,
    PG_USER,
    REDIS_HOST,
    REDIS_PORT,
    REDIS_TEST_DB,
    require_postgres,
    require_redis,
)
from tests.support.settings import MakeSettings

if TYPE_CHECKING:
    from worker_automation.resolvers.services import Services
    from worker_automation.settings import Settings


def _admin_dsn() -> str:
    return f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres"


def _admin(sql: str) -> None:
    """Run one statement on the server's maintenance database."""
    import asyncio

    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(_admin_dsn())
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def _url_of(name: str) -> str:
    return f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"


@pytest.fixture(scope="session")
def _migrated_template() -> Iterator[str]:
    """A database migrated to the head once for the whole run, which tests' databases are copies
    of: a copy costs half or less of what running every migration on a new database does."""
    require_postgres()
    import asyncio

    from worker_automation.models.migrate import migrate

    name = f"wa_test_template_{uuid.uuid4().hex[:12]}"
    _admin(f'CREATE DATABASE "{name}"')
    try:
        asyncio.run(migrate(_url_of(name)))
        yield name
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_pg_database_url() -> Iterator[str]:
    """A brand-new, empty PostgreSQL database for this test (no migration run), dropped afterwards."""
    require_postgres()
    name = f"wa_test_{uuid.uuid4().hex[:12]}"
    _admin(f'CREATE DATABASE "{name}"')
    try:
        yield _url_of(name)
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_database_url(_migrated_template: str) -> Iterator[str]:
    """A brand-new PostgreSQL database for this test, migrated to the head and holding no rows
    (a copy of the run's migrated template), dropped afterwards."""
    name = f"wa_test_{uuid.uuid4().hex[:12]}"
    _admin(f'CREATE DATABASE "{name}" TEMPLATE "{_migrated_template}"')
    try:
        yield _url_of(name)
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_database_url(tmp_path: Path) -> str:
    """A SQLite file of this test's own."""
    return f"sqlite+aiosqlite:///{tmp_path / 'wa.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Runs the test once on SQLite and once on real PostgreSQL, each database new and empty."""
    fixture = "sqlite_database_url" if request.param == "sqlite" else "empty_pg_database_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture
def redis_url() -> Iterator[str]:
    """The suite's own Redis database on the real server, emptied before and after the test."""
    require_redis()
    url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_TEST_DB}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    try:
        yield url
    finally:
        client.flushdb()
        client.close()


@pytest.fixture
def redis_prefix() -> str:
    """A key and channel prefix no other test shares (pub/sub channels span databases)."""
    return f"wa-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def anyio_backend() -> AsyncIterator[str]:
    yield "asyncio"


@pytest.fixture
def make_settings(redis_prefix: str) -> MakeSettings:
    """Settings for a test: its own database and Redis prefix, no embedded pool workers."""
    from worker_automation.settings import Settings

    def build(database_url: str, redis_url: str | None, **overrides: object) -> Settings:
        values: dict[str, Any] = {
            "database_url": database_url,
            "redis_url": redis_url,
            "redis_prefix": redis_prefix,
            "embedded_workers": False,
            "inspect_timeout_seconds": 1.0,
            # The reconciler is tested on its own; elsewhere it would send again what a test
            # leaves queued on purpose.
            "recovery_seconds": 0,
        }
        values.update(overrides)
        return Settings(**values)

    return build


async def _started_services(settings: Settings) -> AsyncIterator[Services]:
    """Services started on ``settings``, with every automation's settings row; closed after."""
    from worker_automation.resolvers.automations import ensure_settings_rows
    from worker_automation.resolvers.services import Services

    started = await Services.start(settings)
    await ensure_settings_rows(started.db)
    try:
        yield started
    finally:
        await started.close()


@pytest.fixture
async def services(
    pg_database_url: str, redis_url: str, make_settings: MakeSettings
) -> AsyncIterator[Services]:
    """Started services on a fresh PostgreSQL database and the suite's Redis database."""
    async for started in _started_services(make_settings(pg_database_url, redis_url)):
        yield started


@pytest.fixture
async def sqlite_services(sqlite_database_url: str, make_settings: MakeSettings) -> AsyncIterator[Services]:
    """Started services on SQLite with the embedded broker: needs no outside service."""
    async for started in _started_services(make_settings(sqlite_database_url, None)):
        yield started


@pytest.fixture
async def embedded_broker_services(database_url: str, make_settings: MakeSettings) -> AsyncIterator[Services]:
    """Started services on each database (SQLite, then PostgreSQL) with the embedded broker."""
    async for started in _started_services(make_settings(database_url, None)):
        yield started
