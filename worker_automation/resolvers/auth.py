"""API keys and machine keys: creation (shown once), hashing, lookup, scope and perfil checks.

Whatever narrows a key (revocation, fewer scopes, a lower perfil) announces it on the event bus
once committed, so the websockets open with that key are checked again at once.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, bindparam, select, update

from worker_automation.broker.access_changes import AccessChange
from worker_automation.domain.errors import BadInput, Forbidden, NotFound, Unauthenticated
from worker_automation.models import MANAGER_PERFIS, ApiKey, Perfil, utcnow
from worker_automation.models.database import Database
from worker_automation.resolvers.audit import Actor

if TYPE_CHECKING:
    from worker_automation.broker.events import EventBus

SCOPE_READ = "worker_automation:read"
SCOPE_WRITE = "worker_automation:write"
KNOWN_SCOPES: frozenset[str] = frozenset({SCOPE_READ, SCOPE_WRITE})
# last_used_at is a hint for humans: refreshing it on every request would turn reads into writes.
_LAST_USED_GRANULARITY = timedelta(seconds=60)

_KEY_COLUMNS: tuple[Any, ...] = (
    ApiKey.id,
    ApiKey.name,
    ApiKey.scopes,
    ApiKey.perfil,
    ApiKey.revoked_at,
    ApiKey.last_used_at,
)
# Every request runs these: built once, only their parameters change (building a statement and
# its cache key costs more than the lookup's own round trip).
_KEY_BY_HASH: Select[Any] = select(*_KEY_COLUMNS).where(ApiKey.key_hash == bindparam("key_hash"))
_TOUCH_KEY = update(ApiKey).where(ApiKey.id == bindparam("key_id")).values(last_used_at=bindparam("used_at"))

MSG_MISSING = "API Key ausente."
MSG_INVALID = "API Key invalida ou revogada."
MSG_MANAGER = "Operacao exige perfil administrador ou diretoria."


def hash_secret(raw: str) -> str:
    """SHA-256 of a key. Keys are 256-bit random secrets, so a slow hash would add nothing."""
    return hashlib.sha256(raw.encode()).hexdigest()


def new_secret(kind: str) -> str:
    """A fresh random key such as ``wak_<43 url-safe chars>``."""
    return f"{kind}_{secrets.token_urlsafe(32)}"


def parse_scopes(raw: str | Iterable[str]) -> frozenset[str]:
    """Scopes from a comma-separated string or a list; unknown scopes are refused."""
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    scopes = frozenset(s.strip() for s in items if s.strip())
    unknown = sorted(scopes - KNOWN_SCOPES)
    if unknown:
        raise BadInput("scopes", f"Escopo desconhecido: {', '.join(unknown)}")
    if not scopes:
        raise BadInput("scopes", "Informe ao menos um escopo")
    return scopes


def parse_perfil(raw: str) -> Perfil:
    try:
        return Perfil(raw.strip().lower())
    except ValueError:
        allowed = ", ".join(p.value for p in Perfil)
        raise BadInput("perfil", f"Perfil invalido: {raw!r} (use {allowed})") from None


@dataclass(frozen=True)
class Principal:
    """Who is calling, as far as permissions go."""

    key_id: int
    name: str
    scopes: frozenset[str]
    perfil: Perfil

    @property
    def is_manager(self) -> bool:
        return self.perfil in MANAGER_PERFIS

    def require(self, scope: str, *, manager: bool = False) -> None:
        """Raise Forbidden unless the key has ``scope`` (and a manager perfil when asked)."""
        if scope not in self.scopes:
            raise Forbidden(f"API Key sem o escopo {scope}.", scope=scope)
        if manager and not self.is_manager:
            raise Forbidden(MSG_MANAGER, perfil=self.perfil.value)

    @property
    def actor(self) -> Actor:
        """How this caller appears in the audit log."""
        return Actor(f"key:{self.key_id}:{self.name}", self.perfil.value)


@dataclass(frozen=True)
class CreatedKey:
    """A key just created: ``secret`` is not stored anywhere and is shown this once."""

    id: int
    name: str
    secret: str
    scopes: frozenset[str]
    perfil: Perfil


async def create_key(
    db: Database,
    *,
    name: str,
    perfil: str,
    scopes: str | Iterable[str],
    usuario_id: int | None = None,
) -> CreatedKey:
    """Create an API key and return its secret once."""
    parsed_perfil = parse_perfil(perfil)
    parsed_scopes = parse_scopes(scopes)
    if not name.strip():
        raise BadInput("name", "Nome da chave nao pode ser vazio")
    secret = new_secret("wak")
    async with db.session() as session:
        row = ApiKey(
            name=name.strip(),
            prefix=secret[:10],
            key_hash=hash_secret(secret),
            scopes=",".join(sorted(parsed_scopes)),
            perfil=parsed_perfil.value,
            usuario_id=usuario_id,
        )
        session.add(row)
        await session.flush()
        key_id = row.id
    return CreatedKey(key_id, name.strip(), secret, parsed_scopes, parsed_perfil)


async def revoke_key(db: Database, key_id: int, events: EventBus | None = None) -> None:
    """Revoke a key for good; later requests with it get 401, its open websockets are closed."""
    async with db.session() as session:
        result = await session.execute(
            update(ApiKey)
            .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
            .values(revoked_at=utcnow())
            .returning(ApiKey.id)
        )
        if result.scalar_one_or_none() is None:
            exists = await session.scalar(select(ApiKey.id).where(ApiKey.id == key_id))
            if exists is None:
                raise NotFound("API Key nao encontrada.")
    if events is not None:
        await events.announce_access(AccessChange(key_id=key_id))


async def change_key(
    db: Database,
    key_id: int,
    *,
    scopes: str | Iterable[str] | None = None,
    perfil: str | None = None,
    events: EventBus | None = None,
) -> Principal:
    """Give a key other scopes or another perfil (omitted ones stay); the key as it now is.
    Websockets opened with more than it now grants are closed."""
    values: dict[str, str] = {}
    if scopes is not None:
        values["scopes"] = ",".join(sorted(parse_scopes(scopes)))
    if perfil is not None:
        values["perfil"] = parse_perfil(perfil).value
    async with db.session() as session:
        row = await session.get(ApiKey, key_id, with_for_update=True)
        if row is None or row.revoked_at is not None:
            raise NotFound("API Key nao encontrada.")
        for name, value in values.items():
            setattr(row, name, value)
        await session.flush()
        changed = Principal(row.id, row.name, frozenset(row.scopes.split(",")), Perfil(row.perfil))
    if events is not None:
        await events.announce_access(AccessChange(key_id=key_id))
    return changed


async def principals_by_id(db: Database, ids: Iterable[int]) -> dict[int, Principal]:
    """The keys of ``ids`` as they are now; revoked and deleted ones are missing."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    query = select(*_KEY_COLUMNS).where(ApiKey.id.in_(wanted), ApiKey.revoked_at.is_(None))
    async with db.reader() as session:
        rows = (await session.execute(query)).all()
    return {
        key_id: Principal(key_id, name, frozenset(scopes.split(",")), Perfil(perfil))
        for key_id, name, scopes, perfil, _revoked, _used in rows
    }


