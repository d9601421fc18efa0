"""Pool machine keys are kept between starts: a restart with nothing changed rotates no key and
writes no audit entry; a missing or stale key file gets a new key, once."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.integration.operator_support import any_services
from worker_automation.models import AuditEntry
from worker_automation.process.bootstrap import EMBEDDED_KEYS_DIR, provision_pool_keys
from worker_automation.process.embedded_pool import EmbeddedPool, machine_name
from worker_automation.resolvers.machines import authenticate_machine, machine_named
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]


async def _audited(services: Services, action: str) -> int:
    async with services.db.session() as session:
        counted = await session.scalar(
            select(func.count()).select_from(AuditEntry).where(AuditEntry.action == action)
        )
    return int(counted or 0)


async def test_an_embedded_restart_rotates_no_key(
    any_services: Services, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = any_services
    monkeypatch.chdir(tmp_path)
    queues = list(services.settings.queues)
    first = EmbeddedPool(services)
    keys = {queue: await first._key_for(queue) for queue in queues}
    assert await _audited(services, "machine.register") == len(queues)
    # The next starts find every key working: nothing new, nothing audited.
    for _ in range(2):
        again = EmbeddedPool(services)
        assert {queue: await again._key_for(queue) for queue in queues} == keys
    assert await _audited(services, "machine.rotate_key") == 0
    assert (tmp_path / EMBEDDED_KEYS_DIR).stat().st_mode & 0o077 == 0

    # A lost key file, or one whose key no longer works: that queue's key alone is replaced.
    keys_dir = tmp_path / EMBEDDED_KEYS_DIR
    (keys_dir / f"{queues[0]}.key").unlink()
    (keys_dir / f"{queues[1]}.key").write_text("wmk_not_a_key\n", encoding="utf-8")
    renewed = {queue: await EmbeddedPool(services)._key_for(queue) for queue in queues}
    assert await _audited(services, "machine.rotate_key") == 2
    assert renewed[queues[0]] != keys[queues[0]] and renewed[queues[1]] != keys[queues[1]]
    assert {q: renewed[q] for q in queues[2:]} == {q: keys[q] for q in queues[2:]}
    for queue in queues:
        machine = await machine_named(services.db, machine_name(queue))
        assert machine is not None
        assert (await authenticate_machine(services.db, renewed[queue])).id == machine.id


async def test_bootstrap_keeps_working_keys(any_services: Services, tmp_path: Path) -> None:
    services = any_services
    queues = services.settings.queues
    first = await provision_pool_keys(services.db, queues, tmp_path)
    assert {done.action for done in first} == {"registered"}
    second = await provision_pool_keys(services.db, queues, tmp_path)
    assert {done.action for done in second} == {"kept"}
    assert [done.key for done in second] == [done.key for done in first]
    assert "key=" not in repr(second[0])
    assert await _audited(services, "machine.rotate_key") == 0
