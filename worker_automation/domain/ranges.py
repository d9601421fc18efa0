"""Whole numbers a caller sends within bounds, refused one way wherever they come in.

A priority, a page size, a number of days: each is checked by :func:`check_range`, so REST,
GraphQL and the CLI refuse a bad one with the same message naming the field. The bounds of a
job's priority and progress live here too, for the checks, the GraphQL descriptions and the
OpenAPI document.
"""

from __future__ import annotations

from typing import Final

from worker_automation.domain.errors import BadInput

# The largest page any list gives: REST and the command line refuse more, GraphQL caps at it.
MAX_PER_PAGE: Final = 100
# A job's priority: 0 runs first.
PRIORITY_MIN: Final = 0
PRIORITY_MAX: Final = 9
# How the bounds read in descriptions ("0..9").
PRIORITY_RANGE: Final = f"{PRIORITY_MIN}..{PRIORITY_MAX}"
# A job's progress, in percent.
PROGRESS_MIN: Final = 0
PROGRESS_MAX: Final = 100
PROGRESS_RANGE: Final = f"{PROGRESS_MIN}..{PROGRESS_MAX}"


def check_range(value: object, field: str, low: int, high: int) -> int:
    """``value`` when it is a whole number from ``low`` to ``high``; BadInput naming ``field``
    otherwise (JSON's true and false are not numbers, though Python counts them as ints)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadInput(field, f"{field} deve ser um inteiro entre {low} e {high}")
    return value


def check_priority(value: object, field: str = "priority") -> int:
    """A job's priority (``field``: what the caller calls it)."""
    return check_range(value, field, PRIORITY_MIN, PRIORITY_MAX)
