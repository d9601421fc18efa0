"""The ``worker-automation`` command line: serve, workers, migrations and admin chores."""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from worker_automation.errors import DomainError, Unavailable
from worker_automation.settings import Settings

log = logging.getLogger("worker_automation")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries whose INFO lines say nothing a user of these commands needs.
QUIET_LOGGERS = ("alembic", "httpx", "httpcore")


def _settings(**overrides: Any) -> Settings:
    settings = Settings()
    return settings.model_copy(update=overrides) if overrides else settings


async def _with_db(fn: Callable[[Any], Awaitable[int]]) -> int:
    from worker_automation.models.database import Database
    from worker_automation.models.migrate import migrate

    settings = _settings()
    await migrate(settings.database_url)
    db = Database(settings)
    try:
        return await fn(db)
    finally:
        await db.close()


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from worker_automation.app import create_app
    from worker_automation.http_timeouts import server_options
    from worker_automation.serving import DrainingServer

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
        # Deadlines for slow headers and idle connections, and a bound on header size.
        **server_options(),
    }
    if args.workers > 1:
        return _serve_processes(settings, args.workers, options, verbose=args.verbose)
    lock = None
    if settings.redis_url is None:
        from worker_automation.embedded_state import DirectoryLock, ServeAlreadyRunning

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


def _serve_processes(settings: Settings, workers: int, options: dict[str, Any], *, verbose: bool) -> int:
    """``workers`` API processes on one socket (replicas on one host); distributed mode only."""
    import uvicorn
    from sqlalchemy.exc import SQLAlchemyError

    from worker_automation.resolvers.automations import ensure_settings_rows
    from worker_automation.services import Services

    if settings.redis_url is None or settings.is_sqlite:
        print(
            "error: serve --workers needs WA_DATABASE_URL (PostgreSQL) and WA_REDIS_URL: the embedded "
            "broker, its pool workers and the SQLite file belong to one process",
            file=sys.stderr,
        )
        return 2

    async def prepare() -> None:
        services = await Services.start(settings)
        try:
            await ensure_settings_rows(services.db)
        finally:
            await services.close()

    # Migrated and given its settings rows here first: each process still checks at start (under
    # the migration lock), and finds nothing left to do.
    try:
        asyncio.run(prepare())
    except (OSError, SQLAlchemyError) as exc:
        print(f"error: the database cannot be prepared: {exc}", file=sys.stderr)
        return 1
    # Each process builds its app from the environment, in a fresh interpreter: this command's
    # logging set-up has to travel with uvicorn's.
    os.environ["WA_API_URL"] = settings.api_url
    uvicorn.run(
        "worker_automation.app:create_app",
        factory=True,
        workers=workers,
        log_config=_process_log_config(verbose),
        **options,
    )
    return 0


