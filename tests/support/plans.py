"""The plan PostgreSQL keeps for a statement as SQLAlchemy sends it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from worker_automation.models.database import make_engine


def _literal(value: object) -> str:
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'"
    return f"'{value}'" if isinstance(value, str) else str(value)


async def prepared_plan(
    conn: asyncpg.Connection,
    database_url: str,
    statement: Any,
    values: dict[str, Any] | None = None,
    options: str = "",
    name: str = "page",
) -> str:
    """The plan of ``statement`` as SQLAlchemy sends it (the bounds' type converts its values: not
    the driver's fast path), with ``values`` over its defaults. Prepared in SQL, so that EXPLAIN
    EXECUTE shows the plan kept for it (the generic one, under ``force_generic_plan``)."""
    engine = make_engine(database_url)
    compiled = statement.compile(dialect=engine.dialect)
    await engine.dispose()
    values = {**{key: bind.value for key, bind in compiled.binds.items()}, **(values or {})}
    arguments = ", ".join(_literal(values[key]) for key in compiled.positiontup or ())
    await conn.execute(f"PREPARE {name} AS {compiled}")
    return "\n".join(row[0] for row in await conn.fetch(f"EXPLAIN {options} EXECUTE {name}({arguments})"))
