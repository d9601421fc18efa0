"""Timestamps of list pages are rendered in the service's zone only when a query selects them."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Self
from zoneinfo import ZoneInfo

from worker_automation.schema.scalars import DATETIME_SCALAR, ZonedInstant

SAO_PAULO = ZoneInfo("America/Sao_Paulo")


def test_it_serializes_as_the_instant_in_the_zone() -> None:
    instant = ZonedInstant(datetime(2026, 7, 8, 12, 15, 30, 999, tzinfo=UTC), SAO_PAULO)
    serialize = DATETIME_SCALAR.serialize
    assert serialize is not None
    assert serialize(instant) == "2026-07-08T09:15:30-03:00"
    # An offset of its own time, not of the moment it is rendered (Sao Paulo had summer time).
    summer = ZonedInstant(datetime(2018, 12, 1, 12, 0, tzinfo=UTC), SAO_PAULO)
    assert str(summer) == "2018-12-01T10:00:00-02:00"


def test_it_equals_the_text_it_stands_for() -> None:
    instant = ZonedInstant(datetime(2026, 7, 8, 12, 15, tzinfo=UTC), SAO_PAULO)
    assert instant == "2026-07-08T09:15:00-03:00"
    assert instant != "2026-07-08T12:15:00+00:00"
    # The same instant in another zone is other text.
    assert instant != ZonedInstant(datetime(2026, 7, 8, 12, 15, tzinfo=UTC), ZoneInfo("UTC"))
    assert instant == ZonedInstant(datetime(2026, 7, 8, 9, 15, tzinfo=SAO_PAULO), SAO_PAULO)
    assert hash(instant) == hash("2026-07-08T09:15:00-03:00")


def test_it_renders_nothing_until_serialized() -> None:
    class Counting(datetime):
        calls = 0

        def astimezone(self, tz: tzinfo | None = None) -> Self:
            Counting.calls += 1
            return super().astimezone(tz)

    instant = ZonedInstant(Counting(2026, 7, 8, 12, 15, tzinfo=UTC), SAO_PAULO)
    assert Counting.calls == 0
    assert str(instant).endswith("-03:00")
    assert Counting.calls == 1
