"""What every PostgreSQL connection of the service is set up with."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from worker_automation.models.database import Database
from worker_automation.settings import Settings

pytestmark = pytest.mark.services


async def test_connections_compile_no_jit(pg_database_url: str) -> None:
    db = Database(Settings(database_url=pg_database_url))
    try:
        async with db.reader() as session:
            assert (await session.execute(text("SHOW jit"))).scalar_one() == "off"
    finally:
        await db.close()
