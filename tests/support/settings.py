"""The type of the ``make_settings`` fixture, so tests that build settings are checked like the
package."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from worker_automation.settings import Settings


class MakeSettings(Protocol):
    """Settings on ``database_url`` and ``redis_url`` (None: the embedded broker) with the test's
    own Redis prefix, no embedded pool workers, and ``overrides`` (Settings' field names)."""

    def __call__(self, database_url: str, redis_url: str | None, **overrides: object) -> Settings: ...
