"""Migrations on real PostgreSQL and on SQLite: schema, idempotence, round trip and drift."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from worker_automation.models import Base
from worker_automation.models.database import make_engine
from worker_automation.models.job import POSTGRESQL_ONLY_INDEXES
from worker_automation.models.migrate import alembic_config, current_revision, migrate, shipped_head

APP_TABLES = {name for name in Base.metadata.tables}
ALEMBIC_TABLE = "alembic_version"


def _model_indexes() -> dict[str, dict[str, tuple[str, ...]]]:
    """Every index the models declare, by table: name -> columns."""
    found: dict[str, dict[str, tuple[str, ...]]] = {}
    for table in Base.metadata.tables.values():
        found[table.name] = {str(index.name): tuple(c.name for c in index.columns) for index in table.indexes}
    return found


def _model_unique_columns() -> dict[str, set[tuple[str, ...]]]:
    """The column sets of every unique constraint the models declare, by table."""
    found: dict[str, set[tuple[str, ...]]] = {}
    for table in Base.metadata.tables.values():
        found[table.name] = {
            tuple(c.name for c in constraint.columns)
            for constraint in table.constraints
            if isinstance(constraint, sa.UniqueConstraint)
        }
    return found


async def _on_connection(url: str, fn: Any) -> Any:
    """``fn`` run on a synchronous view of a connection of its own to ``url``."""
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(fn)
    finally:
        await engine.dispose()


async def _inspect(url: str, fn: Any) -> Any:
    return await _on_connection(url, lambda sync: fn(sa.inspect(sync)))


async def _table_names(url: str) -> set[str]:
    return set(await _inspect(url, lambda insp: insp.get_table_names()))


async def _downgrade(url: str, revision: str) -> None:
    def run(connection: Connection) -> None:
        command.downgrade(alembic_config(connection), revision)

    engine = make_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(run)
    finally:
        await engine.dispose()


def _revisions() -> list[str]:
    """Every revision, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def _head() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def declared(item: Any, name: str | None, kind: str, reflected: bool, compare_to: Any) -> bool:
    """Whether the drift check compares ``item``: all but the indexes PostgreSQL alone has."""
    return not (kind == "index" and reflected and compare_to is None and name in POSTGRESQL_ONLY_INDEXES)


async def _drift(url: str, metadata: sa.MetaData) -> list[Any]:
    def compare(connection: Connection) -> list[Any]:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "compare_server_default": True,
                "target_metadata": metadata,
                "include_object": declared,
            },
        )
        return list(compare_metadata(context, metadata))

    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(compare)
    finally:
        await engine.dispose()


async def test_never_migrated_database_has_no_revision(database_url: str) -> None:
    assert await current_revision(database_url) is None
    assert await _table_names(database_url) == set()


async def test_migrate_creates_every_table(database_url: str) -> None:
    await migrate(database_url)

    tables = await _table_names(database_url)
    assert tables == APP_TABLES | {ALEMBIC_TABLE}
    assert {
        "workers",
        "clientes",
        "usuarios",
        "api_keys",
        "machines",
        "automation_settings",
        "audit_log",
    } <= tables


async def test_migrate_creates_every_column(database_url: str) -> None:
    await migrate(database_url)

    def columns(insp: Any) -> dict[str, set[str]]:
        return {name: {c["name"] for c in insp.get_columns(name)} for name in APP_TABLES}

    found = await _inspect(database_url, columns)
    for table in Base.metadata.tables.values():
        assert found[table.name] == {c.name for c in table.columns}, table.name
    # The job row carries the documented fields plus the service's own.
    assert {
        "id",
        "task_id",
        "cliente_id",
        "usuario_id",
        "path_file",
        "status",
        "data_inicio",
        "data_fim",
        "mensagem_erro",
        "automation_type",
        "queue",
        "priority",
        "retry_count",
        "progress",
        "metadata_json",
        "context",
        "result",
        "created_at",
        "updated_at",
        "machine_id",
        "next_attempt_at",
    } == found["workers"]


async def test_migrate_creates_every_index(database_url: str) -> None:
    await migrate(database_url)

    def indexes(insp: Any) -> dict[str, dict[str, tuple[str, ...]]]:
        return {
            name: {str(i["name"]): tuple(i["column_names"]) for i in insp.get_indexes(name)}
            for name in APP_TABLES
        }

    found = await _inspect(database_url, indexes)
    expected = _model_indexes()
    for table, wanted in expected.items():
        for name, cols in wanted.items():
            assert found[table].get(name) == cols, f"{table}.{name}"
    # The list/queue/stats indexes the reads rely on.
    assert found["workers"]["ix_workers_status_priority_created"] == (
        "status",
        "priority",
        "created_at",
        "id",
    )
    assert found["workers"]["ix_workers_status_queue_id"] == ("status", "queue", "id")
    assert found["audit_log"]["ix_audit_log_at"] == ("at",)
    # PostgreSQL has the list's order and free-text indexes besides (the test cluster has pg_trgm).
    postgres_only = POSTGRESQL_ONLY_INDEXES & set(found["workers"])
    assert postgres_only == (POSTGRESQL_ONLY_INDEXES if database_url.startswith("postgresql") else set())