async def authenticate(db: Database, raw_key: str | None) -> Principal:
    """The principal behind ``raw_key``; Unauthenticated for none, unknown or revoked."""
    if not raw_key:
        raise Unauthenticated(MSG_MISSING)
    key_hash = hash_secret(raw_key)
    # Every request passes here. Requests with the same key arriving together share one lookup,
    # and each still sees the key as it is after the request arrived: a revocation committed
    # before then is never missed (see SharedReads).
    return await db.shared.run(("api-key", key_hash), lambda: _principal_of(db, key_hash))


async def _principal_of(db: Database, key_hash: str) -> Principal:
    # One plain statement, run by the driver itself where it can (see Database.rows).
    rows = await db.rows(_KEY_BY_HASH, {"key_hash": key_hash}, bounded=False)
    if not rows:
        raise Unauthenticated(MSG_INVALID)
    key_id, name, scopes, perfil, revoked_at, last_used_at = rows[0]
    if revoked_at is not None:
        raise Unauthenticated(MSG_INVALID)
    now = utcnow()
    if last_used_at is None or now - last_used_at > _LAST_USED_GRANULARITY:
        async with db.connection() as conn:
            await conn.execute(_TOUCH_KEY, {"key_id": key_id, "used_at": now})
    return Principal(key_id, name, frozenset(scopes.split(",")), Perfil(perfil))


def key_from_headers(headers: Mapping[str, Any]) -> str | None:
    """The key from ``X-API-Key`` or ``Authorization: Bearer`` (header names in any case)."""
    lowered = {str(name).lower(): value for name, value in headers.items()}
    value = lowered.get("x-api-key")
    if value:
        return str(value).strip() or None
    auth = str(lowered.get("authorization") or "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return None


@dataclass(frozen=True)
class KeyView:
    """An API key as listed: never its secret nor its hash, only the prefix it starts with."""

    id: int
    name: str
    prefix: str
    perfil: str
    scopes: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


async def list_keys(db: Database) -> list[KeyView]:
    """Every key, revoked ones included, oldest first."""
    async with db.reader() as session:
        rows = (await session.scalars(select(ApiKey).order_by(ApiKey.id))).all()
    return [
        KeyView(r.id, r.name, r.prefix, r.perfil, r.scopes, r.created_at, r.last_used_at, r.revoked_at)
        for r in rows
    ]
