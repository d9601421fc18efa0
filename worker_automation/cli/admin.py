"""Admin chores on the database alone: migrations, bootstrap of pool keys, operator keys, client
companies, worker machines and demo data."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from worker_automation.cli.connect import broker_settings, run_db
from worker_automation.settings import Settings

if TYPE_CHECKING:  # the command line starts without the database layer loaded
    from worker_automation.models.database import Database

# seed-demo prints its progress at most this often, and once done.
SEED_PROGRESS_SECONDS = 1.0


def cmd_migrate(_args: argparse.Namespace) -> int:
    from worker_automation.models.migrate import current_revision, migrate

    settings = Settings()
    asyncio.run(migrate(settings.database_url))
    print(f"database at revision {asyncio.run(current_revision(settings.database_url))}")
    return 0


def cmd_bootstrap(args: argparse.Namespace) -> int:
    from pathlib import Path

    from worker_automation.process.bootstrap import provision_pool_keys

    async def run(db: Database, settings: Settings) -> int:
        for done in await provision_pool_keys(db, settings.queues, Path(args.keys_dir)):
            print(f"queue {done.queue}: machine {done.machine_id} {done.action}, key in {done.path}")
        return 0

    return run_db(run)


def cmd_keys_create(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.auth import create_key

    async def run(db: Database, _settings: Settings) -> int:
        created = await create_key(db, name=args.name, perfil=args.perfil, scopes=args.scopes)
        print(f"key id {created.id} ({created.perfil.value}; {','.join(sorted(created.scopes))})")
        print("store it now: it is not shown again")
        print(created.secret)
        return 0

    return run_db(run)


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from worker_automation.broker.events import publishing_bus
    from worker_automation.resolvers.auth import revoke_key

    async def run(db: Database, settings: Settings) -> int:
        # The serving processes hear of it on the bus and close the key's websockets at once.
        broker = broker_settings() or settings
        async with publishing_bus(broker.redis_url, settings.redis_prefix) as events:
            await revoke_key(db, args.id, events)
        print(f"key {args.id} revoked")
        return 0

    return run_db(run)


def cmd_keys_update(args: argparse.Namespace) -> int:
    from worker_automation.broker.events import publishing_bus
    from worker_automation.resolvers.auth import change_key

    async def run(db: Database, settings: Settings) -> int:
        broker = broker_settings() or settings
        async with publishing_bus(broker.redis_url, settings.redis_prefix) as events:
            key = await change_key(db, args.id, scopes=args.scopes, perfil=args.perfil, events=events)
        print(f"key {key.key_id} ({key.perfil.value}; {','.join(sorted(key.scopes))})")
        return 0

    return run_db(run)


def cmd_clientes_add(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.clientes import add_cliente

    async def run(db: Database, _settings: Settings) -> int:
        cliente = await add_cliente(db, razao_social=args.razao_social, cnpj=args.cnpj)
        print(f"cliente {cliente.razao_social} criado")
        print(cliente.id)
        return 0

    return run_db(run)


def cmd_machines_register(args: argparse.Namespace) -> int:
    from worker_automation.resolvers.audit import CLI_ACTOR
    from worker_automation.resolvers.machines import register_machine

    async def run(db: Database, settings: Settings) -> int:
        created = await register_machine(
            db, CLI_ACTOR, settings.queues, name=args.name, automation=args.automation, queue=args.queue
        )
        serves = created.machine.automation or f"queue {created.machine.queue}"
        print(f"machine {created.machine.id} {created.machine.name} registered for {serves}")
        print("its X-Worker-Api-Key (shown once):")
        print(created.api_key)
        return 0

    return run_db(run)


def cmd_machines_list(_args: argparse.Namespace) -> int:
    from worker_automation.resolvers.machines import list_machines

    async def run(db: Database, _settings: Settings) -> int:
        rows = await list_machines(db)
        print(f"{'id':>4}  {'name':<28} {'serves':<32} status")
        for m in rows:
            serves = m.automation or f"queue:{m.queue}"
            print(f"{m.id:>4}  {m.name:<28} {serves:<32} {m.status}")
        return 0

    return run_db(run)


def cmd_machines_switch(args: argparse.Namespace) -> int:
    from worker_automation.broker.events import publishing_bus
    from worker_automation.resolvers.audit import CLI_ACTOR
    from worker_automation.resolvers.machines import set_machine_status

    async def run(db: Database, settings: Settings) -> int:
        broker = broker_settings() or settings
        async with publishing_bus(broker.redis_url, settings.redis_prefix) as events:
            machine = await set_machine_status(db, CLI_ACTOR, args.id, args.action == "on", events)
        print(f"machine {machine.id} {machine.name}: {machine.status}")
        return 0

    return run_db(run)


def cmd_seed_demo(args: argparse.Namespace) -> int:
    import time

    from worker_automation.process.seed import seed_demo

    said = time.monotonic()

    def progress(done: int) -> None:
        nonlocal said
        if time.monotonic() - said >= SEED_PROGRESS_SECONDS or done == args.jobs:
            print(f"{done}/{args.jobs} jobs", file=sys.stderr, flush=True)
            said = time.monotonic()

    async def run(db: Database, _settings: Settings) -> int:
        print(f"adding {args.jobs} demo jobs...", file=sys.stderr, flush=True)
        summary = await seed_demo(db, jobs=args.jobs, clientes=args.clientes, progress=progress)
        if summary.queued:
            await _send_seeded(summary.queued)
        print(f"added {summary.clientes} clientes, {summary.usuarios} usuarios, {summary.jobs} jobs")
        return 0

    return run_db(run)


async def _send_seeded(queued: tuple[int, ...]) -> None:
    """The seeded queued jobs go to their queues now when a broker is at hand (WA_REDIS_URL or
    the running serve's); otherwise serve sends them when it starts."""
    from worker_automation.process.seed import send_queued
    from worker_automation.resolvers.services import Services

    reach = broker_settings()
    if reach is None:
        print(f"{len(queued)} queued job(s): serve sends them when it starts", file=sys.stderr)
        return
    services = await Services.start(reach, migrate_db=False)
    try:
        sent = await send_queued(services, queued)
    finally:
        await services.close()
    print(f"{sent} of {len(queued)} queued job(s) sent to their queues", file=sys.stderr)
