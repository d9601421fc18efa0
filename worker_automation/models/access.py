"""Credentials: operator API keys and registered worker machines."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import CheckConstraint, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from worker_automation.models.base import Base, UtcDateTime, utcnow


class ApiKey(Base):
    """An operator key. Only a hash of the secret is kept; the key is shown once at creation."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(120))
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[str] = mapped_column(String(255))
    perfil: Mapped[str] = mapped_column(String(20))
    usuario_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class MachineStatus(StrEnum):
    """Set only by API actions (turn on / turn off), never by heartbeats."""

    LIGADO = "ligado"
    DESLIGADO = "desligado"


class Machine(Base):
    """A registered worker process: serves exactly one automation, or one queue (pool workers)."""

    __tablename__ = "machines"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(120), unique=True)
    automation: Mapped[str | None] = mapped_column(String(100))
    queue: Mapped[str | None] = mapped_column(String(50))
    status: Mapped[str] = mapped_column(String(12), default=MachineStatus.LIGADO.value)
    key_prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)
    last_claim_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # Presence: set while a jobCreated subscription of the machine is open (last_seen_at kept
    # fresh by the API process holding it), cleared when it closes (last_seen_at then says when).
    connected_since: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_seen_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    __table_args__ = (
        CheckConstraint("(automation IS NULL) <> (queue IS NULL)", name="serves_one_automation_or_queue"),
    )
