"""Long-running processes other than the API: a Celery pool worker (and its health check), a
dedicated machine's worker, and the MCP tools over stdio."""

from __future__ import annotations

import argparse
import sys

from worker_automation.cli.connect import broker_settings
from worker_automation.settings import Settings


def cmd_worker(args: argparse.Namespace) -> int:
    from worker_automation.worker.pool import run_pool_worker

    return run_pool_worker(Settings(), queue=args.queue, concurrency=args.concurrency, name=args.name)


def cmd_ping(args: argparse.Namespace) -> int:
    """Exit 0 when a pool worker of this host consuming ``args.queue`` answers a ping through the
    broker (Celery answers only while its worker consumes): a container's health check."""
    import socket

    from worker_automation.broker.celery_app import make_celery

    settings = Settings()
    if settings.redis_url is None:
        print("error: ping needs WA_REDIS_URL (the broker the worker consumes from)", file=sys.stderr)
        return 2
    host = socket.gethostname()
    replies = make_celery(settings, settings.redis_url).control.ping(timeout=args.timeout) or []
    nodes = [node for reply in replies for node in reply]
    # Node names are QUEUE-PID@HOST unless given with -n: any answering node of this host serving
    # the queue will do.
    ours = [n for n in nodes if n.endswith(f"@{host}") and n.split("@")[0].rsplit("-", 1)[0] == args.queue]
    if not ours:
        print(
            f"no pool worker for {args.queue} on {host} answered within {args.timeout:g} s", file=sys.stderr
        )
        return 1
    print(f"{', '.join(ours)}: pong")
    return 0


def cmd_machine_run(args: argparse.Namespace) -> int:
    from worker_automation.worker.machine import run_machine

    return run_machine(Settings(), automation=args.automation, concurrency=args.concurrency)


def cmd_mcp(args: argparse.Namespace) -> int:
    from worker_automation.mcp.server import run_stdio

    settings = broker_settings()
    if settings is None:
        print(
            "error: mcp needs WA_REDIS_URL, or a serve running in this directory (its embedded broker)",
            file=sys.stderr,
        )
        return 2
    return run_stdio(settings, args.api_key)
