"""Idempotency keys of dispatches: a request sent again with its key gets the job it made.

A caller that cannot tell whether a dispatch was recorded (a timeout, a dropped connection, a 503
whose job was kept AGENDADO) sends the same request again with the same key. The key is looked up
in the transaction that would create the job: found, the job it made is the answer and nothing is
created, sent or announced; not found, the job is created and the key stored beside it, in the
same transaction. Two requests with a new key at the same moment both try to store it; the
primary key lets one commit and the other finds it when it runs again.

The key is bound to what the request asked for (automation, client, user, priority, the context
as validated): the same key with another request is a caller's mistake, refused with a Conflict
naming the field, never answered with a job that is not what it asks for. A key lives as long as
its job (see ``models.dispatch_key``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, Final

from sqlalchemy import bindparam, insert, select
from sqlalchemy.exc import IntegrityError

from worker_automation.domain.errors import BadInput, Conflict
from worker_automation.domain.limits import check_text
from worker_automation.models import DispatchKey, utcnow
from worker_automation.models.database import Executor
from worker_automation.models.dispatch_key import MAX_KEY_CHARS

FIELD: Final = "idempotency_key"

_KNOWN = select(DispatchKey.key, DispatchKey.worker_id, DispatchKey.fingerprint).where(
    DispatchKey.key.in_(bindparam("keys", expanding=True))
)
_REMEMBER = insert(DispatchKey)


def check_key(value: Any, field: str = FIELD) -> str | None:
    """The key as sent (None when none was), or BadInput naming ``field``: text of 1 to
    :data:`MAX_KEY_CHARS` characters, none of them a control character."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadInput(field, f"{field} deve ser texto")
    if not 1 <= len(value) <= MAX_KEY_CHARS:
        raise BadInput(field, f"{field} deve ter de 1 a {MAX_KEY_CHARS} caracteres")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise BadInput(field, f"{field} nao pode ter caracteres de controle")
    return check_text(value, field)


def check_distinct(keys: Sequence[str | None], field_of: Any) -> None:
    """Every key of a batch appears once (``field_of(i)``: the field of the i-th job's key)."""
    seen: set[str] = set()
    for index, key in enumerate(keys):
        if key is None:
            continue
        if key in seen:
            raise BadInput(field_of(index), f"{field_of(index)} repetida no lote")
        seen.add(key)


def fingerprint(automation: str, cliente_id: Any, usuario_id: Any, priority: Any, context: Any) -> str:
    """What a keyed request asked for, as a digest (the context as validated, keys sorted)."""
    text = json.dumps(
        [automation, cliente_id, usuario_id, priority, context],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def known(conn: Executor, keys: Iterable[str]) -> dict[str, tuple[int, str]]:
    """The stored keys among ``keys``: each one's job id and fingerprint."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = await conn.execute(_KNOWN, {"keys": wanted})
    return {str(k): (int(worker_id), str(digest)) for k, worker_id, digest in rows}


def reused(field: str, worker_id: int) -> Conflict:
    """The error for a key already used by a different request."""
    return Conflict(
        f"{field} ja usada por outro pedido (job {worker_id}); envie uma chave nova",
        status="idempotency_key_reused",
        field=field,
        worker_id=worker_id,
    )


async def remember(conn: Executor, entries: Sequence[tuple[str, int, str]]) -> None:
    """Store ``(key, job id, fingerprint)`` for the jobs just created (same transaction)."""
    if entries:
        now = utcnow()
        await conn.execute(
            _REMEMBER,
            [{"key": k, "worker_id": w, "fingerprint": f, "created_at": now} for k, w, f in entries],
        )


def is_key_race(exc: IntegrityError) -> bool:
    """Whether ``exc`` is another request storing the same new key first."""
    return "dispatch_keys" in str(exc.orig)
