"""How many pooled connections an engine has handed out: tests check that reads give them back.

``checkedout`` belongs to the queue pools only (SQLAlchemy's async engines use one on both
databases), so the pool is checked to be one rather than the attribute trusted blindly.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool


def checked_out(engine: AsyncEngine) -> int:
    """Connections of ``engine``'s pool in use right now."""
    pool = engine.pool
    assert isinstance(pool, QueuePool), type(pool)
    return pool.checkedout()
