"""What every PostgreSQL connection of the service is set up with."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from sqlalchemy import Integer, bindparam, func, select, text
from sqlalchemy.pool import QueuePool

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


async def test_idle_connections_let_go_of_what_they_last_read(pg_database_url: str) -> None:
    """After large answers, each idle pooled connection runs one trivial statement (so asyncpg
    drops the last bytes it received), and no connection is opened for it: those kept for reads
    planned once included (a quarter of the pool, here one of four)."""
    db = Database(Settings(database_url=pg_database_url, database_pool_size=4, database_max_overflow=0))
    large = select(
        func.pg_backend_pid(), func.repeat("x", bindparam("size", type_=Integer)), func.pg_sleep(0.3)
    )
    try:
        rows = await asyncio.gather(
            *(db.rows(large, {"size": 300_000}, bounded=False) for _ in range(3)),
            db.rows(large, {"size": 300_000}, generic=True),
        )
        pids = {row[0][0] for row in rows}
        assert len(pids) == 4
        assert db._generic_engine is not None
        engines = (db.engine, db._generic_engine)
        pools = [pool for e in engines if isinstance(pool := e.sync_engine.pool, QueuePool)]
        assert len(pools) == 2
        assert [pool.checkedin() for pool in pools] == [3, 1]

        await db.refresh_idle_connections()

        assert [pool.checkedin() for pool in pools] == [3, 1]
        watcher = await asyncpg.connect(pg_database_url.replace("+asyncpg", ""))
        try:
            seen = await watcher.fetch(
                "SELECT pid, query, state FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
            )
        finally:
            await watcher.close()
        last = {record["pid"]: (record["query"], record["state"]) for record in seen}
        assert {pid: last.get(pid) for pid in pids} == {pid: ("SELECT 1", "idle") for pid in pids}
        assert set(last) == pids  # nothing else was opened
    finally:
        await db.close()
