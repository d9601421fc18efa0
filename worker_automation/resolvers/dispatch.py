"""Creating jobs: validate, record them AGENDADO, announce them, and hand them to their queues.

One job or a batch (the same automation for a list of clients, say) go through the same steps;
a batch costs one request and one transaction for all its jobs, and its tasks go out together
(one round trip to the broker for all of them).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, cast

from sqlalchemy import Boolean, Select, Table, bindparam, func, insert, literal, select, true, update
from sqlalchemy.exc import IntegrityError

from worker_automation.catalog.forms import validate_context
from worker_automation.catalog.registry import Automation, automation_key, celery_limits_of
from worker_automation.domain.errors import BadInput, Conflict, Unavailable
from worker_automation.domain.limits import check_int32, check_size, check_storable
from worker_automation.domain.ranges import check_priority
from worker_automation.domain.vocabulary import EventKind
from worker_automation.models import AuditEntry, AutomationSetting, Cliente, Job, JobStatus, utcnow
from worker_automation.models.database import Database, Executor
from worker_automation.resolvers import dispatch_keys
from worker_automation.resolvers.announce import announce, announcement
from worker_automation.resolvers.audit import Actor, AuditNote, audited
from worker_automation.resolvers.automations import effective, registered
from worker_automation.resolvers.job_views import JobView, enriched_select, view_of, views_of
from worker_automation.resolvers.rows import returned_view

if TYPE_CHECKING:  # recording a job needs neither the broker nor the services around it
    from worker_automation.resolvers.services import Services

# A Core insert on the table, built once (the ORM's insert path cost more than the insert).
_JOBS = cast(Table, Job.__table__)
_INSERT_JOB = insert(_JOBS).returning(*_JOBS.columns)
# Several rows: RETURNING them in the order of their parameters.
_INSERT_JOBS = insert(_JOBS).returning(*_JOBS.columns, sort_by_parameter_order=True)
_FORGET_TASKS = (
    update(_JOBS)
    .where(
        _JOBS.c.id.in_(bindparam("ids", expanding=True)),
        _JOBS.c.task_id.in_(bindparam("tasks", expanding=True)),
    )
    .values(task_id=None)
)
_BY_IDS = enriched_select().where(Job.id.in_(bindparam("ids", expanding=True)))
_CLIENT_NAMES = select(Cliente.id, Cliente.razao_social).where(
    Cliente.id.in_(bindparam("ids", expanding=True))
)
_AUDIT = cast(Table, AuditEntry.__table__)
_JOB_FIELDS: Final = (
    "task_id",
    "cliente_id",
    "usuario_id",
    "status",
    "automation_type",
    "queue",
    "priority",
    "retry_count",
    "progress",
    "context",
    "created_at",
    "updated_at",
)


def _dispatch_one() -> Select[Any]:
    """One job and its ``ok`` audit entry in one statement (PostgreSQL), inserted only while its
    automation is enabled: the settings read, both inserts, BEGIN and COMMIT cost a round trip
    each, together more than the rest of the request. RETURNING the row, its client's name and
    the audit entry's id; no row means a disabled automation (or none), told by the usual path."""
    enabled = func.coalesce(
        select(AutomationSetting.enabled)
        .where(AutomationSetting.key == bindparam("setting_key"))
        .scalar_subquery(),
        bindparam("registry_enabled", type_=Boolean),
    )
    job = (
        insert(_JOBS)
        .from_select(
            list(_JOB_FIELDS),
            select(*(bindparam(name, type_=_JOBS.c[name].type) for name in _JOB_FIELDS)).where(enabled),
        )
        .returning(*_JOBS.columns)
        .cte("created")
    )
    entry = (
        insert(_AUDIT)
        .from_select(
            ["at", "actor", "perfil", "action", "target", "result"],
            select(
                bindparam("audit_at", type_=_AUDIT.c.at.type),
                bindparam("actor", type_=_AUDIT.c.actor.type),
                bindparam("perfil", type_=_AUDIT.c.perfil.type),
                literal("dispatch"),
                func.concat("worker:", job.c.id),
                literal("ok"),
            ).select_from(job),
        )
        .returning(_AUDIT.c.id)
        .cte("audited")
    )
    client = select(Cliente.razao_social).where(Cliente.id == job.c.cliente_id).scalar_subquery()
    return select(
        *job.c, entry.c.id.label("audit_entry_id"), client.label("cliente_razao_social")
    ).select_from(job.join(entry, true()))


_DISPATCH_ONE = _dispatch_one()

log = logging.getLogger(__name__)

KEPT_MESSAGE: Final = "Broker indisponivel: o worker ficou AGENDADO sem task no broker."
# Jobs one batch may create (one transaction for all of them).
MAX_BATCH: Final = 500


