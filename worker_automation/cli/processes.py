"""Long-running processes other than the API: a Celery pool worker, a dedicated machine's worker,
and the MCP tools over stdio."""

from __future__ import annotations

import argparse
import sys

from worker_automation.cli.connect import broker_settings
from worker_automation.settings import Settings


def cmd_worker(args: argparse.Namespace) -> int:
    from worker_automation.worker.pool import run_pool_worker

    return run_pool_worker(Settings(), queue=args.queue, concurrency=args.concurrency, name=args.name)


def cmd_machine_run(args: argparse.Namespace) -> int:
    from worker_automation.worker.machine import run_machine

    return run_machine(Settings(), automation=args.automation, concurrency=args.concurrency)


def cmd_mcp(args: argparse.Namespace) -> int:
    from worker_automation.mcp_server import run_stdio

    settings = broker_settings()
    if settings is None:
        print(
            "error: mcp needs WA_REDIS_URL, or a serve running in this directory (its embedded broker)",
            file=sys.stderr,
        )
        return 2
    return run_stdio(settings, args.api_key)
