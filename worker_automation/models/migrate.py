"""Applies the Alembic migrations shipped with the package, on PostgreSQL or SQLite."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from worker_automation.models.database import make_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Any constant works; it only has to be the same for every process migrating one database.
_PG_MIGRATION_LOCK = 715_301_442


# ``revision = "0007"`` / ``down_revision = "0006"`` (or None) in a version file.
_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*=\s*(?:[\"']([^\"']*)[\"']|None)", re.MULTILINE)


def shipped_head() -> str:
    """The newest revision shipped with the package, read from the version files (without loading
    Alembic): the one no other revision names as its parent."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("[0-9]*.py"):
        for name, value in _REVISION_LINE.findall(path.read_text(encoding="utf-8")):
            if value:
                (revisions if name == "revision" else parents).add(value)
    heads = revisions - parents
    if len(heads) != 1:
        raise RuntimeError(f"the shipped migrations have {len(heads)} heads: {sorted(heads)}")
    return heads.pop()


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at the package's migrations (no alembic.ini needed)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def _upgrade(connection: Connection, revision: str) -> None:
    from alembic import command

    if connection.dialect.name == "postgresql":
        # Replicas starting together must not run the same migration twice.
        connection.execute(text(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})"))
    command.upgrade(alembic_config(connection), revision)


async def migrate(database_url: str, revision: str = "head") -> None:
    """Bring the database at ``database_url`` to ``revision`` (idempotent).

    A database already at the shipped head is only read: Alembic (about 12 MiB) is loaded only
    when there is something to apply, and every API process checks at start."""
    engine = make_engine(database_url)
    try:
        if revision == "head" and await _recorded_revision(engine) == shipped_head():
            return
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade, revision)
    finally:
        await engine.dispose()


async def _recorded_revision(engine: AsyncEngine) -> str | None:
    """The revision recorded in ``alembic_version``, or None (no such table, or no row)."""
    try:
        async with engine.connect() as conn:
            found = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
    except Exception:  # not migrated yet (or unreachable: Alembic's path then says so)
        return None
    return str(found[0][0]) if len(found) == 1 else None


async def current_revision(database_url: str) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(lambda sync: MigrationContext.configure(sync).get_current_revision())
    finally:
        await engine.dispose()
