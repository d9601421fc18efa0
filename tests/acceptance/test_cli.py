"""The ``worker-automation`` command line as a user runs it: a fresh directory, no WA_* variables."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import func, select

from worker_automation.domain.errors import Unauthenticated
from worker_automation.models import Cliente, Job
from worker_automation.models.database import Database
from worker_automation.models.migrate import alembic_config, current_revision
from worker_automation.resolvers.auth import SCOPE_READ, SCOPE_WRITE, Principal, authenticate
from worker_automation.resolvers.machines import MachineView, authenticate_machine
from worker_automation.settings import Settings

COMMAND_TIMEOUT = 60
T = TypeVar("T")


def cli_command() -> list[str]:
    """The installed console script, as a user would call it (the module as a fallback)."""
    beside_python = Path(sys.executable).with_name("worker-automation")
    if beside_python.exists():
        return [str(beside_python)]
    found = shutil.which("worker-automation")
    if found:
        return [found]
    return [sys.executable, "-m", "worker_automation.cli"]


def clean_env() -> dict[str, str]:
    """The caller's environment without any of the service's settings."""
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("WA_")}


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A command in ``cwd`` with no WA_* variable but those of ``env``."""
    return subprocess.run(
        [*cli_command(), *args],
        cwd=cwd,
        env={**clean_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def ok(cwd: Path, *args: str) -> list[str]:
    """Run a command that must succeed; its stdout lines."""
    done = run(cwd, *args)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"{args} printed nothing"
    return lines


def database_url(cwd: Path) -> str:
    """The database every command run in ``cwd`` without configuration shares."""
    return f"sqlite+aiosqlite:///{cwd / 'worker_automation.db'}"


def with_db(cwd: Path, fn: Callable[[Database], Awaitable[T]]) -> T:
    """Run ``fn`` on the database of ``cwd``, from outside the commands."""

    async def go() -> T:
        db = Database(Settings(database_url=database_url(cwd)))
        try:
            return await fn(db)
        finally:
            await db.close()

    return asyncio.run(go())


def principal_of(cwd: Path, key: str) -> Principal:
    return with_db(cwd, lambda db: authenticate(db, key))


def machine_of(cwd: Path, key: str) -> MachineView:
    return with_db(cwd, lambda db: authenticate_machine(db, key))


def count(cwd: Path, model: type) -> int:
    async def go(db: Database) -> int:
        async with db.session() as session:
            return int(await session.scalar(select(func.count()).select_from(model)) or 0)

    return with_db(cwd, go)


def test_migrate_creates_the_database_in_the_working_directory(tmp_path: Path) -> None:
    lines = ok(tmp_path, "migrate")

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    assert (tmp_path / "worker_automation.db").exists()
    assert head in lines[-1]
    assert asyncio.run(current_revision(database_url(tmp_path))) == head
    # Running it again is harmless.
    assert head in ok(tmp_path, "migrate")[-1]


def test_keys_create_prints_a_working_key_last(tmp_path: Path) -> None:
    ok(tmp_path, "migrate")

    lines = ok(
        tmp_path, "keys", "create", "--perfil", "administrador", "--scopes", f"{SCOPE_READ},{SCOPE_WRITE}"
    )

    key = lines[-1].strip()
    assert key.startswith("wak_")
    assert all(key not in line for line in lines[:-1])
    principal = principal_of(tmp_path, key)
    assert principal.scopes == frozenset({SCOPE_READ, SCOPE_WRITE})
    assert principal.perfil.value == "administrador"
    principal.require(SCOPE_WRITE, manager=True)


def test_a_command_that_creates_the_database_says_so_once(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ("keys", "create", "--perfil", "administrador", "--scopes", SCOPE_READ)

    first = run(elsewhere, *args)
    again = run(elsewhere, *args)

    assert first.returncode == 0 and again.returncode == 0
    assert f"created {elsewhere / 'worker_automation.db'}" in first.stderr
    assert "WA_DATABASE_URL" in first.stderr
    assert "created" not in again.stderr
    # The note is on stderr: the key is still the last line of stdout.
    assert first.stdout.splitlines()[-1].startswith("wak_")


@pytest.mark.parametrize("size", ["0", "101", "500"])
def test_a_page_size_the_api_would_refuse_is_refused_before_anything_runs(tmp_path: Path, size: str) -> None:
    done = run(tmp_path, "jobs", "list", "--per-page", size)

    assert done.returncode == 2
    assert "--per-page" in done.stderr and "at most 100" in done.stderr
    assert not (tmp_path / "worker_automation.db").exists()


def test_keys_revoke_stops_the_key(tmp_path: Path) -> None:
    # No migrate first: every command brings the database up to date itself.
    lines = ok(
        tmp_path, "keys", "create", "--perfil", "funcionario", "--scopes", SCOPE_READ, "--name", "painel"
    )
    key = lines[-1].strip()
    principal = principal_of(tmp_path, key)
    assert principal.name == "painel"
    assert principal.scopes == frozenset({SCOPE_READ})
    key_id = principal.key_id

    ok(tmp_path, "keys", "revoke", str(key_id))

    with pytest.raises(Unauthenticated):
        principal_of(tmp_path, key)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("keys", "create", "--perfil", "gerente", "--scopes", SCOPE_READ), "perfil"),
        (("keys", "create", "--perfil", "diretoria", "--scopes", "worker_automation:tudo"), "scopes"),
        (("clientes", "add", "--razao-social", "Y", "--cnpj", "11.222.333/0001-00"), "cnpj"),
        (("machines", "register", "--name", "m9", "--queue", "fila_nenhuma"), "queue"),
        (("machines", "register", "--name", "m9", "--automation", "nao_existe"), "automation"),
    ],
)
def test_bad_input_exits_non_zero_naming_the_field(tmp_path: Path, args: tuple[str, ...], field: str) -> None:
    done = run(tmp_path, *args)

    assert done.returncode != 0
    assert field in done.stderr
    assert done.stderr.strip().startswith("error:")
    assert "Traceback" not in done.stderr
    # Nothing that looks like a secret was printed for a refused request.
    assert "wak_" not in done.stdout and "wmk_" not in done.stdout
    if field == "perfil":
        assert done.returncode == 2
        assert "gerente" in done.stderr
        for allowed in ("administrador", "diretoria", "funcionario"):
            assert allowed in done.stderr