@dataclass(frozen=True)
class JobRequest:
    """One job to create, as a caller gave it (checked by :func:`dispatch_many`)."""

    automation_type: Any
    cliente_id: Any = None
    context: Any = None
    priority: Any = 0
    usuario_id: Any = None
    # Sent again with the same key, the request gets the job the first one made (see
    # resolvers.dispatch_keys).
    idempotency_key: Any = None


@dataclass(frozen=True)
class Recorded:
    """The jobs a dispatch answers with, in the order asked; ``fresh`` tells the ones it made
    from those an idempotency key found (made before, not to be sent or announced again)."""

    views: list[JobView]
    task_names: dict[str, str]
    fresh: list[bool]

    @property
    def made(self) -> list[JobView]:
        return [view for view, fresh in zip(self.views, self.fresh, strict=True) if fresh]


async def enqueue(
    services: Services, job_id: int, task_id: str, task_name: str, queue: str, priority: int
) -> None:
    """Send the job's task (``task_id`` already stored on the row) to ``queue``.

    When the broker is down the row keeps AGENDADO without a task id (nothing is lost: a
    dedicated machine, a retry or sync-orphans can still deal with it) and Unavailable says so.
    """
    if await send_all(services, [Send(job_id, task_id, task_name, queue, priority)]):
        raise Unavailable(KEPT_MESSAGE, worker_id=job_id)


@dataclass(frozen=True)
class Send:
    """A job's task to queue."""

    worker_id: int
    task_id: str
    task_name: str
    queue: str
    priority: int


async def send_all(
    services: Services, sends: list[Send], *, notices: Sequence[tuple[str, str]] = ()
) -> list[int]:
    """Send every task in one round trip to the broker; the ids of the jobs whose task the broker
    refused, whose rows then keep AGENDADO without a task id. ``notices``: the jobs' events
    (:func:`announcement`), published first in the same round trip."""
    from worker_automation.broker.task_sender import TaskSend

    # Each task's Celery time limits are its automation's as they are now (an admin's override
    # included): a pool worker enforces those its message carries.
    limits = await services.time_limits.current(services.db)
    try:
        outcomes = await services.broker.send_many(
            [
                TaskSend(
                    s.task_name,
                    s.queue,
                    s.priority,
                    [s.worker_id],
                    s.task_id,
                    celery_limits_of(limits.get(automation_key(s.task_name))),
                )
                for s in sends
            ],
            notices=notices,
        )
    except Exception:
        # Not a broker outage (a message that cannot be written): none was sent.
        await _forget_tasks(services, sends)
        raise
    refused = [s for s, outcome in zip(sends, outcomes, strict=True) if outcome is not None]
    if refused and notices:
        log.warning("broker down: %d event(s) not published", len(notices))
    await _forget_tasks(services, refused)
    return [s.worker_id for s in refused]


async def _forget_tasks(services: Services, refused: list[Send]) -> None:
    if refused:
        async with services.db.transaction() as conn:
            # Only rows still holding that task (an operator may have moved on already).
            await conn.execute(
                _FORGET_TASKS, {"ids": [s.worker_id for s in refused], "tasks": [s.task_id for s in refused]}
            )


async def dispatch(
    services: Services,
    actor: Actor,
    *,
    automation_type: str,
    cliente_id: int | None,
    context: Any,
    priority: int = 0,
    usuario_id: int | None = None,
    idempotency_key: str | None = None,
) -> JobView:
    """Create and enqueue a job. Broker down: the row stays AGENDADO and Unavailable names it.
    With an ``idempotency_key`` already used by the same request, the job it made."""
    request = JobRequest(automation_type, cliente_id, context, priority, usuario_id, idempotency_key)
    (view,) = (await dispatch_keyed(services, actor, request)).views
    return view


async def dispatch_keyed(services: Services, actor: Actor, request: JobRequest) -> Recorded:
    """:func:`dispatch`, telling too whether the job was made now or found by its key."""
    return await _create(services, actor, [request], field_prefix=None)


async def dispatch_many(
    services: Services, actor: Actor, requests: Sequence[JobRequest], *, field: str = "jobs"
) -> list[JobView]:
    """Create and enqueue every job of ``requests``, or none: a bad one is BadInput naming
    ``<field>[i].<name>`` (``field``: what the caller calls the list). Broker down: the rows stay
    AGENDADO and Unavailable names them."""
    return (await dispatch_many_keyed(services, actor, requests, field=field)).views


async def dispatch_many_keyed(
    services: Services, actor: Actor, requests: Sequence[JobRequest], *, field: str = "jobs"
) -> Recorded:
    """:func:`dispatch_many`, telling too which jobs were made now and which found by their key."""
    if not 1 <= len(requests) <= MAX_BATCH:
        raise BadInput(field, f"{field} deve ter de 1 a {MAX_BATCH} itens")
    return await _create(services, actor, requests, field_prefix=field)


