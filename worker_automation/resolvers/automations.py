"""The registry as it is right now: static definitions plus the admins' run-time overrides."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Final

from sqlalchemy import bindparam, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Row

from worker_automation.catalog.registry import AUTOMATION_REGISTRY, Automation
from worker_automation.domain.errors import BadInput, NotFound
from worker_automation.models import AutomationSetting
from worker_automation.models.base import utcnow
from worker_automation.models.database import Database, Executor
from worker_automation.resolvers.audit import Actor, audited


def registered(key: str, field: str = "automation_type") -> Automation:
    """The static definition of ``key``; BadInput naming ``field`` when unknown."""
    automation = AUTOMATION_REGISTRY.get(key)
    if automation is None:
        raise BadInput(field, f"Automacao desconhecida: {key!r}")
    return automation


def apply_setting(
    automation: Automation, setting: AutomationSetting | Row[*tuple[Any, ...]] | None
) -> Automation:
    """``automation`` with the overrides of ``setting`` (a settings row, or any row carrying
    ``max_concurrent_jobs``, ``dev_mode`` and ``enabled``; the retry policy's and the time limit's
    columns when the row has them and they are set)."""
    if setting is None:
        return automation
    overrides: dict[str, Any] = {
        name: value for name in RETRY_FIELDS if (value := getattr(setting, name, None)) is not None
    }
    timeout = getattr(setting, "timeout_seconds", None)
    if timeout is not None:
        overrides["timeout_seconds"] = timeout_of_setting(timeout)
    return dataclasses.replace(
        automation,
        max_concurrent_jobs=setting.max_concurrent_jobs,
        dev_mode=setting.dev_mode,
        enabled=setting.enabled,
        **overrides,
    )


def timeout_of_setting(stored: float) -> float | None:
    """The time limit a stored override stands for: 0 is "no limit"."""
    return float(stored) if stored > 0 else None


# The retry policy's settings: the registry's default unless overridden (a null column).
RETRY_FIELDS = ("max_attempts", "retry_backoff_seconds", "retry_backoff_max_seconds")
# Their bounds when set by an admin.
_RETRY_BOUNDS = {
    "max_attempts": (1, 100),
    "retry_backoff_seconds": (0, 86400),
    "retry_backoff_max_seconds": (0, 86400),
}
# An admin's time limit, in seconds (0: none).
TIMEOUT_BOUNDS = (0, 86400)


# Read on every dispatch and claim: plain columns (an ORM object would cost more than the query),
# in statements built once.
_SETTING = select(
    AutomationSetting.max_concurrent_jobs,
    AutomationSetting.dev_mode,
    AutomationSetting.enabled,
    AutomationSetting.max_attempts,
    AutomationSetting.retry_backoff_seconds,
    AutomationSetting.retry_backoff_max_seconds,
    AutomationSetting.timeout_seconds,
).where(AutomationSetting.key == bindparam("key"))
_SETTING_LOCKED = _SETTING.with_for_update()


async def effective(session: Executor, key: str, *, lock: bool = False) -> Automation:
    """``key`` with its overrides; ``lock`` takes the row lock that serialises claims."""
    automation = registered(key)
    query = _SETTING_LOCKED if lock else _SETTING
    return apply_setting(automation, (await session.execute(query, {"key": key})).first())


async def all_effective(db: Database) -> list[Automation]:
    async with db.reader() as session:
        settings = {s.key: s for s in (await session.scalars(select(AutomationSetting))).all()}
    return [apply_setting(a, settings.get(a.key)) for a in AUTOMATION_REGISTRY.values()]


async def ensure_settings_rows(db: Database) -> None:
    """Give every registered automation its settings row (the claim lock needs one).

    Rows already there are left as they are (admins' overrides stay), and API processes starting
    together on a new database may all run this: a conflicting insert is skipped, not an error.
    """
    rows = [
        {
            "key": a.key,
            "max_concurrent_jobs": a.max_concurrent_jobs,
            "dev_mode": a.dev_mode,
            "enabled": a.enabled,
            "updated_at": utcnow(),
        }
        for a in AUTOMATION_REGISTRY.values()
    ]
    insert = postgresql_insert if db.dialect == "postgresql" else sqlite_insert
    statement = insert(AutomationSetting).values(rows).on_conflict_do_nothing(index_elements=["key"])
    async with db.session() as session:
        await session.execute(statement)


async def update_settings(
    db: Database,
    key: str,
    *,
    actor: Actor,
    max_concurrent_jobs: int | None = None,
    dev_mode: bool | None = None,
    enabled: bool | None = None,
    retry_policy: dict[str, int | None] | None = None,
    timeout_seconds: float | None = None,
) -> Automation:
    """Change an automation's limits at run time (admin operation, audited). ``retry_policy``:
    values of :data:`RETRY_FIELDS` to set; ``timeout_seconds``: its time limit (0: none)."""
    policy: dict[str, float] = {
        name: value for name, value in (retry_policy or {}).items() if value is not None
    }
    if timeout_seconds is not None:
        policy["timeout_seconds"] = timeout_seconds
    async with audited(db, actor, "update_automation_settings", f"automation:{key}") as note:
        note.detail = {
            name: value
            for name, value in (
                ("max_concurrent_jobs", max_concurrent_jobs),
                ("dev_mode", dev_mode),
                ("enabled", enabled),
                *policy.items(),
            )
            if value is not None
        }
        return await _update_settings(db, key, actor.label, max_concurrent_jobs, dev_mode, enabled, policy)


async def _update_settings(
    db: Database,
    key: str,
    actor: str,
    max_concurrent_jobs: int | None,
    dev_mode: bool | None,
    enabled: bool | None,
    policy: dict[str, float],
) -> Automation:
    if key not in AUTOMATION_REGISTRY:
        raise NotFound(f"Automacao '{key}' nao encontrada.")
    if max_concurrent_jobs is not None and not 1 <= max_concurrent_jobs <= 1000:
        raise BadInput("max_concurrent_jobs", "max_concurrent_jobs deve estar entre 1 e 1000")
    for name, value in policy.items():
        low, high = _RETRY_BOUNDS.get(name, TIMEOUT_BOUNDS)
        if not low <= value <= high:
            raise BadInput(name, f"{name} deve estar entre {low} e {high}")
    async with db.session() as session:
        setting = await session.get(AutomationSetting, key, with_for_update=True)
        base = AUTOMATION_REGISTRY[key]
        if setting is None:
            setting = AutomationSetting(
                key=key,
                max_concurrent_jobs=base.max_concurrent_jobs,
                dev_mode=base.dev_mode,
                enabled=base.enabled,
            )
            session.add(setting)
        if max_concurrent_jobs is not None:
            setting.max_concurrent_jobs = max_concurrent_jobs
        if dev_mode is not None:
            setting.dev_mode = dev_mode
        if enabled is not None:
            setting.enabled = enabled
        for name, value in policy.items():
            setattr(setting, name, value)
        setting.updated_by = actor
        await session.flush()
        return apply_setting(base, setting)


# How long a process goes on with the time limits it read before reading them again: an admin's
# change reaches every process within this (the process that made it at once, see forget).
TIME_LIMITS_REFRESH_SECONDS: Final = 5.0


class CurrentTimeLimits:
    """Each automation's time limit as admins left it (the registry's unless overridden), for the
    task messages a process sends and the runs the leader ends: read from the settings table at
    most every :data:`TIME_LIMITS_REFRESH_SECONDS`, one small statement, never per send."""

    def __init__(self) -> None:
        self._limits = {key: a.timeout_seconds for key, a in AUTOMATION_REGISTRY.items()}
        self._read_at = -math.inf

    def forget(self) -> None:
        """Read them again before the next use (this process just changed one)."""
        self._read_at = -math.inf

    async def current(self, db: Database) -> dict[str, float | None]:
        """Limit in seconds by automation key (None: none)."""
        if time.monotonic() - self._read_at >= TIME_LIMITS_REFRESH_SECONDS:
            async with db.connection() as conn:
                stored = {key: seconds for key, seconds in await conn.execute(_TIMEOUTS)}
            self._limits = {
                key: a.timeout_seconds if (value := stored.get(key)) is None else timeout_of_setting(value)
                for key, a in AUTOMATION_REGISTRY.items()
            }
            self._read_at = time.monotonic()
        return self._limits


_TIMEOUTS = select(AutomationSetting.key, AutomationSetting.timeout_seconds).where(
    AutomationSetting.timeout_seconds.is_not(None)
)