def test_clientes_add_prints_the_new_id_last(tmp_path: Path) -> None:
    first = ok(tmp_path, "clientes", "add", "--razao-social", "X", "--cnpj", "11.222.333/0001-81")
    second = ok(tmp_path, "clientes", "add", "--razao-social", "Sem CNPJ Ltda")

    first_id, second_id = int(first[-1]), int(second[-1])
    assert second_id != first_id

    async def stored(db: Database) -> dict[int, tuple[str, str | None]]:
        async with db.session() as session:
            rows = (await session.scalars(select(Cliente))).all()
        return {r.id: (r.razao_social, r.cnpj) for r in rows}

    assert with_db(tmp_path, stored) == {
        first_id: ("X", "11222333000181"),
        second_id: ("Sem CNPJ Ltda", None),
    }


def test_clientes_add_twice_with_one_cnpj_is_refused(tmp_path: Path) -> None:
    ok(tmp_path, "clientes", "add", "--razao-social", "X", "--cnpj", "11.222.333/0001-81")

    done = run(tmp_path, "clientes", "add", "--razao-social", "X de novo", "--cnpj", "11222333000181")

    assert done.returncode != 0
    assert "11222333000181" in done.stderr
    assert "Traceback" not in done.stderr
    assert count(tmp_path, Cliente) == 1


def test_seed_demo(tmp_path: Path) -> None:
    lines = ok(tmp_path, "seed-demo", "--jobs", "200")

    assert "200" in lines[-1]
    assert count(tmp_path, Job) == 200
    clientes = count(tmp_path, Cliente)
    assert clientes > 0
    ok(tmp_path, "seed-demo", "--jobs", "200")
    assert count(tmp_path, Job) == 400
    assert count(tmp_path, Cliente) == clientes  # a second run adds jobs, not clients