def _process_log_config(verbose: bool) -> dict[str, Any]:
    """uvicorn's logging configuration plus the root logger :func:`main` sets up."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["app"] = {"format": LOG_FORMAT}
    config["handlers"]["app"] = {
        "class": "logging.StreamHandler",
        "formatter": "app",
        "stream": "ext://sys.stderr",
    }
    config["root"] = {"handlers": ["app"], "level": "DEBUG" if verbose else "INFO"}
    config["loggers"].update({name: {"level": "WARNING"} for name in QUIET_LOGGERS})
    return config


def _connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def cmd_migrate(_args: argparse.Namespace) -> int:
    from worker_automation.models.migrate import current_revision, migrate

    settings = _settings()
    asyncio.run(migrate(settings.database_url))
    print(f"database at revision {asyncio.run(current_revision(settings.database_url))}")
    return 0


def cmd_keys_create(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.auth import create_key

    async def run(db: Any) -> int:
        created = await create_key(db, name=args.name, perfil=args.perfil, scopes=args.scopes)
        print(f"key id {created.id} ({created.perfil.value}; {','.join(sorted(created.scopes))})")
        print("store it now: it is not shown again")
        print(created.secret)
        return 0

    return asyncio.run(_with_db(run))


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.auth import revoke_key

    async def run(db: Any) -> int:
        await revoke_key(db, args.id)
        print(f"key {args.id} revoked")
        return 0

    return asyncio.run(_with_db(run))


def cmd_clientes_add(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.clientes import add_cliente

    async def run(db: Any) -> int:
        cliente = await add_cliente(db, razao_social=args.razao_social, cnpj=args.cnpj)
        print(f"cliente {cliente.razao_social} criado")
        print(cliente.id)
        return 0

    return asyncio.run(_with_db(run))


def cmd_machines_register(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.audit import CLI_ACTOR
    from worker_automation.resolvers.machines import register_machine

    settings = _settings()

    async def run(db: Any) -> int:
        created = await register_machine(
            db, CLI_ACTOR, settings.queues, name=args.name, automation=args.automation, queue=args.queue
        )
        serves = created.machine.automation or f"queue {created.machine.queue}"
        print(f"machine {created.machine.id} {created.machine.name} registered for {serves}")
        print("its X-Worker-Api-Key (shown once):")
        print(created.api_key)
        return 0

    return asyncio.run(_with_db(run))


def cmd_machines_list(_args: argparse.Namespace) -> int:
    from worker_automation.resolvers.machines import list_machines

    async def run(db: Any) -> int:
        rows = await list_machines(db)
        print(f"{'id':>4}  {'name':<28} {'serves':<32} status")
        for m in rows:
            serves = m.automation or f"queue:{m.queue}"
            print(f"{m.id:>4}  {m.name:<28} {serves:<32} {m.status}")
        return 0

    return asyncio.run(_with_db(run))


def cmd_machines_switch(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.audit import CLI_ACTOR
    from worker_automation.resolvers.machines import set_machine_status

    async def run(db: Any) -> int:
        machine = await set_machine_status(db, CLI_ACTOR, args.id, args.action == "on")
        print(f"machine {machine.id} {machine.name}: {machine.status}")
        return 0

    return asyncio.run(_with_db(run))


def _broker_overrides() -> dict[str, Any] | None:
    """Settings that reach the broker: WA_REDIS_URL, or the embedded broker of the ``serve``
    running in this directory; None when there is neither (a command never starts a broker)."""
    from worker_automation.embedded_state import running_broker_url

    if Settings().redis_url is not None:
        return {}
    url = running_broker_url()
    return None if url is None else {"redis_url": url}


def cmd_dispatch(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.audit import CLI_ACTOR
    from worker_automation.resolvers.dispatch import JobRequest, dispatch, record_only
    from worker_automation.services import Services

    try:
        context = json.loads(args.context)
    except json.JSONDecodeError as exc:
        print(f"error: --context is not valid JSON: {exc}", file=sys.stderr)
        return 2
    overrides = _broker_overrides()
    if overrides is None:

        async def record(db: Any) -> int:
            request = JobRequest(args.automation, args.cliente, context, args.priority)
            view = await record_only(db, CLI_ACTOR, request)
            print(
                f"job {view.id} {view.status} on queue {view.queue}: no serve is running in this "
                "directory; it runs when `worker-automation serve` starts"
            )
            print(view.id)
            return 0

        return asyncio.run(_with_db(record))

    async def run() -> int:
        services = await Services.start(_settings(**overrides))
        try:
            view = await dispatch(
                services,
                CLI_ACTOR,
                automation_type=args.automation,
                cliente_id=args.cliente,
                context=context,
                priority=args.priority,
            )
        except Unavailable as exc:
            print(f"error: {exc.message} (worker id {exc.details.get('worker_id')})", file=sys.stderr)
            return 3
        finally:
            await services.close()
        print(f"job {view.id} {view.status} on queue {view.queue} (task {view.task_id})")
        print(view.id)
        return 0

    return asyncio.run(run())


def cmd_reconcile(_args: argparse.Namespace) -> int:
    from worker_automation.resolvers.audit import CLI_ACTOR
    from worker_automation.resolvers.recovery import reconcile
    from worker_automation.services import Services

    overrides = _broker_overrides()
    if overrides is None:
        print(
            "error: no serve is running in this directory; an embedded serve sends every queued "
            "job again and ends its lost runs when it starts",
            file=sys.stderr,
        )
        return 1

    async def run() -> int:
        services = await Services.start(_settings(**overrides))
        try:
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

    return asyncio.run(run())


def cmd_seed_demo(args: argparse.Namespace) -> int:
    from worker_automation.seed import seed_demo

    async def run(db: Any) -> int:
        summary = await seed_demo(db, jobs=args.jobs, clientes=args.clientes)
        print(f"added {summary.clientes} clientes, {summary.usuarios} usuarios, {summary.jobs} jobs")
        return 0

    return asyncio.run(_with_db(run))


def cmd_worker(args: argparse.Namespace) -> int:
    from worker_automation.worker.pool import run_pool_worker

    return run_pool_worker(_settings(), queue=args.queue, concurrency=args.concurrency, name=args.name)


def cmd_machine_run(args: argparse.Namespace) -> int:
    from worker_automation.worker.machine import run_machine

    return run_machine(_settings(), automation=args.automation, concurrency=args.concurrency)


def _port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 1 and 65535, not {number}")
    return number


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="worker-automation", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve", help="run the API (embedded broker and workers when WA_REDIS_URL is unset)"
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_port, default=8000)
    serve.add_argument("--log-level", default="info")
    serve.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="API processes sharing the port (needs WA_DATABASE_URL and WA_REDIS_URL when > 1)",
    )
    serve.set_defaults(fn=cmd_serve)

    worker = sub.add_parser("worker", help="run a Celery pool worker for one queue")
    worker.add_argument("-Q", "--queue", required=True)
    worker.add_argument("-c", "--concurrency", type=int, default=None)
    worker.add_argument("-n", "--name", default=None, help="Celery node name")
    worker.set_defaults(fn=cmd_worker)

    machine = sub.add_parser("machine", help="dedicated worker machines")
    machine_sub = machine.add_subparsers(dest="machine_command", required=True)
    run = machine_sub.add_parser("run", help="run the worker process for one automation")
    run.add_argument("--automation", required=True)
    run.add_argument("-c", "--concurrency", type=int, default=1)
    run.set_defaults(fn=cmd_machine_run)

    sub.add_parser("migrate", help="apply database migrations").set_defaults(fn=cmd_migrate)

    keys = sub.add_parser("keys", help="operator API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key (printed once, as the last line)")
    create.add_argument("--perfil", required=True, help="administrador | diretoria | funcionario")
    create.add_argument("--scopes", required=True, help="comma-separated, e.g. worker_automation:read")
    create.add_argument("--name", default="cli")
    create.set_defaults(fn=cmd_keys_create)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("id", type=int)
    revoke.set_defaults(fn=cmd_keys_revoke)

    clientes = sub.add_parser("clientes", help="client companies")
    clientes_sub = clientes.add_subparsers(dest="clientes_command", required=True)
    add = clientes_sub.add_parser("add", help="add a client (its id is the last line)")
    add.add_argument("--razao-social", required=True)
    add.add_argument("--cnpj", default=None)
    add.set_defaults(fn=cmd_clientes_add)

    machines = sub.add_parser("machines", help="registered worker machines")
    machines_sub = machines.add_subparsers(dest="machines_command", required=True)
    register = machines_sub.add_parser("register", help="register a machine (its key is the last line)")
    register.add_argument("--name", required=True)
    target = register.add_mutually_exclusive_group(required=True)
    target.add_argument("--automation")
    target.add_argument("--queue")
    register.set_defaults(fn=cmd_machines_register)
    machines_sub.add_parser("list", help="list machines").set_defaults(fn=cmd_machines_list)
    for action in ("on", "off"):
        switch = machines_sub.add_parser(action, help=f"turn a machine {action}")
        switch.add_argument("id", type=int)
        switch.set_defaults(fn=cmd_machines_switch, action=action)

    dispatch = sub.add_parser("dispatch", help="create a job (its id is the last line)")
    dispatch.add_argument("automation")
    dispatch.add_argument("--cliente", type=int, default=None)
    dispatch.add_argument("--context", default="{}", help="JSON object")
    dispatch.add_argument("--priority", type=int, default=0)
    dispatch.set_defaults(fn=cmd_dispatch)

    sub.add_parser(
        "reconcile", help="put right now the jobs no message will run or no process runs"
    ).set_defaults(fn=cmd_reconcile)

    seed = sub.add_parser("seed-demo", help="fill the database with demo clients and jobs")
    seed.add_argument("--jobs", type=int, default=3000)
    seed.add_argument("--clientes", type=int, default=60)
    seed.set_defaults(fn=cmd_seed_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format=LOG_FORMAT)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        code: int = args.fn(args)
    except DomainError as exc:
        field = getattr(exc, "field", None)
        print(f"error: {exc.message}" + (f" (field {field})" if field else ""), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
