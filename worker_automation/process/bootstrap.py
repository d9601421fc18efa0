"""First run (and every run) of a distributed deployment: the pool workers' machines and keys.

``worker-automation bootstrap --keys-dir DIR`` migrates the database, then makes sure every
configured queue has its pool machine (``pool-<queue>``) and that ``DIR/<queue>.key`` holds a key
that works for it: a missing or stale file gets a new key (the machine's old one stops working), a
working one is kept. So it can run before every start (compose runs it as a one-shot service), and
no key is ever typed by hand: the worker services read theirs with ``WA_WORKER_API_KEY_FILE``.
An embedded ``serve`` keeps its pool workers' keys the same way, so a restart rotates none.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from worker_automation.domain.errors import DomainError
from worker_automation.models.database import Database
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.machines import (
    authenticate_machine,
    machine_named,
    register_machine,
    rotate_machine_key,
)

BOOTSTRAP_ACTOR: Final = Actor("bootstrap", "administrador")
# Where an embedded ``serve`` keeps its pool workers' keys, beside its lock file.
EMBEDDED_KEYS_DIR: Final = ".worker-automation-keys"


def pool_machine_name(queue: str) -> str:
    return f"pool-{queue}"


def key_file(keys_dir: Path, queue: str) -> Path:
    return keys_dir / f"{queue}.key"


def embedded_key_file(queue: str, directory: Path | None = None) -> Path:
    """The file of an embedded ``serve``'s pool key for ``queue`` (its folder made, owner only)."""
    keys_dir = (directory or Path.cwd()) / EMBEDDED_KEYS_DIR
    keys_dir.mkdir(mode=0o700, exist_ok=True)
    return key_file(keys_dir, queue)


@dataclass(frozen=True)
class PoolKey:
    """One queue's outcome: ``action`` is ``kept``, ``registered`` or ``rotated``; ``key`` is
    the machine's key (never printed)."""

    queue: str
    machine_id: int
    path: Path
    action: str
    key: str = field(repr=False)


def _read_key(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


async def _working_key(db: Database, path: Path, machine_id: int) -> str | None:
    """The key in ``path`` when it is one that ``machine_id`` works with."""
    key = await asyncio.to_thread(_read_key, path)
    if key is None:
        return None
    try:
        return key if (await authenticate_machine(db, key)).id == machine_id else None
    except DomainError:
        return None


def _write_key(path: Path, key: str) -> None:
    """Readable by the owner only, replaced in one step (a reader never sees half a key)."""
    partial = path.with_suffix(".tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key + "\n")
    partial.replace(path)


async def kept_machine_key(
    db: Database, actor: Actor, queues: dict[str, int], *, name: str, queue: str, path: Path
) -> PoolKey:
    """The key of the pool machine ``name`` serving ``queue``, kept in ``path``: the file's key
    when it still works for that machine; otherwise the machine is registered, or given a new key
    (audited), and the file replaced. A restart with nothing changed writes nothing."""
    existing = await machine_named(db, name)
    if existing is not None and (key := await _working_key(db, path, existing.id)) is not None:
        return PoolKey(queue, existing.id, path, "kept", key)
    if existing is None:
        created = await register_machine(db, actor, queues, name=name, queue=queue)
        action = "registered"
    else:
        created = await rotate_machine_key(db, actor, existing.id)
        action = "rotated"
    await asyncio.to_thread(_write_key, path, created.api_key)
    return PoolKey(queue, created.machine.id, path, action, created.api_key)


async def provision_pool_keys(db: Database, queues: dict[str, int], keys_dir: Path) -> list[PoolKey]:
    """See the module doc; one :class:`PoolKey` per configured queue."""
    await asyncio.to_thread(keys_dir.mkdir, parents=True, exist_ok=True)
    return [
        await kept_machine_key(
            db,
            BOOTSTRAP_ACTOR,
            queues,
            name=pool_machine_name(queue),
            queue=queue,
            path=key_file(keys_dir, queue),
        )
        for queue in queues
    ]
