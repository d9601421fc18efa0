"""The ``queue_pauses`` table: a row per paused queue (jobs accepted, none run until resumed)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from worker_automation.models.base import Base, UtcDateTime, utcnow


class QueuePause(Base):
    """A paused queue: claims of its jobs are refused with ``queue_paused`` while the row exists.

    Kept in the database so a pause outlives restarts and holds for every replica and worker.
    """

    __tablename__ = "queue_pauses"

    queue: Mapped[str] = mapped_column(String(50), primary_key=True)
    paused_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    paused_by: Mapped[str | None] = mapped_column(String(120))
