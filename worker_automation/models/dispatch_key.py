"""The ``dispatch_keys`` table: the idempotency key a caller sent with a dispatch, and its job.

A caller that cannot tell whether its dispatch was recorded (its connection dropped, a timeout,
a 503 whose job was kept) sends it again with the same key and gets the job the first one made,
not a second job. A key lives as long as its job: deleting the job (by hand or by retention)
deletes its key, through a trigger on ``workers`` (migration 0021).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from worker_automation.models.base import Base, UtcDateTime, utcnow

# The longest key a caller may send (a UUID is 36 characters).
MAX_KEY_CHARS = 255


class DispatchKey(Base):
    """One key: the job it made and what the request that made it asked for."""

    __tablename__ = "dispatch_keys"

    key: Mapped[str] = mapped_column(String(MAX_KEY_CHARS), primary_key=True)
    worker_id: Mapped[int] = mapped_column(Integer)
    # sha256 of the request (automation, client, user, priority, context): the same key sent with
    # another request is refused instead of answered with a job that is not what it asks for.
    fingerprint: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)

    __table_args__ = (
        # What the trigger deletes a deleted job's key by.
        Index("ix_dispatch_keys_worker_id", "worker_id"),
    )
