"""The ``schedules`` table: jobs created on a cron timetable (what Celery beat does, kept here)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from worker_automation.models.base import Base, JSONType, UtcDateTime, utcnow


class Schedule(Base):
    """A cron expression in a time zone, and the job it creates at each occurrence.

    ``next_run_at`` is the occurrence still to fire. Whoever fires it moves it forward with a
    compare-and-set in the transaction that creates the job, so an occurrence fires once whatever
    the number of replicas or restarts.
    """

    __tablename__ = "schedules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    automation_type: Mapped[str] = mapped_column(String(100))
    cliente_id: Mapped[int | None] = mapped_column(Integer)
    context: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    cron: Mapped[str] = mapped_column(String(120))
    timezone: Mapped[str] = mapped_column(String(64))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    next_run_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_run_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_worker_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(120))

    __table_args__ = (
        # The leader's look for due occurrences.
        Index("ix_schedules_enabled_next_run_at", "enabled", "next_run_at"),
    )
