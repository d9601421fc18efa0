"""First run (and every run) of a distributed deployment: the pool workers' machines and keys.

``worker-automation bootstrap --keys-dir DIR`` migrates the database, then makes sure every
configured queue has its pool machine (``pool-<queue>``) and that ``DIR/<queue>.key`` holds a key
that works for it: a missing or stale file gets a new key (the machine's old one stops working), a
working one is kept. So it can run before every start (compose runs it as a one-shot service), and
no key is ever typed by hand: the worker services read theirs with ``WA_WORKER_API_KEY_FILE``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from worker_automation.errors import DomainError
from worker_automation.models.database import Database
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.machines import (
    authenticate_machine,
    machine_named,
    register_machine,
    rotate_machine_key,
)

BOOTSTRAP_ACTOR: Final = Actor("bootstrap", "administrador")


def pool_machine_name(queue: str) -> str:
    return f"pool-{queue}"


def key_file(keys_dir: Path, queue: str) -> Path:
    return keys_dir / f"{queue}.key"


@dataclass(frozen=True)
class PoolKey:
    """One queue's outcome: ``action`` is ``kept``, ``registered`` or ``rotated``."""

    queue: str
    machine_id: int
    path: Path
    action: str


def _read_key(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


async def _working_key(db: Database, path: Path, machine_id: int) -> bool:
    key = await asyncio.to_thread(_read_key, path)
    if key is None:
        return False
    try:
        return (await authenticate_machine(db, key)).id == machine_id
    except DomainError:
        return False


def _write_key(path: Path, key: str) -> None:
    """Readable by the owner only, replaced in one step (a reader never sees half a key)."""
    partial = path.with_suffix(".tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key + "\n")
    partial.replace(path)


async def provision_pool_keys(db: Database, queues: dict[str, int], keys_dir: Path) -> list[PoolKey]:
    """See the module doc; one :class:`PoolKey` per configured queue."""
    await asyncio.to_thread(keys_dir.mkdir, parents=True, exist_ok=True)
    done: list[PoolKey] = []
    for queue in queues:
        path = key_file(keys_dir, queue)
        existing = await machine_named(db, pool_machine_name(queue))
        if existing is not None and await _working_key(db, path, existing.id):
            done.append(PoolKey(queue, existing.id, path, "kept"))
            continue
        if existing is None:
            created = await register_machine(
                db, BOOTSTRAP_ACTOR, queues, name=pool_machine_name(queue), queue=queue
            )
            action = "registered"
        else:
            created = await rotate_machine_key(db, BOOTSTRAP_ACTOR, existing.id)
            action = "rotated"
        await asyncio.to_thread(_write_key, path, created.api_key)
        done.append(PoolKey(queue, created.machine.id, path, action))
    return done
