"""Commands that send jobs through the broker: ``dispatch`` (one new job) and ``reconcile`` (the
jobs no message will run or no process runs). Without a broker at hand, ``dispatch`` records the
job for the next ``serve`` to send."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from worker_automation.cli.connect import broker_settings, json_option, run_db
from worker_automation.domain.errors import Unavailable
from worker_automation.settings import Settings

if TYPE_CHECKING:  # the command line starts without the database layer loaded
    from worker_automation.models.database import Database


def cmd_dispatch(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.audit import CLI_ACTOR
    from worker_automation.resolvers.dispatch import JobRequest, dispatch_keyed, record_only

    context = json_option("--context", args.context)
    request = JobRequest(args.automation, args.cliente, context, args.priority, None, args.idempotency_key)
    settings = broker_settings()
    if settings is None:

        async def record(db: Database, _settings: Settings) -> int:
            recorded = await record_only(db, CLI_ACTOR, request)
            (view,) = recorded.views
            if recorded.fresh[0]:
                print(
                    f"job {view.id} {view.status} on queue {view.queue}: no serve is running in this "
                    "directory; it runs when `worker-automation serve` starts"
                )
            else:
                print(_replayed(view.id, view.status))
            print(view.id)
            return 0

        return run_db(record)

    async def run(settings: Settings) -> int:
        from worker_automation.resolvers.services import Services

        services = await Services.start(settings)
        try:
            recorded = await dispatch_keyed(services, CLI_ACTOR, request)
        except Unavailable as exc:
            print(f"error: {exc.message} (worker id {exc.details.get('worker_id')})", file=sys.stderr)
            return 3
        finally:
            await services.close()
        (view,) = recorded.views
        if recorded.fresh[0]:
            print(f"job {view.id} {view.status} on queue {view.queue} (task {view.task_id})")
        else:
            print(_replayed(view.id, view.status))
        print(view.id)
        return 0

    return asyncio.run(run(settings))


def _replayed(job_id: int, status: str) -> str:
    return f"job {job_id} {status}: made earlier with this idempotency key, nothing created"


def cmd_reconcile(_args: argparse.Namespace) -> int:
    from worker_automation.cli.progress import ticking
    from worker_automation.resolvers.audit import CLI_ACTOR
    from worker_automation.resolvers.recovery import MANUAL_CONFIRM_SECONDS, reconcile
    from worker_automation.resolvers.services import Services

    settings = broker_settings()
    if settings is None:
        print(
            "error: no serve is running in this directory; an embedded serve sends every queued "
            "job again and ends its lost runs when it starts",
            file=sys.stderr,
        )
        return 1

    async def run(settings: Settings) -> int:
        async with ticking("connecting to the database and the broker"):
            services = await Services.start(settings)
        try:
            doing = (
                "reconciling: looking at the queues, the workers and the jobs twice, "
                f"{MANUAL_CONFIRM_SECONDS:g} s apart"
            )
            async with ticking(doing):
                report = await reconcile(services, CLI_ACTOR)
        finally:
            await services.close()
        if not report.broker_checked:
            print("error: the broker could not be read; nothing was decided", file=sys.stderr)
            return 3
        print(
            f"sent again: {report.resent}, lost runs queued again: {report.requeued}, "
            f"lost runs failed: {report.failed}, still under watch: {report.suspects}"
        )
        return 0

    return asyncio.run(run(settings))
