"""The audit trail: every write records who did what to which target, and how it ended."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Table, insert, update

from worker_automation.domain.errors import DomainError
from worker_automation.models import AuditEntry
from worker_automation.models.database import Database, Executor, database_unavailable

log = logging.getLogger(__name__)


# One Core statement on the table, built once: the ORM's insert path cost more than the insert.
_AUDIT = cast(Table, AuditEntry.__table__)
_RECORD = insert(_AUDIT).returning(_AUDIT.c.id)


@dataclass(frozen=True)
class Actor:
    """Who is acting: an operator key, a machine, or the command line."""

    label: str
    perfil: str | None = None


CLI_ACTOR = Actor("cli", "administrador")


@dataclass
class AuditNote:
    """Filled in by the operation while it runs; written when it ends."""

    target: str | None
    detail: dict[str, Any] = field(default_factory=dict)
    # Set by :meth:`record_in`: the entry already went out with the operation's own transaction.
    entry_id: int | None = None

    async def record_in(self, session: Executor, actor: Actor, action: str) -> None:
        """Add the ``ok`` entry to the operation's transaction instead of writing it in one of its
        own afterwards (a hot path saves a transaction). If the operation still fails after that,
        :func:`audited` turns this same entry into the failure's."""
        self.entry_id = await session.scalar(
            _RECORD,
            {
                "actor": actor.label,
                "perfil": actor.perfil,
                "action": action,
                "target": self.target,
                "result": "ok",
                "detail": self.detail or None,
            },
        )


async def record_entries(
    session: Executor, actor: Actor, action: str, entries: list[tuple[str | None, dict[str, Any]]]
) -> None:
    """Add one ``ok`` entry per (target, detail) to the caller's transaction, in one statement:
    the entries of a batch operation that acts on each target on its own account."""
    if entries:
        rows = [
            {
                "actor": actor.label,
                "perfil": actor.perfil,
                "action": action,
                "target": target,
                "result": "ok",
                "detail": detail or None,
            }
            for target, detail in entries
        ]
        await session.execute(insert(_AUDIT), rows)


@asynccontextmanager
async def audited(db: Database, actor: Actor, action: str, target: str | None) -> AsyncIterator[AuditNote]:
    """Record the operation's outcome (``ok`` or the error code) after it ends."""
    note = AuditNote(target)
    try:
        yield note
    except DomainError as exc:
        await _write(db, actor, action, note, exc.code.lower(), {**note.detail, "message": exc.message})
        raise
    except Exception as exc:
        await _write(db, actor, action, note, "error", {**note.detail, "message": type(exc).__name__})
        raise
    if note.entry_id is None:
        await _write(db, actor, action, note, "ok", note.detail)


async def _write(
    db: Database, actor: Actor, action: str, note: AuditNote, result: str, detail: dict[str, Any]
) -> None:
    try:
        async with db.session() as session:
            # An ok entry committed with the operation (which failed afterwards) is there to be
            # updated; one rolled back with it is not, and a new entry is written.
            if note.entry_id is not None:
                updated = await session.scalar(
                    update(AuditEntry)
                    .where(AuditEntry.id == note.entry_id)
                    .values(target=note.target, result=result, detail=detail or None)
                    .returning(AuditEntry.id)
                )
                if updated is not None:
                    return
            session.add(
                AuditEntry(
                    actor=actor.label,
                    perfil=actor.perfil,
                    action=action,
                    target=note.target,
                    result=result,
                    detail=detail or None,
                )
            )
    except Exception as exc:
        # The operation's own outcome stands even if its audit line cannot be written.
        if database_unavailable(exc):
            # An outage (a full disk): the request reports it once; this says what it cost.
            log.warning("audit entry for %s on %s not written: database unavailable", action, note.target)
            return
        log.exception("audit entry for %s on %s not written", action, note.target)
