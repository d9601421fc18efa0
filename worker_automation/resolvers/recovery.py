"""Recovery: jobs that no message will run, or that no process runs, are put right by themselves.

The job row is the truth; a broker message only wakes a worker. So a job's run must never depend
on one message surviving, and the reconciler compares the rows with what the broker and the
workers hold:

- "No message will run it": an AGENDADO job whose task id is in no queue list (every priority)
  and in no live worker's hands (Celery ``inspect``: active, reserved, scheduled). A message a
  dead worker took out of a list sits in Redis's ``unacked`` hash until the visibility timeout
  (hours), so it does not count. Such a job is sent again under a NEW task id: if the old message
  turns up after all, its claim names a task that is no longer the job's and is refused. A job
  with no task id at all (the broker refused its send) is sent again the same way.
- "No process runs it": an EXECUTANDO job held by a Celery pool machine whose task is active in
  no live worker. (Celery children die with their main process, so nothing runs it unseen.)
  A run whose end the worker's machine keeps unanswered in its outbox counts as carried too
  (``broker.kept_reports``): its report is on its way.
- Dedicated machines have no broker to ask: they report at start-up the runs they held before
  they died (``POST /api/v1/jobs/{id}/lost``), and a machine whose ``jobCreated`` subscription
  (its presence, ``resolvers.presence``) closed and did not come back within the window has the
  runs it held ended ``machine_lost``.

The workers are asked only when the rows leave a doubt the queues do not settle: a run on a pool
machine, or a queued job whose message is in no queue. An idle service (every queued message in
its queue, nothing running) asks nothing: a broadcast to every worker costs them all CPU.

Evidence is a snapshot taken while things move, so a job is acted on only when it was found
unaccounted for in two passes in a row with the same status and task, and its row had not
changed for a while before the first. A broker that cannot be read gives no evidence: nothing is
done until it answers. Every action is a conditional statement on the status and task id that
were seen, so an operator or a worker acting meanwhile wins and the reconciler does nothing.

A run that started and whose outcome is unknown ends FALHA naming the fault, unless its
automation is ``idempotent``: then it is queued again with ``retry_count`` + 1 (its old task is
revoked with terminate first, so two runs of one job never overlap).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

from sqlalchemy import select

from worker_automation.broker.inspect import InspectResult
from worker_automation.broker.kept_reports import ask_kept_reports
from worker_automation.domain.errors import Unavailable
from worker_automation.domain.vocabulary import Fault
from worker_automation.models import Job, JobStatus, Machine, utcnow
from worker_automation.resolvers.audit import Actor, audited
from worker_automation.resolvers.job_views import JobView
from worker_automation.resolvers.lost_runs import end_lost_run
from worker_automation.resolvers.periodic import Periodic
from worker_automation.resolvers.presence import Absences
from worker_automation.resolvers.resending import resend_all
from worker_automation.resolvers.retries import due
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings

log = logging.getLogger(__name__)

RECONCILER_ACTOR: Final = Actor("reconciler", "administrador")
# Rows looked at per pass, and jobs acted on per pass (the rest wait for the next pass).
SCAN_LIMIT: Final = 5_000
ACT_LIMIT: Final = 500
# A manual run looks twice, this far apart, instead of waiting for the next periodic pass.
MANUAL_CONFIRM_SECONDS: Final = 2.0


@dataclass
class ReconcileReport:
    """What one reconciliation did."""

    resent: int = 0  # AGENDADO jobs sent again
    requeued: int = 0  # lost runs of idempotent automations queued again
    failed: int = 0  # lost runs ended FALHA
    suspects: int = 0  # found unaccounted for once, waiting for a second look
    broker_checked: bool = False  # False: the broker could not be read, nothing was decided
    job_ids: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.resent + self.requeued + self.failed


def _settle_age(settings: Settings) -> timedelta:
    """Rows changed more recently than this are left alone (a dispatch or claim in flight)."""
    return timedelta(seconds=max(1.0, min(10.0, settings.recovery_seconds / 4)))


def _held_by_workers(inspected: InspectResult) -> tuple[set[str], set[str]]:
    """Task ids live workers hold (any section), and those they are running."""

    def ids(section: dict[str, Any]) -> set[str]:
        return {str(r.get("id")) for rs in section.values() for r in rs or [] if isinstance(r, dict)}

    running = ids(inspected.active)
    held = running | ids(inspected.reserved)
    for entries in inspected.scheduled.values():
        for entry in entries or []:
            request = entry.get("request") if isinstance(entry, dict) else None
            if isinstance(request, dict):
                held.add(str(request.get("id")))
    return held, running


# (job id, task id, status): a job is acted on only when the same key is unaccounted for twice.
Key = tuple[int, str | None, str]


class Reconciler:
    """Remembers what it found unaccounted for in its last pass, to confirm it in the next, and on
    which worker each run was last seen, to tell a worker that is gone from one that is slow."""

    def __init__(self, *, watch_absences: bool = True) -> None:
        self._suspects: set[Key] = set()
        # Dedicated machines whose presence ended; a manual run (two looks seconds apart) goes by
        # the rows alone instead of by what it watched.
        self._absences = Absences()
        self._watch_absences = watch_absences
        # Task id -> the worker (Celery hostname) last seen running it; worker -> when it last
        # answered an inspection.
        self._ran_on: dict[str, str] = {}
        self._answered: dict[str, float] = {}

    def _silent_workers_may_run(
        self, inspected: InspectResult, kept: dict[str, set[str]], settings: Settings
    ) -> Callable[[str], bool]:
        """Whether a run missing from every answer may still be going on a worker that did not
        answer this time: the worker last seen running it has been silent for less than the
        recovery window (stopped for a moment, overloaded; a worker silent for longer is gone),
        or, for a run never seen on any worker, nobody answered at all (a broadcast that failed
        looks the same as no worker)."""
        now = time.monotonic()
        for host in inspected.ping:
            self._answered[host] = now
        for host, requests in inspected.active.items():
            for request in requests or []:
                if isinstance(request, dict) and request.get("id"):
                    self._ran_on[str(request["id"])] = host
        for host, task_ids in kept.items():
            for task_id in task_ids:
                self._ran_on[task_id] = host

        def may_run(task_id: str) -> bool:
            host = self._ran_on.get(task_id)
            if host is None:
                return not inspected.available
            if host in inspected.ping:
                return False
            return now - self._answered.get(host, now) < settings.recovery_seconds

        return may_run

    async def run_pass(self, services: Services, actor: Actor = RECONCILER_ACTOR) -> ReconcileReport:
        report = ReconcileReport()
        # Machines tell nothing to the broker: their presence is in their rows, broker or not.
        lost = await self._absences.lost_runs(services, watched=self._watch_absences)
        for job_id, task_id, machine_id in lost[:ACT_LIMIT]:
            view = await end_lost_run(services, actor, job_id, task_id, Fault.MACHINE_LOST, holder=machine_id)
            _count_ended(report, job_id, view)
        try:
            waiting = await services.broker.waiting_task_ids()
        except Unavailable as exc:
            log.info(
                "recovery: broker unreadable, nothing decided this pass (%s)", exc.__cause__ or exc.message
            )
            return report
        rows = await _settled_rows(services)
        if not _in_doubt(rows, waiting):
            # Every queued job's message is in a queue and no pool machine runs anything: there
            # is nothing to ask the workers about, and an idle service asks nothing.
            self._suspects = set()
            self._ran_on = {}
            report.broker_checked = True
            return report
        inspected = await services.broker.inspect()
        held, running = _held_by_workers(inspected)
        # A run whose end a live worker's machine keeps (unanswered, in its outbox) is carried
        # by that worker as much as an active task: its report is on its way.
        kept = await asyncio.to_thread(
            ask_kept_reports,
            services.broker.app,
            sorted(inspected.ping),
            services.settings.inspect_timeout_seconds,
        )
        running |= {task_id for task_ids in kept.values() for task_id in task_ids}
        report.broker_checked = True
        may_run = self._silent_workers_may_run(inspected, kept, services.settings)
        unaccounted = _unaccounted(rows, waiting | held, running)
        open_runs = {key[1] for key in unaccounted if key[2] == JobStatus.EXECUTANDO}
        # Only the runs still open are worth remembering.
        self._ran_on = {
            task: host for task, host in self._ran_on.items() if task in running or task in open_runs
        }
        found = [
            key
            for key in unaccounted
            if not (key[2] == JobStatus.EXECUTANDO and key[1] is not None and may_run(key[1]))
        ]
        # A job without a task id has no message anywhere: it needs no second look.
        confirmed = [key for key in found if key in self._suspects or key[1] is None]
        self._suspects = set(found) - set(confirmed)
        report.suspects = len(self._suspects)
        acting = confirmed[:ACT_LIMIT]
        sent = await resend_all(
            services,
            actor,
            [(job_id, task_id) for job_id, task_id, status in acting if status == JobStatus.AGENDADO],
        )
        report.resent += len(sent)
        report.job_ids += sent
        for job_id, task_id, status in acting:
            if status == JobStatus.AGENDADO:
                continue
            view = await end_lost_run(services, actor, job_id, task_id, Fault.WORKER_LOST)
            _count_ended(report, job_id, view)
        return report

    async def periodic_pass(self, services: Services) -> int:
        return (await self.run_pass(services)).total


def _count_ended(report: ReconcileReport, job_id: int, view: JobView | None) -> None:
    """Count a lost run that :func:`end_lost_run` ended (None: it had moved on meanwhile)."""
    if view is not None:
        report.job_ids.append(job_id)
        if view.status == JobStatus.AGENDADO:
            report.requeued += 1
        else:
            report.failed += 1


def recovery_interval(settings: Settings) -> float:
    """Two passes fit in the recovery window with room for the broker's inspection."""
    return settings.recovery_seconds / 4 if settings.recovery_seconds > 0 else 0.0


