"""``worker-automation processes``: which processes run jobs now, as the API's ``processes`` sees
them (Celery's inspect for pool workers, the machines' presence for dedicated machines).

It asks the broker and the database itself rather than a running API: it works on the host of a
stopped ``serve`` too, and never starts a broker of its own (see ``broker_settings``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from worker_automation.cli.connect import broker_settings, iso, print_table
from worker_automation.cli.operator import NO_BROKER

if TYPE_CHECKING:
    from worker_automation.resolvers.processes import ProcessView

HEADER = ("NAME", "KIND", "STATUS", "QUEUES", "CONCURRENCY", "RUNNING", "LAST SEEN")


def _row(p: ProcessView, tz: ZoneInfo) -> tuple[str, ...]:
    return (
        p.name,
        p.kind,
        p.status,
        ",".join(p.queues) or "-",
        "-" if p.concurrency is None else str(p.concurrency),
        ",".join(map(str, p.running_job_ids)) or "-",
        iso(p.last_seen_at, tz) or "-",
    )


def _as_json(p: ProcessView, tz: ZoneInfo) -> dict[str, object]:
    return {
        "name": p.name,
        "kind": p.kind,
        "queues": list(p.queues),
        "concurrency": p.concurrency,
        "runningJobIds": list(p.running_job_ids),
        "status": p.status,
        "lastSeenAt": iso(p.last_seen_at, tz),
        "machineId": p.machine_id,
    }


def cmd_processes(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.processes import list_processes
    from worker_automation.resolvers.services import Services

    settings = broker_settings()
    if settings is None:
        print(NO_BROKER, file=sys.stderr)
        return 1

    async def run() -> list[ProcessView]:
        services = await Services.start(settings, migrate_db=False)
        try:
            return await list_processes(services)
        finally:
            await services.close()

    found = asyncio.run(run())
    if args.json:
        print(json.dumps([_as_json(p, settings.tz) for p in found]))
        return 0
    if not found:
        print("no process runs jobs: no pool worker answered and no machine ever subscribed")
        return 0
    print_table([HEADER, *(_row(p, settings.tz) for p in found)])
    return 0
