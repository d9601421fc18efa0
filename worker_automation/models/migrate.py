"""Applies the Alembic migrations shipped with the package, on PostgreSQL or SQLite."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import Connection

from worker_automation.models.database import make_engine

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Any constant works; it only has to be the same for every process migrating one database.
_PG_MIGRATION_LOCK = 715_301_442


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at the package's migrations (no alembic.ini needed)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def _upgrade(connection: Connection, revision: str) -> None:
    if connection.dialect.name == "postgresql":
        # Replicas starting together must not run the same migration twice.
        connection.execute(text(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})"))
    command.upgrade(alembic_config(connection), revision)


async def migrate(database_url: str, revision: str = "head") -> None:
    """Bring the database at ``database_url`` to ``revision`` (idempotent)."""
    engine = make_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade, revision)
    finally:
        await engine.dispose()


async def current_revision(database_url: str) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(lambda sync: MigrationContext.configure(sync).get_current_revision())
    finally:
        await engine.dispose()
