"""Operator API keys on SQLite: shown once, stored hashed, authenticated, revoked, scoped by perfil."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import event, select
from starlette.datastructures import Headers

from tests.support.settings import MakeSettings
from worker_automation.domain.errors import BadInput, Forbidden, NotFound, Unauthenticated
from worker_automation.models import ApiKey, Perfil
from worker_automation.models.database import Database
from worker_automation.models.migrate import migrate
from worker_automation.resolvers.auth import (
    MSG_INVALID,
    MSG_MANAGER,
    MSG_MISSING,
    SCOPE_READ,
    SCOPE_WRITE,
    Principal,
    authenticate,
    create_key,
    key_from_headers,
    parse_perfil,
    parse_scopes,
    revoke_key,
)

BOTH = f"{SCOPE_READ},{SCOPE_WRITE}"


@pytest.fixture
async def db(sqlite_database_url: str, make_settings: MakeSettings) -> AsyncIterator[Database]:
    await migrate(sqlite_database_url)
    database = Database(make_settings(sqlite_database_url, None))
    try:
        yield database
    finally:
        await database.close()


def files_holding(directory: Path, secret: str) -> list[str]:
    """Names of the SQLite files (database, journal, write-ahead log) whose bytes contain ``secret``."""
    files = list(directory.glob("wa.db*"))
    assert files, f"no database file in {directory}"
    return [p.name for p in files if secret.encode() in p.read_bytes()]


async def stored(db: Database, key_id: int) -> ApiKey:
    async with db.session() as session:
        row = await session.scalar(select(ApiKey).where(ApiKey.id == key_id))
    assert row is not None
    return row


async def test_create_key_returns_the_secret_once(db: Database) -> None:
    created = await create_key(db, name="painel", perfil="funcionario", scopes=SCOPE_READ)

    assert created.secret.startswith("wak_")
    assert len(created.secret) > 40
    assert created.name == "painel"
    assert created.perfil is Perfil.FUNCIONARIO
    assert created.scopes == frozenset({SCOPE_READ})
    other = await create_key(db, name="painel", perfil="funcionario", scopes=SCOPE_READ)
    assert other.secret != created.secret
    assert other.id != created.id


async def test_only_the_sha256_is_stored(db: Database, tmp_path: Path) -> None:
    created = await create_key(db, name="ops", perfil="administrador", scopes=BOTH)

    row = await stored(db, created.id)
    assert row.key_hash == hashlib.sha256(created.secret.encode()).hexdigest()
    for column in ApiKey.__table__.columns:
        value = getattr(row, column.key)
        assert created.secret not in str(value), column.key
    assert row.scopes.split(",") == sorted([SCOPE_READ, SCOPE_WRITE])
    assert row.perfil == "administrador"
    assert row.last_used_at is None and row.revoked_at is None

    # Nor anywhere in the database files themselves (main file and write-ahead log).
    await db.close()
    assert files_holding(tmp_path, created.secret) == []


async def test_authenticate_with_x_api_key_header(db: Database) -> None:
    created = await create_key(db, name="leitura", perfil="funcionario", scopes=SCOPE_READ)

    for headers in ({"X-API-Key": created.secret}, {"x-api-key": f"  {created.secret} "}):
        raw = key_from_headers(headers)
        assert raw == created.secret
        principal = await authenticate(db, raw)
        assert principal.key_id == created.id
        assert principal.name == "leitura"
        assert principal.scopes == frozenset({SCOPE_READ})
        assert principal.perfil is Perfil.FUNCIONARIO


async def test_authenticate_with_bearer_header(db: Database) -> None:
    created = await create_key(db, name="legado", perfil="diretoria", scopes=BOTH)

    for headers in (
        {"Authorization": f"Bearer {created.secret}"},
        {"authorization": f"bearer {created.secret}"},
        Headers({"AUTHORIZATION": f"Bearer {created.secret}"}),
    ):
        raw = key_from_headers(headers)
        assert raw == created.secret
        principal = await authenticate(db, raw)
        assert principal.key_id == created.id
        assert principal.perfil is Perfil.DIRETORIA


def test_key_from_headers_without_a_key() -> None:
    assert key_from_headers({}) is None
    assert key_from_headers({"Authorization": "Basic dXNlcjpwYXNz"}) is None
    assert key_from_headers({"Authorization": "Bearer   "}) is None
    assert key_from_headers({"X-Api-Key": "wak_plain"}) == "wak_plain"
    assert key_from_headers({"AUTHORIZATION": "bearer wak_upper"}) == "wak_upper"
    # Starlette's headers are case-insensitive: any spelling of the name works.
    assert key_from_headers(Headers({"X-Api-Key": "wak_abc"})) == "wak_abc"


async def test_missing_key_is_unauthenticated(db: Database) -> None:
    for raw in (None, ""):
        with pytest.raises(Unauthenticated) as caught:
            await authenticate(db, raw)
        assert caught.value.message == MSG_MISSING


async def test_unknown_key_is_unauthenticated(db: Database) -> None:
    created = await create_key(db, name="x", perfil="funcionario", scopes=SCOPE_READ)

    for raw in ("wak_not-a-real-key", created.secret + "x", created.secret[:-1]):
        with pytest.raises(Unauthenticated) as caught:
            await authenticate(db, raw)
        assert caught.value.message == MSG_INVALID


async def test_revoked_key_is_unauthenticated(db: Database) -> None:
    created = await create_key(db, name="saindo", perfil="administrador", scopes=BOTH)
    await authenticate(db, created.secret)

    await revoke_key(db, created.id)

    with pytest.raises(Unauthenticated) as caught:
        await authenticate(db, created.secret)
    assert caught.value.message == MSG_INVALID
    assert (await stored(db, created.id)).revoked_at is not None
    # Revoking again is harmless; an unknown id is NotFound.
    await revoke_key(db, created.id)
    with pytest.raises(NotFound):
        await revoke_key(db, 424242)


async def test_requests_arriving_together_share_one_lookup_made_after_they_arrived(db: Database) -> None:
    created = await create_key(db, name="painel", perfil="funcionario", scopes=SCOPE_READ)
    await authenticate(db, created.secret)  # last_used_at is recent: no touch below
    lookups: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "FROM api_keys" in statement:
            lookups.append(statement)

    event.listen(db.engine.sync_engine, "before_cursor_execute", count)
    try:
        principals = await asyncio.gather(*(authenticate(db, created.secret) for _ in range(20)))
        assert {p.key_id for p in principals} == {created.id}
        assert 1 <= len(lookups) <= 2, lookups  # the one running, and the next for latecomers

        # Requests still in flight when the key is revoked may pass; any request made after the
        # revocation is refused, whether or not a lookup was already running when it arrived.
        in_flight = [asyncio.ensure_future(authenticate(db, created.secret)) for _ in range(5)]
        await asyncio.sleep(0)
        await revoke_key(db, created.id)
        with pytest.raises(Unauthenticated):
            await authenticate(db, created.secret)
        await asyncio.gather(*in_flight, return_exceptions=True)
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", count)


async def test_revoking_one_key_leaves_the_others(db: Database) -> None:
    first = await create_key(db, name="a", perfil="funcionario", scopes=SCOPE_READ)
    second = await create_key(db, name="b", perfil="funcionario", scopes=SCOPE_READ)

    await revoke_key(db, first.id)

    assert (await authenticate(db, second.secret)).key_id == second.id


async def test_last_used_at_is_set(db: Database) -> None:
    created = await create_key(db, name="uso", perfil="funcionario", scopes=SCOPE_READ)
    assert (await stored(db, created.id)).last_used_at is None

    await authenticate(db, created.secret)

    used = (await stored(db, created.id)).last_used_at
    assert used is not None
    assert used.tzinfo is not None
    assert used >= (await stored(db, created.id)).created_at


async def test_missing_scope_is_forbidden_naming_the_scope(db: Database) -> None:
    created = await create_key(db, name="leitor", perfil="administrador", scopes=SCOPE_READ)
    principal = await authenticate(db, created.secret)

    principal.require(SCOPE_READ)
    with pytest.raises(Forbidden) as caught:
        principal.require(SCOPE_WRITE)
    assert SCOPE_WRITE in caught.value.message
    assert caught.value.details["scope"] == SCOPE_WRITE


@pytest.mark.parametrize(
    ("perfil", "allowed"),
    [("funcionario", False), ("administrador", True), ("diretoria", True)],
)
async def test_manager_operations_need_administrador_or_diretoria(
    db: Database, perfil: str, allowed: bool
) -> None:
    created = await create_key(db, name=perfil, perfil=perfil, scopes=BOTH)
    principal = await authenticate(db, created.secret)

    principal.require(SCOPE_WRITE)
    assert principal.is_manager is allowed
    if allowed:
        principal.require(SCOPE_WRITE, manager=True)
    else:
        with pytest.raises(Forbidden) as caught:
            principal.require(SCOPE_WRITE, manager=True)
        assert caught.value.message == MSG_MANAGER


def test_scope_is_checked_before_perfil() -> None:
    principal = Principal(1, "x", frozenset({SCOPE_READ}), Perfil.FUNCIONARIO)

    with pytest.raises(Forbidden) as caught:
        principal.require(SCOPE_WRITE, manager=True)
    assert SCOPE_WRITE in caught.value.message


@pytest.mark.parametrize(
    ("perfil", "scopes", "field"),
    [
        ("gerente", SCOPE_READ, "perfil"),
        ("", SCOPE_READ, "perfil"),
        ("administrador", "worker_automation:admin", "scopes"),
        ("administrador", f"{SCOPE_READ},outra:coisa", "scopes"),
        ("administrador", " , ", "scopes"),
    ],
)
async def test_unknown_scope_or_perfil_is_bad_input(
    db: Database, perfil: str, scopes: str, field: str
) -> None:
    with pytest.raises(BadInput) as caught:
        await create_key(db, name="ruim", perfil=perfil, scopes=scopes)

    assert caught.value.field == field
    async with db.session() as session:
        assert (await session.scalars(select(ApiKey))).all() == []


async def test_blank_name_is_bad_input(db: Database) -> None:
    with pytest.raises(BadInput) as caught:
        await create_key(db, name="   ", perfil="funcionario", scopes=SCOPE_READ)
    assert caught.value.field == "name"


def test_parsers_are_forgiving_about_case_and_spaces() -> None:
    assert parse_perfil(" Diretoria ") is Perfil.DIRETORIA
    assert parse_scopes(f" {SCOPE_WRITE} , {SCOPE_READ} ") == frozenset({SCOPE_READ, SCOPE_WRITE})
    assert parse_scopes([SCOPE_READ]) == frozenset({SCOPE_READ})