def test_seed_demo_refuses_a_negative_job_count(tmp_path: Path) -> None:
    done = run(tmp_path, "seed-demo", "--jobs", "-5")

    assert done.returncode == 2
    assert "--jobs" in done.stderr and "Traceback" not in done.stderr


def test_machines_register_list_and_switch(tmp_path: Path) -> None:
    lines = ok(tmp_path, "machines", "register", "--name", "m1", "--queue", "scan")

    key = lines[-1].strip()
    assert key.startswith("wmk_")
    machine = machine_of(tmp_path, key)
    assert (machine.name, machine.queue, machine.automation) == ("m1", "scan", None)
    assert machine.is_on

    dedicated = ok(tmp_path, "machines", "register", "--name", "sleeper", "--automation", "demo.sleep")
    assert machine_of(tmp_path, dedicated[-1].strip()).automation == "demo.sleep"

    listing = "\n".join(ok(tmp_path, "machines", "list"))
    assert "m1" in listing and "scan" in listing
    assert "sleeper" in listing and "demo.sleep" in listing
    # Keys are shown once, at registration; never in the listing.
    assert key not in listing and "wmk_" not in listing

    machine_id = machine.id
    ok(tmp_path, "machines", "off", str(machine_id))
    assert not machine_of(tmp_path, key).is_on
    assert "desligado" in "\n".join(ok(tmp_path, "machines", "list"))
    ok(tmp_path, "machines", "on", str(machine_id))
    assert machine_of(tmp_path, key).is_on


def test_machines_register_twice_with_one_name_is_refused(tmp_path: Path) -> None:
    ok(tmp_path, "machines", "register", "--name", "m1", "--queue", "scan")

    done = run(tmp_path, "machines", "register", "--name", "m1", "--queue", "certidao")

    assert done.returncode != 0
    assert "m1" in done.stderr
    assert "Traceback" not in done.stderr


def test_usage_errors_exit_non_zero(tmp_path: Path) -> None:
    missing = run(tmp_path, "keys", "create", "--scopes", SCOPE_READ)
    assert missing.returncode != 0
    assert "--perfil" in missing.stderr

    both = run(
        tmp_path, "machines", "register", "--name", "m", "--queue", "scan", "--automation", "demo.echo"
    )
    assert both.returncode != 0


def test_reconcile_says_what_it_is_doing(tmp_path: Path, redis_url: str) -> None:
    done = run(tmp_path, "reconcile", env={"WA_REDIS_URL": redis_url})

    assert done.returncode == 0, done.stderr
    said = done.stderr.splitlines()
    assert said[0] == "connecting to the database and the broker..."
    assert any(line.startswith("reconciling: ") for line in said), said
    assert (
        done.stdout.strip()
        == "sent again: 0, lost runs queued again: 0, lost runs failed: 0, still under watch: 0"
    )


def test_seed_demo_sends_its_queued_jobs_when_a_broker_is_at_hand(tmp_path: Path, redis_url: str) -> None:
    import redis as redis_client

    from worker_automation.broker.queues import priority_keys
    from worker_automation.models import JobStatus

    done = run(tmp_path, "seed-demo", "--jobs", "400", "--clientes", "3", env={"WA_REDIS_URL": redis_url})
    assert done.returncode == 0, done.stderr

    async def queued(db: Database) -> dict[str, int]:
        async with db.session() as session:
            rows = await session.execute(
                select(Job.queue, func.count())
                .where(Job.status == JobStatus.AGENDADO.value)
                .group_by(Job.queue)
            )
            return {queue: int(n) for queue, n in rows.all()}

    waiting = with_db(tmp_path, queued)
    assert sum(waiting.values()) > 0
    assert f"{sum(waiting.values())} of {sum(waiting.values())} queued job(s) sent" in done.stderr
    broker = redis_client.Redis.from_url(redis_url)
    try:
        # Each queued job has its message on its queue: nothing finds it without one later.
        for queue in Settings().queues:
            assert sum(int(broker.llen(key)) for key in priority_keys(queue)) == waiting.get(queue, 0), queue
    finally:
        broker.close()
