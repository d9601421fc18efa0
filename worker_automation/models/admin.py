"""Run-time automation settings changed by admins, and the audit trail of every write."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Float, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from worker_automation.models.base import Base, JSONType, UtcDateTime, utcnow


class AutomationSetting(Base):
    """Overrides of the registry's ``max_concurrent_jobs``, ``dev_mode``, ``enabled``, retry
    policy and time limit.

    Claims lock this row, which serialises concurrent claims of one automation.
    """

    __tablename__ = "automation_settings"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    max_concurrent_jobs: Mapped[int] = mapped_column(Integer)
    dev_mode: Mapped[bool] = mapped_column(Boolean, default=False)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    # Retry policy overrides (null: the registry's default).
    max_attempts: Mapped[int | None] = mapped_column(Integer)
    retry_backoff_seconds: Mapped[int | None] = mapped_column(Integer)
    retry_backoff_max_seconds: Mapped[int | None] = mapped_column(Integer)
    # Time limit override in seconds (null: the registry's; 0: no limit).
    timeout_seconds: Mapped[float | None] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)
    updated_by: Mapped[str | None] = mapped_column(String(120))


class AuditEntry(Base):
    """Who did what to which target, when, and how it ended."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(String(120))
    perfil: Mapped[str | None] = mapped_column(String(20))
    action: Mapped[str] = mapped_column(String(60))
    target: Mapped[str | None] = mapped_column(String(120))
    result: Mapped[str] = mapped_column(String(20))
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSONType)

    __table_args__ = (
        Index("ix_audit_log_at", "at"),
        # auditLog filtered by action, newest first.
        Index("ix_audit_log_action_id", "action", "id"),
        # auditLog filtered by target (a job's page), newest first.
        Index("ix_audit_log_target_id", "target", "id"),
    )