async def test_no_two_indexes_of_a_table_share_a_key(pg_database_url: str) -> None:
    """Every index costs each row version an entry: one whose key (columns, expressions and
    predicate) another index has too, included columns aside, only costs writes."""
    await migrate(pg_database_url)
    keys = sa.text(
        "SELECT c.relname, array_agg(i.indexrelid::regclass::text ORDER BY i.indexrelid::regclass::text) "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public' "
        "GROUP BY c.relname, (i.indkey::int2[])[0:i.indnkeyatts - 1], i.indclass::text, "
        "pg_get_expr(i.indexprs, i.indrelid), pg_get_expr(i.indpred, i.indrelid) HAVING count(*) > 1"
    )

    def shared(sync: Connection) -> list[tuple[str, list[str]]]:
        return [(table, names) for table, names in sync.execute(keys)]

    assert await _on_connection(pg_database_url, shared) == []


async def test_migrate_creates_unique_constraints_and_primary_keys(database_url: str) -> None:
    await migrate(database_url)

    def uniques(insp: Any) -> dict[str, set[tuple[str, ...]]]:
        result: dict[str, set[tuple[str, ...]]] = {}
        for name in APP_TABLES:
            cols = {tuple(u["column_names"]) for u in insp.get_unique_constraints(name)}
            # Some backends report a unique constraint as a unique index as well (or only).
            cols |= {tuple(i["column_names"]) for i in insp.get_indexes(name) if i.get("unique")}
            result[name] = cols
        return result

    def primary_keys(insp: Any) -> dict[str, list[str]]:
        return {name: list(insp.get_pk_constraint(name)["constrained_columns"]) for name in APP_TABLES}

    found = await _inspect(database_url, uniques)
    for table, wanted in _model_unique_columns().items():
        assert wanted <= found[table], table
    assert ("task_id",) in found["workers"]
    assert ("key_hash",) in found["api_keys"]
    assert ("name",) in found["machines"]

    pks = await _inspect(database_url, primary_keys)
    assert pks["automation_settings"] == ["key"]
    assert pks["workers"] == ["id"]


async def test_migrate_twice_is_idempotent(database_url: str) -> None:
    await migrate(database_url)
    before = await _table_names(database_url)

    await migrate(database_url)

    assert await _table_names(database_url) == before
    assert await current_revision(database_url) == _head()


async def test_current_revision_is_head(database_url: str) -> None:
    await migrate(database_url)

    assert await current_revision(database_url) == _head()
    # One linear history, starting at the initial schema.
    assert _revisions()[0] == "0001"
    assert len(ScriptDirectory.from_config(alembic_config()).get_heads()) == 1


async def test_downgrade_to_base_and_upgrade_again(database_url: str) -> None:
    await migrate(database_url)
    engine = make_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                sa.insert(Base.metadata.tables["clientes"]).values(
                    razao_social="Antes da volta", cnpj=None, created_at=sa.func.current_timestamp()
                )
            )
    finally:
        await engine.dispose()

    await _downgrade(database_url, "base")

    assert await current_revision(database_url) is None
    assert await _table_names(database_url) <= {ALEMBIC_TABLE}

    await migrate(database_url)

    assert await current_revision(database_url) == _head()
    assert await _table_names(database_url) == APP_TABLES | {ALEMBIC_TABLE}
    assert await _drift(database_url, Base.metadata) == []
    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:
            count = await conn.scalar(
                sa.select(sa.func.count()).select_from(Base.metadata.tables["clientes"])
            )
    finally:
        await engine.dispose()
    assert count == 0


async def test_every_revision_upgrades_and_downgrades_one_step_at_a_time(database_url: str) -> None:
    revisions = _revisions()

    for revision in revisions:
        await migrate(database_url, revision)
        assert await current_revision(database_url) == revision
    for previous in [*reversed(revisions[:-1]), None]:
        await _downgrade(database_url, previous or "base")
        assert await current_revision(database_url) == previous
    assert await _table_names(database_url) <= {ALEMBIC_TABLE}

    await migrate(database_url)
    assert await _drift(database_url, Base.metadata) == []


async def test_models_and_migrations_agree(database_url: str) -> None:
    """No drift: autogenerate against the migrated database finds nothing to do."""
    await migrate(database_url)

    assert await _drift(database_url, Base.metadata) == []


async def test_drift_check_sees_a_missing_column(database_url: str) -> None:
    """The drift check is not vacuous: a column the migrations lack is reported."""
    await migrate(database_url)
    changed = sa.MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["workers"].append_column(sa.Column("not_migrated", sa.Integer(), nullable=True))

    diffs = await _drift(database_url, changed)

    assert [(d[0], d[2], d[3].name) for d in diffs] == [("add_column", "workers", "not_migrated")]


def test_the_shipped_head_read_from_the_files_is_alembics() -> None:
    assert shipped_head() == ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_a_database_at_head_is_only_read_and_one_behind_is_upgraded(database_url: str) -> None:
    await migrate(database_url)
    # A process starting against an up-to-date database loads no Alembic at all.
    code = (
        "import asyncio, sys\n"
        "from worker_automation.models.migrate import migrate\n"
        f"asyncio.run(migrate({database_url!r}))\n"
        "print(sorted(m for m in sys.modules if m == 'alembic' or m.startswith('alembic.')))\n"
    )
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(child.communicate(), 120)
    assert child.returncode == 0
    assert out.decode().strip() == "[]"
    head = shipped_head()
    engine = make_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda sync: command.downgrade(alembic_config(sync), "-1"))
    finally:
        await engine.dispose()
    assert await current_revision(database_url) != head
    await migrate(database_url)
    assert await current_revision(database_url) == head
