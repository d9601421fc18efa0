"""Custom scalars of the GraphQL schema: ``JSON`` and ``DateTime``."""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any, NewType

import strawberry
from strawberry.types.scalar import ScalarDefinition

from worker_automation.schema.response_budget import spend_json

JSON = NewType("JSON", object)
DateTime = NewType("DateTime", str)


class ZonedInstant:
    """An instant rendered in ``tz`` only when serialized: a list page carries every timestamp
    of its rows and a query selects a few of them. For a value serialized once; one shared by
    many answers (an event's) is better rendered once, as a string."""

    __slots__ = ("tz", "value")

    def __init__(self, value: datetime, tz: tzinfo) -> None:
        self.value = value
        self.tz = tz

    def __str__(self) -> str:
        return self.value.astimezone(self.tz).isoformat(timespec="seconds")

    # Equal to the text it stands for, as the string it replaces would be.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, ZonedInstant)):
            return str(self) == str(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return repr(str(self))


def _serialize_datetime(value: Any) -> str:
    # Views hand over strings already rendered in the service's zone (as events carry them), or
    # a ZonedInstant; a bare datetime is accepted so the scalar never depends on who built the value.
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return str(value)


def _parse_datetime(value: Any) -> str:
    # Read as an instant where the argument is used (see operator_types.instant), which names the
    # argument in its error and keeps the instant to the microsecond; here only its kind is known.
    if not isinstance(value, str):
        raise TypeError("DateTime deve ser um texto ISO 8601")
    return value


def _identity(value: Any) -> Any:
    return value


JSON_SCALAR: ScalarDefinition = strawberry.scalar(
    name="JSON",
    description="Any JSON value (object, array, string, number, boolean or null), passed through as is.",
    specified_by_url="https://ecma-international.org/publications-and-standards/standards/ecma-404/",
    # Counted against the answer's size budget (see response_budget) as it is built.
    serialize=spend_json,
    parse_value=_identity,
)

DATETIME_SCALAR: ScalarDefinition = strawberry.scalar(
    name="DateTime",
    description=(
        "An instant as ISO 8601 text with its UTC offset, rendered in the service's configured time "
        "zone (WA_TIMEZONE), e.g. 2026-07-08T09:15:00-03:00. As an argument, an offset may be left "
        "out (the service's zone is meant) and fractions of a second are kept."
    ),
    serialize=_serialize_datetime,
    parse_value=_parse_datetime,
)

# Handed to StrawberryConfig(scalar_map=...): the NewTypes above become these scalars.
SCALAR_MAP: dict[object, ScalarDefinition] = {JSON: JSON_SCALAR, DateTime: DATETIME_SCALAR}