def reconcile_periodic() -> Periodic:
    """The reconciler as periodic work of the leader (with its own memory of suspects)."""
    return Periodic("recovery", recovery_interval, Reconciler().periodic_pass)


async def reconcile(services: Services, actor: Actor) -> ReconcileReport:
    """Run the reconciler now, by hand: look twice, a moment apart, and act on what is confirmed."""
    async with audited(services.db, actor, "reconcile", None) as note:
        reconciler = Reconciler(watch_absences=False)
        first = await reconciler.run_pass(services, actor)
        await asyncio.sleep(MANUAL_CONFIRM_SECONDS)
        second = await reconciler.run_pass(services, actor)
        report = ReconcileReport(
            resent=first.resent + second.resent,
            requeued=first.requeued + second.requeued,
            failed=first.failed + second.failed,
            suspects=second.suspects,
            broker_checked=first.broker_checked and second.broker_checked,
            job_ids=first.job_ids + second.job_ids,
        )
        note.detail = {"resent": report.resent, "requeued": report.requeued, "failed": report.failed}
    return report


@dataclass(frozen=True)
class SettledRows:
    """(job id, task id) of the jobs the reconciler looks at: unchanged for a while (a dispatch
    or claim in flight is left alone), AGENDADO, and EXECUTANDO on a pool machine."""

    queued: list[tuple[int, str | None]]
    running: list[tuple[int, str | None]]
    # Whether a pool machine runs any job at all, settled or not: a run seen on its worker now
    # is told from a lost one later by the worker it was seen on.
    any_running: bool


