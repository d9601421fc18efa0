"""``worker-automation automations``: the catalogue as it stands (the registry's defaults with the
changes an admin made), and which automations this Python environment can run itself.

A job of an automation whose implementation no worker has fails at once with that message; the
``HERE`` column says which ones a ``serve`` or ``worker`` started from this environment runs.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from worker_automation.cli.connect import print_table, run_db

if TYPE_CHECKING:
    from worker_automation.catalog.registry import Automation
    from worker_automation.models.database import Database
    from worker_automation.settings import Settings

HEADER = ("KEY", "QUEUE", "STATE", "LIMIT", "ATTEMPTS", "TIMEOUT", "HERE", "NAME")


def _state(a: Automation) -> str:
    if not a.enabled:
        return "disabled"
    return "dev mode" if a.dev_mode else "enabled"


def _row(a: Automation, installed: frozenset[str]) -> tuple[str, ...]:
    timeout = "-" if a.timeout_seconds is None else f"{a.timeout_seconds:g}s"
    here = "yes" if a.key in installed else "no"
    return (
        a.key,
        a.queue,
        _state(a),
        str(a.max_concurrent_jobs),
        str(a.max_attempts),
        timeout,
        here,
        a.display_name,
    )


def _as_json(a: Automation, installed: frozenset[str]) -> dict[str, Any]:
    return {
        "key": a.key,
        "displayName": a.display_name,
        "category": a.category,
        "queue": a.queue,
        "enabled": a.enabled,
        "devMode": a.dev_mode,
        "maxConcurrentJobs": a.max_concurrent_jobs,
        "maxAttempts": a.max_attempts,
        "retryBackoffSeconds": a.retry_backoff_seconds,
        "retryBackoffMaxSeconds": a.retry_backoff_max_seconds,
        "timeoutSeconds": a.timeout_seconds,
        "installedHere": a.key in installed,
        "context": [
            {"name": f.name, "type": f.type, "required": f.required, "label": f.label} for f in a.form.fields
        ],
    }


def cmd_automations(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.automations import all_effective
    from worker_automation.worker.implementations import installed_keys

    async def run(db: Database, _settings: Settings) -> int:
        found = await all_effective(db)
        installed = installed_keys()
        if args.json:
            print(json.dumps([_as_json(a, installed) for a in found], ensure_ascii=False))
        else:
            print_table([HEADER, *(_row(a, installed) for a in found)])
        return 0

    return run_db(run)
