"""The ``worker-automation`` command line: serve, workers, migrations and admin chores."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from worker_automation.errors import DomainError, Unavailable
from worker_automation.logs import configure, log_config
from worker_automation.operator_cli import add_operator_commands
from worker_automation.settings import Settings

log = logging.getLogger("worker_automation")
DESCRIPTION = (
    "Control plane for automation workers: the API (REST, GraphQL, MCP), Celery pool workers, "
    "dedicated worker machines, migrations and admin chores. Configured from WA_* environment "
    "variables; with none set, serve runs everything in one process on a SQLite file in the "
    "working directory."
)
# seed-demo prints its progress every this many rows (when asked for more than that).
SEED_PROGRESS_EVERY = 10_000


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
    from worker_automation.ws_protocol import FramedWebSocketProtocol

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


def _serve_processes(settings: Settings, workers: int, options: dict[str, Any]) -> int:
    """``workers`` API processes on one socket (replicas on one host); distributed mode only."""
    import uvicorn
    from sqlalchemy.exc import SQLAlchemyError

    from worker_automation.metrics_export import make_multiprocess_dir, remove_multiprocess_dir
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
    # Each process builds its app from the environment, in a fresh interpreter. Their metrics
    # meet in a directory of this serve's own, so that a scrape of any of them counts them all.
    os.environ["WA_API_URL"] = settings.api_url
    metrics_dir = make_multiprocess_dir()
    try:
        uvicorn.run("worker_automation.app:create_app", factory=True, workers=workers, **options)
    finally:
        remove_multiprocess_dir(metrics_dir)
    return 0


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

    def progress(done: int) -> None:
        if args.jobs > SEED_PROGRESS_EVERY and (done % SEED_PROGRESS_EVERY == 0 or done == args.jobs):
            print(f"{done}/{args.jobs} jobs", file=sys.stderr, flush=True)

    async def run(db: Any) -> int:
        summary = await seed_demo(db, jobs=args.jobs, clientes=args.clientes, progress=progress)
        print(f"added {summary.clientes} clientes, {summary.usuarios} usuarios, {summary.jobs} jobs")
        return 0

    return asyncio.run(_with_db(run))


def cmd_worker(args: argparse.Namespace) -> int:
    from worker_automation.worker.pool import run_pool_worker

    return run_pool_worker(_settings(), queue=args.queue, concurrency=args.concurrency, name=args.name)


def cmd_machine_run(args: argparse.Namespace) -> int:
    from worker_automation.worker.machine import run_machine

    return run_machine(_settings(), automation=args.automation, concurrency=args.concurrency)


def cmd_bootstrap(args: argparse.Namespace) -> int:
    from pathlib import Path

    from worker_automation.bootstrap import provision_pool_keys

    queues = _settings().queues

    async def run(db: Any) -> int:
        for done in await provision_pool_keys(db, queues, Path(args.keys_dir)):
            print(f"queue {done.queue}: machine {done.machine_id} {done.action}, key in {done.path}")
        return 0

    return asyncio.run(_with_db(run))


def cmd_mcp(args: argparse.Namespace) -> int:
    from worker_automation.mcp_server import run_stdio

    overrides = _broker_overrides()
    if overrides is None:
        print(
            "error: mcp needs WA_REDIS_URL, or a serve running in this directory (its embedded broker)",
            file=sys.stderr,
        )
        return 2
    return run_stdio(_settings(**overrides), args.api_key)


def _bounded(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [minimum, maximum]."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
        if number < minimum or (maximum is not None and number > maximum):
            upper = f" and at most {maximum}" if maximum is not None else ""
            raise argparse.ArgumentTypeError(f"must be at least {minimum}{upper}, not {number}")
        return number

    return parse


_positive = _bounded(1)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("worker-automation")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 1 and 65535, not {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    from worker_automation.seed import MAX_CLIENTES, MAX_JOBS

    parser = argparse.ArgumentParser(prog="worker-automation", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve", help="run the API (embedded broker and workers when WA_REDIS_URL is unset)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    serve.add_argument("--port", type=_port, default=8000, help="port to listen on (default %(default)s)")
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug", "trace"],
        help="the HTTP server's log level (default %(default)s)",
    )
    serve.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="API processes sharing the port (needs WA_DATABASE_URL and WA_REDIS_URL when > 1)",
    )
    serve.set_defaults(fn=cmd_serve)

    worker = sub.add_parser("worker", help="run a Celery pool worker for one queue")
    worker.add_argument("-Q", "--queue", required=True, help="the queue to consume (certidao, scan, ...)")
    worker.add_argument(
        "-c",
        "--concurrency",
        type=_positive,
        default=None,
        help="jobs run at once (default: the queue's configured worker count)",
    )
    worker.add_argument("-n", "--name", default=None, help="Celery node name (default QUEUE-PID@HOST)")
    worker.set_defaults(fn=cmd_worker)

    machine = sub.add_parser("machine", help="dedicated worker machines")
    machine_sub = machine.add_subparsers(dest="machine_command", required=True, metavar="COMMAND")
    run = machine_sub.add_parser("run", help="run the worker process for one automation")
    run.add_argument("--automation", required=True, help="the automation this machine serves")
    run.add_argument("-c", "--concurrency", type=_positive, default=1, help="jobs run at once (default 1)")
    run.set_defaults(fn=cmd_machine_run)

    sub.add_parser("migrate", help="apply database migrations").set_defaults(fn=cmd_migrate)

    bootstrap = sub.add_parser(
        "bootstrap", help="migrate, and give each queue's pool workers a machine and a key file"
    )
    bootstrap.add_argument(
        "--keys-dir", required=True, help="where to write QUEUE.key (a working key is kept)"
    )
    bootstrap.set_defaults(fn=cmd_bootstrap)

    mcp = sub.add_parser(
        "mcp", help="serve the MCP tools over stdio (for a desktop LLM client)"
    )
    mcp.add_argument(
        "--api-key",
        default=None,
        help="the operator API key the tools act with (default: WA_API_KEY)",
    )
    mcp.set_defaults(fn=cmd_mcp)

    keys = sub.add_parser("keys", help="operator API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="COMMAND")
    create = keys_sub.add_parser("create", help="create a key (printed once, as the last line)")
    create.add_argument("--perfil", required=True, help="administrador | diretoria | funcionario")
    create.add_argument("--scopes", required=True, help="comma-separated, e.g. worker_automation:read")
    create.add_argument("--name", default="cli", help="a label shown in the audit log (default %(default)s)")
    create.set_defaults(fn=cmd_keys_create)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("id", type=int, help="the key's id (shown when it was created)")
    revoke.set_defaults(fn=cmd_keys_revoke)

    clientes = sub.add_parser("clientes", help="client companies")
    clientes_sub = clientes.add_subparsers(dest="clientes_command", required=True, metavar="COMMAND")
    add = clientes_sub.add_parser("add", help="add a client (its id is the last line)")
    add.add_argument("--razao-social", required=True, help="the company's legal name")
    add.add_argument("--cnpj", default=None, help="14 digits, punctuation allowed (optional)")
    add.set_defaults(fn=cmd_clientes_add)

    machines = sub.add_parser("machines", help="registered worker machines")
    machines_sub = machines.add_subparsers(dest="machines_command", required=True, metavar="COMMAND")
    register = machines_sub.add_parser("register", help="register a machine (its key is the last line)")
    register.add_argument("--name", required=True, help="a unique name for the machine")
    target = register.add_mutually_exclusive_group(required=True)
    target.add_argument("--automation", help="the one automation a dedicated machine serves")
    target.add_argument("--queue", help="the queue a Celery pool worker serves")
    register.set_defaults(fn=cmd_machines_register)
    machines_sub.add_parser("list", help="list machines").set_defaults(fn=cmd_machines_list)
    for action in ("on", "off"):
        switch = machines_sub.add_parser(action, help=f"turn a machine {action}")
        switch.add_argument("id", type=int, help="the machine's id (see machines list)")
        switch.set_defaults(fn=cmd_machines_switch, action=action)

    dispatch = sub.add_parser("dispatch", help="create a job (its id is the last line)")
    dispatch.add_argument("automation", help="the automation's key, e.g. demo.sleep")
    dispatch.add_argument("--cliente", type=int, default=None, help="the client's id (optional)")
    dispatch.add_argument("--context", default="{}", help="the job's input, a JSON object (default {})")
    dispatch.add_argument(
        "--priority", type=_bounded(0, 9), default=0, help="0 (runs first) to 9 (default %(default)s)"
    )
    dispatch.set_defaults(fn=cmd_dispatch)

    sub.add_parser(
        "reconcile", help="put right now the jobs no message will run or no process runs"
    ).set_defaults(fn=cmd_reconcile)

    seed = sub.add_parser(
        "seed-demo", help="add demo clients and finished or queued jobs (none running)"
    )
    seed.add_argument(
        "--jobs",
        type=_bounded(0, MAX_JOBS),
        default=3000,
        help=f"job rows to add, 0 to {MAX_JOBS} (default %(default)s)",
    )
    seed.add_argument(
        "--clientes",
        type=_bounded(0, MAX_CLIENTES),
        default=60,
        help="clients to have in all; only the missing ones are added (default %(default)s)",
    )
    seed.set_defaults(fn=cmd_seed_demo)
    add_operator_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            (f"WA_{'_'.join(map(str, e['loc'])).upper()}: " if e["loc"] else "") + e["msg"]
            for e in exc.errors()
        )
        print(f"error: configuration: {problems}", file=sys.stderr)
        return 2
    configure(settings.log_format, verbose=args.verbose)
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
