"""The ``attempts`` table: one row per claim of a job, kept across its retries.

Rows are written by database triggers on ``workers`` (migration 0003): a job entering EXECUTANDO
opens an attempt and a job leaving it ends the open one, in the same statement as the change, so
every path that moves a job (claims, reports, cancel, move, bulk actions, recovery) keeps them
without a statement of its own; deleting a job deletes its attempts.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from worker_automation.models.base import Base, UtcDateTime


class AttemptOutcome(StrEnum):
    """How a run ended: the job's terminal state, or back in the queue (moved, recovered)."""

    CONCLUIDO = "CONCLUIDO"
    FALHA = "FALHA"
    CANCELADO = "CANCELADO"
    REENFILEIRADO = "REENFILEIRADO"


class Attempt(Base):
    """One run of a job: who claimed it under which task, when, and how it ended."""

    __tablename__ = "attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    worker_id: Mapped[int] = mapped_column(Integer)
    number: Mapped[int] = mapped_column(Integer)
    machine_id: Mapped[int | None] = mapped_column(Integer)
    task_id: Mapped[str | None] = mapped_column(String(64))
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    outcome: Mapped[str | None] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        # A job's attempts in order; also what the triggers find the open one and the next
        # number by.
        Index("ix_attempts_worker_number", "worker_id", "number", unique=True),
        # A task id's run, for a caller still holding an id its job has replaced (0022).
        Index("ix_attempts_task_id", "task_id"),
    )