def _field(prefix: str | None, index: int, name: str) -> str:
    return name if prefix is None else f"{prefix}[{index}].{name}"


def _checked_simple_fields(request: JobRequest, prefix: str | None, index: int) -> None:
    if not isinstance(request.automation_type, str) or not request.automation_type:
        raise BadInput(_field(prefix, index, "automation_type"), "automation_type e obrigatorio")
    check_priority(request.priority, _field(prefix, index, "priority"))
    for name in ("cliente_id", "usuario_id"):
        value = getattr(request, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise BadInput(_field(prefix, index, name), f"{name} deve ser um inteiro")
        check_int32(value, _field(prefix, index, name))
        if value is not None and value < 1:
            # Client and user ids are positive: a zero or negative one can only be a caller's mistake.
            raise BadInput(_field(prefix, index, name), f"{name} deve ser positivo")
    check_storable(request.context, _field(prefix, index, "context"))
    dispatch_keys.check_key(request.idempotency_key, _field(prefix, index, dispatch_keys.FIELD))


async def _client_names(conn: Executor, requests: Sequence[JobRequest]) -> dict[int, str]:
    ids = sorted({r.cliente_id for r in requests if r.cliente_id is not None})
    if not ids:
        return {}
    return {int(i): str(name) for i, name in await conn.execute(_CLIENT_NAMES, {"ids": ids})}


async def _create(
    services: Services, actor: Actor, requests: Sequence[JobRequest], *, field_prefix: str | None
) -> Recorded:
    limit = services.settings.max_context_bytes
    for index, request in enumerate(requests):
        # Storable first: the size of text no encoder takes cannot be measured.
        _checked_simple_fields(request, field_prefix, index)
        check_size(request.context, _field(field_prefix, index, "context"), limit)
    keyed = any(r.idempotency_key is not None for r in requests)
    if keyed:
        dispatch_keys.check_distinct(
            [r.idempotency_key for r in requests], lambda i: _field(field_prefix, i, dispatch_keys.FIELD)
        )
    db = services.db
    async with audited(db, actor, "dispatch", None) as note:
        recorded = None
        if not keyed and field_prefix is None and len(requests) == 1 and db.dialect == "postgresql":
            recorded = await _record_one(db, note, actor, requests[0])
        if recorded is None:
            try:
                recorded = await _record(db, note, actor, requests, field_prefix, with_tasks=True)
            except IntegrityError as exc:
                if not (keyed and dispatch_keys.is_key_race(exc)):
                    raise
                # Another request stored one of these keys first: its job is the answer now.
                recorded = await _record(db, note, actor, requests, field_prefix, with_tasks=True)
        made = recorded.made
        if made:
            # The events go out with the tasks, in one round trip, when the bus shares the broker's Redis.
            notices = announcement(services, EventKind.CREATED, made)
            if notices is None:
                await announce(services, EventKind.CREATED, made)
            await _enqueue_all(
                services, made, recorded.task_names, batch=field_prefix is not None, notices=notices or ()
            )
    return recorded


async def record_only(db: Database, actor: Actor, request: JobRequest) -> Recorded:
    """Create a job AGENDADO with no task sent (no broker at hand, as for a command run where no
    ``serve`` is running): the reconciler of the next ``serve`` sends it. With an idempotency key
    sent before, the job it made."""
    async with audited(db, actor, "dispatch", None) as note:
        return await _record(db, note, actor, [request], None, with_tasks=False)


async def _record_one(db: Database, note: AuditNote, actor: Actor, request: JobRequest) -> Recorded | None:
    """:func:`_record` for one job in one statement (see :func:`_dispatch_one`); None when its
    automation is disabled now, for :func:`_record` to say so (or to insert it after all)."""
    automation = registered(request.automation_type)
    clean = validate_context(automation.form, {} if request.context is None else request.context)
    now = utcnow()
    parameters = {
        "setting_key": automation.key,
        "registry_enabled": automation.enabled,
        **_new_row(request, automation, clean, now, with_task=True),
        "audit_at": now,
        "actor": actor.label,
        "perfil": actor.perfil,
    }
    # On the driver itself where it can run (as a claim and a completion), run once.
    row = await db.write_row(_DISPATCH_ONE, parameters)
    if row is None:
        return None
    view = returned_view(row)
    note.target = f"worker:{view.id}"
    note.entry_id = row.audit_entry_id
    return Recorded([view], {automation.key: automation.task_name}, [True])


def _new_row(
    request: JobRequest, automation: Automation, context: Any, now: datetime, *, with_task: bool
) -> dict[str, Any]:
    """The columns of a new job's row: AGENDADO, with a fresh task id when its task is sent."""
    return {
        "task_id": str(uuid.uuid4()) if with_task else None,
        "cliente_id": request.cliente_id,
        "usuario_id": request.usuario_id,
        "status": JobStatus.AGENDADO.value,
        "automation_type": automation.key,
        "queue": automation.queue,
        "priority": request.priority,
        "retry_count": 0,
        "progress": 0,
        "context": context,
        "created_at": now,
        "updated_at": now,
    }


async def _record(
    db: Database,
    note: AuditNote,
    actor: Actor,
    requests: Sequence[JobRequest],
    field_prefix: str | None,
    *,
    with_tasks: bool,
) -> Recorded:
    """Validate and insert the jobs (all or none) with their audit entry and the keys they were
    sent with; a request whose key was stored before is answered with that key's job. The views
    in the order asked, and the task name of each automation."""
    for index, request in enumerate(requests):
        _checked_simple_fields(request, field_prefix, index)
    async with db.transaction() as conn:
        stored = await dispatch_keys.known(conn, (r.idempotency_key for r in requests if r.idempotency_key))
        automations: dict[str, Automation] = {}
        rows: list[dict[str, Any]] = []
        keyed: list[tuple[int, str, str]] = []  # (row, key, fingerprint) of the rows sent with a key
        found: dict[int, int] = {}  # index of the request -> the job its key made before
        now = utcnow()
        for index, request in enumerate(requests):
            try:
                automation = automations.get(request.automation_type)
                if automation is None:
                    automation = await effective(conn, request.automation_type)
                    automations[automation.key] = automation
                clean = validate_context(automation.form, {} if request.context is None else request.context)
            except BadInput as exc:
                raise BadInput(_field(field_prefix, index, exc.field), exc.message) from None
            key = request.idempotency_key
            if key is not None:
                digest = dispatch_keys.fingerprint(
                    automation.key, request.cliente_id, request.usuario_id, request.priority, clean
                )
                before = stored.get(key)
                if before is not None:
                    if before[1] != digest:
                        key_field = _field(field_prefix, index, dispatch_keys.FIELD)
                        raise dispatch_keys.reused(key_field, before[0])
                    found[index] = before[0]
                    continue
                keyed.append((len(rows), key, digest))
            if not automation.enabled:
                raise Conflict(f"Automacao '{automation.key}' esta desabilitada.", status="disabled")
            rows.append(_new_row(request, automation, clean, now, with_task=with_tasks))
        created = await _insert(conn, rows, requests) if rows else []
        await dispatch_keys.remember(conn, [(key, created[row].id, digest) for row, key, digest in keyed])
        earlier = await _views_by_id(conn, list(found.values()))
        fresh = iter(created)
        views = [earlier[found[i]] if i in found else next(fresh) for i in range(len(requests))]
        if len(views) == 1:
            note.target = f"worker:{views[0].id}"
        else:
            note.detail = {"worker_ids": [v.id for v in views]}
        if found:
            note.detail = {**note.detail, "replayed": sorted(set(found.values()))}
        await note.record_in(conn, actor, "dispatch")
    names = {key: automation.task_name for key, automation in automations.items()}
    return Recorded(views, names, [i not in found for i in range(len(requests))])


async def _insert(
    conn: Executor, rows: list[dict[str, Any]], requests: Sequence[JobRequest]
) -> list[JobView]:
    # RETURNING the rows: the views without reading them back. (SQLite refuses the client name
    # subquery in an INSERT's RETURNING, hence the lookup of their own.)
    names = await _client_names(conn, requests)
    if len(rows) == 1:
        created = await conn.execute(_INSERT_JOB, rows[0])
    else:
        created = await conn.execute(_INSERT_JOBS, rows)
    return [view_of(row, names.get(row.cliente_id)) for row in created]


async def _views_by_id(conn: Executor, ids: list[int]) -> dict[int, JobView]:
    """The jobs ``ids`` as they are now; Conflict when one was removed since its key was read."""
    if not ids:
        return {}
    views = {v.id: v for v in views_of(await conn.execute(_BY_IDS, {"ids": sorted(set(ids))}))}
    gone = sorted(set(ids) - set(views))
    if gone:
        raise Conflict(f"O job {gone[0]} desta idempotency_key acaba de ser removido; envie de novo.")
    return views


async def _enqueue_all(
    services: Services,
    views: list[JobView],
    task_names: dict[str, str],
    *,
    batch: bool,
    notices: Sequence[tuple[str, str]],
) -> None:
    sends = [Send(v.id, str(v.task_id), task_names[v.automation_type], v.queue, v.priority) for v in views]
    kept = await send_all(services, sends, notices=notices)
    if kept and not batch:
        raise Unavailable(KEPT_MESSAGE, worker_id=kept[0])
    if kept:
        raise Unavailable(
            f"Broker indisponivel: {len(kept)} worker(s) ficaram AGENDADO sem task no broker.",
            worker_ids=kept,
        )
