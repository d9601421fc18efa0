"""Who the caller is, as the console needs it: what to offer and how to show dates."""

from __future__ import annotations

import strawberry

from worker_automation.resolvers.auth import SCOPE_READ, SCOPE_WRITE, Principal


@strawberry.type(description="The caller's key: its owner's perfil, its scopes, and what it may do.")
class Viewer:
    """The authenticated operator key, read by interfaces to hide what the key may not do."""

    name: str = strawberry.field(description="The key's name.")
    perfil: str = strawberry.field(description="Owner's perfil: administrador, diretoria or funcionario.")
    scopes: list[str] = strawberry.field(description="Scopes granted, e.g. worker_automation:read.")
    can_read: bool = strawberry.field(description="May read (worker_automation:read).")
    can_write: bool = strawberry.field(
        description="May dispatch, cancel, retry, move and reorder (worker_automation:write)."
    )
    can_manage: bool = strawberry.field(
        description="May run maintenance, machines and settings (write + administrador or diretoria)."
    )
    timezone: str = strawberry.field(description="The service's time zone (WA_TIMEZONE) for dates.")

    @classmethod
    def from_principal(cls, principal: Principal, timezone: str) -> Viewer:
        can_write = SCOPE_WRITE in principal.scopes
        return cls(
            name=principal.name,
            perfil=principal.perfil.value,
            scopes=sorted(principal.scopes),
            can_read=SCOPE_READ in principal.scopes,
            can_write=can_write,
            can_manage=can_write and principal.is_manager,
            timezone=timezone,
        )
