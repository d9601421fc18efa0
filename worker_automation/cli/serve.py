"""``serve``: the API in one process (embedded broker and workers when WA_REDIS_URL is unset), or
several API processes on one socket sharing PostgreSQL and Redis."""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from typing import Any

from worker_automation.infra.logs import log_config
from worker_automation.settings import Settings


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from worker_automation.asgi.app import create_app
    from worker_automation.asgi.serving import DrainingServer
    from worker_automation.overrides.http_timeouts import server_options
    from worker_automation.overrides.ws_protocol import FramedWebSocketProtocol

    overrides: dict[str, Any] = {}
    base = Settings()
    if "WA_API_URL" not in os.environ:
        overrides["api_url"] = f"http://{_connect_host(args.host)}:{args.port}"
    settings = base.model_copy(update=overrides)
    options: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level,
        "lifespan": "on",
        # Compression costs CPU and ~50 kB per subscriber socket; events are small JSON.
        "ws_per_message_deflate": False,
        # uvicorn's own websocket protocol, with frames written once for every live view subscriber.
        "ws": FramedWebSocketProtocol,
        # Deadlines for slow headers and idle connections, and a bound on header size.
        **server_options(),
        # Each process (a fresh interpreter with --workers) sets up uvicorn's loggers and ours.
        "log_config": log_config(settings.log_format, verbose=args.verbose),
    }
    if args.workers > 1:
        return _serve_processes(settings, args.workers, options)
    if not listenable(options):
        return 1
    lock = None
    if settings.redis_url is None:
        from worker_automation.process.embedded_state import DirectoryLock, ServeAlreadyRunning

        try:
            lock = DirectoryLock.acquire(settings.api_url)
        except ServeAlreadyRunning as exc:
            print(
                f"error: another serve is already running in this directory ({exc.holder}); "
                "one embedded serve per directory (its SQLite file and broker are its own)",
                file=sys.stderr,
            )
            return 1
    try:
        app = create_app(settings)
        if lock is not None:
            app.state.runtime.hold(lock)
        server = DrainingServer(uvicorn.Config(app, **options), app.state.runtime)
        server.run()
    finally:
        if lock is not None:
            lock.release()
    return 0


def _serve_processes(settings: Settings, workers: int, options: dict[str, Any]) -> int:
    """``workers`` API processes on one socket (replicas on one host); distributed mode only."""
    import uvicorn
    from sqlalchemy.exc import SQLAlchemyError

    from worker_automation.asgi.metrics_export import make_multiprocess_dir, remove_multiprocess_dir
    from worker_automation.resolvers.automations import ensure_settings_rows
    from worker_automation.resolvers.services import Services
    from worker_automation.schema.transport import check_trusted_documents

    if settings.redis_url is None or settings.is_sqlite:
        print(
            "error: serve --workers needs WA_DATABASE_URL (PostgreSQL) and WA_REDIS_URL: the embedded "
            "broker, its pool workers and the SQLite file belong to one process",
            file=sys.stderr,
        )
        return 2

    check_trusted_documents(settings)
    if not listenable(options):
        return 1

    async def prepare() -> None:
        services = await Services.start(settings)
        try:
            await ensure_settings_rows(services.db)
            warning = connection_budget_warning(settings, workers, await services.db.connections_allowed())
            if warning is not None:
                print(warning, file=sys.stderr)
        finally:
            await services.close()

    # Migrated and given its settings rows here first: each process still checks at start (under
    # the migration lock), and finds nothing left to do.
    try:
        asyncio.run(prepare())
    except (OSError, SQLAlchemyError) as exc:
        print(f"error: the database cannot be prepared: {exc}", file=sys.stderr)
        return 1
    # Each process builds its app from the environment, in a fresh interpreter. Their metrics
    # meet in a directory of this serve's own, so that a scrape of any of them counts them all.
    os.environ["WA_API_URL"] = settings.api_url
    metrics_dir = make_multiprocess_dir()
    try:
        uvicorn.run("worker_automation.asgi.app:create_app", factory=True, workers=workers, **options)
    finally:
        remove_multiprocess_dir(metrics_dir)
    return 0


def listenable(options: dict[str, Any]) -> bool:
    """Whether the server's host and port can be listened on, found before anything starts (the
    embedded broker and the pool would otherwise start, then stop again); says why when not."""
    host, port = options["host"], options["port"]
    try:
        socket.create_server((host, port)).close()
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno is not None and exc.errno > 0 else str(exc)
        print(
            f"error: cannot listen on {host}:{port} ({why}); another program may hold it: "
            "choose another with --port",
            file=sys.stderr,
        )
        return False
    return True


def _connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def connection_budget_warning(settings: Settings, processes: int, allowed: int | None) -> str | None:
    """What to tell the operator when ``processes`` API processes, each with its own pool, could
    open more database connections than the server takes (past that, requests fail with "too
    many clients" under load instead of waiting for a pooled connection)."""
    per_process = settings.database_pool_size + settings.database_max_overflow
    wanted = processes * per_process
    if allowed is None or wanted <= allowed:
        return None
    return (
        f"warning: {processes} API processes may open up to {wanted} database connections "
        f"({processes} x (WA_DATABASE_POOL_SIZE {settings.database_pool_size} + "
        f"WA_DATABASE_MAX_OVERFLOW {settings.database_max_overflow})), more than the {allowed} "
        "PostgreSQL takes (max_connections less the superusers' reserve), workers and other "
        "clients not counted: lower WA_DATABASE_POOL_SIZE or raise max_connections"
    )
