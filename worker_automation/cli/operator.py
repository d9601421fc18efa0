"""Operator commands of ``worker-automation``: jobs, queues, schedules, prune, keys.

Each command translates its options and calls the same resolvers the API does. Commands that
need the broker (retrying, cancelling, resuming with a nudge) reach it through ``WA_REDIS_URL`` or
the embedded broker of the ``serve`` running in this directory; a command never starts one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from worker_automation.cli.connect import broker_settings, iso, json_option, run_db
from worker_automation.settings import Settings

if TYPE_CHECKING:  # the command line starts without the database layer loaded
    from worker_automation.models.database import Database
    from worker_automation.resolvers.audit import Actor
    from worker_automation.resolvers.job_filter import JobFilter
    from worker_automation.resolvers.services import Services

NO_BROKER = (
    "error: no broker: set WA_REDIS_URL, or start `worker-automation serve` in this directory "
    "(its embedded broker is used)"
)


def _actor() -> Actor:
    from worker_automation.resolvers.audit import CLI_ACTOR

    return CLI_ACTOR


def _run_services(fn: Callable[[Services], Awaitable[int]]) -> int:
    from worker_automation.resolvers.services import Services

    settings = broker_settings()
    if settings is None:
        print(NO_BROKER, file=sys.stderr)
        return 1

    async def run() -> int:
        services = await Services.start(settings)
        try:
            return await fn(services)
        finally:
            await services.close()

    return asyncio.run(run())


def _filter_of(args: argparse.Namespace, tz: ZoneInfo) -> JobFilter:
    from worker_automation.resolvers.job_filter import JobFilter

    return JobFilter(
        status=args.status,
        queue=args.queue,
        automation_type=args.automation,
        cliente_id=args.cliente,
        usuario_id=args.usuario,
        task_id=args.task_id,
        q=args.q,
        created_from=_instant(getattr(args, "created_from", None), "--created-from", tz),
        created_to=_instant(getattr(args, "created_to", None), "--created-to", tz),
    )


def _instant(text: str | None, option: str, tz: ZoneInfo) -> datetime | None:
    """An ISO 8601 option as an aware instant (one without an offset is read in ``tz``)."""
    from worker_automation.domain.instants import parse_instant

    return None if text is None else parse_instant(text, option, tz)


def _has_filter(args: argparse.Namespace) -> bool:
    names = ("status", "queue", "automation", "cliente", "usuario", "task_id", "q")
    return any(getattr(args, name) is not None for name in names)


def cmd_jobs_list(args: argparse.Namespace) -> int:

    from worker_automation.resolvers.job_order import JobOrder
    from worker_automation.resolvers.job_views import views_of
    from worker_automation.resolvers.reads import list_page

    order = JobOrder.parse(args.order_by, "--order-by") if args.order_by else None

    async def run(db: Database, settings: Settings) -> int:
        filters = _filter_of(args, settings.tz)
        page = await list_page(
            db,
            settings.queues,
            filters,
            args.page,
            args.per_page,
            views_of,
            documents=False,
            order=order or filters.implied_order(),
        )
        for v in page.items:
            error = (v.mensagem_erro or "")[:60]
            finished = f" finished={iso(v.data_fim, settings.tz)}" if v.data_fim is not None else ""
            print(
                f"{v.id:>8} {v.status:<10} {v.queue:<13} {v.automation_type:<28} priority={v.priority} "
                f"retries={v.retry_count} created={iso(v.created_at, settings.tz)}{finished} {error}".rstrip()
            )
        print(f"page {page.page}/{page.pages}, {page.total} job(s)")
        return 0

    return run_db(run)


def cmd_jobs_show(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.attempts import attempts_by_job
    from worker_automation.resolvers.reads import get_job

    async def run(db: Database, settings: Settings) -> int:
        view = await get_job(db, args.id)
        tz = settings.tz
        print(json.dumps(view.as_dict(tz), ensure_ascii=False, indent=2, default=str))
        attempts = (await attempts_by_job(db, [view.id])).get(view.id, [])
        print(f"attempts: {len(attempts)}")
        for a in attempts:
            print(
                f"  #{a.number} machine={a.machine_name or a.machine_id} task={a.task_id} "
                f"started={iso(a.started_at, tz)} ended={iso(a.ended_at, tz)} outcome={a.outcome} "
                f"error={a.error or ''}".rstrip()
            )
        return 0

    return run_db(run)


def _cmd_jobs_act(args: argparse.Namespace, action: str) -> int:
    from worker_automation.resolvers import bulk, job_actions

    if args.id is None and not _has_filter(args):
        print("error: give a job id, or list filters (e.g. --status FALHA)", file=sys.stderr)
        return 2
    if args.id is not None and _has_filter(args):
        print("error: give a job id or list filters, not both", file=sys.stderr)
        return 2

    async def run(services: Services) -> int:
        if args.id is not None:
            single = job_actions.retry if action == "retry" else job_actions.cancel
            view = await single(services, _actor(), args.id)
            print(f"job {view.id} {view.status} (task {view.task_id})")
            return 0
        many = bulk.retry_jobs if action == "retry" else bulk.cancel_jobs
        result = await many(services, _actor(), _filter_of(args, services.settings.tz), args.limit)
        print(f"matched {result.matched}, changed {result.changed}")
        for job_id in result.ids:
            print(job_id)
        return 0

    return _run_services(run)


def cmd_jobs_retry(args: argparse.Namespace) -> int:
    return _cmd_jobs_act(args, "retry")


def cmd_jobs_cancel(args: argparse.Namespace) -> int:
    return _cmd_jobs_act(args, "cancel")


def cmd_queues(args: argparse.Namespace) -> int:
    from worker_automation.resolvers import pauses
    from worker_automation.resolvers.services import Services

    async def run(db: Database, settings: Settings) -> int:
        # With a broker at hand the change is published to the live views of the queues, and a
        # resume sends the first queued jobs again; without one, the views show it at the next job
        # event and the jobs come back through their own retries.
        reach = broker_settings()
        services = await Services.start(reach, migrate_db=False) if reach else None
        try:
            broker = services.broker if services is not None else None
            events = services.events if services is not None else None
            if args.action == "pause":
                state = await pauses.pause_queue(db, settings.queues, _actor(), args.queue, events)
            else:
                state = await pauses.resume_queue(db, settings.queues, _actor(), args.queue, broker, events)
        finally:
            if services is not None:
                await services.close()
        print(f"queue {state.queue}: {'paused' if state.paused else 'running'}")
        return 0

    return run_db(run)


def cmd_schedules_list(_args: argparse.Namespace) -> int:
    from worker_automation.resolvers.schedules import list_schedules

    async def run(db: Database, settings: Settings) -> int:
        for s in await list_schedules(db):
            state = "enabled" if s.enabled else "disabled"
            print(
                f"{s.id:>5} {s.automation_type:<28} '{s.cron}' {s.timezone} {state} "
                f"next={iso(s.next_run_at, settings.tz)} last={iso(s.last_run_at, settings.tz)} "
                f"last_job={s.last_worker_id}"
            )
        return 0

    return run_db(run)


def cmd_schedules_add(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.schedules import ScheduleInput, create_schedule

    context = json_option("--context", args.context)

    async def run(db: Database, settings: Settings) -> int:
        data = ScheduleInput(
            args.automation, args.cliente, context, args.priority, args.cron, args.timezone, not args.disabled
        )
        view = await create_schedule(db, settings.timezone, _actor(), data)
        print(f"schedule {view.id}: next run {iso(view.next_run_at, settings.tz)}")
        print(view.id)
        return 0

    return run_db(run)


def cmd_schedules_rm(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.schedules import delete_schedule

    async def run(db: Database, _settings: Settings) -> int:
        await delete_schedule(db, _actor(), args.id)
        print(f"schedule {args.id} deleted")
        return 0

    return run_db(run)


def cmd_prune(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.retention import check_days, prune_jobs

    def progress(total: int) -> None:
        print(f"deleted so far: {total}", file=sys.stderr, flush=True)

    async def run(db: Database, _settings: Settings) -> int:
        days = check_days(args.older_than_days)  # refused before anything is said to happen
        if args.dry_run:
            print(f"counting finished jobs older than {days} day(s)...", file=sys.stderr, flush=True)
            found = await prune_jobs(db, _actor(), days, dry_run=True)
            print(f"{found} finished job(s) older than {days} day(s) would be deleted (dry run: none was)")
            return 0
        print(f"deleting finished jobs older than {days} day(s)...", file=sys.stderr, flush=True)
        deleted = await prune_jobs(db, _actor(), days, progress)
        print(f"{deleted} finished job(s) older than {days} day(s) deleted")
        return 0

    return run_db(run)


def cmd_keys_list(_args: argparse.Namespace) -> int:
    from worker_automation.resolvers.auth import list_keys

    async def run(db: Database, settings: Settings) -> int:
        for k in await list_keys(db):
            state = f"revoked {iso(k.revoked_at, settings.tz)}" if k.revoked_at else "active"
            print(
                f"{k.id:>5} {k.name:<20} {k.prefix}... {k.perfil:<13} {k.scopes} {state} "
                f"last_used={iso(k.last_used_at, settings.tz)}"
            )
        return 0

    return run_db(run)
