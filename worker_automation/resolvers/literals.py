"""Values written into a statement's text rather than sent as its parameters.

For statements whose values are the same at every call (the live views' statuses, queues and
list sizes). PostgreSQL plans a statement without parameters once and keeps that plan; with a
parameter in a ``LIMIT`` it estimated a tenth of the table for its generic plan, found it
costlier than a plan for the values, and planned the statement anew on every call.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, String, bindparam, literal_column


def written(value: str) -> Any:
    """``value`` rendered into the statement's text at execution, quoted by the dialect."""
    return bindparam(None, value, String, literal_execute=True)


def written_count(value: int) -> Any:
    """A row count (a ``LIMIT``) written into the statement's text."""
    return literal_column(str(int(value)), Integer)