async def _settled_rows(services: Services) -> SettledRows:
    before = utcnow() - _settle_age(services.settings)
    queued = (
        select(Job.id, Job.task_id)
        .where(Job.status == JobStatus.AGENDADO.value, Job.updated_at < before, due())
        .order_by(Job.id)
        .limit(SCAN_LIMIT)
    )
    # Only pool machines (a queue, not one automation) run their jobs as Celery tasks.
    on_pool = (
        select(Job.id, Job.task_id)
        .join(Machine, Machine.id == Job.machine_id)
        .where(Job.status == JobStatus.EXECUTANDO.value, Machine.queue.is_not(None))
    )
    executing = on_pool.where(Job.updated_at < before).order_by(Job.id).limit(SCAN_LIMIT)
    async with services.db.reader() as session:
        waiting_rows = (await session.execute(queued)).all()
        running_rows = (await session.execute(executing)).all()
        any_running = bool(running_rows) or (await session.execute(on_pool.limit(1))).first() is not None
    return SettledRows(
        [(job_id, task_id) for job_id, task_id in waiting_rows],
        [(job_id, task_id) for job_id, task_id in running_rows],
        any_running,
    )


def _in_doubt(rows: SettledRows, waiting: set[str]) -> bool:
    """Whether only the workers can tell where some job stands: a run on a pool machine, or a
    queued job whose message is in no queue (a worker may have taken it, or nobody has it)."""
    return rows.any_running or any(task_id not in waiting for _job_id, task_id in rows.queued)


def _unaccounted(rows: SettledRows, held: set[str], running: set[str]) -> list[Key]:
    """Jobs whose task no queue and no live worker holds."""
    found: list[Key] = [
        (job_id, task_id, JobStatus.AGENDADO.value) for job_id, task_id in rows.queued if task_id not in held
    ]
    found += [
        (job_id, task_id, JobStatus.EXECUTANDO.value)
        for job_id, task_id in rows.running
        if task_id is None or task_id not in running
    ]
    return found


async def recover_after_restart(services: Services, machine_ids: Iterable[int]) -> ReconcileReport:
    """An embedded ``serve`` starting: its broker lived in its memory, so every AGENDADO job's
    message is gone, and the runs its pool machines held died with it. Put them all right now."""
    report = ReconcileReport(broker_checked=True)
    held_by = list(machine_ids)
    started = time.monotonic()
    async with services.db.reader() as session:
        queued = (
            await session.execute(
                select(Job.id, Job.task_id)
                .where(Job.status == JobStatus.AGENDADO.value, due())
                .order_by(Job.priority, Job.created_at, Job.id)
            )
        ).all()
        running = (
            await session.execute(
                select(Job.id, Job.task_id).where(
                    Job.status == JobStatus.EXECUTANDO.value, Job.machine_id.in_(held_by)
                )
            )
            if held_by
            else None
        )
        lost = running.all() if running is not None else []
    for job_id, task_id in lost:
        view = await end_lost_run(services, RECONCILER_ACTOR, job_id, task_id, Fault.WORKER_LOST)
        _count_ended(report, job_id, view)
    sent = await resend_all(services, RECONCILER_ACTOR, [(job_id, task_id) for job_id, task_id in queued])
    report.resent += len(sent)
    report.job_ids += sent
    if report.total:
        log.warning(
            "start-up recovery: %d queued job(s) sent again, %d lost run(s) queued again, %d failed (%.1f s)",
            report.resent,
            report.requeued,
            report.failed,
            time.monotonic() - started,
        )
    return report
