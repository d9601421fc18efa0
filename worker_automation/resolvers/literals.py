"""Values written into a statement's text rather than sent as its parameters.

For values that are the same at every call of a statement (the live views' statuses, queues and
list sizes; a list page's fetch size). PostgreSQL plans a statement without parameters once and
keeps that plan; with a parameter in a ``LIMIT`` it estimated a tenth of the table for its
generic plan, found it costlier than a plan for the values, and planned the statement anew on
every call.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, String, bindparam, literal_column


def written(value: str) -> Any:
    """``value`` rendered into the statement's text at execution, quoted by the dialect (so only
    for statements run through SQLAlchemy: the driver's own path refuses such a statement)."""
    return bindparam(None, value, String, literal_execute=True)


def written_count(value: int) -> Any:
    """A row count (a ``LIMIT``) written into the statement's text."""
    return literal_column(str(int(value)), Integer)
