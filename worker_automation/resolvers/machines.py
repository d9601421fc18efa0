"""Registered worker machines: registration (key shown once), on/off, listing, key lookup."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from sqlalchemy import bindparam, select
from sqlalchemy.exc import IntegrityError

from worker_automation.broker.access_changes import AccessChange
from worker_automation.domain.errors import BadInput, Conflict, NotFound, Unauthenticated
from worker_automation.models import Job, JobStatus, Machine, MachineStatus
from worker_automation.models.database import Database, Executor
from worker_automation.resolvers.audit import Actor, audited
from worker_automation.resolvers.auth import hash_secret, new_secret
from worker_automation.resolvers.automations import registered
from worker_automation.resolvers.job_views import iso
from worker_automation.resolvers.transitions import hold_after_machine_run

if TYPE_CHECKING:
    from worker_automation.broker.events import EventBus

MSG_MACHINE_KEY_MISSING = "X-Worker-Api-Key ausente."
MSG_MACHINE_KEY_INVALID = "X-Worker-Api-Key invalida."


@dataclass(frozen=True)
class MachineView:
    """A machine as callers see it (never its key)."""

    id: int
    name: str
    automation: str | None
    queue: str | None
    status: str
    created_at: datetime
    last_claim_at: datetime | None
    # Presence (resolvers.presence); not read by the worker protocol's own lookups.
    connected_since: datetime | None = None
    last_seen_at: datetime | None = None

    @property
    def is_on(self) -> bool:
        return self.status == MachineStatus.LIGADO.value

    def as_dict(self, tz: ZoneInfo) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "automation": self.automation,
            "queue": self.queue,
            "status": self.status,
            "created_at": iso(self.created_at, tz),
            "last_claim_at": iso(self.last_claim_at, tz),
        }


# The columns of a MachineView, in its field order (a plain row instead of an ORM object).
MACHINE_COLUMNS = (
    Machine.id,
    Machine.name,
    Machine.automation,
    Machine.queue,
    Machine.status,
    Machine.created_at,
    Machine.last_claim_at,
)
# Run by every request of a worker process: built once (see auth._KEY_BY_HASH).
_MACHINE_BY_HASH = select(*MACHINE_COLUMNS).where(Machine.key_hash == bindparam("key_hash"))


def machine_view(row: Machine) -> MachineView:
    return MachineView(
        row.id,
        row.name,
        row.automation,
        row.queue,
        row.status,
        row.created_at,
        row.last_claim_at,
        row.connected_since,
        row.last_seen_at,
    )


@dataclass(frozen=True)
class RegisteredMachine:
    """A machine just registered; ``api_key`` is shown this once."""

    machine: MachineView
    api_key: str


async def register_machine(
    db: Database,
    actor: Actor,
    queues: dict[str, int],
    *,
    name: str,
    automation: str | None = None,
    queue: str | None = None,
) -> RegisteredMachine:
    """Register a machine serving exactly one automation, or one queue (Celery pool workers)."""
    name = (name or "").strip()
    if not name:
        raise BadInput("name", "name e obrigatorio")
    if (automation is None) == (queue is None):
        raise BadInput("automation", "Informe exatamente um de automation ou queue")
    if automation is not None:
        registered(automation, "automation")
    if queue is not None and queue not in queues:
        raise BadInput("queue", f"queue desconhecida: {queue!r}")
    secret = new_secret("wmk")
    async with audited(db, actor, "machine.register", f"machine:{name}") as note:
        try:
            async with db.session() as session:
                row = Machine(
                    name=name,
                    automation=automation,
                    queue=queue,
                    status=MachineStatus.LIGADO.value,
                    key_prefix=secret[:10],
                    key_hash=hash_secret(secret),
                )
                session.add(row)
                await session.flush()
                view = machine_view(row)
        except IntegrityError:
            raise Conflict(f"Ja existe uma maquina chamada {name!r}.", status="exists") from None
        note.detail = {"id": view.id, "automation": automation, "queue": queue}
    return RegisteredMachine(view, secret)


async def set_machine_status(
    db: Database, actor: Actor, machine_id: int, on: bool, events: EventBus | None = None
) -> MachineView:
    """Turn a machine on or off (the only way its status changes); off closes its websockets."""
    action = "machine.on" if on else "machine.off"
    async with audited(db, actor, action, f"machine:{machine_id}"), db.session() as session:
        row = await session.get(Machine, machine_id, with_for_update=True)
        if row is None:
            raise NotFound("Maquina nao encontrada.")
        row.status = (MachineStatus.LIGADO if on else MachineStatus.DESLIGADO).value
        await session.flush()
        view = machine_view(row)
    if not on and events is not None:
        await events.announce_access(AccessChange(machine_id=machine_id))
    return view


async def list_machines(db: Database) -> list[MachineView]:
    async with db.reader() as session:
        rows = await session.scalars(select(Machine).order_by(Machine.id))
        return [machine_view(r) for r in rows.all()]


async def machines_by_id(db: Database, ids: list[int]) -> dict[int, MachineView]:
    """Batch lookup (for DataLoaders): one query for any number of ids."""
    if not ids:
        return {}
    async with db.reader() as session:
        rows = await session.scalars(select(Machine).where(Machine.id.in_(ids)))
        return {r.id: machine_view(r) for r in rows.all()}


@dataclass(frozen=True)
class MachineKey:
    """An ``X-Worker-Api-Key`` as a request sent it, not looked up yet.

    The worker protocol's per-job operations (claim, complete, fail) find the machine in their own
    first statement: one round trip and one pooled connection fewer than looking it up apart.
    """

    key_hash: str

    @classmethod
    def sent(cls, raw_key: str | None) -> MachineKey:
        if not raw_key:
            raise Unauthenticated(MSG_MACHINE_KEY_MISSING)
        return cls(hash_secret(raw_key))


# A machine already known (the command line, the embedded pool), or the key a request carried.
MachineRef = MachineView | MachineKey


async def machine_in(conn: Executor, key: MachineKey) -> MachineView:
    """The machine behind ``key``, read on ``conn``; Unauthenticated for an unknown key."""
    found = (await conn.execute(_MACHINE_BY_HASH, {"key_hash": key.key_hash})).first()
    if found is None:
        raise Unauthenticated(MSG_MACHINE_KEY_INVALID)
    return MachineView(*found)


async def authenticate_machine(db: Database, raw_key: str | None) -> MachineView:
    """The machine behind an ``X-Worker-Api-Key``."""
    key = MachineKey.sent(raw_key)
    async with db.connection() as conn:
        return await machine_in(conn, key)


async def machine_named(db: Database, name: str) -> MachineView | None:
    async with db.reader() as session:
        row = await session.scalar(select(Machine).where(Machine.name == name))
        return machine_view(row) if row else None


async def rotate_machine_key(
    db: Database, actor: Actor, machine_id: int, events: EventBus | None = None
) -> RegisteredMachine:
    """Issue a new key for an existing machine (the old one stops working, its websockets close)."""
    secret = new_secret("wmk")
    async with audited(db, actor, "machine.rotate_key", f"machine:{machine_id}"), db.session() as session:
        row = await session.get(Machine, machine_id, with_for_update=True)
        if row is None:
            raise NotFound("Maquina nao encontrada.")
        row.key_hash = hash_secret(secret)
        row.key_prefix = secret[:10]
        row.status = MachineStatus.LIGADO.value
        await session.flush()
        created = RegisteredMachine(machine_view(row), secret)
    if events is not None:
        await events.announce_access(AccessChange(machine_id=machine_id))
    return created


async def machine_grants(db: Database, ids: list[int]) -> dict[int, tuple[str, bool]]:
    """Each machine's key hash and whether it is on (what a websocket of it was let in with);
    deleted machines are missing."""
    if not ids:
        return {}
    query = select(Machine.id, Machine.key_hash, Machine.status).where(Machine.id.in_(sorted(set(ids))))
    async with db.reader() as session:
        rows = (await session.execute(query)).all()
    on = MachineStatus.LIGADO.value
    return {machine_id: (key_hash, status == on) for machine_id, key_hash, status in rows}


async def hold_dedicated_runs(session: Executor, rows: Sequence[Job]) -> None:
    """Before the API ends the runs of ``rows``: those running on a dedicated machine (one that
    serves an automation, not a queue's pool, which Celery can stop) keep their jobs from running
    again while the machine stops them (:func:`transitions.hold_after_machine_run`)."""
    running = JobStatus.EXECUTANDO.value
    machine_ids = {row.machine_id for row in rows if row.status == running and row.machine_id is not None}
    if not machine_ids:
        return
    query = select(Machine.id).where(Machine.id.in_(machine_ids), Machine.queue.is_(None))
    dedicated = set((await session.execute(query)).scalars())
    for row in rows:
        if row.status == running and row.machine_id in dedicated:
            hold_after_machine_run(row)
